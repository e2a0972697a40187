"""Sample file formats: write a training dataset's files, and read them back really decoded.

- ``raw``: the samples back to back (one per file unless ``samples_per_file`` says more; the
  reader then needs the sample sizes, as a raw-record reader does).
- ``npz``: ``np.savez`` (stored, not compressed) with one uint8 array per sample under keys
  ``s00000``, ``s00001``, … (DLIO's unet3d format is one sample per npz file).
- ``parquet``: columns ``key`` (string) and ``data`` (binary), one row per sample, row groups of
  about ``ROW_GROUP_BYTES`` (pyarrow, no compression: the bytes are random anyway).
- ``tar``: a webdataset-like shard, one ``<key>.bin`` member per sample.

Reading is whole-file: with O_DIRECT into a page-aligned buffer (length rounded up to 4 KiB),
then decoded from memory, as DLIO does for npz; otherwise a buffered read, optionally dropped
from the page cache afterwards. Decoding goes through the format's real library (np.load,
pyarrow's ParquetFile, tarfile), so its CPU cost is the one a training job pays.
"""

from __future__ import annotations

import io
import os
import tarfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import storage
from .datagen import POOL_MIN, random_bytes
from .engines.base import FileSpec
from .errors import EngineError
from .results import PhaseResult
from .stats import WorkerStats, phase_result
from .target import DIRECT_ALIGN, aligned_buffer, drop_file_cache, is_url, scrub

FORMATS = ("raw", "npz", "parquet", "tar")
EXTENSIONS = {"raw": "bin", "npz": "npz", "parquet": "parquet", "tar": "tar"}
#: Target bytes per parquet row group (whole samples; at least one sample per group).
ROW_GROUP_BYTES = 64 << 20
_TAR_COPY = 1 << 20


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise ValueError(f"unknown sample format {fmt!r} (expected one of {', '.join(FORMATS)})")


def sample_key(file_index: int, j: int) -> str:
    """A sample's key inside its file (tar member stem, parquet key column)."""
    return f"{file_index:07d}-{j:05d}"


