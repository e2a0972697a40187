"""The typed blocks of result.json: ``host``, ``target``, ``workload``, ``engine``, ``loader``,
``estimate``, ``verdict`` and ``checkpoint``, each a frozen dataclass that renderings read by
attribute (``run.loader_block.au``) instead of ``.get("au")``.

The result file stays the source of truth: ``RunResult`` keeps each block as the dict it
writes, and ``Block.from_dict(d).to_dict()`` gives back exactly ``d`` (same keys, same order,
same values), so result.json is unchanged byte for byte. Reading is tolerant:

- a key an older iobench did not write is the field's default (None, or an empty tuple) and is
  not written back;
- a key this iobench does not know (a newer iobench's, or another block's addition such as the
  loader's ``existing`` dataset) lands in ``extra`` and is written back in its place;
- values are taken as they are (no coercion, which would change the file): a field typed
  ``float | None`` may hold what a hand-edited file holds, so renderings that print numbers keep
  checking them (``cells._is_num``).

A list of sub-blocks (``estimate.au_at``) holds a sub-block for each JSON object in it and the
element itself for anything else, again so that nothing is lost. Data layer: imports nothing
from iobench.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

B = TypeVar("B", bound="Block")

_SELF = ("extra", "_keys")  # the bookkeeping fields, never keys of the block


def _sub(cls: type[Block], **kw: Any) -> Any:
    """A field holding one sub-block (a JSON object) of type ``cls``."""
    return field(default=None, metadata={"block": cls}, **kw)


def _subs(cls: type[Block]) -> Any:
    """A field holding a list of sub-blocks of type ``cls`` (other elements kept as they are)."""
    return field(default=(), metadata={"blocks": cls})


def _seq() -> Any:
    """A field holding a JSON list of plain values, kept as a tuple."""
    return field(default=(), metadata={"seq": True})


@dataclass(frozen=True, kw_only=True)
class Block:
    """One JSON object of result.json, typed. Subclasses declare its keys as fields."""

    # the keys this iobench does not know, with their values, written back in their place
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)
    # the keys of the dict it was read from, in order (None when built in code: then every
    # field is written, in declaration order, and ``extra`` after them)
    _keys: tuple[str, ...] | None = field(default=None, repr=False, compare=False)

    _names: ClassVar[dict[type, tuple[dataclasses.Field[Any], ...]]] = {}

    @classmethod
    def _fields(cls) -> tuple[dataclasses.Field[Any], ...]:
        got = Block._names.get(cls)
        if got is None:
            got = tuple(f for f in dataclasses.fields(cls) if f.name not in _SELF)
            Block._names[cls] = got
        return got

    @classmethod
    def from_dict(cls: type[B], d: Mapping[str, Any] | None) -> B:
        """The block of ``d`` (an empty block for None or anything that is not an object)."""
        if not isinstance(d, Mapping):
            return cls()
        by_name = {f.name: f for f in cls._fields()}
        kwargs: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in d.items():
            f = by_name.get(key)
            if f is None:
                extra[key] = value
            else:
                kwargs[key] = _load(f, value)
        return cls(**kwargs, extra=extra, _keys=tuple(d))

    @property
    def empty(self) -> bool:
        """Read from an empty object (``{}``): a block with nothing in it."""
        return self._keys == ()

    def has(self, key: str) -> bool:
        """Whether the object read held ``key`` (even as null); a block built in code has
        every field. For the few renderings that tell a missing key from a null one."""
        if self._keys is None:
            return key in self.extra or any(f.name == key for f in self._fields())
        return key in self._keys

    def to_dict(self) -> dict[str, Any]:
        """The JSON object: exactly the one read (when read), else every field then ``extra``."""
        by_name = {f.name: f for f in self._fields()}
        order = self._keys if self._keys is not None else (*by_name, *self.extra)
        out: dict[str, Any] = {}
        for key in order:
            f = by_name.get(key)
            if f is not None:
                out[key] = _dump(f, getattr(self, key))
            elif key in self.extra:
                out[key] = copy.deepcopy(self.extra[key])
        return out


def _load(f: dataclasses.Field[Any], value: Any) -> Any:
    meta = f.metadata
    if "block" in meta and isinstance(value, Mapping):
        return meta["block"].from_dict(value)
    if "blocks" in meta and isinstance(value, list):
        sub = meta["blocks"]
        return tuple(sub.from_dict(v) if isinstance(v, Mapping) else v for v in value)
    if "seq" in meta and isinstance(value, list):
        return tuple(value)
    return value


def _dump(f: dataclasses.Field[Any], value: Any) -> Any:
    if isinstance(value, Block):
        return value.to_dict()
    meta = f.metadata
    if ("blocks" in meta or "seq" in meta) and isinstance(value, tuple):
        return [v.to_dict() if isinstance(v, Block) else copy.deepcopy(v) for v in value]
    return copy.deepcopy(value)


# --- the environment -------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class HostBlock(Block):
    """``host``: the client the run ran on (``results.host_info``)."""

    hostname: str | None = None
    cpu_model: str | None = None  # /proc/cpuinfo's model name; absent before issue 25
    cpus: int | None = None
    mem_bytes: int | None = None
    os: str | None = None
    machine: str | None = None
    python: str | None = None
    torch: str | None = None
    fio: str | None = None


@dataclass(frozen=True, kw_only=True)
class TargetBlock(Block):
    """``target``: where the run did its I/O (``target.Target.to_dict``)."""

    path_or_url: str | None = None
    fs_type: str | None = None
    fs_class: str | None = None
    kind: str | None = None  # "local" | "fsspec"
    mount_point: str | None = None
    mount_source: str | None = None
    free_bytes: int | None = None
    direct_io: bool | None = None
    direct_reason: str | None = None
    direct_align: int | None = None
    run_dir: str | None = None
    layout: Mapping[str, Any] | None = None  # Lustre/GPFS striping, as the tools report it

    @property
    def object_store(self) -> bool:
        return self.kind == "fsspec" or self.fs_class == "object"


@dataclass(frozen=True, kw_only=True)
class WorkloadBlock(Block):
    """``workload``: what ran (name, the spec's hash, its parameters)."""

    name: str | None = None
    path: str | None = None
    generator: str | None = None
    spec_hash: str | None = None
    params: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class EngineBlock(Block):
    """``engine``: the engine that did the I/O, and its version."""

    name: str | None = None
    version: str | None = None


# --- the loader and the estimate -------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class WaitBlock(Block):
    """Load-wait statistics (``loader.loop.wait_summary``); ``steps`` 0 when none was timed."""

    mean: float | None = None
    min: float | None = None
    p50: float | None = None
    p99: float | None = None
    max: float | None = None
    steps: int | None = None


@dataclass(frozen=True, kw_only=True)
class CpuBlock(Block):
    """``client_cpu`` (``cpu.usage``): the client's CPU use between two samples."""

    cpu_s: float | None = None
    self_s: float | None = None
    children_s: float | None = None
    wall_s: float | None = None
    cpus: int | None = None
    share: float | None = None  # 0..1 of wall x usable CPUs; None without wall time
    host_share: float | None = None  # 0..1: the host's CPUs busy, every process (/proc/stat)


@dataclass(frozen=True, kw_only=True)
class DatasetBlock(Block):
    """``loader.dataset``: the files the loader read."""

    format: str | None = None
    files: int | None = None
    samples: int | None = None
    samples_per_file: int | None = None
    bytes: int | None = None


@dataclass(frozen=True, kw_only=True)
class EpochBlock(Block):
    """One epoch of one rank (``loader.loop``); the other per-epoch figures stay in ``extra``."""

    epoch: int | None = None
    steps: int | None = None
    au: float | None = None
    load_wait_s: WaitBlock | None = _sub(WaitBlock)


@dataclass(frozen=True, kw_only=True)
class RankBlock(Block):
    """``loader.ranks[i]``: one rank's epochs."""

    rank: int | None = None
    host: str | None = None
    epochs: tuple[EpochBlock | Any, ...] = _subs(EpochBlock)


@dataclass(frozen=True, kw_only=True)
class AuPoint(Block):
    """AU at a number of accelerators: ``loader.points`` (measured) and ``estimate.au_at``
    (modelled, with the interval's ``low``/``high`` when there is one)."""

    gpus: int | None = None
    au: float | None = None
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True, kw_only=True)
class DuringWindowBlock(Block):
    """One window of ``loader.during_checkpoint``: before, during or after a save
    (``loader.during.during_block``); ``summary.without``/``during`` pool one kind's windows."""

    kind: str | None = None  # before | during | after (after save k: until save k+1 starts)
    checkpoint: int | None = None  # the save it is before, during or after (1 the first)
    start_s: float | None = None  # from the first timed step
    end_s: float | None = None
    seconds: float | None = None  # its time inside the timed steps (the longest rank's)
    steps: int | None = None  # steps whose midpoint lies in it, every rank's
    au: float | None = None  # compute inside it ÷ its time, mean over ranks
    load_wait_s: WaitBlock | None = _sub(WaitBlock)
    read_bps: float | None = None  # its steps' batch bytes ÷ its time, summed over ranks
    beside_bps: float | None = None  # --beside: the other job's rate in it


