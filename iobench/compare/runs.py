"""Two runs compared: whether they are comparable, every metric of every phase
(:func:`compare_runs`), the noise taken from the history (:func:`history_noise`) and the
resolution of a run reference (:func:`resolve`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import history
from ..core.errors import ExitStatus, UsageError
from ..result.blocks import WorkloadBlock
from ..result.file import RunResult, load
from ..result.stats import summarize
from .metric import CompareRow, format_percent, judge, measure_metric, too_few_for_tail
from .noise import RUN_TAIL_DF, Noise
from .options import (
    MARK_BETTER,
    MARK_MISSING,
    MARK_UNCONFIRMED,
    MARK_WORSE,
    CompareOptions,
)


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
        w = run.workload_block
        return cls(
            run_id=run.run_id,
            started_at=run.started_at,
            workload=w.name,
            spec_hash=w.spec_hash,
            env_fingerprint=history.env_fingerprint(run),
        )


@dataclass(frozen=True)
class NoiseBasis:
    """Where the run-to-run spreads came from: earlier runs of the same spec on the same setup."""

    url: str | None
    runs: int  # earlier runs that matched (spec hash, host class, storage)
    spec_hash: str | None
    host_class: str
    fs_identity: str
    metrics: Mapping[tuple[str, str], Noise] = field(default_factory=dict)

    def describe(self, min_history: int, tail_df: int | None = RUN_TAIL_DF) -> str:
        where = f"{self.runs} earlier run{'s' if self.runs != 1 else ''}"
        setup = f"of spec {self.spec_hash or '?'} on {self.host_class}, {self.fs_identity}"
        if self.runs >= min_history:
            tail = (
                "Student's t with k - 1 df"
                if tail_df is None
                else f"t with at most {tail_df} df: heavy-tailed runs"
            )
            return f"noise: {where} {setup} ({tail})"
        return f"noise: {where} {setup} ({min_history} needed to use their spread)"


@dataclass(frozen=True)
class CompareReport:
    """The outcome of :func:`compare_runs`.

    Exit status (:meth:`exit_status`): with ``fail_on="never"`` always OK. NOT_COMPARABLE (3)
    when no metric was measured on both sides, when the runs are of different workloads, specs
    or client counts (``comparable`` false: a gate must not pass on the wrong pair), and with
    ``strict`` also when they ran on a different host class, storage or engine, handled the
    page cache differently, or one of them is incomplete (``mismatches``). Otherwise FAILED (1)
    when a metric is a confirmed regression, or with ``fail_on="unconfirmed"`` an unconfirmed
    move the wrong way beyond its threshold; else OK.
    """

    baseline: RunRef
    current: RunRef
    rows: list[CompareRow]
    comparable: bool = True
    reason: str | None = None
    warnings: list[str] = field(default_factory=list)
    options: CompareOptions = field(default_factory=CompareOptions)
    noise: NoiseBasis | None = None
    mismatches: list[str] = field(default_factory=list)
    baseline_choice: str | None = None  # how the baseline was chosen, when compare chose it

    @property
    def regressions(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_WORSE]

    @property
    def improvements(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_BETTER]

    @property
    def unconfirmed(self) -> list[CompareRow]:
        return [r for r in self.rows if r.mark == MARK_UNCONFIRMED]

    @property
    def unconfirmed_worse(self) -> list[CompareRow]:
        """Unconfirmed moves the wrong way beyond the threshold (``--fail-on unconfirmed``)."""
        return [r for r in self.unconfirmed if r.worse]

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
                    history.HEADLINE_METRICS.index(r.metric)
                    if r.metric in history.HEADLINE_METRICS
                    else len(history.HEADLINE_METRICS),
                ),
            )
            out.append(ranked[0])
        return out

    def exit_status(self) -> ExitStatus:
        if self.options.fail_on == "never":
            return ExitStatus.OK
        if not self.compared or not self.comparable:
            return ExitStatus.NOT_COMPARABLE
        if self.options.strict and self.mismatches:
            return ExitStatus.NOT_COMPARABLE
        if self.regressions:
            return ExitStatus.FAILED
        if self.options.fail_on == "unconfirmed" and self.unconfirmed_worse:
            return ExitStatus.FAILED
        return ExitStatus.OK

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
        if self.unconfirmed:
            worse = len(self.unconfirmed_worse)
            parts.append(f"{len(self.unconfirmed)} unconfirmed ({worse} the wrong way)")
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


def _fewest_ops(*runs: RunResult) -> dict[str, int]:
    """Each phase's fewest operations in any repeat of any of ``runs`` (phases named as the
    history names them, :func:`history.named_phases`)."""
    out: dict[str, int] = {}
    for run in runs:
        for name, phase in history.named_phases(run):
            given = [r.get("ops") for r in phase.repeats] or [phase.ops]
            counts = [int(n) for n in given if isinstance(n, (int, float)) and n > 0]
            if counts:
                out[name] = min([*counts, *([out[name]] if name in out else [])])
    return out


def spec_differences(
    baseline: WorkloadBlock | Mapping[str, Any], current: WorkloadBlock | Mapping[str, Any]
) -> list[str]:
    """The workload keys whose values differ: ``jobs 2 vs 4``, one per key, sorted."""
    out = []
    b = baseline if isinstance(baseline, WorkloadBlock) else WorkloadBlock.from_dict(baseline)
    c = current if isinstance(current, WorkloadBlock) else WorkloadBlock.from_dict(current)
    if b.generator != c.generator:
        out.append(f"generator {b.generator} vs {c.generator}")
    bp, cp = b.params or {}, c.params or {}
    for key in sorted(set(bp) | set(cp)):
        if key not in bp:
            out.append(f"{key} unset vs {history.param_text(key, cp[key])}")
        elif key not in cp:
            out.append(f"{key} {history.param_text(key, bp[key])} vs unset")
        elif bp[key] != cp[key]:
            out.append(
                f"{key} {history.param_text(key, bp[key])} vs {history.param_text(key, cp[key])}"
            )
    return out


def _comparability(baseline: RunResult, current: RunResult) -> tuple[bool, str | None, list[str]]:
    bw, cw = baseline.workload_block, current.workload_block
    warnings: list[str] = []
    b_hash, c_hash = bw.spec_hash, cw.spec_hash
    if bw.name != cw.name or bw.generator != cw.generator:
        return False, f"different workloads: {bw.name} vs {cw.name}", warnings
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


def _environment(baseline: RunResult, current: RunResult) -> tuple[list[str], list[str]]:
    """(warnings, mismatches): what differs in how the runs were made; the mismatches (host,
    storage, engine, cache mode, an incomplete run or phase) make the pair not comparable
    under ``--strict``, and are warnings either way."""
    warnings, mismatches = [], []
    if baseline.run_id == current.run_id:
        warnings.append(f"baseline and current are the same run ({baseline.run_id})")
    b_host, c_host = history.HostClass.of(baseline), history.HostClass.of(current)
    if not b_host.matches(c_host):
        mismatches.append(f"host differs: {b_host} vs {c_host}")
    b_fs, c_fs = history.fs_identity(baseline), history.fs_identity(current)
    if b_fs != c_fs:
        mismatches.append(f"storage differs: {b_fs} vs {c_fs}")
    b_eng, c_eng = baseline.engine_block.name, current.engine_block.name
    if b_eng != c_eng:
        mismatches.append(f"engine differs: {b_eng} vs {c_eng}")
    for side, run in (("baseline", baseline), ("current", current)):
        if run.status != "complete":
            mismatches.append(f"{side} run is {run.status}: its figures may be incomplete")
        for p in run.phases:
            if p.status != "ok":
                mismatches.append(f"{side} phase {p.name} is {p.status}")
    for p in baseline.phases:
        q = current.phase(p.name)
        if q is not None and p.cache != q.cache:
            mismatches.append(
                f"phase {p.name}: page cache handled differently ({p.cache} vs {q.cache})"
            )
    return warnings + mismatches, mismatches


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


def _one_run_a_side(rows: Sequence[CompareRow], options: CompareOptions) -> list[str]:
    """A warning when a confirmed move rests on the repeats of one run a side (the t test, no
    history decided): repeats are not independent of their run, so a shift of the whole run
    looks the same as a change of the storage (docs/concepts/compare.md, "Limits")."""
    moved = [r for r in rows if r.mark in (MARK_WORSE, MARK_BETTER) and r.test == "t"]
    if not moved:
        return []
    many = len(moved) > 1
    return [
        f"{_plural(len(moved), 'confirmed move')} ({moved[0].name}{', …' if many else ''}) "
        f"{'rest' if many else 'rests'} on the repeats of one run a side: a shift of the whole "
        "run (a neighbour, the hypervisor, a cold cache) looks the same as a change of the "
        f"storage; with {options.min_history} earlier runs of this spec in --history, the "
        "run-to-run spread decides"
    ]


def compare_runs(
    baseline: RunResult,
    current: RunResult,
    options: CompareOptions | None = None,
    noise: NoiseBasis | None = None,
    baseline_choice: str | None = None,
) -> CompareReport:
    """Compare every (phase, metric) the two runs share; see :class:`CompareReport`.

    ``noise`` (from :func:`history_noise`) gives the run-to-run spread of each metric; every
    metric with a test is judged in one family (:func:`judge`). ``baseline_choice`` says how
    the baseline was picked when compare picked it (:func:`latest_like`). A run that measured
    nothing, or a ``--threshold`` pattern that matches no metric, is a :class:`UsageError`.
    """
    options = options or CompareOptions()
    _check_measured(baseline, "baseline")
    _check_measured(current, "current")
    b, c = _samples(baseline), _samples(current)
    floors = noise.metrics if noise is not None else {}
    measured = []
    for key in [*b, *(k for k in c if k not in b)]:
        meta = b.get(key) or c[key]
        b_values = b[key]["values"] if key in b else ()
        c_values = c[key]["values"] if key in c else ()
        phase, metric = key
        measured.append(
            measure_metric(
                phase, metric, meta["unit"], meta["direction"], b_values, c_values, options,
                floors.get(key),
            )
        )  # fmt: skip
    _check_patterns(options, measured)
    ops = _fewest_ops(baseline, current)
    measured = [too_few_for_tail(r, ops.get(r.phase)) for r in measured]
    rows = judge(measured, options)
    comparable, reason, warnings = _comparability(baseline, current)
    env_warnings, mismatches = _environment(baseline, current)
    return CompareReport(
        baseline=RunRef.of(baseline),
        current=RunRef.of(current),
        rows=rows,
        comparable=comparable,
        reason=reason,
        warnings=warnings + env_warnings + _one_run_a_side(rows, options),
        options=options,
        noise=noise,
        mismatches=mismatches,
        baseline_choice=baseline_choice,
    )


def history_noise(
    baseline: RunResult,
    current: RunResult,
    url: str | None = None,
    options: CompareOptions | None = None,
    *,
    on_warning: history.Warn = None,
) -> NoiseBasis:
    """Each metric's run-to-run spread and centre over the earlier runs in the history: same
    workload spec hash, same host class and storage (:func:`history.same_setup`) as
    ``current``, started before it, complete, not ``current`` itself. The baseline is one of
    them when it qualifies (stored in the history or not): the current run is held to all the
    earlier runs of its setup (:func:`noise.prediction_p_value`), not to one of them.

    The storage is part of the match as well as the host class: the run-to-run spread is the
    storage's as much as the machine's.
    """
    options = options or CompareOptions()
    spec = current.workload_block.spec_hash
    basis: dict[str, Any] = {
        "url": url or history.default_history_url(),
        "spec_hash": spec,
        "host_class": history.host_class(current),
        "fs_identity": history.fs_identity(current),
    }
    if not spec:
        return NoiseBasis(runs=0, **basis)
    per_metric: dict[tuple[str, str], list[float]] = {}
    runs = 0
    try:
        stored_runs = history.runs_before(url, spec, current.started_at, on_warning=on_warning)
    except UsageError:  # no usable start time: every stored run of the spec is "earlier"
        stored_runs = history.runs_before(url, spec, on_warning=on_warning)
    for run in _earlier_runs(stored_runs, baseline, current, on_warning):
        if (
            run.workload_block.spec_hash != spec
            or run.status != "complete"
            or not history.same_setup(run, current)
        ):
            continue
        runs += 1
        for key, entry in _samples(run).items():
            value = summarize([v for v in entry["values"] if v is not None and math.isfinite(v)])
            if value is not None:
                per_metric.setdefault(key, []).append(value.median)
    metrics = {}
    for key, values in per_metric.items():
        if len(values) >= options.min_history:
            spread = Noise.of(values)
            if spread is not None and spread.runs >= options.min_history:
                metrics[key] = spread
    return NoiseBasis(runs=runs, metrics=metrics, **basis)


def _earlier_runs(
    stored_runs: Sequence[Any], baseline: RunResult, current: RunResult, on_warning: history.Warn
) -> Iterator[RunResult]:
    """The stored runs (unreadable ones skipped, with a warning), never ``current``, and the
    baseline when it is not among them and started before ``current``."""
    seen = {current.run_id}
    for stored in stored_runs:
        if stored.run_id in seen:
            continue
        try:
            run = stored.run()
        except Exception as e:  # noqa: BLE001 - an unreadable stored result is skipped, as the history does
            if on_warning is not None:
                on_warning(f"history: skipped {stored.path}: stored result is unreadable ({e})")
            continue
        seen.add(run.run_id)
        yield run
    if baseline.run_id not in seen and _started_before(baseline, current):
        yield baseline  # compared from a file, not (yet) in the history


def _started_before(run: RunResult, current: RunResult) -> bool:
    """Whether ``run`` started before ``current``; an unknown or unreadable start time counts
    as earlier, as :func:`history.runs_before` counts every stored run then."""
    a, b = history.parse_timestamp(run.started_at), history.parse_timestamp(current.started_at)
    return a is None or b is None or a < b


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


def latest_like(
    current: RunResult, url: str | None = None, *, on_warning: history.Warn = None
) -> tuple[RunResult, str]:
    """The baseline a nightly job means by "the last time": the latest run in the history
    started before ``current``, of the same workload spec hash, host class and storage
    (:func:`history.same_setup`), complete, not ``current`` itself; with the sentence
    naming it. A :class:`UsageError` when there is none."""
    spec = current.workload_block.spec_hash
    where = url or history.default_history_url()
    setup = f"{history.host_class(current)}, {history.fs_identity(current)}"
    if not spec:
        raise UsageError(
            f"current run {current.run_id} has no workload spec hash: compare cannot pick a "
            "baseline of the same spec",
            hint="give BASELINE CURRENT or --baseline",
        )
    try:
        stored = history.runs_before(url, spec, current.started_at, on_warning=on_warning)
    except UsageError:  # no usable start time: every stored run of the spec is "earlier"
        stored = history.runs_before(url, spec, on_warning=on_warning)
    for entry in reversed(stored):
        if entry.run_id == current.run_id:
            continue
        try:
            run = entry.run()
        except Exception as e:  # noqa: BLE001 - unreadable: skipped and named, as the history does
            if on_warning is not None:
                on_warning(f"history: skipped {entry.path}: stored result is unreadable ({e})")
            continue
        if run.status == "complete" and history.same_setup(run, current):
            text = (
                f"baseline chosen: {run.run_id} ({run.started_at}), the latest earlier run of "
                f"spec {spec} on {setup} in {where}"
            )
            return run, text
    raise UsageError(
        f"history {where} holds no earlier complete run of spec {spec} on {setup}",
        hint="run this spec with --history first, or give BASELINE CURRENT",
    )
