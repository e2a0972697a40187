"""Signals during a run: the stop flag, the guard that turns the terminating signals into a
stop (a second one interrupts), and what forked workers do with them."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..core.errors import Interrupted

# The signals that end a run the way SIGINT/SIGTERM do: a dropped ssh session (SIGHUP), the
# terminal's quit key (SIGQUIT), a batch system's warning before its time limit (Slurm --signal: SIGUSR1/SIGUSR2),
# an alarm (SIGALRM) and a CPU-time limit reached (ulimit -t: SIGXCPU, SIGKILL at the hard
# limit). Left at their defaults they would kill the process with no result and its run
# directory (and any fio child) left behind.
STOP_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
                 "SIGXCPU")
    if hasattr(signal, name)
)  # fmt: skip
# A file-size limit (ulimit -f) raises SIGXFSZ, whose default kills the process; ignored, the
# write fails with EFBIG instead, and the phase fails naming the file and the limit.
IGNORED_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, n) for n in ("SIGXFSZ",) if hasattr(signal, n)
)


class StopFlag:
    """Set by a stop signal (SIGINT, SIGTERM, SIGHUP, ...); workers poll it, the main thread
    raises Interrupted. ``suspended`` counts SIGCONTs: the process was stopped (Ctrl-Z,
    SIGSTOP) and resumed, so a phase in flight then measured the pause too."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None
        self.suspended = 0

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, signum: int | None = None) -> None:
        if self.signal is None:
            self.signal = signum
        self.event.set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking at once when the flag is set; True if it is."""
        return self.event.wait(max(0.0, seconds))

    def check(self) -> None:
        if self.event.is_set():
            raise Interrupted(f"interrupted by {_signame(self.signal)}")


def _signame(signum: int | None) -> str:
    if signum is None:
        return "request"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def worker_signals() -> None:
    """In a forked worker (posix engine, DataLoader): the stop signals a terminal or a
    session sends to the whole process group are the parent's to handle (it stops the
    workers through shared state); SIGTERM keeps its default, so a worker can still be
    ended on its own; SIGXFSZ stays ignored (a write over the limit fails with EFBIG)."""
    for s in STOP_SIGNALS:
        if s != signal.SIGTERM:
            signal.signal(s, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for s in IGNORED_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if hasattr(signal, "SIGCONT"):
        signal.signal(signal.SIGCONT, signal.SIG_DFL)


class SignalGuard:
    """Route the stop signals (``STOP_SIGNALS``) to a StopFlag for a block.

    The first signal only sets the flag: workers poll it and stop, the phase in flight keeps
    what it measured (marked partial) and the main thread raises Interrupted at its next
    check. A second signal raises Interrupted in the main thread at once. SIGXFSZ is ignored
    (EFBIG names the file instead) and SIGCONT is counted (``StopFlag.suspended``).
    """

    def __init__(self, stop: StopFlag, on_signal: Callable[[int], None] | None = None):
        self.stop = stop
        self.on_signal = on_signal
        self._old: dict[int, Any] = {}
        self._deferring = 0
        self._raising = 0

    def _handler(self, signum: int, frame: Any) -> None:
        again = self.stop.is_set()
        self.stop.set(signum)
        if self.on_signal:
            self.on_signal(signum)
        if (again or self._raising) and not self._deferring:
            raise Interrupted(f"interrupted by {_signame(signum)}")

    @contextmanager
    def raising(self) -> Iterator[None]:
        """Inside this block the first signal raises Interrupted at once, as a second one
        does: a wait that cannot poll the flag (the DataLoader's wait for a batch from a
        worker stuck in a read or the user's transform) would otherwise never see it."""
        self._raising += 1
        try:
            yield
        finally:
            self._raising -= 1

    def _resumed(self, signum: int, frame: Any) -> None:
        self.stop.suspended += 1

    def defer(self) -> None:
        """From now on a signal only sets the flag, never raises: what runs next (removing the
        run directory, saving the result) must not be cut half-way by a second Ctrl-C."""
        self._deferring += 1

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals only set the flag inside this block (e.g. between creating the run
        directory and recording that we did)."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                try:
                    self._old[s] = signal.signal(s, self._handler)
                except (OSError, ValueError):  # pragma: no cover - not settable here
                    pass
            for s in IGNORED_SIGNALS:
                self._old[s] = signal.signal(s, signal.SIG_IGN)
            if hasattr(signal, "SIGCONT"):
                self._old[signal.SIGCONT] = signal.signal(signal.SIGCONT, self._resumed)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()
