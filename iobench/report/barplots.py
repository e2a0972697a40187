"""The report's bar plots (issue 25): IOPS against block size and against workers from the
sweeps (fio-plot's bars), each worker's and each rank's span with first done (the stonewall)
and last done marked (elbencho's per-worker view), and the loader's AU per epoch.

Each section is ``(run, baseline, add)`` as :mod:`.plots`' and draws only what the result
records: a result without ``extra.worker_times`` (older, or fio's phases) has no per-worker
plot, one without ranks no per-rank plot.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from ..result.blocks import LoaderBlock, RankBlock
from ..result.file import PhaseResult, RunResult
from ..result.steady import is_indicative
from ..result.timeseries import WorkerTimesBlock
from .cells import _block_short, _count, _is_num, _pct, _rate, _secs
from .figures import _chunks, _colour, _count_tick, _pct_tick, _spans
from .series import sweep_indicative, sweep_series
from .svgbars import BarSeries, GroupBars, Spans
from .svgplot import Axis, Rule, _extent

Add = Callable[..., None]

#: Per-worker (per-rank) figures drawn: the phases whose stragglers lagged most; the rest are
#: in the summary table's first done and last done.
MAX_SPAN_FIGURES = 6
#: Rows a per-worker figure draws; past it, the workers that finished last.
MAX_ROWS = 32
_FIRST, _LAST, _BASE = "#1a7f37", "#cf222e", "#59636e"


def _nan(v: Any) -> float:
    return float(v) if _is_num(v) else math.nan


# -- IOPS against block size and workers ------------------------------------------------------


def _shared_y(charts: list[GroupBars]) -> list[GroupBars]:
    """Small multiples on one y scale (the union of their values)."""
    if len(charts) < 2:
        return charts
    values = [v for c in charts for s in c.series for v in (*s.values, *s.baseline)]
    lo, hi, _, _ = _extent(charts[0].axis, values)
    return [replace(c, axis=replace(c.axis, lo=lo, hi=hi)) for c in charts]


def _iops_chart(
    title: str,
    part: Sequence[str],
    series: dict[str, list[tuple[float, float]]],
    flags: dict[str, list[bool]],
    base: dict[str, list[tuple[float, float]]],
    axis: str,
) -> GroupBars:
    cats = sorted({x for label in part for x, _ in series[label]})
    bars = []
    for i, label in enumerate(part):
        got = dict(series[label])
        hollow = dict(zip((x for x, _ in series[label]), flags.get(label, ()), strict=False))
        b = dict(base.get(label, ()))
        bars.append(BarSeries(label, tuple(got.get(x, math.nan) for x in cats), _colour(i),
                              tuple(hollow.get(x, False) for x in cats),
                              tuple(b.get(x, math.nan) for x in cats)))  # fmt: skip
    values = [v for s in bars for v in (*s.values, *s.baseline) if _is_num(v)]
    log = _spans(values)
    y = Axis("operations per second" + (" (log scale)" if log else ""), log=log, zero=not log,
             fmt=_count_tick)  # fmt: skip
    labels = tuple(_block_short(x) if axis == "block_size" else f"{x:g}" for x in cats)
    x_label = "block size" if axis == "block_size" else "workers (concurrency)"
    return GroupBars(title, labels, tuple(bars), y, x_label=x_label,
                     value_fmt=lambda v: _count(v))  # fmt: skip


def iops_sweep_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """IOPS against block size and against workers, as bars: one group per point of the
    sweep, one bar per op (at most four a figure); hollow: indicative; a dashed tick: the
    baseline's figure there."""
    for axis in ("block_size", "concurrency"):
        series = sweep_series(run.phases, axis, "iops")
        if not series:
            continue
        flags = sweep_indicative(run.phases, axis, "iops")
        base = sweep_series(baseline.phases, axis, "iops") if baseline else {}
        what = "IOPS vs block size" if axis == "block_size" else "IOPS vs workers"
        parts = _chunks(list(series))
        charts = _shared_y([_iops_chart(what, part, series, flags, base, axis) for part in parts])
        hollow = any(any(f) for f in flags.values())
        caption = (
            "Operations per second (last done) of each phase in the sweep"
            + ("; hollow bars: indicative (not steady or too short)" if hollow else "")
            + (f"; dashed ticks: baseline {baseline.run_id}" if base and baseline else "")
            + "."
        )
        n = len(charts)
        for k, chart in enumerate(charts, 1):
            title = what if n == 1 else f"{what} ({k} of {n})"
            add(replace(chart, title=title), caption, title)


