"""Steady state, in the manner of fio's ``steadystate`` option: a criterion (slope or deviation
of bandwidth or IOPS over a window), the judgement of a phase's recorded series, and the
"indicative" label of a phase too short or too unsteady to mean much. Pure; ``iobench.result.stats``
re-exports every name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: A phase shorter than this is "indicative" whatever its series says (too short to mean much).
MIN_PHASE_S = 1.0
#: Criterion kinds: fio's ``bw_slope``/``iops_slope`` and ``bw``/``iops`` (deviation).
_KINDS = ("slope", "deviation")


@dataclass(frozen=True)
class SteadyCriterion:
    """When a phase is steady: fio's ``ss=<metric>[_slope]:<limit>%``, ``ss_dur``, ``ss_ramp``.

    Over every rolling window of ``dur_s`` that starts at or after ``ramp_s`` (at least 3
    intervals of the series), with ``mean`` the window's mean of the metric:

    - ``slope``: the least-squares slope of the metric against time, per second, divided by
      ``mean``, in absolute value, is below ``limit`` (fio's ``bw_slope:L%`` with fio's
      default 1 s check interval: a slope of L % of the mean per second);
    - ``deviation``: every value of the window lies within ``limit × mean`` of ``mean`` (fio's
      ``bw:L%``).

    The phase is steady from the end of the first window that meets it (``steady_at_s``).
    """

    metric: str = "bw"  # "bw" (bytes/s) or "iops" (ops/s)
    kind: str = "slope"
    limit: float = 0.10  # a fraction of the window mean (per second for a slope)
    dur_s: float = 2.0
    ramp_s: float = 0.5

    def __post_init__(self) -> None:
        if self.metric not in ("bw", "iops") or self.kind not in _KINDS:
            raise ValueError(f"steady criterion: unknown metric/kind {self.metric}/{self.kind}")
        if not (self.limit > 0 and self.dur_s > 0 and self.ramp_s >= 0):
            raise ValueError("steady criterion: limit and dur must be positive, ramp not negative")

    @property
    def fio_name(self) -> str:
        """The criterion as fio spells it: ``bw_slope:10%``."""
        suffix = "_slope" if self.kind == "slope" else ""
        return f"{self.metric}{suffix}:{self.limit * 100:g}%"

    def describe(self) -> str:
        what = "slope per second within" if self.kind == "slope" else "every interval within"
        return (
            f"{self.fio_name} over {self.dur_s:g} s after a {self.ramp_s:g} s ramp "
            f"({what} {self.limit * 100:g} % of the window mean)"
        )

    def for_metric(self, metric: str) -> SteadyCriterion:
        return SteadyCriterion(metric, self.kind, self.limit, self.dur_s, self.ramp_s)


#: The criterion every phase is judged by unless its spec names another.
DEFAULT_STEADY = SteadyCriterion()


@dataclass(frozen=True)
class SteadyState:
    """Whether a series reached steady state, when (seconds after its start), and by what."""

    steady: bool
    steady_at_s: float | None
    criterion: str
    value: float | None = None  # the criterion's figure at steady_at_s (or the last window's)


def window_figure(values: Sequence[float], interval_s: float, kind: str) -> float | None:
    """The criterion's figure for one window (a fraction of its mean); None when the mean is 0.

    ``slope``: |least-squares slope per second| ÷ mean; ``deviation``: max |x − mean| ÷ mean.
    """
    y = np.asarray(values, dtype=float)
    mean = float(y.mean())
    if not mean > 0:
        return None
    if kind == "deviation":
        return float(np.abs(y - mean).max()) / mean
    x = np.arange(len(y), dtype=float) * interval_s
    dx = x - x.mean()
    slope = float((dx * (y - mean)).sum() / (dx * dx).sum())
    return abs(slope) / mean


def window_intervals(criterion: SteadyCriterion, interval_s: float) -> tuple[int, int]:
    """(intervals in the ramp, intervals in a window) for a series of ``interval_s``."""
    ramp = math.ceil(criterion.ramp_s / interval_s - 1e-9)
    return ramp, max(3, round(criterion.dur_s / interval_s))


def steady_state(
    series: Sequence[float], interval_s: float, criterion: SteadyCriterion = DEFAULT_STEADY
) -> SteadyState:
    """Judge a per-interval series (bytes/s or ops/s, interval ``interval_s``) by ``criterion``.

    The series' values are per complete interval from the phase's start: leave a partial last
    interval out before calling. Windows start at ``ceil(ramp_s / interval_s)`` and hold
    ``max(3, round(dur_s / interval_s))`` intervals; the first window whose figure is below
    the limit makes the series steady from the window's end.
    """
    name = criterion.describe()
    if interval_s <= 0:
        return SteadyState(False, None, name)
    start, n = window_intervals(criterion, interval_s)
    last = None
    for end in range(start + n, len(series) + 1):
        fig = window_figure(series[end - n : end], interval_s, criterion.kind)
        if fig is None:
            continue
        last = fig
        if fig < criterion.limit:
            return SteadyState(True, round(end * interval_s, 9), name, fig)
    return SteadyState(False, None, name, last)


def judge_phase(
    series: Sequence[float],
    ops_series: Sequence[float],
    interval_s: float,
    criterion: SteadyCriterion = DEFAULT_STEADY,
) -> SteadyState:
    """Steady state of a recorded phase: bandwidth when it moved bytes, else operations.

    The series' last interval is partial (the phase ended inside it) and is left out; the
    first holds the phase's start and falls in the ramp.
    """
    use_bw = any(v > 0 for v in series)
    values = list(series if use_bw else ops_series)[:-1]
    crit = criterion.for_metric("bw" if use_bw else "iops")
    return steady_state(values, interval_s, crit)


#: A phase of whole rounds (a checkpoint saved or loaded again and again): its first round is
#: the ramp (files created, space allocated); then it is judged as every phase is
#: (``DEFAULT_STEADY``: the rate's least-squares slope per second within 10 % of the mean over
#: a window of at least 2 s), over the rounds' rates at their mid-points instead of fixed
#: intervals, a window holding at least WINDOW_ROUNDS rounds.
RAMP_ROUNDS = 1
WINDOW_ROUNDS = 3


def rounds_needed() -> int:
    """The fewest rounds in which a phase of rounds can be steady."""
    return RAMP_ROUNDS + WINDOW_ROUNDS


def rounds_steady(
    round_s: Sequence[float],
    round_bps: Sequence[float],
    criterion: SteadyCriterion = DEFAULT_STEADY,
) -> SteadyState:
    """Judge a phase of whole rounds by its per-round rates: steady from the end of the first
    window after RAMP_ROUNDS (and the criterion's ramp) of at least WINDOW_ROUNDS rounds and
    ``dur_s`` seconds whose figure (``kind``: slope per second ÷ mean, or the largest
    deviation ÷ mean) is under the limit (``steady_at_s``: the seconds of the rounds to it)."""
    name = (
        f"{criterion.fio_name} over {criterion.dur_s:g} s and {WINDOW_ROUNDS} rounds or more "
        f"after {RAMP_ROUNDS} round (the per-round rates)"
    )
    ends = np.cumsum(np.asarray(round_s, dtype=float))
    rates = np.asarray(round_bps, dtype=float)
    last = None
    for end in range(RAMP_ROUNDS + WINDOW_ROUNDS, len(rates) + 1):
        start = end - WINDOW_ROUNDS
        while start > RAMP_ROUNDS and ends[end - 1] - ends[start - 1] < criterion.dur_s:
            start -= 1
        t0 = ends[start - 1] if start else 0.0
        if ends[end - 1] - t0 < criterion.dur_s or t0 < criterion.ramp_s:
            continue
        fig = _rounds_figure(ends[start:end] - np.asarray(round_s[start:end]) / 2,
                             rates[start:end], criterion.kind)  # fmt: skip
        if fig is None:
            continue
        last = fig
        if fig < criterion.limit:
            return SteadyState(True, round(float(ends[end - 1]), 6), name, fig)
    return SteadyState(False, None, name, last)


def _rounds_figure(mids: Any, y: Any, kind: str) -> float | None:
    """``window_figure`` for rates at uneven times (the rounds' mid-points)."""
    mean = float(y.mean())
    if not mean > 0:
        return None
    if kind == "deviation":
        return float(np.abs(y - mean).max()) / mean
    dx = mids - mids.mean()
    denom = float((dx * dx).sum())
    if denom <= 0:
        return None
    return abs(float((dx * (y - mean)).sum()) / denom) / mean


def epochs_steady(au_per_epoch: Sequence[float], limit: float = DEFAULT_STEADY.limit) -> bool:
    """Whether a loader's AU per epoch is steady: after RAMP_ROUNDS epochs (workers starting,
    the first reads), the last WINDOW_ROUNDS epochs' AU lie within ``limit`` of their mean
    (fio's ``bw:10%``, over epochs)."""
    if len(au_per_epoch) < rounds_needed():
        return False
    fig = window_figure(au_per_epoch[-WINDOW_ROUNDS:], 1.0, "deviation")
    return fig is not None and fig < limit


def rounds_done(
    round_s: Sequence[float],
    round_bps: Sequence[float],
    most: int,
    limit_s: float | None,
    until_steady: bool,
) -> bool:
    """Whether a phase of rounds ends after the rounds so far: ``most`` ran, its time
    ``limit_s`` passed, or (``until_steady``) their rates are steady (``rounds_steady``)."""
    if len(round_s) >= most or (limit_s and sum(round_s) >= limit_s):
        return True
    return until_steady and rounds_steady(round_s, round_bps).steady


def indicative(steady: bool | None, elapsed_s: float) -> bool:
    """A figure is indicative when its phase did not reach steady state, or ran under
    MIN_PHASE_S; a phase never judged (older results) only by its length."""
    return steady is False or elapsed_s < MIN_PHASE_S


#: Metadata operations a time-based phase repeats over its files until its limit (or steady
#: state: engines.worker.meta_passes): a stat or a whole-file read leaves the file as it was.
#: ``create`` makes each file once (a one-pass layout, judged by its series; more files make
#: it longer) and ``delete`` removes each once (``ONE_PASS``).
REPEATABLE_META = ("stat", "open_read")
#: Operations that go over their files once by nature, whatever the time: a delete removes
#: each file the phase made, once. Its figure is the rate of that one pass (mdtest's manner),
#: never judged for steady state nor called steady: the result says so (``extra.one_pass``).
ONE_PASS = {
    "delete": (
        "one pass: it removes each file its run made, once (mdtest's manner); the rate over "
        "that pass, not judged for steady state (more files make it longer: --set files=N)"
    ),
}


def one_pass_reason(res: Any) -> str | None:
    """Why a phase is one pass over its files, not judged for steady state (None when it is
    judged): ``extra.one_pass``, as ``mark_steady`` recorded it."""
    get = res.get if isinstance(res, dict) else lambda k, d=None: getattr(res, k, d)
    return (get("extra") or {}).get("one_pass")


def mark_steady(res: Any, criterion: SteadyCriterion | None = None) -> None:
    """Record on a PhaseResult whether its series reached steady state (``judge_phase``).

    An engine that ended the phase because its live progress series met the criterion
    (``extra["steady_live_at_s"]``, engines.base.SteadyWatch) has it steady from then, when
    the recorded series, binned by completion time, misses the limit by its own noise.
    A one-pass operation (``ONE_PASS``) is not judged: ``steady`` None, ``extra.one_pass``."""
    if getattr(res, "op", None) in ONE_PASS:
        res.steady, res.steady_at_s, res.steady_criterion = None, None, None
        res.extra["one_pass"] = ONE_PASS[res.op]
        return
    rounds = (res.extra or {}).get("rounds")
    if rounds:  # a phase of whole rounds (checkpoint saves, loads): judged over its rounds
        ss = rounds_steady(rounds["seconds"], rounds["bps"])
        res.steady, res.steady_at_s, res.steady_criterion = ss.steady, ss.steady_at_s, ss.criterion
        return
    ss = judge_phase(
        res.series or [], res.ops_series or [], res.series_interval_s or 0.0,
        criterion or DEFAULT_STEADY,
    )  # fmt: skip
    res.steady, res.steady_at_s, res.steady_criterion = ss.steady, ss.steady_at_s, ss.criterion
    live = (res.extra or {}).get("steady_live_at_s")
    if not ss.steady and live is not None and res.status == "ok":
        res.steady, res.steady_at_s = True, float(live)
        res.steady_criterion = f"{ss.criterion}; met on the live progress series"


def is_indicative(res: Any) -> bool:
    """``indicative`` for a PhaseResult (or its dict in result.json), or its ranks started too
    far apart (``distributed.MAX_START_SKEW_SHARE``)."""
    return indicative_reason(res) is not None


def indicative_reason(res: Any) -> str | None:
    """Why a phase's figures are indicative (None when they are not). A one-pass phase
    (``one_pass_reason``) is not: its figure is its one pass, labelled so, not a steady one."""
    get = res.get if isinstance(res, dict) else lambda k, d=None: getattr(res, k, d)
    elapsed = float(get("elapsed_s") or 0.0)
    one_pass = one_pass_reason(res) is not None
    if get("steady") is False and not one_pass:
        return (
            f"did not reach steady state in {elapsed:.2f} s "
            f"({get('steady_criterion') or DEFAULT_STEADY.describe()})"
        )
    if elapsed < MIN_PHASE_S and not one_pass:
        return f"ran {elapsed:.2f} s, under the {MIN_PHASE_S:g} s minimum"
    skew = (get("extra") or {}).get("start_skew") or {}
    if skew.get("flagged"):
        return f"ranks started {skew['seconds'] * 1e3:.0f} ms apart ({skew['share']:.0%} of it)"
    return None
