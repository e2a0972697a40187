"""The GPU-starvation model: can this storage feed N accelerators, and how big must the dataset be?

Pure functions over plain data: no I/O, no torch. Inputs are what the dataset-read concurrency
sweep measured (``SweepPoint``) and what the training loop looks like (``LoaderParams``); outputs
are frozen dataclasses that say what they were computed from (``basis``).

Two models sit side by side:

- the **rate bound** (``predict_au_rate_bound``): steady-state means only. Per step the main loop
  needs ``compute + overhead``; the loader workers can supply a batch every ``L + D`` seconds
  (storage time plus decode time, see its docstring). AU = compute / max of the two. Within ~2
  points of a real DataLoader when storage is the bound (reference/starvation-notes.md).
- a **discrete-event simulation** (``simulate_au``) of the torch DataLoader's real semantics
  (round-robin workers building whole batches, ``prefetch × workers`` outstanding indices, a
  barrier per step across ranks), fed with the measured per-file latency distribution. Near the
  knee, latency tails and prefetch depth decide the AU, and only the simulation sees them.

AU follows DLIO: Σ compute over steps after the first ÷ (wall time − the first step's duration).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, Literal

import numpy as np

from .errors import UsageError
from .units import format_bytes, format_rate, format_seconds

Bound = Literal["storage", "cpu", "compute"]

#: MLPerf Storage: a training run must do at least this many steps per epoch.
MIN_STEPS_PER_EPOCH = 500
#: MLPerf Storage: the dataset must be at least this many times the clients' total memory.
MEMORY_MULTIPLIER = 5
#: MLPerf Storage (DLIO): at most this many files per folder; more are spread over subfolders.
MAX_FILES_PER_FOLDER = 10_000

#: The largest accelerator count ``estimate`` considers.
MAX_GPUS = 4096
#: The bound is "compute" when the accelerators lose less than this fraction of each step.
COMPUTE_BOUND_TOLERANCE = 0.02
#: ``estimate``'s default list stops at the first power of two whose AU is below this × threshold.
_STOP_FRACTION = 0.75
#: The simulation steps at most this many ranks one by one; beyond it each simulated rank
#: stands for ``gpus / SIM_RANKS`` ranks (see ``_simulate``), so memory and time stay bounded.
SIM_RANKS = MAX_GPUS
#: The largest accelerator count any model command accepts (10× the largest clusters built):
#: beyond it --gpus is refused as bad input rather than modelled.
MAX_MODEL_GPUS = 1 << 20
#: Beyond this many random draws per simulation, batch read times are resampled from a pool of
#: exact batch sums (keeps a 4096-GPU simulation in tens of milliseconds).
_DRAW_BUDGET = 250_000


# --------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True)
class SweepPoint:
    """One level of the dataset-read concurrency sweep: ``readers`` concurrent whole-file readers.

    ``latency_quantiles`` are per-file read latencies (seconds) at evenly spaced quantiles
    q = 0, 1/(n-1), …, 1 (e.g. 101 values), taken from the phase's histogram, so a simulation can
    sample by inverse CDF. An empty list means no distribution was recorded.

    ``completions``, when known, are the files all readers completed in each ``interval_s``
    of the phase (partial intervals at either end left out): how steady the aggregate supply
    was, which tells how much of the per-file latency spread is independent between readers
    (see ``independent_share``).
    """

    readers: int
    bandwidth_bps: float
    files_per_s: float
    latency_quantiles: list[float]
    completions: tuple[float, ...] = ()
    interval_s: float = 0.0

    def __post_init__(self) -> None:
        if self.readers < 1:
            raise UsageError(f"sweep point: readers must be at least 1, got {self.readers}")
        if not (self.bandwidth_bps > 0 and math.isfinite(self.bandwidth_bps)):
            raise UsageError(
                f"sweep point at {self.readers} readers: bandwidth must be positive, "
                f"got {self.bandwidth_bps!r}"
            )
        if not (self.files_per_s >= 0 and math.isfinite(self.files_per_s)):
            raise UsageError(
                f"sweep point at {self.readers} readers: files_per_s must be non-negative, "
                f"got {self.files_per_s!r}"
            )
        q = self.latency_quantiles
        if any(not (x >= 0 and math.isfinite(x)) for x in q):
            raise UsageError(
                f"sweep point at {self.readers} readers: latency quantiles must be "
                "non-negative seconds"
            )
        if any(b < a for a, b in pairwise(q)):
            raise UsageError(
                f"sweep point at {self.readers} readers: latency quantiles must not decrease"
            )
        if any(not (c >= 0 and math.isfinite(c)) for c in self.completions) or not (
            self.interval_s >= 0 and math.isfinite(self.interval_s)
        ):
            raise UsageError(
                f"sweep point at {self.readers} readers: completions and interval_s must be "
                "non-negative"
            )


@dataclass(frozen=True)
class LoaderParams:
    """What one accelerator's training loop looks like (per rank).

    ``decode_s_per_sample`` is the measured CPU cost of decoding one sample in a loader worker
    (0 if unknown); ``step_overhead_s`` the measured fixed per-step cost in the main process
    (collation hand-off, worker→main transfer, Python; ~1.5–2 ms on a typical host).
    ``workers`` = 0 means loading in the main process, as torch does with ``num_workers=0``.
    """

    batch_size: int
    sample_bytes: float
    samples_per_file: int
    compute_s: float
    workers: int
    prefetch: int = 2
    decode_s_per_sample: float = 0.0
    step_overhead_s: float = 0.0

    def __post_init__(self) -> None:
        checks = [
            (self.batch_size >= 1, "batch_size must be at least 1"),
            (self.sample_bytes > 0, "sample_bytes must be positive"),
            (self.samples_per_file >= 1, "samples_per_file must be at least 1"),
            (self.compute_s > 0, "compute_s must be positive"),
            (self.workers >= 0, "workers must be 0 or more"),
            (self.prefetch >= 1, "prefetch must be at least 1"),
            (self.decode_s_per_sample >= 0, "decode_s_per_sample must be non-negative"),
            (self.step_overhead_s >= 0, "step_overhead_s must be non-negative"),
        ]
        for ok, message in checks:
            if not ok:
                raise UsageError(f"loader parameters: {message}")


# --------------------------------------------------------------------------------------------
# Outputs


@dataclass(frozen=True)
class Prediction:
    """Predicted AU for one configuration: the simulation's figure and the rate bound beside it."""

    au: float
    au_rate_bound: float
    bound: Bound
    basis: str


