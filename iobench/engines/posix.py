"""The POSIX engine: worker threads over pread/pwrite with preallocated aligned buffers.

Every I/O goes through ``os.preadv``/``os.pwrite`` on a page-aligned mmap buffer, so O_DIRECT
works and nothing is allocated per operation. The GIL is released inside each system call,
so threads overlap their I/O the way fio's ``psync`` jobs do.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..datagen import DataPool
from ..errors import EngineError
from ..results import PhaseResult
from ..stats import WorkerStats, phase_result
from ..target import aligned_buffer, drop_file_cache
from .base import OPS_DATA, OPS_META, Engine, EngineContext, PhaseSpec

_perf_ns = time.perf_counter_ns


@dataclass
class _Segment:
    """A contiguous piece of one file assigned to a worker."""

    file_id: int
    path: str
    offset: int
    length: int


def assign(phase: PhaseSpec, run_dir: str) -> list[list[_Segment]]:
    """Deal the phase's files (or shared-file regions) to its workers."""
    jobs = phase.jobs
    work: list[list[_Segment]] = [[] for _ in range(jobs)]
    files = list(phase.files)
    if phase.mode == "shared":
        for fid, f in enumerate(files):
            region = f.size // jobs
            for w in range(jobs):
                length = region if w < jobs - 1 else f.size - region * (jobs - 1)
                work[w].append(_Segment(fid, os.path.join(run_dir, f.path), w * region, length))
        return work
    order = list(range(len(files)))
    if phase.order == "shuffled":
        np.random.default_rng(phase.seed).shuffle(order)
    for k, fid in enumerate(order):
        f = files[fid]
        work[k % jobs].append(_Segment(fid, os.path.join(run_dir, f.path), 0, f.size))
    return work


def _describe_oserror(e: OSError, path: str, offset: int | None = None) -> str:
    where = path if offset is None else f"{path} at offset {offset}"
    if e.errno == errno.ENOSPC:
        return f"disk full (ENOSPC) writing {where}"
    if e.errno == errno.EDQUOT:
        return f"quota exceeded (EDQUOT) writing {where}"
    return f"{e.strerror or e} ({errno.errorcode.get(e.errno or 0, '?')}) on {where}"


class _PhaseState:
    """Shared between a phase's workers: stop flags, progress counters, the first error."""

    def __init__(self, ctx: EngineContext, jobs: int):
        self.ctx = ctx
        self.failed = threading.Event()
        self.error: str | None = None
        self.error_errno: int | None = None
        self.done_bytes = [0] * jobs
        self.done_ops = [0] * jobs
        self.lock = threading.Lock()

    def should_stop(self) -> bool:
        return self.failed.is_set() or self.ctx.stop.is_set()

    def fail(self, msg: str, err_no: int | None) -> None:
        with self.lock:
            if self.error is None:
                self.error, self.error_errno = msg, err_no
        self.failed.set()


