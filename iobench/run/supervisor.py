"""A parent that hands back the exit status when the run's own process cannot end.

A thread blocked in a FUSE request (ceph-fuse with an OSD or the metadata server down, say)
survives even SIGKILL until the storage answers, and so does the exit of its process: the
watchdog (``watchdog.py``) gives up, writes the partial result and says so in one line, but a
shell, a CI job or a scheduler waiting for the process would still wait for the storage.

So, on targets whose client can block in the kernel (FUSE, network and parallel file systems;
``IOBENCH_SUPERVISE=always|never`` overrides), the run's process forks once, before its
first I/O. The child does the run; the parent only waits for it, forwards every signal sent
to it (the child has a process group of its own, so a terminal's Ctrl-C or a ``timeout``'s
group signal reaches it exactly once, through the parent), and ends with the child's exit
status, or the same signal, or with exit 4 at once when the watchdog gives up (the child says
so through a pipe). A child stuck in the kernel is then left to it: init reaps it when the
storage answers. If the parent is killed, the child gets SIGTERM (``PR_SET_PDEATHSIG``) and
stops as it would on its own.

Not split: a process with other threads already running (a fork would copy their locks, not
them), a rank under torchrun (its agent watches the rank's own process), or a platform
without ``fork``.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..target.model import Target

ENV = "IOBENCH_SUPERVISE"
PR_SET_PDEATHSIG = 1
BLOCKING_CLASSES = frozenset({"network", "parallel"})
MODES = frozenset({"auto", "always", "1", "yes", "on", "never", "0", "no", "off"})

# the signals a parent passes on (SIGKILL and SIGSTOP cannot be caught; SIGTSTP is handled
# apart: the child stops, then the parent, as a job of a shell does)
FORWARDED = tuple(
    getattr(signal, n)
    for n in (
        "SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM",
        "SIGXCPU", "SIGCONT", "SIGWINCH",
    )
    if hasattr(signal, n)
)  # fmt: skip

_state: dict[str, Any] = {"fd": None, "split": False}


def mode_from_env(environ: Mapping[str, str] | None = None) -> str:
    """IOBENCH_SUPERVISE, checked: a value that is no mode is a UsageError (a typo never
    silently means "auto"). The commands that run I/O check it before anything is written."""
    env = os.environ if environ is None else environ
    mode = env.get(ENV, "auto").strip().lower()
    if mode not in MODES:
        from ..core.errors import UsageError

        raise UsageError(
            f"{ENV}={env[ENV]!r} is not a supervision mode",
            hint="set it to always, never or auto (or unset it)",
        )
    return mode


def wanted(fs_type: str, fs_class: str, environ: dict[str, str] | None = None) -> bool:
    """Whether a run on this file system gets a supervising parent (pure, for tests)."""
    env = os.environ if environ is None else environ
    mode = mode_from_env(env)
    if mode in ("never", "0", "no", "off"):
        return False
    if "TORCHELASTIC_RUN_ID" in env or int(env.get("WORLD_SIZE", "1") or 1) > 1:
        return False
    if mode in ("always", "1", "yes", "on"):
        return True
    return fs_type.lower().startswith("fuse") or fs_class in BLOCKING_CLASSES


def split_for(target: Target) -> bool:
    """Fork once if ``target`` wants a supervising parent; True in the child that carries on
    with the run (the parent never returns)."""
    if _state["split"] or not hasattr(os, "fork"):
        return False
    if getattr(target, "kind", "posix") != "posix":
        return False
    from ..target import fs_class

    fs_type = getattr(target, "fs_type", "unknown") or "unknown"
    if not wanted(fs_type, fs_class(fs_type)):
        return False
    if threading.active_count() > 1:
        return False
    return split()


def split() -> bool:
    """Fork: the parent waits and relays (never returns); the child returns True."""
    _state["split"] = True
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        _state["fd"] = w
        _become_child(parent)
        return True
    os.close(w)
    _relay(child, r)  # never returns
    return False  # pragma: no cover


def _become_child(parent: int) -> None:
    try:
        os.setpgid(0, 0)
    except OSError:  # pragma: no cover - already a group leader
        pass
    for s in (getattr(signal, "SIGTTOU", None), getattr(signal, "SIGTTIN", None)):
        if s is not None:
            signal.signal(s, signal.SIG_IGN)  # a background group may still write its lines
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent:  # the parent died before the line above
        os.kill(os.getpid(), signal.SIGTERM)


def notify(code: int) -> None:
    """In the child: the run has ended with ``code`` although the process may not end yet."""
    fd = _state["fd"]
    if fd is None:
        return
    try:
        os.write(fd, f"{int(code)}\n".encode())
    except OSError:  # pragma: no cover - the parent is gone
        pass


def _relay(child: int, r: int) -> None:
    """The parent's whole life: pass signals on, end as the child ends (or says it has)."""
    os.closerange(3, r)
    os.closerange(r + 1, 1 << 16)

    def forward(signum: int, frame: Any) -> None:
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    def suspend(signum: int, frame: Any) -> None:
        forward(signal.SIGSTOP, frame)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stops here until SIGCONT
        signal.signal(signal.SIGTSTP, suspend)

    for s in FORWARDED:
        signal.signal(s, forward)
    if hasattr(signal, "SIGTSTP"):
        signal.signal(signal.SIGTSTP, suspend)
    _end(_wait(child, r))


def _wait(child: int, r: int) -> int:
    """The child's exit status as a shell reports it (negative: killed by that signal)."""
    while True:
        ready, _, _ = select.select([r], [], [], 1.0)
        if ready:
            data = os.read(r, 64)
            if data.strip():
                return int(data.split()[0])  # the run has ended; its process may not
            if not data:  # the child (and every process it forked) closed its end: it ended
                return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            return os.waitstatus_to_exitcode(status)


def _end(code: int) -> None:
    if code < 0:  # the child was killed by a signal: so is the parent
        try:
            signal.signal(-code, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: their action is the default anyway
            pass
        os.kill(os.getpid(), -code)
        code = 128 - code
    os._exit(code)
