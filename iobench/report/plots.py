"""Every plot a run's data supports (:func:`_build_plots`), with a baseline's curves dashed."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..result.blocks import EstimateBlock, LoaderBlock
from ..result.file import PhaseResult, RunResult
from .cells import METADATA_OPS, _is_num, _pct, metadata_rates
from .figures import (
    _COLOURS,
    _FIGSIZE,
    _cdf_plot,
    _chunks,
    _latency_concurrency_plot,
    _metadata_plot,
    _Plot,
    _rc,
    _svg,
    _sweep_plot,
    _tail_plot,
    _time_plot,
)
from .series import (
    _by_op,
    _cdf,
    _plot_group,
    latency_series,
    sweep_series,
    sweep_spread,
    time_points,
)
from .tables import _level, _loader_points


def _series_start(p: PhaseResult) -> Any:
    """Where the phase's series starts after its start (0 when the result does not say)."""
    extra = p.extra_block
    return extra.series_start_s if extra.has("series_start_s") else 0.0


def _au_curves(
    est: EstimateBlock,
) -> tuple[list[tuple[float, float]], list[tuple[float, float, float]]]:
    """The estimate's AU curve [(GPUs, AU)] and its interval band [(GPUs, low, high)]."""
    points = [(g, a) for a in est.points if _is_num(g := a.gpus) and g > 0]
    curve = sorted((float(g), float(a.au)) for g, a in points if _is_num(a.au))
    band = sorted(
        (float(g), float(a.low), float(a.high))
        for g, a in points
        if _is_num(a.low) and _is_num(a.high)
    )
    return curve, band


def _au_lines(ax: Any, est: EstimateBlock, curve: list, band: list, measured: list) -> None:
    """The interval band, the estimated curve and the measured points."""
    if len(band) > 1:
        level = _level(est)
        ax.fill_between(
            [x for x, _, _ in band],
            [lo for _, lo, _ in band],
            [hi for _, _, hi in band],
            color=_COLOURS[0],
            alpha=0.18,
            linewidth=0,
            label=f"{level:.0%} interval" if _is_num(level) else "interval",
        )
    if curve:
        ax.plot(
            [x for x, _ in curve],
            [y for _, y in curve],
            marker="o",
            markersize=3.5,
            color=_COLOURS[0],
            label="estimate (model)",
        )
    if measured:
        ax.plot(
            [x for x, _ in measured],
            [y for _, y in measured],
            linestyle="none",
            marker="D",
            markersize=7,
            color=_COLOURS[2],
            label="measured (loader)",
            zorder=5,
        )


def _au_marks(ax: Any, est: EstimateBlock) -> set[float]:
    """The threshold line and the estimated maximum GPU count; returns that count's x."""
    thr = est.threshold
    if _is_num(thr):
        ax.axhline(
            thr, color=_COLOURS[1], linestyle="--", linewidth=1.1, label=f"threshold {_pct(thr)}"
        )
    max_gpus = est.max_gpus
    if not _is_num(max_gpus) or max_gpus <= 0:
        return set()
    ax.axvline(max_gpus, color="#8c959f", linestyle=":", linewidth=1.0)
    low, high = est.max_gpus_low, est.max_gpus_high
    span = f" ({low:g}–{high:g})" if _is_num(low) and _is_num(high) else ""
    ax.annotate(
        f"max {max_gpus:g}{span} GPUs (estimate)",
        (max_gpus, 0.04),
        xytext=(4, 0),
        textcoords="offset points",
        fontsize=8,
        color="#59636e",
    )
    return {float(max_gpus)}


def _au_axes(ax: Any, xs_all: set[float], title: str) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter

    ax.set_xscale("log", base=2)
    ticks = sorted(xs_all)
    if len(ticks) > 12:  # keep labels legible: powers of two only
        ticks = [t for t in ticks if math.log2(t).is_integer()] or ticks
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.set_ylim(0, 1.05)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("number of GPUs")
    ax.set_ylabel("accelerator utilisation (AU)")
    ax.set_title(title, loc="left")
    ax.legend(loc="lower left")


def _au_plot(Figure: Callable[..., Any], run: RunResult) -> Any:
    """AU against the GPU count: the estimate (with its interval), the loader's measured points,
    the threshold and the estimated maximum; None when there is neither curve nor point."""
    est = run.estimate_block or EstimateBlock()
    curve, band = _au_curves(est)
    measured = [(float(g), a) for g, a in _loader_points(run) if g > 0]
    if not curve and not measured:
        return None
    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    _au_lines(ax, est, curve, band, measured)
    xs_all = {x for x, _ in curve} | {x for x, _ in measured} | _au_marks(ax, est)
    profile = est.profile or (run.loader_block or LoaderBlock()).profile
    _au_axes(ax, xs_all, "AU vs GPUs" + (f" ({profile})" if profile else ""))
    return fig


Add = Callable[..., None]  # add(fig, title, caption="")


def _sweep_plots(Figure: Any, run: RunResult, baseline: RunResult | None, add: Add) -> None:
    for axis in ("block_size", "concurrency"):
        series = sweep_series(run.phases, axis)
        if series:
            base = sweep_series(baseline.phases, axis) if baseline else None
            spread = sweep_spread(run.phases, axis)
            fig, title = _sweep_plot(Figure, series, axis, base, spread)
            add(
                fig,
                title,
                "Aggregate bandwidth (last done) of each phase in the sweep"
                + ("; bars: min-max over the repeats" if spread else "")
                + (f"; dashed: baseline {baseline.run_id}" if baseline and base else "")
                + ".",
            )