@dataclass(frozen=True, kw_only=True)
class DuringSaveBlock(Block):
    """One background save of ``loader.during_checkpoint``."""

    checkpoint: int | None = None
    start_s: float | None = None  # first write, from the first timed step
    end_s: float | None = None  # last fsync (or the stop, when the loop ended first)
    seconds: float | None = None
    bytes: int | None = None
    files: int | None = None
    write_bps: float | None = None
    complete: bool | None = None  # False: the loop ended first and the save was stopped
    vs_alone: float | None = None  # write_bps ÷ the same save's rate alone


@dataclass(frozen=True, kw_only=True)
class DuringCheckpointBlock(Block):
    """``loader.during_checkpoint``: the loader measured while a checkpoint was written in the
    background (``iobench loader --during-checkpoint MODEL``)."""

    model: str | None = None
    scale: float | None = None  # fraction of every rank's shard written
    at: float | None = None  # the first save: seconds into the timed steps, or steps ended
    at_unit: str | None = None  # s | steps
    every: float | None = None  # then again this long after each save started (None: once)
    every_unit: str | None = None
    rate_bps: float | None = None  # the paced writer's rate (None: as fast as it can)
    bytes: int | None = None  # one checkpoint at this scale
    files: int | None = None
    ranks: int | None = None  # the model's ranks, whose shards are written
    writers: int | None = None  # writer threads
    mode: str | None = None  # async (as fast as it can) | paced
    probe_saves: int | None = None  # saves the read probe measured (--read-probe)
    alone: Mapping[str, Any] | None = None  # seconds, bytes, write_bps of the save alone
    checkpoints: tuple[DuringSaveBlock | Any, ...] = _subs(DuringSaveBlock)
    windows: tuple[DuringWindowBlock | Any, ...] = _subs(DuringWindowBlock)
    summary: Mapping[str, Any] | None = None  # without, during (windows pooled), write rates
    model_au: Mapping[str, Any] | None = None  # the contention model's AU for these windows
    basis: str | None = None
    # qualify --profile --model: the separate loop the windows come from, and the model over
    # the checkpoint interval (the full checkpoint of the estimate)
    loop: Mapping[str, Any] | None = None
    model_interval: Mapping[str, Any] | None = None
    beside: Mapping[str, Any] | None = None  # --beside: the other job (loader.beside)
    read_probe: Mapping[str, Any] | None = None  # the loader's reads beside the save (readprobe)
    torchrun: Mapping[str, Any] | None = None  # ranks, the spread of their saves' starts


