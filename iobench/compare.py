"""Direction- and noise-aware comparison of two runs, as asv does it.

A metric is a regression only when it moved the wrong way by more than its threshold **and** the
move is significant: a two-sided Mann-Whitney U test (p < ``alpha``) when each side has at least
``min_repeats`` repeats, else the repeats' ranges (min..max) must not overlap. Marks follow asv:
``+`` worse, ``-`` better, ``~`` beyond the threshold but within the noise, blank within the
threshold, ``x`` measured on one side only.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

from . import history
from .errors import ExitStatus, UsageError
from .results import RunResult, load
from .units import format_count, format_rate, format_seconds, parse_percent

FAIL_ON = ("regression", "never")
MARK_WORSE, MARK_BETTER, MARK_NOISE, MARK_SAME, MARK_MISSING = "+", "-", "~", " ", "x"


def is_latency(metric: str) -> bool:
    """Latency-like metrics take the latency threshold; everything else is throughput-like."""
    return metric.startswith(("latency", "load_wait"))


@dataclass(frozen=True)
class CompareOptions:
    """How far a metric may move, and what counts as failure.

    ``per_metric`` holds ``(fnmatch pattern, threshold)`` pairs matched against ``phase.metric``
    and against the bare metric name; the first matching pattern wins. ``fail_on="never"`` makes
    :meth:`CompareReport.exit_status` always OK.
    """

    threshold_throughput: float = 0.10
    threshold_latency: float = 0.20
    per_metric: Sequence[tuple[str, float]] = ()
    strict: bool = False
    fail_on: str = "regression"
    alpha: float = 0.01
    min_repeats: int = 6

    def __post_init__(self) -> None:
        object.__setattr__(self, "per_metric", tuple((p, float(t)) for p, t in self.per_metric))
        if self.fail_on not in FAIL_ON:
            raise UsageError(
                f"--fail-on: expected one of {', '.join(FAIL_ON)}, got {self.fail_on!r}"
            )
        for value in (self.threshold_throughput, self.threshold_latency):
            if not (math.isfinite(value) and value >= 0):
                raise UsageError(f"--threshold: expected a non-negative percentage, got {value!r}")

    def threshold_for(self, phase: str, metric: str) -> float:
        for pattern, threshold in self.per_metric:
            if fnmatch.fnmatchcase(f"{phase}.{metric}", pattern) or fnmatch.fnmatchcase(
                metric, pattern
            ):
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
    test: str | None  # "mann-whitney" | "ranges" | None (not compared)
    p_value: float | None  # Mann-Whitney only
    significant: bool
    mark: str

    @property
    def name(self) -> str:
        return f"{self.phase}.{self.metric}"


def _relative(base: float, cur: float) -> float:
    if base == 0:
        return 0.0 if cur == 0 else math.copysign(math.inf, cur)
    return (cur - base) / abs(base)


def compare_metric(
    phase: str,
    metric: str,
    unit: str,
    direction: str,
    baseline: Sequence[float],
    current: Sequence[float],
    options: CompareOptions,
) -> CompareRow:
    """Compare one metric's repeats; either side may be empty (then it is marked ``x``)."""
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
    if len(b) >= options.min_repeats and len(c) >= options.min_repeats:
        test, p = "mann-whitney", mann_whitney_u(b, c).p_value
        significant = p < options.alpha
    else:
        test, p = "ranges", None
        significant = max(b) < min(c) or max(c) < min(b)
    if not abs(change) > threshold:
        mark = MARK_SAME
    elif not significant:
        mark = MARK_NOISE
    else:
        mark = MARK_BETTER if change > 0 else MARK_WORSE
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


