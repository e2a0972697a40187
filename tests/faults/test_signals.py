"""SIGINT and SIGTERM in every kind of phase: exit 130, one line, the result kept and marked
"interrupted", nothing left in the target, user files untouched; a second signal still ends
the run; a DataLoader worker killed is a failed run, with no process left behind.

The signals are sent to the test's own process from inside the phase (a worker calling a
patched ``os.pwrite``/``os.preadv``/``os.stat``/``torch.save``/``FileReader.read``), so each
lands while that phase is in flight, without timing guesses. tests/test_cli_run.py
::test_signal_mid_phase_cleans_up sends them from outside to a real ``python -m iobench``;
tests/test_distributed.py::test_torchrun_rank_killed_mid_phase kills a torchrun rank.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from conftest import (
    SEQ,
    SMALL,
    MainThreadTrip,
    assert_failed_run,
    children,
    debris,
    first_time,
    have,
    iobench_cmd,
    one_line,
    sub_env,
    wait_for,
    wait_no_new_children,
)

SIGNALS = [signal.SIGINT, signal.SIGTERM]
SIGNAL_IDS = ["SIGINT", "SIGTERM"]


def tiny_profile(tmp_path, **kw) -> str:
    """24 files of 64 KiB, batch 4, 2 workers, 10 ms compute (as tests/test_loader.py's)."""
    values = {
        "format": '"raw"', "sample_size": '"64KiB"', "files": 24, "batch_size": 4,
        "compute_s": 0.01, "workers": 2, "prefetch": 2, "au_min": 0.9, "epochs": 2, **kw,
    }  # fmt: skip
    path = tmp_path / "tiny.toml"
    path.write_text('description = "tiny"\n' + "".join(f"{k} = {v}\n" for k, v in values.items()))
    return str(path)


# phase kind -> (command args after TARGET, phase prefix, function the worker calls)
ENGINE_PHASES = {
    "seq-write": (["run", "sequential-write", *SMALL["sequential-write"]], "seq-write", "pwrite"),
    "seq-read": (["run", "sequential-write", *SMALL["sequential-write"]], "seq-read", "preadv"),
    "seq-write-processes": (
        ["run", "sequential-write", "--set", "size=4MiB", "--set", "jobs=3",
         "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--set", "time=none"],
        "seq-write", "pwrite",
    ),  # 3 workers on 2 CPUs: forked worker processes signal the parent
    "rand-read": (["run", "random-read", *SMALL["random-read"]], "rand-read", "preadv"),
    "meta-create": (
        ["run", "checkpoint-smallfile", *SMALL["checkpoint-smallfile"]], "ckpt-create", "pwrite",
    ),
    "meta-stat": (
        ["run", "checkpoint-smallfile", *SMALL["checkpoint-smallfile"]], "ckpt-stat", "stat",
    ),
    "dataset-read": (["run", "dataset-read", *SMALL["dataset-read"]], "dataset-read", "preadv"),
}  # fmt: skip


def _args(target, cmd, tmp_path):
    return [cmd[0], *cmd[1:2], target, *cmd[2:], "--output", tmp_path / "out", "-q"]


@pytest.mark.parametrize("sig", SIGNALS, ids=SIGNAL_IDS)
@pytest.mark.parametrize("kind", list(ENGINE_PHASES))
def test_signal_in_engine_phase(cli, planted, tmp_path, trip, kind, sig):
    cmd, phase, fn = ENGINE_PHASES[kind]
    t = trip(phase, [sig], on=(os, fn))
    r = cli(*_args(planted.path, cmd, tmp_path))
    assert t.fired and t.fired_in.startswith(phase)
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", sig.name)
    last = res["phases"][-1]
    assert last["name"].startswith(phase), [p["name"] for p in res["phases"]]
    assert last["status"] == "partial" and last["error"] == "interrupted"
    assert all(p["status"] == "ok" for p in res["phases"][:-1])


@pytest.mark.parametrize("sig", SIGNALS, ids=SIGNAL_IDS)
def test_signal_in_torch_save_checkpoint(cli, planted, tmp_path, trip, sig):
    import torch

    t = trip(None, [sig], on=(torch, "save"), after=1)
    r = cli(
        "run", "checkpoint-smallfile", planted.path, *SMALL["checkpoint-smallfile"],
        "--output", tmp_path / "out", "-q",
    )  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", sig.name)
    names = [p["name"] for p in res["phases"]]
    # the metadata phases before it are kept; no phase after the checkpoint save ran
    assert names[:4] == ["ckpt-create", "ckpt-stat", "ckpt-open_read", "ckpt-delete"]
    assert not any(n.startswith(("ckpt-load", "ckpt-dcp")) for n in names)


def _arm_loader(monkeypatch, on_read):
    """Call ``on_read(reader)`` in the measured loop's DataLoader workers (forked: they
    inherit the patch and the flag set just before the loop starts)."""
    from iobench import formats, loader

    armed = [False]
    real_loop = loader.run_loop
    real_read = formats.FileReader.read

    def run_loop(cfg, stop=None, first_epoch=0):
        armed[0] = cfg.mode != "cached"  # the calibration loops read cached data
        return real_loop(cfg, stop, first_epoch)

    def read(self, *a, **k):
        if armed[0]:
            on_read()
        return real_read(self, *a, **k)

    monkeypatch.setattr(loader.ranks, "run_loop", run_loop)
    monkeypatch.setattr(formats.FileReader, "read", read)


@pytest.mark.parametrize("sig", SIGNALS, ids=SIGNAL_IDS)
def test_signal_in_loader_loop(cli, planted, tmp_path, monkeypatch, sig):
    pid = os.getpid()
    marker = tmp_path / "fired"

    def on_read():
        if first_time(marker):
            os.kill(pid, sig)  # from a DataLoader worker to the loader process

    _arm_loader(monkeypatch, on_read)
    before = children()
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), "--output",
            tmp_path / "out", "-q")  # fmt: skip
    assert marker.exists()
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", sig.name)
    assert [p["name"] for p in res["phases"]][:1] == ["dataset-write"]
    assert res["loader"] is None  # no figures from a loop that did not finish
    assert wait_no_new_children(before) == set()


