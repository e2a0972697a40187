"""The posix engine: the engine contract with threads and with forked worker processes, and
the parts that are its own (worker mode choice, chunked recording, errors in a worker process).
"""

from __future__ import annotations

import sys

import pytest
from engine_contract import EngineContract, MiB

from iobench.core.errors import EngineError
from iobench.engines import posix
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.posix import PosixEngine, _Recorder
from iobench.result.stats import WorkerStats
from iobench.target import StopFlag


class TestPosix(EngineContract):
    @pytest.fixture
    def engine(self):
        return PosixEngine(workers="threads")


class TestPosixProcesses(EngineContract):
    @pytest.fixture
    def engine(self):
        return PosixEngine(workers="processes")

    def test_results_say_processes(self, engine, run_dir):
        _, w = self.write_files(engine, run_dir, n=2, size=MiB)
        assert w.extra["workers"] == "processes"


def test_worker_mode_auto_uses_processes_beyond_the_cpus(monkeypatch):
    monkeypatch.setattr(posix, "_cpus", lambda: 2)
    eng = PosixEngine()
    files = (FileSpec("a", MiB),)
    assert eng.worker_mode(PhaseSpec("p", "read", files, jobs=1)) == "threads"
    assert eng.worker_mode(PhaseSpec("p", "read", files, jobs=2)) == "threads"
    assert eng.worker_mode(PhaseSpec("p", "read", files, jobs=3)) == "processes"
    assert PosixEngine("threads").worker_mode(PhaseSpec("p", "read", files, jobs=8)) == "threads"
    assert PosixEngine("processes").worker_mode(PhaseSpec("p", "read", files, jobs=2)) == (
        "processes"
    )
    per_phase = PhaseSpec("p", "read", files, jobs=8, params={"workers": "threads"})
    assert eng.worker_mode(per_phase) == "threads"
    with pytest.raises(ValueError):
        PosixEngine("fibres")


@pytest.mark.parametrize("size", [0, 4096, 4097])
def test_recorder_matches_worker_stats_add(size):
    """Chunked recording gives exactly what adding each operation would, whichever size the
    recorder takes as most operations' (the others are kept apart)."""
    origin = 1000.0
    ops = [(4096 + (i % 3), int((origin + i * 0.013) * 1e9), 1000 + 37 * i) for i in range(9000)]
    one = WorkerStats(origin=origin)
    for nbytes, t1, lat in ops:
        one.add(nbytes, t1 / 1e9, lat)
    chunked = WorkerStats(origin=origin)
    rec = _Recorder(chunked, size=size)
    for nbytes, t1, lat in ops:
        rec.add(nbytes, t1 - lat, t1)
    rec.flush()
    assert chunked.bytes == one.bytes and chunked.ops == one.ops == 9000
    assert chunked.hist.counts == one.hist.counts
    assert (chunked.hist.min_ns, chunked.hist.max_ns, chunked.hist.sum_ns) == (
        one.hist.min_ns,
        one.hist.max_ns,
        one.hist.sum_ns,
    )
    assert chunked.slot_bytes == one.slot_bytes
    assert chunked.slot_ops == one.slot_ops
    assert chunked.lat.counts == one.lat.counts and chunked.lat.counts  # latency over time


def test_recorder_moves_the_worker_end_to_its_last_op():
    """A worker that failed in the middle of a file (where the sequential loop sets the end)
    must not count its bytes over no time: an OSD that stopped under a 512 MiB file gave a
    partial phase of 41 MB in 0.1 ms (374 GB/s)."""
    st = WorkerStats(origin=100.0, start=100.0, end=100.0)
    rec = _Recorder(st)
    for i in range(1, 4):
        rec.add(MiB, int((100.0 + i - 0.5) * 1e9), int((100.0 + i) * 1e9))
    rec.flush()
    assert (st.bytes, st.end) == (3 * MiB, 103.0)
    later = WorkerStats(origin=100.0, start=100.0, end=200.0)  # an end set by the loop stays
    rec = _Recorder(later)
    rec.add(MiB, int(100.5e9), int(101e9))
    rec.flush()
    assert later.end == 200.0


