"""The torch side of the loader: the map-style Dataset over whole files, the collate function
and the per-rank batch sampler (DistributedSampler-like, reshuffled per epoch)."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import formats
from ..core.coordinator import Coordinator
from ..core.cpu import physical_memory
from ..core.errors import EngineError, UsageError
from ..target import worker_signals
from .dataset import DatasetIndex

#: The documented bound on DataLoader workers per accelerator (the ``workers`` key's maximum).
WORKERS_MAX = 1024
#: Workers per CPU core at most: I/O-bound workers waiting on remote storage gain from a few
#: per core; past 16 each only adds a process, its memory and the hand-off of its batches.
WORKERS_PER_CORE = 16
#: Memory one DataLoader worker takes at least: a forked Python with torch imported, its
#: pages its own once copy-on-write splits them, and the batches it prefetches.
WORKER_MEMORY = 128 << 20


def _user_processes() -> int:
    """Processes of this user now (what RLIMIT_NPROC counts, threads aside)."""
    uid, n = os.getuid(), 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if name.isdigit():
            try:
                n += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue
    return n


def worker_bound(loaders: int = 1) -> tuple[int, str]:
    """(the most DataLoader workers each of ``loaders`` loader processes on this host may
    start, what sets it): WORKERS_MAX, WORKERS_PER_CORE per core, the memory at WORKER_MEMORY
    each, and the processes this user may still start (RLIMIT_NPROC; root is exempt)."""
    import resource

    loaders = max(loaders, 1)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    bounds = [
        (WORKERS_MAX, f"the documented bound, {WORKERS_MAX:,}"),
        (cores * WORKERS_PER_CORE // loaders,
         f"{WORKERS_PER_CORE} per CPU core: {cores} core(s)" + (f" over {loaders} loaders" if loaders > 1 else "")),
    ]  # fmt: skip
    mem = physical_memory()
    if mem:
        bounds.append((mem // WORKER_MEMORY // loaders, f"the memory: {mem / 2**30:.1f} GiB at "
                       f"{WORKER_MEMORY >> 20} MiB per worker"))  # fmt: skip
    soft, _hard = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and os.getuid() != 0:
        left = max(soft - _user_processes(), 0)
        bounds.append(
            (left // loaders, f"the process limit: {left:,} more of {soft:,} (ulimit -u)")
        )
    return min(bounds, key=lambda b: b[0])


def check_workers(workers: int, loaders: int = 1) -> None:
    """UsageError (exit 2) for more workers than ``worker_bound`` allows on this host."""
    bound, why = worker_bound(loaders)
    if workers > bound:
        raise UsageError(
            f"--workers {workers:,} is more than this host can run: at most {bound:,} ({why})",
            hint=f"give --workers {bound:,} or fewer",
        )


def _worker_init(_worker_id: int) -> None:
    # Ctrl-C (or a hang-up) reaches the whole process group; the parent stops the run, workers
    # just follow; SIGTERM (torch's shutdown of a worker) keeps its default.
    worker_signals()
    _die_with_parent()
    keep_freed_memory()


#: glibc's mallopt parameters (malloc.h) and the values a loader worker sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: allocations below this come from the heap, whose freed memory is reused without a fault
#: (glibc's upper bound for the mmap threshold on 64-bit: larger samples are mapped anew)
WORKER_MMAP_THRESHOLD = 32 << 20
#: freed heap memory the worker keeps (not handed back to the kernel) for the next batch
WORKER_TRIM_THRESHOLD = 1 << 30


def keep_freed_memory() -> bool:
    """Have this process's allocator keep the memory a batch frees for the next batch (glibc
    ``mallopt``: samples under :data:`WORKER_MMAP_THRESHOLD` from the heap, up to
    :data:`WORKER_TRIM_THRESHOLD` freed bytes kept).

    A worker allocates each sample anew and frees a batch's worth at once. Left to its dynamic
    thresholds, glibc hands some of that back to the kernel or not, depending on where the
    heap's top lies, which any allocation moves: the next batch's samples then fault their
    pages in again, zeroed by the kernel. Measured on this VM at batch 64 × 4 MiB, one worker,
    tmpfs: 1,512 page faults a sample (about 1,050 MiB/s) where the same worker whose freed
    memory stayed took 1,024, only its batch's shared memory (about 1,300 MiB/s). False where
    the allocator is not glibc's (nothing is changed).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # pragma: no cover - not glibc: its own behaviour stays
        return False
    ok = mallopt(_M_MMAP_THRESHOLD, WORKER_MMAP_THRESHOLD) == 1
    return mallopt(_M_TRIM_THRESHOLD, WORKER_TRIM_THRESHOLD) == 1 and ok


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


