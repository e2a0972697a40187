"""Why the GPUs wait, and what would fix it: the starvation model over a pipeline's measured terms.

Pure: no I/O, no torch. The input (``PipelineTerms``) is what a loader run over the user's own
dataset measured: per sample, the storage read time and the decode CPU time; per batch, the
collate time; the step's compute; the loader's shape (batch, workers, GPUs) and the host's CPU
cores; the dataset's layout (files, bytes, samples per file); the storage's file-open/metadata
rate. ``diagnose`` answers "what would it take": the AU now, and the AU after each change,
each by the starvation model (``starvation.predict_au``: the simulated torch DataLoader), then
names the smallest change that reaches the threshold.

How the measured terms become the model's inputs (``_model``):

- storage: ``R0`` readers of the measured run read at once on average (Little's law: the
  delivered bandwidth × ``read_s`` ÷ sample bytes, rounded, 1 to ``gpus × max(workers, 1)``),
  each taking ``read_s`` per sample, so the storage delivers ``R0 × sample ÷ read_s``; beyond
  ``R0`` readers it is assumed saturated (flat), below it each reader keeps its rate
  (``starvation.bandwidth_at`` over that one level). Conservative when the storage had
  headroom: more workers then read no faster in the model than they would.
- per-file cost: ``open_s = R0 ÷ open_rate`` seconds per file (Little's law at the measured
  concurrency) is the part of each file's read that does not depend on its size; a sample pays
  ``open_s ÷ samples_per_file`` of it, the rest of ``read_s`` is transfer. A file of at most
  one read request (``REQUEST_BYTES``) costs a request whatever its size: all its read time is
  per-file cost, and packed into shards it is read in requests of ``REQUEST_BYTES``, each taken
  to cost what a small file's did (storage bound by its request rate, as an IOPS limit is).
- CPU: a worker's decode plus its share of the collate (``decode + collate ÷ batch``) is CPU
  time; the ``gpus × workers`` workers can take no more than the cores left beside the main
  processes (``main_cores_per_gpu`` each, 1 by default), so a worker's cycle (read + CPU) is
  at least ``gpus × workers × cpu ÷ free cores``, its CPU phase stretched to fill it (workers
  past the cores then add nothing); times the host's other load as measured (the decode's
  wall ÷ CPU beyond what the workers' own count explains). The main loop's measured time
  per step (``step_overhead_s``) is paid in every configuration.

The changes, in the order of effort ``diagnose`` ranks them (the first that reaches the
threshold at the low end of its interval is the advice; within a kind, the smallest amount):

1. ``workers``: more loader workers per GPU (a setting);
2. ``shards``: the files packed into shards of ``shard_bytes`` (a one-off rewrite of the data:
   the per-file cost is paid once per shard);
3. ``cache``: a local cache tier (the second epoch on reads at the measured cache speed; the
   figure is the mean over ``epochs``, the first epoch at the storage's speed);
4. ``cores``: more CPU cores on the host (a worker per core added);
5. ``bandwidth``: N× the storage bandwidth (the transfer part of each read ÷ N; the per-file
   cost stays).

Every figure is an estimate with its basis; where the terms carry a range (``*_range``, e.g. an
interval of the measured mean) the AU carries one too: the model at the range's pessimistic
and optimistic ends (the AU only falls as read, decode and collate times grow).

Only a change that helps is listed: one whose AU rises beyond the run's own interval (the
``now`` scenario's range: the model of the run as measured, at its terms' ends) by more than
:data:`MIN_GAIN` (``helps_beyond``). The others (more workers on a storage-bound run, more bandwidth on a CPU-bound
one) are kept apart, as ``no_help``: "does not help". A shard never exceeds the dataset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import UsageError
from ..core.units import format_bytes, format_rate, format_seconds
from . import starvation as sv
from .diagnosis_terms import RANGES, REQUEST_BYTES, PipelineTerms

#: The default pass line: the AU a training job should reach (MLPerf Storage's).
DEFAULT_THRESHOLD = 0.90
#: The default shard size the ``shards`` change packs small files into.
DEFAULT_SHARD_BYTES = 256 << 20
#: The ``shards`` change is considered only for files smaller than this share of a shard.
SHARD_MIN_GAIN = 4
#: The bandwidth factors ``bandwidth`` tries, smallest first.
BANDWIDTH_FACTORS = (1.25, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0)
#: The most loader workers per GPU ``workers`` tries.
MAX_WORKERS = 64
#: The most cores (× the measured ones) ``cores`` tries.
MAX_CORE_FACTOR = 8
#: The simulated steps per figure when the run's own are not given (one seed: the model's
#: inputs carry no per-file spread), at least STEADY_BATCHES × the batches the workers hold, so
#: the prefetch filled before the first step does not lift a steady-state figure.
SIM_STEPS = 300
STEADY_BATCHES = 20
#: The model's AU of the measured configuration may miss the measured AU by this much before
#: the diagnosis warns that its terms do not explain the run.
FIT_TOLERANCE = 0.05
#: When no amount of a change reaches the threshold, the smallest within this of the best AU
#: tried is named (e.g. workers past the cores: only their reads still overlap).
NEAR_BEST = 0.02
#: The epochs the ``cache`` change's mean AU is taken over.
DEFAULT_EPOCHS = 5
#: A change helps when its AU rises by more than this beyond the high end of the run's own
#: interval (half a point: the AU is shown in whole points, and two configurations that the
#: simulation gives within it are the same figure).
MIN_GAIN = 0.005

KINDS = ("workers", "shards", "cache", "cores", "bandwidth")


@dataclass(frozen=True)
class Scenario:
    """One configuration's estimated AU: ``kind`` (``now`` or one of KINDS), the change in words,
    its amount (workers, bytes, cores, factor; 0 for ``now``), the AU with its range, the bound."""

    kind: str
    change: str
    amount: float
    au: float
    au_low: float
    au_high: float
    bound: str
    threshold: float
    basis: str

    @property
    def reaches(self) -> bool:
        """Whether the AU reaches the threshold even at the low end of its range."""
        return self.au_low >= self.threshold

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "change": self.change,
            "amount": self.amount,
            "au": self.au,
            "au_low": self.au_low,
            "au_high": self.au_high,
            "bound": self.bound,
            "reaches_threshold": self.reaches,
            "estimate": True,
            "basis": self.basis,
        }


@dataclass(frozen=True)
class Diagnosis:
    """The AU now, the best of each change that helps (``options``), those that do not
    (``no_help``: AU within the run's own interval), and the advice (None: no single change
    reaches the threshold)."""

    terms: PipelineTerms
    threshold: float
    now: Scenario
    options: tuple[Scenario, ...]
    advice: Scenario | None
    not_estimated: tuple[str, ...] = field(default=())
    warnings: tuple[str, ...] = field(default=())
    no_help: tuple[Scenario, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "terms": self.terms.to_dict(),
            "now": self.now.to_dict(),
            "options": [s.to_dict() for s in self.options],
            "no_help": [s.to_dict() for s in self.no_help],
            "advice": self.advice.to_dict() if self.advice else None,
            "not_estimated": list(self.not_estimated),
            "warnings": list(self.warnings),
        }


# --------------------------------------------------------------------------------------------
# The model of one configuration


@dataclass(frozen=True)
class _Config:
    """A configuration to estimate: the measured one with some terms changed."""

    workers: int
    cores: int
    samples_per_file: int
    transfer_factor: float = 1.0  # the transfer part of a read ÷ this
    read_s: float | None = None  # replaces the storage read entirely (the cache tier)


def _read_s(t: PipelineTerms, cfg: _Config, read_s: float) -> float:
    """Per-sample read time in ``cfg``: per-file cost over its samples per file, plus transfer."""
    if cfg.read_s is not None:
        return cfg.read_s
    per_file = t.open_s_per_file * read_s / t.read_s_per_sample
    transfer = max(read_s - per_file / t.samples_per_file, 0.0)
    if t.small_files and cfg.samples_per_file > t.samples_per_file:
        # a shard is read in requests of REQUEST_BYTES, each taken to cost what a small
        # file's one request cost (storage bound by its request rate, as an IOPS limit is)
        transfer = per_file * t.sample_bytes / REQUEST_BYTES
    return per_file / cfg.samples_per_file + transfer / cfg.transfer_factor


def _model(
    t: PipelineTerms, cfg: _Config, read_s: float, decode_s: float, collate_s: float
) -> tuple[sv.LoaderParams, sv.SweepPoint, float]:
    """(loader params, the one storage level, the CPU stretch) of ``cfg`` at these times."""
    read = _read_s(t, cfg, read_s)
    cpu = decode_s + collate_s / t.batch_size
    stretch = _own_stretch(t, cfg, read, cpu) * external_contention(t)
    sample = t.sample_bytes
    params = sv.LoaderParams(
        batch_size=t.batch_size,
        sample_bytes=sample,
        samples_per_file=cfg.samples_per_file,
        compute_s=t.compute_s,
        workers=cfg.workers,
        prefetch=t.prefetch,
        decode_s_per_sample=cpu * stretch,
        step_overhead_s=t.step_overhead_s,
    )
    r0 = t.active_readers
    point = sv.SweepPoint(
        readers=r0,
        bandwidth_bps=r0 * sample / read,
        files_per_s=r0 / (read * cfg.samples_per_file),
        latency_quantiles=[],
    )
    return params, point, stretch


def _own_stretch(t: PipelineTerms, cfg: _Config, read: float, cpu: float) -> float:
    """How much the workers' CPU time stretches on the cores left beside the main loops
    (``free``): ``gpus × workers`` workers, each cycling through a read and its CPU time, can
    take no more than ``free`` cores, so a worker's cycle is at least ``gpus × workers × cpu ÷
    free`` (the CPU phase then stretched to fill it), at least 1."""
    free = max(cfg.cores - t.gpus * t.main_cores_per_gpu, 1) if cfg.workers > 0 else cfg.cores
    if cpu <= 0:
        return 1.0
    cycle = t.gpus * max(cfg.workers, 1) * cpu / free
    return max(1.0, (cycle - read) / cpu)


def external_contention(t: PipelineTerms) -> float:
    """The host's other load, measured: the decode's wall ÷ CPU time over the stretch the
    workers' own count explains in the measured run, at least 1 (1: not measured). Every
    configuration keeps it (the other load is taken to stay)."""
    wall, cpu = t.decode_wall_s_per_sample, t.decode_s_per_sample
    if wall is None or cpu <= 0:
        return 1.0
    own = _own_stretch(t, _base(t), t.read_s_per_sample, cpu + t.collate_s_per_batch / t.batch_size)
    return max(1.0, wall / cpu / own)


def _au(t: PipelineTerms, cfg: _Config, ends: str) -> tuple[float, sv.Prediction, float]:
    """(AU, the model's prediction, CPU stretch) at the point or one end of the terms' ranges."""
    pick = {"point": 0, "low": 2, "high": 1}[ends]  # AU low ⇐ times high

    def term(value: float, rng: tuple[float, float] | None) -> float:
        return value if rng is None or pick == 0 else (rng[0] if pick == 1 else rng[1])

    read = max(term(t.read_s_per_sample, t.read_range), 1e-12)
    decode = term(t.decode_s_per_sample, t.decode_range)
    collate = term(t.collate_s_per_batch, t.collate_range)
    overhead = term(t.step_overhead_s, t.overhead_range)
    params, point, stretch = _model(
        replace(t, step_overhead_s=overhead), cfg, read, decode, collate
    )
    steps = t.steps_per_epoch or max(SIM_STEPS, STEADY_BATCHES * cfg.workers * t.prefetch)
    pred = sv.predict_au(params, [point], t.gpus, steps=steps, seed=0)
    return pred.au, pred, stretch


def _has_range(t: PipelineTerms) -> bool:
    return any(getattr(t, r) is not None for r in RANGES)


def _scenario(
    t: PipelineTerms, cfg: _Config, kind: str, change: str, amount: float, threshold: float
) -> Scenario:
    au, pred, stretch = _au(t, cfg, "point")
    lo, hi = (_au(t, cfg, "low")[0], _au(t, cfg, "high")[0]) if _has_range(t) else (au, au)
    read = _read_s(t, cfg, t.read_s_per_sample)
    basis = (
        f"estimate: {change}; per sample: read {format_seconds(read)}, CPU "
        f"{format_seconds(t.decode_s_per_sample + t.collate_s_per_batch / t.batch_size)}"
        f" × {stretch:.2f} (CPU contention: {max(cfg.workers, 1) * t.gpus} workers on "
        f"{cfg.cores} cores, × {external_contention(t):.2f} the host's other load as "
        f"measured); main loop {format_seconds(t.step_overhead_s)}/step measured "
        f"beside compute; {pred.basis}"
    )
    if _has_range(t):
        basis += "; AU range: the model at the pessimistic and optimistic ends of the terms' ranges"
    else:
        basis += "; no range: the terms carry no spread"
    return Scenario(
        kind=kind,
        change=change,
        amount=amount,
        au=au,
        au_low=min(lo, au),
        au_high=max(hi, au),
        bound=pred.bound,
        threshold=threshold,
        basis=basis,
    )


def _base(t: PipelineTerms) -> _Config:
    return _Config(workers=t.workers, cores=t.cpu_cores, samples_per_file=t.samples_per_file)


# --------------------------------------------------------------------------------------------
# The changes


def _search(candidates: Sequence[tuple[_Config, str, float]], make: Any) -> Scenario | None:
    """The first candidate (smallest first) whose scenario reaches the threshold; when none
    does, the smallest one within NEAR_BEST of the best AU tried (more of a change that
    hardly helps — workers beyond the cores they can use — is not named)."""
    tried = []
    for cfg, change, amount in candidates:
        s = make(cfg, change, amount)
        if s.reaches:
            return s
        tried.append(s)
    if not tried:
        return None
    best = max(s.au for s in tried)
    return next(s for s in tried if s.au >= best - NEAR_BEST)


def _workers(t: PipelineTerms, make: Any) -> Scenario | None:
    w0 = t.workers
    cands = [
        (replace(_base(t), workers=w), f"{w} loader workers per GPU (now {w0})", float(w))
        for w in range(w0 + 1, max(MAX_WORKERS, w0) + 1)
    ]
    return _search(cands, make)


def _cores(t: PipelineTerms, make: Any) -> Scenario | None:
    c0 = t.cpu_cores
    counts = sorted({c0 + 1, c0 + 2, math.ceil(1.5 * c0), *(c0 * k for k in (2, 3, 4, 6, 8))})
    cands = []
    for c in counts:
        if c <= c0 or c > MAX_CORE_FACTOR * c0:
            continue
        w = max(t.workers, (c - t.gpus) // t.gpus)
        cands.append(
            (
                replace(_base(t), cores=c, workers=w),
                f"{c} CPU cores (now {c0}) with {w} loader workers per GPU",
                float(c),
            )
        )
    return _search(cands, make)


def _bandwidth(t: PipelineTerms, make: Any) -> Scenario | None:
    cands = [
        (replace(_base(t), transfer_factor=f), f"{f:g}× the storage bandwidth", f)
        for f in BANDWIDTH_FACTORS
    ]
    return _search(cands, make)


def _shards(t: PipelineTerms, make: Any, shard_bytes: int) -> Scenario | str:
    if t.open_rate_per_s <= 0 and not t.small_files:
        return "shards: not estimated (no file-open/metadata rate was measured)"
    # a shard holds at most the whole dataset: never a shard larger than the data
    whole = shard_bytes >= t.total_bytes
    shard = min(shard_bytes, t.total_bytes)
    spf = t.files * t.samples_per_file if whole else max(1, int(shard // t.sample_bytes))
    spf = min(spf, t.files * t.samples_per_file)
    what = f"the whole {format_bytes(shard)} dataset in one shard" if whole else (
        f"a {format_bytes(shard)} shard"
    )  # fmt: skip
    if t.mean_file_bytes * SHARD_MIN_GAIN > shard or spf <= t.samples_per_file:
        return (
            f"shards: not considered (files of {format_bytes(t.mean_file_bytes)} are already "
            f"over 1/{SHARD_MIN_GAIN} of {what})"
        )
    if t.small_files:
        cost = (
            f"files of {format_bytes(t.mean_file_bytes)}: one request each, the whole "
            f"{format_seconds(t.open_s_per_file)} read per-file cost; shards read in "
            f"{format_bytes(REQUEST_BYTES)} requests at that cost each"
        )
    else:
        cost = (
            f"per-file cost {format_seconds(t.open_s_per_file)} = {t.readers} readers ÷ "
            f"{t.open_rate_per_s:,.0f} files/s, {t.open_share:.0%} of each read now"
        )
    into = f"one {format_bytes(shard)} shard, the whole dataset" if whole else (
        f"{format_bytes(shard)} shards"
    )  # fmt: skip
    change = (
        f"files packed into {into} ({spf:,} samples per shard, "
        f"now {t.samples_per_file:,} per file; {cost})"
    )
    return make(replace(_base(t), samples_per_file=spf), change, float(shard))


def _cache(t: PipelineTerms, threshold: float, epochs: int, now: Scenario) -> Scenario | str:
    c = t.cache_read_s_per_sample
    if c is None:
        return "cache: not estimated (no read from a local cache tier was measured)"
    cap = t.total_bytes if t.cache_bytes is None else min(t.cache_bytes, t.total_bytes)
    hit = cap / t.total_bytes
    read = hit * c + (1 - hit) * t.read_s_per_sample
    cfg = replace(_base(t), read_s=read)
    warm = _scenario(t, cfg, "cache", "", 0.0, threshold)

    def mean(first: float, later: float) -> float:
        return epochs / (1 / max(first, 1e-9) + (epochs - 1) / max(later, 1e-9))

    change = (
        f"a local cache tier holding {hit:.0%} of the dataset ({format_bytes(cap)}): epochs 2+ "
        f"read at {format_seconds(read)} per sample (cache measured at {format_seconds(c)}, "
        f"misses at the storage's {format_seconds(t.read_s_per_sample)}); AU from epoch 2 "
        f"{warm.au:.3f}, over {epochs} epochs the first at today's {now.au:.3f}"
    )
    return replace(
        warm,
        change=change,
        amount=float(cap),
        au=mean(now.au, warm.au),
        au_low=mean(now.au_low, warm.au_low),
        au_high=mean(now.au_high, warm.au_high),
        basis=warm.basis.replace("estimate: ; ", f"estimate: {change}; ", 1),
    )


# --------------------------------------------------------------------------------------------
# The diagnosis


def diagnose(
    terms: PipelineTerms,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    shard_bytes: int = DEFAULT_SHARD_BYTES,
    epochs: int = DEFAULT_EPOCHS,
) -> Diagnosis:
    """The AU now and after each change (see the module docstring), and the smallest change
    that reaches ``threshold`` at the low end of its range (None when the AU already does, or
    no single change does)."""
    if not 0 < threshold <= 1:
        raise UsageError(f"threshold must be in (0, 1], got {threshold!r}")
    if shard_bytes < 1 or epochs < 1:
        raise UsageError("shard size and epochs must be at least 1")

    def maker(kind: str) -> Any:
        return lambda cfg, change, amount: _scenario(terms, cfg, kind, change, amount, threshold)

    now = _scenario(terms, _base(terms), "now", "as measured", 0.0, threshold)
    found: list[Scenario] = []
    skipped: list[str] = []
    for kind in KINDS:
        make = maker(kind)
        if kind == "workers":
            got: Scenario | str | None = _workers(terms, make)
        elif kind == "shards":
            got = _shards(terms, make, shard_bytes)
        elif kind == "cache":
            got = _cache(terms, threshold, epochs, now)
        elif kind == "cores" and any(s.kind == "workers" and s.reaches for s in found):
            got = "cores: not needed (more workers on today's cores reach the threshold)"
        elif kind == "cores":
            got = _cores(terms, make)
        else:
            got = _bandwidth(terms, make)
        if isinstance(got, str):
            skipped.append(got)
        elif got is not None:
            found.append(got)
    helps = tuple(s for s in found if helps_beyond(now, s))
    advice = None
    if not now.reaches:
        advice = next((s for s in helps if s.reaches), None)
    no_help = tuple(s for s in found if s not in helps)
    return Diagnosis(
        terms, threshold, now, helps, advice, tuple(skipped), _fit_warnings(terms, now), no_help
    )


def helps_beyond(now: Scenario, s: Scenario) -> bool:
    """Whether change ``s`` raises the AU beyond the run's own interval (``now``'s range; its
    point when the terms carry none) by more than :data:`MIN_GAIN`: its AU above the run's
    optimistic end, or its pessimistic end above the run's AU (an AU at its ceiling of 1 cannot
    rise above an optimistic end of 1, but a change can still lift its pessimistic end)."""
    return s.au > now.au_high + MIN_GAIN or s.au_low > now.au + MIN_GAIN


def _fit_warnings(t: PipelineTerms, now: Scenario) -> tuple[str, ...]:
    """When the model's AU of the measured configuration misses the measured AU by more than
    FIT_TOLERANCE: time per step the measured terms do not explain (or explain twice)."""
    au = t.measured_au
    if au is None or not 0 < au <= 1 or abs(now.au - au) <= FIT_TOLERANCE:
        return ()
    step, model_step = t.compute_s / au, t.compute_s / max(now.au, 1e-9)
    if au < now.au:
        return (
            f"the model's AU of the measured configuration ({now.au:.0%}) is "
            f"{100 * (now.au - au):.0f} points above the measured {au:.0%}: "
            f"{format_seconds(step - model_step)} per step are not in the measured terms "
            "(main-loop or hand-off time beyond the measured step overhead, CPU contention beyond "
            "the cores counted); "
            "every estimate here leaves it out, so they are optimistic",
        )
    return (
        f"the model's AU of the measured configuration ({now.au:.0%}) is "
        f"{100 * (au - now.au):.0f} points below the measured {au:.0%}: the terms count "
        f"{format_seconds(model_step - step)} per step more than the run spent (overlap the "
        "model does not see); the estimates here are pessimistic",
    )


def format_diagnosis(d: Diagnosis) -> str:
    """Multi-line text: the measured terms, the AU now, each change's AU, the advice."""
    t = d.terms
    cpu = t.decode_s_per_sample + t.collate_s_per_batch / t.batch_size

    def au_text(s: Scenario) -> str:
        rng = f" ({s.au_low:.0%}–{s.au_high:.0%})" if s.au_high > s.au_low else ""
        return f"{s.au:.0%}{rng}"

    lines = [
        f"Diagnosis (estimates by the starvation model; threshold AU {d.threshold:.0%})",
        f"  measured per sample: read {format_seconds(t.read_s_per_sample)} "
        f"({t.open_share:.0%} per-file cost), CPU {format_seconds(cpu)} (decode "
        f"{format_seconds(t.decode_s_per_sample)}, collate "
        f"{format_seconds(t.collate_s_per_batch)}/batch); compute "
        f"{format_seconds(t.compute_s)}/step, main loop {format_seconds(t.step_overhead_s)}"
        f"/step; {t.workers} workers × {t.gpus} GPU(s), "
        f"{t.cpu_cores} cores; storage read {format_rate(t.read_bandwidth_bps)}",
        f"  now: AU {au_text(d.now)}, bound: {d.now.bound}"
        + (f" (measured AU {t.measured_au:.0%})" if t.measured_au is not None else ""),
    ]
    for s in d.options:
        mark = "reaches" if s.reaches else "short of"
        lines.append(f"  {s.kind:>9}: AU {au_text(s)} {mark} the threshold — {s.change}")
    if d.no_help:
        lines.append(
            f"  does not help (no AU beyond the run's own {au_text(d.now)}): "
            + "; ".join(f"{s.kind}: {s.change} → AU {au_text(s)}" for s in d.no_help)
        )
    lines.extend(f"  {why}" for why in d.not_estimated)
    lines.extend(f"  warning: {w}" for w in d.warnings)
    if d.now.reaches:
        lines.append("  advice: none needed (the AU already reaches the threshold)")
    elif d.advice is None:
        lines.append("  advice: no single change reaches the threshold (combine them)")
    else:
        lines.append(f"  advice (estimate): {d.advice.change} → AU {au_text(d.advice)}")
    return "\n".join(lines)
