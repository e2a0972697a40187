"""Goodput under exponential failures: Daly's exact form (Daly 2006), no first-order expansion.

J. T. Daly, "A higher order estimate of the optimum checkpoint interval for restart dumps",
Future Generation Computer Systems 22 (2006) 303–312, the complete (exponential) model: with failures arriving at
random (exponential, mean time between failures M), a job of ``T_s`` seconds of work split into
segments of ``τ`` work plus a checkpoint of ``δ`` seconds, and a restart of ``R`` seconds after
each failure, takes on average

    T_w(τ) = M · e^{R/M} · (e^{(τ+δ)/M} − 1) · T_s / τ

wall-clock seconds. The ``e^{(τ+δ)/M}`` counts failures *during the checkpoint* (a segment is
kept only when its work and its checkpoint both complete), the ``e^{R/M}`` failures *during
recovery* (a restart that is struck starts over). Goodput is ``T_s / T_w``:

    G(τ) = τ / (M · e^{R/M} · (e^{(τ+δ)/M} − 1))

Asynchronous saves (an extension beyond Daly's paper, this module's assumption): the stall is the
snapshot ``s``; the write ``w`` then runs in the background, and a failure before it is durable
rolls back one checkpoint further, an expected ``w`` more of re-computation per failure. The
failures come at 1/M of the wall time, so the wall time grows by the factor ``1 + w/M``:

    G(τ) = τ / (M · e^{R/M} · (e^{(τ+s)/M} − 1) · (1 + w/M))

the synchronous form at ``w = 0``; to first order both give ``ckpt_model``'s
``δ/τ + (τ/2 + w + R)/M``. An interval shorter than the write makes the wait part of the stall
and only ``τ`` of the write overlap (the caller passes ``s + w − τ`` and ``τ``).

The optimum interval solves ``dG/dτ = 0``: ``e^{(τ+δ)/M}·(1 − τ/M) = 1`` (``e^{R/M}`` and
``1 + w/M`` are constant factors): one root in ``(0, M)`` (the left side falls monotonically
from ``e^{δ/M}``), found by bisection to float precision.

Pure functions: seconds in, fractions out; no I/O.
"""

from __future__ import annotations

import math

from ..core.errors import UsageError

_MAX_EXP = 700.0  # e^700 is near float's limit: beyond it no segment ever completes


def _check(interval_s: float | None, stall_s: float, mtbf_s: float, restart_s: float,
           in_flight_s: float) -> None:  # fmt: skip
    if not (mtbf_s > 0 and math.isfinite(mtbf_s)):
        raise UsageError(f"mtbf must be positive, got {mtbf_s!r}")
    if interval_s is not None and not (interval_s > 0 and math.isfinite(interval_s)):
        raise UsageError(f"interval must be positive, got {interval_s!r}")
    for key, v in (("stall", stall_s), ("recovery", restart_s), ("in-flight", in_flight_s)):
        if not (v >= 0 and math.isfinite(v)):
            raise UsageError(f"{key} time must be >= 0 seconds, got {v!r}")


def wall_per_work(
    interval_s: float, stall_s: float, mtbf_s: float, restart_s: float = 0.0,
    in_flight_s: float = 0.0,
) -> float:  # fmt: skip
    """Expected wall-clock seconds per second of work, ``T_w / T_s`` (inf: never completes)."""
    _check(interval_s, stall_s, mtbf_s, restart_s, in_flight_s)
    m = mtbf_s
    x = (interval_s + stall_s) / m
    if x + restart_s / m > _MAX_EXP:
        return math.inf
    return m * math.exp(restart_s / m) * math.expm1(x) * (1 + in_flight_s / m) / interval_s


def goodput_exact(
    interval_s: float, stall_s: float, mtbf_s: float, restart_s: float = 0.0,
    in_flight_s: float = 0.0,
) -> float:  # fmt: skip
    """Daly's exponential goodput ``τ / T_w(τ)`` per unit of work, in [0, 1]."""
    w = wall_per_work(interval_s, stall_s, mtbf_s, restart_s, in_flight_s)
    return 0.0 if math.isinf(w) else min(1.0, max(0.0, 1.0 / w))


def optimum_interval_exact(stall_s: float, mtbf_s: float) -> float:
    """The interval that maximises ``goodput_exact`` at a fixed stall (0 when it is free);
    the restart and the write in flight scale the wall time and do not move it."""
    _check(None, stall_s, mtbf_s, 0.0, 0.0)
    m = mtbf_s
    if stall_s == 0:
        return 0.0  # free checkpoints: as often as possible

    def h(t: float) -> float:  # decreasing in t; h(0) = e^{δ/M} − 1 > 0 > h(M) = −1
        e = (t + stall_s) / m
        return (math.exp(e) * (1 - t / m) if e < _MAX_EXP else -math.inf) - 1.0

    lo, hi = 0.0, m
    for _ in range(200):
        mid = (lo + hi) / 2
        if h(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * m:
            break
    return (lo + hi) / 2
