"""The matplotlib figures of the HTML page (no pyplot): style, SVG export and one function per
kind of plot.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.units import format_count
from .cells import _block_short

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType


@dataclass(frozen=True)
class _Plot:
    title: str
    svg: str
    caption: str = ""


_RC: dict[RcKeyType, Any] = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#d8dee4",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#8c959f",
    "axes.prop_cycle": None,  # filled in by _rc()
    "legend.fontsize": 8,
    "legend.frameon": False,
    "svg.fonttype": "path",  # glyphs as paths: no font files needed by the viewer
    "figure.dpi": 100,
}


_COLOURS = [
    "#0969da",
    "#cf222e",
    "#1a7f37",
    "#8250df",
    "#bc4c00",
    "#1b7c83",
    "#bf3989",
    "#4d2d00",
    "#6e7781",
    "#9a6700",
]


# One size for every figure (constrained layout, no tight bbox), so all render at one text scale.
_FIGSIZE = (6.4, 3.4)


_PER_FIGURE = 8  # lines per figure before a group is split, so legends stay readable


def _rc() -> dict[RcKeyType, Any]:
    from matplotlib.rcsetup import cycler  # matplotlib.cycler: the validating one

    rc = dict(_RC)
    rc["axes.prop_cycle"] = cycler(color=_COLOURS)
    return rc


def _svg(fig: Any, salt: str) -> str:
    """An SVG fragment for inline use: no XML prolog, doctype or metadata block."""
    import matplotlib

    buf = io.StringIO()
    # A distinct salt per figure keeps clip-path and marker ids unique across inline SVGs.
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.find("<svg") :]
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S).strip()


def _chunks(items: Sequence[Any], n: int = _PER_FIGURE) -> list[Sequence[Any]]:
    return [items[i : i + n] for i in range(0, len(items), n)] or [items]


def _rate_scale(values: Iterable[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    return (float(1 << 30), "GiB/s") if top >= 10 * (1 << 30) else (float(1 << 20), "MiB/s")


def _legend(ax: Any) -> None:
    """Few entries sit inside the axes; more go to the right, clear of the data."""
    n = len(ax.get_legend_handles_labels()[1])
    if n == 0:
        return
    if n <= 2:
        ax.legend(loc="best")
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _log_seconds_formatter() -> Any:
    """Log-axis labels in s/ms/us; matplotlib still decides which (minor) ticks get one."""
    from matplotlib.ticker import LogFormatter

    class _Fmt(LogFormatter):
        def __call__(self, x: float, pos: Any = None) -> str:
            return _seconds_tick(x) if super().__call__(x, pos) else ""

    return _Fmt(labelOnlyBase=False)


def _seconds_tick(v: float, _pos: Any = None) -> str:
    if v <= 0:
        return "0"
    for div, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if v >= div:
            return f"{v / div:g} {unit}"
    return f"{v * 1e9:g} ns"


BASELINE_SUFFIX = " (baseline)"


def _colours(ax: Any) -> dict[str, str]:
    """label -> colour of the lines drawn so far (the current run's)."""
    return {ln.get_label(): ln.get_color() for ln in ax.get_lines()}


def _overlay(ax: Any, base: dict[str, tuple[list[float], list[float]]] | None, step: bool = False):
    """The baseline run's curve of every label this figure draws, dashed in the same colour."""
    if not base:
        return
    colours = _colours(ax)
    for label, (xs, ys) in base.items():
        if label not in colours or not xs:
            continue
        kw = {"color": colours[label], "linestyle": "--", "linewidth": 1.1, "alpha": 0.75}
        if step:
            ax.step(xs, ys, where="post", label=label + BASELINE_SUFFIX, **kw)
        elif len(xs) < MIN_LINE_POINTS:
            ax.plot(xs, ys, marker="o", fillstyle="none", label=label + BASELINE_SUFFIX,
                    **{**kw, "linestyle": "none"})  # fmt: skip
        else:
            ax.plot(xs, ys, label=label + BASELINE_SUFFIX, **kw)


def _sweep_plot(
    Figure: Callable[..., Any],
    series: dict[str, list[tuple[float, float]]],
    axis: str,
    base: dict[str, list[tuple[float, float]]] | None = None,
    spread: dict[str, list[tuple[float, float, float]]] | None = None,
) -> Any:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    scale, unit = _rate_scale(y for pts in series.values() for _, y in pts)
    xs_all: set[float] = set()
    for label, pts in series.items():
        xs = [x for x, _ in pts]
        xs_all.update(xs)
        ax.plot(xs, [y / scale for _, y in pts], marker="o", markersize=4, label=label)
    colours = _colours(ax)
    for label, bars in (spread or {}).items():
        if label in colours:  # min-max over the repeats
            ax.vlines([x for x, _, _ in bars], [lo / scale for _, lo, _ in bars],
                      [hi / scale for _, _, hi in bars], color=colours[label], linewidth=2.5,
                      alpha=0.35)  # fmt: skip
    common = {k: v for k, v in (base or {}).items() if k in series}
    for pts in common.values():
        xs_all.update(x for x, _ in pts)
    _overlay(ax, {k: ([x for x, _ in v], [y / scale for _, y in v]) for k, v in common.items()})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(xs_all)))
    ax.xaxis.set_minor_locator(NullLocator())
    fmt = _block_short if axis == "block_size" else (lambda x: f"{x:g}")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: fmt(x)))
    ax.set_xlabel("block size" if axis == "block_size" else "workers (concurrency)")
    ax.set_ylabel(f"bandwidth ({unit})")
    ax.set_ylim(bottom=0)
    title = "Bandwidth vs block size" if axis == "block_size" else "Bandwidth vs workers"
    ax.set_title(title, loc="left")
    _legend(ax)
    return fig, title


