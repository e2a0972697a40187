"""The checkpoint model: stall per checkpoint, recovery, the best interval, goodput, capacity.

Pure functions over plain data: no I/O, no torch. Inputs are a description of what is
checkpointed (``ModelSpec``) and the rates a run measured (``Rates``); outputs are frozen
dataclasses that say what they were computed from (``basis``). Times are seconds, sizes bytes,
rates bytes/s (or operations/s), failure rates failures per accelerator per second.

Terms (reference/checkpoint-reliability.md):

- **Layout**: ``ranks = dp × tp × pp``. Each model-parallel slice (tp × pp of them) holds
  1/(tp·pp) of the weights and of the optimizer state. With ``sharding = "full"`` (ZeRO-3/FSDP)
  every data-parallel rank saves 1/dp of its slice's weights and optimizer state; with
  ``"optimizer"`` (ZeRO-1/2) each saves 1/dp of the optimizer state and data-parallel rank 0 the
  weights; with ``"none"`` (DDP) data-parallel rank 0 saves both (the other replicas hold copies).
  As MLPerf Storage does, weights and optimizer state go to separate files (``torch.save``);
  ``torch.distributed.checkpoint`` (DCP) writes ``files_per_rank`` files per rank plus one
  ``.metadata`` file.
- **Synchronous stall**: the whole checkpoint at the aggregate write rate (size ÷ the slowest
  rank's time, as MLPerf reports it) plus its file creates at the measured create rate.
- **Asynchronous stall**: the largest rank shard at the per-rank copy rate (snapshot to host
  memory); the write then runs in the background, and the next checkpoint cannot start before the
  previous one is durable: with ``interval`` seconds of training between checkpoints, each one
  stalls ``snapshot + max(0, write − interval)``.
- **Recovery**: load at the aggregate read rate plus the files' opens, plus a restart cost.
- **Interval**: Young (1974) ``√(2δM)``; Daly (2006) ``√(2δM)·[1 + ⅓√(δ/2M) + (δ/2M)/9] − δ``
  for ``δ < 2M``, else ``M`` (δ the stall, M the mean time between failures).
- **Goodput** (what the plans report): Daly's exact exponential form (``ckpt_daly``), which
  counts failures during a checkpoint and during recovery:
  ``G = τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1)·(1 + w/M))``; the best interval maximises it (Daly's and
  Young's closed forms are reported beside it).
- **Lost fraction** (first order, kept beside the exact figure): ``δ/τ + (τ/2 + w + R)/M`` — the stalls, half an interval of
  re-computation per failure, the write still in flight (asynchronous saves: the checkpoint being
  written is not yet durable when a failure strikes; 0 when synchronous), and the recovery R.
  Goodput = 1 − lost, clamped to [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..core.errors import UsageError
from . import layout as cl
from .daly import goodput_exact, optimum_interval_exact

Sharding = Literal["none", "optimizer", "full"]
SHARDINGS: tuple[str, ...] = ("none", "optimizer", "full")

DAY_S = 86_400.0
HOUR_S = 3_600.0

#: The Llama 3 405B pre-training anchor (Meta, 2024): 419 unexpected interruptions in a 54-day
#: window on 16,384 H100 GPUs.
LLAMA3_GPUS = 16_384
LLAMA3_INTERRUPTIONS = 419
LLAMA3_WINDOW_S = 54 * DAY_S


# --------------------------------------------------------------------------------------------
# What is checkpointed, and by whom


@dataclass(frozen=True)
class ModelSpec:
    """What one checkpoint holds (one copy of weights and optimizer state) and its ranks."""

    name: str
    model_bytes: int
    optimizer_bytes: int
    dp: int = 1
    tp: int = 1
    pp: int = 1
    sharding: Sharding = "full"
    params: float | None = None  # parameter count, when the spec was given that way
    basis: str = ""
    arch: cl.Architecture | None = None  # the architecture form: DLIO's per-rank layout

    def __post_init__(self) -> None:
        for key in ("dp", "tp", "pp"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise UsageError(f"model {self.name}: {key} must be a whole number >= 1, got {v!r}")
        for key in ("model_bytes", "optimizer_bytes"):
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise UsageError(f"model {self.name}: {key} must be a size >= 0, got {v!r}")
        if self.model_bytes + self.optimizer_bytes == 0:
            raise UsageError(f"model {self.name}: the checkpoint is empty (no weights, no state)")
        if self.arch is not None and (self.dp, self.tp, self.pp) != (
            self.arch.dp,
            self.arch.tp,
            self.arch.pp,
        ):
            raise UsageError(f"model {self.name}: dp/tp/pp differ from its architecture's")
        if self.sharding not in SHARDINGS:
            raise UsageError(
                f"model {self.name}: sharding {self.sharding!r} is not valid",
                hint=f"expected one of: {', '.join(SHARDINGS)}",
            )

    @property
    def ranks(self) -> int:
        return self.dp * self.tp * self.pp

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.optimizer_bytes

    def resharded(self, ranks: int) -> ModelSpec:
        """The same bytes spread evenly over ``ranks`` ranks, fully sharded: not MLPerf's
        layout (its subset mode runs some ranks of the full layout instead)."""
        if ranks < 1:
            raise UsageError(f"ranks must be at least 1, got {ranks}")
        return ModelSpec(
            self.name, self.model_bytes, self.optimizer_bytes, dp=ranks, tp=1, pp=1,
            sharding="full", params=self.params,
            basis=f"{self.basis}; resharded over {ranks} ranks" if self.basis else "",
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "model_bytes": self.model_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "dp": self.dp,
            "tp": self.tp,
            "pp": self.pp,
            "sharding": self.sharding,
            "params": self.params,
            "basis": self.basis,
            "architecture": self.arch.to_dict() if self.arch else None,
        }


#: ZeRO stage → this module's sharding words (ZeRO-2 saves as ZeRO-1 does).
ZERO_SHARDING: dict[int, Sharding] = {0: "none", 1: "optimizer", 2: "optimizer", 3: "full"}


def from_architecture(name: str, arch: cl.Architecture, basis: str = "") -> ModelSpec:
    """A model sized and laid out as DLIO sizes it from its architecture (``ckpt_layout``)."""
    s = cl.summarize(arch)
    p = cl.num_parameters(arch)
    why = (
        f"DLIO's arithmetic from the architecture: {p:,} parameters, {arch.layers} layers, "
        f"h {arch.hidden}, TP {arch.tp} × PP {arch.pp} × DP {arch.dp}, ZeRO-{arch.zero}, "
        f"{arch.model_datatype} weights, {arch.optimizer_datatype} optimizer state: "
        f"{s.total_bytes / 2**30:,.1f} GiB ({s.model_bytes / 2**30:,.1f} + "
        f"{s.optimizer_bytes / 2**30:,.1f}) in {s.files:,} files"
    )
    return ModelSpec(
        name, s.model_bytes, s.optimizer_bytes, dp=arch.dp, tp=arch.tp, pp=arch.pp,
        sharding=ZERO_SHARDING[arch.zero], params=float(p),
        basis=f"{why}; {basis}" if basis else why, arch=arch,
    )  # fmt: skip


def from_params(
    name: str,
    params: float,
    *,
    weight_bytes_per_param: float = 2.0,
    optimizer_bytes_per_param: float = 12.0,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    sharding: Sharding = "full",
) -> ModelSpec:
    """A model from its parameter count: defaults are bf16 weights (2 B) and an fp32 master
    copy plus two fp32 Adam moments (4 + 8 = 12 B) per parameter."""
    if not (params > 0 and math.isfinite(params)):
        raise UsageError(f"model {name}: params must be a positive count, got {params!r}")
    for key, v in (("weight", weight_bytes_per_param), ("optimizer", optimizer_bytes_per_param)):
        if not (v >= 0 and math.isfinite(v)):
            raise UsageError(f"model {name}: {key} bytes per parameter must be >= 0, got {v!r}")
    return ModelSpec(
        name,
        int(round(params * weight_bytes_per_param)),
        int(round(params * optimizer_bytes_per_param)),
        dp=dp, tp=tp, pp=pp, sharding=sharding, params=params,
        basis=(
            f"{params:.4g} parameters × ({weight_bytes_per_param:g} B weights + "
            f"{optimizer_bytes_per_param:g} B optimizer state)"
        ),
    )  # fmt: skip


@dataclass(frozen=True)
class RankShard:
    """What one rank saves: its weight and optimizer-state bytes (0 when it saves none), and
    the files they go to (``parts``; empty: one weights file and one optimizer file)."""

    rank: int
    model_bytes: int
    optimizer_bytes: int
    parts: tuple[cl.RankFile, ...] = ()

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.optimizer_bytes

    @property
    def files(self) -> int:
        """``torch.save`` files: weights and optimizer state separate, as MLPerf Storage writes
        them (one weights file per layer where DLIO writes one)."""
        return len(self.file_parts())

    def file_parts(self) -> tuple[cl.RankFile, ...]:
        """Every file this rank saves, with its bytes."""
        if self.parts:
            return self.parts
        two = (
            cl.RankFile(f"model_rank{self.rank}.pt", self.model_bytes, "model"),
            cl.RankFile(f"optimizer_rank{self.rank}.pt", self.optimizer_bytes, "optimizer"),
        )
        return tuple(f for f in two if f.nbytes > 0)

    def scaled(self, scale: float) -> RankShard:
        """``scale`` of every file (each file kept, at least 1 byte, so the file count holds)."""
        parts = tuple(
            cl.RankFile(f.name, max(1, int(f.nbytes * scale)), f.kind) for f in self.file_parts()
        )
        m = sum(f.nbytes for f in parts if f.kind == "model")
        return RankShard(self.rank, m, sum(f.nbytes for f in parts) - m, parts)


def _part(total: int, n: int, i: int) -> int:
    """The i-th of n near-equal integer parts of ``total`` (the first ones take the remainder)."""
    return total // n + (1 if i < total % n else 0)


def rank_shard(spec: ModelSpec, rank: int) -> RankShard:
    """What ``rank`` saves. Ranks are numbered data-parallel fastest: ``dp_i = rank % dp``."""
    if not 0 <= rank < spec.ranks:
        raise UsageError(f"rank {rank} is outside 0..{spec.ranks - 1}")
    if spec.arch is not None:  # DLIO's layout: tensor-parallel fastest (ckpt_layout)
        parts = cl.rank_files(spec.arch, rank)
        m = sum(f.nbytes for f in parts if f.kind == "model")
        return RankShard(rank, m, sum(f.nbytes for f in parts) - m, parts)
    dp_i, mp_i = rank % spec.dp, rank // spec.dp
    mp = spec.tp * spec.pp
    w_slice = _part(spec.model_bytes, mp, mp_i)
    o_slice = _part(spec.optimizer_bytes, mp, mp_i)
    if spec.sharding == "full":
        w = _part(w_slice, spec.dp, dp_i)
    else:
        w = w_slice if dp_i == 0 else 0
    if spec.sharding in ("full", "optimizer"):
        o = _part(o_slice, spec.dp, dp_i)
    else:
        o = o_slice if dp_i == 0 else 0
    return RankShard(rank, w, o)


@dataclass(frozen=True)
class Layout:
    """A checkpoint's spread over ranks: its size, the largest and smallest shard, its files."""

    ranks: int
    total_bytes: int
    writers: int  # ranks that save anything
    files: int  # torch.save layout
    dcp_files: int  # torch.distributed.checkpoint: files_per_rank per writer + .metadata
    max_rank_bytes: int
    min_rank_bytes: int  # over the ranks that save anything

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def layout(spec: ModelSpec, *, dcp_files_per_rank: int = 1) -> Layout:
    """Per-rank shard sizes and file counts of ``spec``'s checkpoint."""
    if dcp_files_per_rank < 1:
        raise UsageError(f"dcp files per rank must be at least 1, got {dcp_files_per_rank}")
    if spec.arch is not None:
        a = cl.summarize(spec.arch)
        return Layout(
            spec.ranks, a.total_bytes, a.writers, a.files, a.writers * dcp_files_per_rank + 1,
            a.max_rank_bytes, a.min_rank_bytes,
        )  # fmt: skip
    total = writers = files = 0
    hi, lo = 0, None
    for r in range(spec.ranks):
        s = rank_shard(spec, r)
        if s.total_bytes == 0:
            continue
        writers += 1
        files += s.files
        total += s.total_bytes
        hi = max(hi, s.total_bytes)
        lo = s.total_bytes if lo is None else min(lo, s.total_bytes)
    return Layout(spec.ranks, total, writers, files, writers * dcp_files_per_rank + 1, hi, lo or 0)