#: Seconds of CPU between two readings of the thread's CPU clock while burning: reading it is
#: a system call (no vDSO for CLOCK_THREAD_CPUTIME_ID), which costs microseconds of wall time
#: its thread is not charged for (~10 µs in a VM), so the burn reads it seldom.
BURN_CHECK_S = 0.0005
_RATE = [0.0]  # spin iterations per CPU second in this process, learnt from each burn


def _spin(n: int) -> None:
    x = 0
    for k in range(n):
        x ^= k


def burn_cpu(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time (``thread_time``): what a decoder costs in
    CPU, so a busy host stretches its wall time as it stretches a real decode's.

    Calibrated as it runs: the spin's iterations per CPU second are measured on the first
    burn in each process and refined by every spin after. The burn goes in spins of half
    what is left at that rate, each re-measured, then in short ones until the clock says it
    is spent: a rate that was measured too high (a sibling thread slowing this core after
    the calibration) overshoots only if it is more than twice too high, where one spin of
    90 % overshot by a third at 1.5 times."""
    if seconds <= 0:
        return
    c0 = time.thread_time()
    end = c0 + seconds
    if _RATE[0] <= 0:
        _spin(2000)
        _RATE[0] = 2000 / max(time.thread_time() - c0, 1e-7)
    while (left := end - time.thread_time()) > 4 * BURN_CHECK_S:
        bulk = max(1, int(_RATE[0] * left * 0.5))
        b0 = time.thread_time()
        _spin(bulk)
        spent = time.thread_time() - b0
        if spent > 0:
            _RATE[0] = 0.5 * _RATE[0] + 0.5 * bulk / spent
    step = max(1, int(_RATE[0] * BURN_CHECK_S))
    while time.thread_time() < end:
        _spin(min(step, max(1, int(_RATE[0] * (end - time.thread_time())))))


@dataclass(frozen=True)
class DecodeEmulation:
    """What the replayed pipeline spent per sample beyond its bytes (a profile's ``decode_s``
    and ``decoded_size``): each sample, once read and decoded in its synthetic format, is
    widened to ``size`` bytes (its own bytes repeated, as a decoder writes its output) and
    the worker burns what is left of ``cpu_s`` of thread CPU (the widening counts)."""

    cpu_s: float = 0.0
    size: int = 0
    #: hand a batch on as one tensor per sample (a profile's ``collate = "list"``)
    per_sample: bool = False

    @property
    def active(self) -> bool:
        return self.cpu_s > 0 or self.size > 0

    def __call__(self, sample: np.ndarray) -> np.ndarray:
        c0 = time.thread_time()
        out = sample
        if self.size and self.size != len(sample):
            out = np.resize(sample, self.size) if len(sample) else np.zeros(self.size, np.uint8)
        left = self.cpu_s - (time.thread_time() - c0)
        if left > 0:
            burn_cpu(left)
        return out


class SampleDataset:
    """A map-style torch Dataset: item ``i`` is sample ``i % spf`` of file ``i // spf``.

    ``mode``: "direct" (O_DIRECT whole-file reads), "dropped" (buffered, pages dropped after
    each read) or "cached"/"buffered" (page cache left alone; the only one for a URL run dir,
    whose files are read through fsspec, the filesystem opened lazily in each worker). Each
    item comes with the
    seconds its worker spent reading and decoding; for multi-sample files the last decoded
    file is kept, so a worker reading a file's samples in a row reads it once.
    """

    def __init__(self, index: DatasetIndex, mode: str, decode: DecodeEmulation | None = None):
        if mode not in ("direct", "dropped", "cached", "buffered"):
            raise ValueError(f"unknown cache mode {mode!r}")
        self.index = index
        self.mode = mode
        self.decode = decode if decode is not None and decode.active else None
        self._reader: formats.FileReader | None = None
        self._last: tuple[int, list[np.ndarray]] | None = None

    def __len__(self) -> int:
        return self.index.n_samples

    def __getitem__(self, i: int) -> tuple[np.ndarray, float, float, float, int]:
        """(sample, read s, decode s, decode CPU s, its stored payload bytes): the decode
        figures are the format's (the first sample of a file carries its whole file's) plus
        the profile's decode emulation."""
        sample, read_s, decode_s, cpu_s = self._sample(int(i))
        f, j = divmod(int(i), self.index.samples_per_file)
        nbytes = self.index.sizes[f][j]  # as planned: a decoded image is larger
        if self.decode is not None:
            t0, c0 = time.perf_counter(), time.thread_time()
            sample = self.decode(sample)
            decode_s += time.perf_counter() - t0
            cpu_s += time.thread_time() - c0
        return sample, read_s, decode_s, cpu_s, nbytes

    def _sample(self, i: int) -> tuple[np.ndarray, float, float, float]:
        idx = self.index
        f, j = divmod(i, idx.samples_per_file)
        if self._last is not None and self._last[0] == f:
            return self._last[1][j], 0.0, 0.0, 0.0
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
        r = self._reader
        return samples[j], r.last_read_s, r.last_decode_s, r.last_decode_cpu_s


