"""An EXISTING dataset through a real torch DataLoader: the IterableDataset whose workers read
each file read-only and whole, decode it as a training job would, apply the user's transform
and collate batches, timing every part; the terms those timings give.

Each worker takes every W-th file of a seeded per-epoch permutation, reads the file (open and
read timed apart), decodes its samples (wall and thread CPU time), runs the transform, and
collates a batch (torch's ``default_collate``; a list of tensors where shapes differ). Every
batch carries its worker's figures, so the split (storage read, decode CPU, collation) is
measured per worker. A file that cannot be read or decoded, or a sample whose decode or
transform raises, is counted and named, not fatal.

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
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from torch.utils.data import IterableDataset

from .. import storage
from ..errors import UsageError, quoted
from ..formats.registry import get_reader
from ..target import is_url

#: Names of failed samples kept per worker (the result shows the first few of all).
NAMES_KEPT = 5
_OBJ_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")  # Pillow names its BytesIO
#: Files per worker whose page-cache drop is checked.
CACHE_CHECKS = 8


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
    failed: int = 0
    failed_names: list[str] = field(default_factory=list)
    cache_checked: int = 0
    cache_resident: int = 0  # checked files whose first page stayed cached after the drop
    ready_t: float = 0.0  # perf_counter (CLOCK_MONOTONIC, one clock for all processes) at collated

    def fail(self, name: str, why: BaseException | str) -> None:
        self.failed += 1
        if len(self.failed_names) < NAMES_KEPT:
            text = why if isinstance(why, str) else f"{type(why).__name__}: {why}"
            text = _OBJ_REPR.sub("(in memory)", text.replace("\n", " "))
            self.failed_names.append(quoted(f"{name}: {text}", 200))


def _resident(fd: int) -> bool | None:
    """Is the file's first page in the page cache? (None: cannot tell here.)"""
    flag = getattr(os, "RWF_NOWAIT", None)
    if flag is None:
        return None
    buf = bytearray(4096)
    try:
        os.preadv(fd, [buf], 0, flag)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return None


def read_file(path: str, mode: str, st: BatchStats, opts: dict[str, Any] | None) -> bytes:
    """The whole file, read-only; open and read timed into ``st`` (and the cache checked)."""
    t0 = time.perf_counter()
    if is_url(path):
        data = storage.read_bytes(path, opts)
        st.read_s += time.perf_counter() - t0
        return data
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        st.open_s += time.perf_counter() - t0
        if mode == "dropped":
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if st.cache_checked < CACHE_CHECKS and size:
                resident = _resident(fd)
                if resident is not None:
                    st.cache_checked += 1
                    st.cache_resident += int(resident)
        t1 = time.perf_counter()
        chunks, got = [], 0
        while True:
            chunk = os.read(fd, max(size - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if mode == "dropped":
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        st.read_s += (t1 - t0) + (time.perf_counter() - t1)
        return data
    finally:
        os.close(fd)


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

    Yields ``(batch, BatchStats)``: up to ``batch_size`` samples collated, with the figures
    of the worker that made it (a worker's last batch of an epoch may be short).
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
    ):
        self.root, self.paths, self.fmt, self.batch_size = root, paths, fmt, batch_size
        self.mode, self.transform, self.seed = mode, transform, seed
        self.storage_options = storage_options or {}
        self.epoch = 0

    def _my_files(self) -> tuple[int, list[int]]:
        from torch.utils.data import get_worker_info

        info = get_worker_info()
        wid, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        order = np.random.default_rng([self.seed, self.epoch]).permutation(len(self.paths))
        return wid, order[wid::workers].tolist()

    def __iter__(self) -> Iterator[tuple[Any, BatchStats]]:
        wid, mine = self._my_files()
        reader = get_reader(self.fmt)
        fn = load_transform(self.transform)
        # the batch being filled: a file's samples may span batches, so its figures go to
        # whichever batch is current when they are measured
        cur = [BatchStats(worker=wid)]
        batch: list[Any] = []
        for f in mine:
            for sample in self._file_samples(reader, f, fn, cur):
                batch.append(sample)
                if len(batch) == self.batch_size:
                    yield self._collated(batch, cur[0])
                    cur[0], batch = BatchStats(worker=wid), []
        st = cur[0]
        if batch or st.files or st.failed:
            yield self._collated(batch, st)

    def _collated(self, batch: list[Any], st: BatchStats) -> tuple[Any, BatchStats]:
        t0, c0 = time.perf_counter(), time.thread_time()
        out = collate(batch) if batch else []
        st.collate_s = time.perf_counter() - t0
        st.collate_cpu_s = time.thread_time() - c0
        st.samples = len(batch)
        st.ready_t = time.perf_counter()
        return out, st

    def _file_samples(
        self, reader: Any, f: int, fn: Callable[[Any], Any] | None, cur: list[BatchStats]
    ) -> Iterator[Any]:
        """The good samples of file ``f``; failures and times counted in ``cur[0]`` (the
        current batch's figures) as they happen."""
        rel = self.paths[f]
        try:
            data = read_file(storage.join(self.root, rel), self.mode, cur[0], self.storage_options)
        except OSError as e:
            cur[0].fail(rel, e.strerror or str(e))
            return
        cur[0].files += 1
        cur[0].bytes += len(data)
        gen = reader.samples(data, rel)
        while True:
            t0, c0, k0 = time.perf_counter(), time.thread_time(), _checks(reader)
            try:
                key, sample = next(gen)
            except StopIteration:
                _spent(cur[0], t0, c0, k0, reader)
                return
            except ImportError:
                raise  # a missing optional library is not a corrupt file
            except Exception as e:  # noqa: BLE001 - a corrupt file: counted, named, skipped
                _spent(cur[0], t0, c0, k0, reader)
                cur[0].fail(rel, e)
                return
            ok = not isinstance(sample, Exception)
            if ok and fn is not None:
                t1 = time.perf_counter()
                try:
                    sample = fn(sample)
                except Exception as e:  # noqa: BLE001 - the user's code: counted like corrupt
                    sample, ok = e, False
                cur[0].transform_s += time.perf_counter() - t1
            _spent(cur[0], t0, c0, k0, reader)
            if ok:
                yield sample
            else:
                cur[0].fail(key, sample)


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
