"""The target of a run: a directory (or fsspec URL), its filesystem, and the run directory.

Everything iobench writes lives under ``TARGET/.iobench-<run_id>/``, created by this module
and removed by it on success, failure and interruption (unless ``keep``). Nothing else in the
target is created, changed or removed.
"""

from __future__ import annotations

import errno
import mmap
import os
import posixpath
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import EngineUnavailable, Interrupted, TargetError, UsageError
from .redact import ENDPOINT_ENV, redact_obj, redact_text, redact_url, userinfo
from .units import format_bytes, format_size

RUN_DIR_PREFIX = ".iobench-"
DIRECT_ALIGN = 4096
DIRECT_ALIGN_CANDIDATES = (512, 1024, 2048, 4096)  # offset/length alignments O_DIRECT may need
FREE_SPACE_MARGIN = 0.05  # keep 5 % (and at least 64 MiB) of headroom beyond the plan
FREE_SPACE_MIN_HEADROOM = 64 << 20

PARALLEL_FS = {
    "lustre",
    "gpfs",
    "beegfs",
    "cephfs",
    "ceph",
    "fuse.ceph-fuse",  # CephFS through ceph-fuse (what /proc/mounts says)
    "fuse.glusterfs",
    "wekafs",
    "fuse.weka",
    "pvfs2",
}
CEPH_FS = {"ceph", "cephfs", "fuse.ceph-fuse"}
# FUSE clients that keep file data in a cache of their own, which neither posix_fadvise nor
# /proc/sys/vm/drop_caches empties. Measured on ceph-fuse 16.2: a 64 MiB file re-read after
# either came from the client's object cache with 0 bytes read from the OSDs; O_DIRECT reads
# went to the OSDs every time.
CLIENT_CACHE_FS = {
    "fuse.ceph-fuse": "ceph-fuse keeps file data in its own object cache, which posix_fadvise "
    "and drop_caches do not empty",
}
NETWORK_FS = {"nfs", "nfs4", "cifs", "smb3", "fuse.sshfs"} | PARALLEL_FS
KNOWN_FS = NETWORK_FS | {
    "ext2", "ext3", "ext4", "xfs", "btrfs", "zfs", "tmpfs", "overlay", "f2fs", "fuse",
    "ramfs", "squashfs", "vfat", "ntfs", "9p", "virtiofs",
}  # fmt: skip


@dataclass(frozen=True)
class MountInfo:
    mount_point: str
    fs_type: str
    source: str
    options: str = ""


