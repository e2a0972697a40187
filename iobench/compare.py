"""Direction- and noise-aware comparison of two runs.

A metric's value in a run is the median over its repeats (:func:`stats.summarize`). A metric
is a regression only when it moved the wrong way by more than its threshold **and** the move is
confirmed, by the first of these that applies:

1. **history** — at least ``min_history`` (3) earlier runs in the history with the same workload
   spec hash, host class and storage: ``s`` is the sample standard deviation of ln(value) over
   those runs (each run's value its median over repeats), and the move is beyond the noise when
   ``|ln(current / baseline)| > t(1 − noise_alpha/2, k − 1) · √2 · s`` — a two-sided Student-t
   test at ``noise_alpha`` (0.1 %) that two runs drawn from that run-to-run spread differ so much;
2. **repeats** — both sides have ``min_repeats`` (6) repeats: a two-sided Mann-Whitney U test,
   p < ``alpha`` (1 %); both sides have at least 3: the repeats' ranges (min..max) do not overlap;
3. otherwise the move is **unconfirmed** (``?``, exit 0): one run a side cannot tell noise from
   change; ``--repeat 3`` on both sides or 3 earlier runs in the history would confirm or dismiss
   it.

Whatever the evidence, a move beyond the large margin is confirmed: ×10 for throughput
(``large_factor``: −90 % or +900 %), ×100 for latency (``large_factor_latency``). Identical runs
on a shared 2-core VM differed by up to ×4.4 in bandwidth back to back (×13 over twenty runs),
and p99 latency by ×16 over six.

Marks: ``+`` worse, ``-`` better, ``~`` beyond the threshold but within the noise, ``?`` beyond
the threshold, unconfirmed, blank within the threshold, ``x`` measured on one side only.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from . import history
from .errors import ExitStatus, UsageError
from .results import RunResult, load
from .stats import Summary, summarize
from .units import (
    format_bytes,
    format_count,
    format_rate,
    format_seconds,
    format_spread,
    parse_percent,
)

FAIL_ON = ("regression", "never")
MARK_WORSE, MARK_BETTER, MARK_NOISE, MARK_SAME, MARK_MISSING = "+", "-", "~", " ", "x"
MARK_UNCONFIRMED = "?"
# Each phase's headline metric: the first of these it has.
HEADLINE_METRICS = ("bandwidth", "iops", "au", "samples_per_s", "bytes_per_s", "max_gpus")


def is_latency(metric: str) -> bool:
    """Latency-like metrics take the latency threshold; everything else is throughput-like."""
    return metric.startswith(("latency", "load_wait"))


@dataclass(frozen=True)
class CompareOptions:
    """How far a metric may move, what confirms a move, and what counts as failure.

    ``per_metric`` holds ``(fnmatch pattern, threshold)`` pairs matched against ``phase.metric``
    and against the bare metric name; the first matching pattern wins. ``fail_on="never"`` makes
    :meth:`CompareReport.exit_status` always OK. See the module docstring for the rule.
    """

    threshold_throughput: float = 0.10
    threshold_latency: float = 0.20
    per_metric: Sequence[tuple[str, float]] = ()
    strict: bool = False
    fail_on: str = "regression"
    alpha: float = 0.01
    min_repeats: int = 6
    min_range_repeats: int = 3
    min_history: int = 3
    noise_alpha: float = 0.001
    large_factor: float = 10.0
    large_factor_latency: float = 100.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_metric", tuple((p, float(t)) for p, t in self.per_metric))
        if self.fail_on not in FAIL_ON:
            raise UsageError(
                f"--fail-on: expected one of {', '.join(FAIL_ON)}, got {self.fail_on!r}"
            )
        for value in (self.threshold_throughput, self.threshold_latency):
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(f"--threshold: expected a non-negative percentage, got {value!r}")

    def pattern_matches(self, pattern: str, phase: str, metric: str) -> bool:
        return fnmatch.fnmatchcase(f"{phase}.{metric}", pattern) or fnmatch.fnmatchcase(
            metric, pattern
        )

    def margin_for(self, metric: str) -> float:
        """The factor beyond which a move is confirmed without evidence of the noise."""
        return self.large_factor_latency if is_latency(metric) else self.large_factor

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


# --- Mann-Whitney U ----------------------------------------------------------------------------


class MannWhitney(NamedTuple):
    u: float  # U of the first sample
    p_value: float  # two-sided
    method: str  # "exact" | "normal"


_EXACT_MAX_N = 40  # n1 + n2 up to which the tie-free exact distribution is used


def _ranks(values: Sequence[float]) -> tuple[list[float], list[int]]:
    """Average ranks (1-based) and the sizes of the tie groups."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    ties = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            ranks[order[k]] = rank
        ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