def _dashed(baseline: RunResult | None) -> str:
    return f" Dashed: baseline {baseline.run_id}." if baseline else ""


def _latency_plots(Figure: Any, run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Each op's latency CDF and tail, from the merged histograms."""
    hist_phases = [p for p in run.phases if (p.histogram or {}).get("count")]
    base_cdf = {
        p.name: c
        for p in (baseline.phases if baseline else [])
        if (p.histogram or {}).get("count") and (c := _cdf(p.histogram))
    }
    dashed = _dashed(baseline)
    for op, members in _by_op(hist_phases).items():
        curves = [(p.name, _cdf(p.histogram)) for p in members]
        curves = [(n, c) for n, c in curves if c]
        for part in _chunks(curves):
            if not part:
                continue
            fig, ax = _cdf_plot(Figure, list(part), base_cdf)
            ax.set_title(f"Latency CDF: {op}", loc="left")
            cap = "From the merged per-operation latency histogram." + dashed
            add(fig, f"Latency CDF: {op}", cap)
            fig, ax = _tail_plot(Figure, list(part), base_cdf)
            ax.set_title(f"Latency tail: {op}", loc="left")
            add(
                fig,
                f"Latency tail: {op}",
                "Share of operations slower than each latency (log-log): the p99 to p99.99 "
                "a linear CDF hides; dotted lines at p50, p99, p99.9 and p99.99." + dashed,
            )


def _concurrency_plots(Figure: Any, run: RunResult, baseline: RunResult | None, add: Add) -> None:
    lat = latency_series(run.phases)
    base_lat = latency_series(baseline.phases) if baseline else {}
    if lat:
        for part in _chunks(list(lat.items()), 2):  # three or four lines per series
            add(
                _latency_concurrency_plot(Figure, dict(part), base_lat),
                "Latency vs workers",
                "p50 (solid), p99 (dashed) and p99.9 (dotted) of each op and block size "
                "measured at several worker counts."
                + (f" Crosses: baseline {baseline.run_id}'s p99." if baseline and base_lat else ""),
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
) -> dict[str, list[tuple[str, list[tuple[float, float]], float]]]:
    """Per plot group, (phase, points, interval) of each phase's rate (ops/s when ``ops``)."""
    timed: dict[str, list[tuple[str, list[tuple[float, float]], float]]] = {}
    for p in run.phases:
        is_meta = p.op in METADATA_OPS or (not p.bytes and bool(p.ops))
        values = p.ops_series if ops else p.series
        if is_meta == ops and values and p.series_interval_s > 0:
            dt = float(p.series_interval_s)
            off = _series_start(p)
            curve = (p.name, time_points(_clean_series(values), dt, p.elapsed_s, off), dt)
            if curve[1]:  # one partial interval alone is no rate to draw
                timed.setdefault(_plot_group(p), []).append(curve)
    return timed


def _time_plots(Figure: Any, run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Bandwidth, then operations, over time: one figure per group of phases."""
    dashed = _dashed(baseline)
    for ops in (False, True):
        base_t = _baseline_time_points(baseline, ops)
        timed = _time_curves(run, ops)
        what = "Operations over time" if ops else "Bandwidth over time"
        for op, curves in timed.items():
            for part in _chunks(curves):
                fig, ax = _time_plot(Figure, [(n, pts) for n, pts, _ in part], ops, base_t)
                ax.set_title(f"{what}: {op}", loc="left")
                caption = (
                    f"Per-interval rate ({part[0][2]:g} s intervals); the first and last, "
                    "partial intervals over the time the phase covered (left out under "
                    "half an interval)." + dashed
                )
                add(fig, f"{what}: {op}", caption)


def _other_plots(Figure: Any, run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Metadata rates, AU against GPUs and the checkpoint goodput, when the run has them."""
    bars = [
        (f"{p.name} ({op})" if op != p.name else op, r)
        for p in run.phases
        for op, r in metadata_rates(p).items()
    ]
    if bars:
        add(_metadata_plot(Figure, bars), "Metadata operation rates")
    fig = _au_plot(Figure, run)
    if fig is not None:
        caption = (
            "Line: model estimate; diamonds: measured with the data loader; dashed: threshold."
        )
        add(fig, "AU vs GPUs", caption)
    if run.checkpoint:
        from .checkpoint_plot import goodput_figure

        fig = goodput_figure(Figure, run.checkpoint)
        if fig is not None:
            caption = "Estimate (checkpoint model); dots: the best interval (Daly)."
            add(fig, "Checkpoint goodput vs interval", caption)


_SECTIONS = (_sweep_plots, _latency_plots, _concurrency_plots, _time_plots, _other_plots)


def _build_plots(run: RunResult, baseline: RunResult | None = None) -> list[_Plot] | None:
    """Every plot the run's data supports, with ``baseline``'s curves of the same phases
    dashed in the same colours; None when matplotlib is not installed."""
    try:
        import matplotlib
        from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state
    except ImportError:
        return None
    plots: list[_Plot] = []

    def add(fig: Any, title: str, caption: str = "") -> None:
        plots.append(_Plot(title, _svg(fig, f"iobench-{run.run_id}-{len(plots)}"), caption))

    with matplotlib.rc_context(_rc()):
        for section in _SECTIONS:
            section(Figure, run, baseline, add)
    return plots
