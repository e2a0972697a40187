"""Many clients under torchrun: the coordinator, its communicator, the ranks' aggregate.

``group`` (TorchCoordinator: the run's identity, barriers around phases, gathers, failure
handling; ``coordinator_from_env``; read-back from another rank; the loader's step barrier) is
built on ``comm`` (the gloo group's collectives, the job's store with bounded calls and
heartbeats, torchrun's environment); ``aggregate`` is pure (every rank's PhaseResult into one).
The interface and the single-client coordinator are ``iobench.core.coordinator``.
"""

from __future__ import annotations

from .aggregate import MAX_START_SKEW_SHARE, STRAGGLER_RATIO, aggregate_ranks, start_skew
from .comm import (
    DEFAULT_TIMEOUT_S,
    ENV_TIMEOUT,
    HEARTBEAT_S,
    Comm,
    PeerWatch,
    TorchComm,
    dist_timeout,
    launched_world,
)
from .group import (
    READ_OPS,
    WATCHED,
    StepBarrier,
    TorchCoordinator,
    coordinator_from_env,
    is_lead_rank,
    peer_files,
    read_source,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ENV_TIMEOUT",
    "HEARTBEAT_S",
    "MAX_START_SKEW_SHARE",
    "READ_OPS",
    "STRAGGLER_RATIO",
    "WATCHED",
    "Comm",
    "PeerWatch",
    "StepBarrier",
    "TorchComm",
    "TorchCoordinator",
    "aggregate_ranks",
    "coordinator_from_env",
    "dist_timeout",
    "is_lead_rank",
    "launched_world",
    "peer_files",
    "read_source",
    "start_skew",
]
