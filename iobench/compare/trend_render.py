"""A judged trend (:class:`trend.TrendReport`) as the terminal's table, JSON, and an SVG plot:
one line per spec, its noise band shaded, confirmed regressions marked. The three read the
same report, so they never disagree.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

from .. import history
from ..core.errors import UsageError
from ..core.units import format_spread
from .metric import format_percent, format_value
from .options import MARK_BETTER, MARK_UNCONFIRMED, MARK_WORSE
from .trend import SeriesTrend, TrendReport, TrendRun

_WORDS = {MARK_WORSE: "regression", MARK_BETTER: "improvement", MARK_UNCONFIRMED: "unconfirmed"}


def change_text(run: TrendRun, evidence: bool = False) -> str:
    """``−50.0 % regression``: the move from the run before it and what compare's rule makes
    of it (with ``evidence`` its test and p: ``(history p=0.0012)``); blank for the first run
    of its setup."""
    row = run.row
    if row is None or row.delta is None:
        return ""
    text = format_percent(row.delta)
    word = _WORDS.get(row.mark)
    if word:
        text += f" {word}"
        if evidence and row.test and row.p_value is not None:
            text += f" ({row.test} p={row.p_value:.2g})"
    return text


def band_text(series: SeriesTrend, unit: str, min_history: int) -> str:
    runs = len(series.runs)
    if series.band is None:
        return f"{runs} run{'s' if runs != 1 else ''}, no noise band: {min_history} runs needed"
    lo, hi = series.band
    of = series.noise.runs if series.noise is not None else runs
    return f"{runs} runs, noise band {format_value(lo, unit)}–{format_value(hi, unit)} of {of}"


def render_trend_table(report: TrendReport) -> str:
    """The terminal's table: a block per spec, headed by its label, spec hash and noise band;
    a line per run (its id is its start, UTC); then the confirmed regressions."""
    unit, name = report.unit, report.name
    n = len(report.series)
    lines = [f"{name}: {n} series, one per spec"]
    for s in report.series:
        head = f"{s.label} (spec {s.spec_hash or '?'}, {band_text(s, unit, report.options.min_history)})"
        values = [format_value(r.point.value, unit) for r in s.runs]
        width = max(len(name), *(len(v) for v in values))
        ids = max(len("run id"), *(len(r.point.run_id) for r in s.runs))
        lines += ["", head, f"  {'run id':<{ids}}  {name:>{width}}  over repeats  vs previous"]
        for r, value in zip(s.runs, values, strict=True):
            sp = r.point.spread
            spread = format_spread(sp.n, sp.min, sp.max, sp.cv, lambda v: format_value(v, unit))
            cells = f"  {r.point.run_id:<{ids}}  {value:>{width}}  {spread:<12}  {change_text(r)}"
            lines.append(cells.rstrip())
    found = report.regressions
    lines += [
        "",
        "vs previous: as compare judges this metric against the run before it",
    ]
    if found:
        lines.append(f"confirmed regressions ({len(found)}):")
        lines += [
            f"  {r.point.run_id} ({s.label}): {change_text(r, evidence=True)} against {r.baseline}"
            for s, r in found
        ]
    else:
        lines.append("no confirmed regressions")
    return "\n".join(lines)


def _num(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def trend_dict(report: TrendReport) -> dict[str, Any]:
    """``history trend --json``: every series, its band and each run's judgement."""

    def run(r: TrendRun) -> dict[str, Any]:
        sp, row = r.point.spread, r.row
        return {
            "run_id": r.point.run_id, "started_at": r.point.started_at,
            "value": r.point.value, "n": sp.n, "min": sp.min, "max": sp.max, "cv": _num(sp.cv),
            "status": r.point.status, "baseline": r.baseline,
            "change": _num(row.delta) if row is not None else None,
            "mark": r.mark or None, "test": row.test if row is not None else None,
            "p_value": row.p_value if row is not None else None,
            "confirmed_regression": r.regression,
        }  # fmt: skip

    def series(s: SeriesTrend) -> dict[str, Any]:
        band = s.band
        return {
            "spec_hash": s.spec_hash, "label": s.label,
            "noise": None if band is None or s.noise is None else {
                "runs": s.noise.runs, "sd_log": s.noise.sd_log, "centre": s.centre,
                "low": band[0], "high": band[1],
            },
            "runs": [run(r) for r in s.runs],
        }  # fmt: skip

    return {
        "metric": report.name, "unit": report.unit, "direction": report.direction,
        "series": [series(s) for s in report.series],
        "confirmed_regressions": [r.point.run_id for _s, r in report.regressions],
    }  # fmt: skip


