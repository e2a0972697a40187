"""The POSIX engine: workers over pread/pwrite with preallocated aligned buffers.

Every I/O goes through ``os.preadv``/``os.pwrite`` on a page-aligned mmap buffer, so O_DIRECT
works and nothing is allocated per operation. Workers are threads (the GIL is released inside
each system call, so threads overlap their I/O the way fio's ``psync`` jobs do) or, when there
are more workers than CPUs, forked processes, so that the GIL does not serialise them and
their latencies include no wait for it (fio forks its jobs too).

Every data file is opened with the access pattern told to the kernel as fio tells it by default
(``fadvise_hint=1``): POSIX_FADV_SEQUENTIAL over a sequential worker's region (Linux doubles
the file's readahead window), POSIX_FADV_RANDOM over a random one (no readahead), so buffered
reads meet the page cache as fio's do (docs/validation/posix-vs-fio.md measures the
difference: half of fio's bandwidth on a disk with an 8 MiB readahead).

The timed loop only reads the clock around the system call and appends the two readings to the
recorder's lists (``worker.Recorder``); the histogram and the per-interval series are updated
from them a chunk of operations at a time, outside the timed region (constant memory whatever
the op count).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..core.errors import EngineError
from ..core.safeio import open_beneath, stat_beneath, unlink_beneath
from ..result import verify as verify_mod
from ..result.file import PhaseResult
from ..result.measured import phase_result
from ..result.stats import WorkerStats
from ..target import aligned_buffer, drop_file_cache
from . import ceiling
from .base import OPS_DATA, OPS_META, Engine, EngineContext, PhaseSpec, Segment, assign, cache_label
from .forked import can_fork, run_processes
from .forked import cpus as _cpus
from .posix_random import _random_chunk, _random_reads
from .worker import (
    CHUNK,
    VERIFY_BLOCK,
    PhaseState,
    RandomDraws,
    Recorder,
    Stop,
    data_pool,
    describe_oserror,
    finish,
    meta_passes,
    pace,
    perf_ns,
    run_phase,
    run_threads,
    run_worker,
    seq_passes,
    verified,
    verified_blocks,
)

_Recorder = Recorder  # the name tests patch (tests/faults/test_limits_and_labels.py)
_perf_ns = perf_ns

WORKER_MODES = ("auto", "threads", "processes")


class PosixEngine(Engine):
    """pread/pwrite from threads or forked processes.

    ``workers``: "threads", "processes", or "auto" (processes when a phase has more workers
    than this host has CPUs, where Python threads would queue for the GIL). A phase may
    override it with ``params["workers"]``.
    """

    name = "posix"

    def __init__(self, workers: str = "auto"):
        if workers not in WORKER_MODES:
            raise ValueError(f"workers must be one of {WORKER_MODES}, not {workers!r}")
        self.workers = workers

    def version(self) -> str | None:
        from .. import __version__

        return __version__

    def worker_mode(self, phase: PhaseSpec) -> str:
        """The worker mode this phase runs with: "threads" or "processes"."""
        mode = phase.params.get("workers", self.workers)
        if mode not in WORKER_MODES:
            raise EngineError(f"phase {phase.name}: workers must be one of {WORKER_MODES}")
        if not can_fork(phase):
            return "threads"
        if mode == "auto":
            return "processes" if phase.jobs > _cpus() else "threads"
        return mode

    def run(self, phase: PhaseSpec, ctx: EngineContext) -> PhaseResult:
        if phase.op not in OPS_DATA and phase.op not in OPS_META:
            raise EngineError(f"the posix engine cannot run op {phase.op!r}")
        if ctx.run_fd is None:  # a probe, a unit test: the directory held for this phase
            with held_dir(ctx.run_dir) as fd:
                return self.run(phase, dataclasses.replace(ctx, run_fd=fd))
        work = assign(phase, ctx.run_dir)
        mode = self.worker_mode(phase)

        def coordinate(state: PhaseState, origin: float, box: list) -> list[WorkerStats]:
            one = functools.partial(self._worker, phase, work, state)
            if mode == "processes":
                return run_processes(phase, state, origin, one)
            return run_threads(phase, state, origin, box, one)

        return run_phase(phase, ctx, work, coordinate, functools.partial(self._result, phase, mode))

    def review(self, phase: PhaseSpec, res: PhaseResult, ctx: EngineContext) -> None:
        """A data phase near the engine's own ceiling (measured once per configuration,
        ``engines.ceiling``) says the engine may be its bottleneck and names --engine fio."""
        if ceiling.applies(phase, res):
            mode = self.worker_mode(phase)
            ceiling.judge(res, ceiling.ceiling_for(self.run, ctx, phase, mode))

    def _result(
        self, phase: PhaseSpec, mode: str, stats: list[WorkerStats], state: PhaseState
    ) -> PhaseResult:
        res = phase_result(
            phase.name,
            phase.op,
            stats,
            concurrency=phase.jobs,
            block_size=phase.io_block_size(),
            cache=cache_label(phase),
            params=phase.result_params,
        )
        res.extra["workers"] = mode
        res.warnings.extend(phase.block_size_warnings())
        if phase.op == "write" and phase.time_s and res.elapsed_s > 1.2 * phase.time_s:
            res.warnings.append(
                f"time-based write ran {res.elapsed_s:.2f} s, not {phase.time_s:.2f} s: each "
                "file is written whole once before the time may end the phase"
            )
        return finish(res, phase, state)

    # -- workers -----------------------------------------------------------------------------
    def _worker(
        self,
        phase: PhaseSpec,
        work: list[list[Segment]],
        state: PhaseState,
        w: int,
        st: WorkerStats,
        ready: Callable[[], bool],
    ) -> None:
        segments = work[w]
        random = phase.op in ("randread", "randwrite")
        # the size most of its operations move (any other is recorded as it comes)
        rec = _Recorder(st, size=phase.block_size or (4096 if random else 0))

        def setup() -> list[Any]:
            if phase.op in ("write", "create", "randwrite"):
                return [data_pool(phase, w, segments), None]
            bs = phase.block_size or max((s.length for s in segments), default=4096)
            return [None, aligned_buffer(max(bs, 1))]  # rounded up to whole pages

        def loop(bufs: list[Any]) -> None:
            pool, buf = bufs
            if phase.op in OPS_META:
                self._meta_loop(phase, w, segments, st, state, pool, buf, rec)
            elif random:
                self._random_loop(phase, w, segments, st, state, pool, buf, rec)
            else:
                self._seq_loop(phase, w, segments, st, state, pool, buf, rec)

        run_worker(state, w, st, ready, setup, loop, done=rec.flush)

    def _open_flags(self, phase: PhaseSpec, write: bool) -> int:
        flags = (os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY
        if phase.direct:
            flags |= os.O_DIRECT
        return flags

    # -- sequential --------------------------------------------------------------------------
    def _seq_loop(self, phase, w, segments, st, state, pool, buf, rec) -> None:
        write = phase.op == "write"
        c = _SeqWorker(phase, w, st, state, pool, buf, rec, self._open_flags(phase, write))
        dfd = state.ctx.run_fd
        after = (lambda seg: drop_file_cache(seg.name, dfd)) if phase.drop_cache_after else None
        one_file = c.write_file if write else c.read_file
        try:
            seq_passes(phase, w, segments, st, state, one_file, write, after, lambda: rec.n)
        finally:
            for fd, path in c.fds:
                try:
                    if not state.has_failed() and not state.stop_requested():
                        os.fsync(fd)
                except OSError as e:
                    state.fail(describe_oserror(e, f"{path} (fsync at end)"), e.errno)
                finally:
                    os.close(fd)
            if c.fds:
                st.end = time.perf_counter()

    # -- random ------------------------------------------------------------------------------
    def _random_loop(self, phase, w, segments, st, state, pool, buf, rec) -> None:
        write = phase.op == "randwrite"
        bs = phase.block_size or 4096
        draws = RandomDraws(phase, w, segments, bs)
        if not draws.segs:
            return
        flags = self._open_flags(phase, write) & ~(os.O_CREAT if write else 0)
        follow = state.ctx.follow_links
        fds: list[int] = []
        try:
            for s in draws.segs:
                fds.append(open_beneath(state.ctx.run_fd, s.name, flags, 0o644, follow))
                advise(fds[-1], s, random=True)
        except OSError as e:
            for fd in fds:
                os.close(fd)
            state.fail(describe_oserror(e, draws.segs[len(fds)].path), e.errno)
            return
        bufs = [memoryview(buf)[:bs]] if buf is not None else None
        deadline_ns = int((st.start + phase.time_s) * 1e9) if phase.time_s else 0
        done_ops, ops_before = 0, st.ops
        try:
            while deadline_ns or done_ops < draws.n_ops:
                chunk = CHUNK if deadline_ns else min(CHUNK, draws.n_ops - done_ops)
                if write or phase.rate_bps:
                    hit = _random_chunk(
                        phase, st, state, pool, fds, bufs, rec, draws, chunk, deadline_ns
                    )
                else:
                    hit = _random_reads(st, state, fds, bufs, rec, draws, chunk, deadline_ns)
                rec.flush()
                done_ops = st.ops - ops_before
                state.publish(w, st)
                if hit:
                    return
            if write and phase.fsync in ("end", "file"):
                for fd, s in zip(fds, draws.segs, strict=True):
                    try:
                        os.fsync(fd)
                    except OSError as e:
                        state.fail(describe_oserror(e, f"{s.path} (fsync at end)"), e.errno)
                        return
                st.end = time.perf_counter()
        finally:
            for fd in fds:
                os.close(fd)

    # -- metadata ----------------------------------------------------------------------------
    def _meta_loop(self, phase, w, segments, st, state, pool, buf, rec) -> None:
        if phase.op == "create":
            _create_loop(phase, w, segments, st, state, pool, rec)
            return
        op = phase.op
        view = memoryview(buf) if buf is not None else None
        flags = os.O_RDONLY | (os.O_DIRECT if phase.direct else 0)
        verify = op == "open_read" and phase.verify
        drop = op == "open_read" and phase.drop_cache_after
        moved = 0
        dfd = state.ctx.run_fd
        for seg in meta_passes(phase, segments, st):
            if state.should_stop():
                raise Stop
            n = 0
            try:
                t0 = _perf_ns()
                if op == "stat":
                    stat_beneath(dfd, seg.name)
                elif op == "open_read":
                    assert view is not None  # a reading phase has its buffer
                    fd = open_beneath(dfd, seg.name, flags)
                    try:
                        while True:
                            got = os.preadv(fd, [view], n)
                            n += got
                            if got < len(view):
                                break
                    finally:
                        os.close(fd)
                elif op == "delete":
                    unlink_beneath(dfd, seg.name)
                t1 = _perf_ns()
            except OSError as e:
                state.fail(describe_oserror(e, seg.path), e.errno)
                raise Stop from None
            if verify and view is not None:  # blocks as create cut them (open_read)
                verified_blocks(view[:n], seg.path, seg.file_id, VERIFY_BLOCK, state)
            rec.add(n, t0, t1)
            moved += n
            st.files += 1
            st.end = t1 / 1e9
            state.done_ops[w] = st.ops + rec.n
            state.done_bytes[w] = moved
            if drop:  # a buffered read's next pass reads the storage again, not the cache
                drop_file_cache(seg.name, dfd)


class _SeqWorker:
    """One worker's sequential transfers, file by file (``worker.seq_passes`` passes over the
    files): ``write_file`` or ``read_file``, its constants bound once.

    Each block loop is one frame on purpose: between the two clock readings there is only the
    system call, and between operations only what must be there (the stop flag, the recorder,
    pacing when asked), so the engine's per-op overhead stays at fio's."""

    def __init__(self, phase, w, st, state, pool, buf, rec, flags) -> None:
        self.phase, self.w, self.st, self.state = phase, w, st, state
        self.pool, self.rec, self.flags = pool, rec, flags
        self.view = memoryview(buf) if buf is not None else None
        self.fds: list[tuple[int, str]] = []  # (dup'd fd, path) to fsync at the end
        self.deadline_ns = int((st.start + phase.time_s) * 1e9) if phase.time_s else 0
        self.budget = phase.size if phase.size and not phase.time_s else None
        self.dfd = state.ctx.run_fd  # every file opened beneath the run directory held
        self.follow = state.ctx.follow_links

    def _open(self, seg: Segment) -> int:
        try:
            fd = open_beneath(self.dfd, seg.name, self.flags, 0o644, self.follow)
        except OSError as e:
            self.state.fail(describe_oserror(e, seg.path), e.errno)
            raise Stop from None
        advise(fd, seg, random=False)
        return fd

    def write_file(self, seg: Segment, moved: int, first_pass: bool) -> tuple[int, bool, int, int]:
        """Write one file (or shared-file region): (bytes, False, t_open_ns, t_close_ns)."""
        phase, state, w, pool, rec, st = (
            self.phase,
            self.state,
            self.w,
            self.pool,
            self.rec,
            self.st,
        )
        bs, per_file, verify = phase.block_size or 0, phase.latency_per == "file", phase.verify
        budget, deadline_ns, rate = self.budget, self.deadline_ns, phase.rate_bps
        # a time-based write's first pass fills its files whole: steady state ends it after
        done_bytes, cap = state.done_bytes, pool.block_size
        should_stop = state.stop_or_failed if first_pass else state.should_stop
        # operations published as bytes are, block by block (recorded ops + the recorder's)
        done_ops, ops = state.done_ops, st.ops + rec.n
        t_file = _perf_ns()
        fd = self._open(seg)
        pos = start = seg.offset
        end = seg.offset + seg.length
        try:
            while pos < end:
                if should_stop():
                    raise Stop
                n = min(bs or (end - pos), end - pos, cap)
                if budget is not None:
                    n = min(n, budget - moved)
                    if n <= 0:
                        break
                data = pool.next_block(seg.file_id, pos, n)
                if verify:  # before the clock starts: not part of the I/O
                    verify_mod.stamp(data, seg.file_id, pos)
                t0 = _perf_ns()
                done = os.pwrite(fd, data, pos)
                t1 = _perf_ns()
                if done <= 0:
                    break
                pos += done
                moved += done
                if not per_file:
                    rec.add(done, t0, t1)
                    ops += 1
                    done_ops[w] = ops
                done_bytes[w] = moved
                if deadline_ns and t1 >= deadline_ns and not first_pass:
                    break
                if rate:
                    pace(phase, st, moved, should_stop, first_pass)
            if phase.fsync == "file":
                os.fsync(fd)
        except OSError as e:
            state.fail(describe_oserror(e, seg.path, pos), e.errno)
            raise Stop from None
        finally:
            if phase.fsync == "end" and not state.has_failed():
                self.fds.append((os.dup(fd), seg.path))
            os.close(fd)
        return pos - start, False, t_file, _perf_ns()

    def read_file(self, seg: Segment, moved: int, first_pass: bool) -> tuple[int, bool, int, int]:
        """Read one file (or shared-file region): (bytes, False, t_open_ns, t_close_ns)."""
        phase, state, w, view, rec, st = (
            self.phase,
            self.state,
            self.w,
            self.view,
            self.rec,
            self.st,
        )
        assert view is not None  # a reading phase has its buffer
        bs, per_file, verify = phase.block_size or 0, phase.latency_per == "file", phase.verify
        budget, deadline_ns, rate = self.budget, self.deadline_ns, phase.rate_bps
        done_bytes, should_stop = state.done_bytes, state.should_stop
        done_ops, ops = state.done_ops, st.ops + rec.n  # published as bytes are
        align = state.ctx.direct_align if phase.direct else 0
        t_file = _perf_ns()
        fd = self._open(seg)
        pos = start = seg.offset
        end = seg.offset + seg.length
        try:
            while pos < end:
                if should_stop():
                    raise Stop
                n = min(bs or (end - pos), end - pos)
                if budget is not None:
                    n = min(n, budget - moved)
                    if n <= 0:
                        break
                # O_DIRECT wants aligned lengths: n is, but at a file's end (whole-file
                # reads): ask for whole blocks there, take n
                req = -(-n // align) * align if align else n
                t0 = _perf_ns()
                done = min(os.preadv(fd, [view[:req]], pos), n)
                t1 = _perf_ns()
                if done <= 0:
                    break  # read past the end of a shorter file
                if verify:  # after the clock stopped
                    verified(view[:done], seg.path, pos, seg.file_id, state)
                pos += done
                moved += done
                if not per_file:
                    rec.add(done, t0, t1)
                    ops += 1
                    done_ops[w] = ops
                done_bytes[w] = moved
                if deadline_ns and t1 >= deadline_ns:
                    break
                if rate:
                    pace(phase, st, moved, should_stop)
        except OSError as e:
            state.fail(describe_oserror(e, seg.path, pos), e.errno)
            raise Stop from None
        finally:
            os.close(fd)
        return pos - start, False, t_file, _perf_ns()


def advise(fd: int, seg: Segment, random: bool) -> None:
    """Tell the kernel how a worker reads or writes its region of a file, as fio does by
    default (``fadvise_hint=1``: POSIX_FADV_RANDOM for random jobs, else SEQUENTIAL, over the
    job's region): the readahead a buffered reader gets is then fio's. A file system that
    takes no advice (ESPIPE, EINVAL) is read as it is."""
    advice = os.POSIX_FADV_RANDOM if random else os.POSIX_FADV_SEQUENTIAL
    try:
        os.posix_fadvise(fd, seg.offset, seg.length, advice)
    except OSError:
        pass


def _create_loop(phase, w, segments, st, state, pool, rec) -> None:
    """``create``: each file made (O_EXCL), written whole and closed (fsynced when asked), one
    timed operation; its first block is cut (and stamped) before the clock starts."""
    moved = 0
    verify, sync = phase.verify, phase.fsync in ("file", "end")
    dfd = state.ctx.run_fd
    for seg in segments:
        if state.should_stop():
            raise Stop
        first = pool.next_block(seg.file_id, 0, min(pool.block_size, seg.length))
        if verify:
            verify_mod.stamp(first, seg.file_id, 0)
        try:
            t0 = _perf_ns()
            fd = open_beneath(dfd, seg.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                pos = os.pwrite(fd, first, 0) if seg.length else 0
                while pos < seg.length:
                    data = pool.next_block(seg.file_id, pos, min(pool.block_size, seg.length - pos))
                    if verify:
                        verify_mod.stamp(data, seg.file_id, pos)
                    pos += os.pwrite(fd, data, pos)
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            t1 = _perf_ns()
        except OSError as e:
            state.fail(describe_oserror(e, seg.path), e.errno)
            raise Stop from None
        rec.add(seg.length, t0, t1)
        moved += seg.length
        st.files += 1
        st.end = t1 / 1e9
        state.done_ops[w] = st.ops + rec.n
        state.done_bytes[w] = moved
        if phase.drop_cache_after:
            drop_file_cache(seg.name, dfd)


@contextlib.contextmanager
def held_dir(path: str) -> Iterator[int]:
    """The directory ``path`` opened once (``O_DIRECTORY``) for a phase given no run_fd."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)