# --------------------------------------------------------------------------------------------
# Measured terms


@dataclass(frozen=True)
class Rates:
    """What a run measured: aggregate save/load rates (size ÷ slowest rank's time), the
    per-rank copy rate to host memory (asynchronous snapshots), aggregate file create and open
    rates (the small-file phases); None where not measured."""

    write_bps: float
    read_bps: float
    copy_bps: float | None = None
    create_per_s: float | None = None
    open_per_s: float | None = None
    basis: str = ""

    def __post_init__(self) -> None:
        for key in ("write_bps", "read_bps"):
            v = getattr(self, key)
            if not (v > 0 and math.isfinite(v)):
                raise UsageError(f"{key} must be a positive rate, got {v!r}")
        for key in ("copy_bps", "create_per_s", "open_per_s"):
            v = getattr(self, key)
            if v is not None and not (v > 0 and math.isfinite(v)):
                raise UsageError(f"{key} must be a positive rate or unknown, got {v!r}")


@dataclass(frozen=True)
class Stall:
    """Training time lost to one checkpoint."""

    sync_s: float  # bandwidth_s + metadata_s
    bandwidth_s: float
    metadata_s: float  # file creates at the measured rate (0 when not measured)
    files: int
    metadata_dominates: bool
    snapshot_s: float | None  # asynchronous: the stall itself (None when no copy rate)
    write_s: float  # asynchronous: the background write (= sync_s)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def stall(lay: Layout, rates: Rates, *, dcp: bool = False) -> Stall:
    """Stall of one checkpoint, synchronous and (with a copy rate) asynchronous."""
    files = lay.dcp_files if dcp else lay.files
    bw = lay.total_bytes / rates.write_bps
    meta = files / rates.create_per_s if rates.create_per_s else 0.0
    snap = lay.max_rank_bytes / rates.copy_bps if rates.copy_bps else None
    return Stall(bw + meta, bw, meta, files, meta > bw, snap, bw + meta)


