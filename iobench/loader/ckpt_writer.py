"""The background checkpoint writer of ``iobench loader --during-checkpoint MODEL``.

What the storage sees while an asynchronous checkpoint (torch.distributed.checkpoint's
``async_save``, Megatron's and NeMo's async savers) runs: once the state is staged in host
memory, background writers put every rank's shard files on the storage while training, and
its data loaders, go on. Here one process (forked before the loop, so the loader's own
processes and the GIL are not shared with it) writes the model's checkpoint at ``scale``:
every file ``checkpoint.model.rank_shard`` gives each of the model's ranks (DLIO's layout), one
writer thread per rank up to ``MAX_WRITERS`` (the files dealt round-robin), incompressible
page-stamped blocks from ``core.datagen`` (never zeros), fsync per file as DCP's writer does.
A plain paced writer (``rate``) spreads the same bytes at that rate instead of as fast as the
storage takes them.

Every file is created exclusively inside the run directory through its held descriptor
(``*at`` calls, no link followed) in a folder of its own per checkpoint, and removed once that
checkpoint's end time is taken (or on a stop or an error), so a later save never finds the
earlier one's files and the removal stays outside the timed write. Times are
``time.perf_counter`` (CLOCK_MONOTONIC on Linux), the clock the loader's loop reads, shared by
every process of the host.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.datagen import DataPool
from ..core.errors import EngineError, UsageError
from ..core.units import format_bytes
from ..target import worker_signals
from .beside import BesideJob, ForkedHelper
from .loop import StepClock
from .torchdata import _die_with_parent

DEFAULT_SCALE = 0.001  # --checkpoint-scale
DEFAULT_AT_S = 2.0  # --checkpoint-at
PROBE_SAVES = 2  # --read-probe: saves the read probe measures, a spread and not one draw
MAX_PROBE_SAVES = 10
MAX_WRITERS = 16  # writer threads of one checkpoint (one per rank, at most this)
BLOCK = 1 << 20  # bytes per write() call
_OPEN = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SUBDIR = "ckpt-during"
POLL_S = 0.002  # how often the writer looks at the loop's step count
READY_TIMEOUT_S = 120.0  # the most the writer may take to stage its data


@dataclass(frozen=True)
class CheckpointPlan:
    """The checkpoint written during the loop: which files, when, how fast."""

    model: str
    scale: float
    at: float  # when the first save starts: seconds into the timed steps, or steps ended
    every: float | None  # then again this long after each save started (None: once)
    rate_bps: float | None  # a paced writer's rate (None: as fast as the storage takes it)
    files: tuple[tuple[int, str, int], ...]  # (rank, file name, bytes)
    ranks: int
    at_unit: str = "s"  # s | steps
    every_unit: str = "s"
    beside: BesideJob | None = None  # --beside: another job on the same storage (loader.beside)
    probe_saves: int = PROBE_SAVES  # --read-probe: saves the read probe measures (readprobe)

    @property
    def total_bytes(self) -> int:
        return sum(f[2] for f in self.files)

    @property
    def writers(self) -> int:
        return max(1, min(len({f[0] for f in self.files}), MAX_WRITERS))

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "scale": self.scale, "at": self.at, "at_unit": self.at_unit,
            "every": self.every, "every_unit": self.every_unit, "rate_bps": self.rate_bps, "bytes": self.total_bytes,
            "files": len(self.files), "ranks": self.ranks, "writers": self.writers,
            "mode": "paced" if self.rate_bps else "async", "probe_saves": self.probe_saves,
        }  # fmt: skip


def plan_checkpoint(
    model: str,
    scale: float | None,
    at: tuple[float, str],
    every: tuple[float, str] | None,
    rate_bps: float | None,
) -> CheckpointPlan:
    """The checkpoint of ``model`` at ``scale`` (default 0.001) and its schedule (``at`` and
    ``every`` as (value, ``s`` or ``steps``)); UsageError for an unknown model, a scale
    outside (0, 1] or one that leaves nothing, a bad time."""
    from ..checkpoint.model import rank_shard
    from ..checkpoint.spec import load_checkpoint_profile

    scale = DEFAULT_SCALE if scale is None else scale
    if not 0 < scale <= 1:
        raise UsageError(f"--checkpoint-scale must be in (0, 1], got {scale:g}",
                         hint="the fraction of every rank's shard written, e.g. 0.001")  # fmt: skip
    if at[0] < 0:
        raise UsageError(f"--checkpoint-at must be 0 or more, got {at[0]:g}")
    if every is not None and every[0] <= 0:
        raise UsageError(f"--checkpoint-every must be more than 0, got {every[0]:g}")
    if rate_bps is not None and rate_bps <= 0:
        raise UsageError("--checkpoint-rate must be more than 0", hint="e.g. 200MiB/s")
    spec = load_checkpoint_profile(model).spec
    files = []
    for r in range(spec.ranks):
        whole = rank_shard(spec, r)
        if whole.total_bytes == 0:
            continue  # a replica that saves nothing (ZeRO-0's other data-parallel ranks)
        for f in whole.file_parts():
            n = int(f.nbytes * scale)
            if n > 0:
                files.append((r, f"r{r}-{f.name}", n))
    if not files:
        raise UsageError(
            f"--checkpoint-scale {scale:g} leaves nothing of {model} to write",
            hint="raise --checkpoint-scale (the fraction of every rank's shard written)",
        )
    return CheckpointPlan(
        model, scale, at[0], every[0] if every else None, rate_bps, tuple(files), spec.ranks,
        at[1], every[1] if every else "s",
    )  # fmt: skip


def shard_plan(plan: CheckpointPlan, rank: int, world: int) -> CheckpointPlan:
    """The files torchrun rank ``rank`` of ``world`` writes: those of the model's ranks
    ``r`` with ``r mod world == rank`` (none when the model has fewer ranks than ``world``)."""
    from dataclasses import replace

    return replace(plan, files=tuple(f for f in plan.files if f[0] % world == rank))


def _deal(plan: CheckpointPlan) -> list[list[tuple[str, int]]]:
    """The files dealt to the writers: rank r's files to writer r mod writers."""
    ranks = sorted({f[0] for f in plan.files})
    slot = {r: i % plan.writers for i, r in enumerate(ranks)}
    out: list[list[tuple[str, int]]] = [[] for _ in range(plan.writers)]
    for r, name, n in plan.files:
        out[slot[r]].append((name, n))
    return out