@dataclass(frozen=True, kw_only=True)
class LoaderBlock(Block):
    """``loader``: what ``iobench loader`` (and qualify's loader step) measured."""

    profile: str | None = None
    gpus: int | None = None
    workers: int | None = None
    batch_size: int | None = None
    prefetch: int | None = None
    steps: int | None = None
    epochs: int | None = None
    au: float | None = None
    au_min: float | None = None  # the profile's pass line
    au_below_min: bool | None = None  # au < au_min
    au_per_epoch: tuple[Any, ...] = _seq()
    samples_per_s: float | None = None
    bytes_per_s: float | None = None
    load_wait_s: WaitBlock | None = _sub(WaitBlock)
    compute_s: float | None = None
    compute_measured_s: float | None = None
    step_s: float | None = None
    bound: str | None = None
    bound_basis: str | None = None
    predicted_au: float | None = None
    prediction_basis: str | None = None
    cache: str | None = None
    calibration: Mapping[str, Any] | None = None  # loader.loop.Calibration.to_dict()
    worker_read_s_per_sample: float | None = None
    worker_decode_s_per_sample: float | None = None
    main_cpu_s_per_step: float | None = None
    # how the workers handed their batches on (loader.run.handoff_block): kind, counts, basis
    handoff: Mapping[str, Any] | None = None
    dataset: DatasetBlock | None = _sub(DatasetBlock)
    points: tuple[AuPoint | Any, ...] = _subs(AuPoint)
    ranks: tuple[RankBlock | Any, ...] = _subs(RankBlock)
    client_cpu: CpuBlock | None = _sub(CpuBlock)
    hosts: int | None = None
    status: str | None = None  # with repeats: the loader's own status
    # a run over the user's own dataset (loader --existing): rendered by loader.existing_summary
    existing: Mapping[str, Any] | None = None
    repeats: tuple[Any, ...] = _seq()  # one loader block per repeat
    during_checkpoint: DuringCheckpointBlock | None = _sub(DuringCheckpointBlock)


