"""The supervising parent (iobench.run.supervisor): on a client that can block in the kernel, the
run's exit status reaches whoever waits for it even while the run's own process cannot end.

Each case runs ``supervised_child.py`` in its own process: it splits, then the child exits,
lingers after saying it ended (as a process with a thread stuck in a FUSE request does), is
killed, or waits for a signal sent to the parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from iobench.run import supervisor

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LIMIT_S = 60  # generous: a loaded 2-core host


def _start(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, str]:
    marker = str(tmp_path / "m")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "supervised_child.py"), mode, marker], env=env
    )
    return proc, marker


def _wait_file(path: str) -> str:
    deadline = time.monotonic() + LIMIT_S
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    return Path(path).read_text()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"


def test_the_parent_ends_with_the_childs_exit_status(tmp_path):
    proc, marker = _start(tmp_path, "exit3")
    assert proc.wait(timeout=LIMIT_S) == 3
    assert int(_wait_file(marker + ".pid")) != proc.pid


def test_the_parent_ends_with_4_while_the_child_cannot_end(tmp_path):
    proc, marker = _start(tmp_path, "linger")
    child = int(_wait_file(marker + ".pid"))
    try:
        assert proc.wait(timeout=LIMIT_S) == 4  # not the 120 s the child lingers
        assert _alive(child)  # still there: left to the kernel (here: killed below)
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_child_killed_by_a_signal_kills_the_parent_the_same_way(tmp_path):
    proc, _ = _start(tmp_path, "killed")
    assert proc.wait(timeout=LIMIT_S) == -signal.SIGKILL


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_signals_sent_to_the_parent_reach_the_child_once(tmp_path, sig):
    proc, marker = _start(tmp_path, "wait")
    _wait_file(marker + ".ready")
    proc.send_signal(sig)
    assert proc.wait(timeout=LIMIT_S) == 128 + sig
    assert _wait_file(marker + ".got") == signal.Signals(sig).name


def test_a_group_signal_reaches_the_child_once_through_the_parent(tmp_path):
    marker = str(tmp_path / "m")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "supervised_child.py"), "wait", marker],
        env=env, start_new_session=True,
    )  # fmt: skip
    _wait_file(marker + ".ready")
    os.killpg(proc.pid, signal.SIGTERM)  # as `timeout` signals its group
    assert proc.wait(timeout=LIMIT_S) == 128 + signal.SIGTERM


def test_a_killed_parent_stops_the_child(tmp_path):
    proc, marker = _start(tmp_path, "wait")
    _wait_file(marker + ".ready")
    proc.kill()
    proc.wait(timeout=LIMIT_S)
    assert _wait_file(marker + ".got") == "SIGTERM"  # PR_SET_PDEATHSIG


@pytest.mark.parametrize(
    ("fs_type", "fs_class", "env", "want"),
    [
        ("fuse.ceph-fuse", "network", {}, True),
        ("fuse.glusterfs", "unknown", {}, True),
        ("lustre", "parallel", {}, True),
        ("nfs4", "network", {}, True),
        ("ext4", "local", {}, False),
        ("tmpfs", "memory", {}, False),
        ("ext4", "local", {"IOBENCH_SUPERVISE": "always"}, True),
        ("fuse.ceph-fuse", "network", {"IOBENCH_SUPERVISE": "never"}, False),
        ("fuse.ceph-fuse", "network", {"TORCHELASTIC_RUN_ID": "x"}, False),
        ("fuse.ceph-fuse", "network", {"WORLD_SIZE": "2"}, False),
    ],
)
def test_which_targets_get_a_supervising_parent(fs_type, fs_class, env, want):
    assert supervisor.wanted(fs_type, fs_class, env) is want
