"""Write a training dataset's sample files (phase ``dataset-write``), in any registered format.

Sample bytes are incompressible and unique (``SampleSource``); each file is written whole,
fsynced and dropped from the page cache, or serialised in memory and uploaded whole to an
fsspec URL.
"""

from __future__ import annotations

import errno
import fcntl
import io
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import EngineError
from ..core.safeio import open_beneath
from ..engines.base import FileSpec
from ..result.file import PhaseResult
from ..result.measured import phase_result
from ..result.stats import WorkerStats
from ..target import DIRECT_ALIGN, fs_class, is_url, scrub, storage
from .ahead import Ahead, slots_per_writer
from .registry import get_format, overhead_bytes
from .samples import FileBuffer, SampleSource

if TYPE_CHECKING:  # an annotation: the runner sits above
    from ..run.runner import PhaseRunner


def sample_key(file_index: int, j: int) -> str:
    """A sample's key inside its file (tar member stem, parquet key column)."""
    return f"{file_index:07d}-{j:05d}"


# -- writing -----------------------------------------------------------------------------------


class ImageFile:
    """A writable, seekable file in a FileBuffer: a format writes a whole file image here,
    which then goes to the target in one write."""

    def __init__(self) -> None:
        self.buf = FileBuffer()
        self.pos = self.end = 0

    def reset(self) -> ImageFile:
        self.pos = self.end = 0
        return self

    def write(self, b: Any) -> int:
        src = np.frombuffer(memoryview(b).cast("B"), dtype=np.uint8)
        stop = self.pos + len(src)
        arr = self.buf.take(max(stop, self.end), keep=self.end)
        arr[self.pos : stop] = src
        self.pos, self.end = stop, max(self.end, stop)
        return len(src)

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.pos, io.SEEK_END: self.end}[whence]
        self.pos = base + offset
        return self.pos

    def flush(self) -> None:
        pass

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def image(self) -> memoryview:
        return self.buf.array[: self.end].data


