"""What an existing dataset's samples cost a training job beyond their bytes: the per-file open,
and the decode (CPU and wall time, and the decoded size), measured on a sample of its files
the way ``iobench loader PATH --existing`` decodes them (the same reader, ``formats.READERS``;
each ``next()`` of ``reader.samples`` timed by ``perf_counter`` and ``thread_time``, the
reader's own integrity checks left out as ``existing_data`` leaves them out).

``iobench profile`` writes these figures into the profile (``decode_s``, ``decoded_size``,
``open_s``), and the synthetic loader spends ``decode_s`` per sample in its workers
(``loader.torchdata.DecodeEmulation``), so a replay keeps what made the real pipeline slow.
Measured in one process, one file after another, after one file decoded untimed (the
decoder's own start-up), each file REPEATS times and its median kept: a worker's cost with
no other worker in its way.
"""

from __future__ import annotations

import statistics
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
#: Each file decoded this many times, its median kept: one decode on a busy host can take
#: half as long again (measured 1.9–4.7 ms for the same kind of JPEG), and a mean over 32
#: single decodes came out 10–25 % above what the same files cost the real run's workers.
REPEATS = 3
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

    def basis(self) -> str:
        lo, hi = self.cpu_range
        handed = "one tensor a batch" if self.collate == "stack" else "one tensor per sample"
        return (
            f"CPU {format_seconds(self.cpu_s)} (wall {format_seconds(self.wall_s)}) per sample, "
            f"mean over {self.samples:,} samples of {self.files} files (per file "
            f"{format_seconds(lo)}–{format_seconds(hi)}); decoded {format_bytes(self.decoded_bytes)}"
            f" per sample, handed on as {handed}; open {format_seconds(self.open_s)} per file; "
            "one process, the loader --existing reader"
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


def _decode_file(reader: Any, data: bytes, name: str) -> tuple[int, float, float, int, bool, Any]:
    """(samples, CPU s, wall s, decoded bytes, any sample failed, its first good sample) of
    one whole file."""
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


def measure(
    fmt: str,
    picks: Sequence[int],
    open_file: Callable[[int], IO[bytes]],
    name_of: Callable[[int], str],
) -> tuple[DecodeCost | None, str, set[int]]:
    """(the decode cost over up to DECODE_FILES of ``picks``, a note, the files that failed
    to decode whole or in part): None with the reason when the format has no decoder here
    (raw bytes: nothing to decode), its library is missing, or no file decoded.
    ``open_file(i)`` opens file ``i`` read-only (timed as the open)."""
    if fmt not in READERS:
        return None, f"{fmt} files: a sample is its bytes, no decode to measure", set()
    try:
        reader = get_reader(fmt)
    except EngineUnavailable as e:
        return None, f"not measured: {e.message}" + (f" ({e.hint})" if e.hint else ""), set()
    opens: list[float] = []
    per_file: list[tuple[int, float, float, int]] = []
    failed: set[int] = set()
    probe: list[Any] = []
    read = 0
    for k, i in enumerate(picks[:DECODE_FILES]):
        if k and read >= DECODE_BYTES:
            break
        try:
            t0 = time.perf_counter()
            with open_file(i) as f:
                opens.append(time.perf_counter() - t0)
                data = f.read()
            read += len(data)
            if k == 0:
                _decode_file(reader, data, name_of(i))  # the decoder's start-up, untimed
            runs = [_decode_file(reader, data, name_of(i)) for _ in range(REPEATS)]
            n, _, _, decoded, bad, first = runs[0]
            cpu = statistics.median(r[1] for r in runs)
            wall = statistics.median(r[2] for r in runs)
        except ImportError:
            raise
        except Exception:  # noqa: BLE001 - OSError, a corrupt file: the reader's own errors
            failed.add(i)
            continue
        if bad:
            failed.add(i)
        if n:
            per_file.append((n, cpu, wall, decoded))
            _keep(probe, first)
    if not per_file:
        return None, f"not measured: none of the {len(opens)} files opened decoded", failed
    samples = sum(p[0] for p in per_file)
    cost = DecodeCost(
        cpu_s=sum(p[1] for p in per_file) / samples,
        wall_s=sum(p[2] for p in per_file) / samples,
        decoded_bytes=round(sum(p[3] for p in per_file) / samples),
        open_s=statistics.fmean(opens) if opens else 0.0,
        files=len(per_file),
        samples=samples,
        cpu_range=(min(p[1] / p[0] for p in per_file), max(p[1] / p[0] for p in per_file)),
        collate=collate_kind(probe),
    )
    return cost, cost.basis(), failed
