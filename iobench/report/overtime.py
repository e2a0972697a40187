"""The report's plots over time (issue 25): latency per interval with the operations per
second on the same time axis (fio's lat_log, fio-plot's "latency and IOPS over time"), the
client CPU over time of the phases that were CPU-bound, and the loader's load wait and
throughput per step.

Each section is ``(run, baseline, add)`` as :mod:`.plots`' and draws only what the result
records (``result.timeseries``): an older result has none of these series, and the plots are
then left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..core.cpu import HOST_BUSY_SHARE, SATURATED_SHARE, client_bound
from ..result.blocks import LoaderBlock, RankBlock
from ..result.file import PhaseResult, RunResult
from ..result.timeseries import CpuSeriesBlock, LatencySeriesBlock, StepSeriesBlock
from .cells import _is_num
from .figures import (
    BASELINE_SUFFIX,
    MIN_LINE_POINTS,
    _chunks,
    _colour,
    _count_tick,
    _lat_axis,
    _pct_tick,
    _rate_scale,
    _rate_tick,
    _seconds_tick,
    _spans,
    share_axes,
)
from .series import _plot_group, time_points
from .svgbars import Stacked
from .svgplot import Axis, Chart, Rule, Series

Add = Callable[..., None]
Points = list[tuple[float, float]]
_TIME = "time since phase start (s)"


def _nan(v: Any) -> float:
    return float(v) if _is_num(v) else math.nan


def _seq(v: Any) -> tuple[Any, ...]:
    """A stored list (a hand-edited file may hold anything there: then nothing)."""
    return v if isinstance(v, tuple) else ()


def latency_points(p: PhaseResult) -> tuple[Points, Points]:
    """(p50, p99) of ``extra.latency_series`` as (seconds since the phase's start at the
    interval's end, latency), intervals without an operation left out; ([], []) without it."""
    ls = LatencySeriesBlock.from_dict(p.extra.get("latency_series"))
    dt, off = ls.interval_s, ls.start_s if _is_num(ls.start_s) else 0.0
    if not _is_num(dt) or dt <= 0:
        return [], []
    p50, p99 = [], []
    for i, (n, a, b) in enumerate(zip(_seq(ls.ops), _seq(ls.p50_s), _seq(ls.p99_s), strict=False)):
        t = max((i + 1) * dt - off, 0.0)
        if _is_num(n) and n > 0 and _is_num(a) and _is_num(b) and a > 0 and b > 0:
            p50.append((t, float(a)))
            p99.append((t, float(b)))
    return p50, p99


def _ops_points(p: PhaseResult) -> Points:
    extra = p.extra_block
    off = extra.series_start_s if extra.has("series_start_s") else 0.0
    if not p.ops_series or not p.series_interval_s > 0:
        return []
    values = [_nan(v) for v in p.ops_series]
    return time_points(values, float(p.series_interval_s), p.elapsed_s, off or 0.0)


def _lat_panels(
    part: Sequence[tuple[PhaseResult, Points, Points]],
    base: dict[str, tuple[Points, Points, Points]],
    title: str,
) -> Stacked:
    """The latency panel (p50 thin, p99 thick; a baseline's p99 dashed) over the IOPS panel."""
    lat, iops = [], []
    for i, (p, p50, p99) in enumerate(part):
        c = _colour(i)
        lat.append(Series(f"{p.name} p50", tuple(p50), c, width=1.1, opacity=0.75))
        lat.append(Series(f"{p.name} p99", tuple(p99), c, width=2.2))
        ops = _ops_points(p)
        if ops:
            iops.append(Series(p.name, ((0.0, ops[0][1]), *ops), c))
        b = base.get(p.name)
        if b is not None:
            if b[1]:
                lat.append(Series(f"{p.name} p99{BASELINE_SUFFIX}", tuple(b[1]), c,
                                  dash="dashed", width=1.2, opacity=0.8))  # fmt: skip
            if b[2]:
                iops.append(Series(p.name + BASELINE_SUFFIX, ((0.0, b[2][0][1]), *b[2]), c,
                                   dash="dashed", width=1.2, opacity=0.8))  # fmt: skip
    xs = [x for s in lat + iops for x, _ in s.points]
    x = Axis(_TIME, lo=0.0, hi=max(xs, default=1.0))
    top = Chart(title, x, _lat_axis("latency per operation"), tuple(lat))
    log = _spans(y for s in iops for _, y in s.points)
    y = Axis("ops/s", log=log, zero=not log, fmt=_count_tick)
    panels = (top, Chart("Operations per second", x, y, tuple(iops))) if iops else (top,)
    return Stacked(title, panels)


def latency_time_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Latency per interval (p50 and p99) over the IOPS on the same time axis, two phases a
    figure, grouped by op; a baseline's p99 and IOPS of the same phase dashed."""
    base = {}
    for p in baseline.phases if baseline else []:
        p50, p99 = latency_points(p)
        if p99:
            base[p.name] = (p50, p99, _ops_points(p))
    groups: dict[str, list[tuple[PhaseResult, Points, Points]]] = {}
    for p in run.phases:
        p50, p99 = latency_points(p)
        if len(p99) >= MIN_LINE_POINTS:
            groups.setdefault(_plot_group(p), []).append((p, p50, p99))
    dashed = f" Dashed: baseline {baseline.run_id}'s p99 and IOPS." if base and baseline else ""
    for op, members in groups.items():
        parts = _chunks(members, 2)
        for k, part in enumerate(parts, 1):
            title = f"Latency and IOPS over time: {op}"
            title += f" ({k} of {len(parts)})" if len(parts) > 1 else ""
            interval = LatencySeriesBlock.from_dict(part[0][0].extra.get("latency_series"))
            add(_lat_panels(part, base, title),
                f"Median (thin) and p99 (thick) latency of the operations completed in each "
                f"{interval.interval_s:g} s interval, from a coarse per-interval histogram "
                f"(within {100 * (interval.resolution or 0.25) / 2:.0f} %); below, the "
                "operations per second on the same time axis." + dashed, title)  # fmt: skip


# -- the client CPU over time ----------------------------------------------------------------


#: CPU-bound phases drawn over time (two a figure), the busiest first.
MAX_CPU_PHASES = 6


def _busiest(used: Any) -> float:
    """The larger of the client's and the host's CPU share over the phase."""
    got = [used.get(k) for k in ("share", "host_share")] if isinstance(used, dict) else []
    return max((float(v) for v in got if _is_num(v)), default=0.0)


def cpu_points(series: Any) -> tuple[Points, Points]:
    """(host busy, this process) shares of a ``cpu_series`` at each sample's end."""
    cs = CpuSeriesBlock.from_dict(series)
    dt = cs.interval_s
    if not _is_num(dt) or dt <= 0:
        return [], []
    host = [((i + 1) * dt, float(v)) for i, v in enumerate(_seq(cs.host_share)) if _is_num(v)]
    own = [((i + 1) * dt, float(v)) for i, v in enumerate(_seq(cs.self_share)) if _is_num(v)]
    return host, own


def _cpu_sources(run: RunResult) -> list[tuple[str, Any, Any]]:
    """(name, client_cpu, cpu_series) of every phase, and the loader's loop."""
    got = [(p.name, p.extra.get("client_cpu"), p.extra.get("cpu_series")) for p in run.phases]
    if isinstance(run.loader, dict):
        got.append(("loader", run.loader.get("client_cpu"), run.loader.get("cpu_series")))
    return got


def cpu_time_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """The client CPU over time of each phase flagged CPU-bound (``core.cpu.client_bound``):
    the host's CPUs busy (solid) and iobench's own threads (dotted), two phases a figure."""
    hot = []
    for name, used, series in _cpu_sources(run):
        host, own = cpu_points(series)
        if client_bound(used) and len(host) >= MIN_LINE_POINTS:
            hot.append((_busiest(used), name, host, own))
    if not hot:
        return
    hot.sort(key=lambda h: -h[0])  # the busiest first; past MAX_CPU_PHASES, named in a caption
    rest = [name for _, name, _, _ in hot[MAX_CPU_PHASES:]]
    shown = [(name, host, own) for _, name, host, own in hot[:MAX_CPU_PHASES]]
    base = {n: cpu_points(s)[0] for n, _, s in (_cpu_sources(baseline) if baseline else [])}
    charts = []
    for part in _chunks(shown, 2):
        lines = []
        for i, (name, host, own) in enumerate(part):
            lines.append(Series(f"{name}: host busy", tuple(host), _colour(i)))
            if own:
                lines.append(Series(f"{name}: iobench", tuple(own), _colour(i), dash="dotted"))
            if base.get(name):
                lines.append(Series(f"{name}: host busy{BASELINE_SUFFIX}", tuple(base[name]),
                                    _colour(i), dash="dashed", width=1.2, opacity=0.8))  # fmt: skip
        rules = (Rule("y", HOST_BUSY_SHARE, text=f"host busy {HOST_BUSY_SHARE:.0%}"),
                 Rule("y", SATURATED_SHARE, text=f"client saturated {SATURATED_SHARE:.0%}"))  # fmt: skip
        y = Axis("share of the CPUs", lo=0.0, hi=1.0, ticks=(0, 0.25, 0.5, 0.75, 1.0),
                 fmt=_pct_tick)  # fmt: skip
        charts.append(Chart("Client CPU over time", Axis(_TIME, lo=0.0), y, tuple(lines),
                            rules=rules))  # fmt: skip
    charts = share_axes(charts)
    n = len(charts)
    for k, chart in enumerate(charts, 1):
        title = "Client CPU over time" + (f" ({k} of {n})" if n > 1 else "")
        more = f" Also CPU-bound, not drawn: {', '.join(rest)}." if rest and k == n else ""
        add(chart, "Phases flagged CPU-bound (the client used 80 % of its CPUs, or the host's "
            "were 90 % busy), the busiest first: the host's CPUs busy, every process (solid), and "
            "iobench's own threads (dotted; worker processes are counted only when they end)."
            + (f" Dashed: baseline {baseline.run_id}." if baseline and any(base.values()) else "")
            + more, title)  # fmt: skip


# -- the loader's steps ----------------------------------------------------------------------


def _step_series(ld: LoaderBlock | None) -> list[tuple[str, StepSeriesBlock]]:
    ranks = [r for r in (ld.ranks if ld is not None else ()) if isinstance(r, RankBlock)]
    got = []
    for r in ranks:
        s = StepSeriesBlock.from_dict(r.extra.get("step_series"))
        if len(_seq(s.t_s)) >= MIN_LINE_POINTS:
            got.append((f"rank {r.rank}", s))
    return got


def _pts(
    ts: Sequence[Any], ys: Sequence[Any], scale: float = 1.0
) -> tuple[tuple[float, float], ...]:
    """(time, value) of a step series; the line broken where the time jumps (between epochs:
    each epoch's first step and the workers' start are not timed steps)."""
    pts = [(float(t), float(y) / scale) for t, y in zip(_seq(ts), _seq(ys), strict=False)
           if _is_num(t) and _is_num(y)]  # fmt: skip
    gaps = sorted(b[0] - a[0] for a, b in zip(pts, pts[1:], strict=False))
    if not gaps:
        return tuple(pts)
    jump = 4 * max(gaps[len(gaps) // 2], 1e-9)
    out = pts[:1]
    for a, b in zip(pts, pts[1:], strict=False):
        if b[0] - a[0] > jump:
            out.append(((a[0] + b[0]) / 2, math.nan))  # a break in the line
        out.append(b)
    return tuple(out)


def loader_step_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """The loader's load wait per step over time (mean and longest of each point's steps)
    and its throughput per step, up to four ranks; a baseline's rank 0 dashed."""
    got = _step_series(run.loader_block)
    if not got:
        return
    shown = got[:4] if len(got) > 1 else got
    base = _step_series(baseline.loader_block) if baseline else []
    b0 = base[0][1] if base else None
    every = shown[0][1].every
    merged = f"; each point {every} consecutive steps" if _is_num(every) and every > 1 else ""
    more = f"; ranks {shown[0][0][5:]}–{shown[-1][0][5:]} of {len(got)}" if len(got) > 4 else ""
    dashed = f" Dashed: baseline {baseline.run_id}'s {base[0][0]}." if b0 and baseline else ""
    lines = []
    both = len(shown) < 3 and _is_num(every) and every > 1  # a point's mean and its longest
    for i, (label, s) in enumerate(shown):
        lines.append(Series(f"{label} mean" if both else label, _pts(s.t_s, s.wait_s),
                            _colour(i), marker="" if both else "o"))  # fmt: skip
        if both:
            lines.append(Series(f"{label} longest", _pts(s.t_s, s.wait_max_s), _colour(i),
                                line=False, marker="o", opacity=0.6))  # fmt: skip
    if b0 is not None:
        lines.append(Series(f"{base[0][0]}{BASELINE_SUFFIX}", _pts(b0.t_s, b0.wait_s),
                            _colour(0), dash="dashed", width=1.2, opacity=0.8))  # fmt: skip
    x = Axis("time since the first timed step (s)", lo=0.0)
    ys = [y for s in lines for _, y in s.points]
    log = _spans(ys)
    y = Axis("load wait per step", log=log, zero=not log, fmt=_seconds_tick)
    add(Chart("Load wait per step", x, y, tuple(lines)),
        "Time each step waited for its batch (the accelerator idle), after each epoch's first "
        f"step{merged}{more}." + dashed, "Load wait per step")  # fmt: skip
    scale, unit = _rate_scale(float(v) for _, s in shown for v in _seq(s.bytes_per_s) if _is_num(v))
    lines = [Series(label, _pts(s.t_s, s.bytes_per_s, scale), _colour(i))
             for i, (label, s) in enumerate(shown)]  # fmt: skip
    if b0 is not None:
        lines.append(Series(f"{base[0][0]}{BASELINE_SUFFIX}", _pts(b0.t_s, b0.bytes_per_s, scale),
                            _colour(0), dash="dashed", width=1.2, opacity=0.8))  # fmt: skip
    y = Axis(f"batch bytes per step time ({unit})", zero=True, fmt=_rate_tick)
    add(Chart("Throughput per step", x, y, tuple(lines)),
        f"Each step's batch bytes over the step's time (wait, compute and barrier){merged}{more}."
        + dashed, "Throughput per step")  # fmt: skip