def test_error_inside_a_worker_process_is_an_engine_error(tmp_path, monkeypatch):
    def boom(self, *args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(PosixEngine, "_seq_loop", boom)  # inherited by the forked workers
    files = (FileSpec("a.dat", MiB), FileSpec("b.dat", MiB))
    with pytest.raises(EngineError) as ei:
        PosixEngine("processes").run(
            PhaseSpec("p-boom", "write", files, jobs=2), EngineContext(str(tmp_path), StopFlag())
        )
    assert "disk on fire" in ei.value.one_line()
    assert ei.value.partial.status == "failed"


def test_stop_before_start_in_processes(tmp_path):
    stop = StopFlag()
    stop.set()
    files = (FileSpec("a.dat", MiB), FileSpec("b.dat", MiB))
    res = PosixEngine("processes").run(
        PhaseSpec("p-stopped", "write", files, jobs=2), EngineContext(str(tmp_path), stop)
    )
    assert res.status == "partial" and res.ops == 0


def test_time_based_write_fills_its_files_once_before_the_time_ends_it(tmp_path):
    """A slow client (paced here at 4 MiB/s) cannot write 2 MiB in 0.1 s: the phase still
    writes the whole file once, so a read-back after it reads only this phase's blocks (on
    ceph-fuse, qualify's verified read-back found another phase's blocks past the point
    where a cut-short write stopped)."""
    files = (FileSpec("a.dat", 2 * MiB),)
    spec = PhaseSpec(
        "p-slow", "write", files, block_size=256 * 1024, time_s=0.1, rate_bps=4 * MiB,
        verify=True,
    )  # fmt: skip
    res = PosixEngine("threads").run(spec, EngineContext(str(tmp_path), StopFlag()))
    assert res.bytes == 2 * MiB and res.ops == 8
    assert (tmp_path / "a.dat").stat().st_size == 2 * MiB
    assert any("written whole once" in w for w in res.warnings)
    back = PosixEngine("threads").run(
        PhaseSpec("p-back", "read", files, block_size=256 * 1024, verify=True),
        EngineContext(str(tmp_path), StopFlag()),
    )
    assert back.status == "ok" and back.bytes == 2 * MiB
    fast = PosixEngine("threads").run(
        PhaseSpec("p-fast", "write", files, block_size=256 * 1024, time_s=0.3),
        EngineContext(str(tmp_path), StopFlag()),
    )
    assert fast.bytes >= 2 * MiB  # time-based: loops over its file until the time is up


def _advice_log(monkeypatch):
    """Every posix_fadvise call the engine makes (passed on to the kernel)."""
    calls: list[tuple[int, int, int]] = []
    real = posix.os.posix_fadvise

    def spy(fd, offset, length, advice):
        calls.append((offset, length, advice))
        return real(fd, offset, length, advice)

    monkeypatch.setattr(posix.os, "posix_fadvise", spy)
    return calls


def test_readahead_advice_is_fios(tmp_path, monkeypatch):
    """fio tells the kernel each job's pattern (fadvise_hint=1, its default): SEQUENTIAL over a
    sequential job's region (Linux doubles the file's readahead), RANDOM over a random one.
    Without it a buffered 1 MiB read ran at 0.48 of fio's bandwidth on this VM's disk (8 MiB
    readahead), with 0.6 of the requests in flight (docs/validation/posix-vs-fio.md)."""
    eng, ctx = PosixEngine("threads"), EngineContext(str(tmp_path), StopFlag())
    files = (FileSpec("a.dat", 4 * MiB),)
    eng.run(PhaseSpec("w", "write", files, block_size=MiB, fsync="end"), ctx)
    calls = _advice_log(monkeypatch)
    eng.run(PhaseSpec("r", "read", files, jobs=2, block_size=MiB, mode="shared"), ctx)
    seq = posix.os.POSIX_FADV_SEQUENTIAL
    assert sorted(calls) == [(0, 2 * MiB, seq), (2 * MiB, 2 * MiB, seq)]  # each worker's region
    calls.clear()
    eng.run(PhaseSpec("rr", "randread", files, block_size=4096, size=64 * 4096), ctx)
    assert calls == [(0, 4 * MiB, posix.os.POSIX_FADV_RANDOM)]


def test_a_file_system_that_takes_no_advice_is_read_as_it_is(tmp_path, monkeypatch):
    eng, ctx = PosixEngine("threads"), EngineContext(str(tmp_path), StopFlag())
    files = (FileSpec("a.dat", MiB),)
    eng.run(PhaseSpec("w", "write", files, block_size=MiB), ctx)

    def refuse(*args):
        raise OSError(29, "Illegal seek")  # ESPIPE: what a pipe-like file answers

    monkeypatch.setattr(posix.os, "posix_fadvise", refuse)
    res = eng.run(PhaseSpec("r", "read", files, block_size=MiB), ctx)
    assert res.status == "ok" and res.bytes == MiB


def _bytecodes(fn, skip) -> tuple[int, int]:
    """Python bytecodes ``fn()`` executes (frames of ``skip``, a code object, left out), and
    how many of them are item assignments (``x[i] = v``)."""
    import dis

    n, stores = [0], [0]
    store = dis.opmap["STORE_SUBSCR"]

    def tracer(frame, event, arg):
        if frame.f_code is skip:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            n[0] += 1
            stores[0] += frame.f_code.co_code[frame.f_lasti] == store
        return tracer

    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(None)
    return n[0], stores[0]


def test_a_random_read_costs_few_more_bytecodes_than_a_bare_timed_loop(tmp_path, monkeypatch):
    """The engine's random-read loop, per read (draws, stop checks and recording included),
    against the least a timed loop does (two clock readings, the read, the two readings kept,
    the deadline): counted in bytecodes, which no load on the host changes. A bytecode is not
    a cost: b355e6b's loop ran 47 per read against a bare loop's 38, but its three stores into
    ``array.array`` (one bytecode each) took 2,300 of its 5,300 machine instructions per read
    (cachegrind, docs/validation/posix-vs-fio.md); so no read stores an item (``x[i] = v``):
    the clock's readings are appended to lists."""
    from iobench.engines import worker

    path = tmp_path / "r.dat"
    path.write_bytes(bytes(MiB))
    phase = PhaseSpec("rr", "randread", (FileSpec("r.dat", MiB),), block_size=4096, time_s=9)
    draws = worker.RandomDraws(phase, 0, [posix.Segment(0, str(path), 0, MiB)], 4096)
    st = WorkerStats(origin=0.0)
    rec = _Recorder(st, size=4096)
    state = worker.PhaseState(EngineContext(str(tmp_path), StopFlag()), 1)
    stub = lambda fd, bufs, off: 4096  # noqa: E731 - the read, out of the count
    monkeypatch.setattr(posix.os, "preadv", stub)
    chunk = worker.CHUNK
    engine, stores = _bytecodes(
        lambda: posix._random_reads(st, state, [3], None, rec, draws, chunk, 0), stub.__code__
    )
    assert rec.n == chunk and not rec.odd
    assert stores == 0

    offs = draws.draw(chunk)[1]
    t0s, t1s, clock, deadline = [], [], posix._perf_ns, 1 << 62

    def bare():
        for off in offs:
            t0 = clock()
            stub(3, None, off)
            t1 = clock()
            t0s.append(t0)
            t1s.append(t1)
            if t1 >= deadline:
                return

    floor, _ = _bytecodes(bare, stub.__code__)
    assert engine / floor < 1.25, (engine / chunk, floor / chunk)
