"""One metric of one phase held against the baseline: :func:`measure_metric` gathers its
evidence (a p-value from the repeats or the history), :func:`judge` decides every metric's mark
at once, the p-values corrected across all of them; :func:`compare_metric` is one metric judged
as a family of one.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.units import format_count, format_rate, format_seconds
from ..result.stats import Summary, summarize
from .noise import (
    CORRECTIONS,
    Noise,
    history_p_value,
    log_t_test,
    prediction_p_value,
    repeats_to_confirm,
    runs_to_confirm,
)
from .options import (
    MARK_BETTER,
    MARK_MISSING,
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
    test: str | None  # "t" (the repeats) | "history" | None (no spread measured, one side)
    p_value: float | None  # the test's own two-sided p
    significant: bool  # confirmed: the corrected p is within alpha
    mark: str
    noise: Noise | None = None  # the history's spread, when it decided
    sd_log: float | None = None  # the spread of ln values the test used
    p_adjusted: float | None = None  # corrected across the family (Holm or BH)
    family: int = 1  # metrics tested together (the correction's m)
    confirm_repeats: int | None = None  # unconfirmed: repeats a side that would confirm
    confirm_runs: int | None = None  # unconfirmed: earlier runs in the history that would
    tail_ops: int | None = None  # a percentile over too few operations to judge: their count

    @property
    def name(self) -> str:
        return f"{self.phase}.{self.metric}"

    @property
    def baseline_spread(self) -> Summary | None:
        return summarize(self.baseline_repeats)

    @property
    def current_spread(self) -> Summary | None:
        return summarize(self.current_repeats)

    @property
    def worse(self) -> bool:
        """Moved the wrong way by more than its threshold (confirmed or not)."""
        return self.change is not None and self.change < -self.threshold


def _relative(base: float, cur: float) -> float:
    if base == 0:
        return 0.0 if cur == 0 else math.copysign(math.inf, cur)
    return (cur - base) / abs(base)


def _log_ratio(base: float, cur: float) -> float:
    """ln(cur / base); infinite when one side is zero or the signs differ."""
    if base == cur:
        return 0.0
    if base <= 0 or cur <= 0:
        return math.copysign(math.inf, cur - base)
    return math.log(cur / base)


def _measured(values: Sequence[float | None]) -> tuple[float, ...]:
    """The values measured: a missing or non-finite one is "not measured", never 0."""
    return tuple(float(v) for v in values if v is not None and math.isfinite(v))


def measure_metric(
    phase: str,
    metric: str,
    unit: str,
    direction: str,
    baseline: Sequence[float | None],
    current: Sequence[float | None],
    options: CompareOptions,
    noise: Noise | None = None,
) -> CompareRow:
    """One metric's values and evidence, not yet judged (``mark`` blank until :func:`judge`).

    The evidence is the first that applies: the history (``noise`` from at least
    ``options.min_history`` earlier runs, the baseline among them: :func:`prediction_p_value`,
    the current run held to their centre and spread; :func:`history_p_value` on ln(current /
    baseline) for a noise given without its centre),
    else the repeats (both sides at least two: :func:`log_t_test`), else none. A side with no
    value is marked ``x`` (measured on one side only).
    """
    threshold = options.threshold_for(phase, metric)
    b, c = _measured(baseline), _measured(current)
    common: dict[str, Any] = dict(
        phase=phase, metric=metric, unit=unit, direction=direction, threshold=threshold
    )
    if not b or not c:
        return CompareRow(
            **common, baseline=statistics.median(b) if b else None,
            current=statistics.median(c) if c else None, baseline_repeats=b,
            current_repeats=c, delta=None, change=None, test=None, p_value=None,
            significant=False, mark=MARK_MISSING,
        )  # fmt: skip
    b_mid, c_mid = statistics.median(b), statistics.median(c)
    delta = _relative(b_mid, c_mid)
    test, p, sd, used = None, None, None, None
    if noise is not None and noise.runs >= options.min_history:
        if noise.mean_log is not None and c_mid > 0:
            p = prediction_p_value(math.log(c_mid), noise, options.tail_df)
            if p is not None and (math.log(c_mid) - noise.mean_log) * delta < 0:
                p = 1.0  # the current run lies beyond the history's centre the other way
        else:
            p = history_p_value(_log_ratio(b_mid, c_mid), noise, options.tail_df)
        test, sd, used = "history", noise.sd_log, noise
    else:
        tt = log_t_test(b, c)
        if tt is not None:
            test, p, sd = "t", tt.p_value, tt.sd_log
            if tt.diff * delta < 0:  # the means of the logs and the medians disagree on the way
                p = 1.0
    return CompareRow(
        **common, baseline=b_mid, current=c_mid, baseline_repeats=b, current_repeats=c,
        delta=delta, change=delta if direction == "higher" else -delta,
        test=test if p is not None else None, p_value=p, significant=False, mark=MARK_SAME,
        noise=used, sd_log=sd,
    )  # fmt: skip


def _confirmation(row: CompareRow, options: CompareOptions, level: float) -> dict:
    """For an unconfirmed row: the repeats a side (or earlier runs) at which a change of the
    threshold's size, at the spread observed, would be confirmed at ``level``."""
    if row.tail_ops is not None:
        return {}  # no sample of runs or repeats confirms it: more operations a repeat do
    up = row.delta is not None and row.delta > 0
    size = math.log1p(row.threshold) if up or row.threshold >= 1 else -math.log1p(-row.threshold)
    if row.test == "history" and row.sd_log is not None:
        return {
            "confirm_runs": runs_to_confirm(
                row.sd_log, size, level, options.power, tail_df=options.tail_df
            )
        }
    if row.sd_log is not None:
        return {"confirm_repeats": repeats_to_confirm(row.sd_log, size, level, options.power)}
    return {"confirm_repeats": options.spread_repeats}


