"""The starvation model inverted: the least read bandwidth at which N accelerators keep AU ≥ a
threshold (``iobench plan``).

Pure functions, no I/O. The storage is planned, not measured, so it is described by the one
figure a buyer states: the aggregate bandwidth ``B`` it delivers at the loader's concurrency
(``gpus × workers`` readers). ``planned_sweep`` turns ``B`` into the one-level sweep the
forward model reads: ``B`` at that many readers, the same rate per reader below it (storage
asked to deliver ``B`` at full concurrency promises nothing more to fewer readers), saturated
above it; per-sample read times spread as the profile's sample sizes do (a normal distribution
of mean ``sample_bytes`` and standard deviation ``sample_sd``, clipped at 0: transfer
dominated), the spread taken as independent between readers (the forward model's
conservative reading when no completion series is known).

``min_read_bandwidth`` finds the least ``B`` whose simulated AU (``starvation.simulate_au``,
the figure ``estimate`` reports) meets the threshold: bracketed by doubling from the closed
form of the rate bound, then bisected to ``REL_TOL``. With a fixed seed the simulation's draws
are the same at every ``B`` and every read time scales as ``1/B``, so the AU rises with ``B``
and the bisection is exact to its tolerance. The closed form is reported beside it: without
decode time the rate bound needs ``B = threshold × gpus × batch × sample ÷ compute``
(the accelerators consume ``threshold`` of their full-utilisation demand), and the latency
spread and the barrier every step ask for the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

from ..core.errors import UsageError
from ..core.units import format_bytes, format_rate, format_seconds
from .starvation import simulate_au
from .starvation_inputs import LoaderParams, SweepPoint, demand_bps

#: The bisection stops when the bracket is this narrow, relative to the bandwidth.
REL_TOL = 1e-4
#: The simulated steps and seed of every evaluation (``estimate``'s defaults).
STEPS = 500
SEED = 0
#: Quantiles of the sample-size distribution given to the model (q = 0, 0.01, …, 1).
_QUANTILES = 101
#: The normal's tails are cut at these quantiles (q = 0 and 1 are infinite).
_TAIL = 0.001
#: Beyond this many times the closed form, no bandwidth is taken to meet the threshold.
_MAX_FACTOR = 2.0**30


@dataclass(frozen=True)
class ReadPlan:
    """The least aggregate read bandwidth that keeps ``gpus`` accelerators at the threshold."""

    gpus: int
    threshold: float
    bandwidth_bps: float
    samples_per_s: float
    files_per_s: float
    au: float  # simulated at bandwidth_bps
    au_below: float  # simulated at 1 % less: below the threshold
    rate_bound_bps: float  # the closed form (rate bound, no spread)
    demand_bps: float  # every accelerator at full utilisation
    readers: int
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def size_quantiles(sample_bytes: float, sample_sd: float) -> list[float]:
    """Sample sizes at q = 0, 1/100, …, 1 of a normal of that mean and deviation, clipped at 0
    (the tails cut at ``_TAIL``); one value when there is no spread."""
    if not (sample_sd >= 0 and math.isfinite(sample_sd)):
        raise UsageError(f"sample size deviation must be >= 0, got {sample_sd!r}")
    if sample_sd == 0:
        return [float(sample_bytes)]
    dist = NormalDist(float(sample_bytes), float(sample_sd))
    qs = [min(max(i / (_QUANTILES - 1), _TAIL), 1 - _TAIL) for i in range(_QUANTILES)]
    return [max(dist.inv_cdf(q), 0.0) for q in qs]


def planned_sweep(
    bandwidth_bps: float, readers: int, sample_bytes: float, sample_sd: float = 0.0
) -> list[SweepPoint]:
    """The one-level sweep of storage that delivers ``bandwidth_bps`` at ``readers``."""
    if not (bandwidth_bps > 0 and math.isfinite(bandwidth_bps)):
        raise UsageError(f"bandwidth must be positive, got {bandwidth_bps!r}")
    sizes = size_quantiles(sample_bytes, sample_sd)
    # seconds per file at `readers` concurrent readers (Little's law): the shape is what counts,
    # the model sets the mean from the bandwidth
    shape = [readers * s / bandwidth_bps for s in sizes] if len(sizes) > 1 else []
    return [SweepPoint(readers, bandwidth_bps, bandwidth_bps / sample_bytes, shape)]


def au_at(params: LoaderParams, gpus: int, bandwidth_bps: float, sample_sd: float = 0.0) -> float:
    """The simulated AU of ``gpus`` accelerators on storage planned at ``bandwidth_bps``."""
    readers = gpus * max(params.workers, 1)
    sweep = planned_sweep(bandwidth_bps, readers, params.sample_bytes, sample_sd)
    return simulate_au(params, sweep, gpus, STEPS, SEED)


def rate_bound_bandwidth(params: LoaderParams, gpus: int, threshold: float) -> float:
    """The rate bound's closed form: the bandwidth at which ``compute ÷ (L + D)`` is the
    threshold, ``L = batch × gpus × sample ÷ B`` (every reader busy); inf when the decode (or
    the main loop's overhead) alone keeps the AU below it."""
    c, o = params.compute_s, params.step_overhead_s
    w = max(params.workers, 1)
    decode = params.batch_size * params.decode_s_per_sample / w
    if params.workers == 0:  # nothing overlaps: c ÷ (L + D + o + c)
        room = c / threshold - c - o - decode
    else:
        room = c / threshold - decode if c / (c + o) >= threshold else 0.0
    if room <= 0:
        return math.inf
    return params.batch_size * gpus * params.sample_bytes / room


def min_read_bandwidth(
    params: LoaderParams, gpus: int, threshold: float, *, sample_sd: float = 0.0
) -> ReadPlan:
    """The least aggregate read bandwidth whose simulated AU is at least ``threshold``."""
    if gpus < 1:
        raise UsageError(f"gpus must be at least 1, got {gpus}")
    if not 0 < threshold <= 1:
        raise UsageError(f"the AU threshold must be in (0, 100 %], got {threshold!r}")
    closed = rate_bound_bandwidth(params, gpus, threshold)
    demand = gpus * demand_bps(params.batch_size, params.sample_bytes, params.compute_s)
    start = closed if math.isfinite(closed) else threshold * demand

    def ok(b: float) -> bool:
        return au_at(params, gpus, b, sample_sd) >= threshold

    hi = start
    while not ok(hi):
        hi *= 2
        if hi > start * _MAX_FACTOR:
            raise UsageError(
                f"AU {threshold:.0%} is out of reach at any read bandwidth: the loader's own "
                f"work (decode {format_seconds(params.decode_s_per_sample)} per sample, "
                f"overhead {format_seconds(params.step_overhead_s)} per step) exceeds "
                f"{format_seconds(params.compute_s)} of compute ÷ {threshold:.0%}",
                hint="lower --au, or more loader workers in the profile",
            )
    lo = hi / 2
    while ok(lo):
        hi, lo = lo, lo / 2
    while hi - lo > REL_TOL * hi:
        mid = (lo + hi) / 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    file_bytes = params.sample_bytes * params.samples_per_file
    readers = gpus * max(params.workers, 1)
    return ReadPlan(
        gpus, threshold, hi, hi / params.sample_bytes, hi / file_bytes,
        au_at(params, gpus, hi, sample_sd), au_at(params, gpus, hi * 0.99, sample_sd),
        closed, demand, readers, _basis(params, gpus, threshold, sample_sd, closed, readers),
    )  # fmt: skip


def _basis(
    params: LoaderParams, gpus: int, threshold: float, sample_sd: float, closed: float,
    readers: int,
) -> str:  # fmt: skip
    spread = (
        f"per-sample read times spread as the sample sizes ({format_bytes(params.sample_bytes)}"
        f" ± {format_bytes(sample_sd)}, normal, taken as independent between readers)"
        if sample_sd > 0
        else "constant per-sample read time (the samples are all one size)"
    )
    bound = (
        f"the rate bound alone needs {format_rate(closed)} (threshold × batch × sample ÷ compute"
        " × GPUs when nothing decodes); the simulation's barrier every step and the spread ask"
        " for the rest"
        if math.isfinite(closed)
        else "the rate bound cannot reach the threshold (decode or overhead)"
    )
    d = params.decode_s_per_sample
    decode = f"decode {format_seconds(d)} per sample (the profile's)" if d else "no decode time"
    return (
        f"the starvation model inverted: the least aggregate bandwidth whose simulated AU "
        f"(torch DataLoader, {gpus} GPU(s) × {params.workers} workers = {readers} readers, "
        f"prefetch {params.prefetch}, batch {params.batch_size}, compute "
        f"{format_seconds(params.compute_s)}/step, barrier every step, {STEPS} steps, seed "
        f"{SEED}) is at least {threshold:.1%}, by bisection to {REL_TOL:.0e}; storage "
        f"planned to deliver it at {readers} readers (the same rate per reader below, "
        f"saturated above); {spread}; {decode}, loader overhead not counted (the "
        f"host's CPU, not storage); {bound}"
    )
