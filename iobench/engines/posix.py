"""The POSIX engine: workers over pread/pwrite with preallocated aligned buffers.

Every I/O goes through ``os.preadv``/``os.pwrite`` on a page-aligned mmap buffer, so O_DIRECT
works and nothing is allocated per operation. Workers are threads (the GIL is released inside
each system call, so threads overlap their I/O the way fio's ``psync`` jobs do) or, when there
are more workers than CPUs, forked processes, so that the GIL does not serialise them and
their latencies include no wait for it (fio forks its jobs too).

The timed loop only reads the clock around the system call and stores the two readings in
fixed arrays; the histogram and the per-interval series are updated from those arrays a chunk
of operations at a time, outside the timed region (constant memory whatever the op count).
"""

from __future__ import annotations

import array
import ctypes
import dataclasses
import errno
import mmap
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import verify as verify_mod
from ..datagen import DataPool
from ..errors import EngineError, Interrupted, VerifyError
from ..results import PhaseResult
from ..stats import SERIES_RESOLUTION_S, WorkerStats, phase_result
from ..target import aligned_buffer, drop_file_cache, out_of_inodes, worker_signals
from .base import (
    OPS_DATA,
    OPS_META,
    Engine,
    EngineContext,
    PhaseSpec,
    SteadyWatch,
    assign,
    cache_label,
    pace_until,
)
from .base import Segment as _Segment

_perf_ns = time.perf_counter_ns

WORKER_MODES = ("auto", "threads", "processes")
CHUNK = 4096  # operations recorded before they are added to the histogram and series
STOP_EVERY = 16  # the random loop looks at the stop flags every this many operations
POLL_S = 0.1  # how often the coordinating thread mirrors ctx.stop and reports progress
_HEADER = 64  # bytes of flags at the start of the shared state page
_STOP, _FAILED, _STEADY = 0, 1, 2  # flag offsets
_PER_S = round(1 / SERIES_RESOLUTION_S)  # series slots per second (an int, as WorkerStats.add)


