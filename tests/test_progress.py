"""Progress: binary units on the bar, time left on time-based phases, fio's status lines."""

from __future__ import annotations

import io
import re

import pytest

from iobench.cli.progress import TqdmProgress, timed_postfix
from iobench.engines import fio
from iobench.engines.base import Progress

GiB = 1 << 30


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def bar_out():
    return Terminal()


def test_no_bar_off_a_terminal():
    assert not TqdmProgress(file=io.StringIO()).enabled
    assert not TqdmProgress(enabled=False, file=Terminal()).enabled


def _last_frame(buf: io.StringIO) -> str:
    frames = [f for f in re.split(r"[\r\n]", buf.getvalue()) if f.strip()]
    return frames[-1]


def test_sized_bar_labels_binary_units(bar_out):
    p = TqdmProgress(clock=Clock(), file=bar_out)
    p.start("seq-read", 4 * GiB, None)
    p.update(2 * GiB, 0)
    p.bar.refresh()
    frame = _last_frame(bar_out)
    assert "2.00GiB/4.00GiB" in frame and "GB" not in frame.replace("GiB", "")
    p.close()


def test_time_based_bar_shows_time_left_and_what_moved(bar_out):
    clock = Clock()
    p = TqdmProgress(clock=clock, file=bar_out)
    p.start("seq-read", None, None)
    p.set_duration(60.0)
    clock.t += 15.0
    p.update(3 * GiB, 0)
    p.bar.refresh()
    frame = _last_frame(bar_out)
    assert frame.startswith("seq-read:  25%|")
    assert "<" in frame and "3.0 GiB at 204.8 MiB/s" in frame
    assert p.bar.n == 15.0 and p.bar.total == 60.0
    clock.t += 100.0  # past the end (stopping takes a moment): the bar stays full
    p.update(4 * GiB, 0)
    assert p.bar.n == 60.0
    p.close()


def test_timed_postfix():
    assert timed_postfix(0, 1.0) == ""
    assert timed_postfix(GiB, 2.0) == "1.0 GiB at 512.0 MiB/s"


def test_base_progress_ignores_a_duration():
    Progress().set_duration(5.0)  # engines call it on any Progress


# --- fio's status lines ----------------------------------------------------------------------

LINE = "Jobs: 1 (f=1), 0B/s-400MiB/s: [W(1)][42.9%][w=281MiB/s][w=280 IOPS][eta 00m:04s]"
MIXED = "Jobs: 4 (f=4): [m(4)][12.5%][r=1.5GiB/s,w=512KiB/s][r=1536,w=128 IOPS][eta 01m:10s]"


def test_parse_eta_takes_the_last_line_and_ignores_the_rate_limit():
    assert fio.parse_eta("Jobs: 1 (f=1), 0B/s-400MiB/s\r") is None
    assert fio.parse_eta(LINE) == (42.9, 281 * (1 << 20))
    assert fio.parse_eta(LINE + "\r" + MIXED + " \r") == (12.5, 1.5 * GiB + 512 * 1024)


def test_strip_eta_keeps_only_fio_messages():
    assert fio.strip_eta(LINE + "\r" + MIXED + "\nfio: pid=1, err=5/file:io_u.c\n") == (
        "fio: pid=1, err=5/file:io_u.c"
    )


class Seen(Progress):
    def __init__(self):
        self.done: list[int] = []

    def update(self, done_bytes: int, done_ops: int) -> None:
        self.done.append(done_bytes)


def test_eta_progress_sized_phase_moves_forward_only():
    seen = Seen()
    eta = fio.EtaProgress(seen, 1000)
    eta.feed("Jobs: 1 (f=1): [W(1)][42.9%][w=1B/s][eta 00m:04s]\r")
    eta.feed("Jobs: 1 (f=1): [W(1)][37.5%][w=1B/s][eta 00m:05s]\r")  # fio's estimate dipped
    eta.feed("Jobs: 1 (f=1): [W(1)][100.0%][w=1B/s][eta 00m:00s]\r")
    assert seen.done == [429, 1000]


def test_eta_progress_time_based_phase_sums_the_rates():
    seen, clock = Seen(), Clock()
    eta = fio.EtaProgress(seen, None, clock=clock)
    clock.t += 1.0
    eta.feed("Jobs: 1 (f=1): [R(1)][10.0%][r=100MiB/s][eta 00m:09s]\n")
    clock.t += 2.0
    eta.feed("Jobs: 1 (f=1): [R(1)][30.0%][r=50MiB/s][eta 00m:07s]\n")
    # 100 MiB/s over the first second since fio started, then 50 MiB/s over 2 s
    assert seen.done == [100 * (1 << 20), 200 * (1 << 20)]


def test_eta_progress_before_fio_has_an_estimate():
    assert fio.parse_eta("Jobs: 1 (f=1): [W(1)][-.-%][w=16.0MiB/s][w=16 IOPS][eta 00m:00s]") == (
        None,
        16 << 20,
    )
    seen, clock = Seen(), Clock()
    eta = fio.EtaProgress(seen, 20 << 20, clock=clock)
    clock.t += 1.0
    eta.feed("Jobs: 1 (f=1): [W(1)][-.-%][w=16MiB/s][eta 00m:00s]\r")
    clock.t += 1.0
    eta.feed("Jobs: 1 (f=1): [W(1)][-.-%][w=16MiB/s][eta 00m:00s]\r")  # capped at the size
    assert seen.done == [16 << 20, 20 << 20]


def test_eta_progress_reads_with_pread(tmp_path):
    seen = Seen()
    path = tmp_path / "stdout"
    with open(path, "w+b") as f:
        f.write(b"Jobs: 1 (f=1): [W(1)][50.0%][w=1MiB/s][eta 00m:01s]\r")
        f.flush()
        eta = fio.EtaProgress(seen, 200)
        eta.poll(f.fileno())
        assert f.tell() == len(b"Jobs: 1 (f=1): [W(1)][50.0%][w=1MiB/s][eta 00m:01s]\r")
        f.write(b"Jobs: 1 (f=1): [W(1)][75.0%][w=1MiB/s][eta 00m:01s]\r")
        f.flush()
        eta.poll(f.fileno())
    assert seen.done == [100, 150]


@pytest.mark.skipif(not fio.shutil.which("fio"), reason="fio is not installed")
def test_fio_phase_feeds_the_progress(tmp_path):
    """A real fio write reports progress while it runs (the bar no longer sits at 0 B)."""
    from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
    from iobench.target import StopFlag

    seen = Seen()
    files = (FileSpec("w0.dat", 64 << 20),)
    # 64 MiB at 16 MiB/s: about 4 s. fio prints a status line once a second, with figures once
    # it has them (after 2-3 s here); iobench reads them every 0.2 s and once more at the end
    phase = PhaseSpec("w", "write", files, block_size=1 << 20, rate_bps=16 << 20)
    ctx = EngineContext(str(tmp_path), StopFlag(), progress=seen)
    res = fio.FioEngine().run(phase, ctx)
    assert res.bytes == 64 << 20
    assert seen.done and 0 < seen.done[0] <= 64 << 20  # fed from fio's own status lines
    assert seen.done == sorted(seen.done) and seen.done[-1] <= 64 << 20
