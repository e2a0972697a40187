"""The coordinator: what a run asks of the other clients it runs with.

Every command that runs I/O holds one. A single client holds :class:`SingleProcess` (rank 0 of
1: barriers return at once, a gather is a list of one, a broadcast returns what it was given,
the result is this client's own); ``torchrun`` ranks hold ``distributed.TorchCoordinator``
(a gloo group, heartbeats, clock offsets, the ranks' aggregate). Code that runs a workload
calls the same methods either way and never asks which one it holds.

Base layer: imports only ``errors``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from .errors import UsageError

if TYPE_CHECKING:  # annotations only: these layers sit above this one
    from ..engines.base import PhaseSpec
    from ..result.file import PhaseResult
    from ..target.model import Target

T = TypeVar("T")


@runtime_checkable
class Coordinator(Protocol):
    """The interface; see the module docstring. Collectives are called by every rank."""

    rank: int
    world: int
    local_rank: int
    hostname: str
    hosts: list[str]
    #: every rank sees the run directory of the rank it reads back (set by ``attach``)
    shared_target: bool

    @property
    def ranks_per_host(self) -> int: ...

    def clock_offset(self) -> float:
        """This rank's clock minus rank 0's, in seconds."""
        ...

    # -- the run's identity and directories ---------------------------------------------------
    def shared_run_id(self, run_id: str) -> str: ...
    def run_dir_id(self, run_id: str) -> str: ...
    def agreed(self, check: Callable[[], T]) -> T: ...
    def attach(self, target: Target) -> None: ...

    # -- phases ---------------------------------------------------------------------------------
    def before_phase(self, spec: PhaseSpec | None) -> None: ...
    def after_phase(self, spec: PhaseSpec | None, res: PhaseResult) -> PhaseResult: ...
    def read_shift(self, shared: bool | None = None) -> int: ...
    def read_prefix(self, src: int) -> str: ...

    # -- collectives of small objects ---------------------------------------------------------
    def barrier(self) -> None: ...
    def all_gather_object(self, obj: Any) -> list[Any]: ...
    def broadcast_object(self, obj: Any, src: int = 0) -> Any: ...
    def any_stopping(self, stopping: bool) -> bool: ...

    # -- failure ---------------------------------------------------------------------------------
    def peer_failure(self) -> str | None: ...
    def remove_peer_run_dirs(self) -> None: ...
    def abandon(self, reason: str) -> None: ...
    def close(self, restore_signals: bool = True) -> None: ...


class SingleProcess:
    """The coordinator of a run with one client: rank 0 of 1, every collective trivial."""

    rank = 0
    world = 1
    local_rank = 0
    ranks_per_host = 1

    def __init__(self, hostname: str | None = None):
        import socket

        self.hostname = hostname or socket.gethostname()
        self.hosts = [self.hostname]
        # one client reads back its own files; "shared" so that nothing warns about peers
        self.shared_target = True

    def clock_offset(self) -> float:
        return 0.0

    def shared_run_id(self, run_id: str) -> str:
        return run_id

    def run_dir_id(self, run_id: str) -> str:
        """The run directory is ``TARGET/.iobench-<run_id>`` (no rank suffix)."""
        return run_id

    def agreed(self, check: Callable[[], T]) -> T:
        return check()

    def attach(self, target: Target) -> None:
        pass

    def before_phase(self, spec: PhaseSpec | None) -> None:
        pass

    def after_phase(self, spec: PhaseSpec | None, res: PhaseResult) -> PhaseResult:
        return res

    def read_shift(self, shared: bool | None = None) -> int:
        return 0

    def read_prefix(self, src: int) -> str:
        return ""

    def barrier(self) -> None:
        pass

    def all_gather_object(self, obj: Any) -> list[Any]:
        return [obj]

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        if src != 0:
            raise ValueError(f"broadcast from rank {src} of a single client")
        return obj

    def any_stopping(self, stopping: bool) -> bool:
        return bool(stopping)

    def peer_failure(self) -> str | None:
        return None

    def remove_peer_run_dirs(self) -> None:
        pass

    def abandon(self, reason: str) -> None:
        pass

    def close(self, restore_signals: bool = True) -> None:
        pass


def agree_on(coord: Coordinator, check: Callable[[], T]) -> T:
    """``check()`` on every rank, each raising when any rank's check refused (UsageError).

    The helper the coordinators' ``agreed`` share: ``agree`` is the one collective.
    """
    error: UsageError | None = None
    value = None
    try:
        value = check()
    except UsageError as e:
        error = e
    refused = coord.all_gather_object(None if error is None else (error.message, error.hint))
    if error is not None:
        raise error
    for k, r in enumerate(refused):
        if r is not None:
            raise UsageError(f"rank {k}: {r[0]}", hint=r[1])
    return value  # type: ignore[return-value]
