"""Another job on the same storage: ``iobench loader … --during-checkpoint MODEL --beside KIND:RATE``.

A shared file system serves several jobs at once. Beside the loader and its own background save
(``ckpt_writer``), one more process, independent of both, plays another job:

- ``writer:RATE``: another job's checkpoint, a sequential writer of files of ``FILE_BYTES`` in
  ``BLOCK`` writes (incompressible page-stamped blocks from ``core.datagen``), fsync and remove
  per file, paced at RATE (``max``: as fast as the storage takes it);
- ``reader:RATE``: another job's data loader, reading files of its own (``READ_FILES`` of
  ``FILE_BYTES``, laid out before anything is timed) in a shuffled order, ``BLOCK`` at a time,
  O_DIRECT where the target takes it (else each file's pages dropped after it is read), paced
  at RATE.

It runs once **alone** for ``ALONE_S`` before the loop (its rate with the storage to itself,
as the save alone is), then from just before the loop's first step to its end. Every
``SAMPLE_S`` it records (time, bytes so far) on ``time.perf_counter``, the loop's clock, so its
achieved rate can be cut into the same windows as the loader's. Its files live in
``SUBDIR`` of the run directory, created exclusively through the held descriptor and removed
on every path out.
"""

from __future__ import annotations

import mmap
import multiprocessing as mp
import os
import random
import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.datagen import DataPool
from ..core.errors import EngineError, UsageError
from ..core.units import format_rate, parse_rate
from ..target import worker_signals
from .torchdata import _die_with_parent

SUBDIR = "beside-job"
KINDS = ("writer", "reader")
BLOCK = 1 << 20
FILE_BYTES = 8 << 20  # each file the other job writes or reads
READ_FILES = 8  # the reader's own files: 64 MiB laid out
ALONE_S = 2.0  # the other job alone, before the loop
SAMPLE_S = 0.05  # how often it records its progress
_OPEN_W = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class BesideJob:
    """The other job: what it does and at what rate (None: as fast as it can)."""

    kind: str  # writer | reader
    rate_bps: float | None

    @property
    def space_bytes(self) -> int:
        """What it holds on the target at once: the reader's files, the writer's one file."""
        return READ_FILES * FILE_BYTES if self.kind == "reader" else FILE_BYTES

    @property
    def files(self) -> int:
        return READ_FILES if self.kind == "reader" else 1

    def describe(self) -> str:
        rate = format_rate(self.rate_bps) if self.rate_bps else "as fast as it can"
        what = "sequential writer" if self.kind == "writer" else "reader of its own files"
        return f"another job's {what}, {rate}"


def parse_beside(text: str) -> BesideJob:
    """``writer:200MiB/s``, ``reader:max`` -> the job; UsageError for anything else."""
    kind, sep, rate = str(text).strip().partition(":")
    hint = "e.g. --beside writer:200MiB/s, --beside reader:max"
    if not sep or kind not in KINDS:
        raise UsageError(f"--beside {text!r}: expected writer:RATE or reader:RATE", hint=hint)
    rate = rate.strip()
    if rate == "max":
        return BesideJob(kind, None)
    try:
        bps, unit = parse_rate(rate if rate.endswith("/s") else rate + "/s")
    except UsageError:
        bps, unit = 0.0, ""
    if unit != "B/s" or not bps > 0:
        raise UsageError(f"--beside {text!r}: {rate!r} is not a byte rate above 0", hint=hint)
    return BesideJob(kind, bps)


# -- the job ---------------------------------------------------------------------------------


def _aligned(n: int) -> mmap.mmap:
    return mmap.mmap(-1, n)  # page-aligned: O_DIRECT's buffer


def lay_out(job: BesideJob, dir_fd: int, seed: int = 11) -> None:
    """The reader's own files, written and fsynced before anything is timed."""
    if job.kind != "reader":
        return
    pool = DataPool(BLOCK, seed)
    try:
        for i in range(READ_FILES):
            fd = os.open(f"f{i}", _OPEN_W, 0o644, dir_fd=dir_fd)
            try:
                for off in range(0, FILE_BYTES, BLOCK):
                    os.write(fd, pool.next_block(i, off, BLOCK))
                os.fsync(fd)
            finally:
                os.close(fd)
    finally:
        pool.close()