def row_group_rows(sample_sizes: Sequence[int]) -> int:
    """Rows per parquet row group: about ROW_GROUP_BYTES of samples, at least one."""
    mean = max(1.0, float(np.mean(sample_sizes))) if len(sample_sizes) else 1.0
    return max(1, min(len(sample_sizes) or 1, int(ROW_GROUP_BYTES // mean)))


def overhead_bytes(fmt: str, samples_per_file: int) -> int:
    """A generous bound on one file's bytes beyond its samples (headers, padding, footers)."""
    _check_format(fmt)
    per_sample = {"raw": 0, "npz": 512, "parquet": 256, "tar": 1024}[fmt]
    per_file = {"raw": 0, "npz": 1024, "parquet": 64 << 10, "tar": 20 << 10}[fmt]
    return per_file + per_sample * samples_per_file


# -- writing -----------------------------------------------------------------------------------


class SampleSource:
    """Incompressible sample bytes: slices of one random pool, each stamped to stay unique.

    Generating random bytes costs more than writing them, so a pool is filled once (before the
    timed region) and each sample is a copy of it from a different, unaligned offset, with a
    16-byte stamp (file, sample) in front: compression cannot shrink it and block-level
    deduplication finds no aligned repeats within a file.
    """

    def __init__(self, max_sample: int, seed: int):
        size = max(POOL_MIN, int(max_sample) + 2 * DIRECT_ALIGN)
        self.pool = np.frombuffer(random_bytes(size, seed), dtype=np.uint8)
        self.seed = seed

    def sample(self, file_index: int, j: int, n: int) -> np.ndarray:
        span = len(self.pool) - n
        off = ((file_index * 1_000_003 + j * 7919 + self.seed * 131) * 2_654_435_761) % max(span, 1)
        out = self.pool[off : off + n].copy()
        stamp = np.array([file_index, j], dtype="<u8").view(np.uint8)
        out[: min(16, n)] = stamp[: min(16, n)]
        return out


def write_sample_file(f: Any, fmt: str, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    """Write one file of ``samples`` (uint8 arrays) in ``fmt`` to the binary file object ``f``."""
    _check_format(fmt)
    if fmt == "raw":
        for s in samples:
            f.write(memoryview(s))
    elif fmt == "npz":
        np.savez(f, **{f"s{j:05d}": s for j, s in enumerate(samples)})
    elif fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        lengths = np.array([len(s) for s in samples], dtype=np.int64)
        offsets = np.zeros(len(samples) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        large = offsets[-1] >= 2**31 - 1
        typ = pa.large_binary() if large else pa.binary()
        offs = offsets if large else offsets.astype(np.int32)
        values = np.concatenate(samples) if samples else np.zeros(0, np.uint8)
        data = pa.Array.from_buffers(
            typ, len(samples), [None, pa.py_buffer(offs), pa.py_buffer(values)]
        )
        table = pa.table({"key": pa.array(list(keys), pa.string()), "data": data})
        pq.write_table(
            table,
            f,
            row_group_size=row_group_rows(lengths.tolist()),
            compression="NONE",
            use_dictionary=False,
            write_statistics=False,
        )
    else:  # tar
        with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tar:
            tar.copybufsize = _TAR_COPY
            for key, s in zip(keys, samples, strict=True):
                info = tarfile.TarInfo(f"{key}.bin")
                info.size = len(s)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(memoryview(s)))


def split_sizes(files: Sequence[FileSpec], samples_per_file: int) -> list[list[int]]:
    """Per-file sample sizes when a FileSpec's size is the file's payload: spread evenly."""
    out = []
    for f in files:
        base, extra = divmod(max(int(f.size), samples_per_file), samples_per_file)
        out.append([base + (1 if j < extra else 0) for j in range(samples_per_file)])
    return out


def write_files(
    params: dict[str, Any],
    runner: Any,
    files: Sequence[FileSpec],
    sample_sizes: Sequence[Sequence[int]] | None = None,
) -> tuple[PhaseResult, tuple[FileSpec, ...]]:
    """Write the dataset's files (phase ``dataset-write``); return it and the on-disk FileSpecs.

    ``params``: ``format``, ``samples_per_file`` (default 1), ``jobs`` (writer threads),
    ``seed``. Sample sizes come from ``sample_sizes`` (one list per file) or, when absent, each
    FileSpec's size split evenly into ``samples_per_file`` samples. Every file is written whole,
    fsynced and dropped from the page cache; its latency is open to close. The result is kept
    with ``runner.record``; an I/O error is kept too (marked) and raised as EngineError.
    """
    fmt = params["format"]
    _check_format(fmt)
    spf = int(params.get("samples_per_file", 1))
    sizes = [list(s) for s in sample_sizes] if sample_sizes is not None else split_sizes(files, spf)
    if len(sizes) != len(files):
        raise ValueError("sample_sizes needs one list per file")
    runner.mkdirs(sorted({os.path.dirname(f.path) for f in files}))
    remote = is_url(runner.run_dir)
    opts = getattr(getattr(runner, "target", None), "storage_options", None) or None
    jobs = max(1, min(int(params.get("jobs", 1)), len(files)))
    source = SampleSource(max((max(s) for s in sizes if s), default=1), int(params.get("seed", 1)))
    stop = runner.stop
    hooks = getattr(runner, "hooks", None)
    if hooks is not None:
        hooks.before_phase(None)  # many ranks: every rank's writers start together
    progress = runner.progress_factory()
    origin = time.perf_counter()
    stats = [WorkerStats(origin=origin) for _ in range(jobs)]
    real = [0] * len(files)
    errors: list[str] = []
    lock = threading.Lock()

    def worker(w: int) -> None:
        st = stats[w]
        st.start = st.end = time.perf_counter()
        for i in range(w, len(files), jobs):
            if stop.is_set() or errors:
                return
            path = storage.join(runner.run_dir, files[i].path)
            samples = [source.sample(i, j, n) for j, n in enumerate(sizes[i])]
            keys = [sample_key(i, j) for j in range(len(samples))]
            t0 = time.perf_counter_ns()
            try:
                if remote:
                    n = _put_sample_file(path, fmt, samples, keys, opts)
                else:
                    with open(path, "wb", buffering=1 << 20) as f:
                        write_sample_file(f, fmt, samples, keys)
                        f.flush()
                        os.fsync(f.fileno())
                        n = os.fstat(f.fileno()).st_size
            except Exception as e:  # noqa: BLE001 - fsspec backends raise what they like
                with lock:  # (anything else, a bug too, fails the phase: see guarded)
                    errors.append(_write_error(e, path))
                return
            t1 = time.perf_counter_ns()
            if not remote:
                drop_file_cache(path)
            real[i] = n
            st.add(n, t1 / 1e9, t1 - t0)
            st.files += 1
            st.end = t1 / 1e9

    total = sum(sum(s) for s in sizes)
    progress.start("dataset-write", total, len(files))

    def guarded(w: int) -> None:
        # a writer that dies of anything unexpected fails the phase: a thread that just ended
        # would leave dataset-write "ok" with files missing
        try:
            worker(w)
        except BaseException as e:  # noqa: BLE001 - reported through the phase
            with lock:
                errors.append(f"writer {w} failed: {type(e).__name__}: {e}".replace("\n", " "))

    threads = [
        threading.Thread(target=guarded, args=(w,), name=f"iobench-dataset-write-{w}", daemon=True)
        for w in range(jobs)
    ]
    for t in threads:
        t.start()
    try:
        while alive := [t for t in threads if t.is_alive()]:
            alive[0].join(0.2)
            progress.update(sum(s.bytes for s in stats), sum(s.ops for s in stats))
    except BaseException:
        stop.set()
        for t in threads:
            t.join()
        raise
    finally:
        progress.update(sum(s.bytes for s in stats), sum(s.ops for s in stats))
        progress.close()
    res = phase_result(
        "dataset-write",
        "write",
        stats,
        concurrency=jobs,
        block_size=0,
        cache="none" if remote else "dropped",
        params={
            "format": fmt,
            "samples_per_file": spf,
            "fsync": "file",
            "latency_per": "file",
            "samples": sum(len(s) for s in sizes),
            "sample_bytes": total,
        },
    )
    res.extra["engine"] = "formats"
    if errors:
        res.status = "partial" if res.ops else "failed"
        res.error = errors[0]
        runner.record(res)
        raise EngineError(f"phase dataset-write: {errors[0]}")
    if stop.is_set():
        res.status, res.error = "partial", "interrupted"
    runner.record(res)
    stop.check()
    return res, tuple(FileSpec(f.path, n) for f, n in zip(files, real, strict=True))


def _put_sample_file(
    url: str,
    fmt: str,
    samples: Sequence[np.ndarray],
    keys: Sequence[str],
    opts: dict[str, Any] | None,
) -> int:
    """Serialise one file in memory and upload it whole (objects are written whole anyway;
    zip and parquet writers want a seekable file, which an upload stream is not)."""
    buf = io.BytesIO()
    write_sample_file(buf, fmt, samples, keys)
    view = buf.getbuffer()
    try:
        with storage.open_write(url, opts) as f:
            f.write(view)
        return len(view)
    finally:
        view.release()


def _write_error(e: BaseException, path: str) -> str:
    if isinstance(e, OSError):
        return scrub(f"{e.strerror or e} writing {path}")
    return scrub(f"{type(e).__name__}: {e} writing {path}".replace("\n", " "))


# -- reading -----------------------------------------------------------------------------------


def decode(data: Any, fmt: str, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    """The samples of one whole file held in memory (bytes-like), as uint8 arrays it owns."""
    _check_format(fmt)
    if fmt == "raw":
        view = np.frombuffer(data, dtype=np.uint8)
        if not sizes:
            return [view.copy()]
        out, pos = [], 0
        for n in sizes:
            out.append(view[pos : pos + n].copy())
            pos += n
        if pos != len(view):
            raise ValueError(f"raw file holds {len(view)} bytes, sample sizes add to {pos}")
        return out
    if fmt == "npz":
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return [np.asarray(z[k], dtype=np.uint8) for k in sorted(z.files)]
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        # a copy, as BytesIO makes for npz and tar: nothing decoded may point into a reused
        # read buffer (arrow can hand out slices of its input)
        pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(bytes(data))))
        out = []
        for rg in range(pf.num_row_groups):
            col = pf.read_row_group(rg, columns=["data"]).column(0)
            for chunk in col.chunks:
                out.extend(_binary_values(chunk))
        return out
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        out = []
        for m in tar:
            if m.isfile():
                fobj = tar.extractfile(m)
                assert fobj is not None
                out.append(np.frombuffer(fobj.read(), dtype=np.uint8))
        return out


def _binary_values(chunk: Any) -> list[np.ndarray]:
    """The values of a pyarrow (large_)binary array as numpy views of its data buffer."""
    import pyarrow as pa

    _, offs_buf, data_buf = chunk.buffers()
    width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
    offs = np.frombuffer(offs_buf, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
    values = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0)
    return [values[offs[i] : offs[i + 1]] for i in range(len(chunk))]


class FileReader:
    """Reads whole files and decodes them; one per worker (it reuses its aligned buffer).

    ``direct``: O_DIRECT into a page-aligned buffer; otherwise buffered, and with
    ``drop_cache`` the file's pages are dropped (fadvise DONTNEED) after each read.
    ``last_read_s`` / ``last_decode_s`` time the last call's two parts. A URL path (an fsspec
    target) is read through ``iobench.storage`` as one whole-object GET with
    ``storage_options`` (default: the environment's); O_DIRECT and the page cache do not apply.
    The filesystem is opened on first use, in the process that reads (fork-safe).
    """

    def __init__(
        self,
        direct: bool = False,
        drop_cache: bool = False,
        storage_options: dict[str, Any] | None = None,
    ):
        self.direct = direct
        self.drop_cache = drop_cache
        self.storage_options = storage_options
        self._buf: Any = None
        self.last_read_s = 0.0
        self.last_decode_s = 0.0
        self.last_bytes = 0

    def read_bytes(self, path: str) -> Any:
        """The whole file, as a bytes-like object valid until the next call."""
        if is_url(path):
            return storage.read_bytes(path, self.storage_options or None)
        flags = os.O_RDONLY | (os.O_DIRECT if self.direct else 0)
        fd = os.open(path, flags)
        try:
            size = os.fstat(fd).st_size
            if self.direct:
                need = max(DIRECT_ALIGN, -(-size // DIRECT_ALIGN) * DIRECT_ALIGN)
                if self._buf is None or len(self._buf) < need:
                    self._buf = aligned_buffer(need)  # the old one goes when unreferenced
                view = memoryview(self._buf)
                pos = 0
                while pos < size:
                    n = os.preadv(fd, [view[pos:need]], pos)
                    if n <= 0:
                        break
                    pos += n
                data: Any = view[:pos]
            else:
                data = bytearray(size)
                view = memoryview(data)
                pos = 0
                while pos < size:
                    n = os.readv(fd, [view[pos:]])
                    if n <= 0:
                        break
                    pos += n
                if pos < size:
                    data = view[:pos]
            if not self.direct and self.drop_cache:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            return data
        finally:
            os.close(fd)

    def read(self, path: str, fmt: str, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
        """Read ``path`` whole and decode it into its samples."""
        t0 = time.perf_counter()
        data = self.read_bytes(path)
        t1 = time.perf_counter()
        self.last_bytes = len(data)
        try:
            out = decode(data, fmt, sizes)
        finally:
            if isinstance(data, memoryview):
                data.release()
        self.last_read_s = t1 - t0
        self.last_decode_s = time.perf_counter() - t1
        return out


def read_samples(
    path: str,
    fmt: str,
    direct: bool = False,
    sizes: Sequence[int] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> list[np.ndarray]:
    """Read one dataset file (a local path or an fsspec URL) whole (O_DIRECT when ``direct``,
    local only) and decode its samples."""
    return FileReader(direct and not is_url(path), storage_options=storage_options).read(
        path, fmt, sizes
    )