def make_pools(plan: CheckpointPlan, seed: int) -> list[DataPool]:
    """One data pool per writer, built before any save is timed (the state staged in host
    memory before an async save's write begins); ``close_pools`` frees them."""
    return [DataPool(BLOCK, seed * 1000 + i) for i in range(plan.writers)]


def close_pools(pools: list[DataPool]) -> None:
    for p in pools:
        p.close()


def _write_files(
    sub_fd: int, files: list[tuple[str, int]], rate: float | None, stopped: Callable[[], bool],
    pool: DataPool, done: list[int], errors: list[str],
) -> None:  # fmt: skip
    """One writer: its files, block by block, fsync each; ``done[0]`` bytes, ``done[1]`` files."""
    t0 = time.perf_counter()
    tag = pool.counter
    try:
        for fid, (name, size) in enumerate(files):
            fd = os.open(name, _OPEN, 0o644, dir_fd=sub_fd)
            try:
                off = 0
                while off < size:
                    if stopped():
                        return
                    n = os.write(
                        fd, pool.next_block(fid + (tag << 16), off, min(BLOCK, size - off))
                    )
                    off += n
                    done[0] += n
                    if rate:  # the paced writer: no faster than its share of the rate
                        ahead = done[0] / rate - (time.perf_counter() - t0)
                        if ahead > 0:
                            time.sleep(ahead)
                os.fsync(fd)
            finally:
                os.close(fd)
            done[1] += 1
    except OSError as e:
        errors.append(f"checkpoint writer: {e.strerror or e} writing {name}")


def write_checkpoint(
    plan: CheckpointPlan, dir_fd: int, index: int, stopped: Callable[[], bool],
    pools: list[DataPool],
) -> dict[str, Any]:  # fmt: skip
    """One whole checkpoint into ``SUBDIR/<index>`` of the run directory (held as ``dir_fd``),
    its files removed after the end is taken. Its record: start and end (perf_counter),
    bytes, files, whether it completed, and the first error."""
    name = str(index)
    os.mkdir(name, 0o755, dir_fd=dir_fd)
    sub_fd = os.open(name, _DIR, dir_fd=dir_fd)
    dealt = _deal(plan)
    counts = [[0, 0] for _ in dealt]
    errors: list[str] = []
    per = plan.rate_bps / len(dealt) if plan.rate_bps else None
    threads = [
        threading.Thread(target=_write_files, daemon=True,
                         args=(sub_fd, fs, per, stopped, pools[i], counts[i], errors))
        for i, fs in enumerate(dealt)
    ]  # fmt: skip
    try:
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        end = time.perf_counter()
    finally:
        for entry in os.listdir(sub_fd):
            os.unlink(entry, dir_fd=sub_fd)
        os.close(sub_fd)
        os.rmdir(name, dir_fd=dir_fd)
    nbytes, nfiles = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return {
        "index": index, "start": start, "end": end, "bytes": nbytes, "files": nfiles,
        "complete": nbytes == plan.total_bytes and nfiles == len(plan.files),
        "error": errors[0] if errors else None,
    }  # fmt: skip


