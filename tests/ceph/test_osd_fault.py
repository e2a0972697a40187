"""Real storage faults: one of the two OSDs stopped in the middle of a write phase, and the
metadata server stopped in the middle of a metadata (create) phase.

The pools have one replica, so the placement groups on the stopped OSD go inactive and the
ceph-fuse client blocks on their objects for as long as the OSD is away; with the MDS away it
blocks every metadata request. No client option makes it give up: iobench's own watchdog
(``--stall-timeout``, iobench.run.stall) does. It prints one line naming the phase, the target
and the time without progress, and keeps the partial result, while the service is still down.
The process running the phase cannot end while a thread of it is blocked in a FUSE
request that ceph-fuse never answers (measured: not even SIGKILL ends it; the threads stay in
request_wait_answer until the OSD or MDS is back), so on such a client the run's process has
a supervising parent (iobench.run.supervisor) that ends with exit 4 as soon as the watchdog
gives up, while the service is still down. The run directory is removed by the watchdog's
detached reaper once the storage answers; then no ``.iobench-*`` debris remains and the user's files planted beside
the run are byte-identical.

"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ceph, pytest.mark.root, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
STALL_S = 8  # iobench --stall-timeout
LINE_MARGIN_S = 60  # the line comes STALL_S after the last progress, plus a bounded cleanup
EXIT_MARGIN_S = 30  # the supervising parent ends as soon as the watchdog says so (supervisor.py)


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


def _fs_active(cluster) -> bool:
    return "up:active" in _ceph(cluster, "mds", "stat")


def _planted(work: Path) -> dict[Path, bytes]:
    work.mkdir()
    planted = {work / "user-a.bin": os.urandom(3 << 20), work / "user-b.txt": b"keep me\n"}
    for p, data in planted.items():
        p.write_bytes(data)
    return planted


def _fault(cluster, tmp_path, work, args, started, daemon, restart, healthy):
    """Run iobench, stop ``daemon`` once ``started()``; wait for the watchdog's line while
    it is down, bring it back; return (exit status, stderr, seconds stop->line, ->exit)."""
    out, err_path = tmp_path / "out", tmp_path / "stderr"
    cmd = [sys.executable, "-m", "iobench", "run", *args, "--output", str(out),
           "--no-history", "-q", "--stall-timeout", f"{STALL_S}s"]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
    pidfile = cluster.state / "run" / f"{daemon}.pid"
    stopped = False
    line_s = exit_s = down_s = None
    try:
        _wait("the phase", 240, started)
        assert proc.poll() is None, err_path.read_text()
        os.kill(int(pidfile.read_text()), signal.SIGKILL)  # the daemon dies mid-phase
        stopped, t_stop = True, time.monotonic()
        while time.monotonic() - t_stop < STALL_S + LINE_MARGIN_S:
            if "iobench: error:" in err_path.read_text():
                line_s = time.monotonic() - t_stop
                break
            time.sleep(0.5)
        print(f"the line came {line_s} s after {daemon} stopped")
        if line_s is not None:  # the exit status comes while the service is still down
            try:
                proc.wait(EXIT_MARGIN_S)
                down_s = time.monotonic() - t_stop
                print(f"iobench exited {proc.returncode} {down_s:.1f} s after {daemon} stopped")
            except subprocess.TimeoutExpired:
                pass
    finally:
        if stopped:
            subprocess.run(restart, check=True, timeout=120, capture_output=True)
        try:
            proc.wait(300)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if stopped:
            exit_s = time.monotonic() - t_stop
            print(f"iobench's status collected {exit_s:.1f} s after {daemon} stopped")
            _wait(f"{daemon} back", 240, healthy)
    assert down_s is not None, f"no exit status while {daemon} was down: {err_path.read_text()}"
    return proc.returncode, err_path.read_text(), line_s, out


def _after(work: Path, planted: dict[Path, bytes]) -> None:
    # the reaper removes the run directory once the storage answers
    _wait("the run directory removed", 180, lambda: sorted(os.listdir(work)) == sorted(
        p.name for p in planted))  # fmt: skip
    for p, data in planted.items():
        assert hashlib.sha256(p.read_bytes()).digest() == hashlib.sha256(data).digest()
    shutil.rmtree(work)  # the test's own directory, the planted files checked


def _check_line(rc, stderr, line_s, out, phase):
    assert line_s is not None and line_s < STALL_S + LINE_MARGIN_S, stderr[-3000:]
    assert rc == 4, stderr[-3000:]
    errors = [x for x in stderr.splitlines() if x.startswith("iobench: error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert f"phase {phase}" in errors[0] and f"no progress for {STALL_S} s" in errors[0]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] in ("partial", "failed") and "made no progress" in res["error"]
    assert res["phases"][-1]["name"] == phase and res["phases"][-1]["status"] == "failed"


def test_an_osd_stopped_mid_write_gives_up_with_exit_4(ceph_cluster, tmp_path):
    work = ceph_cluster.mount_a / f"t-{uuid.uuid4().hex[:8]}"
    planted = _planted(work)

    def written() -> bool:
        return sum(p.stat().st_size for p in work.rglob("*") if p.is_file()) > (3 << 20) + (
            32 << 20
        )

    rc, stderr, line_s, out = _fault(
        ceph_cluster, tmp_path, work,
        ["sequential-write", str(work), "--set", "size=512MiB", "--set", "jobs=2",
         "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--set", "time=none"],
        written, "osd.1", ["ceph-osd", "-c", ceph_cluster.conf, "-i", "1"],
        lambda: _pgs_active(ceph_cluster),
    )  # fmt: skip
    _check_line(rc, stderr, line_s, out, "seq-write")
    _after(work, planted)


def test_the_mds_stopped_mid_create_gives_up_with_exit_4(ceph_cluster, tmp_path):
    work = ceph_cluster.mount_a / f"t-{uuid.uuid4().hex[:8]}"
    planted = _planted(work)

    def creating() -> bool:
        return sum(1 for p in work.rglob("f*") if p.is_file()) > 200

    rc, stderr, line_s, out = _fault(
        ceph_cluster, tmp_path, work,
        ["checkpoint-smallfile", str(work), "--set", "files=100000", "--set",
         'file_sizes=["4KiB"]', "--set", "fsync=never", "--set", "dcp=false",
         "--set", "shards=1", "--set", "checkpoint_size=1MiB"],
        creating, "mds.a", ["ceph-mds", "-c", ceph_cluster.conf, "-i", "a"],
        lambda: _fs_active(ceph_cluster),
    )  # fmt: skip
    _check_line(rc, stderr, line_s, out, "ckpt-create")
    _after(work, planted)
