"""Reading one file of an existing dataset for the loader (``existing_data``): read-only and
whole, never blocking on what is not a regular file, never out of the dataset, its open and
read timed and, in mode ``dropped``, its clean pages dropped before and after the read (and
the first files of each worker checked: whether the drop held is measured, not assumed).

``st`` is the batch's figures (``existing_data.BatchStats``): ``open_s``, ``read_s``,
``cache_checked`` and ``cache_resident`` are added to.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.cpu import physical_memory
from ..core.inputs import NotRegularFile, file_kind, open_regular_fd
from ..formats.reader import prime_readahead
from ..target import is_url, storage

#: Files per worker whose page-cache drop is checked.
CACHE_CHECKS = 8
#: One reader (worker) may hold at most physical memory / (READ_SHARE × readers) of one file:
#: the file's bytes, its decoded samples (often larger) and the batches prefetched beside it.
READ_SHARE = 4
#: Bytes per read call: a file larger is read in parts, each progress for the watchdog.
READ_CHUNK = 64 << 20


def read_limit(workers: int) -> int:
    """The bytes of one file a reader may read whole (see READ_SHARE; 0: no limit known)."""
    mem = physical_memory()
    return mem // (READ_SHARE * max(workers, 1)) if mem else 0


class FileTooLarge(OSError):
    """A file larger than ``read_limit``: a failed file, not read."""


def open_regular(path: str, root: str | None = None) -> int:
    """A read-only descriptor of the regular file at ``path`` (``inputs.open_regular_fd``: a
    FIFO or a device is refused, and its open never blocks). ``root`` (a real path): the file
    opened must lie under it, so a link swapped in after the listing cannot lead the read out
    of the dataset (the listing skips such links)."""
    try:
        fd = open_regular_fd(path)
    except NotRegularFile as e:
        raise OSError(errno.EINVAL, f"{e.kind}, not a regular file: not read", path) from None
    if root is not None and not _under(fd, root):
        os.close(fd)
        raise OSError(errno.EXDEV, "a link out of the dataset: not read", path)
    return fd


def open_beneath(root_fd: int, name: str, path: str) -> int | None:
    """``open_regular`` of ``name``, a file directly in the open directory ``root_fd``,
    without the check of where it leads: opened relative to the directory and never through
    a link (``O_NOFOLLOW``), it lies in the dataset by construction (saves the ``/proc``
    lookup, ~10 µs a file). None when ``name`` is a link: the caller follows it the checked
    way. OSError (naming ``path``) as ``open_regular`` for what is not a regular file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=root_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None
        raise OSError(e.errno, e.strerror, path) from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise OSError(errno.EINVAL, f"{kind}, not a regular file: not read", path)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _under(fd: int, root: str) -> bool:
    """Does the open file ``fd`` lie under the directory ``root`` (a real path)?"""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return True  # no /proc: the listing's check stands alone
    return real.startswith(root.rstrip("/") + "/")


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


def read_file(
    path: str,
    mode: str,
    st: Any,
    opts: dict[str, Any] | None,
    limit: int = 0,
    root: str | None = None,
    moved: Callable[[], None] | None = None,
    as_array: bool = False,
    beneath: tuple[int, str] | None = None,
    one_pass: Callable[[int, int, list[float]], Any] | None = None,
) -> Any:
    """The whole file, read-only (bytes, or with ``as_array`` a fresh uint8 array, see
    ``_read_into``); open and read timed into ``st`` (and the cache checked).
    OSError for what is not a regular file or lies outside ``root`` (``open_regular``),
    FileTooLarge for a file over ``limit`` bytes (0: none). Read in READ_CHUNK parts,
    ``moved()`` called after each (progress the watchdog sees). ``beneath``: (the dataset
    directory open, the file's name in it) for ``open_beneath``, a file directly in it."""
    t0 = time.perf_counter()
    if is_url(path):
        got: bytes = storage.read_bytes(path, opts)
        st.read_s += time.perf_counter() - t0
        return got
    fd = open_beneath(*beneath, path) if beneath is not None else None
    if fd is None:
        fd = open_regular(path, root)
    try:
        size = os.fstat(fd).st_size
        st.open_s += time.perf_counter() - t0
        if limit and size > limit:
            raise FileTooLarge(
                errno.EFBIG,
                f"{size / 2**30:.1f} GiB, more than the {limit / 2**30:.1f} GiB one reader may "
                f"hold in memory (physical memory / ({READ_SHARE} × readers)): not read",
            )
        if mode == "dropped":
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if st.cache_checked < CACHE_CHECKS and size:
                resident = _resident(fd)
                if resident is not None:
                    st.cache_checked += 1
                    st.cache_resident += int(resident)
        t1 = time.perf_counter()
        clock = [0.0]
        data = _read_whole(fd, size, moved, as_array, one_pass, clock)
        if mode == "dropped":
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        st.read_s += (t1 - t0) + max(time.perf_counter() - t1 - clock[0], 0.0)
        st.decode_s += clock[0]
        st.decode_cpu_s += clock[0]
        return data
    finally:
        os.close(fd)


def _read_whole(
    fd: int,
    size: int,
    moved: Callable[[], None] | None,
    as_array: bool,
    one_pass: Callable[[int, int, list[float]], Any] | None,
    clock: list[float],
) -> Any:
    """``read_file``'s read: through ``one_pass`` where it takes the file, else primed and
    read whole (``_read_into``)."""
    if one_pass is not None and 0 < size <= READ_CHUNK:
        data = one_pass(fd, size, clock)
        if data is not None:
            if moved is not None:
                moved()
            return data
        # not taken: its first read has primed the readahead
    elif size:
        prime_readahead(fd)
    return _read_into(fd, size, moved, as_array)


def _read_into(
    fd: int, size: int, moved: Callable[[], None] | None, as_array: bool
) -> bytes | np.ndarray:
    """The file's bytes from its start, in READ_CHUNK parts (``moved()`` after each), to its
    end (a file that grew since ``fstat`` is read on). ``as_array``: read straight into a
    fresh uint8 array the reader may keep writable views of (the kernel's copy the only one,
    as ``np.load`` of a path copies once into the array it returns); else as bytes."""
    if not as_array:
        chunks, got = [], 0
        while chunk := os.read(fd, min(max(size - got, 1 << 20), READ_CHUNK)):
            chunks.append(chunk)
            got += len(chunk)
            if moved is not None:
                moved()
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    data = np.empty(size, np.uint8)
    view = data.data
    got = 0
    while got < size:
        n = os.readv(fd, [view[got : min(size, got + READ_CHUNK)]])
        if n <= 0:
            break
        got += n
        if moved is not None:
            moved()
    if got < size:  # shrank since fstat
        return data[:got].copy()
    tail = _read_into(fd, 0, moved, False)  # grew since fstat (else one empty read, as before)
    return np.concatenate([data, np.frombuffer(tail, np.uint8)]) if tail else data
