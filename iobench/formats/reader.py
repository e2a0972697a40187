"""Read sample files whole, and decode them through their format's real library.

Reading is whole-file: with O_DIRECT into a page-aligned buffer (length rounded up to 4 KiB),
then decoded from memory, as DLIO does for npz; otherwise a buffered read, optionally dropped
from the page cache afterwards. Decoding goes through the format's real library (np.load,
pyarrow's ParquetFile, tarfile), so its CPU cost is the one a training job pays.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..target import DIRECT_ALIGN, aligned_buffer, is_url, storage
from .registry import get_format

#: Bytes ``prime_readahead`` reads first: a page or two, as a buffered reader's first fill.
PRIME_BYTES = 8192


def prime_readahead(fd: int) -> None:
    """Read the file's first ``PRIME_BYTES`` alone before it is read whole (buffered reads).

    The kernel then reads the rest ahead in growing windows, each in flight while the last is
    copied out, where one whole-file read of an uncached file waits on one request as large
    as the file before it copies a byte: on this VM's disk (read_ahead_kb 8192) 256 files of
    4 MiB, each's pages dropped, read at 1,340–1,470 MiB/s whole and 2,120–2,240 MiB/s primed
    (``np.load`` reads its header first, and got 1,940–2,100). The page read twice comes from
    the cache: on a cached file or tmpfs it costs one small read."""
    try:
        os.pread(fd, PRIME_BYTES, 0)
    except OSError:
        pass  # the read that follows meets the same error and reports it


def decode(data: Any, fmt: str, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    """The samples of one whole file held in memory, as uint8 arrays no later read changes:
    ``data`` a numpy array is the caller's to give away (the samples may be views of it), any
    other bytes-like (a reused read buffer) is copied from."""
    return get_format(fmt).decode(data, sizes)


class FileReader:
    """Reads whole files and decodes them; one per worker (it reuses its aligned buffer).

    ``direct``: O_DIRECT into a page-aligned buffer; otherwise buffered, and with
    ``drop_cache`` the file's pages are dropped (fadvise DONTNEED) after each read.
    ``last_read_s`` / ``last_decode_s`` time the last call's two parts (``last_decode_cpu_s``:
    the decode's thread CPU). A URL path (an fsspec
    target) is read through ``iobench.target.storage`` as one whole-object GET with
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
        #: fmt -> (its decode, its one-pass read or None), looked up once (the registry's
        #: lookup imports: ~10 µs a sample)
        self._decoders: dict[str, tuple[Any, Any]] = {}
        self.last_read_s = 0.0
        self.last_decode_s = 0.0
        self.last_decode_cpu_s = 0.0  # this thread's CPU in the decode
        self.last_bytes = 0

    def read_bytes(self, path: str) -> Any:
        """The whole file: O_DIRECT, a memoryview of the reused aligned buffer, valid until
        the next call; buffered, a fresh uint8 array the caller owns (the one copy of the
        bytes, as a training job's ``np.fromfile`` makes); a URL's bytes."""
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
            else:  # a fresh array (no zeroing, unlike a bytearray): the decode may keep views
                prime_readahead(fd)
                data = np.empty(size, np.uint8)
                pos = 0
                while pos < size:
                    n = os.readv(fd, [data[pos:]])
                    if n <= 0:
                        break
                    pos += n
                if pos < size:
                    data = data[:pos]
            if not self.direct and self.drop_cache:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            return data
        finally:
            os.close(fd)

    def read(self, path: str, fmt: str, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
        """Read ``path`` whole and decode it into its samples: buffered, through the format's
        one-pass read where it has one (``read_fd``: each sample read straight into its
        array and checked as it arrives, the checks timed as the decode), else the whole
        file into one buffer, then decoded."""
        t0 = time.perf_counter()
        known = self._decoders.get(fmt)
        if known is None:
            module = get_format(fmt)
            known = self._decoders[fmt] = (module.decode, getattr(module, "read_fd", None))
        dec, one_pass = known
        if one_pass is not None and not self.direct and not is_url(path):
            out = self._one_pass(path, one_pass, t0)
            if out is not None:
                return out
        data = self.read_bytes(path)
        t1, c1 = time.perf_counter(), time.thread_time()
        self.last_bytes = len(data)
        try:
            out = dec(data, sizes)
        finally:
            if isinstance(data, memoryview):
                data.release()
        self.last_read_s = t1 - t0
        self.last_decode_s = time.perf_counter() - t1
        self.last_decode_cpu_s = time.thread_time() - c1
        return out

    def _one_pass(self, path: str, one_pass: Any, t0: float) -> list[np.ndarray] | None:
        """``read`` through the format's ``read_fd`` (None: the file is read the other way).
        Its checks and headers are the decode's wall time and CPU (in-thread CPU work)."""
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            clock = [0.0]
            out = one_pass(fd, size, clock) if size else None
            if out is not None and self.drop_cache:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        if out is None:
            return None
        spent = time.perf_counter() - t0
        self.last_bytes = size
        self.last_read_s = max(spent - clock[0], 0.0)
        self.last_decode_s = self.last_decode_cpu_s = clock[0]
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
