"""torch.distributed coordination for multi-client runs (torchrun, gloo).

Launched by ``torchrun`` with WORLD_SIZE > 1, every rank runs the same workload against its
own run directory ``TARGET/.iobench-<run_id>-r<rank>`` (each rank owns its files; this works
on a shared filesystem, on node-local disks and on object stores alike). Its coordinator keeps
the ranks in step and turn their results into one, as IOR does:

- the run id is rank 0's, so every rank's run directory and the one result.json agree;
- clocks: rank 0 pings every rank at start (``offset = remote - (t0 + t1) / 2``, best of a few
  rounds by round-trip time) and every rank's start/end epochs are put on rank 0's clock;
- every phase starts after a barrier, and after it each rank's PhaseResult is gathered and
  aggregated on every rank: bytes and ops summed, bandwidth = all bytes over (last end - first
  start), a stonewall figure (when the first rank finished), histograms merged exactly,
  per-rank records and per-rank/per-host spread with the straggler named;
- read-back phases read the files another rank wrote (IOR ``-C``): rank r reads rank
  ``(r + ranks_per_host) % world`` (``(r + 1) % world`` on one host), where the target is shared;
- ranks may reach the end of a phase minutes apart: each beats a heartbeat into the job's
  store (PeerWatch) and the others wait for a straggler as long as it beats; a rank that dies
  or hangs (silent for ``IOBENCH_DIST_TIMEOUT``, default 60 s, noticed within twice that; a
  death on this host at once, a closed connection at the next collective) makes the survivors
  raise DistributedError (exit 4), keep their partial results and remove every rank's run
  directory they can see.

Other modules (the loader, qualify) use ``rank``, ``world``, ``local_rank``, ``hostname``,
``hosts``, ``barrier()``, ``all_gather_object()``, ``broadcast_object()``, ``agreed()`` (input
checks refused on any rank end every rank with exit 2) and ``StepBarrier`` (the loader's
per-step barrier, which stops every rank at the same step).
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.coordinator import Coordinator, SingleProcess, T, agree_on
from ..core.errors import DistributedError, Interrupted, UsageError
from ..result.file import PhaseResult
from .aggregate import aggregate_ranks
from .comm import (
    DEFAULT_TIMEOUT_S,
    Comm,
    PeerWatch,
    TorchComm,
    _alive,
    _why_collective_failed,
    dist_timeout,
    launched_world,
)

if TYPE_CHECKING:
    from ..engines.base import PhaseSpec
    from ..run.runner import PhaseRunner
    from ..target.model import Target

CLOCK_ROUNDS = 5
#: Collectives that wait for every rank with heartbeats first (ranks may reach them minutes
#: apart: the end of a phase); the loader's step barrier and the set-up ones do not.
WATCHED = ("barrier", "gather", "broadcast")
READ_OPS = ("read", "randread", "open_read", "stat")


def coordinator_from_env(environ: Mapping[str, str] | None = None) -> Coordinator:
    """The run's coordinator: a TorchCoordinator when launched by torchrun with WORLD_SIZE > 1
    (joins, or reuses, a gloo process group with the ``IOBENCH_DIST_TIMEOUT`` timeout), else
    a SingleProcess.
    """
    env = os.environ if environ is None else environ
    world = launched_world(env)
    if world <= 1:
        return SingleProcess()
    if environ is None and "torch" not in sys.modules:
        # torch's C++ log (TCPStore's retries: dozens of lines of frames when the store goes)
        # is read once, when torch loads: errors only, unless the user asked for more
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not env.get(k)]
    if missing:
        raise UsageError(
            f"WORLD_SIZE={world} but {', '.join(missing)} not set",
            hint="launch many clients with torchrun (see the README)",
        )
    return TorchCoordinator.join(dist_timeout(env), local_rank=int(env.get("LOCAL_RANK", "0")))


def is_lead_rank(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process prints and writes results: rank 0, or the only client."""
    env = os.environ if environ is None else environ
    return launched_world(env) <= 1 or env.get("RANK", "0") == "0"


