"""The one output rule, for every file and directory iobench writes outside its run directory,
and the input datasets it must never write into.

Every output file (result.json, report.html, ``--csv``, ``--series-csv``, ``--live-csv``,
``--html``, ``--svg``, ``profile --output``, ``history export``, a history entry) is:

- never written through a symbolic link (even a dangling one: its target would be created),
- never put in place of a directory, device, FIFO or socket (``--force`` and the commands
  that replace a file replace only a regular file),
- never inside an input dataset, told by the (st_dev, st_ino) of the destination directory
  and each of its ancestors against the dataset root's, so a bind mount, a symlinked path or
  a hard-linked name of the dataset is caught as surely as the path itself; and by where the
  directory lies in its filesystem (``/proc/self/mountinfo``: the mount's device and root),
  so a bind mount of a directory *inside* the dataset, whose ancestors are not the dataset's,
  is caught too,
- created as a new temporary file (``O_CREAT|O_EXCL|O_NOFOLLOW``) in the destination's
  directory, opened once as a descriptor, written and fsync'ed, then renamed into place
  (``renameat``; linked where nothing may be replaced), so a reader sees the old file or the
  new one and a name swapped meanwhile is never followed.

``check_output_file`` says before anything runs whether a path may be written (UsageError,
exit 2, one line); ``write_atomic`` writes it, re-checking at the last moment (an OSError when
something changed meanwhile). ``protect_input`` records a dataset iobench reads (``loader
--existing``, ``profile``): from then on this process writes nothing inside it.
"""

from __future__ import annotations

import errno
import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path

from .errors import UsageError
from .inputs import file_kind

# O_PATH opens a directory to stat it and walk from it without needing read permission on it
_PATH_FLAG = getattr(os, "O_PATH", os.O_RDONLY)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC

# (st_dev, st_ino) of the inputs this process reads → what it is and the name the user gave
# ("the dataset DS", "the history ~/.local/share/iobench/history")
_INPUTS: dict[tuple[int, int], tuple[str, str]] = {}
# where each input lies in its filesystem (``fs_location``) → the same as ``_INPUTS``
_INPUT_PLACES: dict[tuple[str, str], tuple[str, str]] = {}


def why_missing(path: str | os.PathLike[str]) -> str:
    """Why ``path`` cannot be used, in words, when ``os.path.exists`` says False: a symbolic
    link loop (ELOOP) is not a missing file."""
    try:
        os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "is a symbolic link loop (ELOOP: too many levels of symbolic links)"
        if isinstance(e, PermissionError):
            return "is not accessible by this user (permission denied)"
        if e.errno == errno.ENOTDIR:
            return "does not exist (a part of its path is not a directory)"
    return "does not exist"


# -- the input datasets ------------------------------------------------------------------------


def protect_input(path: str | os.PathLike[str], what: str = "the dataset") -> None:
    """Record ``path`` (a local dataset directory, the history read, ...: ``what``) as an
    input this process never writes into. A link to it protects what it points to; a URL or a missing path records
    nothing (its own checks name it)."""
    text = os.fspath(path)
    if "://" in text and not text.startswith("file://"):
        return
    try:
        st = os.stat(text.removeprefix("file://"))
    except OSError:
        return
    entry = (f"{what} {text}", text.removeprefix("file://"))
    _INPUTS.setdefault((st.st_dev, st.st_ino), entry)
    place = fs_location(entry[1])
    if place is not None:
        _INPUT_PLACES.setdefault(place, entry)


def forget_inputs() -> None:
    """Forget the recorded inputs (a new command in the same process: the tests, the API)."""
    _INPUTS.clear()
    _INPUT_PLACES.clear()


def unescape_mountinfo(field: str) -> str:
    """A field of /proc/self/mountinfo as the path it is (space, tab, newline and backslash
    are written there as octal escapes)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


# Kernel interfaces mounted like filesystems: never storage, never a place for an output
PSEUDO_FS = {
    "proc", "sysfs", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "configfs",
    "pstore", "bpf", "devpts", "mqueue", "efivarfs", "binfmt_misc", "fusectl", "rpc_pipefs",
    "nsfs", "autofs", "selinuxfs", "hugetlbfs",
}  # fmt: skip


def _mount_of(real: str, mountinfo: str | None) -> tuple[str, str, str, str] | None:
    """(device ``MAJOR:MINOR``, root in its filesystem, mount point, filesystem type) of the
    mount holding the real path ``real``: the longest mount point, the last mounted on ties."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
                mountinfo = f.read()
        except OSError:
            return None
    best: tuple[str, str, str, str] | None = None
    for line in mountinfo.splitlines():
        parts = line.split(" ")
        if len(parts) < 5:
            continue
        dev, root, point = parts[2], unescape_mountinfo(parts[3]), unescape_mountinfo(parts[4])
        fs_type = parts[parts.index("-") + 1] if "-" in parts[5:-1] else "unknown"
        inside = point == "/" or real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[2])):
            best = (dev, root, point, fs_type)
    return best


