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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import EngineUnavailable, Interrupted, TargetError
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
    kind: str = "posix"  # "posix" or "fsspec"
    layout: dict[str, Any] = field(default_factory=dict)  # Lustre/GPFS striping
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)  # fsspec only
    warnings: list[str] = field(default_factory=list)
    created: bool = False

    def to_dict(self) -> dict[str, Any]:
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
    return st.f_favail if st.f_files > 0 else None


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
S3_ENDPOINT_ENV = ("IOBENCH_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
SECRET_ENV = ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN")
PROBE_TIMEOUT_S = 5
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


def scrub(text: str, extra: list[str] | None = None) -> str:
    """``text`` without credentials: URL user-info and the values of the AWS secret variables."""
    out = _USERINFO.sub(r"\g<scheme>***@", str(text))
    for value in [os.environ.get(k, "") for k in SECRET_ENV] + list(extra or []):
        if value and len(value) >= 4:
            out = out.replace(value, "***")
    return out


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
    """Stripe the run directory as the workload asks (Lustre ``lfs setstripe``, before any
    file is created) and record its layout in ``t.layout`` (Lustre ``lfs getstripe -d``,
    GPFS ``mmlsattr -L``). Returns warnings; a refused setstripe is a TargetError."""
    count, size = params.get("stripe_count"), params.get("stripe_size")
    asked = count is not None or size is not None
    fs_type = t.fs_type.lower()
    if t.kind != "posix" or not t.run_dir:
        return [f"stripe_count/stripe_size ignored: {t.fs_type} is not Lustre"] if asked else []
    warnings: list[str] = []
    if fs_type == "lustre":
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
        warnings.append(f"stripe_count/stripe_size ignored: {t.fs_type} is not Lustre")
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


def make_url_dirs(t: Target, relpaths: list[str]) -> None:
    """Directories under a URL run dir: a no-op on object stores (no directories), real ones
    on hierarchical fsspec filesystems (memory://, sftp://, ...)."""
    fs, run = url_fs(t)
    if hasattr(fs, "split_path"):
        return
    for d in sorted(set(relpaths)):
        fs.makedirs(posixpath.join(run, d), exist_ok=True)
