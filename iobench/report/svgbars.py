"""Two more chart kinds, drawn as hand-written SVG as :mod:`.svgplot`'s:

- :class:`GroupBars`: vertical bars, one group per category (a block size, a worker count, an
  epoch), one bar per series in it (at most four); indicative bars hollow; a baseline's value
  as a dashed tick across its bar; reference lines (a threshold).
- :class:`Spans`: one row per worker or rank, from its start to its end, its figure written
  beside it, and vertical reference lines (first done: the stonewall; last done);
- :class:`Stacked`: line charts on one time axis, one under the other, in one figure.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .svgplot import (
    AXIS,
    CHAR_W,
    GRID,
    LEFT,
    PLOT_H,
    RIGHT,
    TOP,
    WIDTH,
    Axis,
    Chart,
    Rule,
    _extent,
    _f,
    _finite,
    _g,
    _legend,
    _Scale,
    _svg,
    _text,
    render,
)


@dataclass(frozen=True)
class BarSeries:
    """One series of a :class:`GroupBars`: a value per category (NaN: none there)."""

    label: str
    values: tuple[float, ...]
    colour: str
    hollow: tuple[bool, ...] = ()  # per category: an indicative figure
    baseline: tuple[float, ...] = ()  # per category: the baseline's value (NaN: none)


@dataclass(frozen=True)
class GroupBars:
    """Vertical grouped bars over ``categories`` on the y ``axis``."""

    title: str
    categories: tuple[str, ...]
    series: tuple[BarSeries, ...]
    axis: Axis
    x_label: str = ""
    rules: tuple[Rule, ...] = ()  # horizontal lines (axis "y")
    value_fmt: Callable[[float], str] = _g


def _ok(s: _Scale, v: float) -> bool:
    return _finite(v) and (v > 0 or not s.log)


def _y_grid(sy: _Scale, axis: Axis, major: list[float], minor: list[float]) -> list[str]:
    out = []
    for v in minor:
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_f(sy(v))}" y2="{_f(sy(v))}" '
                   f'stroke="{GRID}" stroke-width="0.5"/>')  # fmt: skip
    for v in major:
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_f(sy(v))}" y2="{_f(sy(v))}" '
                   f'stroke="{GRID}"/>')  # fmt: skip
        out.append(_text(LEFT - 6, sy(v) + 4, axis.fmt(v), anchor="end"))
    return out


def _y_rules(sy: _Scale, rules: tuple[Rule, ...], lo: float, hi: float) -> list[str]:
    out = []
    for r in rules:
        if _ok(sy, r.value) and lo <= r.value <= hi:
            y = _f(sy(r.value))
            out.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y}" y2="{y}" '
                       f'stroke="{r.colour}" stroke-width="1.1" stroke-dasharray="6 4"/>')  # fmt: skip
            if r.text:
                out.append(_text(WIDTH - RIGHT - 2, sy(r.value) - 4, r.text, anchor="end",
                                 size=10))  # fmt: skip
    return out


def render_group_bars(chart: GroupBars, uid: str) -> str:
    """The grouped bars as an inline ``<svg>``."""
    values = [v for s in chart.series for v in (*s.values, *s.baseline)]
    values += [r.value for r in chart.rules]
    lo, hi, major, minor = _extent(chart.axis, values)
    bottom = TOP + PLOT_H
    sy = _Scale(lo, hi, chart.axis.log, bottom, TOP)
    body = _y_grid(sy, chart.axis, major, minor)
    n, k = max(len(chart.categories), 1), max(len(chart.series), 1)
    group_w = (WIDTH - RIGHT - LEFT) / n
    bar_w = min(group_w * 0.8 / k, 48.0)
    base_y = sy(lo) if chart.axis.log else sy(max(lo, 0.0))
    few = n * k <= 24  # room to write each bar's value above it
    for i, cat in enumerate(chart.categories):
        x0 = LEFT + i * group_w + (group_w - bar_w * k) / 2
        body.append(_text(LEFT + (i + 0.5) * group_w, bottom + 15, cat))
        for j, s in enumerate(chart.series):
            v = s.values[i] if i < len(s.values) else math.nan
            x = x0 + j * bar_w
            if _ok(sy, v):
                top = sy(v)
                hollow = i < len(s.hollow) and s.hollow[i]
                fill = "#fff" if hollow else s.colour
                body.append(f'<rect x="{_f(x + 1)}" y="{_f(min(top, base_y))}" '
                            f'width="{_f(bar_w - 2)}" height="{_f(max(abs(base_y - top), 1.0))}" '
                            f'fill="{fill}" stroke="{s.colour}" stroke-width="1.2"/>')  # fmt: skip
                if few:
                    body.append(_text(x + bar_w / 2, top - 4, chart.value_fmt(v), size=9))
            b = s.baseline[i] if i < len(s.baseline) else math.nan
            if _ok(sy, b):
                y = _f(sy(b))
                body.append(f'<line x1="{_f(x - 1)}" x2="{_f(x + bar_w + 1)}" y1="{y}" y2="{y}" '
                            f'stroke="#1f2328" stroke-width="1.6" stroke-dasharray="4 2"/>')  # fmt: skip
    body += _y_rules(sy, chart.rules, lo, hi)
    body.append(f'<path d="M{LEFT} {TOP}V{bottom}H{WIDTH - RIGHT}" fill="none" stroke="{AXIS}"/>')
    body.append(_text((LEFT + WIDTH - RIGHT) / 2, bottom + 32, chart.x_label, colour="#1f2328"))
    mid = (TOP + bottom) / 2
    body.append(_text(14, mid, chart.axis.label, colour="#1f2328",
                      extra=f' transform="rotate(-90 14 {_f(mid)})"'))  # fmt: skip
    entries: list[tuple[str, str, str | None, str]] = [
        (s.label, s.colour, None, "") for s in chart.series
    ]
    if any(_ok(sy, b) for s in chart.series for b in s.baseline):
        entries.append(("baseline", "#1f2328", "dashed", ""))
    legend, used = _legend(entries, bottom + 40)
    body.append(legend)
    return _svg(uid, chart.title, body, bottom + 44 + used)


@dataclass(frozen=True)
class Spans:
    """Rows (label, start, end, colour, text written after the bar) on one time axis, with
    vertical reference ``rules`` (axis "x")."""

    title: str
    rows: tuple[tuple[str, float, float, str, str], ...]
    axis: Axis
    rules: tuple[Rule, ...] = ()


def render_spans(chart: Spans, uid: str) -> str:
    """The spans as an inline ``<svg>``: one row each, labels on the left, rules across."""
    n = len(chart.rows)
    label_w = min(max((len(r[0]) for r in chart.rows), default=4) * CHAR_W + 12, 200)
    text_w = min(max((len(r[4]) for r in chart.rows), default=0) * CHAR_W * 0.85 + 8, 110)
    left, right, row, top = label_w + 8, WIDTH - RIGHT - text_w, 16, TOP + 12
    bottom = top + row * n + 6
    values = [v for r in chart.rows for v in r[1:3]] + [r.value for r in chart.rules]
    lo, hi, major, _ = _extent(chart.axis, values)
    sx = _Scale(lo, hi, False, left, right)
    body = []
    for v in major:
        body.append(f'<line x1="{_f(sx(v))}" x2="{_f(sx(v))}" y1="{top}" y2="{_f(bottom)}" '
                    f'stroke="{GRID}"/>')  # fmt: skip
        body.append(_text(sx(v), bottom + 15, chart.axis.fmt(v)))
    for i, (label, start, end, colour, text) in enumerate(chart.rows):
        y = top + 2 + i * row
        body.append(_text(left - 8, y + 10, label, anchor="end", colour="#1f2328", size=10))
        if not (_finite(start) and _finite(end)):
            continue
        a, b = sx(start), sx(max(end, start))
        body.append(f'<rect x="{_f(a)}" y="{_f(y)}" width="{_f(max(b - a, 1.0))}" height="11" '
                    f'fill="{colour}" fill-opacity="0.75"/>')  # fmt: skip
        if text:
            body.append(_text(b + 4, y + 10, text, anchor="start", size=10))
    for k, r in enumerate(chart.rules):
        if _finite(r.value) and lo <= r.value <= hi:
            x = _f(sx(r.value))
            body.append(f'<line x1="{x}" x2="{x}" y1="{top - 4}" y2="{_f(bottom)}" '
                        f'stroke="{r.colour}" stroke-width="1.3" stroke-dasharray="5 3"/>')  # fmt: skip
            anchor = "end" if k % 2 == 0 else "start"
            shift = -3 if anchor == "end" else 3
            body.append(_text(sx(r.value) + shift, top - 5, r.text, anchor=anchor, size=10,
                              colour=r.colour))  # fmt: skip
    body.append(f'<path d="M{_f(left)} {top}V{_f(bottom)}H{_f(right)}" fill="none" '
                f'stroke="{AXIS}"/>')  # fmt: skip
    body.append(_text((left + right) / 2, bottom + 32, chart.axis.label, colour="#1f2328"))
    return _svg(uid, chart.title, body, bottom + 42)


@dataclass(frozen=True)
class Stacked:
    """Panels on one time axis, drawn one under the other in one figure (fio-plot's latency
    and IOPS over time): each a :class:`~.svgplot.Chart`, the first titled with the figure."""

    title: str
    panels: tuple[Chart, ...]


def render_stacked(chart: Stacked, uid: str) -> str:
    return "".join(render(c, f"{uid}p{k}") for k, c in enumerate(chart.panels))
