"""The checkpoint model inverted: the write and read bandwidth, file rates and capacity a
goodput target needs (``iobench plan``).

Pure functions, no I/O. A synchronous checkpoint of ``S`` bytes in ``F`` files stalls
``δ = S ÷ W + F ÷ C`` (``model.stall``); recovery takes ``R = restart + S ÷ Rd + F ÷ O``
(``model.recovery``), and goodput is Daly's exponential form ``G(τ, δ, M, R)``
(``daly.goodput_exact``) at the given interval ``τ`` or at the exact model's optimum for that
``δ``. ``G`` falls as ``δ`` grows (at a fixed interval and at the optimum alike), so the
largest stall that meets a target is found by bisection on ``δ`` (to float precision, on its
logarithm); the plan spends ``metadata_share`` of it on the file creates and the rest on the
bytes: ``W = S ÷ ((1 − share)·δ)``, ``C = F ÷ (share·δ)``. The load is the stated recovery
time (the time to read the last checkpoint back), split the same way; without one, the load
takes as long as a save (read bandwidth = write bandwidth), which makes ``R`` grow with ``δ``
and is solved in the same bisection. ``plan_checkpoint`` then runs the forward model
(``model.stall``, ``model.recovery``, ``model.plan_sync``) at the planned rates, and at 1 %
less write bandwidth, so the plan shows its own round trip.

Asynchronous saves (``plan_checkpoint(..., host_copy_bps=H)``): the stall is the snapshot, the
largest rank's bytes over the host-copy rate per GPU (``s = max rank ÷ H``, ``model.stall``);
the write then runs in the background for ``w`` seconds and must finish within the interval
(the next save waits for it otherwise: ``model.async_stall``), and a failure before it is
durable costs it again (Daly's form with the write in flight, ``daly``). At the best interval,
the exact optimum for ``s`` raised to the write (``τ = max(τ*(s), w)``, ``model.plan_async``),
goodput falls as ``w`` grows; the longest write that meets the target is found by the same
bisection, and the write bandwidth is what writes the checkpoint in it: ``W = S ÷ ((1 −
share)·w)``. At a given interval ``w`` is at most ``τ`` (the write fits). Not counted: the AU
the data loader loses while the background write shares the storage with it
(``checkpoint.contention``; ``cluster`` states the combined read + write figure that keeps both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError
from ..core.units import format_bytes, format_seconds
from . import model as cm
from .daly import goodput_exact, optimum_interval_exact

#: The smallest stall the bisection considers, relative to the MTBF (a free checkpoint).
_MIN_STALL = 1e-12
#: The host-copy rate per GPU an asynchronous plan assumes unless given (``--host-copy``):
#: PCIe 5.0 x16 in one direction, 32 GT/s × 16 lanes × 128/130 (its line code) ÷ 8 bits.
HOST_COPY_BPS = 32e9 * 16 * 128 / 130 / 8
HOST_COPY_BASIS = (
    "PCIe 5.0 x16 device-to-host, one direction: 32 GT/s × 16 lanes × 128/130 = 63.0 GB/s per "
    "GPU, the link's ceiling (a measured copy is below it, pinned memory nearest, so the "
    "snapshot stall is a lower bound; give your GPUs' measured device-to-host rate, e.g. "
    "nvbandwidth's device_to_host_memcpy_ce, with --host-copy)"
)


def goodput_for(
    stall_s: float, mtbf_s: float, *, interval_s: float | None = None, restart_s: float = 0.0,
    load_s: float | None = None,
) -> float:  # fmt: skip
    """Daly's goodput of synchronous saves that stall ``stall_s``: at ``interval_s``, or at the
    exact optimum; recovery ``restart_s`` + ``load_s`` (``load_s`` None: as long as a save)."""
    tau = interval_s if interval_s is not None else optimum_interval_exact(stall_s, mtbf_s)
    load = stall_s if load_s is None else load_s
    return goodput_exact(tau, stall_s, mtbf_s, restart_s + load)


def max_stall(
    target: float, mtbf_s: float, *, interval_s: float | None = None, restart_s: float = 0.0,
    load_s: float | None = None,
) -> float:  # fmt: skip
    """The largest stall per synchronous checkpoint whose goodput is at least ``target``
    (UsageError when even a free checkpoint misses it)."""
    if not 0 < target < 1:
        raise UsageError(f"the goodput target must be in (0, 100 %), got {target!r}")
    kw: dict[str, Any] = {"interval_s": interval_s, "restart_s": restart_s, "load_s": load_s}
    lo = _MIN_STALL * mtbf_s
    best = goodput_for(lo, mtbf_s, **kw)
    if best < target:
        raise UsageError(
            f"goodput {target:.2%} is out of reach with an MTBF of {format_seconds(mtbf_s)}: "
            f"even a free checkpoint leaves {best:.2%} (the interval's re-computation and the "
            "recovery alone)",
            hint="lower --goodput, shorten --restart/--recovery or --interval, or a longer --mtbf",
        )
    hi = mtbf_s
    while goodput_for(hi, mtbf_s, **kw) >= target:
        hi *= 2  # pragma: no cover - a stall of one MTBF never meets a target this high
    for _ in range(200):  # on the logarithm: the stall spans many decades
        mid = math.sqrt(lo * hi)
        if goodput_for(mid, mtbf_s, **kw) >= target:
            lo = mid
        else:
            hi = mid
        if hi <= lo * (1 + 1e-12):
            break
    return lo


def goodput_async(
    write_s: float, snapshot_s: float, mtbf_s: float, *, interval_s: float | None = None,
    restart_s: float = 0.0, load_s: float | None = None,
) -> tuple[float, float]:  # fmt: skip
    """(goodput, interval) of asynchronous saves: the snapshot stalls ``snapshot_s``, the write
    runs ``write_s`` in the background; at ``interval_s`` (a write longer than it adds the wait
    to the stall), else at the exact optimum raised to the write (``model.plan_async``)."""
    tau = interval_s if interval_s is not None else max(
        optimum_interval_exact(snapshot_s, mtbf_s), write_s)  # fmt: skip
    load = write_s if load_s is None else load_s
    stall = cm.async_stall(snapshot_s, write_s, tau)
    return goodput_exact(tau, stall, mtbf_s, restart_s + load, min(write_s, tau)), tau


def max_write(
    target: float, snapshot_s: float, mtbf_s: float, *, interval_s: float | None = None,
    restart_s: float = 0.0, load_s: float | None = None,
) -> float:  # fmt: skip
    """The longest background write of an asynchronous save whose goodput is at least
    ``target``, at most ``interval_s`` when given (the write fits in the interval); UsageError
    when even an instant write misses it (the snapshot and the recovery alone)."""
    if not 0 < target < 1:
        raise UsageError(f"the goodput target must be in (0, 100 %), got {target!r}")
    kw: dict[str, Any] = {"interval_s": interval_s, "restart_s": restart_s, "load_s": load_s}

    def g(w: float) -> float:
        return goodput_async(w, snapshot_s, mtbf_s, **kw)[0]

    lo = _MIN_STALL * mtbf_s
    if g(lo) < target:
        raise UsageError(
            f"goodput {target:.2%} is out of reach with asynchronous saves: even an instant "
            f"background write leaves {g(lo):.2%} (the {format_seconds(snapshot_s)} snapshot, "
            f"the interval's re-computation and the recovery, MTBF {format_seconds(mtbf_s)})",
            hint="lower --goodput, a faster --host-copy, shorten --restart/--recovery, or a "
            "longer --mtbf",
        )
    hi = interval_s if interval_s is not None else mtbf_s
    if interval_s is not None and g(hi) >= target:
        return hi  # the write fills the interval: the fit, not the goodput, bounds it
    while interval_s is None and g(hi) >= target:
        hi *= 2  # pragma: no cover - a write of one MTBF never meets a target this high
    for _ in range(200):  # on the logarithm, as max_stall
        mid = math.sqrt(lo * hi)
        if g(mid) >= target:
            lo = mid
        else:
            hi = mid
        if hi <= lo * (1 + 1e-12):
            break
    return lo


@dataclass(frozen=True)
class CheckpointPlan:
    """The storage a goodput target needs for one checkpoint model, and its round trip."""

    model: str
    checkpoint_bytes: int
    files: int
    mtbf_s: float
    mtbf_basis: str
    target: float
    interval_s: float  # the interval the goodput is judged at
    interval_given: bool
    restart_s: float
    stall_s: float  # the largest stall that meets the target
    write_bps: float
    create_per_s: float | None  # None: metadata_share 0 (creates not counted)
    load_s: float
    load_given: bool
    read_bps: float
    open_per_s: float | None
    metadata_share: float
    goodput: float  # the forward model at the planned rates
    goodput_below: float  # at 1 % less write bandwidth (and read, when it follows the write)
    goodput_first_order: float
    retention: int
    capacity_bytes: int  # (retention + 1) × checkpoint: the new one lands before one goes
    basis: tuple[str, ...]
    mode: str = "sync"  # sync | async
    write_s: float = 0.0  # the save's write (sync: the stall; async: in the background)
    host_copy_bps: float | None = None  # async: the snapshot's rate per GPU
    host_copy_basis: str = ""
    write_fits: bool = True  # async at a given interval: the write fills it (the fit binds)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"basis": list(self.basis)}


def _rates(
    size: int, files: int, stall_s: float, load_s: float, share: float, scale: float = 1.0,
    copy_bps: float | None = None,
) -> cm.Rates:  # fmt: skip
    """The rates that spend ``stall_s`` per save's write and ``load_s`` per load (``share`` of
    each on the files), times ``scale``; ``copy_bps``: an asynchronous save's host copy."""
    data = 1.0 - share
    return cm.Rates(
        size / (data * stall_s) * scale, size / (data * load_s) * scale, copy_bps,
        create_per_s=files / (share * stall_s) * scale if share > 0 else None,
        open_per_s=files / (share * load_s) * scale if share > 0 else None,
        basis="planned",
    )  # fmt: skip


