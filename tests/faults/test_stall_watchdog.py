"""The I/O watchdog (iobench.run.stall): a phase whose I/O blocks for good gives up with exit 4.

A worker blocked in a system call (here: opening a FIFO that no one writes, as a thread sits
in a FUSE request whose server waits for a stopped OSD or MDS) cannot be stopped by any flag.
Each case runs iobench in its own process (the watchdog ends it with ``os._exit``) through
``stall_driver.py`` and checks: exit 4 within the timeout plus a generous margin, one line
naming the phase, the target and the time without progress, result.json kept and marked, no
``.iobench-*`` debris, the user's files byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import SEQ, debris, one_line, wait_for

from iobench.run import stall as watchdog
from iobench.spec.workload import load_workload

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
STALL_S = 2
MARGIN_S = 90  # start-up, the phase before the stall, the bounded cleanup: on a loaded host


def _run(tmp_path, what, phase, after, *args, env=None):
    fifo = tmp_path / "never-written"
    if not fifo.exists():
        os.mkfifo(fifo)
    cmd = [sys.executable, str(HERE / "stall_driver.py"), str(fifo), what, phase, str(after),
           "--", *args]  # fmt: skip
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    t0 = time.monotonic()
    p = subprocess.run(
        cmd, capture_output=True, text=True, env=full_env, timeout=STALL_S + MARGIN_S + 60
    )
    return p, time.monotonic() - t0


def _check(p, elapsed, out, planted, phase):
    assert p.returncode == 4, p.stderr
    assert elapsed < STALL_S + MARGIN_S
    line = one_line(p.stderr)
    assert f"phase {phase}" in line and f"made no progress for {STALL_S} s" in line, line
    assert str(planted.path) in line and "blocked I/O" in line, line
    res = json.loads((out / "result.json").read_text())
    assert res["status"] in ("failed", "partial") and "made no progress" in res["error"]
    stalled = res["phases"][-1]
    assert stalled["name"].startswith(phase) and stalled["status"] == "failed"
    assert "stalled" in stalled["extra"] and stalled["ops"] == 0  # counted, never timed
    assert debris(planted.path) == [] and planted.unchanged()
    return res


def test_blocked_writes_give_up_with_exit_4(planted, tmp_path):
    out = tmp_path / "out"
    p, t = _run(
        tmp_path, "pwrite", "seq-write", 3, "run", "sequential-write", str(planted.path), *SEQ,
        "--set", "size=8MiB", "--output", str(out), "-q", "--no-history",
        "--stall-timeout", f"{STALL_S}s",
    )  # fmt: skip
    res = _check(p, t, out, planted, "seq-write")
    assert res["phases"][-1]["op"] == "write" and res["phases"][-1]["concurrency"] == 2
    assert "partial result kept in" in p.stderr


def test_blocked_writes_in_worker_processes_give_up(planted, tmp_path):
    out = tmp_path / "out"  # more workers than CPUs: forked worker processes
    p, t = _run(
        tmp_path, "pwrite", "seq-write", 3, "run", "sequential-write", str(planted.path), *SEQ,
        "--set", "size=4MiB", "--set", f"jobs={os.cpu_count() + 1}", "--output", str(out), "-q",
        "--no-history", "--stall-timeout", f"{STALL_S}s",
    )  # fmt: skip
    _check(p, t, out, planted, "seq-write")


def test_blocked_creates_in_a_metadata_phase_give_up(planted, tmp_path):
    out = tmp_path / "out"
    p, t = _run(
        tmp_path,
        "open",
        "ckpt-create",
        20,
        "run",
        "checkpoint-smallfile",
        str(planted.path),
        "--set",
        "files=64",
        "--set",
        'file_sizes=["4KiB"]',
        "--set",
        "dcp=false",
        "--set",
        "checkpoint_size=1MiB",
        "--set",
        "shards=1",
        "--set",
        "jobs=2",
        "--output",
        str(out),
        "-q",
        "--no-history",
        "--set",
        f"stall_timeout={STALL_S}s",
    )  # fmt: skip  (the workload's key this time, not the option)
    _check(p, t, out, planted, "ckpt-create")


def test_a_hung_fio_gives_up(planted, tmp_path, fake_fio):
    """The give-up is os._exit (no finally runs): fio's job directory is in the run directory,
    which it removes, never left in the system's temporary directory."""
    fake_fio("exec sleep 3600")  # fio that starts and never moves a byte (dies with iobench)
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    tmp.mkdir()
    p, t = _run(
        tmp_path, "", "none", 1, "run", "sequential-write", str(planted.path), *SEQ,
        "--set", "size=8MiB", "--engine", "fio", "--output", str(out), "-q", "--no-history",
        "--stall-timeout", f"{STALL_S}s", env={"PATH": os.environ["PATH"], "TMPDIR": str(tmp)},
    )  # fmt: skip
    _check(p, t, out, planted, "seq-write")
    assert list(tmp.iterdir()) == [], "left in TMPDIR"


