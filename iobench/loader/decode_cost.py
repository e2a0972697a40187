"""What an existing dataset's samples cost a training job beyond their bytes: the per-file open,
and the decode (CPU and wall time, and the decoded size), measured on a sample of its files
the way ``iobench loader PATH --existing`` decodes them (the same reader, ``formats.READERS``;
each ``next()`` of ``reader.samples`` timed by ``perf_counter`` and ``thread_time``, the
reader's own integrity checks left out as ``existing_data`` leaves them out).

``iobench profile`` writes these figures into the profile (``decode_s``, ``decoded_size``,
``open_s``), and the synthetic loader spends ``decode_s`` per sample in its workers
(``loader.torchdata.DecodeEmulation``), so a replay keeps what made the real pipeline slow.

Measured as a worker decodes, in one process: the files one after another, each decoded
sample held until a batch of them is complete and then collated and dropped (a decode's CPU
depends on the allocator's state: a decoder writing into memory just freed took 4–61 minor
page faults an ImageNet-sized JPEG, one writing beside a batch still held 146–192, 0.4–0.9
ms more of a 1.3–1.6 ms decode; docs/validation/replay.md); REPEATS passes over the files, each
file's median kept (never one file twice in a row, which a worker never does). A worker's
start-up, its first decode in a freshly forked process (the codec's lazy initialisation,
~20 ms of CPU for Pillow's JPEG), is measured in a forked child and spread over the samples a
worker decodes per start (``loader --existing`` starts its workers each epoch).
"""

from __future__ import annotations

import os
import select
import signal
import statistics
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from ..core.errors import EngineUnavailable
from ..core.units import format_bytes, format_seconds
from ..formats.registry import READERS, get_reader

#: Files decoded at most, and bytes read for it at most (at least one file either way).
DECODE_FILES = 32
DECODE_BYTES = 256 << 20
#: Passes over the files, each file's median kept: one decode on a busy host can take half
#: as long again (measured 1.9–4.7 ms for the same kind of JPEG).
REPEATS = 3
#: Forked children whose first decode gives a worker's start-up (their median).
START_CHILDREN = 3
START_TIMEOUT_S = 30.0
#: Samples held before they are collated and dropped, when the loop's batch size is not given.
BATCH = 8
#: Decoded samples (the first of each file measured) collated together to see how a batch of
#: them is handed on, and the bytes they may hold at most.
COLLATE_PROBE = 8
COLLATE_BYTES = 64 << 20


@dataclass(frozen=True)
class DecodeCost:
    """Per-sample decode and per-file open figures over the files measured."""

    cpu_s: float  # thread CPU seconds per sample (mean over the samples)
    wall_s: float  # wall seconds per sample
    decoded_bytes: int  # mean bytes of a decoded sample (every array in it)
    open_s: float  # seconds per file open (the open call, fstat included locally)
    files: int
    samples: int
    cpu_range: tuple[float, float]  # per file: the least and most CPU per sample
    #: how the loader --existing collate hands on a batch of these samples: "stack" (one
    #: tensor) or "list" (one tensor per sample: their shapes differ), tried on COLLATE_PROBE
    collate: str = "stack"
    #: CPU seconds of a worker's start-up (its first decode in a fresh process, less a
    #: steady one), and the samples a worker decodes per start it is spread over (0: not)
    start_s: float = 0.0
    per_start: int = 0

    def basis(self) -> str:
        lo, hi = self.cpu_range
        handed = "one tensor a batch" if self.collate == "stack" else "one tensor per sample"
        start = (
            f", a worker's start-up {format_seconds(self.start_s)} spread over the "
            f"{self.per_start:,} samples it decodes per start"
            if self.per_start
            else f", a worker's start-up {format_seconds(self.start_s)} left out"
        )
        return (
            f"CPU {format_seconds(self.cpu_s)} (wall {format_seconds(self.wall_s)}) per sample, "
            f"mean over {self.samples:,} samples of {self.files} files (per file "
            f"{format_seconds(lo)}–{format_seconds(hi)}){start}; decoded "
            f"{format_bytes(self.decoded_bytes)} per sample, handed on as {handed}; open "
            f"{format_seconds(self.open_s)} per file; one process, the loader --existing reader,"
            " samples held a batch at a time"
        )


