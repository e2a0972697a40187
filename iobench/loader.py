"""The data loader: a real torch DataLoader over the generated files, with emulated compute.

``run_loader`` lays a profile's dataset out on the target, probes the storage with the same
files at the loader's concurrency, measures the loader's own CPU costs on cached data
(compute 0), then runs the training loop DLIO's way and predicts the same configuration with
the starvation model, so the measured and the predicted AU sit side by side.

The loop (per emulated accelerator, one process each when ``gpus`` > 1): time the wait for the
next batch (load), then the emulated compute (a measured ``sleep``, or a calibrated CUDA matmul
burn), then a barrier across ranks (all-reduce). AU per rank and epoch =
Σ compute over steps after the first ÷ (wall − the first step's duration); the run's AU is the
mean over ranks, then over epochs. Every rank reads its own shard of the samples each epoch
(DistributedSampler-like, reshuffled per epoch with a seed) and does the same number of steps:
the remainder is dropped, so no rank waits at a barrier the others never reach.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from multiprocessing.connection import wait as mp_wait
from typing import Any

import numpy as np

from . import cpu, formats, storage
from . import starvation as sv
from .datagen import dataset_paths, sample_sizes
from .distributed import agreed
from .engines.base import FileSpec, PhaseSpec, Progress
from .errors import DistributedError, EngineError, Interrupted, UsageError
from .runner import (
    PhaseRunner,
    RunOutcome,
    claim_output_dir,
    new_result,
    output_dir_for,
    physical_memory,
    run_session,
)
from .spec import Profile, load_profile, parse_overrides
from .stats import Histogram
from .sweep import sweep_from_phases
from .target import (
    StopFlag,
    check_free_space,
    drop_file_cache,
    fs_class,
    is_url,
    resolve,
    worker_signals,
)
from .units import format_bytes, format_seconds

#: The bound is "compute" when the measured AU reaches this.
COMPUTE_BOUND_AU = 0.95
#: The storage probe reads every file once up to this many bytes; beyond, it runs PROBE_TIME_S.
PROBE_ALL_BYTES = 1 << 30
PROBE_TIME_S = 8.0
#: The compute-0 calibration: at most this many steps per rank, over at most this many bytes.
CALIBRATION_STEPS = 30
CALIBRATION_BYTES = 1 << 30
CALIBRATION_SLEEP_S = 0.005
#: Threads laying the dataset out.
WRITE_JOBS = 4
#: Simulations averaged for the predicted AU of a run with few steps.
PREDICT_SEEDS = 8

COMPUTE_KINDS = ("sleep", "gpu")


# -- the dataset ---------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetIndex:
    """The generated files and their samples: what a Dataset (and its workers) needs."""

    run_dir: str  # a local directory or an fsspec URL
    fmt: str
    paths: tuple[str, ...]  # relative to run_dir
    sizes: tuple[tuple[int, ...], ...]  # sample payload bytes, per file
    file_bytes: tuple[int, ...]  # on disk
    samples_per_file: int
    #: fsspec options (endpoint, credentials) for a URL run_dir; never written to results
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def remote(self) -> bool:
        """The files are objects behind fsspec (no O_DIRECT, no page cache)."""
        return is_url(self.run_dir)

    def path(self, f: int) -> str:
        """File ``f``'s path or URL."""
        return storage.join(self.run_dir, self.paths[f])

    @property
    def n_files(self) -> int:
        return len(self.paths)

    @property
    def n_samples(self) -> int:
        return len(self.paths) * self.samples_per_file

    @property
    def total_bytes(self) -> int:
        return sum(self.file_bytes)

    @property
    def bytes_per_sample(self) -> float:
        """Mean on-disk bytes per sample (format overhead included: what storage moves)."""
        return self.total_bytes / max(self.n_samples, 1)

    def files(self) -> tuple[FileSpec, ...]:
        return tuple(FileSpec(p, n) for p, n in zip(self.paths, self.file_bytes, strict=True))

    def subset(self, n_files: int) -> DatasetIndex:
        n = max(1, min(n_files, self.n_files))
        return DatasetIndex(
            self.run_dir,
            self.fmt,
            self.paths[:n],
            self.sizes[:n],
            self.file_bytes[:n],
            self.samples_per_file,
            self.storage_options,
        )


def plan_dataset(profile: Profile, seed: int = 1) -> tuple[tuple[FileSpec, ...], list[list[int]]]:
    """The profile's files (payload sizes) and sample sizes, drawn as DLIO does (normal)."""
    spf = profile.samples_per_file
    n = profile.files * spf
    flat = sample_sizes(n, profile.sample_size, profile.sample_size_sd, "normal", seed)
    per_file = [flat[i * spf : (i + 1) * spf] for i in range(profile.files)]
    paths = dataset_paths(profile.files, formats.EXTENSIONS[profile.format])
    return tuple(FileSpec(p, sum(s)) for p, s in zip(paths, per_file, strict=True)), per_file


def planned_bytes(profile: Profile, files: Sequence[FileSpec]) -> int:
    """Bytes the dataset will occupy, with the format's overhead."""
    over = formats.overhead_bytes(profile.format, profile.samples_per_file)
    return sum(f.size for f in files) + over * len(files)


def generate_dataset(
    runner: PhaseRunner,
    profile: Profile,
    files: Sequence[FileSpec],
    sizes: Sequence[Sequence[int]],
    seed: int = 1,
) -> DatasetIndex:
    """Write the files (phase ``dataset-write``: fsynced, cache dropped); return their index."""
    params = {
        "format": profile.format,
        "samples_per_file": profile.samples_per_file,
        "jobs": min(WRITE_JOBS, os.cpu_count() or 1),
        "seed": seed,
    }
    _, written = formats.write_files(params, runner, files, sizes)
    return DatasetIndex(
        runner.run_dir,
        profile.format,
        tuple(f.path for f in written),
        tuple(tuple(s) for s in sizes),
        tuple(f.size for f in written),
        profile.samples_per_file,
        dict(getattr(runner.target, "storage_options", None) or {}),
    )


# -- storage probe -------------------------------------------------------------------------