def _open_read(dir_fd: int, name: str, direct: bool) -> tuple[int, bool]:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    if direct and hasattr(os, "O_DIRECT"):
        try:
            return os.open(name, flags | os.O_DIRECT, dir_fd=dir_fd), True
        except OSError:
            pass
    return os.open(name, flags, dir_fd=dir_fd), False


def _pace(rate: float | None, done: int, t0: float, stop: Any) -> bool:
    """Sleep while ahead of ``rate``; whether to stop."""
    if rate:
        ahead = done / rate - (time.perf_counter() - t0)
        if ahead > 0:
            return bool(stop.wait(ahead))
    return bool(stop.is_set())


def run_job(job: BesideJob, dir_fd: int, stop: Any, until: float | None,
            direct: bool = True) -> list[tuple[float, int]]:  # fmt: skip
    """The job until ``stop`` is set (or ``until``, a perf_counter time): its samples."""
    samples: list[tuple[float, int]] = []
    t0 = last = time.perf_counter()
    samples.append((t0, 0))
    done, k = 0, 0
    rng = random.Random(5)
    buf = _aligned(BLOCK) if job.kind == "reader" else None
    pool = DataPool(BLOCK, 13) if job.kind == "writer" else None
    try:
        while not stop.is_set() and (until is None or time.perf_counter() < until):
            if job.kind == "writer":
                assert pool is not None
                name = f"w{k}"
                fd = os.open(name, _OPEN_W, 0o644, dir_fd=dir_fd)
                try:
                    for off in range(0, FILE_BYTES, BLOCK):
                        done += os.write(fd, pool.next_block(k, off, BLOCK))
                        if _pace(job.rate_bps, done, t0, stop) or (
                            until and time.perf_counter() >= until
                        ):
                            break
                        if time.perf_counter() - last >= SAMPLE_S:
                            last = time.perf_counter()
                            samples.append((last, done))
                    os.fsync(fd)
                finally:
                    os.close(fd)
                    os.unlink(name, dir_fd=dir_fd)
            else:
                assert buf is not None
                fd, odirect = _open_read(dir_fd, f"f{rng.randrange(READ_FILES)}", direct)
                try:
                    for off in range(0, FILE_BYTES, BLOCK):
                        done += os.preadv(fd, [buf], off)
                        if _pace(job.rate_bps, done, t0, stop) or (
                            until and time.perf_counter() >= until
                        ):
                            break
                        if time.perf_counter() - last >= SAMPLE_S:
                            last = time.perf_counter()
                            samples.append((last, done))
                    if not odirect:  # its pages dropped: the next read reaches the storage
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)
            k += 1
    finally:
        if buf is not None:
            buf.close()
        if pool is not None:
            pool.close()
    samples.append((time.perf_counter(), done))
    return samples


def _job_main(job: BesideJob, dir_fd: int, direct: bool, stop: Any, conn: Any) -> None:
    worker_signals()
    _die_with_parent()
    try:
        conn.send(("samples", run_job(job, dir_fd, stop, None, direct)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"beside job: {type(e).__name__}: {e}"))
    finally:
        conn.close()


class ForkedHelper:
    """A process a loader run keeps beside its loop (the other job, the checkpoint writer):
    forked with a stop event and a one-way pipe back; ``close`` ends it (stopped, else
    killed) and closes the pipe, idempotent."""

    def __init__(self) -> None:
        self.ctx = mp.get_context("fork")
        self.stop = self.ctx.Event()
        self.proc: Any = None
        self.conn: Any = None

    def _spawn(self, target: Callable[..., None], name: str, *args: Any) -> None:
        """Start ``target(*args, stop, child_end)``; the parent keeps the reading end."""
        parent, child = self.ctx.Pipe(duplex=False)
        self.proc = self.ctx.Process(target=target, name=name, args=(*args, self.stop, child))
        self.proc.start()
        child.close()
        self.conn = parent

    def _answer(self, want: str, what: str, timeout_s: float) -> Any:
        """Stop the helper and take its one answer, ``(want, payload)``: the payload; an
        error it sent, its exit or its silence for ``timeout_s`` raised as EngineError."""
        self.stop.set()
        try:
            kind, payload = self.conn.recv() if self.conn.poll(timeout_s) else ("error", None)
        except EOFError:
            kind, payload = "error", f"{what} exited (code {self.proc.exitcode})"
        finally:
            self.close()
        if kind != want:
            raise EngineError(payload or f"{what} did not answer")
        return payload

    def close(self) -> None:
        if self.proc is None:
            return
        self.stop.set()
        self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.conn.close()
        self.proc = None


