"""The data behind the plots, without matplotlib: sweep curves, latency against workers,
per-interval rates over time and latency CDFs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..result.file import PhaseResult, metric_summary
from ..result.steady import is_indicative
from .cells import METADATA_OPS, _block, _is_num, _value


def sweep_series(
    phases: Sequence[PhaseResult], axis: str, metric: str = "bandwidth_bps"
) -> dict[str, list[tuple[float, float]]]:
    """Sweeps along ``axis``: label -> [(x, the ``metric``: bytes/s, or ops/s for "iops")]
    (see :func:`_sweep_points`)."""
    return {
        label: [(x, sum(v) / len(v)) for x, v in ((x, [b[0] for b in bs]) for x, bs in pts)]
        for label, pts in _sweep_points(phases, axis, metric).items()
    }


def sweep_indicative(
    phases: Sequence[PhaseResult], axis: str, metric: str = "bandwidth_bps"
) -> dict[str, list[bool]]:
    """label -> per point of :func:`sweep_series`: whether a phase at it is indicative."""
    return {
        label: [any(b[3] for b in bs) for _, bs in pts]
        for label, pts in _sweep_points(phases, axis, metric).items()
    }


def sweep_spread(
    phases: Sequence[PhaseResult], axis: str
) -> dict[str, list[tuple[float, float, float]]]:
    """label -> [(x, min, max)] over the repeats of the sweep points measured more than once."""
    out = {}
    for label, pts in _sweep_points(phases, axis).items():
        bars = [(x, min(b[1] for b in bs), max(b[2] for b in bs)) for x, bs in pts]
        bars = [b for b in bars if b[2] > b[1]]
        if bars:
            out[label] = bars
    return out


def _sweep_points(
    phases: Sequence[PhaseResult], axis: str, metric: str = "bandwidth_bps"
) -> dict[str, list[tuple[float, list[tuple[float, float, float, bool]]]]]:
    """Bandwidth sweeps along ``axis`` ("block_size" or "concurrency").

    label -> [(x, [(median bytes/s, repeat min, repeat max, indicative) of each phase at x])].
    Phases are grouped by ``params["sweep"]`` and op (phases without a sweep tag are not sweep
    points; "base" joins both the block-size and the jobs sweep); within a group, those that
    share the other parameter and differ along ``axis`` form one series (>= 2 distinct points).
    Points measured twice (the base phase) are averaged; a phase's figure is the median over
    its repeats, as in the tables.
    """
    other = "concurrency" if axis == "block_size" else "block_size"
    groups: dict[tuple[str, str], list[PhaseResult]] = {}
    for p in phases:
        if p.op in METADATA_OPS or p.status == "failed" or not (getattr(p, metric) or 0) > 0:
            continue
        sweep_tag = str((p.params or {}).get("sweep") or "")
        if not sweep_tag:
            continue  # not a sweep point (a layout write, a one-off phase)
        # the base configuration is a point of every sweep it anchors
        for tag in ("block_size", "jobs") if sweep_tag == "base" else (sweep_tag,):
            groups.setdefault((tag, p.op), []).append(p)
    out: dict[str, list[tuple[float, list[tuple[float, float, float, bool]]]]] = {}
    for (sweep, op), members in groups.items():
        by_other: dict[Any, dict[float, list[tuple[float, float, float, bool]]]] = {}
        for p in members:
            x = getattr(p, axis)
            if not _is_num(x) or x <= 0:
                continue
            bw = _value(p, metric) or getattr(p, metric)
            sm = metric_summary(p, metric)
            lo, hi = (sm.min, sm.max) if sm is not None and sm.n > 1 else (bw, bw)
            if bw is None or lo is None or hi is None:  # none: filtered out above (the types)
                continue
            point = (bw, lo, hi, p.status != "ok" or is_indicative(p))
            by_other.setdefault(getattr(p, other), {}).setdefault(float(x), []).append(point)
        lines = {k: v for k, v in by_other.items() if len(v) >= 2}
        name = op if sweep == op else f"{sweep} ({op})"
        for k, xs in sorted(lines.items(), key=lambda kv: str(kv[0])):
            label = name
            if len(lines) > 1:
                label += f", {_block(k)}" if other == "block_size" else f", {k} jobs"
            out[label] = sorted(xs.items())
    return out


def latency_series(
    phases: Sequence[PhaseResult],
) -> dict[str, list[tuple[float, dict[str, float]]]]:
    """Latency against concurrency: "op, block" -> [(workers, {"p50": s, "p99": s, "p99.9": s})]
    for every op and block size measured at two or more worker counts (the figures every
    rendering shows: medians over repeats)."""
    groups: dict[tuple[str, Any], dict[float, dict[str, float]]] = {}
    for p in phases:
        if p.status == "failed" or not _is_num(p.concurrency) or p.concurrency <= 0:
            continue
        marks = {}
        for key, name in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")):
            v = _value(p, f"latency_s.{key}")
            if _is_num(v) and v > 0:
                marks[name] = float(v)
        if marks:
            groups.setdefault((p.op, p.block_size), {})[float(p.concurrency)] = marks
    out = {}
    for (op, block), pts in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len(pts) >= 2:
            label = op + (f", {_block(block)}" if _is_num(block) and block > 0 else "")
            out[label] = sorted(pts.items())
    return out


PARTIAL_MIN_SHARE = 0.5  # a last interval covering less of its length than this is not drawn


def time_points(
    values: Sequence[float], interval_s: float, elapsed_s: float | None, start_s: float = 0.0
) -> list[tuple[float, float]]:
    """(seconds since the phase's start at the interval's end, rate) of a per-interval series.

    The series is on a fixed grid that starts ``start_s`` before the phase (stats.aggregate
    records it as ``extra["series_start_s"]``; 0 for many-client series and older results)
    and divides every interval's bytes (ops) by the full interval; but the phase covered only
    part of its first and last intervals. Those two rates are taken over the time the phase
    really covered (from ``start_s`` and ``elapsed_s``) and drawn at the phase's start and
    end; covering under :data:`PARTIAL_MIN_SHARE` of an interval they are left out (too short
    to be a rate). Without a usable ``elapsed_s``, or when it does not fit the series (an
    older result whose grid offset is unknown), the series is drawn as stored."""
    n = len(values)
    stored = [((i + 1) * interval_s, float(v)) for i, v in enumerate(values)]
    if not n or not _is_num(elapsed_s) or not elapsed_s or interval_s <= 0:
        return stored
    off = float(start_s) if _is_num(start_s) and 0 <= start_s < interval_s else 0.0
    end = off + float(elapsed_s)  # the phase's end, from the grid's start
    if end <= (n - 1) * interval_s or end > n * interval_s + 1e-9:
        return stored
    pts = []
    for i, v in enumerate(values):
        lo, hi = max(i * interval_s, off), min((i + 1) * interval_s, end)
        covered = hi - lo
        if covered >= interval_s * (1 - 1e-9):
            pts.append((hi - off, float(v)))
        elif covered >= PARTIAL_MIN_SHARE * interval_s:
            pts.append((hi - off, float(v) * interval_s / covered))
    return pts


def _plot_group(p: PhaseResult) -> str:
    """Phases drawn in one figure: one op, or all metadata operations together."""
    return "metadata" if p.op in METADATA_OPS else p.op


def _by_op(phases: Iterable[PhaseResult]) -> dict[str, list[PhaseResult]]:
    groups: dict[str, list[PhaseResult]] = {}
    for p in phases:
        groups.setdefault(_plot_group(p), []).append(p)
    return groups


def _cdf(histogram: dict[str, Any]) -> list[tuple[float, float]]:
    """(latency seconds, cumulative fraction) points of a stored histogram; [] if unreadable."""
    from ..result.stats import Histogram

    try:
        pts = Histogram.from_dict(histogram).cdf_points()
    except (ValueError, TypeError, KeyError, AttributeError):
        return []
    return [(max(x, 1e-9), y) for x, y in pts]


HIST_BINS_PER_DECADE = 10


def latency_bins(
    histogram: dict[str, Any], per_decade: int = HIST_BINS_PER_DECADE
) -> list[tuple[float, float, float]]:
    """A stored latency histogram re-binned for drawing: [(low s, high s, share of the
    operations)] over contiguous log-spaced bins (``per_decade`` a decade) from the fastest
    operation's bin to the slowest's; each stored bucket counts in the bin of its midpoint.
    [] when the histogram is unreadable or empty."""
    import math

    from ..result.stats import Histogram, bucket_bounds

    try:
        h = Histogram.from_dict(histogram)
    except (ValueError, TypeError, KeyError, AttributeError):
        return []
    if not h.count:
        return []
    by_bin: dict[int, int] = {}
    for i, n in enumerate(h.counts):
        if n:
            lo, hi = bucket_bounds(i)
            mid = max((lo + hi) / 2, 1.0) / 1e9
            k = math.floor(math.log10(mid) * per_decade + 1e-9)
            by_bin[k] = by_bin.get(k, 0) + n
    first, last = min(by_bin), max(by_bin)
    return [(10 ** (k / per_decade), 10 ** ((k + 1) / per_decade), by_bin.get(k, 0) / h.count)
            for k in range(first, last + 1)]  # fmt: skip


def timeline_rows(phases: Sequence[PhaseResult]) -> list[tuple[PhaseResult, float, float, float]]:
    """(phase, start, first done, last done) in seconds since the first phase's start, for
    every phase whose result records its epochs (``extra.start_epoch`` / ``end_epoch``; the
    first done from ``first_end_epoch``, else the stonewall time)."""
    got = []
    for p in phases:
        e = p.extra or {}
        start, end = e.get("start_epoch"), e.get("end_epoch")
        if not (_is_num(start) and _is_num(end)) or end < start:
            continue
        first = e.get("first_end_epoch")
        if not _is_num(first) and _is_num(p.stonewall_s):
            first = start + p.stonewall_s
        if not _is_num(first) or not start <= first <= end:
            first = end
        got.append((p, float(start), float(first), float(end)))
    if not got:
        return []
    t0 = min(s for _, s, _, _ in got)
    return [(p, s - t0, f - t0, e - t0) for p, s, f, e in got]
