"""Run ``iobench`` with one kind of I/O blocked for ever, as a hung mount blocks it (for
test_stall_watchdog.py; not a test module).

    python stall_driver.py FIFO WHAT PHASE AFTER -- IOBENCH ARGS...

WHAT is the calls that block, comma-separated: ``pwrite`` or ``open`` (in the worker threads or forked worker
processes of the phase whose name starts with PHASE, from its AFTER-th call on), or
``cleanup`` (removing the run directory). The process start of a phase's worker processes:
``fork`` (the run's ``os.fork`` blocks from its AFTER-th call on, as a fork that never returns
under memory pressure), ``forkfail`` (it fails with EAGAIN from its AFTER-th call on, as at
RLIMIT_NPROC, which root is exempt from), ``start`` (the forked workers of PHASE block before
they run, as processes that never report in), ``slowdrop`` (each page-cache drop of the run's
own thread takes AFTER ms: a drop of many files on a busy disk, slow but answering). A blocked call opens FIFO for reading, which no one
ever writes: the thread sits in the open(2) system call for good, as one does in a FUSE request
whose server waits for an OSD or an MDS, and no flag it could poll reaches it.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading

fifo, what, phase, after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
args = sys.argv[sys.argv.index("--") + 1 :]
calls = [0]
lock = threading.Lock()


def _in_phase() -> bool:
    names = (threading.current_thread().name, multiprocessing.current_process().name)
    return any(n.startswith(f"iobench-{phase}") for n in names)


def _block() -> None:
    open(fifo, "rb")  # never returns: no writer ever opens the FIFO


def _blocking(real):
    def call(*a, **k):
        if _in_phase():
            with lock:
                calls[0] += 1
                n = calls[0]
            if n >= after:
                _block()
        return real(*a, **k)

    return call


for kind in what.split(","):
    if kind in ("pwrite", "open"):
        setattr(os, kind, _blocking(getattr(os, kind)))
    elif kind in ("fork", "forkfail"):
        real_fork = os.fork

        def fork(kind=kind, real_fork=real_fork):
            with lock:
                calls[0] += 1
                n = calls[0]
            if n >= after:
                if kind == "forkfail":
                    import errno

                    raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
                _block()
            return real_fork()

        os.fork = fork
    elif kind == "slowdrop":
        import time

        real_fadvise = os.posix_fadvise

        def fadvise(fd, offset, length, advice, real_fadvise=real_fadvise):
            if advice == os.POSIX_FADV_DONTNEED and not _in_phase():
                time.sleep(after / 1000)
            return real_fadvise(fd, offset, length, advice)

        os.posix_fadvise = fadvise
    elif kind == "start":
        from iobench.engines import forked

        real_main = forked._child_main

        def child_main(*a, real_main=real_main):
            if _in_phase():
                forked._LIBC.prctl(1, 9)  # PR_SET_PDEATHSIG SIGKILL: it dies with the run
                _block()
            real_main(*a)

        forked._child_main = child_main
    elif kind == "cleanup":  # the watchdog's removal of the run directory blocks too
        from iobench import target

        def remove_run_dir(t):
            _block()

        target.remove_run_dir = remove_run_dir
from iobench.cli.app import main  # noqa: E402

sys.exit(main(args))
