"""A real storage fault: one of the two OSDs stopped in the middle of a write phase.

The pools have one replica, so the placement groups on the stopped OSD go inactive and a
ceph-fuse client blocks on their objects for as long as the OSD is away, unless the client
was given ``rados_osd_op_timeout``: then the write fails with ETIMEDOUT, and iobench ends
with exit 4 and one line naming it. Removing the run directory waits for the OSD (its files'
objects live there); once it is back no ``.iobench-*`` debris remains and the user's files
planted beside the run are byte-identical."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ceph, pytest.mark.root, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
OSD_TIMEOUT_S = 15  # the test client's rados_osd_op_timeout
OSD_AWAY_S = 45  # how long the OSD stays stopped at most (writes time out after ~2x OSD_TIMEOUT_S)


def _ceph(cluster, *args: str) -> str:
    return subprocess.run(
        ["ceph", "-c", cluster.conf, "--connect-timeout", "30", *args],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip


def _wait(what: str, limit_s: float, ok) -> None:
    t0 = time.monotonic()
    while not ok():
        assert time.monotonic() - t0 < limit_s, f"timed out waiting for {what}"
        time.sleep(0.5)


def _pgs_active(cluster) -> bool:
    st = json.loads(_ceph(cluster, "pg", "stat", "-f", "json"))
    by_state = st.get("pg_summary", st).get("num_pg_by_state", [])
    total = sum(s["num"] for s in by_state)
    active = sum(s["num"] for s in by_state if "active" in s["name"])
    return total > 0 and active == total


@pytest.fixture
def timeout_mount(ceph_cluster, tmp_path):
    """A third ceph-fuse mount of the CephFS (client iobench-a's key) that gives up on an OSD
    operation after OSD_TIMEOUT_S instead of blocking."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    subprocess.run(
        ["ceph-fuse", "-c", ceph_cluster.conf, "-n", "client.iobench-a",
         f"--rados_osd_op_timeout={OSD_TIMEOUT_S}", str(mnt)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    try:
        yield mnt
    finally:
        subprocess.run(["fusermount", "-u", str(mnt)], capture_output=True, timeout=60)


def test_an_osd_stopped_mid_write_is_exit_4_and_leaves_no_debris(
    ceph_cluster, timeout_mount, tmp_path
):
    work = timeout_mount / f"t-{uuid.uuid4().hex[:8]}"
    work.mkdir()
    planted = {work / "user-a.bin": os.urandom(3 << 20), work / "user-b.txt": b"keep me\n"}
    for p, data in planted.items():
        p.write_bytes(data)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = [sys.executable, "-m", "iobench", "run", "sequential-write", str(work),
           "--set", "size=512MiB", "--set", "jobs=2", "--set", "block_sizes=[]",
           "--set", "jobs_sweep=[]", "--output", str(out), "--no-history", "-q"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pidfile = ceph_cluster.state / "run" / "osd.1.pid"
    stopped = False
    try:
        _wait("the write phase", 240, lambda: sum(len(f) for _, _, f in os.walk(work)) > 3)
        time.sleep(1.0)
        os.kill(int(pidfile.read_text()), 15)
        stopped, t_stop = True, time.monotonic()
        try:
            proc.wait(OSD_AWAY_S)
        except subprocess.TimeoutExpired:
            pass  # removing the run directory waits for the OSD
        print(f"iobench {'exited' if proc.poll() is not None else 'still running'} "
              f"{time.monotonic() - t_stop:.1f} s after osd.1 stopped")  # fmt: skip
    finally:
        if stopped:
            subprocess.run(
                ["ceph-osd", "-c", ceph_cluster.conf, "-i", "1"], check=True, timeout=120
            )
            t_back = time.monotonic()
        try:
            stdout, stderr = proc.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
        if stopped:
            print(f"iobench exited {time.monotonic() - t_back:.1f} s after osd.1 restarted")
            _wait("every PG active", 240, lambda: _pgs_active(ceph_cluster))
    assert proc.returncode == 4, stderr[-3000:]
    errors = [x for x in stderr.splitlines() if x.startswith("iobench: error:")]
    assert len(errors) == 1 and "(ETIMEDOUT)" in errors[0], stderr[-3000:]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "partial" and "ETIMEDOUT" in res["error"]
    assert res["phases"][0]["name"] == "seq-write" and res["phases"][0]["status"] == "partial"
    assert sorted(os.listdir(work)) == ["user-a.bin", "user-b.txt"]  # no .iobench-* left
    for p, data in planted.items():
        assert hashlib.sha256(p.read_bytes()).digest() == hashlib.sha256(data).digest()
