"""``iobench loader PATH --existing``: the user's own dataset through a real DataLoader, read
only, with real decoding, and the split of each sample's time into storage read, decode CPU and
collation, so the bound (storage, decode CPU or compute) is measured, not assumed.

The dataset is never written, renamed, locked or touched: it is listed and stat'ed
(``formats.detect``), each file opened ``O_RDONLY`` (``existing_data``), no run directory is
made in it, and the results go to the output directory, which may not lie inside it. A
sample that fails (corrupt file, CRC mismatch, the user's transform raising) is counted and
named; more than ``FAIL_SHARE`` of them fails the run (exit 4, the result kept and marked).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import EngineError, Interrupted, IobenchError, UsageError
from ..formats.detect import DatasetScan, scan
from ..runner import (
    RunOutcome,
    RunSession,
    claim_output_dir,
    new_result,
    output_dir_for,
    release_output_dir,
)
from ..safeio import protect_input, refuse_inside_input, why_missing
from ..spec import PROFILE_PARAMS, coerce, load_profile, parse_overrides
from ..stats import Histogram
from ..target import SignalGuard, StopFlag, Target, find_mount, is_url, read_mountinfo, scrub
from .calibration import COMPUTE_BOUND_AU
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
    """The dataset's location described without writing (a read-only mount is fine)."""
    if is_url(path):
        from ..target import resolve_url

        return resolve_url(path)
    p = path.removeprefix("file://")
    if not os.path.exists(p):
        raise UsageError(f"dataset {p} {why_missing(p)}", hint="give the dataset's directory")
    if not os.path.isdir(p):
        raise UsageError(f"dataset {p} is not a directory", hint="give the dataset's directory")
    real = os.path.realpath(p)
    protect_input(real)  # read only: nothing this process writes may land inside it
    m = find_mount(real, read_mountinfo())
    st = os.statvfs(real)
    return Target(
        free_bytes=st.f_bavail * st.f_frsize,
        path_or_url=p,
        root=real,
        fs_type=m.fs_type if m else "unknown",
        mount_point=m.mount_point if m else "",
        mount_source=m.source if m else "",
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
) -> RunOutcome:
    """Plan (list and stat), run the DataLoader over the dataset, summarise; see the module."""
    from .existing_data import load_transform
    from .loop import _GpuBurn  # noqa: F401 - fail early when torch is missing

    _check_job(job)
    load_transform(job.transform)  # a bad import path: exit 2 before anything is written
    tgt = dataset_target(job.path)
    plan = scan(tgt.root if tgt.kind == "posix" else job.path, job.fmt, seed=job.seed)
    run = new_result(command)
    out_dir = output_dir_for(output, run.run_id)
    _check_output(out_dir, tgt)
    claim_output_dir(out_dir)
    run.workload = _workload(job, plan)
    run.engine = _engine_block()
    with _session(run, tgt, out_dir) as s:
        measured = run_pipeline(job, plan, s.stop, progress)
        run.loader, notes = summarise(job, plan, measured)
        run.warnings.extend(n for n in notes if n not in run.warnings)
        _check_failures(run.loader["existing"]["failed"])
    return s.outcome()


def _check_job(job: ExistingJob) -> None:
    if job.steps is not None and job.steps < 2:
        raise UsageError(
            f"--steps must be at least 2 (the first step is left out), got {job.steps}"
        )
    if job.workers < 0:
        raise UsageError(f"--workers must be 0 or more, got {job.workers}")
    if job.compute not in ("sleep", "gpu"):
        raise UsageError(f"--compute {job.compute!r} is not valid", hint="use sleep or gpu")
    if job.compute == "gpu":
        from .run import cuda_available

        if not cuda_available():
            raise UsageError("--compute gpu needs a CUDA device", hint="use --compute sleep")


def _check_failures(failed: dict[str, Any]) -> None:
    """EngineError (exit 4) when more than FAIL_SHARE of the samples failed."""
    if failed["share"] > FAIL_SHARE:
        raise EngineError(
            f"{failed['count']:,} of {failed['count'] + failed['ok']:,} samples failed "
            f"({failed['share']:.1%}, more than {FAIL_SHARE:.0%}); first: "
            + "; ".join(failed["examples"][:3]),
            hint="check the dataset's files (the result lists the first ones)",
        )


@contextmanager
def _session(run: Any, tgt: Target, out_dir: Path) -> Iterator[Any]:
    """Signals to a stop flag; an error during the run kept in the session (no run dir)."""
    s = RunSession(run, tgt, out_dir, save=True, keep=False)
    guard = SignalGuard(s.stop)
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
    if st.samples:
        acc.setdefault(-1, {"per_batch": []})["per_batch"].append(
            (st.samples, st.read_s, st.decode_cpu_s, st.collate_cpu_s)
        )
    w = acc.setdefault(st.worker, {"worker": st.worker, "batches": 0, "failed_names": []})
    w["batches"] += 1
    for k in ("samples", "files", "bytes", "open_s", "read_s", "decode_s", "decode_cpu_s",
              "transform_s", "collate_s", "collate_cpu_s", "check_s", "failed", "cache_checked", "cache_resident"):  # fmt: skip
        w[k] = w.get(k, 0) + getattr(st, k)
    w["failed_names"] = (w["failed_names"] + st.failed_names)[:5]