#: A latency percentile is judged only when at least this many operations lie beyond it in
#: every repeat of both runs: a p99 of 32 operations is their largest, and the largest of a
#: few dozen writes to a virtual disk moved ×3 to ×8 between identical runs on this VM.
TAIL_BEYOND = 10

#: The latency percentiles of a phase and their quantiles.
TAIL_QUANTILES = {"latency_p99": 0.99, "latency_p999": 0.999}


def tail_ops_needed(metric: str) -> int | None:
    """Operations a repeat needs for ``metric`` (a tail percentile) to be judged, or None for
    a metric of any other kind."""
    q = TAIL_QUANTILES.get(metric)
    return None if q is None else math.ceil(TAIL_BEYOND / (1 - q) - 1e-9)


def too_few_for_tail(row: CompareRow, ops: int | None) -> CompareRow:
    """``row`` without its test when it is a tail percentile over fewer than
    :func:`tail_ops_needed` operations a repeat (``ops``: the fewest of any repeat on either
    side): it is shown, and a move beyond the threshold is unconfirmed, never confirmed."""
    need = tail_ops_needed(row.metric)
    if need is None or ops is None or ops >= need or row.mark == MARK_MISSING:
        return row
    return dataclasses.replace(row, test=None, p_value=None, sd_log=None, noise=None, tail_ops=ops)


def _evidence_key(row: CompareRow) -> tuple:
    """Rows of one phase whose evidence is the same to 12 digits (its test, p, spread) are one
    hypothesis: a metric that is a fixed multiple of another (IOPS of bandwidth at one block
    size) has the same ln values up to a constant, so the same t, and tests nothing new."""
    return (row.phase, row.test, float(f"{row.p_value:.12g}"), float(f"{row.sd_log or 0:.12g}"))


def judge(rows: Sequence[CompareRow], options: CompareOptions) -> list[CompareRow]:
    """Every row's mark, the p-values of all the rows with a test corrected together
    (``options.correction``: Holm, or Benjamini-Hochberg) at family level ``options.alpha``,
    rows with the same evidence counted once (:func:`_evidence_key`).

    Beyond the threshold and confirmed: ``+`` worse or ``-`` better; beyond and not
    confirmed: ``?`` unconfirmed, with the repeats (or earlier runs) that would confirm a change
    of the threshold's size at the spread observed, at level alpha / m (the strictest step);
    within the threshold: blank; on one side only: ``x``.
    """
    hypotheses: dict[tuple, list[int]] = {}
    p_of: dict[tuple, float] = {}
    for i, r in enumerate(rows):
        if r.p_value is not None:
            key = _evidence_key(r)
            hypotheses.setdefault(key, []).append(i)
            p_of.setdefault(key, r.p_value)
    keys = list(hypotheses)
    adjusted = CORRECTIONS[options.correction]([p_of[k] for k in keys])
    adj = {i: a for k, a in zip(keys, adjusted, strict=True) for i in hypotheses[k]}
    m = len(keys)
    out = []
    for i, r in enumerate(rows):
        if r.mark == MARK_MISSING:
            out.append(r)
            continue
        p_adj = adj.get(i)
        significant = p_adj is not None and p_adj <= options.alpha
        fields: dict = {"p_adjusted": p_adj, "family": max(m, 1), "significant": significant}
        if r.change is None or not abs(r.change) > r.threshold:
            fields["mark"] = MARK_SAME
        elif significant:
            fields["mark"] = MARK_BETTER if r.change > 0 else MARK_WORSE
        else:
            fields["mark"] = MARK_UNCONFIRMED
            fields |= _confirmation(r, options, options.alpha / max(m, 1))
        out.append(dataclasses.replace(r, **fields))
    return out


def compare_metric(
    phase: str,
    metric: str,
    unit: str,
    direction: str,
    baseline: Sequence[float | None],
    current: Sequence[float | None],
    options: CompareOptions,
    noise: Noise | None = None,
) -> CompareRow:
    """One metric measured and judged on its own (a family of one); see :func:`judge`."""
    row = measure_metric(phase, metric, unit, direction, baseline, current, options, noise)
    return judge([row], options)[0]


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