def forward(lay: cm.Layout, rates: cm.Rates, mtbf_s: float, restart_s: float,
            interval_s: float | None) -> cm.IntervalPlan:  # fmt: skip
    """The checkpoint model at ``rates``: the synchronous plan (stall, recovery, goodput), or
    the asynchronous one when the rates have a host copy (``copy_bps``)."""
    st = cm.stall(lay, rates)
    rec = cm.recovery(lay, rates, restart_s)
    if rates.copy_bps is not None:
        return cm.plan_async(st, mtbf_s, rec.total_s, interval_s)
    return cm.plan_sync(st, mtbf_s, rec.total_s, interval_s)


def plan_checkpoint(
    name: str, lay: cm.Layout, target: float, mtbf_s: float, mtbf_basis: str, *,
    interval_s: float | None = None, restart_s: float = 0.0, load_s: float | None = None,
    metadata_share: float = 0.1, retention: int = 1, host_copy_bps: float | None = None,
    host_copy_basis: str = "",
) -> CheckpointPlan:  # fmt: skip
    """The write/read bandwidth and create/open rates that meet the goodput ``target``: of
    synchronous saves, or of asynchronous ones with ``host_copy_bps`` (the snapshot's rate per
    GPU)."""
    if not 0 <= metadata_share < 1:
        raise UsageError(f"the metadata share must be in [0, 100 %), got {metadata_share!r}")
    if retention < 1:
        raise UsageError(f"--retention must be at least 1, got {retention}", hint="e.g. 3")
    if load_s is not None and not (load_s > 0 and math.isfinite(load_s)):
        raise UsageError(f"--recovery must be a positive duration, got {load_s!r}")
    if host_copy_bps is not None and not (host_copy_bps > 0 and math.isfinite(host_copy_bps)):
        raise UsageError(f"--host-copy must be a positive rate, got {host_copy_bps!r}")
    kw: dict[str, Any] = {"interval_s": interval_s, "restart_s": restart_s, "load_s": load_s}
    snapshot = lay.max_rank_bytes / host_copy_bps if host_copy_bps else None
    if snapshot is None:
        write = stall = max_stall(target, mtbf_s, **kw)
    else:
        write = max_write(target, snapshot, mtbf_s, **kw)
        stall = snapshot
    load = write if load_s is None else load_s
    size, files = lay.total_bytes, lay.files
    rates = _rates(size, files, write, load, metadata_share, copy_bps=host_copy_bps)
    at = forward(lay, rates, mtbf_s, restart_s, interval_s)
    # 1 % less: the write (and the read, when the load follows the save)
    less = _rates(size, files, write, load, metadata_share, 0.99, host_copy_bps)
    if load_s is not None:
        less = cm.Rates(less.write_bps, rates.read_bps, host_copy_bps, less.create_per_s,
                        rates.open_per_s, "planned, 1 % less")  # fmt: skip
    below = forward(lay, less, mtbf_s, restart_s, interval_s)

    def first_order(p: cm.IntervalPlan) -> float:
        got = p.user_goodput_first_order if interval_s is not None else p.best_goodput_first_order
        assert got is not None  # a plan at an interval always has its first-order goodput
        return got

    def judged(p: cm.IntervalPlan) -> float:
        return p.user_goodput if interval_s is not None else p.best_goodput  # type: ignore[return-value]

    fits = bool(snapshot is not None and interval_s is not None and write >= interval_s)
    cap = cm.capacity(size, keep_last=retention)
    basis = _basis(size, files, target, mtbf_s, interval_s, restart_s, load_s, metadata_share)
    if snapshot is not None:
        basis = _async_basis(basis, lay, target, snapshot, host_copy_bps or 0.0,
                             host_copy_basis, interval_s, fits)  # fmt: skip
    return CheckpointPlan(
        name, size, files, mtbf_s, mtbf_basis, target,
        interval_s if interval_s is not None else at.best_interval_s, interval_s is not None,
        restart_s, stall, rates.write_bps, rates.create_per_s, load, load_s is not None,
        rates.read_bps, rates.open_per_s, metadata_share, judged(at), judged(below),
        first_order(at), retention, cap.needed_bytes or 0, basis,
        # the forward model's write (the planned rates' rounding): the interval it fits in
        "sync" if snapshot is None else "async", write if snapshot is None else at.in_flight_s,
        host_copy_bps,
        host_copy_basis if snapshot is not None else "", fits,
    )  # fmt: skip


