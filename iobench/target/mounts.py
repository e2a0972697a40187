"""Filesystems and mounts: what /proc/self/mountinfo says holds a path, and what kind of
filesystem that is (local, network, parallel, memory, a kernel interface; a FUSE client with a
data cache of its own)."""

from __future__ import annotations

from dataclasses import dataclass

from ..core.safeio import unescape_mountinfo

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
    """A mountinfo field as the path it is (octal escapes: ``core.safeio``'s one reading)."""
    return unescape_mountinfo(field_)


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
