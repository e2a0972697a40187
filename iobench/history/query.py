"""Queries over the history: the runs stored, one run, the latest before another, and one
metric's trend (with its SVG plot).
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import math
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.errors import StoreError, UsageError
from ..result.blocks import WorkloadBlock
from ..result.file import RunResult
from ..result.stats import Summary, summarize

if TYPE_CHECKING:
    pass
from .files import RunSummary, StoredRun, _stored_runs, _time_key, _warn, read_history
from .schema import ALL_METRICS, Warn, default_history_url, env_fingerprint, fs_identity, host_class


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
    """One run's value of a metric: the median over its repeats, with their spread."""

    started_at: str
    run_id: str
    value: float
    spread: Summary


def trend(
    metric: str,
    url: str | None = None,
    phase: str | None = None,
    workload: str | None = None,
    *,
    on_warning: Warn = None,
) -> list[TrendPoint]:
    """One metric across stored runs, oldest first: per run the median over its repeats
    (the measurement rows, never the aggregate row), with n, min-max and CV.

    ``metric`` may be ``PHASE.METRIC``. When the metric occurs in several phases and none is
    named, that is a :class:`UsageError` listing them.
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
    points = []
    for run_id, (started_at, values) in runs.items():
        summary = summarize(values)
        if summary is not None:
            points.append(TrendPoint(started_at, run_id, summary.median, summary))
    points.sort(key=lambda p: _time_key(p.started_at, p.run_id))
    return points


_PLOT_SCALE = {"B/s": (1 << 20, "MiB/s"), "s": (1e-3, "ms"), "fraction": (0.01, "%")}


def trend_svg(points: list[TrendPoint], metric: str, unit: str) -> str:
    """An SVG line plot of :func:`trend` points, min-max bars where a run had repeats
    (needs matplotlib: ``iobench[plot]``)."""
    try:
        # Figure + savefig use the Agg/SVG canvases directly: no pyplot, no global backend.
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("matplotlib is missing; install iobench[plot]") from None
    if not points:
        raise UsageError(f"no stored values of {metric} to plot")
    scale, label = _PLOT_SCALE.get(unit, (1, unit))
    xs: list[Any] = []  # datetimes (or None), else the points' indices
    for started_at, run_id, *_rest in points:
        key = _time_key(started_at, run_id)[0]
        xs.append(_dt.datetime.fromtimestamp(key, _dt.timezone.utc) if math.isfinite(key) else None)
    use_dates = all(x is not None for x in xs)
    if not use_dates:
        xs = list(range(len(points)))
    ys = [p.value / scale for p in points]
    fig = Figure(figsize=(8, 3.2))
    ax = fig.add_subplot()
    ax.plot(xs, ys, marker="o", linewidth=1.5)
    ranged = [i for i, p in enumerate(points) if p.spread.n > 1]
    if ranged:
        lo = [ys[i] - points[i].spread.min / scale for i in ranged]
        hi = [points[i].spread.max / scale - ys[i] for i in ranged]
        ax.errorbar(
            [xs[i] for i in ranged], [ys[i] for i in ranged], yerr=[lo, hi], fmt="none",
            ecolor="0.5", capsize=3, linewidth=1, label="min-max of the repeats",
        )  # fmt: skip
        ax.legend(loc="lower right", fontsize="small")
    ax.set_title(metric)
    ax.set_ylabel(label)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if use_dates:
        fig.autofmt_xdate()
    else:
        ax.set_xlabel("run")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    return buf.getvalue()
