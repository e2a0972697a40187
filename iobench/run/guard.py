"""What guards one run session, owned by it: its stop signals and its I/O watchdog.

``run_session`` makes one :class:`RunGuard` per session (``session.guard``) from the
command's :class:`StallSetting`; nothing about a run's guarding lives in module state. The
guard routes stop signals to the session's stop flag (``signals``, a SignalGuard) and, when
the command armed it, runs the session's :class:`~iobench.run.stall.Watchdog`: the phases and
steps the runner and the loader watch (``watching``), the progress objects the engines
report through (``watched``), a step's own heartbeat (``tick``) and the workload's
``stall_timeout`` (``set_spec_timeout``) all go to this session's watchdog, never to
another session's. A guard that is not armed watches nothing and costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..engines.base import Progress
from ..target.signals import SignalGuard, StopFlag
from . import supervisor
from .stall import DEFAULT_STALL_S, Watchdog, WatchedProgress


@dataclass(frozen=True)
class StallSetting:
    """The command's choice for the I/O watchdog. ``armed``: the CLI arms it for every run
    (a library caller, ``iobench.api``, opts in); ``timeout_s``: ``--stall-timeout`` (None:
    the workload's ``stall_timeout``, else ``DEFAULT_STALL_S``; 0: off)."""

    armed: bool = False
    timeout_s: float | None = None

    def timeout_for(self, spec_value: float | None) -> float:
        """The stall timeout in force: the command line's, else the workload's, else the
        default."""
        if self.timeout_s is not None:
            return float(self.timeout_s)
        return DEFAULT_STALL_S if spec_value is None else float(spec_value)


UNARMED = StallSetting()


class RunGuard:
    """One run session's guard: ``with guard:`` routes stop signals to ``stop`` and, when
    armed, starts the watchdog (a supervising parent first, for a client that can block in
    the kernel); leaving it stops the watchdog and restores the signal handlers."""

    def __init__(self, session: Any, setting: StallSetting = UNARMED, stop: StopFlag | None = None):
        self.session = session
        self.setting = setting
        self.signals = SignalGuard(stop if stop is not None else session.stop)
        self.dog: Watchdog | None = None

    def __enter__(self) -> RunGuard:
        self.signals.__enter__()
        try:
            if self.setting.armed:
                supervisor.split_for(self.session.target)
                self.dog = Watchdog(self.session, self.setting.timeout_for(None))
        except BaseException:
            self.signals.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.dog is not None:
                self.dog.close()
                self.dog = None
        finally:
            self.signals.__exit__(*exc)

    # -- what the runner and the loader report -----------------------------------------------
    @contextmanager
    def watching(
        self,
        spec: Any,
        name: str | None = None,
        detail: Callable[[], str] | None = None,
        moving: Callable[[], int] | None = None,
    ) -> Iterator[None]:
        """Watch one phase (a PhaseSpec) from its cache drop to its layout query, or one step
        (``name``: creating directories, the loader's loop), whatever its progress reports in
        between. ``detail``: what the step is blocked on, said in the line when it gives up;
        ``moving``: a count that changes while the step makes progress (beside ``tick``)."""
        dog = self.dog
        if dog is None:
            yield
            return
        if spec is not None:
            dog.spec = spec
        dog.started(spec.name if spec is not None else str(name))
        dog.held += 1
        old = dog.detail, dog.moving
        dog.detail, dog.moving, dog.moved_count = detail or old[0], moving or old[1], None
        try:
            yield
        finally:
            dog.detail, dog.moving = old
            dog.held -= 1
            dog.ended()

    def tick(self) -> None:
        """Progress in the step being watched (the loader received a batch): no stall."""
        if self.dog is not None:
            self.dog.beat()

    def watched(self, factory: Callable[[], Progress]) -> Callable[[], Progress]:
        """``factory``, its progress objects watched by this session's watchdog (when it has
        one at the time each is made)."""

        def make() -> Progress:
            p = factory()
            return WatchedProgress(p, self.dog) if self.dog is not None else p

        return make

    def set_spec_timeout(self, spec_value: float | None) -> None:
        """The workload's ``stall_timeout`` (when the command line did not set one)."""
        if self.dog is not None:
            self.dog.timeout_s = self.setting.timeout_for(spec_value)


class Unguarded(RunGuard):
    """No session, no signals, no watchdog: a PhaseRunner built on its own (tests, tools)."""

    def __init__(self) -> None:
        self.session = None
        self.setting = UNARMED
        self.dog = None

    def __enter__(self) -> RunGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


#: The guard of nothing (stateless): what code run outside a session watches with.
UNGUARDED = Unguarded()