def fs_location(
    path: str | os.PathLike[str], mountinfo: str | None = None
) -> tuple[str, str] | None:
    """Where the directory ``path`` lies in its filesystem: (the filesystem's device as
    mountinfo writes it, ``MAJOR:MINOR``; its path from that filesystem's root). Two names of
    one directory, through any bind mounts, have the same location. None when unknown (no
    /proc, a deleted directory)."""
    real = os.path.realpath(path)
    m = _mount_of(real, mountinfo)
    if m is None:
        return None
    dev, root, point, _fs_type = m
    rest = real[len(point) :] if point != "/" else real
    return dev, os.path.normpath(root.rstrip("/") + "/" + rest.lstrip("/"))


def fs_type_at(path: str | os.PathLike[str], mountinfo: str | None = None) -> str | None:
    """The type of the filesystem holding ``path`` (``ext4``, ``sysfs``), None when unknown."""
    m = _mount_of(os.path.realpath(path), mountinfo)
    return m[3] if m else None


def _placed_inside(dir_fd: int) -> tuple[str, str] | None:
    """The recorded input whose filesystem location holds the directory open at ``dir_fd``."""
    if not _INPUT_PLACES:
        return None
    try:
        now = os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        return None
    if not now.startswith("/") or now.endswith(" (deleted)"):
        return None
    here = fs_location(now)
    if here is None:
        return None
    for (dev, where), entry in _INPUT_PLACES.items():
        if dev == here[0] and (where == "/" or here[1] == where or here[1].startswith(where + "/")):
            return entry
    return None