def run_pipeline(
    job: ExistingJob,
    plan: DatasetScan,
    stop: StopFlag,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The training loop over the dataset: per epoch, time the wait for each batch and the
    emulated compute; every batch's worker figures summed per worker (all steps)."""
    from torch.utils.data import DataLoader

    from .existing_data import ExistingDataset
    from .loop import _GpuBurn
    from .torchdata import _worker_init

    ds = ExistingDataset(
        plan.root, plan.paths, plan.fmt, job.batch_size, job.mode, transform=job.transform,
        storage_options=plan.storage_options, seed=job.seed,
    )  # fmt: skip
    w = job.workers
    compute: Callable[[float], None] = _GpuBurn(0) if job.compute == "gpu" else time.sleep
    workers: dict[int, dict[str, Any]] = {}
    epochs = []
    for epoch in range(job.epochs):
        ds.epoch = epoch
        loader = DataLoader(
            ds, batch_size=None, num_workers=w, prefetch_factor=job.prefetch if w else None,
            worker_init_fn=_worker_init if w else None,
        )  # fmt: skip
        try:
            epochs.append(_epoch(job, iter(loader), compute, workers, stop))
        except (IobenchError, KeyboardInterrupt):
            raise
        except (OSError, RuntimeError, ImportError) as e:
            from .loop import _last_line

            raise EngineError(f"data loader: {_last_line(e)}") from None
        if progress is not None:
            progress(f"epoch {epoch + 1}/{job.epochs}: {epochs[-1]['steps']} steps")
    per_batch = workers.pop(-1, {}).get("per_batch", [])
    return {
        "epochs": epochs,
        "workers": [workers[k] for k in sorted(workers)],
        "per_batch": per_batch,
        "cached_read": cached_read(plan, job),
    }


#: Files the page-cache read probe reads twice (the second read timed).
CACHED_PROBE_FILES = 16


def cached_read(plan: DatasetScan, job: ExistingJob) -> dict[str, Any] | None:
    """Seconds per file a read from the page cache takes: up to CACHED_PROBE_FILES files (a
    seeded sample) read twice in this process after the loop, the second read timed (what a
    local cache tier in RAM would give); their pages dropped again after. None for a URL."""
    from .existing_data import BatchStats, read_file

    if is_url(plan.root) or not plan.paths:
        return None
    import numpy as np

    rng = np.random.default_rng([job.seed, 99])
    pick = rng.choice(len(plan.paths), min(CACHED_PROBE_FILES, len(plan.paths)), replace=False)
    warm, timed = BatchStats(), BatchStats()
    for i in sorted(int(k) for k in pick):
        path = os.path.join(plan.root, plan.paths[i])
        try:
            read_file(path, "cached", warm, None)
            timed.bytes += len(read_file(path, "cached", timed, None))
            timed.files += 1
            if job.mode == "dropped":
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
        except OSError:
            continue
    if not timed.files:
        return None
    return {
        "files": timed.files,
        "bytes": timed.bytes,
        "read_s_per_file": timed.read_s / timed.files,
    }


def _epoch(
    job: ExistingJob,
    it: Any,
    compute: Callable[[float], None],
    workers: dict[int, dict[str, Any]],
    stop: StopFlag,
) -> dict[str, Any]:
    """One pass (or ``job.steps`` steps): AU = compute after the first step ÷ wall after it."""
    wait = Histogram()
    t_start = first_end = prev = time.perf_counter()
    compute_sum = 0.0
    steps = samples = timed = nbytes = 0
    overhead: list[float] = []
    handoffs: list[float] = []
    try:
        while job.steps is None or steps < job.steps:
            stop.check()
            t0, c0 = time.perf_counter(), time.thread_time()
            try:
                _batch, st = next(it)
            except StopIteration:
                break
            t1, fetch_cpu = time.perf_counter(), time.thread_time() - c0
            _add(workers, st)
            del _batch
            if not st.samples:
                continue  # a worker's tail of failed samples: no step
            tc = time.perf_counter()
            if job.compute_s > 0:
                compute(job.compute_s)
            t2 = time.perf_counter()
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
            prev = t2
        t_end = time.perf_counter()
    finally:
        if hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
    span = max(t_end - first_end, 1e-9)
    return {
        "steps": steps, "timed_steps": timed, "samples": samples, "bytes": nbytes, "wall_s": t_end - t_start,
        "timed_s": span, "first_step_s": first_end - t_start, "compute_s": compute_sum,
        "au": compute_sum / span if timed else 0.0, "wait": wait, "overhead_s": overhead,
        "handoff_s": handoffs,
    }  # fmt: skip


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
