"""The contract every engine passes: subclass ``EngineContract`` and provide an ``engine`` fixture.

The suite is engine-agnostic: it gets a ``run_dir`` (a local directory by default; an engine for
object stores overrides the ``run_dir`` fixture and the few hooks below), builds PhaseSpecs with
small sizes, and checks what every engine promises: the bytes and operations it was asked for,
figures consistent with each other, a histogram holding every operation, the cache state, the
per-worker spread, time-based and rate-limited phases, stopping mid-phase, and failing with an
EngineError that carries the partial result. It asserts no speed: these machines vary too much.

    class TestMyEngine(EngineContract):
        @pytest.fixture
        def engine(self):
            return MyEngine()
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import pytest

from iobench.core.errors import EngineError
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec, Progress
from iobench.result.file import PhaseResult
from iobench.target import StopFlag, probe_direct_alignment, probe_direct_io

MiB = 1 << 20
KiB = 1 << 10


class _StopAfterFirstIO(Progress):
    """Sets ``stop`` once ``after_s`` has passed since the engine first reported bytes done."""

    def __init__(self, stop: StopFlag, after_s: float):
        self.stop, self.after_s, self.first = stop, after_s, None

    def update(self, done_bytes: int, done_ops: int) -> None:
        if done_bytes <= 0 and done_ops <= 0:
            return
        now = time.monotonic()
        if self.first is None:
            self.first = now
        elif now - self.first >= self.after_s:
            self.stop.set()


class EngineContract:
    """Pytest-style contract tests; subclasses provide the ``engine`` fixture."""

    #: the last progress update is the phase's exact totals (engines on ``engines.worker``);
    #: False for an engine whose progress is an estimate (fio's ETA line)
    progress_totals_exact = True

    # -- hooks an engine for another kind of target overrides --------------------------------
    @pytest.fixture
    def run_dir(self, tmp_path) -> str:
        return str(tmp_path)

    def direct_available(self, run_dir: str) -> bool:
        """Whether O_DIRECT works in ``run_dir`` (ext4 tmp dirs: yes; tmpfs, object stores: no)."""
        return probe_direct_io(run_dir)[0]

    def file_size(self, run_dir: str, path: str) -> int:
        return os.stat(os.path.join(run_dir, path)).st_size

    def unwritable(self, run_dir: str) -> FileSpec:
        """A file no one can create, root included: its parent is a regular file."""
        with open(os.path.join(run_dir, "blocker"), "w") as f:
            f.write("not a directory")
        return FileSpec("blocker/x.dat", 1 * MiB)

    def ctx(self, run_dir: str, stop: StopFlag | None = None) -> EngineContext:
        """The context every phase gets (override to add storage_options, raw_dir, ...)."""
        return EngineContext(run_dir=run_dir, stop=stop or StopFlag())

    # -- helpers -----------------------------------------------------------------------------

    def write_files(
        self, engine, run_dir: str, n: int = 2, size: int = 4 * MiB, direct: bool = False
    ) -> tuple[tuple[FileSpec, ...], PhaseResult]:
        files = tuple(FileSpec(f"c{i}.dat", size) for i in range(n))
        res = engine.run(
            PhaseSpec("c-write", "write", files, jobs=n, block_size=MiB, direct=direct,
                      fsync="end", seed=3),
            self.ctx(run_dir),
        )  # fmt: skip
        return files, res

    @staticmethod
    def check_consistent(res: PhaseResult, nbytes: int, bs: int) -> None:
        """The figures agree with each other and with what was asked."""
        assert res.status == "ok", res.error
        assert res.bytes == nbytes
        assert res.ops == nbytes // bs
        assert res.histogram["count"] == res.ops
        assert sum(res.histogram["buckets"].values()) == res.ops
        assert res.elapsed_s > 0
        assert res.bandwidth_bps == pytest.approx(res.bytes / res.elapsed_s, rel=1e-9)
        assert res.iops == pytest.approx(res.ops / res.elapsed_s, rel=1e-9)
        assert 0 < res.stonewall_s <= res.elapsed_s
        lat = res.latency_s
        assert 0 < lat["min"] <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p999"]
        assert lat["p999"] <= lat["max"]
        assert lat["min"] <= lat["mean"] <= lat["max"]

    # -- the contract ------------------------------------------------------------------------
    def test_write_then_read_back(self, engine, run_dir):
        direct = self.direct_available(run_dir)
        files, w = self.write_files(engine, run_dir, direct=direct)
        self.check_consistent(w, 8 * MiB, MiB)
        assert w.op == "write" and w.name == "c-write"
        assert w.concurrency == 2 and w.block_size == MiB
        for f in files:
            assert self.file_size(run_dir, f.path) == f.size
        r = engine.run(
            PhaseSpec("c-read", "read", files, jobs=2, block_size=MiB, direct=direct),
            self.ctx(run_dir),
        )
        self.check_consistent(r, 8 * MiB, MiB)
        assert r.files == 2

    def test_block_size_sets_op_count(self, engine, run_dir):
        files, _ = self.write_files(engine, run_dir, n=1, size=2 * MiB)
        r = engine.run(
            PhaseSpec("c-read-256k", "read", files, block_size=256 * KiB), self.ctx(run_dir)
        )
        self.check_consistent(r, 2 * MiB, 256 * KiB)

    def test_decimal_block_size_moves_exactly_its_bytes(self, engine, run_dir):
        """``block_size=1MB`` is 10**6 bytes in every engine (fio is handed byte counts: its
        own kb_base=1024 would read "1MB" as 2**20)."""
        files = tuple(FileSpec(f"d{i}.dat", 8 * 10**6) for i in range(2))
        w = engine.run(
            PhaseSpec("d-write", "write", files, jobs=2, block_size=10**6, fsync="end"),
            self.ctx(run_dir),
        )
        self.check_consistent(w, 16 * 10**6, 10**6)
        assert [self.file_size(run_dir, f.path) for f in files] == [8 * 10**6] * 2
        r = engine.run(
            PhaseSpec("d-read", "read", files, jobs=2, block_size=10**6), self.ctx(run_dir)
        )
        self.check_consistent(r, 16 * 10**6, 10**6)
        assert r.block_size == w.block_size == 10**6

    def test_direct_io_at_the_alignment_the_target_takes(self, engine, run_dir):
        """Blocks of 3 x the measured O_DIRECT alignment (1536 bytes on a 512-byte device)
        and random reads over regions of a 3-way split: every length and offset aligned."""
        if not self.direct_available(run_dir):
            pytest.skip("no O_DIRECT here")
        align = probe_direct_alignment(run_dir)
        ctx = dataclasses.replace(self.ctx(run_dir), direct_align=align)
        bs = 3 * align
        files = (FileSpec("a.dat", 64 * bs),)
        w = engine.run(PhaseSpec("a-write", "write", files, block_size=bs, direct=True), ctx)
        self.check_consistent(w, 64 * bs, bs)
        r = engine.run(PhaseSpec("a-read", "read", files, block_size=bs, direct=True), ctx)
        self.check_consistent(r, 64 * bs, bs)
        assert (w.cache, r.cache) == ("direct", "direct")
        if engine.supports("randread"):
            # 193 blocks in 3 regions: region starts on the block grid, not at 64.33 blocks
            odd = (FileSpec("b.dat", 193 * align),)
            wb = engine.run(PhaseSpec("b-write", "write", odd, block_size=align, direct=True), ctx)
            self.check_consistent(wb, 193 * align, align)
            rr = engine.run(
                PhaseSpec("b-rand", "randread", odd, jobs=3, block_size=align, size=8 * align,
                          direct=True, mode="shared", seed=1),
                ctx,
            )  # fmt: skip
            self.check_consistent(rr, 3 * 8 * align, align)

    def test_cache_state(self, engine, run_dir):
        direct = self.direct_available(run_dir)
        files, w = self.write_files(engine, run_dir, n=1, size=MiB, direct=direct)
        if direct:
            assert w.cache == "direct"
        r = engine.run(PhaseSpec("c-read", "read", files, block_size=MiB), self.ctx(run_dir))
        assert r.cache in ("buffered", "dropped", "none")

    def test_per_worker_spread(self, engine, run_dir):
        files, w = self.write_files(engine, run_dir, n=3, size=MiB)
        spread = w.per_worker
        assert set(spread) >= {"min", "median", "max"}
        assert 0 < spread["min"] <= spread["median"] <= spread["max"]

    def test_random_reads(self, engine, run_dir):
        if not engine.supports("randread"):
            pytest.skip(f"{engine.name} has no random reads")
        direct = self.direct_available(run_dir)
        files, _ = self.write_files(engine, run_dir, n=1, size=4 * MiB, direct=direct)
        r = engine.run(
            PhaseSpec("c-rand", "randread", files, jobs=2, block_size=4 * KiB, size=MiB,
                      direct=direct, mode="shared", seed=5),
            self.ctx(run_dir),
        )  # fmt: skip
        self.check_consistent(r, 2 * MiB, 4 * KiB)  # each of 2 workers moves 1 MiB
        assert r.op == "randread"

    def test_time_based_phase_stops_near_its_time(self, engine, run_dir):
        files, _ = self.write_files(engine, run_dir, n=1, size=MiB)
        t0 = time.monotonic()
        r = engine.run(
            PhaseSpec("c-timed", "read", files, block_size=64 * KiB, time_s=0.5),
            self.ctx(run_dir),
        )
        wall = time.monotonic() - t0
        assert r.status == "ok"
        assert r.bytes > MiB  # it went round the 1 MiB file more than once
        assert 0.4 <= r.elapsed_s <= 2.0
        assert wall < 10  # generous: a loaded 2-core machine, a tool's start-up
        assert r.histogram["count"] == r.ops

    def test_rate_limit_is_respected(self, engine, run_dir):
        rate = 4 * MiB  # per worker
        files = (FileSpec("c-rate.dat", 2 * MiB),)
        r = engine.run(
            PhaseSpec("c-rate", "write", files, block_size=256 * KiB, rate_bps=rate),
            self.ctx(run_dir),
        )
        assert r.bytes == 2 * MiB
        assert r.bandwidth_bps <= rate * 1.5  # loose: the first block goes at once
        assert r.elapsed_s >= 0.25  # unthrottled this takes milliseconds

    def test_stop_flag_mid_phase_returns_partial(self, engine, run_dir):
        files, _ = self.write_files(engine, run_dir, n=2, size=MiB)
        stop = StopFlag()
        # The stop comes 0.5 s after the engine first reports I/O done (a tool's start-up on a
        # loaded machine can take longer than any fixed delay), or after 20 s at the latest.
        timer = threading.Timer(20.0, stop.set)
        timer.start()
        ctx = dataclasses.replace(
            self.ctx(run_dir, stop), progress=_StopAfterFirstIO(stop, after_s=0.5)
        )
        t0 = time.monotonic()
        try:
            r = engine.run(
                PhaseSpec("c-stopped", "read", files, jobs=2, block_size=64 * KiB, time_s=60),
                ctx,
            )
        finally:
            timer.cancel()
        assert time.monotonic() - t0 < 40  # far less than the 60 s asked for
        assert r.status == "partial"
        assert r.ops > 0 and r.histogram["count"] == r.ops

    def test_unwritable_path_is_an_engine_error_with_partial(self, engine, run_dir):
        bad = self.unwritable(run_dir)
        with pytest.raises(EngineError) as ei:
            engine.run(
                PhaseSpec("c-bad", "write", (bad,), block_size=MiB, fsync="end"),
                self.ctx(run_dir),
            )
        err = ei.value
        assert int(err.exit_status) == 4
        partial = getattr(err, "partial", None)
        assert isinstance(partial, PhaseResult)
        assert partial.name == "c-bad"
        assert partial.status in ("failed", "partial")
        assert partial.error
        assert "c-bad" in err.one_line()

    # -- what engines share (engines/worker.py) ----------------------------------------------
    def test_why_not_is_none_or_one_reason(self, engine, run_dir):
        """``why_not`` is on every engine: None for a phase it runs, a reason otherwise."""
        files = (FileSpec("w.dat", MiB),)
        assert engine.why_not(PhaseSpec("w", "write", files, block_size=64 * KiB)) is None
        why = engine.why_not(PhaseSpec("w", "read", files, block_size=0, latency_per="file"))
        assert why is None or (isinstance(why, str) and why)

    def test_each_worker_moves_its_size(self, engine, run_dir):
        """``size``: the bytes each worker moves, cut mid-file, over files of every worker."""
        files, _ = self.write_files(engine, run_dir, n=2, size=2 * MiB)
        r = engine.run(
            PhaseSpec("c-size", "read", files, jobs=2, block_size=256 * KiB, size=MiB),
            self.ctx(run_dir),
        )
        self.check_consistent(r, 2 * MiB, 256 * KiB)

    def test_whole_file_latency_is_one_op_per_file(self, engine, run_dir):
        files, _ = self.write_files(engine, run_dir, n=3, size=MiB)
        phase = PhaseSpec(
            "c-files", "read", files, jobs=2, block_size=0, latency_per="file", order="shuffled"
        )
        if engine.why_not(phase):
            pytest.skip(engine.why_not(phase))
        r = engine.run(phase, self.ctx(run_dir))
        assert r.status == "ok" and r.files == 3
        assert (r.ops, r.bytes) == (3, 3 * MiB)
        assert r.histogram["count"] == 3

    def test_progress_sees_start_the_final_totals_and_close(self, engine, run_dir):
        files, _ = self.write_files(engine, run_dir, n=2, size=MiB)
        seen: list = []

        class Watch(Progress):
            def start(self, name, total_bytes, total_ops):
                seen.append(("start", name, total_bytes))

            def update(self, done_bytes, done_ops):
                seen.append(("update", done_bytes, done_ops))

            def close(self):
                seen.append(("close",))

        ctx = dataclasses.replace(self.ctx(run_dir), progress=Watch())
        r = engine.run(PhaseSpec("c-prog", "read", files, jobs=2, block_size=256 * KiB), ctx)
        assert seen[0] == ("start", "c-prog", 2 * MiB)
        assert seen[-1] == ("close",)
        updates = [s for s in seen if s[0] == "update"]
        assert r.bytes == 2 * MiB
        if self.progress_totals_exact:
            assert updates and updates[-1][1:] == (r.bytes, r.ops)
            assert [u[1] for u in updates] == sorted(u[1] for u in updates)  # running totals
