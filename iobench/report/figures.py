"""The charts of the HTML page, one function per kind of plot, as :mod:`.svgplot` data: the
axes, the current run's series in the palette's colours, a baseline's dashed in the same ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core.units import format_count
from .cells import _block_short
from .svgplot import COLOURS, Axis, Bars, Chart, Rule, Series, Whisker, _extent


@dataclass(frozen=True)
class _Plot:
    """One figure of the page: its title, its SVG (empty for a figure of numbers only), its
    caption, and ``facts`` [(label, text)] shown as numbers (phases too short to plot)."""

    title: str
    svg: str
    caption: str = ""
    facts: tuple[tuple[str, str], ...] = ()


_COLOURS = list(COLOURS)

_PER_FIGURE = 4  # series per figure; a larger group becomes small multiples on shared axes

MIN_LINE_POINTS = 3  # a series of fewer points is no trend: its figures are shown as numbers

LOG_SPAN = 10.0  # values in one chart spanning more than this factor get a log axis

BASELINE_SUFFIX = " (baseline)"


def _chunks(items: Sequence[Any], n: int = _PER_FIGURE) -> list[Sequence[Any]]:
    """``items`` in balanced parts of at most ``n`` (9 by 4: 3, 3, 3 rather than 4, 4, 1)."""
    if len(items) <= n:
        return [items]
    parts = -(-len(items) // n)
    size = -(-len(items) // parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _rate_scale(values: Iterable[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    return (float(1 << 30), "GiB/s") if top >= 10 * (1 << 30) else (float(1 << 20), "MiB/s")


def _spans(values: Iterable[float], factor: float = LOG_SPAN) -> bool:
    """Whether the positive ``values`` differ by more than ``factor`` (then a log axis)."""
    pos = [v for v in values if isinstance(v, (int, float)) and v > 0]
    return bool(pos) and max(pos) > factor * min(pos)


def _seconds_tick(v: float, _pos: Any = None) -> str:
    if v <= 0:
        return "0"
    for div, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if v >= div * 0.9999:
            return f"{v / div:.4g} {unit}"
    return f"{v * 1e9:.4g} ns"


def _pct_tick(v: float) -> str:
    return f"{v * 100:.0f}%"


def _count_tick(v: float) -> str:
    """An axis tick of a count: 0, 250, 1.5k, 100k, 2M."""
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{unit}"
    return f"{v:.3g}"


def _rate_tick(v: float) -> str:
    return f"{v:.4g}"


def _colour(i: int) -> str:
    return _COLOURS[i % len(_COLOURS)]


def _overlay(
    current: Sequence[Series], base: dict[str, list[tuple[float, float]]] | None, **kw: Any
) -> list[Series]:
    """The baseline's curve of every label the chart draws, dashed in the same colour."""
    out = []
    colours = {s.label: s.colour for s in current}
    marker = kw.pop("marker", "")
    for label, pts in (base or {}).items():
        if label in colours and pts:
            line = kw.get("step", False) or len(pts) >= MIN_LINE_POINTS
            out.append(Series(label + BASELINE_SUFFIX, tuple(pts), colours[label], dash="dashed",
                              width=1.2, opacity=0.8, line=line,
                              marker=marker if line else "hollow", **kw))  # fmt: skip
    return out


def share_axes(charts: list[Chart]) -> list[Chart]:
    """Small multiples: every chart given the same x and y limits (the union of their data)."""
    if len(charts) < 2:
        return charts
    from .svgplot import _all_values

    xs, ys = [], []
    for c in charts:
        x, y = _all_values(c)
        xs += x
        ys += y
    c0 = charts[0]
    xlo, xhi, _, _ = _extent(c0.x, xs)
    ylo, yhi, _, _ = _extent(c0.y, ys)
    return [replace(c, x=replace(c.x, lo=xlo, hi=xhi), y=replace(c.y, lo=ylo, hi=yhi))
            for c in charts]  # fmt: skip


def _log2_axis(label: str, xs: Iterable[float], fmt: Any) -> Axis:
    ticks = sorted(set(xs))
    if len(ticks) > 12:  # keep labels legible: powers of two only
        import math

        ticks = [t for t in ticks if math.log2(t).is_integer()] or ticks
    return Axis(label, log=True, ticks=tuple(ticks), fmt=fmt)


