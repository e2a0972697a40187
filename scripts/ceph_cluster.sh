#!/usr/bin/env bash
# A single-machine Ceph cluster for iobench's tests: one monitor, one manager, two OSDs on
# file-backed bluestore, a metadata server, CephFS mounted twice with ceph-fuse (two clients),
# and the RADOS Gateway (S3) on 127.0.0.1. Everything listens on 127.0.0.1 only and all of
# its state lives under one directory (IOBENCH_CEPH_DIR, default /var/tmp/iobench-ceph).
#
#   scripts/ceph_cluster.sh start    install what is missing (root, apt), start, print the env
#   scripts/ceph_cluster.sh env      print KEY=VALUE lines: mounts, S3 endpoint and keys
#   scripts/ceph_cluster.sh status   exit 0 when running (mon answers, both mounts live)
#   scripts/ceph_cluster.sh stop     unmount, stop radosgw, mds, osds, mgr, mon; remove state
#
# start is idempotent (a running cluster is left as it is); stop can always be run again.
# A second cluster on the same host (another checkout's) needs its own IOBENCH_CEPH_DIR,
# IOBENCH_CEPH_MON_V2_PORT / IOBENCH_CEPH_MON_V1_PORT (default 3300 / 6789) and
# IOBENCH_CEPH_RGW_PORT (default 7480).
# Exit status: 0 done, 1 failed, 3 the environment cannot run Ceph (not root, no packages).
set -euo pipefail

STATE="${IOBENCH_CEPH_DIR:-/var/tmp/iobench-ceph}"
CONF="$STATE/ceph.conf"
RGW_PORT="${IOBENCH_CEPH_RGW_PORT:-7480}"
# the monitor's ports: another cluster on this host (another checkout's) needs other ones
MON_V2_PORT="${IOBENCH_CEPH_MON_V2_PORT:-3300}"
MON_V1_PORT="${IOBENCH_CEPH_MON_V1_PORT:-6789}"
MON_ADDRS="[v2:127.0.0.1:$MON_V2_PORT,v1:127.0.0.1:$MON_V1_PORT]"
OSDS="${IOBENCH_CEPH_OSDS:-2}"
OSD_SIZE="${IOBENCH_CEPH_OSD_SIZE:-4294967296}"  # bytes, a sparse file per OSD
CLIENTS=(iobench-a iobench-b)
PACKAGES=(ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse radosgw ceph-common attr fuse)
TOOLS=(ceph-mon ceph-mgr ceph-osd ceph-mds ceph-fuse radosgw ceph ceph-authtool monmaptool
    radosgw-admin)
S3_ACCESS_KEY="iobench-access"  # loopback-only throwaway keys, made for this cluster
WAIT_S="${IOBENCH_CEPH_WAIT_S:-180}"

log() { echo "ceph_cluster: $*" >&2; }
die() { log "$*"; exit 1; }
unavailable() { log "$*"; exit 3; }

cephc() { timeout 60 ceph -c "$CONF" --connect-timeout 30 "$@"; }

# A pid's state letter from /proc (Z: a zombie, i.e. gone); empty when there is no such pid.
pid_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true; }
alive() { local s; s=$(pid_state "$1"); [[ -n "$s" && "$s" != Z && "$s" != X ]]; }

# Every live process started with our ceph.conf on its command line (ours, and only ours).
our_pids() {
    local p cmd
    for p in /proc/[0-9]*; do
        cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
        [[ "$cmd" == *" $CONF"* ]] && alive "${p#/proc/}" && echo "${p#/proc/}"
    done
    return 0
}

# wait_until SECONDS WHAT CMD...: poll CMD every 0.2 s.
wait_until() {
    local limit=$1 what=$2 t0=$SECONDS
    shift 2
    until "$@" >/dev/null 2>&1; do
        ((SECONDS - t0 < limit)) || { log "timed out after ${limit}s waiting for $what"; return 1; }
        sleep 0.2
    done
}

# Stop one process: SIGTERM, wait, then SIGKILL.
stop_pid() {
    local pid=$1 limit=${2:-20} t0=$SECONDS
    alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    while alive "$pid"; do
        if ((SECONDS - t0 >= limit)); then
            log "pid $pid did not stop in ${limit}s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            wait_until 10 "pid $pid to die" bash -c "! { s=\$(awk '{print \$3}' /proc/$pid/stat 2>/dev/null); [[ -n \$s && \$s != Z ]]; }" || true
            return 0
        fi
        sleep 0.1
    done
}

