"""One metric of one phase held against the baseline: :func:`compare_metric` decides its mark
(worse, better, within the noise, unconfirmed, same, missing) from the threshold and the evidence.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from ..stats import Summary, summarize
from ..units import (
    format_count,
    format_rate,
    format_seconds,
)
from .noise import Noise, mann_whitney_u
from .options import (
    MARK_BETTER,
    MARK_MISSING,
    MARK_NOISE,
    MARK_SAME,
    MARK_UNCONFIRMED,
    MARK_WORSE,
    CompareOptions,
)


@dataclass(frozen=True)
class CompareRow:
    """One metric, baseline against current."""

    phase: str
    metric: str
    unit: str
    direction: str  # "higher" | "lower": which way is better
    baseline: float | None  # median of the repeats
    current: float | None
    baseline_repeats: tuple[float, ...]
    current_repeats: tuple[float, ...]
    delta: float | None  # (current - baseline) / baseline: what the value did
    change: float | None  # direction-aware relative change: positive = better
    threshold: float
    test: str | None  # "history" | "mann-whitney" | "ranges" | None (unconfirmed / one side)
    p_value: float | None  # Mann-Whitney only
    significant: bool  # confirmed: by the test, or beyond the large margin
    mark: str
    noise: Noise | None = None  # the history's noise floor, when it decided
    margin: bool = False  # beyond the large margin (confirmed whatever the test said)
    confirm_repeats: int | None = None  # unconfirmed: repeats a side that could confirm it

    @property
    def name(self) -> str:
        return f"{self.phase}.{self.metric}"

    @property
    def baseline_spread(self) -> Summary | None:
        return summarize(self.baseline_repeats)

    @property
    def current_spread(self) -> Summary | None:
        return summarize(self.current_repeats)


def _relative(base: float, cur: float) -> float:
    if base == 0:
        return 0.0 if cur == 0 else math.copysign(math.inf, cur)
    return (cur - base) / abs(base)


def _log_ratio(base: float, cur: float) -> float:
    """|ln(cur / base)|; infinite when one side is zero or the signs differ."""
    if base == cur:
        return 0.0
    if base <= 0 or cur <= 0:
        return math.inf
    return abs(math.log(cur / base))


def _missing(
    phase: str,
    metric: str,
    unit: str,
    direction: str,
    b: tuple[float, ...],
    c: tuple[float, ...],
    threshold: float,
) -> CompareRow:
    """The row of a metric measured on one side only (``x``)."""
    return CompareRow(
        phase=phase,
        metric=metric,
        unit=unit,
        direction=direction,
        baseline=statistics.median(b) if b else None,
        current=statistics.median(c) if c else None,
        baseline_repeats=b,
        current_repeats=c,
        delta=None,
        change=None,
        threshold=threshold,
        test=None,
        p_value=None,
        significant=False,
        mark=MARK_MISSING,
    )


def _mark(change: float, threshold: float, significant: bool, test: str | None) -> str:
    """Within the threshold, confirmed (worse or better), unconfirmed, or within the noise."""
    if not abs(change) > threshold:
        return MARK_SAME
    if significant:
        return MARK_BETTER if change > 0 else MARK_WORSE
    if test is None:
        return MARK_UNCONFIRMED
    return MARK_NOISE


def _evidence(
    b: tuple[float, ...],
    c: tuple[float, ...],
    moved: float,
    options: CompareOptions,
    noise: Noise | None,
) -> tuple[str | None, bool, float | None, int | None]:
    """Whether a move of ``moved`` (|ln ratio|) is beyond the noise, by the first rule that
    applies: (test, significant, p value, repeats that would confirm it when no rule does)."""
    if noise is not None and noise.runs >= options.min_history:
        return "history", moved > noise.floor, None, None
    if len(b) >= options.min_repeats and len(c) >= options.min_repeats:
        p = mann_whitney_u(b, c).p_value
        return "mann-whitney", p < options.alpha, p, None
    if len(b) >= options.min_range_repeats and len(c) >= options.min_range_repeats:
        return "ranges", max(b) < min(c) or max(c) < min(b), None, None
    return None, False, None, options.min_range_repeats


def compare_metric(
    phase: str,
    metric: str,
    unit: str,
    direction: str,
    baseline: Sequence[float],
    current: Sequence[float],
    options: CompareOptions,
    noise: Noise | None = None,
) -> CompareRow:
    """Compare one metric's repeats; either side may be empty (then it is marked ``x``).

    ``noise`` is the metric's run-to-run spread from the history; it decides when it comes from
    at least ``options.min_history`` runs (see the module docstring for the whole rule).
    """
    threshold = options.threshold_for(phase, metric)
    b, c = tuple(baseline), tuple(current)
    if not b or not c:
        return _missing(phase, metric, unit, direction, b, c, threshold)
    b_mid, c_mid = statistics.median(b), statistics.median(c)
    delta = _relative(b_mid, c_mid)
    change = delta if direction == "higher" else -delta
    moved = _log_ratio(b_mid, c_mid)
    test, significant, p, confirm = _evidence(b, c, moved, options, noise)
    noise_used = noise if test == "history" else None
    margin = moved > math.log(options.margin_for(metric))
    significant = significant or margin
    mark = _mark(change, threshold, significant, test)
    return CompareRow(
        phase=phase,
        metric=metric,
        unit=unit,
        direction=direction,
        baseline=b_mid,
        current=c_mid,
        baseline_repeats=b,
        current_repeats=c,
        delta=delta,
        change=change,
        threshold=threshold,
        test=test,
        p_value=p,
        significant=significant,
        mark=mark,
        noise=noise_used,
        margin=margin,
        confirm_repeats=confirm if mark == MARK_UNCONFIRMED else None,
    )


def format_value(value: float | None, unit: str) -> str:
    """A metric value with its unit label: ``1.2 GiB/s``, ``350 us``, ``12.3k ops/s``."""
    if value is None:
        return "-"
    if unit == "B/s":
        return format_rate(value)
    if unit == "s":
        return format_seconds(value)
    if unit in ("ops/s", "samples/s"):
        return format_count(value, f" {unit}")
    if unit == "fraction":
        return f"{value * 100:.1f} %"
    return f"{value:g} {unit}".strip()


def format_percent(x: float | None, *, signed: bool = True) -> str:
    """``-0.231`` -> ``−23.1 %`` (a true minus sign); None -> ``-``."""
    if x is None:
        return "-"
    if math.isinf(x):
        return "+inf %" if x > 0 else "−inf %"
    text = f"{abs(x) * 100:.1f} %"
    if not signed:
        return text
    return ("−" if x < 0 and text != "0.0 %" else "+") + text