def _sweep_plot(
    series: dict[str, list[tuple[float, float]]],
    axis: str,
    base: dict[str, list[tuple[float, float]]] | None = None,
    spread: dict[str, list[tuple[float, float, float]]] | None = None,
    indicative: dict[str, list[bool]] | None = None,
) -> tuple[Chart, str]:
    """Bandwidth along a sweep, one line per op; indicative points hollow, repeats' min-max bars."""
    scale, unit = _rate_scale(y for pts in series.values() for _, y in pts)
    lines, whiskers = [], []
    for i, (label, pts) in enumerate(series.items()):
        hollow = tuple((indicative or {}).get(label, ()))
        lines.append(Series(label, tuple((x, y / scale) for x, y in pts), _colour(i), marker="o",
                            hollow=hollow))  # fmt: skip
        bars = (spread or {}).get(label)
        if bars:
            whiskers.append(Whisker(tuple((x, lo / scale, hi / scale) for x, lo, hi in bars),
                                    _colour(i)))  # fmt: skip
    common = {k: [(x, y / scale) for x, y in v] for k, v in (base or {}).items() if k in series}
    lines += _overlay(lines, common, marker="o")
    xs = [x for s in lines for x, _ in s.points]
    ys = [y for s in lines for _, y in s.points]
    fmt = _block_short if axis == "block_size" else (lambda x: f"{x:g}")
    x_axis = _log2_axis("block size" if axis == "block_size" else "workers (concurrency)", xs, fmt)
    log = _spans(ys)
    y_axis = Axis(f"bandwidth ({unit})", log=log, zero=not log, fmt=_rate_tick)
    title = "Bandwidth vs block size" if axis == "block_size" else "Bandwidth vs workers"
    return Chart(title, x_axis, y_axis, tuple(lines), whiskers=tuple(whiskers)), title


def _lat_axis(label: str) -> Axis:
    return Axis(label, log=True, fmt=_seconds_tick)


def _cdf_plot(
    curves: list[tuple[str, list[tuple[float, float]]]],
    base: dict[str, list[tuple[float, float]]] | None = None,
    title: str = "Latency CDF",
) -> Chart:
    """The cumulative share of operations done within each latency (log x)."""
    lines = []
    for i, (label, pts) in enumerate(curves):
        # start each curve at zero so that a narrow distribution still reads as a step
        lines.append(Series(label, ((pts[0][0], 0.0), *pts), _colour(i), step=True, width=1.8))
    over = {k: [(v[0][0], 0.0), *v] for k, v in (base or {}).items() if v}
    lines += _overlay(lines, over, step=True)
    rules = tuple(Rule("y", q, colour=AXIS_RULE) for q in (0.5, 0.99))
    y = Axis("operations completed", lo=0.0, hi=1.0, ticks=(0, 0.25, 0.5, 0.75, 1.0),
             fmt=_pct_tick)  # fmt: skip
    return Chart(title, _lat_axis("latency per operation"), y, tuple(lines), rules=rules)


AXIS_RULE = "#8c959f"
_TAIL_MARKS = ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9"), (0.9999, "p99.99"))


def _tail(pts: list[tuple[float, float]]) -> list[tuple[float, float]]:
    keep = [(x, 1.0 - y) for x, y in pts if 1.0 - y > 0]
    return [(pts[0][0], 1.0), *keep] if keep else []


def _tail_plot(
    curves: list[tuple[str, list[tuple[float, float]]]],
    base: dict[str, list[tuple[float, float]]] | None = None,
    title: str = "Latency tail",
) -> Chart:
    """The complementary CDF on log-log axes: the share of operations slower than x, so that
    p99 to p99.99 get as much room as the median (a linear CDF squeezes them into its top)."""
    lines, floor = [], 1.0
    for i, (label, pts) in enumerate(curves):
        tail = _tail(pts)
        if tail:
            floor = min(floor, tail[-1][1])
            lines.append(Series(label, tuple(tail), _colour(i), step=True, width=1.8))
    lines += _overlay(lines, {k: _tail(v) for k, v in (base or {}).items() if v}, step=True)
    bottom = max(min(floor, 1e-4) / 2, 1e-7)
    rules = tuple(Rule("y", 1 - q, text=name, colour=AXIS_RULE)
                  for q, name in _TAIL_MARKS if 1 - q >= bottom)  # fmt: skip
    y = Axis("share of operations slower", log=True, lo=bottom, hi=1.0, fmt=_pct_tick_log)
    return Chart(title, _lat_axis("latency per operation"), y, tuple(lines), rules=rules)


def _pct_tick_log(v: float) -> str:
    return f"{v * 100:.4g}%"


