"""Every plot a run's data supports (:func:`_build_plots`), with a baseline's curves dashed.

One plot per question, at most :data:`~.figures._PER_FIGURE` series each: a larger group is
drawn as small multiples on shared axes ("(1 of 2)"), so that no two figures share a title. A
phase too short to draw (one interval, a handful of operations) is shown as its figures, not
as a one-dot plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..result.blocks import EstimateBlock, LoaderBlock
from ..result.file import PhaseResult, RunResult
from ..result.steady import is_indicative
from .barplots import au_epoch_plot, iops_sweep_plots, worker_plots
from .cells import METADATA_OPS, _count, _is_num, _pct, _rate, _secs, metadata_rates
from .figures import (
    _COLOURS,
    MIN_LINE_POINTS,
    _cdf_plot,
    _chunks,
    _histogram_plot,
    _latency_concurrency_plot,
    _metadata_plot,
    _Plot,
    _sweep_plot,
    _tail_plot,
    _time_plot,
    share_axes,
)
from .overtime import cpu_time_plots, latency_time_plots, loader_step_plots
from .series import (
    _by_op,
    _cdf,
    _plot_group,
    latency_bins,
    latency_series,
    sweep_indicative,
    sweep_series,
    sweep_spread,
    time_points,
    timeline_rows,
)
from .svgbars import GroupBars, Spans, Stacked, render_group_bars, render_spans, render_stacked
from .svgplot import (
    Axis,
    Band,
    Bars,
    Chart,
    Rule,
    Series,
    Timeline,
    render,
    render_bars,
    render_timeline,
)
from .tables import _level, _loader_points

#: A latency histogram of fewer operations than this draws no CDF: its p50/p99/max are shown.
MIN_CDF_OPS = 20


def _series_start(p: PhaseResult) -> Any:
    """Where the phase's series starts after its start (0 when the result does not say)."""
    extra = p.extra_block
    return extra.series_start_s if extra.has("series_start_s") else 0.0


def _indicative(p: PhaseResult) -> bool:
    return p.status == "ok" and is_indicative(p)


def _au_curves(
    est: EstimateBlock,
) -> tuple[list[tuple[float, float]], list[tuple[float, float, float]]]:
    """The estimate's AU curve [(GPUs, AU)] and its interval band [(GPUs, low, high)]."""
    points = [a for a in est.points if _is_num(a.gpus) and a.gpus > 0]
    curve = sorted((float(a.gpus or 0), float(a.au)) for a in points if _is_num(a.au))
    band = sorted(
        (float(a.gpus or 0), float(a.low), float(a.high))
        for a in points
        if _is_num(a.low) and _is_num(a.high)
    )
    return curve, band


def _au_marks(est: EstimateBlock) -> list[Rule]:
    """The threshold line and the estimated maximum GPU count."""
    rules = []
    thr = est.threshold
    if _is_num(thr):
        rules.append(Rule("y", float(thr), colour=_COLOURS[1], dash="dashed",
                          label=f"threshold {_pct(thr)}"))  # fmt: skip
    max_gpus = est.max_gpus
    if _is_num(max_gpus) and max_gpus > 0:
        low, high = est.max_gpus_low, est.max_gpus_high
        span = f" ({low:g}–{high:g})" if _is_num(low) and _is_num(high) else ""
        rules.append(Rule("x", float(max_gpus), text=f"max {max_gpus:g}{span} GPUs (estimate)"))
    return rules


def _au_plot(run: RunResult) -> Chart | None:
    """AU against the GPU count: the estimate (with its interval), the loader's measured points,
    the threshold and the estimated maximum; None when there is neither curve nor point."""
    est = run.estimate_block or EstimateBlock()
    curve, band = _au_curves(est)
    measured = [(float(g), a) for g, a in _loader_points(run) if g > 0]
    if not curve and not measured:
        return None
    bands: tuple[Band, ...] = ()
    if len(band) > 1:
        level = _level(est)
        label = f"{level:.0%} interval" if _is_num(level) else "interval"
        bands = (Band(label, tuple(band), _COLOURS[0]),)
    lines = []
    if curve:
        lines.append(Series("estimate (model)", tuple(curve), _COLOURS[0], marker="o"))
    if measured:
        lines.append(Series("measured (loader)", tuple(measured), _COLOURS[2], line=False,
                            marker="diamond"))  # fmt: skip
    rules = _au_marks(est)
    xs = sorted({x for x, _ in curve} | {x for x, _ in measured}
                | {r.value for r in rules if r.axis == "x"})  # fmt: skip
    if len(xs) > 12:
        xs = [t for t in xs if math.log2(t).is_integer()] or xs
    profile = est.profile or (run.loader_block or LoaderBlock()).profile
    title = "AU vs GPUs" + (f" ({profile})" if profile else "")
    x = Axis("number of GPUs", log=True, ticks=tuple(xs), fmt=lambda v: f"{v:g}")
    y = Axis("accelerator utilisation (AU)", lo=0.0, hi=1.05, ticks=(0, 0.25, 0.5, 0.75, 1.0),
             fmt=lambda v: f"{v * 100:.0f}%")  # fmt: skip
    return Chart(title, x, y, tuple(lines), bands=bands, rules=tuple(rules))


