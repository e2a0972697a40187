"""What every measuring engine's workers share, so that an engine is one module of loops.

An engine (posix, fsspec; io_uring would be one more) writes only its three loops — sequential,
random and metadata — each moving its own bytes between two clock readings; this module holds
the rest, the same for all of them:

- ``PhaseState``: the stop/failed/steady flags and the progress counters, in one shared page
  (visible to forked workers too), and the first error with its errno;
- ``run_phase``: progress start and close, the live steady-state watch, the partial result of an
  interrupted phase; ``run_threads``: the worker threads, started together behind a barrier,
  watched and stopped; ``forked.run_processes`` does the same with processes;
- ``run_worker``: buffers set up before the phase starts (``data_pool`` seeds the write data),
  the start barrier, the loop chosen by op, the stop, error capture and the final counters;
- the loops' shared structure: ``seq_passes`` (passes over the worker's files until its budget
  or deadline, per-file latency), ``RandomDraws`` (block offsets drawn a chunk at a time, off
  the timed path), ``pace`` (rate limiting that wakes on a stop);
- ``Recorder``: per-operation clock readings in lists, added to the stats a chunk at a time;
- ``finish``: the result's status and error, ``describe_oserror``: one line for an I/O error.
"""

from __future__ import annotations

import dataclasses
import errno
import mmap
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.datagen import DataPool
from ..core.errors import EngineError, Interrupted, VerifyError
from ..result import verify as verify_mod
from ..result.file import PhaseResult
from ..result.stats import SERIES_RESOLUTION_S, WorkerStats
from ..result.steady import REPEATABLE_META
from ..target import out_of_inodes
from .base import WRITE_BLOCK_CAP, EngineContext, PhaseSpec, Segment, SteadyWatch, pace_until

perf_ns = time.perf_counter_ns

CHUNK = 4096  # operations recorded before they are added to the histogram and series
POLL_S = 0.1  # how often the coordinating thread mirrors ctx.stop and reports progress
_HEADER = 64  # bytes of flags at the start of the shared state page
STOP, FAILED, STEADY = 0, 1, 2  # flag offsets
_PER_S = round(1 / SERIES_RESOLUTION_S)  # series slots per second (an int, as WorkerStats.add)
VERIFY_BLOCK = WRITE_BLOCK_CAP  # create writes files in blocks of up to this (DataPool's cap)


class Stop(Exception):
    """Internal: leave the worker loop (stop requested or error recorded)."""


class PhaseState:
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
        return f[STOP] != 0 or f[FAILED] != 0 or f[STEADY] != 0 or self.ctx.stop.is_set()

    def stop_or_failed(self) -> bool:
        """A stop or a failure; not steady state (a write's first pass goes on through it)."""
        f = self.flags
        return f[STOP] != 0 or f[FAILED] != 0 or self.ctx.stop.is_set()

    def stop_requested(self) -> bool:
        return self.flags[STOP] != 0 or self.ctx.stop.is_set()

    def has_failed(self) -> bool:
        return self.flags[FAILED] != 0

    def request_stop(self) -> None:
        self.flags[STOP] = 1

    def steady_stop(self) -> None:
        """End the phase as its time limit would: it reached steady state (not a stop)."""
        self.flags[STEADY] = 1

    def fail(self, msg: str, err_no: int | None = None) -> None:
        with self.lock:
            if self.error is None:
                self.error, self.error_errno = msg, err_no
        self.flags[FAILED] = 1

    def totals(self) -> tuple[int, int]:
        return sum(self.done_bytes), sum(self.done_ops)

    def publish(self, w: int, st: WorkerStats, pending_ops: int = 0) -> None:
        """Worker ``w``'s running totals, for the progress display and the steady watch."""
        self.done_bytes[w] = st.bytes
        self.done_ops[w] = st.ops + pending_ops