def _basis(
    size: int, files: int, target: float, mtbf_s: float, interval_s: float | None,
    restart_s: float, load_s: float | None, share: float,
) -> tuple[str, ...]:  # fmt: skip
    at = f"your interval {format_seconds(interval_s)}" if interval_s else "the best interval"
    load = (
        f"the recovery's load within {format_seconds(load_s)} (--recovery)"
        if load_s is not None
        else "the load as long as a save (no --recovery: read bandwidth = write bandwidth)"
    )
    meta = (
        f"{share:.0%} of the stall and of the load spent on the {files:,} files' creates and "
        "opens (--metadata-share)"
        if share > 0
        else "file creates and opens not counted (--metadata-share 0)"
    )
    return (
        f"Daly (2006) exponential goodput of synchronous saves, failures during a checkpoint "
        f"and during recovery counted, inverted: the largest stall per checkpoint whose "
        f"goodput at {at} is at least {target:.2%} (bisection to float precision), with "
        f"MTBF {format_seconds(mtbf_s)} and recovery = restart "
        f"{format_seconds(restart_s) if restart_s else 'none'} + load",
        f"{format_bytes(size)} in {files:,} files per checkpoint; {load}; {meta}",
        "the forward model at the planned rates gives the goodput shown (the round trip), and "
        "1 % less write bandwidth misses the target",
        "asynchronous saves need less write bandwidth (their stall is the snapshot): plan them "
        "with `iobench plan --async` (or `iobench checkpoint --model M --write-rate R "
        "--read-rate R --async` forward)",
    )