@dataclass(frozen=True, kw_only=True)
class IntervalBlock(Block):
    """``estimate.interval``: the bootstrap interval around the estimate."""

    level: float | None = None
    method: str | None = None
    resamples: int | None = None
    seed: int | None = None
    blocks: tuple[Any, ...] = _seq()
    fixed_levels: tuple[Any, ...] = _seq()
    spread: float | None = None
    level_bounds_bps: tuple[Any, ...] = _seq()
    basis: str | None = None


@dataclass(frozen=True, kw_only=True)
class EstimateBlock(Block):
    """``estimate``: AU against accelerator count (``starvation.Estimate.to_dict``)."""

    profile: str | None = None
    threshold: float | None = None
    demand_bps_per_gpu: float | None = None
    au_at: tuple[AuPoint | Any, ...] = _subs(AuPoint)
    max_gpus: int | None = None
    basis: Any = None  # a sentence, or (older files) a mapping of named terms
    max_gpus_low: int | None = None
    max_gpus_high: int | None = None
    interval: IntervalBlock | None = _sub(IntervalBlock)
    warnings: tuple[str, ...] = _seq()

    @property
    def points(self) -> tuple[AuPoint, ...]:
        """The ``au_at`` entries that are objects."""
        return tuple(a for a in self.au_at if isinstance(a, AuPoint))

    @property
    def level(self) -> float | None:
        """The interval's confidence level (None without an interval)."""
        return self.interval.level if self.interval is not None else None


# --- the verdict and the checkpoint ----------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class VerdictItem(Block):
    """One requirement of a verdict: what was required, what was measured, and the result."""

    key: str | None = None
    required: float | None = None
    measured: float | None = None
    # the ``gpus`` requirement: the estimate's point, its interval, and the end judged
    estimate: float | None = None
    low: float | None = None
    high: float | None = None
    judged: float | None = None
    unit: str | None = None
    result: str | None = None
    indicative: str | None = None
    notes: tuple[Any, ...] = _seq()


# ``verdict.status``: a pass that rests on indicative phases (not steady, too short, --quick)
# is its own status, never the word of a pass on steady phases (docs/concepts/verdict.md)
PASS = "pass"
PASS_INDICATIVE = "pass (indicative)"
FAIL = "fail"
VERDICT_STATUSES = (PASS, PASS_INDICATIVE, FAIL)


@dataclass(frozen=True, kw_only=True)
class VerdictBlock(Block):
    """``verdict``: qualify's status, one line per reason, one item per requirement.

    ``status`` is one of :data:`VERDICT_STATUSES`; ``result`` is its older name, written with
    the same value (files before ``status`` hold only ``result``: ``pass`` or ``fail``)."""

    status: str | None = None  # "pass" | "pass (indicative)" | "fail"
    result: str | None = None  # the same value; older files: "pass" | "fail"
    reasons: tuple[Any, ...] = _seq()
    items: tuple[VerdictItem | Any, ...] = _subs(VerdictItem)
    indicative: bool | None = None
    smoke_test: bool | None = None

    @property
    def judged(self) -> str | None:
        """The verdict's status: ``status``, else (older files) ``result``, where a ``pass``
        flagged ``indicative`` reads as :data:`PASS_INDICATIVE`; None when neither is a string."""
        got = self.status if isinstance(self.status, str) else self.result
        if not isinstance(got, str):
            return None
        if got == PASS and self.indicative is True:
            return PASS_INDICATIVE
        return got


