"""A phase's workers as forked processes (``worker.run_threads``'s counterpart), for engines
whose loops run Python per operation: with more workers than CPUs, threads would queue for the
GIL and their latencies would include the wait (fio forks its jobs too).

Each child runs one worker and sends its stats (and error) back through a pipe; the stop and
failed flags and the progress counters live in the phase state's shared page. A child ignores
the terminal's signals (the parent turns them into the stop flag), dies with its parent, and
leaves with ``os._exit`` (no interpreter teardown, no inherited atexit handlers).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from typing import Any

from ..core.errors import EngineError
from ..result.stats import WorkerStats
from ..target import worker_signals
from .base import PhaseSpec
from .worker import FAILED, POLL_S, PhaseState, WorkerFn

_LIBC: Any = None


def cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def can_fork(phase: PhaseSpec) -> bool:
    """Whether this phase's workers may be processes (a daemonic process may not have children)."""
    return hasattr(os, "fork") and phase.jobs >= 2 and not multiprocessing.current_process().daemon


def _libc() -> Any:
    """libc loaded in the parent, before any fork (dlopen in a forked child is unsafe)."""
    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(None, use_errno=True)
        except OSError:  # pragma: no cover
            _LIBC = False
    return _LIBC


def run_processes(
    phase: PhaseSpec, state: PhaseState, origin: float, work: WorkerFn
) -> list[WorkerStats]:
    """Fork one process per worker running ``work(w, stats, ready)``; all start together once
    each has said it is ready; their stats come back when they end. On Ctrl-C or an error
    here the workers are stopped, given 5 s, then killed."""
    mp = multiprocessing.get_context("fork")
    go = mp.Event()
    _libc()
    procs: list[Any] = []
    conns: list[Any] = []
    stats: list[WorkerStats | None] = [None] * phase.jobs
    running: set[int] = set()  # the workers that reported in: their process start is over
    report = state.ctx.progress.starting
    try:
        for w in range(phase.jobs):
            p, recv = _start(mp, phase, w, work, origin, state, go)
            procs.append(p)
            conns.append(recv)
            report(w + 1, 0, phase.jobs)  # a fork that returned: the client moves
        # every worker has its buffers ready (or has ended): then the phase starts
        _collect(procs, conns, stats, state, waiting_ready=True, running=running)
        report(phase.jobs, phase.jobs, phase.jobs)  # the start is over (or ended in errors)
        go.set()
        _collect(procs, conns, stats, state, waiting_ready=False)
        for p in procs:
            p.join()
    except BaseException:
        state.request_stop()  # Ctrl-C or an error in this thread: stop the workers
        go.set()
        for c in conns:
            c.close()  # a worker's result is no longer wanted: its send fails, it exits
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        raise
    finally:
        for c in conns:
            c.close()
    return [s if s is not None else WorkerStats(origin=origin) for s in stats]


def _start(mp: Any, phase: PhaseSpec, w: int, work: WorkerFn, origin, state, go) -> tuple:
    recv, send = mp.Pipe(duplex=False)
    p = mp.Process(
        target=_child_main,
        args=(work, w, origin, state, send, go, os.getpid()),
        name=f"iobench-{phase.name}-{w}",
        daemon=True,
    )
    try:
        p.start()
    except OSError as e:  # EAGAIN at RLIMIT_NPROC, ENOMEM
        send.close()
        recv.close()
        raise EngineError(
            f"phase {phase.name}: cannot start worker process {w} of {phase.jobs}: "
            f"{e.strerror or e} (the client's process start failed, not the storage: "
            f"{nproc_limit()})",
            hint="lower jobs, raise the process limit (ulimit -u), or --set workers=threads",
        ) from None
    send.close()
    return p, recv


def nproc_limit() -> str:
    """This user's process limit, as the message of a start that failed or hangs says it."""
    import resource

    try:
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    except (AttributeError, OSError, ValueError):  # pragma: no cover - not Linux
        return "RLIMIT_NPROC unknown"
    root = ", not enforced for root" if os.geteuid() == 0 else ""
    if soft == resource.RLIM_INFINITY:
        return f"RLIMIT_NPROC unlimited{root}"
    return f"RLIMIT_NPROC {soft:,} processes and threads of this user{root}"


def _collect(
    procs: list[Any],
    conns: list[Any],
    stats: list[WorkerStats | None],
    state: PhaseState,
    waiting_ready: bool,
    running: set[int] | None = None,
) -> None:
    """Read worker messages until each has said "ready" (or, later, sent its result);
    ``running``: the workers that said "started", reported to the progress as they do."""
    pending = {c: w for w, c in enumerate(conns) if stats[w] is None and not c.closed}
    while pending:
        for c in multiprocessing.connection.wait(list(pending), timeout=POLL_S):
            w = pending.pop(c)
            try:
                msg = conns[w].recv()  # c is conns[w], typed as the connection it is
            except (EOFError, OSError):
                procs[w].join(1)
                stats[w] = WorkerStats(origin=0.0)
                state.fail(
                    f"worker process {w} ended unexpectedly (exit code {procs[w].exitcode})",
                    None,
                )
                continue
            if msg == "started":  # the child runs: its process start is over
                pending[c] = w
                if running is not None:
                    running.add(w)
                    state.ctx.progress.starting(len(procs), len(running), len(procs))
                continue
            if msg == "ready":
                if not waiting_ready:  # pragma: no cover - protocol error
                    pending[c] = w
                continue
            stats[w] = WorkerStats.from_dict(msg["stats"])
            if msg["error"]:
                state.fail(msg["error"], msg["errno"])
        if state.ctx.stop.is_set():
            state.request_stop()
        state.ctx.progress.update(*state.totals())


def _child_main(
    work: WorkerFn, w: int, origin: float, state: PhaseState, conn: Any, go: Any, parent: int
) -> None:
    """A forked worker: run one worker's loop and send its stats (and error) back."""
    # The parent turns Ctrl-C/SIGTERM/SIGHUP... into the shared stop flag; the terminal's
    # signals to the whole process group must not kill a worker before it reports what it did.
    worker_signals()
    libc = _LIBC
    if libc:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: never outlive the parent
    if os.getppid() != parent:
        os._exit(1)
    try:
        conn.send("started")  # the parent's watchdog tells a start that hangs from the storage
    except BaseException:  # noqa: BLE001 - the parent gave up on us
        os._exit(0)
    state.lock = threading.Lock()  # another thread may have held the inherited one at fork
    state.error = state.error_errno = None
    st = WorkerStats(origin=origin)

    def ready() -> bool:
        conn.send("ready")
        go.wait()
        return True

    error = None
    try:
        try:
            work(w, st, ready)
            error = state.error
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            error = f"worker process {w} failed: {type(e).__name__}: {e}"
            state.flags[FAILED] = 1
        conn.send({"stats": st.to_dict(), "error": error, "errno": state.error_errno})
        conn.close()
    except BaseException:  # noqa: BLE001 - the parent gave up on us (Ctrl-C): just leave
        pass
    finally:
        os._exit(0)  # no interpreter teardown, no atexit handlers inherited from the parent