class PosixEngine(Engine):
    name = "posix"

    def version(self) -> str | None:
        from .. import __version__

        return __version__

    def run(self, phase: PhaseSpec, ctx: EngineContext) -> PhaseResult:
        if phase.op not in OPS_DATA and phase.op not in OPS_META:
            raise EngineError(f"the posix engine cannot run op {phase.op!r}")
        work = assign(phase, ctx.run_dir)
        state = _PhaseState(ctx, phase.jobs)
        origin = time.perf_counter()
        stats = [WorkerStats(origin=origin) for _ in range(phase.jobs)]
        barrier = threading.Barrier(phase.jobs + 1)
        threads = [
            threading.Thread(
                target=self._worker,
                args=(phase, w, work[w], stats[w], state, barrier),
                name=f"iobench-{phase.name}-{w}",
                daemon=True,
            )
            for w in range(phase.jobs)
        ]
        total = (
            sum(s.length for seg in work for s in seg) if phase.op in ("write", "read") else None
        )
        ctx.progress.start(phase.name, total if not phase.time_s else None, None)
        for t in threads:
            t.start()
        try:
            barrier.wait()  # every worker has its buffers ready: the phase starts now
            while alive := [t for t in threads if t.is_alive()]:
                alive[0].join(0.2)
                ctx.progress.update(sum(state.done_bytes), sum(state.done_ops))
        except BaseException:
            state.failed.set()  # Ctrl-C or an error in the main thread: stop the workers
            for t in threads:
                t.join()
            raise
        finally:
            ctx.progress.update(sum(state.done_bytes), sum(state.done_ops))
            ctx.progress.close()
        return self._result(phase, stats, state, ctx)

    # -- aggregation -------------------------------------------------------------------------
    def _result(
        self,
        phase: PhaseSpec,
        stats: list[WorkerStats],
        state: _PhaseState,
        ctx: EngineContext,
    ) -> PhaseResult:
        if phase.direct:
            cache = "direct"
        elif phase.drop_cache_after or phase.params.get("cache_dropped"):
            cache = "dropped"
        else:
            cache = "buffered"
        res = phase_result(
            phase.name,
            phase.op,
            stats,
            concurrency=phase.jobs,
            block_size=phase.block_size,
            cache=cache,
            params={**phase.params, "latency_per": phase.latency_per, "mode": phase.mode},
        )
        agg_ops = res.ops
        if state.error:
            res.status = "partial" if agg_ops else "failed"
            res.error = state.error
            err = EngineError(f"phase {phase.name}: {state.error}")
            err.partial = res  # type: ignore[attr-defined]
            err.errno = state.error_errno  # type: ignore[attr-defined]
            raise err
        if ctx.stop.is_set():
            res.status = "partial"
            res.error = "interrupted"
        return res

    # -- workers -----------------------------------------------------------------------------
    def _worker(
        self,
        phase: PhaseSpec,
        w: int,
        segments: list[_Segment],
        st: WorkerStats,
        state: _PhaseState,
        barrier: threading.Barrier,
    ) -> None:
        pool = None
        buf = None
        try:
            if phase.op in ("write", "create", "randwrite"):
                bs = phase.block_size or max((s.length for s in segments), default=4096)
                pool = DataPool(min(bs, 64 << 20), seed=phase.seed * 1000 + w + 1)
            else:
                bs = phase.block_size or max((s.length for s in segments), default=4096)
                buf = aligned_buffer(max(bs, 1))  # rounded up to whole pages
        except BaseException as e:  # buffers could not be set up: let the phase start and fail
            state.fail(f"worker setup failed: {e}", None)
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            return
        if state.failed.is_set():
            return
        st.start = time.perf_counter()
        st.end = st.start
        try:
            if phase.op in OPS_META:
                self._meta_loop(phase, w, segments, st, state, pool, buf)
            elif phase.op in ("randread", "randwrite"):
                self._random_loop(phase, w, segments, st, state, pool, buf)
            else:
                self._seq_loop(phase, w, segments, st, state, pool, buf)
        except _Stop:
            pass
        finally:
            st.end = max(st.end, st.start)
            if pool:
                pool.close()
            if buf:
                buf.close()

    def _open_flags(self, phase: PhaseSpec, write: bool) -> int:
        flags = (os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY
        if phase.direct:
            flags |= os.O_DIRECT
        return flags

    def _pace(self, phase: PhaseSpec, st: WorkerStats) -> None:
        if phase.rate_bps:
            ahead = st.bytes / phase.rate_bps - (time.perf_counter() - st.start)
            if ahead > 0:
                time.sleep(ahead)

    def _seq_loop(self, phase, w, segments, st, state, pool, buf) -> None:
        write = phase.op == "write"
        bs = phase.block_size or 0
        per_file = phase.latency_per == "file"
        budget = phase.size or None  # bytes this worker moves
        deadline = (st.start + phase.time_s) if phase.time_s else None
        flags = self._open_flags(phase, write)
        direct = phase.direct
        fds: list[int] = []
        view = memoryview(buf) if buf is not None else None
        moved = 0
        try:
            while True:
                for seg in segments:
                    t_file = _perf_ns()
                    try:
                        fd = os.open(seg.path, flags, 0o644)
                    except OSError as e:
                        state.fail(_describe_oserror(e, seg.path), e.errno)
                        raise _Stop from None
                    try:
                        pos, end = seg.offset, seg.offset + seg.length
                        while pos < end:
                            if state.should_stop():
                                raise _Stop
                            n = min(bs or (end - pos), end - pos)
                            if budget is not None and not deadline:
                                n = min(n, budget - moved)
                                if n <= 0:
                                    break
                            if write:
                                n = min(n, pool.block_size)
                                data = pool.next_block(seg.file_id, pos, n)
                                t0 = _perf_ns()
                                done = os.pwrite(fd, data, pos)
                            else:
                                # O_DIRECT wants aligned lengths: ask for whole pages, take n
                                req = -(-n // 4096) * 4096 if direct else n
                                t0 = _perf_ns()
                                done = min(os.preadv(fd, [view[:req]], pos), n)
                            t1 = _perf_ns()
                            if done <= 0:
                                break  # read past the end of a shorter file
                            pos += done
                            moved += done
                            if not per_file:
                                st.add(done, t1 / 1e9, t1 - t0)
                            else:
                                st.bytes += done
                            state.done_bytes[w] = moved
                            if deadline and t1 / 1e9 >= deadline:
                                break
                            if phase.rate_bps:
                                self._pace(phase, st)
                        if write and phase.fsync == "file":
                            os.fsync(fd)
                    except OSError as e:
                        state.fail(_describe_oserror(e, seg.path, pos), e.errno)
                        raise _Stop from None
                    finally:
                        if write and phase.fsync == "end" and not state.failed.is_set():
                            fds.append(os.dup(fd))
                        os.close(fd)
                    t_end = _perf_ns()
                    if per_file:  # one latency sample per whole file: open to close
                        st.hist.record(t_end - t_file)
                        st.ops += 1
                        _slot(st, t_end / 1e9, pos - seg.offset)
                    st.files += 1
                    state.done_ops[w] = st.ops
                    if phase.drop_cache_after:
                        drop_file_cache(seg.path)
                    st.end = t_end / 1e9
                    if deadline and st.end >= deadline:
                        return
                    if budget is not None and not deadline and moved >= budget:
                        return
                if not deadline and (budget is None or moved >= budget or not segments):
                    return
                if not segments:
                    return
        finally:
            for fd in fds:
                try:
                    if not state.failed.is_set() and not state.ctx.stop.is_set():
                        os.fsync(fd)
                except OSError as e:
                    state.fail(_describe_oserror(e, "fsync at end"), e.errno)
                finally:
                    os.close(fd)
            if fds:
                st.end = time.perf_counter()

    def _random_loop(self, phase, w, segments, st, state, pool, buf) -> None:
        write = phase.op == "randwrite"
        bs = phase.block_size or 4096
        segs = [s for s in segments if s.length >= bs]
        if not segs:
            return
        flags = self._open_flags(phase, write)
        if write:
            flags &= ~os.O_CREAT
        fds = [os.open(s.path, flags) for s in segs]
        view = memoryview(buf) if buf is not None else None
        rng = np.random.default_rng(phase.seed * 7919 + w)
        blocks = np.array([s.length // bs for s in segs], dtype=np.int64)
        weights = blocks / blocks.sum()
        n_ops = (phase.size // bs) if phase.size else int(blocks.sum())
        deadline = (st.start + phase.time_s) if phase.time_s else None
        done_ops = 0
        try:
            while deadline or done_ops < n_ops:
                chunk = 65536 if deadline else min(65536, n_ops - done_ops)
                # offsets are drawn off the timed path, a chunk at a time
                which = (
                    rng.choice(len(segs), size=chunk, p=weights)
                    if len(segs) > 1
                    else np.zeros(chunk, dtype=np.int64)
                )
                offs = (
                    rng.integers(0, blocks[which]) * bs + np.array([s.offset for s in segs])[which]
                ).tolist()
                which = which.tolist()
                for k in range(chunk):
                    if state.should_stop():
                        raise _Stop
                    fd = fds[which[k]]
                    off = offs[k]
                    if write:
                        data = pool.next_block(which[k], off, bs)
                        t0 = _perf_ns()
                        done = os.pwrite(fd, data, off)
                    else:
                        t0 = _perf_ns()
                        done = os.preadv(fd, [view[:bs]], off)
                    t1 = _perf_ns()
                    st.add(done, t1 / 1e9, t1 - t0)
                    if phase.rate_bps:
                        self._pace(phase, st)
                    if deadline and t1 / 1e9 >= deadline:
                        st.end = t1 / 1e9
                        return
                done_ops += chunk
                state.done_bytes[w] = st.bytes
                state.done_ops[w] = st.ops
                st.end = time.perf_counter()
            if write and phase.fsync in ("end", "file"):
                for fd in fds:
                    os.fsync(fd)
                st.end = time.perf_counter()
        except OSError as e:
            state.fail(_describe_oserror(e, segs[0].path), e.errno)
        finally:
            for fd in fds:
                os.close(fd)

    def _meta_loop(self, phase, w, segments, st, state, pool, buf) -> None:
        op = phase.op
        view = memoryview(buf) if buf is not None else None
        for seg in segments:
            if state.should_stop():
                raise _Stop
            try:
                t0 = _perf_ns()
                n = 0
                if op == "create":
                    fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    try:
                        pos = 0
                        while pos < seg.length:
                            data = pool.next_block(
                                seg.file_id, pos, min(pool.block_size, seg.length - pos)
                            )
                            pos += os.pwrite(fd, data, pos)
                        if phase.fsync in ("file", "end"):
                            os.fsync(fd)
                    finally:
                        os.close(fd)
                    n = seg.length
                elif op == "stat":
                    os.stat(seg.path)
                elif op == "open_read":
                    fd = os.open(seg.path, os.O_RDONLY | (os.O_DIRECT if phase.direct else 0))
                    try:
                        while True:
                            got = os.preadv(fd, [view], n)
                            n += got
                            if got < len(view):
                                break
                    finally:
                        os.close(fd)
                elif op == "delete":
                    os.unlink(seg.path)
                t1 = _perf_ns()
            except OSError as e:
                state.fail(_describe_oserror(e, seg.path), e.errno)
                raise _Stop from None
            st.add(n, t1 / 1e9, t1 - t0)
            st.files += 1
            st.end = t1 / 1e9
            state.done_ops[w] = st.ops
            state.done_bytes[w] = st.bytes
            if phase.drop_cache_after and op == "create":
                drop_file_cache(seg.path)


class _Stop(Exception):
    """Internal: leave the worker loop (stop requested or error recorded)."""


def _slot(st: WorkerStats, t_end: float, nbytes: int) -> None:
    """Put a whole file's bytes and one op in the series slot of its end time."""
    slot = max(int((t_end - st.origin) * 10 - 1e-9), 0)
    if slot >= len(st.slot_bytes):
        grow = slot + 1 - len(st.slot_bytes)
        st.slot_bytes.extend([0] * grow)
        st.slot_ops.extend([0] * grow)
    st.slot_bytes[slot] += nbytes
    st.slot_ops[slot] += 1
