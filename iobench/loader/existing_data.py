"""An EXISTING dataset through a real torch DataLoader: the IterableDataset whose workers read
each file read-only and whole, decode it as a training job would, apply the user's transform
and collate batches, timing every part; the terms those timings give.

Each worker takes every W-th file of a seeded per-epoch permutation, reads the file (open and
read timed apart), decodes its samples (wall and thread CPU time), runs the transform, and
collates a batch (torch's ``default_collate``; a list of tensors where shapes differ). Every
batch carries its worker's figures, so the split (storage read, decode CPU, collation) is
measured per worker. A file that cannot be read or decoded, or a sample whose decode or
transform raises, is counted and named, not fatal: a file that fails counts the samples it
held (``reader.count`` from its footer or index when that is readable, one for a
one-sample-per-file format, else estimated in the summary from its bytes at the samples per
byte of the files read whole). A batch is handed over once ``batch_size`` samples were tried
(good or failed), so a dataset whose every sample fails still ends at ``--steps``.

Every file is opened by name with ``open_regular`` (``O_NONBLOCK``, then ``fstat``): a FIFO,
a device or a socket swapped in is a failed file, never a blocking open; a file larger than
the memory one reader may hold (``read_limit``) is a failed file too, never read. Each
worker says in shared memory (``Stages``) which file it is on and at what stage, so a loop
that receives no batch within the stall timeout names the file or the transform.

Local files are opened ``O_RDONLY`` only. In mode ``dropped`` each file's clean pages are
dropped (``posix_fadvise DONTNEED``, which needs no write access) before and after its read,
and the first files of each worker are checked (a 4 KiB ``RWF_NOWAIT`` read, which fails when
the page is not cached): whether the drop held is measured, not assumed. In mode ``cached``
the page cache is left alone. A URL is read with one whole-object GET (no page cache).
"""

from __future__ import annotations

import importlib
import os
import re
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from operator import attrgetter
from typing import Any

import numpy as np
from torch.utils.data import IterableDataset

from ..core.errors import IobenchError, UsageError, quoted
from ..formats.registry import get_reader
from ..target import is_url, storage
from .existing_read import read_file

#: Names of failed samples kept per worker (the result shows the first few of all).
NAMES_KEPT = 5
_OBJ_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")  # Pillow names its BytesIO
#: What a worker is doing, as ``Stages`` records it (index = code).
STAGES = ("idle", "reading {f}", "decoding {f}", "in the transform {t} on {f}",
          "collating a batch after {f}")  # fmt: skip
IDLE, READING, DECODING, TRANSFORM, COLLATING = range(len(STAGES))