def probe_storage(
    runner: PhaseRunner,
    index: DatasetIndex,
    readers: Sequence[int],
    *,
    direct: bool,
    seed: int = 1,
    time_s: float | None = None,
) -> list[sv.SweepPoint]:
    """Whole-file shuffled reads of the dataset at each reader count (phases
    ``dataset-shuffled-r<N>``), with the loader's cache handling; the sweep they give.

    Every file is read once, or for ``time_s`` seconds when the dataset is larger than
    PROBE_ALL_BYTES (and ``time_s`` is not given).
    """
    if time_s is None and index.total_bytes > PROBE_ALL_BYTES:
        time_s = PROBE_TIME_S
    phases = []
    for r in sorted(set(readers)):
        phases.append(
            runner.execute(
                PhaseSpec(
                    f"dataset-shuffled-r{r}", "read", index.files(), jobs=r, block_size=0,
                    direct=direct, seed=seed, order="shuffled", latency_per="file",
                    drop_cache_after=not direct, time_s=time_s,
                    params={"sweep": "readers", "readers": r, "order": "shuffled",
                            "purpose": "loader storage probe"},
                )
            )
        )  # fmt: skip
    return sweep_from_phases(phases)


# -- the torch side ------------------------------------------------------------------------


def _worker_init(_worker_id: int) -> None:
    # Ctrl-C (or a hang-up) reaches the whole process group; the parent stops the run, workers
    # just follow; SIGTERM (torch's shutdown of a worker) keeps its default.
    worker_signals()
    _die_with_parent()


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this worker the moment its rank process dies.

    A forked worker holds copies of its rank's sockets, the gloo connections to the other
    ranks among them: while it lives, a rank that was killed still looks connected, and the
    others notice only when torch's own check (every 5 s) ends the worker. Elsewhere that
    check still applies.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl: torch's check remains
        pass


class SampleDataset:
    """A map-style torch Dataset: item ``i`` is sample ``i % spf`` of file ``i // spf``.

    ``mode``: "direct" (O_DIRECT whole-file reads), "dropped" (buffered, pages dropped after
    each read) or "cached"/"buffered" (page cache left alone; the only one for a URL run dir,
    whose files are read through fsspec, the filesystem opened lazily in each worker). Each
    item comes with the
    seconds its worker spent reading and decoding; for multi-sample files the last decoded
    file is kept, so a worker reading a file's samples in a row reads it once.
    """

    def __init__(self, index: DatasetIndex, mode: str):
        if mode not in ("direct", "dropped", "cached", "buffered"):
            raise ValueError(f"unknown cache mode {mode!r}")
        self.index = index
        self.mode = mode
        self._reader: formats.FileReader | None = None
        self._last: tuple[int, list[np.ndarray]] | None = None

    def __len__(self) -> int:
        return self.index.n_samples

    def __getitem__(self, i: int) -> tuple[np.ndarray, float, float]:
        idx = self.index
        f, j = divmod(int(i), idx.samples_per_file)
        if self._last is not None and self._last[0] == f:
            return self._last[1][j], 0.0, 0.0
        if self._reader is None:
            local = not idx.remote
            self._reader = formats.FileReader(
                local and self.mode == "direct",
                local and self.mode == "dropped",
                storage_options=idx.storage_options or None,
            )
        sizes = idx.sizes[f] if idx.fmt == "raw" else None
        samples = self._reader.read(idx.path(f), idx.fmt, sizes)
        if idx.samples_per_file > 1:
            self._last = (f, samples)
        return samples[j], self._reader.last_read_s, self._reader.last_decode_s


def collate_samples(
    batch: list[tuple[np.ndarray, float, float]],
) -> tuple[Any, list[int], tuple[float, float]]:
    """(uint8 tensor of the samples back to back, their sizes, (read_s, decode_s)).

    In a worker the output lives in shared memory, so handing it to the main process moves a
    file descriptor, not the bytes (what torch's default collate does for tensors).
    """
    import torch
    from torch.utils.data import get_worker_info

    t0 = time.perf_counter()
    sizes = [len(b[0]) for b in batch]
    total = sum(sizes)
    if get_worker_info() is not None:
        elem = torch.empty(0, dtype=torch.uint8)
        storage = elem._typed_storage()._new_shared(total, device="cpu")
        out = elem.new(storage).resize_(total)
    else:
        out = torch.empty(total, dtype=torch.uint8)
    flat = out.numpy()
    pos = 0
    for arr, n in zip((b[0] for b in batch), sizes, strict=True):
        flat[pos : pos + n] = arr
        pos += n
    read_s = sum(b[1] for b in batch)
    decode_s = sum(b[2] for b in batch) + (time.perf_counter() - t0)
    # plain values travel inside the pickle; another tensor would cost another fd hand-off
    return out, sizes, (read_s, decode_s)


