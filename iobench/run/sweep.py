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
from dataclasses import replace
from typing import Any

from ..core.errors import UsageError
from ..core.units import format_bytes
from ..model.starvation_inputs import MAX_MODEL_GPUS, SweepPoint
from ..result.file import PhaseResult, RunResult
from ..result.stats import Histogram
from ..result.steady import indicative_reason

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
        bandwidth_bps=float(phase.bandwidth_bps or 0.0),
        files_per_s=float(phase.iops or 0.0),
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
    by_level = sweep_phases(phases, prefer)
    return [sweep_point(by_level[r], r) for r in sorted(by_level)]


def sweep_phases(phases: Sequence[PhaseResult], prefer: str = "shuffled") -> dict[int, PhaseResult]:
    """The phase each sweep level comes from (``sweep_from_phases``' choice), by readers."""
    by_level: dict[int, PhaseResult] = {}
    for p in phases:
        m = PHASE_RE.match(p.name)
        if not m or p.status == "failed" or not (p.bandwidth_bps or 0) > 0 or p.ops <= 0:
            continue
        level = total_readers(p)
        have = by_level.get(level)
        if have is None or (m.group(1) == prefer and not have.name.startswith(f"dataset-{prefer}")):
            by_level[level] = p
    return by_level


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
    from ..core.units import parse_percent
    from ..result import file as results_mod
    from ..spec.workload import load_profile, parse_overrides

    prof = load_profile(profile, parse_overrides(sets))
    if prof.compute_s <= 0:
        raise UsageError(
            f"profile {prof.name}: compute_s is 0, so every AU is 0",
            hint="set a compute time with --set compute_s=...",
        )
    thr = prof.au_min if threshold is None else parse_percent(threshold, what="--min-au")
    if not 0 < thr <= 1:
        raise UsageError(f"--min-au must be above 0 and at most 100%, got {threshold!r}")
    listed = gpus_list(gpus) if gpus is not None else None
    run = results_mod.load(result)
    sweep = sweep_from_run(run)
    calib = (
        (run.loader or {}).get("calibration")
        if (run.loader or {}).get("profile") == prof.name
        else None
    )
    est = estimate_for(
        prof, sweep, listed, thr, calib, f"result {run.run_id}",
        file_bytes=sweep_file_bytes(run.phases),
        indicative_notes=indicative_sweep(run.phases, sweep),
        loader=run.loader if calib else None,
    )  # fmt: skip
    return est, sweep, run


def estimate_for(
    prof: Any,
    sweep: Sequence[SweepPoint],
    gpus: list[int] | None,
    threshold: float,
    calib: dict[str, Any] | None,
    source: str,
    *,
    file_bytes: float | None = None,
    indicative_notes: Sequence[str] = (),
    loader: dict[str, Any] | None = None,
) -> Any:
    """The starvation estimate for a profile from a sweep, with the basis spelled out, its
    bootstrap interval, and warnings: indicative sweep phases, a sweep of files of another
    size than the profile's (``file_bytes``: the sweep's mean), storage unstable meanwhile,
    and a ``loader`` (result.json's block of the same run) whose measured AU the estimate does
    not reproduce."""
    from ..model import starvation as sv
    from ..model.interval import unstable_reasons, with_interval

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
    warnings = list(indicative_notes)
    mismatch = size_mismatch(file_bytes, prof.sample_size * prof.samples_per_file, prof.name)
    if mismatch:
        warnings.append(mismatch)
    est = replace(est, basis=f"{est.basis}; {text}", warnings=tuple(warnings))
    est = with_interval(params, sweep, est)
    unstable = unstable_reasons(est.interval) if est.interval is not None else []
    if unstable:
        note = (
            f"unstable: the storage was unstable during the sweep ({'; '.join(unstable)}): "
            "the interval covers this run's variability, not another run's"
        )
        est = replace(est, warnings=(*est.warnings, note))
    contended = cpu_contended(calib)
    if contended:
        est = replace(est, warnings=(*est.warnings, contended))
    disagreement = model_disagreement(est, loader)
    if disagreement:
        est = replace(est, warnings=(*est.warnings, disagreement))
    return est


#: The model's AU may differ from the loader's measured AU at the same accelerator count by
#: this much beyond the interval before the measurements count as inconsistent (the model is
#: within ~2 points of a real DataLoader when nothing changes: reference/starvation-notes.md).
MODEL_TOLERANCE = 0.05


