"""A tqdm progress bar per phase, behind the engines' Progress interface."""

from __future__ import annotations

import sys
import time

from ..core.units import format_bytes, format_count, format_rate, format_seconds
from ..engines.base import Progress

# Binary prefixes with their labels (KiB, MiB, GiB), as every report prints them: tqdm's own
# "GB" with a 1024 divisor would be a GiB wearing the decimal label.
BYTES_BAR = {"unit": "iB", "unit_scale": True, "unit_divisor": 1024}
SIZED_FORMAT = (
    "{l_bar}{bar}| {n_fmt}{unit}/{total_fmt}{unit} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"
)
TIMED_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining}{postfix}"


def timed_postfix(done_bytes: int, elapsed_s: float) -> str:
    """What a time-based phase has moved so far: ``1.5 GiB at 312.4 MiB/s`` (tqdm adds the
    comma before it)."""
    if done_bytes <= 0 or elapsed_s <= 0:
        return ""
    return f"{format_bytes(done_bytes)} at {format_rate(done_bytes / elapsed_s)}"


class TqdmProgress(Progress):
    """One bar per phase on stderr; silent when stderr is not a terminal or --quiet.

    A phase with a size shows bytes done of the total; a time-based one (``set_duration``)
    shows the time elapsed and left, with the bytes moved and their rate beside it.
    """

    def __init__(self, enabled: bool = True, clock=time.monotonic, file=None):
        self.file = file if file is not None else sys.stderr
        self.enabled = enabled and self.file is not None and self.file.isatty()
        self.clock = clock
        self.bar = None
        self._last = 0
        self._name = ""
        self._t0: float | None = None  # set for a time-based phase

    def _new_bar(self, **kw):
        from tqdm import tqdm

        from ..core.redact import for_terminal  # a phase name may carry a path: escaped, masked

        return tqdm(
            desc=for_terminal(self._name), leave=False, file=self.file, dynamic_ncols=True, **kw
        )

    def start(self, name: str, total_bytes: int | None, total_ops: int | None) -> None:
        self._last, self._name, self._t0 = 0, name, None
        if not self.enabled:
            return
        sized = {"bar_format": SIZED_FORMAT} if total_bytes else {}
        self.bar = self._new_bar(total=total_bytes, **BYTES_BAR, **sized)

    def set_duration(self, seconds: float) -> None:
        self._t0 = self.clock()
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.close()
        self.bar = self._new_bar(total=float(seconds), bar_format=TIMED_FORMAT)

    def update(self, done_bytes: int, done_ops: int) -> None:
        if self.bar is None:
            return
        if self._t0 is not None:
            elapsed = self.clock() - self._t0
            step = min(elapsed, self.bar.total) - self.bar.n
            self.bar.set_postfix_str(timed_postfix(done_bytes, elapsed), refresh=False)
            if step > 0:
                self.bar.update(step)
            return
        if done_bytes > self._last:
            self.bar.update(done_bytes - self._last)
            self._last = done_bytes

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class PhaseLines(Progress):
    """One line per phase on stderr as it finishes, where no bar can be drawn (a pipe, a log
    file, CI): ``iobench: phase seq-write done: 496.0 MiB in 1.25 s (395.9 MiB/s)``. The
    figures are the progress reports' running totals over the phase's wall time, a sign of
    life; the report's figures come from the phase's result."""

    def __init__(self, clock=time.monotonic, file=None):
        self.file = file if file is not None else sys.stderr
        self.clock = clock
        self._name: str | None = None
        self._t0 = 0.0
        self._bytes = self._ops = 0

    def start(self, name: str, total_bytes: int | None, total_ops: int | None) -> None:
        self._name, self._t0, self._bytes, self._ops = name, self.clock(), 0, 0

    def update(self, done_bytes: int, done_ops: int) -> None:
        self._bytes, self._ops = max(self._bytes, done_bytes), max(self._ops, done_ops)

    def close(self) -> None:
        if self._name is None:
            return
        from ..core.redact import for_terminal  # a phase name may carry a path: escaped, masked

        took = self.clock() - self._t0
        if self._bytes:
            moved = format_bytes(self._bytes)
            rate = f" ({format_rate(self._bytes / took)})" if took > 0 else ""
        else:
            moved = f"{format_count(self._ops)} ops"
            rate = f" ({format_count(self._ops / took)} ops/s)" if took > 0 and self._ops else ""
        line = f"iobench: phase {for_terminal(self._name)} done: {moved} in {format_seconds(took)}"
        print(line + rate, file=self.file, flush=True)
        self._name = None
