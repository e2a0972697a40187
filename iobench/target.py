"""The target of a run: a directory (or fsspec URL), its filesystem, and the run directory.

Everything iobench writes lives under ``TARGET/.iobench-<run_id>/``, created by this module
and removed by it on success, failure and interruption (unless ``keep``). Nothing else in the
target is created, changed or removed.
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import Interrupted, TargetError
from .units import format_bytes

RUN_DIR_PREFIX = ".iobench-"
DIRECT_ALIGN = 4096
FREE_SPACE_MARGIN = 0.05  # keep 5 % (and at least 64 MiB) of headroom beyond the plan
FREE_SPACE_MIN_HEADROOM = 64 << 20

PARALLEL_FS = {
    "lustre",
    "gpfs",
    "beegfs",
    "cephfs",
    "ceph",
    "wekafs",
    "fuse.weka",
    "pvfs2",
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


def fs_class(fs_type: str) -> str:
    """'parallel', 'network', 'memory', 'local' or 'unknown' for a filesystem type."""
    t = fs_type.lower()
    if t in PARALLEL_FS:
        return "parallel"
    if t in NETWORK_FS or t.startswith("nfs"):
        return "network"
    if t in {"tmpfs", "ramfs"}:
        return "memory"
    if t in KNOWN_FS:
        return "local"
    return "unknown"


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


def drop_file_cache(path: str) -> bool:
    """Ask the kernel to drop a file's cached pages (after fsync). True when it could."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
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
    kind: str = "posix"  # "posix" or "fsspec"
    layout: dict[str, Any] = field(default_factory=dict)  # Lustre/GPFS striping
    warnings: list[str] = field(default_factory=list)
    created: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "path_or_url": self.path_or_url,
            "fs_type": self.fs_type,
            "fs_class": fs_class(self.fs_type),
            "mount_point": self.mount_point,
            "mount_source": self.mount_source,
            "free_bytes": self.free_bytes,
            "direct_io": self.direct_io,
            "direct_reason": self.direct_reason,
            "run_dir": self.run_dir,
            "layout": self.layout,
        }

    def path(self, *parts: str) -> str:
        return os.path.join(self.run_dir, *parts)


def resolve(target: str, *, mountinfo: list[MountInfo] | None = None) -> Target:
    """Check a local target directory and describe its filesystem. Writes nothing."""
    if not target:
        raise TargetError("TARGET is empty", hint="give a directory or an fsspec URL")
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
    t = Target(path_or_url=target, root=real, free_bytes=free_bytes(real))
    if m:
        t.fs_type, t.mount_point, t.mount_source = m.fs_type, m.mount_point, m.source
    return t


def check_free_space(t: Target, planned_bytes: int) -> None:
    """Refuse to start when the plan would not fit, with a margin."""
    need = int(planned_bytes * (1 + FREE_SPACE_MARGIN)) + FREE_SPACE_MIN_HEADROOM
    if planned_bytes > 0 and need > t.free_bytes:
        raise TargetError(
            f"the run needs {format_bytes(need)} (plan {format_bytes(planned_bytes)} + margin) "
            f"but {t.root} has {format_bytes(t.free_bytes)} free",
            hint="lower size/files with --set or free space",
        )


def create_run_dir(t: Target, run_id: str) -> str:
    """Create TARGET/.iobench-<run_id>/ (must not exist) and probe O_DIRECT inside it."""
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
    return run_dir


def remove_run_dir(t: Target) -> None:
    """Remove the run directory iobench created, and nothing else."""
    if not t.created or not t.run_dir:
        return
    name = os.path.basename(t.run_dir)
    if not name.startswith(RUN_DIR_PREFIX) or os.path.dirname(t.run_dir) != t.root:
        return  # paranoia: never remove anything that is not our own run directory
    if os.path.islink(t.run_dir):
        return
    shutil.rmtree(t.run_dir, ignore_errors=True)
    if not os.path.exists(t.run_dir):
        t.created = False


class StopFlag:
    """Set by SIGINT/SIGTERM; workers poll it, the main thread raises Interrupted."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, signum: int | None = None) -> None:
        if self.signal is None:
            self.signal = signum
        self.event.set()

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


class SignalGuard:
    """Route SIGINT/SIGTERM to a StopFlag for a block.

    The first signal only sets the flag: workers poll it and stop, the phase in flight keeps
    what it measured (marked partial) and the main thread raises Interrupted at its next
    check. A second signal raises Interrupted in the main thread at once.
    """

    def __init__(self, stop: StopFlag, on_signal: Callable[[int], None] | None = None):
        self.stop = stop
        self.on_signal = on_signal
        self._old: dict[int, Any] = {}

    def _handler(self, signum: int, frame: Any) -> None:
        again = self.stop.is_set()
        self.stop.set(signum)
        if self.on_signal:
            self.on_signal(signum)
        if again:
            raise Interrupted(f"interrupted by {_signame(signum)}")

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()
