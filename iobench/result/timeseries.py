"""What a phase and the loader record over time and per worker, bounded in size whatever the
run's length: the data behind the report's latency-over-time, per-worker, loader and client
CPU plots (issue 25).

- ``LatSlots``: a worker's latencies per 0.1 s slot (``stats.SERIES_RESOLUTION_S``) in a coarse
  log histogram (4 buckets an octave: a quantile, its bucket's midpoint, is known to within
  12 %), sparse, mergeable exactly
  between workers; past :data:`LAT_SLOTS_MAX` slots two neighbours merge (the time grid
  doubles), so a worker holds at most that many slots. Recorded a chunk at a time, off the
  timed path (``engines.worker.Recorder``).
- ``latency_series``: the workers' sketches merged into p50/p99 per interval, at most
  :data:`SERIES_POINTS_MAX` intervals: ``phases[].extra.latency_series``.
- ``worker_times``: each worker's span and volume (at most :data:`WORKERS_MAX` workers):
  ``phases[].extra.worker_times``, elbencho's per-worker view of first done vs last done.
- ``step_series``: the loader's per-step load wait, step time and throughput, consecutive steps
  merged to at most :data:`STEP_POINTS_MAX` points a rank: ``loader.ranks[].step_series``.
- ``CpuSeriesBlock``: the host's CPUs busy and this process's CPU per interval
  (``core.cpu.CpuSampler``): ``phases[].extra.cpu_series`` and ``loader.cpu_series``.

Results written before these existed have none of them; the report then leaves their plots out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .blocks import Block, _seq

LAT_SUB = 4  # buckets an octave: a bucket is at most a quarter of its value wide
_LAT_K = 2  # log2(LAT_SUB)
LAT_BUCKETS = 50 * LAT_SUB  # values up to 2**50 ns
LAT_SLOTS_MAX = 1024  # time slots a worker keeps; past it neighbours merge
SERIES_POINTS_MAX = 600  # intervals of a phase's latency series
WORKERS_MAX = 1024  # workers listed in worker_times (the rest counted)
STEP_POINTS_MAX = 1000  # points of a rank's step series
STEP_POINTS_TOTAL = 4000  # over every rank
RESOLUTION = 1 / LAT_SUB  # a bucket's width over its lower bound, at most


def lat_bucket(ns: int) -> int:
    """The coarse bucket of a latency in integer nanoseconds."""
    ns = max(int(ns), 0)
    shift = ns.bit_length() - _LAT_K - 1
    if shift <= 0:
        return ns
    return min(shift * LAT_SUB + (ns >> shift), LAT_BUCKETS - 1)


def lat_buckets(ns: np.ndarray) -> np.ndarray:
    """:func:`lat_bucket` of an int64 array (vectorised, the same rule)."""
    a = np.maximum(ns.astype(np.int64), 0)
    shift = np.maximum(np.frexp(a.astype(np.float64))[1].astype(np.int64) - (_LAT_K + 1), 0)
    return np.minimum(shift * LAT_SUB + (a >> shift), LAT_BUCKETS - 1)


def lat_bucket_mid_s(i: int) -> float:
    """The midpoint of coarse bucket ``i``, in seconds."""
    if i < 2 * LAT_SUB:
        return (i + 0.5) / 1e9 if i else 0.0
    shift = i // LAT_SUB - 1
    m = i - shift * LAT_SUB
    return ((m << shift) + ((m + 1) << shift)) / 2 / 1e9


class LatSlots:
    """A worker's latencies per time slot, as sparse coarse histograms: ``counts`` maps
    ``slot * LAT_BUCKETS + bucket`` to a count, where a slot is ``every`` series slots of
    0.1 s since the phase origin."""

    __slots__ = ("counts", "every")

    def __init__(self, every: int = 1, counts: dict[int, int] | None = None):
        self.every = every
        self.counts: dict[int, int] = counts if counts is not None else {}

    def add(self, slot: int, ns: int) -> None:
        """One latency completed in series slot ``slot`` (one op: the per-op engines' path)."""
        s = slot // self.every
        if s >= LAT_SLOTS_MAX:
            self._coarsen_for(s)
            s = slot // self.every
        key = s * LAT_BUCKETS + lat_bucket(ns)
        self.counts[key] = self.counts.get(key, 0) + 1

    def add_array(self, slots: np.ndarray, ns: np.ndarray) -> None:
        """Many latencies at once: ``slots`` the series slot of each, ``ns`` its latency."""
        if not len(slots):
            return
        top = int(slots.max()) // self.every
        if top >= LAT_SLOTS_MAX:
            self._coarsen_for(top)
        keys = (slots // self.every) * LAT_BUCKETS + lat_buckets(ns)
        uniq, n = np.unique(keys, return_counts=True)
        c = self.counts
        for k, v in zip(uniq.tolist(), n.tolist(), strict=True):
            c[k] = c.get(k, 0) + v

    def _coarsen_for(self, slot: int) -> None:
        every = self.every
        while slot * self.every // every >= LAT_SLOTS_MAX:
            every *= 2
        self.coarsen(every)

    def coarsen(self, every: int) -> None:
        """Put the sketch on a grid of ``every`` series slots (a multiple of the current)."""
        if every <= self.every:
            return
        f = every // self.every
        out: dict[int, int] = {}
        for k, v in self.counts.items():
            s, b = divmod(k, LAT_BUCKETS)
            key = (s // f) * LAT_BUCKETS + b
            out[key] = out.get(key, 0) + v
        self.counts, self.every = out, every

    def merge(self, other: LatSlots) -> LatSlots:
        """Add ``other`` into this sketch (exact, on the coarser of the two grids)."""
        every = max(self.every, other.every)
        self.coarsen(every)
        if other.every < every:
            other = LatSlots(other.every, dict(other.counts))
            other.coarsen(every)
        c = self.counts
        for k, v in other.counts.items():
            c[k] = c.get(k, 0) + v
        return self

    def to_dict(self) -> dict[str, Any]:
        return {"every": self.every, "counts": dict(self.counts)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LatSlots:
        if not isinstance(d, Mapping):
            return cls()
        return cls(int(d.get("every") or 1), {int(k): int(v) for k, v in d["counts"].items()})


def _quantile(hist: dict[int, int], n: int, q: float) -> float:
    """Nearest-rank quantile of a coarse histogram {bucket: count}, its bucket's midpoint."""
    target = min(max(math.ceil(round(q * n, 9)), 1), n)
    seen = 0
    for b in sorted(hist):
        seen += hist[b]
        if seen >= target:
            return lat_bucket_mid_s(b)
    return lat_bucket_mid_s(max(hist))


def latency_series(
    sketches: Sequence[LatSlots], t0_rel: float, slot_s: float, max_points: int = SERIES_POINTS_MAX
) -> dict[str, Any] | None:
    """The workers' latencies merged, as p50 and p99 per interval (``extra.latency_series``):
    the interval a power of two of the sketches' grid, at most ``max_points`` of them, from the
    one holding the phase's first start (``t0_rel`` seconds after the origin) to the last
    holding an operation. None without a single operation."""
    merged = LatSlots()
    for s in sketches:
        merged.merge(s)
    if not merged.counts:
        return None
    every = merged.every
    first = int(t0_rel / (slot_s * every) + 1e-9)
    last = max(k // LAT_BUCKETS for k in merged.counts)
    f = 1
    while (last - first) // f + 1 > max_points:
        f *= 2
    n_int = (last - first) // f + 1
    per: list[dict[int, int]] = [{} for _ in range(n_int)]
    for k, v in merged.counts.items():
        slot, b = divmod(k, LAT_BUCKETS)
        i = max(slot - first, 0) // f
        per[i][b] = per[i].get(b, 0) + v
    interval = slot_s * every * f
    ops, p50, p99 = [], [], []
    for h in per:
        n = sum(h.values())
        ops.append(n)
        p50.append(_round(_quantile(h, n, 0.5)) if n else None)
        p99.append(_round(_quantile(h, n, 0.99)) if n else None)
    return {
        "interval_s": round(interval, 6),
        "start_s": round(max(t0_rel - first * slot_s * every, 0.0), 6),
        "resolution": RESOLUTION,
        "ops": ops,
        "p50_s": p50,
        "p99_s": p99,
    }


def _round(v: float, digits: int = 4) -> float:
    return float(f"{v:.{digits}g}")


def worker_times(
    spans: Sequence[tuple[float, float, int, int]], t0: float, limit: int = WORKERS_MAX
) -> dict[str, Any]:
    """``extra.worker_times``: every worker's (start, end, bytes, ops), its times in seconds
    since the phase's first start ``t0``; past ``limit`` workers only the first ``limit`` are
    listed and ``workers`` counts them all."""
    shown = spans[:limit]
    return {
        "workers": len(spans),
        "start_s": [round(s - t0, 6) for s, _, _, _ in shown],
        "end_s": [round(e - t0, 6) for _, e, _, _ in shown],
        "bytes": [int(b) for _, _, b, _ in shown],
        "ops": [int(o) for _, _, _, o in shown],
    }


def step_series(steps: np.ndarray, limit: int = STEP_POINTS_MAX) -> dict[str, Any] | None:
    """``loader.ranks[].step_series`` from a rank's timed steps (rows of perf_counter at the
    wait's start and end, compute end, step end, and the batch's bytes): ``every`` consecutive
    steps a point, at most ``limit`` points; None without a step."""
    n = len(steps)
    if not n:
        return None
    every = max(-(-n // max(limit, 1)), 1)
    pad = (-n) % every
    t_start = steps[0, 0]
    wait = steps[:, 1] - steps[:, 0]
    took = steps[:, 3] - steps[:, 0]
    if pad:
        wait, took = (
            np.pad(wait, (0, pad), constant_values=np.nan),
            np.pad(took, (0, pad), constant_values=np.nan),
        )
        nbytes = np.pad(steps[:, 4], (0, pad))
    else:
        nbytes = steps[:, 4]
    w = wait.reshape(-1, every)
    t = took.reshape(-1, every)
    ends = steps[np.minimum(np.arange(every - 1, n + pad, every), n - 1), 3] - t_start
    spent = np.nansum(t, axis=1)
    rate = np.where(spent > 0, nbytes.reshape(-1, every).sum(axis=1) / np.maximum(spent, 1e-12), 0)
    return {
        "every": int(every),
        "t_s": [_round(v, 6) for v in ends.tolist()],
        "wait_s": [_round(v) for v in np.nanmean(w, axis=1).tolist()],
        "wait_max_s": [_round(v) for v in np.nanmax(w, axis=1).tolist()],
        "step_s": [_round(v) for v in np.nanmean(t, axis=1).tolist()],
        "bytes_per_s": [_round(v) for v in rate.tolist()],
    }


# -- the blocks, typed, for renderings (documented in docs/reference/result-json.md) -----------


@dataclass(frozen=True, kw_only=True)
class LatencySeriesBlock(Block):
    """``phases[].extra.latency_series``: latency per interval (fio's lat_log), merged over the
    phase's workers; absent for fio's phases, many-client aggregates and older results."""

    interval_s: float | None = None  # each interval's length
    start_s: float | None = None  # where the first interval starts before the phase's start
    resolution: float | None = None  # a quantile is known to within this share (bucket width)
    ops: tuple[Any, ...] = _seq()  # operations completed in each interval
    p50_s: tuple[Any, ...] = _seq()  # median latency of those (null: none completed)
    p99_s: tuple[Any, ...] = _seq()  # their p99 (nearest rank: of under 100, their slowest)


@dataclass(frozen=True, kw_only=True)
class WorkerTimesBlock(Block):
    """``phases[].extra.worker_times``: each worker's span and volume, times from the phase's
    first start (the first end is the stonewall, first done; the last end is last done)."""

    workers: int | None = None  # workers that did work (at most 1,024 listed)
    start_s: tuple[Any, ...] = _seq()  # each listed worker's first operation's start
    end_s: tuple[Any, ...] = _seq()  # and its last one's end
    bytes: tuple[Any, ...] = _seq()  # each listed worker's bytes moved
    ops: tuple[Any, ...] = _seq()  # and its operations


@dataclass(frozen=True, kw_only=True)
class StepSeriesBlock(Block):
    """``loader.ranks[].step_series``: a rank's timed steps (each epoch's after the first),
    ``every`` consecutive steps merged into one point, at most 1,000 points a rank."""

    every: int | None = None  # steps a point
    t_s: tuple[Any, ...] = _seq()  # the point's last step's end, from the first timed step
    wait_s: tuple[Any, ...] = _seq()  # mean load wait (time blocked on the next batch)
    wait_max_s: tuple[Any, ...] = _seq()  # the longest of those waits
    step_s: tuple[Any, ...] = _seq()  # mean step time (wait, compute, barrier)
    bytes_per_s: tuple[Any, ...] = _seq()  # the steps' batch bytes over their time


@dataclass(frozen=True, kw_only=True)
class CpuSeriesBlock(Block):
    """``phases[].extra.cpu_series`` and ``loader.cpu_series``: the client's CPU sampled
    every ``interval_s`` (``core.cpu.CpuSampler``) beside ``client_cpu``'s whole-phase figure."""

    interval_s: float | None = None  # between samples (doubles past 1,200 samples)
    cpus: int | None = None  # CPUs this process may run on
    host_share: tuple[Any, ...] = _seq()  # 0..1 of the host's CPUs busy, every process
    self_share: tuple[Any, ...] = _seq()  # 0..1: this process's threads (forked workers not)