def metadata_crossover_ranks(
    total_bytes: int, write_bps: float, create_per_s: float, files_per_rank: int = 1
) -> int:
    """The smallest rank count at which a DCP checkpoint's creates (files_per_rank per rank
    plus one ``.metadata``, at ``create_per_s``) take longer than its data at ``write_bps``."""
    _check_positive(write_bps=write_bps, create_per_s=create_per_s)
    if files_per_rank < 1:
        raise UsageError(f"files per rank must be at least 1, got {files_per_rank}")
    data_s = total_bytes / write_bps
    # (N·f + 1)/C > data_s  ⇔  N > (C·data_s − 1)/f
    return max(1, math.floor((create_per_s * data_s - 1) / files_per_rank) + 1)


def async_stall(snapshot_s: float, write_s: float, interval_s: float) -> float:
    """Stall per asynchronous checkpoint with ``interval_s`` of training between checkpoints:
    the snapshot, plus waiting for the previous write to become durable when it outlasts the
    interval."""
    return snapshot_s + max(0.0, write_s - interval_s)


@dataclass(frozen=True)
class Recovery:
    load_s: float  # bandwidth_s + metadata_s
    bandwidth_s: float
    metadata_s: float
    restart_s: float
    total_s: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def recovery(lay: Layout, rates: Rates, restart_s: float = 0.0, *, dcp: bool = False) -> Recovery:
    """Time from a failure to training again: restart, then load the last checkpoint."""
    if not (restart_s >= 0 and math.isfinite(restart_s)):
        raise UsageError(f"restart time must be >= 0 seconds, got {restart_s!r}")
    files = lay.dcp_files if dcp else lay.files
    bw = lay.total_bytes / rates.read_bps
    meta = files / rates.open_per_s if rates.open_per_s else 0.0
    return Recovery(bw + meta, bw, meta, restart_s, bw + meta + restart_s)