def input_holding(dir_fd: int) -> str | None:
    """The recorded input dataset that the directory open at ``dir_fd`` is, or lies inside
    (by device and inode, walking ``..`` up to the root, across mounts); None when none."""
    if not _INPUTS:
        return None
    placed = _placed_inside(dir_fd)  # a bind mount of a directory inside an input
    if placed is not None and _still_there(placed[1]):
        return placed[0]
    fd = os.dup(dir_fd)
    try:
        st = os.fstat(fd)
        while True:
            hit = _INPUTS.get((st.st_dev, st.st_ino))
            if hit is not None and _still(hit[1], st):
                return hit[0]
            up = os.open("..", _PATH_FLAG | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = up
            parent = os.fstat(fd)
            if (parent.st_dev, parent.st_ino) == (st.st_dev, st.st_ino):  # "/"
                return None
            st = parent
    except OSError:  # an ancestor we may not search: nothing recorded can be above it
        return None
    finally:
        os.close(fd)


def _still_there(path: str) -> bool:
    """Whether the recorded input ``path`` is still one of the directories recorded."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) in _INPUTS


def _still(path: str, st: os.stat_result) -> bool:
    """Whether the recorded input ``path`` is still the directory of ``st`` (an input removed
    since, its inode number reused by another directory, protects nothing)."""
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (a name; links not resolved)."""
    probe = Path(path)
    while not os.path.lexists(probe) and probe != probe.parent:
        probe = probe.parent
    return probe


def input_around(path: str | os.PathLike[str]) -> str | None:
    """The recorded input dataset that ``path`` (a directory or file, existing or to be made)
    would lie in: its nearest existing directory (followed, as a directory given by name is)
    checked by inode. None when none, or when that ancestor cannot be opened (other checks name it)."""
    if not _INPUTS:
        return None
    probe = nearest_existing(Path(os.path.abspath(path)))
    if not os.path.isdir(probe):  # a file of that name: the directory it is in
        probe = probe.parent
    try:
        fd = os.open(probe, _PATH_FLAG | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return input_holding(fd)
    finally:
        os.close(fd)


def refuse_inside_input(path: str | os.PathLike[str], option: str, what: str = "") -> None:
    """UsageError (exit 2) when ``path`` lies inside an input dataset."""
    hit = input_around(path)
    if hit is not None:
        raise UsageError(
            f"{option} {path} lies inside {hit}, an input iobench never writes",
            hint=f"pass {what or option} outside it",
        )


# -- the check before anything runs --------------------------------------------------------------


def check_output_file(
    path: str | Path,
    *,
    inputs: tuple[str | Path, ...] = (),
    replace: bool = True,
    option: str = "output",
) -> Path:
    """Check, before anything is written, that ``path`` may receive a file iobench writes.

    Refused (UsageError, exit 2, one line): an empty path; a symbolic link (even a dangling
    one), a directory, a device, a FIFO or a socket; the very file of one of ``inputs`` (also
    through a hard link); an existing regular file when ``replace`` is false; a path inside an
    input dataset (``protect_input``, by inode); a path whose directory is not a writable
    directory. Returns the path.
    """
    if not str(path).strip():  # before Path(""), which is "."
        raise UsageError(f"{option} is empty", hint=f"pass a file name to {option}")
    path = Path(path)
    hint = f"pass a new file name to {option}"
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # the directory part is named below
        st = None
    except OSError as e:
        raise UsageError(f"cannot use {path} for {option}: {e.strerror}", hint=hint) from None
    if st is not None:
        kind = file_kind(st.st_mode)
        if kind is not None:
            raise UsageError(f"{path} is {kind}: iobench writes only regular files", hint=hint)
        for i in inputs:
            try:
                if os.path.samestat(st, os.stat(i)):
                    raise UsageError(f"{path} is the input {i}: it would be replaced", hint=hint)
            except OSError:
                continue
        if not replace:
            raise UsageError(f"{path} already exists", hint=hint)
    probe = nearest_existing(path.parent)
    if not probe.is_dir():
        raise UsageError(f"cannot write {path}: {probe} is not a directory", hint=hint)
    refuse_inside_input(path, option, "the file")
    fs_type = fs_type_at(probe)
    if fs_type in PSEUDO_FS:  # its files look regular; they are the kernel's settings
        raise UsageError(
            f"cannot write {path}: {probe} is on {fs_type}, a kernel interface, not storage",
            hint=hint,
        )
    if not os.access(probe, os.W_OK | os.X_OK):
        why = "on a read-only filesystem" if on_read_only_fs(probe) else "not writable by this user"
        raise UsageError(f"cannot write {path}: {probe} is {why}", hint=hint)
    return path


def on_read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:  # pragma: no cover
        return False


# -- the write -------------------------------------------------------------------------------------


def make_dirs(directory: Path) -> None:
    """Create ``directory`` and its missing parents, refusing (OSError) where it would lie
    inside an input dataset."""
    hit = input_around(directory)
    if hit is not None:
        raise PermissionError(errno.EPERM, f"{directory} lies inside {hit}, an input")
    Path(directory).mkdir(parents=True, exist_ok=True)


def write_atomic(
    path: str | Path,
    data: bytes,
    *,
    replace: bool = True,
    verify: Callable[[str], object] | None = None,
) -> None:
    """Write ``data`` to ``path`` by the output rule (the module's docstring); OSError when the
    rule refuses it at the last moment (a link, a non-regular file, a file where none may be
    replaced, a directory inside an input dataset). ``verify(tmp_path)`` may check the written
    temporary file before it is put in place (and raise to keep it out)."""
    path = Path(path)
    dfd = _held_parent(path)
    try:
        tmp, fd = _new_temporary(dfd, path)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            if verify is not None:
                verify(os.path.join(path.parent, tmp))
            _put_in_place(dfd, tmp, path, replace)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise
        try:
            os.fsync(dfd)  # the rename, durable
        except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
            pass
    finally:
        os.close(dfd)


def _held_parent(path: Path) -> int:
    """A descriptor of ``path``'s directory (made if missing), opened without following a link:
    every later step of the write goes through it."""
    make_dirs(path.parent)
    return os.open(path.parent, _DIR_FLAGS)


def _new_temporary(dfd: int, path: Path) -> tuple[str, int]:
    """A new temporary file beside ``path`` in the held directory ``dfd`` (``O_EXCL|O_NOFOLLOW``):
    its name and write-only descriptor; PermissionError when the directory lies inside an input."""
    hit = input_holding(dfd)
    if hit is not None:
        raise PermissionError(errno.EPERM, f"{path} lies inside {hit}, an input")
    tmp = f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    return tmp, os.open(tmp, flags, 0o666, dir_fd=dfd)


def _put_in_place(dfd: int, tmp: str, path: Path, replace: bool) -> None:
    """Rename ``tmp`` to ``path.name`` in ``dfd``: over a regular file when ``replace``, else
    only where there is nothing (a hard link fails with EEXIST when something appeared)."""
    name = path.name
    try:
        st = os.lstat(name, dir_fd=dfd)
    except FileNotFoundError:
        st = None
    if st is not None:
        kind = file_kind(st.st_mode)
        if kind is not None:
            raise OSError(errno.EEXIST, f"{path} is {kind}: iobench writes only regular files")
        if not replace:
            raise FileExistsError(errno.EEXIST, f"{path} already exists")
    if replace:
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        return
    try:
        os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{path} already exists") from None
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
            raise
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)  # no hard links: checked above
        return
    os.unlink(tmp, dir_fd=dfd)


def open_new(path: str | Path, *, replace: bool = True) -> int:
    """A file written as it grows (``--live-csv``), by the same rule: created empty as a new
    temporary file and renamed into place at once; returns its descriptor (write-only)."""
    path = Path(path)
    dfd = _held_parent(path)
    try:
        tmp, fd = _new_temporary(dfd, path)
        try:
            _put_in_place(dfd, tmp, path, replace)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp, dir_fd=dfd)
            except FileNotFoundError:
                pass
            raise
        return fd
    finally:
        os.close(dfd)