def u_distribution(n1: int, n2: int) -> list[int]:
    """How many of the C(n1+n2, n1) orderings give U = 0, 1, ..., n1*n2 (no ties).

    These are the coefficients of the Gaussian binomial [n1+n2 choose n1]_q, built with the
    q-Pascal rule [N, k] = [N-1, k-1] + q^k [N-1, k].
    """
    rows: list[list[int]] = [[1]] + [[] for _ in range(n1)]  # rows[k] = [N choose k]_q
    for big_n in range(1, n1 + n2 + 1):
        new = [[1]]
        for k in range(1, min(big_n, n1) + 1):
            coeffs = [0] * (k * (big_n - k) + 1)
            for i, v in enumerate(rows[k - 1]):
                coeffs[i] += v
            for i, v in enumerate(rows[k]):
                coeffs[i + k] += v
            new.append(coeffs)
        rows = new + [[] for _ in range(n1 + 1 - len(new))]
    return rows[n1]


def mann_whitney_u(x: Sequence[float], y: Sequence[float], method: str = "auto") -> MannWhitney:
    """Two-sided Mann-Whitney U test of ``x`` against ``y``.

    ``auto``: exact when there are no ties and n1 + n2 <= 40, else ``normal``: the normal
    approximation with tie and continuity corrections (scipy's ``method="asymptotic"``).
    """
    if method not in ("auto", "exact", "normal"):
        raise ValueError(f"method must be auto, exact or normal, not {method!r}")
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        raise ValueError("mann_whitney_u needs at least one value on each side")
    ranks, ties = _ranks([*map(float, x), *map(float, y)])
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    n = n1 + n2
    no_ties = all(t == 1 for t in ties)
    if method == "exact" and not no_ties:
        raise ValueError("the exact distribution assumes no ties")
    if method == "exact" or (method == "auto" and no_ties and n <= _EXACT_MAX_N):
        counts = u_distribution(n1, n2)
        u_low = int(round(min(u1, n1 * n2 - u1)))
        p = 2 * sum(counts[: u_low + 1]) / math.comb(n, n1)
        return MannWhitney(u1, min(1.0, p), "exact")
    tie_term = sum(t**3 - t for t in ties)
    var = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if var <= 0:  # every value equal
        return MannWhitney(u1, 1.0, "normal")
    z = max(0.0, abs(u1 - n1 * n2 / 2) - 0.5) / math.sqrt(var)
    return MannWhitney(u1, min(1.0, math.erfc(z / math.sqrt(2))), "normal")


# --- Student's t (for the history's noise floor) -----------------------------------------------


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for aa in (
            m * (b - m) * x / ((a - 1 + 2 * m) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1 + 2 * m)),
        ):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _beta_inc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _beta_cf(a, b, x) / a
    return 1 - front * _beta_cf(b, a, 1 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    p = 0.5 * _beta_inc(df / 2, 0.5, df / (df + t * t))
    return p if t >= 0 else 1 - p


def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile (0.5 < q < 1) of Student's t with ``df`` degrees of freedom."""
    if not 0.5 < q < 1 or df <= 0:
        raise ValueError(f"t_quantile needs 0.5 < q < 1 and df > 0, got q={q}, df={df}")
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - q:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if t_sf(mid, df) > 1 - q else (lo, mid)
    return (lo + hi) / 2


@dataclass(frozen=True)
class Noise:
    """One metric's run-to-run spread, from earlier runs of the same spec on the same setup."""

    runs: int  # k: earlier runs that measured it
    sd_log: float  # sample standard deviation of ln(value) over those runs
    floor: float  # |ln(current / baseline)| beyond which a move is outside the noise

    @property
    def factor(self) -> float:
        """The floor as a ratio: a move within ×factor is within the noise."""
        return math.exp(min(self.floor, 700.0))  # beyond e^700 a float overflows

    @classmethod
    def of(cls, values: Sequence[float], alpha: float) -> Noise | None:
        """From per-run values; None when fewer than two are positive."""
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) < 2:
            return None
        sd = statistics.stdev(logs)
        return cls(len(logs), sd, t_quantile(1 - alpha / 2, len(logs) - 1) * math.sqrt(2) * sd)