# --------------------------------------------------------------------------------------------
# Failures, the interval and goodput


def failure_rate(failures: float, accelerators: int, window_s: float) -> float:
    """Failures per accelerator per second, from a count seen on ``accelerators`` over a window."""
    if accelerators < 1 or window_s <= 0 or failures < 0:
        raise UsageError("failure rate needs failures >= 0, accelerators >= 1 and a window > 0")
    return failures / (accelerators * window_s)


def mtbf_from_rate(rate_per_accel_s: float, accelerators: int) -> float:
    """Mean time between failures of a job on ``accelerators`` with independent failures."""
    if not (rate_per_accel_s > 0 and math.isfinite(rate_per_accel_s)) or accelerators < 1:
        raise UsageError(
            f"MTBF needs a positive failure rate and accelerators >= 1, "
            f"got {rate_per_accel_s!r} and {accelerators}"
        )
    return 1.0 / (rate_per_accel_s * accelerators)


#: The Llama 3 anchor as a per-accelerator rate (≈ 4.74e-4 failures per GPU-day).
LLAMA3_RATE_PER_GPU_S = failure_rate(LLAMA3_INTERRUPTIONS, LLAMA3_GPUS, LLAMA3_WINDOW_S)


def _check_positive(**values: float) -> None:
    for key, v in values.items():
        if not (v > 0 and math.isfinite(v)):
            raise UsageError(f"{key} must be positive, got {v!r}")