def model_disagreement(est: Any, loader: dict[str, Any] | None) -> str | None:
    """A warning when the loader measured an AU, at an accelerator count the estimate lists,
    outside the estimate's band there by more than MODEL_TOLERANCE."""
    if not loader or loader.get("au") is None or not loader.get("gpus"):
        return None
    gpus, au = int(loader["gpus"]), float(loader["au"])
    point = dict(est.au_at).get(gpus)
    if point is None:
        return None
    band = {g: (lo, hi) for g, lo, hi in est.interval.au_band} if est.interval else {}
    lo, hi = band.get(gpus, (point, point))
    if lo - MODEL_TOLERANCE <= au <= hi + MODEL_TOLERANCE:
        return None
    return (
        f"unstable: the loader measured AU {au:.1%} at {gpus} GPU(s) where this estimate gives "
        f"{point:.1%} ({lo:.1%}–{hi:.1%}), more than {MODEL_TOLERANCE:.0%} apart: the host or "
        "the storage changed between the measurements the estimate rests on"
    )


#: The loader calibration's sleeps may overshoot by this share of the sleep before the host's
#: CPUs count as contended while it measured (its overhead and decode terms then vary).
CONTENDED_OVERSHOOT = 0.2


def cpu_contended(calib: dict[str, Any] | None) -> str | None:
    """A warning when the loader calibration's timed sleeps overshot (CPU contention)."""
    if not calib:
        return None
    sleep, over = calib.get("sleep_s"), calib.get("sleep_overshoot_s")
    if not sleep or over is None or over <= CONTENDED_OVERSHOOT * sleep:
        return None
    return (
        f"unstable: the host's CPUs were contended during the loader calibration (sleeps of "
        f"{sleep * 1e3:.1f} ms overshot by {over * 1e3:.1f} ms): its overhead "
        f"({calib.get('overhead_s', 0) * 1e3:.1f} ms/step) and decode terms are taken as "
        "measured, not resampled, and may not repeat"
    )


#: The sweep's mean file size and the profile's file size may differ by this factor before the
#: estimate says that its per-sample times were scaled from files of another size.
SIZE_MISMATCH_FACTOR = 2.0


def size_mismatch(file_bytes: float | None, profile_file_bytes: float, profile: str) -> str | None:
    """A warning when the sweep read files of another size than the profile's (or None)."""
    if not file_bytes or file_bytes <= 0:
        return None
    ratio = profile_file_bytes / file_bytes
    if 1 / SIZE_MISMATCH_FACTOR <= ratio <= SIZE_MISMATCH_FACTOR:
        return None
    return (
        f"the sweep read {format_bytes(file_bytes)} files; {profile} reads "
        f"{format_bytes(profile_file_bytes)} files ({ratio:.3g}× over the "
        f"{SIZE_MISMATCH_FACTOR:g}× allowed): the prediction assumed per-file time scales with "
        "size at the measured bandwidth (transfer-dominated), which ignores per-file latency "
        "and the bandwidth files of that size get; measure the right size with "
        f"`iobench qualify TARGET --profile {profile}` or `iobench loader TARGET --profile {profile}`"
    )


def sweep_file_bytes(phases: Sequence[PhaseResult]) -> float | None:
    """Mean bytes per file the sweep's phases read (None when they read none)."""
    files = sum(p.ops for p in phases if PHASE_RE.match(p.name) and p.ops > 0)
    nbytes = sum(p.bytes for p in phases if PHASE_RE.match(p.name) and p.ops > 0)
    return nbytes / files if files else None


def indicative_sweep(phases: Sequence[PhaseResult], sweep: Sequence[SweepPoint]) -> list[str]:
    """One note per phase the sweep used whose figures are indicative
    (``stats.indicative_reason``)."""
    levels = {p.readers for p in sweep}
    notes = []
    for level, p in sorted(sweep_phases(phases).items()):
        if level in levels:
            why = indicative_reason(p)
            if why and p.steady is False:
                # not steady within its limit: the storage's rate drifted while it was measured
                notes.append(f"indicative, storage unstable: {p.name} {why}")
            elif why:
                notes.append(f"indicative: {p.name} {why}")
    return notes