Add = Callable[..., None]  # add(chart, caption="", title=None, facts=())


def _dashed(baseline: RunResult | None) -> str:
    return f" Dashed: baseline {baseline.run_id}." if baseline else ""


def _indicative_caption(members: list[PhaseResult]) -> str:
    flags = [_indicative(p) for p in members]
    if all(flags):
        return " Every phase drawn is indicative (not steady, or too short): read the shape, not the figure."
    if any(flags):
        return " Labels marked (indicative): not steady, or too short."
    return ""


def _label(p: PhaseResult, mixed: bool) -> str:
    return p.name + (" (indicative)" if mixed and _indicative(p) else "")


def _parts(title: str, charts: list[Chart]) -> list[tuple[str, Chart]]:
    """Small multiples on shared axes, titled "(k of n)" so that no two figures share a title."""
    charts = share_axes(charts)
    if len(charts) == 1:
        return [(title, charts[0])]
    n = len(charts)
    return [(f"{title} ({k} of {n})", c) for k, c in enumerate(charts, 1)]


def _sweep_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    for axis in ("block_size", "concurrency"):
        series = sweep_series(run.phases, axis)
        if series:
            base = sweep_series(baseline.phases, axis) if baseline else None
            spread = sweep_spread(run.phases, axis)
            flags = sweep_indicative(run.phases, axis)
            chart, title = _sweep_plot(series, axis, base, spread, flags)
            hollow = any(any(f) for f in flags.values())
            add(
                chart,
                "Aggregate bandwidth (last done) of each phase in the sweep"
                + ("; hollow points: indicative (not steady or too short)" if hollow else "")
                + ("; bars: min-max over the repeats" if spread else "")
                + (f"; dashed: baseline {baseline.run_id}" if base and baseline else "")
                + ".",
            )


def _latency_facts(p: PhaseResult) -> tuple[str, str]:
    lat = p.latency
    count = (p.histogram or {}).get("count") or 0
    return (p.name, f"{count} operations: p50 {_secs(lat.p50)}, p99 {_secs(lat.p99)}, "
                    f"max {_secs(lat.max)}; too few to draw a distribution")  # fmt: skip