def _latency_concurrency_plot(
    series: dict[str, list[tuple[float, dict[str, float]]]],
    base: dict[str, list[tuple[float, dict[str, float]]]] | None = None,
    title: str = "Latency vs workers",
) -> Chart:
    """p50 (solid), p99 (dashed), p99.9 (dotted) against the worker count; a baseline's p99 as
    crosses."""
    styles = {"p50": "", "p99": "dashed", "p99.9": "dotted"}
    lines = []
    for i, (label, pts) in enumerate(series.items()):
        for mark, dash in styles.items():
            got = tuple((x, m[mark]) for x, m in pts if mark in m)
            if got:
                lines.append(Series(f"{label} {mark}", got, _colour(i), dash=dash, marker="o"))
        got = tuple((x, m["p99"]) for x, m in (base or {}).get(label, []) if "p99" in m)
        if got:  # the baseline's p99 only, so that the figure stays readable
            lines.append(Series(f"{label} p99{BASELINE_SUFFIX}", got, _colour(i), line=False,
                                marker="x", opacity=0.6))  # fmt: skip
    xs = [x for s in lines for x, _ in s.points]
    x_axis = _log2_axis("workers (concurrency)", xs, lambda x: f"{x:g}")
    return Chart(title, x_axis, _lat_axis("latency per operation"), tuple(lines))


def _time_plot(
    curves: list[tuple[str, list[tuple[float, float]]]],
    ops: bool,
    base: dict[str, list[tuple[float, float]]] | None = None,
    title: str = "",
) -> Chart:
    """A rate over the phase's time, one line per phase (each drawn from 0 at its first rate)."""
    if ops:
        scale, unit = 1.0, "ops/s"
    else:
        scale, unit = _rate_scale(v for _, pts in curves for _, v in pts)
    lines = []
    for i, (label, pts) in enumerate(curves):
        ys = [v / scale for _, v in pts]
        if pts:
            lines.append(Series(label, ((0.0, ys[0]), *((t, y) for (t, _), y in
                                                        zip(pts, ys, strict=True))), _colour(i)))  # fmt: skip
    over = {}
    for label, pts in (base or {}).items():
        ys = [v / scale for _, v in pts]
        if pts:
            over[label] = [(0.0, ys[0]), *((t, y) for (t, _), y in zip(pts, ys, strict=True))]
    lines += _overlay(lines, over)
    log = _spans(y for s in lines for _, y in s.points)
    y_axis = Axis(unit if ops else f"bandwidth ({unit})", log=log, zero=not log,
                  fmt=_count_tick if ops else _rate_tick)  # fmt: skip
    return Chart(title, Axis("time since phase start (s)", lo=0.0), y_axis, tuple(lines))


def _histogram_plot(
    curves: list[tuple[str, list[tuple[float, float, float]]]],
    base: dict[str, list[tuple[float, float, float]]] | None = None,
    title: str = "Latency histogram",
) -> Chart:
    """Each phase's share of operations per latency bin (log x, 10 bins a decade), drawn as
    an outline so that four phases stay readable on one axis."""

    def outline(bins: list[tuple[float, float, float]]) -> tuple[tuple[float, float], ...]:
        pts = [(bins[0][0], 0.0)] + [(lo, share) for lo, _, share in bins]
        return (*pts, (bins[-1][1], bins[-1][2]), (bins[-1][1], 0.0))

    lines = [Series(label, outline(bins), _colour(i), step=True, width=1.6)
             for i, (label, bins) in enumerate(curves) if bins]  # fmt: skip
    over = {k: list(outline(v)) for k, v in (base or {}).items() if v}
    lines += _overlay(lines, over, step=True)
    y = Axis("share of operations", zero=True, fmt=lambda v: f"{v * 100:.3g}%")
    return Chart(title, _lat_axis("latency per operation"), y, tuple(lines))


def _metadata_plot(bars: list[tuple[str, float]], indicative: Sequence[bool] = ()) -> Bars:
    """Each metadata operation's rate; a log axis when the rates differ by more than 10x (a
    create at 200/s beside a stat at 17k/s would not show on a linear one)."""
    values = [v for _, v in bars]
    log = _spans(values)
    axis = Axis("operations per second" + (" (log scale)" if log else ""), log=log, zero=not log,
                fmt=_count_tick)  # fmt: skip
    return Bars("Metadata operation rates", tuple(bars), axis, value_fmt=format_count,
                hollow=tuple(indicative))  # fmt: skip