# --- one metric --------------------------------------------------------------------------------


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
    b_mid, c_mid = statistics.median(b), statistics.median(c)
    delta = _relative(b_mid, c_mid)
    change = delta if direction == "higher" else -delta
    moved = _log_ratio(b_mid, c_mid)
    p = None
    confirm = None
    if noise is not None and noise.runs >= options.min_history:
        test, significant = "history", moved > noise.floor
    elif len(b) >= options.min_repeats and len(c) >= options.min_repeats:
        test, p = "mann-whitney", mann_whitney_u(b, c).p_value
        significant = p < options.alpha
    elif len(b) >= options.min_range_repeats and len(c) >= options.min_range_repeats:
        test = "ranges"
        significant = max(b) < min(c) or max(c) < min(b)
    else:
        test, significant = None, False
        confirm = options.min_range_repeats
    noise_used = noise if test == "history" else None
    margin = moved > math.log(options.margin_for(metric))
    significant = significant or margin
    if not abs(change) > threshold:
        mark = MARK_SAME
    elif significant:
        mark = MARK_BETTER if change > 0 else MARK_WORSE
    elif test is None:
        mark = MARK_UNCONFIRMED
    else:
        mark = MARK_NOISE
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


# --- two runs ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRef:
    """Which run a side of the report is."""

    run_id: str
    started_at: str
    workload: str | None
    spec_hash: str | None
    env_fingerprint: str

    @classmethod
    def of(cls, run: RunResult) -> RunRef:
        w = run.workload or {}
        return cls(
            run_id=run.run_id,
            started_at=run.started_at,
            workload=w.get("name"),
            spec_hash=w.get("spec_hash"),
            env_fingerprint=history.env_fingerprint(run),
        )


@dataclass(frozen=True)
class NoiseBasis:
    """Where the noise floors came from: earlier runs of the same spec on the same setup."""

    url: str | None
    runs: int  # earlier runs that matched (spec hash, host class, storage)
    spec_hash: str | None
    host_class: str
    fs_identity: str
    metrics: Mapping[tuple[str, str], Noise] = field(default_factory=dict)

    def describe(self, min_history: int) -> str:
        where = f"{self.runs} earlier run{'s' if self.runs != 1 else ''}"
        setup = f"of spec {self.spec_hash or '?'} on {self.host_class}, {self.fs_identity}"
        if self.runs >= min_history:
            return f"noise: {where} {setup}"
        return f"noise: {where} {setup} ({min_history} needed for a noise floor)"


