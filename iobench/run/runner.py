"""Run a workload against a target: plan, check, and inside ``session.open_run`` (the run
directory, signals, the saved and marked result) execute the generator's phases through an
engine (``PhaseRunner``), every repeat merged (``merge_repeats``).
"""

from __future__ import annotations

import dataclasses
import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from ..core import cpu
from ..core.coordinator import Coordinator, SingleProcess
from ..core.errors import EngineError, Interrupted, UsageError
from ..core.plan import Plan, WritePlan, write_plan
from ..core.safeio import held_path, make_dirs_beneath, open_beneath
from ..core.units import check_repeat
from ..engines.base import Engine, EngineContext, PhaseSpec, Progress
from ..engines.registry import get_engine
from ..result import file as results_mod
from ..result.check import REPEAT_FIGURES
from ..result.file import PhaseResult, RunResult
from ..result.steady import DEFAULT_STEADY, mark_steady
from ..spec.workload import Workload, check_duration, check_memory
from ..target import (
    DIRECT_ALIGN,
    StopFlag,
    Target,
    apply_layout,
    check_direct_alignment,
    check_free_space,
    check_run_dir_in_place,
    client_cache,
    drop_file_cache,
    fs_class,
    make_url_dirs,
    phase_layout,
    resolve,
)
from .guard import UNARMED, RunGuard, StallSetting, Unguarded
from .phases import get_generator
from .session import (
    RunContext,
    RunOutcome,
    dry_run,
    open_run,
    physical_memory,
)

ProgressFactory = Callable[[], Progress]

__all__ = [
    "PhaseRunner",
    "ProgressFactory",
    "dry_run_workload",
    "merge_repeats",
    "plan_workload",
    "run_workload",
]


