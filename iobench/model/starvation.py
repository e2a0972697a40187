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
from dataclasses import dataclass

import numpy as np

from ..core.errors import UsageError
from ..core.units import format_rate, format_seconds
from .starvation_inputs import (
    _DRAW_BUDGET,
    _STOP_FRACTION,
    COMPUTE_BOUND_TOLERANCE,
    MAX_GPUS,
    MAX_MODEL_GPUS,
    SIM_RANKS,
    Bound,
    Estimate,
    LoaderParams,
    Prediction,
    SweepPoint,
    _sorted_sweep,
    bandwidth_at,
    demand_bps,
    latency_quantiles_at,
)

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

    au_at = [(n, au_of(n)) for n in _gpus_listed(au_of, gpus_list, threshold)]
    max_gpus, search = max_gpus_for(au_of, threshold)
    return Estimate(
        demand_bps_per_gpu=demand_bps(params.batch_size, params.sample_bytes, params.compute_s),
        au_at=au_at,
        max_gpus=max_gpus,
        threshold=threshold,
        basis=_estimate_basis(params, sweep, steps, seed, search),
        profile=profile,
    )


def _gpus_listed(
    au_of: Callable[[int], float], gpus_list: Sequence[int] | None, threshold: float
) -> list[int]:
    """The counts an estimate lists: ``gpus_list``, or 1, 2, 4, … until the AU falls below
    0.75 × threshold (or ``MAX_GPUS``)."""
    if gpus_list is not None:
        listed = sorted({int(n) for n in gpus_list})
        if not listed or listed[0] < 1:
            raise UsageError("gpus list: every count must be at least 1")
        return listed
    listed = []
    n = 1
    while n <= MAX_GPUS:
        listed.append(n)
        if au_of(n) < _STOP_FRACTION * threshold:
            break
        n *= 2
    return listed


def _estimate_basis(
    params: LoaderParams, sweep: Sequence[SweepPoint], steps: int, seed: int, search: str
) -> str:
    """What an estimate was computed from: the simulated loader, the sweep, the search."""
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
    return basis


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