def render_trend_json(report: TrendReport) -> str:
    return json.dumps(trend_dict(report), indent=1, allow_nan=False)


_PLOT_SCALE = {"B/s": (1 << 20, "MiB/s"), "s": (1e-3, "ms"), "fraction": (0.01, "%")}


def _xs(report: TrendReport) -> dict[str, Any]:
    """Each run's x: its start time, or its place in time order when a start is unknown."""
    points = sorted(
        (r.point for s in report.series for r in s.runs),
        key=lambda p: (history.parse_timestamp(p.started_at) is None, p.started_at, p.run_id),
    )
    times = {p.run_id: history.parse_timestamp(p.started_at) for p in points}
    if all(t is not None for t in times.values()):
        return times
    return {p.run_id: i for i, p in enumerate(points)}


def render_trend_svg(report: TrendReport) -> str:
    """An SVG plot: one line per spec (its label in the legend), its noise band shaded in its
    colour, min-max bars where a run had repeats, confirmed regressions as red crosses; a log
    axis when the values span more than 10× (needs matplotlib: ``iobench[plot]``)."""
    try:
        from matplotlib.figure import Figure  # no pyplot, no global backend
    except ImportError:
        raise UsageError("matplotlib is missing; install iobench[plot]") from None
    if not any(s.runs for s in report.series):
        raise UsageError(f"no stored values of {report.name} to plot")
    scale, label = _PLOT_SCALE.get(report.unit, (1, report.unit))
    xs = _xs(report)
    fig = Figure(figsize=(8, 3.6))
    ax = fig.add_subplot()
    colours = [f"C{i % 10}" for i in range(len(report.series))]
    ys_all = []
    for s, colour in zip(report.series, colours, strict=True):
        x = [xs[r.point.run_id] for r in s.runs]
        y = [r.point.value / scale for r in s.runs]
        ys_all += y
        ax.plot(x, y, marker="o", linewidth=1.5, color=colour, label=s.label)
        if s.band is not None and len(x) > 1:
            ax.fill_between([min(x), max(x)], s.band[0] / scale, s.band[1] / scale,
                            color=colour, alpha=0.15, linewidth=0)  # fmt: skip
        ranged = [(xi, r) for xi, r in zip(x, s.runs, strict=True) if r.point.spread.n > 1]
        if ranged:
            mid = [r.point.value / scale for _x, r in ranged]
            lo = [m - r.point.spread.min / scale for m, (_x, r) in zip(mid, ranged, strict=True)]
            hi = [r.point.spread.max / scale - m for m, (_x, r) in zip(mid, ranged, strict=True)]
            ax.errorbar([xi for xi, _r in ranged], mid, yerr=[lo, hi], fmt="none",
                        ecolor=colour, alpha=0.6, capsize=3, linewidth=1)  # fmt: skip
    bad = [(xs[r.point.run_id], r.point.value / scale) for _s, r in report.regressions]
    if bad:
        bx, by = zip(*bad, strict=True)
        ax.scatter(bx, by, marker="x", s=90, color="red", zorder=5,
                   label="confirmed regression")  # fmt: skip
    positive = [y for y in ys_all if y > 0]
    if positive and max(positive) > 10 * min(positive):
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.set_title(f"{report.name} (shaded: each spec's noise band)")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    if not all(isinstance(v, int) for v in xs.values()):
        fig.autofmt_xdate()
    else:
        ax.set_xlabel("run")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    return buf.getvalue()
