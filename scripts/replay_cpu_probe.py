"""CPU per sample and per step, by process, for ``scripts/bench_replay.py``.

    python scripts/replay_cpu_probe.py DIR ARGS...   # ``iobench ARGS...`` with the probes

Before iobench's command line runs, wraps three of its functions so that each process writes
into DIR what it spent, by its own CPU clocks (which load does not stretch the way it stretches
wall time):

- ``worker``: each data-loader worker's process CPU (every thread: the read, the decode or the
  replay's burn, the collate, and the queue's feeder thread moving the batch into shared
  memory) from the end of its first batch to the end of its last, and the samples of those
  batches (loader --existing's ``ExistingDataset._collated``, the replay's
  ``collate_samples``: each called once a batch, in the worker);
- ``main``: the main loop's thread CPU from one batch received to the next (the hand-off's
  rebuild, the loop's own bookkeeping, the emulated compute), the first step of each loader
  iterator left out (torch's ``_MultiProcessingDataLoaderIter.__next__``);
- ``decode``: each image decode's thread CPU (``formats.image.samples``), the first in each
  process apart (the codec's start-up): in the profile's process and the real run's workers.

The replay's calibration (``loader.run.calibrate``) is recorded as its own phase. The probes
write only at the end of a batch (outside the intervals they measure) and at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

_DIR = [""]
_PHASE = ["run"]
#: per (kind, pid, thread): [CPU s, units, intervals, first decode CPU s, mark]
_ACC: dict[tuple[str, int, int], list[float]] = {}


def _acc(kind: str) -> list[float]:
    key = (kind, os.getpid(), threading.get_ident())
    if key not in _ACC:
        _ACC[key] = [0.0, 0.0, 0.0, -1.0, -1.0]
    return _ACC[key]


def _flush() -> None:
    pid = os.getpid()
    for (kind, p, tid), (cpu, units, n, first, _) in list(_ACC.items()):
        if p != pid or not (n or first >= 0):
            continue
        name = os.path.join(_DIR[0], f"{kind}-{_PHASE[0]}-{pid}-{tid}.json")
        with open(name, "w") as fh:
            json.dump({"kind": kind, "phase": _PHASE[0], "cpu_s": cpu, "units": units,
                       "intervals": n, "first_s": first}, fh)  # fmt: skip


def _batch_done(samples: int) -> None:
    """In a worker: its process CPU since its previous batch ended (none for its first)."""
    a = _acc("worker")
    now = time.process_time()
    if a[4] >= 0:
        a[0] += now - a[4]
        a[1] += samples
        a[2] += 1
        _flush()
    a[4] = time.process_time()


def _step_done() -> None:
    """In the main loop: its thread's CPU since the previous batch of this iterator."""
    a = _acc("main")
    now = time.thread_time()
    if a[4] >= 0:
        a[0] += now - a[4]
        a[1] += 1
        a[2] += 1
        _flush()
    a[4] = time.thread_time()


def install(out_dir: str) -> None:
    import torch.utils.data.dataloader as dl

    from iobench.formats import image
    from iobench.loader import existing_data, loop, run

    _DIR[0] = out_dir
    collated = existing_data.ExistingDataset._collated

    def real_collated(self: Any, batch: list[Any], st: Any) -> Any:
        out = collated(self, batch, st)
        _batch_done(len(batch))
        return out

    collate = loop.collate_samples

    def rep_collate(batch: list[Any], per_sample: bool = False, pool: Any = None) -> Any:
        out = collate(batch, per_sample, pool)
        _batch_done(len(batch))
        return out

    it_cls = dl._MultiProcessingDataLoaderIter
    nxt, it_init = it_cls.__next__, it_cls.__init__

    def init(self: Any, *a: Any, **k: Any) -> None:
        _acc("main")[4] = -1.0  # a new iterator: its first step is left out
        it_init(self, *a, **k)

    def next_(self: Any) -> Any:
        out = nxt(self)
        _step_done()
        return out

    decode = image.samples

    def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
        c0 = time.thread_time()
        for item in decode(data, name):
            a, spent = _acc("decode"), time.thread_time() - c0
            if a[3] < 0:
                a[3] = spent
            else:
                a[0], a[1], a[2] = a[0] + spent, a[1] + 1, a[2] + 1
            yield item
            c0 = time.thread_time()

    calibrate = run.calibrate

    def calibrated(*a: Any, **k: Any) -> Any:
        _PHASE[0] = "calibration"
        try:
            return calibrate(*a, **k)
        finally:
            _flush()
            _ACC.clear()  # the run's figures start from nothing
            _PHASE[0] = "run"

    existing_data.ExistingDataset._collated = real_collated  # type: ignore[method-assign]
    loop.collate_samples = rep_collate
    it_cls.__init__, it_cls.__next__ = init, next_  # type: ignore[method-assign]
    image.samples = samples
    run.calibrate = calibrated
    atexit.register(_flush)


def main() -> None:
    install(sys.argv[1])
    from iobench.cli.app import main as iobench_main

    sys.argv = ["iobench", *sys.argv[2:]]
    iobench_main()


if __name__ == "__main__":
    main()
