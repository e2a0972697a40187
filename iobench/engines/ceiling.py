"""The posix engine's own ceiling: how many operations per second its loops do when the storage
costs nothing, so that a result near it says the engine, not the storage, may be the limit.

The ceiling is measured, never assumed: the phase's own operation (4 KiB reads or writes,
random or sequential), its worker mode and its workers (at most one per CPU), run by the
engine for ``PROBE_S`` against a memory file (``memfd_create``: tmpfs pages with no name in
any directory, so nothing is written outside the run directory and nothing is left behind),
reached through ``/proc/self/fd``. It is measured once per process for each such
configuration (a run's phases share it) and kept with its basis.

After a phase that ended ok (``PosixEngine.review``, which the runner calls once it has
sampled the phase's client CPU, so the probe is in no figure of the phase), when the phase's
IOPS reaches ``SHARE`` of that ceiling, its result carries a warning naming ``--engine fio``
and the ceiling in ``extra["engine_ceiling"]``. Where no memory file can be
made (no memfd, no /proc), no ceiling is claimed and nothing is said.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import asdict, dataclass

from ..result.file import PhaseResult
from .base import OPS_DATA, EngineContext, FileSpec, PhaseSpec
from .forked import cpus

SHARE = 0.8  # a phase at this share of the ceiling or above is called engine-bound
PROBE_S = 0.2  # how long each ceiling probe runs
PROBE_BLOCK = 4096
PROBE_FILE = 8 << 20  # the memory file's size (per probe; freed when the probe ends)
PROBE_PARAM = "ceiling_probe"  # marks the probe's own phase: it is not checked itself

_PROC_FD = "/proc/self/fd"


@dataclass(frozen=True)
class Ceiling:
    """The engine's measured ceiling for one configuration, with its basis."""

    iops: float
    op: str
    mode: str
    workers: int
    block_size: int
    seconds: float

    @property
    def per_op_us(self) -> float:
        """Each worker's time per operation at the ceiling (the engine's per-op cost)."""
        return self.workers / self.iops * 1e6

    @property
    def basis(self) -> str:
        return (
            f"{self.op} of {self.block_size // 1024} KiB in memory (memfd), {self.workers} "
            f"worker(s) as {self.mode}, {self.seconds:.1f} s, measured in this run"
        )

    def to_dict(self) -> dict:
        return {**asdict(self), "per_op_us": round(self.per_op_us, 3), "basis": self.basis}


Runner = Callable[[PhaseSpec, EngineContext], PhaseResult]
_MEMO: dict[tuple[str, str, int], Ceiling | None] = {}


def probe_spec(op: str, workers: int, path: str) -> PhaseSpec:
    """The probe's phase: the phase's operation at 4 KiB over one memory file, time-based."""
    return PhaseSpec(
        "engine-ceiling", op, (FileSpec(path, PROBE_FILE),), jobs=workers,
        block_size=PROBE_BLOCK, time_s=PROBE_S, mode="shared", params={PROBE_PARAM: True},
    )  # fmt: skip


def measure(run: Runner, ctx: EngineContext, op: str, mode: str, workers: int) -> Ceiling | None:
    """Run the probe through ``run`` (the engine's own ``run``) and return its ceiling; None
    where no memory file can be made here."""
    if not hasattr(os, "memfd_create") or not os.path.isdir(_PROC_FD):
        return None
    try:
        fd = os.memfd_create("iobench-ceiling", os.MFD_CLOEXEC)
    except OSError:
        return None
    try:
        block = os.urandom(1 << 20)
        for off in range(0, PROBE_FILE, len(block)):
            os.pwrite(fd, block, off)
        probe = probe_ctx(ctx)
        res = run(probe_spec(op, workers, str(fd)), probe)
    except Exception:  # noqa: BLE001 - a probe that cannot run claims no ceiling
        return None
    finally:
        os.close(fd)
    if res.status != "ok" or not res.iops:
        return None
    return Ceiling(res.iops, op, mode, workers, PROBE_BLOCK, round(res.elapsed_s, 3))


def probe_ctx(ctx: EngineContext) -> EngineContext:
    """The probe's context: the memory file's directory, the run's stop flag, no progress."""
    return EngineContext(run_dir=_PROC_FD, stop=ctx.stop, follow_links=True)


def ceiling_for(run: Runner, ctx: EngineContext, phase: PhaseSpec, mode: str) -> Ceiling | None:
    """The ceiling for this phase's operation, worker mode and workers (at most the CPUs),
    measured once per process."""
    workers = max(1, min(phase.jobs, cpus()))
    key = (phase.op, mode, workers)
    if key not in _MEMO:
        _MEMO[key] = measure(run, ctx, phase.op, mode, workers)
    return _MEMO[key]


def applies(phase: PhaseSpec, res: PhaseResult) -> bool:
    """Whether a finished phase is held against the ceiling: a data phase that ran to its end
    (not the probe itself). Its blocks may be larger than the probe's: each operation then
    costs the engine more (the copy), so the 4 KiB ceiling is the most it could reach."""
    return (
        phase.op in OPS_DATA
        and not phase.params.get(PROBE_PARAM)
        and res.status == "ok"
        and res.ops > 0
    )


def judge(res: PhaseResult, ceiling: Ceiling | None, share: float = SHARE) -> None:
    """Warn (and record the ceiling) when ``res`` reached ``share`` of the engine's ceiling."""
    if ceiling is None or res.iops is None or res.iops < share * ceiling.iops:
        return
    res.extra["engine_ceiling"] = ceiling.to_dict()
    res.warnings.append(
        f"engine-bound: {res.iops:,.0f} IOPS is {res.iops / ceiling.iops:.0%} of what the "
        f"posix engine does at memory speed here ({ceiling.iops:,.0f} IOPS, "
        f"{ceiling.per_op_us:.2f} us per operation: {ceiling.basis}); the storage may be "
        f"faster than this figure: rerun with --engine fio"
    )