# -- per worker and per rank: first done vs last done -----------------------------------------


def _nums(values: Any) -> list[float]:
    """A stored list's numbers (NaN where not a number; nothing when it is no list)."""
    return [_nan(v) for v in values] if isinstance(values, tuple) else []


def worker_spans(p: PhaseResult) -> list[tuple[str, float, float, float, float]]:
    """(label, start, end, bytes, ops) of each worker ``extra.worker_times`` lists, times from
    the phase's first start; [] when the phase has none (older results, fio)."""
    wt = WorkerTimesBlock.from_dict(p.extra.get("worker_times"))
    cols = [_nums(c) for c in (wt.start_s, wt.end_s, wt.bytes, wt.ops)]
    n = min(len(c) for c in cols)
    return [(f"worker {i}", cols[0][i], cols[1][i], cols[2][i], cols[3][i]) for i in range(n)
            if _is_num(cols[0][i]) and _is_num(cols[1][i])]  # fmt: skip


def rank_spans(p: PhaseResult) -> list[tuple[str, float, float, float, float]]:
    """The same of each rank of a many-client phase (``ranks``: rank 0's clock)."""
    got = []
    for r in p.ranks if isinstance(p.ranks, list) else []:
        if not isinstance(r, dict) or not (_is_num(r.get("start")) and _is_num(r.get("end"))):
            continue
        host = f" ({r['host']})" if r.get("host") else ""
        got.append((f"rank {r.get('rank')}{host}", float(r["start"]), float(r["end"]),
                    _nan(r.get("bytes")), _nan(r.get("ops"))))  # fmt: skip
    if not got:
        return []
    t0 = min(s for _, s, _, _, _ in got)
    return [(lb, s - t0, e - t0, b, o) for lb, s, e, b, o in got]


def _lag(spans: Sequence[tuple[str, float, float, float, float]]) -> float:
    """How long the last one finished after the first, as a share of the last done time."""
    ends = [e for _, _, e, _, _ in spans]
    return (max(ends) - min(ends)) / max(ends) if max(ends) > 0 else 0.0


def _span_text(start: float, end: float, nbytes: float, ops: float) -> str:
    took = end - start
    if took <= 0:
        return ""
    if _is_num(nbytes) and nbytes > 0:
        return _rate(nbytes / took)
    return _count(ops / took, " ops/s") if _is_num(ops) and ops > 0 else ""


def _span_chart(
    title: str,
    spans: list[tuple[str, float, float, float, float]],
    colour: str,
    base: list[tuple[str, float, float, float, float]],
) -> tuple[Spans, bool]:
    """The spans (the :data:`MAX_ROWS` that finished last when there are more), first done
    and last done marked, a baseline's as grey rules; and whether rows were left out."""
    first, last = min(e for _, _, e, _, _ in spans), max(e for _, _, e, _, _ in spans)
    cut = len(spans) > MAX_ROWS
    shown = sorted(spans, key=lambda s: s[2])[-MAX_ROWS:] if cut else spans
    rows = tuple((lb, s, e, colour, _span_text(s, e, b, o)) for lb, s, e, b, o in shown)
    rules = [Rule("x", first, text=f"first done {_secs(first)}", colour=_FIRST),
             Rule("x", last, text=f"last done {_secs(last)}", colour=_LAST)]  # fmt: skip
    if base:
        b_first, b_last = min(e for _, _, e, _, _ in base), max(e for _, _, e, _, _ in base)
        rules += [Rule("x", b_first, text="", colour=_BASE), Rule("x", b_last, text="",
                                                                  colour=_BASE)]  # fmt: skip
    axis = Axis("seconds since the phase's first start", lo=0.0)
    return Spans(title, rows, axis, tuple(rules)), cut