# -- beneath the run directory, held by descriptor -------------------------------------------------
# Inside the run directory iobench creates, every write goes through the descriptor the run holds
# (``iobench.target.RunDir``): a TARGET renamed and swapped for a link mid-phase redirects none.

BENEATH_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


def _relative(rel: str, up: bool = False) -> str:
    """``rel`` when it names something beneath a directory: not absolute, and (unless ``up``)
    without ``..``; cheap, for the metadata loops that call it per file."""
    if not rel or rel[0] == "/" or (not up and ".." in rel):
        raise ValueError(f"{rel!r} is not a path beneath the run directory")
    return rel


def open_beneath(dir_fd: int, rel: str, flags: int, mode: int = 0o644, follow: bool = False) -> int:
    """``os.open`` of ``rel`` (a relative path) in the directory open at ``dir_fd``: nothing
    above ``dir_fd`` (TARGET, its parents) is resolved again by name, so a swap there cannot
    redirect it. An open that may write takes no ``..`` and never follows a link in the last
    component (``O_NOFOLLOW``; ``follow`` only for the posix engine's ceiling probe, whose
    memory file is a ``/proc/self/fd`` link); a read may do both: another rank's files are
    read back as ``../.iobench-<run_id>-r<k>/...`` (``..`` of a descriptor is the directory's
    real parent, whatever TARGET's name leads to now)."""
    if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC):
        extra = os.O_CLOEXEC if follow else BENEATH_FLAGS
        return os.open(_relative(rel), flags | extra, mode, dir_fd=dir_fd)
    return os.open(_relative(rel, up=True), flags | os.O_CLOEXEC, mode, dir_fd=dir_fd)


def stat_beneath(dir_fd: int, rel: str) -> os.stat_result:
    """``lstat`` of ``rel`` in the directory open at ``dir_fd`` (a read: as ``open_beneath``)."""
    return os.stat(_relative(rel, up=True), dir_fd=dir_fd, follow_symlinks=False)


def unlink_beneath(dir_fd: int, rel: str) -> None:
    """``unlink`` of ``rel`` in the directory open at ``dir_fd`` (a link is removed, not followed)."""
    os.unlink(_relative(rel), dir_fd=dir_fd)


def make_dirs_beneath(dir_fd: int, rel: str) -> None:
    """``mkdir -p rel`` in the directory open at ``dir_fd``: each level made there and opened
    ``O_NOFOLLOW|O_DIRECTORY`` from the one above (a link in the way is an OSError, not followed)."""
    fd = os.dup(dir_fd)
    try:
        for part in _relative(rel.strip("/")).split("/"):
            if part in ("", "."):
                continue
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            sub = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
    finally:
        os.close(fd)


def held_path(dir_fd: int, *parts: str) -> str:
    """A path that resolves through the descriptor ``dir_fd`` of this process, for what takes
    only paths (fio's working directory, torch's DCP writer): ``/proc/self/fd/N/...``, a magic
    link to the directory held, whatever its name leads to now. A forked child that inherits
    the descriptor (fio's ``chdir`` before its ``exec``) resolves it the same."""
    base = f"/proc/self/fd/{dir_fd}"
    return os.path.join(base, *(_relative(p) for p in parts)) if parts else base