@dataclass
class CompareReport:
    """The outcome of :func:`compare_runs`.

    Exit status (:meth:`exit_status`): with ``fail_on="never"`` always OK. When no metric was
    measured on both sides nothing was compared, and a gate must not pass: NOT_COMPARABLE (3),
    with or without ``strict``. Otherwise a not-comparable pair (different workload spec) is
    NOT_COMPARABLE under ``strict``; without ``strict`` it is only reported
    (``comparable=False``, ``reason``) and the exit status is decided by the metrics as for a
    comparable pair: FAILED (1) if any is a regression, else OK. Unconfirmed moves (``?``) never
    fail. That keeps a CI job that changed its workload on purpose from failing by surprise,
    while ``--strict`` guards jobs that must compare like with like.
    """

    baseline: RunRef
    current: RunRef
    rows: list[CompareRow]
    comparable: bool = True
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    options: CompareOptions = field(default_factory=CompareOptions)
    noise: NoiseBasis | None = None

    @property
    def regressions(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_WORSE]

    @property
    def improvements(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_BETTER]

    @property
    def noisy(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_NOISE]

    @property
    def unconfirmed(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_UNCONFIRMED]

    @property
    def missing(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_MISSING]

    @property
    def compared(self) -> list[CompareRow]:
        """The metrics measured on both sides."""
        return [r for r in self.rows if r.mark != MARK_MISSING]

    def headlines(self) -> list[CompareRow]:
        """One row per phase, in order: its headline metric (the first of HEADLINE_METRICS it
        has on both sides, else on either side)."""
        by_phase: dict[str, list[CompareRow]] = {}
        for r in self.rows:
            by_phase.setdefault(r.phase, []).append(r)
        out = []
        for rows in by_phase.values():
            ranked = sorted(
                rows,
                key=lambda r: (
                    r.mark == MARK_MISSING,
                    HEADLINE_METRICS.index(r.metric)
                    if r.metric in HEADLINE_METRICS
                    else len(HEADLINE_METRICS),
                ),
            )
            out.append(ranked[0])
        return out

    def exit_status(self) -> ExitStatus:
        if self.options.fail_on == "never":
            return ExitStatus.OK
        if not self.compared:
            return ExitStatus.NOT_COMPARABLE
        if not self.comparable and self.options.strict:
            return ExitStatus.NOT_COMPARABLE
        return ExitStatus.FAILED if self.regressions else ExitStatus.OK

    def summary(self) -> str:
        """One line: every regression with its change, or what was found instead."""
        prefix = "" if self.comparable else f"not comparable ({self.reason}); "
        if not self.compared:
            return f"{prefix}nothing compared: no metric was measured in both runs"
        regs = self.regressions
        if regs:
            items = ", ".join(f"{r.name} {format_percent(r.delta)}" for r in regs)
            return f"{prefix}{_plural(len(regs), 'regression')}: {items}"
        parts = [f"{_plural(len(self.compared), 'metric')} compared"]
        if self.improvements:
            parts.append(_plural(len(self.improvements), "improvement"))
        if self.noisy:
            parts.append(f"{len(self.noisy)} beyond threshold within noise")
        if self.unconfirmed:
            parts.append(f"{len(self.unconfirmed)} unconfirmed")
        if self.missing:
            parts.append(f"{len(self.missing)} on one side only")
        return f"{prefix}no regressions: " + ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _samples(run: RunResult) -> dict[tuple[str, str], dict[str, Any]]:
    """(phase, metric) -> unit, direction and the measured values (repeats), in run order."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row in history.metric_rows(run):
        entry = out.setdefault(
            (row["phase"], row["metric"]),
            {"unit": row["unit"], "direction": row["direction"], "values": []},
        )
        if not row["aggregate"]:
            entry["values"].append(row["value"])
    return out


def _param_text(key: str, value: Any) -> str:
    sized = key.endswith("size") or key == "rate"
    if sized and isinstance(value, int) and not isinstance(value, bool) and value >= 1024:
        return format_bytes(value)
    if isinstance(value, (list, dict, bool)) or value is None:
        return json.dumps(value)
    return str(value)


def spec_differences(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The workload keys whose values differ: ``jobs 2 vs 4``, one per key, sorted."""
    out = []
    if baseline.get("generator") != current.get("generator"):
        out.append(f"generator {baseline.get('generator')} vs {current.get('generator')}")
    bp, cp = baseline.get("params") or {}, current.get("params") or {}
    for key in sorted(set(bp) | set(cp)):
        if key not in bp:
            out.append(f"{key} unset vs {_param_text(key, cp[key])}")
        elif key not in cp:
            out.append(f"{key} {_param_text(key, bp[key])} vs unset")
        elif bp[key] != cp[key]:
            out.append(f"{key} {_param_text(key, bp[key])} vs {_param_text(key, cp[key])}")
    return out


def _comparability(baseline: RunResult, current: RunResult) -> tuple[bool, str | None, list[str]]:
    bw, cw = baseline.workload or {}, current.workload or {}
    warnings = []
    b_hash, c_hash = bw.get("spec_hash"), cw.get("spec_hash")
    if bw.get("name") != cw.get("name") or bw.get("generator") != cw.get("generator"):
        return False, f"different workloads: {bw.get('name')} vs {cw.get('name')}", warnings
    if b_hash and c_hash and b_hash != c_hash:
        keys = spec_differences(bw, cw)
        if len(keys) > 6:
            keys = keys[:6] + [f"{len(keys) - 6} more"]
        what = "; ".join(keys) if keys else f"spec_hash {b_hash} vs {c_hash}"
        return False, f"workload spec differs: {what}", warnings
    b_clients, c_clients = baseline.clients()[0], current.clients()[0]
    if b_clients != c_clients:
        return False, f"clients differ: {b_clients} vs {c_clients} torchrun ranks", warnings
    if not (b_hash and c_hash):
        warnings.append("a run has no workload spec_hash: the specs may differ")
    return True, None, warnings


def _environment_warnings(baseline: RunResult, current: RunResult) -> list[str]:
    warnings = []
    if baseline.run_id == current.run_id:
        warnings.append(f"baseline and current are the same run ({baseline.run_id})")
    b_host, c_host = history.host_class(baseline), history.host_class(current)
    if b_host != c_host:
        warnings.append(f"host differs: {b_host} vs {c_host}")
    b_fs, c_fs = history.fs_identity(baseline), history.fs_identity(current)
    if b_fs != c_fs:
        warnings.append(f"storage differs: {b_fs} vs {c_fs}")
    b_eng, c_eng = (baseline.engine or {}).get("name"), (current.engine or {}).get("name")
    if b_eng != c_eng:
        warnings.append(f"engine differs: {b_eng} vs {c_eng}")
    for side, run in (("baseline", baseline), ("current", current)):
        if run.status != "complete":
            warnings.append(f"{side} run is {run.status}: its figures may be incomplete")
        for p in run.phases:
            if p.status != "ok":
                warnings.append(f"{side} phase {p.name} is {p.status}")
    for p in baseline.phases:
        q = current.phase(p.name)
        if q is not None and p.cache != q.cache:
            warnings.append(
                f"phase {p.name}: page cache handled differently ({p.cache} vs {q.cache})"
            )
    return warnings