def test_a_blocked_cleanup_is_left_to_the_reaper(planted, tmp_path):
    """The run directory cannot be removed while the storage hangs: a detached process removes
    it once the storage answers (here at once: the stand-in blocks only in iobench itself)."""
    out = tmp_path / "out"
    p, _ = _run(
        tmp_path, "pwrite,cleanup", "seq-write", 3, "run", "sequential-write",
        str(planted.path), *SEQ, "--set", "size=8MiB", "--output", str(out), "-q",
        "--no-history", "--stall-timeout", f"{STALL_S}s",
    )  # fmt: skip
    assert p.returncode == 4, p.stderr
    line = one_line(p.stderr)
    assert "is removed by process" in line and "once the storage answers" in line, line
    wait_for(lambda: debris(planted.path) == [], timeout=60, step=0.2)
    assert planted.unchanged()


def test_the_reaper_removes_only_a_run_directory(tmp_path):
    """The reaper works through the descriptors it is handed: a directory that is not the one
    recorded (device and inode), or not named like a run directory, is left alone."""
    from iobench.target import RunDir

    victim = tmp_path / "user-dir"
    victim.mkdir()
    (victim / "f").write_text("keep")
    assert watchdog.reap(None, 5) == 2
    ours = RunDir.create(str(tmp_path), ".iobench-20260101T000000Z-abcdef")
    other = os.open(victim, os.O_RDONLY | os.O_DIRECTORY)
    assert RunDir.from_fds(str(tmp_path), ours.name, ours.root_fd, other, ours.ident) is None
    os.close(other)
    (tmp_path / ours.name / "sub").mkdir()
    assert watchdog.reap(ours, 5) == 0 and not (tmp_path / ours.name).exists()
    assert (victim / "f").read_text() == "keep"
    ours.close()


def test_a_bad_stall_timeout_is_exit_2(cli, planted, tmp_path):
    r = cli("run", "sequential-write", str(planted.path), "--stall-timeout", "soon",
            "--output", str(tmp_path / "out"))  # fmt: skip
    assert r.code == 2 and "--stall-timeout" in one_line(r.err)
    assert debris(planted.path) == [] and planted.unchanged()


def test_stall_timeout_is_no_workload_parameter():
    plain = load_workload("sequential-write")
    keyed = load_workload("sequential-write", {"stall_timeout": "30s"})
    assert keyed.stall_timeout == 30.0 and plain.stall_timeout is None
    assert keyed.spec_hash == plain.spec_hash and "stall_timeout" not in keyed.params


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_progress_resets_the_watch_and_only_phases_in_flight_are_watched():
    clock = _Clock()
    dog = watchdog.Watchdog(session=None, timeout_s=0, clock=clock)  # 0: no thread
    assert dog.idle_s() is None  # nothing in flight
    dog.started("p")
    clock.t = 5
    dog.moved(0, 0)  # the same totals: no progress
    assert dog.idle_s() == 5
    dog.moved(4096, 1)
    clock.t = 7
    assert dog.idle_s() == 2
    dog.ended()
    clock.t = 100
    assert dog.idle_s() is None


def test_timeout_precedence():
    from iobench.run.guard import StallSetting

    armed = StallSetting(armed=True)
    assert armed.timeout_for(None) == watchdog.DEFAULT_STALL_S
    assert armed.timeout_for(12.0) == 12.0
    assert StallSetting(armed=True, timeout_s=0).timeout_for(12.0) == 0  # the command line wins


