"""Plots drawn as hand-written SVG: a chart is plain data (axes, series, bands, rules), and
:func:`render` writes it as one inline ``<svg>`` element.

Why not matplotlib: a ``qualify --quick`` page holds some thirty plots, and laying out and
exporting each through matplotlib took about 1 s of CPU apiece (its tick-label extents and
constrained layout), 16–28 s a page. The charts here are simple (lines, steps, markers, bars,
a band, reference lines, linear or log axes), so writing the SVG directly costs milliseconds and
needs no optional dependency; the text stays text, so the page is small and searchable.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

#: The palette (colour-blind aware GitHub Primer colours); a chart draws at most five series
#: in distinct colours, so the first five are the ones that matter.
COLOURS = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bc4c00", "#1b7c83", "#bf3989",
           "#4d2d00", "#6e7781", "#9a6700")  # fmt: skip
MUTED, GRID, AXIS = "#59636e", "#e4e8ec", "#8c959f"

WIDTH = 640  # the viewBox; the page scales the figure to its column
PLOT_H = 230
LEFT, RIGHT, TOP = 66, 18, 30
FONT = 11
CHAR_W = 6.1  # an 11 px sans-serif character's mean advance, for the legend's flow


def esc(text: object) -> str:
    """Every text in a chart: credentials masked and control characters escaped as on the
    terminal (iobench.core.redact), then escaped for XML."""
    from ..core.redact import for_terminal

    return html.escape(for_terminal(text), quote=True)


def _g(v: float) -> str:
    return f"{v:g}"


@dataclass(frozen=True)
class Axis:
    """One axis: its label, linear or log, fixed limits or ticks when given, the tick format."""

    label: str
    log: bool = False
    lo: float | None = None
    hi: float | None = None
    ticks: tuple[float, ...] | None = None
    fmt: Callable[[float], str] = _g
    zero: bool = False  # a linear axis that starts at 0


@dataclass(frozen=True)
class Series:
    """Points drawn as a line (or steps, ``where="post"``), markers, or both. ``dash``:
    "" (solid), "dashed" or "dotted"; ``marker``: "", "o", "hollow", "diamond" or "x"."""

    label: str
    points: tuple[tuple[float, float], ...]
    colour: str
    dash: str = ""
    marker: str = ""
    line: bool = True
    step: bool = False
    width: float = 1.8
    opacity: float = 1.0
    legend: bool = True
    hollow: tuple[bool, ...] = ()  # per point: drawn hollow (an indicative point)


@dataclass(frozen=True)
class Band:
    """A shaded interval [(x, low, high)]."""

    label: str
    points: tuple[tuple[float, float, float], ...]
    colour: str


@dataclass(frozen=True)
class Rule:
    """A reference line across the plot at ``value`` on the ``axis`` ("x" or "y")."""

    axis: str
    value: float
    text: str = ""
    colour: str = AXIS
    dash: str = "dotted"
    label: str = ""  # a legend entry, when given


@dataclass(frozen=True)
class Whisker:
    """Vertical bars [(x, low, high)]: a range such as min-max over repeats."""

    points: tuple[tuple[float, float, float], ...]
    colour: str


@dataclass(frozen=True)
class Chart:
    """A line chart: x and y axes, and what is drawn on them."""

    title: str
    x: Axis
    y: Axis
    series: tuple[Series, ...] = ()
    bands: tuple[Band, ...] = ()
    rules: tuple[Rule, ...] = ()
    whiskers: tuple[Whisker, ...] = ()

    def legend_labels(self) -> list[str]:
        got = [b.label for b in self.bands if b.label]
        got += [s.label for s in self.series if s.legend and s.label]
        return got + [r.label for r in self.rules if r.label]


@dataclass(frozen=True)
class Bars:
    """A horizontal bar chart: one bar per (label, value), its value written beside it."""

    title: str
    bars: tuple[tuple[str, float], ...]
    axis: Axis
    value_fmt: Callable[[float], str] = _g
    colour: str = COLOURS[0]
    hollow: tuple[bool, ...] = field(default_factory=tuple)  # per bar: indicative


# -- scales ------------------------------------------------------------------------------------


def _finite(v: float) -> bool:
    try:
        return math.isfinite(v)
    except TypeError:  # None, a string: not a number to draw
        return False


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round linear ticks covering [lo, hi], about ``n`` of them (steps of 1, 2, 2.5 or 5 × 10^k)."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    ticks, t = [], first
    while t < hi + step * 0.999:
        ticks.append(round(t, 12))
        t += step
    return ticks


def log_ticks(lo: float, hi: float) -> tuple[list[float], list[float]]:
    """(labelled, unlabelled) ticks of a log axis over [lo, hi]: the decades, with 2 and 5
    labelled too when the axis spans two decades or less."""
    a, b = math.floor(math.log10(lo) + 1e-9), math.ceil(math.log10(hi) - 1e-9)
    b = max(b, a + 1)
    major: list[float] = []
    minor: list[float] = []
    few = b - a <= 2
    for d in range(a, b + 1):
        for m in range(1, 10):
            v = m * 10.0**d
            if v < lo * (1 - 1e-9) or v > hi * (1 + 1e-9):
                continue
            (major if m == 1 or (few and m in (2, 5)) else minor).append(v)
    return major, minor


@dataclass(frozen=True)
class _Scale:
    lo: float
    hi: float
    log: bool
    a: float  # pixel of lo
    b: float  # pixel of hi

    def __call__(self, v: float) -> float:
        if self.log:
            lo, hi = math.log10(self.lo), math.log10(self.hi)
            return self.a + (math.log10(v) - lo) / (hi - lo) * (self.b - self.a)
        return self.a + (v - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def many(self, values: Sequence[float]) -> list[float]:
        """Pixels of ``values``; NaN for a value this axis cannot place (not a number, or
        not positive on a log axis)."""
        out = []
        span = self.b - self.a
        if self.log:
            lo = math.log10(self.lo)
            k = span / (math.log10(self.hi) - lo)
            for v in values:
                ok = _finite(v) and v > 0
                out.append(self.a + (math.log10(v) - lo) * k if ok else math.nan)
        else:
            k = span / (self.hi - self.lo)
            for v in values:
                out.append(self.a + (v - self.lo) * k if _finite(v) else math.nan)
        return out


def _extent(axis: Axis, values: Sequence[float]) -> tuple[float, float, list[float], list[float]]:
    """(lo, hi, labelled ticks, minor ticks) of an axis over ``values``."""
    vals = [v for v in values if _finite(v) and (v > 0 or not axis.log)]
    if axis.ticks:
        vals += list(axis.ticks)
    lo = axis.lo if axis.lo is not None else min(vals, default=1.0 if axis.log else 0.0)
    hi = axis.hi if axis.hi is not None else max(vals, default=lo)
    if axis.log:
        lo = max(lo, 1e-12)
        if hi <= lo:
            lo, hi = lo / 2, lo * 2
        if axis.ticks:
            pad = (hi / lo) ** 0.04 if axis.lo is None else 1.0
            return lo / pad, hi * (pad if axis.hi is None else 1.0), list(axis.ticks), []
        if axis.lo is None:
            lo = 10 ** math.floor(math.log10(lo) + 1e-9)
        if axis.hi is None:
            hi = 10 ** math.ceil(math.log10(hi) - 1e-9)
        major, minor = log_ticks(lo, hi)
        return lo, hi, major, minor
    if axis.zero:
        lo = min(lo, 0.0)
    if axis.ticks:
        return lo, hi, list(axis.ticks), []
    ticks = nice_ticks(lo, hi)
    if axis.lo is None:
        lo = ticks[0]
    if axis.hi is None:
        hi = max(ticks[-1], hi)
    return lo, hi, [t for t in ticks if lo - 1e-12 <= t <= hi + 1e-12], []


# -- drawing -----------------------------------------------------------------------------------

_DASH = {"": "", "dashed": ' stroke-dasharray="6 4"', "dotted": ' stroke-dasharray="1.5 3"'}


def _f(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _path(pts: Sequence[tuple[float, float]], step: bool) -> str:
    """An SVG path through the pixel points; a non-finite point breaks the line."""
    out, pen = [], False
    last = (math.nan, math.nan)
    for x, y in pts:
        if not (math.isfinite(x) and math.isfinite(y)):
            pen = False
            continue
        if pen and abs(x - last[0]) < 0.25 and abs(y - last[1]) < 0.25:
            continue  # the same pixel: nothing to draw (a CDF holds hundreds of such)
        last = (x, y)
        if not pen:
            out.append(f"M{_f(x)} {_f(y)}")
            pen = True
        elif step:
            out.append(f"H{_f(x)}V{_f(y)}")
        else:
            out.append(f"L{_f(x)} {_f(y)}")
    return "".join(out)


def _marker(kind: str, x: float, y: float, colour: str, hollow: bool = False) -> str:
    fill = "#fff" if hollow or kind == "hollow" else colour
    if kind == "diamond":
        r = 5.0
        pts = f"{_f(x)},{_f(y - r)} {_f(x + r)},{_f(y)} {_f(x)},{_f(y + r)} {_f(x - r)},{_f(y)}"
        return f'<polygon points="{pts}" fill="{fill}" stroke="{colour}" stroke-width="1.4"/>'
    if kind == "x":
        r = 3.5
        return (f'<path d="M{_f(x - r)} {_f(y - r)}L{_f(x + r)} {_f(y + r)}M{_f(x - r)} '
                f'{_f(y + r)}L{_f(x + r)} {_f(y - r)}" stroke="{colour}" stroke-width="1.4"/>')  # fmt: skip
    return (f'<circle cx="{_f(x)}" cy="{_f(y)}" r="3.2" fill="{fill}" stroke="{colour}" '
            'stroke-width="1.4"/>')  # fmt: skip


def _text(x: float, y: float, s: str, anchor: str = "middle", size: int = FONT,
          colour: str = MUTED, extra: str = "") -> str:  # fmt: skip
    return (f'<text x="{_f(x)}" y="{_f(y)}" font-size="{size}" fill="{colour}" '
            f'text-anchor="{anchor}"{extra}>{esc(s)}</text>')  # fmt: skip


def _legend_item(label: str, colour: str, dash: str, marker: str, x: float, y: float) -> str:
    sample = ""
    if dash != "none":
        sample = (f'<line x1="{_f(x)}" y1="{_f(y)}" x2="{_f(x + 20)}" y2="{_f(y)}" '
                  f'stroke="{colour}" stroke-width="2"{_DASH.get(dash, "")}/>')  # fmt: skip
    if marker:
        sample += _marker(marker, x + 10, y, colour)
    return sample + _text(x + 26, y + 4, label, anchor="start", colour="#1f2328")


def _legend(entries: list[tuple[str, str, str | None, str]], top: float) -> tuple[str, float]:
    """Entries (label, colour, dash: None for a band's patch, "none" for markers only, marker) flowed in rows below the
    plot, never cut; returns the SVG and the height used."""
    if not entries:
        return "", 0.0
    parts, x, y = [], float(LEFT), top + 8
    for label, colour, dash, marker in entries:
        w = 26 + CHAR_W * len(label) + 16
        if x > LEFT and x + w > WIDTH - RIGHT:
            x, y = float(LEFT), y + 17
        if dash is None:  # a band: a patch
            parts.append(f'<rect x="{_f(x)}" y="{_f(y - 5)}" width="20" height="10" '
                         f'fill="{colour}" fill-opacity="0.2"/>')  # fmt: skip
            parts.append(_text(x + 26, y + 4, label, anchor="start", colour="#1f2328"))
        else:
            parts.append(_legend_item(label, colour, dash, marker, x, y))
        x += w
    return "".join(parts), y - top + 12


def _axes_frame(sx: _Scale, sy: _Scale, x: Axis, y: Axis, xt, yt) -> list[str]:
    """Grid lines, ticks and their labels, and the axis labels."""
    (xmaj, xmin), (ymaj, ymin) = xt, yt
    bottom, top = sy.a, sy.b
    out = []
    for v in ymin:
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_f(sy(v))}" y2="{_f(sy(v))}" '
                   f'stroke="{GRID}" stroke-width="0.5"/>')  # fmt: skip
    for v in ymaj:
        py = sy(v)
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_f(py)}" y2="{_f(py)}" '
                   f'stroke="{GRID}"/>')  # fmt: skip
        out.append(_text(LEFT - 6, py + 4, y.fmt(v), anchor="end"))
    for v in xmin:
        out.append(f'<line y1="{_f(bottom)}" y2="{_f(bottom + 3)}" x1="{_f(sx(v))}" '
                   f'x2="{_f(sx(v))}" stroke="{AXIS}"/>')  # fmt: skip
    for v in xmaj:
        px = sx(v)
        out.append(f'<line y1="{_f(top)}" y2="{_f(bottom)}" x1="{_f(px)}" x2="{_f(px)}" '
                   f'stroke="{GRID}"/>')  # fmt: skip
        out.append(_text(px, bottom + 15, x.fmt(v)))
    out.append(f'<path d="M{LEFT} {_f(top)}V{_f(bottom)}H{WIDTH - RIGHT}" fill="none" '
               f'stroke="{AXIS}"/>')  # fmt: skip
    out.append(_text((LEFT + WIDTH - RIGHT) / 2, bottom + 32, x.label, colour="#1f2328"))
    mid = (top + bottom) / 2
    out.append(_text(14, mid, y.label, colour="#1f2328",
                     extra=f' transform="rotate(-90 14 {_f(mid)})"'))  # fmt: skip
    return out


def _svg(uid: str, title: str, body: list[str], height: float) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {_f(height)}" '
        f'role="img" aria-labelledby="{uid}-t" font-family="inherit">'
        f'<title id="{uid}-t">{esc(title)}</title>'
        f'<text x="{LEFT - 56}" y="17" font-size="13" font-weight="650" fill="#1f2328">'
        f"{esc(title)}</text>" + "".join(body) + "</svg>"
    )


def _all_values(chart: Chart) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for s in chart.series:
        xs += [p[0] for p in s.points]
        ys += [p[1] for p in s.points]
    for b in chart.bands:
        xs += [p[0] for p in b.points]
        ys += [v for p in b.points for v in p[1:]]
    for w in chart.whiskers:
        xs += [p[0] for p in w.points]
        ys += [v for p in w.points for v in p[1:]]
    for r in chart.rules:
        (xs if r.axis == "x" else ys).append(r.value)
    return xs, ys


def _in(s: _Scale, v: float) -> bool:
    return _finite(v) and (v > 0 or not s.log)


def _draw_series(s: Series, sx: _Scale, sy: _Scale) -> list[str]:
    pts = list(zip(sx.many([p[0] for p in s.points]), sy.many([p[1] for p in s.points]),
                   strict=True))  # fmt: skip
    out = []
    op = f' opacity="{s.opacity:g}"' if s.opacity < 1 else ""
    if s.line and len(pts) > 1:
        out.append(f'<path d="{_path(pts, s.step)}" fill="none" stroke="{s.colour}" '
                   f'stroke-width="{s.width:g}"{_DASH[s.dash]}{op} stroke-linejoin="round"/>')  # fmt: skip
    if s.marker:
        for i, (x, y) in enumerate(pts):
            if math.isfinite(x) and math.isfinite(y):
                hollow = i < len(s.hollow) and s.hollow[i]
                out.append(_marker(s.marker, x, y, s.colour, hollow))
    return out


def _draw_rules(chart: Chart, sx: _Scale, sy: _Scale) -> list[str]:
    out = []
    for r in chart.rules:
        s = sx if r.axis == "x" else sy
        if not _in(s, r.value) or not min(s.a, s.b) - 0.5 <= s(r.value) <= max(s.a, s.b) + 0.5:
            continue
        p = s(r.value)
        if r.axis == "x":
            out.append(f'<line x1="{_f(p)}" x2="{_f(p)}" y1="{_f(sy.b)}" y2="{_f(sy.a)}" '
                       f'stroke="{r.colour}" stroke-width="1.1"{_DASH[r.dash]}/>')  # fmt: skip
            if r.text:
                out.append(_text(p + 4, sy.a - 6, r.text, anchor="start", size=10))
        else:
            out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_f(p)}" y2="{_f(p)}" '
                       f'stroke="{r.colour}" stroke-width="1.1"{_DASH[r.dash]}/>')  # fmt: skip
            if r.text:
                out.append(_text(LEFT + 3, p - 3, r.text, anchor="start", size=10))
    return out


def render(chart: Chart, uid: str) -> str:
    """The chart as an inline ``<svg>``; ``uid`` keeps its element ids unique in the page."""
    xs, ys = _all_values(chart)
    xlo, xhi, xmaj, xmin = _extent(chart.x, xs)
    ylo, yhi, ymaj, ymin = _extent(chart.y, ys)
    bottom = TOP + PLOT_H
    sx = _Scale(xlo, xhi, chart.x.log, LEFT, WIDTH - RIGHT)
    sy = _Scale(ylo, yhi, chart.y.log, bottom, TOP)
    body = _axes_frame(sx, sy, chart.x, chart.y, (xmaj, xmin), (ymaj, ymin))
    clip = f"{uid}-c"
    body.append(f'<clipPath id="{clip}"><rect x="{LEFT}" y="{TOP - 4}" '
                f'width="{WIDTH - RIGHT - LEFT + 4}" height="{PLOT_H + 8}"/></clipPath>')  # fmt: skip
    inner = []
    for b in chart.bands:
        pts = [(sx(x), sy(lo), sy(hi)) for x, lo, hi in b.points
               if _in(sx, x) and _in(sy, lo) and _in(sy, hi)]  # fmt: skip
        if len(pts) > 1:
            d = "M" + "L".join(f"{_f(x)} {_f(h)}" for x, _, h in pts)
            d += "L" + "L".join(f"{_f(x)} {_f(lo)}" for x, lo, _ in reversed(pts)) + "Z"
            inner.append(f'<path d="{d}" fill="{b.colour}" fill-opacity="0.18"/>')
    for w in chart.whiskers:
        for x, lo, hi in w.points:
            if _in(sx, x) and _in(sy, lo) and _in(sy, hi):
                inner.append(f'<line x1="{_f(sx(x))}" x2="{_f(sx(x))}" y1="{_f(sy(lo))}" '
                             f'y2="{_f(sy(hi))}" stroke="{w.colour}" stroke-width="3" '
                             'opacity="0.35"/>')  # fmt: skip
    inner += _draw_rules(chart, sx, sy)
    for s in chart.series:
        inner += _draw_series(s, sx, sy)
    body.append(f'<g clip-path="url(#{clip})">{"".join(inner)}</g>')
    entries: list[tuple[str, str, str | None, str]] = [
        (b.label, b.colour, None, "") for b in chart.bands if b.label
    ]
    entries += [(s.label, s.colour, s.dash if s.line else "none", s.marker)
                for s in chart.series if s.legend and s.label]  # fmt: skip
    entries += [(r.label, r.colour, r.dash, "") for r in chart.rules if r.label]
    legend, used = _legend(entries, bottom + 40)
    body.append(legend)
    return _svg(uid, chart.title, body, bottom + 44 + used)


def render_bars(chart: Bars, uid: str) -> str:
    """A horizontal bar chart as an inline ``<svg>``: labels on the left, values beside the bars."""
    n = len(chart.bars)
    label_w = min(max((len(lb) for lb, _ in chart.bars), default=4) * CHAR_W + 12, 250)
    left = label_w + 8
    row = 22
    top = TOP
    bottom = top + row * n + 6
    right = WIDTH - RIGHT - 60  # room for the value written beside the longest bar
    lo, hi, major, minor = _extent(chart.axis, [v for _, v in chart.bars])
    sx = _Scale(lo, hi, chart.axis.log, left, right)
    body = []
    for v in minor:
        body.append(f'<line x1="{_f(sx(v))}" x2="{_f(sx(v))}" y1="{top}" y2="{_f(bottom)}" '
                    f'stroke="{GRID}" stroke-width="0.5"/>')  # fmt: skip
    for v in major:
        body.append(f'<line x1="{_f(sx(v))}" x2="{_f(sx(v))}" y1="{top}" y2="{_f(bottom)}" '
                    f'stroke="{GRID}"/>')  # fmt: skip
        body.append(_text(sx(v), bottom + 15, chart.axis.fmt(v)))
    base = sx(lo)
    for i, (label, v) in enumerate(chart.bars):
        y = top + 4 + i * row
        body.append(_text(left - 8, y + 12, label, anchor="end", colour="#1f2328"))
        if not _in(sx, v):
            body.append(_text(left + 4, y + 12, "not measured", anchor="start"))
            continue
        w = max(sx(v) - base, 1.0)
        hollow = i < len(chart.hollow) and chart.hollow[i]
        fill = "#fff" if hollow else chart.colour
        body.append(f'<rect x="{_f(base)}" y="{_f(y)}" width="{_f(w)}" height="15" '
                    f'fill="{fill}" stroke="{chart.colour}" stroke-width="1.2"/>')  # fmt: skip
        body.append(_text(base + w + 4, y + 12, chart.value_fmt(v), anchor="start",
                          colour="#1f2328"))  # fmt: skip
    body.append(f'<path d="M{_f(left)} {top}V{_f(bottom)}" stroke="{AXIS}"/>')
    body.append(_text((left + right) / 2, bottom + 32, chart.axis.label, colour="#1f2328"))
    return _svg(uid, chart.title, body, bottom + 42)


@dataclass(frozen=True)
class Timeline:
    """Phases on one time axis: per row (label, start, first done, last done, colour, hollow);
    from start to first done solid, from first done to last done (the stragglers) light."""

    title: str
    rows: tuple[tuple[str, float, float, float, str, bool], ...]
    axis: Axis
    ghosts: tuple[tuple[int, float, float], ...] = ()  # (row, start, end): a baseline's, dashed


def render_timeline(chart: Timeline, uid: str) -> str:
    """A timeline as an inline ``<svg>``: one row per phase, labels on the left."""
    n = len(chart.rows)
    label_w = min(max((len(r[0]) for r in chart.rows), default=4) * CHAR_W + 12, 250)
    left, right, row, top = label_w + 8, WIDTH - RIGHT, 18, TOP
    bottom = top + row * n + 6
    lo, hi, major, _ = _extent(chart.axis, [v for r in chart.rows for v in r[1:4]]
                               + [v for g in chart.ghosts for v in g[1:]])  # fmt: skip
    sx = _Scale(lo, hi, False, left, right)
    body = []
    for v in major:
        body.append(f'<line x1="{_f(sx(v))}" x2="{_f(sx(v))}" y1="{top}" y2="{_f(bottom)}" '
                    f'stroke="{GRID}"/>')  # fmt: skip
        body.append(_text(sx(v), bottom + 15, chart.axis.fmt(v)))
    for i, (label, start, first, last, colour, hollow) in enumerate(chart.rows):
        y = top + 3 + i * row
        body.append(_text(left - 8, y + 11, label, anchor="end", colour="#1f2328"))
        a, b, c = sx(start), sx(max(first, start)), sx(max(last, first, start))
        fill = "#fff" if hollow else colour
        body.append(f'<rect x="{_f(a)}" y="{_f(y)}" width="{_f(max(b - a, 1.0))}" height="12" '
                    f'fill="{fill}" stroke="{colour}" stroke-width="1.2"/>')  # fmt: skip
        if c - b >= 0.5:
            body.append(f'<rect x="{_f(b)}" y="{_f(y + 3)}" width="{_f(c - b)}" height="6" '
                        f'fill="{colour}" fill-opacity="0.35"/>')  # fmt: skip
    for i, start, end in chart.ghosts:
        a, b = sx(start), sx(max(end, start))
        body.append(f'<rect x="{_f(a)}" y="{_f(top + 1 + i * row)}" width="{_f(max(b - a, 1.0))}" '
                    f'height="16" fill="none" stroke="#1f2328" stroke-width="1" '
                    'stroke-dasharray="4 2" opacity="0.7"/>')  # fmt: skip
    body.append(f'<path d="M{_f(left)} {top}V{_f(bottom)}H{_f(right)}" fill="none" '
                f'stroke="{AXIS}"/>')  # fmt: skip
    body.append(_text((left + right) / 2, bottom + 32, chart.axis.label, colour="#1f2328"))
    return _svg(uid, chart.title, body, bottom + 42)