@pytest.mark.parametrize("sig", SIGNALS, ids=SIGNAL_IDS)
def test_signal_in_qualify(cli, planted, tmp_path, trip, sig):
    t = trip("seq-write", [sig], on=(os, "pwrite"))
    r = cli("qualify", planted.path, "--quick", "--budget", "5s", "--output", tmp_path / "out",
            "-q", "--no-history")  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", sig.name)
    assert res["phases"][-1]["status"] == "partial"
    assert res["verdict"]["result"] == "fail"
    assert any("did not complete (interrupted" in x for x in res["verdict"]["reasons"])
    assert (tmp_path / "out" / "report.html").is_file()


# -- a second signal still ends it --------------------------------------------------------


@pytest.mark.parametrize("kind", ["seq-write", "seq-write-processes", "dataset-read"], ids=str)
def test_second_signal_ends_the_phase_at_once(cli, planted, tmp_path, monkeypatch, kind):
    """The first signal asks the phase to drain; the second raises in the middle of the
    engine's coordination loop. Either way: 130, result kept, nothing left."""
    import iobench.cli.app

    cmd, phase, _fn = ENGINE_PHASES[kind]
    cmd = [*cmd, "--set", "rate=2MiB"] if kind.startswith("seq") else cmd
    mt = MainThreadTrip(phase, [signal.SIGINT, signal.SIGTERM])
    monkeypatch.setattr(iobench.cli.app, "progress_factory", mt.factory)
    before = children()
    r = cli(*_args(planted.path, cmd, tmp_path))
    assert mt.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted")
    assert res["phases"] == [] or res["phases"][-1]["name"].startswith(phase[:7])
    assert wait_no_new_children(before) == set()


