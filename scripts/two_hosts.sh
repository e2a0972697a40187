#!/usr/bin/env bash
# Two test "hosts" on this machine for multi-host iobench runs: each a network namespace
# (iob-h1, iob-h2) joined by one veth pair with a private /30 (10.213.7.1 <-> 10.213.7.2),
# and every command run in a host gets that host's own hostname (UTS namespace), its own
# mount namespace, an /etc/hosts naming both hosts, and, when asked, its own client mount of
# the shared file system bound at one common path.
#
#   scripts/two_hosts.sh up                 create the namespaces and the link (idempotent)
#   scripts/two_hosts.sh exec HOST CMD...   run CMD as host HOST (iob-h1 or iob-h2)
#   scripts/two_hosts.sh kill HOST          SIGKILL every process of HOST
#   scripts/two_hosts.sh link HOST up|down  bring HOST's end of the link up or down (partition)
#   scripts/two_hosts.sh down               kill their processes; remove namespaces and link
#
# exec binds IOBENCH_HOST_MOUNT_1 (for iob-h1) or IOBENCH_HOST_MOUNT_2 (for iob-h2), when set,
# at IOBENCH_HOST_SHARED (default /var/tmp/iob-shared): with the two ceph-fuse mounts of
# scripts/ceph_cluster.sh each host reads and writes the one CephFS through its own client
# (its own client cache). The ceph-fuse processes themselves run in the root namespace and
# reach the cluster on 127.0.0.1: the Ceph daemons listen on loopback only, which a network
# namespace cannot reach, so the storage traffic does not cross the veth link; only the hosts'
# own traffic (torchrun's rendezvous and store, gloo) does. Addresses exist only on the link.
set -euo pipefail

HOSTS=(iob-h1 iob-h2)
ADDRS=(10.213.7.1 10.213.7.2)
DEVS=(iobv1 iobv2)
STATE="${IOBENCH_HOSTS_DIR:-/var/tmp/iob-hosts}"
SHARED="${IOBENCH_HOST_SHARED:-/var/tmp/iob-shared}"

log() { echo "two_hosts: $*" >&2; }
die() { log "$*"; exit 1; }

index_of() {
    local i
    for i in "${!HOSTS[@]}"; do [[ "${HOSTS[$i]}" == "$1" ]] && { echo "$i"; return 0; }; done
    die "unknown host '$1' (use ${HOSTS[*]})"
}

has_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

up() {
    [[ $EUID -eq 0 ]] || { log "needs root (network namespaces)"; exit 3; }
    command -v ip >/dev/null && command -v unshare >/dev/null ||
        { log "needs ip (iproute2) and unshare (util-linux)"; exit 3; }
    local i
    for i in 0 1; do
        has_ns "${HOSTS[$i]}" || ip netns add "${HOSTS[$i]}" || { log "cannot create network namespaces here"; exit 3; }
        ip -n "${HOSTS[$i]}" link set lo up
    done
    if ! ip -n "${HOSTS[0]}" link show "${DEVS[0]}" >/dev/null 2>&1; then
        ip link add "${DEVS[0]}" netns "${HOSTS[0]}" type veth peer name "${DEVS[1]}" netns "${HOSTS[1]}"
    fi
    for i in 0 1; do
        ip -n "${HOSTS[$i]}" addr replace "${ADDRS[$i]}/30" dev "${DEVS[$i]}"
        ip -n "${HOSTS[$i]}" link set "${DEVS[$i]}" up
    done
    mkdir -p "$STATE" "$SHARED"
    {
        echo "127.0.0.1 localhost"
        for i in 0 1; do echo "${ADDRS[$i]} ${HOSTS[$i]}"; done
    } >"$STATE/hosts"
    for i in 0 1; do echo "${HOSTS[$i]} ${ADDRS[$i]} ${DEVS[$i]}"; done
}

# exec HOST CMD...: CMD in HOST's network namespace with a fresh UTS and mount namespace.
run_in() {
    local i mnt_var src
    i=$(index_of "$1")
    shift
    has_ns "${HOSTS[$i]}" || die "${HOSTS[$i]} is not up (run: $0 up)"
    mnt_var="IOBENCH_HOST_MOUNT_$((i + 1))"
    src="${!mnt_var:-}"
    exec ip netns exec "${HOSTS[$i]}" unshare --uts --mount --propagation private -- \
        bash -c 'set -e
            hostname "$1"; mount --bind "$2" /etc/hosts
            if [[ -n "$3" ]]; then mount --bind "$3" "$4"; fi
            shift 4; exec "$@"' _ "${HOSTS[$i]}" "$STATE/hosts" "$src" "$SHARED" "$@"
}

kill_host() {
    local pids
    has_ns "$1" || return 0
    pids=$(ip netns pids "$1" 2>/dev/null | tr '\n' ' ')
    [[ -n "${pids// /}" ]] && kill -KILL $pids 2>/dev/null || true
    return 0
}

link() {
    local i
    i=$(index_of "$1")
    ip -n "${HOSTS[$i]}" link set "${DEVS[$i]}" "$2"
}

down() {
    local h t0
    for h in "${HOSTS[@]}"; do
        kill_host "$h"
        t0=$SECONDS
        while has_ns "$h" && [[ -n "$(ip netns pids "$h" 2>/dev/null)" ]] && ((SECONDS - t0 < 10)); do
            sleep 0.1
        done
        if has_ns "$h"; then ip netns del "$h" || log "could not remove namespace $h"; fi
    done
    rm -rf "$STATE"
    rmdir "$SHARED" 2>/dev/null || true
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    exec) [[ $# -ge 3 ]] || { echo "usage: $0 exec HOST CMD..." >&2; exit 2; }; shift; run_in "$@" ;;
    kill) [[ $# -eq 2 ]] || { echo "usage: $0 kill HOST" >&2; exit 2; }; index_of "$2" >/dev/null; kill_host "$2" ;;
    link) [[ $# -eq 3 && "$3" =~ ^(up|down)$ ]] || { echo "usage: $0 link HOST up|down" >&2; exit 2; }; link "$2" "$3" ;;
    *) echo "usage: $0 up|down|exec HOST CMD...|kill HOST|link HOST up|down" >&2; exit 2 ;;
esac
