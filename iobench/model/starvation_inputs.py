"""The starvation model's inputs and outputs, and its dataset sizing: pure data, no simulation.

Inputs are what the dataset-read concurrency sweep measured (``SweepPoint``, interpolated between
its levels by ``bandwidth_at`` and ``latency_quantiles_at``) and what the training loop looks
like (``LoaderParams``); outputs are frozen dataclasses that say what they were computed from
(``basis``). ``dataset_size`` is the MLPerf Storage minimum dataset. ``iobench.model.starvation``
re-exports every name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from ..core.errors import UsageError
from ..core.units import format_bytes, format_rate

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


#: The estimate's interval: central share, bootstrap resamples and the resampling seed.
INTERVAL_LEVEL = 0.90
RESAMPLES = 100
BOOTSTRAP_SEED = 0
#: A sweep level whose resampled bandwidth spreads wider than this (relative half-width of
#: the interval) means the storage was unstable while it was measured.
UNSTABLE_SPREAD = 0.25


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
