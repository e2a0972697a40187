"""Aggregation across ranks (pure): every rank's PhaseResult into one, as IOR does.

Bandwidth is all bytes over (last end - first start) on rank 0's clock; a stonewall figure
(when the first rank finished); histograms merged exactly; per-rank records and per-rank /
per-host spread with the straggler named; start skew flagged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.units import format_bytes
from ..result.file import PhaseResult
from ..result.stats import SERIES_RESOLUTION_S, Histogram, spread

STRAGGLER_RATIO = 1.5


def aggregate_ranks(records: Sequence[Mapping[str, Any]]) -> PhaseResult:
    """One PhaseResult from every rank's: the IOR aggregate, on rank 0's clock.

    ``records`` are ``{"rank", "host", "clock_offset_s", "read_from", "result": dict}``.
    Bandwidth is all bytes over (last end - first start); the stonewall figure is the bytes
    all ranks had moved when the first rank finished (from their interval series) over that
    time; percentiles come from the merged histograms. ``per_worker`` keeps the extremes over
    every worker of every rank (its median is the median of the ranks' medians).
    """
    recs = sorted(records, key=lambda r: int(r["rank"]))
    results = [PhaseResult.from_dict(dict(r["result"])) for r in recs]
    ranks = [_rank_record(r, p) for r, p in zip(recs, results, strict=True)]
    spans = [  # (start, end) of every rank that did work
        (rec["start"], rec["end"])
        for rec, p in zip(ranks, results, strict=True)
        if rec["start"] is not None and rec["end"] is not None and p.ops > 0
    ]
    res = _summed(results, ranks)
    if spans:
        _timed(res, ranks, results, spans)
    res.per_worker = _per_worker(results)
    _steady_over_ranks(res, results, spans)
    res.extra["world"] = len(results)
    res.extra["hosts"] = len({rec["host"] for rec in ranks})
    res.extra["rank_spread"], res.extra["host_spread"], stragglers = _spreads(ranks, res.bytes)
    res.warnings.extend(w for w in stragglers if w not in res.warnings)
    return res


def _rank_record(r: Mapping[str, Any], p: PhaseResult) -> dict[str, Any]:
    """One rank's entry of ``ranks``: its volume and its span on rank 0's clock."""
    off = float(r.get("clock_offset_s") or 0.0)
    s, e = p.extra.get("start_epoch"), p.extra.get("end_epoch")
    start = s - off if s is not None else None
    end = e - off if e is not None else None
    dur = (end - start) if start is not None and end is not None else 0.0
    rec = {
        "rank": int(r["rank"]),
        "host": str(r.get("host", "")),
        "bytes": p.bytes,
        "ops": p.ops,
        "start": start,
        "end": end,
        "bandwidth_bps": p.bytes / dur if dur > 0 else 0.0,
        "iops": p.ops / dur if dur > 0 else 0.0,
        "clock_offset_s": off,
        "status": p.status,
    }
    if r.get("read_from") is not None:
        rec["read_from"] = int(r["read_from"])
    return rec


def _summed(results: Sequence[PhaseResult], ranks: list[dict[str, Any]]) -> PhaseResult:
    """The aggregate's volume, merged histogram, warnings and status (no timing yet)."""
    first = results[0]
    hist = Histogram()
    for p in results:
        hist.merge(Histogram.from_dict(p.histogram))
    res = PhaseResult(
        name=first.name,
        op=first.op,
        bytes=sum(p.bytes for p in results),
        ops=sum(p.ops for p in results),
        files=sum(p.files for p in results),
        concurrency=sum(p.concurrency for p in results),
        block_size=first.block_size,
        latency_s=hist.summary_s(),
        histogram=hist.to_dict(),
        cache=first.cache,
        params={**first.params, "ranks": len(results)},
        ranks=ranks,
    )
    res.extra = {k: v for k, v in first.extra.items() if k not in _RANK0_KEYS}
    res.warnings = _unique(w for p in results for w in p.warnings)
    caches = {p.cache for p in results}
    if len(caches) > 1:
        res.warnings.append(f"ranks handled the page cache differently: {sorted(caches)}")
    bad = [(rec["rank"], p) for rec, p in zip(ranks, results, strict=True) if p.status != "ok"]
    if bad:
        res.status = "failed" if all(p.status == "failed" for p in results) else "partial"
        res.error = "; ".join(f"rank {k}: {p.error or p.status}" for k, p in bad)
    return res


def _timed(
    res: PhaseResult,
    ranks: list[dict[str, Any]],
    results: Sequence[PhaseResult],
    spans: Sequence[tuple[float, float]],
) -> None:
    """Rates over (last end - first start), the stonewall figure, the merged series."""
    t0 = min(s for s, _ in spans)
    t_last = max(e for _, e in spans)
    t_first = min(e for _, e in spans)  # the first rank done (stonewall)
    res.elapsed_s = max(t_last - t0, 1e-9)
    res.stonewall_s = max(t_first - t0, 1e-9)
    res.bandwidth_bps = res.bytes / res.elapsed_s
    res.iops = res.ops / res.elapsed_s
    done = sum(
        _done_by(p, rec["start"], rec["end"], t_first)
        for rec, p in zip(ranks, results, strict=True)
        if rec["start"] is not None and p.ops > 0
    )
    res.bandwidth_stonewall_bps = done / res.stonewall_s
    res.extra.update(start_epoch=t0, end_epoch=t_last, first_end_epoch=t_first)
    res.series, res.ops_series, res.series_interval_s = _merge_series(ranks, results, t0)
    res.extra.pop("series_start_s", None)  # the merged series starts at t0


# rank 0's own clock and its own workers: the aggregate has ``ranks`` instead, and no latency
# series (one rank's is not the phase's; ranks' p99s do not merge)
_RANK0_KEYS = ("start_epoch", "end_epoch", "first_end_epoch", "latency_series", "worker_times",
               "cpu_series")  # fmt: skip
#: A phase whose ranks started further apart than this share of its duration is flagged: its
#: aggregate (all bytes over last end − first start) understates what the ranks did together.
MAX_START_SKEW_SHARE = 0.10


def start_skew(spans: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(seconds between the first and the last rank's start, that as a share of the phase's
    first start to last end); (0, 0) for fewer than two ranks."""
    if len(spans) < 2:
        return 0.0, 0.0
    starts = [s for s, _ in spans]
    skew = max(starts) - min(starts)
    duration = max(e for _, e in spans) - min(starts)
    return skew, (skew / duration if duration > 0 else 0.0)


def _steady_over_ranks(
    res: PhaseResult, results: Sequence[PhaseResult], spans: Sequence[tuple[float, float]]
) -> None:
    """The aggregate is steady when every rank's phase was (from the last rank's steady
    point); a start skew over MAX_START_SKEW_SHARE of the phase is flagged."""
    judged = [p.steady for p in results]
    if all(j is not None for j in judged):
        res.steady = all(judged)
        res.steady_criterion = results[0].steady_criterion
        if res.steady:
            res.steady_at_s = max(float(p.steady_at_s or 0.0) for p in results)
    skew, share = start_skew(spans)
    if len(spans) > 1:
        flagged = share > MAX_START_SKEW_SHARE
        res.extra["start_skew"] = {"seconds": skew, "share": share, "flagged": flagged}
        if flagged:
            res.warnings.append(
                f"ranks started {skew * 1e3:.0f} ms apart, {share:.0%} of the phase "
                f"(over {MAX_START_SKEW_SHARE:.0%}): the aggregate understates what the "
                "ranks did together; figures indicative"
            )


def _unique(items: Any) -> list[str]:
    out: list[str] = []
    for i in items:
        if i not in out:
            out.append(i)
    return out


def _done_by(p: PhaseResult, start: float, end: float, t: float) -> float:
    """Bytes a rank had moved by ``t`` (epoch): from its interval series when the phase spans
    ten intervals or more, else at a constant rate over its own [start, end]."""
    if t <= start:
        return 0.0
    if t >= end:
        return float(p.bytes)
    if len(p.series) < 10:
        return p.bytes * (t - start) / (end - start)
    width = p.series_interval_s or 1.0
    pos = (t - start) / width
    full = int(pos)
    done = sum(p.series[:full]) * width
    if full < len(p.series):
        done += p.series[full] * width * (pos - full)
    return min(done, float(p.bytes))


def _merge_series(
    ranks: Sequence[Mapping[str, Any]], results: Sequence[PhaseResult], t0: float
) -> tuple[list[float], list[float], float]:
    """Every rank's interval series on one time line from ``t0`` (each interval's bytes go to
    the common interval its start falls in)."""
    widths = [p.series_interval_s for p in results if p.series]
    if not widths:
        return [], [], 1.0
    width = max(max(widths), SERIES_RESOLUTION_S)
    bins_b: list[float] = []
    bins_o: list[float] = []
    for rec, p in zip(ranks, results, strict=True):
        if rec["start"] is None or not p.series:
            continue
        w = p.series_interval_s or width
        for i, v in enumerate(p.series):
            k = int((rec["start"] - t0 + i * w) / width + 1e-9)
            while len(bins_b) <= k:
                bins_b.append(0.0)
                bins_o.append(0.0)
            bins_b[k] += v * w
            if i < len(p.ops_series):
                bins_o[k] += p.ops_series[i] * w
    return [b / width for b in bins_b], [o / width for o in bins_o], width


def _per_worker(results: Sequence[PhaseResult]) -> dict[str, float]:
    pw = [p.per_worker for p in results if p.per_worker]
    if not pw:
        return {}
    meds = spread([w["median"] for w in pw])
    return {
        "min": min(w["min"] for w in pw),
        "median": meds["median"],
        "max": max(w["max"] for w in pw),
    }


def _rate(bytes_: float, ops: float, dur: float, by_bytes: bool) -> float:
    if dur <= 0:
        return 0.0
    return (bytes_ if by_bytes else ops) / dur


def _spreads(
    ranks: Sequence[Mapping[str, Any]], total_bytes: int
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Per-rank and per-host rate spread (bytes/s, or ops/s for metadata phases) and the
    straggler warnings (max/min beyond STRAGGLER_RATIO)."""
    by_bytes = total_bytes > 0
    unit = "bandwidth_bps" if by_bytes else "iops"
    timed = [r for r in ranks if r["start"] is not None and r["end"] is not None]
    per_rank = {
        r["rank"]: _rate(r["bytes"], r["ops"], r["end"] - r["start"], by_bytes) for r in timed
    }
    hosts: dict[str, list[Mapping[str, Any]]] = {}
    for r in timed:
        hosts.setdefault(r["host"], []).append(r)
    per_host = {
        h: _rate(
            sum(r["bytes"] for r in rs),
            sum(r["ops"] for r in rs),
            max(r["end"] for r in rs) - min(r["start"] for r in rs),
            by_bytes,
        )
        for h, rs in hosts.items()
    }
    warnings: list[str] = []
    rank_spread: dict[str, Any] = {"unit": unit, **spread(list(per_rank.values()))}
    host_spread: dict[str, Any] = {"unit": unit, **spread(list(per_host.values()))}
    for label, table, spread_d in (
        ("rank", per_rank, rank_spread),
        ("host", per_host, host_spread),
    ):
        if len(table) < 2:
            continue
        slow = min(table, key=lambda k: table[k])
        fast = max(table, key=lambda k: table[k])
        spread_d["slowest"] = slow
        lo, hi = table[slow], table[fast]
        ratio = hi / lo if lo > 0 else math.inf
        spread_d["max_over_min"] = ratio if math.isfinite(ratio) else None
        if ratio > STRAGGLER_RATIO:
            where = (
                f"rank {slow} ({next(r['host'] for r in timed if r['rank'] == slow)})"
                if label == "rank"
                else f"host {slow}"
            )
            warnings.append(
                f"straggler: {where} ran at {_fmt_rate(lo, by_bytes)} against "
                f"{_fmt_rate(hi, by_bytes)} for the fastest {label} "
                f"(max/min {'inf' if not math.isfinite(ratio) else f'{ratio:.1f}'})"
            )
    return rank_spread, host_spread, warnings


def _fmt_rate(v: float, by_bytes: bool) -> str:
    return f"{format_bytes(v)}/s" if by_bytes else f"{v:,.0f} ops/s"