def _latency_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Each op's latency CDF and tail, from the merged histograms; a phase of a handful of
    operations as its figures."""
    hist_phases = [p for p in run.phases if (p.histogram or {}).get("count")]
    base_cdf = {
        p.name: c
        for p in (baseline.phases if baseline else [])
        if (p.histogram or {}).get("count") and (c := _cdf(p.histogram))
    }
    dashed = _dashed(baseline)
    for op, members in _by_op(hist_phases).items():
        few = [p for p in members if (p.histogram or {}).get("count", 0) < MIN_CDF_OPS]
        drawn = [p for p in members if p not in few and _cdf(p.histogram)]
        if few and not drawn:
            add(None, "Operations too few to draw a distribution.", f"Latency: {op}",
                tuple(_latency_facts(p) for p in few))  # fmt: skip
            continue
        if not drawn:
            continue
        mixed = len({_indicative(p) for p in drawn}) > 1
        parts = _chunks(drawn)
        note = _indicative_caption(drawn)
        facts = tuple(_latency_facts(p) for p in few)
        base_bins = {p.name: latency_bins(p.histogram) for p in (baseline.phases if baseline
                                                                   else [])}  # fmt: skip
        kinds: tuple[tuple[str, Any, Any, Any, str], ...] = (  # three plots of one shape
            ("Latency CDF", _cdf_plot, _cdf, base_cdf,
             "From the merged per-operation latency histogram."),
            ("Latency tail", _tail_plot, _cdf, base_cdf, "Share of operations slower than each "
             "latency (log-log): the p99 to p99.99 a linear CDF hides; dotted lines at p50, p99, "
             "p99.9 and p99.99."),
            ("Latency histogram", _histogram_plot, latency_bins, base_bins, "Share of the "
             "operations in each latency bin (10 a decade), from the stored histogram buckets."),
        )  # fmt: skip
        for kind, fn, data, base, cap in kinds:
            charts = [
                fn([(_label(p, mixed), data(p.histogram)) for p in part],
                   {_label(p, mixed): base[p.name] for p in part if base.get(p.name)},
                   title=f"{kind}: {op}")
                for part in parts
            ]  # fmt: skip
            for title, chart in _parts(f"{kind}: {op}", charts):
                add(chart, cap + note + dashed, title, facts if kind == "Latency CDF" else ())


def _concurrency_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    lat = latency_series(run.phases)
    base_lat = latency_series(baseline.phases) if baseline else {}
    if lat:
        charts = [_latency_concurrency_plot(dict(part), base_lat)
                  for part in _chunks(list(lat.items()), 2)]  # three or four lines per series  # fmt: skip
        for title, chart in _parts("Latency vs workers", charts):
            add(
                chart,
                "p50 (solid), p99 (dashed) and p99.9 (dotted) of each op and block size "
                "measured at several worker counts."
                + (f" Crosses: baseline {baseline.run_id}'s p99." if base_lat and baseline else ""),
                title,
            )


def _clean_series(values: Any) -> list[float]:
    return [float(v) if _is_num(v) else math.nan for v in values]


def _baseline_time_points(
    baseline: RunResult | None, ops: bool
) -> dict[str, list[tuple[float, float]]]:
    base_t: dict[str, list[tuple[float, float]]] = {}
    for p in baseline.phases if baseline else []:
        values = p.ops_series if ops else p.series
        if values and p.series_interval_s > 0:
            off = _series_start(p)
            dt = float(p.series_interval_s)
            base_t[p.name] = time_points(_clean_series(values), dt, p.elapsed_s, off)
    return base_t


def _time_curves(
    run: RunResult, ops: bool
) -> dict[str, list[tuple[PhaseResult, list[tuple[float, float]], float]]]:
    """Per plot group, (phase, points, interval) of each phase's rate (ops/s when ``ops``)."""
    timed: dict[str, list[tuple[PhaseResult, list[tuple[float, float]], float]]] = {}
    for p in run.phases:
        is_meta = p.op in METADATA_OPS or (not p.bytes and bool(p.ops))
        values = p.ops_series if ops else p.series
        if is_meta == ops and values and p.series_interval_s > 0:
            dt = float(p.series_interval_s)
            off = _series_start(p)
            curve = (p, time_points(_clean_series(values), dt, p.elapsed_s, off), dt)
            timed.setdefault(_plot_group(p), []).append(curve)
    return timed


def _short_fact(p: PhaseResult, n: int, dt: float, ops: bool) -> tuple[str, str]:
    rate = _count(p.iops, " ops/s") if ops else _rate(p.bandwidth_bps)
    took = _secs(p.elapsed_s) if p.elapsed_s else "-"
    span = (f"{n} interval{'s' if n != 1 else ''} of {dt:g} s" if n
            else f"under half of one {dt:g} s interval")  # fmt: skip
    return (p.name, f"{rate} over {took}: {span}, too short to draw over time")