class Recorder:
    """Per-operation start and end times kept in Python lists, added to the worker's stats a
    chunk at a time (off the timed path). Most operations move ``size`` bytes; the others
    are kept as (index, bytes) in ``odd``, so a loop whose transfers are all one size stores
    two clock readings per operation and nothing else.

    Lists, not ``array.array``: appending an int the clock already made is a pointer store,
    where an array's item assignment parses its value through ``PyArg_Parse`` (about 900 of a
    loop's 5,300 machine instructions per 4 KiB read, docs/validation/posix-vs-fio.md)."""

    __slots__ = ("st", "size", "t0s", "t1s", "odd")

    def __init__(self, st: WorkerStats, size: int = 0):
        self.st = st
        self.size = size
        self.t0s: list[int] = []
        self.t1s: list[int] = []
        self.odd: list[tuple[int, int]] = []

    @property
    def n(self) -> int:
        """Operations recorded and not yet added to the stats."""
        return len(self.t1s)

    def add(self, nbytes: int, t0: int, t1: int) -> None:
        t1s = self.t1s
        self.t0s.append(t0)
        t1s.append(t1)
        if nbytes != self.size:
            self.odd.append((len(t1s) - 1, nbytes))
        if len(t1s) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        n = len(self.t1s)
        if not n:
            return
        st = self.st
        ends = np.array(self.t1s, dtype=np.int64)
        lat = ends - np.array(self.t0s, dtype=np.int64)
        nb = np.full(n, self.size, dtype=np.int64)
        if self.odd:
            at, sizes = zip(*self.odd, strict=True)
            nb[list(at)] = sizes
        self.t0s.clear()
        self.t1s.clear()
        self.odd.clear()
        st.hist.record_array(lat)
        st.bytes += int(nb.sum())
        st.ops += n
        # a worker's end is at least its last recorded op's: a phase that failed in the middle
        # of a file (where the loop sets the end) must not count its bytes over no time
        st.end = max(st.end, int(ends[-1]) / 1e9)
        _add_slots(st, ends, nb, lat)


def _add_slots(st: WorkerStats, ends: np.ndarray, nb: np.ndarray, lat: np.ndarray) -> None:
    """Operations ending at ``ends`` (ns) into the worker's per-interval series: slot k holds
    ops completed in (k, k+1] slots after the origin, as WorkerStats.add."""
    slots = ((ends / 1e9 - st.origin) * _PER_S - 1e-9).astype(np.int64)
    np.maximum(slots, 0, out=slots)
    top = int(slots.max()) + 1
    if top > len(st.slot_bytes):
        grow = top - len(st.slot_bytes)
        st.slot_bytes.extend([0] * grow)
        st.slot_ops.extend([0] * grow)
    by_ops = np.bincount(slots)
    used = np.nonzero(by_ops)[0]
    by_bytes = np.bincount(slots, weights=nb)[used].tolist()
    for i, b, k in zip(used.tolist(), by_bytes, by_ops[used].tolist(), strict=True):
        st.slot_bytes[i] += int(b)
        st.slot_ops[i] += k
    st.lat.add_array(slots, lat)  # the latency over time (result.timeseries)