class RankBatchSampler:
    """The batches of one rank for one epoch (``set_epoch`` reshuffles, seeded).

    One sample per file: a global seeded permutation, rank ``r`` takes every ``world``-th of
    its first ``world × ⌊n / world⌋`` samples (DistributedSampler), in batches, the remainder
    dropped. Several samples per file: files are shuffled and dealt to ranks, then to the
    loader's workers, and each worker's files are read sample after sample (order shuffled
    within a file): batch ``k`` goes to worker ``k mod W`` as torch's DataLoader deals them, so
    a file is read once, by one worker, not once per batch that touches it.
    """

    def __init__(
        self,
        n_files: int,
        samples_per_file: int,
        batch_size: int,
        rank: int,
        world: int,
        workers: int,
        seed: int,
        max_steps: int | None = None,
    ):
        self.n_files = n_files
        self.spf = samples_per_file
        self.batch = batch_size
        self.rank = rank
        self.world = world
        self.workers = max(workers, 1)
        self.seed = seed
        self.epoch = 0
        avail = self.available_steps(n_files, samples_per_file, batch_size, world, workers)
        self.steps = min(avail, max_steps) if max_steps else avail

    @staticmethod
    def available_steps(n_files: int, spf: int, batch: int, world: int, workers: int) -> int:
        """Steps per epoch every rank can do (the same on every rank)."""
        if spf == 1:
            return (n_files // world) // batch
        files_rank = n_files // world
        w = max(workers, 1)
        per_worker = [len(range(k, files_rank, w)) * spf // batch for k in range(w)]
        interleaved = w * min(per_worker)
        return interleaved if interleaved else (files_rank * spf) // batch

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps

    def _batches(self) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        b, world, spf = self.batch, self.world, self.spf
        if spf == 1:
            perm = rng.permutation(self.n_files)
            per_rank = self.n_files // world
            mine = perm[: per_rank * world][self.rank :: world]
            return [mine[k * b : (k + 1) * b].tolist() for k in range(len(mine) // b)]
        files = rng.permutation(self.n_files)
        files_rank = self.n_files // world
        mine = files[: files_rank * world][self.rank :: world]

        def stream(fs: Sequence[int]) -> list[int]:
            out: list[int] = []
            for f in fs:
                out.extend((int(f) * spf + rng.permutation(spf)).tolist())
            return out

        w = self.workers
        per_worker = [stream(mine[k::w]) for k in range(w)]
        n = min(len(s) // b for s in per_worker)
        if n == 0:  # too few files to give every worker a batch: one stream
            s = stream(mine)
            return [s[k * b : (k + 1) * b] for k in range(len(s) // b)]
        return [per_worker[k % w][(k // w) * b : (k // w + 1) * b] for k in range(n * w)]

    def __iter__(self):
        yield from self._batches()[: self.steps]


class _GpuBurn:
    """Emulated compute on a CUDA device: fp16 matmuls, their count calibrated to the time."""

    def __init__(self, rank: int):
        import torch

        self.torch = torch
        self.device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(self.device)
        n = 4096
        self.a = torch.randn(n, n, device=self.device, dtype=torch.float16)
        self.b = torch.randn(n, n, device=self.device, dtype=torch.float16)
        self.c = torch.empty_like(self.a)
        self._run(10)
        t0 = time.perf_counter()
        self._run(50)
        self.per_iter = max((time.perf_counter() - t0) / 50, 1e-7)

    def _run(self, iters: int) -> None:
        for _ in range(iters):
            self.torch.mm(self.a, self.b, out=self.c)
        self.torch.cuda.synchronize(self.device)

    def __call__(self, seconds: float) -> None:
        iters = max(1, round(seconds / self.per_iter))
        t0 = time.perf_counter()
        self._run(iters)
        # follow clock changes: the measured time counts as compute either way
        self.per_iter = 0.7 * self.per_iter + 0.3 * (time.perf_counter() - t0) / iters


@dataclass(frozen=True)
class LoopConfig:
    """One training-loop run: the dataset, the loader and the emulated accelerators."""

    index: DatasetIndex
    mode: str  # direct | dropped | cached | buffered
    batch_size: int
    workers: int
    prefetch: int
    compute_s: float
    compute: str = "sleep"  # sleep | gpu
    gpus: int = 1
    epochs: int = 1
    steps: int | None = None  # per epoch and rank (None: every full batch)
    seed: int = 1
    #: the sampler's (rank, ranks) when not (this rank, gpus): a rank that cannot see the
    #: others' files shuffles its own as a world of one
    shard: tuple[int, int] | None = None

    def sampler(self, rank: int) -> RankBatchSampler:
        r, world = self.shard or (rank, self.gpus)
        return RankBatchSampler(
            self.index.n_files, self.index.samples_per_file, self.batch_size, r, world,
            self.workers, self.seed, self.steps,
        )  # fmt: skip

    @property
    def steps_per_epoch(self) -> int:
        return self.sampler(0).steps


@dataclass
class LoopResult:
    """What a training-loop run measured (rates summed over ranks, AU averaged)."""

    gpus: int
    workers: int
    batch_size: int
    epochs: int
    steps: int  # per epoch and rank
    au: float
    au_per_epoch: list[float]
    samples_per_s: float
    bytes_per_s: float
    wait: Histogram
    compute_s: float  # measured compute per step (mean)
    step_s: float  # wall per step after the first (mean)
    main_cpu_s: float  # main-thread CPU per step (mean): the loader's per-step overhead
    read_s_per_sample: float  # worker seconds reading, per sample
    decode_s_per_sample: float  # worker seconds decoding and collating, per sample
    ranks: list[dict[str, Any]] = field(default_factory=list)


def _rank_loop(
    cfg: LoopConfig, rank: int, barrier: Any, stop: StopFlag | None, device: int | None = None
) -> dict[str, Any]:
    """One rank's training loop; returns its per-epoch figures (plain data, picklable).

    ``barrier.wait()`` ends every step (and starts every epoch); a barrier with
    ``checks_stop`` carries the stop flag itself (many hosts stop at the same step).
    ``device``: the CUDA device index for ``--compute gpu`` (default: ``rank``).
    """
    with warnings.catch_warnings():
        # torch warns on stderr when workers outnumber cores; the run records it once instead
        warnings.filterwarnings(
            "ignore", message="This DataLoader will create", category=UserWarning
        )
        return _rank_loop_body(cfg, rank, barrier, stop, rank if device is None else device)


def _rank_loop_body(
    cfg: LoopConfig, rank: int, barrier: Any, stop: StopFlag | None, device: int
) -> dict[str, Any]:
    from torch.utils.data import DataLoader

    sampler = cfg.sampler(rank)
    check_stop = stop is not None and not getattr(barrier, "checks_stop", False)
    w = cfg.workers
    loader = DataLoader(
        SampleDataset(cfg.index, cfg.mode), batch_sampler=sampler, num_workers=w,
        collate_fn=collate_samples, pin_memory=False, prefetch_factor=cfg.prefetch if w else None,
        persistent_workers=w > 0, worker_init_fn=_worker_init if w else None,
    )  # fmt: skip
    compute: Callable[[float], None] = time.sleep
    if cfg.compute == "gpu":
        compute = _GpuBurn(device)
    epochs = []
    it = None
    interrupted = False
    try:
        for epoch in range(cfg.epochs):
            sampler.set_epoch(epoch)
            if barrier is not None:
                barrier.wait()
            t_start = time.perf_counter()
            it = iter(loader)
            wait = Histogram()
            first_end = t_start
            compute_sum = cpu_sum = read_sum = decode_sum = 0.0
            samples = nbytes = 0
            for k in range(sampler.steps):
                if check_stop:
                    stop.check()
                t0 = time.perf_counter()
                c0 = time.thread_time()
                data, sizes, times = next(it)
                t1 = time.perf_counter()
                if cfg.compute_s > 0:
                    compute(cfg.compute_s)
                t2 = time.perf_counter()
                if barrier is not None:
                    barrier.wait()
                t3 = time.perf_counter()
                c3 = time.thread_time()
                if k == 0:
                    first_end = t3  # DLIO leaves the first step out
                    continue
                wait.record(int((t1 - t0) * 1e9))
                if cfg.compute_s > 0:
                    compute_sum += t2 - t1
                cpu_sum += c3 - c0
                samples += len(sizes)
                nbytes += int(data.numel())
                read_sum += times[0]
                decode_sum += times[1]
                del data
            t_end = time.perf_counter()
            timed = max(t_end - first_end, 1e-9)
            n = max(sampler.steps - 1, 0)
            epochs.append(
                {
                    "epoch": epoch,
                    "steps": sampler.steps,
                    "au": compute_sum / timed if n else 0.0,
                    "wall_s": t_end - t_start,
                    "timed_s": timed,
                    "first_step_s": first_end - t_start,
                    "samples": samples,
                    "bytes": nbytes,
                    "compute_s": compute_sum,
                    "main_cpu_s": cpu_sum,
                    "read_s": read_sum,
                    "decode_s": decode_sum,
                    "timed_steps": n,
                    "wait": wait.to_dict(),
                }
            )
    except Exception as e:
        if stop is None or not stop.is_set() or isinstance(e, DistributedError):
            raise  # another rank failing is that, even when a stop came with it
        # Interrupted (workers quit on the signal too). Raised outside this block: a second
        # signal can land inside DataLoader's iterator constructor, and the traceback would
        # keep that half-built iterator (and its worker processes) alive for as long as the
        # error is kept; leaving the block frees it, and its finaliser stops the workers.
        interrupted = True
    finally:
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        del it, loader
    if interrupted:
        stop.check()
    return {"rank": rank, "epochs": epochs}


def _last_line(e: BaseException) -> str:
    """An error as one line: torch re-raises a worker's error with its whole traceback."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def _rank_entry(cfg: LoopConfig, rank: int, barrier: Any, conn: Any) -> None:
    """A rank process: ignore Ctrl-C (the parent stops the run), report to the parent."""
    worker_signals()  # Ctrl-C, a hang-up, ...: the parent's to handle
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _die_with_parent()  # a SIGKILLed loader must not leave its ranks reading on
    try:
        import torch

        torch.set_num_threads(1)
        conn.send(("ok", _rank_loop(cfg, rank, barrier, None)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001
            pass
        try:
            text = _last_line(e)
            if not text.startswith(type(e).__name__):
                text = f"{type(e).__name__}: {text}"
            conn.send(("error", text))
        except Exception:  # noqa: BLE001
            pass
    finally:
        conn.close()


def _loop_here(
    cfg: LoopConfig, rank: int, barrier: Any, stop: StopFlag, device: int | None = None
) -> dict[str, Any]:
    """One rank's loop in this process; a DataLoader's failure as one EngineError line."""
    try:
        return _rank_loop(cfg, rank, barrier, stop, device)
    except (Interrupted, EngineError):
        raise
    except (OSError, RuntimeError) as e:
        raise EngineError(f"data loader: {_last_line(e)}") from None


def _run_ranks(cfg: LoopConfig, stop: StopFlag) -> list[dict[str, Any]]:
    """Run ``cfg.gpus`` ranks (in this process when one) and collect their figures."""
    if cfg.gpus == 1:
        return [_loop_here(cfg, 0, None, stop)]
    ctx = mp.get_context("spawn" if cfg.compute == "gpu" else "fork")
    barrier = ctx.Barrier(cfg.gpus)
    procs, conns = [], []
    try:
        for r in range(cfg.gpus):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(
                target=_rank_entry, args=(cfg, r, barrier, child), name=f"iobench-rank-{r}"
            )
            p.start()
            child.close()
            procs.append(p)
            conns.append(parent)
        results: dict[int, dict[str, Any]] = {}
        errors: list[str] = []
        pending = dict(enumerate(conns))
        while pending:
            if stop.is_set():
                stop.check()
            ready = mp_wait(
                list(pending.values()) + [procs[r].sentinel for r in pending], timeout=0.2
            )
            for r in list(pending):
                c = pending[r]
                if c in ready or procs[r].sentinel in ready:
                    try:
                        if not c.poll():
                            raise EOFError
                        kind, payload = c.recv()
                    except EOFError:
                        procs[r].join(1)
                        kind = "error"
                        payload = f"exited (code {procs[r].exitcode}) without a result"
                    del pending[r]
                    if kind == "ok":
                        results[r] = payload
                        continue
                    errors.append(f"loader rank {r}: {payload}")
                    try:
                        barrier.abort()  # the others stop at their next step
                    except Exception:  # noqa: BLE001
                        pass
        if errors:
            # the rank that failed first, not the ones it left at a broken barrier
            first = [e for e in errors if "BrokenBarrierError" not in e] or errors
            raise EngineError(first[0])
        return [results[r] for r in range(cfg.gpus)]
    finally:
        for p in procs:
            if p.is_alive():
                p.join(0.5 if stop.is_set() else 5)
            if p.is_alive():
                p.terminate()
                p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        for c in conns:
            c.close()


def run_loop(cfg: LoopConfig, stop: StopFlag | None = None, first_epoch: int = 0) -> LoopResult:
    """Run the training loop and aggregate it: AU mean over ranks then epochs, rates summed.

    Epochs before ``first_epoch`` run but are left out of the figures (a warm-up).
    """
    return aggregate(cfg, _run_ranks(cfg, stop or StopFlag()), first_epoch)


def wait_summary(hist: Histogram) -> dict[str, Any]:
    """The load-wait statistics of one set of samples (the steps after each epoch's first):
    mean, min, p50, p99 and max from the same histogram, and how many steps they cover (a
    p99 of fewer than 100 steps is their maximum)."""
    s = hist.summary_s()
    if not s:
        return {"steps": 0}
    return {**{k: s[k] for k in ("mean", "min", "p50", "p99", "max")}, "steps": hist.count}


def aggregate(cfg: LoopConfig, ranks: list[dict[str, Any]], first_epoch: int = 0) -> LoopResult:
    """Combine the ranks' per-epoch figures from ``first_epoch`` on."""
    epochs = range(first_epoch, cfg.epochs)
    n_ep = len(epochs)
    au_per_epoch, sps, bps = [], [], []
    for e in epochs:
        per = [r["epochs"][e] for r in ranks]
        au_per_epoch.append(sum(p["au"] for p in per) / len(per))
        sps.append(sum(p["samples"] / p["timed_s"] for p in per))
        bps.append(sum(p["bytes"] / p["timed_s"] for p in per))
    eps = [r["epochs"][e] for r in ranks for e in epochs]
    steps_t = sum(ep["timed_steps"] for ep in eps)
    samples_t = sum(ep["samples"] for ep in eps)

    def per_step(key: str) -> float:
        return sum(ep[key] for ep in eps) / steps_t if steps_t else 0.0

    def per_sample(key: str) -> float:
        return sum(ep[key] for ep in eps) / samples_t if samples_t else 0.0

    wait = Histogram.merged(Histogram.from_dict(ep["wait"]) for ep in eps)
    return LoopResult(
        gpus=cfg.gpus,
        workers=cfg.workers,
        batch_size=cfg.batch_size,
        epochs=n_ep,
        steps=eps[0]["steps"] if eps else 0,
        au=sum(au_per_epoch) / n_ep if n_ep else 0.0,
        au_per_epoch=au_per_epoch,
        samples_per_s=sum(sps) / n_ep if n_ep else 0.0,
        bytes_per_s=sum(bps) / n_ep if n_ep else 0.0,
        wait=wait,
        compute_s=per_step("compute_s"),
        step_s=per_step("timed_s"),
        main_cpu_s=per_step("main_cpu_s"),
        read_s_per_sample=per_sample("read_s"),
        decode_s_per_sample=per_sample("decode_s"),
        ranks=ranks,
    )


# -- calibration and prediction ------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """The loader's own CPU costs, measured on cached data (no storage in the way)."""

    step_s: float  # wall per step at compute 0: the loader's ceiling
    overhead_s: float  # main-loop time per step beside compute, when data is ready
    decode_s_per_sample: float  # worker decode + collate per sample (paced run)
    read_s_per_sample: float  # worker read per sample from the page cache (paced run)
    samples_per_s: float  # at compute 0
    steps: int
    files: int
    sleep_s: float  # the compute of the run that measured overhead_s
    sleep_overshoot_s: float = 0.0  # how much longer than asked a sleep lasted (mean)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def mean(cls, calibrations: Sequence[Calibration]) -> Calibration:
        """Every rank's calibration averaged (a many-client run's loader costs)."""
        cs = list(calibrations)
        if len(cs) == 1:
            return cs[0]
        d = {k: float(np.mean([getattr(c, k) for c in cs])) for k in asdict(cs[0])}
        for k in ("steps", "files"):
            d[k] = int(min(getattr(c, k) for c in cs))
        return cls(**d)


def calibrate(
    index: DatasetIndex,
    *,
    batch_size: int,
    workers: int,
    prefetch: int,
    gpus: int = 1,
    seed: int = 1,
    stop: StopFlag | None = None,
) -> Calibration:
    """The loader's ceiling, decode cost and per-step overhead, on a cached subset of the files.

    Two runs over the same files, read once beforehand into the page cache (dropped after),
    each a warm-up epoch then a measured one: compute 0 gives the ceiling; then a sleep long
    enough that the workers keep ahead (twice the ceiling's step, at least
    CALIBRATION_SLEEP_S) gives the main loop's own time per step beside compute,
    ``step − measured compute``, and the workers' decode time per sample. A sleeping main loop
    wakes to cold caches, so its overhead is larger than the compute-0 loop's CPU time, and it
    is the one a training step pays; its workers do not compete with a spinning main loop for
    cores, as in a run that waits on storage.
    """
    per_step = batch_size * gpus * index.bytes_per_sample
    steps = max(2, min(CALIBRATION_STEPS, int(CALIBRATION_BYTES // max(per_step, 1)) - 1))
    need = gpus * (steps + 1) * batch_size
    n_files = -(-need // index.samples_per_file) + gpus * max(workers, 1)
    sub = index.subset(n_files)
    if (
        RankBatchSampler.available_steps(
            sub.n_files, sub.samples_per_file, batch_size, gpus, workers
        )
        < 2
    ):
        sub = index
    local_copy = None
    if sub.remote:
        # no page cache in front of an object store: the cached data is a local copy
        local_copy = tempfile.mkdtemp(prefix="iobench-calibration-")
        try:
            for i, rel in enumerate(sub.paths):
                dest = os.path.join(local_copy, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with open(dest, "wb") as fh:
                    fh.write(storage.read_bytes(sub.path(i), sub.storage_options or None))
        except BaseException:
            shutil.rmtree(local_copy, ignore_errors=True)
            raise
        sub = replace(sub, run_dir=local_copy, storage_options={})
    paths = [os.path.join(sub.run_dir, p) for p in sub.paths]
    reader = formats.FileReader(direct=False)
    for p in paths:
        reader.read_bytes(p)

    def loop(compute_s: float, epochs: int) -> LoopResult:
        cfg = LoopConfig(
            sub, "cached", batch_size, workers, prefetch, compute_s, "sleep", gpus, epochs,
            steps, seed,
        )  # fmt: skip
        return run_loop(cfg, stop, first_epoch=epochs - 1)

    try:
        ceiling = loop(0.0, 2)
        sleep_s = max(CALIBRATION_SLEEP_S, 2 * ceiling.step_s)
        paced = loop(sleep_s, 2)
    finally:
        if local_copy is not None:
            shutil.rmtree(local_copy, ignore_errors=True)
        else:
            for p in paths:
                drop_file_cache(p)
    return Calibration(
        step_s=ceiling.step_s,
        overhead_s=max(paced.step_s - paced.compute_s, 0.0),
        decode_s_per_sample=paced.decode_s_per_sample,
        read_s_per_sample=paced.read_s_per_sample,
        samples_per_s=ceiling.samples_per_s,
        steps=ceiling.steps,
        files=sub.n_files,
        sleep_s=sleep_s,
        sleep_overshoot_s=max(paced.compute_s - sleep_s, 0.0),
    )


def loader_params(
    index: DatasetIndex,
    *,
    batch_size: int,
    workers: int,
    prefetch: int,
    compute_s: float,
    calibration: Calibration | None,
) -> sv.LoaderParams:
    """The starvation model's view of this loader (sample bytes as stored on disk)."""
    return sv.LoaderParams(
        batch_size=batch_size,
        sample_bytes=index.bytes_per_sample,
        samples_per_file=index.samples_per_file,
        compute_s=compute_s,
        workers=workers,
        prefetch=prefetch,
        decode_s_per_sample=calibration.decode_s_per_sample if calibration else 0.0,
        step_overhead_s=calibration.overhead_s if calibration else 0.0,
    )


def emulated_compute_s(compute_s: float, kind: str, calibration: Calibration | None) -> float:
    """The compute an emulated step really does: a sleep lasts a little longer than asked
    (the calibration measured by how much), and DLIO counts the measured sleep as compute."""
    if kind == "sleep" and calibration is not None and compute_s > 0:
        return compute_s + calibration.sleep_overshoot_s
    return compute_s


def predict(
    params: sv.LoaderParams, sweep: Sequence[sv.SweepPoint], gpus: int, steps: int = 500
) -> sv.Prediction:
    """The model's AU for a run of ``steps`` steps per epoch: simulations averaged over seeds.

    A short run's AU depends on its start (prefetch filling, the first step left out), so the
    simulation runs the same number of steps, averaged over PREDICT_SEEDS seeds.
    """
    steps = max(int(steps), 2)
    pred = sv.predict_au(params, sweep, gpus, steps=steps, seed=0)
    aus = [pred.au] + [
        sv.simulate_au(params, sweep, gpus, steps=steps, seed=s) for s in range(1, PREDICT_SEEDS)
    ]
    au = float(np.mean(aus))
    basis = f"{pred.basis}; AU averaged over {PREDICT_SEEDS} seeds"
    return sv.Prediction(au=au, au_rate_bound=pred.au_rate_bound, bound=pred.bound, basis=basis)


def storage_supply_s(params: sv.LoaderParams, sweep: Sequence[sv.SweepPoint], gpus: int) -> float:
    """Seconds storage needs per step and rank at the loader's concurrency (no CPU costs)."""
    bw, _ = sv.bandwidth_at(sweep, gpus * max(params.workers, 1))
    return params.batch_size * params.sample_bytes / (bw / gpus)


def cpu_step_s(compute_s: float, calib: Calibration) -> float:
    """The step the loader would take with storage out of the way (cached data)."""
    if compute_s <= 0:
        return calib.step_s
    return max(compute_s + calib.overhead_s, calib.step_s)


def bound_of(
    au: float, step_s: float, compute_s: float, cpu_s: float, storage_s: float | None = None
) -> str:
    """What limited the run: "compute", "cpu" (the loader itself) or "storage".

    Compute when the AU reaches COMPUTE_BOUND_AU. Otherwise, when the storage probe gave the
    seconds storage needs per step at the loader's concurrency (``storage_s``), the slower of
    the two supplies names the bound: storage if it needs longer than the loader's own step on
    cached data (``cpu_s``), else the loader's CPU. This compares two independent measurements,
    so a busy host slowing the real run does not turn a CPU bound into a storage one. Without a
    probe, the time lost per step is split: what the loader loses even on cached data
    (``cpu_s − compute``) against what the real run lost beyond that (``step_s − cpu_s``).
    """
    if au >= COMPUTE_BOUND_AU:
        return "compute"
    if storage_s is not None:
        return "storage" if storage_s > cpu_s else "cpu"
    lost_cpu = max(cpu_s - compute_s, 0.0)
    lost_storage = max(step_s - cpu_s, 0.0)
    return "storage" if lost_storage > lost_cpu else "cpu"


# -- the command ---------------------------------------------------------------------------


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
    hooks: Any = None,
) -> RunOutcome:
    """``iobench loader``: generate the profile's dataset on ``target``, probe it, run the
    DataLoader with emulated compute on ``gpus`` accelerators, predict the same with the model.

    With ``hooks`` (torchrun, many ranks) every rank is one emulated accelerator (``gpus`` is
    the number of ranks): each writes its share of the files (file ``i`` by rank ``i mod
    ranks``) into its own run directory, every rank's loader shuffles the whole dataset and
    reads its shard of it (where the ranks see each other's run directories; else its own
    files), steps end with a barrier across ranks, and rank 0 writes the one result.

    Bad input raises UsageError before anything is written; failures during the run come back
    in ``RunOutcome.error`` with the partial result saved and marked, the run dir removed.
    """
    prof = profile if isinstance(profile, Profile) else load_profile(profile, parse_overrides(sets))
    world = hooks.world if hooks is not None else 1
    if gpus is None:
        gpus = world
    if gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    if hooks is not None and gpus != world:
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
    w = prof.workers if workers is None else workers
    n_epochs = prof.epochs if epochs is None else epochs
    files, sizes = plan_dataset(prof, seed)
    avail = RankBatchSampler.available_steps(
        prof.files, prof.samples_per_file, prof.batch_size, gpus, w
    )
    if avail < 2:
        raise UsageError(
            f"profile {prof.name}: {prof.files} files × {prof.samples_per_file} samples give "
            f"{avail} step(s) of batch {prof.batch_size} per accelerator at --gpus {gpus}; "
            "the loop needs at least 2",
            hint="raise files with --set files=N or lower --gpus",
        )
    run = new_result(command)
    if hooks is not None:
        run.run_id = hooks.shared_run_id(run.run_id)
    writer = save and (hooks is None or hooks.rank == 0)
    out_dir = output_dir_for(output, run.run_id)

    def check() -> Any:
        tgt = resolve(target)
        # many ranks: the whole dataset; files and their folders (1 per 10,000) as inodes
        check_free_space(tgt, planned_bytes(prof, files), len(files) + len(files) // 10_000 + 2)
        if writer:
            claim_output_dir(out_dir)  # held until the result is saved
        return tgt

    tgt = agreed(hooks, check)
    wl_params = {
        **{k: v for k, v in prof.to_dict().items() if k not in ("name", "path", "description")},
        "gpus": gpus,
        "workers": w,
        "epochs": n_epochs,
        "steps": steps,
        "compute": compute,
        "direct": direct,
        "seed": seed,
    }
    run.workload = {
        "name": prof.name,
        "path": prof.path,
        "generator": "loader",
        "spec_hash": _spec_hash(wl_params),
        "params": wl_params,
    }
    import torch

    run.engine = {"name": "torch-dataloader", "version": torch.__version__}
    run_dir_id = run.run_id if hooks is None else hooks.run_dir_id(run.run_id)
    with run_session(
        run, tgt, out_dir, keep=keep, save=writer, run_dir_id=run_dir_id, hooks=hooks
    ) as s:
        remote = tgt.kind == "fsspec"
        if remote:  # probe reads through fsspec, as the loader's workers do
            from .engines.registry import get_engine

            engine = get_engine("fsspec")
        else:
            from .engines.posix import PosixEngine

            engine = PosixEngine()
        if hooks is not None:
            hooks.attach(tgt)  # every rank's run dir exists: can ranks read each other's?
        runner = s.runner = PhaseRunner(
            tgt, engine, s.stop, progress_factory or Progress, hooks=hooks
        )
        # O_DIRECT by default on local targets; on URLs only --direct asks (and is refused)
        use_direct = runner.direct(not remote if direct is None else direct)
        cache = runner.cache_state(use_direct)
        # client-cache: drop the kernel's pages all the same (the client's own cache stays)
        mode = (
            "direct"
            if use_direct
            else ("dropped" if cache in ("dropped", "client-cache") else "buffered")
        )
        local_gpus = 1 if hooks is not None else gpus  # loader processes this one runs
        if hooks is None:
            index = generate_dataset(runner, prof, files, sizes, seed)
            probe_index = own = index
        else:
            mine = range(hooks.rank, prof.files, world)
            own = generate_dataset(
                runner, prof, [files[i] for i in mine], [sizes[i] for i in mine],
                data_seed(seed, hooks.rank),
            )  # fmt: skip
            index, probe_index = shard_indexes(hooks, own, prof.files)
        levels = sorted({1, max(w, 1), max(w, 1) * local_gpus})
        sweep = probe_storage(
            runner, probe_index, levels, direct=use_direct, seed=seed, time_s=probe_time_s
        )
        s.stop.check()
        if hooks is not None:
            hooks.barrier()  # every rank calibrates at once, as they will load at once
        calib = calibrate(
            own, batch_size=prof.batch_size, workers=w, prefetch=prof.prefetch, gpus=local_gpus,
            seed=seed, stop=s.stop,
        )  # fmt: skip
        loop_steps, shard = steps, None
        if hooks is not None and index is own:  # each rank shuffles its own files
            loop_steps, shard = own_steps(hooks, own, prof.batch_size, w, steps), (0, 1)
        cfg = LoopConfig(
            index, mode, prof.batch_size, w, prof.prefetch, prof.compute_s, compute, gpus,
            n_epochs, loop_steps, seed, shard,
        )  # fmt: skip
        cpu0 = cpu.sample()  # the client's CPU over the training loop (iobench.cpu)
        if hooks is None:
            result = run_loop(cfg, s.stop)
        else:
            calib = Calibration.mean(hooks.all_gather_object(calib))
            result = aggregate(cfg, _run_distributed(cfg, hooks, s.stop))
            if index is own:
                runner.warn(
                    "the ranks do not see each other's run directories: each rank's loader "
                    "read the files it wrote, so client caches may inflate the figures"
                )
        run.phases = list(runner.results)
        run.loader, run.estimate, notes = _summarise(
            prof, index, sweep, calib, result, cache, compute
        )
        run.loader["client_cpu"] = cpu.usage(cpu0, cpu.sample())
        if hooks is not None:
            run.loader["hosts"] = len(set(hooks.hosts))
        for note in notes:
            runner.warn(note)
        if not use_direct and not remote:
            _cache_warning(runner, index)
        cpus = os.cpu_count() or 1
        per_host = hooks.ranks_per_host if hooks is not None else gpus
        if per_host * (w + 1) > cpus:
            runner.warn(
                f"{per_host} emulated accelerator(s) on this host × ({w} workers + 1 main loop) "
                f"= {per_host * (w + 1)} processes on {cpus} CPUs: the loader competes for "
                "cores, as the calibration measured (see bound)"
            )
    outcome = s.outcome()
    if hooks is not None and outcome.error is not None:
        hooks.abandon(outcome.error.one_line())
    return outcome


def data_seed(seed: int, rank: int) -> int:
    """The seed of the bytes rank ``rank`` writes: every rank's files differ (no dedup)."""
    return seed + 7919 * rank


def shard_indexes(hooks: Any, own: DatasetIndex, n_files: int) -> tuple[DatasetIndex, DatasetIndex]:
    """(the dataset every rank's loader reads, the files this rank's storage probe reads).

    Collective. File ``i`` was written by rank ``i mod ranks``; where the ranks see each
    other's run directories the loader's index holds every file, in that global order, with
    paths from this rank's run directory, and the probe reads the files of the rank this one
    reads back (IOR -C: not its own, so this client's cache cannot answer). Elsewhere both are
    this rank's own files.
    """
    shards = hooks.all_gather_object((own.paths, own.sizes, own.file_bytes))
    if not hooks.shared_target:
        return own, own
    world = hooks.world

    def of(k: int, i: int) -> tuple[str, tuple[int, ...], int]:
        paths, sizes, nbytes = shards[k]
        return hooks.read_prefix(k) + paths[i], tuple(sizes[i]), int(nbytes[i])

    every = [of(i % world, i // world) for i in range(n_files)]
    src = hooks.read_shift()
    theirs = [of(src, i) for i in range(len(shards[src][0]))]

    def index(entries: Sequence[tuple[str, tuple[int, ...], int]]) -> DatasetIndex:
        return replace(
            own,
            paths=tuple(e[0] for e in entries),
            sizes=tuple(e[1] for e in entries),
            file_bytes=tuple(e[2] for e in entries),
        )

    return index(every), index(theirs)


def own_steps(
    hooks: Any, own: DatasetIndex, batch_size: int, workers: int, steps: int | None
) -> int:
    """Steps per epoch when every rank reads only its own files: the fewest any rank can do,
    so that no rank waits at a barrier the others never reach (collective)."""
    mine = RankBatchSampler.available_steps(
        own.n_files, own.samples_per_file, batch_size, 1, workers
    )
    fewest = min(hooks.all_gather_object(min(steps or mine, mine)))
    if fewest < 2:
        raise EngineError(
            f"a rank's own files give {fewest} step(s) of batch {batch_size}; the loop needs 2",
            hint="raise files with --set files=N",
        )
    return fewest


def _run_distributed(cfg: LoopConfig, hooks: Any, stop: StopFlag) -> list[dict[str, Any]]:
    """This rank's loop under torchrun, every rank's figures gathered (collective)."""
    from .distributed import StepBarrier

    mine = _loop_here(cfg, hooks.rank, StepBarrier(hooks, stop), stop, hooks.local_rank)
    mine["host"] = hooks.hostname
    return hooks.all_gather_object(mine)


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
    notes: list[str] = []
    c = prof.compute_s
    estimate = None
    if c > 0:
        params = loader_params(
            index, batch_size=res.batch_size, workers=res.workers, prefetch=prof.prefetch,
            compute_s=c, calibration=calib,
        )  # fmt: skip
        ce = emulated_compute_s(c, compute, calib)
        pred = predict(replace(params, compute_s=ce), sweep, res.gpus, res.steps)
        predicted: float | None = pred.au
        basis = pred.basis
        if ce != c:
            basis += (
                f"; compute taken as {format_seconds(ce)} per step: the profile's "
                f"{format_seconds(c)} plus the {format_seconds(ce - c)} a sleep overshoots on "
                "this host (measured), since the measured sleep counts as compute"
            )
        est = sv.estimate(
            params, sweep, list(range(1, res.gpus + 1)), prof.au_min, profile=prof.name
        )
        estimate = est.to_dict()
        estimate["basis"] = (
            f"{est.basis}; storage probed with the loader's own files at "
            f"{', '.join(str(p.readers) for p in sweep)} readers; loader overhead and decode "
            "measured at compute 0 on cached data"
        )
    else:
        predicted = None
        basis = "compute_s is 0: AU is 0 by definition; no prediction"
        notes.append(
            "compute_s is 0: AU is 0 by definition; this run measures the loader's own ceiling "
            f"({res.samples_per_s:,.0f} samples/s)"
        )
    cpu_s = cpu_step_s(c, calib)
    supply = loader_params(  # compute does not enter the storage supply; the model wants > 0
        index, batch_size=res.batch_size, workers=res.workers, prefetch=prof.prefetch,
        compute_s=max(c, 1e-6), calibration=calib,
    )  # fmt: skip
    storage_s = storage_supply_s(supply, sweep, res.gpus) if sweep else None
    bound = bound_of(res.au, res.step_s, res.compute_s, cpu_s, storage_s)
    loader = {
        "profile": prof.name,
        "gpus": res.gpus,
        "workers": res.workers,
        "batch_size": res.batch_size,
        "prefetch": prof.prefetch,
        "steps": res.steps,
        "epochs": res.epochs,
        "au": res.au,
        "au_per_epoch": res.au_per_epoch,
        "samples_per_s": res.samples_per_s,
        "bytes_per_s": res.bytes_per_s,
        "load_wait_s": wait_summary(res.wait),
        "compute_s": c,
        "compute_measured_s": res.compute_s,
        "step_s": res.step_s,
        "bound": bound,
        "bound_basis": (
            f"AU {res.au:.3f} (compute bound at >= {COMPUTE_BOUND_AU:.2f}); step "
            f"{format_seconds(res.step_s)} measured vs {format_seconds(cpu_s)} on cached data "
            f"(loader overhead {format_seconds(calib.overhead_s)}/step, ceiling "
            f"{format_seconds(calib.step_s)}/step at compute 0): time lost to the loader's CPU "
            f"{format_seconds(max(cpu_s - res.compute_s, 0))}, to storage "
            f"{format_seconds(max(res.step_s - cpu_s, 0))} per step"
            + (
                f"; storage needs {format_seconds(storage_s)} per step at the loader's "
                f"concurrency (probe) against {format_seconds(cpu_s)} for the loader itself"
                if storage_s is not None
                else ""
            )
        ),
        "predicted_au": predicted,
        "prediction_basis": basis,
        "cache": cache,
        "calibration": calib.to_dict(),
        "worker_read_s_per_sample": res.read_s_per_sample,
        "worker_decode_s_per_sample": res.decode_s_per_sample,
        "main_cpu_s_per_step": res.main_cpu_s,
        "dataset": {
            "format": index.fmt,
            "files": index.n_files,
            "samples": index.n_samples,
            "samples_per_file": index.samples_per_file,
            "bytes": index.total_bytes,
        },
        "points": [{"gpus": res.gpus, "au": res.au}],
        "ranks": [
            {
                "rank": r["rank"],
                **({"host": r["host"]} if "host" in r else {}),
                "epochs": [
                    {
                        **_without(ep, "wait"),
                        "load_wait_s": wait_summary(Histogram.from_dict(ep["wait"])),
                    }
                    for ep in r["epochs"]
                ],
            }
            for r in res.ranks
        ],
    }
    if predicted is not None and res.steps >= 20 and abs(predicted - res.au) > 0.1:
        notes.append(
            f"measured AU {res.au:.2f} differs from the model's {predicted:.2f} by more than "
            "10 points: the storage probe may not represent the loader's reads (noisy device?)"
        )
    return loader, estimate, notes


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _cache_warning(runner: PhaseRunner, index: DatasetIndex) -> None:
    mem = physical_memory()
    if fs_class(runner.target.fs_type) == "memory" or (mem and index.total_bytes < mem):
        runner.warn(
            f"data loader read the dataset ({format_bytes(index.total_bytes)}) without O_DIRECT "
            f"and it fits in page cache ({format_bytes(mem)} RAM): loader figures may be cache "
            "(pages were dropped after each read where the kernel allows)"
        )


__all__ = [
    "COMPUTE_BOUND_AU",
    "Calibration",
    "DatasetIndex",
    "LoopConfig",
    "LoopResult",
    "RankBatchSampler",
    "SampleDataset",
    "bound_of",
    "calibrate",
    "collate_samples",
    "cuda_available",
    "generate_dataset",
    "loader_params",
    "plan_dataset",
    "predict",
    "probe_storage",
    "run_loader",
    "run_loop",
    "storage_supply_s",
]