def _async_basis(
    sync: tuple[str, ...], lay: cm.Layout, target: float, snapshot_s: float, copy_bps: float,
    copy_basis: str, interval_s: float | None, fits: bool,
) -> tuple[str, ...]:  # fmt: skip
    """The basis of an asynchronous plan: the snapshot, the write in the interval, what is not
    counted (the synchronous basis's size, load and metadata line kept)."""
    at = (
        f"your interval {format_seconds(interval_s)} (the write within it)"
        if interval_s
        else "the best interval: the exact optimum for the snapshot, raised to the write so "
        "that it finishes before the next save"
    )
    rt = (
        "the write fills your interval: the fit bounds it, not the goodput (at 1 % less write "
        "bandwidth the next save waits for it)"
        if fits
        else "1 % less write bandwidth misses the target"
    )
    return (
        f"Daly (2006) exponential goodput of asynchronous saves, inverted: the stall is the "
        f"snapshot, the largest rank's {format_bytes(lay.max_rank_bytes)} at the host copy "
        f"{copy_bps / 1e9:.4g} GB/s per GPU = {format_seconds(snapshot_s)}; the write runs in "
        f"the background, a failure before it is durable costing it again (the factor 1 + w/M);"
        f" the longest write whose goodput is at least {target:.2%} at {at} (bisection to "
        "float precision); the write bandwidth writes the checkpoint in it",
        sync[1].replace("of the stall and", "of the background write and"),
        f"the forward model (asynchronous) at the planned rates gives the goodput shown; {rt}",
        f"host copy: {copy_basis or 'given'}",
        "not counted: the AU the data loader loses while the background write shares the "
        "storage with it (checkpoint/contention.py: with --profile the plan adds the combined "
        "read + write bandwidth that keeps both rates by its share rule; measure the overlap "
        "with `iobench loader --during-checkpoint`)",
    )
