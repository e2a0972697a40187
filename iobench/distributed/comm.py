"""The communicator under the torchrun coordinator: the gloo group's collectives (``Comm``,
``TorchComm``), the job's key-value store with bounded calls and heartbeats (``PeerWatch``),
and the environment torchrun sets (``WORLD_SIZE``, ``IOBENCH_DIST_TIMEOUT``).

Nothing here knows about phases or results; ``distributed.group`` builds the coordinator on it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import DistributedError, UsageError, quoted
from ..core.units import parse_duration

ENV_TIMEOUT = "IOBENCH_DIST_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
#: Seconds between a rank's heartbeats in the job's store.
HEARTBEAT_S = 1.0


# -- environment -----------------------------------------------------------------------------


def launched_world(environ: Mapping[str, str] | None = None) -> int:
    """WORLD_SIZE as torchrun sets it (1 when absent)."""
    env = os.environ if environ is None else environ
    text = env.get("WORLD_SIZE", "1")
    try:
        return int(text)
    except ValueError:
        raise UsageError(
            f"WORLD_SIZE={text!r} is not a whole number", hint="launch with torchrun"
        ) from None


def dist_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds a collective may wait for the slowest rank (``IOBENCH_DIST_TIMEOUT``)."""
    env = os.environ if environ is None else environ
    text = env.get(ENV_TIMEOUT)
    if not text:
        return DEFAULT_TIMEOUT_S
    value = parse_duration(text, what=ENV_TIMEOUT)
    if value <= 0:
        raise UsageError(f"{ENV_TIMEOUT}={text!r} must be positive", hint="e.g. 60s")
    return value


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def _why_collective_failed(e: BaseException, timeout_s: float) -> str:
    """gloo's error, in a few words (its own text names source files and ports)."""
    text = " ".join(str(e).split())
    low = text.lower()
    if "closed by peer" in low or "connection reset" in low or "broken pipe" in low:
        return "another rank exited (connection closed)"
    if "timed out" in low or "timeout" in low:
        return f"another rank did not answer within {timeout_s:g} s ({ENV_TIMEOUT})"
    return f"{type(e).__name__}: {quoted(text, 160)}"


def store_holder_gone(env: Any) -> str:
    """Who held the job's store, now gone (pure, for tests): torchrun's agent when it hosts
    the store (TORCHELASTIC_USE_AGENT_STORE, torchrun's default), else rank 0 -- never this
    rank blaming itself."""
    if str(env.get("TORCHELASTIC_USE_AGENT_STORE", "")).lower() == "true":
        return (
            "torchrun's agent, which holds it, has exited (killed, or ending the job after "
            "a failure it saw first)"
        )
    if str(env.get("RANK", "")) == "0":
        return "this rank holds it and can no longer reach it"
    return "the rank that holds it (rank 0) has exited, having seen the failure first"


# -- liveness: heartbeats in the job's store --------------------------------------------------


