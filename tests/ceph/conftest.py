"""A real one-machine Ceph cluster for the tests in this directory (marker ``ceph``).

``scripts/ceph_cluster.sh start`` runs once per test session (it installs the Debian packages
when they are missing): a monitor, a manager, two OSDs on file-backed bluestore, an MDS,
CephFS mounted twice with ceph-fuse (clients ``iobench-a`` and ``iobench-b``) and the RADOS
Gateway on 127.0.0.1. The last test of this directory stops it and removes its state (the
session's end does when it ends early), also when tests failed. A cluster that was already
running is used and left running.

Where Ceph cannot run here (not root, no /dev/fuse, packages not installable, a start that
fails), every test in this directory is skipped with the reason: an environment that cannot
host the cluster is not a failure of iobench.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "ceph_cluster.sh"
START_TIMEOUT_S = 900  # apt-get install (~20-100 s) plus the start (~15-30 s) on a busy host
STOP_TIMEOUT_S = 300


@dataclass(frozen=True)
class Cluster:
    mount_a: Path  # CephFS through client.iobench-a
    mount_b: Path  # the same file system through client.iobench-b
    conf: str
    state: Path
    s3_endpoint: str
    access_key: str
    secret_key: str


def _script(cmd: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), cmd], capture_output=True, text=True, timeout=timeout
    )


def _why(proc: subprocess.CompletedProcess) -> str:
    lines = [x for x in (proc.stderr or "").splitlines() if x.startswith("ceph_cluster:")]
    return lines[-1].removeprefix("ceph_cluster: ") if lines else f"exit {proc.returncode}"


_started: dict[str, str] = {}  # the ceph.conf of the cluster this session started, until stopped


def _stop_started() -> None:
    conf = _started.pop("conf", None)
    if conf is None:
        return
    stop = _script("stop", STOP_TIMEOUT_S)
    assert stop.returncode == 0, f"scripts/ceph_cluster.sh stop failed: {_why(stop)}"
    assert leftovers(conf) == ([], [], False)


@pytest.hookimpl(trylast=True)  # after the test's own fixtures (a bucket to delete) are gone
def pytest_runtest_teardown(item, nextitem):
    """Stop the cluster after the last test of this directory, not at the end of the whole
    session: the other tests should not share the two cores with idle Ceph daemons."""
    here = Path(__file__).parent
    if nextitem is None or here not in Path(str(nextitem.path)).parents:
        _stop_started()


@pytest.fixture(scope="session")
def ceph_cluster():
    if os.geteuid() != 0:
        pytest.skip("Ceph tests need root (daemons, FUSE mounts); run them as root")
    if not Path("/dev/fuse").exists():
        pytest.skip("no /dev/fuse: ceph-fuse cannot mount CephFS here")
    if _script("status", 120).returncode != 0:
        try:
            proc = _script("start", START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _script("stop", STOP_TIMEOUT_S)
            pytest.skip(f"the Ceph cluster did not start in {START_TIMEOUT_S} s")
        if proc.returncode != 0:
            _script("stop", STOP_TIMEOUT_S)  # whatever half-started
            pytest.skip(f"no Ceph cluster: {_why(proc)}")
        _started["conf"] = str(
            Path(os.environ.get("IOBENCH_CEPH_DIR", "/var/tmp/iobench-ceph"), "ceph.conf")
        )
    try:
        env = dict(
            line.split("=", 1) for line in _script("env", 60).stdout.splitlines() if "=" in line
        )
        yield Cluster(
            mount_a=Path(env["IOBENCH_CEPH_MOUNT_A"]),
            mount_b=Path(env["IOBENCH_CEPH_MOUNT_B"]),
            conf=env["CEPH_CONF"],
            state=Path(env["IOBENCH_CEPH_DIR"]),
            s3_endpoint=env["IOBENCH_CEPH_S3_ENDPOINT"],
            access_key=env["IOBENCH_CEPH_S3_ACCESS_KEY"],
            secret_key=env["IOBENCH_CEPH_S3_SECRET_KEY"],
        )
    finally:
        _stop_started()  # also when the session ends early (-x, Ctrl-C)


def leftovers(conf: str) -> tuple[list[str], list[str], bool]:
    """What of a stopped cluster is left: live processes started with its ceph.conf, mounts
    under its state directory, and whether that directory still exists."""
    state = os.path.dirname(conf)
    procs = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if conf and conf in cmd and st not in ("Z", "X"):
            procs.append(f"{pid} {cmd[:80]}")
    mounts = [
        line.split()[1]
        for line in Path("/proc/mounts").read_text().splitlines()
        if state and line.split()[1].startswith(state + "/")
    ]
    return procs, mounts, bool(state) and os.path.exists(state)