class Stages:
    """Per worker, in shared memory: the file (its index + 1, 0: none), the stage it is at
    (``STAGES``) and a count of its steps (each stage entered, each chunk read), written by
    the worker; the watchdog's thread takes a changed count as progress (``moved``) and,
    when none came within the stall timeout, says what each worker is on (``describe``)."""

    def __init__(self, workers: int):
        import multiprocessing as mp

        self.slots = mp.RawArray("q", 3 * max(workers, 1))  # inherited by the forked workers

    def set(self, wid: int, f: int, stage: int) -> None:
        k = 3 * wid
        self.slots[k], self.slots[k + 1] = f + 1, stage
        self.slots[k + 2] += 1

    def bump(self, wid: int) -> None:
        self.slots[3 * wid + 2] += 1

    def moved(self) -> int:
        """The workers' steps so far (it changes while any worker makes progress)."""
        return sum(self.slots[2::3])

    def describe(self, paths: tuple[str, ...], transform: str | None, shown: int = 3) -> str:
        """What the busy workers are on, e.g. ``worker 1 in the transform m:f on a/x.jpg``."""
        busy = []
        for wid in range(len(self.slots) // 3):
            f, stage = self.slots[3 * wid] - 1, self.slots[3 * wid + 1]
            if stage == IDLE or not 0 <= f < len(paths) or not 0 <= stage < len(STAGES):
                continue
            busy.append(f"worker {wid} " + STAGES[stage].format(f=paths[f], t=transform))
        if not busy:
            return "no batch from the DataLoader's workers"
        more = f" (+{len(busy) - shown} more)" if len(busy) > shown else ""
        return "no batch: " + "; ".join(busy[:shown]) + more


def load_transform(spec: str | None) -> Callable[[Any], Any] | None:
    """The user's transform from ``package.module:function``; UsageError when it is not one."""
    if not spec:
        return None
    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise UsageError(
            f"--transform {spec!r} is not MODULE:FUNCTION",
            hint="write e.g. --transform mypkg.augment:train_transform",
        )
    try:
        obj: Any = importlib.import_module(mod_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as e:
        raise UsageError(
            f"--transform {spec}: cannot import {mod_name} ({e})",
            hint="check the module path and PYTHONPATH",
        ) from None
    except AttributeError:
        raise UsageError(
            f"--transform {spec}: {mod_name} has no {attr}", hint="check the function's name"
        ) from None
    if not callable(obj):
        raise UsageError(f"--transform {spec} is not callable", hint="name a function")
    return obj


@dataclass
class BatchStats:
    """One worker's figures over the files and samples of one batch."""

    worker: int = 0
    samples: int = 0
    files: int = 0
    bytes: int = 0
    open_s: float = 0.0
    read_s: float = 0.0  # open included: the storage's share
    decode_s: float = 0.0  # wall, transform included
    decode_cpu_s: float = 0.0
    transform_s: float = 0.0
    collate_s: float = 0.0
    collate_cpu_s: float = 0.0
    check_s: float = 0.0  # iobench's own integrity checks (TFRecord CRCs), left out of decode
    failed: int = 0  # samples failed: one by one, or a failed file's count when known
    failed_names: list[str] = field(default_factory=list)
    failed_files: int = 0  # files that failed (whole, or part-way through)
    failed_transform: int = 0  # samples the user's transform raised on
    lost_files: int = 0  # failed files whose sample count is unknown (estimated from bytes)
    lost_bytes: int = 0  # their bytes
    lost_seen: int = 0  # their samples produced (good or failed) before they failed
    whole_files: int = 0  # files decoded to their end: the basis of the estimate
    whole_bytes: int = 0
    whole_samples: int = 0  # their samples, good and failed
    warned: int = 0  # samples whose decode raised a warning (Pillow's decompression bomb)
    warned_names: list[str] = field(default_factory=list)
    cache_checked: int = 0
    cache_resident: int = 0  # checked files whose first page stayed cached after the drop
    ready_t: float = 0.0  # perf_counter (CLOCK_MONOTONIC, one clock for all processes) at collated

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # its values in field order: a tenth of the default pickle's cost (a dict of names),
        # paid twice per batch in the hand-off from the worker
        return _batch_stats, tuple(getattr(self, k) for k in _FIELDS)

    def fail(self, name: str, why: BaseException | str, samples: int = 1) -> None:
        self.failed += samples
        _name(self.failed_names, name, why)

    def warn(self, name: str, caught: list[tuple[type, Any]]) -> None:
        self.warned += 1
        category, message = caught[0]
        _name(self.warned_names, name, f"{category.__name__}: {message}")


_FIELDS = tuple(f.name for f in fields(BatchStats))


def _batch_stats(*values: Any) -> BatchStats:
    """A BatchStats from its values in field order (its pickle, ``BatchStats.__reduce__``)."""
    return BatchStats(*values)


#: While a sample decodes ("on"), the warnings its libraries raise ("caught"): counted per
#: sample and named in the result, not printed (``decode_warnings``).
_DECODING: dict[str, Any] = {"on": False, "caught": []}
#: The modules whose warnings are shown every time inside ``decode_warnings`` (not once per
#: place), so that each sample's is counted: the readers and the libraries they decode with.
DECODER_MODULES = r"(PIL|h5py|pyarrow|numpy|iobench\.formats)(\..*)?$"


@contextmanager
def decode_warnings() -> Iterator[None]:
    """Inside: a warning raised while a sample decodes (Pillow's DecompressionBombWarning) is
    recorded for its sample, not printed; any other is shown as before. Entered once around
    the loop (forked workers inherit it), never per sample: entering costs ~10-50 µs."""
    with warnings.catch_warnings():
        warnings.filterwarnings("always", module=DECODER_MODULES)
        shown = warnings.showwarning

        def record(message: Any, category: type, *args: Any, **kw: Any) -> None:
            if _DECODING["on"]:
                _DECODING["caught"].append((category, message))
            else:
                shown(message, category, *args, **kw)

        warnings.showwarning = record
        yield


#: The per-worker figures summed over batches (``existing._add``, the summary's totals).
SUMMED = ("samples", "files", "bytes", "open_s", "read_s", "decode_s", "decode_cpu_s",
          "transform_s", "collate_s", "collate_cpu_s", "check_s", "failed", "failed_files",
          "failed_transform", "lost_files", "lost_bytes", "lost_seen", "whole_files",
          "whole_bytes", "whole_samples", "warned", "cache_checked", "cache_resident")  # fmt: skip
#: A batch's SUMMED figures, in that order, in one call.
SUMMED_OF = attrgetter(*SUMMED)


def _name(names: list[str], name: str, why: BaseException | str) -> None:
    if len(names) < NAMES_KEPT:
        text = why if isinstance(why, str) else f"{type(why).__name__}: {why}"
        text = _OBJ_REPR.sub("(in memory)", text.replace("\n", " "))
        names.append(quoted(f"{name}: {text}", 200))


def collate(samples: list[Any]) -> Any:
    """A batch as a training job's collate makes it: stacked tensors, or a list of them.

    RuntimeError (the run fails, one line) when torch cannot make tensors of the samples at
    all, as a training job's DataLoader would fail on them."""
    from torch.utils.data import default_collate, default_convert

    try:
        return default_collate(samples)
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError):
        pass  # shapes or types differ: one tensor (or structure of them) per sample
    try:
        return [default_convert(s) for s in samples]
    except Exception as e:  # noqa: BLE001 - named in the run's one line
        raise RuntimeError(
            f"collating a batch failed ({type(e).__name__}: {str(e).splitlines()[0][:160]}): "
            "the samples (after --transform) must be arrays or tensors torch can take"
        ) from None


class ExistingDataset(IterableDataset):
    """A torch IterableDataset over an existing dataset's files (see the module docstring).

    Yields ``(batch, BatchStats)``: the good ones of ``batch_size`` samples tried, collated,
    with the figures of the worker that made it (a worker's last batch of an epoch may be
    short; a batch whose every sample failed is empty).
    """

    def __init__(
        self,
        root: str,
        paths: tuple[str, ...],
        fmt: str,
        batch_size: int,
        mode: str,
        *,
        transform: str | None = None,
        storage_options: dict[str, Any] | None = None,
        seed: int = 1,
        limit: int = 0,
        stages: Stages | None = None,
    ):
        self.root, self.paths, self.fmt, self.batch_size = root, paths, fmt, batch_size
        self.mode, self.transform, self.seed = mode, transform, seed
        self.storage_options = storage_options or {}
        self.limit, self.stages = limit, stages
        self.real_root = None if is_url(root) else os.path.realpath(root)
        self.epoch = 0
        self._dir: tuple[int, int] | None = None  # (pid, the dataset directory open in it)

    def _beneath(self, rel: str) -> tuple[int, str] | None:
        """(the dataset directory, opened once in this process, ``rel``) for a file directly
        in it (``open_beneath``); None for one in a subdirectory (its path is checked)."""
        if self.real_root is None or "/" in rel:
            return None
        pid = os.getpid()
        if self._dir is None or self._dir[0] != pid:  # a forked worker opens its own
            try:
                fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError:
                return None
            self._dir = (pid, fd)
        return self._dir[1], rel

    def close(self) -> None:
        """Close this process's descriptor of the dataset directory (``_beneath``)."""
        if self._dir is not None and self._dir[0] == os.getpid():
            os.close(self._dir[1])
        self._dir = None

    def _my_files(self) -> tuple[int, list[int]]:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        wid, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.paths))
        return wid, order[wid::workers].tolist()

    def _at(self, wid: int, f: int, stage: int) -> None:
        if self.stages is not None:
            self.stages.set(wid, f, stage)

    def __iter__(self) -> Iterator[tuple[Any, BatchStats]]:
        wid, mine = self._my_files()
        reader = get_reader(self.fmt)
        fn = load_transform(self.transform)
        # the batch being filled: a file's samples may span batches, so its figures go to
        # whichever batch is current when they are measured
        cur = [BatchStats(worker=wid)]
        batch: list[Any] = []
        for f in mine:
            for sample in self._file_samples(reader, wid, f, fn, cur):
                if sample is not _FAILED:
                    batch.append(sample)
                tried = len(batch) + cur[0].failed + cur[0].lost_files  # good or failed
                if tried >= self.batch_size:
                    self._at(wid, f, COLLATING)
                    yield self._collated(batch, cur[0])
                    cur[0], batch = BatchStats(worker=wid), []
        self._at(wid, -1, IDLE)
        st = cur[0]
        if batch or st.files or st.failed or st.failed_files:
            yield self._collated(batch, st)

    def _collated(self, batch: list[Any], st: BatchStats) -> tuple[Any, BatchStats]:
        t0, c0 = time.perf_counter(), time.thread_time()
        out = collate(batch) if batch else []
        st.collate_s = time.perf_counter() - t0
        st.collate_cpu_s = time.thread_time() - c0
        st.samples = len(batch)
        st.ready_t = time.perf_counter()
        return out, st

    def _file_failed(
        self, st: BatchStats, reader: Any, rel: str, why: Any, data: Any, seen: int
    ) -> None:
        """Count a file that failed after ``seen`` of its samples: the samples it held (its
        footer's count, or 1 for a one-sample-per-file format) less those seen, at least one;
        when unknown, its bytes for the summary's estimate (``lost_*``)."""
        st.failed_files += 1
        known = _count(reader, data)
        if known is not None:
            st.fail(rel, why, max(known - seen, 1))
            return
        size = len(data) if data is not None else self._size(rel)
        st.lost_files, st.lost_bytes, st.lost_seen = (
            st.lost_files + 1, st.lost_bytes + size, st.lost_seen + seen,
        )  # fmt: skip
        _name(st.failed_names, rel, why)

    def _size(self, rel: str) -> int:
        if is_url(self.root):
            return 0
        try:
            return os.stat(storage.join(self.root, rel)).st_size
        except OSError:
            return 0

    def _file_samples(
        self, reader: Any, wid: int, f: int, fn: Callable[[Any], Any] | None, cur: list[BatchStats]
    ) -> Iterator[Any]:
        """The samples of file ``f`` (``_FAILED`` for each that failed, so the batch counts
        it); failures and times counted in ``cur[0]`` (the current batch's figures) as they
        happen."""
        rel = self.paths[f]
        self._at(wid, f, READING)
        try:
            path = storage.join(self.root, rel)
            moved = None if (stages := self.stages) is None else lambda: stages.bump(wid)
            data = read_file(
                path, self.mode, cur[0], self.storage_options, self.limit, self.real_root, moved,
                getattr(reader, "ARRAY_INPUT", False), self._beneath(rel),
                getattr(reader, "read_fd", None),
            )  # fmt: skip
        except (OSError, MemoryError) as e:
            why = e if isinstance(e, MemoryError) else (e.strerror or str(e))
            self._file_failed(cur[0], reader, rel, why, None, 0)
            yield _FAILED
            return
        cur[0].files += 1
        cur[0].bytes += len(data)
        gen, seen = reader.samples(data, rel), 0
        while True:
            self._at(wid, f, DECODING)
            t0, c0, k0 = time.perf_counter(), time.thread_time(), _checks(reader)
            try:
                _DECODING["on"] = True
                try:
                    key, sample = next(gen)
                finally:
                    _DECODING["on"] = False
            except StopIteration:
                _spent(cur[0], t0, c0, k0, reader)
                cur[0].whole_files += 1
                cur[0].whole_bytes += len(data)
                cur[0].whole_samples += seen
                return
            except (ImportError, IobenchError):
                raise  # a missing optional library, a stop signal: not a corrupt file
            except Exception as e:  # noqa: BLE001 - a corrupt file: counted, named, skipped
                _spent(cur[0], t0, c0, k0, reader)
                self._file_failed(cur[0], reader, rel, e, data, seen)
                yield _FAILED
                return
            seen += 1
            if _DECODING["caught"]:
                cur[0].warn(key, _DECODING["caught"])
                _DECODING["caught"].clear()
            ok = not isinstance(sample, Exception)
            if ok and fn is not None:
                self._at(wid, f, TRANSFORM)
                sample, ok = _transformed(fn, sample, cur[0])
            _spent(cur[0], t0, c0, k0, reader)
            if ok:
                yield sample
            else:
                cur[0].fail(key, sample)
                yield _FAILED