def _check_measured(run: RunResult, side: str) -> None:
    """A run with no figures cannot pass or fail a gate: bad input, named."""
    if not history.metric_rows(run):
        phases = _plural(len(run.phases), "phase")
        raise UsageError(
            f"{side} run {run.run_id} measured nothing ({run.status}, {phases}): "
            "nothing to compare",
            hint="compare runs that completed at least one phase",
        )


def _check_patterns(options: CompareOptions, rows: Sequence[CompareRow]) -> None:
    """A ``--threshold`` pattern that matches no metric of these runs is a typo, not a no-op."""
    for pattern, _threshold in options.per_metric:
        if not any(options.pattern_matches(pattern, r.phase, r.metric) for r in rows):
            metrics = ", ".join(dict.fromkeys(r.metric for r in rows))
            raise UsageError(
                f"--threshold {pattern!r} matches no metric of these runs",
                hint=f"use one of {metrics}, or PHASE.METRIC",
            )


def compare_runs(
    baseline: RunResult,
    current: RunResult,
    options: CompareOptions | None = None,
    noise: NoiseBasis | None = None,
) -> CompareReport:
    """Compare every (phase, metric) the two runs share; see :class:`CompareReport`.

    ``noise`` (from :func:`history_noise`) gives the run-to-run spread of each metric. A run
    that measured nothing, or a ``--threshold`` pattern that matches no metric, is a
    :class:`UsageError`.
    """
    options = options or CompareOptions()
    _check_measured(baseline, "baseline")
    _check_measured(current, "current")
    b, c = _samples(baseline), _samples(current)
    floors = noise.metrics if noise is not None else {}
    rows = []
    for key in [*b, *(k for k in c if k not in b)]:
        meta = b.get(key) or c[key]
        b_values = b[key]["values"] if key in b else ()
        c_values = c[key]["values"] if key in c else ()
        phase, metric = key
        rows.append(
            compare_metric(
                phase,
                metric,
                meta["unit"],
                meta["direction"],
                b_values,
                c_values,
                options,
                floors.get(key),
            )
        )
    _check_patterns(options, rows)
    comparable, reason, warnings = _comparability(baseline, current)
    return CompareReport(
        baseline=RunRef.of(baseline),
        current=RunRef.of(current),
        rows=rows,
        comparable=comparable,
        reason=reason,
        warnings=warnings + _environment_warnings(baseline, current),
        options=options,
        noise=noise,
    )


def history_noise(
    baseline: RunResult,
    current: RunResult,
    url: str | None = None,
    options: CompareOptions | None = None,
    *,
    on_warning: history.Warn = None,
) -> NoiseBasis:
    """Each metric's run-to-run spread over the earlier runs in the history: same workload spec
    hash, same host class and storage (:func:`history.env_fingerprint`) as ``current``,
    started before it, complete, neither of the two runs compared.

    The storage is part of the match as well as the host class: the run-to-run spread is the
    storage's as much as the machine's.
    """
    options = options or CompareOptions()
    spec = (current.workload or {}).get("spec_hash")
    fingerprint = history.env_fingerprint(current)
    basis = {
        "url": url or history.default_history_url(),
        "spec_hash": spec,
        "host_class": history.host_class(current),
        "fs_identity": history.fs_identity(current),
    }
    if not spec:
        return NoiseBasis(runs=0, **basis)
    skip = {baseline.run_id, current.run_id}
    per_metric: dict[tuple[str, str], list[float]] = {}
    runs = 0
    try:
        stored_runs = history.runs_before(url, spec, current.started_at, on_warning=on_warning)
    except UsageError:  # no usable start time: every stored run of the spec is "earlier"
        stored_runs = history.runs_before(url, spec, on_warning=on_warning)
    for stored in stored_runs:
        if stored.run_id in skip:
            continue
        try:
            run = stored.run()
        except Exception as e:  # an unreadable stored result is skipped, as the history does
            if on_warning is not None:
                on_warning(f"history: skipped {stored.path}: stored result is unreadable ({e})")
            continue
        if (
            (run.workload or {}).get("spec_hash") != spec
            or run.status != "complete"
            or history.env_fingerprint(run) != fingerprint
        ):
            continue
        runs += 1
        for key, entry in _samples(run).items():
            value = summarize(entry["values"])
            if value is not None:
                per_metric.setdefault(key, []).append(value.median)
    metrics = {}
    for key, values in per_metric.items():
        if len(values) >= options.min_history:
            floor = Noise.of(values, options.noise_alpha)
            if floor is not None and floor.runs >= options.min_history:
                metrics[key] = floor
    return NoiseBasis(runs=runs, metrics=metrics, **basis)


