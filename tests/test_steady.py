"""Steady-state detection (fio's ``steadystate`` manner): the pure judgement over exact
synthetic series, the live watch that ends a phase, and how results carry it."""

from __future__ import annotations

import pytest

from iobench.distributed import MAX_START_SKEW_SHARE, aggregate_ranks, start_skew
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec, Progress, SteadyWatch
from iobench.engines.posix import PosixEngine
from iobench.result.file import PhaseResult
from iobench.result.steady import (
    MIN_PHASE_S,
    SteadyCriterion,
    indicative,
    indicative_reason,
    judge_phase,
    mark_steady,
    steady_state,
    window_figure,
)
from iobench.target import StopFlag

SLOPE = SteadyCriterion("bw", "slope", 0.10, 2.0, 0.5)  # 20 intervals of 0.1 s, from 0.5 s


def test_constant_series_is_steady_at_the_end_of_the_first_window():
    ss = steady_state([100.0] * 30, 0.1, SLOPE)
    assert (ss.steady, ss.steady_at_s, ss.value) == (True, 2.5, 0.0)
    assert ss.criterion.startswith("bw_slope:10% over 2 s after a 0.5 s ramp")


def test_slope_is_per_second_over_the_window_mean():
    # y = 1000 + 10 i every 0.1 s: slope 100/s; the window from interval 5 has mean 1145
    y = [1000.0 + 10 * i for i in range(60)]
    assert window_figure(y[5:25], 0.1, "slope") == pytest.approx(100 / 1145)
    assert steady_state(y, 0.1, SLOPE).steady_at_s == 2.5
    # at 8 %/s the mean must pass 1250: the window from interval 16 (mean 1255), ends at 36
    tight = SteadyCriterion("bw", "slope", 0.08, 2.0, 0.5)
    ss = steady_state(y, 0.1, tight)
    assert (ss.steady, ss.steady_at_s) == (True, 3.6)
    assert ss.value == pytest.approx(100 / 1255)


def test_ramp_then_flat_is_steady_once_the_window_leaves_the_ramp():
    # a 1 s climb 0 -> 900, then flat at 1000: a 1 s window (10 intervals) is flat from 1.0 s
    y = [float(100 * i) for i in range(10)] + [1000.0] * 30
    crit = SteadyCriterion("bw", "slope", 0.05, 1.0, 0.0)
    ss = steady_state(y, 0.1, crit)
    assert ss.steady and ss.steady_at_s == 2.0  # first window of 10 wholly in the flat part


def test_deviation_criterion_is_strictly_within_the_limit():
    y = [90.0, 110.0] * 20  # every value 10 % from the mean
    assert not steady_state(y, 0.1, SteadyCriterion("bw", "deviation", 0.10, 2.0, 0.5)).steady
    ss = steady_state(y, 0.1, SteadyCriterion("bw", "deviation", 0.11, 2.0, 0.5))
    assert (ss.steady, ss.steady_at_s) == (True, 2.5)
    assert ss.value == pytest.approx(0.1)


def test_too_short_or_empty_series_never_steady():
    assert not steady_state([100.0] * 24, 0.1, SLOPE).steady  # ramp 5 + window 20 > 24
    zero = steady_state([0.0] * 40, 0.1, SLOPE)
    assert (zero.steady, zero.value) == (False, None)
    assert not steady_state([], 0.1, SLOPE).steady


def test_window_is_at_least_three_intervals():
    # 1 s intervals and a 2 s window: 3 intervals, the ramp rounds up to one interval
    ss = steady_state([5.0, 100.0, 100.0, 100.0], 1.0, SLOPE)
    assert (ss.steady, ss.steady_at_s) == (True, 4.0)


def test_judge_phase_drops_the_partial_last_interval_and_uses_ops_without_bytes():
    flat = [100.0] * 25
    assert judge_phase(flat + [1.0], [], 0.1, SLOPE).steady  # the tail is left out
    assert not judge_phase(flat, [], 0.1, SLOPE).steady  # 24 complete intervals: too short
    ss = judge_phase([0.0] * 30, [50.0] * 30, 0.1, SLOPE)
    assert ss.steady and ss.criterion.startswith("iops_slope:10%")


def test_indicative_rules():
    assert indicative(False, 10.0)
    assert indicative(None, MIN_PHASE_S / 2)
    assert not indicative(None, MIN_PHASE_S)  # older results: judged by length only
    assert not indicative(True, 3.0)
    p = PhaseResult("x", "read", elapsed_s=0.07, series=[1.0], series_interval_s=0.1)
    mark_steady(p)
    assert p.steady is False and p.steady_at_s is None
    assert indicative_reason(p).startswith("did not reach steady state in 0.07 s (bw_slope:10%")
    assert indicative_reason({"elapsed_s": 0.5}) == "ran 0.50 s, under the 1 s minimum"
    assert indicative_reason({"elapsed_s": 5.0, "steady": True}) is None