# --- inside a phase --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class LatencyBlock(Block):
    """A phase's ``latency_s``: seconds per operation."""

    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    p999: float | None = None
    max: float | None = None
    min: float | None = None


@dataclass(frozen=True, kw_only=True)
class SpreadBlock(Block):
    """min / median / max of a set of figures (``stats.spread``): a phase's ``per_worker``
    bandwidth, and in a many-client phase ``extra.rank_spread``/``host_spread`` with the
    figure's ``unit``, the ``slowest`` rank or host and ``max_over_min``."""

    unit: str | None = None
    min: float | None = None
    median: float | None = None
    max: float | None = None
    slowest: Any = None
    max_over_min: float | None = None


@dataclass(frozen=True, kw_only=True)
class PhaseExtraBlock(Block):
    """The figures of a phase's ``extra`` that every engine may record; engine- and
    phase-specific ones (fio's, a checkpoint's) stay in ``extra``."""

    engine: str | None = None  # the engine that ran it, when not the run's
    world: int | None = None  # torchrun ranks it was aggregated over
    hosts: int | None = None
    rank_spread: SpreadBlock | None = _sub(SpreadBlock)
    host_spread: SpreadBlock | None = _sub(SpreadBlock)
    client_cpu: CpuBlock | None = _sub(CpuBlock)
    series_start_s: float | None = None  # where the series starts, after the phase's start


# --- the checkpoint (after the phase blocks: its rank spread is a SpreadBlock) ----------------


@dataclass(frozen=True, kw_only=True)
class CkptModelBlock(Block):
    """``checkpoint.model``: the checkpoint model (``ckpt_spec``) at its full size."""

    name: str | None = None
    total_bytes: int | None = None
    ranks: int | None = None
    model_bytes: int | None = None
    optimizer_bytes: int | None = None
    source: str | None = None


@dataclass(frozen=True, kw_only=True)
class CkptIoBlock(Block):
    """One measured save or load (``ckpt_estimate._io``): size ÷ the slowest rank's time."""

    rank_seconds_scope: str | None = None
    phase: str | None = None
    api: str | None = None
    bytes: int | None = None
    files: int | None = None
    ranks: int | None = None
    seconds: float | None = None
    bandwidth_bps: float | None = None
    rank_seconds: SpreadBlock | None = _sub(SpreadBlock)  # min / median / max
    cache: str | None = None


@dataclass(frozen=True, kw_only=True)
class CkptMeasuredBlock(Block):
    """``checkpoint.measured``: what the checkpoint phases measured (absent phases left out)."""

    save: CkptIoBlock | None = _sub(CkptIoBlock)
    load: CkptIoBlock | None = _sub(CkptIoBlock)
    dcp_save: CkptIoBlock | None = _sub(CkptIoBlock)
    dcp_load: CkptIoBlock | None = _sub(CkptIoBlock)
    copy_bps: float | None = None
    copy_basis: str | None = None
    baseline: Mapping[str, Any] | None = None  # bandwidth_bps, bytes, save_ratio
    create_per_s: float | None = None
    create_workers: int | None = None
    open_per_s: float | None = None
    open_workers: int | None = None

    def io(self) -> list[tuple[str, CkptIoBlock]]:
        """(key, figures) of each save and load measured, in the report's order."""
        pairs = (("save", self.save), ("load", self.load), ("dcp_save", self.dcp_save),
                 ("dcp_load", self.dcp_load))  # fmt: skip
        return [(k, v) for k, v in pairs if isinstance(v, CkptIoBlock) and not v.empty]


@dataclass(frozen=True, kw_only=True)
class CheckpointBlock(Block):
    """``checkpoint``: the checkpoint model, what was measured, and the full-size estimates
    (``ckpt_estimate.build``); the estimate stays a mapping, ``ckpt_report`` renders it."""

    model: CkptModelBlock | None = _sub(CkptModelBlock)
    scale: float | None = None
    measured: CkptMeasuredBlock | None = _sub(CkptMeasuredBlock)
    estimate: Mapping[str, Any] | None = None
    estimate_missing: str | None = None
