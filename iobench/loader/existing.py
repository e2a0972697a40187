"""``iobench loader PATH --existing``: the user's own dataset through a real DataLoader, read
only, with real decoding, and the split of each sample's time into storage read, decode CPU and
collation, so the bound (storage, decode CPU or compute) is measured, not assumed.

The dataset is never written, renamed, locked or touched: it is listed and stat'ed
(``formats.detect``), each file opened ``O_RDONLY`` (``existing_data``), no run directory is
made in it, and the results go to the output directory, which may not lie inside it. A
sample that fails (corrupt file, CRC mismatch, the user's transform raising) is counted and
named (a failed file counts the samples it held); more than ``FAIL_SHARE`` of them fails the
run (exit 4, the result kept and marked). The loop is watched like every other phase (no batch
within ``--stall-timeout``: exit 4 naming what the workers are on), the first stop signal ends
the wait for a batch, and the plan is checked first: DataLoader workers bounded by the host,
the largest files against memory, the batch size against the samples (``check_plan``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.cpu import loader_pids, processes_cpu_s
from ..core.errors import EngineError, Interrupted, IobenchError, UsageError
from ..core.safeio import protect_input, refuse_inside_input
from ..core.units import format_bytes
from ..formats.detect import DatasetScan, scan
from ..result.file import RunResult
from ..result.stats import Histogram
from ..run.guard import UNARMED, UNGUARDED, RunGuard, StallSetting
from ..run.outdir import claim_output_dir, output_dir_for, release_output_dir
from ..run.session import RunOutcome, RunSession, new_result
from ..spec.workload import PROFILE_PARAMS, coerce, load_profile, parse_overrides
from ..target import StopFlag, Target, is_url, resolve_source, scrub
from .calibration import COMPUTE_BOUND_AU
from .existing_read import READ_SHARE
from .existing_summary import FAIL_SHARE, summarise

#: The profile keys that apply to an existing dataset (the others describe a synthetic one).
LOOP_KEYS = ("batch_size", "compute_s", "workers", "prefetch", "epochs", "au_min")


@dataclass(frozen=True)
class ExistingJob:
    """The settled options of one run over an existing dataset."""

    path: str
    fmt: str | None
    batch_size: int
    compute_s: float
    workers: int
    prefetch: int
    epochs: int
    au_min: float
    steps: int | None
    compute: str
    mode: str  # dropped | cached (local); none (URL)
    transform: str | None
    profile: str | None
    seed: int = 1


def settle(
    path: str,
    profile: str | None,
    sets: list[str] | None,
    **opts: Any,
) -> ExistingJob:
    """The job from the options: the loop's settings from ``profile`` (or the defaults) and
    ``--set``; UsageError for a key that describes a synthetic dataset."""
    overrides = parse_overrides(sets)
    alien = sorted(k for k in overrides if k in PROFILE_PARAMS and k not in LOOP_KEYS)
    if alien:
        raise UsageError(
            f"--set {alien[0]} describes a synthetic dataset; --existing reads the dataset as "
            "it is",
            hint=f"with --existing, --set takes {', '.join(LOOP_KEYS)}",
        )
    if profile:
        prof = load_profile(profile, overrides)
        values = {k: getattr(prof, k) for k in LOOP_KEYS}
    else:
        values = {k: PROFILE_PARAMS[k].default for k in LOOP_KEYS}
        for k, v in overrides.items():
            if k not in PROFILE_PARAMS:
                raise UsageError(f"--set {k}: unknown key", hint=f"use {', '.join(LOOP_KEYS)}")
            values[k] = coerce(k, PROFILE_PARAMS[k], v, "--set")
    for key in ("workers", "epochs"):
        if opts.get(key) is not None:
            values[key] = opts[key]
    return ExistingJob(
        path=path, fmt=opts.get("fmt"), steps=opts.get("steps"),
        compute=opts.get("compute", "sleep"), transform=opts.get("transform"),
        mode="none" if is_url(path) else ("cached" if opts.get("cached") else "dropped"),
        profile=profile, **values,
    )  # fmt: skip


def dataset_target(path: str) -> Target:
    """The dataset's location described without writing (a read-only mount is fine), checked
    as ``profile``'s is (``target.resolve_source``: an empty ``file://``, a missing path, a
    kernel interface such as /proc are refused, exit 2)."""
    if is_url(path):
        from ..target import resolve_url

        return resolve_url(path)
    t = resolve_source(path, "dataset")
    protect_input(t.root)  # read only: nothing this process writes may land inside it
    st = os.statvfs(t.root)
    return Target(
        free_bytes=st.f_bavail * st.f_frsize,
        path_or_url=t.path_or_url,
        root=t.root,
        fs_type=t.fs_type if t.mount_point else "unknown",
        mount_point=t.mount_point,
        mount_source=t.mount_source,
        direct_io=False,
        direct_reason="not used: an existing dataset is read buffered and read-only",
    )


def _check_output(out_dir: Path, tgt: Target) -> None:
    """The result directory must not lie inside the dataset: by inode (``safeio``), so a bind
    mount of the dataset or a link to it is refused as surely as its own path."""
    if tgt.kind == "fsspec":
        return
    refuse_inside_input(out_dir, "--output", "--output DIR")


def run_existing(
    job: ExistingJob,
    *,
    output: str | None = None,
    command: str | None = None,
    progress: Callable[[str], None] | None = None,
    stall: StallSetting = UNARMED,
) -> RunOutcome:
    """Plan (list and stat), run the DataLoader over the dataset, summarise; see the module."""
    from .existing_data import load_transform
    from .loop import _GpuBurn  # noqa: F401 - fail early when torch is missing

    _check_job(job)
    load_transform(job.transform)  # a bad import path: exit 2 before anything is written
    tgt = dataset_target(job.path)
    plan = scan(tgt.root if tgt.kind == "posix" else job.path, job.fmt, seed=job.seed)
    planned = check_plan(job, plan)
    run = new_result(command)
    out_dir = output_dir_for(output, run.run_id)
    _check_output(out_dir, tgt)
    claim_output_dir(out_dir)
    run.workload = _workload(job, plan)
    run.engine = _engine_block()
    run.warnings.extend(planned)
    with _session(run, tgt, out_dir, stall) as s:
        measured = run_pipeline(job, plan, s.stop, progress, s.guard.signals.raising, s.guard)
        run.loader, notes = summarise(job, plan, measured)
        run.warnings.extend(n for n in notes if n not in run.warnings)
        _check_failures(run.loader["existing"]["failed"], job.transform)
    return s.outcome()


def _check_job(job: ExistingJob) -> None:
    if job.steps is not None and job.steps < 2:
        raise UsageError(
            f"--steps must be at least 2 (the first step is left out), got {job.steps}"
        )
    if job.workers < 0:
        raise UsageError(f"--workers must be 0 or more, got {job.workers}")
    from .torchdata import check_workers

    check_workers(job.workers)
    if job.compute not in ("sleep", "gpu"):
        raise UsageError(f"--compute {job.compute!r} is not valid", hint="use sleep or gpu")
    if job.compute == "gpu":
        from .run import cuda_available

        if not cuda_available():
            raise UsageError("--compute gpu needs a CUDA device", hint="use --compute sleep")


def check_plan(job: ExistingJob, plan: DatasetScan) -> list[str]:
    """The plan checked before anything is written: UsageError when no file can be read
    whole in the memory a reader may hold, or when a one-sample-per-file dataset gives fewer
    than 2 full batches over its readers; the warnings the run then carries (files too large
    to read, which count as failed; links out of the dataset, skipped)."""
    from ..formats.registry import get_reader
    from .existing_read import read_limit

    notes = []
    limit = read_limit(job.workers)
    big = sorted(
        (i for i, n in plan.sizes.items() if limit and n > limit), key=lambda i: plan.sizes[i]
    )
    if big:
        top = big[-1]
        what = (
            f"{len(big):,} of {len(plan.sizes):,} file(s) stat'ed are larger than the "
            f"{format_bytes(limit)} one reader may hold in memory (physical memory / "
            f"({READ_SHARE} × {max(job.workers, 1)} reader(s))); largest: {plan.paths[top]}, "
            f"{format_bytes(plan.sizes[top])}"
        )
        if len(big) == len(plan.sizes):
            raise UsageError(f"{what}: nothing could be read", hint="give fewer --workers")
        notes.append(f"{what}: not read, counted as failed samples")
    if plan.links_outside:
        notes.append(
            f"{plan.links_outside:,} link(s) to files outside the dataset {plan.root} were "
            "skipped (never opened)"
        )
    if getattr(get_reader(plan.fmt), "SAMPLES_PER_FILE", None) == 1:
        _check_batches(job, plan.n_files)
    return notes


def _full_batches(samples: int, readers: int, batch: int) -> int:
    """Full batches when ``samples`` are dealt round-robin to ``readers``, each batching its own."""
    return sum((samples // readers + (r < samples % readers)) // batch for r in range(readers))


def _check_batches(job: ExistingJob, samples: int) -> None:
    """UsageError when the dataset's samples (known: one per file) give fewer than 2 full
    batches of ``batch_size`` over the readers. Refused rather than clamped: the AU depends
    on the batch size, so a different one would measure another training job."""
    readers = max(job.workers, 1)
    if _full_batches(samples, readers, job.batch_size) >= 2:
        return
    fit = [b for b in range(samples // 2, 0, -1) if _full_batches(samples, readers, b) >= 2]
    hint = f"give --set batch_size={fit[0]} or less" if fit else "give a dataset of more files"
    raise UsageError(
        f"batch_size {job.batch_size:,} over {samples:,} sample(s) (one per file) and "
        f"{readers} reader(s) gives {_full_batches(samples, readers, job.batch_size)} full "
        "batch(es); the loop needs 2 (the first is left out)",
        hint=hint,
    )


def _check_failures(failed: dict[str, Any], transform: str | None = None) -> None:
    """EngineError (exit 4) when more than FAIL_SHARE of the samples failed (a failed file
    counts the samples it held); the hint names the transform when most failed in it."""
    if failed["share"] > FAIL_SHARE:
        est = f", {failed['estimated']:,} of them estimated" if failed.get("estimated") else ""
        in_fn = failed.get("transform", 0)
        hint = "check the dataset's files (the result lists the first ones)"
        if transform and in_fn * 2 >= failed["count"]:
            hint = f"check the transform {transform}: {in_fn:,} of the samples failed in it"
        raise EngineError(
            f"{failed['count']:,} of {failed['count'] + failed['ok']:,} samples failed "
            f"({failed['share']:.1%}{est}, more than {FAIL_SHARE:.0%}); first: "
            + "; ".join(failed["examples"][:3]),
            hint=hint,
        )


@contextmanager
def _session(run: RunResult, tgt: Target, out_dir: Path, stall: StallSetting) -> Iterator[Any]:
    """Signals to a stop flag; an error during the run kept in the session (no run dir);
    the loop watched for stalls (the session's guard, armed by ``--stall-timeout``). Yields
    the session."""
    s = RunSession(run, tgt, out_dir, save=True, keep=False)
    guard = s.guard = RunGuard(s, stall)
    run.target = tgt.to_dict()

    def fail(e: IobenchError) -> None:
        s.error = e
        run.status = "interrupted" if isinstance(e, Interrupted) else "failed"
        run.error = e.one_line()

    with guard:
        try:
            yield s
        except UsageError:
            release_output_dir(out_dir)  # bad input writes nothing, not even the directory
            raise
        except IobenchError as e:
            fail(e)
        except OSError as e:
            fail(EngineError(f"I/O error: {e.strerror or e}"))
        except KeyboardInterrupt:
            fail(Interrupted("interrupted by SIGINT"))
        except Exception as e:  # noqa: BLE001 - a bug must not cost what was measured
            fail(EngineError(f"internal error: {type(e).__name__}: {e}".replace("\n", " ")))
    if s.error is None and s.stop.is_set():
        fail(Interrupted("interrupted"))


def _workload(job: ExistingJob, plan: DatasetScan) -> dict[str, Any]:
    params = {
        "dataset": scrub(job.path),
        "format": plan.fmt,
        **{k: getattr(job, k) for k in LOOP_KEYS},
        "steps": job.steps,
        "compute": job.compute,
        "cache": job.mode,
        "transform": job.transform,
        "seed": job.seed,
    }
    blob = json.dumps({"generator": "loader-existing", "params": params}, sort_keys=True)
    name = os.path.basename(job.path.rstrip("/")) or job.path
    return {
        "name": f"existing:{scrub(name)}",
        "path": None,
        "generator": "loader-existing",
        "spec_hash": hashlib.sha256(blob.encode()).hexdigest()[:16],
        "params": params,
    }


def _engine_block() -> dict[str, Any]:
    import torch

    return {"name": "torch-dataloader", "version": torch.__version__}


def _add(acc: dict[int, dict[str, Any]], st: Any) -> None:
    """Sum a batch's figures into its worker's totals (names: the first few kept) and keep
    its own (samples, read, decode CPU, collate) for the spread of the means."""
    from .existing_data import NAMES_KEPT, SUMMED
    from .existing_data import SUMMED_OF as _SUMMED_OF

    if st.samples:
        acc.setdefault(-1, {"per_batch": []})["per_batch"].append(
            (st.samples, st.read_s, st.decode_cpu_s, st.collate_cpu_s)
        )
    w = acc.get(st.worker)
    if w is None:
        w = acc[st.worker] = {"worker": st.worker, "batches": 0, "failed_names": [],
                              "warned_names": [], **dict.fromkeys(SUMMED, 0)}  # fmt: skip
    w["batches"] += 1
    for k, v in zip(SUMMED, _SUMMED_OF(st), strict=True):
        if v:  # most figures of a batch are 0 (failures, losses): one add per batch, ~10 µs
            w[k] += v
    if st.failed_names:
        w["failed_names"] = (w["failed_names"] + st.failed_names)[:NAMES_KEPT]
    if st.warned_names:
        w["warned_names"] = (w["warned_names"] + st.warned_names)[:NAMES_KEPT]


def run_pipeline(
    job: ExistingJob,
    plan: DatasetScan,
    stop: StopFlag,
    progress: Callable[[str], None] | None = None,
    interruptible: Callable[[], Any] = nullcontext,
    guard: RunGuard = UNGUARDED,
) -> dict[str, Any]:
    """The training loop over the dataset: per epoch, time the wait for each batch and the
    emulated compute; every batch's worker figures summed per worker (all steps).
    ``interruptible``: the block in which the first stop signal raises at once (the wait for
    a batch, which a stuck worker or transform would make endless); ``guard``: the session's."""
    from torch.utils.data import DataLoader

    from .existing_data import ExistingDataset, Stages, decode_warnings
    from .existing_read import read_limit
    from .loop import _GpuBurn
    from .torchdata import _worker_init

    w = job.workers
    stages = Stages(w)
    ds = ExistingDataset(
        plan.root, plan.paths, plan.fmt, job.batch_size, job.mode, transform=job.transform,
        storage_options=plan.storage_options, seed=job.seed, limit=read_limit(w), stages=stages,
    )  # fmt: skip
    compute: Callable[[float], None] = _GpuBurn(0) if job.compute == "gpu" else time.sleep
    workers: dict[int, dict[str, Any]] = {}
    epochs = []
    # watched as a phase: no batch and no worker step (a stage entered, a chunk read) within
    # the stall timeout gives up (exit 4), naming each busy worker's file or transform
    detail = lambda: stages.describe(plan.paths, job.transform)  # noqa: E731
    watched = guard.watching(None, "loader", detail=detail, moving=stages.moved)
    with decode_warnings(), closing(ds), watched:  # closing: its directory's descriptor
        for epoch in range(job.epochs):
            ds.epoch = epoch
            loader = DataLoader(
                ds, batch_size=None, num_workers=w, prefetch_factor=job.prefetch if w else None,
                worker_init_fn=_worker_init if w else None,
            )  # fmt: skip
            try:
                epochs.append(
                    _epoch(job, iter(loader), compute, workers, stop, interruptible, guard.tick)
                )
            except (IobenchError, KeyboardInterrupt):
                raise
            except (OSError, RuntimeError, ImportError) as e:
                from .loop import _last_line

                raise EngineError(f"data loader: {_last_line(e)}") from None
            if progress is not None:
                progress(f"epoch {epoch + 1}/{job.epochs}: {epochs[-1]['steps']} steps")
    per_batch = workers.pop(-1, {}).get("per_batch", [])
    with guard.watching(None, "cache-read-probe"):  # its reads may block as the loop's may
        probe = cached_read(plan, job)
    return {
        "epochs": epochs,
        "workers": [workers[k] for k in sorted(workers)],
        "per_batch": per_batch,
        "cached_read": probe,
    }


#: Files the page-cache read probe reads twice (the second read timed).
CACHED_PROBE_FILES = 16


def cached_read(plan: DatasetScan, job: ExistingJob) -> dict[str, Any] | None:
    """Seconds per file a read from the page cache takes: up to CACHED_PROBE_FILES files (a
    seeded sample) read twice in this process after the loop, the second read timed (what a
    local cache tier in RAM would give); their pages dropped again after. None for a URL."""
    from .existing_data import BatchStats
    from .existing_read import open_regular, read_file, read_limit

    if is_url(plan.root) or not plan.paths:
        return None
    import numpy as np

    rng = np.random.default_rng([job.seed, 99])
    pick = rng.choice(len(plan.paths), min(CACHED_PROBE_FILES, len(plan.paths)), replace=False)
    warm, timed = BatchStats(), BatchStats()
    for i in sorted(int(k) for k in pick):
        path = os.path.join(plan.root, plan.paths[i])
        try:
            read_file(path, "cached", warm, None, read_limit(job.workers))
            timed.bytes += len(read_file(path, "cached", timed, None, read_limit(job.workers)))
            timed.files += 1
            if job.mode == "dropped":
                fd = open_regular(path)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        except (OSError, MemoryError):
            continue
    if not timed.files:
        return None
    return {
        "files": timed.files,
        "bytes": timed.bytes,
        "read_s_per_file": timed.read_s / timed.files,
    }


def _epoch(  # noqa: PLR0915 - the measured loop: one frame, no calls between clocks
    job: ExistingJob,
    it: Any,
    compute: Callable[[float], None],
    workers: dict[int, dict[str, Any]],
    stop: StopFlag,
    interruptible: Callable[[], Any] = nullcontext,
    tick: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """One pass (or ``job.steps`` steps): AU = compute after the first step ÷ wall after it.
    A batch whose every sample failed is no step, but counts toward ``job.steps`` (the run
    ends there even when every sample fails). ``tick``: the watchdog's heartbeat."""
    wait = Histogram()
    t_start = first_end = prev = last = time.perf_counter()
    compute_sum = 0.0
    cpu0: float | None = None
    steps = samples = timed = nbytes = empty = 0
    overhead: list[float] = []
    handoffs: list[float] = []
    try:
        while job.steps is None or steps + empty < job.steps:
            stop.check()
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                with interruptible():
                    _batch, st = next(it)
            except StopIteration:
                break
            t1, fetch_cpu = time.perf_counter(), time.thread_time() - c0
            tick()
            _add(workers, st)
            del _batch
            if not st.samples:
                empty += 1  # every sample of it failed (or a worker's tail): no step
                last = t1
                continue
            tc = time.perf_counter()
            if job.compute_s > 0:
                compute(job.compute_s)
            t2 = time.perf_counter()
            tick()
            steps += 1
            if steps > 1:  # the first step (workers starting) is left out, as DLIO does
                wait.record(int((t1 - t0) * 1e9))
                compute_sum += t2 - tc if job.compute_s > 0 else 0.0
                samples += st.samples
                nbytes += st.bytes
                timed += 1
                own, handoff = step_overhead(prev, (t0, t1, tc), st.ready_t, fetch_cpu)
                overhead.append(own)
                if handoff is not None:
                    handoffs.append(handoff)
            else:
                first_end = t2
                cpu0 = processes_cpu_s(loader_pids(it))
            prev = last = t2
        t_end = time.perf_counter()
        cpu1 = processes_cpu_s(loader_pids(it))
    except BaseException:
        _end_workers(it)
        raise
    finally:
        if hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
    # to the last batch: the DataLoader's last ``next`` then waits for every worker to end and
    # joins them (a loader per epoch: no persistent workers), which is no step of training
    span = max(last - first_end, 1e-9)
    return {
        "steps": steps, "timed_steps": timed, "samples": samples, "bytes": nbytes, "wall_s": t_end - t_start,
        "timed_s": span, "first_step_s": first_end - t_start, "compute_s": compute_sum,
        "au": compute_sum / span if timed else 0.0, "wait": wait, "overhead_s": overhead,
        "handoff_s": handoffs,
        # main process and workers from the first step's end to the epoch's (None: not known)
        "loader_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
    }  # fmt: skip


def _end_workers(it: Any) -> None:
    """Interrupted (or failed) while workers may be stuck in a read or the user's transform:
    SIGTERM them now (their default), or torch's shutdown waits 5 s for each. Their pids are
    taken out of torch's SIGCHLD check first: a worker ended on purpose is no failure."""
    procs = [p for p in getattr(it, "_workers", ()) if p.is_alive()]
    if not procs:
        return
    if getattr(it, "_worker_pids_set", False):
        from torch.utils.data import _utils

        _utils.signal_handling._remove_worker_pids(id(it))
        it._worker_pids_set = False
    for proc in procs:
        proc.terminate()


def step_overhead(
    prev: float, times: tuple[float, float, float], ready: float, fetch_cpu: float
) -> tuple[float, float | None]:
    """(the main loop's own seconds in one step, the hand-off part of them or None).

    ``times``: (asked for the batch, got it, compute started); ``ready``: when the worker
    finished the batch (0: unknown, the whole fetch then taken as waiting); ``fetch_cpu``:
    the main thread's CPU seconds in the fetch. The main loop's own: from the last compute's
    end to asking (``prev`` → ``t0``), the fetch from when the batch was finished or asked
    for, whichever is later (``max(ready, t0)`` → ``t1``: the queue, the move to shared
    memory and back, unpickling), and the bookkeeping before compute (``t1`` → ``tc``). The
    fetch is serial with compute whenever the workers are ahead (measured: with one worker
    behind it is the hand-off below; with two ahead, the loop's own time grew by as much), so
    it is counted whole. The hand-off: a batch finished after the loop asked, its fetch less
    the main thread's CPU in it (the worker's side: the move to shared memory)."""
    t0, t1, tc = times
    own = max(t0 - prev, 0.0) + max(tc - t1, 0.0)
    if ready <= 0:
        return own, None
    fetch = max(t1 - max(ready, t0), 0.0)
    handoff = max(fetch - max(fetch_cpu, 0.0), 0.0) if ready > t0 else None
    return own + fetch, handoff


__all__ = [
    "COMPUTE_BOUND_AU",
    "FAIL_SHARE",
    "ExistingJob",
    "run_existing",
    "run_pipeline",
    "settle",
]