stop_pidfile() {
    local f=$1 limit=${2:-20}
    [[ -f "$f" ]] || return 0
    local pid
    pid=$(cat "$f" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] && stop_pid "$pid" "$limit"
    rm -f "$f"
}

our_mounts() { awk -v d="$STATE/mnt/" 'index($2, d) == 1 {print $2}' /proc/mounts; }
is_mounted() { awk -v m="$1" '$2 == m {f=1} END {exit !f}' /proc/mounts; }

mount_point() { echo "$STATE/mnt/$1"; }

# -- install ---------------------------------------------------------------------------------

missing_tools() {
    local t out=()
    for t in "${TOOLS[@]}"; do command -v "$t" >/dev/null || out+=("$t"); done
    command -v getfattr >/dev/null || out+=(getfattr)
    command -v fusermount >/dev/null || command -v fusermount3 >/dev/null || out+=(fusermount)
    echo "${out[*]}"
}

install_packages() {
    local missing
    missing=$(missing_tools)
    [[ -z "$missing" ]] && return 0
    [[ $EUID -eq 0 ]] || unavailable "Ceph needs root to install and run (missing: $missing)"
    command -v apt-get >/dev/null || unavailable "missing $missing and no apt-get to install them"
    log "installing ${PACKAGES[*]} (missing: $missing)"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y --no-install-recommends "${PACKAGES[@]}" >"${TMPDIR:-/tmp}/iobench-ceph-apt.log" 2>&1; then
        apt-get update >/dev/null 2>&1 || true
        apt-get install -y --no-install-recommends "${PACKAGES[@]}" >"${TMPDIR:-/tmp}/iobench-ceph-apt.log" 2>&1 ||
            unavailable "apt-get install ${PACKAGES[*]} failed (see ${TMPDIR:-/tmp}/iobench-ceph-apt.log)"
    fi
    missing=$(missing_tools)
    [[ -z "$missing" ]] || unavailable "still missing after install: $missing"
}

check_environment() {
    [[ $EUID -eq 0 ]] || unavailable "Ceph needs root (daemons, FUSE mounts)"
    [[ -c /dev/fuse ]] || unavailable "no /dev/fuse: ceph-fuse cannot mount CephFS here"
}

# -- start -----------------------------------------------------------------------------------

write_conf() {
    local fsid=$1
    cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon_host = $MON_ADDRS
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
public_network = 127.0.0.0/8
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
keyring = $STATE/keyring/\$name.keyring
run_dir = $STATE/run
admin_socket = $STATE/run/\$name.asok
pid_file = $STATE/run/\$name.pid
log_file = $STATE/log/\$name.log
crash_dir = $STATE/crash
osd_pool_default_size = 1
osd_pool_default_min_size = 1
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
osd_crush_chooseleaf_type = 0
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_data_avail_warn = 2
mon_data_avail_crit = 1
paxos_propose_interval = 0.1
mon_max_pg_per_osd = 500
mgr_initial_modules = iostat

[mon]
mon_data = $STATE/mon/\$id
keyring = $STATE/mon/\$id/keyring
mon_cluster_log_file = $STATE/log/cluster.log

[mgr]
mgr_data = $STATE/mgr/\$id

[osd]
osd_data = $STATE/osd/\$id
osd_objectstore = bluestore
bluestore_block_path = $STATE/block/osd.\$id
bluestore_block_create = true
bluestore_block_size = $OSD_SIZE
bluestore_fsck_on_mkfs = false
osd_memory_target = 1073741824

[mds]
mds_data = $STATE/mds/\$id

[client]
admin_socket = $STATE/run/\$name.\$pid.asok
pid_file =
log_file = $STATE/log/\$name.log

[client.rgw.a]
rgw_frontends = beast endpoint=127.0.0.1:$RGW_PORT
rgw_data = $STATE/rgw
rgw_enable_usage_log = false
pid_file = $STATE/run/rgw.pid
EOF
}