# --- resolving a run reference -----------------------------------------------------------------

_LATEST_RE = re.compile(r"^latest(?:~(\d+))?$")


def resolve(
    spec: str,
    history_url: str | None = None,
    workload: str | None = None,
    *,
    what: str = "run",
    on_warning: history.Warn = None,
) -> RunResult:
    """A run named by a result.json path or its directory, a stored run id (or unique prefix),
    ``latest`` or ``latest~N`` (N runs before the latest; of ``workload`` when given).
    History files skipped on the way are reported through ``on_warning``."""
    s = str(spec).strip()
    url = history_url or history.default_history_url()
    if not s:
        raise UsageError(f"{what}: empty reference", hint="pass a result.json, a run id or latest")
    m = _LATEST_RE.match(s)
    if m:
        back = int(m.group(1) or 0)
        runs = history.runs_before(url, workload, on_warning=on_warning)
        if len(runs) <= back:
            of = f" of workload {workload}" if workload else ""
            raise UsageError(
                f"{what} {s}: history {url} holds {_plural(len(runs), 'run')}{of}",
                hint="run iobench with --history first, or pass a result.json",
            )
        return runs[-1 - back].run()
    path = Path(s).expanduser()
    if path.exists():
        return load(path)
    if "/" in s or s.endswith(".json") or s.startswith((".", "~")):
        raise UsageError(f"{what} {s}: no such result file or directory")
    try:
        return history.get_run(s, url, on_warning=on_warning)
    except UsageError as e:
        if "ambiguous" in e.message:
            raise
        raise UsageError(
            f"{what} {s!r} is neither a result file nor a run in history {url}",
            hint="pass a result.json, its directory, a run id or latest",
        ) from None


# --- rendering ---------------------------------------------------------------------------------


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


def _value_formatter(unit: str):
    return lambda v: format_value(v, unit)


def _with_spread(value: float | None, repeats: Sequence[float], unit: str) -> str:
    """``845.0 MiB/s (n=6, 559.0–1320.0 MiB/s, CV 29 %)``; ``(n=1)`` for one measurement."""
    s = summarize(repeats)
    if value is None or s is None:
        return format_value(value, unit)
    spread = format_spread(s.n, s.min, s.max, s.cv, _value_formatter(unit))
    return f"{format_value(value, unit)} ({spread})"


def _factor(x: float) -> str:
    if x == int(x):
        return f"×{x:.0f}"
    return f"×{x:.2f}" if x < 100 else f"×{x:.3g}"


def _test_text(row: CompareRow, options: CompareOptions | None = None) -> str:
    """What decided the row: the evidence and its verdict."""
    n = f"({len(row.baseline_repeats)}/{len(row.current_repeats)})"
    if row.mark == MARK_MISSING:
        return "one side only"
    if row.mark == MARK_SAME:
        return "within threshold"
    margin = (options or CompareOptions()).margin_for(row.metric)
    if row.test == "history" and row.noise is not None:
        if row.noise.factor > margin:  # the large margin confirms what the noise cannot
            inside = "beyond" if row.significant else "within"
            floor = f"the {_factor(margin)} margin (noise {_factor(row.noise.factor)}"
            return f"{inside} {floor}, {row.noise.runs} runs)"
        inside = "beyond" if row.significant else "within"
        return f"{inside} noise {_factor(row.noise.factor)} ({row.noise.runs} runs)"
    beyond = f"; beyond the {_factor(margin)} margin" if row.margin else ""
    if row.test == "mann-whitney":
        return f"U p={row.p_value:.2g} {n}{beyond}"
    if row.test == "ranges":
        return f"ranges {'apart' if row.significant else 'overlap'} {n}{beyond}"
    if row.margin:
        return f"beyond the {_factor(margin)} margin {n}"
    return f"unconfirmed {n}"


