"""``iobench loader``: the run, from the profile to the result's loader and estimate blocks.

``run_loader`` lays a profile's dataset out on the target, probes the storage with the same
files at the loader's concurrency, measures the loader's own CPU costs on cached data
(compute 0), then runs the training loop DLIO's way and predicts the same configuration with
the starvation model, so the measured and the predicted AU sit side by side.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..core import cpu
from ..core.coordinator import Coordinator, SingleProcess
from ..core.errors import UsageError
from ..core.plan import Plan, WritePlan, write_plan
from ..core.units import format_bytes, format_seconds
from ..engines.base import FileSpec, Progress
from ..model import starvation as sv
from ..result.file import RunResult
from ..run.guard import UNARMED, StallSetting
from ..run.runner import PhaseRunner
from ..run.session import RunOutcome, open_run, physical_memory
from ..run.session import dry_run as session_dry_run
from ..spec.workload import PROFILE_OPTIONAL, PROFILE_PARAMS, Profile, load_profile, parse_overrides
from ..target import Target, check_free_space, fs_class, resolve
from .beside import ALONE_S as BESIDE_ALONE_S
from .calibration import (
    COMPUTE_BOUND_AU,
    bound_of,
    calibrate,
    cpu_step_s,
    emulated_compute_s,
    loader_params,
    predict,
    storage_supply_s,
)
from .ckpt_writer import CheckpointPlan, describe
from .dataset import (
    PROBE_ALL_BYTES,
    PROBE_TIME_S,
    DatasetIndex,
    data_seed,
    generate_dataset,
    plan_dataset,
    planned_bytes,
    probe_storage,
    shard_indexes,
)
from .during import beside
from .loop import Calibration, LoopConfig, LoopResult, handoff_block, ranks_block, wait_summary
from .ranks import run_on_ranks
from .readprobe import IDLE_S as READ_PROBE_IDLE_S
from .readprobe import ProbeSpec
from .torchdata import DecodeEmulation, RankBatchSampler, check_workers, own_steps

COMPUTE_KINDS = ("sleep", "gpu")


def _spec_hash(params: dict[str, Any]) -> str:
    blob = json.dumps({"generator": "loader", "params": params}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no usable torch/CUDA is "no"
        return False


def run_loader(
    target: str,
    profile: str | Profile,
    *,
    sets: list[str] | None = None,
    gpus: int | None = None,
    workers: int | None = None,
    steps: int | None = None,
    epochs: int | None = None,
    compute: str = "sleep",
    direct: bool | None = None,
    output: str | None = None,
    keep: bool = False,
    progress_factory: Callable[[], Progress] | None = None,
    command: str | None = None,
    save: bool = True,
    seed: int = 1,
    probe_time_s: float | None = None,
    coord: Coordinator | None = None,
    announce: Callable[[str], None] | None = None,
    dry_run: bool = False,
    stall: StallSetting = UNARMED,
    during: CheckpointPlan | None = None,
) -> RunOutcome | str:
    """``iobench loader``: generate the profile's dataset on ``target``, probe it, run the
    DataLoader with emulated compute on ``gpus`` accelerators, predict the same with the model.

    With a torchrun ``coord`` (many ranks) every rank is one emulated accelerator (``gpus`` is
    the number of ranks): each writes its share of the files (file ``i`` by rank ``i mod
    ranks``) into its own run directory, every rank's loader shuffles the whole dataset and
    reads its shard of it (where the ranks see each other's run directories; else its own
    files), steps end with a barrier across ranks, and rank 0 writes the one result.

    Bad input raises UsageError before anything is written; failures during the run come back
    in ``RunOutcome.error`` with the partial result saved and marked, the run dir removed.
    ``announce``: the plan line first; ``dry_run``: its text only; ``during``: a background save."""
    prof = profile if isinstance(profile, Profile) else load_profile(profile, parse_overrides(sets))
    coord = coord or SingleProcess()
    gpus = coord.world if gpus is None else gpus
    _check_options(gpus, coord.world, workers, steps, epochs, compute, during is not None and len(set(coord.hosts)) > 1)  # fmt: skip
    job = _Job(
        prof, gpus, prof.workers if workers is None else workers,
        prof.epochs if epochs is None else epochs, steps, compute, direct, seed, probe_time_s,
        coord, *plan_dataset(prof, seed), during,
    )  # fmt: skip
    check_workers(job.workers, coord.ranks_per_host * (gpus // coord.world))  # loaders here
    _check_steps(prof, gpus, job.workers)

    def check(run: RunResult) -> tuple[Target, None]:
        run.workload, run.engine = _workload(job), _engine_block()
        return _check_target(target, job), None

    plan = lambda target, _: _write_plan(job)  # noqa: E731 - open_run's plan(target, checked)
    if dry_run:
        return session_dry_run(check, plan, output=output, command=command)
    with open_run(check, output=output, command=command, coord=coord, save=save, keep=keep,
                  plan=plan, announce=announce, stall=stall) as ctx:  # fmt: skip
        _measure(job, ctx.session, ctx.run, ctx.target, progress_factory)
    assert ctx.outcome is not None
    return ctx.outcome


@dataclass(frozen=True)
class _Job:
    """One ``run_loader`` call's settled options and its dataset plan."""

    prof: Profile
    gpus: int
    workers: int
    epochs: int
    steps: int | None
    compute: str
    direct: bool | None
    seed: int
    probe_time_s: float | None
    coord: Coordinator
    files: tuple[FileSpec, ...]
    sizes: list[list[int]]
    during: CheckpointPlan | None = None