# -- the coordinator -------------------------------------------------------------------------------


class TorchCoordinator:
    """The Coordinator of one of ``world`` torchrun ranks (a gloo group through ``comm``)."""

    def __init__(
        self,
        comm: Comm,
        *,
        local_rank: int = 0,
        hostname: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ):
        self.comm = comm
        self.rank = comm.rank
        self.world = comm.world
        self.local_rank = local_rank
        self.hostname = hostname or socket.gethostname()
        self.timeout_s = timeout_s
        self.hosts: list[str] = [self.hostname]
        self.pids: list[int] = []  # every rank's process id (setup), for peer_failure()
        self.clock_offsets: list[float] = [0.0] * self.world  # rank's clock - rank 0's clock
        self.clock_rtts: list[float] = [0.0] * self.world
        self.run_id: str | None = None
        self.target: Any = None
        self.shared_target = False  # every rank sees the run dir of the rank it reads back
        self.failed: str | None = None
        self.terminated: int | None = None
        self.watch: PeerWatch | None = None  # heartbeats through the job's store
        self._old_handler: Any = None

    # -- set-up ---------------------------------------------------------------------------
    @classmethod
    def join(cls, timeout_s: float, local_rank: int = 0) -> TorchCoordinator:
        """Join the torchrun process group (gloo), learn the hosts and the clock offsets."""
        comm = TorchComm.init(timeout_s)
        coord = cls(comm, local_rank=local_rank, timeout_s=timeout_s)
        coord.install_signal_handler()
        # at exit the SIGTERM torchrun sends when another rank failed must not turn this
        # rank's own status (4, or 130) into death by signal: keep deferring it
        atexit.register(coord.close, restore_signals=False)
        coord.setup()
        coord.watch = PeerWatch.start(comm.open_store, comm.rank, comm.world, timeout_s)
        if coord.watch is not None:
            coord.watch.hosts = list(coord.hosts)
        return coord

    def setup(self) -> None:
        """Collective: gather hostnames and pids, measure clock offsets. Every rank calls it
        once."""
        who = self._collective("host exchange", self.comm.all_gather, (self.hostname, os.getpid()))
        self.hosts = [str(h) for h, _ in who]
        self.pids = [int(p) for _, p in who]
        self.measure_clocks()

    def measure_clocks(self, rounds: int = CLOCK_ROUNDS) -> None:
        """Rank 0 pings each rank: offset = remote - (t0 + t1) / 2 from the round with min RTT."""
        offsets, rtts = self._collective("clock sync", self.comm.clock_offsets, rounds)
        self.clock_offsets = [float(x) for x in offsets]
        self.clock_rtts = [float(x) for x in rtts]

    def install_signal_handler(self) -> None:
        """Defer SIGTERM outside the runner's SignalGuard.

        torchrun SIGTERMs every rank when one dies; one that is already cleaning up must finish
        removing its run directory (and rank 0 writing result.json) rather than die half-way.
        The next barrier raises Interrupted when a deferred SIGTERM is pending.
        """
        if threading.current_thread() is not threading.main_thread():
            return
        self._old_handler = signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        self.terminated = signum

    @property
    def ranks_per_host(self) -> int:
        return max(1, self.hosts.count(self.hostname)) if len(self.hosts) == self.world else 1

    def clock_offset(self) -> float:
        return self.clock_offsets[self.rank]

    # -- the runner's interface -----------------------------------------------------------
    def shared_run_id(self, run_id: str) -> str:
        """Rank 0's run id, on every rank."""
        self.run_id = str(self.broadcast_object(run_id))
        return self.run_id

    def run_dir_id(self, run_id: str) -> str:
        """This rank's run-directory id: ``<run_id>-r<rank>`` (TARGET/.iobench-<that>)."""
        self.run_id = run_id
        return self.run_dir_name_id(self.rank)

    def run_dir_name_id(self, rank: int) -> str:
        return f"{self.run_id}-r{rank}"

    def attach(self, target: Target) -> None:
        """After every rank created its run directory: can each see the one it reads back?"""
        from ..target import run_dir_visible

        self.target = target
        self.barrier()  # every rank has created its run directory
        src = self.read_shift(shared=True)
        sees = run_dir_visible(target, self.run_dir_name_id(src))
        self.shared_target = all(self.all_gather_object(sees))

    def before_phase(self, spec: PhaseSpec | None) -> None:
        """Every rank starts the phase together."""
        self.barrier()

    def after_phase(self, spec: PhaseSpec | None, res: PhaseResult) -> PhaseResult:
        """Gather every rank's result; return the aggregate (the same on every rank)."""
        mine = {
            "rank": self.rank,
            "host": self.hostname,
            "clock_offset_s": self.clock_offset(),
            "read_from": self._read_source_of(spec),
            "result": res.to_dict(),
        }
        try:
            records = self.all_gather_object(mine)
        except DistributedError as e:
            res.status = "partial"
            res.error = f"only rank {self.rank}'s figures: {e.message}"
            res.extra["ranks_complete"] = False
            raise
        return aggregate_ranks(records)

    def remove_peer_run_dirs(self) -> None:
        """After a failure: remove the other ranks' run directories this rank can see (a rank
        that died leaves its own; one still alive fails at its next collective and cleans up).

        Names are exactly ``.iobench-<run_id>-r<k>`` of this run: nothing else is touched.
        """
        from ..target import remove_sibling_run_dir

        if self.run_id is None or self.target is None:
            return
        for k in range(self.world):
            if k != self.rank:
                remove_sibling_run_dir(self.target, self.run_dir_name_id(k))

    # -- read-back from another client ----------------------------------------------------
    def read_shift(self, shared: bool | None = None) -> int:
        """The rank whose files this rank reads back (its own when the target is not shared)."""
        if not (self.shared_target if shared is None else shared):
            return self.rank
        src = (self.rank + self.ranks_per_host) % self.world
        if src == self.rank:  # one host: still another rank's files (another process)
            src = (self.rank + 1) % self.world
        return src

    def read_prefix(self, src: int) -> str:
        """Path prefix from this rank's run directory to rank ``src``'s."""
        if src == self.rank:
            return ""
        from ..target import RUN_DIR_PREFIX

        return f"../{RUN_DIR_PREFIX}{self.run_dir_name_id(src)}/"

    def _read_source_of(self, spec: PhaseSpec | None) -> int | None:
        if spec is None or getattr(spec, "op", None) not in READ_OPS:
            return None
        files = getattr(spec, "files", ())
        if files and files[0].path.startswith("../"):
            return self.read_shift()
        return self.rank

    # -- collectives (also for the loader) --------------------------------------------------
    def barrier(self) -> None:
        self._check_signal()
        self._collective("barrier", self.comm.barrier)
        self._check_signal()

    def all_gather_object(self, obj: Any) -> list[Any]:
        return self._collective("gather", self.comm.all_gather, obj)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        return self._collective("broadcast", self.comm.broadcast, obj, src)

    def agreed(self, check: Callable[[], T]) -> T:
        """``check()`` (input checks that may differ between hosts: the target, free space,
        the output directory) on every rank; every rank raises when any rank's check refused,
        so no rank goes on to wait for peers that have already given up."""
        return agree_on(self, check)

    def any_stopping(self, stopping: bool) -> bool:
        """Collective: whether any rank was asked to stop (the loader's per-step barrier)."""
        return bool(self._collective("step barrier", self.comm.any_flag, bool(stopping)))

    def peer_failure(self) -> str | None:
        """Which rank on this host has died, if one has ("rank 1 (pid 123) exited").

        torchrun stops every rank with SIGTERM when one dies, and a rank between collectives
        sees only the signal; this tells that case (exit 4, the dead rank named) from a user
        stopping the run (exit 130). Ranks on other hosts cannot be checked from here; their
        death shows at the next collective.
        """
        if len(self.pids) != self.world or len(self.hosts) != self.world:
            return None
        for k, (host, pid) in enumerate(zip(self.hosts, self.pids, strict=True)):
            if k != self.rank and host == self.hostname and not _alive(pid):
                return f"rank {k} (pid {pid}) exited"
        return None

    def abandon(self, reason: str) -> None:
        """This rank failed on its own: make its later collectives fail at once instead of
        pairing with whatever collective the other ranks are in (they notice when it exits)."""
        if not self.failed:
            self.failed = f"rank {self.rank}: {reason}"

    def _check_signal(self) -> None:
        if self.terminated is not None:
            raise Interrupted(f"interrupted by {signal.Signals(self.terminated).name}")

    def _collective(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        if self.failed:
            raise DistributedError(self.failed)
        try:
            if self.watch is not None and what in WATCHED:
                self.watch.wait_all(self._check_signal, self.peer_failure)
            return fn(*args)
        except (Interrupted, KeyboardInterrupt):
            raise
        except Exception as e:  # noqa: BLE001 - gloo raises RuntimeError subclasses
            why = e.message if isinstance(e, DistributedError) else None
            self.failed = (
                f"rank {self.rank}: {what} across {self.world} ranks failed: "
                f"{why or _why_collective_failed(e, self.timeout_s)}"
            )
            self.remove_peer_run_dirs()
            hint = (
                "if no rank failed first, torchrun was stopped from outside (the OOM killer, "
                "a scheduler, kill): run the job again"
                if "torchrun's agent" in self.failed
                else "see the other ranks' output; torchrun names the first failure"
            )
            raise DistributedError(self.failed, hint=hint) from None

    def close(self, restore_signals: bool = True) -> None:
        """Stop the heartbeats, leave the process group and (unless told not to) restore the
        SIGTERM handler."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None
        if self._old_handler is not None:
            try:
                # at exit, ignore it: Python resets handlers to the default while it shuts
                # down, and a SIGTERM then would still kill the process
                signal.signal(
                    signal.SIGTERM, self._old_handler if restore_signals else signal.SIG_IGN
                )
            except ValueError:  # pragma: no cover - not the main thread
                pass
            self._old_handler = None
        self.comm.close()


# -- files another rank wrote (for the generators) -------------------------------------------


def read_source(runner: PhaseRunner) -> tuple[int, str]:
    """(rank whose files a read-back phase reads, path prefix from this rank's run dir).

    ``(runner.rank, "")`` on a single client or when the target is not shared between ranks.
    Generators build the source rank's file names and put the prefix in front.
    """
    coord = runner.coord
    src = coord.read_shift()
    if src == coord.rank:
        if not coord.shared_target:
            runner.warn(
                "the target is not shared between ranks: each rank read back its own files, "
                "so client caches may inflate the read figures"
            )
        return coord.rank, ""
    return src, coord.read_prefix(src)


def peer_files(files: Sequence[Any], prefix: str) -> tuple[Any, ...]:
    """``files`` (FileSpecs) under another rank's run directory."""
    if not prefix:
        return tuple(files)
    return tuple(type(f)(prefix + f.path, f.size) for f in files)


# -- the loader's step barrier ----------------------------------------------------------------


class StepBarrier:
    """The loader's barrier at the end of every step across ranks (the emulated all-reduce of
    a data-parallel step), which also carries the stop flag: when any rank was asked to stop
    (Ctrl-C, SIGTERM), every rank stops at the same step instead of waiting for a peer that
    will never arrive."""

    checks_stop = True

    def __init__(self, coord: Coordinator, stop: Any):
        self.coord = coord
        self.stop = stop

    def wait(self) -> None:
        if self.coord.any_stopping(self.stop.is_set()):
            self.stop.check()  # this rank's own signal, named
            raise Interrupted("interrupted: another rank was stopped")
