"""A blkio (cgroup v1) read/write throttle for tests: storage of a known, slower speed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio")


def device_of(path: str) -> str | None:
    """MAJ:MIN of the block device holding ``path`` (None when not a plain block device)."""
    try:
        src = subprocess.run(
            ["findmnt", "-no", "SOURCE", "--target", path],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dev = subprocess.run(
            ["lsblk", "-no", "MAJ:MIN", src], capture_output=True, text=True, check=True
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    return dev[0].strip() if dev else None


def why_unavailable(path: str) -> str | None:
    if os.geteuid() != 0:
        return "blkio throttling needs root"
    if not (BLKIO / "blkio.throttle.read_bps_device").exists():
        return "no cgroup v1 blkio controller here"
    if device_of(path) is None:
        return f"cannot find the block device under {path}"
    return None


@contextlib.contextmanager
def throttled(
    path: str, read_bps: int, write_bps: int, prefix: str = "iobench-test"
) -> Iterator[Path]:
    """A cgroup throttling the device under ``path``; yields the group's directory."""
    dev = device_of(path)
    group = BLKIO / f"{prefix}-{uuid.uuid4().hex[:8]}"
    group.mkdir()
    try:
        (group / "blkio.throttle.read_bps_device").write_text(f"{dev} {read_bps}\n")
        (group / "blkio.throttle.write_bps_device").write_text(f"{dev} {write_bps}\n")
        yield group
    finally:
        for _ in range(50):
            try:
                group.rmdir()
                break
            except OSError:
                import time

                time.sleep(0.1)


def in_group(group: Path, argv: list[str]) -> list[str]:
    """A command line that joins ``group`` before exec'ing ``argv``."""
    import shlex

    return ["sh", "-c", f"echo $$ > {group}/cgroup.procs && exec {shlex.join(argv)}"]