def test_older_results_without_steady_fields_load():
    d = PhaseResult("x", "read").to_dict()
    for k in ("steady", "steady_at_s", "steady_criterion"):
        del d[k]
    p = PhaseResult.from_dict(d)
    assert (p.steady, p.steady_at_s, p.steady_criterion) == (None, None, None)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_watch_calls_on_steady_once_after_ramp_and_window():
    clock = _Clock()
    hits: list[float] = []
    w = SteadyWatch(Progress(), SLOPE, lambda: hits.append(clock.t), 0.1, clock)
    w.start("p", None, None)
    for k in range(1, 40):
        clock.t = k * 0.1
        w.update(k * 1000, k)
    # time counts from the first report of work (0.1 s); 5 ramp samples, a window of 20 and
    # the one the recorded series leaves out: steady at the 26th rate after it
    assert hits == [pytest.approx(2.7)]
    assert w.steady_at_s == pytest.approx(2.6)


def test_watch_ignores_reports_closer_than_half_an_interval():
    clock = _Clock()
    w = SteadyWatch(Progress(), SLOPE, None, 0.1, clock)
    w.start("p", None, None)
    w.update(0, 0)  # buffers being set up: no work yet, time does not start
    clock.t = 0.5
    w.update(10, 1)  # the first work: time starts here
    clock.t = 0.54
    w.update(50, 1)  # under half an interval later: no sample
    clock.t = 0.6
    w.update(110, 1)
    assert w.rates == [pytest.approx(1000.0)]


def test_posix_time_based_phase_ends_once_steady(tmp_path):
    """A paced read is as steady as it gets: it ends long before its 60 s limit."""
    (tmp_path / "a.dat").write_bytes(b"\0" * (1 << 20))
    crit = SteadyCriterion("bw", "slope", 0.5, 0.6, 0.2)
    spec = PhaseSpec(
        "r", "read", (FileSpec("a.dat", 1 << 20),), jobs=1, block_size=64 << 10,
        time_s=60.0, rate_bps=8 << 20, steady=crit,
    )  # fmt: skip
    res = PosixEngine("threads").run(spec, EngineContext(str(tmp_path), StopFlag()))
    assert res.status == "ok" and res.error is None
    assert res.extra["ended"] == "steady"
    assert res.elapsed_s < 30


def test_start_skew_is_flagged_over_its_share():
    assert start_skew([(0.0, 1.0)]) == (0.0, 0.0)
    assert start_skew([(0.0, 1.0), (0.05, 1.0)]) == pytest.approx((0.05, 0.05))

    def rec(k: int, start: float, end: float) -> dict:
        r = PhaseResult("seq-read", "read", bytes=100, ops=1, series=[100.0],
                        series_interval_s=0.1, steady=True, steady_at_s=2.0 + k,
                        steady_criterion="c",
                        extra={"start_epoch": start, "end_epoch": end, "first_end_epoch": end})  # fmt: skip
        return {"rank": k, "host": "h", "clock_offset_s": 0.0, "result": r.to_dict()}

    ok = aggregate_ranks([rec(0, 0.0, 1.0), rec(1, 0.05, 1.0)])
    assert ok.extra["start_skew"]["flagged"] is False
    assert (ok.steady, ok.steady_at_s) == (True, 3.0)
    bad = aggregate_ranks([rec(0, 0.0, 0.07), rec(1, 0.04, 0.07)])
    assert bad.extra["start_skew"]["share"] > MAX_START_SKEW_SHARE
    assert bad.extra["start_skew"]["flagged"] is True
    assert any("ranks started 40 ms apart" in w for w in bad.warnings)
    assert indicative_reason(bad.to_dict()).startswith("ran 0.07 s")
    long = bad.to_dict() | {"elapsed_s": 5.0, "steady": True}
    assert indicative_reason(long) == "ranks started 40 ms apart (57% of it)"


def test_a_phase_ended_steady_by_the_live_watch_is_recorded_steady():
    climbing = [100.0 + 10 * i for i in range(40)]  # 100/s on a mean under 500: over 20 %/s
    p = PhaseResult("x", "read", elapsed_s=4.0, series=climbing, series_interval_s=0.1)
    mark_steady(p, SLOPE)
    assert p.steady is False
    p.extra["steady_live_at_s"] = 2.6
    mark_steady(p, SLOPE)
    assert (p.steady, p.steady_at_s) == (True, 2.6)
    assert p.steady_criterion.endswith("; met on the live progress series")
    p.status = "partial"  # an interrupted phase is not steady by a live sample
    mark_steady(p, SLOPE)
    assert p.steady is False
