"""The run's output directory: checked before anything is written, and held (an exclusive
flock) from the input checks until the result is saved, so that two runs never share one.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..core.errors import UsageError
from ..core.inputs import file_kind
from ..core.safeio import on_read_only_fs, refuse_inside_input


def output_dir_for(output: str | None, run_id: str) -> Path:
    if output is not None:
        if not str(output).strip():  # --output "$UNSET": not a request for the default
            raise UsageError("--output is empty", hint="pass a directory, or leave --output out")
        return Path(output)
    return Path("iobench-results") / run_id


def check_output_dir(path: Path) -> None:
    """Refuse an output directory we cannot write, before anything else is written.

    A symlink to a directory is followed (as a TARGET link is); a dangling one, a file, a
    FIFO or a device in its place, a directory that is not writable (or on a read-only
    filesystem) and one that already holds a result.json (even a dangling link of that name)
    are bad input.
    """
    path = Path(path)
    hint = "pass a writable --output DIR"
    if os.path.lexists(path):
        if not path.exists():
            raise UsageError(
                f"--output {path} is a symbolic link to {os.readlink(path)}, which does not exist",
                hint="pass a directory, or a link to one",
            )
        if not path.is_dir():
            kind = file_kind(os.stat(path).st_mode) or "a file"
            raise UsageError(
                f"cannot write results to {path}: it is {kind}, not a directory", hint=hint
            )
        probe = path
    else:
        probe = path.parent
        while not os.path.lexists(probe) and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            raise UsageError(
                f"cannot write results to {path}: {probe} is not a directory", hint=hint
            )
    if not os.access(probe, os.W_OK | os.X_OK):
        ro = on_read_only_fs(probe)
        why = "is on a read-only filesystem" if ro else "is not writable by this user"
        raise UsageError(f"cannot write results to {path}: {probe} {why}", hint=hint)
    if os.path.lexists(path / "result.json"):
        raise UsageError(f"{path} already holds a result.json", hint="pass a new --output DIR")
    refuse_inside_input(path, "--output", "--output DIR")


class OutputClaim:
    """A run's hold on its output directory, from its input checks until its result is saved.

    ``acquire`` checks the directory, creates it when missing and takes an exclusive flock on
    it: a second run given the same ``--output`` is refused (exit 2) before it writes anything,
    rather than replacing the first one's result.json. The kernel drops the lock when the
    process dies, even by SIGKILL, so a killed run never blocks the directory. ``release``
    drops it and removes the directories it created when they are still empty (a refused or
    unsaved run leaves nothing behind). Under torchrun only rank 0, the writer, claims.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fd: int | None = None
        self.made: list[Path] = []
        self.warning: str | None = None

    def acquire(self) -> None:
        check_output_dir(self.path)
        self.made = missing_dirs(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            self.release()
            raise UsageError(
                f"cannot write results to {self.path}: {e.strerror or e}",
                hint="pass a writable --output DIR",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.release()
            raise UsageError(
                f"another iobench run is writing its result to {self.path}",
                hint="pass a new --output DIR (each run needs its own)",
            ) from None
        except OSError as e:  # a filesystem without flock: result.json is still never replaced
            self.warning = (
                f"the output directory {self.path} could not be locked ({e.strerror or e}): "
                "two runs given it at once are not told apart until one saves its result"
            )
        self.fd = fd
        if os.path.lexists(self.path / "result.json"):  # saved while we waited for the lock
            self.release()
            raise UsageError(
                f"{self.path} already holds a result.json", hint="pass a new --output DIR"
            )

    def release(self) -> None:
        if _CLAIMS.get(self.path) is self:
            del _CLAIMS[self.path]
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        for d in self.made:  # deepest first; those still empty are ours and unused
            remove_if_empty(d)
        self.made = []


# The claims this process holds, by output directory (one at most per directory: a second
# acquire of the same directory is refused, even in the same process).
_CLAIMS: dict[Path, OutputClaim] = {}


def claim_output_dir(path: Path) -> OutputClaim:
    """``check_output_dir``, then hold the directory (OutputClaim) until the run's result is
    saved (``RunSession.outcome``), its owner releases it, or the process ends."""
    claim = OutputClaim(path)
    claim.acquire()
    _CLAIMS[claim.path] = claim
    return claim


def held_claim(path: Path) -> OutputClaim | None:
    """This process's claim on ``path``, if it holds one."""
    return _CLAIMS.get(Path(path))


def release_output_dir(path: Path) -> None:
    """Release this process's claim on ``path``, if it holds one."""
    claim = _CLAIMS.get(Path(path))
    if claim is not None:
        claim.release()


def missing_dirs(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first."""
    out = []
    p = Path(path)
    while not p.exists() and p != p.parent:
        out.append(p)
        p = p.parent
    return out


def remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
