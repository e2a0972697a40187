"""The POSIX engine's random-operation loops, a chunk of operations at a time.

The offsets (and, over several regions, the descriptors) are drawn before each loop, so only
the system call sits between the two clock readings; the readings are appended to the
recorder's lists and folded into the histogram outside the timed region (``worker.Recorder``).
At queue depth 1 every instruction here is lost IOPS: docs/validation/posix-vs-fio.md counts
them against fio's.
"""

from __future__ import annotations

import os

from .worker import Stop, describe_oserror, pace, perf_ns

_perf_ns = perf_ns
STOP_EVERY = 16  # the random loop looks at the stop flags every this many operations


def _random_reads(st, state, fds, bufs, rec, draws, chunk, deadline_ns) -> bool:
    """One chunk of random reads at no set rate (the IOPS case): ``_random_chunk``'s
    contract with no per-op branch but the deadline and a short read: the stop flags looked
    at once per STOP_EVERY reads, the offsets drawn before the loop, the two clock readings
    appended to the recorder's lists (docs/validation/posix-vs-fio.md: their cost)."""
    which, offs = draws.draw(chunk)
    if len(fds) > 1:  # several regions: a descriptor per read
        return _random_reads_of(st, state, fds, bufs, rec, draws, which, offs, deadline_ns)
    t0s, t1s, odd, bs = rec.t0s, rec.t1s, rec.odd, rec.size
    should_stop, preadv, clock, fd = state.should_stop, os.preadv, _perf_ns, fds[0]
    deadline = deadline_ns or 1 << 62  # no deadline: one comparison that never holds
    off, first = 0, len(t1s)
    try:
        for base in range(0, chunk, STOP_EVERY):
            if should_stop():
                raise Stop
            for off in offs[base : base + STOP_EVERY]:
                t0 = clock()
                done = preadv(fd, bufs, off)
                t1 = clock()
                t0s.append(t0)
                t1s.append(t1)
                if done != bs:  # a short read (past a shorter file's end)
                    odd.append((len(t1s) - 1, done))
                if t1 >= deadline:
                    return True
        return False
    except OSError as e:  # the read that failed is not recorded
        state.fail(describe_oserror(e, draws.segs[which[len(t1s) - first]].path, off), e.errno)
        raise Stop from None
    finally:
        if t1s:
            st.end = t1s[-1] / 1e9


def _random_reads_of(st, state, fds, bufs, rec, draws, which, offs, deadline_ns) -> bool:
    """``_random_reads`` over several regions: each read's descriptor drawn with its offset."""
    t0s, t1s, odd, bs = rec.t0s, rec.t1s, rec.odd, rec.size
    should_stop, preadv, clock = state.should_stop, os.preadv, _perf_ns
    fd_of = [fds[i] for i in which]
    deadline = deadline_ns or 1 << 62
    off, first = 0, len(t1s)
    try:
        for base in range(0, len(offs), STOP_EVERY):
            if should_stop():
                raise Stop
            top = base + STOP_EVERY
            for fd, off in zip(fd_of[base:top], offs[base:top], strict=True):
                t0 = clock()
                done = preadv(fd, bufs, off)
                t1 = clock()
                t0s.append(t0)
                t1s.append(t1)
                if done != bs:
                    odd.append((len(t1s) - 1, done))
                if t1 >= deadline:
                    return True
        return False
    except OSError as e:
        state.fail(describe_oserror(e, draws.segs[which[len(t1s) - first]].path, off), e.errno)
        raise Stop from None
    finally:
        if t1s:
            st.end = t1s[-1] / 1e9


def _random_chunk(phase, st, state, pool, fds, bufs, rec, draws, chunk, deadline_ns) -> bool:
    """One chunk of random operations, recorded into ``rec`` (also those of a chunk a stop or
    an error cuts short); True at the deadline. The offsets are drawn before the loop;
    inside it only the system call sits between the clock readings."""
    which_l, offs = draws.draw(chunk)
    fd_of = [fds[i] for i in which_l]
    write, bs, rate, should_stop = (
        phase.op == "randwrite",
        draws.bs,
        phase.rate_bps,
        state.should_stop,
    )
    preadv, pwrite, add = os.preadv, os.pwrite, rec.add
    chunk_bytes = st.bytes
    k = 0
    try:
        for k in range(chunk):
            if not k % STOP_EVERY and should_stop():
                raise Stop
            off = offs[k]
            if write:
                data = pool.next_block(which_l[k], off, bs)
                t0 = _perf_ns()
                done = pwrite(fd_of[k], data, off)
            else:
                t0 = _perf_ns()
                done = preadv(fd_of[k], bufs, off)
            t1 = _perf_ns()
            add(done, t0, t1)
            if rate:
                chunk_bytes += done
                pace(phase, st, chunk_bytes, should_stop)
            if deadline_ns and t1 >= deadline_ns:
                return True
        return False
    except OSError as e:
        state.fail(describe_oserror(e, draws.segs[which_l[k]].path, offs[k]), e.errno)
        raise Stop from None
    finally:
        if rec.t1s:
            st.end = rec.t1s[-1] / 1e9
