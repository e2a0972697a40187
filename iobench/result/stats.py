"""Latency histograms, per-interval series and IOR/elbencho-style aggregates.

The histogram is log-linear (HdrHistogram-like): values are integer nanoseconds; values below
``2*S`` have their own bucket, above that each power of two is split into ``S`` equal buckets,
so a bucket is at most 1/S (1.6 % for S=64) of its value wide. Memory is a fixed array
whatever the operation count, and two histograms merge exactly by adding counts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .timeseries import LatSlots, latency_series, worker_times

SUB_BUCKETS = 64
_K = 6  # log2(SUB_BUCKETS)
MAX_SHIFT = 44  # values up to ~2**51 ns (26 days) fit
N_BUCKETS = (MAX_SHIFT + 2) * SUB_BUCKETS
PERCENTILES = {"p50": 0.50, "p90": 0.90, "p99": 0.99, "p999": 0.999}


def bucket_index(v: int) -> int:
    """Bucket of a non-negative integer value (ns)."""
    shift = v.bit_length() - _K - 1
    if shift <= 0:
        return v
    if shift > MAX_SHIFT:
        return N_BUCKETS - 1
    return shift * SUB_BUCKETS + (v >> shift)


def bucket_bounds(i: int) -> tuple[int, int]:
    """[lower, upper) value range of bucket ``i``."""
    if i < 2 * SUB_BUCKETS:
        return i, i + 1
    shift = i // SUB_BUCKETS - 1
    m = i - shift * SUB_BUCKETS
    return m << shift, (m + 1) << shift


class Histogram:
    """Mergeable log-linear histogram of durations, recorded in nanoseconds."""

    __slots__ = ("count", "counts", "max_ns", "min_ns", "sum_ns")

    def __init__(self) -> None:
        self.counts = [0] * N_BUCKETS
        self.count = 0
        self.sum_ns = 0
        self.min_ns = 0
        self.max_ns = 0

    # -- recording -------------------------------------------------------------------------
    def record(self, ns: int) -> None:
        """Record one duration in integer nanoseconds (the hot path: keep it lean)."""
        ns = max(ns, 0)
        shift = ns.bit_length() - 7  # _K + 1
        if shift <= 0:
            self.counts[ns] += 1
        elif shift > MAX_SHIFT:
            self.counts[N_BUCKETS - 1] += 1
        else:
            self.counts[(shift << 6) + (ns >> shift)] += 1
        if self.count == 0 or ns < self.min_ns:
            self.min_ns = ns
        self.max_ns = max(self.max_ns, ns)
        self.count += 1
        self.sum_ns += ns

    def record_array(self, ns: Sequence[int] | np.ndarray) -> None:
        """Record many values at once (vectorised)."""
        a = np.asarray(ns, dtype=np.int64)
        if a.size == 0:
            return
        a = np.maximum(a, 0)
        # frexp's exponent is the exact bit length for integers below 2**53; below 2**(K+1)
        # the shift is 0 and the index the value itself; past MAX_SHIFT the index is at least
        # N_BUCKETS, cut to the last bucket (bucket_index's rules, one expression)
        shift = np.maximum(np.frexp(a.astype(np.float64))[1].astype(np.int64) - (_K + 1), 0)
        idx = np.minimum(shift * SUB_BUCKETS + (a >> shift), N_BUCKETS - 1)
        binc = np.bincount(idx, minlength=N_BUCKETS)
        used = np.nonzero(binc)[0]
        counts = self.counts
        for i, c in zip(used.tolist(), binc[used].tolist(), strict=True):
            counts[i] += c
        lo, hi = int(a.min()), int(a.max())
        if self.count == 0 or lo < self.min_ns:
            self.min_ns = lo
        self.max_ns = max(self.max_ns, hi)
        self.count += int(a.size)
        self.sum_ns += int(a.sum())

    def record_bucketed(self, value_ns: int, n: int) -> None:
        """Add ``n`` observations of one value (merging another tool's bins, e.g. fio's)."""
        if n <= 0:
            return
        i = bucket_index(max(int(value_ns), 0))
        self.counts[i] += n
        if self.count == 0 or value_ns < self.min_ns:
            self.min_ns = int(value_ns)
        self.max_ns = max(self.max_ns, int(value_ns))
        self.count += n
        self.sum_ns += int(value_ns) * n

    def merge(self, other: Histogram) -> Histogram:
        """Add ``other`` into this histogram (exact) and return self."""
        if other.count == 0:
            return self
        c = self.counts
        for i, n in enumerate(other.counts):
            if n:
                c[i] += n
        if self.count == 0 or other.min_ns < self.min_ns:
            self.min_ns = other.min_ns
        self.max_ns = max(self.max_ns, other.max_ns)
        self.count += other.count
        self.sum_ns += other.sum_ns
        return self

    @classmethod
    def merged(cls, hists: Iterable[Histogram]) -> Histogram:
        out = cls()
        for h in hists:
            out.merge(h)
        return out

    # -- reading ---------------------------------------------------------------------------
    def percentile_ns(self, q: float) -> float:
        """Value at quantile ``q`` (0..1): the nearest-rank order statistic, the smallest
        sample with at least ``q`` of the samples at or below it (fio's and HdrHistogram's
        rule, numpy's "inverted_cdf"), given as the midpoint of its bucket; the first and last
        ranks are the exact min and max.

        An order statistic never invents a value between two modes; the nearest rank makes a
        p99 of fewer than 100 samples their maximum (the rank below it, as a "lower" rule
        takes, would call the second largest of 7 steps their p99, under the mean of a run with
        one long stall)."""
        if self.count == 0:
            return 0.0
        if q <= 0:
            return float(self.min_ns)
        if q >= 1:
            return float(self.max_ns)
        # round first: 0.07 * 100 is 7.000000000000001 in floating point, rank 7 all the same
        target = min(max(math.ceil(round(q * self.count, 9)), 1), self.count)
        if target == self.count:
            return float(self.max_ns)
        if target == 1:
            return float(self.min_ns)
        seen = 0
        for i, n in enumerate(self.counts):
            if n:
                seen += n
                if seen >= target:
                    lo, hi = bucket_bounds(i)
                    mid = lo if hi - lo == 1 else (lo + hi) / 2
                    return float(min(max(mid, self.min_ns), self.max_ns))
        return float(self.max_ns)

    def quantiles_s(self, qs: Sequence[float]) -> list[float]:
        """Several quantiles in seconds, with one pass over the buckets."""
        return [self.percentile_ns(q) / 1e9 for q in qs]

    @property
    def mean_ns(self) -> float:
        return self.sum_ns / self.count if self.count else 0.0

    def summary_s(self) -> dict[str, float]:
        """mean, min, p50, p90, p99, p999, max in seconds (empty dict when no samples)."""
        if self.count == 0:
            return {}
        out = {"mean": self.mean_ns / 1e9, "min": self.min_ns / 1e9}
        for name, q in PERCENTILES.items():
            out[name] = self.percentile_ns(q) / 1e9
        out["max"] = self.max_ns / 1e9
        return out

    def cdf_points(self) -> list[tuple[float, float]]:
        """(upper value in seconds, cumulative fraction) for every non-empty bucket."""
        pts: list[tuple[float, float]] = []
        seen = 0
        for i, n in enumerate(self.counts):
            if n:
                seen += n
                hi = min(bucket_bounds(i)[1], self.max_ns) if self.max_ns else bucket_bounds(i)[1]
                pts.append((hi / 1e9, seen / self.count))
        return pts

    # -- (de)serialisation -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "sub_buckets": SUB_BUCKETS,
            "count": self.count,
            "sum_ns": self.sum_ns,
            "min_ns": self.min_ns,
            "max_ns": self.max_ns,
            "buckets": {str(i): n for i, n in enumerate(self.counts) if n},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> Histogram:
        h = cls()
        if not d:
            return h
        if int(d.get("sub_buckets", SUB_BUCKETS)) != SUB_BUCKETS:
            raise ValueError("histogram with a different bucket layout")
        for k, n in d.get("buckets", {}).items():
            h.counts[int(k)] += int(n)
        h.count = int(d.get("count", sum(h.counts)))
        h.sum_ns = int(d.get("sum_ns", 0))
        h.min_ns = int(d.get("min_ns", 0))
        h.max_ns = int(d.get("max_ns", 0))
        return h


SERIES_RESOLUTION_S = 0.1


@dataclass
class WorkerStats:
    """What one worker (thread, process or rank) measured, in its own clock (perf_counter)."""

    start: float = 0.0  # seconds, perf_counter of the first op start
    end: float = 0.0  # seconds, perf_counter of the last op end
    bytes: int = 0
    ops: int = 0
    files: int = 0
    hist: Histogram = field(default_factory=Histogram)
    # bytes and ops completed per SERIES_RESOLUTION_S slot, relative to the phase origin
    slot_bytes: list[int] = field(default_factory=list)
    slot_ops: list[int] = field(default_factory=list)
    origin: float = 0.0  # the phase's common time origin (perf_counter seconds)
    error: str | None = None
    # latencies per series slot, coarsely (timeseries.LatSlots): the latency over time
    lat: LatSlots = field(default_factory=LatSlots)

    def add(self, nbytes: int, t_end: float, lat_ns: int) -> None:
        """Account one completed operation."""
        self.bytes += nbytes
        self.ops += 1
        self.hist.record(lat_ns)
        self.lat.add(self.slot_add(t_end, nbytes), lat_ns)

    def slot_add(self, t_end: float, nbytes: int) -> int:
        """Put ``nbytes`` and one op in the series slot of ``t_end`` (a whole file's worth,
        when its latency was recorded separately, then into ``lat`` by the caller); return
        the slot."""
        # slot k holds ops completed in (k, k+1] tenths of a second after the origin
        slot = max(int((t_end - self.origin) * 10 - 1e-9), 0)
        sb = self.slot_bytes
        if slot >= len(sb):
            grow = slot + 1 - len(sb)
            sb.extend([0] * grow)
            self.slot_ops.extend([0] * grow)
        sb[slot] += nbytes
        self.slot_ops[slot] += 1
        return slot

    def bytes_by(self, t_rel: float) -> float:
        """Bytes this worker had completed ``t_rel`` seconds after the origin (interpolated)."""
        pos = t_rel / SERIES_RESOLUTION_S
        full = int(pos)
        done: float = sum(self.slot_bytes[:full])
        if full < len(self.slot_bytes):
            done += self.slot_bytes[full] * (pos - full)
        return min(float(done), float(self.bytes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "start": self.start,
            "end": self.end,
            "bytes": self.bytes,
            "ops": self.ops,
            "files": self.files,
            "hist": self.hist.to_dict(),
            "slot_bytes": self.slot_bytes,
            "slot_ops": self.slot_ops,
            "origin": self.origin,
            "error": self.error,
            "lat": self.lat.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WorkerStats:
        w = cls(**{k: v for k, v in d.items() if k not in ("hist", "lat")})
        w.hist = Histogram.from_dict(d.get("hist"))
        w.lat = LatSlots.from_dict(d.get("lat"))
        return w


@dataclass(frozen=True)
class Aggregate:
    """IOR/elbencho-style aggregate of several workers."""

    bytes: int
    ops: int
    files: int
    elapsed_s: float  # last done: latest end - earliest start
    stonewall_s: float  # first done: earliest end - earliest start
    bandwidth_bps: float
    iops: float
    bandwidth_stonewall_bps: float
    per_worker: dict[str, float]
    hist: Histogram
    series: list[float]
    ops_series: list[float]
    series_interval_s: float
    # seconds from the series' first interval's start to the phase's first start: the series
    # is on a fixed grid, so its first and last intervals are partly outside the phase
    series_start_s: float = 0.0
    latency_series: dict[str, Any] | None = None  # p50/p99 per interval (timeseries)
    worker_times: dict[str, Any] | None = None  # each worker's span and volume (timeseries)


def spread(values: Sequence[float]) -> dict[str, float]:
    """min / median / max of a list (empty dict for none)."""
    if not values:
        return {}
    s = sorted(values)
    n = len(s)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"min": float(s[0]), "median": float(med), "max": float(s[-1])}


@dataclass(frozen=True)
class Summary:
    """One metric over a run's repeats: the value (their median) and its spread beside it.

    ``cv`` is the coefficient of variation, sample standard deviation / mean (None for one
    value or a zero mean).
    """

    n: int
    median: float
    min: float
    max: float
    cv: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "median": self.median, "min": self.min, "max": self.max, "cv": self.cv}


def summarize(values: Iterable[float]) -> Summary | None:
    """The median over repeats with n, min, max and CV; None for no (finite) values.

    This is the one rule for a metric's value in a run with repeats: every rendering, the
    history, compare and the verdict use it.
    """
    vals = sorted(float(v) for v in values if v is not None and math.isfinite(float(v)))
    if not vals:
        return None
    n = len(vals)
    med = vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2
    cv = None
    mean = sum(vals) / n
    if n > 1 and mean != 0:
        var = sum((v - mean) ** 2 for v in vals) / (n - 1)
        cv = math.sqrt(var) / abs(mean)
    return Summary(n=n, median=med, min=vals[0], max=vals[-1], cv=cv)


def aggregate_workers(workers: Sequence[WorkerStats], *, max_points: int = 600) -> Aggregate:
    """Combine workers that share one time origin (one host, or clocks already aligned).

    Bandwidth is all bytes over (last end - first start); the stonewall figure is the bytes
    all workers had done when the first one finished, over that time.
    """
    active = [w for w in workers if w.ops > 0]
    total_bytes = sum(w.bytes for w in workers)
    total_ops = sum(w.ops for w in workers)
    files = sum(w.files for w in workers)
    hist = Histogram.merged(w.hist for w in workers)
    if not active:
        return Aggregate(0, 0, files, 0.0, 0.0, 0.0, 0.0, 0.0, {}, hist, [], [], 1.0)
    t0 = min(w.start for w in active)
    t_last = max(w.end for w in active)
    t_first = min(w.end for w in active)
    elapsed = max(t_last - t0, 1e-9)
    stonewall = max(t_first - t0, 1e-9)
    origin = active[0].origin
    done_at_first = sum(
        w.bytes if w.end <= t_first else w.bytes_by(t_first - origin) for w in active
    )
    per_worker_bw = [w.bytes / max(w.end - w.start, 1e-9) for w in active]
    series, ops_series, interval, series_start = _merged_series(active, t0, max_points)
    return Aggregate(
        bytes=total_bytes,
        ops=total_ops,
        files=files,
        elapsed_s=elapsed,
        stonewall_s=stonewall,
        bandwidth_bps=total_bytes / elapsed,
        iops=total_ops / elapsed,
        bandwidth_stonewall_bps=done_at_first / stonewall,
        per_worker=spread(per_worker_bw),
        hist=hist,
        series=series,
        ops_series=ops_series,
        series_interval_s=interval,
        series_start_s=series_start,
        latency_series=latency_series([w.lat for w in active], t0 - origin, SERIES_RESOLUTION_S),
        worker_times=worker_times([(w.start, w.end, w.bytes, w.ops) for w in active], t0),
    )


def _merged_series(
    active: Sequence[WorkerStats], t0: float, max_points: int
) -> tuple[list[float], list[float], float, float]:
    """The workers' per-interval bytes/s and ops/s summed, from the phase's start ``t0``:
    (bandwidth series, ops series, interval, the series' start after the first slot's)."""
    origin = active[0].origin
    n_slots = max(len(w.slot_bytes) for w in active)
    slot_b = np.zeros(n_slots)
    slot_o = np.zeros(n_slots)
    for w in active:
        slot_b[: len(w.slot_bytes)] += w.slot_bytes
        slot_o[: len(w.slot_ops)] += w.slot_ops
    # Trim to the measured window and coarsen so the series stays short and readable.
    first_slot = int((t0 - origin) / SERIES_RESOLUTION_S)
    slot_b, slot_o = slot_b[first_slot:], slot_o[first_slot:]
    # 0.1 s intervals up to 10 s, 1 s beyond: at least 10 intervals either way, enough for
    # the starvation model to judge how steady completions were (sweep.MIN_INTERVALS)
    factor = 10 if len(slot_b) > 100 else 1
    while len(slot_b) / factor > max_points:
        factor *= 2
    interval = SERIES_RESOLUTION_S * factor
    pad = (-len(slot_b)) % factor
    if pad:
        slot_b = np.concatenate([slot_b, np.zeros(pad)])
        slot_o = np.concatenate([slot_o, np.zeros(pad)])
    series = (slot_b.reshape(-1, factor).sum(axis=1) / interval).tolist()
    ops_series = (slot_o.reshape(-1, factor).sum(axis=1) / interval).tolist()
    series_start = max((t0 - origin) - first_slot * SERIES_RESOLUTION_S, 0.0)
    return series, ops_series, interval, series_start