@dataclass(frozen=True)
class Estimate:
    """AU against accelerator count, and the most accelerators that still reach the threshold."""

    demand_bps_per_gpu: float
    au_at: list[tuple[int, float]]
    max_gpus: int
    threshold: float
    basis: str
    profile: str | None = None
    interval: EstimateInterval | None = None
    warnings: tuple[str, ...] = ()

    @property
    def conservative_max_gpus(self) -> int:
        """The low end of the interval (the point when there is none): what a verdict uses."""
        return self.interval.max_gpus_low if self.interval else self.max_gpus

    def to_dict(self) -> dict[str, Any]:
        """The ``estimate`` object of result.json (DESIGN.md, schema_version 1).

        ``max_gpus`` stays the point estimate; ``max_gpus_low``/``max_gpus_high`` and each
        ``au_at`` entry's ``low``/``high`` are the interval (absent in older results)."""
        band = {g: (lo, hi) for g, lo, hi in self.interval.au_band} if self.interval else {}
        au_at = []
        for g, au in self.au_at:
            row: dict[str, Any] = {"gpus": g, "au": au}
            if g in band:
                row["low"], row["high"] = band[g]
            au_at.append(row)
        out: dict[str, Any] = {
            "profile": self.profile,
            "threshold": self.threshold,
            "demand_bps_per_gpu": self.demand_bps_per_gpu,
            "au_at": au_at,
            "max_gpus": self.max_gpus,
            "basis": self.basis,
        }
        if self.interval is not None:
            out.update(self.interval.to_dict())
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out


@dataclass(frozen=True)
class EstimateInterval:
    """A bootstrap interval around an estimate: what the measurement's own variability allows.

    Each resample redraws every sweep level's per-interval completions by moving blocks of
    ``block`` intervals (which keeps their autocorrelation), scales that level's bandwidth and
    files/s by the resampled mean over the measured one (and its latencies by the inverse,
    Little's law at the same readers), and reruns the same model with the same simulation
    seed. The interval holds the central ``level`` share of the resampled figures, widened to
    include the point estimate. Levels without a series are not resampled (``fixed_levels``).
    """

    level: float
    resamples: int
    seed: int
    max_gpus_low: int
    max_gpus_high: int
    au_band: tuple[tuple[int, float, float], ...]  # (gpus, low, high)
    blocks: tuple[tuple[int, int, int], ...]  # (readers, intervals, block length)
    fixed_levels: tuple[int, ...]
    spread: float  # the resampled bandwidth's relative half-width at the widest level
    level_bounds: tuple[tuple[int, float, float], ...] = ()  # (readers, low, high) bandwidth

    @property
    def basis(self) -> str:
        if not self.blocks:
            return (
                "no interval: no sweep level has a series of completions to resample (phases "
                "too short), so the interval is the point estimate alone"
            )
        resampled = ", ".join(
            f"{r} readers: {n} intervals in blocks of {b}" for r, n, b in self.blocks
        )
        text = (
            f"{self.level:.0%} bootstrap interval: {self.resamples} resamples (seed {self.seed}) "
            f"of each sweep level's files completed per interval, by moving blocks "
            f"({resampled}); bandwidth and files/s scaled by each resample's mean, "
            "latencies by its inverse; the model rerun on each with the same simulation seed; "
            "not resampled: the latency distribution's shape and the loader's calibration"
        )
        if self.fixed_levels:
            text += (
                "; levels not resampled (no series: phase too short): "
                f"{', '.join(str(r) for r in self.fixed_levels)} readers"
            )
        return text

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_gpus_low": self.max_gpus_low,
            "max_gpus_high": self.max_gpus_high,
            "interval": {
                "level": self.level,
                "method": "moving-block bootstrap over the sweep's per-interval completions",
                "resamples": self.resamples,
                "seed": self.seed,
                "blocks": [{"readers": r, "intervals": n, "block": b} for r, n, b in self.blocks],
                "fixed_levels": list(self.fixed_levels),
                "spread": self.spread,
                "level_bounds_bps": [
                    {"readers": r, "low": lo, "high": hi} for r, lo, hi in self.level_bounds
                ],
                "basis": self.basis,
            },
        }


@dataclass(frozen=True)
class DatasetSize:
    """The MLPerf Storage minimum dataset, with both terms kept so the choice can be shown."""

    min_samples_steps: int
    min_samples_memory: int
    min_samples: int
    winner: Literal["steps", "memory"]
    files: int
    subfolders: int
    total_bytes: int
    # the inputs, so a rendering can show the arithmetic
    batch_size: int
    accelerators: int
    hosts: int
    host_mem_bytes: int
    sample_bytes: int
    samples_per_file: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "min_samples_steps": self.min_samples_steps,
            "min_samples_memory": self.min_samples_memory,
            "min_samples": self.min_samples,
            "winner": self.winner,
            "files": self.files,
            "subfolders": self.subfolders,
            "total_bytes": self.total_bytes,
            "batch_size": self.batch_size,
            "accelerators": self.accelerators,
            "hosts": self.hosts,
            "host_mem_bytes": self.host_mem_bytes,
            "sample_bytes": self.sample_bytes,
            "samples_per_file": self.samples_per_file,
        }


# --------------------------------------------------------------------------------------------
# Demand and the sweep