def test_second_signal_in_the_loader_loop(cli, planted, tmp_path, monkeypatch):
    from iobench import loader

    real_iter = loader.RankBatchSampler.__iter__
    armed = [False]
    real_loop = loader.run_loop

    def run_loop(cfg, stop=None, first_epoch=0):
        armed[0] = cfg.mode != "cached"
        return real_loop(cfg, stop, first_epoch)

    def batches(self):
        for k, b in enumerate(real_iter(self)):
            if armed[0] and k == 2:  # the main process hands out batch 2: mid-epoch
                armed[0] = False
                os.kill(os.getpid(), signal.SIGINT)
                os.kill(os.getpid(), signal.SIGINT)  # raises here, inside the DataLoader
            yield b

    monkeypatch.setattr(loader.ranks, "run_loop", run_loop)
    monkeypatch.setattr(loader.RankBatchSampler, "__iter__", batches)
    before = children()
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), "--output",
            tmp_path / "out", "-q")  # fmt: skip
    assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", "SIGINT")
    assert wait_no_new_children(before) == set()


def test_sigint_then_sigterm_from_outside(planted, tmp_path):
    """A real process: Ctrl-C, then the scheduler's SIGTERM 50 ms later."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        iobench_cmd("run", "sequential-write", planted.path, "--set", "size=64MiB",
                    "--set", "rate=8MiB", *SEQ, "--output", out, "--quiet"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sub_env(tmp_path), text=True,
    )  # fmt: skip
    try:
        run_dir = wait_for(lambda: debris(planted.path), timeout=60)[0]
        seq = planted.path / run_dir / "seq"
        wait_for(lambda: seq.is_dir() and any(f.stat().st_size for f in seq.iterdir()))
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "interrupted" in one_line(err)
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "interrupted" and "interrupted" in res["error"]
    # the phase in flight is kept only when the engine hands its figures over (see below)
    assert all(p["status"] == "partial" for p in res["phases"])
    assert debris(planted.path) == [] and planted.unchanged()


def test_second_signal_keeps_the_figures_of_the_phase_in_flight(
    cli, planted, tmp_path, monkeypatch
):
    import iobench.cli.app

    mt = MainThreadTrip("seq-write", [signal.SIGINT, signal.SIGINT])
    monkeypatch.setattr(iobench.cli.app, "progress_factory", mt.factory)
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"],
            "--set", "rate=2MiB", "--output", tmp_path / "out", "-q")  # fmt: skip
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted")
    assert [p["name"] for p in res["phases"]] == ["seq-write"]
    assert res["phases"][0]["status"] == "partial" and res["phases"][0]["bytes"] > 0


# -- a DataLoader worker killed -------------------------------------------------------------


def test_dataloader_worker_killed(cli, planted, tmp_path, monkeypatch):
    marker = tmp_path / "killed"

    def on_read():
        if first_time(marker):
            os.kill(os.getpid(), signal.SIGKILL)  # this worker dies, as the OOM killer does

    _arm_loader(monkeypatch, on_read)
    before = children()
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), "--output",
            tmp_path / "out", "-q")  # fmt: skip
    assert marker.exists()
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "data loader", "worker")
    assert "killed" in res["error"].lower() or "exited unexpectedly" in res["error"]
    assert [p["name"] for p in res["phases"]][:1] == ["dataset-write"]
    assert wait_no_new_children(before) == set(), "no DataLoader worker outlives the run"


# -- the other signals a user, a session or a batch system sends ------------------------------

# SIGHUP: a dropped ssh session; SIGQUIT: the terminal's quit key; SIGUSR1/SIGUSR2: Slurm's
# --signal warning before the time limit; SIGALRM: an alarm; SIGXCPU: ulimit -t reached.
OTHER_STOPS = [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
               signal.SIGXCPU]  # fmt: skip


@pytest.mark.parametrize("sig", OTHER_STOPS, ids=[s.name for s in OTHER_STOPS])
@pytest.mark.parametrize("kind", ["seq-write", "seq-write-processes"])
def test_other_stop_signals_end_the_run_like_sigterm(cli, planted, tmp_path, trip, kind, sig):
    cmd, phase, fn = ENGINE_PHASES[kind]
    t = trip(phase, [sig], on=(os, fn))
    r = cli(*_args(planted.path, cmd, tmp_path))
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", sig.name)
    assert res["phases"][-1]["status"] == "partial"
    assert res["phases"][-1]["error"] == "interrupted"


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGUSR1], ids=["SIGHUP", "SIGUSR1"])
def test_other_stop_signals_in_the_loader_loop(cli, planted, tmp_path, monkeypatch, sig):
    pid = os.getpid()
    marker = tmp_path / "fired"

    def on_read():
        if first_time(marker):
            os.kill(pid, sig)  # from a DataLoader worker to the loader process

    _arm_loader(monkeypatch, on_read)
    before = children()
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), "--output",
            tmp_path / "out", "-q")  # fmt: skip
    assert marker.exists()
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", sig.name)
    assert res["loader"] is None
    assert wait_no_new_children(before) == set()


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGUSR1], ids=["SIGHUP", "SIGUSR1"])
def test_a_stop_signal_before_the_run_starts(cli, planted, tmp_path, monkeypatch, sig):
    """Before the run directory exists there is nothing to clean: 130 and the one line."""
    import iobench.run.runner

    real = iobench.run.runner.resolve

    def resolve(*a, **k):
        os.kill(os.getpid(), sig)
        return real(*a, **k)

    monkeypatch.setattr(iobench.run.runner, "resolve", resolve)
    r = cli(*_args(planted.path, ENGINE_PHASES["seq-write"][0], tmp_path))
    assert r.code == 130, r.err
    assert f"interrupted by {sig.name}" in one_line(r.err)
    assert not (tmp_path / "out").exists()
    assert debris(planted.path) == [] and planted.unchanged()


def _spawn(args, tmp_path, **kw):
    return subprocess.Popen(
        iobench_cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=sub_env(tmp_path, TMPDIR=str(_tmpdir(tmp_path))), **kw,
    )  # fmt: skip


def _one_cpu():
    """Pin the process to one CPU: jobs > CPUs, so the posix engine forks its workers."""
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _tmpdir(tmp_path):
    d = tmp_path / "tmp"
    d.mkdir(exist_ok=True)
    return d


def _in_flight(planted, sub="seq"):
    """Wait until the run directory holds data (the phase is in flight)."""
    run_dir = wait_for(lambda: debris(planted.path), timeout=60)[0]
    where = planted.path / run_dir / sub
    wait_for(lambda: where.is_dir() and any(f.stat().st_size for f in where.iterdir()))


def _finish(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return out, err


#: what fio's command line holds: its job file, in the run directory (engines.fio)
FIO_JOB_DIR = "./.iobench-fio-"


def _procs_mentioning(text: str) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(d))
            except OSError:
                pass
    return found


def test_sighup_to_the_whole_process_group_with_forked_workers(planted, tmp_path):
    """A dropped ssh session hangs up the whole foreground process group: the forked workers
    leave it to iobench, which stops them, keeps what they did and cleans up."""
    out = tmp_path / "out"
    proc = _spawn(["run", "sequential-write", planted.path, "--set", "time=none",
                   "--set", "size=64MiB",
                   "--set", "rate=8MiB", "--set", "jobs=3", "--set", "block_sizes=[]",
                   "--set", "jobs_sweep=[]", "--output", out, "-q"],
                  tmp_path, start_new_session=True, preexec_fn=_one_cpu)  # fmt: skip
    _in_flight(planted)
    os.killpg(proc.pid, signal.SIGHUP)
    _, err = _finish(proc)
    assert proc.returncode == 130, err
    assert "interrupted by SIGHUP" in one_line(err)
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "interrupted"
    assert res["phases"][-1]["status"] == "partial" and res["phases"][-1]["bytes"] > 0
    assert debris(planted.path) == [] and planted.unchanged()
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # no worker of the group is left


@pytest.mark.skipif(not have("fio"), reason="fio is not installed")
def test_sighup_with_fio_stops_fio_and_removes_its_job_directory(planted, tmp_path):
    out = tmp_path / "out"
    proc = _spawn(["run", "sequential-write", planted.path, "--engine", "fio", "--set",
                   "size=64MiB", "--set", "rate=8MiB", *SEQ, "--output", out, "-q"],
                  tmp_path)  # fmt: skip
    _in_flight(planted)
    (run_dir,) = debris(planted.path)
    assert list((planted.path / run_dir).glob(".iobench-fio-*/job.fio")), "its job directory"
    assert _procs_mentioning(FIO_JOB_DIR), "fio runs its job file from the run directory"
    proc.send_signal(signal.SIGHUP)
    _, err = _finish(proc)
    assert proc.returncode == 130, err
    assert "interrupted by SIGHUP" in one_line(err)
    assert json.loads((out / "result.json").read_text())["status"] == "interrupted"
    # fio's job directory was in the run directory: removed with it
    assert debris(planted.path) == [] and planted.unchanged()
    assert _procs_mentioning(FIO_JOB_DIR) == [], "fio outlived iobench"
    assert list(_tmpdir(tmp_path).iterdir()) == [], "nothing left under TMPDIR"


@pytest.mark.skipif(not have("fio"), reason="fio is not installed")
def test_fio_dies_with_a_sigkilled_iobench(planted, tmp_path):
    """SIGKILL cannot be handled: the run directory stays (documented), but fio must not go
    on writing into the target."""
    proc = _spawn(["run", "sequential-write", planted.path, "--engine", "fio", "--set",
                   "size=64MiB", "--set", "rate=8MiB", *SEQ, "--output", tmp_path / "out",
                   "-q"], tmp_path)  # fmt: skip
    _in_flight(planted)
    assert _procs_mentioning(FIO_JOB_DIR)
    proc.kill()
    _finish(proc)
    wait_for(lambda: _procs_mentioning(FIO_JOB_DIR) == [], timeout=10)
    for d in debris(planted.path):
        shutil.rmtree(planted.path / d)  # what SIGKILL leaves (RELIABILITY.md), by hand
    assert planted.unchanged()


# -- pacing wakes on the stop flag ---------------------------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        # 1 B/s: a phase that would outlast a week is refused at planning, so 256 KiB (3 days)
        [
            "--set",
            "rate=1",
            "--set",
            "time=1h",
            "--set",
            "size=256KiB",
            "--set",
            "block_size=64KiB",
        ],
        ["--set", "rate=1KiB", "--set", "jobs=3"],  # on one CPU: forked workers
        ["--set", "block_size=16MiB", "--set", "size=32MiB", "--set", "rate=1MiB"],
        [
            "--set",
            "rate=1",
            "--set",
            "time=1h",
            "--set",
            "size=256KiB",
            "--set",
            "block_size=64KiB",
            "--engine",
            "fsspec",
        ],
    ],
    ids=["1B/s", "1KiB/s-forked", "16MiB-at-1MiB/s", "fsspec-1B/s"],
)
def test_a_paced_run_stops_on_the_first_signal(planted, tmp_path, extra):
    """A worker sleeping towards a far-off rate deadline still stops at once."""
    out = tmp_path / "out"
    proc = _spawn(["run", "sequential-write", planted.path, *SEQ, *extra, "--output", out,
                   "-q"], tmp_path, preexec_fn=_one_cpu)  # fmt: skip
    _in_flight(planted)
    proc.send_signal(signal.SIGINT)
    _, err = _finish(proc, timeout=30)  # without the fix: never (only SIGKILL ended it)
    assert proc.returncode == 130, err
    assert "interrupted by SIGINT" in one_line(err)
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "interrupted" and res["phases"][-1]["bytes"] > 0
    assert debris(planted.path) == [] and planted.unchanged()


# -- ulimits ----------------------------------------------------------------------------------


def test_a_file_size_limit_fails_the_phase_naming_it(planted, tmp_path):
    """ulimit -f: SIGXFSZ would kill the process; ignored, the write fails with EFBIG."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))

    out = tmp_path / "out"
    proc = _spawn(["run", "sequential-write", planted.path, *SMALL["sequential-write"],
                   "--output", out, "-q"], tmp_path, preexec_fn=limit)  # fmt: skip
    _, err = _finish(proc)
    assert proc.returncode == 4, err
    line = one_line(err)
    assert "file size limit reached (EFBIG; ulimit -f)" in line and "seq-write" in line
    res = json.loads((out / "result.json").read_text())
    assert res["status"] in ("partial", "failed")
    assert res["phases"][0]["name"] == "seq-write" and res["phases"][0]["bytes"] > 0
    assert debris(planted.path) == [] and planted.unchanged()


