"""``--live-csv FILE``: the running totals of every phase, one row a second while the run goes.

elbencho's ``--livecsv`` in iobench's terms: a file a user can ``tail -f`` or plot while a long
qualification runs. Each row holds the time since the run started, the phase, its bytes and
operations so far and the rates over the interval since the row before. The figures of record
stay those of result.json (``--series-csv`` writes its per-interval series after the run); these
rows are the engines' progress reports as they came.

The path is checked like every output before anything runs (a regular file, never through a
link); the file is created when the first phase starts (bad input writes nothing) and written in
place, line-buffered, as the run goes. A write that fails (a full disk) stops the rows, not
the run: ``error`` says why, and the command warns after the run.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import TextIO

from ..engines.base import Progress

LIVE_COLUMNS: tuple[str, ...] = (
    "time_s",
    "phase",
    "bytes",
    "ops",
    "interval_s",
    "bandwidth_bps",
    "iops",
)
DEFAULT_INTERVAL_S = 1.0


def live_row(
    time_s: float, phase: str, done: tuple[int, int], before: tuple[float, int, int]
) -> list[str]:
    """One CSV row: totals ``done`` (bytes, ops) at ``time_s``; rates since ``before``
    (time, bytes, ops) — empty where no time has passed."""
    t0, b0, o0 = before
    dt = time_s - t0
    bw = f"{(done[0] - b0) / dt:.1f}" if dt > 0 else ""
    iops = f"{(done[1] - o0) / dt:.1f}" if dt > 0 else ""
    return [f"{time_s:.3f}", phase, str(done[0]), str(done[1]), f"{dt:.3f}", bw, iops]


def _csv_line(cells: list[str]) -> str:
    from ..history.export import to_csv

    return to_csv([dict(zip(LIVE_COLUMNS, cells, strict=True))], LIVE_COLUMNS).split("\n", 1)[1]


class LiveCsv:
    """The open ``--live-csv`` file; ``wrap(progress)`` adds its rows to a phase's progress."""

    def __init__(
        self,
        path: str,
        interval_s: float = DEFAULT_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        from ..core.safeio import check_output_file as claim_output_file

        self.path = claim_output_file(path, option="--live-csv")
        self.interval_s = interval_s
        self.clock = clock
        self.t0 = clock()
        self.error: str | None = None
        self._lock = threading.Lock()
        self._file: TextIO | None = None
        self._closed = False

    def _open(self) -> TextIO:
        """Create the file (at the first phase) by the one output rule (``safeio.open_new``: a
        new file, O_EXCL|O_NOFOLLOW, renamed into place): a link, FIFO or device planted since
        the check is refused, not followed or opened."""
        from ..core.safeio import open_new

        fd = open_new(self.path)
        self._file = f = os.fdopen(fd, "w", buffering=1, encoding="utf-8", newline="")
        f.write(",".join(LIVE_COLUMNS) + "\n")
        return f

    def _write(self, text: str) -> None:
        with self._lock:
            if self.error is not None or self._closed:
                return
            try:
                f = self._file if self._file is not None else self._open()
                f.write(text)
            except (OSError, ValueError) as e:
                self.error = getattr(e, "strerror", None) or str(e)

    def row(self, phase: str, done: tuple[int, int], before: tuple[float, int, int]) -> float:
        """Write one row now; returns the row's time (since the run started)."""
        now = self.clock() - self.t0
        self._write(_csv_line(live_row(now, phase, done, before)))
        return now

    def wrap(self, inner: Progress) -> Progress:
        return _LiveProgress(self, inner)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._file is not None:
                try:
                    self._file.close()
                except OSError as e:
                    self.error = self.error or e.strerror
                self._file = None


class _LiveProgress(Progress):
    """A phase's progress that also writes a live row every ``interval_s`` and at its end."""

    def __init__(self, live: LiveCsv, inner: Progress):
        self.live, self.inner = live, inner
        self.name = ""
        self.last: tuple[float, int, int] = (0.0, 0, 0)
        self.done = (0, 0)

    def start(self, name: str, total_bytes: int | None, total_ops: int | None) -> None:
        self.inner.start(name, total_bytes, total_ops)
        self.name, self.done = name, (0, 0)
        self.last = (self.live.clock() - self.live.t0, 0, 0)

    def set_duration(self, seconds: float) -> None:
        self.inner.set_duration(seconds)

    def update(self, done_bytes: int, done_ops: int) -> None:
        self.inner.update(done_bytes, done_ops)
        self.done = (done_bytes, done_ops)
        if self.live.clock() - self.live.t0 - self.last[0] >= self.live.interval_s:
            self._row()

    def _row(self) -> None:
        t = self.live.row(self.name, self.done, self.last)
        self.last = (t, *self.done)

    def close(self) -> None:
        if self.name and self.done != self.last[1:]:
            self._row()  # the phase's last totals
        self.inner.close()
