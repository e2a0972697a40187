"""``iobench qualify``: the full suite in a bounded time, with a verdict.

Steps (each a generator run inside one run directory, one result): sequential write/read with
a block-size and writer sweep, random 4 KiB reads, small-file checkpoint IOPS and metadata, a
sharded checkpoint scaled to fit (with the full checkpoint's time at the measured rate,
labelled an estimate), the dataset sweep shaped like the profile's samples, the loader
emulation on the profile, and the starvation estimate. ``--budget`` sizes the phases to fit;
``--dry-run`` prints the plan and writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..core.coordinator import Coordinator, SingleProcess
from ..core.errors import UsageError
from ..core.plan import Plan, WritePlan, assumed_floors, untimed_basis
from ..core.units import format_bytes, format_rate, format_seconds, parse_size
from ..engines.registry import get_engine
from ..loader.ckpt_writer import CheckpointPlan
from ..result.file import RunResult
from ..result.steady import DEFAULT_STEADY, MIN_PHASE_S
from ..run.guard import UNARMED, StallSetting
from ..run.outdir import output_dir_for
from ..run.phases import get_generator
from ..run.runner import PhaseRunner
from ..run.session import RunContext, RunOutcome, new_result, open_run
from ..spec.workload import MAX_PHASE_TIME_S, Profile, load_profile
from ..target import Target, apply_layout, check_free_space, is_url, resolve
from .bound import bounds_s
from .checkpoint import CkptRequirement, check_model_options, step_fields
from .checkpoint import attach as ckpt_attach
from .during import beside_expected_s, run_beside, sized
from .plan_file import PlanRequirements, load_plan, looks_like_plan, settle_model
from .plan_text import ASSUMED_WRITE_BPS, render_plan
from .verdict import Requirement, parse_requirements, verdict

QUICK_BUDGET_S = 30.0
DEFAULT_BUDGET_S = 180.0
DEFAULT_PROFILE = "retinanet-b200"  # light on data: a quick run stays quick
DEFAULT_CHECKPOINT = 105 * 10**9  # llama3-8b, 8 ranks (MLPerf Storage): the full checkpoint


# -- the plan ------------------------------------------------------------------------------------


@dataclass
class Step:
    """One generator run inside the qualification, with the workload file it derives from."""

    name: str
    workload: str
    generator: str
    params: dict[str, Any]
    expected_s: float
    space_bytes: int
    note: str = ""


@dataclass
class QualifyPlan:
    budget_s: float
    quick: bool
    profile: Profile
    gpus: int
    steps: list[Step] = field(default_factory=list)
    loader: dict[str, Any] = field(default_factory=dict)
    checkpoint_full_bytes: int = DEFAULT_CHECKPOINT
    ranks: int = 1  # torchrun clients, each running every I/O step on its own files
    during: CheckpointPlan | None = None  # --profile and --model: the loader again beside a save

    @property
    def space_bytes(self) -> int:
        steps = [s.space_bytes * self.ranks for s in self.steps]
        beside = self.loader.get("space_bytes", 0) + self.during_bytes
        return max(steps + [self.loader.get("space_bytes", 0), beside])

    @property
    def during_bytes(self) -> int:
        """The during run's save at most (its size cap: the checkpoint step's), 0 without."""
        return self.during.total_bytes if self.during else 0

    @property
    def inodes(self) -> int:
        """The most files and directories one step (or the loader) holds on the target at once,
        from each generator's own plan: a file system out of inodes is full whatever df says."""
        from ..run.phases import get_generator

        steps = [get_generator(s.generator).plan(s.params).inodes * self.ranks for s in self.steps]
        files = self.loader.get("files", 0) + (len(self.during.files) + 3 if self.during else 0)
        return max(steps + [files * self.ranks + 2])

    @property
    def expected_s(self) -> float:
        loader = self.loader.get("expected_s", 0.0)
        beside = beside_expected_s(self.during, self.during_bytes, loader, ASSUMED_WRITE_BPS)
        return sum(s.expected_s for s in self.steps) + loader + beside

    def spec_hash(self) -> str:
        blob = json.dumps(
            {"steps": [(s.name, s.generator, s.params) for s in self.steps], "loader": self.loader,
             "profile": self.profile.to_dict(), "gpus": self.gpus,
             **({"ranks": self.ranks} if self.ranks > 1 else {}),
             **({"during": self.during.to_dict()} if self.during else {})},
            sort_keys=True, default=str,
        )  # fmt: skip
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _resolved(workload: str, overrides: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    from ..spec.workload import load_workload

    wl = load_workload(workload, overrides)
    return wl.generator, dict(wl.params)


def plan_qualify(
    profile: Profile,
    gpus: int,
    *,
    budget_s: float,
    quick: bool,
    free_bytes: int | None = None,
    checkpoint_full_bytes: int = DEFAULT_CHECKPOINT,
    ranks: int = 1,
    model: str | None = None,
    during: bool = False,
) -> QualifyPlan:
    """Size every step to the time budget (and to a tenth of the free space).

    ``during`` (a profile and a ``model`` both given): the loader plan runs once more beside
    an asynchronous save of the model, at most the checkpoint step's size (``qualify.during``).

    ``ranks`` > 1 (torchrun): every rank runs each I/O step on its own files, so the space
    needed is ``ranks`` times a step's, and the loader runs one emulated accelerator per rank.
    """
    if budget_s <= 0:
        raise UsageError("--budget must be positive")
    scale = budget_s / DEFAULT_BUDGET_S
    space_cap = (free_bytes // 10 // max(ranks, 1)) if free_bytes else None
    plan = QualifyPlan(
        budget_s, quick, profile, gpus, checkpoint_full_bytes=checkpoint_full_bytes, ranks=ranks
    )

    def cap(n: int) -> int:
        return int(min(n, space_cap)) if space_cap else int(n)

    plan.steps.append(_sequential_step(budget_s, scale, quick, cap))
    plan.steps.append(_checkpoint_step(budget_s, scale, quick, cap, model))
    plan.steps.append(_dataset_step(profile, budget_s, scale, quick, cap))
    plan.loader = _loader_plan(profile, gpus, quick, scale, ranks)
    if during and model:
        plan.during = sized(model, plan.loader, profile.compute_s, _ckpt_bytes(scale, cap), None)
    return plan


def _ckpt_bytes(scale: float, cap: Callable[[int], int]) -> int:
    """The checkpoint step's size: 256 MiB at the full budget, 16 to 512 MiB, whole MiB."""
    return max(16 << 20, min(512 << 20, cap(int((256 << 20) * scale)))) // (1 << 20) << 20


def _sequential_step(budget_s: float, scale: float, quick: bool, cap: Callable[[int], int]) -> Step:
    """Sequential: time-based phases, so the budget (not the device) fixes their length."""
    block_sizes = [128 << 10, 4 << 20, 16 << 20] if not quick else [128 << 10, 4 << 20]
    jobs_sweep = [1, 2, 8] if not quick else [1]
    n_seq = 2 * (1 + len(block_sizes) + len(jobs_sweep))
    # a full run: long enough for the steady-state ramp and window (stats.DEFAULT_STEADY)
    t_seq = max(0.4 if quick else 3.0, min(60.0, 0.30 * budget_s / n_seq))
    per_job = max(8 << 20, min(256 << 20, cap(int((1 << 30) * scale)) // 8)) // (1 << 20) << 20
    gen, params = _resolved(
        "sequential-write",
        {"size": per_job, "block_size": 1 << 20, "jobs": 4, "block_sizes": block_sizes,
         "jobs_sweep": jobs_sweep, "time": t_seq, "randread": True, "rand_block_size": 4096,
         "rand_jobs": 8, "verify": True},
    )  # fmt: skip
    return Step("sequential", "sequential-write", gen, params, (n_seq + 1) * t_seq,
                per_job * 8, f"{n_seq} phases x {t_seq:.1f} s, then 4 KiB random reads")  # fmt: skip


def _checkpoint_step(
    budget_s: float, scale: float, quick: bool, cap: Callable[[int], int], model: str | None = None
) -> Step:
    """Small files and metadata, then a sharded checkpoint scaled to fit."""
    files = max(16, int(256 * scale)) if not quick else 32
    ckpt = _ckpt_bytes(scale, cap)
    # each save/load phase repeats its rounds until steady or this limit (steady.rounds_steady)
    limit = quick_limit(QUICK_CKPT_LIMIT_S, budget_s) if quick else max(3.0, 9 * scale)
    rounds = {"rounds": 10, "time": limit, "steady": True}
    gen, params = _resolved(
        "checkpoint-smallfile",
        {"files": files, "jobs": 4, "checkpoint_size": ckpt, "shards": 4,
         "tensor_size": min(16 << 20, ckpt // 4), "dcp": not quick, **rounds},
    )  # fmt: skip
    if model:  # qualify --model: that model's checkpoint, shaped as MLPerf writes it
        fields = step_fields(model, ckpt, files, quick, ASSUMED_WRITE_BPS)
        fields["params"].update(rounds)
        return Step(**fields)
    meta_s = files * 4 * 4 / 2000
    return Step("checkpoint", "checkpoint-smallfile", gen, params,
                meta_s + (2 if quick else 4) * rounds["time"], int(ckpt * 2.2),
                f"{files * 4} small files; {format_bytes(ckpt)} checkpoint in 4 shards")  # fmt: skip


def _dataset_step(
    profile: Profile, budget_s: float, scale: float, quick: bool, cap: Callable[[int], int]
) -> Step:
    """Dataset sweep: one sample per file, sized like the profile's samples, because the
    starvation model wants the per-sample read time at each reader count."""
    target_bytes = max(8 << 20, cap(int((512 << 20) * scale)))
    sample = profile.sample_size
    n_files = int(max(4 if quick else 8, min(4096, target_bytes // max(sample, 1))))
    readers = [1, 2, 4, 8] if not quick else [1, 2, 4]
    reads = len(readers) * (1 if quick else 2)
    # Time-based: each level re-reads the files until steady (stats.DEFAULT_STEADY) or t_ds.
    t_ds = dataset_phase_limit(budget_s, reads, quick)
    gen, params = _resolved(
        "dataset-read",
        {"files": n_files, "file_size": sample,
         "size_dist": "normal" if profile.sample_size_sd else "fixed",
         "size_sd": profile.sample_size_sd, "readers": readers,
         "orders": "shuffled" if quick else "both", "jobs": 4, "time": t_ds},
    )  # fmt: skip
    total = n_files * sample
    return Step("dataset", "dataset-read", gen, params,
                total / ASSUMED_WRITE_BPS + reads * t_ds, int(total * 1.1),
                f"{n_files} files of {format_bytes(sample)}, readers {readers}, "
                f"each until steady or {t_ds:.1f} s")  # fmt: skip


#: A checkpoint save/load phase's limit on its rounds: a --quick run's (a full one's: 5 % of
#: the budget, at least 3 s)
QUICK_CKPT_LIMIT_S = 2.0


def quick_limit(limit_s: float, budget_s: float) -> float:
    """A --quick phase limit at ``budget_s``: ``limit_s`` at the quick budget (30 s) or more,
    shrunk in proportion under it (``--quick --budget 6s``), never under stats.MIN_PHASE_S."""
    return max(MIN_PHASE_S, limit_s * min(1.0, budget_s / QUICK_BUDGET_S))


#: The dataset sweep's per-level time limit: a --quick run's, and the bounds of a full one's.
QUICK_DATASET_LIMIT_S = 3.0
DATASET_LIMIT_S = (4.0, 30.0)


def dataset_phase_limit(budget_s: float, reads: int, quick: bool) -> float:
    """Seconds a dataset-read level may run before it must end, steady or not: long enough
    for the steady-state criterion's ramp and window (stats.DEFAULT_STEADY, 2.5 s) in a full
    run, a third of the budget over the levels (a --quick one: ``quick_limit``)."""
    if quick:
        return quick_limit(QUICK_DATASET_LIMIT_S, budget_s)
    lo, hi = DATASET_LIMIT_S
    return max(lo, min(hi, 0.35 * budget_s / max(reads, 1)))


def _loader_plan(
    profile: Profile, gpus: int, quick: bool, scale: float, ranks: int = 1
) -> dict[str, Any]:
    """Enough files for a few steps per epoch on every emulated accelerator; several epochs
    re-read them (with O_DIRECT or dropped caches, so storage still answers). Under torchrun
    every rank is one accelerator."""
    from ..loader import RankBatchSampler

    loader_gpus = ranks if ranks > 1 else (1 if quick else min(gpus, 2))
    w = max(profile.workers, 1)
    spe = 8 if quick else max(10, int(20 * scale))
    spf = profile.samples_per_file
    files = max(
        w * loader_gpus if spf > 1 else 1, math.ceil(profile.batch_size * spe * loader_gpus / spf)
    )
    while RankBatchSampler.available_steps(files, spf, profile.batch_size, loader_gpus, w) < spe:
        files += max(1, files // 8)
    epochs = 2 if quick else 3
    sample_bytes = profile.sample_size * spf
    step_s = max(profile.compute_s, 0.005)
    return {
        "gpus": loader_gpus,
        "steps": spe,
        "epochs": epochs,
        "files": files,
        "expected_s": 8 + epochs * spe * step_s * 1.5 + files * sample_bytes / ASSUMED_WRITE_BPS,
        "space_bytes": int(files * sample_bytes * 1.05),
    }


# -- running ---------------------------------------------------------------------------------------


def run_qualify(
    target_spec: str,
    *,
    profile_name: str | None = None,
    gpus: int | None = None,
    require: str | None = None,
    quick: bool = False,
    budget: str | None = None,
    dry_run: bool = False,
    output: str | None = None,
    keep: bool = False,
    engine_name: str = "posix",
    progress_factory: Any = None,
    command: str | None = None,
    checkpoint: str | None = None,
    coord: Coordinator | None = None,
    sets: list[str] | None = None,
    model: str | None = None,
    ckpt_opts: Any = None,
    write_report: Callable[[RunResult, Path], Any] | None = None,
    announce: Callable[[str], None] | None = None,
    stall: StallSetting = UNARMED,
) -> tuple[RunOutcome | None, str | None]:
    """Plan (and unless ``dry_run``) run the suite. Returns (outcome, dry-run text). With a
    torchrun ``coord`` (many ranks) every rank runs each I/O step on its own files, in step, and
    the phases are the ranks' aggregates; the loader runs one accelerator per rank; rank 0
    writes the result, the report (``write_report``) and the verdict (alike on all ranks)."""
    suite = _suite(target_spec, profile_name, gpus, require, quick, budget, checkpoint, sets, model)
    model, ckpt_opts = settle_model(suite.plan, model, ckpt_opts, gpus, checkpoint)  # a plan's
    ckpt_full = check_model_options(model, checkpoint, ckpt_opts, list(suite.requirements))
    suite = replace(suite, ckpt_full=ckpt_full or suite.ckpt_full, model=model, stall=stall,
                    ckpt_opts=ckpt_opts, requested_gpus=gpus, write_report=write_report)  # fmt: skip
    engine = get_engine(engine_name)
    coord = coord or SingleProcess()

    def check() -> tuple[Target, QualifyPlan]:
        target = resolve(target_spec)
        plan = plan_qualify(suite.profile, suite.gpus, budget_s=suite.budget_s, quick=quick,
                            free_bytes=target.free_bytes, checkpoint_full_bytes=suite.ckpt_full,
                            ranks=coord.world, model=suite.model, during=suite.during and len(set(coord.hosts)) == 1)  # fmt: skip
        check_free_space(target, plan.space_bytes, plan.inodes)
        return target, plan

    if dry_run:
        output_dir_for(output, new_result(command).run_id)  # refused as a real run would be
        target, plan = coord.agreed(check)
        return None, render_plan(plan, target)

    def check_run(run: RunResult) -> tuple[Target, QualifyPlan]:
        target, plan = check()
        run.workload = _workload_block(suite, plan)
        run.engine = {"name": engine.name, "version": engine.version()}
        return target, plan

    with open_run(check_run, output=output, command=command, coord=coord, keep=keep,
                  plan=_write_plan, announce=announce, stall=stall) as ctx:  # fmt: skip
        _io_steps(ctx, suite, engine, progress_factory)
    assert ctx.outcome is not None
    _after_io(ctx, ctx.outcome, suite, target_spec, keep, progress_factory)
    return ctx.outcome, None


def _write_plan(target: Target, plan: QualifyPlan) -> WritePlan:
    """The suite's plan line: every step's files (and the loader's dataset), its bound."""
    written = sum(s.space_bytes for s in plan.steps) * plan.ranks
    phases, wall = bounds_s(plan)
    return WritePlan(
        f"qualify ({'quick' if plan.quick else 'full'})",
        written + plan.loader.get("space_bytes", 0),
        phases,
        f"every step's phases at their time limit or {assumed_floors()}, the loader's "
        f"epochs and compute in full; the {format_seconds(plan.budget_s)} budget sizes the phases",
        plan.space_bytes,
        rewrites=True,
        wall_s=wall,
        wall_basis=f"the phases, {untimed_basis(Plan(), starts=2)} and for the loader, "
        "and the data each builds",
    )


@dataclass(frozen=True)
class _Suite:
    """``run_qualify``'s settled options."""

    profile: Profile
    gpus: int
    budget_s: float
    quick: bool
    ckpt_full: int
    requirements: list[Requirement | CkptRequirement]
    model: str | None = None  # qualify --model: that model's checkpoint step and block
    ckpt_opts: Any = None
    requested_gpus: int | None = None
    write_report: Callable[[RunResult, Path], Any] | None = None  # the command's report.html
    stall: StallSetting = UNARMED  # the command's --stall-timeout (every session's watchdog)
    plan: PlanRequirements | None = None  # qualify --require PLAN.json: exactly its requirements
    during: bool = False  # --profile and --model: the loader measured during the model's save


def _suite(
    target_spec: str,
    profile_name: str | None,
    gpus: int | None,
    require: str | None,
    quick: bool,
    budget: str | None,
    checkpoint: str | None,
    sets: list[str] | None,
    model: str | None = None,
) -> _Suite:
    """The options checked (UsageError before anything is written) and settled."""
    from ..core.units import parse_duration
    from ..spec.workload import parse_overrides

    if gpus is not None and gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    if gpus is not None:
        from ..run.sweep import gpus_list

        gpus_list(gpus)  # the model's bound, refused before any I/O rather than after it
    plan = load_plan(str(require)) if looks_like_plan(require) else None
    requirements: list[Requirement | CkptRequirement] = [
        *(plan.requirements if plan else parse_requirements(require))
    ]
    # a plan's profile: its dataset sweep reads the samples the plan's loader figures are about
    name = profile_name or (plan.profile if plan else None) or DEFAULT_PROFILE
    profile = load_profile(name, parse_overrides(sets))
    if plan and plan.profile and profile.name != plan.profile:
        raise UsageError(
            f"--profile {profile.name} is not the plan's profile ({plan.profile})",
            hint=f"leave out --profile: the plan {plan.path} sets it",
        )
    budget_s = (
        parse_duration(budget, what="--budget")
        if budget
        else (QUICK_BUDGET_S if quick else DEFAULT_BUDGET_S)
    )
    if budget_s < 5:
        raise UsageError(f"--budget {budget} is too short for the suite", hint="give at least 5s")
    if not math.isfinite(budget_s):
        raise UsageError(f"--budget {budget} is not a finite duration", hint="give e.g. 3m")
    if budget_s > MAX_PHASE_TIME_S:  # the suite's phases share it: none may exceed the bound
        raise UsageError(
            f"--budget {budget} is longer than {MAX_PHASE_TIME_S / 86400:g} days",
            hint="give e.g. 3m",
        )
    ckpt_full = parse_size(checkpoint, what="--checkpoint") if checkpoint else DEFAULT_CHECKPOINT
    if ckpt_full <= 0:
        raise UsageError(f"--checkpoint must be more than 0, got {checkpoint!r}")
    if is_url(target_spec):
        raise UsageError(
            "qualify runs on a mounted directory",
            hint="use iobench run with the fsspec engine for URLs",
        )
    # a profile and a model both named: the loader once more, beside the model's save
    named = profile_name is not None or bool(plan and plan.profile)
    planned = bool(plan and plan.model is not None and plan.checkpoint is not None)
    return _Suite(profile, gpus or 1, budget_s, quick, ckpt_full, requirements, plan=plan,
                  during=named and (model is not None or planned))  # fmt: skip


def _workload_block(suite: _Suite, plan: QualifyPlan) -> dict[str, Any]:
    return {
        "name": "qualify",
        "spec_hash": plan.spec_hash(),
        "params": {"profile": suite.profile.name, "gpus": suite.gpus, "budget_s": suite.budget_s,
                   "quick": suite.quick, "steps": {s.name: s.params for s in plan.steps},
                   "loader": plan.loader, "require": [r.describe() for r in suite.requirements],
                   **({"require_plan": suite.plan.path} if suite.plan else {})},
    }  # fmt: skip


def _io_steps(
    ctx: RunContext[QualifyPlan], suite: _Suite, engine: Any, progress_factory: Any
) -> None:
    """Inside ``open_run``: every I/O step of the plan through one runner."""
    run, target, plan = ctx.run, ctx.target, ctx.checked
    kwargs = {"progress_factory": progress_factory} if progress_factory else {}
    # the parallel filesystem's layout (Lustre, GPFS, CephFS) in target.layout
    run.warnings.extend(w for w in apply_layout(target, {}) if w not in run.warnings)
    run.target = target.to_dict()
    ctx.coord.attach(target)  # every rank's run dir exists: can ranks read each other's?
    runner = ctx.session.runner = PhaseRunner(
        target, engine, ctx.stop, raw_dir=str(ctx.out_dir) if ctx.writer else None,
        coord=ctx.coord, steady=DEFAULT_STEADY, guard=ctx.session.guard, **kwargs,
    )  # fmt: skip
    for step in plan.steps:
        get_generator(step.generator).run(step.params, runner)
    run.phases = runner.results
    if suite.model:  # the checkpoint model's block instead of the plain full-size time
        ckpt_attach(run, next(s.params for s in plan.steps if s.name == "checkpoint"),
                    suite.ckpt_opts, suite.requested_gpus)  # fmt: skip
    else:
        _checkpoint_estimate(run, plan)


def _after_io(
    ctx: RunContext[QualifyPlan],
    outcome: RunOutcome,
    suite: _Suite,
    target_spec: str,
    keep: bool,
    progress_factory: Any,
) -> None:
    """The loader step, the estimate and the verdict; rank 0 saves them with the report."""
    coord, plan = ctx.coord, ctx.checked
    if outcome.error is None:
        _loader_step(outcome, target_spec, plan, keep, progress_factory, coord, suite.stall)
    if outcome.error is None and plan.during is not None:
        run_beside(outcome, target_spec, plan, keep, progress_factory, coord, suite.stall)
    elif suite.during:  # across hosts the ranks' saves would not line up: said, not run
        outcome.run.warnings.append("the loader during a checkpoint write runs on one host: "
                                    "not measured across hosts")  # fmt: skip
    _estimate_step(outcome.run, suite.profile)
    # a plan's requirements are exactly what is judged: no gpus/au line of the profile's
    outcome.run.verdict = verdict(
        outcome.run, suite.requirements, suite.profile, None if suite.plan else suite.gpus,
        quick=suite.quick, notes=(suite.plan.note(),) if suite.plan else (),
    )  # fmt: skip
    if outcome.error is None:
        # one verdict, rank 0's, so every rank exits with the same status
        outcome.run.verdict = coord.broadcast_object(outcome.run.verdict)
    if ctx.writer:
        from ..result import file as results

        results.save(outcome.run, ctx.out_dir)
        if suite.write_report is not None:
            suite.write_report(outcome.run, ctx.out_dir)


def _loader_step(
    outcome: RunOutcome,
    target_spec: str,
    plan: QualifyPlan,
    keep: bool,
    progress_factory: Any,
    coord: Coordinator,
    stall: StallSetting,
) -> None:
    """The profile through a real DataLoader (its own run directory, after the I/O steps)."""
    from ..loader import run_loader

    lp = plan.loader
    prof = replace(plan.profile, files=lp["files"], epochs=lp["epochs"])
    lo = run_loader(
        target_spec, prof, gpus=lp["gpus"], steps=lp["steps"], save=False, keep=keep,
        progress_factory=progress_factory, command=outcome.run.command, coord=coord, stall=stall,
    )  # fmt: skip
    assert not isinstance(lo, str)  # the plan's text comes only with dry_run
    run = outcome.run
    run.loader = lo.run.loader
    for p in lo.run.phases:
        p.name = f"loader-{p.name}"
        sweep = "loader-readers" if p.params.get("sweep") else ""
        p.params = {**p.params, "purpose": "loader storage probe", "sweep": sweep}
        run.phases.append(p)
    run.warnings.extend(
        f"loader: {w}" for w in lo.run.warnings if f"loader: {w}" not in run.warnings
    )
    if lo.error is not None:
        outcome.error = lo.error
        run.status = lo.run.status if lo.run.status != "complete" else "failed"
        run.error = lo.error.one_line()
    if lo.run.estimate:
        run.extra["loader_estimate"] = lo.run.estimate


def _estimate_step(run: RunResult, profile: Profile) -> None:
    """AU vs GPUs from the qualify dataset sweep, with the loader's measured overheads."""
    from ..run.sweep import estimate_for, indicative_sweep, sweep_file_bytes, sweep_from_phases

    phases = [p for p in run.phases if p.name.startswith("dataset-") and p.op == "read" and p.ops]
    if not phases or profile.compute_s <= 0:
        return
    sweep = sweep_from_phases(phases)
    if not sweep:
        return
    calib = (run.loader or {}).get("calibration")
    est = estimate_for(
        profile, sweep, None, profile.au_min, calib, f"qualify run {run.run_id}",
        file_bytes=sweep_file_bytes(phases), indicative_notes=indicative_sweep(phases, sweep),
        loader=run.loader,
    )  # fmt: skip
    run.estimate = est.to_dict()


def _checkpoint_estimate(run: RunResult, plan: QualifyPlan) -> None:
    """The full checkpoint's save/load time at the measured rate: an estimate, labelled."""
    out = {}
    for name in ("ckpt-save", "ckpt-load"):
        p = run.phase(name)
        if p and p.bandwidth_bps:
            secs = plan.checkpoint_full_bytes / p.bandwidth_bps
            out[name] = secs
            p.extra["full_checkpoint_estimate"] = {
                "bytes": plan.checkpoint_full_bytes,
                "seconds": secs,
                "basis": f"estimate: {format_bytes(plan.checkpoint_full_bytes)} at the {format_rate(p.bandwidth_bps)} "
                f"measured for a {format_bytes(p.bytes)} checkpoint from "
                + (f"{plan.ranks} clients at once" if plan.ranks > 1 else "one client"),
            }
    if out:
        run.extra["checkpoint_estimate"] = {
            k: {"seconds": v, "bytes": plan.checkpoint_full_bytes} for k, v in out.items()
        }
