"""What a comparison is asked for: the marks, the headline metrics, the options
(:class:`CompareOptions`) and the ``--threshold`` parser.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import UsageError
from ..core.units import parse_count, parse_percent
from .noise import RUN_TAIL_DF

FAIL_ON = ("regression", "unconfirmed", "never")
CORRECTION = ("holm", "bh")


MARK_WORSE, MARK_BETTER, MARK_SAME, MARK_MISSING = "+", "-", " ", "x"


MARK_UNCONFIRMED = "?"


def is_latency(metric: str) -> bool:
    """Latency-like metrics take the latency threshold; everything else is throughput-like."""
    return metric.startswith(("latency", "load_wait"))


@dataclass(frozen=True)
class CompareOptions:
    """How far a metric may move, what confirms a move, and what counts as failure.

    ``per_metric`` holds ``(fnmatch pattern, threshold)`` pairs matched against ``phase.metric``
    and against the bare metric name; the first matching pattern wins. ``alpha`` is the
    family-wise level (Holm; the false-discovery rate with ``correction="bh"``) over every
    metric a comparison tests; ``power`` is the chance at which "would confirm" counts are
    computed; ``spread_repeats`` the repeats a side that measure a spread when none was;
    ``tail_df`` the most degrees of freedom the history's test assumes (:data:`RUN_TAIL_DF`,
    the runs' heavy tail; ``None``: Student's k - 1).
    ``fail_on``: ``regression`` (confirmed regressions fail), ``unconfirmed`` (also an
    unconfirmed move the wrong way beyond the threshold), ``never`` (always OK). ``strict``:
    different hosts, storage, engines, cache modes or incomplete runs are not comparable too.
    See ``docs/concepts/compare.md`` for the rule.
    """

    threshold_throughput: float = 0.10
    threshold_latency: float = 0.20
    per_metric: Sequence[tuple[str, float]] = ()
    strict: bool = False
    fail_on: str = "regression"
    alpha: float = 0.01
    correction: str = "holm"
    power: float = 0.8
    spread_repeats: int = 3
    min_history: int = 3
    tail_df: int | None = RUN_TAIL_DF

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_metric", tuple((p, float(t)) for p, t in self.per_metric))
        if self.fail_on not in FAIL_ON:
            raise UsageError(
                f"--fail-on: expected one of {', '.join(FAIL_ON)}, got {self.fail_on!r}"
            )
        if self.correction not in CORRECTION:
            raise UsageError(
                f"--correction: expected one of {', '.join(CORRECTION)}, got {self.correction!r}"
            )
        if not (math.isfinite(self.alpha) and 0 < self.alpha < 1):
            raise UsageError(f"--alpha: expected a level between 0 and 1, got {self.alpha!r}")
        if self.tail_df is not None and not (type(self.tail_df) is int and self.tail_df >= 1):
            raise UsageError(
                f"--tail-df: expected a whole number >= 1 or 'normal', got {self.tail_df!r}"
            )
        for value in (self.threshold_throughput, self.threshold_latency):
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(f"--threshold: expected a non-negative percentage, got {value!r}")

    def pattern_matches(self, pattern: str, phase: str, metric: str) -> bool:
        return fnmatch.fnmatchcase(f"{phase}.{metric}", pattern) or fnmatch.fnmatchcase(
            metric, pattern
        )

    def threshold_for(self, phase: str, metric: str) -> float:
        for pattern, threshold in self.per_metric:
            if self.pattern_matches(pattern, phase, metric):
                return threshold
        return self.threshold_latency if is_latency(metric) else self.threshold_throughput


_DEFAULT_KEYS = {"throughput": "threshold_throughput", "latency": "threshold_latency"}


def parse_thresholds(text: str, base: CompareOptions | None = None) -> CompareOptions:
    """Parse ``--threshold``: ``10%`` or ``bandwidth=5%,latency_p99=30%,*iops*=15%``.

    A bare percentage sets both defaults; ``throughput=`` and ``latency=`` set one default;
    any other key is an fnmatch pattern on ``phase.metric`` or the metric name.
    """
    options = base or CompareOptions()
    changes: dict[str, Any] = {}
    patterns: list[tuple[str, float]] = []
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise UsageError("--threshold: expected 10% or METRIC=10%[,METRIC=10%...], got ''")
    for item in items:
        if not item:
            continue
        key, eq, value = item.partition("=")
        key = key.strip()
        if eq and not key:
            raise UsageError(f"--threshold: {item!r} has no metric before '='")
        what = f"--threshold {key}" if eq else "--threshold"
        fraction = parse_percent((value if eq else key).strip(), what=what)
        if not eq:
            changes["threshold_throughput"] = changes["threshold_latency"] = fraction
        elif key in _DEFAULT_KEYS:
            changes[_DEFAULT_KEYS[key]] = fraction
        else:
            patterns.append((key, fraction))
    if patterns:
        changes["per_metric"] = tuple(patterns) + tuple(options.per_metric)
    return replace(options, **changes)


def parse_tail_df(text: str) -> int | None:
    """Parse ``--tail-df``: a whole number >= 1, or ``normal`` (no cap: Student's k - 1)."""
    if str(text).strip().lower() == "normal":
        return None
    return parse_count(text, what="--tail-df (a whole number >= 1, or 'normal')")