start_mon() {
    local fsid=$1
    ceph-authtool --create-keyring "$STATE/keyring/mon-init.keyring" --gen-key -n mon. \
        --cap mon 'allow *' >/dev/null
    ceph-authtool --create-keyring "$STATE/keyring/client.admin.keyring" --gen-key \
        -n client.admin --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' \
        --cap mgr 'allow *' >/dev/null
    ceph-authtool "$STATE/keyring/mon-init.keyring" \
        --import-keyring "$STATE/keyring/client.admin.keyring" >/dev/null
    monmaptool --create --fsid "$fsid" --addv a "$MON_ADDRS" \
        "$STATE/monmap" >/dev/null
    mkdir -p "$STATE/mon/a"
    ceph-mon -c "$CONF" --mkfs -i a --monmap "$STATE/monmap" \
        --keyring "$STATE/keyring/mon-init.keyring" >/dev/null
    ceph-mon -c "$CONF" -i a >>"$STATE/log/daemons.out" 2>&1
    wait_until 60 "the monitor" cephc -s
}

start_mgr() {
    mkdir -p "$STATE/mgr/x"
    cephc auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
        -o "$STATE/keyring/mgr.x.keyring"
    ceph-mgr -c "$CONF" -i x >>"$STATE/log/daemons.out" 2>&1
}

start_osd() {
    local uuid key id
    uuid=$(cat /proc/sys/kernel/random/uuid)
    key=$(ceph-authtool --gen-print-key)
    id=$(echo "{\"cephx_secret\": \"$key\"}" | cephc osd new "$uuid" -i -)
    [[ "$id" =~ ^[0-9]+$ ]] || die "ceph osd new gave no id: $id"
    mkdir -p "$STATE/osd/$id"
    ceph-authtool --create-keyring "$STATE/keyring/osd.$id.keyring" --name "osd.$id" \
        --add-key "$key" >/dev/null
    ceph-osd -c "$CONF" -i "$id" --mkfs --osd-uuid "$uuid" >"$STATE/log/osd.$id.mkfs.log" 2>&1 ||
        die "ceph-osd --mkfs for osd.$id failed (see $STATE/log/osd.$id.mkfs.log)"
    ceph-osd -c "$CONF" -i "$id" >>"$STATE/log/daemons.out" 2>&1
}

start_mds() {
    mkdir -p "$STATE/mds/a"
    cephc auth get-or-create mds.a mon 'allow profile mds' osd 'allow rw tag cephfs *=*' \
        mds 'allow' mgr 'allow profile mds' -o "$STATE/keyring/mds.a.keyring"
    ceph-mds -c "$CONF" -i a >>"$STATE/log/daemons.out" 2>&1
}

osds_up() { [[ "$(cephc osd stat -f json | grep -o '"num_up_osds":[0-9]*' | cut -d: -f2)" == "$OSDS" ]]; }
fs_active() { cephc mds stat 2>/dev/null | grep -q 'up:active'; }

mount_client() {
    local name=$1 mnt
    mnt=$(mount_point "$name")
    mkdir -p "$mnt"
    # rwp: p lets the client set layouts (ceph.dir.layout.* xattrs); plain rw gets EPERM
    cephc fs authorize cephfs "client.$name" / rwp >"$STATE/keyring/client.$name.keyring"
    ceph-fuse -c "$CONF" -n "client.$name" "$mnt" >"$STATE/log/fuse.$name.out" 2>&1 ||
        die "ceph-fuse for client.$name failed (see $STATE/log/fuse.$name.out)"
    wait_until 30 "the $name mount" is_mounted "$mnt"
}