class BesideProcess(ForkedHelper):
    """The other job's process: ``start`` just before the loop, ``finish`` after it."""

    def __init__(self, job: BesideJob, dir_fd: int, direct: bool = True):
        super().__init__()
        self.job, self.dir_fd, self.direct = job, dir_fd, direct

    def start(self) -> None:
        self._spawn(_job_main, "iobench-beside-job", self.job, self.dir_fd, self.direct)

    def finish(self, timeout_s: float = 120.0) -> list[tuple[float, int]]:
        return list(self._answer("samples", "beside job", timeout_s) or [])


def job_dir(run_dir_fd: int) -> int:
    os.mkdir(SUBDIR, 0o755, dir_fd=run_dir_fd)
    return os.open(SUBDIR, _DIR, dir_fd=run_dir_fd)


def remove_job_dir(run_dir_fd: int, fd: int) -> None:
    """The job's folder and whatever it left there, removed."""
    try:
        for entry in os.listdir(fd):
            os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
        try:
            os.rmdir(SUBDIR, dir_fd=run_dir_fd)
        except FileNotFoundError:
            pass


def rate_between(samples: Sequence[tuple[float, int]], a: float, b: float) -> float | None:
    """The job's rate over [a, b]: bytes between its samples there (linearly interpolated)."""
    if b <= a or len(samples) < 2:
        return None

    def at(t: float) -> float:
        i = bisect_left([s[0] for s in samples], t)
        if i <= 0:
            return float(samples[0][1])
        if i >= len(samples):
            return float(samples[-1][1])
        (t0, b0), (t1, b1) = samples[i - 1], samples[i]
        return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else float(b1)

    lo, hi = max(a, samples[0][0]), min(b, samples[-1][0])
    return (at(hi) - at(lo)) / (hi - lo) if hi > lo else None


def whole_rate(samples: Sequence[tuple[float, int]]) -> float | None:
    return rate_between(samples, samples[0][0], samples[-1][0]) if samples else None


def beside_block(job: BesideJob, alone: Sequence[tuple[float, int]],
                 samples: Sequence[tuple[float, int]], windows: list[dict[str, Any]],
                 lo: float, hi: float) -> dict[str, Any]:  # fmt: skip
    """``loader.during_checkpoint.beside``: the other job's rate alone, over the loop, in each
    kind of window (pooled, time-weighted); ``beside_bps`` added to each window row."""
    pooled: dict[str, list[float]] = {"during": [0.0, 0.0], "without": [0.0, 0.0]}
    for w in windows:
        a, b = lo + w["start_s"], lo + w["end_s"]
        r = rate_between(samples, a, b)
        w["beside_bps"] = r
        if r is not None:
            p = pooled["during" if w["kind"] == "during" else "without"]
            p[0], p[1] = p[0] + r * (b - a), p[1] + (b - a)
    alone_bps, over = whole_rate(alone), rate_between(samples, lo, hi)
    nbytes = samples[-1][1] if samples else 0
    return {
        "kind": job.kind, "rate_bps": job.rate_bps, "mode": "paced" if job.rate_bps else "max",
        "alone_bps": alone_bps, "alone_s": alone[-1][0] - alone[0][0] if alone else None,
        "achieved_bps": over, "vs_alone": over / alone_bps if over and alone_bps else None,
        "bytes": nbytes, "seconds": samples[-1][0] - samples[0][0] if samples else None,
        "during_bps": pooled["during"][0] / pooled["during"][1] if pooled["during"][1] else None,
        "without_bps": pooled["without"][0] / pooled["without"][1] if pooled["without"][1] else None,
        "basis": (
            f"{job.describe()}, an independent process; alone for {ALONE_S:g} s before the "
            "loop, then from just before its first step to its end; its bytes sampled every "
            f"{SAMPLE_S * 1000:g} ms on the loop's clock, each window's rate interpolated "
            "between the samples; achieved = its bytes over the loop's span / the span"
        ),
    }  # fmt: skip