def _transformed(fn: Callable[[Any], Any], sample: Any, st: BatchStats) -> tuple[Any, bool]:
    """(the user's transform of ``sample``, True), or (what it raised, False), timed."""
    t1 = time.perf_counter()
    try:
        return fn(sample), True
    except IobenchError:
        raise  # a stop signal raised inside it (the wait is interruptible): not its failure
    except Exception as e:  # noqa: BLE001 - the user's code: counted like corrupt
        st.failed_transform += 1
        return e, False
    finally:
        st.transform_s += time.perf_counter() - t1


#: What ``_file_samples`` yields for a sample that failed (the batch counts it as tried).
_FAILED = object()


def _count(reader: Any, data: Any) -> int | None:
    """The samples a file held, when known without decoding it: 1 for a one-sample-per-file
    format, else the reader's ``count`` of the bytes (a footer or index), else None."""
    if getattr(reader, "SAMPLES_PER_FILE", None) == 1:
        return 1
    counter = getattr(reader, "count", None)
    if counter is None or data is None:
        return None
    try:
        n = counter(data)
    except Exception:  # noqa: BLE001 - its footer is unreadable too: estimated from its bytes
        return None
    return int(n) if n is not None and n >= 0 else None


def _spent(st: BatchStats, t0: float, c0: float, k0: float, reader: Any) -> None:
    """Add the decode wall and thread CPU time since (t0, c0) to ``st``, less the reader's own
    checks since ``k0`` (``reader.CHECK_S``: iobench's Python CRCs, which a training job's C++
    reader does ~100× faster), kept apart in ``check_s``."""
    check = _checks(reader) - k0
    st.check_s += check
    st.decode_s += max(time.perf_counter() - t0 - check, 0.0)
    st.decode_cpu_s += max(time.thread_time() - c0 - check, 0.0)


def _checks(reader: Any) -> float:
    counter = getattr(reader, "CHECK_S", None)
    return counter[0] if counter else 0.0


@dataclass(frozen=True)
class PipelineTerms:
    """The measured terms of one input pipeline (what a "what would it take" model needs).

    Per-sample and per-file figures are worker seconds summed over workers and divided by
    the samples (files) they produced; ``read_bps`` is one worker stream's bandwidth (bytes
    over the seconds spent reading), ``read_bps_aggregate`` what the loop received (bytes over
    its wall time), ``file_open_per_s`` one worker's open rate.
    """

    read_s_per_sample: float
    open_s_per_file: float
    decode_s_per_sample: float  # CPU (thread time) decoding and transforming
    collate_s_per_batch: float  # CPU (thread time)
    compute_s_per_step: float
    batch_size: int
    workers: int
    cpu_cores: int
    files: int
    bytes: int
    samples_per_file: float
    mean_file_bytes: float
    read_bps: float
    read_bps_aggregate: float
    file_open_per_s: float
    au: float
    cache: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PipelineTerms:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


def cpu_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