def demand_bps(batch_size: int, sample_bytes: float, compute_s: float) -> float:
    """Bytes/s one accelerator consumes at full utilisation: batch ÷ compute × sample size."""
    if compute_s <= 0:
        raise UsageError(f"compute_s must be positive, got {compute_s!r}")
    return batch_size / compute_s * sample_bytes


def _sorted_sweep(sweep: Sequence[SweepPoint]) -> list[SweepPoint]:
    if not sweep:
        raise UsageError(
            "no dataset-read sweep to estimate from", hint="run the dataset phase first"
        )
    points = sorted(sweep, key=lambda p: p.readers)
    for a, b in pairwise(points):
        if a.readers == b.readers:
            raise UsageError(f"dataset-read sweep has two levels at {a.readers} readers")
    return points


def bandwidth_at(sweep: Sequence[SweepPoint], readers: float) -> tuple[float, str]:
    """Aggregate read bandwidth (bytes/s) at ``readers`` concurrent readers, and its basis.

    Piecewise-linear in readers between measured levels. Beyond the largest level storage is
    assumed saturated (flat). Below the smallest level the per-reader rate of that level is kept
    (bandwidth proportional to readers: conservative); fewer than one reader counts as one.
    """
    points = _sorted_sweep(sweep)
    r = max(float(readers), 1.0)
    first, last = points[0], points[-1]
    if r > last.readers:
        return last.bandwidth_bps, (
            f"extrapolated beyond {last.readers} readers "
            f"(assumed saturated at {format_rate(last.bandwidth_bps)})"
        )
    if r < first.readers:
        bw = first.bandwidth_bps * r / first.readers
        return bw, (
            f"scaled down from {first.readers} readers (the smallest level measured), "
            "assuming the same rate per reader"
        )
    for p in points:
        if p.readers == r:
            return p.bandwidth_bps, f"measured at {p.readers} readers"
    lo, hi = next((a, b) for a, b in pairwise(points) if a.readers < r < b.readers)
    frac = (r - lo.readers) / (hi.readers - lo.readers)
    bw = lo.bandwidth_bps + frac * (hi.bandwidth_bps - lo.bandwidth_bps)
    return bw, f"interpolated between {lo.readers} and {hi.readers} readers"


def latency_quantiles_at(sweep: Sequence[SweepPoint], readers: float) -> tuple[list[float], str]:
    """Per-file latency quantiles (seconds) at ``readers`` concurrent readers, and their basis.

    The nearest measured level's quantiles (the higher level on a tie), scaled by
    ``(readers / r_near) × (bw(r_near) / bw(readers))`` so Little's law keeps holding at the
    bandwidth ``bandwidth_at`` gives: the factor is 1 at a measured level, and beyond the largest
    level, where storage is assumed saturated, per-file latency grows linearly with concurrency.
    """
    points = _sorted_sweep(sweep)
    r = max(float(readers), 1.0)
    near = min(points, key=lambda p: (abs(p.readers - r), -p.readers))
    bw_r, _ = bandwidth_at(points, r)
    factor = (r / near.readers) * (near.bandwidth_bps / bw_r)
    quantiles = [q * factor for q in near.latency_quantiles]
    if not quantiles:
        return [], f"no latency distribution recorded at {near.readers} readers"
    if r > points[-1].readers:
        basis = (
            f"measured at {near.readers} readers, scaled ×{factor:.2f}: storage assumed "
            "saturated beyond it, so per-file latency grows linearly with concurrency"
        )
    elif abs(factor - 1.0) < 1e-9:
        basis = f"measured at {near.readers} readers"
    else:
        basis = (
            f"measured at {near.readers} readers (nearest level), scaled ×{factor:.2f} to the "
            f"bandwidth at {r:g} readers"
        )
    return quantiles, basis


# --------------------------------------------------------------------------------------------
# The rate bound


@dataclass(frozen=True)
class _Terms:
    """Per-step times of one rank (seconds) and where they came from."""

    readers: int
    bandwidth_bps: float
    bandwidth_basis: str
    load_s: float  # L: storage time per batch at this rank's share of the bandwidth
    decode_s: float  # D: decode time per batch, spread over the workers
    overhead_s: float  # o: main-process cost per step
    compute_s: float  # c
    step_s: float  # the steady-state step time


def read_time_at(
    params: LoaderParams, sweep: Sequence[SweepPoint], gpus: int
) -> tuple[float, float, str]:
    """Mean per-sample read time (s) of the loader's readers, and how many read at once.

    ``R = gpus × workers`` readers each cycle through reading a sample (``r``) and decoding it
    (``d``, the "think time" of the interactive response-time law). Little's law at the
    storage, with ``k`` readers active on average: ``r(k) = k × sample ÷ BW(k)``; and over the
    cycle: ``k = R × r ÷ (r + d)``. The fixed point in ``k ∈ [1, R]`` gives ``r``. Without
    decode every reader is always reading (``k = R``, ``r = R × sample ÷ BW(R)``). With decode
    and saturated storage (``BW(k)`` flat) one worker's decode overlaps the others' reads,
    which then get its share of the bandwidth: the supply per sample is ``sample ÷ BW``, not
    that plus decode. When even one reader at a time keeps up, ``r`` is a lone reader's.
    """
    w = max(params.workers, 1)
    total = float(gpus * w)
    size, d = params.sample_bytes, params.decode_s_per_sample

    def r_of(k: float) -> float:
        return k * size / bandwidth_at(sweep, k)[0]

    if d <= 0:
        return r_of(total), total, f"all {gpus * w} readers busy (no decode time)"
    r1 = r_of(1.0)
    if total * r1 / (r1 + d) <= 1.0:
        k = total * r1 / (r1 + d)
        why = f"{k:.2f} of {gpus * w} readers active on average: each at a lone reader's speed"
        return r1, k, why
    lo, hi = 1.0, total
    for _ in range(60):
        mid = (lo + hi) / 2
        r = r_of(mid)
        if total * r / (r + d) > mid:
            lo = mid
        else:
            hi = mid
    k = (lo + hi) / 2
    why = (
        f"{k:.2f} of {gpus * w} readers active on average while the others decode "
        f"({format_seconds(d)} per sample; interactive response-time law)"
    )
    return r_of(k), k, why


