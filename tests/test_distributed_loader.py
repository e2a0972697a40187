"""The loader and qualify across many clients (torchrun): the pieces over a stand-in
communicator, then real launches of 3 (loader) and 2 (qualify) ranks on this host, and a rank
SIGKILLed in the middle of the training loop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_distributed import (
    FakeComm,
    _env,
    _exit_codes,
    _free_port,
    _kill_rank,
    _torchrun,
    _user_target,
)
from test_loader import tiny_profile

from iobench.core.coordinator import SingleProcess
from iobench.core.datagen import dataset_paths
from iobench.core.errors import EngineError, Interrupted, UsageError
from iobench.distributed import StepBarrier, TorchCoordinator, is_lead_rank
from iobench.loader import Calibration, DatasetIndex, own_steps, shard_indexes
from iobench.qualify.suite import plan_qualify
from iobench.result.file import PhaseResult, RunResult
from iobench.run.sweep import sweep_from_phases, total_readers
from iobench.spec.workload import load_profile
from iobench.target import RUN_DIR_PREFIX, StopFlag

REPO = Path(__file__).resolve().parents[1]


def _hooks(rank: int, world: int, peers: dict | None = None, shared: bool = True):
    hooks = TorchCoordinator(FakeComm(rank, world, peers), hostname="h")
    hooks.hosts = ["h"] * world
    hooks.run_id = "RID"
    hooks.shared_target = shared
    return hooks


def _shard(world: int, rank: int, n_files: int) -> tuple:
    """What rank ``rank`` wrote of ``n_files``: files i ≡ rank (mod world), sizes from i."""
    every = dataset_paths(n_files, "bin")
    mine = range(rank, n_files, world)
    return (
        tuple(every[i] for i in mine),
        tuple((1000 + i,) for i in mine),
        tuple(1000 + i for i in mine),
    )


# -- the dataset across ranks --------------------------------------------------------------------


def test_every_rank_loads_the_whole_dataset_in_global_order():
    world, n = 3, 7
    peers = {k: _shard(world, k, n) for k in range(world)}
    hooks = _hooks(1, world, peers)
    paths, sizes, nbytes = peers[1]
    own = DatasetIndex("/t/.iobench-RID-r1", "raw", paths, sizes, nbytes, 1)
    index, probe = shard_indexes(hooks, own, n)
    every = dataset_paths(n, "bin")
    assert index.n_files == n
    for i in range(n):
        k = i % world
        prefix = "" if k == 1 else f"../{RUN_DIR_PREFIX}RID-r{k}/"
        assert index.paths[i] == prefix + every[i]
        assert index.file_bytes[i] == 1000 + i and index.sizes[i] == (1000 + i,)
    assert index.path(0) == f"/t/.iobench-RID-r1/../{RUN_DIR_PREFIX}RID-r0/{every[0]}"
    # the storage probe reads the next rank's files (IOR -C), never this rank's own
    assert probe.paths == tuple(f"../{RUN_DIR_PREFIX}RID-r2/{every[i]}" for i in (2, 5))


def test_ranks_that_cannot_see_each_other_read_their_own_files():
    world, n = 3, 7
    peers = {k: _shard(world, k, n) for k in range(world)}
    hooks = _hooks(0, world, peers, shared=False)
    own = DatasetIndex("/t/r0", "raw", *peers[0], 1)
    index, probe = shard_indexes(hooks, own, n)
    assert index is own and probe is own


def test_own_files_give_the_fewest_steps_of_any_rank():
    own = DatasetIndex("/t/r0", "raw", *_shard(1, 0, 40), 1)  # 40 files: 10 steps of 4
    assert own_steps(_hooks(0, 3, {1: 9, 2: 7}), own, 4, 1, None) == 7
    assert own_steps(_hooks(0, 3, {1: 9, 2: 9}), own, 4, 1, 5) == 5
    with pytest.raises(EngineError, match="1 step"):
        own_steps(_hooks(0, 3, {1: 1, 2: 9}), own, 4, 1, None)


def test_calibrations_are_averaged_over_ranks():
    a = Calibration(0.01, 0.002, 1e-4, 2e-4, 1000.0, 10, 8, 0.02, 0.001)
    b = Calibration(0.03, 0.004, 3e-4, 4e-4, 3000.0, 12, 6, 0.06, 0.003)
    m = Calibration.mean([a, b])
    assert m.step_s == pytest.approx(0.02) and m.overhead_s == pytest.approx(0.003)
    assert m.decode_s_per_sample == pytest.approx(2e-4)
    assert m.sleep_overshoot_s == pytest.approx(0.002)
    assert (m.steps, m.files) == (10, 6)
    assert Calibration.mean([a]) is a


# -- collectives the loader and qualify add ------------------------------------------------------


def test_a_refusal_on_any_rank_ends_every_rank():
    hooks = _hooks(1, 3, {0: ("output directory out is not empty", "pass a new --output")})
    with pytest.raises(UsageError, match="rank 0: output directory out is not empty") as e:
        hooks.agreed(lambda: 42)
    assert e.value.hint == "pass a new --output"
    assert _hooks(1, 3, {}).agreed(lambda: 42) == 42  # nobody refused (peers answer None)
    with pytest.raises(UsageError, match="^mine$"):  # this rank's own refusal, as it was
        _hooks(1, 3, {}).agreed(lambda: (_ for _ in ()).throw(UsageError("mine")))
    assert SingleProcess().agreed(lambda: 7) == 7


def test_step_barrier_stops_every_rank_at_the_same_step():
    stop = StopFlag()
    StepBarrier(_hooks(0, 2, {1: False}), stop).wait()  # nobody stopping: a plain barrier
    with pytest.raises(Interrupted, match="another rank was stopped"):
        StepBarrier(_hooks(0, 2, {1: True}), stop).wait()
    stop.set(signal.SIGINT)
    with pytest.raises(Interrupted, match="SIGINT"):
        StepBarrier(_hooks(0, 2, {1: False}), stop).wait()


def test_lead_rank_from_the_environment():
    assert is_lead_rank({})
    assert is_lead_rank({"WORLD_SIZE": "3", "RANK": "0"})
    assert not is_lead_rank({"WORLD_SIZE": "3", "RANK": "2"})


# -- figures across ranks ------------------------------------------------------------------------


def _dataset_phase(name: str, ranks: int) -> PhaseResult:
    return PhaseResult(
        name=name, op="read", bytes=100 << 20, ops=100, concurrency=4 * ranks,
        bandwidth_bps=float(50 << 20), iops=50.0, params={"ranks": ranks} if ranks > 1 else {},
    )  # fmt: skip


def test_sweep_levels_count_the_readers_of_every_rank():
    assert total_readers(_dataset_phase("dataset-shuffled-r4", 3)) == 12
    assert total_readers(_dataset_phase("dataset-shuffled-r4", 1)) == 4
    points = sweep_from_phases(
        [_dataset_phase("dataset-shuffled-r1", 3), _dataset_phase("dataset-shuffled-r4", 3)]
    )
    assert [p.readers for p in points] == [3, 12]


def test_qualify_plan_for_many_ranks():
    prof = load_profile("retinanet-b200")
    one = plan_qualify(prof, 8, budget_s=30, quick=True, free_bytes=100 << 30)
    three = plan_qualify(prof, 8, budget_s=30, quick=True, free_bytes=100 << 30, ranks=3)
    assert one.loader["gpus"] == 1 and three.loader["gpus"] == 3
    assert three.loader["files"] >= one.loader["files"]
    biggest = max(s.space_bytes for s in three.steps)
    assert three.space_bytes == max(3 * biggest, three.loader["space_bytes"])
    assert one.spec_hash() != three.spec_hash()  # not comparable with a one-client run


# -- the command line under a stand-in launch ----------------------------------------------------


@pytest.fixture
def three_ranks(monkeypatch):
    """``coordinator_from_env`` answers rank 0 of 3 whose peers accept everything."""
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "0")
    hooks = _hooks(0, 3, {})
    monkeypatch.setattr("iobench.distributed.coordinator_from_env", lambda environ=None: hooks)
    return hooks


def test_loader_gpus_must_match_the_ranks(cli, planted, tmp_path, three_ranks):
    prof = tiny_profile(tmp_path)
    r = cli("loader", planted.path, "--profile", prof, "--gpus", "4", "--no-history")
    assert r.code == 2
    assert "--gpus 4 but torchrun launched 3 ranks" in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert planted.unchanged()


def test_qualify_dry_run_under_torchrun_needs_no_group(cli, planted, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "1")

    def no_group(environ=None):
        raise AssertionError("a dry run joined the process group")

    monkeypatch.setattr("iobench.distributed.coordinator_from_env", no_group)
    r = cli("qualify", planted.path, "--quick", "--dry-run")
    assert r.code == 0 and r.out == ""  # rank 1 prints nothing; rank 0 prints the plan
    monkeypatch.setenv("RANK", "0")
    r = cli("qualify", planted.path, "--quick", "--dry-run")
    assert r.code == 0 and "nothing was written" in r.out
    assert planted.unchanged()


def test_report_names_the_clients_and_their_spread():
    from iobench import report

    p = _dataset_phase("seq-write", 3)
    p.op = "write"
    p.bandwidth_stonewall_bps = float(45 << 20)
    p.extra = {
        "world": 3, "hosts": 2,
        "rank_spread": {"unit": "bandwidth_bps", "min": float(10 << 20), "median": float(16 << 20),
                        "max": float(20 << 20), "slowest": 2, "max_over_min": 2.0},
        "host_spread": {"unit": "bandwidth_bps", "slowest": "b", "max_over_min": 1.5},
    }  # fmt: skip
    run = RunResult(run_id="x", command="iobench run", started_at="2026-11-30T00:00:00+00:00")
    run.phases = [p]
    text = report.render_terminal(run)
    assert "3 ranks on 2 hosts (torchrun)" in text
    line = next(
        ln for ln in text.splitlines() if ln.strip().startswith("seq-write") and "x2.00" in ln
    )
    assert "rank 2 x2.00" in line and "45.0 MiB/s" in line and "b x1.50" in line
    html = report.render_html(run)
    assert "Clients (per-rank spread)" in html and "3 ranks on 2 hosts" in html
    run.loader = {
        "profile": "p", "gpus": 2, "au": 0.7,
        "ranks": [{"rank": 0, "host": "a", "epochs": [{"au": 0.9}, {"au": 0.8}]},
                  {"rank": 1, "host": "b", "epochs": [{"au": 0.5}, {"au": 0.6}]}],
    }  # fmt: skip
    text = report.render_terminal(run)
    assert "min 55.0% (rank 1 on b), max 85.0% (rank 0 on a)" in text


# -- real launches -------------------------------------------------------------------------------


@pytest.mark.slow
def test_torchrun_loader_three_ranks_one_result(tmp_path):
    target, before = _user_target(tmp_path)
    prof = tiny_profile(tmp_path, files=36, workers=1, epochs=2)
    out = tmp_path / "out"
    args = ["loader", str(target), "--profile", str(prof), "--output", str(out), "--no-history",
            "-q"]  # fmt: skip
    proc = _torchrun(args, _env(), 3)
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, log[-3000:]
    assert sorted(os.listdir(out)) == ["result.json"]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "complete", res.get("error")
    ld = res["loader"]
    assert ld["gpus"] == 3 and ld["hosts"] == 1 and ld["dataset"]["files"] == 36
    assert ld["steps"] == 3  # 36 files, one per sample, dealt to 3 ranks, batch 4
    assert [r["rank"] for r in ld["ranks"]] == [0, 1, 2]
    for r in ld["ranks"]:
        assert len(r["epochs"]) == 2
        for ep in r["epochs"]:
            assert ep["steps"] == 3 and ep["samples"] == 2 * 4  # the first step is left out
    assert 0 < ld["au"] <= 1 and ld["predicted_au"] is not None
    write, probe = res["phases"][0], res["phases"][1]
    assert write["name"] == "dataset-write" and write["ops"] == 36
    assert [r["ops"] for r in write["ranks"]] == [12, 12, 12]
    assert probe["name"] == "dataset-shuffled-r1" and probe["concurrency"] == 3
    assert [r["read_from"] for r in probe["ranks"]] == [1, 2, 0]  # another rank's files
    assert probe["ops"] == 36
    assert "3 GPUs" in log and "one rank per GPU on 1 host" in log
    assert log.count("Data loader (measured)") == 1  # rank 0 alone prints
    assert set(os.listdir(target)) == before


@pytest.mark.slow
def test_torchrun_refusal_on_rank_0_is_exit_2_everywhere(tmp_path):
    """Only rank 0 writes the result, so only it checks the output directory: every rank
    refuses with it, exits 2 (none killed by torchrun's teardown), and nothing is written."""
    target, before = _user_target(tmp_path)
    prof = tiny_profile(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "result.json").write_text("{}")
    args = ["loader", str(target), "--profile", str(prof), "--output", str(out), "--no-history",
            "-q"]  # fmt: skip
    proc = _torchrun(args, _env(), 2)
    log, _ = proc.communicate(timeout=120)
    assert _exit_codes(log) == {0: 2, 1: 2}, log[-3000:]
    assert f"rank 0: {out} already holds a result.json" in log
    assert (out / "result.json").read_text() == "{}"
    assert set(os.listdir(target)) == before


@pytest.mark.slow
def test_torchrun_qualify_two_ranks(tmp_path):
    target, before = _user_target(tmp_path)
    out = tmp_path / "out"
    prof = tiny_profile(tmp_path, files=48)  # 2 workers a rank, not the default's 8 (2 cores)
    args = ["qualify", str(target), "--quick", "--budget", "6s", "--output", str(out),
            "--no-history", "-q", "--profile", str(prof)]  # fmt: skip
    proc = _torchrun(args, _env(), 2)
    log, _ = proc.communicate(timeout=400)
    # The verdict is the storage's (and, on a loaded 2-core machine, the CPU's) to give: the test
    # checks that both ranks agree on it and exit by it, not which way it went.
    assert proc.returncode in (0, 1), log[-3000:]
    assert sorted(os.listdir(out)) == ["report.html", "result.json"]
    res = json.loads((out / "result.json").read_text())
    verdict = res["verdict"]["status"]  # --quick: a pass is "pass (indicative)", exit 0
    assert res["status"] == "complete"
    assert verdict == ("pass (indicative)" if proc.returncode == 0 else "fail")
    for p in res["phases"]:
        assert p["params"]["ranks"] == 2, p["name"]
        assert [r["rank"] for r in p["ranks"]] == [0, 1]
        assert p["bytes"] == sum(r["bytes"] for r in p["ranks"])
    assert res["loader"]["gpus"] == 2 and len(res["loader"]["ranks"]) == 2
    assert log.count(f"verdict: {verdict.upper()}") == 1 and log.count("verdict: ") == 1
    assert "Clients (per-rank spread)" in (out / "report.html").read_text()
    assert set(os.listdir(target)) == before


@pytest.mark.slow
def test_torchrun_loader_rank_killed_mid_loop(tmp_path):
    target, before = _user_target(tmp_path)
    # 0.2 s steps, 20 epochs of 3 steps: the loop lasts about 12 s
    prof = tiny_profile(tmp_path, files=36, workers=1, epochs=20, compute_s=0.2)
    out = tmp_path / "out"
    tag = f"killed-{os.getpid()}-{time.time_ns()}"
    args = ["loader", str(target), "--profile", str(prof), "--output", str(out), "--no-history",
            "-q"]  # fmt: skip
    proc = _torchrun(args, _env(IOBENCH_DIST_TIMEOUT="15", IOBENCH_TEST_TAG=tag), 3)

    def dataset_written() -> None:
        deadline = time.monotonic() + 120
        while not list(target.glob(f"{RUN_DIR_PREFIX}*-r1/data")):
            assert time.monotonic() < deadline and proc.poll() is None, "rank 1 never wrote"
            time.sleep(0.05)

    # 8 s on: past the probe and the calibration, inside the training loop
    log, took = _kill_rank(proc, dataset_written, 8)
    assert took <= 60, log[-3000:]
    codes = _exit_codes(log)
    assert codes[1] == -9 and codes[0] == 4 and codes[2] == 4, log[-3000:]
    assert set(os.listdir(target)) == before  # every rank's run dir is gone, nothing else
    res = json.loads((out / "result.json").read_text())
    assert res["status"] in ("failed", "partial")
    assert "rank" in res["error"]
    assert _tagged(tag) == []  # no rank or DataLoader worker left behind


def _tagged(tag: str) -> list[int]:
    """Processes still alive whose environment carries ``IOBENCH_TEST_TAG=tag``."""
    left = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"IOBENCH_TEST_TAG={tag}".encode() in env:
            left.append(pid)
    return left


@pytest.mark.slow
def test_ranks_on_unshared_storage_read_their_own_files(tmp_path):
    """torchrun's environment by hand, each rank given its own directory (node-local disks):
    the ranks cannot see each other's files, so each loader reads the files it wrote, with the
    same number of steps on every rank, and the result says so."""
    prof = tiny_profile(tmp_path, files=21, workers=1, epochs=1)  # ranks get 11 and 10 files
    out = tmp_path / "out"
    port = str(_free_port())
    procs, targets = [], []
    for rank in range(2):
        target = tmp_path / f"local{rank}"
        target.mkdir()
        targets.append(target)
        argv = [sys.executable, "-m", "iobench", "loader", str(target), "--profile", str(prof),
                "--output", str(out), "--no-history", "-q"]  # fmt: skip
        env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE="2", RANK=str(rank),
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2")  # fmt: skip
        procs.append(
            subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outputs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outputs, strict=True):
        assert p.returncode == 0, err[-3000:]
    assert outputs[1][0] == ""  # rank 1 prints nothing
    res = json.loads((out / "result.json").read_text())
    ld = res["loader"]
    assert ld["gpus"] == 2 and ld["steps"] == 2  # 10 own files, batch 4: 2 steps on each rank
    assert any("do not see each other's run directories" in w for w in res["warnings"])
    probe = res["phases"][1]
    assert [r["read_from"] for r in probe["ranks"]] == [0, 1]  # their own
    assert [r["ops"] for r in probe["ranks"]] == [11, 10]
    for t in targets:
        assert os.listdir(t) == []