rgw_answers() {
    exec 3<>"/dev/tcp/127.0.0.1/$RGW_PORT" || return 1
    printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    local line
    read -r -t 5 line <&3 || { exec 3>&-; return 1; }
    exec 3>&-
    [[ "$line" == HTTP/* ]]
}

start_rgw() {
    mkdir -p "$STATE/rgw"
    cephc auth get-or-create client.rgw.a mon 'allow rw' osd 'allow rwx' mgr 'allow rw' \
        -o "$STATE/keyring/client.rgw.a.keyring"
    radosgw -c "$CONF" -n client.rgw.a >>"$STATE/log/daemons.out" 2>&1
    wait_until "$WAIT_S" "the RADOS Gateway on 127.0.0.1:$RGW_PORT" rgw_answers
    timeout 60 radosgw-admin -c "$CONF" user create --uid=iobench --display-name=iobench \
        --access-key="$S3_ACCESS_KEY" --secret-key="$(cat "$STATE/s3-secret")" >/dev/null
}

start() {
    check_environment
    install_packages
    if status >/dev/null 2>&1; then
        log "already running under $STATE"
        print_env
        return 0
    fi
    [[ -e "$STATE" ]] && { log "stale state under $STATE: stopping and removing it first"; stop; }
    local t0=$SECONDS fsid
    mkdir -p "$STATE"/{keyring,run,log,crash,block,mnt}
    chmod 700 "$STATE"
    fsid=$(cat /proc/sys/kernel/random/uuid)
    # the S3 secret: random per cluster, never printed by start's log lines
    head -c 30 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$STATE/s3-secret"
    write_conf "$fsid"
    start_mon "$fsid"
    start_mgr
    local i
    for ((i = 0; i < OSDS; i++)); do start_osd; done
    wait_until "$WAIT_S" "$OSDS OSDs up" osds_up
    cephc osd pool create cephfs_metadata 8 >/dev/null
    cephc osd pool create cephfs_data 8 >/dev/null
    cephc fs new cephfs cephfs_metadata cephfs_data >/dev/null
    start_mds
    wait_until "$WAIT_S" "an active MDS" fs_active
    local c
    for c in "${CLIENTS[@]}"; do mount_client "$c"; done
    start_rgw
    log "started in $((SECONDS - t0)) s under $STATE"
    print_env
}

# -- status, env -----------------------------------------------------------------------------

status() {
    [[ -f "$CONF" ]] || { echo "not running (no $CONF)"; return 1; }
    cephc -s >/dev/null 2>&1 || { echo "not running (the monitor does not answer)"; return 1; }
    local c
    for c in "${CLIENTS[@]}"; do
        is_mounted "$(mount_point "$c")" || { echo "not mounted: $(mount_point "$c")"; return 1; }
    done
    rgw_answers || { echo "the RADOS Gateway does not answer on 127.0.0.1:$RGW_PORT"; return 1; }
    echo "running under $STATE"
}

print_env() {
    [[ -f "$STATE/s3-secret" ]] || die "not running (no $STATE)"
    echo "CEPH_CONF=$CONF"
    echo "IOBENCH_CEPH_DIR=$STATE"
    echo "IOBENCH_CEPH_MOUNT_A=$(mount_point "${CLIENTS[0]}")"
    echo "IOBENCH_CEPH_MOUNT_B=$(mount_point "${CLIENTS[1]}")"
    echo "IOBENCH_CEPH_S3_ENDPOINT=http://127.0.0.1:$RGW_PORT"
    echo "IOBENCH_CEPH_S3_ACCESS_KEY=$S3_ACCESS_KEY"
    echo "IOBENCH_CEPH_S3_SECRET_KEY=$(cat "$STATE/s3-secret")"
}

# -- stop ------------------------------------------------------------------------------------

unmount_all() {
    local m
    # from /proc/mounts, not the directory: a dead FUSE mount fails even `test -d`
    for m in $(our_mounts); do
        fusermount -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || umount -l "$m" ||
            log "could not unmount $m"
    done
    # ceph-fuse exits once its mount is gone
    local p
    for p in $(our_pids); do
        if [[ "$(tr '\0' ' ' 2>/dev/null </proc/"$p"/cmdline)" == ceph-fuse* ]]; then
            stop_pid "$p" 10
        fi
    done
}

stop() {
    [[ -e "$STATE" ]] || { log "nothing to stop ($STATE does not exist)"; return 0; }
    [[ -f "$CONF" ]] || { rm -rf --one-file-system "$STATE"; return 0; }
    unmount_all
    stop_pidfile "$STATE/run/rgw.pid" 20
    stop_pidfile "$STATE/run/mds.a.pid" 20
    local f
    for f in "$STATE"/run/osd.*.pid; do [[ -f "$f" ]] && stop_pidfile "$f" 30; done
    stop_pidfile "$STATE/run/mgr.x.pid" 20
    stop_pidfile "$STATE/run/mon.a.pid" 20
    local p
    for p in $(our_pids); do  # whatever lost its pid file
        log "stopping leftover pid $p: $(tr '\0' ' ' 2>/dev/null </proc/"$p"/cmdline | cut -c1-80)"
        stop_pid "$p" 10
    done
    [[ -z "$(our_mounts)" ]] || die "still mounted: $(our_mounts | tr '\n' ' '); not removing $STATE"
    rm -rf --one-file-system "$STATE"
    log "stopped; removed $STATE"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    env) print_env ;;
    *) echo "usage: $0 start|stop|status|env" >&2; exit 2 ;;
esac
