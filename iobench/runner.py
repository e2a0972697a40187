"""Run a workload against a target: plan, check, create the run directory, execute the
generator's phases through an engine, keep every result, and always clean up.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from . import results as results_mod
from .engines.base import EngineContext, PhaseSpec, Progress
from .engines.registry import get_engine
from .errors import EngineError, Interrupted, IobenchError, UsageError
from .phases import get_generator
from .plan import Plan
from .results import PhaseResult, RunResult
from .spec import Workload
from .target import (
    SignalGuard,
    StopFlag,
    Target,
    check_free_space,
    create_run_dir,
    drop_file_cache,
    fs_class,
    remove_run_dir,
    resolve,
)
from .units import format_bytes

ProgressFactory = Callable[[], Progress]


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return 0


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
    hooks: Any = None  # distributed coordination (barriers, gathers), when ranks > 1

    @property
    def run_dir(self) -> str:
        return self.target.run_dir

    @property
    def rank(self) -> int:
        return getattr(self.hooks, "rank", 0)

    @property
    def world(self) -> int:
        return getattr(self.hooks, "world", 1)

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def direct(self, requested: bool) -> bool:
        """O_DIRECT when asked for and the target takes it; otherwise warn and fall back."""
        if not requested:
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
        if fs_class(self.target.fs_type) == "memory":
            self.warn(
                f"{self.target.fs_type} keeps files in memory: read figures are memory speed, "
                "not storage"
            )
            return "buffered"
        return "dropped"

    def mkdirs(self, relpaths: list[str]) -> None:
        for d in sorted(set(relpaths)):
            os.makedirs(os.path.join(self.run_dir, d), exist_ok=True)

    def drop_cache(self, spec: PhaseSpec) -> None:
        for f in spec.files:
            drop_file_cache(os.path.join(self.run_dir, f.path))

    def execute(self, spec: PhaseSpec) -> PhaseResult:
        """Run one phase through the engine; keep its result even when it fails."""
        self.stop.check()
        reading = spec.op in ("read", "randread", "open_read", "stat")
        if reading and not spec.direct:
            self.drop_cache(spec)  # outside the timed region
        ctx = EngineContext(
            run_dir=self.run_dir,
            stop=self.stop,
            progress=self.progress_factory(),
            direct_supported=self.target.direct_io is True,
            fs_type=self.target.fs_type,
            raw_dir=self.raw_dir,
        )
        if self.hooks:
            self.hooks.before_phase(spec)
        try:
            res = self.engine.run(spec, ctx)
        except EngineError as e:
            partial = getattr(e, "partial", None)
            if partial is not None:
                self._finish(spec, partial)
            raise
        self._finish(spec, res)
        if self.hooks:
            res = self.hooks.after_phase(spec, res)
            self.results[-1] = res
        self.stop.check()
        return res

    def record(self, res: PhaseResult) -> PhaseResult:
        """Keep a result measured outside an engine (e.g. torch.save checkpoints)."""
        if self.hooks:
            res = self.hooks.after_phase(None, res)
        self.results.append(res)
        return res

    def _finish(self, spec: PhaseSpec, res: PhaseResult) -> None:
        if spec.op in ("read", "randread", "open_read") and not spec.direct:
            res.cache = self.cache_state(False)
        elif spec.direct:
            res.cache = "direct"
        res.extra.setdefault("engine", getattr(self.engine, "name", "?"))
        self.results.append(res)


def plan_workload(workload: Workload) -> Plan:
    return get_generator(workload.generator).plan(workload.params)


def merge_repeats(repeats: list[list[PhaseResult]]) -> list[PhaseResult]:
    """One PhaseResult per phase name: the median-bandwidth repeat, with every repeat kept."""
    if len(repeats) == 1:
        return repeats[0]
    by_name: dict[str, list[PhaseResult]] = {}
    order: list[str] = []
    for rep in repeats:
        for p in rep:
            if p.name not in by_name:
                order.append(p.name)
            by_name.setdefault(p.name, []).append(p)
    merged = []
    for name in order:
        runs = by_name[name]
        key = sorted(runs, key=lambda p: p.bandwidth_bps or p.iops)
        chosen = key[len(key) // 2]
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
            }
            for i, p in enumerate(runs)
        ]
        merged.append(out)
    return merged


def describe_command() -> str:
    return "iobench " + " ".join(shlex.quote(a) for a in sys.argv[1:])


def new_result(command: str | None = None, run_id: str | None = None) -> RunResult:
    return RunResult(
        run_id=run_id or results_mod.new_run_id(),
        command=command or describe_command(),
        started_at=results_mod.now_iso(),
        host=results_mod.host_info(),
    )


def output_dir_for(output: str | None, run_id: str) -> Path:
    if output:
        return Path(output)
    return Path("iobench-results") / run_id


def check_output_dir(path: Path) -> None:
    """Refuse an output directory we cannot write, before anything else is written."""
    probe = path
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        raise UsageError(f"cannot write results to {path}", hint="pass a writable --output DIR")
    if path.exists() and (path / "result.json").exists():
        raise UsageError(f"{path} already holds a result.json", hint="pass a new --output DIR")


@dataclass
class RunOutcome:
    run: RunResult
    result_path: Path | None
    error: IobenchError | None = None


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
    hooks: Any = None,
    save: bool = True,
) -> RunOutcome:
    """Run ``workload`` on ``target_spec``; always returns the (possibly partial) result.

    Bad input raises UsageError before anything is written. Failures during the run come back
    in ``RunOutcome.error`` with the partial result saved and marked.
    """
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    engine = get_engine(engine_name)
    target = resolve(target_spec)
    plan = plan_workload(workload)
    check_free_space(target, plan.space_bytes)
    run = new_result(command)
    if hooks is not None:
        run.run_id = hooks.shared_run_id(run.run_id)
    out_dir = output_dir_for(output, run.run_id)
    is_writer = hooks is None or hooks.rank == 0
    if save and is_writer:
        check_output_dir(out_dir)
    run.workload = workload.to_dict()
    run.engine = {"name": engine.name, "version": engine.version()}
    stop = StopFlag()
    runner: PhaseRunner | None = None
    error: IobenchError | None = None
    gen = get_generator(workload.generator)
    try:
        with SignalGuard(stop):
            create_run_dir(target, run.run_id if hooks is None else hooks.run_dir_id(run.run_id))
            run.target = target.to_dict()
            if save and is_writer:
                out_dir.mkdir(parents=True, exist_ok=True)
            repeats: list[list[PhaseResult]] = []
            runner = PhaseRunner(
                target,
                engine,
                stop,
                progress_factory,
                raw_dir=str(out_dir) if save and is_writer else None,
                hooks=hooks,
            )
            for i in range(repeat):
                runner.results = []
                gen.run(workload.params, runner)
                repeats.append(runner.results)
            run.phases = merge_repeats(repeats)
    except (EngineError, Interrupted) as e:
        error = e
        run.status = "interrupted" if isinstance(e, Interrupted) else "failed"
        run.error = e.one_line()
        if runner is not None:
            run.phases = runner.results
            if any(p.ops for p in run.phases):
                run.status = "interrupted" if isinstance(e, Interrupted) else "partial"
    except OSError as e:
        error = EngineError(f"I/O error: {e.strerror or e} ({getattr(e, 'filename', '')})")
        run.status = "failed"
        run.error = error.one_line()
        if runner is not None:
            run.phases = runner.results
    except KeyboardInterrupt:
        error = Interrupted("interrupted by SIGINT")
        run.status = "interrupted"
        run.error = error.one_line()
        if runner is not None:
            run.phases = runner.results
    finally:
        if not keep:
            remove_run_dir(target)
        elif target.created:
            run.warnings.append(f"--keep: the run directory {target.run_dir} was left in place")
    if runner is not None:
        run.warnings.extend(w for w in runner.warnings if w not in run.warnings)
    run.warnings.extend(_honesty_warnings(run, target))
    run.finished_at = results_mod.now_iso()
    path = None
    if save and is_writer:
        path = results_mod.save(run, out_dir)
    return RunOutcome(run, path, error)


def _honesty_warnings(run: RunResult, target: Target) -> list[str]:
    """Flag figures that the page cache may have produced."""
    out = []
    mem = physical_memory()
    written = max((p.bytes for p in run.phases if p.op in ("write", "create")), default=0)
    buffered_reads = [p for p in run.phases if p.op in ("read", "open_read") and p.cache != "direct"]
    if buffered_reads and mem and written and written < mem:
        out.append(
            f"data read without O_DIRECT ({format_bytes(written)}) fits in page cache "
            f"({format_bytes(mem)} RAM): read figures may be cache"
        )
    return [w for w in out if w not in run.warnings]
