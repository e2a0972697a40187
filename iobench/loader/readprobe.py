"""What the save costs the loader's reads, measured without the loader: the read probe of
``iobench loader --during-checkpoint MODEL``.

The contention model needs, from separate measurements, the read the loader keeps while the
save runs. Where reads and writes share one server (a CephFS, an NFS head, one disk) no rule
of rates alone gives it: the one-machine CephFS's save left the loader 4-37 % of its read
alone, a figure no share of the two rates alone predicted (docs/validation/during-checkpoint.md).
What a save does to a read there is make it wait: behind the writers' queued bytes, for the
server's CPU. So the probe measures that wait directly, as a storage figure: ``streams``
threads (the loader's workers, every rank's) each read whole files of the loader's own
dataset back to back, through the loader's own reader (``formats.FileReader``: O_DIRECT, or
pages dropped, as the loader reads) and nothing else (no decode, no collate, no compute), for
``IDLE_S`` with the storage to themselves and then while the same save is written once more,
as it was alone. Each read's start, end and payload bytes come back; ``read_stats`` gives a
window's read rate by Little's law (streams × bytes ÷ the time the reads took, robust in
the short window of one save) and the read time's mean and percentiles from a histogram.

The probe runs in one forked process (its threads release the GIL in every read), beside the
second save only: the first save alone stays alone, the rate every during-save is compared
with. It reads, never writes, and only the files the loader's dataset laid out in the run
directory.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..result.stats import Histogram
from ..target import worker_signals
from .beside import ForkedHelper
from .ckpt_writer import save_rate, save_seconds
from .dataset import DatasetIndex
from .torchdata import _die_with_parent

IDLE_S = 2.0  # the probe with the storage to itself, just before the saves beside it
GAP_S = 0.5  # between two probed saves (not counted: the last one's files are going)
FINISH_S = 120.0  # the most the probe may take to hand its reads back
QUANTILES = 21  # the read time's quantiles kept (every 5 %)

Read = tuple[float, float, int]  # start, end (perf_counter), payload bytes


@dataclass(frozen=True)
class ProbeSpec:
    """The loader's reads to probe with: its dataset, how it reads it, how many at once."""

    index: DatasetIndex
    mode: str  # the loader's cache mode: direct | dropped | cached | buffered
    streams: int  # every rank's workers: the reads the loader has in flight at once
    seed: int = 1


def _stream(spec: ProbeSpec, k: int, stop: Any, out: list[Read], errors: list[str]) -> None:
    from ..formats.reader import FileReader

    idx = spec.index
    local = not idx.remote
    reader = FileReader(local and spec.mode == "direct", local and spec.mode == "dropped",
                        storage_options=idx.storage_options or None)  # fmt: skip
    order = list(range(idx.n_files))
    random.Random(spec.seed * 1009 + k).shuffle(order)
    i, f = 0, order[0]
    try:
        while not stop.is_set():
            f = order[i % len(order)]
            i += 1
            t0 = time.perf_counter()
            data = reader.read_bytes(idx.path(f))
            t1 = time.perf_counter()
            if isinstance(data, memoryview):
                data.release()
            out.append((t0, t1, sum(idx.sizes[f])))
    except OSError as e:
        errors.append(f"read probe: {e.strerror or e} reading {idx.paths[f]}")


def _probe_main(spec: ProbeSpec, stop: Any, conn: Any) -> None:
    worker_signals()
    _die_with_parent()
    reads: list[list[Read]] = [[] for _ in range(spec.streams)]
    errors: list[str] = []
    threads = [threading.Thread(target=_stream, args=(spec, k, stop, reads[k], errors),
                                daemon=True) for k in range(spec.streams)]  # fmt: skip
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        conn.send(("error", errors[0]) if errors else ("reads", [r for rs in reads for r in rs]))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"read probe: {type(e).__name__}: {e}"))
    finally:
        conn.close()


class ReadProbe(ForkedHelper):
    """The probe's process: ``start``, then ``finish`` for every read it made."""

    def __init__(self, spec: ProbeSpec):
        super().__init__()
        if spec.streams < 1 or spec.index.n_files < 1:
            raise ValueError("read probe: at least one stream and one file")
        self.spec = spec

    def start(self) -> None:
        self._spawn(_probe_main, "iobench-read-probe", self.spec)

    def finish(self, timeout_s: float = FINISH_S) -> list[Read]:
        return sorted(self._answer("reads", "read probe", timeout_s) or [])


def read_stats(reads: list[Read], windows: Sequence[tuple[float, float]],
               streams: int) -> dict[str, Any] | None:  # fmt: skip
    """The reads that started in the ``windows`` ([a, b) each): how many, their bytes, the
    read rate by Little's law (``streams`` × their bytes ÷ their summed read time: each
    stream always has one read in flight) and the read time's mean and percentiles (from a
    histogram). None without a read that ended, or without time."""
    got = [(t0, t1, n) for t0, t1, n in reads if t1 > t0 and any(a <= t0 < b for a, b in windows)]
    if not got or streams < 1:
        return None
    secs = np.array([t1 - t0 for t0, t1, _ in got])
    nbytes = sum(n for _, _, n in got)
    hist = Histogram()
    hist.record_array((secs * 1e9).astype(np.int64))
    s = hist.summary_s()
    return {
        "reads": len(got), "bytes": nbytes, "seconds": sum(b - a for a, b in windows),
        "read_bps": streams * nbytes / float(secs.sum()),
        "read_s": {k: s[k] for k in ("mean", "p50", "p99", "max")},
        # the read time's distribution, q = 0, 0.05, …, 1
        "quantiles_s": hist.quantiles_s([i / (QUANTILES - 1) for i in range(QUANTILES)]),
    }  # fmt: skip


def probe_block(spec: ProbeSpec, reads: list[Read], idle: tuple[float, float],
                saves: Sequence[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """``loader.during_checkpoint.read_probe``: the probe alone, beside each save and beside
    them all (pooled), and the saves' own rate beside it."""
    per = []
    for sv in saves:
        st = read_stats(reads, [(sv["start"], sv["end"])], spec.streams)
        per.append({"read_bps": st["read_bps"] if st else None, "reads": st["reads"] if st else 0,
                    "save_bps": save_rate(sv), "complete": bool(sv["complete"])})  # fmt: skip
    took = sum(save_seconds(sv) for sv in saves)
    rates = [p["read_bps"] for p in per if p["read_bps"]]
    return {
        "streams": spec.streams, "mode": spec.mode, "saves": per,
        "idle": read_stats(reads, [idle], spec.streams),
        "during": read_stats(reads, [(sv["start"], sv["end"]) for sv in saves], spec.streams),
        "during_range_bps": [min(rates), max(rates)] if rates else None,
        "save_bps": sum(sv["bytes"] for sv in saves) / took if took > 0 else None,
        "basis": (
            f"{spec.streams} reader thread(s), one a loader worker, each reading whole files "
            "of the loader's dataset back to back through the loader's reader (no decode, no "
            f"compute): {IDLE_S:g} s alone, then while the save was written again as it was "
            f"alone, {len(saves)} time(s); each window's read rate = streams × bytes ÷ the read "
            "time of the reads that started in it (Little's law), pooled over the saves and "
            "per save (the range), read time from a histogram"
        ),
    }  # fmt: skip
