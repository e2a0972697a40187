"""Checkpoint phases repeat whole save/load rounds until the per-round rate is steady (fio's
``bw:10%`` over rounds), their ``time`` passes or ``rounds`` ran; judged over their rounds, and
the end-of-run line names ``--set rounds=N`` / ``--set time=T`` when they were not steady."""

from __future__ import annotations

import json
import time

import pytest
from conftest import SMALL

from iobench.core.coordinator import SingleProcess
from iobench.core.errors import EngineError
from iobench.core.plan import FLOOR_READ_BPS, FLOOR_WRITE_BPS
from iobench.result.steady import SteadyCriterion, rounds_done, rounds_needed, rounds_steady
from iobench.result.steady_advice import steady_advice
from iobench.run.phases.checkpoint import _rounds, round_bound
from iobench.spec.workload import load_workload
from iobench.target import StopFlag

MiB = 1 << 20


def test_rounds_are_steady_after_the_ramp_over_a_window_of_two_seconds():
    """Judged as every phase is (bw_slope:10 % per second over 2 s), over the per-round rates."""
    flat = rounds_steady([0.5] * 5, [100.0, 50.0, 51.0, 50.0, 51.0])  # ramp, then 2 s flat
    assert flat.steady and flat.steady_at_s == pytest.approx(2.5)
    assert not rounds_steady([0.5] * 4, [100.0, 50.0, 51.0, 50.0]).steady  # 1.5 s after it
    rising = [50.0 * 1.1**k for k in range(10)]  # +10 % a round of 0.5 s: ~20 % a second
    assert not rounds_steady([0.5] * 10, rising).steady
    slowing = rounds_steady([1.0] * 4, [90.0, 80.0, 65.0, 50.0])  # the cache filling up
    assert not slowing.steady and "3 rounds or more after 1 round" in slowing.criterion
    deviation = SteadyCriterion("bw", "deviation", 0.10, 2.0, 0.5)
    assert not rounds_steady([1.0] * 5, [9.0, 50.0, 60.0, 50.0, 60.0], deviation).steady
    assert rounds_needed() == 4


def test_rounds_end_at_their_number_their_limit_or_once_steady():
    assert rounds_done([0.4], [5.0], most=1, limit_s=None, until_steady=True)
    assert rounds_done([3.0, 3.0], [5.0, 1.0], most=10, limit_s=5.0, until_steady=False)
    steady = ([0.5] * 5, [100.0, 50.0, 51.0, 50.0, 51.0])
    assert rounds_done(*steady, most=10, limit_s=20.0, until_steady=True)
    assert not rounds_done(*steady, most=10, limit_s=20.0, until_steady=False)


class _Runner:
    coord = SingleProcess()

    def __init__(self):
        self.stop = StopFlag()


def test_the_round_loop_repeats_every_thread_until_steady_and_drops_between():
    """Each round every thread moves 1 MiB in 0.3 s: steady after the ramp round and a window
    of 2 s, with the cache drop before each later round."""
    drops, calls = [], [0, 0]

    def fn(i, st):
        time.sleep(0.3)
        st.add(MiB, time.perf_counter(), 300_000_000)
        calls[i] += 1

    stats, log = _rounds(2, fn, _Runner(), {"rounds": 10, "time": 20.0, "steady": True},
                         between=lambda: drops.append(1))  # fmt: skip
    n = len(log["seconds"])  # 0.5 s ramp (2 rounds), then 2 s: 9 rounds
    assert calls == [n, n] and len(drops) == n - 1 and 8 <= n < 10
    assert all(0.29 < s < 0.6 for s in log["seconds"])
    assert rounds_steady(log["seconds"], log["bps"]).steady  # ... and not a round sooner
    assert not rounds_steady(log["seconds"][:-1], log["bps"][:-1]).steady
    assert sum(s.bytes for s in stats) == 2 * n * MiB
    _, once = _rounds(2, fn, _Runner(), {"rounds": 1, "time": None, "steady": False})
    assert len(once["seconds"]) == 1  # rounds = 1: one save, as before


def test_a_failed_round_fails_the_phase_without_hanging_the_other_threads():
    """The others were waiting at the round's barrier: it is broken, they end, the error told
    is the shard's."""

    def fn(i, st):
        if i == 1:
            raise OSError(5, "Input/output error", "shard1.pt")
        st.add(MiB, time.perf_counter(), 1000)

    with pytest.raises(EngineError, match="Input/output error"):
        _rounds(3, fn, _Runner(), {"rounds": 10, "time": 20.0, "steady": True})