@dataclass
class PhaseRunner:
    """What a generator uses to run phases: engine, target, cache policy, collected results."""

    target: Target
    engine: Any
    stop: StopFlag
    progress_factory: ProgressFactory = Progress
    raw_dir: str | None = None
    results: list[PhaseResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # the other clients (barriers, gathers, the ranks' aggregate); one client: SingleProcess
    coord: Coordinator = field(default_factory=SingleProcess)
    # a time-based phase ends once steady by this (stats.SteadyCriterion); None: at its time
    steady: Any = None
    _fallback: Any = field(default=None, repr=False)  # posix engine for phases the engine refuses
    guard: RunGuard = field(default_factory=Unguarded)  # the session's: its watchdog

    def __post_init__(self) -> None:
        self.progress_factory = self.guard.watched(self.progress_factory)  # stalls give up

    @property
    def run_dir(self) -> str:
        return self.target.run_dir

    @property
    def run_fd(self) -> int | None:
        """The run directory held open (``RunDir``): every file of a phase is opened through
        it, never by a path resolved again through TARGET (None: a URL target)."""
        h = self.target.handle
        return h.fd if self.target.kind == "posix" and h is not None else None

    def held(self, *parts: str) -> str:
        """A path to ``parts`` beneath the run directory through the held descriptor
        (``/proc/self/fd/N/...``), for what takes only paths (torch DCP); the run directory's
        own path when none is held."""
        fd = self.run_fd
        return held_path(fd, *parts) if fd is not None else os.path.join(self.run_dir, *parts)

    def create_file(self, rel: str) -> BinaryIO:
        """The file ``rel`` beneath the run directory, created or emptied for writing through
        the held descriptor (``safeio.open_beneath``: never through a link, nothing above the
        run directory resolved again), as a file object (``torch.save`` writes into it)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        if self.run_fd is None:
            fd = os.open(os.path.join(self.run_dir, rel), flags | os.O_NOFOLLOW, 0o644)
        else:
            fd = open_beneath(self.run_fd, rel, flags)
        return os.fdopen(fd, "wb")

    @property
    def rank(self) -> int:
        return self.coord.rank

    @property
    def world(self) -> int:
        return self.coord.world

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def direct(self, requested: bool) -> bool:
        """O_DIRECT when asked for and the target takes it; otherwise warn and fall back."""
        if not requested:
            return False
        if self.target.kind == "fsspec":  # URL targets: nothing to bypass on this side
            self.warn(
                f"direct=true is unsupported on {self.target.fs_type}:// targets (no O_DIRECT, "
                "no client page cache): requests went through fsspec as usual"
            )
            return False
        if not getattr(self.engine, "direct_io", True):
            self.warn(
                f"direct=true is unsupported by the {self.engine.name} engine (no O_DIRECT): "
                "reads and writes went through the page cache, dropped before reads where the "
                "kernel can"
            )
            return False
        if fs_class(self.target.fs_type) == "memory":
            # tmpfs may accept O_DIRECT (Linux >= 6.6), but there is no storage behind it
            self.warn(
                f"{self.target.fs_type} keeps files in memory: O_DIRECT bypasses no cache there, "
                "so reads and writes were buffered and measure memory, not storage"
            )
            return False
        if self.target.direct_io is True:
            return True
        self.warn(
            f"O_DIRECT unavailable on {self.target.fs_type} ({self.target.direct_reason}): "
            "fell back to buffered I/O with the page cache dropped where the kernel can"
        )
        return False

    def cache_state(self, direct: bool) -> str:
        """How reads of this target relate to the page cache, honestly."""
        if direct:
            return "direct"
        if self.target.kind == "fsspec":  # object stores: no page cache between us and them
            return "none"
        if fs_class(self.target.fs_type) == "memory":
            self.warn(
                f"{self.target.fs_type} keeps files in memory: read figures are memory speed, "
                "not storage"
            )
            return "buffered"
        why = client_cache(self.target.fs_type)
        if why:
            self.warn(
                f"{why}: buffered reads on {self.target.fs_type} may come from the client's "
                "memory (cache state client-cache); direct=true reads the storage"
            )
            return "client-cache"
        return "dropped"

    def mkdirs(self, relpaths: list[str]) -> None:
        if self.target.kind == "fsspec":  # object stores have no directories
            make_url_dirs(self.target, relpaths)
            return
        with self.guard.watching(None, "mkdir"):
            for d in sorted(set(relpaths)):
                if self.run_fd is None:
                    os.makedirs(os.path.join(self.run_dir, d), exist_ok=True)
                else:
                    make_dirs_beneath(self.run_fd, d)

    def drop_cache(self, spec: PhaseSpec) -> None:
        if self.target.kind == "fsspec":  # no page cache to drop for object stores
            return
        for f in spec.files:
            if self.run_fd is None:
                drop_file_cache(os.path.join(self.run_dir, f.path))
            else:
                drop_file_cache(f.path, self.run_fd)
            # each file written back and dropped is the storage answering: a drop of many
            # files that takes longer than the stall timeout is no stall (one that blocks is)
            self.guard.tick()

    def execute(self, spec: PhaseSpec) -> PhaseResult:
        """Run one phase through the engine; keep its result even when it fails."""
        with self.guard.watching(spec):  # cache drop, I/O, layout query: blocked I/O gives up
            return self._execute(spec)

    def _execute(self, spec: PhaseSpec) -> PhaseResult:
        self.stop.check()
        check_run_dir_in_place(self.target)  # never write through a name that moved
        if self.steady is not None and spec.time_s and spec.steady is None:
            spec = dataclasses.replace(spec, steady=self.steady)
        reading = spec.op in ("read", "randread", "open_read")  # a stat reads no file data
        if reading and not spec.direct:
            self.drop_cache(spec)  # outside the timed region
        ctx = EngineContext(
            run_dir=self.run_dir,
            run_fd=self.run_fd,
            stop=self.stop,
            progress=self.progress_factory(),
            direct_supported=self.target.direct_io is True,
            direct_align=self.target.direct_align or DIRECT_ALIGN,
            fs_type=self.target.fs_type,
            storage_options=self.target.storage_options,  # fsspec URL targets (endpoint)
            raw_dir=self.raw_dir,
        )
        self.coord.before_phase(spec)
        engine, why = self._engine_for(spec)
        cpu0 = cpu.sample()  # the client's own CPU over the phase (iobench.core.cpu)
        suspended = self.stop.suspended
        sampler = cpu.CpuSampler()  # and over time (extra.cpu_series)
        try:
            with sampler:
                res = engine.run(spec, ctx)
        except (EngineError, Interrupted) as e:  # a second signal may carry figures too
            partial = e.partial
            if partial is not None:
                partial.extra["client_cpu"] = cpu.usage(cpu0, cpu.sample())
                _note_suspension(partial, self.stop.suspended - suspended)
                self._finish(spec, partial, engine, why)
            raise
        res.extra["client_cpu"] = cpu.usage(cpu0, cpu.sample())
        if (series := sampler.series()) is not None:
            res.extra["cpu_series"] = series
        _note_suspension(res, self.stop.suspended - suspended)
        engine.review(spec, res, ctx)  # after the CPU sample: the engine's own probes
        self._finish(spec, res, engine, why)
        res = self.results[-1] = self.coord.after_phase(spec, res)
        self.stop.check()
        return res

    def record(self, res: PhaseResult) -> PhaseResult:
        """Keep a result measured outside an engine (e.g. torch.save checkpoints)."""
        if res.cache == "dropped" and client_cache(self.target.fs_type):
            res.cache = "client-cache"  # dropped from the kernel only
        mark_steady(res, self.steady)
        res = self.coord.after_phase(None, res)
        self.results.append(res)
        # as an engine phase's start does: the run stops (exit 4) once TARGET or the run
        # directory moved, though what this phase wrote went through the descriptor held
        check_run_dir_in_place(self.target)
        return res

    def _engine_for(self, spec: PhaseSpec) -> tuple[Any, str | None]:
        """The engine for this phase, and why it is not the chosen one (None when it is).

        A phase the chosen engine cannot express faithfully (fio has no whole-file reads or
        mdtest-like metadata ops) runs with the posix engine, with a warning, rather than
        measuring something else under the same name.
        """
        if not self.engine.supports(spec.op):
            why = f"the {self.engine.name} engine does not run {spec.op!r} phases"
        else:
            why = self.engine.why_not(spec)
        if why is None:
            return self.engine, None
        if self.target.kind != "posix" or getattr(self.engine, "name", "") == "posix":
            raise EngineError(f"phase {spec.name}: {why}")
        if self._fallback is None:
            self._fallback = get_engine("posix")
        self.warn(f"{why}: such phases ran with the posix engine")
        return self._fallback, why

    def _finish(
        self, spec: PhaseSpec, res: PhaseResult, engine: Any = None, why: str | None = None
    ) -> None:
        if spec.op in ("read", "randread", "open_read") and not spec.direct:
            res.cache = self.cache_state(False)
        elif spec.direct:
            res.cache = "direct"
        elif res.cache == "dropped" and client_cache(self.target.fs_type):
            res.cache = "client-cache"  # written, then dropped from the kernel only
        if spec.files:
            layout = phase_layout(self.target, os.path.join(self.run_dir, spec.files[0].path))
            if layout:
                res.extra["layout"] = layout
        res.extra["engine"] = getattr(engine or self.engine, "name", "?")
        mark_steady(res, spec.steady or self.steady)
        if why:
            res.extra["engine_fallback"] = why
            res.warnings.append(f"ran with the posix engine: {why}")
        self.results.append(res)


def _note_suspension(res: PhaseResult, times: int) -> None:
    """A phase during which the process was stopped (Ctrl-Z, SIGSTOP) and resumed measured
    the pause as well: its figures say so."""
    if times > 0:
        res.warnings.append(
            "the process was suspended (SIGTSTP/SIGSTOP) and resumed during this phase: its "
            "elapsed time includes the pause, so its bandwidth and latencies are understated"
        )


def plan_workload(workload: Workload) -> Plan:
    """The generator's plan, once the parameters are known to fit in this host's memory."""
    check_memory(workload.params, physical_memory())
    check_duration(workload.params)
    return get_generator(workload.generator).plan(workload.params)


def merge_repeats(
    repeats: list[list[PhaseResult]], in_flight: list[PhaseResult] | None = None
) -> list[PhaseResult]:
    """One PhaseResult per phase name, every repeat kept in ``repeats``.

    Each figure of :data:`results.REPEAT_FIGURES` is its median over the completed repeats (the
    one rule, :func:`results.metric_value`), with n, min-max and CV in ``spread``. What cannot
    be a median (volume, time, histogram, series, per-worker spread) comes from the repeat whose
    bandwidth is the median, named in ``extra["detail_repeat"]``.

    ``in_flight``: the phases of a repeat cut short (an interruption, a failure). They are
    listed in each phase's ``repeats`` marked ``in_flight``, but the figures come from the
    completed repeats; a phase that no completed repeat reached is the in-flight one itself.
    """
    if len(repeats) == 1 and not in_flight:
        return repeats[0]
    order: list[str] = []
    for rep in [*repeats, in_flight or []]:
        for p in rep:
            if p.name not in order:
                order.append(p.name)
    by_name: dict[str, list[PhaseResult]] = {}
    flying: dict[str, list[PhaseResult]] = {}
    for rep in repeats:
        for p in rep:
            by_name.setdefault(p.name, []).append(p)
    for p in in_flight or []:
        flying.setdefault(p.name, []).append(p)
    return [_merged_phase(by_name.get(name, []), flying.get(name, [])) for name in order]


def _merged_phase(runs: list[PhaseResult], cut: list[PhaseResult]) -> PhaseResult:
    """One phase's repeats (``runs`` completed, ``cut`` in flight) as one PhaseResult."""
    if runs:
        ranked = sorted(
            range(len(runs)), key=lambda i: runs[i].bandwidth_bps or runs[i].iops or 0.0
        )
        detail = ranked[len(ranked) // 2]
        chosen = runs[detail]
    else:
        detail, chosen = len(cut) - 1, cut[-1]
    out = PhaseResult.from_dict(chosen.to_dict())
    out.repeats = [
        {
            "repeat": i,
            "bandwidth_bps": p.bandwidth_bps,
            "iops": p.iops,
            "bandwidth_stonewall_bps": p.bandwidth_stonewall_bps,
            "elapsed_s": p.elapsed_s,
            "bytes": p.bytes,
            "ops": p.ops,
            "latency_s": p.latency_s,
            "status": p.status,
            **({"in_flight": True, "error": p.error} if i >= len(runs) else {}),
        }
        for i, p in enumerate([*runs, *cut])
    ]
    out.spread = {}
    for key in REPEAT_FIGURES:
        summary = results_mod.metric_summary(out, key)
        if summary is None:
            continue
        out.spread[key] = summary.to_dict()
        head, _, tail = key.partition(".")
        if tail:
            getattr(out, head)[tail] = summary.median
        else:
            setattr(out, head, summary.median)
    out.extra = {**out.extra, "detail_repeat": detail}
    return out


def run_workload(
    workload: Workload,
    target_spec: str,
    *,
    engine_name: str = "posix",
    repeat: int = 1,
    output: str | None = None,
    keep: bool = False,
    progress_factory: ProgressFactory = Progress,
    command: str | None = None,
    coord: Coordinator | None = None,
    save: bool = True,
    announce: Callable[[str], None] | None = None,
    label: str | None = None,
    stall: StallSetting = UNARMED,
) -> RunOutcome:
    """Run ``workload`` on ``target_spec``; always returns the (possibly partial) result.

    Bad input raises UsageError before anything is written. Failures during the run come back
    in ``RunOutcome.error`` with the partial result saved and marked. ``announce`` gets the
    plan line (``label``: the command it names, default ``run NAME``) before the first byte.
    """
    check_repeat(repeat)  # 1 to units.MAX_REPEAT
    check = _checker(workload, target_spec, engine_name)
    with open_run(check, output=output, command=command, coord=coord, save=save, keep=keep,
                  plan=_planner(workload, label, repeat), announce=announce,
                  stall=stall) as ctx:  # fmt: skip
        _run_phases(ctx, workload, repeat, progress_factory)
    assert ctx.outcome is not None
    return ctx.outcome


def dry_run_workload(
    workload: Workload,
    target_spec: str,
    *,
    engine_name: str = "posix",
    repeat: int = 1,
    output: str | None = None,
    command: str | None = None,
    label: str | None = None,
) -> str:
    """``--dry-run``: the run's checks and its plan (``session.dry_run``); nothing written."""
    check_repeat(repeat)
    check = _checker(workload, target_spec, engine_name)
    return dry_run(check, _planner(workload, label, repeat), output=output, command=command)


def _planner(
    workload: Workload, label: str | None, repeat: int
) -> Callable[[Target, Any], WritePlan]:
    """The run's WritePlan: the generator's plan, ``repeat`` times over."""

    def plan(target: Target, engine: Any) -> WritePlan:
        p = plan_workload(workload)
        if repeat > 1:
            p = Plan([pp for _ in range(repeat) for pp in p.phases], p.space_bytes, p.inodes)
        return write_plan(label or f"run {workload.name}", p)

    return plan


def _checker(
    workload: Workload, target_spec: str, engine_name: str
) -> Callable[[RunResult], tuple[Target, Engine]]:
    def check(run: RunResult) -> tuple[Target, Engine]:
        # checks that may differ between hosts: under torchrun any rank refusing ends them all
        engine = get_engine(engine_name)
        target = resolve(target_spec)
        if target.kind == "fsspec" and engine.name != "fsspec":  # posix/fio need a directory
            raise UsageError(
                f"the {engine.name} engine cannot write to {target.path_or_url}",
                hint="use --engine fsspec (the default for URLs)",
            )
        plan = plan_workload(workload)
        check_free_space(target, plan.space_bytes, plan.inodes)
        for name in plan.imports:  # before the plan line: its wall-time bound starts there
            importlib.import_module(name)  # (torch's import: 3 s here idle, 34 s loaded)
        # direct I/O that cannot be aligned: refused before anything is written, at the
        # device's logical block size; again below at what the run directory's probe measured
        check_direct_alignment(plan.direct_sizes, target)
        run.workload = workload.to_dict()
        run.engine = {"name": engine.name, "version": engine.version()}
        return target, engine

    return check


def _run_phases(
    ctx: RunContext[Engine], workload: Workload, repeat: int, progress_factory: ProgressFactory
) -> None:
    """Inside ``open_run``: lay the run directory out, then ``repeat`` times the generator."""
    run, target, coord = ctx.run, ctx.target, ctx.coord
    ctx.session.guard.set_spec_timeout(workload.stall_timeout)
    # the probe may need more than the device's logical block size (btrfs: its sectors);
    # under torchrun every rank refuses when one does
    direct_sizes = plan_workload(workload).direct_sizes
    coord.agreed(lambda: check_direct_alignment(direct_sizes, target))
    # Lustre: stripe the run dir as the workload asks, before any file is created; record
    # the Lustre/GPFS layout in target.layout
    run.warnings.extend(w for w in apply_layout(target, workload.params) if w not in run.warnings)
    run.target = target.to_dict()
    coord.attach(target)  # every rank's run dir exists: can ranks read each other's?
    runner = ctx.session.runner = PhaseRunner(
        target, ctx.checked, ctx.stop, progress_factory,
        raw_dir=str(ctx.out_dir) if ctx.writer else None, coord=coord,
        steady=DEFAULT_STEADY if workload.params.get("steady") else None,
        guard=ctx.session.guard,
    )  # fmt: skip
    gen = get_generator(workload.generator)
    repeats: list[list[PhaseResult]] = []
    try:
        for _ in range(repeat):
            runner.results = []
            gen.run(workload.params, runner)
            repeats.append(runner.results)
    except BaseException:
        if repeat > 1:  # the session keeps runner.results: every repeat, not the last only
            runner.results = merge_repeats(repeats, in_flight=runner.results)
            run.warnings.append(_cut_short(repeats, repeat))
        raise
    run.phases = merge_repeats(repeats)


def _cut_short(repeats: list[list[PhaseResult]], requested: int) -> str:
    done = len(repeats)
    figures = (
        f"figures are the median of the {done} completed repeat{'s' * (done != 1)}"
        if done
        else "figures are those of the repeat in flight"
    )
    return (
        f"--repeat {requested}: stopped during repeat {done + 1} of {requested}; {figures}, "
        "and each phase's repeats[] keeps the one in flight, marked in_flight"
    )
