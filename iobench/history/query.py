"""Queries over the history: the runs stored, one run, the latest before another, and one
metric's trend, one series per spec (:func:`trend_series`; compare's ``trend`` judges it and
draws it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import StoreError, UsageError
from ..core.units import format_bytes
from ..result.blocks import WorkloadBlock
from ..result.file import RunResult
from ..result.stats import Summary, summarize

if TYPE_CHECKING:
    pass
from .files import RunSummary, StoredRun, _stored_runs, _time_key, _warn, read_history
from .schema import (
    ALL_METRICS,
    HostClass,
    Warn,
    default_history_url,
    env_fingerprint,
    fs_identity,
    headline,
    host_class,
    target_of,
)


def list_runs(url: str | None = None, *, on_warning: Warn = None) -> list[RunSummary]:
    """Every stored run, oldest first. Skipped files are reported through ``on_warning``."""
    out = []
    for stored in _stored_runs(url, on_warning):
        try:
            run = stored.run()
        except Exception as e:  # noqa: BLE001 - a result that cannot be parsed is skipped and named
            _warn(on_warning, stored.path, f"stored result is unreadable ({e})")
            continue
        out.append(
            RunSummary(
                run_id=run.run_id,
                started_at=run.started_at,
                command=run.command,
                workload=run.workload_block.name,
                spec_hash=run.workload_block.spec_hash,
                status=run.status,
                engine=run.engine_block.name,
                env_fingerprint=env_fingerprint(run),
                host_class=host_class(run),
                fs_identity=fs_identity(run),
                phases=tuple(p.name for p in run.phases),
                path=stored.path,
                target=target_of(run),
                verdict=run.verdict_block.judged if run.verdict_block is not None else None,
                headline=headline(run),
            )
        )
    return out


def get_run(run_id: str, url: str | None = None, *, on_warning: Warn = None) -> RunResult:
    """The stored run with this id, or the only one whose id starts with it."""
    stored = _stored_runs(url, on_warning)
    exact = [s for s in stored if s.run_id == run_id]
    matches = exact or ([s for s in stored if s.run_id.startswith(run_id)] if run_id else [])
    where = url or default_history_url()
    if not matches:
        raise UsageError(f"no run {run_id!r} in history {where}", hint="see `iobench history list`")
    if len(matches) > 1:
        names = ", ".join(s.run_id for s in matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise UsageError(f"run id prefix {run_id!r} is ambiguous: {names}", hint="give more of it")
    try:
        return matches[0].run()
    except UsageError:  # a bad value in it, named with the file
        raise
    except Exception as e:  # noqa: BLE001 - whatever parsing it raised is a StoreError
        raise StoreError(
            f"history file {matches[0].path} holds an unreadable result: {e}"
        ) from None


def _workload_matches(stored: StoredRun, workload: str | None) -> bool:
    if workload is None:
        return True
    w = WorkloadBlock.from_dict(json.loads(stored.result_json).get("workload"))
    return workload in (w.name, w.spec_hash)


def runs_before(
    url: str | None = None,
    workload: str | None = None,
    before: str | None = None,
    *,
    on_warning: Warn = None,
) -> list[StoredRun]:
    """Stored runs, oldest first, of ``workload`` (name or spec hash) started before ``before``."""
    limit = _time_key(before, "")[0] if before else None
    if before and limit == float("-inf"):
        raise UsageError(f"--before: expected an ISO timestamp, got {before!r}")
    out = []
    for s in _stored_runs(url, on_warning):
        if not _workload_matches(s, workload):
            continue
        if limit is not None and not _time_key(s.started_at, s.run_id)[0] < limit:
            continue
        out.append(s)
    return out


def latest_run(
    url: str | None = None,
    workload: str | None = None,
    before: str | None = None,
    *,
    on_warning: Warn = None,
) -> RunResult | None:
    """The most recent stored run (of ``workload``, started strictly before ``before``), or None.

    ``workload`` matches the workload name or its spec hash; ``before`` is an ISO timestamp.
    """
    runs = runs_before(url, workload, before, on_warning=on_warning)
    return runs[-1].run() if runs else None


def split_metric(metric: str, phase: str | None = None) -> tuple[str | None, str]:
    """``seq-read.bandwidth`` -> ("seq-read", "bandwidth"); a bare metric keeps ``phase``."""
    if metric in ALL_METRICS:
        return phase, metric
    head, dot, tail = metric.rpartition(".")
    if dot and tail in ALL_METRICS and phase is None:
        return head, tail
    known = ", ".join(ALL_METRICS)
    raise UsageError(f"unknown metric {metric!r}", hint=f"use one of {known} (or PHASE.METRIC)")


class TrendPoint(NamedTuple):
    """One run's value of a metric: the median over its repeats, with their spread, the repeats
    themselves, and what the run was (its spec, host class, storage, status) so that runs of
    different specs or setups are never joined."""

    started_at: str
    run_id: str
    value: float
    spread: Summary
    spec_hash: str | None = None
    values: tuple[float, ...] = ()
    spec: WorkloadBlock | None = None
    host: HostClass | None = None
    fs_identity: str | None = None
    status: str | None = None

    def same_setup(self, other: TrendPoint) -> bool:
        """Same host class and storage (:func:`schema.same_setup`); unknown is never the same."""
        if self.host is None or other.host is None or self.fs_identity is None:
            return False
        return self.host.matches(other.host) and self.fs_identity == other.fs_identity


def trend(
    metric: str,
    url: str | None = None,
    phase: str | None = None,
    workload: str | None = None,
    *,
    on_warning: Warn = None,
) -> list[TrendPoint]:
    """One metric across stored runs, oldest first: per run the median over its repeats
    (the measurement rows, never the aggregate row), with n, min-max and CV, and the run's spec
    and setup (read from its stored result).

    ``metric`` may be ``PHASE.METRIC``. When the metric occurs in several phases and none is
    named, that is a :class:`UsageError` listing them. Runs of different specs are different
    series: :func:`trend_series`.
    """
    import pyarrow.compute as pc

    phase, metric = split_metric(metric, phase)
    table, warnings = read_history(url)
    for w in warnings:
        if on_warning is not None:
            on_warning(w)
    mask = pc.and_(pc.equal(table["metric"], metric), pc.invert(table["aggregate"]))
    if workload is not None:
        mask = pc.and_(
            mask,
            pc.or_(pc.equal(table["workload"], workload), pc.equal(table["spec_hash"], workload)),
        )
    rows = table.filter(mask).select(["started_at", "run_id", "phase", "value"]).to_pylist()
    phases = sorted({r["phase"] for r in rows})
    if phase is None and len(phases) > 1:
        raise UsageError(
            f"metric {metric} occurs in phases {', '.join(phases)}",
            hint=f"name one, e.g. {phases[0]}.{metric}",
        )
    runs: dict[str, tuple[str, list[float]]] = {}
    for r in rows:
        if phase is None or r["phase"] == phase:
            started = r["started_at"]
            started = started.isoformat(timespec="milliseconds") if started else ""
            runs.setdefault(r["run_id"], (started, []))[1].append(r["value"])
    stored = {s.run_id: s for s in _stored_runs(url, None)} if runs else {}
    points = []
    for run_id, (started_at, values) in runs.items():
        summary = summarize(values)
        if summary is not None:
            points.append(_point(started_at, run_id, values, summary, stored.get(run_id)))
    points.sort(key=lambda p: _time_key(p.started_at, p.run_id))
    return points


def _point(
    started_at: str, run_id: str, values: list[float], summary: Summary, stored: StoredRun | None
) -> TrendPoint:
    """A trend point with what its stored result says of the run (nothing when unreadable: a
    point of no known setup, never joined to another's noise floor)."""
    run = None
    if stored is not None:
        try:
            run = stored.run()
        except Exception:  # noqa: BLE001 - unreadable: named by the list/show that reads it whole
            run = None
    if run is None:
        return TrendPoint(started_at, run_id, summary.median, summary, values=tuple(values))
    spec = run.workload_block
    return TrendPoint(
        started_at, run_id, summary.median, summary, spec.spec_hash, tuple(values), spec,
        HostClass.of(run), fs_identity(run), run.status,
    )  # fmt: skip


def param_text(key: str, value: Any) -> str:
    """A workload parameter as people write it: sizes in binary units (``64.0 MiB``), lists
    and booleans as JSON."""
    sized = key.endswith("size") or key == "rate"
    if sized and isinstance(value, int) and not isinstance(value, bool) and value >= 1024:
        return format_bytes(value)
    if isinstance(value, (list, dict, bool)) or value is None:
        return json.dumps(value)
    return str(value)


def _compact(text: str) -> str:
    """``64.0 MiB`` -> ``64MiB``, ``[1, 2]`` -> ``[1,2]``: a value for a ``key=value`` label."""
    return re.sub(r"\.0(?=[KMGTPE]i?B)", "", text.replace(" ", ""))


@dataclass(frozen=True)
class SpecSeries:
    """The runs of one spec (spec hash) in a trend, labelled by what sets its spec apart."""

    spec_hash: str | None
    label: str
    points: tuple[TrendPoint, ...]


LABEL_KEYS = 4  # a label names at most this many differing keys, then "+N more"


def _spec_keys(spec: WorkloadBlock | None) -> dict[str, Any]:
    """A spec's keys for labelling: the generator and every parameter."""
    if spec is None:
        return {}
    return {"generator": spec.generator, **dict(spec.params or {})}


def _label(spec: WorkloadBlock | None, others: list[WorkloadBlock | None], names: bool) -> str:
    """``size=64MiB jobs=2``: the keys in which ``spec`` differs among ``others`` of the same
    workload, led by the workload's name when the series span several workloads."""
    name = spec.name if spec is not None else None
    parts = [name or "?"] if names else []
    mine = _spec_keys(spec)
    same = [_spec_keys(o) for o in others if (o.name if o is not None else None) == name]
    keys = sorted({k for d in same for k in d})
    differ = [
        k
        for k in keys
        if len({json.dumps(d.get(k, "\0unset"), sort_keys=True, default=str) for d in same}) > 1
    ]
    cells = [f"{k}={_compact(param_text(k, mine[k])) if k in mine else 'unset'}" for k in differ]
    if len(cells) > LABEL_KEYS:
        cells = [*cells[:LABEL_KEYS], f"+{len(cells) - LABEL_KEYS} more"]
    return " ".join(parts + cells)


def trend_series(points: list[TrendPoint]) -> list[SpecSeries]:
    """The points of :func:`trend` as one series per spec hash, in order of their first run,
    each labelled by the keys in which its spec differs from the others' (``size=64MiB
    jobs=2``; the workload's name first when they are of several workloads). Points of
    different specs are never in one series; points without a spec hash are a series of
    their own."""
    groups: dict[str | None, list[TrendPoint]] = {}
    for p in points:
        groups.setdefault(p.spec_hash, []).append(p)
    specs = {h: next((p.spec for p in ps if p.spec is not None), None) for h, ps in groups.items()}
    names = len({s.name if s is not None else None for s in specs.values()}) > 1
    labels = {h: _label(specs[h], list(specs.values()), names) for h in groups}
    seen: dict[str, int] = {}
    for label in labels.values():
        seen[label] = seen.get(label, 0) + 1
    out = []
    for h, ps in groups.items():
        label = labels[h]
        if not label:  # one workload, one spec: its name
            spec = specs[h]
            label = (spec.name if spec is not None else None) or f"spec {h or 'unknown'}"
        if seen[labels[h]] > 1:  # nothing tells them apart but the hash
            label = f"{label} spec {h or 'unknown'}"
        out.append(SpecSeries(h, label, tuple(ps)))
    return out
