"""The target of a run: a directory (or fsspec URL), its filesystem, and the run directory.

Everything iobench writes lives under ``TARGET/.iobench-<run_id>/``, created by this package
and removed by it on success, failure and interruption (unless ``keep``). Nothing else in the
target is created, changed or removed.

The package, each module importing only those before it: ``mounts`` (mountinfo, filesystem
kinds) → ``model`` (the ``Target``) → ``direct`` (O_DIRECT probes, aligned buffers, cache
drops), ``space`` (free space and inodes), ``signals`` (the stop flag and signal guard) →
``url`` (fsspec URL targets) → ``layout`` (Lustre, GPFS, CephFS layouts). Here: ``resolve``,
the run directory's creation and removal, and the O_DIRECT alignment checks; every public
name of the modules is re-exported, so ``from iobench.target import X`` works as before (and
a test that patches ``iobench.target.read_mountinfo`` and the like patches what these use).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ..core.errors import EngineError, TargetError, UsageError
from ..core.safeio import PSEUDO_FS, why_missing
from ..core.units import format_size
from .direct import (  # noqa: F401 - re-exported
    DIRECT_ALIGN,
    DIRECT_ALIGN_CANDIDATES,
    aligned_buffer,
    device_logical_block_size,
    drop_file_cache,
    probe_direct_alignment,
    probe_direct_io,
)
from .layout import (  # noqa: F401 - re-exported
    _KV,
    _LFS_INT,
    CEPH_LAYOUT_FIELDS,
    CEPH_LAYOUT_PROBE,
    CEPH_MIN_STRIPE_UNIT,
    LAYOUT_TIMEOUT_S,
    LUSTRE_STRIPE_UNIT,
    _ceph_layout,
    _ceph_probe_layout,
    _ceph_set_dir_layout,
    _gpfs_layout,
    _int_or_str,
    _lfs_setstripe,
    _lustre_layout,
    _run_tool,
    _tool,
    apply_layout,
    make_url_dirs,
    parse_lfs_getstripe,
    parse_mmlsattr,
    phase_layout,
    read_ceph_layout,
)
from .model import (
    RUN_DIR_PREFIX,
    Target,
    is_url,
)
from .mounts import (  # noqa: F401 - re-exported
    CEPH_FS,
    CLIENT_CACHE_FS,
    KNOWN_FS,
    NETWORK_FS,
    PARALLEL_FS,
    MountInfo,
    _unescape,
    client_cache,
    find_mount,
    fs_class,
    parse_mountinfo,
    read_mountinfo,
)
from .rundir import RunDir
from .signals import (  # noqa: F401 - re-exported
    IGNORED_SIGNALS,
    STOP_SIGNALS,
    SignalGuard,
    StopFlag,
    _signame,
    worker_signals,
)
from .space import (  # noqa: F401 - re-exported
    FREE_SPACE_MARGIN,
    FREE_SPACE_MIN_HEADROOM,
    check_free_space,
    free_bytes,
    free_inodes,
    inodes_from_statvfs,
    out_of_inodes,
)
from .url import (  # noqa: F401 - re-exported
    NO_USERINFO,
    PROBE_TIMEOUT_S,
    S3_ENDPOINT_ENV,
    URL_MARKER,
    _check_url_root,
    _create_url_run_dir,
    _describe_store_error,
    _endpoint,
    _remove_url_run_dir,
    check_url_credentials,
    protocol_is_s3,
    remove_sibling_run_dir,
    resolve_url,
    run_dir_visible,
    scrub,
    storage_options_from_env,
    url_fs,
    url_protocol,
)


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


def resolve(target: str, *, mountinfo: list[MountInfo] | None = None) -> Target:
    """Check a local target directory (or an fsspec URL) and describe it. Writes nothing."""
    if not target:
        raise TargetError("TARGET is empty", hint="give a directory or an fsspec URL")
    if is_url(target):
        return resolve_url(target)
    target = local_path(target, "target")
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
            f"target {target} {why_missing(p)}",
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


def local_path(target: str, what: str) -> str:
    """The path of a local TARGET or ``file://`` URL; a ``file://`` with no path (an unset
    variable: ``file://$UNSET``) is refused, never taken for the working directory."""
    path = target.removeprefix("file://")
    if not path.strip():
        raise TargetError(
            f"{what} {target!r} names no directory",
            hint=f"give the {what}'s directory (file:///path, or the path itself)",
        )
    return path


