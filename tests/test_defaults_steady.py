"""The shipped workloads' defaults: time-based phases that end once steady (fio's steadystate),
with a stated limit; a write's first pass is never cut by it; ``--time`` stays exact."""

from __future__ import annotations

import json

import pytest

from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.posix import PosixEngine
from iobench.result.steady import SteadyCriterion
from iobench.spec.workload import load_workload
from iobench.target import StopFlag

MiB = 1 << 20
ONE = ["--set", "jobs=1", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "-q", "--json"]


@pytest.mark.parametrize("name", ["sequential-write", "random-read", "dataset-read"])
def test_shipped_workloads_are_time_based_and_end_once_steady(name):
    params = load_workload(name).params
    assert params["steady"] is True
    assert params["time"] == 20.0


def test_a_run_ends_each_phase_once_steady_within_its_limit(cli, tmp_path):
    """Paced, a phase is as steady as it gets: it ends steady long before its 30 s limit."""
    out = tmp_path / "out"
    r = cli("run", "sequential-write", tmp_path, *ONE, "--set", "size=2MiB",
            "--set", "rate=16MiB", "--set", "read_back=false", "--set", "time=30s",
            "--output", out, "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    (phase,) = json.loads(r.out)["phases"]
    assert phase["extra"]["ended"] == "steady" and phase["steady"] is True
    assert phase["elapsed_s"] < 15


def test_time_option_is_exact_not_a_limit(cli, tmp_path):
    """--time T runs each phase T (as before the steady defaults), even when steady sooner."""
    r = cli("run", "sequential-write", tmp_path, *ONE, "--set", "size=1MiB",
            "--set", "rate=16MiB", "--set", "read_back=false", "--time", "3s",
            "--output", tmp_path / "out", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    (phase,) = json.loads(r.out)["phases"]
    assert "ended" not in phase["extra"]
    assert phase["elapsed_s"] >= 2.9


def test_steady_state_does_not_cut_a_writes_first_pass(tmp_path):
    """A time-based write fills its files once before anything but a stop may end it: what a
    read-back reads was all written by this phase (steady at ~0.3 s, the fill takes ~1.5 s)."""
    easy = SteadyCriterion("bw", "slope", 100.0, 0.3, 0.0)  # steady at the first window
    spec = PhaseSpec(
        "w", "write", (FileSpec("a.dat", 6 * MiB),), jobs=1, block_size=256 << 10,
        time_s=60.0, rate_bps=4 * MiB, steady=easy,
    )  # fmt: skip
    res = PosixEngine("threads").run(spec, EngineContext(str(tmp_path), StopFlag()))
    assert res.status == "ok" and res.extra["ended"] == "steady"
    assert (tmp_path / "a.dat").stat().st_size == 6 * MiB
    assert res.bytes >= 6 * MiB


def _phase(name, elapsed, steady, **extra):
    return {"name": name, "elapsed_s": elapsed, "steady": steady, "extra": extra}


def test_advice_names_the_option_for_each_kind_of_indicative_phase():
    from iobench.result.steady_advice import steady_advice

    steady = _phase("seq-read", 3.0, True)
    assert steady_advice([steady], {"generator": "sequential", "params": {}}) is None
    short = _phase("seq-write", 0.4, False)
    line = steady_advice([short, steady], {"generator": "sequential", "params": {"time": None}})
    assert line.startswith("iobench: 1 of 2 phases indicative (seq-write: ")
    assert line.endswith("add --set time=20s --set steady=true")
    limited = _phase("seq-write", 20.0, False, ended="time limit")
    wl = {"generator": "sequential", "params": {"time": 20.0, "steady": True}}
    assert steady_advice([limited, limited], wl).endswith("add --set time=40s")
    wl = {"generator": "sequential", "params": {"time": 5.0, "steady": False}}
    assert steady_advice([limited], wl).endswith("add --time 10s")
    layout = _phase("dataset-write", 1.0, False)  # files once: more of them, at the rate seen
    wl = {"generator": "dataset", "params": {"files": 1000, "time": 20.0, "steady": True}}
    assert steady_advice([layout], wl).endswith("add --set files=5000")
    skewed = _phase("ckpt", 3.0, True, start_skew={"flagged": True, "seconds": 0.5, "share": 0.2})
    assert "no workload option" in steady_advice([skewed], {"generator": "checkpoint"})


def test_a_run_with_indicative_phases_ends_with_the_option(cli, tmp_path):
    r = cli("run", "sequential-write", tmp_path, *ONE[:-1], "--set", "size=1MiB",
            "--set", "time=none", "--output", tmp_path / "out", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    last = r.err.strip().splitlines()[-1]
    assert last.startswith("iobench: 2 of 2 phases indicative (seq-write: ")
    assert last.endswith("for steady figures add --set time=20s --set steady=true")


def test_a_loader_run_whose_au_per_epoch_is_not_steady_is_told_to_run_more_epochs():
    """The loader's AU over epochs is judged as rounds are (after the first epoch, the last 3
    within 10 % of their mean): not steady, the line names --epochs."""
    from iobench.result.steady import epochs_steady
    from iobench.result.steady_advice import steady_advice

    wl = {"generator": "loader", "params": {"epochs": 5}}
    ok = _phase("dataset-write", 3.0, True)
    steady = {"au_per_epoch": [0.40, 0.90, 0.91, 0.89, 0.90]}  # the first epoch is the ramp
    assert epochs_steady(steady["au_per_epoch"]) and steady_advice([ok], wl, steady) is None
    swinging = {"au_per_epoch": [0.5, 0.9, 0.6, 0.8, 0.6]}
    line = steady_advice([ok], wl, swinging)
    assert line.startswith("iobench: 1 of 2 phases indicative (loader: AU per epoch not steady")
    assert line.endswith("for steady figures add --epochs 10")
    few = steady_advice([ok], {"generator": "loader", "params": {"epochs": 2}},
                        {"au_per_epoch": [0.9, 0.9]})  # fmt: skip
    assert few.endswith("add --epochs 4")
    assert steady_advice([ok], {"generator": "sequential", "params": {}}, swinging) is None