def test_each_session_owns_its_guard_and_nothing_is_left_in_module_state(tmp_path):
    """Two sessions, one inside the other: each has its own watchdog, and neither leaks into
    the module (no process-wide arming, no stack of watchdogs in flight)."""
    from iobench.run.guard import RunGuard, StallSetting
    from iobench.run.session import RunSession, new_result
    from iobench.target import resolve

    target = resolve(str(tmp_path))
    outer = RunSession(new_result("t"), target, tmp_path / "o", save=False, keep=False)
    inner = RunSession(new_result("t"), target, tmp_path / "i", save=False, keep=False)
    with RunGuard(outer, StallSetting(armed=True, timeout_s=30)) as g1:
        with RunGuard(inner, StallSetting()) as g2:  # not armed: watches nothing
            assert g1.dog is not None and g2.dog is None
            with g1.watching(None, "step"):
                assert g1.dog.phase == "step"
            g2.tick()  # no watchdog: nothing to beat, nothing raised
        g1.set_spec_timeout(12.0)
        assert g1.dog.timeout_s == 30  # the command line's wins
    assert g1.dog is None  # closed with its session
    assert not [n for n in vars(watchdog) if n in ("_active", "_config")]


def test_no_stall_no_exit(planted, tmp_path):
    """A run that moves data never trips a short timeout, and exits 0."""
    out = tmp_path / "out"
    p, _ = _run(
        tmp_path, "", "none", 1, "run", "sequential-write", str(planted.path), *SEQ,
        "--set", "size=8MiB", "--output", str(out), "-q", "--no-history",
        "--stall-timeout", "30s",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert debris(planted.path) == [] and planted.unchanged()


def test_blocked_writes_give_up_through_a_supervising_parent(planted, tmp_path):
    """As on a FUSE client (forced here on a local disk): the run's process forks before its
    first I/O and the parent hands back exit 4 when the watchdog gives up (supervisor.py)."""
    out = tmp_path / "out"
    p, t = _run(
        tmp_path, "pwrite", "seq-write", 3, "run", "sequential-write", str(planted.path), *SEQ,
        "--set", "size=8MiB", "--output", str(out), "-q", "--no-history",
        "--stall-timeout", f"{STALL_S}s", env={"IOBENCH_SUPERVISE": "always"},
    )  # fmt: skip
    _check(p, t, out, planted, "seq-write")
    assert "partial result kept in" in p.stderr


def _started_check(p, elapsed, out, planted, phase):
    assert p.returncode == 4, p.stderr
    assert elapsed < STALL_S + MARGIN_S
    line = one_line(p.stderr)
    assert f"phase {phase}" in line and f"made no progress for {STALL_S} s" in line, line
    assert "the storage is not responding" not in line and "blocked I/O" not in line, line
    assert "the client's process start, not the storage" in line and "RLIMIT_NPROC" in line
    res = json.loads((out / "result.json").read_text())
    assert res["status"] in ("failed", "partial") and "process start" in res["error"]
    assert debris(planted.path) == [] and planted.unchanged()
    return line


def test_worker_processes_that_never_start_are_the_clients_stall(planted, tmp_path):
    """Forked workers that never report in (they block before they run): the line names the
    client's process start, not the storage; they die with the run."""
    out, jobs = tmp_path / "out", os.cpu_count() + 2
    p, t = _run(
        tmp_path, "start", "seq-write", 1, "run", "sequential-write", str(planted.path), *SEQ,
        "--set", "size=4MiB", "--set", f"jobs={jobs}", "--output", str(out), "-q",
        "--no-history", "--stall-timeout", f"{STALL_S}s",
    )  # fmt: skip
    line = _started_check(p, t, out, planted, "seq-write")
    assert f"{jobs} of {jobs} worker processes forked, 0 of them running" in line, line


def test_a_fork_that_never_returns_is_the_clients_stall(planted, tmp_path):
    out, jobs = tmp_path / "out", os.cpu_count() + 2
    p, t = _run(
        tmp_path, "fork", "seq-write", 3, "run", "sequential-write", str(planted.path), *SEQ,
        "--set", "size=4MiB", "--set", f"jobs={jobs}", "--output", str(out), "-q",
        "--no-history", "--stall-timeout", f"{STALL_S}s",
    )  # fmt: skip
    line = _started_check(p, t, out, planted, "seq-write")
    assert f"2 of {jobs} worker processes forked" in line, line


def test_a_fork_refused_at_the_process_limit_is_exit_4_naming_it(planted, tmp_path):
    """fork's EAGAIN, as RLIMIT_NPROC gives it (root is exempt: stood in for): exit 4 at once,
    the line naming the client's process start and the limit, not the storage."""
    out, jobs = tmp_path / "out", os.cpu_count() + 2
    p, t = _run(
        tmp_path, "forkfail", "seq-write", 2, "run", "sequential-write", str(planted.path),
        *SEQ, "--set", "size=4MiB", "--set", f"jobs={jobs}", "--output", str(out), "-q",
        "--no-history", "--stall-timeout", "60s",
    )  # fmt: skip
    assert p.returncode == 4, p.stderr
    assert t < 60  # an error, not a stall: no wait for the watchdog
    line = one_line(p.stderr)
    assert f"cannot start worker process 1 of {jobs}" in line, line
    assert "the client's process start failed, not the storage: RLIMIT_NPROC" in line, line
    assert "ulimit -u" in line and "storage is not responding" not in line
    assert debris(planted.path) == [] and planted.unchanged()


def test_a_slow_cache_drop_of_many_files_is_no_stall(planted, tmp_path):
    """llama3-1t at --scale 1e-6 wrote 262,144 small files; on a busy disk dropping their pages
    before ckpt-open_read took over 60 s and the watchdog blamed the storage, which answered
    every file. Each file dropped is progress: 32 files a rank (2 ranks) at 100 ms each, over
    3 s a drop of one rank's files, a 2 s timeout, exit 0."""
    out = tmp_path / "out"
    p, _ = _run(
        tmp_path, "slowdrop", "none", 100, "run", "checkpoint-smallfile", str(planted.path),
        "--set", "files=32", "--set", 'file_sizes=["4KiB"]', "--set", "dcp=false",
        "--set", "checkpoint_size=1MiB", "--set", "shards=1", "--set", "jobs=2",
        "--set", "direct=false", "--set", "time=1s", "--set", "rounds=2",  # the rest briefly
        "--output", str(out), "-q", "--no-history", "--stall-timeout", f"{STALL_S}s",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    res = json.loads((out / "result.json").read_text())
    assert any(ph["name"] == "ckpt-open_read" and ph["status"] == "ok" for ph in res["phases"])
    assert debris(planted.path) == [] and planted.unchanged()


def test_a_start_under_way_is_named_beside_a_starved_client():
    from iobench.run.stall import Watchdog, client_not_storage

    gib = 1 << 30
    starved = watchdog.starved_client(int(0.9 * gib), 24 * gib, 3, 0, 2)
    both = client_not_storage((1024, 700, 1024), starved)
    assert both.startswith("the client's process start, not the storage: 1024 of 1024 worker")
    assert "700 of them running" in both and both.endswith("0.9 GiB of 24.0 GiB memory available")
    assert client_not_storage(None, starved) == starved
    assert client_not_storage(None, None) == "blocked I/O: the storage is not responding"
    # each fork that returns and each worker that reports in moves the clock; all in: no start
    t = [0.0]
    dog = Watchdog(None, 0, clock=lambda: t[0])
    dog.started("seq-write")
    t[0] = 5.0
    dog.starting(1, 0, 3)
    assert dog.start == (1, 0, 3) and dog.idle_s() == 0.0
    t[0] = 9.0
    dog.starting(1, 0, 3)  # the same count: no progress
    assert dog.idle_s() == 4.0
    dog.starting(3, 3, 3)
    assert dog.start is None and dog.idle_s() == 0.0


def test_a_starved_client_is_told_from_storage_that_does_not_answer():
    # llama3-1t with a process per rank left 0.9 GB of 24 GB: the client, not the storage
    gib = 1 << 30
    line = watchdog.starved_client(int(0.9 * gib), 24 * gib, 3, 0, 2)
    assert line and "client is starved, not the storage: 0.9 GiB of 24.0 GiB" in line
    line = watchdog.starved_client(20 * gib, 24 * gib, 1024, 0, 2)
    assert line and "1024 of its threads runnable on 2 CPUs" in line
    # a thread in uninterruptible I/O wait: the storage's turn; plenty of memory, few threads
    assert watchdog.starved_client(20 * gib, 24 * gib, 1024, 1, 2) is None
    assert watchdog.starved_client(20 * gib, 24 * gib, 8, 0, 2) is None
    assert watchdog.starved_client(None, None, None, None, 2) is None
    avail, total, running, blocked, cpus = watchdog._host_pressure()
    assert total and 0 < avail <= total and running >= 1 and blocked >= 0 and cpus >= 1