def save_seconds(rec: dict[str, Any]) -> float:
    """A save's time: under torchrun the slowest rank's own (``during.merge_saves``), else
    its last fsync less its first write."""
    return float(rec.get("slowest_s") or rec["end"] - rec["start"])


def save_rate(rec: dict[str, Any]) -> float | None:
    """A save's bytes over its time (None without either)."""
    dt = save_seconds(rec)
    return rec["bytes"] / dt if dt > 0 and rec["bytes"] else None


def checkpoint_dir(run_dir_fd: int) -> int:
    """The writer's folder in the run directory, created and held open."""
    os.mkdir(SUBDIR, 0o755, dir_fd=run_dir_fd)
    return os.open(SUBDIR, _DIR, dir_fd=run_dir_fd)


def remove_checkpoint_dir(run_dir_fd: int, fd: int) -> None:
    """The writer's folder, empty by then (each checkpoint removes its own), removed."""
    os.close(fd)
    try:
        os.rmdir(SUBDIR, dir_fd=run_dir_fd)
    except FileNotFoundError:
        pass


def _due(plan: CheckpointPlan, clock: StepClock, k: int, mark: tuple[float, int]) -> float:
    """Seconds until save ``k`` (0 first) is due (0: now; a poll period for steps): the
    first ``at`` into the timed steps, each next ``every`` after the previous one started."""
    if clock.started == 0:
        return POLL_S  # the loop's timed steps have not begun
    value, unit = (plan.at, plan.at_unit) if k == 0 else (plan.every or 0.0, plan.every_unit)
    t, steps = (clock.started, 0) if k == 0 else mark
    if unit == "steps":
        return 0.0 if clock.steps - steps >= value else POLL_S
    return max(0.0, t + value - time.perf_counter())


def _writer_main(plan: CheckpointPlan, dir_fd: int, clock: StepClock, stop: Any, conn: Any) -> None:
    """The writer process: each save at its time (a save due while the previous one still
    runs starts when it ends, as an async saver waits on the previous save), until ``stop``."""
    worker_signals()
    _die_with_parent()
    pools = make_pools(plan, 7)
    try:
        conn.send(("ready", None))
        k, mark = 0, (0.0, 0)
        while plan.every is not None or k == 0:
            wait = _due(plan, clock, k, mark)
            if stop.wait(wait) if wait > 0 else stop.is_set():
                break
            if wait > 0:
                continue
            mark = (time.perf_counter(), clock.steps)
            rec = write_checkpoint(plan, dir_fd, k + 1, stop.is_set, pools)
            conn.send(("checkpoint", rec))
            if rec["error"] or not rec["complete"]:
                break
            k += 1
        conn.send(("done", None))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"checkpoint writer: {type(e).__name__}: {e}"))
    finally:
        close_pools(pools)
        conn.close()


class BackgroundWriter(ForkedHelper):
    """The writer process around the loop: ``start`` before it, ``finish`` after it."""

    def __init__(self, plan: CheckpointPlan, dir_fd: int):
        super().__init__()
        self.plan, self.dir_fd = plan, dir_fd

    def start(self, clock: StepClock) -> None:
        self._spawn(_writer_main, "iobench-ckpt-writer", self.plan, self.dir_fd, clock)
        # the loop starts once the writer's state is staged (its pools built)
        try:
            kind, payload = self.conn.recv() if self.conn.poll(READY_TIMEOUT_S) else ("error", None)
        except EOFError:
            kind, payload = "error", f"checkpoint writer exited (code {self.proc.exitcode})"
        if kind != "ready":
            self.close()
            raise EngineError(payload or "checkpoint writer did not start")

    def finish(self, timeout_s: float = 600.0) -> list[dict[str, Any]]:
        """Stop the writer (a save under way ends at its next block, marked incomplete), its
        records; EngineError when it failed."""
        self.stop.set()
        records, error = [], None
        try:
            while self.conn.poll(timeout_s):
                kind, payload = self.conn.recv()
                if kind == "checkpoint":
                    records.append(payload)
                    error = error or payload["error"]
                elif kind == "error":
                    error = payload
                if kind != "checkpoint":
                    break
        except EOFError:
            error = error or f"checkpoint writer exited (code {self.proc.exitcode})"
        finally:
            self.close()
        if error:
            raise EngineError(error)
        return records


def describe(plan: CheckpointPlan) -> str:
    """``llama3-8b at scale 0.001: 107 MiB in 16 files, 8 writers``: the plan line's detail."""
    how = f", paced at {format_bytes(plan.rate_bps)}/s" if plan.rate_bps else ""
    return (
        f"{plan.model} at scale {plan.scale:g}: {format_bytes(plan.total_bytes)} in "
        f"{len(plan.files)} files, {plan.writers} writers{how}"
    )