def _cdf_plot(
    Figure: Callable[..., Any],
    curves: list[tuple[str, list[tuple[float, float]]]],
    base: dict[str, list[tuple[float, float]]] | None = None,
):
    from matplotlib.ticker import PercentFormatter

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    for label, pts in curves:
        xs = [x for x, _ in pts]
        ys = [y for _, y in pts]
        # Start each curve at zero so a narrow distribution still reads as a step.
        ax.step([xs[0]] + xs, [0.0] + ys, where="post", label=label, linewidth=1.4)
    _overlay(
        ax,
        {
            k: ([v[0][0]] + [x for x, _ in v], [0.0] + [y for _, y in v])
            for k, v in (base or {}).items()
            if v
        },
        step=True,
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_log_seconds_formatter())
    ax.xaxis.set_minor_formatter(_log_seconds_formatter())
    for q in (0.5, 0.99):
        ax.axhline(q, color="#8c959f", linewidth=0.7, linestyle=":")
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("latency per operation")
    ax.set_ylabel("operations completed")
    _legend(ax)
    return fig, ax


_TAIL_MARKS = ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9"), (0.9999, "p99.99"))


def _tail_plot(
    Figure: Callable[..., Any],
    curves: list[tuple[str, list[tuple[float, float]]]],
    base: dict[str, list[tuple[float, float]]] | None = None,
):
    """The complementary CDF on log-log axes: the share of operations slower than x, so that
    p99 to p99.99 get as much room as the median (a linear CDF squeezes them into its top)."""
    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    floor = 1.0
    for label, pts in curves:
        xs = [x for x, _ in pts]
        ys = [max(1.0 - y, 0.0) for _, y in pts]
        keep = [(x, y) for x, y in zip(xs, ys, strict=True) if y > 0]
        if not keep:
            continue
        floor = min(floor, keep[-1][1])
        ax.step([xs[0]] + [x for x, _ in keep], [1.0] + [y for _, y in keep], where="post",
                label=label, linewidth=1.4)  # fmt: skip
    tails = {}
    for label, pts in (base or {}).items():
        keep = [(x, 1.0 - y) for x, y in pts if 1.0 - y > 0]
        if keep:
            tails[label] = ([pts[0][0]] + [x for x, _ in keep], [1.0] + [y for _, y in keep])
    _overlay(ax, tails, step=True)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(_log_seconds_formatter())
    ax.xaxis.set_minor_formatter(_log_seconds_formatter())
    bottom = max(min(floor, 1e-4) / 2, 1e-7)
    for q, name in _TAIL_MARKS:
        if 1 - q >= bottom:
            ax.axhline(1 - q, color="#8c959f", linewidth=0.7, linestyle=":")
            ax.annotate(name, (0.0, 1 - q), xycoords=("axes fraction", "data"), xytext=(2, 2),
                        textcoords="offset points", fontsize=7, color="#59636e")  # fmt: skip
    ax.set_ylim(bottom, 1.5)
    ax.set_xlabel("latency per operation")
    ax.set_ylabel("share of operations slower")
    _legend(ax)
    return fig, ax


