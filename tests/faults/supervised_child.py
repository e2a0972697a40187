"""Driver for test_supervisor.py: split (as a run on a blocking client would), then act as
told in the child. argv: MODE MARKER_PREFIX."""

import os
import signal
import sys
import time

from iobench.run import supervisor

mode, marker = sys.argv[1], sys.argv[2]
supervisor.split()


def mark(suffix: str, text: str = "") -> None:
    with open(f"{marker}.{suffix}.tmp", "w") as f:
        f.write(text)
    os.rename(f"{marker}.{suffix}.tmp", f"{marker}.{suffix}")


def got(signum, frame):
    mark("got", signal.Signals(signum).name)
    os._exit(128 + signum)


mark("pid", str(os.getpid()))
if mode == "exit3":
    sys.exit(3)
if mode == "linger":  # the run has ended (exit 4) but the process stays, as one stuck in FUSE
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as deaf as a thread in a FUSE request
    supervisor.notify(4)
    time.sleep(120)
    os._exit(9)
if mode == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "wait":
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, got)
    mark("ready")
    time.sleep(120)
    os._exit(9)