def write_image(path: str, image: memoryview, direct: bool, dir_fd: int | None = None) -> int:
    """Write a whole file image at ``path``, fsynced, then dropped from the page cache; its
    size. With ``direct`` (the target takes O_DIRECT) the 4 KiB-aligned body goes O_DIRECT,
    as ``sequential-write`` writes, and the tail through the page cache; a refusal falls back
    to buffered. (The drop is on the open descriptor, after the fsync: nothing is dirty, so
    it needs no second open and sync, as ``drop_file_cache`` does for a file it did not
    write.) With ``dir_fd`` (the run directory held), ``path`` is relative to it and opened
    beneath it (``safeio.open_beneath``), never through TARGET's name again."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC

    def create(extra: int) -> int:
        if dir_fd is None:
            return os.open(path, flags | extra, 0o644)
        return open_beneath(dir_fd, path, flags | extra)

    body = len(image) // DIRECT_ALIGN * DIRECT_ALIGN if direct and _aligned(image) else 0
    fd = -1
    if body:
        try:
            fd = create(os.O_DIRECT)
        except OSError:
            body = 0
    if fd < 0:
        fd = create(0)
    try:
        done = 0
        if body:
            try:
                done = _write_all(fd, image[:body])
            except OSError as e:
                if e.errno != errno.EINVAL:
                    raise
                done = os.lseek(fd, 0, os.SEEK_CUR) // DIRECT_ALIGN * DIRECT_ALIGN
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_DIRECT)
            os.lseek(fd, done, os.SEEK_SET)
        _write_all(fd, image[done:])
        os.fsync(fd)
        size = os.fstat(fd).st_size
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass  # no fadvise on this file system: as drop_file_cache, nothing more to do
        return size
    finally:
        os.close(fd)


def _aligned(view: memoryview) -> bool:
    if len(view) == 0:
        return False
    return np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0] % DIRECT_ALIGN == 0


def _write_all(fd: int, view: memoryview) -> int:
    done = 0
    while done < len(view):
        done += os.write(fd, view[done:])
    return done


def write_sample_file(f: Any, fmt: str, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    """Write one file of ``samples`` (uint8 arrays) in ``fmt`` to the binary file object ``f``."""
    get_format(fmt).write(f, samples, keys)


def split_sizes(files: Sequence[FileSpec], samples_per_file: int) -> list[list[int]]:
    """Per-file sample sizes when a FileSpec's size is the file's payload: spread evenly."""
    out = []
    for f in files:
        base, extra = divmod(max(int(f.size), samples_per_file), samples_per_file)
        out.append([base + (1 if j < extra else 0) for j in range(samples_per_file)])
    return out


def write_files(
    params: dict[str, Any],
    runner: PhaseRunner,
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
    get_format(fmt)
    spf = int(params.get("samples_per_file", 1))
    sizes = [list(s) for s in sample_sizes] if sample_sizes is not None else split_sizes(files, spf)
    if len(sizes) != len(files):
        raise ValueError("sample_sizes needs one list per file")
    runner.mkdirs(sorted({os.path.dirname(f.path) for f in files}))
    jobs = max(1, min(int(params.get("jobs", 1)), len(files)))
    writers = _Writers(runner, fmt, files, sizes, jobs, int(params.get("seed", 1)))
    runner.coord.before_phase(None)  # many ranks: every rank's writers start together
    writers.run(runner.progress_factory())
    total = sum(sum(s) for s in sizes)
    res = phase_result(
        "dataset-write",
        "write",
        writers.stats,
        concurrency=jobs,
        block_size=0,
        cache="none" if writers.remote else "dropped",
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
    if writers.errors:
        res.status = "partial" if res.ops else "failed"
        res.error = writers.errors[0]
        runner.record(res)
        raise EngineError(f"phase dataset-write: {writers.errors[0]}")
    if runner.stop.is_set():
        res.status, res.error = "partial", "interrupted"
    runner.record(res)
    runner.stop.check()
    return res, tuple(FileSpec(f.path, n) for f, n in zip(files, writers.real, strict=True))


class _Writers:
    """The writer threads of one ``dataset-write`` phase: file ``i`` goes to thread
    ``i % jobs``; each keeps its WorkerStats; the first I/O error stops them all."""

    def __init__(
        self,
        runner: PhaseRunner,
        fmt: str,
        files: Sequence[FileSpec],
        sizes: list[list[int]],
        jobs: int,
        seed: int,
    ):
        self.runner, self.fmt, self.files, self.sizes, self.jobs = runner, fmt, files, sizes, jobs
        self.remote = is_url(runner.run_dir)
        target = getattr(runner, "target", None)
        # O_DIRECT where the target takes it and has storage behind it (as runner.direct)
        self.direct = (
            not self.remote
            and getattr(target, "direct_io", None) is True
            and fs_class(getattr(target, "fs_type", "")) != "memory"
        )
        self.opts = getattr(getattr(runner, "target", None), "storage_options", None) or None
        self.source = SampleSource(max((max(s) for s in sizes if s), default=1), seed)
        self.stop = runner.stop
        origin = time.perf_counter()
        self.stats = [WorkerStats(origin=origin) for _ in range(jobs)]
        self.real = [0] * len(files)
        self.errors: list[str] = []
        self.lock = threading.Lock()
        largest = max((sum(s) + overhead_bytes(fmt, len(s)) for s in sizes), default=0)
        # (every rank on this host holds its writers' files: under torchrun they share RAM)
        host_writers = jobs * max(1, int(getattr(runner.coord, "ranks_per_host", 1) or 1))
        per_writer = slots_per_writer(largest, host_writers)
        # each writer's buffers, one per file it holds at once, mapped before the clock starts
        self.slots = [
            [(FileBuffer().prefault(largest), ImageFile()) for _ in range(per_writer)]
            for _ in range(jobs)
        ]

    def run(self, progress: Any) -> None:
        """Run the threads to the end, updating ``progress``; a signal stops and joins them."""
        stats = self.stats
        progress.start("dataset-write", sum(sum(s) for s in self.sizes), len(self.files))
        threads = [
            threading.Thread(
                target=self.guarded, args=(w,), name=f"iobench-dataset-write-{w}", daemon=True
            )
            for w in range(self.jobs)
        ]
        for t in threads:
            t.start()
        try:
            while alive := [t for t in threads if t.is_alive()]:
                alive[0].join(0.2)
                progress.update(sum(s.bytes for s in stats), sum(s.ops for s in stats))
        except BaseException:
            self.stop.set()
            for t in threads:
                t.join()
            raise
        finally:
            progress.update(sum(s.bytes for s in stats), sum(s.ops for s in stats))
            progress.close()

    def guarded(self, w: int) -> None:
        # a writer that dies of anything unexpected fails the phase: a thread that just ended
        # would leave dataset-write "ok" with files missing
        try:
            self.worker(w)
        except BaseException as e:  # noqa: BLE001 - reported through the phase
            with self.lock:
                self.errors.append(f"writer {w} failed: {type(e).__name__}: {e}".replace("\n", " "))

    def halted(self) -> bool:
        return self.stop.is_set() or bool(self.errors)

    def worker(self, w: int) -> None:
        """Writer ``w``: its files in turn, each built by its builder thread (``Ahead``: the
        next file is built while this one is written, when memory allows two)."""
        st = self.stats[w]
        st.start = st.end = time.perf_counter()
        built = Ahead(
            lambda i, slot: self._image(i, *slot),
            range(w, len(self.files), self.jobs),
            self.slots[w],
            self.halted,
            name=f"iobench-dataset-build-{w}",
        )
        try:
            for i, image in built:
                if self.halted():
                    return
                path = storage.join(self.runner.run_dir, self.files[i].path)
                t0 = time.perf_counter_ns()
                try:
                    n = self._write_one(self.files[i].path, path, image)
                except Exception as e:  # noqa: BLE001 - fsspec backends raise what they like
                    with self.lock:  # (anything else, a bug too, fails the phase: see guarded)
                        self.errors.append(_write_error(e, path))
                    return
                t1 = time.perf_counter_ns()
                self.real[i] = n
                st.add(n, t1 / 1e9, t1 - t0)
                st.files += 1
                st.end = t1 / 1e9
        finally:
            built.close()

    def _image(self, i: int, buf: FileBuffer, img: ImageFile) -> memoryview:
        """File ``i`` whole in memory, each sample's bytes generated once: raw samples back
        to back in the thread's buffer; a format with a ``frame`` (tar, npz, parquet) gets
        them generated in their places and its headers around them (npz's CRCs from the
        pool's); a file its frame cannot lay out (a zip64 npz, a parquet sample over 2 GiB)
        is written into ``img`` by the format's own ``write``."""
        sizes = self.sizes[i]
        keys = [sample_key(i, j) for j in range(len(sizes))]
        module = get_format(self.fmt)
        framer = getattr(module, "frame", None)
        known: dict[str, Any] = {}
        if getattr(module, "SAMPLE_CRCS", False):  # CRCs from the pool, not over the bytes
            known["sample_crcs"] = lambda starts: self.source.crcs(i, sizes, starts)
        laid = framer(sizes, keys, **known) if framer is not None else None
        if laid is not None:
            total, offsets, finish = laid
            buf.take(total)
            self.source.file_samples(i, sizes, buf, offsets)
            finish(buf.array[:total])
            return buf.array[:total].data
        samples = self.source.file_samples(i, sizes, buf)
        if self.fmt == "raw":
            from . import raw

            whole = raw.contiguous(samples)
            if whole is not None:
                return whole
        img.reset()
        img.buf.take(sum(sizes) + overhead_bytes(self.fmt, len(sizes)))  # sized once
        write_sample_file(img, self.fmt, samples, keys)
        return img.image()

    def _write_one(self, rel: str, path: str, image: memoryview) -> int:
        """Write one file whole (fsynced, or uploaded whole); its size on the target. A local
        file is opened beneath the run directory's descriptor (``rel``), not by ``path``."""
        if self.remote:
            with storage.open_write(path, self.opts) as f:
                f.write(image)
            return len(image)
        dir_fd = getattr(self.runner, "run_fd", None)
        return write_image(path if dir_fd is None else rel, image, self.direct, dir_fd)


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