def _unescape(field_: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal
    out, i = [], 0
    while i < len(field_):
        if field_[i] == "\\" and i + 3 < len(field_) + 0 and field_[i + 1 : i + 4].isdigit():
            out.append(chr(int(field_[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field_[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[MountInfo]:
    """Parse /proc/self/mountinfo text into mount records (order kept)."""
    mounts = []
    for line in text.splitlines():
        parts = line.split()
        if "-" not in parts or len(parts) < 7:
            continue
        sep = parts.index("-")
        if sep + 2 >= len(parts) + 1:
            continue
        fs_type = parts[sep + 1] if sep + 1 < len(parts) else "unknown"
        source = _unescape(parts[sep + 2]) if sep + 2 < len(parts) else ""
        mounts.append(MountInfo(_unescape(parts[4]), fs_type, source, parts[5]))
    return mounts


def find_mount(path: str, mounts: list[MountInfo]) -> MountInfo | None:
    """The mount holding ``path``: longest mount-point prefix; the last mounted wins ties."""
    best: MountInfo | None = None
    for m in mounts:
        mp = m.mount_point.rstrip("/") or "/"
        if path == mp or path.startswith(mp + "/") or mp == "/":
            if best is None or len(mp) >= len(best.mount_point.rstrip("/") or "/"):
                best = m
    return best


def read_mountinfo(path: str = "/proc/self/mountinfo") -> list[MountInfo]:
    try:
        with open(path) as f:
            return parse_mountinfo(f.read())
    except OSError:
        return []


# Kernel interfaces mounted as filesystems: files there are not storage (and writing in them
# may change the system), so they are refused as targets.
PSEUDO_FS = {
    "proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs",
    "pstore", "bpf", "devpts", "mqueue", "efivarfs", "binfmt_misc", "fusectl", "rpc_pipefs",
    "nsfs", "autofs", "selinuxfs", "hugetlbfs",
}  # fmt: skip


def fs_class(fs_type: str) -> str:
    """'parallel', 'network', 'memory', 'local' or 'unknown' for a filesystem type."""
    t = fs_type.lower()
    if t in PARALLEL_FS:
        return "parallel"
    if t in NETWORK_FS or t.startswith("nfs"):
        return "network"
    if t in {"tmpfs", "ramfs", "devtmpfs"}:
        return "memory"
    if t in KNOWN_FS:
        return "local"
    return "unknown"


def client_cache(fs_type: str) -> str | None:
    """Why buffered reads on ``fs_type`` may come from a client cache iobench cannot drop
    (None when dropping the page cache is enough)."""
    return CLIENT_CACHE_FS.get(fs_type.lower())


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def aligned_buffer(size: int) -> mmap.mmap:
    """A page-aligned anonymous buffer (what O_DIRECT needs), rounded up to 4 KiB."""
    size = max(DIRECT_ALIGN, -(-size // DIRECT_ALIGN) * DIRECT_ALIGN)
    return mmap.mmap(-1, size)


def probe_direct_io(directory: str) -> tuple[bool, str | None]:
    """Try an aligned O_DIRECT write and read in ``directory``: (supported, reason if not)."""
    if not hasattr(os, "O_DIRECT"):
        return False, "O_DIRECT is not available on this OS"
    probe = os.path.join(directory, ".direct-probe")
    buf = aligned_buffer(DIRECT_ALIGN)
    buf.write(os.urandom(DIRECT_ALIGN))
    try:
        fd = os.open(probe, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
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
            os.unlink(probe)
        except OSError:
            pass


def probe_direct_alignment(directory: str) -> int:
    """The smallest offset and length alignment O_DIRECT accepts in ``directory``, measured:
    an aligned probe file is written, then read at 512, 1024, 2048 bytes... until a read is
    not refused (EINVAL). ext4 and XFS take the device's logical block size, btrfs its sector
    size, NFS any; 4096 when none smaller works. Call after ``probe_direct_io`` succeeded."""
    probe = os.path.join(directory, ".direct-align-probe")
    size = 2 * DIRECT_ALIGN
    buf = aligned_buffer(size)
    buf.write(os.urandom(size))
    try:
        fd = os.open(probe, os.O_CREAT | os.O_RDWR | os.O_DIRECT, 0o600)
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
            os.unlink(probe)
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


def direct_alignment(t: Target) -> tuple[int, str] | None:
    """(alignment O_DIRECT needs on ``t``, what it was measured from), or None when the run
    will not use O_DIRECT there (URL targets, memory filesystems, O_DIRECT refused) or the
    alignment is not known yet. Before the run directory exists, the device's logical block
    size (sysfs, nothing written); after it, what the probe measured in it."""
    if t.kind != "posix" or fs_class(t.fs_type) == "memory":
        return None
    on = f"{t.mount_source or t.root} ({t.fs_type})"
    if t.direct_io is True:
        return (t.direct_align or DIRECT_ALIGN), f"O_DIRECT on {on}, measured in the run directory"
    if t.direct_io == "unsupported":
        return None
    lbs = device_logical_block_size(t.root)
    return (lbs, f"the logical block size of {on}") if lbs else None


def check_direct_alignment(sizes: Mapping[str, int], t: Target) -> None:
    """Refuse (UsageError, exit 2) a size or offset that O_DIRECT I/O on ``t`` cannot take:
    ``sizes`` maps a parameter name to bytes that reach O_DIRECT reads or writes as lengths
    or offsets (a block size, the bytes per worker that fix file sizes and regions)."""
    if not sizes:
        return
    known = direct_alignment(t)
    if known is None:
        return
    align, basis = known
    for name, value in sizes.items():
        if value % align:
            param = name.split("[")[0]
            fit = max(align, round(value / align) * align)
            raise UsageError(
                f"{name}={value} bytes cannot be aligned for direct I/O: O_DIRECT needs "
                f"multiples of {align} bytes ({basis})",
                hint=f"use --buffered, or an aligned {param} such as {format_size(fit)}",
            )


def drop_file_cache(path: str) -> bool:
    """Ask the kernel to drop a file's cached pages. True when it could.

    The file's dirty pages are written back first: DONTNEED leaves dirty pages in the cache,
    so a file written without fsync (fsync=never, fsspec on a local directory) would be read
    back from memory under a "dropped" label."""
    try:
        fd = os.open(path, os.O_RDONLY)
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


def is_url(target: str) -> bool:
    return "://" in target and not target.startswith("file://")


@dataclass
class Target:
    """A resolved target and the run directory iobench owns inside it."""

    path_or_url: str
    root: str  # the directory path (local) or URL the user gave, normalised
    run_dir: str = ""  # TARGET/.iobench-<run_id>
    fs_type: str = "unknown"
    mount_point: str = ""
    mount_source: str = ""
    free_bytes: int = 0
    direct_io: bool | str = False  # True, False, or "unsupported"
    direct_reason: str | None = None
    direct_align: int | None = None  # bytes O_DIRECT offsets and lengths are multiples of
    kind: str = "posix"  # "posix" or "fsspec"
    layout: dict[str, Any] = field(default_factory=dict)  # Lustre/GPFS striping
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)  # fsspec only
    warnings: list[str] = field(default_factory=list)
    created: bool = False

    def to_dict(self) -> dict[str, Any]:
        return redact_obj(self._fields())  # a URL's credentials never reach a result

    def _fields(self) -> dict[str, Any]:
        return {
            "path_or_url": self.path_or_url,
            "fs_type": self.fs_type,
            "fs_class": "object" if self.kind == "fsspec" else fs_class(self.fs_type),
            "kind": self.kind,
            "mount_point": self.mount_point,
            "mount_source": self.mount_source,
            "free_bytes": self.free_bytes,
            "direct_io": self.direct_io,
            "direct_reason": self.direct_reason,
            **({"direct_align": self.direct_align} if self.direct_align else {}),
            "run_dir": self.run_dir,
            "layout": self.layout,
        }

    def path(self, *parts: str) -> str:
        return os.path.join(self.run_dir, *parts)


def resolve(target: str, *, mountinfo: list[MountInfo] | None = None) -> Target:
    """Check a local target directory (or an fsspec URL) and describe it. Writes nothing."""
    if not target:
        raise TargetError("TARGET is empty", hint="give a directory or an fsspec URL")
    if is_url(target):
        return resolve_url(target)
    target = target.removeprefix("file://")
    p = Path(target).expanduser()
    try:
        os.stat(p)
    except PermissionError:
        raise TargetError(
            f"target {target} is not accessible by this user (permission denied)",
            hint="pick a directory you can enter and write",
        ) from None
    except OSError:
        pass
    if not p.exists():
        raise TargetError(
            f"target {target} does not exist",
            hint="create it or pick another directory",
        )
    if not p.is_dir():
        raise TargetError(
            f"target {target} is not a directory", hint="give a directory to write in"
        )
    real = os.path.realpath(p)
    probe_st = os.statvfs(real)
    if probe_st.f_flag & os.ST_RDONLY:
        raise TargetError(
            f"target {target} is on a read-only filesystem", hint="pick a writable one"
        )
    if not os.access(real, os.W_OK | os.X_OK):
        raise TargetError(
            f"target {target} is not writable by this user",
            hint="pick a writable directory",
        )
    mounts = mountinfo if mountinfo is not None else read_mountinfo()
    m = find_mount(real, mounts)
    if m is not None and m.fs_type in PSEUDO_FS:
        raise TargetError(
            f"target {target} is on {m.fs_type}, a kernel interface ({m.mount_point}), not storage",
            hint="give a directory on the storage to test",
        )
    t = Target(path_or_url=target, root=real, free_bytes=free_bytes(real))
    if m:
        t.fs_type, t.mount_point, t.mount_source = m.fs_type, m.mount_point, m.source
    return t


def check_free_space(t: Target, planned_bytes: int, planned_inodes: int = 0) -> None:
    """Refuse to start when the plan would not fit, with a margin: its bytes, and the files
    and directories it creates (a filesystem out of inodes is full whatever ``df`` says)."""
    if t.kind != "posix":
        return  # object stores report no free space
    need = int(planned_bytes * (1 + FREE_SPACE_MARGIN)) + FREE_SPACE_MIN_HEADROOM
    if planned_bytes > 0 and need > t.free_bytes:
        raise TargetError(
            f"the run needs {format_bytes(need)} (plan {format_bytes(planned_bytes)} + margin) "
            f"but {t.root} has {format_bytes(t.free_bytes)} free",
            hint="lower size/files with --set or free space",
        )
    free = free_inodes(t.root)
    want = planned_inodes + 2  # + the run directory and the O_DIRECT probe
    if planned_inodes > 0 and free is not None and want > free:
        raise TargetError(
            f"the run creates {want:,} files and directories but {t.root} has {free:,} free "
            "inodes (df -i)",
            hint="lower files with --set or free inodes on the target",
        )


def free_inodes(path: str) -> int | None:
    """Inodes an unprivileged user may still create under ``path``; None where the
    filesystem has no fixed inode count (btrfs and others report 0 in total)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return inodes_from_statvfs(st.f_files, st.f_favail)


def inodes_from_statvfs(files: int, favail: int) -> int | None:
    """Free inodes from statvfs's counts; None where they are no count: a total of 0 (btrfs)
    or a free count that is negative or beyond the total (ceph-fuse reports -1: "unlimited")."""
    if files <= 0 or favail < 0 or favail > files:
        return None
    return favail


def out_of_inodes(path: str) -> bool:
    """Whether the filesystem holding ``path`` has run out of inodes (an ENOSPC with space)."""
    free = free_inodes(path)
    return free is not None and free == 0


def create_run_dir(t: Target, run_id: str) -> str:
    """Create TARGET/.iobench-<run_id>/ (must not exist) and probe O_DIRECT inside it."""
    if t.kind == "fsspec":
        return _create_url_run_dir(t, run_id)
    run_dir = os.path.join(t.root, RUN_DIR_PREFIX + run_id)
    try:
        os.mkdir(run_dir, 0o755)
    except FileExistsError:
        raise TargetError(
            f"run directory {run_dir} already exists", hint="use a new run id"
        ) from None
    except OSError as e:
        raise TargetError(
            f"cannot create {run_dir}: {e.strerror}", hint="check permissions"
        ) from None
    t.run_dir = run_dir
    t.created = True
    ok, reason = probe_direct_io(run_dir)
    t.direct_io = True if ok else "unsupported"
    t.direct_reason = reason
    t.direct_align = probe_direct_alignment(run_dir) if ok else None
    return run_dir


def remove_run_dir(t: Target) -> None:
    """Remove the run directory iobench created, and nothing else."""
    if t.kind == "fsspec":
        _remove_url_run_dir(t)
        return
    if not t.created or not t.run_dir:
        return
    name = os.path.basename(t.run_dir)
    if not name.startswith(RUN_DIR_PREFIX) or os.path.dirname(t.run_dir) != t.root:
        return  # paranoia: never remove anything that is not our own run directory
    if os.path.islink(t.run_dir):
        return  # never follow a link for deletion: our run directory was replaced by it
    errors: list[str] = []

    def failed(_func: Any, path: str, exc: Any) -> None:
        e = exc[1] if isinstance(exc, tuple) else exc
        if not isinstance(e, FileNotFoundError):  # gone already: what we wanted
            errors.append(f"{path}: {getattr(e, 'strerror', None) or e}")

    if sys.version_info >= (3, 12):
        shutil.rmtree(t.run_dir, onexc=failed)
    else:  # pragma: no cover - Python 3.10/3.11
        shutil.rmtree(t.run_dir, onerror=failed)
    if not os.path.lexists(t.run_dir):
        t.created = False
    elif errors:
        t.warnings.append(
            f"could not remove the run directory {t.run_dir} ({errors[0]}"
            + (f", and {len(errors) - 1} more" if len(errors) > 1 else "")
            + "): remove it by hand"
        )


# The signals that end a run the way SIGINT/SIGTERM do: a dropped ssh session (SIGHUP), the
# terminal's quit key (SIGQUIT), a batch system's warning before its time limit (Slurm --signal: SIGUSR1/SIGUSR2),
# an alarm (SIGALRM) and a CPU-time limit reached (ulimit -t: SIGXCPU, SIGKILL at the hard
# limit). Left at their defaults they would kill the process with no result and its run
# directory (and any fio child) left behind.
STOP_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
                 "SIGXCPU")
    if hasattr(signal, name)
)  # fmt: skip
# A file-size limit (ulimit -f) raises SIGXFSZ, whose default kills the process; ignored, the
# write fails with EFBIG instead, and the phase fails naming the file and the limit.
IGNORED_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, n) for n in ("SIGXFSZ",) if hasattr(signal, n)
)


class StopFlag:
    """Set by a stop signal (SIGINT, SIGTERM, SIGHUP, ...); workers poll it, the main thread
    raises Interrupted. ``suspended`` counts SIGCONTs: the process was stopped (Ctrl-Z,
    SIGSTOP) and resumed, so a phase in flight then measured the pause too."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None
        self.suspended = 0

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, signum: int | None = None) -> None:
        if self.signal is None:
            self.signal = signum
        self.event.set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, waking at once when the flag is set; True if it is."""
        return self.event.wait(max(0.0, seconds))

    def check(self) -> None:
        if self.event.is_set():
            raise Interrupted(f"interrupted by {_signame(self.signal)}")


def _signame(signum: int | None) -> str:
    if signum is None:
        return "request"
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def worker_signals() -> None:
    """In a forked worker (posix engine, DataLoader): the stop signals a terminal or a
    session sends to the whole process group are the parent's to handle (it stops the
    workers through shared state); SIGTERM keeps its default, so a worker can still be
    ended on its own; SIGXFSZ stays ignored (a write over the limit fails with EFBIG)."""
    for s in STOP_SIGNALS:
        if s != signal.SIGTERM:
            signal.signal(s, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for s in IGNORED_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if hasattr(signal, "SIGCONT"):
        signal.signal(signal.SIGCONT, signal.SIG_DFL)


class SignalGuard:
    """Route the stop signals (``STOP_SIGNALS``) to a StopFlag for a block.

    The first signal only sets the flag: workers poll it and stop, the phase in flight keeps
    what it measured (marked partial) and the main thread raises Interrupted at its next
    check. A second signal raises Interrupted in the main thread at once. SIGXFSZ is ignored
    (EFBIG names the file instead) and SIGCONT is counted (``StopFlag.suspended``).
    """

    def __init__(self, stop: StopFlag, on_signal: Callable[[int], None] | None = None):
        self.stop = stop
        self.on_signal = on_signal
        self._old: dict[int, Any] = {}
        self._deferring = 0

    def _handler(self, signum: int, frame: Any) -> None:
        again = self.stop.is_set()
        self.stop.set(signum)
        if self.on_signal:
            self.on_signal(signum)
        if again and not self._deferring:
            raise Interrupted(f"interrupted by {_signame(signum)}")

    def _resumed(self, signum: int, frame: Any) -> None:
        self.stop.suspended += 1

    def defer(self) -> None:
        """From now on a signal only sets the flag, never raises: what runs next (removing the
        run directory, saving the result) must not be cut half-way by a second Ctrl-C."""
        self._deferring += 1

    @contextmanager
    def deferred(self) -> Iterator[None]:
        """Signals only set the flag inside this block (e.g. between creating the run
        directory and recording that we did)."""
        self._deferring += 1
        try:
            yield
        finally:
            self._deferring -= 1

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for s in STOP_SIGNALS:
                try:
                    self._old[s] = signal.signal(s, self._handler)
                except (OSError, ValueError):  # pragma: no cover - not settable here
                    pass
            for s in IGNORED_SIGNALS:
                self._old[s] = signal.signal(s, signal.SIG_IGN)
            if hasattr(signal, "SIGCONT"):
                self._old[signal.SIGCONT] = signal.signal(signal.SIGCONT, self._resumed)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()


# -- fsspec URL targets (object stores and any fsspec filesystem) ----------------------------

URL_MARKER = ".iobench-run"  # a small object that makes the run "directory" exist on a store
S3_ENDPOINT_ENV = ENDPOINT_ENV  # IOBENCH_S3_ENDPOINT, AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL
PROBE_TIMEOUT_S = 5
# stores whose URLs cannot carry credentials: user information there is a mistake that the
# backend would take for part of the bucket name (and quote back in its error text)
NO_USERINFO = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss"}


def scrub(text: str, extra: list[str] | None = None) -> str:
    """``text`` without credentials (see :mod:`iobench.redact`), and without ``extra``."""
    out = redact_text(text)
    for value in extra or []:
        if value and len(value) >= 4:
            out = out.replace(value, "***")
    return out


def check_url_credentials(url: str, what: str) -> None:
    """TargetError (exit 2, the URL masked) for credentials no backend can take safely:

    - any user information in an object-store URL (``s3://KEY:SECRET@bucket/...``): s3fs,
      gcsfs and adlfs take credentials from the environment, and would read ``KEY:SECRET@``
      as part of the bucket name and quote it back in their errors;
    - a ``/`` in the user information of any URL (``ftp://user:pa/ss@host``): not a valid URL
      (RFC 3986: percent-encode it as ``%2F``); backends split it at the ``/`` and quote the
      pieces, which no redaction can recognise.
    """
    protocol = url_protocol(url)
    info = userinfo(url)
    if info is None:
        return
    if protocol in NO_USERINFO:
        raise TargetError(
            f"{what} {redact_url(url)} has credentials (or an '@') before the bucket name; "
            f"{protocol}:// URLs take none",
            hint="give them in the environment or the backend's configuration (for S3: "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or ~/.aws), the URL as "
            f"{protocol}://BUCKET/prefix",
        )
    if "/" in info and protocol not in ("memory", "file", "local"):  # paths, not hosts, there
        raise TargetError(
            f"{what} {redact_url(url)} has a '/' in its user name or password",
            hint="percent-encode it there as %2F (and '@' as %40, ':' in the user name as %3A)",
        )


def url_protocol(url: str) -> str:
    return url.split("://", 1)[0].lower()


def storage_options_from_env(protocol: str, environ: dict[str, str] | None = None) -> dict:
    """fsspec storage options from the environment (never credentials: the backend's own
    chain finds those). S3: endpoint from IOBENCH_S3_ENDPOINT, AWS_ENDPOINT_URL_S3 or
    AWS_ENDPOINT_URL (MinIO, Ceph RGW, a local moto server)."""
    env = os.environ if environ is None else environ
    if protocol in ("s3", "s3a"):
        endpoint = next((env[k] for k in S3_ENDPOINT_ENV if env.get(k)), None)
        if endpoint:
            return {"client_kwargs": {"endpoint_url": endpoint}}
    return {}


def _endpoint(opts: dict[str, Any]) -> str:
    return str(
        (opts.get("client_kwargs") or {}).get("endpoint_url") or opts.get("endpoint_url") or ""
    )


def url_fs(t: Target) -> tuple[Any, str]:
    """(fsspec filesystem, run-dir path in it) of a URL target (fsspec caches the instance)."""
    from fsspec.core import url_to_fs

    return url_to_fs(t.run_dir or t.root, **t.storage_options)


def _describe_store_error(e: BaseException, where: str, endpoint: str) -> str:
    at = f" at {endpoint}" if endpoint else ""
    if isinstance(e, FileNotFoundError):
        return f"{where} does not exist{at}"
    if isinstance(e, PermissionError):
        return f"access to {where} denied{at} (check the credentials and the bucket policy)"
    detail = " ".join(str(e).split())[:200]
    return f"cannot reach {where}{at}: {type(e).__name__}: {detail}"


def resolve_url(url: str, storage_options: dict[str, Any] | None = None) -> Target:
    """Check an fsspec URL target: known protocol, backend installed, bucket reachable.

    Writes nothing. Missing bucket, wrong endpoint or unknown protocol: TargetError (exit 2),
    one line, without credentials.
    """
    import fsspec
    from fsspec.core import url_to_fs

    safe = scrub(url)
    protocol = url_protocol(url)
    check_url_credentials(url, "target")
    try:
        cls = fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise TargetError(
            f"unknown protocol {protocol!r} in target {safe}",
            hint="give a directory or an fsspec URL such as s3://bucket/prefix or memory://name",
        ) from None
    except ImportError as e:
        hint = (
            "pip install 'iobench[s3]'"
            if protocol in ("s3", "s3a")
            else scrub(str(e)) or f"install the fsspec package for {protocol}://"
        )
        raise EngineUnavailable(
            f"no filesystem package for {protocol}:// targets", hint=hint
        ) from None
    opts = dict(storage_options_from_env(protocol) if storage_options is None else storage_options)
    endpoint = _endpoint(opts)
    try:
        fs, root = url_to_fs(url, **opts)
    except Exception as e:  # noqa: BLE001 - backends raise what they like on bad options
        raise TargetError(scrub(f"target {safe} cannot be opened: {e}")) from None
    _check_url_root(cls, fs, root, opts, safe, endpoint)
    return Target(
        path_or_url=safe,
        root=fs.unstrip_protocol(root.rstrip("/")),
        fs_type=protocol,
        mount_source=scrub(endpoint),
        direct_io="unsupported",
        direct_reason="fsspec URL target: no O_DIRECT and no client page cache",
        kind="fsspec",
        storage_options=opts,
    )


def _check_url_root(
    cls: Any, fs: Any, root: str, opts: dict[str, Any], safe: str, endpoint: str
) -> None:
    """The bucket exists and answers (fast: short timeouts, few retries); the prefix is not
    an object."""
    probe = fs
    if protocol_is_s3(cls):
        cfg = dict(opts.get("config_kwargs") or {})
        cfg.setdefault("connect_timeout", PROBE_TIMEOUT_S)
        cfg.setdefault("read_timeout", PROBE_TIMEOUT_S)
        cfg.setdefault("retries", {"max_attempts": 2})
        probe = cls(**{**opts, "config_kwargs": cfg}, skip_instance_cache=True)
        probe.retries = 2  # s3fs's own retry loop, on top of botocore's
    try:
        if hasattr(probe, "split_path"):
            bucket = probe.split_path(root)[0]
            if not bucket:
                raise TargetError(f"target {safe} names no bucket", hint="write s3://BUCKET/prefix")
            try:
                probe.info(bucket)
            except FileNotFoundError:
                raise TargetError(
                    f"bucket {bucket!r} does not exist" + (f" at {endpoint}" if endpoint else ""),
                    hint="create it first, or check the URL and IOBENCH_S3_ENDPOINT",
                ) from None
        if probe.isfile(root):
            raise TargetError(
                f"target {safe} is an object, not a prefix", hint="give a prefix to write under"
            )
    except TargetError as e:
        raise TargetError(scrub(e.message), hint=e.hint) from None
    except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
        raise TargetError(
            scrub(_describe_store_error(e, f"target {safe}", endpoint)),
            hint="check the URL, the endpoint (IOBENCH_S3_ENDPOINT) and the credentials",
        ) from None


def protocol_is_s3(cls: Any) -> bool:
    return getattr(cls, "__module__", "").startswith("s3fs")


def _create_url_run_dir(t: Target, run_id: str) -> str:
    """Create URL/.iobench-<run_id>/ (a marker object in it) on a store; it must not exist."""
    from fsspec.core import url_to_fs

    fs, root = url_to_fs(t.root, **t.storage_options)
    run = root.rstrip("/") + "/" + RUN_DIR_PREFIX + run_id
    url = fs.unstrip_protocol(run)
    try:
        if fs.exists(run):
            raise TargetError(f"run directory {scrub(url)} already exists", hint="use a new run id")
        if not hasattr(fs, "split_path"):  # hierarchical fsspec filesystems need directories
            fs.makedirs(run, exist_ok=True)
        fs.pipe_file(run + "/" + URL_MARKER, run_id.encode())
    except TargetError:
        raise
    except Exception as e:  # noqa: BLE001
        raise TargetError(
            scrub(_describe_store_error(e, f"run directory {url}", _endpoint(t.storage_options))),
            hint="check write permission on the bucket/prefix",
        ) from None
    t.run_dir = url
    t.created = True
    t.direct_io = "unsupported"
    return url


def _remove_url_run_dir(t: Target) -> None:
    """``fs.rm(run_dir, recursive=True)`` of our own run prefix, and nothing else."""
    if not t.created or not t.run_dir:
        return
    fs, run = url_fs(t)
    if not posixpath.basename(run.rstrip("/")).startswith(RUN_DIR_PREFIX):
        return  # paranoia: never remove anything that is not our own run prefix
    try:
        if fs.exists(run):
            fs.rm(run, recursive=True)
        fs.invalidate_cache(run)
        if not fs.exists(run):
            t.created = False
    except Exception as e:  # noqa: BLE001 - cleanup is best effort; say what is left
        t.warnings.append(scrub(f"could not remove {t.run_dir}: {type(e).__name__}: {e}"))


def run_dir_visible(t: Target, run_dir_id: str) -> bool:
    """Whether another run directory ``.iobench-<run_dir_id>`` next to ours is visible here
    (a shared filesystem or store: another rank's files can be read back)."""
    name = RUN_DIR_PREFIX + run_dir_id
    if t.kind == "fsspec":
        fs, run = url_fs(t)
        peer = posixpath.join(posixpath.dirname(run.rstrip("/")), name, URL_MARKER)
        try:
            fs.invalidate_cache(posixpath.dirname(peer))
            return bool(fs.exists(peer))
        except Exception:  # noqa: BLE001
            return False
    return os.path.isdir(os.path.join(t.root, name))


def remove_sibling_run_dir(t: Target, run_dir_id: str) -> None:
    """Remove ``TARGET/.iobench-<run_dir_id>`` (another rank's run directory of this same run)
    where this host sees it. Best effort; nothing else is touched."""
    name = RUN_DIR_PREFIX + run_dir_id
    if os.sep in name or "/" in name or name in (".", ".."):
        return
    if t.kind == "fsspec":
        try:
            fs, run = url_fs(t)
            peer = posixpath.join(posixpath.dirname(run.rstrip("/")), name)
            fs.invalidate_cache(peer)
            if fs.exists(peer):
                fs.rm(peer, recursive=True)
        except Exception:  # noqa: BLE001 - best effort
            pass
        return
    path = os.path.join(t.root, name)
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)


# -- parallel filesystems: Lustre striping, GPFS attributes ----------------------------------

LAYOUT_TIMEOUT_S = 30
LUSTRE_STRIPE_UNIT = 64 << 10  # lfs setstripe -S must be a multiple of 64 KiB
_KV = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*):\s+(\S+)")
_LFS_INT = {"stripe_count", "stripe_size", "stripe_offset", "lcm_layout_gen", "lcm_mirror_count",
            "lcm_entry_count", "lcme_extent.e_start", "lcme_extent.e_end"}  # fmt: skip


def _int_or_str(v: str) -> Any:
    try:
        return int(v)
    except ValueError:
        return v


def parse_lfs_getstripe(text: str) -> dict[str, Any]:
    """``lfs getstripe -d DIR`` output -> stripe_count, stripe_size, pattern, pool (and the
    components of a progressive-file-layout directory, each with its extent)."""
    components: list[dict[str, Any]] = []
    top: dict[str, Any] = {}
    cur: dict[str, Any] | None = None
    for key, value in _KV.findall(text):
        key = key.removeprefix("lmm_")  # a file's layout (and older clients) name keys lmm_*
        if key == "lcme_id":
            cur = {}
            components.append(cur)
        v = _int_or_str(value) if key in _LFS_INT else value
        if key == "pattern" and value == "1":  # older clients print LOV_PATTERN_RAID0 as 1
            v = "raid0"
        if key == "lcme_extent.e_end" and value.upper() == "EOF":
            v = None
        dest = cur if cur is not None else top
        short = {"lcme_extent.e_start": "extent_start", "lcme_extent.e_end": "extent_end"}
        dest[short.get(key, key)] = v
    out: dict[str, Any] = {}
    first = components[0] if components else top
    for key in ("stripe_count", "stripe_size", "pattern", "stripe_offset", "pool"):
        if key in first:
            out[key] = first[key]
    if "pool" in top and "pool" not in out:
        out["pool"] = top["pool"]
    if components:
        out["components"] = [
            {
                k: c[k]
                for k in (
                    "extent_start",
                    "extent_end",
                    "stripe_count",
                    "stripe_size",
                    "pattern",
                    "pool",
                )
                if k in c
            }  # fmt: skip
            for c in components
        ]
    return out


def parse_mmlsattr(text: str) -> dict[str, Any]:
    """``mmlsattr -L PATH`` output -> replication (and its maximum), storage pool, fileset."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip().lower(), value.strip()
        if key in ("metadata replication", "data replication"):
            m = re.match(r"(\d+)\s+max\s+(\d+)", value)
            name = key.replace(" ", "_")
            if m:
                out[name], out["max_" + name] = int(m.group(1)), int(m.group(2))
        elif key == "storage pool name":
            out["pool"] = value
        elif key == "fileset name":
            out["fileset"] = value
    return out


def _tool(name: str, *fallbacks: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    return next((f for f in fallbacks if os.access(f, os.X_OK)), None)


def _run_tool(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=LAYOUT_TIMEOUT_S)


def apply_layout(t: Target, params: dict[str, Any]) -> list[str]:
    """Stripe the run directory as the workload asks, before any file is created (Lustre
    ``lfs setstripe``, CephFS ``ceph.dir.layout``) and record its layout in ``t.layout``
    (Lustre ``lfs getstripe -d``, GPFS ``mmlsattr -L``, CephFS ``ceph.file.layout``).
    Returns warnings; a refused layout is a TargetError."""
    count, size = params.get("stripe_count"), params.get("stripe_size")
    asked = count is not None or size is not None
    fs_type = t.fs_type.lower()
    if t.kind != "posix" or not t.run_dir:
        return (
            [f"stripe_count/stripe_size ignored: {t.fs_type} is not Lustre or CephFS"]
            if asked
            else []
        )
    warnings: list[str] = []
    if fs_type in CEPH_FS:
        if asked:
            _ceph_set_dir_layout(t.run_dir, count, size)
        t.layout = _ceph_layout(t.run_dir, warnings)
    elif fs_type == "lustre":
        lfs = _tool("lfs", "/usr/bin/lfs")
        if lfs is None:
            if asked:
                raise TargetError(
                    "stripe_count/stripe_size need the lfs command, which is not on PATH",
                    hint="install the Lustre client tools or drop the stripe settings",
                )
            return ["Lustre layout not recorded: the lfs command is not on PATH"]
        if asked:
            _lfs_setstripe(lfs, t.run_dir, count, size)
        t.layout = _lustre_layout(lfs, t.run_dir, warnings)
    elif fs_type == "gpfs":
        t.layout = _gpfs_layout(t.run_dir, warnings)
        if asked:
            warnings.append(
                "stripe_count/stripe_size ignored: GPFS stripes by its block size, set when "
                "the filesystem was created"
            )
    elif asked:
        warnings.append(f"stripe_count/stripe_size ignored: {t.fs_type} is not Lustre or CephFS")
    return warnings


def _lfs_setstripe(lfs: str, run_dir: str, count: int | None, size: int | None) -> None:
    if size is not None and size % LUSTRE_STRIPE_UNIT:
        raise TargetError(
            f"stripe_size {format_bytes(size)} is not a multiple of 64 KiB",
            hint="give e.g. --set stripe_size=1MiB",
        )
    argv = [lfs, "setstripe"]
    if count is not None:
        argv += ["-c", str(count)]
    if size is not None:
        argv += ["-S", str(size)]
    argv.append(run_dir)
    try:
        out = _run_tool(argv)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise TargetError(f"lfs setstripe on {run_dir} failed: {e}") from None
    if out.returncode != 0:
        why = (out.stderr or out.stdout).strip().splitlines()
        raise TargetError(
            f"lfs setstripe {' '.join(argv[2:-1])} on {run_dir} failed: "
            f"{why[-1] if why else f'exit {out.returncode}'}",
            hint="stripe_count is at most the OST count (-1: all OSTs)",
        )


def _lustre_layout(lfs: str, run_dir: str, warnings: list[str]) -> dict[str, Any]:
    try:
        out = _run_tool([lfs, "getstripe", "-d", run_dir])
    except (OSError, subprocess.TimeoutExpired) as e:
        warnings.append(f"Lustre layout not recorded: lfs getstripe failed ({e})")
        return {}
    if out.returncode != 0:
        warnings.append(f"Lustre layout not recorded: lfs getstripe exit {out.returncode}")
        return {}
    layout = {"source": "lfs getstripe -d", **parse_lfs_getstripe(out.stdout)}
    return layout


def _gpfs_layout(run_dir: str, warnings: list[str]) -> dict[str, Any]:
    layout: dict[str, Any] = {}
    try:
        layout["block_size"] = os.statvfs(run_dir).f_bsize  # GPFS reports its block size here
        layout["block_size_source"] = "statvfs"
    except OSError:
        pass
    tool = _tool("mmlsattr", "/usr/lpp/mmfs/bin/mmlsattr")
    if tool is None:
        warnings.append("GPFS attributes not recorded: mmlsattr is not on PATH")
        return layout
    try:
        out = _run_tool([tool, "-L", run_dir])
    except (OSError, subprocess.TimeoutExpired) as e:
        warnings.append(f"GPFS attributes not recorded: mmlsattr failed ({e})")
        return layout
    if out.returncode != 0:
        warnings.append(f"GPFS attributes not recorded: mmlsattr exit {out.returncode}")
        return layout
    return {"source": "mmlsattr -L", **layout, **parse_mmlsattr(out.stdout)}


# CephFS layouts are virtual extended attributes, read and set by name (listxattr shows none):
# ceph.dir.layout on a directory (new files in it inherit it), ceph.file.layout.* on a file.
CEPH_LAYOUT_FIELDS = ("stripe_unit", "stripe_count", "object_size", "pool")
CEPH_MIN_STRIPE_UNIT = 64 << 10
CEPH_LAYOUT_PROBE = ".layout-probe"


def read_ceph_layout(path: str) -> dict[str, Any]:
    """The CephFS layout of a file (``ceph.file.layout.*``) or the layout set on a directory
    (``ceph.dir.layout.*``; {} when none is set there, i.e. it inherits one)."""
    kind = "dir" if os.path.isdir(path) else "file"
    out: dict[str, Any] = {}
    for name in CEPH_LAYOUT_FIELDS:
        try:
            raw = os.getxattr(path, f"ceph.{kind}.layout.{name}")
        except OSError as e:
            if e.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
                continue
            raise
        value = raw.decode(errors="replace").strip("\x00 ")
        out[name] = value if name == "pool" else _int_or_str(value)
    return out


def phase_layout(t: Target, path: str) -> dict[str, Any]:
    """The layout a phase's file really has (CephFS only; {} elsewhere or when unreadable)."""
    if t.kind != "posix" or t.fs_type.lower() not in CEPH_FS:
        return {}
    try:
        return read_ceph_layout(path)
    except OSError:
        return {}


def _ceph_set_dir_layout(run_dir: str, count: int | None, size: int | None) -> None:
    """Set ``ceph.dir.layout`` on the (empty) run directory: stripe_count, and stripe_size as
    Ceph's stripe_unit, raising object_size to a multiple of it where it must."""
    if count is not None and count < 1:
        raise TargetError(
            f"stripe_count {count} is not valid on CephFS", hint="give 1 or more (e.g. 4)"
        )
    if size is not None and (size <= 0 or size % CEPH_MIN_STRIPE_UNIT):
        raise TargetError(
            f"stripe_size {format_bytes(size)} is not a multiple of 64 KiB",
            hint="give e.g. --set stripe_size=1MiB",
        )
    fields: dict[str, int] = {}
    if count is not None:
        fields["stripe_count"] = count
    if size is not None:
        fields["stripe_unit"] = size
        obj = int(_ceph_probe_layout(run_dir).get("object_size") or 0)
        if obj <= 0 or obj % size:  # Ceph needs object_size = k * stripe_unit
            fields["object_size"] = size * max(1, obj // size)
    value = " ".join(f"{k}={v}" for k, v in fields.items())
    try:
        os.setxattr(run_dir, "ceph.dir.layout", value.encode())
    except OSError as e:
        hint = {
            errno.EPERM: "the client needs the 'p' capability (ceph fs authorize FS CLIENT / rwp)",
            errno.EACCES: "the client needs the 'p' capability (ceph fs authorize FS CLIENT / rwp)",
            errno.EINVAL: "stripe_size must divide the object size; stripe_count at least 1",
        }.get(e.errno, "check the CephFS client")
        raise TargetError(
            f"setting ceph.dir.layout {value!r} on {run_dir} failed: {e.strerror}", hint=hint
        ) from None


def _ceph_probe_layout(run_dir: str) -> dict[str, Any]:
    """The layout a new file in ``run_dir`` gets (an empty probe file, removed at once)."""
    probe = os.path.join(run_dir, CEPH_LAYOUT_PROBE)
    fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.close(fd)
    try:
        return read_ceph_layout(probe)
    finally:
        os.unlink(probe)


def _ceph_layout(run_dir: str, warnings: list[str]) -> dict[str, Any]:
    try:
        layout = _ceph_probe_layout(run_dir)
    except OSError as e:
        warnings.append(f"CephFS layout not recorded: {e.strerror or e}")
        return {}
    if not layout:
        warnings.append("CephFS layout not recorded: the client shows no ceph.file.layout")
        return {}
    return {"source": "ceph.file.layout xattrs", **layout}


def make_url_dirs(t: Target, relpaths: list[str]) -> None:
    """Directories under a URL run dir: a no-op on object stores (no directories), real ones
    on hierarchical fsspec filesystems (memory://, sftp://, ...)."""
    fs, run = url_fs(t)
    if hasattr(fs, "split_path"):
        return
    for d in sorted(set(relpaths)):
        fs.makedirs(posixpath.join(run, d), exist_ok=True)