def _terms(params: LoaderParams, sweep: Sequence[SweepPoint], gpus: int) -> _Terms:
    if gpus < 1:
        raise UsageError(f"gpus must be at least 1, got {gpus}")
    w = params.workers
    readers = gpus * max(w, 1)
    bw, basis = bandwidth_at(sweep, readers)
    r, _, _ = read_time_at(params, sweep, gpus)
    b = params.batch_size
    c, o = params.compute_s, params.step_overhead_s
    if w == 0:
        load = b * r
        decode = b * params.decode_s_per_sample
        step = load + decode + o + c  # the main process loads, then computes: nothing overlaps
    else:
        load = b * r / w
        decode = b * params.decode_s_per_sample / w
        step = max(c + o, load + decode)
    return _Terms(readers, bw, basis, load, decode, o, c, step)


def predict_au_rate_bound(params: LoaderParams, sweep: Sequence[SweepPoint], gpus: int) -> float:
    """Mean-rate AU bound: ``compute ÷ max(compute + o, L + D)``.

    Per step and accelerator: the storage time ``L = batch × r ÷ workers``, with ``r`` the
    mean per-sample read time of ``read_time_at`` (without decode ``L = batch × sample ÷
    (BW(gpus × workers) / gpus)``: each rank gets its share of the bandwidth measured at the
    loader's total concurrency), the decode time ``D = batch × decode_per_sample ÷ workers``
    and the main-process overhead ``o``. Workers run in parallel with each other and with the
    main loop, so the step takes whichever is longer: the main loop's own ``compute + o``, or
    the time the workers need to supply one batch, ``L + D``: a worker reads the files of its
    batch and decodes them in sequence, so one batch costs it ``B × (r + decode)`` and ``W``
    workers deliver ``W`` batches in that time. ``r`` already accounts for the overlap: while
    one worker decodes, the others read with its share of the bandwidth when the sweep shows
    storage saturated, so on saturated storage ``L + D`` comes to ``batch × sample ÷ BW``
    share. With ``workers = 0`` nothing overlaps and the step is ``L + D + o + compute``.
    """
    t = _terms(params, sweep, gpus)
    return t.compute_s / t.step_s


# --------------------------------------------------------------------------------------------
# The discrete-event simulation


def _quantile_mean(q: np.ndarray) -> float:
    """Mean of the distribution whose inverse CDF is ``q`` linearly interpolated."""
    if len(q) == 1:
        return float(q[0])
    return float((q.sum() - (q[0] + q[-1]) / 2) / (len(q) - 1))


def _quantile_var(q: np.ndarray) -> float:
    """Variance of the distribution whose inverse CDF is ``q`` linearly interpolated."""
    if len(q) < 2:
        return 0.0
    a, b = q[:-1], q[1:]
    second = float(((a * a + a * b + b * b) / 3).sum() / (len(q) - 1))
    return max(second - _quantile_mean(q) ** 2, 0.0)