def _describe_worker_error(w: int, e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno is not None:
        return f"worker {w} failed: {_describe_oserror(e, e.filename or '?')}"
    return f"worker {w} failed: {type(e).__name__}: {e}"


def _describe_oserror(e: OSError, path: str, offset: int | None = None) -> str:
    where = path if offset is None else f"{path} at offset {offset}"
    if e.errno == errno.ENOSPC:
        if out_of_inodes(os.path.dirname(path) or "."):
            return (
                f"no free inodes (ENOSPC; df -i: the space is there, the files are not) at {where}"
            )
        return f"disk full (ENOSPC) writing {where}"
    if e.errno == errno.EDQUOT:
        return f"quota exceeded (EDQUOT) writing {where}"
    if e.errno == errno.EFBIG:  # SIGXFSZ is ignored during a run: the write says it instead
        return f"file size limit reached (EFBIG; ulimit -f) writing {where}"
    return f"{e.strerror or e} ({errno.errorcode.get(e.errno or 0, '?')}) on {where}"


class _PhaseState:
    """Shared by a phase's workers: stop/failed flags and progress counters in one shared
    anonymous page (visible to forked workers too), and the first error."""

    def __init__(self, ctx: EngineContext, jobs: int):
        self.ctx = ctx
        self.mem = mmap.mmap(-1, max(4096, _HEADER + 16 * jobs))  # MAP_SHARED
        self.flags = memoryview(self.mem)[:_HEADER]
        self.done_bytes = memoryview(self.mem)[_HEADER : _HEADER + 8 * jobs].cast("q")
        self.done_ops = memoryview(self.mem)[_HEADER + 8 * jobs : _HEADER + 16 * jobs].cast("q")
        self.error: str | None = None
        self.error_errno: int | None = None
        self.lock = threading.Lock()

    def should_stop(self) -> bool:
        f = self.flags
        return f[_STOP] != 0 or f[_FAILED] != 0 or f[_STEADY] != 0 or self.ctx.stop.is_set()

    def stop_requested(self) -> bool:
        return self.flags[_STOP] != 0 or self.ctx.stop.is_set()

    def has_failed(self) -> bool:
        return self.flags[_FAILED] != 0

    def request_stop(self) -> None:
        self.flags[_STOP] = 1

    def steady_stop(self) -> None:
        """End the phase as its time limit would: it reached steady state (not a stop)."""
        self.flags[_STEADY] = 1

    def fail(self, msg: str, err_no: int | None) -> None:
        with self.lock:
            if self.error is None:
                self.error, self.error_errno = msg, err_no
        self.flags[_FAILED] = 1

    def totals(self) -> tuple[int, int]:
        return sum(self.done_bytes), sum(self.done_ops)


class _Recorder:
    """Per-operation latencies, end times and sizes, kept in fixed arrays and added to the
    worker's stats a chunk at a time (off the timed path)."""

    __slots__ = ("st", "lat", "end", "nbytes", "n")

    def __init__(self, st: WorkerStats):
        self.st = st
        self.lat = array.array("q", bytes(8 * CHUNK))
        self.end = array.array("q", bytes(8 * CHUNK))
        self.nbytes = array.array("q", bytes(8 * CHUNK))
        self.n = 0

    def add(self, nbytes: int, t0: int, t1: int) -> None:
        k = self.n
        self.lat[k] = t1 - t0
        self.end[k] = t1
        self.nbytes[k] = nbytes
        self.n = k + 1
        if k + 1 == CHUNK:
            self.flush()

    def flush(self) -> None:
        n = self.n
        if not n:
            return
        st = self.st
        lat = np.frombuffer(self.lat, dtype=np.int64, count=n)
        nb = np.frombuffer(self.nbytes, dtype=np.int64, count=n)
        ends = np.frombuffer(self.end, dtype=np.int64, count=n)
        st.hist.record_array(lat)
        st.bytes += int(nb.sum())
        st.ops += n
        # a worker's end is at least its last recorded op's: a phase that failed in the middle
        # of a file (where the loop sets the end) must not count its bytes over no time
        st.end = max(st.end, int(ends[-1]) / 1e9)
        # the series slot of each op's end, as WorkerStats.add computes it
        # slot k holds ops completed in (k, k+1] slots after the origin, as WorkerStats.add
        slots = ((ends / 1e9 - st.origin) * _PER_S - 1e-9).astype(np.int64)
        np.maximum(slots, 0, out=slots)
        top = int(slots.max()) + 1
        if top > len(st.slot_bytes):
            grow = top - len(st.slot_bytes)
            st.slot_bytes.extend([0] * grow)
            st.slot_ops.extend([0] * grow)
        by_bytes = np.bincount(slots, weights=nb)
        by_ops = np.bincount(slots)
        for i in np.nonzero(by_ops)[0].tolist():
            st.slot_bytes[i] += int(by_bytes[i])
            st.slot_ops[i] += int(by_ops[i])
        self.n = 0


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


_LIBC: Any = None


def _libc() -> Any:
    """libc loaded in the parent, before any fork (dlopen in a forked child is unsafe)."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(None, use_errno=True)
        except OSError:  # pragma: no cover
            _LIBC = False
    return _LIBC


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
        if not hasattr(os, "fork") or phase.jobs < 2 or multiprocessing.current_process().daemon:
            return "threads"  # (a daemonic process may not have children)
        if mode == "auto":
            return "processes" if phase.jobs > _cpus() else "threads"
        return mode

    def run(self, phase: PhaseSpec, ctx: EngineContext) -> PhaseResult:
        if phase.op not in OPS_DATA and phase.op not in OPS_META:
            raise EngineError(f"the posix engine cannot run op {phase.op!r}")
        work = assign(phase, ctx.run_dir)
        watch = None
        if phase.steady is not None and phase.time_s:
            metric = "iops" if phase.op in ("stat", "delete") else "bw"
            watch = SteadyWatch(ctx.progress, phase.steady.for_metric(metric), None, POLL_S)
            ctx = dataclasses.replace(ctx, progress=watch)
        state = _PhaseState(ctx, phase.jobs)
        if watch is not None:
            watch.on_steady = state.steady_stop
        mode = self.worker_mode(phase)
        total = (
            sum(s.length for seg in work for s in seg) if phase.op in ("write", "read") else None
        )
        ctx.progress.start(phase.name, total if not phase.time_s else None, None)
        if phase.time_s:
            ctx.progress.set_duration(phase.time_s)
        origin = time.perf_counter()
        box: list[WorkerStats] = []  # the threads' stats, kept when a second signal cuts in
        try:
            if mode == "processes":
                stats = self._run_processes(phase, work, state, origin)
            else:
                stats = self._run_threads(phase, work, state, origin, box)
        except Interrupted as e:
            if box and getattr(e, "partial", None) is None:
                # the workers were joined: what they measured until the signal is kept
                try:
                    partial = self._result(phase, box, state, ctx, mode)
                except EngineError as failed:
                    partial = failed.partial  # type: ignore[attr-defined]
                partial.status = "partial"
                partial.error = partial.error or "interrupted"
                e.partial = partial  # type: ignore[attr-defined]
            raise
        finally:
            ctx.progress.update(*state.totals())
            ctx.progress.close()
        res = self._result(phase, stats, state, ctx, mode)
        if watch is not None:
            # why the phase ended: its time limit, or steady state seen live (stats.SteadyWatch)
            res.extra["ended"] = "steady" if watch.steady_at_s is not None else "time limit"
            if watch.steady_at_s is not None:
                res.extra["steady_live_at_s"] = round(watch.steady_at_s, 3)
        return res

    # -- coordination ------------------------------------------------------------------------
    def _run_threads(
        self,
        phase: PhaseSpec,
        work: list[list[_Segment]],
        state: _PhaseState,
        origin: float,
        box: list[WorkerStats] | None = None,
    ) -> list[WorkerStats]:
        stats = [WorkerStats(origin=origin) for _ in range(phase.jobs)]
        if box is not None:
            box.extend(stats)
        barrier = threading.Barrier(phase.jobs + 1)

        def ready() -> bool:
            try:
                barrier.wait()
                return True
            except threading.BrokenBarrierError:
                return False

        def guarded(w: int) -> None:
            # anything a worker thread did not expect (a bug, an overflow) fails the phase:
            # a thread that just died would leave a phase "ok" with the bytes it never moved
            started = [False]

            def ready_once() -> bool:
                started[0] = True
                return ready()

            try:
                self._worker(phase, w, work[w], stats[w], state, ready_once)
            except BaseException as e:  # noqa: BLE001 - reported through the phase
                state.fail(_describe_worker_error(w, e), getattr(e, "errno", None))
                if not started[0]:
                    barrier.abort()  # the phase cannot start without this worker

        threads = [
            threading.Thread(
                target=guarded,
                args=(w,),
                name=f"iobench-{phase.name}-{w}",
                daemon=True,
            )
            for w in range(phase.jobs)
        ]
        for t in threads:
            t.start()
        try:
            try:
                barrier.wait()  # every worker has its buffers ready: the phase starts now
            except threading.BrokenBarrierError:
                if not state.has_failed():
                    raise
            while alive := [t for t in threads if t.is_alive()]:
                alive[0].join(POLL_S)
                if state.ctx.stop.is_set():
                    state.request_stop()
                state.ctx.progress.update(*state.totals())
        except BaseException:
            state.request_stop()  # Ctrl-C or an error in this thread: stop the workers
            barrier.abort()
            for t in threads:
                t.join()
            raise
        return stats

    def _run_processes(
        self, phase: PhaseSpec, work: list[list[_Segment]], state: _PhaseState, origin: float
    ) -> list[WorkerStats]:
        mp = multiprocessing.get_context("fork")
        go = mp.Event()
        _libc()
        procs: list[Any] = []
        conns: list[Any] = []
        stats: list[WorkerStats | None] = [None] * phase.jobs
        try:
            for w in range(phase.jobs):
                recv, send = mp.Pipe(duplex=False)
                p = mp.Process(
                    target=_child_main,
                    args=(self, phase, w, work[w], origin, state, send, go, os.getpid()),
                    name=f"iobench-{phase.name}-{w}",
                    daemon=True,
                )
                try:
                    p.start()
                except OSError as e:
                    send.close()
                    recv.close()
                    raise EngineError(
                        f"phase {phase.name}: cannot start worker process {w}: {e.strerror or e}",
                        hint="lower jobs, or run with threads",
                    ) from None
                send.close()
                procs.append(p)
                conns.append(recv)
            # every worker has its buffers ready (or has ended): then the phase starts
            self._collect(phase, procs, conns, stats, state, waiting_ready=True)
            go.set()
            self._collect(phase, procs, conns, stats, state, waiting_ready=False)
            for p in procs:
                p.join()
        except BaseException:
            state.request_stop()  # Ctrl-C or an error in this thread: stop the workers
            go.set()
            for c in conns:
                c.close()  # a worker's result is no longer wanted: its send fails, it exits
            for p in procs:
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join()
            raise
        finally:
            for c in conns:
                c.close()
        return [s if s is not None else WorkerStats(origin=origin) for s in stats]

    def _collect(
        self,
        phase: PhaseSpec,
        procs: list[Any],
        conns: list[Any],
        stats: list[WorkerStats | None],
        state: _PhaseState,
        waiting_ready: bool,
    ) -> None:
        """Read worker messages until each has said "ready" (or, later, sent its result)."""
        pending = {c: w for w, c in enumerate(conns) if stats[w] is None and not c.closed}
        while pending:
            for c in multiprocessing.connection.wait(list(pending), timeout=POLL_S):
                w = pending.pop(c)
                try:
                    msg = c.recv()
                except (EOFError, OSError):
                    procs[w].join(1)
                    stats[w] = WorkerStats(origin=0.0)
                    state.fail(
                        f"worker process {w} ended unexpectedly (exit code {procs[w].exitcode})",
                        None,
                    )
                    continue
                if msg == "ready":
                    if not waiting_ready:  # pragma: no cover - protocol error
                        pending[c] = w
                    continue
                stats[w] = WorkerStats.from_dict(msg["stats"])
                if msg["error"]:
                    state.fail(msg["error"], msg["errno"])
            if state.ctx.stop.is_set():
                state.request_stop()
            state.ctx.progress.update(*state.totals())

    # -- aggregation -------------------------------------------------------------------------
    def _result(
        self,
        phase: PhaseSpec,
        stats: list[WorkerStats],
        state: _PhaseState,
        ctx: EngineContext,
        mode: str = "threads",
    ) -> PhaseResult:
        cache = cache_label(phase)
        res = phase_result(
            phase.name,
            phase.op,
            stats,
            concurrency=phase.jobs,
            block_size=phase.io_block_size(),
            cache=cache,
            params=phase.result_params,
        )
        res.extra["workers"] = mode
        res.warnings.extend(phase.block_size_warnings())
        if phase.op == "write" and phase.time_s and res.elapsed_s > 1.2 * phase.time_s:
            res.warnings.append(
                f"time-based write ran {res.elapsed_s:.2f} s, not {phase.time_s:.2f} s: each "
                "file is written whole once before the time may end the phase"
            )
        if state.error:
            res.status = "partial" if res.ops else "failed"
            res.error = state.error
            err = EngineError(f"phase {phase.name}: {state.error}")
            err.partial = res  # type: ignore[attr-defined]
            err.errno = state.error_errno  # type: ignore[attr-defined]
            raise err
        if ctx.stop.is_set() or state.stop_requested():
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
        ready: Callable[[], bool],
    ) -> None:
        pool = None
        buf = None
        rec = _Recorder(st)
        try:
            try:
                bs = phase.block_size or max((s.length for s in segments), default=4096)
                if phase.op in ("write", "create", "randwrite"):
                    pool = DataPool(min(bs, 64 << 20), seed=phase.seed * 1000 + w + 1)
                else:
                    buf = aligned_buffer(max(bs, 1))  # rounded up to whole pages
            except BaseException as e:  # buffers could not be set up: start, then fail
                state.fail(f"worker setup failed: {e}", None)
            if not ready() or state.has_failed():
                return
            st.start = time.perf_counter()
            st.end = st.start
            try:
                if phase.op in OPS_META:
                    self._meta_loop(phase, w, segments, st, state, pool, buf, rec)
                elif phase.op in ("randread", "randwrite"):
                    self._random_loop(phase, w, segments, st, state, pool, buf, rec)
                else:
                    self._seq_loop(phase, w, segments, st, state, pool, buf, rec)
            except _Stop:
                pass
            finally:
                rec.flush()
                state.done_bytes[w] = st.bytes
                state.done_ops[w] = st.ops
                st.end = max(st.end, st.start)
        finally:
            if pool:
                pool.close()
            if buf:
                buf.close()

    def _open_flags(self, phase: PhaseSpec, write: bool) -> int:
        flags = (os.O_WRONLY | os.O_CREAT) if write else os.O_RDONLY
        if phase.direct:
            flags |= os.O_DIRECT
        return flags

    def _pace(
        self,
        phase: PhaseSpec,
        st: WorkerStats,
        moved: int,
        state: _PhaseState,
        past_deadline: bool = False,
    ) -> None:
        """Hold the worker to ``rate`` (bytes/s): sleep until ``moved`` bytes are due, waking
        at once on a stop request or a failure, and never past the phase's deadline (unless
        the phase goes on past it: a time-based write's first pass over its files)."""
        until = st.start + moved / phase.rate_bps
        if phase.time_s and not past_deadline:
            until = min(until, st.start + phase.time_s)
        pace_until(until, state.should_stop)

    def _seq_loop(self, phase, w, segments, st, state, pool, buf, rec) -> None:
        write = phase.op == "write"
        bs = phase.block_size or 0
        per_file = phase.latency_per == "file"
        budget = phase.size or None  # bytes this worker moves
        deadline = (st.start + phase.time_s) if phase.time_s else None
        deadline_ns = int(deadline * 1e9) if deadline else 0
        flags = self._open_flags(phase, write)
        direct = phase.direct
        align = state.ctx.direct_align
        verify = phase.verify
        fds: list[tuple[int, str]] = []  # (dup'd fd, path) to fsync at the end
        view = memoryview(buf) if buf is not None else None
        moved = 0
        done_bytes = state.done_bytes
        should_stop = state.should_stop
        # A time-based write fills its files once before the clock may stop it: what the
        # read-back reads (another client, after other phases wrote other blocks there) was
        # all written by this phase. On slow storage the phase outlasts its time; it says so.
        first_pass = write and bool(deadline)
        try:
            while True:
                for seg in segments:
                    t_file = _perf_ns()
                    try:
                        fd = os.open(seg.path, flags, 0o644)
                    except OSError as e:
                        state.fail(_describe_oserror(e, seg.path), e.errno)
                        raise _Stop from None
                    pos = seg.offset
                    try:
                        end = seg.offset + seg.length
                        while pos < end:
                            if should_stop():
                                raise _Stop
                            n = min(bs or (end - pos), end - pos)
                            if budget is not None and not deadline:
                                n = min(n, budget - moved)
                                if n <= 0:
                                    break
                            if write:
                                n = min(n, pool.block_size)
                                data = pool.next_block(seg.file_id, pos, n)
                                if verify:  # before the clock starts: not part of the I/O
                                    verify_mod.stamp(data, seg.file_id, pos)
                                t0 = _perf_ns()
                                done = os.pwrite(fd, data, pos)
                            else:
                                # O_DIRECT wants aligned lengths: n is, but at a file's end
                                # (whole-file reads): ask for whole blocks there, take n
                                req = -(-n // align) * align if direct else n
                                t0 = _perf_ns()
                                done = min(os.preadv(fd, [view[:req]], pos), n)
                            t1 = _perf_ns()
                            if done <= 0:
                                break  # read past the end of a shorter file
                            if verify and not write:  # after the clock stopped
                                _verified(view[:done], seg.path, pos, seg.file_id, state)
                            pos += done
                            moved += done
                            if not per_file:
                                rec.add(done, t0, t1)
                            done_bytes[w] = moved
                            if deadline_ns and t1 >= deadline_ns and not first_pass:
                                break
                            if phase.rate_bps:
                                self._pace(phase, st, moved, state, first_pass)
                        if write and phase.fsync == "file":
                            os.fsync(fd)
                    except OSError as e:
                        state.fail(_describe_oserror(e, seg.path, pos), e.errno)
                        raise _Stop from None
                    finally:
                        if write and phase.fsync == "end" and not state.has_failed():
                            fds.append((os.dup(fd), seg.path))
                        os.close(fd)
                    t_end = _perf_ns()
                    if per_file:  # one latency sample per whole file: open to close
                        st.hist.record(t_end - t_file)
                        st.ops += 1
                        st.bytes += pos - seg.offset
                        st.slot_add(t_end / 1e9, pos - seg.offset)
                    st.files += 1
                    state.done_ops[w] = st.ops + rec.n
                    if phase.drop_cache_after:
                        drop_file_cache(seg.path)
                    st.end = t_end / 1e9
                    if deadline and st.end >= deadline and not first_pass:
                        return
                    if budget is not None and not deadline and moved >= budget:
                        return
                first_pass = False
                if deadline and st.end >= deadline:
                    return
                if not deadline and (budget is None or moved >= budget or not segments):
                    return
                if not segments:
                    return
        finally:
            for fd, path in fds:
                try:
                    if not state.has_failed() and not state.stop_requested():
                        os.fsync(fd)
                except OSError as e:
                    state.fail(_describe_oserror(e, f"{path} (fsync at end)"), e.errno)
                finally:
                    os.close(fd)
            if fds:
                st.end = time.perf_counter()

    def _random_loop(self, phase, w, segments, st, state, pool, buf, rec) -> None:
        write = phase.op == "randwrite"
        bs = phase.block_size or 4096
        segs = [s for s in segments if s.length >= bs]
        if not segs:
            return
        flags = self._open_flags(phase, write)
        if write:
            flags &= ~os.O_CREAT
        fds: list[int] = []
        try:
            for s in segs:
                fds.append(os.open(s.path, flags))
        except OSError as e:
            for fd in fds:
                os.close(fd)
            state.fail(_describe_oserror(e, segs[len(fds)].path), e.errno)
            return
        bufs = [memoryview(buf)[:bs]] if buf is not None else None
        rng = np.random.default_rng(phase.seed * 7919 + w)
        blocks = np.array([s.length // bs for s in segs], dtype=np.int64)
        weights = blocks / blocks.sum()
        seg_offsets = np.array([s.offset for s in segs], dtype=np.int64)
        n_ops = (phase.size // bs) if phase.size else int(blocks.sum())
        deadline_ns = int((st.start + phase.time_s) * 1e9) if phase.time_s else 0
        rate = phase.rate_bps
        should_stop = state.should_stop
        lat, ends, nbytes = rec.lat, rec.end, rec.nbytes
        preadv, pwrite = os.preadv, os.pwrite
        done_ops = 0
        n = k = 0
        which_l: list[int] = [0]
        offs: list[int] = [0]
        try:
            while deadline_ns or done_ops < n_ops:
                chunk = CHUNK if deadline_ns else min(CHUNK, n_ops - done_ops)
                # offsets are drawn off the timed path, a chunk at a time
                which = (
                    rng.choice(len(segs), size=chunk, p=weights)
                    if len(segs) > 1
                    else np.zeros(chunk, dtype=np.int64)
                )
                offs = (rng.integers(0, blocks[which]) * bs + seg_offsets[which]).tolist()
                which_l = which.tolist()
                fd_of = [fds[i] for i in which_l]
                chunk_bytes = st.bytes
                hit_deadline = False
                for k in range(chunk):
                    if not k % STOP_EVERY and should_stop():
                        raise _Stop
                    off = offs[k]
                    if write:
                        data = pool.next_block(which_l[k], off, bs)
                        t0 = _perf_ns()
                        done = pwrite(fd_of[k], data, off)
                    else:
                        t0 = _perf_ns()
                        done = preadv(fd_of[k], bufs, off)
                    t1 = _perf_ns()
                    lat[n] = t1 - t0
                    ends[n] = t1
                    nbytes[n] = done
                    n += 1
                    if rate:
                        chunk_bytes += done
                        self._pace(phase, st, chunk_bytes, state)
                    if deadline_ns and t1 >= deadline_ns:
                        hit_deadline = True
                        break
                done_ops += n
                st.end = ends[n - 1] / 1e9 if n else st.end
                rec.n, n = n, 0
                rec.flush()
                state.done_bytes[w] = st.bytes
                state.done_ops[w] = st.ops
                if hit_deadline:
                    return
            if write and phase.fsync in ("end", "file"):
                for fd in fds:
                    os.fsync(fd)
                st.end = time.perf_counter()
        except OSError as e:
            where = segs[which_l[k]].path if k < len(which_l) else segs[0].path
            state.fail(_describe_oserror(e, where, offs[k] if k < len(offs) else None), e.errno)
        finally:
            if n:  # operations of an unfinished chunk (stop or error)
                rec.n = n
                st.end = ends[n - 1] / 1e9
            for fd in fds:
                os.close(fd)

    def _meta_loop(self, phase, w, segments, st, state, pool, buf, rec) -> None:
        op = phase.op
        view = memoryview(buf) if buf is not None else None
        moved = 0
        for seg in segments:
            if state.should_stop():
                raise _Stop
            try:
                t0 = _perf_ns()
                n = 0
                if op == "create":
                    # the first block is cut (and stamped) before the clock starts
                    first = pool.next_block(seg.file_id, 0, min(pool.block_size, seg.length))
                    if phase.verify:
                        verify_mod.stamp(first, seg.file_id, 0)
                    t0 = _perf_ns()
                    fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    try:
                        pos = os.pwrite(fd, first, 0) if seg.length else 0
                        while pos < seg.length:
                            data = pool.next_block(
                                seg.file_id, pos, min(pool.block_size, seg.length - pos)
                            )
                            if phase.verify:
                                verify_mod.stamp(data, seg.file_id, pos)
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
            if op == "open_read" and phase.verify:  # blocks as create cut them
                _verified_blocks(view[:n], seg.path, seg.file_id, VERIFY_BLOCK, state)
            rec.add(n, t0, t1)
            moved += n
            st.files += 1
            st.end = t1 / 1e9
            state.done_ops[w] = st.ops + rec.n
            state.done_bytes[w] = moved
            if phase.drop_cache_after and op == "create":
                drop_file_cache(seg.path)


def _child_main(
    engine: PosixEngine,
    phase: PhaseSpec,
    w: int,
    segments: list[_Segment],
    origin: float,
    state: _PhaseState,
    conn: Any,
    go: Any,
    parent: int,
) -> None:
    """A forked worker: run one worker's loop and send its stats (and error) back."""
    # The parent turns Ctrl-C/SIGTERM/SIGHUP... into the shared stop flag; the terminal's
    # signals to the whole process group must not kill a worker before it reports what it did.
    worker_signals()
    libc = _LIBC
    if libc:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive the parent
    if os.getppid() != parent:
        os._exit(1)
    state.lock = threading.Lock()  # another thread may have held the inherited one at fork
    state.error = state.error_errno = None
    st = WorkerStats(origin=origin)

    def ready() -> bool:
        conn.send("ready")
        go.wait()
        return True

    error = None
    try:
        try:
            engine._worker(phase, w, segments, st, state, ready)
            error = state.error
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            error = f"worker process {w} failed: {type(e).__name__}: {e}"
            state.flags[_FAILED] = 1
        conn.send({"stats": st.to_dict(), "error": error, "errno": state.error_errno})
        conn.close()
    except BaseException:  # noqa: BLE001 - the parent gave up on us (Ctrl-C): just leave
        pass
    finally:
        os._exit(0)  # no interpreter teardown, no atexit handlers inherited from the parent


class _Stop(Exception):
    """Internal: leave the worker loop (stop requested or error recorded)."""


VERIFY_BLOCK = 64 << 20  # create writes files in blocks of up to this (DataPool's cap)


def _verified(block: memoryview, path: str, offset: int, file_id: int, state: _PhaseState) -> None:
    """Check one block read back; a mismatch fails the phase with the file and the offset."""
    try:
        verify_mod.check(block, path, offset, file_id)
    except VerifyError as e:
        state.fail(e.message, None)
        raise _Stop from None


def _verified_blocks(
    data: memoryview, path: str, file_id: int, block: int, state: _PhaseState
) -> None:
    try:
        verify_mod.check_blocks(data, path, 0, block, file_id)
    except VerifyError as e:
        state.fail(e.message, None)
        raise _Stop from None