@dataclass
class CompareReport:
    """The outcome of :func:`compare_runs`.

    Exit status (:meth:`exit_status`): with ``fail_on="never"`` always OK. Otherwise a
    not-comparable pair (different workload spec) is NOT_COMPARABLE (3) under ``strict``; without
    ``strict`` it is only reported (``comparable=False``, ``reason``) and the exit status is
    decided by the metrics as for a comparable pair: FAILED (1) if any is a regression, else OK.
    That keeps a CI job that changed its workload on purpose from failing by surprise, while
    ``--strict`` guards jobs that must compare like with like.
    """

    baseline: RunRef
    current: RunRef
    rows: list[CompareRow]
    comparable: bool = True
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    options: CompareOptions = field(default_factory=CompareOptions)

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
    def missing(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_MISSING]

    def exit_status(self) -> ExitStatus:
        if self.options.fail_on == "never":
            return ExitStatus.OK
        if not self.comparable and self.options.strict:
            return ExitStatus.NOT_COMPARABLE
        return ExitStatus.FAILED if self.regressions else ExitStatus.OK

    def summary(self) -> str:
        """One line: every regression with its change, or what was found instead."""
        prefix = "" if self.comparable else f"not comparable ({self.reason}); "
        regs = self.regressions
        if regs:
            items = ", ".join(f"{r.name} {format_percent(r.delta)}" for r in regs)
            return f"{prefix}{_plural(len(regs), 'regression')}: {items}"
        parts = [f"{_plural(len(self.rows) - len(self.missing), 'metric')} compared"]
        if self.improvements:
            parts.append(_plural(len(self.improvements), "improvement"))
        if self.noisy:
            parts.append(f"{len(self.noisy)} beyond threshold within noise")
        if self.missing:
            parts.append(f"{len(self.missing)} on one side only")
        return f"{prefix}no regressions: " + ", ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _samples(run: RunResult) -> dict[tuple[str, str], dict[str, Any]]:
    """(phase, metric) -> unit, direction and repeat values, in the run's order."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row in history.metric_rows(run):
        entry = out.setdefault(
            (row["phase"], row["metric"]),
            {"unit": row["unit"], "direction": row["direction"], "values": [], "summary": None},
        )
        if row["repeat"] == history.SUMMARY_REPEAT:
            entry["summary"] = row["value"]
        else:
            entry["values"].append(row["value"])
    for entry in out.values():
        if not entry["values"] and entry["summary"] is not None:
            entry["values"].append(entry["summary"])  # repeats lacked it: the aggregate stands
    return out


def _comparability(baseline: RunResult, current: RunResult) -> tuple[bool, str | None, list[str]]:
    bw, cw = baseline.workload or {}, current.workload or {}
    warnings = []
    b_hash, c_hash = bw.get("spec_hash"), cw.get("spec_hash")
    if b_hash and c_hash and b_hash != c_hash:
        return False, f"workload spec differs: spec_hash {b_hash} vs {c_hash}", warnings
    if bw.get("name") != cw.get("name"):
        return False, f"different workloads: {bw.get('name')} vs {cw.get('name')}", warnings
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


def compare_runs(
    baseline: RunResult, current: RunResult, options: CompareOptions | None = None
) -> CompareReport:
    """Compare every (phase, metric) the two runs share; see :class:`CompareReport`."""
    options = options or CompareOptions()
    b, c = _samples(baseline), _samples(current)
    rows = []
    for key in [*b, *(k for k in c if k not in b)]:
        meta = b.get(key) or c[key]
        b_values = b[key]["values"] if key in b else ()
        c_values = c[key]["values"] if key in c else ()
        phase, metric = key
        rows.append(
            compare_metric(
                phase, metric, meta["unit"], meta["direction"], b_values, c_values, options
            )
        )
    comparable, reason, warnings = _comparability(baseline, current)
    return CompareReport(
        baseline=RunRef.of(baseline),
        current=RunRef.of(current),
        rows=rows,
        comparable=comparable,
        reason=reason,
        warnings=warnings + _environment_warnings(baseline, current),
        options=options,
    )


# --- resolving a run reference -----------------------------------------------------------------

_LATEST_RE = re.compile(r"^latest(?:~(\d+))?$")


def resolve(
    spec: str, history_url: str | None = None, workload: str | None = None, *, what: str = "run"
) -> RunResult:
    """A run named by a result.json path or its directory, a stored run id (or unique prefix),
    ``latest`` or ``latest~N`` (N runs before the latest; of ``workload`` when given)."""
    s = str(spec).strip()
    url = history_url or history.default_history_url()
    if not s:
        raise UsageError(f"{what}: empty reference", hint="pass a result.json, a run id or latest")
    m = _LATEST_RE.match(s)
    if m:
        back = int(m.group(1) or 0)
        runs = history.runs_before(url, workload)
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
        return history.get_run(s, url)
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


def _test_text(row: CompareRow) -> str:
    n = f"({len(row.baseline_repeats)}/{len(row.current_repeats)})"
    if row.test == "mann-whitney":
        return f"U p={row.p_value:.2g} {n}"
    if row.test == "ranges":
        return f"ranges {'apart' if row.significant else 'overlap'} {n}"
    return "one side only"


def _cells(row: CompareRow) -> list[str]:
    return [
        row.mark,
        row.phase,
        row.metric,
        format_value(row.baseline, row.unit),
        format_value(row.current, row.unit),
        format_percent(row.delta),
        format_percent(row.threshold, signed=False),
        _test_text(row),
    ]


_HEADER = ["", "phase", "metric", "baseline", "current", "change", "threshold", "test"]
_RIGHT = {3, 4, 5, 6}


def _ref_line(label: str, ref: RunRef) -> str:
    return f"{label:<9} {ref.run_id}  {ref.workload or '-'}  {ref.started_at}"


def _regression_lines(report: CompareReport) -> list[str]:
    return [
        f"regression: {r.name} {format_value(r.baseline, r.unit)} -> "
        f"{format_value(r.current, r.unit)} ({format_percent(r.delta)}, threshold "
        f"{format_percent(r.threshold, signed=False)}, {_test_text(r)})"
        for r in report.regressions
    ]


def render_table(report: CompareReport) -> str:
    """Aligned text: the runs, warnings, one line per metric, every regression, a summary."""
    lines = [_ref_line("baseline", report.baseline), _ref_line("current", report.current)]
    if not report.comparable:
        lines.append(f"not comparable: {report.reason}")
    lines += [f"warning: {w}" for w in report.warnings]
    lines.append("")
    table = [_HEADER] + [_cells(r) for r in report.rows]
    widths = [max(len(cells[i]) for cells in table) for i in range(len(_HEADER))]
    for cells in table:
        text = "  ".join(
            c.rjust(widths[i]) if i in _RIGHT else c.ljust(widths[i]) for i, c in enumerate(cells)
        )
        lines.append(text.rstrip())
    lines.append("")
    lines += _regression_lines(report)
    lines.append(report.summary())
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def render_markdown(report: CompareReport) -> str:
    """A Markdown table (for a CI comment) with the same content as :func:`render_table`."""
    b, c = report.baseline, report.current
    lines = [
        f"**baseline** `{b.run_id}` ({_md_escape(b.workload or '-')}, {b.started_at})  ",
        f"**current** `{c.run_id}` ({_md_escape(c.workload or '-')}, {c.started_at})",
        "",
    ]
    if not report.comparable:
        lines += [f"> **not comparable:** {_md_escape(report.reason or '')}", ""]
    if report.warnings:
        lines += [f"- warning: {_md_escape(w)}" for w in report.warnings] + [""]
    lines.append("| " + " | ".join(_HEADER) + " |")
    lines.append(
        "|" + "|".join("---:" if i in _RIGHT else "---" for i in range(len(_HEADER))) + "|"
    )
    for row in report.rows:
        cells = _cells(row)
        cells[0] = f"`{row.mark}`" if row.mark.strip() else ""
        lines.append("| " + " | ".join(_md_escape(x) for x in cells) + " |")
    lines.append("")
    regressions = [f"- {_md_escape(x)}" for x in _regression_lines(report)]
    lines += regressions + ([""] if regressions else [])  # the summary must not join the list
    lines.append(f"**{_md_escape(report.summary())}**")
    return "\n".join(lines) + "\n"


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def render_json(report: CompareReport) -> str:
    """The report as JSON: raw numbers (bytes/s, seconds), no labels; infinities as null."""
    o = report.options

    def ref(r: RunRef) -> dict[str, Any]:
        return {
            "run_id": r.run_id,
            "started_at": r.started_at,
            "workload": r.workload,
            "spec_hash": r.spec_hash,
            "env_fingerprint": r.env_fingerprint,
        }

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
            "delta": _finite(r.delta),
            "change": _finite(r.change),
            "threshold": r.threshold,
            "test": r.test,
            "p_value": r.p_value,
            "significant": r.significant,
            "mark": r.mark,
        }
        for r in report.rows
    ]
    doc = {
        "baseline": ref(report.baseline),
        "current": ref(report.current),
        "comparable": report.comparable,
        "reason": report.reason,
        "warnings": list(report.warnings),
        "options": {
            "threshold_throughput": o.threshold_throughput,
            "threshold_latency": o.threshold_latency,
            "per_metric": [list(p) for p in o.per_metric],
            "strict": o.strict,
            "fail_on": o.fail_on,
            "alpha": o.alpha,
            "min_repeats": o.min_repeats,
        },
        "rows": rows,
        "regressions": [r.name for r in report.regressions],
        "improvements": [r.name for r in report.improvements],
        "summary": report.summary(),
        "exit_status": int(report.exit_status()),
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
