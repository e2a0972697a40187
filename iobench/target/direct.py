"""Direct I/O: aligned buffers, whether O_DIRECT works in a directory and at what alignment
(measured there, or the device's logical block size from sysfs), and dropping a file's pages
from the page cache."""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Callable

from ..core.errors import TargetError
from ..core.safeio import open_beneath, unlink_beneath

DIRECT_ALIGN = 4096
DIRECT_ALIGN_CANDIDATES = (512, 1024, 2048, 4096)  # offset/length alignments O_DIRECT may need


def aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned anonymous buffer (what O_DIRECT needs), rounded up to 4 KiB."""
    size = max(DIRECT_ALIGN, -(-size // DIRECT_ALIGN) * DIRECT_ALIGN)
    return mmap.mmap(-1, size)


def _probe_file(directory: str, name: str, dir_fd: int | None) -> tuple[int, Callable[[], None]]:
    """A probe file ``name`` made in ``directory`` (O_DIRECT, read-write), beneath the held
    descriptor ``dir_fd`` when given (``safeio.open_beneath``): its descriptor and its removal."""
    flags = os.O_CREAT | os.O_RDWR | os.O_DIRECT
    if dir_fd is None:
        path = os.path.join(directory, name)
        return os.open(path, flags, 0o600), lambda: os.unlink(path)
    return open_beneath(dir_fd, name, flags, 0o600), lambda: unlink_beneath(dir_fd, name)


def probe_direct_io(directory: str, dir_fd: int | None = None) -> tuple[bool, str | None]:
    """Try an aligned O_DIRECT write and read in ``directory`` (held as ``dir_fd``, when
    given): (supported, reason if not)."""
    if not hasattr(os, "O_DIRECT"):
        return False, "O_DIRECT is not available on this OS"
    buf = aligned_buffer(DIRECT_ALIGN)
    buf.write(os.urandom(DIRECT_ALIGN))
    try:
        fd, remove = _probe_file(directory, ".direct-probe", dir_fd)
    except OSError as e:
        if e.errno == errno.EINVAL:
            return False, f"the filesystem refuses O_DIRECT ({os.strerror(e.errno)})"
        raise TargetError(f"cannot create a file in {directory}: {e.strerror}") from None
    try:
        os.pwrite(fd, buf, 0)
        os.preadv(fd, [buf], 0)
        return True, None
    except OSError as e:
        if e.errno == errno.EINVAL:
            return (
                False,
                f"the filesystem refuses O_DIRECT I/O ({os.strerror(e.errno)})",
            )
        raise TargetError(f"O_DIRECT probe in {directory} failed: {e.strerror}") from None
    finally:
        os.close(fd)
        buf.close()
        try:
            remove()
        except OSError:
            pass


def probe_direct_alignment(directory: str, dir_fd: int | None = None) -> int:
    """The smallest offset and length alignment O_DIRECT accepts in ``directory``, measured:
    an aligned probe file is written, then read at 512, 1024, 2048 bytes... until a read is
    not refused (EINVAL). ext4 and XFS take the device's logical block size, btrfs its sector
    size, NFS any; 4096 when none smaller works. Call after ``probe_direct_io`` succeeded."""
    size = 2 * DIRECT_ALIGN
    buf = aligned_buffer(size)
    buf.write(os.urandom(size))
    try:
        fd, remove = _probe_file(directory, ".direct-align-probe", dir_fd)
    except OSError:
        return DIRECT_ALIGN
    try:
        os.pwrite(fd, buf, 0)
        with memoryview(buf) as view:
            for a in DIRECT_ALIGN_CANDIDATES:
                try:
                    with view[:a] as part:
                        os.preadv(fd, [part], a)
                    return a
                except OSError as e:
                    if e.errno != errno.EINVAL:
                        break
        return DIRECT_ALIGN
    except OSError:
        return DIRECT_ALIGN
    finally:
        os.close(fd)
        buf.close()
        try:
            remove()
        except OSError:
            pass


def device_logical_block_size(path: str, sysfs: str = "/sys") -> int | None:
    """The logical block size of the block device holding ``path``, from sysfs, read without
    writing anything; None for filesystems on no block device (tmpfs, NFS, FUSE, btrfs's
    anonymous devices) or when sysfs does not say."""
    try:
        dev = os.stat(path).st_dev
    except OSError:
        return None
    if os.major(dev) == 0:
        return None
    base = os.path.join(sysfs, "dev", "block", f"{os.major(dev)}:{os.minor(dev)}")
    # a partition has no queue/ of its own: its disk's is one level up
    for q in ("queue/logical_block_size", "../queue/logical_block_size"):
        try:
            with open(os.path.join(base, q)) as f:
                value = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if value > 0:
            return value
    return None


def drop_file_cache(path: str, dir_fd: int | None = None) -> bool:
    """Ask the kernel to drop a file's cached pages. True when it could.

    The file's dirty pages are written back first: DONTNEED leaves dirty pages in the cache,
    so a file written without fsync (fsync=never, fsspec on a local directory) would be read
    back from memory under a "dropped" label. With ``dir_fd``, ``path`` is relative to that
    held directory (``safeio.open_beneath``), never resolved through TARGET again."""
    try:
        fd = (
            os.open(path, os.O_RDONLY)
            if dir_fd is None
            else open_beneath(dir_fd, path, os.O_RDONLY)
        )
    except OSError:
        return False
    try:
        try:
            os.fdatasync(fd)
        except OSError:
            pass  # a filesystem that cannot sync: DONTNEED drops what it can
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