def young_interval(stall_s: float, mtbf_s: float) -> float:
    """Young (1974): τ = √(2δM)."""
    _check_positive(stall=stall_s, mtbf=mtbf_s)
    return math.sqrt(2.0 * stall_s * mtbf_s)


def daly_interval(stall_s: float, mtbf_s: float) -> float:
    """Daly (2006): √(2δM)·[1 + ⅓√(δ/2M) + (δ/2M)/9] − δ for δ < 2M, else M."""
    _check_positive(stall=stall_s, mtbf=mtbf_s)
    if stall_s >= 2.0 * mtbf_s:
        return mtbf_s
    x = stall_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * stall_s * mtbf_s) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - stall_s


def lost_fraction(
    interval_s: float, stall_s: float, mtbf_s: float, recovery_s: float = 0.0,
    in_flight_s: float = 0.0,
) -> float:  # fmt: skip
    """First order: δ/τ + (τ/2 + w + R)/M, not clamped (above 1 means no progress)."""
    _check_positive(interval=interval_s, mtbf=mtbf_s)
    if stall_s < 0 or recovery_s < 0 or in_flight_s < 0:
        raise UsageError("stall, recovery and in-flight times must be >= 0")
    return stall_s / interval_s + (interval_s / 2.0 + in_flight_s + recovery_s) / mtbf_s


def goodput(
    interval_s: float, stall_s: float, mtbf_s: float, recovery_s: float = 0.0,
    in_flight_s: float = 0.0,
) -> float:  # fmt: skip
    """The fraction of time spent on useful training: 1 − lost, clamped to [0, 1]."""
    lost = lost_fraction(interval_s, stall_s, mtbf_s, recovery_s, in_flight_s)
    return min(1.0, max(0.0, 1.0 - lost))


@dataclass(frozen=True)
class IntervalPlan:
    """One save mode (sync or async) at its best interval and at the user's."""

    mode: Literal["sync", "async"]
    stall_s: float  # per checkpoint at the best interval
    in_flight_s: float
    min_interval_s: float  # async: the previous checkpoint must be durable first
    young_s: float
    daly_s: float
    best_interval_s: float  # the exact model's optimum, raised to min_interval_s when shorter
    best_goodput: float  # Daly's exponential form (ckpt_daly)
    user_interval_s: float | None
    user_stall_s: float | None
    user_goodput: float | None
    best_goodput_first_order: float = 0.0  # δ/τ + (τ/2 + w + R)/M at the same interval
    user_goodput_first_order: float | None = None
    goodput_model: str = "Daly (2006) exponential, failures during checkpoint and recovery counted"

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def plan_sync(
    st: Stall, mtbf_s: float, recovery_s: float, interval_s: float | None
) -> IntervalPlan:
    """Synchronous saves: stall = the whole write; the best interval maximises the exact
    goodput (Young's and Daly's estimates beside it)."""
    d = st.sync_s
    best = optimum_interval_exact(d, mtbf_s)
    user = goodput_exact(interval_s, d, mtbf_s, recovery_s) if interval_s else None
    return IntervalPlan(
        "sync", d, 0.0, 0.0, young_interval(d, mtbf_s), daly_interval(d, mtbf_s), best,
        goodput_exact(best, d, mtbf_s, recovery_s), interval_s, d if interval_s else None, user,
        goodput(best, d, mtbf_s, recovery_s),
        goodput(interval_s, d, mtbf_s, recovery_s) if interval_s else None,
    )  # fmt: skip