# -- a phase and its workers -----------------------------------------------------------------
def run_phase(
    phase: PhaseSpec,
    ctx: EngineContext,
    work: list[list[Segment]],
    coordinate: Callable[[PhaseState, float, list[WorkerStats]], list[WorkerStats]],
    result: Callable[[list[WorkerStats], PhaseState], PhaseResult],
    steady: bool = True,
) -> PhaseResult:
    """Run one phase: ``coordinate(state, origin, box)`` starts the workers and returns their
    stats (keeping them in ``box`` as they are made, so a second signal keeps what they
    measured); ``result(stats, state)`` makes the PhaseResult (``finish`` raises on errors).
    With ``steady`` a time-based phase with a steady criterion ends once steady, live."""
    watch = None
    if steady and phase.steady is not None and phase.time_s:
        metric = "iops" if phase.op in ("stat", "delete") else "bw"
        watch = SteadyWatch(ctx.progress, phase.steady.for_metric(metric), None, POLL_S)
        ctx = dataclasses.replace(ctx, progress=watch)
    state = PhaseState(ctx, phase.jobs)
    if watch is not None:
        watch.on_steady = state.steady_stop
    total = sum(s.length for seg in work for s in seg) if phase.op in ("write", "read") else None
    ctx.progress.start(phase.name, total if not phase.time_s else None, None)
    if phase.time_s:
        ctx.progress.set_duration(phase.time_s)
    box: list[WorkerStats] = []
    try:
        stats = coordinate(state, time.perf_counter(), box)
    except Interrupted as e:
        if box and e.partial is None:
            e.partial = _interrupted(box, state, result)
        raise
    finally:
        ctx.progress.update(*state.totals())
        ctx.progress.close()
    res = result(stats, state)
    if watch is not None:
        # why the phase ended: its time limit, or steady state seen live (base.SteadyWatch)
        res.extra["ended"] = "steady" if watch.steady_at_s is not None else "time limit"
        if watch.steady_at_s is not None:
            res.extra["steady_live_at_s"] = round(watch.steady_at_s, 3)
    return res


def _interrupted(box: list[WorkerStats], state: PhaseState, result: Callable) -> PhaseResult:
    """The workers were joined: what they measured until the signal is kept, marked partial."""
    try:
        partial = result(box, state)
    except EngineError as failed:
        if failed.partial is None:  # every engine's failure carries it (finish, _failed)
            raise
        partial = failed.partial
    partial.status = "partial"
    partial.error = partial.error or "interrupted"
    return partial


def finish(res: PhaseResult, phase: PhaseSpec, state: PhaseState) -> PhaseResult:
    """A phase's status from its state: EngineError (with the partial result and the errno)
    on a worker's error, "partial"/"interrupted" after a stop."""
    if state.error:
        res.status = "partial" if res.ops else "failed"
        res.error = state.error
        raise EngineError(
            f"phase {phase.name}: {state.error}", partial=res, errno=state.error_errno
        )
    if state.stop_requested():
        res.status = "partial"
        res.error = "interrupted"
    return res


WorkerFn = Callable[[int, WorkerStats, Callable[[], bool]], None]