def _time_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Bandwidth, then operations, over time: one figure per group of phases; a phase of
    fewer than :data:`MIN_LINE_POINTS` intervals as its figures."""
    dashed = _dashed(baseline)
    for ops in (False, True):
        base_t = _baseline_time_points(baseline, ops)
        what = "Operations over time" if ops else "Bandwidth over time"
        for op, curves in _time_curves(run, ops).items():
            long = [c for c in curves if len(c[1]) >= MIN_LINE_POINTS]
            facts = tuple(_short_fact(p, len(pts), dt, ops) for p, pts, dt in curves
                          if len(pts) < MIN_LINE_POINTS)  # fmt: skip
            if not long:
                add(None, "Every phase here is too short to draw over time.", f"{what}: {op}",
                    facts)  # fmt: skip
                continue
            members = [p for p, _, _ in long]
            mixed = len({_indicative(p) for p in members}) > 1
            charts = []
            for part in _chunks(long):
                base = {_label(p, mixed): base_t[p.name] for p, _, _ in part if p.name in base_t}
                pts = [(_label(p, mixed), pts) for p, pts, _ in part]
                charts.append(_time_plot(pts, ops, base, title=f"{what}: {op}"))
            caption = (
                f"Per-interval rate ({long[0][2]:g} s intervals); the first and last, "
                "partial intervals over the time the phase covered (left out under "
                "half an interval)." + _indicative_caption(members) + dashed
            )
            for title, chart in _parts(f"{what}: {op}", charts):
                add(chart, caption, title, facts)
                facts = ()


def _other_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Metadata rates, AU against GPUs and the checkpoint goodput, when the run has them."""
    bars, flags = [], []
    for p in run.phases:
        for op, r in metadata_rates(p).items():
            bars.append((f"{p.name} ({op})" if op != p.name else op, r))
            flags.append(_indicative(p))
    if bars:
        add(_metadata_plot(bars, flags),
            "Hollow bars: indicative phases." if any(flags) else "")  # fmt: skip
    chart = _au_plot(run)
    if chart is not None:
        add(chart, "Line: model estimate; diamonds: measured with the data loader; "
                   "dashed: threshold.", "AU vs GPUs")  # fmt: skip
    if run.checkpoint:
        from .checkpoint_plot import goodput_figure

        chart = goodput_figure(run.checkpoint)
        if chart is not None:
            caption = "Estimate (checkpoint model); dots: the best interval (Daly)."
            add(chart, caption, "Checkpoint goodput vs interval")


_STATUS_COLOUR = {"ok": _COLOURS[0], "indicative": "#9a6700", "partial": _COLOURS[1],
                  "failed": _COLOURS[1]}  # fmt: skip


def _timeline_plot(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Every phase on one time axis, from the epochs its result records: solid to the first
    worker's end (first done), light to the last one's (last done)."""
    rows = timeline_rows(run.phases)
    if len(rows) < 2:
        return
    drawn = []
    for p, start, first, last in rows:
        status = "indicative" if _indicative(p) else p.status
        drawn.append((p.name, start, first, last, _STATUS_COLOUR.get(status, _COLOURS[1]),
                      status == "indicative"))  # fmt: skip
    # the baseline's phases of the same names, from its own first phase's start
    base = {p.name: (s, e) for p, s, _, e in timeline_rows(baseline.phases)} if baseline else {}
    ghosts = tuple((i, *base[r[0]]) for i, r in enumerate(drawn) if r[0] in base)
    chart = Timeline("Run timeline", tuple(drawn), Axis("seconds since the first phase's start"),
                     ghosts=ghosts)  # fmt: skip
    add(chart, "Each phase from its start to its first worker's end (first done, solid) and "
        "its last worker's (last done, light); hollow: indicative, red: partial or failed. "
        "Gaps are the run's own work between phases (dataset layout, cache drops, the loader's "
        "start-up)." + (f" Dashed outlines: baseline {baseline.run_id}'s same phases, from its "
                        "own first phase's start." if ghosts and baseline else ""))  # fmt: skip


_SECTIONS = (
    _timeline_plot,
    _sweep_plots,
    iops_sweep_plots,
    _latency_plots,
    _concurrency_plots,
    _time_plots,
    latency_time_plots,
    worker_plots,
    cpu_time_plots,
    _other_plots,
    au_epoch_plot,
    loader_step_plots,
)
_RENDER: dict[type, Callable[[Any, str], str]] = {
    Bars: render_bars, Timeline: render_timeline, GroupBars: render_group_bars,
    Spans: render_spans, Stacked: render_stacked,
}  # fmt: skip


def _build_plots(run: RunResult, baseline: RunResult | None = None) -> list[_Plot]:
    """Every plot the run's data supports, with ``baseline``'s curves of the same phases
    dashed in the same colours."""
    plots: list[_Plot] = []

    def add(chart: Any, caption: str = "", title: str | None = None,
            facts: tuple[tuple[str, str], ...] = ()) -> None:  # fmt: skip
        uid = f"iob{len(plots)}"
        if chart is None:
            svg = ""
        elif type(chart) in _RENDER:
            svg = _RENDER[type(chart)](chart, uid)
        else:
            svg = render(chart, uid) if title is None else render(_titled(chart, title), uid)
        plots.append(
            _Plot(title or (chart.title if chart is not None else ""), svg, caption, facts)
        )

    for section in _SECTIONS:
        section(run, baseline, add)
    return plots


def _titled(chart: Chart, title: str) -> Chart:
    from dataclasses import replace

    return replace(chart, title=title)