def plan_async(
    st: Stall, mtbf_s: float, recovery_s: float, interval_s: float | None
) -> IntervalPlan:
    """Asynchronous saves: stall = the snapshot, the write stays in flight; an interval shorter
    than the write adds the wait for the previous checkpoint to become durable."""
    if st.snapshot_s is None:
        raise UsageError("an asynchronous plan needs a measured copy rate")
    s, w = st.snapshot_s, st.write_s
    if s > 0:
        young, daly = young_interval(s, mtbf_s), daly_interval(s, mtbf_s)
    else:  # a free snapshot: checkpoint as often as the writes allow
        young = daly = 0.0
    best = max(optimum_interval_exact(s, mtbf_s), w)
    b_stall = async_stall(s, w, best)
    user_stall = async_stall(s, w, interval_s) if interval_s else None
    user = user1 = None
    if interval_s and user_stall is not None:
        # an interval shorter than the write: the wait is stall, only τ of the write overlaps
        user = goodput_exact(interval_s, user_stall, mtbf_s, recovery_s, min(w, interval_s))
        user1 = goodput(interval_s, user_stall, mtbf_s, recovery_s, w)
    return IntervalPlan(
        "async", b_stall, w, w, young, daly, best,
        goodput_exact(best, b_stall, mtbf_s, recovery_s, w), interval_s, user_stall, user,
        goodput(best, b_stall, mtbf_s, recovery_s, w), user1,
    )  # fmt: skip


def goodput_curve(
    intervals_s: Sequence[float], st: Stall, mtbf_s: float, recovery_s: float
) -> list[tuple[float, float, float | None]]:
    """(interval, sync goodput, async goodput or None) at each interval, Daly's exact form:
    the report's plot."""
    out = []
    for t in intervals_s:
        g_sync = goodput_exact(t, st.sync_s, mtbf_s, recovery_s)
        g_async = None
        if st.snapshot_s is not None:
            g_async = goodput_exact(
                t,
                async_stall(st.snapshot_s, st.write_s, t),
                mtbf_s,
                recovery_s,
                min(st.write_s, t),
            )
        out.append((t, g_sync, g_async))
    return out


# --------------------------------------------------------------------------------------------
# Capacity


@dataclass(frozen=True)
class Capacity:
    """How many checkpoints fit, and what a keep-last-N policy needs."""

    checkpoint_bytes: int
    free_bytes: int | None
    fit_free: int | None
    capacity_bytes: int | None
    fit_capacity: int | None
    keep_last: int | None
    needed_bytes: int | None  # (keep_last + 1) × size: the new one lands before the oldest goes
    retention_fits: bool | None  # in the capacity when given, else in the free space

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def capacity(
    checkpoint_bytes: int,
    *,
    free_bytes: int | None = None,
    capacity_bytes: int | None = None,
    keep_last: int | None = None,
) -> Capacity:
    """Checkpoints that fit in the free space and in a given capacity; the retention's need."""
    if checkpoint_bytes <= 0:
        raise UsageError(f"checkpoint size must be positive, got {checkpoint_bytes}")
    if keep_last is not None and keep_last < 1:
        raise UsageError(f"--keep-last must be at least 1, got {keep_last}")
    fit_free = free_bytes // checkpoint_bytes if free_bytes is not None else None
    fit_cap = capacity_bytes // checkpoint_bytes if capacity_bytes is not None else None
    needed = (keep_last + 1) * checkpoint_bytes if keep_last is not None else None
    room = capacity_bytes if capacity_bytes is not None else free_bytes
    fits = needed <= room if needed is not None and room is not None else None
    return Capacity(
        checkpoint_bytes, free_bytes, fit_free, capacity_bytes, fit_cap, keep_last, needed, fits
    )
