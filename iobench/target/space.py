"""Free space and free inodes: a run that would not fit is refused before it starts, and an
ENOSPC with space left is told apart (out of inodes)."""

from __future__ import annotations

import os

from ..core.errors import TargetError
from ..core.units import format_bytes
from .model import Target

FREE_SPACE_MARGIN = 0.05  # keep 5 % (and at least 64 MiB) of headroom beyond the plan
FREE_SPACE_MIN_HEADROOM = 64 << 20


def free_bytes(path: str) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


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
