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

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"basis": list(self.basis)}


def _rates(
    size: int, files: int, stall_s: float, load_s: float, share: float, scale: float = 1.0
) -> cm.Rates:
    """The rates that spend ``stall_s`` per save and ``load_s`` per load (``share`` of each
    on the files), times ``scale``."""
    data = 1.0 - share
    return cm.Rates(
        size / (data * stall_s) * scale, size / (data * load_s) * scale,
        create_per_s=files / (share * stall_s) * scale if share > 0 else None,
        open_per_s=files / (share * load_s) * scale if share > 0 else None,
        basis="planned",
    )  # fmt: skip


def forward(lay: cm.Layout, rates: cm.Rates, mtbf_s: float, restart_s: float,
            interval_s: float | None) -> cm.IntervalPlan:  # fmt: skip
    """The checkpoint model at ``rates``: the synchronous plan (stall, recovery, goodput)."""
    st = cm.stall(lay, rates)
    rec = cm.recovery(lay, rates, restart_s)
    return cm.plan_sync(st, mtbf_s, rec.total_s, interval_s)


def plan_checkpoint(
    name: str, lay: cm.Layout, target: float, mtbf_s: float, mtbf_basis: str, *,
    interval_s: float | None = None, restart_s: float = 0.0, load_s: float | None = None,
    metadata_share: float = 0.1, retention: int = 1,
) -> CheckpointPlan:  # fmt: skip
    """The write/read bandwidth and create/open rates that meet the goodput ``target``."""
    if not 0 <= metadata_share < 1:
        raise UsageError(f"the metadata share must be in [0, 100 %), got {metadata_share!r}")
    if retention < 1:
        raise UsageError(f"--retention must be at least 1, got {retention}", hint="e.g. 3")
    if load_s is not None and not (load_s > 0 and math.isfinite(load_s)):
        raise UsageError(f"--recovery must be a positive duration, got {load_s!r}")
    stall = max_stall(target, mtbf_s, interval_s=interval_s, restart_s=restart_s, load_s=load_s)
    load = stall if load_s is None else load_s
    size, files = lay.total_bytes, lay.files
    rates = _rates(size, files, stall, load, metadata_share)
    at = forward(lay, rates, mtbf_s, restart_s, interval_s)
    # 1 % less: the write (and the read, when the load follows the save)
    less = _rates(size, files, stall, load, metadata_share, 0.99)
    if load_s is not None:
        less = cm.Rates(less.write_bps, rates.read_bps, None, less.create_per_s,
                        rates.open_per_s, "planned, 1 % less")  # fmt: skip
    below = forward(lay, less, mtbf_s, restart_s, interval_s)

    def first_order(p: cm.IntervalPlan) -> float:
        got = p.user_goodput_first_order if interval_s is not None else p.best_goodput_first_order
        assert got is not None  # a plan at an interval always has its first-order goodput
        return got

    def judged(p: cm.IntervalPlan) -> float:
        return p.user_goodput if interval_s is not None else p.best_goodput  # type: ignore[return-value]

    cap = cm.capacity(size, keep_last=retention)
    return CheckpointPlan(
        name, size, files, mtbf_s, mtbf_basis, target,
        interval_s if interval_s is not None else at.best_interval_s, interval_s is not None,
        restart_s, stall, rates.write_bps, rates.create_per_s, load, load_s is not None,
        rates.read_bps, rates.open_per_s, metadata_share, judged(at), judged(below),
        first_order(at),
        retention, cap.needed_bytes or 0,
        _basis(size, files, target, mtbf_s, interval_s, restart_s, load_s, metadata_share),
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
        "with `iobench checkpoint --model M --write-rate R --read-rate R`",
    )
