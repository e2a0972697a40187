"""--live-csv: rows while the run goes (elbencho's --livecsv), checked before anything runs."""

from __future__ import annotations

import csv
import os

import pytest
from conftest import SMALL

from iobench.cli.livecsv import LIVE_COLUMNS, LiveCsv, live_row
from iobench.engines.base import Progress


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _Recorder(Progress):
    def __init__(self):
        self.calls = []

    def start(self, name, total_bytes, total_ops):
        self.calls.append(("start", name))

    def update(self, done_bytes, done_ops):
        self.calls.append(("update", done_bytes, done_ops))

    def close(self):
        self.calls.append(("close",))


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_live_row_rates_over_the_interval():
    assert live_row(3.0, "seq-read", (3 << 20, 30), (1.0, 1 << 20, 10)) == [
        "3.000", "seq-read", str(3 << 20), "30", "2.000", f"{(2 << 20) / 2:.1f}", "10.0",
    ]  # fmt: skip
    assert live_row(1.0, "p", (5, 1), (1.0, 0, 0))[-2:] == ["", ""]  # no time: no rate


def test_rows_every_interval_and_at_the_end_of_each_phase(tmp_path):
    clock = _Clock()
    live = LiveCsv(str(tmp_path / "live.csv"), interval_s=1.0, clock=clock)
    inner = _Recorder()
    p = live.wrap(inner)
    p.start("seq-write", 100, None)
    for k in range(1, 6):  # 0.5 s apart: a row every second
        clock.t += 0.5
        p.update(10 * k, k)
    clock.t += 0.2
    p.update(60, 6)
    p.close()
    p = live.wrap(_Recorder())
    p.start("seq-read", 60, None)
    clock.t += 0.1
    p.update(60, 6)
    p.close()
    live.close()
    rows = _rows(tmp_path / "live.csv")
    assert list(rows[0]) == list(LIVE_COLUMNS)
    assert [(r["phase"], r["time_s"], r["bytes"]) for r in rows] == [
        ("seq-write", "1.000", "20"),
        ("seq-write", "2.000", "40"),
        ("seq-write", "2.700", "60"),  # the phase's last totals
        ("seq-read", "2.800", "60"),
    ]
    assert rows[1]["bandwidth_bps"] == "20.0" and rows[2]["interval_s"] == "0.700"
    assert inner.calls[0] == ("start", "seq-write") and inner.calls[-1] == ("close",)


def test_a_failing_write_stops_the_rows_not_the_caller(tmp_path, monkeypatch):
    live = LiveCsv(str(tmp_path / "live.csv"), interval_s=0.0)
    p = live.wrap(Progress())
    p.start("x", None, None)
    p.update(1, 1)
    monkeypatch.setattr(live._file, "write", lambda *_: (_ for _ in ()).throw(OSError(28, "No space left on device")))  # fmt: skip
    p.update(2, 2)  # no exception
    live.close()
    assert live.error == "No space left on device"


def test_run_writes_live_rows_for_every_phase(cli, planted, tmp_path):
    path = tmp_path / "live.csv"
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"],
            "--output", tmp_path / "out", "--live-csv", path, "-q")  # fmt: skip
    assert r.code == 0, r.err
    rows = _rows(path)
    assert {r["phase"] for r in rows} == {"seq-write", "seq-read"}
    last = {r["phase"]: int(r["bytes"]) for r in rows}
    assert last == {"seq-write": 8 << 20, "seq-read": 8 << 20}  # 4 MiB x 2 jobs each


@pytest.mark.parametrize("kind", ["symlink", "directory"])
def test_a_bad_live_csv_path_is_refused_before_anything_runs(cli, planted, tmp_path, kind):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    bad = tmp_path / "live.csv"
    if kind == "symlink":
        os.symlink(victim, bad)
    else:
        bad.mkdir()
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"],
            "--output", tmp_path / "out", "--live-csv", bad)  # fmt: skip
    assert r.code == 2 and "--live-csv" in r.err and len(r.err.strip().splitlines()) == 1
    assert victim.read_text() == "keep" and not (tmp_path / "out").exists()


def test_bad_input_creates_no_live_csv(cli, planted, tmp_path):
    path = tmp_path / "live.csv"
    r = cli("run", "sequential-write", planted.path, "--set", "block_size=3x",
            "--live-csv", path)  # fmt: skip
    assert r.code == 2
    assert not path.exists()


class _Totals(Progress):
    """Every (bytes, ops) an engine reported."""

    def __init__(self):
        self.seen: list[tuple[int, int]] = []

    def update(self, done_bytes, done_ops):
        self.seen.append((done_bytes, done_ops))


@pytest.mark.parametrize("op", ["write", "read"])
def test_engines_count_operations_as_they_count_bytes(tmp_path, op):
    """One large file moved block by block: every report's ops follow its bytes (the live
    CSV wrote ops=0 while bytes grew, then the whole file's ops in one row)."""
    from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
    from iobench.engines.posix import PosixEngine
    from iobench.target import StopFlag

    bs, size = 4096, 16 << 20
    files = (FileSpec("one.dat", size),)
    if op == "read":
        PosixEngine().run(PhaseSpec("fill", "write", files, block_size=1 << 20),
                          EngineContext(str(tmp_path), StopFlag()))  # fmt: skip
    seen = _Totals()
    # paced, so the engine's progress thread reports many times within the one file
    phase = PhaseSpec("p", op, files, block_size=bs, rate_bps=40 << 20)
    res = PosixEngine().run(phase, EngineContext(str(tmp_path), StopFlag(), progress=seen))
    assert res.bytes == size and res.ops == size // bs
    mid = [(b, o) for b, o in seen.seen if 0 < b < size]
    assert len(mid) >= 3, seen.seen
    for b, o in mid:  # the two totals are read a moment apart: a few blocks either way
        assert abs(o - b // bs) <= 64, (b, o)


def test_fio_progress_counts_a_block_an_operation():
    from iobench.engines.fio import EtaProgress

    seen = _Totals()
    eta = EtaProgress(seen, 1 << 20, block_size=4096)
    eta.feed("Jobs: 1 (f=1): [R(1)][25.0%][r=1MiB/s][r=256 IOPS][eta 00m:03s]\r")
    assert seen.seen == [(1 << 18, 64)]


def test_the_fsspec_engine_counts_operations_as_it_counts_bytes():
    import uuid

    import fsspec

    from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
    from iobench.engines.fsspec import FsspecEngine
    from iobench.target import StopFlag

    fs, path = fsspec.filesystem("memory"), f"/iobench-live-{uuid.uuid4().hex[:8]}"
    fs.makedirs(path, exist_ok=True)
    try:
        bs, size = 4096, 8 << 20
        seen = _Totals()
        phase = PhaseSpec("w", "write", (FileSpec("one.dat", size),), block_size=bs,
                          rate_bps=20 << 20)  # fmt: skip
        ctx = EngineContext(run_dir=f"memory://{path}", stop=StopFlag(), fs_type="memory",
                            progress=seen)  # fmt: skip
        res = FsspecEngine().run(phase, ctx)
        assert res.bytes == size and res.ops == size // bs
        mid = [(b, o) for b, o in seen.seen if 0 < b < size]
        assert len(mid) >= 3, seen.seen
        assert all(abs(o - b // bs) <= 64 for b, o in mid), mid
    finally:
        fs.rm(path, recursive=True)