#: Slots a worker cycles through beyond the loader's prefetch: the batches it has done and the
#: main process has not taken are at most ``prefetch``, and the main process holds one more
#: while its step runs; one spare.
POOL_SPARE_SLOTS = 2
#: The pool takes at most this share of the host's memory; beyond, batches go into fresh
#: shared memory as torch's default collate puts them.
POOL_MEMORY_SHARE = 0.25
#: Seconds a worker waits for the main process to hand a slot back before it fails the run: it
#: never waits at all while the loader keeps at most ``prefetch`` batches a worker in flight.
POOL_WAIT_S = 600.0


@dataclass(frozen=True)
class PoolBatch:
    """A batch a worker wrote into the pool: its slot and its bytes. It crosses to the main
    process as these two integers; the bytes stay where the worker wrote them."""

    slot: int
    nbytes: int


class BatchPool:
    """Shared-memory batch slots a loader's workers write into and reuse.

    torch's default collate puts each batch into shared memory made for it: the worker's
    writes fault every page in, zeroed by the kernel (1,024 faults a 4 MiB sample), and the
    main process maps the segment, then unmaps and frees it. At memory speed that costs more
    than the copy itself, and more again where a VM hands freed memory back to its hypervisor
    (its free page reporting), which must back the pages anew when they are next touched.
    Pinned-memory pipelines reuse their buffers; so does this pool: each worker has
    ``prefetch`` + POOL_SPARE_SLOTS slots of a batch's largest size, made once in the main
    process before the workers fork (they inherit the mapping), taken in turn and handed back
    by the main process when its step is done (one shared word a slot). What crosses between
    the processes is the slot's number; the bytes are written once, by the worker.

    A batch larger than its slot (a decoded sample larger than planned) goes into fresh
    shared memory as before. The workers must be forked (the loop asks for it where the pool
    is used): a spawned worker could not inherit the mapping.
    """

    FREE, TAKEN = 0, 1

    def __init__(self, workers: int, slots: int, slot_bytes: int):
        import mmap

        self.workers, self.slots, self.slot_bytes = workers, slots, slot_bytes
        n = workers * slots
        self._head = -(-(n + 1) * 8 // mmap.PAGESIZE) * mmap.PAGESIZE
        self._map = mmap.mmap(-1, self._head + n * slot_bytes, flags=mmap.MAP_SHARED)
        #: one word a slot (FREE or TAKEN), then the closed flag
        self._state = np.frombuffer(self._map, dtype=np.int64, count=n + 1)
        self._turn = 0  # the next of this worker's slots (each forked worker has its own)

    @classmethod
    def for_loop(
        cls, workers: int, prefetch: int, batch: int, sample_bytes: int, loaders: int = 1
    ) -> BatchPool | None:
        """A pool for ``workers`` workers of ``prefetch`` batches of ``batch`` samples of at
        most ``sample_bytes``; None without workers, off Linux, or where the pools of
        ``loaders`` loop processes on this host would take more than POOL_MEMORY_SHARE of its
        memory."""
        if workers <= 0 or not sys.platform.startswith("linux") or sample_bytes <= 0:
            return None
        slots, slot_bytes = prefetch + POOL_SPARE_SLOTS, batch * sample_bytes
        mem = physical_memory()
        if not mem or max(loaders, 1) * workers * slots * slot_bytes > POOL_MEMORY_SHARE * mem:
            return None
        return cls(workers, slots, slot_bytes)

    def __reduce__(self) -> Any:  # pragma: no cover - a spawned worker: the loop forks
        raise TypeError("a BatchPool is inherited by forked workers, never pickled")

    @property
    def closed(self) -> bool:
        return bool(self._state[-1])

    def close(self) -> None:
        """Tell any worker waiting for a slot to stop waiting (the loop is ending)."""
        self._state[-1] = 1

    def take(self, worker: int) -> int:
        """The worker's next slot, once the main process has handed it back (EngineError
        after POOL_WAIT_S or once the pool is closed)."""
        slot = worker * self.slots + self._turn % self.slots
        state = self._state
        if state[slot] != self.FREE:
            deadline = time.monotonic() + POOL_WAIT_S
            while state[slot] != self.FREE:
                if self.closed or time.monotonic() > deadline:
                    raise EngineError(
                        f"loader worker {worker}: batch slot {slot} was not handed back",
                        hint="the main process stopped taking batches; see its error",
                    )
                time.sleep(0.0002)
        state[slot] = self.TAKEN
        self._turn += 1
        return slot

    def array(self, slot: int, nbytes: int) -> np.ndarray:
        """The first ``nbytes`` of ``slot``, writable, as uint8."""
        return np.frombuffer(
            self._map, np.uint8, count=nbytes, offset=self._head + slot * self.slot_bytes
        )

    def tensor(self, batch: PoolBatch) -> Any:
        """The batch's bytes as a uint8 tensor over the slot (valid until it is handed back)."""
        import torch

        return torch.from_numpy(self.array(batch.slot, batch.nbytes))

    def give_back(self, batch: Any) -> bool:
        """The main process is done with ``batch``: its slot may be written again (False: not
        a pooled batch)."""
        if isinstance(batch, PoolBatch):
            self._state[batch.slot] = self.FREE
            return True
        return False


def collate_samples(
    batch: list[tuple[np.ndarray, float, float, float, int]],
    per_sample: bool = False,
    pool: BatchPool | None = None,
) -> tuple[Any, list[int], tuple[float, float, float, int]]:
    """(uint8 tensor of the samples back to back, their sizes, (read_s, decode_s,
    decode_cpu_s, stored bytes)): decode_s includes the collation, decode_cpu_s is the
    workers' thread CPU in getting and decoding the samples (the read's system time too).

    In a worker the output lives in shared memory, so handing it to the main process moves a
    file descriptor, not the bytes (what torch's default collate does for tensors).
    ``per_sample``: a list of one tensor per sample instead, as torch's default_collate
    leaves samples whose shapes differ; each is moved into shared memory when the worker
    hands the batch on and rebuilt in the main process, as the real pipeline's are.
    ``pool``: in a worker, the batch goes into the worker's next slot of it (a ``PoolBatch``,
    handed back by the main process), where it fits.
    """
    import torch
    from torch.utils.data import get_worker_info

    sizes = [len(b[0]) for b in batch]
    total = sum(sizes)
    info = None if per_sample else get_worker_info()
    out: Any
    flat: np.ndarray | None = None
    if pool is not None and info is not None and total <= pool.slot_bytes:
        out = PoolBatch(pool.take(info.id), total)  # its wait is no decode: before t0
        t0 = time.perf_counter()
        flat = pool.array(out.slot, total)
    else:
        t0 = time.perf_counter()
        if per_sample:
            # a decoder's output is a fresh, writable array (a stored sample may be a
            # read-only view)
            out = [torch.from_numpy(b[0] if b[0].flags.writeable else b[0].copy()) for b in batch]
        elif info is not None:
            elem = torch.empty(0, dtype=torch.uint8)
            storage = elem._typed_storage()._new_shared(total, device="cpu")
            out = elem.new(storage).resize_(total)
        else:
            out = torch.empty(total, dtype=torch.uint8)
        if not per_sample:
            flat = out.numpy()
    if flat is not None:
        pos = 0
        for arr, n in zip((b[0] for b in batch), sizes, strict=True):
            flat[pos : pos + n] = arr
            pos += n
    read_s = sum(b[1] for b in batch)
    decode_s = sum(b[2] for b in batch) + (time.perf_counter() - t0)
    cpu_s = sum(b[3] for b in batch)
    # plain values travel inside the pickle; another tensor would cost another fd hand-off
    return out, sizes, (read_s, decode_s, cpu_s, sum(b[4] for b in batch))


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

        def stream(fs: Sequence[int] | np.ndarray) -> list[int]:
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


def own_steps(
    coord: Coordinator, own: DatasetIndex, batch_size: int, workers: int, steps: int | None
) -> int:
    """Steps per epoch when every rank reads only its own files: the fewest any rank can do,
    so that no rank waits at a barrier the others never reach (collective)."""
    mine = RankBatchSampler.available_steps(
        own.n_files, own.samples_per_file, batch_size, 1, workers
    )
    fewest = min(coord.all_gather_object(min(steps or mine, mine)))
    if fewest < 2:
        raise EngineError(
            f"a rank's own files give {fewest} step(s) of batch {batch_size}; the loop needs 2",
            hint="raise files with --set files=N",
        )
    return fewest