def run_threads(
    phase: PhaseSpec, state: PhaseState, origin: float, box: list[WorkerStats], work: WorkerFn
) -> list[WorkerStats]:
    """The phase's workers as threads: ``work(w, stats, ready)`` for each, all starting behind
    one barrier once each has its buffers; ctx.stop mirrored into the flags, progress reported
    every POLL_S; on Ctrl-C or an error here the workers are stopped and joined."""
    stats = [WorkerStats(origin=origin) for _ in range(phase.jobs)]
    box.extend(stats)
    barrier = threading.Barrier(phase.jobs + 1)
    threads = [
        threading.Thread(
            target=_guarded,
            args=(w, work, stats[w], state, barrier),
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


def _guarded(
    w: int, work: WorkerFn, st: WorkerStats, state: PhaseState, barrier: threading.Barrier
) -> None:
    """One worker thread. Anything it did not expect (a bug, an overflow) fails the phase: a
    thread that just died would leave a phase "ok" with the bytes it never moved."""
    started = [False]

    def ready() -> bool:
        started[0] = True
        try:
            barrier.wait()
            return True
        except threading.BrokenBarrierError:
            return False

    try:
        work(w, st, ready)
    except BaseException as e:  # noqa: BLE001 - reported through the phase
        state.fail(describe_worker_error(w, e), getattr(e, "errno", None))
        if not started[0]:
            barrier.abort()  # the phase cannot start without this worker


def data_pool(phase: PhaseSpec, w: int, segments: list[Segment]) -> DataPool:
    """Worker ``w``'s write data: incompressible, seeded by the phase seed and the worker, in
    blocks of the phase's block size (whole files when 0), at most WRITE_BLOCK_CAP."""
    bs = phase.block_size or max((s.length for s in segments), default=4096)
    return DataPool(min(max(bs, 1), WRITE_BLOCK_CAP), seed=phase.seed * 1000 + w + 1)


def run_worker(
    state: PhaseState,
    w: int,
    st: WorkerStats,
    ready: Callable[[], bool],
    setup: Callable[[], list[Any]],
    loop: Callable[[list[Any]], None],
    done: Callable[[], None] | None = None,
    on_error: Callable[[Exception], str] | None = None,
) -> None:
    """One worker: ``setup()`` its buffers (a failure lets the phase start, then fail), wait at
    the start barrier, ``loop(buffers)`` from ``st.start``; a Stop ends it quietly, another
    Exception is recorded as ``on_error(e)`` when given (else it fails the worker);
    ``done()`` (a recorder's flush) and the final counters always follow, and every buffer
    with a ``close`` is closed."""
    bufs: list[Any] = []
    try:
        try:
            bufs = setup()
        except BaseException as e:  # noqa: BLE001 - buffers could not be set up: start, then fail
            state.fail(f"worker setup failed: {e}", None)
        if not ready() or state.has_failed():
            return
        st.start = time.perf_counter()
        st.end = st.start
        try:
            loop(bufs)
        except Stop:
            pass
        except Exception as e:
            if on_error is None:
                raise
            state.fail(on_error(e), None)
        finally:
            if done is not None:
                done()
            state.publish(w, st)
            st.end = max(st.end, st.start)
    finally:
        for b in bufs:
            if b is not None:
                b.close()


# -- the loops' shared structure -------------------------------------------------------------
FileFn = Callable[[Segment, int, bool], tuple[int, bool, int, int]]


def seq_passes(
    phase: PhaseSpec,
    w: int,
    segments: list[Segment],
    st: WorkerStats,
    state: PhaseState,
    one_file: FileFn,
    fill_first: bool = False,
    after_file: Callable[[Segment], object] | None = None,
    pending: Callable[[], int] = lambda: 0,
) -> None:
    """A sequential phase's passes over the worker's files, until the bytes it moves (``size``)
    or its deadline. ``one_file(seg, moved, first_pass)`` moves one file (the engine's timed
    loop) and returns (bytes, limit reached, t_open_ns, t_close_ns); with ``latency_per``
    "file" the whole file is one sample. ``fill_first``: a time-based write fills its files
    once before the clock may stop it (what a read-back reads was all written by this phase).
    """
    per_file = phase.latency_per == "file"
    budget = phase.size or None  # bytes this worker moves
    deadline = (st.start + phase.time_s) if phase.time_s else None
    first_pass = fill_first and bool(deadline)
    moved = 0
    if not segments:
        return
    while True:
        for seg in segments:
            done, reached, t_file, t_end = one_file(seg, moved, first_pass)
            moved += done
            if per_file:  # one latency sample per whole file: open to close
                st.hist.record(t_end - t_file)
                st.ops += 1
                st.bytes += done
                st.lat.add(st.slot_add(t_end / 1e9, done), t_end - t_file)
            st.files += 1
            state.done_ops[w] = st.ops + pending()
            if after_file is not None:
                after_file(seg)
            st.end = t_end / 1e9
            if reached or (deadline and st.end >= deadline and not first_pass):
                return
            if budget is not None and not deadline and moved >= budget:
                return
        first_pass = False
        if deadline and st.end >= deadline:
            return
        if not deadline and (budget is None or moved >= budget):
            return


def meta_passes(phase: PhaseSpec, segments: list[Segment], st: WorkerStats) -> Any:
    """The files a metadata loop goes over, in order: once, or for a time-based ``stat`` or
    ``open_read`` (``steady.REPEATABLE_META``) pass after pass until its deadline (``st.start + time_s``, looked at after
    each file by its end, ``st.end``). A steady or stop flag ends the loop as before."""
    if not (phase.time_s and phase.op in REPEATABLE_META):
        yield from segments
        return
    deadline = st.start + phase.time_s
    while segments:
        for seg in segments:
            yield seg
            if st.end >= deadline:
                return


def block_len(phase: PhaseSpec, pos: int, end: int, moved: int) -> int:
    """The next sequential transfer at ``pos`` of a region ending at ``end``: one block (the
    rest of the region when block_size is 0), cut to the worker's byte budget (``size``,
    when the phase is not time-based); <= 0 when the budget is spent."""
    n = min(phase.block_size or (end - pos), end - pos)
    if phase.size and not phase.time_s:
        n = min(n, phase.size - moved)
    return n


class RandomDraws:
    """A random phase's offsets: block-aligned, over the worker's regions weighted by their
    blocks, drawn with replacement a chunk at a time (off the timed path) from the phase
    seed and the worker. Regions shorter than one block are left out."""

    def __init__(self, phase: PhaseSpec, w: int, segments: list[Segment], bs: int):
        self.bs = bs
        self.segs = [s for s in segments if s.length >= bs]
        self.rng = np.random.default_rng(phase.seed * 7919 + w)
        self.blocks = np.array([s.length // bs for s in self.segs], dtype=np.int64)
        self.weights = self.blocks / self.blocks.sum() if self.segs else self.blocks
        self.offsets = np.array([s.offset for s in self.segs], dtype=np.int64)
        self.n_ops = (phase.size // bs) if phase.size else int(self.blocks.sum())

    def draw(self, chunk: int) -> tuple[list[int], list[int]]:
        """(region index, byte offset) of the next ``chunk`` operations. One region draws from
        a scalar bound: the same offsets as an array of equal bounds, at a fifth of the cost."""
        if len(self.segs) == 1:
            offs = self.rng.integers(0, int(self.blocks[0]), chunk) * self.bs + self.segs[0].offset
            return [0] * chunk, offs.tolist()
        which = self.rng.choice(len(self.segs), size=chunk, p=self.weights)
        offs = self.rng.integers(0, self.blocks[which]) * self.bs + self.offsets[which]
        return which.tolist(), offs.tolist()


def pace(
    phase: PhaseSpec,
    st: WorkerStats,
    moved: int,
    should_stop: Callable[[], bool],
    past_deadline: bool = False,
) -> None:
    """Hold the worker to ``rate`` (bytes/s): sleep until ``moved`` bytes are due, waking
    at once on a stop request or a failure, and never past the phase's deadline (unless
    the phase goes on past it: a time-based write's first pass over its files)."""
    rate = phase.rate_bps
    if not rate:  # unpaced (callers pace only with a rate)
        return
    until = st.start + moved / rate
    if phase.time_s and not past_deadline:
        until = min(until, st.start + phase.time_s)
    pace_until(until, should_stop)


# -- errors ----------------------------------------------------------------------------------
def describe_worker_error(w: int, e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno is not None:
        return f"worker {w} failed: {describe_oserror(e, e.filename or '?')}"
    return f"worker {w} failed: {type(e).__name__}: {e}"


def describe_oserror(e: OSError, path: str, offset: int | None = None) -> str:
    """One line for a failed local I/O: what ran out (space, inodes, quota, ulimit -f) and
    where, or the error's text and code."""
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


def verified(block: memoryview, path: str, offset: int, file_id: int, state: PhaseState) -> None:
    """Check one block read back; a mismatch fails the phase with the file and the offset."""
    try:
        verify_mod.check(block, path, offset, file_id)
    except VerifyError as e:
        state.fail(e.message, None)
        raise Stop from None


def verified_blocks(
    data: memoryview, path: str, file_id: int, block: int, state: PhaseState
) -> None:
    """Check a whole file read back, in the blocks ``create`` wrote it in."""
    try:
        verify_mod.check_blocks(data, path, 0, block, file_id)
    except VerifyError as e:
        state.fail(e.message, None)
        raise Stop from None
