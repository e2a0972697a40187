"""The estimate's interval: a moving-block bootstrap over each sweep level's per-interval
completions, the model rerun on every replicate (``estimate_interval``), and the signs that the
storage changed while the sweep measured it (``unstable_reasons``). Pure; deterministic for a
seed. ``iobench.model.starvation`` gives these names too (loaded on first use).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any

import numpy as np

from ..core.errors import UsageError
from ..core.units import format_rate
from .starvation import _simulate, max_gpus_for
from .starvation_inputs import (
    BOOTSTRAP_SEED,
    INTERVAL_LEVEL,
    RESAMPLES,
    UNSTABLE_SPREAD,
    Estimate,
    EstimateInterval,
    LoaderParams,
    SweepPoint,
    _sorted_sweep,
)

# --------------------------------------------------------------------------------------------
# The interval


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
    maxes, aus = _replicates(params, points, est, factors, steps, sim_seed)
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


def _replicates(
    params: LoaderParams,
    points: list[SweepPoint],
    est: Estimate,
    factors: np.ndarray,
    steps: int,
    sim_seed: int,
) -> tuple[list[int], np.ndarray]:
    """The model rerun on each bootstrap replicate (row of ``factors``): its max_gpus (searched
    from the estimate's) and its AU at every count the estimate lists."""
    listed = [g for g, _ in est.au_at]
    maxes: list[int] = []
    aus = np.empty((len(factors), len(listed)))
    for i, row in enumerate(factors):
        replica = [scaled_point(p, float(f)) for p, f in zip(points, row, strict=True)]
        cache: dict[int, float] = {}

        def au_of(n: int, replica: list[SweepPoint] = replica, cache: dict = cache) -> float:
            if n not in cache:
                cache[n] = _simulate(params, replica, n, steps, sim_seed)[0]
            return cache[n]

        maxes.append(max_gpus_for(au_of, est.threshold, start=max(est.max_gpus, 1))[0])
        aus[i] = [au_of(g) for g in listed]
    return maxes, aus


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
