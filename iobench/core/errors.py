"""One exception hierarchy for iobench, and the exit codes it maps to.

Library code raises these; only ``cli.py`` turns them into a message and an exit code.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an annotation only: the result layer sits above this one
    from ..result.file import PhaseResult


class ExitStatus(IntEnum):
    OK = 0
    FAILED = 1  # compare found a regression, or the qualify verdict failed
    USAGE = 2  # bad input: nothing was written
    NOT_COMPARABLE = 3
    RUN_FAILED = 4  # I/O error, disk full, engine crash: partial results kept
    INTERRUPTED = 130


class IobenchError(Exception):
    """Base of every error iobench raises on purpose."""

    exit_status: ExitStatus = ExitStatus.RUN_FAILED

    def __init__(
        self, message: str, *, hint: str | None = None, partial: PhaseResult | None = None
    ):
        super().__init__(message)
        self.message = message
        self.hint = hint
        #: what the phase measured before it failed or was interrupted (kept, marked partial)
        self.partial: PhaseResult | None = partial

    def one_line(self) -> str:
        """The single line shown on stderr: the problem, then the fix."""
        text = self.message.replace("\n", " ").strip()
        if self.hint:
            text = f"{text}; {self.hint}"
        return text


class UsageError(IobenchError):
    """Bad input from the user: unknown name, malformed value, unusable option."""

    exit_status = ExitStatus.USAGE


class SpecError(UsageError):
    """A workload or profile file (or a --set override) is malformed."""


class TargetError(UsageError):
    """The target cannot be used: missing, not a directory, not writable, too small."""


class EngineUnavailable(UsageError):
    """The requested engine cannot run here (e.g. fio is not installed)."""


class EngineError(IobenchError):
    """An engine failed while running: I/O error, disk full, crashed tool. ``errno``: the
    failed system call's, when one failed."""

    exit_status = ExitStatus.RUN_FAILED

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        partial: PhaseResult | None = None,
        errno: int | None = None,
    ):
        super().__init__(message, hint=hint, partial=partial)
        self.errno = errno


class VerifyError(EngineError):
    """Data read back did not match what was written: ``kind`` of mismatch, in the block of
    file ``path`` at byte ``offset``."""

    def __init__(
        self,
        message: str,
        *,
        hint: str | None = None,
        path: str | None = None,
        offset: int | None = None,
        kind: str | None = None,
    ):
        super().__init__(message, hint=hint)
        self.path = path
        self.offset = offset
        self.kind = kind


class RequestError(EngineError):
    """A storage backend's request on object ``path`` failed with ``cause`` (fsspec backends
    raise what they like): carries the path to the one line that names the failure."""

    def __init__(self, path: str, cause: BaseException):
        super().__init__(f"{path}: {type(cause).__name__}: {cause}")
        self.path = path
        self.cause = cause

    def __reduce__(self):  # pickled with its own arguments (not the message alone)
        return type(self), (self.path, self.cause)


class StoreError(IobenchError):
    """The result history could not be read or written."""

    exit_status = ExitStatus.RUN_FAILED


class DistributedError(EngineError):
    """Another rank failed or vanished; the collective timed out."""


class Interrupted(IobenchError):
    """SIGINT or SIGTERM arrived during a run."""

    exit_status = ExitStatus.INTERRUPTED

    def __init__(
        self,
        message: str = "interrupted",
        *,
        hint: str | None = None,
        partial: PhaseResult | None = None,
    ):
        super().__init__(message, hint=hint, partial=partial)


#: The most characters of a foreign message (an exception's text, a backend's reply) that a
#: result keeps: such text can run to megabytes (a storage service's HTML error page).
MAX_QUOTED = 300


def quoted(text: object, limit: int = MAX_QUOTED) -> str:
    """A foreign message on one line, bounded: whole when it fits, else its first ``limit``
    characters and how many more there were, said, never silently cut. iobench's own
    warnings are never bounded."""
    one = " ".join(str(text).split())
    if len(one) <= limit:
        return one
    return f"{one[:limit]}... ({len(one) - limit:,} more characters not kept)"
