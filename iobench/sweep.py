"""The dataset-read concurrency sweep, read from a result, as the starvation model's input.

A ``dataset-read-r<N>`` or ``dataset-shuffled-r<N>`` phase (``iobench run dataset-read``, the
loader's storage probe, qualify) becomes one ``SweepPoint``: its bandwidth, its files per
second (whole-file reads: one op per file) and its per-file latency quantiles, taken from the
phase's mergeable histogram. In a many-client run (torchrun) the phase is the aggregate of
every rank's and its level is the readers of all ranks together: ``N`` per rank × ranks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .errors import UsageError
from .results import PhaseResult, RunResult
from .starvation import MAX_MODEL_GPUS, SweepPoint
from .stats import Histogram

PHASE_RE = re.compile(r"^dataset-(read|shuffled)-r(\d+)$")
#: Intervals of a phase's series needed to judge how steady its completions were.
MIN_INTERVALS = 5
#: The quantile grid a sweep point carries: q = 0, 0.01, …, 1.
QUANTILES = [i / 100 for i in range(101)]


def sweep_point(phase: PhaseResult, readers: int | None = None) -> SweepPoint:
    """One sweep level from a whole-file read phase (readers of every rank together)."""
    if readers is None:
        readers = total_readers(phase)
    quantiles: list[float] = []
    if phase.histogram:
        hist = Histogram.from_dict(phase.histogram)
        if hist.count:
            quantiles = hist.quantiles_s(QUANTILES)
            # bucket midpoints clamped to min/max keep the order; make it exact for the model
            for i in range(1, len(quantiles)):
                quantiles[i] = max(quantiles[i], quantiles[i - 1])
    counts, interval = completions(phase)
    return SweepPoint(
        readers=readers,
        bandwidth_bps=float(phase.bandwidth_bps),
        files_per_s=float(phase.iops),
        latency_quantiles=quantiles,
        completions=counts,
        interval_s=interval,
    )


def total_readers(phase: PhaseResult) -> int:
    """Concurrent readers of a ``dataset-*-r<N>`` phase over every rank (N × ranks)."""
    m = PHASE_RE.match(phase.name)
    if not m:
        return int(phase.concurrency)
    return int(m.group(2)) * max(int(phase.params.get("ranks", 1) or 1), 1)


def completions(phase: PhaseResult) -> tuple[tuple[float, ...], float]:
    """Files completed per series interval, the first and last (partly outside the run) left
    out, and the interval; empty when fewer than MIN_INTERVALS remain."""
    ops = [float(x) for x in (phase.ops_series or [])][1:-1]
    interval = float(phase.series_interval_s or 0)
    if len(ops) < MIN_INTERVALS or interval <= 0:
        return (), 0.0
    return tuple(round(x * interval, 6) for x in ops), interval


def sweep_from_phases(phases: Sequence[PhaseResult], prefer: str = "shuffled") -> list[SweepPoint]:
    """Sweep points from every usable ``dataset-*-r<N>`` phase, one per reader count.

    At a level measured in both orders the ``prefer`` one is used (shuffled, as a DataLoader
    reads); phases that failed or moved nothing are skipped.
    """
    by_level: dict[int, PhaseResult] = {}
    for p in phases:
        m = PHASE_RE.match(p.name)
        if not m or p.status == "failed" or p.bandwidth_bps <= 0 or p.ops <= 0:
            continue
        level = total_readers(p)
        have = by_level.get(level)
        if have is None or (m.group(1) == prefer and not have.name.startswith(f"dataset-{prefer}")):
            by_level[level] = p
    return [sweep_point(by_level[r], r) for r in sorted(by_level)]


def sweep_from_run(run: RunResult) -> list[SweepPoint]:
    """The sweep a result holds; UsageError when it has none."""
    points = sweep_from_phases(run.phases)
    if not points:
        names = ", ".join(p.name for p in run.phases) or "none"
        raise UsageError(
            f"result {run.run_id} has no dataset-read sweep (phases: {names})",
            hint="pass a result of `iobench run dataset-read`, `iobench loader` or qualify",
        )
    return points


def describe(points: Sequence[SweepPoint]) -> list[dict[str, Any]]:
    """A short JSON-able summary of a sweep (readers, bandwidth, files/s, p50/p99 latency)."""
    out = []
    for p in points:
        q = p.latency_quantiles
        out.append(
            {
                "readers": p.readers,
                "bandwidth_bps": p.bandwidth_bps,
                "files_per_s": p.files_per_s,
                "latency_p50_s": q[50] if len(q) == 101 else None,
                "latency_p99_s": q[99] if len(q) == 101 else None,
            }
        )
    return out


def gpus_list(n: int) -> list[int]:
    """Accelerator counts to show up to ``n``: every count up to 16, else powers of two and n."""
    if n < 1:
        raise UsageError(f"--gpus must be at least 1, got {n}")
    if n > MAX_MODEL_GPUS:
        raise UsageError(
            f"--gpus {n} is beyond the model's range (at most {MAX_MODEL_GPUS:,} accelerators)",
            hint=f"give --gpus {MAX_MODEL_GPUS} or fewer",
        )
    if n <= 16:
        return list(range(1, n + 1))
    out, k = [], 1
    while k < n:
        out.append(k)
        k *= 2
    return [*out, n]


def estimate_from_result(
    result: str,
    profile: str,
    *,
    sets: list[str] | None = None,
    gpus: int | None = None,
    threshold: str | float | None = None,
) -> tuple[Any, list[SweepPoint], RunResult]:
    """``iobench estimate``: the starvation estimate for ``profile`` from a saved result's sweep.

    The loader's per-step overhead and decode cost come from the result's calibration when it
    is a loader run of the same profile; otherwise they are taken as 0 (the basis says so).
    Returns (starvation.Estimate, the sweep, the source run).
    """
    from . import results as results_mod
    from .spec import load_profile, parse_overrides
    from .units import parse_percent

    prof = load_profile(profile, parse_overrides(sets))
    if prof.compute_s <= 0:
        raise UsageError(
            f"profile {prof.name}: compute_s is 0, so every AU is 0",
            hint="set a compute time with --set compute_s=...",
        )
    thr = prof.au_min if threshold is None else parse_percent(threshold, what="--threshold")
    if not 0 < thr <= 1:
        raise UsageError(f"--threshold must be above 0 and at most 100%, got {threshold!r}")
    listed = gpus_list(gpus) if gpus is not None else None
    run = results_mod.load(result)
    sweep = sweep_from_run(run)
    calib = (
        (run.loader or {}).get("calibration")
        if (run.loader or {}).get("profile") == prof.name
        else None
    )
    est = estimate_for(prof, sweep, listed, thr, calib, f"result {run.run_id}")
    return est, sweep, run


def estimate_for(
    prof: Any,
    sweep: Sequence[SweepPoint],
    gpus: list[int] | None,
    threshold: float,
    calib: dict[str, Any] | None,
    source: str,
) -> Any:
    """The starvation estimate for a profile from a sweep, with the basis spelled out."""
    from . import starvation as sv

    params = sv.LoaderParams(
        batch_size=prof.batch_size,
        sample_bytes=prof.sample_size,
        samples_per_file=prof.samples_per_file,
        compute_s=prof.compute_s,
        workers=prof.workers,
        prefetch=prof.prefetch,
        decode_s_per_sample=float(calib["decode_s_per_sample"]) if calib else 0.0,
        step_overhead_s=float(calib["overhead_s"]) if calib else 0.0,
    )
    est = sv.estimate(params, sweep, gpus, threshold, profile=prof.name)
    text = f"sweep from {source} ({', '.join(f'{p.readers}' for p in sweep)} readers)"
    if calib:
        text += "; loader overhead and decode from that run's calibration"
    return sv.Estimate(
        demand_bps_per_gpu=est.demand_bps_per_gpu,
        au_at=est.au_at,
        max_gpus=est.max_gpus,
        threshold=est.threshold,
        basis=f"{est.basis}; {text}",
        profile=est.profile,
    )