def independent_share(point: SweepPoint, window_s: float = 0.0) -> tuple[float, str]:
    """The share (0..1) of the per-file latency variance that is independent between readers.

    Readers sharing one device see per-file latencies spread by the sharing itself (queueing,
    a throttle's time slices): when one file is slow another is fast, the aggregate supply
    stays steady, and a DataLoader whose prefetch covers ``window_s`` loses nothing to that
    spread. Independent spread (one slow file while the others go on), or stalls that hit
    every reader at once, make the count of files completed per window vary at least as much
    as independence implies: ``CV_file ÷ √n`` with ``n`` files per window. The point's
    completions are summed into windows of about ``window_s`` (at least 4 windows kept); the
    measured CV squared over that expectation, clipped to [0, 1], is the independent share.
    1 (all independent: the conservative reading) when the point has no completion series.
    """
    q = np.asarray(point.latency_quantiles, dtype=float)
    counts = np.asarray(point.completions, dtype=float)
    if len(counts) < 4 or point.interval_s <= 0 or len(q) < 2:
        return 1.0, "per-file latencies taken as independent between readers (no series)"
    mean, var = _quantile_mean(q), _quantile_var(q)
    if mean <= 0 or var <= 0:
        return 1.0, "no per-file latency spread"
    m = max(1, min(round(window_s / point.interval_s), len(counts) // 4))
    n = len(counts) // m
    windows = counts[: n * m].reshape(n, m).sum(axis=1)
    per_window = float(windows.mean())
    if per_window <= 0:
        return 1.0, "no files completed in the series"
    cv = float(windows.std(ddof=1)) / per_window
    cv_indep = math.sqrt(var / mean**2 / per_window)
    share = min(max((cv / cv_indep) ** 2, 0.0), 1.0)
    return share, (
        f"{share:.0%} of the per-file latency variance taken as independent between readers "
        f"(files completed per {m * point.interval_s:g} s: CV {cv:.3f} measured over {n} "
        f"windows, {cv_indep:.3f} if independent, {per_window:.1f} files per window)"
    )


def _read_time_quantiles(
    params: LoaderParams, sweep: Sequence[SweepPoint], gpus: int
) -> tuple[np.ndarray, str]:
    """Per-sample read-time quantiles at the loader's concurrency, mean tied to the bandwidth."""
    readers = gpus * max(params.workers, 1)
    # Little's law at the storage, readers active as read_time_at finds them.
    mean, _, active = read_time_at(params, sweep, gpus)
    shape_list, shape_basis = latency_quantiles_at(sweep, readers)
    shape = np.asarray(shape_list, dtype=float)
    shape_mean = _quantile_mean(shape) if len(shape) else 0.0
    if shape_mean <= 0:
        return np.array([mean]), (
            f"constant per-sample read time {format_seconds(mean)} ({active}; "
            f"{shape_basis or 'latency distribution is all zero'}): no variability simulated"
        )
    quantiles = shape * (mean / shape_mean)
    points = _sorted_sweep(sweep)
    near = min(points, key=lambda p: (abs(p.readers - readers), -p.readers))
    # the spread the prefetch queue covers: each worker has `prefetch` batches to read ahead
    window = params.prefetch * params.batch_size * mean
    share, share_basis = independent_share(near, window)
    # Only the independent part of the spread delays one worker while the others go on.
    quantiles = mean + math.sqrt(share) * (quantiles - mean)
    return quantiles, (
        f"per-sample read time: latency shape {shape_basis}, mean set to {format_seconds(mean)} "
        f"= active readers × sample ÷ bandwidth (Little's law; {active}; the histogram's own "
        f"mean is {format_seconds(shape_mean)}); {share_basis}"
    )


def _batch_read_times(
    quantiles: np.ndarray,
    gpus: int,
    steps: int,
    batch: int,
    rng: np.random.Generator,
    per: float = 1.0,
) -> np.ndarray:
    """(gpus, steps) array: the sum of ``batch`` per-sample read times drawn by inverse CDF;
    with ``per`` > 1 each entry is the slowest of ``per`` such sums (the max of ``per`` draws,
    drawn at once as the pool's quantile ``U ** (1 / per)``)."""
    n = len(quantiles)
    if n == 1 or quantiles[0] == quantiles[-1]:
        return np.full((gpus, steps), batch * float(quantiles[0]))
    steps_q = np.diff(quantiles)

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        # Inverse CDF, linear between quantiles (np.interp's search is ~10× slower here).
        x = rng.random(shape) * (n - 1)
        i = np.minimum(x.astype(np.intp), n - 2)
        return quantiles[i] + (x - i) * steps_q[i]

    if per <= 1 and gpus * steps * batch <= _DRAW_BUDGET:
        return draw((gpus, steps, batch)).sum(axis=2)
    # Too many draws: resample from a pool of exact batch sums (the pool's own tail is kept).
    pool_size = max(_DRAW_BUDGET // batch, 512)
    pool = draw((pool_size, batch)).sum(axis=1)
    if per <= 1:
        return pool[rng.integers(0, pool_size, size=(gpus, steps))]
    pool.sort()
    u = rng.random((gpus, steps)) ** (1.0 / per)
    return pool[np.minimum((u * pool_size).astype(np.intp), pool_size - 1)]


def simulate_au(
    params: LoaderParams,
    sweep: Sequence[SweepPoint],
    gpus: int,
    steps: int = 500,
    seed: int = 0,
) -> float:
    """AU of ``gpus`` ranks training ``steps`` steps, by discrete-event simulation.

    It follows torch's DataLoader: per rank ``W`` workers; worker ``w`` builds whole batches
    ``w, w+W, …`` in order, each as ``B`` sequential sample reads plus ``B`` decodes; at most
    ``prefetch × W`` batch indices are outstanding, and the index of batch ``k + prefetch × W``
    is issued when the main loop takes batch ``k``. The main loop waits for batch ``k``, then
    spends ``step_overhead_s + compute_s``; every step ends in a barrier across ranks (the
    slowest gates all, like all-reduce). Per-sample read times are drawn by inverse CDF: their
    shape is the sweep's latency distribution at concurrency ``gpus × W``
    (``latency_quantiles_at``), their mean ``read_time_at``'s (Little's law with the readers
    active while others decode), so the simulation moves exactly the bandwidth the rate bound
    uses; a sample of another size
    than the sweep's files is taken as transfer-dominated. Every worker is assumed busy (latency
    at full concurrency), which is conservative when the loader is ahead of compute. With more
    draws than ``_DRAW_BUDGET`` (thousands of GPUs, big batches) batch times are resampled from a
    pool of exact batch sums. Deterministic for a seed.

    Returns DLIO's AU: Σ compute over steps after the first ÷ (wall − the first step's duration),
    the mean over ranks (the barrier makes every rank's the same).
    """
    return _simulate(params, sweep, gpus, steps, seed)[0]


def _simulate(
    params: LoaderParams, sweep: Sequence[SweepPoint], gpus: int, steps: int, seed: int
) -> tuple[float, str]:
    if gpus < 1:
        raise UsageError(f"gpus must be at least 1, got {gpus}")
    if steps < 2:
        raise UsageError(f"the simulation needs at least 2 steps, got {steps}")
    if gpus > MAX_MODEL_GPUS:
        raise UsageError(
            f"gpus {gpus} is beyond the model's range (at most {MAX_MODEL_GPUS})",
            hint=f"give --gpus {MAX_MODEL_GPUS} or fewer",
        )
    quantiles, basis = _read_time_quantiles(params, sweep, gpus)
    rng = np.random.default_rng(seed)
    b = params.batch_size
    # Beyond SIM_RANKS ranks, each simulated rank stands for `per` real ones and takes the
    # slowest of their batches: memory and time stay those of SIM_RANKS ranks, and the figure
    # is conservative (finish times only grow with batch times; the barrier takes the max).
    ranks, per = (gpus, 1.0) if gpus <= SIM_RANKS else (SIM_RANKS, gpus / SIM_RANKS)
    if per > 1:
        basis += (
            f"; {ranks} ranks simulated, each standing for {per:g} and taking the slowest of "
            "their batches (conservative)"
        )
    gpus = ranks
    batch_s = (
        _batch_read_times(quantiles, gpus, steps, b, rng, per) + b * params.decode_s_per_sample
    )
    batch_s = np.ascontiguousarray(batch_s.T)  # (steps, gpus): one step's ranks side by side
    c, o = params.compute_s, params.step_overhead_s
    w = params.workers
    t = 0.0  # every rank's clock after the last barrier
    first_end = 0.0
    if w == 0:
        for k in range(steps):
            t = t + float(batch_s[k].max()) + o + c
            if k == 0:
                first_end = t
    else:
        outstanding = params.prefetch * w
        finish = np.empty_like(batch_s)  # when a worker has batch k ready
        taken = np.empty_like(batch_s)  # when the main loop takes batch k
        zeros = np.zeros(gpus)
        for k in range(steps):
            issued = taken[k - outstanding] if k >= outstanding else zeros
            worker_free = finish[k - w] if k >= w else zeros
            np.add(np.maximum(issued, worker_free), batch_s[k], out=finish[k])
            np.maximum(finish[k], t, out=taken[k])
            t = float(taken[k].max()) + o + c  # barrier: the slowest rank ends the step
            if k == 0:
                first_end = t
    # min: float rounding can push a compute-bound run a hair above 1.
    au = min((steps - 1) * c / (t - first_end), 1.0)
    return au, basis


# --------------------------------------------------------------------------------------------
# Prediction and estimate


def _bound(terms: _Terms, au: float) -> Bound:
    """Which resource the lost time belongs to.

    "compute" when the accelerators lose under 2 % of each step. Otherwise compare the time the
    main loop waits for data (the step beyond ``compute + o``) with the per-step overhead ``o``:
    waiting dominates → the supply is the bound, storage if ``L ≥ D`` else the loader's CPU
    (decode); overhead dominates → the loader's CPU (per-step hand-off and collation).
    """
    if au >= 1.0 - COMPUTE_BOUND_TOLERANCE:
        return "compute"
    step = terms.compute_s / au
    waiting = step - (terms.compute_s + terms.overhead_s)
    if waiting > terms.overhead_s:
        return "storage" if terms.load_s >= terms.decode_s else "cpu"
    return "cpu"


def predict_au(
    params: LoaderParams,
    sweep: Sequence[SweepPoint],
    gpus: int,
    *,
    steps: int = 500,
    seed: int = 0,
) -> Prediction:
    """Predicted AU for ``gpus`` accelerators: the simulation's figure, rate bound and bound."""
    terms = _terms(params, sweep, gpus)
    au, read_basis = _simulate(params, sweep, gpus, steps, seed)
    rate = terms.compute_s / terms.step_s
    bound = _bound(terms, au)
    overhead = (
        f"loader overhead {format_seconds(terms.overhead_s)}/step"
        if terms.overhead_s > 0
        else "loader overhead not measured (taken as 0: optimistic for short compute)"
    )
    basis = (
        f"simulated torch DataLoader: {gpus} GPU(s) × {params.workers} workers "
        f"({terms.readers} readers), prefetch {params.prefetch}, batch {params.batch_size}, "
        f"barrier every step, {steps} steps, seed {seed}; "
        f"bandwidth {format_rate(terms.bandwidth_bps)} ({terms.bandwidth_basis}); "
        f"per step: storage {format_seconds(terms.load_s)}, decode "
        f"{format_seconds(terms.decode_s)}, {overhead}, compute {format_seconds(terms.compute_s)}; "
        f"rate bound {rate:.3f}; {read_basis}"
    )
    return Prediction(au=au, au_rate_bound=rate, bound=bound, basis=basis)


def estimate(
    params: LoaderParams,
    sweep: Sequence[SweepPoint],
    gpus_list: Sequence[int] | None = None,
    threshold: float = 0.9,
    *,
    profile: str | None = None,
    steps: int = 500,
    seed: int = 0,
) -> Estimate:
    """AU against accelerator count, and the largest count whose simulated AU ≥ ``threshold``.

    ``gpus_list`` defaults to 1, 2, 4, … up to the first count whose AU falls below
    0.75 × threshold, or ``MAX_GPUS``. The maximum is found by doubling until the AU falls
    below the threshold, then bisecting between the last passing and first failing power of two;
    every figure is the simulation's (same seed for every count). 0 means even one accelerator
    starves; ``MAX_GPUS`` means the search stopped there.
    """
    if not (0 < threshold <= 1):
        raise UsageError(f"threshold must be in (0, 1], got {threshold!r}")
    cache: dict[int, float] = {}

    def au_of(n: int) -> float:
        if n not in cache:
            cache[n] = _simulate(params, sweep, n, steps, seed)[0]
        return cache[n]

    if gpus_list is None:
        listed: list[int] = []
        n = 1
        while n <= MAX_GPUS:
            listed.append(n)
            if au_of(n) < _STOP_FRACTION * threshold:
                break
            n *= 2
    else:
        listed = sorted({int(n) for n in gpus_list})
        if not listed or listed[0] < 1:
            raise UsageError("gpus list: every count must be at least 1")
    au_at = [(n, au_of(n)) for n in listed]
    max_gpus, search = max_gpus_for(au_of, threshold)

    demand = demand_bps(params.batch_size, params.sample_bytes, params.compute_s)
    levels = sorted(p.readers for p in sweep)
    top = max(sweep, key=lambda p: p.readers)
    span = f"{levels[0]}–{levels[-1]}" if len(levels) > 1 else f"{levels[0]}"
    basis = (
        f"simulated torch DataLoader ({params.workers} workers per GPU, prefetch "
        f"{params.prefetch}, batch {params.batch_size}, compute "
        f"{format_seconds(params.compute_s)}/step, barrier every step, {steps} steps, seed "
        f"{seed}) fed by the dataset-read sweep at {span} readers, "
        f"assumed saturated at {format_rate(top.bandwidth_bps)} beyond {top.readers}; "
        f"demand = batch ÷ compute × sample size; max_gpus by doubling then bisection: {search}"
    )
    if params.step_overhead_s == 0:
        basis += "; loader overhead not measured (taken as 0)"
    return Estimate(
        demand_bps_per_gpu=demand,
        au_at=au_at,
        max_gpus=max_gpus,
        threshold=threshold,
        basis=basis,
        profile=profile,
    )


def max_gpus_for(
    au_of: Callable[[int], float], threshold: float, start: int = 1
) -> tuple[int, str]:
    """The largest accelerator count whose AU >= threshold (AU falls with the count), and how
    it was found: from ``start``, gallop up (1, 2, 4, … steps) while it passes or down while it
    fails, then bisect the bracket. 0: even one accelerator fails; MAX_GPUS: the search
    stopped there."""
    start = min(max(start, 1), MAX_GPUS)
    if au_of(start) >= threshold:
        lo, step = start, 1
        while lo < MAX_GPUS and au_of(min(lo + step, MAX_GPUS)) >= threshold:
            lo, step = min(lo + step, MAX_GPUS), step * 2
        if lo >= MAX_GPUS:
            return MAX_GPUS, f"at least {MAX_GPUS} (the search stops there)"
        hi = min(lo + step, MAX_GPUS)
    else:
        hi, step = start, 1
        while hi > 1 and au_of(max(hi - step, 1)) < threshold:
            hi, step = max(hi - step, 1), step * 2
        if hi == 1:
            return 0, "even 1 accelerator falls below the threshold"
        lo = max(hi - step, 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if au_of(mid) >= threshold:
            lo = mid
        else:
            hi = mid
    return lo, f"AU {au_of(lo):.3f} at {lo}, {au_of(hi):.3f} at {hi}"


# --------------------------------------------------------------------------------------------
# The interval


#: The estimate's interval: central share, bootstrap resamples and the resampling seed.
INTERVAL_LEVEL = 0.90
RESAMPLES = 100
BOOTSTRAP_SEED = 0
#: A sweep level whose resampled bandwidth spreads wider than this (relative half-width of
#: the interval) means the storage was unstable while it was measured.
UNSTABLE_SPREAD = 0.25


def block_length(n: int) -> int:
    """Moving-block length for ``n`` intervals: ⌈√n⌉ (long enough to keep slow swings)."""
    return max(1, math.ceil(math.sqrt(n)))


def resample_factor(completions: Sequence[float], rng: np.random.Generator) -> float:
    """One moving-block bootstrap replicate's mean over the measured mean (1 without data).

    ``⌈n / b⌉`` blocks of ``b = block_length(n)`` consecutive intervals, each starting at a
    uniformly drawn index in ``[0, n − b]``, concatenated and cut to ``n``."""
    c = np.asarray(completions, dtype=float)
    n = len(c)
    mean = float(c.mean()) if n else 0.0
    if n < 2 or mean <= 0:
        return 1.0
    b = block_length(n)
    starts = rng.integers(0, n - b + 1, size=math.ceil(n / b))
    sample = np.concatenate([c[i : i + b] for i in starts])[:n]
    return max(float(sample.mean()) / mean, 1e-3)


def scaled_point(p: SweepPoint, factor: float) -> SweepPoint:
    """A sweep level with ``factor`` × its rates and its latencies ÷ ``factor``."""
    if factor == 1.0:
        return p
    return SweepPoint(
        readers=p.readers,
        bandwidth_bps=p.bandwidth_bps * factor,
        files_per_s=p.files_per_s * factor,
        latency_quantiles=[q / factor for q in p.latency_quantiles],
        completions=p.completions,
        interval_s=p.interval_s,
    )


def estimate_interval(
    params: LoaderParams,
    sweep: Sequence[SweepPoint],
    est: Estimate,
    *,
    resamples: int = RESAMPLES,
    level: float = INTERVAL_LEVEL,
    seed: int = BOOTSTRAP_SEED,
    steps: int = 500,
    sim_seed: int = 0,
) -> EstimateInterval:
    """The bootstrap interval of ``est`` (see ``EstimateInterval``); deterministic for a seed."""
    if resamples < 1 or not 0 < level < 1:
        raise UsageError("interval: resamples must be at least 1 and level in (0, 1)")
    points = _sorted_sweep(sweep)
    rng = np.random.default_rng(seed)
    factors = np.ones((resamples, len(points)))
    for j, p in enumerate(points):
        for i in range(resamples):
            factors[i, j] = resample_factor(p.completions, rng)
    listed = [g for g, _ in est.au_at]
    maxes: list[int] = []
    aus = np.empty((resamples, len(listed)))
    for i in range(resamples):
        replica = [scaled_point(p, float(f)) for p, f in zip(points, factors[i], strict=True)]
        cache: dict[int, float] = {}

        def au_of(n: int, replica: list[SweepPoint] = replica, cache: dict = cache) -> float:
            if n not in cache:
                cache[n] = _simulate(params, replica, n, steps, sim_seed)[0]
            return cache[n]

        maxes.append(max_gpus_for(au_of, est.threshold, start=max(est.max_gpus, 1))[0])
        aus[i] = [au_of(g) for g in listed]
    tail = (1 - level) / 2 * 100
    lo_m, hi_m = np.percentile(maxes, [tail, 100 - tail], method="inverted_cdf")
    band_lo = np.percentile(aus, tail, axis=0, method="inverted_cdf")
    band_hi = np.percentile(aus, 100 - tail, axis=0, method="inverted_cdf")
    point_au = dict(est.au_at)
    band = tuple(
        (g, min(float(lo), point_au[g]), max(float(hi), point_au[g]))
        for g, lo, hi in zip(listed, band_lo, band_hi, strict=True)
    )
    f_lo = np.percentile(factors, tail, axis=0, method="inverted_cdf")
    f_hi = np.percentile(factors, 100 - tail, axis=0, method="inverted_cdf")
    spread = float(max((f_hi - f_lo) / 2, default=0.0))
    blocks = tuple(
        (p.readers, len(p.completions), block_length(len(p.completions)))
        for p in points
        if len(p.completions) >= 2
    )
    fixed = tuple(p.readers for p in points if len(p.completions) < 2)
    return EstimateInterval(
        level=level,
        resamples=resamples,
        seed=seed,
        max_gpus_low=min(int(lo_m), est.max_gpus),
        max_gpus_high=max(int(hi_m), est.max_gpus),
        au_band=band,
        blocks=blocks,
        fixed_levels=fixed,
        spread=spread,
        level_bounds=tuple(
            (p.readers, p.bandwidth_bps * float(lo), p.bandwidth_bps * float(hi))
            for p, lo, hi in zip(points, f_lo, f_hi, strict=True)
        ),
    )


def unstable_reasons(interval: EstimateInterval) -> list[str]:
    """Signs in the sweep itself that the storage changed while it was measured.

    - a level whose resampled bandwidth spreads wider than ``UNSTABLE_SPREAD`` either side;
    - superlinear scaling: a level's per-reader bandwidth, at its interval's low end, above
      the per-reader bandwidth of a smaller level at that one's high end. Readers sharing one
      stable device cannot each go faster because more of them read; the device changed speed
      between the levels, which no within-level interval can cover.
    """
    out = []
    if interval.spread > UNSTABLE_SPREAD:
        out.append(
            f"a sweep level's resampled bandwidth spreads ±{interval.spread:.0%} "
            f"(over ±{UNSTABLE_SPREAD:.0%})"
        )
    for (ra, _, hi_a), (rb, lo_b, _) in pairwise(sorted(interval.level_bounds)):
        if lo_b / rb > hi_a / ra:
            out.append(
                f"{rb} readers each read faster ({format_rate(lo_b / rb)} at the interval's low "
                f"end) than {ra} did ({format_rate(hi_a / ra)} at its high end)"
            )
    return out


def with_interval(
    params: LoaderParams, sweep: Sequence[SweepPoint], est: Estimate, **kw: Any
) -> Estimate:
    """``est`` with its bootstrap interval attached."""
    return replace(est, interval=estimate_interval(params, sweep, est, **kw))


# --------------------------------------------------------------------------------------------
# Dataset sizing (MLPerf Storage)


def dataset_size(
    batch_size: int,
    accelerators: int,
    hosts: int,
    host_mem_bytes: int,
    sample_bytes: int,
    samples_per_file: int,
) -> DatasetSize:
    """The MLPerf Storage minimum training dataset.

    ``min_samples_steps = 500 × batch × accelerators`` (500 steps per epoch);
    ``min_samples_memory = ⌈hosts × host_mem × 5 ÷ sample_bytes⌉`` (5× the clients' memory, so the
    page cache cannot hold it); the larger wins (the steps term on a tie);
    ``files = ⌈min_samples ÷ samples_per_file⌉``, spread over ``⌈files ÷ 10,000⌉`` subfolders
    when there are more than 10,000.
    """
    checks = [
        (batch_size >= 1, "batch size must be at least 1"),
        (accelerators >= 1, "accelerators must be at least 1"),
        (hosts >= 1, "hosts must be at least 1"),
        (host_mem_bytes >= 0, "host memory must be non-negative"),
        (sample_bytes >= 1, "sample size must be positive"),
        (samples_per_file >= 1, "samples per file must be at least 1"),
    ]
    for ok, message in checks:
        if not ok:
            raise UsageError(f"dataset size: {message}")
    steps_term = MIN_STEPS_PER_EPOCH * batch_size * accelerators
    memory_bytes = hosts * host_mem_bytes * MEMORY_MULTIPLIER
    memory_term = -(-memory_bytes // sample_bytes)  # exact integer ceiling
    winner: Literal["steps", "memory"] = "memory" if memory_term > steps_term else "steps"
    min_samples = max(steps_term, memory_term)
    files = -(-min_samples // samples_per_file)
    subfolders = -(-files // MAX_FILES_PER_FOLDER) if files > MAX_FILES_PER_FOLDER else 0
    return DatasetSize(
        min_samples_steps=steps_term,
        min_samples_memory=memory_term,
        min_samples=min_samples,
        winner=winner,
        files=files,
        subfolders=subfolders,
        total_bytes=files * samples_per_file * sample_bytes,
        batch_size=batch_size,
        accelerators=accelerators,
        hosts=hosts,
        host_mem_bytes=host_mem_bytes,
        sample_bytes=sample_bytes,
        samples_per_file=samples_per_file,
    )


def format_dataset_size(ds: DatasetSize) -> str:
    """Multi-line text: both terms with their arithmetic, which one won, files and subfolders."""
    hosts = f"{ds.hosts} host{'s' if ds.hosts != 1 else ''}"
    accels = f"{ds.accelerators} accelerator{'s' if ds.accelerators != 1 else ''}"
    spf = f"{ds.samples_per_file:,} sample{'s' if ds.samples_per_file != 1 else ''} per file"
    won = "500 steps per epoch" if ds.winner == "steps" else "5× host memory"
    if ds.subfolders:
        layout = f"in {ds.subfolders} subfolders of at most {MAX_FILES_PER_FOLDER:,}"
    else:
        layout = f"in one folder (at most {MAX_FILES_PER_FOLDER:,} per folder)"
    steps_mark = " ◀" if ds.winner == "steps" else ""
    memory_mark = " ◀" if ds.winner == "memory" else ""
    lines = [
        "Minimum dataset (MLPerf Storage rule: the larger of two terms)",
        f"  500 steps per epoch: 500 × batch {ds.batch_size} × {accels}"
        f" = {ds.min_samples_steps:,} samples{steps_mark}",
        f"  5× host memory:      5 × {hosts} × {format_bytes(ds.host_mem_bytes)}"
        f" ÷ {format_bytes(ds.sample_bytes)} per sample"
        f" = {ds.min_samples_memory:,} samples{memory_mark}",
        f"  minimum:             {ds.min_samples:,} samples (the {won} term wins)",
        f"  files:               {ds.files:,} ({spf}), {layout}",
        f"  total:               {format_bytes(ds.total_bytes)} ({ds.total_bytes:,} bytes)",
    ]
    return "\n".join(lines)