class PeerWatch:
    """Every rank's heartbeat in the job's key-value store (torchrun's TCPStore), so that ranks
    may reach the end of a phase minutes apart without a collective timing out, while a rank
    that stops answering is still noticed within the timeout.

    Each rank bumps ``hb/<rank>`` every HEARTBEAT_S from a thread of its own. Before a watched
    collective, a rank counts itself in at ``arrive/<n>`` and polls until every rank has; it
    gives up only when a rank stayed silent (its counter did not move) over a window of
    ``timeout_s`` (so within twice that), or when ``dead()`` names a rank of this host that
    exited. The collective itself then starts
    with every rank present, well inside the gloo timeout.

    ``store_factory`` makes a client with ``add(key, n) -> int`` (one per thread).
    """

    def __init__(self, store_factory: Callable[[], Any], rank: int, world: int, timeout_s: float):
        self.store_factory = store_factory
        self.store = store_factory()
        self.rank = rank
        self.world = world
        self.timeout_s = timeout_s
        self.seq = 0
        #: every rank's host name (set once known), so that a silent rank's host is named
        self.hosts: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def start(
        cls, store_factory: Callable[[], Any], rank: int, world: int, timeout_s: float
    ) -> PeerWatch | None:
        """A running watch, or None where the store cannot be reached (the collectives'
        own timeout then bounds every wait)."""
        try:
            watch = cls(store_factory, rank, world, timeout_s)
            watch.beat(watch.store)
        except Exception:  # noqa: BLE001 - no store: plain collectives
            return None
        watch._thread = threading.Thread(
            target=watch._beat_forever, name="iobench-heartbeat", daemon=True
        )
        watch._thread.start()
        return watch

    def beat(self, store: Any) -> None:
        store.add(f"iobench/hb/{self.rank}", 1)

    def _beat_forever(self) -> None:
        try:
            store = self.store_factory()
            while not self._stop.wait(HEARTBEAT_S):
                self.beat(store)
        except Exception:  # noqa: BLE001 - the store is gone: the job is ending; go silent
            return

    def beats(self) -> list[int]:
        return [int(self.bounded(self.store.add, f"iobench/hb/{k}", 0)) for k in range(self.world)]

    def bounded(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` (a store call), giving up after ``timeout_s``: a store client blocks
        without end when the link to the store's host is cut (no reset ever arrives), and a
        call blocked in C would not even let SIGTERM through."""
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["value"] = fn(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                box["error"] = e

        t = threading.Thread(target=call, name="iobench-store-call", daemon=True)
        t.start()
        t.join(self.timeout_s)
        if t.is_alive():  # left behind, a daemon: it cannot keep the process from exiting
            where = os.environ.get("MASTER_ADDR")
            raise DistributedError(
                f"the job's store{f' on host {where}' if where else ''} did not answer for "
                f"{self.timeout_s:g} s ({ENV_TIMEOUT}): its host is gone or the link to it is down"
            )
        if "error" in box:
            if type(box["error"]).__name__ == "DistNetworkError":  # torch's, not imported here
                where = os.environ.get("MASTER_ADDR")
                raise DistributedError(
                    f"the job's store{f' on host {where}' if where else ''} closed the "
                    f"connection: {store_holder_gone(os.environ)}"
                ) from None
            raise box["error"]
        return box["value"]

    def wait_all(
        self,
        check_signal: Callable[[], None] | None = None,
        dead: Callable[[], str | None] | None = None,
    ) -> None:
        """Until every rank has reached this point (raises DistributedError naming a rank
        that stopped answering)."""
        self.seq += 1
        key = f"iobench/arrive/{self.seq}"
        arrived = int(self.bounded(self.store.add, key, 1))
        if arrived >= self.world:
            return
        # heartbeats are read only once a wait outlasts the timeout (every rank reading every
        # rank's counter at every collective would load the store as ranks²); a silent rank
        # is one whose counter did not move over a whole window: noticed within 2 × timeout
        last: list[int] | None = None
        window_end = time.monotonic() + self.timeout_s
        next_dead_check = time.monotonic() + 1.0
        pause = 0.001
        while arrived < self.world:
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
            arrived = int(self.bounded(self.store.add, key, 0))
            if check_signal is not None:
                check_signal()
            now = time.monotonic()
            if dead is not None and now >= next_dead_check:
                next_dead_check = now + 1.0
                gone = dead()
                if gone:
                    raise DistributedError(gone)
            if now >= window_end and arrived < self.world:
                beats = self.beats()
                silent = [
                    k
                    for k in range(self.world)
                    if last is not None and k != self.rank and beats[k] == last[k]
                ]
                if silent:
                    raise DistributedError(
                        f"{self.who(silent[0])} stopped answering (no heartbeat for "
                        f"{self.timeout_s:g} s, {ENV_TIMEOUT})"
                    )
                last, window_end = beats, now + self.timeout_s

    def who(self, rank: int) -> str:
        """``rank 1 on host iob-h2`` where the hosts are known, else ``rank 1``."""
        if len(self.hosts) == self.world:
            return f"rank {rank} on host {self.hosts[rank]}"
        return f"rank {rank}"

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2 * HEARTBEAT_S)


# -- the communicator ------------------------------------------------------------------------


@dataclass
class Comm:
    """The collectives the coordinator needs; TorchComm implements them over a gloo group."""

    rank: int = 0
    world: int = 1

    def barrier(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def all_gather(self, obj: Any) -> list[Any]:  # pragma: no cover - interface
        raise NotImplementedError

    def broadcast(self, obj: Any, src: int) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def any_flag(self, flag: bool) -> bool:
        return any(self.all_gather(bool(flag)))

    def open_store(self) -> Any:
        """A client of the job's key-value store (for PeerWatch)."""
        raise NotImplementedError

    def clock_offsets(self, rounds: int) -> tuple[list[float], list[float]]:
        return [0.0] * self.world, [0.0] * self.world

    def close(self) -> None:
        pass


class TorchComm(Comm):
    """torch.distributed with the gloo backend (CPU tensors; works without GPUs)."""

    def __init__(self, dist: Any, timeout_s: float):
        super().__init__(dist.get_rank(), dist.get_world_size())
        self.dist = dist
        self.timeout_s = timeout_s
        self.owned = False

    @classmethod
    def init(cls, timeout_s: float) -> TorchComm:
        import datetime

        try:
            import torch.distributed as dist
        except ImportError as e:  # pragma: no cover - torch is a dependency
            raise UsageError(f"torch.distributed is unavailable ({e})") from None
        if not dist.is_available():  # pragma: no cover
            raise UsageError("this torch build has no torch.distributed")
        owned = False
        if not dist.is_initialized():
            try:
                dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
            except Exception as e:  # noqa: BLE001 - rendezvous errors come in many types
                detail = quoted(e, 200)
                raise DistributedError(
                    f"could not join the other ranks within {timeout_s:g} s ({detail})",
                    hint=f"check MASTER_ADDR/MASTER_PORT and that every rank started; "
                    f"{ENV_TIMEOUT} sets the wait",
                ) from None
            owned = True
        comm = cls(dist, timeout_s)
        comm.owned = owned
        return comm

    def barrier(self) -> None:
        self.dist.barrier()

    def all_gather(self, obj: Any) -> list[Any]:
        out: list[Any] = [None] * self.world
        self.dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: Any, src: int) -> Any:
        box = [obj]
        self.dist.broadcast_object_list(box, src=src)
        return box[0]

    def open_store(self) -> Any:
        """A new client of the TCPStore at MASTER_ADDR:MASTER_PORT: torchrun's (its agent
        hosts it) or rank 0's when the ranks were started by hand with torchrun's variables."""
        import datetime

        return self.dist.TCPStore(
            os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
            timeout=datetime.timedelta(seconds=self.timeout_s), wait_for_workers=False,
        )  # fmt: skip

    def any_flag(self, flag: bool) -> bool:
        import torch

        t = torch.tensor([1 if flag else 0], dtype=torch.int32)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return bool(t.item())

    def clock_offsets(self, rounds: int) -> tuple[list[float], list[float]]:
        import torch

        dist = self.dist
        offsets = [0.0] * self.world
        rtts = [0.0] * self.world
        buf = torch.zeros(1, dtype=torch.float64)
        if self.rank == 0:
            for r in range(1, self.world):
                best: tuple[float, float] | None = None
                for _ in range(rounds):
                    t0 = time.time()
                    dist.send(torch.tensor([t0], dtype=torch.float64), r)
                    dist.recv(buf, r)
                    t1 = time.time()
                    sample = (t1 - t0, float(buf.item()) - (t0 + t1) / 2)
                    if best is None or sample[0] < best[0]:
                        best = sample
                assert best is not None
                rtts[r], offsets[r] = best
        else:
            for _ in range(rounds):
                dist.recv(buf, 0)
                dist.send(torch.tensor([time.time()], dtype=torch.float64), 0)
        box = [(offsets, rtts)]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def close(self) -> None:
        if self.owned and self.dist.is_initialized():
            try:
                self.dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - leaving a broken group must not mask the result
                pass
            self.owned = False
