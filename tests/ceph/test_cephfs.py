"""iobench on a real CephFS, mounted twice with ceph-fuse (clients iobench-a and iobench-b):
detection, layouts through the ``ceph.*`` xattrs, what dropping the cache does on this
client, ``iobench run`` and ``iobench qualify`` from two client mounts (posix and fio)."""

from __future__ import annotations

import glob
import json
import mmap
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from iobench.core.errors import TargetError
from iobench.target import (
    apply_layout,
    create_run_dir,
    fs_class,
    read_ceph_layout,
    remove_run_dir,
    resolve,
)

pytestmark = [pytest.mark.ceph, pytest.mark.root, pytest.mark.slow]

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def work(ceph_cluster):
    """A fresh directory on the CephFS, as (path through client a, path through client b)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    a, b = ceph_cluster.mount_a / name, ceph_cluster.mount_b / name
    a.mkdir()
    yield a, b
    shutil.rmtree(a, ignore_errors=True)


def test_ceph_fuse_is_detected(ceph_cluster, work):
    a, _ = work
    t = resolve(str(a))
    assert t.fs_type == "fuse.ceph-fuse" and fs_class(t.fs_type) == "parallel"
    assert t.mount_point == str(ceph_cluster.mount_a) and t.mount_source == "ceph-fuse"
    create_run_dir(t, "20260101T000000Z-detect")
    try:
        assert t.direct_io is True  # O_DIRECT opens, reads and writes work on ceph-fuse
    finally:
        remove_run_dir(t)
    assert os.listdir(a) == []


def test_layout_set_on_the_run_dir_is_what_both_clients_see(work):
    a, b = work
    t = resolve(str(a))
    create_run_dir(t, "20260101T000000Z-layout")
    try:
        assert apply_layout(t, {"stripe_count": 2, "stripe_size": MiB}) == []
        (Path(t.run_dir) / "f.dat").write_bytes(os.urandom(4 * MiB))
        other = b / os.path.basename(t.run_dir) / "f.dat"
        seen_by_b = read_ceph_layout(str(other))
        by_name = os.getxattr(str(other), "ceph.file.layout.stripe_count")
        run_dir_layout = read_ceph_layout(t.run_dir)
    finally:
        remove_run_dir(t)
    want = {"stripe_unit": MiB, "stripe_count": 2, "object_size": 4 * MiB, "pool": "cephfs_data"}
    assert seen_by_b == want and by_name == b"2"
    assert run_dir_layout == want  # ceph.dir.layout is set on the run dir itself
    assert t.layout == {"source": "ceph.file.layout xattrs", **want}
    assert os.listdir(a) == []


def test_a_stripe_unit_above_the_object_size_raises_it_on_the_real_mds(work):
    a, _ = work
    t = resolve(str(a))
    create_run_dir(t, "20260101T000000Z-bigsu")
    try:
        apply_layout(t, {"stripe_size": 8 * MiB})
        with pytest.raises(TargetError, match="multiple of 64 KiB"):
            apply_layout(t, {"stripe_size": 100_000})
    finally:
        remove_run_dir(t)
    assert (t.layout["stripe_unit"], t.layout["object_size"]) == (8 * MiB, 8 * MiB)


# -- what dropping the cache does on ceph-fuse (measured from the OSDs' own counters) ---------


def _perf(ceph_cluster, sock: str) -> dict:
    out = subprocess.run(
        ["ceph", "-c", ceph_cluster.conf, "--admin-daemon", sock, "perf", "dump"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def _osd_read_bytes(ceph_cluster) -> int:
    socks = glob.glob(str(ceph_cluster.state / "run" / "osd.*.asok"))
    assert len(socks) == 2
    return sum(_perf(ceph_cluster, s)["osd"]["op_r_out_bytes"] for s in socks)


def _osd_written_bytes(ceph_cluster) -> int:
    socks = glob.glob(str(ceph_cluster.state / "run" / "osd.*.asok"))
    return sum(_perf(ceph_cluster, s)["osd"]["op_w_in_bytes"] for s in socks)


def _read(path: Path, direct: bool = False) -> int:
    buf = mmap.mmap(-1, MiB)
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    n = 0
    try:
        while (k := os.readv(fd, [buf])) > 0:
            n += k
    finally:
        os.close(fd)
    return n


def test_fadvise_does_not_empty_ceph_fuse_cache_but_o_direct_bypasses_it(ceph_cluster, work):
    """The measurement behind the cache states on ceph-fuse: O_DIRECT writes are on the OSDs
    when they return; after posix_fadvise(DONTNEED) a buffered re-read on the client that
    read the file reads nothing from the OSDs (ceph-fuse's object cache answers:
    ``client-cache``); an O_DIRECT read, and the other client's first read, read it all."""
    a, b = work
    size = 16 * MiB
    buf = mmap.mmap(-1, MiB)
    buf.write(os.urandom(MiB))
    before = _osd_written_bytes(ceph_cluster)
    fd = os.open(a / "f.dat", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for off in range(0, size, MiB):
            os.pwrite(fd, buf, off)
        # O_DIRECT writes reach the OSDs before they return (nothing waits in the client)
        assert _osd_written_bytes(ceph_cluster) - before >= size
    finally:
        os.close(fd)
    assert _read(a / "f.dat") == size  # buffered: now in the page cache and ceph-fuse's
    fd = os.open(a / "f.dat", os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

    def osd_bytes_for(path: Path, direct: bool) -> int:
        before = _osd_read_bytes(ceph_cluster)
        assert _read(path, direct) == size
        return _osd_read_bytes(ceph_cluster) - before

    dropped = osd_bytes_for(a / "f.dat", direct=False)
    direct = osd_bytes_for(a / "f.dat", direct=True)
    other_client = osd_bytes_for(b / "f.dat", direct=False)
    assert dropped < MiB, (
        f"{dropped} bytes came from the OSDs: ceph-fuse now empties its cache on fadvise, "
        "so iobench.target.CLIENT_CACHE_FS should no longer list it"
    )
    assert direct >= size and other_client >= size


# -- iobench itself ----------------------------------------------------------------------------


def test_run_records_layout_per_phase_and_client_cache(cli, work, tmp_path):
    a, _ = work
    out = tmp_path / "out"
    r = cli(
        "run", "sequential-write", a, "--output", out, "--json", "--quiet", "--no-history",
        "--set", "size=8MiB", "--set", "jobs=2", "--set", "block_sizes=[]",
        "--set", "jobs_sweep=[]", "--set", "stripe_count=2", "--set", "stripe_size=1MiB",
        "--set", "direct=false", "--set", "time=none",
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    assert res["target"]["fs_type"] == "fuse.ceph-fuse"
    assert res["target"]["fs_class"] == "parallel"
    assert res["target"]["layout"]["stripe_count"] == 2
    phases = {p["name"]: p for p in res["phases"]}
    assert set(phases) == {"seq-write", "seq-read"}
    for p in phases.values():
        assert p["extra"]["layout"]["stripe_unit"] == MiB
        assert p["extra"]["layout"]["stripe_count"] == 2
    assert phases["seq-read"]["cache"] == "client-cache"  # not "dropped": it was not
    assert any("cache state client-cache" in w for w in res["warnings"])
    html = tmp_path / "report.html"
    assert cli("report", out / "result.json", "--html", html).code == 0
    assert "own cache could not be" in html.read_text()  # the client-cache state explained
    assert os.listdir(a) == []


def test_default_run_reads_with_o_direct(cli, work, tmp_path):
    a, _ = work
    out = tmp_path / "out"
    r = cli(
        "run", "random-read", a, "--output", out, "--json", "--quiet", "--no-history",
        "--set", "size=4MiB", "--set", "jobs=1", "--set", "rand_jobs=2", "--set", "time=none",
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    assert {p["cache"] for p in res["phases"]} == {"direct"}
    assert not any("client-cache" in w for w in res["warnings"])
    assert os.listdir(a) == []


# -- qualify from two client mounts under torchrun ------------------------------------------------

# A small loader step (the suite's other steps are sized by --time), so the test stays short.
TINY_PROFILE = """description = "tiny test profile"
format = "raw"
sample_size = "64KiB"
files = 24
batch_size = 4
compute_s = 0.01
workers = 1
prefetch = 2
au_min = 0.5
epochs = 1
"""
# torchrun's rank N runs iobench on mount N (two ceph-fuse clients of one CephFS): the
# argument @TARGET@ becomes that rank's directory
RANK_WRAPPER = """#!/bin/sh
case "$LOCAL_RANK" in 0) t="{a}";; *) t="{b}";; esac
for a in "$@"; do shift; [ "$a" = "@TARGET@" ] && a=$t; set -- "$@" "$a"; done
exec "{python}" -m iobench "$@"
"""


def _two_clients(work, tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """``iobench ARGS`` under torchrun, rank 0 through client a, rank 1 through client b."""
    a, b = work
    wrapper = tmp_path / "rank.sh"
    wrapper.write_text(RANK_WRAPPER.format(a=a, b=b, python=sys.executable))
    wrapper.chmod(0o755)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "--no-python", str(wrapper), *args, "--output", str(out), "--no-history", "-q"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert (out / "result.json").exists(), log[-3000:]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "complete", (res.get("error"), log[-3000:])
    assert res["target"]["fs_type"] == "fuse.ceph-fuse"
    assert os.listdir(a) == []  # every rank's run directory is gone
    return proc, res


def _read_the_other_clients_files(phase: dict) -> None:
    assert [r["rank"] for r in phase["ranks"]] == [0, 1]
    assert [r["read_from"] for r in phase["ranks"]] == [1, 0], phase["ranks"]


def test_qualify_from_two_client_mounts(work, tmp_path):
    profile = tmp_path / "tiny.toml"
    profile.write_text(TINY_PROFILE)
    proc, res = _two_clients(
        work, tmp_path, "qualify", "@TARGET@", "--quick", "--time", "10s", "--profile", profile
    )
    status = res["verdict"]["status"]  # speed decides which: not asserted
    assert status in ("pass (indicative)", "fail")  # --quick: never a plain pass
    assert proc.returncode == (0 if status == "pass (indicative)" else 1)
    assert res["target"]["layout"]["pool"] == "cephfs_data"
    phases = {p["name"]: p for p in res["phases"]}
    assert all(p["status"] == "ok" for p in phases.values()), phases
    _read_the_other_clients_files(phases["seq-read"])
    for p in phases.values():
        assert p["cache"] != "dropped", p["name"]  # never claimed on ceph-fuse
        if p["name"].startswith(("seq-", "rand-", "dataset-")):  # run by an engine
            assert p["extra"]["layout"]["object_size"] == 4 * MiB, p["name"]
    assert phases["ckpt-load"]["cache"] == "client-cache"
    assert res["loader"]["gpus"] == 2 and res["loader"]["au"] > 0
    assert (tmp_path / "out" / "report.html").exists()


def test_fio_engine_from_two_client_mounts(work, tmp_path):
    if not shutil.which("fio"):
        pytest.skip("fio is not installed")
    proc, res = _two_clients(
        work, tmp_path, "run", "sequential-write", "@TARGET@", "--engine", "fio",
        "--set", "size=16MiB", "--set", "jobs=2", "--set", "block_sizes=[]",
        "--set", "jobs_sweep=[]", "--set", "randread=true", "--set", "stripe_count=2",
        "--set", "time=none",
    )  # fmt: skip
    assert proc.returncode == 0
    assert res["engine"]["name"] == "fio"
    phases = {p["name"]: p for p in res["phases"]}
    assert set(phases) == {"seq-write", "seq-read", "rand-read"}
    for p in phases.values():
        assert p["status"] == "ok" and p["cache"] == "direct" and p["extra"]["engine"] == "fio"
        assert p["extra"]["layout"]["stripe_count"] == 2
    assert phases["seq-write"]["bytes"] == 2 * 2 * 16 * MiB
    _read_the_other_clients_files(phases["seq-read"])
    _read_the_other_clients_files(phases["rand-read"])


def test_script_start_is_idempotent_and_status_answers(ceph_cluster):
    script = REPO / "scripts" / "ceph_cluster.sh"
    again = subprocess.run(["bash", script, "start"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "already running" in again.stderr
    assert f"IOBENCH_CEPH_MOUNT_A={ceph_cluster.mount_a}" in again.stdout.splitlines()
    status = subprocess.run(["bash", script, "status"], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and status.stdout.startswith("running under ")