def test_the_plan_bounds_rounds_by_their_floor_rate_and_limit():
    params = {"rounds": 10, "time": 20.0}
    assert round_bound(params, 100 * MiB, "ckpt_save") == pytest.approx(
        10.0 * 100 * MiB / FLOOR_WRITE_BPS, abs=0.1
    )
    big = 10_000 * MiB
    assert round_bound(params, big, "ckpt_load") == pytest.approx(
        20.0 + big / FLOOR_READ_BPS, abs=0.1
    )
    assert round_bound({"rounds": 1, "time": 20.0}, big, "ckpt_save") is None


@pytest.mark.parametrize("name", ["checkpoint-smallfile", "llm-checkpoint"])
def test_shipped_checkpoint_workloads_repeat_their_rounds_until_steady(name):
    params = load_workload(name).params
    assert params["rounds"] >= 2 * rounds_needed() and params["time"] == 20.0
    assert params["steady"] is True


def _phase(n, seconds):
    return {"name": n, "elapsed_s": sum(seconds), "steady": False,
            "extra": {"rounds": {"seconds": seconds, "bps": [1.0] * len(seconds)}}}  # fmt: skip


def test_advice_names_more_rounds_or_more_time():
    wl = {"generator": "checkpoint", "params": {"rounds": 10, "time": 20.0, "steady": True}}
    line = steady_advice([_phase("ckpt-save", [0.05] * 10)], wl)
    assert line.endswith("for steady figures add --set rounds=20")
    line = steady_advice([_phase("ckpt-load", [7.0, 7.0, 7.0])], wl)
    assert line.endswith("for steady figures add --set time=40s")
    exact = {"generator": "llm-checkpoint", "params": {"rounds": 10, "time": 5.0, "steady": False}}
    assert steady_advice([_phase("ckpt-save", [3.0, 3.0])], exact).endswith("add --time 10s")
    one = {"generator": "checkpoint", "params": {"rounds": 1}}
    assert steady_advice([_phase("ckpt-save", [2.0])], one).endswith("add --set rounds=4")


def test_a_checkpoint_run_records_and_judges_its_rounds(cli, tmp_path):
    r = cli("run", "checkpoint-smallfile", tmp_path, *SMALL["checkpoint-smallfile"],
            "--set", "metadata=false", "--set", "dcp=false", "--set", "rounds=5", "--set", "time=20s",
            "-q", "--json",
            "--output", tmp_path / "out", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    phases = {p["name"]: p for p in json.loads(r.out)["phases"]}
    for name in ("ckpt-save", "ckpt-load"):
        p = phases[name]
        rounds = p["extra"]["rounds"]
        assert 1 <= len(rounds["seconds"]) <= 5 and len(rounds["bps"]) == len(rounds["seconds"])
        assert "(the per-round rates)" in p["steady_criterion"]
        assert p["bytes"] >= len(rounds["seconds"]) * 4 * MiB  # every round the whole of it
        med = sorted(rounds["seconds"])[len(rounds["seconds"]) // 2]
        if len(rounds["seconds"]) % 2:
            assert p["extra"]["seconds_per_checkpoint"] == pytest.approx(med)
    # 4 MiB rounds take milliseconds: all 5 ran, under a second, so the line asks for more
    assert r.err.strip().splitlines()[-1].endswith("for steady figures add --set rounds=10")


def test_the_checkpoint_command_ends_with_the_line_naming_its_indicative_phases(
    cli, tmp_path, monkeypatch
):
    """Its phases judged too short (a minimum no phase reaches here: its small-file phases are
    now steady by default, 256 files a writer): the line says so, as run's does."""
    from iobench.result import steady

    monkeypatch.setattr(steady, "MIN_PHASE_S", 1e9)
    r = cli("checkpoint", tmp_path, "--model", "llama3-8b", "--scale", 1e-5, "--no-plain-write",
            "--output", tmp_path / "out", "-q", "--no-history",
            "--set", "time=1s", "--set", "files=32", "--set", "rounds=3")  # every phase, briefly  # fmt: skip
    assert r.code == 0, r.err
    last = r.err.strip().splitlines()[-1]
    assert last.startswith("iobench: ") and " phases indicative (ckpt-create: " in last