def test_a_suspended_phase_says_its_figures_include_the_pause(cli, planted, tmp_path, trip):
    """Ctrl-Z then fg: the phase in flight measured the pause; SIGCONT is how it knows."""
    t = trip("seq-write", [signal.SIGCONT], on=(os, "pwrite"))
    r = cli(*_args(planted.path, ENGINE_PHASES["seq-write"][0], tmp_path))
    assert r.code == 0, r.err
    assert t.fired
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    warned = {p["name"]: any("suspended" in w for w in p["warnings"]) for p in res["phases"]}
    assert warned == {"seq-write": True, "seq-read": False}
    assert debris(planted.path) == [] and planted.unchanged()


def test_sigstop_sigcont_from_outside(planted, tmp_path):
    out = tmp_path / "out"
    proc = _spawn(["run", "sequential-write", planted.path, "--set", "size=16MiB",
                   "--set", "rate=8MiB", *SEQ, "--output", out, "-q"], tmp_path)  # fmt: skip
    _in_flight(planted)
    proc.send_signal(signal.SIGSTOP)
    time.sleep(0.2)
    proc.send_signal(signal.SIGCONT)
    _, err = _finish(proc)
    assert proc.returncode == 0, err
    res = json.loads((out / "result.json").read_text())
    assert any("suspended" in w for w in res["phases"][0]["warnings"])
    assert debris(planted.path) == [] and planted.unchanged()


