"""One metric's trend, judged: one series per spec (:func:`history.trend_series`), each with
its noise band (the series' run-to-run spread) and every run held against the run before it
by compare's own rule, so that a confirmed regression in the trend is one ``iobench compare
CURRENT`` would confirm for this metric alone.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from .. import history
from .metric import CompareRow, compare_metric
from .noise import Noise
from .options import MARK_WORSE, CompareOptions


@dataclass(frozen=True)
class TrendRun:
    """One run of a series and its judgement against the latest earlier run of the series on
    the same host class and storage (None for the first such run)."""

    point: history.TrendPoint
    row: CompareRow | None = None
    baseline: str | None = None  # the run id it was held against

    @property
    def mark(self) -> str:
        return self.row.mark if self.row is not None else ""

    @property
    def regression(self) -> bool:
        """A confirmed regression against the run before it."""
        return self.mark == MARK_WORSE


@dataclass(frozen=True)
class SeriesTrend:
    """One spec's runs, judged, with the series' noise band: the geometric mean of its
    complete runs' values times and over one run-to-run spread (``Noise``: the standard
    deviation of ln value), from at least ``min_history`` runs; runs confirmed to have moved
    from the run before them (a regression or an improvement) are not part of it."""

    spec_hash: str | None
    label: str
    runs: tuple[TrendRun, ...]
    noise: Noise | None = None
    centre: float | None = None

    @property
    def band(self) -> tuple[float, float] | None:
        if self.noise is None or self.centre is None:
            return None
        return self.centre / self.noise.spread, self.centre * self.noise.spread

    @property
    def regressions(self) -> list[TrendRun]:
        return [r for r in self.runs if r.regression]


@dataclass(frozen=True)
class TrendReport:
    """``history trend METRIC``: the metric asked for and its series."""

    name: str  # as asked: ``seq-write.bandwidth``
    phase: str | None
    metric: str
    unit: str
    direction: str
    series: tuple[SeriesTrend, ...]
    options: CompareOptions

    @property
    def regressions(self) -> list[tuple[SeriesTrend, TrendRun]]:
        return [(s, r) for s in self.series for r in s.regressions]


def _values(p: history.TrendPoint) -> tuple[float, ...]:
    return p.values or (p.value,)


def _judge(
    points: tuple[history.TrendPoint, ...], i: int, name: tuple[str, str, str, str],
    options: CompareOptions,
) -> TrendRun:  # fmt: skip
    """Point ``i`` against the latest earlier complete run of its setup in the series, the
    noise (spread and centre) from every earlier complete run of that setup, the baseline's
    included (as
    ``compare.latest_like`` and ``compare.history_noise`` choose them)."""
    p = points[i]
    like = [q for q in points[:i] if q.status == "complete" and q.same_setup(p)]
    if not like:
        return TrendRun(p)
    base = like[-1]
    noise = Noise.of([q.value for q in like]) if len(like) >= options.min_history else None
    phase, metric, unit, direction = name
    row = compare_metric(phase, metric, unit, direction, _values(base), _values(p), options, noise)
    return TrendRun(p, row, base.run_id)


def judge_series(
    series: history.SpecSeries, phase: str, metric: str, options: CompareOptions
) -> SeriesTrend:
    """A series' runs judged (:func:`_judge`) and its noise band."""
    _key, unit, direction = history.ALL_METRICS[metric]
    name = (phase, metric, unit, direction)
    runs = tuple(_judge(series.points, i, name, options) for i in range(len(series.points)))
    moved = {r.point.run_id for r in runs if r.row is not None and r.row.significant and r.mark}
    values = [p.value for p in series.points if p.status == "complete" and p.run_id not in moved]
    noise = Noise.of(values)
    centre = None
    if noise is not None and noise.runs >= options.min_history:
        centre = math.exp(
            statistics.fmean(math.log(v) for v in values if v > 0 and math.isfinite(v))
        )
    else:
        noise = None
    return SeriesTrend(series.spec_hash, series.label, runs, noise, centre)


def trend_report(
    name: str,
    url: str | None = None,
    workload: str | None = None,
    options: CompareOptions | None = None,
    *,
    on_warning: history.Warn = None,
) -> TrendReport:
    """``history trend NAME``: the metric's stored values, one judged series per spec."""
    options = options or CompareOptions()
    phase, metric = history.split_metric(name)
    points = history.trend(name, url, workload=workload, on_warning=on_warning)
    _key, unit, direction = history.ALL_METRICS[metric]
    series = tuple(
        judge_series(s, phase or "", metric, options) for s in history.trend_series(points)
    )
    return TrendReport(name, phase, metric, unit, direction, series, options)