def nbytes(obj: Any) -> int:
    """The bytes of a decoded sample: its arrays (numpy, torch), bytes and strings, nested."""
    if hasattr(obj, "nbytes"):
        return int(obj.nbytes)
    if isinstance(obj, (bytes, bytearray, memoryview, str)):
        return len(obj)
    if isinstance(obj, dict):
        return sum(nbytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(nbytes(v) for v in obj)
    return 8  # a number: one machine word


def _checks(reader: Any) -> float:
    counter = getattr(reader, "CHECK_S", None)
    return counter[0] if counter else 0.0


def _decode_file(
    reader: Any, data: bytes, name: str, batch: list[Any] | None = None, size: int = BATCH
) -> tuple[int, float, float, int, bool, Any]:
    """(samples, CPU s, wall s, decoded bytes, any sample failed, its first good sample) of
    one whole file; each good sample appended to ``batch`` (when given), which is
    collated and emptied whenever it holds ``size`` (outside the timers)."""
    n = decoded = 0
    cpu = wall = 0.0
    bad = False
    first: Any = None
    gen = reader.samples(data, name)
    while True:
        t0, c0, k0 = time.perf_counter(), time.thread_time(), _checks(reader)
        try:
            _, sample = next(gen)
        except StopIteration:
            break
        check = _checks(reader) - k0
        wall += max(time.perf_counter() - t0 - check, 0.0)
        cpu += max(time.thread_time() - c0 - check, 0.0)
        if isinstance(sample, Exception):
            bad = True
            continue
        if not n:
            first = sample
        n += 1
        decoded += nbytes(sample)
        if batch is not None:
            batch.append(sample)
            _held(batch, size)
    return n, cpu, wall, decoded, bad, first


def _keep(probe: list[Any], sample: Any) -> None:
    """Keep ``sample`` for ``collate_kind`` while the probe has room (COLLATE_PROBE samples,
    COLLATE_BYTES in all)."""
    if len(probe) < COLLATE_PROBE and sum(map(nbytes, probe)) + nbytes(sample) <= COLLATE_BYTES:
        probe.append(sample)


def collate_kind(samples: Sequence[Any]) -> str:
    """ "stack" when the loader --existing collate (torch's default_collate) makes one tensor
    of these samples, else "list" (one tensor per sample, their shapes differing)."""
    if len(samples) < 2:
        return "stack"
    from .existing_data import collate

    try:
        out = collate(list(samples))
    except RuntimeError:
        return "stack"  # not tensors at all: the real run fails on them the same way
    return "list" if isinstance(out, list) else "stack"


def _held(batch: list[Any], size: int) -> None:
    """Drop ``batch`` once it holds ``size`` samples, collated first, as a worker hands a
    batch on (what is left of the allocator's state is a worker's)."""
    if len(batch) >= size:
        from .existing_data import collate

        try:
            collate(batch)
        except RuntimeError:
            pass  # not tensors: the real run fails on them the same way
        batch.clear()


def _pass(
    reader: Any,
    files: list[tuple[int, bytes, str]],
    size: int,
    failed: set[int],
    probe: list[Any] | None = None,
) -> dict[int, tuple[int, float, float, int, bool, Any]]:
    """One pass over ``files`` (not in ``failed``): each decoded once, its samples held a
    batch at a time; a file whose decode raises goes into ``failed``. Each file's first
    sample goes to ``probe`` (when given) while it has room, and is not kept otherwise."""
    out: dict[int, tuple[int, float, float, int, bool, Any]] = {}
    batch: list[Any] = []
    for i, data, name in files:
        if i in failed:
            continue
        try:
            n, cpu, wall, decoded, bad, first = _decode_file(reader, data, name, batch, size)
            out[i] = (n, cpu, wall, decoded, bad, None)
            if probe is not None and n:
                _keep(probe, first)
            del first
        except ImportError:
            raise
        except Exception:  # noqa: BLE001 - a corrupt file: the reader's own errors
            failed.add(i)
    return out


def worker_start_s(reader: Any, data: bytes, name: str) -> float:
    """CPU seconds a worker's first decoded sample costs beyond its second decode of the same
    sample, in a child forked now (as a data loader forks its workers): the decoder's lazy
    start-up a worker pays once. The median of START_CHILDREN children; 0.0 without fork, or
    when no child reports within START_TIMEOUT_S (it is killed)."""
    got = [s for s in (_child_start_s(reader, data, name) for _ in range(START_CHILDREN)) if s]
    return max(statistics.median(got), 0.0) if got else 0.0


def _first_sample_cpu(reader: Any, data: bytes, name: str) -> float:
    """Thread CPU seconds to the first sample of ``data`` (not the whole of a shard)."""
    c0 = time.thread_time()
    next(iter(reader.samples(data, name)), None)
    return time.thread_time() - c0


def _child_start_s(reader: Any, data: bytes, name: str) -> float | None:
    if not hasattr(os, "fork"):
        return None
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: measured by what it writes back
        code = 1
        try:
            first = _first_sample_cpu(reader, data, name)
            second = _first_sample_cpu(reader, data, name)
            os.write(w, struct.pack("d", first - second))
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        ready, _, _ = select.select([r], [], [], START_TIMEOUT_S)
        got = os.read(r, 8) if ready else b""
        if not ready:
            os.kill(pid, signal.SIGKILL)  # a lock held across the fork: no figure
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    return struct.unpack("d", got)[0] if len(got) == 8 else None


def _read(
    picks: Sequence[int], open_file: Callable[[int], IO[bytes]], name_of: Callable[[int], str]
) -> tuple[list[tuple[int, bytes, str]], list[float], set[int]]:
    """(the files read, up to DECODE_FILES and DECODE_BYTES; each open's seconds; the files
    that could not be read)."""
    files: list[tuple[int, bytes, str]] = []
    opens: list[float] = []
    failed: set[int] = set()
    read = 0
    for k, i in enumerate(picks[:DECODE_FILES]):
        if k and read >= DECODE_BYTES:
            break
        try:
            t0 = time.perf_counter()
            with open_file(i) as f:
                opens.append(time.perf_counter() - t0)
                data = f.read()
        except OSError:
            failed.add(i)
            continue
        read += len(data)
        files.append((i, data, name_of(i)))
    return files, opens, failed


def measure(
    fmt: str,
    picks: Sequence[int],
    open_file: Callable[[int], IO[bytes]],
    name_of: Callable[[int], str],
    *,
    batch_size: int = BATCH,
    per_start: int = 0,
) -> tuple[DecodeCost | None, str, set[int]]:
    """(the decode cost over up to DECODE_FILES of ``picks``, a note, the files that failed
    to decode whole or in part): None with the reason when the format has no decoder here
    (raw bytes: nothing to decode), its library is missing, or no file decoded.
    ``open_file(i)`` opens file ``i`` read-only (timed as the open). Samples are held
    ``batch_size`` at a time; ``per_start``: the samples a worker decodes per start, over
    which its start-up is spread (0: left out)."""
    if fmt not in READERS:
        return None, f"{fmt} files: a sample is its bytes, no decode to measure", set()
    try:
        reader = get_reader(fmt)
    except EngineUnavailable as e:
        return None, f"not measured: {e.message}" + (f" ({e.hint})" if e.hint else ""), set()
    files, opens, failed = _read(picks, open_file, name_of)
    start = worker_start_s(reader, files[0][1], files[0][2]) if files else 0.0
    if files:
        try:  # the decoder's start-up, untimed; the last file, so no pass decodes one twice
            _decode_file(reader, files[-1][1], files[-1][2])  # in a row
        except ImportError:
            raise
        except Exception:  # noqa: BLE001 - a corrupt file: found again by the passes
            pass
    probe: list[Any] = []
    size = max(batch_size, 1)
    passes = [_pass(reader, files, size, failed, probe if not k else None) for k in range(REPEATS)]
    return _cost(files, opens, failed, passes, start, per_start, probe)


def _cost(
    files: list[tuple[int, bytes, str]],
    opens: list[float],
    failed: set[int],
    passes: list[dict[int, tuple[int, float, float, int, bool, Any]]],
    start: float,
    per_start: int,
    probe: list[Any],
) -> tuple[DecodeCost | None, str, set[int]]:
    """The passes' figures as a DecodeCost: each file's median over the passes (a file that
    failed in any is left out); ``probe``: decoded samples for ``collate_kind``."""
    per_file: list[tuple[int, float, float, int]] = []
    for i, _, _ in files:
        runs = [p[i] for p in passes if i in p]
        if not runs:
            continue
        n, _, _, decoded, bad, _ = runs[0]
        if bad or i in failed:
            failed.add(i)
        if n and len(runs) == len(passes):
            per_file.append(
                (n, statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs),
                 decoded)
            )  # fmt: skip
    if not per_file:
        return None, f"not measured: none of the {len(opens)} files opened decoded", failed
    samples = sum(p[0] for p in per_file)
    spread = start / per_start if per_start > 0 else 0.0
    cost = DecodeCost(
        cpu_s=sum(p[1] for p in per_file) / samples + spread,
        wall_s=sum(p[2] for p in per_file) / samples + spread,
        decoded_bytes=round(sum(p[3] for p in per_file) / samples),
        open_s=statistics.fmean(opens) if opens else 0.0,
        files=len(per_file),
        samples=samples,
        cpu_range=(min(p[1] / p[0] for p in per_file), max(p[1] / p[0] for p in per_file)),
        collate=collate_kind(probe),
        start_s=start,
        per_start=max(per_start, 0),
    )
    return cost, cost.basis(), failed