def _phase_text(report: CompareReport, row: CompareRow) -> str:
    """The headline row's evidence, and the phase's other regressions."""
    text = _test_text(row, report.options)
    others = [r.metric for r in report.regressions if r.phase == row.phase and r is not row]
    if others:
        text += f"; also regressed: {', '.join(others)}"
    return text


def _cells(row: CompareRow, report: CompareReport, *, headline: bool) -> list[str]:
    if headline:
        base = _with_spread(row.baseline, row.baseline_repeats, row.unit)
        cur = _with_spread(row.current, row.current_repeats, row.unit)
        evidence = _phase_text(report, row)
    else:
        base, cur = format_value(row.baseline, row.unit), format_value(row.current, row.unit)
        evidence = _test_text(row, report.options)
    return [
        row.mark,
        row.phase,
        row.metric,
        base,
        cur,
        format_percent(row.delta),
        format_percent(row.threshold, signed=False),
        evidence,
    ]


_HEADER = ["", "phase", "metric", "baseline", "current", "change", "threshold", "evidence"]
_RIGHT = {3, 4, 5, 6}


def _ref_line(label: str, ref: RunRef) -> str:
    return f"{label:<9} {ref.run_id}  {ref.workload or '-'}  {ref.started_at}"


def _noise_line(report: CompareReport) -> str | None:
    if report.noise is None:
        return None
    return report.noise.describe(report.options.min_history)


def _regression_lines(report: CompareReport) -> list[str]:
    return [
        f"regression: {r.name} {format_value(r.baseline, r.unit)} -> "
        f"{format_value(r.current, r.unit)} ({format_percent(r.delta)}, threshold "
        f"{format_percent(r.threshold, signed=False)}, {_test_text(r, report.options)})"
        for r in report.regressions
    ]


def _unconfirmed_lines(report: CompareReport, *, verbose: bool = False) -> list[str]:
    """One line: the unconfirmed moves (headline metrics; all of them with ``verbose``) and
    what would confirm or dismiss them."""
    rows = report.unconfirmed
    if not rows:
        return []
    heads = {id(r) for r in report.headlines()}
    shown = rows if verbose else [r for r in rows if id(r) in heads]
    items = [f"{r.name} {format_percent(r.delta)}" for r in shown]
    if len(shown) < len(rows):
        items.append(f"{len(rows) - len(shown)} more with --verbose")
    o = report.options
    repeats = max(r.confirm_repeats or 0 for r in rows)
    runs = report.noise.runs if report.noise is not None else 0
    return [
        f"unconfirmed ({len(rows)}): {', '.join(items)}: too few repeats and "
        f"{_plural(runs, 'earlier run')} in the history to tell them from noise; "
        f"--repeat {repeats} on both sides, or {o.min_history} earlier runs of this spec on "
        "this host and storage, would confirm or dismiss them"
    ]


def _grid(rows: list[list[str]]) -> list[str]:
    table = [_HEADER] + rows
    widths = [max(len(cells[i]) for cells in table) for i in range(len(_HEADER))]
    return [
        "  ".join(
            c.rjust(widths[i]) if i in _RIGHT else c.ljust(widths[i]) for i, c in enumerate(cells)
        ).rstrip()
        for cells in table
    ]


def render_table(report: CompareReport, *, verbose: bool = False) -> str:
    """Aligned text: the runs, the noise basis, warnings, one line per phase (its headline
    metric, with the spread over repeats), every regression and unconfirmed move, a summary.
    ``verbose`` adds the table of every metric."""
    lines = [_ref_line("baseline", report.baseline), _ref_line("current", report.current)]
    noise = _noise_line(report)
    if noise:
        lines.append(noise)
    if not report.comparable:
        lines.append(f"not comparable: {report.reason}")
    lines += [f"warning: {w}" for w in report.warnings]
    lines.append("")
    lines += _grid([_cells(r, report, headline=True) for r in report.headlines()])
    if verbose:
        lines += ["", "every metric:"]
        lines += _grid([_cells(r, report, headline=False) for r in report.rows])
    lines.append("")
    lines += _regression_lines(report)
    lines += _unconfirmed_lines(report, verbose=verbose)
    lines.append(report.summary())
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def _md_table(report: CompareReport, rows: list[CompareRow], *, headline: bool) -> list[str]:
    lines = ["| " + " | ".join(_HEADER) + " |"]
    lines.append(
        "|" + "|".join("---:" if i in _RIGHT else "---" for i in range(len(_HEADER))) + "|"
    )
    for row in rows:
        cells = _cells(row, report, headline=headline)
        cells[0] = f"`{row.mark}`" if row.mark.strip() else ""
        lines.append("| " + " | ".join(_md_escape(x) for x in cells) + " |")
    return lines