def _span_figures(
    run: RunResult, baseline: RunResult | None, add: Add, kind: str,
    spans_of: Callable[[PhaseResult], list[tuple[str, float, float, float, float]]],
) -> None:  # fmt: skip
    got = [(p, s) for p in run.phases if len(s := spans_of(p)) >= 2]
    if not got:
        return
    got.sort(key=lambda ps: -_lag(ps[1]))
    left = len(got) - MAX_SPAN_FIGURES
    for n, (p, spans) in enumerate(got[:MAX_SPAN_FIGURES]):
        b = baseline.phase(p.name) if baseline else None
        base = spans_of(b) if b is not None else []
        title = f"Per-{kind}: {p.name}"
        chart, cut = _span_chart(title, spans, _colour(0 if kind == "worker" else 3), base)
        caption = (
            f"Each {kind} from its first operation's start to its last one's end, its own "
            f"rate beside it. First done (the stonewall, when the first {kind} finished) "
            f"{_secs(p.stonewall_s)}: {_rate(p.bandwidth_stonewall_bps)}; last done "
            f"{_secs(p.elapsed_s)}: {_rate(p.bandwidth_bps)}"
            + ("" if is_indicative(p) is False else "; the phase is indicative")
            + "."
        )
        if cut:
            caption += f" The {MAX_ROWS} of {len(spans)} {kind}s that finished last are drawn."
        if base:
            caption += f" Grey lines: baseline {baseline.run_id if baseline else ''}'s first and last done."
        if n == MAX_SPAN_FIGURES - 1 and left > 0:
            caption += (
                f" {left} more phases lagged less (their first and last done are in the summary)."
            )
        add(chart, caption, title)


def worker_plots(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """Per worker, then per rank: the phases whose last worker (rank) lagged most."""
    _span_figures(run, baseline, add, "worker", worker_spans)
    _span_figures(run, baseline, add, "rank", rank_spans)


# -- the loader's AU per epoch ----------------------------------------------------------------


def _epoch_aus(ld: LoaderBlock) -> list[tuple[str, list[float]]]:
    """(label, AU per epoch) of each rank (up to four), else the mean over ranks."""
    ranks = [r for r in ld.ranks if isinstance(r, RankBlock)]
    per = [(f"rank {r.rank}", [_nan(getattr(e, "au", None)) for e in r.epochs]) for r in ranks
           if isinstance(r.epochs, tuple)]  # fmt: skip
    per = [(lb, v) for lb, v in per if any(_is_num(a) and a == a for a in v)]
    if 2 <= len(per) <= 4:
        return per
    mean = _nums(ld.au_per_epoch)
    return [("AU (mean over ranks)" if len(per) > 1 else "AU", mean)] if mean else []


def au_epoch_plot(run: RunResult, baseline: RunResult | None, add: Add) -> None:
    """The loader's AU in each epoch: a bar per epoch (per rank, up to four), the profile's
    pass line, a baseline's mean AU per epoch as dashed ticks."""
    ld = run.loader_block
    if ld is None or ld.empty:
        return
    per = _epoch_aus(ld)
    n = max((len(v) for _, v in per), default=0)
    if n < 1:
        return
    bl = baseline.loader_block if baseline else None
    base = _nums(bl.au_per_epoch) if bl is not None else []
    bars = tuple(BarSeries(lb, tuple(v + [math.nan] * (n - len(v))), _colour(i),
                           baseline=tuple(base[:n]) if i == 0 else ())
                 for i, (lb, v) in enumerate(per))  # fmt: skip
    rules: tuple[Rule, ...] = ()
    if _is_num(ld.au_min):
        rules = (Rule("y", float(ld.au_min), text=f"pass line {_pct(ld.au_min)}",
                      colour=_LAST),)  # fmt: skip
    y = Axis("accelerator utilisation (AU)", lo=0.0, hi=1.05, ticks=(0, 0.25, 0.5, 0.75, 1.0),
             fmt=_pct_tick)  # fmt: skip
    cats = tuple(f"epoch {k + 1}" for k in range(n))
    chart = GroupBars("AU per epoch", cats, bars, y, x_label="epoch", rules=rules,
                      value_fmt=_pct)  # fmt: skip
    caption = ("Measured accelerator utilisation in each epoch (compute over the epoch's time "
               "after its first step)" + (f"; dashed ticks: baseline {baseline.run_id}"
                                          if base and baseline else "") + ".")  # fmt: skip
    add(chart, caption, "AU per epoch")