# -- a signal as the command exits ------------------------------------------------------------


def test_a_signal_during_python_exit_changes_nothing(tmp_path):
    """torch and others run atexit handlers: a Ctrl-C then must not print a traceback or
    turn the exit status decided by the command into another."""
    code = (
        "import atexit, os, signal, sys\n"
        "atexit.register(lambda: os.kill(os.getpid(), signal.SIGINT))\n"
        "from iobench.cli.app import main\n"
        "sys.argv = ['iobench', 'workloads']\n"
        "main()\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=sub_env(tmp_path), timeout=60)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stderr == "" and "sequential-write" in p.stdout


def test_sighup_to_torchrun_stops_every_rank_and_cleans_up(planted, tmp_path):
    """torchrun passes the SIGHUP of a dropped session on to its ranks: each stops as on
    SIGTERM, removes its own run directory, and rank 0 keeps the result."""
    out = tmp_path / "out"
    env = sub_env(tmp_path)
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "iobench", "run", "sequential-write", str(planted.path), "--set", "time=none",
         "--set", "size=64MiB",
         "--set", "rate=4MiB", "--set", "jobs=1", "--set", "block_sizes=[]", "--set",
         "jobs_sweep=[]", "--output", str(out), "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    try:
        for rank in (0, 1):
            wait_for(lambda r=rank: list(planted.path.glob(f".iobench-*-r{r}/seq/*.dat")), 120)
        proc.send_signal(signal.SIGHUP)
        text, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ours = [ln for ln in text.splitlines() if ln.startswith("iobench: error:")]
    assert ours == ["iobench: error: interrupted by SIGHUP"] * 2, text[-3000:]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "interrupted" and "SIGHUP" in res["error"]
    assert debris(planted.path) == [] and planted.unchanged()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open(f"/proc/{d}/stat") as f:
                        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
                if ppid == parent and int(d) not in out:
                    out.add(int(d))
                    todo.append(int(d))
    return out


def test_a_sigkilled_loader_leaves_no_rank_or_worker_reading(planted, tmp_path):
    """SIGKILL (the OOM killer) cannot be handled: the run directory stays (documented), but
    the loader's rank processes and their DataLoader workers die with it."""
    proc = _spawn(["loader", planted.path, "--profile", tiny_profile(tmp_path, epochs=1000),
                   "--gpus", "2", "--output", tmp_path / "out", "-q"], tmp_path)  # fmt: skip

    def forks() -> set[int] | None:
        # 2 ranks, each with its 2 DataLoader workers (forked: iobench's own command line):
        # the measured loop is running
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            mine = f.read()
        found = set()
        for k in _descendants(proc.pid):
            try:
                with open(f"/proc/{k}/cmdline", "rb") as f:
                    if f.read() == mine:
                        found.add(k)
            except OSError:
                pass
        return found if len(found) >= 6 else None

    try:
        kids = wait_for(forks, 120)
    finally:
        proc.kill()
        _finish(proc)
    wait_for(lambda: not any(_alive(k) for k in kids), timeout=15)
    for d in debris(planted.path):
        shutil.rmtree(planted.path / d)  # what SIGKILL leaves (RELIABILITY.md), by hand
    assert planted.unchanged()


def test_a_second_signal_while_fio_drains_kills_it(cli, planted, tmp_path, fake_fio, monkeypatch):
    """The first Ctrl-C asks fio to stop (SIGINT, then a grace period); a second one cuts the
    grace short, and fio (here one that ignores SIGINT) is killed, not left running (a third
    one used to escape the second grace period and leave fio behind)."""
    import tempfile
    import threading

    pidfile = tmp_path / "fio.pid"
    fake_fio(f"echo $$ > '{pidfile}'\ntrap '' INT\nexec sleep 60")  # (exec keeps the pid)
    tmp = _tmpdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # where a stray temporary would go
    seen: list[int] = []

    def twice() -> None:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=60)
        seen.append(int(pidfile.read_text()))
        for _ in range(3):  # an impatient user: each one must still leave no fio behind
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.3)

    # a signal the sender still sends after the run has ended must not reach pytest
    before = signal.signal(signal.SIGINT, lambda *_: None)
    sender = threading.Thread(target=twice, daemon=True)
    sender.start()
    try:
        r = cli("run", "sequential-write", planted.path, "--engine", "fio", *SEQ,
                "--set", "size=4MiB", "--output", tmp_path / "out", "-q")  # fmt: skip
        sender.join(10)
    finally:
        signal.signal(signal.SIGINT, before)
    assert seen, "fio never ran"
    assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", "SIGINT")
    assert not any(_alive(p) for p in seen), "fio outlived the run"
    assert list(tmp.iterdir()) == [], "something was left under TMPDIR"
    assert debris(planted.path) == [], "fio's job directory (in the run directory) was left"


def test_a_signal_while_the_result_is_saved_does_not_lose_it(cli, planted, tmp_path, monkeypatch):
    """Every phase is measured: SIGTERM during the save has nothing left to stop."""
    from iobench.result import file as results

    real = results.save

    def save(*a, **k):
        os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(results, "save", save)
    r = cli(*_args(planted.path, ENGINE_PHASES["seq-write"][0], tmp_path))
    assert r.code == 0, r.err
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["status"] == "complete" and len(res["phases"]) == 2
    assert debris(planted.path) == [] and planted.unchanged()
