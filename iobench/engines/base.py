"""What every engine receives (a PhaseSpec and a context) and returns (a PhaseResult)."""

from __future__ import annotations

import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.units import format_bytes
from ..result.file import PhaseResult
from ..target import StopFlag

WRITE_BLOCK_CAP = 64 << 20  # posix/fsspec writes come from a DataPool of at most this
OPS_DATA = ("write", "read", "randread", "randwrite")
OPS_META = ("create", "stat", "open_read", "delete")


@dataclass(frozen=True)
class FileSpec:
    """One file a phase touches: its path relative to the run directory and its size."""

    path: str
    size: int


@dataclass(frozen=True)
class PhaseSpec:
    """One engine-level phase: an operation over a set of files by ``jobs`` workers.

    ``mode`` "file-per-worker" deals the files round-robin to workers; "shared" gives every
    worker its own contiguous region of every file (N-1, like IOR's shared file).
    ``size`` is the bytes each worker moves (fio's per-job size); 0 means "its files, once".
    ``block_size`` 0 means whole-file transfers (a dataset sample read in one go).
    """

    name: str
    op: str
    files: tuple[FileSpec, ...]
    jobs: int = 1
    block_size: int = 1 << 20
    size: int = 0
    time_s: float | None = None
    direct: bool = False
    fsync: str = "never"  # never | file | end
    rate_bps: float | None = None  # per worker
    seed: int = 0
    mode: str = "file-per-worker"  # or "shared"
    order: str = "sequential"  # sequential | shuffled (file order) ; randread uses random offsets
    latency_per: str = "op"  # "op" (each I/O) or "file" (open..close of a whole file)
    iodepth: int = 1  # fio's iodepth; the posix engine gets queue depth from threads
    verify: bool = False
    drop_cache_after: bool = False  # fadvise(DONTNEED) each file after it is written/read
    # with time_s: end the phase early once steady (stats.SteadyCriterion); time_s is the limit
    steady: Any = None
    params: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def result_params(self) -> dict[str, Any]:
        """What a result records of the spec: its own params, how latency was taken, the mode."""
        return {**self.params, "latency_per": self.latency_per, "mode": self.mode}

    def io_block_size(self, write_cap: int | None = WRITE_BLOCK_CAP) -> int:
        """The largest I/O a sequential phase issues: ``block_size`` cut to the longest file
        (or shared-file region), to the bytes each worker moves and, for writes, to the
        engine's largest write buffer; what a result records."""
        bs = self.block_size
        if bs and write_cap and self.op == "write":
            bs = min(bs, write_cap)
        if not bs or self.op not in ("read", "write"):
            return bs
        jobs = max(self.jobs, 1)
        if self.mode == "shared":
            longest = max((f.size - f.size // jobs * (jobs - 1) for f in self.files), default=bs)
        else:
            longest = max((f.size for f in self.files), default=bs)
        if self.size and not self.time_s:
            longest = min(longest, self.size)
        return min(bs, longest) if longest > 0 else bs

    def block_size_warnings(self, write_cap: int | None = WRITE_BLOCK_CAP) -> list[str]:
        """Say so when the I/Os were smaller than the block size asked for."""
        io = self.io_block_size(write_cap)
        if io == self.block_size:
            return []
        why = (
            "the largest write buffer"
            if write_cap and io == write_cap
            else "what each worker moves per file"
        )
        return [
            f"block_size {format_bytes(self.block_size)} is larger than {why}: the I/Os were "
            f"{format_bytes(io)}, as recorded"
        ]

    @property
    def planned_bytes(self) -> int:
        """Bytes this phase writes to the target (0 for reads)."""
        if self.op in ("write", "create"):
            return sum(f.size for f in self.files)
        return 0


@dataclass(frozen=True)
class Segment:
    """A contiguous piece of one file (or object) assigned to a worker."""

    file_id: int
    path: str  # the run directory's path joined with ``name``: what messages name
    offset: int
    length: int
    name: str = ""  # relative to the run directory: what a local engine opens through its fd


def assign(
    phase: PhaseSpec, root: str, join: Callable[[str, str], str] = os.path.join
) -> list[list[Segment]]:
    """Deal the phase's files (or shared-file regions) to its workers, the same for every
    engine: round-robin in file order (or a seeded shuffle), or in shared mode a contiguous
    region of every file per worker."""
    jobs = phase.jobs
    work: list[list[Segment]] = [[] for _ in range(jobs)]
    files = list(phase.files)
    if phase.mode == "shared":
        rand = phase.op in ("randread", "randwrite") and phase.block_size
        for fid, f in enumerate(files):
            region = f.size // jobs
            if rand:  # offsets are region + k * block: on the file's block grid (O_DIRECT)
                region -= region % phase.block_size
            for w in range(jobs):
                length = region if w < jobs - 1 else f.size - region * (jobs - 1)
                work[w].append(Segment(fid, join(root, f.path), w * region, length, f.path))
        return work
    order = list(range(len(files)))
    if phase.order == "shuffled":
        np.random.default_rng(phase.seed).shuffle(order)
    for k, fid in enumerate(order):
        f = files[fid]
        work[k % jobs].append(Segment(fid, join(root, f.path), 0, f.size, f.path))
    return work


def cache_label(phase: PhaseSpec) -> str:
    """How a local phase met the page cache: O_DIRECT, dropped (fadvise) or buffered."""
    if phase.direct:
        return "direct"
    if phase.drop_cache_after or phase.params.get("cache_dropped"):
        return "dropped"
    return "buffered"


PACE_POLL_S = 0.05  # a paced worker looks at its stop flags at least this often


def pace_until(until: float, should_stop: Callable[[], bool]) -> None:
    """Sleep until ``time.perf_counter()`` reaches ``until`` (rate pacing), in short slices
    that look at ``should_stop``: a worker paced at 1 B/s still stops at once on Ctrl-C or a
    failure (a forked worker sees the stop only through shared state it has to poll)."""
    while not should_stop():
        left = until - time.perf_counter()
        if left <= 0:
            return
        time.sleep(min(left, PACE_POLL_S))


class Progress:
    """Progress callback: engines call ``update(done_bytes, done_ops)`` with running totals."""

    def start(self, name: str, total_bytes: int | None, total_ops: int | None) -> None:
        pass

    def set_duration(self, seconds: float) -> None:
        """After ``start``: the phase is time-based and ends after ``seconds``."""

    def update(self, done_bytes: int, done_ops: int) -> None:
        pass

    def starting(self, forked: int, running: int, total: int) -> None:
        """Before the phase's I/O: ``forked`` of its ``total`` worker processes started,
        ``running`` of them reported in (the watchdog names a start that does not finish)."""

    def close(self) -> None:
        pass


class SteadyWatch(Progress):
    """A Progress that also watches the running totals: once the rate they imply meets the
    phase's steady criterion over its latest window, ``on_steady`` is called (once).

    The engine's coordinating thread reports totals about every ``interval_s``; each report
    after the last adds one rate (bytes or ops over the time since). Only the stop decision
    uses these samples: the phase's recorded steady state is judged afterwards from its own
    series (``stats.judge_phase``).
    """

    def __init__(
        self,
        inner: Progress,
        criterion: Any,
        on_steady: Callable[[], None] | None = None,
        interval_s: float = 0.1,
        clock: Callable[[], float] | None = None,
    ):
        import time

        self.inner = inner
        self.criterion = criterion
        self.on_steady = on_steady
        self.interval_s = interval_s
        self.clock = clock or time.perf_counter
        self.rates: list[float] = []
        self.steady_at_s: float | None = None
        self._t0 = self._t = 0.0
        self._last = (0, 0)
        self._flowing = False

    def start(self, name: str, total_bytes: int | None, total_ops: int | None) -> None:
        self._t0 = self._t = self.clock()
        self.inner.start(name, total_bytes, total_ops)

    def starting(self, forked: int, running: int, total: int) -> None:
        self.inner.starting(forked, running, total)

    def update(self, done_bytes: int, done_ops: int) -> None:
        self.inner.update(done_bytes, done_ops)
        now = self.clock()
        if not self._flowing:
            # the workers set up before the first I/O: time counts from the first report of
            # work done, as the recorded series counts from the first operation
            if done_bytes or done_ops:
                self._flowing = True
                self._t0 = self._t = now
                self._last = (done_bytes, done_ops)
            return
        dt = now - self._t
        if dt < self.interval_s * 0.5 or self.steady_at_s is not None:
            return
        use_bw = self.criterion.metric == "bw"
        moved = done_bytes - self._last[0] if use_bw else done_ops - self._last[1]
        self._t, self._last = now, (done_bytes, done_ops)
        self.rates.append(moved / dt)
        from ..result.steady import window_figure, window_intervals

        c = self.criterion
        ramp, n = window_intervals(c, self.interval_s)
        if len(self.rates) < ramp + n + 1:  # + 1: the recorded series leaves its last out
            return
        fig = window_figure(self.rates[-n:], self.interval_s, c.kind)
        if fig is not None and fig < c.limit:
            self.steady_at_s = now - self._t0
            if self.on_steady is not None:
                self.on_steady()

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class EngineContext:
    """What a phase needs besides its spec: where, how to stop, whom to tell."""

    run_dir: str  # a directory path, or a URL for fsspec targets
    stop: StopFlag
    progress: Progress = field(default_factory=Progress)
    direct_supported: bool = True
    direct_align: int = 4096  # O_DIRECT lengths are multiples of it (the target's, measured)
    fs_type: str = "unknown"
    storage_options: dict[str, Any] = field(default_factory=dict)
    raw_dir: str | None = None  # where an engine may keep raw tool output (fio JSON)
    clock: Callable[[], float] | None = None
    # the run directory held open (``RunDir.fd``): local engines open every file through it,
    # never by a path resolved again through TARGET; None: the engine opens ``run_dir`` itself
    run_fd: int | None = None
    follow_links: bool = False  # the ceiling probe's memory file is a /proc/self/fd link


class Engine(ABC):
    """An engine executes PhaseSpecs against a target and measures them."""

    name: str = "?"
    direct_io: bool = True  # can it bypass the page cache (O_DIRECT) when a phase asks?

    @classmethod
    def available(cls) -> tuple[bool, str | None]:
        """(usable here, why not)."""
        return True, None

    def version(self) -> str | None:
        return None

    def supports(self, op: str) -> bool:
        return op in OPS_DATA or op in OPS_META

    def why_not(self, phase: PhaseSpec) -> str | None:
        """Why this engine cannot run ``phase`` faithfully (None when it can). The runner runs
        such a phase with the posix engine, and says so, rather than measure something else
        under the same name."""
        return None

    @abstractmethod
    def run(self, phase: PhaseSpec, ctx: EngineContext) -> PhaseResult:
        """Run one phase and return what it measured (raise EngineError on I/O failure,
        with the partial PhaseResult attached as ``err.partial``)."""

    def review(self, phase: PhaseSpec, res: PhaseResult, ctx: EngineContext) -> None:
        """After a phase that ended ok, outside its timed and CPU-sampled window (the runner
        calls it once it has taken the phase's client CPU): what the engine adds to the
        result from outside the phase. The posix engine holds the phase's IOPS against its
        own ceiling (``engines.ceiling``); the others add nothing."""
        return None