def render_markdown(report: CompareReport, *, verbose: bool = False) -> str:
    """Markdown (for a CI comment) with the same content as :func:`render_table`."""
    b, c = report.baseline, report.current
    lines = [
        f"**baseline** `{b.run_id}` ({_md_escape(b.workload or '-')}, {b.started_at})  ",
        f"**current** `{c.run_id}` ({_md_escape(c.workload or '-')}, {c.started_at})",
        "",
    ]
    noise = _noise_line(report)
    if noise:
        lines += [_md_escape(noise), ""]
    if not report.comparable:
        lines += [f"> **not comparable:** {_md_escape(report.reason or '')}", ""]
    if report.warnings:
        lines += [f"- warning: {_md_escape(w)}" for w in report.warnings] + [""]
    lines += _md_table(report, report.headlines(), headline=True)
    if verbose:
        lines += ["", "Every metric:", ""] + _md_table(report, report.rows, headline=False)
    lines.append("")
    notes = _regression_lines(report) + _unconfirmed_lines(report, verbose=verbose)
    notes = [f"- {_md_escape(x)}" for x in notes]
    lines += notes + ([""] if notes else [])  # the summary must not join the list
    lines.append(f"**{_md_escape(report.summary())}**")
    return "\n".join(lines) + "\n"


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _spread_json(values: Sequence[float]) -> dict[str, Any] | None:
    s = summarize(values)
    return None if s is None else s.to_dict()


def render_json(report: CompareReport, *, verbose: bool = False) -> str:
    """The report as JSON: raw numbers (bytes/s, seconds), no labels; infinities as null.
    Every metric is always there (``verbose`` changes nothing)."""
    o = report.options

    def ref(r: RunRef) -> dict[str, Any]:
        return {
            "run_id": r.run_id,
            "started_at": r.started_at,
            "workload": r.workload,
            "spec_hash": r.spec_hash,
            "env_fingerprint": r.env_fingerprint,
        }

    def noise(n: Noise | None) -> dict[str, Any] | None:
        if n is None:
            return None
        return {"runs": n.runs, "sd_log": n.sd_log, "floor": n.floor, "factor": n.factor}

    rows = [
        {
            "phase": r.phase,
            "metric": r.metric,
            "unit": r.unit,
            "direction": r.direction,
            "baseline": r.baseline,
            "current": r.current,
            "baseline_repeats": list(r.baseline_repeats),
            "current_repeats": list(r.current_repeats),
            "baseline_spread": _spread_json(r.baseline_repeats),
            "current_spread": _spread_json(r.current_repeats),
            "delta": _finite(r.delta),
            "change": _finite(r.change),
            "threshold": r.threshold,
            "test": r.test,
            "p_value": r.p_value,
            "noise": noise(r.noise),
            "margin": r.margin,
            "significant": r.significant,
            "confirm_repeats": r.confirm_repeats,
            "mark": r.mark,
        }
        for r in report.rows
    ]
    basis = report.noise
    doc = {
        "baseline": ref(report.baseline),
        "current": ref(report.current),
        "comparable": report.comparable,
        "reason": report.reason,
        "warnings": list(report.warnings),
        "noise_basis": None
        if basis is None
        else {
            "history": basis.url,
            "runs": basis.runs,
            "spec_hash": basis.spec_hash,
            "host_class": basis.host_class,
            "fs_identity": basis.fs_identity,
        },
        "options": {
            "threshold_throughput": o.threshold_throughput,
            "threshold_latency": o.threshold_latency,
            "per_metric": [list(p) for p in o.per_metric],
            "strict": o.strict,
            "fail_on": o.fail_on,
            "alpha": o.alpha,
            "min_repeats": o.min_repeats,
            "min_range_repeats": o.min_range_repeats,
            "min_history": o.min_history,
            "noise_alpha": o.noise_alpha,
            "large_factor": o.large_factor,
            "large_factor_latency": o.large_factor_latency,
        },
        "phases": [
            {"phase": r.phase, "metric": r.metric, "mark": r.mark} for r in report.headlines()
        ],
        "rows": rows,
        "regressions": [r.name for r in report.regressions],
        "improvements": [r.name for r in report.improvements],
        "unconfirmed": [r.name for r in report.unconfirmed],
        "summary": report.summary(),
        "exit_status": int(report.exit_status()),
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
