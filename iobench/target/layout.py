"""Parallel filesystem layout: Lustre striping (lfs), GPFS attributes (mmlsattr), CephFS
layouts (virtual xattrs), applied to the run directory and read back per phase."""

from __future__ import annotations

import errno
import os
import posixpath
import re
import shutil
import subprocess
from typing import Any

from ..core.errors import TargetError
from ..core.units import format_bytes
from .model import Target
from .mounts import CEPH_FS
from .url import url_fs

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
        }.get(e.errno or 0, "check the CephFS client")
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