def _write_plan(job: _Job) -> WritePlan:
    """The dataset written once, the probe's reads (its levels, each every file up to
    PROBE_ALL_BYTES or PROBE_TIME_S), the epochs' reads, and the emulated compute (in full,
    as though no read overlapped it: an upper bound)."""
    prof = job.prof
    total = planned_bytes(prof, job.files)
    p = Plan(space_bytes=total, built_bytes=total)  # its samples made (encoded) as written
    p.add("dataset-write", "write", total, f"{len(job.files)} files", ops=len(job.files))
    levels = sorted({1, max(job.workers, 1), max(job.workers, 1) * (job.gpus // job.coord.world)})
    timed = total > PROBE_ALL_BYTES and job.probe_time_s is None
    for n in levels:
        p.add(f"probe-r{n}", "read", min(total, PROBE_ALL_BYTES), f"{n} readers",
              (job.probe_time_s or PROBE_TIME_S) if timed else job.probe_time_s)  # fmt: skip
    per_step = prof.batch_size * prof.sample_size
    steps = job.steps or max(1, prof.files * prof.samples_per_file // prof.batch_size // job.gpus)
    epoch = min(total, steps * job.gpus * per_step)
    p.add("loader", "read", epoch * job.epochs,
          f"{job.epochs} epochs x {steps} steps x {job.gpus} accelerator(s)")  # fmt: skip
    label = f"loader --profile {prof.name}"
    if job.during is not None:  # the save alone, then during the loop (one on disk at a time)
        d = job.during
        p.space_bytes += d.total_bytes
        p.add("ckpt-alone", "write", d.total_bytes, describe(d), ops=len(d.files))
        if d.probe_saves:
            p.add("ckpt-probed", "write", d.total_bytes * d.probe_saves, f"the same save "
                  f"{d.probe_saves} time(s) more beside the read probe ({READ_PROBE_IDLE_S:g} s "
                  "of the loader's reads alone first)", ops=len(d.files) * d.probe_saves)  # fmt: skip
        every = f", then every {d.every:g}{d.every_unit}" if d.every else ""
        p.add("ckpt-during", "write", d.total_bytes, f"at {d.at:g}{d.at_unit}{every} "
              "while the loop runs, each removed once written", ops=len(d.files))  # fmt: skip
        label += f" --during-checkpoint {d.model}"
        if (o := d.beside) is not None:  # another job: alone for a while, then beside the loop
            p.space_bytes += o.space_bytes
            p.add("beside-job", "write", o.space_bytes, f"{o.describe()}: its files, "
                  f"{BESIDE_ALONE_S:g} s alone, then as long as the loop", BESIDE_ALONE_S, o.files)  # fmt: skip
    return write_plan(label, p, overhead_s=job.epochs * steps * prof.compute_s)


def loader_write_plan(
    prof: Profile, gpus: int, steps: int, seed: int = 1, during: CheckpointPlan | None = None
) -> WritePlan:
    """The plan a default ``run_loader(profile=prof, gpus=, steps=, during=)`` announces
    (``_write_plan``): qualify's bound of its loader step (and of its run beside a save)."""
    job = _Job(prof, gpus, prof.workers, prof.epochs, steps, "sleep", None, seed, None,
               SingleProcess(), *plan_dataset(prof, seed), during)  # fmt: skip
    return _write_plan(job)


def _check_target(target: str, job: _Job) -> Target:
    """The resolved target, with room for the whole dataset."""
    tgt = resolve(target)
    # many ranks: the whole dataset; files and their folders (1 per 10,000) as inodes
    n = len(job.files) + (len(job.during.files) + 3 if job.during else 0)
    extra = job.during.total_bytes if job.during else 0  # one checkpoint on disk at a time
    extra += job.during.beside.space_bytes if job.during and job.during.beside else 0
    check_free_space(tgt, planned_bytes(job.prof, job.files) + extra, n + n // 10_000 + 2)
    return tgt


def _check_options(
    gpus: int,
    world: int,
    workers: int | None,
    steps: int | None,
    epochs: int | None,
    compute: str,
    during: bool = False,  # --during-checkpoint across hosts
) -> None:
    """UsageError for any option out of range, before anything is written."""
    if during:  # across hosts: the ranks' clocks differ (their saves' windows would not line up)
        raise UsageError("--during-checkpoint under torchrun runs on one host: not yet across hosts",
                         hint="launch the ranks on one host (torchrun --standalone)")  # fmt: skip
    if gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    if world > 1 and gpus != world:
        raise UsageError(
            f"--gpus {gpus} but torchrun launched {world} ranks: under torchrun each rank is "
            "one emulated accelerator",
            hint=f"omit --gpus (or give --gpus {world}), or launch {gpus} ranks",
        )
    if workers is not None and workers < 0:
        raise UsageError(f"--workers must be 0 or more, got {workers}")
    if steps is not None and steps < 2:
        raise UsageError(f"--steps must be at least 2 (the first step is left out), got {steps}")
    if epochs is not None and epochs < 1:
        raise UsageError(f"--epochs must be at least 1, got {epochs}")
    if compute not in COMPUTE_KINDS:
        raise UsageError(f"--compute {compute!r} is not valid", hint="use sleep or gpu")
    if compute == "gpu" and not cuda_available():
        raise UsageError("--compute gpu needs a CUDA device", hint="use --compute sleep")


def _check_steps(prof: Profile, gpus: int, workers: int) -> None:
    """UsageError when the dataset gives fewer than 2 steps per accelerator."""
    avail = RankBatchSampler.available_steps(
        prof.files, prof.samples_per_file, prof.batch_size, gpus, workers
    )
    if avail < 2:
        raise UsageError(
            f"profile {prof.name}: {prof.files} files × {prof.samples_per_file} samples give "
            f"{avail} step(s) of batch {prof.batch_size} per accelerator at --gpus {gpus}; "
            "the loop needs at least 2",
            hint="raise files with --set files=N or lower --gpus",
        )


def _workload(job: _Job) -> dict[str, Any]:
    """The result's workload block: the profile and every option that shapes the run."""
    prof = job.prof
    wl_params = {
        **{
            k: v
            for k, v in prof.to_dict().items()
            if k not in ("name", "path", "description")
            and (k not in PROFILE_OPTIONAL or v != PROFILE_PARAMS[k].default)
        },
        "gpus": job.gpus,
        "workers": job.workers,
        "epochs": job.epochs,
        "steps": job.steps,
        "compute": job.compute,
        "direct": job.direct,
        "seed": job.seed,
    }
    return {
        "name": prof.name,
        "path": prof.path,
        "generator": "loader",
        "spec_hash": _spec_hash(wl_params),
        "params": wl_params,
    }


def _engine_block() -> dict[str, Any]:
    import torch

    return {"name": "torch-dataloader", "version": torch.__version__}


def _measure(
    job: _Job, s: Any, run: RunResult, tgt: Any, progress_factory: Callable[[], Progress] | None
) -> None:
    """Inside the run session: lay the dataset out, probe, calibrate, run the loop, summarise."""
    prof, coord, w = job.prof, job.coord, job.workers
    remote = tgt.kind == "fsspec"
    engine = _probe_engine(remote)
    coord.attach(tgt)  # every rank's run dir exists: can ranks read each other's?
    runner = s.runner = PhaseRunner(
        tgt, engine, s.stop, progress_factory or Progress, coord=coord, guard=s.guard
    )
    # O_DIRECT by default on local targets; on URLs only --direct asks (and is refused)
    use_direct = runner.direct(not remote if job.direct is None else job.direct)
    cache = runner.cache_state(use_direct)
    # client-cache: drop the kernel's pages all the same (the client's own cache stays)
    dropped = cache in ("dropped", "client-cache")
    mode = "direct" if use_direct else ("dropped" if dropped else "buffered")
    local_gpus = job.gpus // coord.world  # loader processes this one runs (1 per torchrun rank)
    index, probe_index, own = _lay_out(job, runner)
    levels = sorted({1, max(w, 1), max(w, 1) * local_gpus})
    sweep = probe_storage(
        runner, probe_index, levels, direct=use_direct, seed=job.seed, time_s=job.probe_time_s
    )
    s.stop.check()
    coord.barrier()  # every rank calibrates at once, as they will load at once
    decode = DecodeEmulation(prof.decode_s, prof.decoded_size, prof.collate == "list")
    calib = calibrate(
        own, batch_size=prof.batch_size, workers=w, prefetch=prof.prefetch, gpus=local_gpus,
        seed=job.seed, stop=s.stop, decode=decode,
    )  # fmt: skip
    loop_steps, shard = job.steps, None
    if index is own:  # the ranks do not see each other's files: each shuffles its own
        loop_steps, shard = own_steps(coord, own, prof.batch_size, w, job.steps), (0, 1)
    cfg = LoopConfig(
        index, mode, prof.batch_size, w, prof.prefetch, prof.compute_s, job.compute, job.gpus,
        job.epochs, loop_steps, job.seed, shard, decode, job.during is not None,
    )  # fmt: skip
    cpu0 = cpu.sample()  # the client's CPU over the training loop (iobench.core.cpu)
    calib = Calibration.mean(coord.all_gather_object(calib))
    demand = _demand_bps(job)
    with cpu.CpuSampler() as sampler:  # and over time (loader.cpu_series)
        if job.during is None:
            result, block = run_on_ranks(cfg, coord, s.stop), None
        else:  # the loop beside a background checkpoint write (loader.during)
            result, block = _beside_save(job, cfg, s, runner, tgt, demand, use_direct)
    run.phases = list(runner.results)
    run.loader, run.estimate, notes = _summarise(
        prof, index, sweep, calib, result, cache, job.compute
    )
    run.loader["client_cpu"] = cpu.usage(cpu0, cpu.sample())
    if (series := sampler.series()) is not None:
        run.loader["cpu_series"] = series
    if block is not None:
        run.loader["during_checkpoint"] = block
    if coord.world > 1:  # the hosts of many clients (a one-client result has no such key)
        run.loader["hosts"] = len(set(coord.hosts))
    _warn(job, runner, notes, index, shared=index is not own, cached=not use_direct and not remote)


def _beside_save(job: _Job, cfg: LoopConfig, s: Any, runner: PhaseRunner, tgt: Any,
                 demand: float | None, direct: bool) -> tuple[LoopResult, dict[str, Any]]:  # fmt: skip
    """The loop beside a background checkpoint write (``loader.during``), the read probe
    before it: the loader's reads, every loader's workers at once."""
    d, w = job.during, job.workers
    assert d is not None
    probe = (
        ProbeSpec(cfg.index, cfg.mode, max(w, 1) * job.gpus, job.seed) if d.probe_saves else None
    )
    return beside(d, tgt, s.stop, runner.warn,
                  lambda c: run_on_ranks(replace(cfg, clock=c), job.coord, s.stop), demand, direct,
                  job.coord, probe, w * job.prof.prefetch * job.prof.compute_s)  # fmt: skip


def _demand_bps(job: _Job) -> float | None:
    """The bytes a second the profile's accelerators ask for (None at compute 0)."""
    prof = job.prof
    if prof.compute_s <= 0:
        return None
    return job.gpus * prof.batch_size * prof.sample_size / prof.compute_s


def _probe_engine(remote: bool) -> Any:
    """The storage probe's engine: fsspec on a URL (as the loader's workers read), else posix."""
    from ..engines.registry import get_engine

    return get_engine("fsspec" if remote else "posix")


def _lay_out(job: _Job, runner: PhaseRunner) -> tuple[DatasetIndex, DatasetIndex, DatasetIndex]:
    """(the loader's index, the probe's, this rank's own files) once the dataset is written."""
    coord, prof = job.coord, job.prof
    mine = range(coord.rank, prof.files, coord.world)  # file i by rank i mod ranks
    own = generate_dataset(
        runner, prof, [job.files[i] for i in mine], [job.sizes[i] for i in mine],
        data_seed(job.seed, coord.rank),
    )  # fmt: skip
    index, probe_index = shard_indexes(coord, own, prof.files)
    return index, probe_index, own


def _warn(
    job: _Job,
    runner: PhaseRunner,
    notes: list[str],
    index: DatasetIndex,
    shared: bool,
    cached: bool,
) -> None:
    """The run's warnings: the summary's notes, own-files reads, page cache, CPU oversubscribed."""
    coord, w = job.coord, job.workers
    if not shared:
        runner.warn(
            "the ranks do not see each other's run directories: each rank's loader "
            "read the files it wrote, so client caches may inflate the figures"
        )
    for note in notes:
        runner.warn(note)
    if cached:
        _cache_warning(runner, index)
    cpus = os.cpu_count() or 1
    per_host = coord.ranks_per_host * (job.gpus // coord.world)
    if per_host * (w + 1) > cpus:
        runner.warn(
            f"{per_host} emulated accelerator(s) on this host × ({w} workers + 1 main loop) "
            f"= {per_host * (w + 1)} processes on {cpus} CPUs: the loader competes for "
            "cores, as the calibration measured (see bound)"
        )


def _summarise(
    prof: Profile,
    index: DatasetIndex,
    sweep: Sequence[sv.SweepPoint],
    calib: Calibration,
    res: LoopResult,
    cache: str,
    compute: str = "sleep",
) -> tuple[dict[str, Any], dict[str, Any] | None, list[str]]:
    """The loader and estimate blocks of result.json, and warnings worth a line."""
    predicted, basis, estimate, notes = _prediction(prof, index, sweep, calib, res, compute)
    bound, bound_basis = _bound(prof, index, sweep, calib, res)
    loader = {
        "profile": prof.name,
        "gpus": res.gpus,
        "workers": res.workers,
        "batch_size": res.batch_size,
        "prefetch": prof.prefetch,
        "steps": res.steps,
        "epochs": res.epochs,
        "au": res.au,
        "au_min": prof.au_min,  # the profile's pass line, and where the measured AU falls
        "au_below_min": None if res.au is None else bool(res.au < prof.au_min),
        "au_per_epoch": res.au_per_epoch,
        "samples_per_s": res.samples_per_s,
        "bytes_per_s": res.bytes_per_s,
        "load_wait_s": wait_summary(res.wait),
        "compute_s": prof.compute_s,
        "compute_measured_s": res.compute_s,
        "step_s": res.step_s,
        "bound": bound,
        "bound_basis": bound_basis,
        "predicted_au": predicted,
        "prediction_basis": basis,
        "cache": cache,
        "calibration": calib.to_dict(),
        "worker_read_s_per_sample": res.read_s_per_sample,
        "worker_decode_s_per_sample": res.decode_s_per_sample,
        "main_cpu_s_per_step": res.main_cpu_s,
        "decode": decode_block(prof, res),
        "handoff": handoff_block(res),
        "dataset": {
            "format": index.fmt,
            "files": index.n_files,
            "samples": index.n_samples,
            "samples_per_file": index.samples_per_file,
            "bytes": index.total_bytes,
        },
        "points": [{"gpus": res.gpus, "au": res.au}],
        "ranks": ranks_block(res),
    }
    if predicted is not None and res.steps >= 20 and abs(predicted - res.au) > 0.1:
        notes.append(
            f"measured AU {res.au:.2f} differs from the model's {predicted:.2f} by more than "
            "10 points: the storage probe may not represent the loader's reads (noisy device?)"
        )
    return loader, estimate, notes


def _prediction(
    prof: Profile,
    index: DatasetIndex,
    sweep: Sequence[sv.SweepPoint],
    calib: Calibration,
    res: LoopResult,
    compute: str,
) -> tuple[float | None, str, dict[str, Any] | None, list[str]]:
    """(the model's AU for the measured configuration, its basis, the estimate block, notes)."""
    c = prof.compute_s
    if c <= 0:
        basis = "compute_s is 0: AU is 0 by definition; no prediction"
        note = (
            "compute_s is 0: AU is 0 by definition; this run measures the loader's own ceiling "
            f"({res.samples_per_s:,.0f} samples/s)"
        )
        return None, basis, None, [note]
    params = loader_params(
        index, batch_size=res.batch_size, workers=res.workers, prefetch=prof.prefetch,
        compute_s=c, calibration=calib,
    )  # fmt: skip
    ce = emulated_compute_s(c, compute, calib)
    pred = predict(replace(params, compute_s=ce), sweep, res.gpus, res.steps)
    basis = pred.basis
    if ce != c:
        basis += (
            f"; compute taken as {format_seconds(ce)} per step: the profile's "
            f"{format_seconds(c)} plus the {format_seconds(ce - c)} a sleep overshoots on "
            "this host (measured), since the measured sleep counts as compute"
        )
    est = sv.estimate(params, sweep, list(range(1, res.gpus + 1)), prof.au_min, profile=prof.name)
    estimate = est.to_dict()
    estimate["basis"] = (
        f"{est.basis}; storage probed with the loader's own files at "
        f"{', '.join(str(p.readers) for p in sweep)} readers; loader overhead and decode "
        "measured at compute 0 on cached data"
    )
    return pred.au, basis, estimate, []


def _bound(
    prof: Profile,
    index: DatasetIndex,
    sweep: Sequence[sv.SweepPoint],
    calib: Calibration,
    res: LoopResult,
) -> tuple[str, str]:
    """What limited the run, and the figures that say so."""
    c = prof.compute_s
    cpu_s = cpu_step_s(c, calib)
    supply = loader_params(  # compute does not enter the storage supply; the model wants > 0
        index, batch_size=res.batch_size, workers=res.workers, prefetch=prof.prefetch,
        compute_s=max(c, 1e-6), calibration=calib,
    )  # fmt: skip
    storage_s = storage_supply_s(supply, sweep, res.gpus) if sweep else None
    bound = bound_of(res.au, res.step_s, res.compute_s, cpu_s, storage_s)
    basis = (
        f"AU {res.au:.3f} (compute bound at >= {COMPUTE_BOUND_AU:.2f}); step "
        f"{format_seconds(res.step_s)} measured vs {format_seconds(cpu_s)} on cached data "
        f"(loader overhead {format_seconds(calib.overhead_s)}/step, ceiling "
        f"{format_seconds(calib.step_s)}/step at compute 0): time lost to the loader's CPU "
        f"{format_seconds(max(cpu_s - res.compute_s, 0))}, to storage "
        f"{format_seconds(max(res.step_s - cpu_s, 0))} per step"
    )
    if storage_s is not None:
        basis += (
            f"; storage needs {format_seconds(storage_s)} per step at the loader's "
            f"concurrency (probe) against {format_seconds(cpu_s)} for the loader itself"
        )
    return bound, basis


def decode_block(prof: Profile, res: LoopResult) -> dict[str, Any]:
    """What the workers spent decoding per sample, beside what the profile says the real
    pipeline spent (its ``decode_s``, ``decoded_size``, ``open_s``), so the replay and the
    run it was profiled from can be held side by side."""
    emulated = prof.decode_s > 0 or prof.decoded_size > 0
    return {
        "cpu_s_per_sample": res.decode_cpu_s_per_sample,
        "wall_s_per_sample": res.decode_s_per_sample,
        "profile_cpu_s": prof.decode_s,
        "profile_wall_s": prof.decode_wall_s,
        "profile_decoded_size": prof.decoded_size,
        "profile_open_s": prof.open_s,
        "basis": (
            f"the {res.workers} workers' thread CPU (CLOCK_THREAD_CPUTIME_ID) decoding each "
            "sample in its format"
            + (
                f", plus the profile's decode emulated: each sample widened to "
                f"{format_bytes(prof.decoded_size)} and {format_seconds(prof.decode_s)} of CPU "
                "burnt per sample (spent by the thread's own CPU clock, so no host calibration; "
                "a host faster or slower than the profiled one still spends the profiled CPU)"
                if emulated
                else "; the profile gives no decode cost to emulate"
            )
            + "; wall includes collation"
        ),
    }


def _cache_warning(runner: PhaseRunner, index: DatasetIndex) -> None:
    mem = physical_memory()
    if fs_class(runner.target.fs_type) == "memory" or (mem and index.total_bytes < mem):
        runner.warn(
            f"data loader read the dataset ({format_bytes(index.total_bytes)}) without O_DIRECT "
            f"and it fits in page cache ({format_bytes(mem)} RAM): loader figures may be the "
            "page cache's speed, not the storage's (pages were dropped after each read where "
            "the kernel allows)"
        )