def resolve_source(source: str, what: str = "dataset") -> Target:
    """Check a location iobench only reads (``iobench profile``'s dataset) as a TARGET is
    checked, writing nothing: a URL through ``resolve_url`` (credentials refused, protocol
    known, store reachable: exit 2, one line); a path must be a directory, not on a kernel
    interface (/proc, /sys). It need not be writable."""
    if not source:
        raise TargetError(f"{what} is empty", hint=f"give the {what}'s directory or URL")
    if is_url(source):
        return resolve_url(source, what=what)
    path = local_path(source, what)
    p = Path(path).expanduser()
    if not p.exists():
        raise TargetError(f"{what} {path} {why_missing(path)}", hint=f"give the {what}'s directory")
    if not p.is_dir():
        raise TargetError(f"{what} {path} is not a directory", hint=f"give the {what}'s directory")
    real = os.path.realpath(p)
    m = find_mount(real, read_mountinfo())
    if m is not None and m.fs_type in PSEUDO_FS:
        raise TargetError(
            f"{what} {path} is on {m.fs_type}, a kernel interface ({m.mount_point}), not storage",
            hint=f"give the {what}'s directory",
        )
    t = Target(path_or_url=path, root=real)
    if m:
        t.fs_type, t.mount_point, t.mount_source = m.fs_type, m.mount_point, m.source
    return t


def create_run_dir(t: Target, run_id: str) -> str:
    """Create TARGET/.iobench-<run_id>/ (must not exist), hold it by descriptor (``RunDir``:
    its removal never resolves a name again), and probe O_DIRECT inside it."""
    if t.kind == "fsspec":
        return _create_url_run_dir(t, run_id)
    run_dir = os.path.join(t.root, RUN_DIR_PREFIX + run_id)
    try:
        t.handle = RunDir.create(t.root, RUN_DIR_PREFIX + run_id)
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
    fd = t.handle.fd  # the probes' files made beneath the run directory held, not by its name
    ok, reason = probe_direct_io(run_dir, fd)
    t.direct_io = True if ok else "unsupported"
    t.direct_reason = reason
    t.direct_align = probe_direct_alignment(run_dir, fd) if ok else None
    return run_dir


def check_run_dir_in_place(t: Target) -> None:
    """EngineError (exit 4) when the target or the run directory was renamed or swapped since
    the run began: a phase must not write through a name that now leads elsewhere."""
    if t.kind != "posix" or t.handle is None or not t.created or not t.handle.alive():
        return  # removed, not moved: the phase's own ENOENT names that (session)
    moved = t.handle.moved()
    if moved is not None:
        raise EngineError(
            f"{moved}: the run stops rather than write where {t.run_dir} now leads",
            hint="make sure nothing moves the target while iobench runs",
        )


def remove_run_dir(t: Target) -> None:
    """Remove the run directory iobench created, and nothing else: through the descriptors
    held since its creation (``RunDir.remove``), wherever it was moved, never through a link.
    A target or run directory moved during the run is a warning of the result."""
    if t.kind == "fsspec":
        _remove_url_run_dir(t)
        return
    if not t.created or not t.run_dir or t.handle is None:
        return
    h: RunDir = t.handle
    moved = h.moved() if h.alive() else None  # removed by someone else: named by the error
    gone, errors, where = h.remove()
    if moved is not None:
        t.warnings.append(
            f"{moved}: iobench removed its own run directory through the descriptor it held"
            + (f" (now at {where})" if where != t.run_dir else "")
            + ", and nothing at the path it now names"
        )
    if gone:
        t.created = False
        h.close()
        t.handle = None
    elif errors:
        t.warnings.append(
            f"could not remove the run directory {where} ({errors[0]}"
            + (f", and {len(errors) - 1} more" if len(errors) > 1 else "")
            + "): remove it by hand"
        )