def _latency_concurrency_plot(
    Figure: Callable[..., Any],
    series: dict[str, list[tuple[float, dict[str, float]]]],
    base: dict[str, list[tuple[float, dict[str, float]]]] | None = None,
) -> Any:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    styles = {"p50": "-", "p99": "--", "p99.9": ":"}
    xs_all: set[float] = set()
    for i, (label, pts) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        for mark, ls in styles.items():
            got = [(x, m[mark]) for x, m in pts if mark in m]
            if got:
                xs_all.update(x for x, _ in got)
                ax.plot([x for x, _ in got], [y for _, y in got], linestyle=ls, marker="o",
                        markersize=3.5, color=colour, label=f"{label} {mark}")  # fmt: skip
        got = [(x, m["p99"]) for x, m in (base or {}).get(label, []) if "p99" in m]
        if got:  # the baseline's p99 only, so that the figure stays readable
            xs_all.update(x for x, _ in got)
            ax.plot([x for x, _ in got], [y for _, y in got], linestyle="--", marker="x",
                    markersize=4, color=colour, alpha=0.5,
                    label=f"{label} p99{BASELINE_SUFFIX}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(xs_all)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_log_seconds_formatter())
    ax.yaxis.set_minor_formatter(_log_seconds_formatter())
    ax.set_xlabel("workers (concurrency)")
    ax.set_ylabel("latency per operation")
    ax.set_title("Latency vs workers", loc="left")
    _legend(ax)
    return fig


MIN_LINE_POINTS = 3  # a series of fewer points is drawn as markers, not as a line


def _time_plot(
    Figure: Callable[..., Any],
    curves: list[tuple[str, list[tuple[float, float]]]],
    ops: bool,
    base: dict[str, list[tuple[float, float]]] | None = None,
) -> Any:
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    if ops:
        scale, unit = 1.0, "ops/s"
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_count(v) if v else "0"))
    else:
        scale, unit = _rate_scale(v for _, pts in curves for _, v in pts)
    for label, pts in curves:
        if not pts:
            continue
        ys = [v / scale for _, v in pts]
        if len(pts) < MIN_LINE_POINTS:  # two points make no trend: markers only
            ax.plot([t for t, _ in pts], ys, linestyle="none", marker="o", label=label)
        else:
            ax.plot([0.0] + [t for t, _ in pts], [ys[0]] + ys, label=label)
    over = {}
    for label, pts in (base or {}).items():
        ys = [v / scale for _, v in pts]
        if len(pts) >= MIN_LINE_POINTS:
            over[label] = ([0.0] + [t for t, _ in pts], [ys[0]] + ys)
        elif pts:
            over[label] = ([t for t, _ in pts], ys)
    _overlay(ax, over)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since phase start (s)")
    ax.set_ylabel(unit if ops else f"bandwidth ({unit})")
    _legend(ax)
    return fig, ax


def _metadata_plot(Figure: Callable[..., Any], bars: list[tuple[str, float]]) -> Any:
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(_FIGSIZE[0], max(1.6, 0.42 * len(bars) + 0.9)), layout="constrained")
    ax = fig.add_subplot()
    labels = [b[0] for b in bars][::-1]
    values = [b[1] for b in bars][::-1]
    ax.barh(labels, values, color=_COLOURS[0], height=0.6)
    for y, v in enumerate(values):
        ax.text(v, y, f" {format_count(v)}", va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.18 if max(values) > 0 else 1)
    ax.set_axisbelow(True)
    ax.grid(axis="y", visible=False)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_count(v) if v else "0"))
    ax.set_xlabel("operations per second")
    ax.set_title("Metadata operation rates", loc="left")
    return fig
