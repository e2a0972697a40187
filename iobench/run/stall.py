"""The I/O watchdog: a phase whose I/O makes no progress for a set time gives up, exit 4.

A network or FUSE client whose storage stops answering (an OSD or a metadata server down, a
partitioned NFS server) blocks the caller in the system call, often for ever: ceph-fuse waits
for the OSD or the MDS to come back. Threads stuck in a system call cannot be stopped or
joined, so a flag the workers poll is no help. The watchdog is a thread of its own that sees
the running totals every engine reports (``Progress.update``): while a phase is in flight
(from its cache drop to its layout query), no completed operation or byte for ``timeout``
seconds is a stall; once a buffered write phase on a block device has written all its
bytes, sectors written to that device count as progress too (its ``fsync`` draining the page
cache). Then it:

1. writes the partial result (the phases measured so far, and the stalled one marked
   ``failed`` with what it had counted), within ``SAVE_LIMIT_S``;
2. removes the run directory within ``CLEANUP_LIMIT_S``; on a mount that is still blocked it
   hands the removal to a detached reaper process (``python -m iobench.run.stall``), which
   removes the run directory, and nothing else, once the storage answers again (it gives up
   after ``REAP_LIMIT_S``);
3. prints one line on stderr naming the phase, the target and how long it made no progress,
   and why: the storage not responding, unless the client itself is the cause — its worker
   processes not all started (``Progress.starting``: a fork that hangs or fails slowly, a
   pool whose processes never report in, with this user's RLIMIT_NPROC), its memory nearly
   gone or its CPUs oversubscribed (``starved_client``) — and ends the process with
   ``os._exit(4)``: the stuck threads die with it (a fatal signal ends a FUSE wait), fio and
   forked workers die with their parent.

The timeout is ``--stall-timeout`` (run, qualify, loader, checkpoint), else the workload's
``stall_timeout`` key, else ``DEFAULT_STALL_S``; 0 turns the watchdog off. Each run session
owns its watchdog through its guard (``guard.RunGuard``); the CLI arms it for every run,
library callers (``iobench.api``) pass ``stall=StallSetting(armed=True)``.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..engines.base import Progress
from . import supervisor

if TYPE_CHECKING:
    from ..engines.base import PhaseSpec
    from ..target.model import Target

DEFAULT_STALL_S = 60.0  # no completed I/O for this long while a phase is in flight: a stall
SAVE_LIMIT_S = 10.0  # writing the partial result may take this long (the output may hang too)
CLEANUP_LIMIT_S = 5.0  # removing the run directory in this process, before the reaper's turn
REAP_LIMIT_S = 3600.0  # the detached reaper waits this long for the storage, at most
EXIT_RUN_FAILED = 4  # errors.ExitStatus.RUN_FAILED
_WRITES = ("write", "randwrite", "create")


def _block_device(path: str | None) -> str | None:
    """The block device statistics file of the file system holding ``path`` (None: no block
    device behind it, as on FUSE, NFS or tmpfs). Looked up once, before any phase: a stat of
    a hung mount would block the watchdog itself."""
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    stat = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat"
    return stat if os.path.exists(stat) else None


def _sectors_written(stat: str | None) -> int | None:
    """Sectors written to the device so far (its stat file's seventh field)."""
    if stat is None:
        return None
    try:
        with open(stat) as f:
            return int(f.read().split()[6])
    except (OSError, ValueError, IndexError):  # pragma: no cover
        return None


class Watchdog:
    """Watches one run session's phases; gives the process up on a stall (see the module)."""

    def __init__(
        self,
        session: Any,
        timeout_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        exit_fn: Callable[[int], Any] = os._exit,
        err: Any = None,
    ):
        self.session = session
        self.timeout_s = timeout_s
        self.clock = clock
        self.exit_fn = exit_fn
        self.err = err
        self.lock = threading.Lock()
        self.phase: str | None = None
        self.total: int | None = None  # the phase's bytes, when its progress says
        self.totals = (0, 0)
        self.last = clock()
        self.device = _block_device(getattr(getattr(session, "target", None), "root", None))
        self.written: int | None = None  # the device's sectors written at the last look
        self.fired = False
        self.spec: Any = None  # the PhaseSpec of the phase in flight (``watching``)
        self.held = 0  # ``watching`` blocks open: a phase (or step) that its progress does not end
        # what the step in flight is blocked on, when it can say (the loader: its workers'
        # files and stages); else the storage is taken as not responding
        self.detail: Callable[[], str] | None = None
        # a count the step in flight moves on its own (the loader's workers' steps), or None
        self.moving: Callable[[], int] | None = None
        self.moved_count: int | None = None
        # the phase's worker processes while they start: (forked, running, total), None when
        # no start is under way (``Progress.starting``)
        self.start: tuple[int, int, int] | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what the phases report ------------------------------------------------------------
    def started(self, name: str, total_bytes: int | None = None) -> None:
        with self.lock:
            self.phase, self.totals, self.last = name, (0, 0), self.clock()
            self.total, self.start = total_bytes, None
        self._ensure_thread()

    def starting(self, forked: int, running: int, total: int) -> None:
        """The phase's worker processes starting: each fork that returns and each worker that
        reports in is progress of the client's; a start that stops is named when it stalls."""
        with self.lock:
            now = (forked, running, total)
            if now != self.start:
                self.last = self.clock()
            self.start = None if running >= total else now

    def moved(self, done_bytes: int, done_ops: int) -> None:
        with self.lock:
            if (done_bytes, done_ops) != self.totals:
                self.totals, self.last = (done_bytes, done_ops), self.clock()

    def beat(self) -> None:
        """Progress that is not in the totals (fio's status line reports a rate above 0)."""
        with self.lock:
            self.last = self.clock()

    def ended(self) -> None:
        with self.lock:
            if self.held == 0:  # a progress's close inside ``watching``: the phase goes on
                self.phase, self.last, self.start = None, self.clock(), None

    @contextmanager
    def busy(self, name: str) -> Iterator[None]:
        """Watch a step that reports no totals (removing the run directory) as a phase."""
        self.started(name)
        try:
            yield
        finally:
            self.ended()

    # -- the watching thread -----------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None and self.timeout_s > 0:
            self._thread = threading.Thread(
                target=self._watch, name="iobench-watchdog", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        self._done.set()

    def _draining(self) -> bool:
        """A buffered write phase whose every byte is written: what is left (its fsync, its
        close) drains the page cache."""
        sp = self.spec
        if sp is None or sp.name != self.phase or sp.op not in _WRITES or sp.direct:
            return False
        return bool(self.total and self.totals[0] >= self.total)

    def idle_s(self) -> float | None:
        """Seconds the phase in flight has made no progress (None: no phase in flight)."""
        # a buffered write's final fsync drains the page cache to the device: progress the
        # totals do not show. The device's counters count every writer, so only that step
        # uses them (and only on a block device: a FUSE or network mount has none)
        written = _sectors_written(self.device) if self._draining() else None
        count = _count_of(self.moving)
        with self.lock:
            if count is not None and count != self.moved_count:
                self.moved_count, self.last = count, self.clock()
            if written is not None and self.written is not None and written > self.written:
                self.last = self.clock()  # the device takes the page cache's data: it moves
            self.written = written
            return None if self.phase is None else self.clock() - self.last

    def _watch(self) -> None:
        poll = min(1.0, max(0.05, self.timeout_s / 20))
        while not self._done.wait(poll):
            idle = self.idle_s()
            if idle is not None and idle >= self.timeout_s:
                self.give_up(idle)
                return

    # -- giving up ---------------------------------------------------------------------------
    def give_up(self, idle_s: float) -> None:
        """Save the partial result, clean up (bounded), say so in one line, exit 4."""
        with self.lock:
            if self.fired or self._done.is_set():
                return
            self.fired = True
            phase, (done_bytes, done_ops) = self.phase or "?", self.totals
            start = self.start
        s = self.session
        where = _where(s.target)
        what = client_not_storage(start, starved_client(*_host_pressure()))
        if self.detail is not None:
            said = _bounded(self.detail, 1.0)
            what = said if isinstance(said, str) and said else what
        line = (
            f"phase {phase} made no progress for {self.timeout_s:g} s on {where} ({what}; "
            f"--stall-timeout {self.timeout_s:g}s)"
        )
        saved = _bounded(
            lambda: _save_partial(s, self.spec, phase, line, done_bytes, done_ops), SAVE_LIMIT_S
        )
        cleanup = _cleanup(s.target, s.keep)
        tail = f"; partial result kept in {saved}" if isinstance(saved, str) else ""
        if saved is None:
            tail = f"; the partial result could not be written in {SAVE_LIMIT_S:.0f} s"
        err = self.err or sys.stderr
        try:
            if getattr(err, "isatty", lambda: False)():
                err.write("\n")  # past a progress bar
            err.write(f"iobench: error: {line}{cleanup}{tail}\n")
            err.flush()
            sys.stdout.flush()
        except (OSError, ValueError):  # pragma: no cover - a closed stream
            pass
        if self.exit_fn is os._exit:
            _release_stdio()
            supervisor.notify(EXIT_RUN_FAILED)  # a supervising parent ends now (supervisor.py)
        self.exit_fn(EXIT_RUN_FAILED)


def _count_of(moving: Callable[[], int] | None) -> int | None:
    if moving is None:
        return None
    try:
        return int(moving())
    except Exception:  # noqa: BLE001 - a count that cannot be read is no progress
        return None


STORAGE = "blocked I/O: the storage is not responding"
_STARVED = "the client is starved, not the storage: "


def unstarted(forked: int, running: int, total: int, limit: str = "") -> str:
    """The line's reason when the phase's worker processes did not all start: the client's
    process start (fork or spawn failing or slow), not the storage."""
    return (
        f"the client's process start, not the storage: {forked} of {total} worker processes "
        f"forked, {running} of them running: fork or spawn failing or slow "
        f"({limit or 'RLIMIT_NPROC unknown'}; or the memory the new processes need)"
    )


def client_not_storage(start: tuple[int, int, int] | None, starved: str | None) -> str:
    """Why a phase made no progress, as the line says it: a worker-process start that did not
    finish, the client starved (memory, CPU), both, or else the storage."""
    from ..engines.forked import nproc_limit

    if start is None:
        return starved or STORAGE
    text = unstarted(*start, nproc_limit())
    return f"{text}; {starved.removeprefix(_STARVED)}" if starved else text


def starved_client(
    mem_available: int | None, mem_total: int | None, running: int | None, blocked: int | None,
    cpus: int,
) -> str | None:  # fmt: skip
    """Why the client itself, not the storage, may have made no progress (None: no sign of
    it): the host's memory nearly gone (under 5 % available), or this process's own runnable
    threads many more than the CPUs (over 4 per CPU) while none of them waits on I/O (in
    uninterruptible sleep, ``D``)."""
    if mem_available is not None and mem_total and mem_available < 0.05 * mem_total:
        return (
            f"the client is starved, not the storage: {mem_available / 2**30:.1f} GiB of "
            f"{mem_total / 2**30:.1f} GiB memory available"
        )
    if running is not None and running > 4 * max(cpus, 1) and not blocked:
        return (
            f"the client is starved, not the storage: {running} of its threads runnable on "
            f"{cpus} CPUs and none waiting on I/O"
        )
    return None


def _host_pressure() -> tuple[int | None, int | None, int | None, int | None, int]:
    """(MemAvailable, MemTotal, this process's runnable threads, its threads in I/O wait, CPUs)
    from /proc; None where unknown."""
    mem: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for ln in f:
                k, _, rest = ln.partition(":")
                if k in ("MemAvailable", "MemTotal"):
                    mem[k] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    states: list[str] = []
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as f:
                states.append(f.read().rpartition(")")[2].split()[0])
    except (OSError, IndexError):
        states = []
    running = states.count("R") if states else None
    blocked = states.count("D") if states else None
    return mem.get("MemAvailable"), mem.get("MemTotal"), running, blocked, os.cpu_count() or 1


def _release_stdio() -> None:
    """Point stdout and stderr at /dev/null: a thread stuck in a FUSE request keeps the
    process (and its file table) alive after ``os._exit`` until the storage answers, and a
    pipe reader (``| tee``, a test) should see the end of the output now, not then."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    except OSError:  # pragma: no cover
        pass


def _where(target: Target) -> str:
    from ..core.redact import redact_url

    return redact_url(str(getattr(target, "path_or_url", "") or getattr(target, "root", "?")))


def _bounded(fn: Callable[[], Any], limit_s: float) -> Any:
    """``fn()`` in a daemon thread; its value, or None when it did not end within ``limit_s``
    (it may be stuck in a system call: it is left behind, and dies with the process)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(fn())
        except Exception as e:  # noqa: BLE001 - reported as the value
            box.append(e)

    t = threading.Thread(target=run, name="iobench-watchdog-step", daemon=True)
    t.start()
    t.join(limit_s)
    return box[0] if box else None


def _stalled_phase(
    spec: PhaseSpec | None, name: str, line: str, done_bytes: int, done_ops: int
) -> Any:
    from ..result.file import PhaseResult

    res = PhaseResult(name=name, op="?", status="failed", error=line)
    if spec is not None and spec.name == name:
        res.op, res.concurrency, res.params = spec.op, spec.jobs, dict(spec.result_params)
        res.block_size = spec.io_block_size()
        res.cache = "direct" if spec.direct else "buffered"
    # what the progress feed had counted when the phase stalled: a count, not a timed figure
    res.extra["stalled"] = {"done_bytes": done_bytes, "done_ops": done_ops}
    return res


def _save_partial(
    s: Any, spec: PhaseSpec | None, phase: str, line: str, done_bytes: int, done_ops: int
) -> str | None:
    from ..result import file as results_mod

    run = s.run
    phases = list(s.runner.results) if s.runner is not None else list(run.phases)
    run.phases = [*phases, _stalled_phase(spec, phase, line, done_bytes, done_ops)]
    run.status = "partial" if any(p.ops for p in phases) else "failed"
    run.error = line
    run.finished_at = results_mod.now_iso()
    if s.runner is not None:
        run.warnings.extend(w for w in s.runner.warnings if w not in run.warnings)
    if not s.save:
        return None
    return str(results_mod.save(run, s.out_dir, new=True))


def _cleanup(target: Target, keep: bool) -> str:
    """Remove the run directory within CLEANUP_LIMIT_S, else leave it to the reaper; what the
    one line says about it."""
    from ..target import remove_run_dir

    if keep or not getattr(target, "created", False):
        return ""
    handle = getattr(target, "handle", None)
    if handle is not None:  # the reaper's own copies: the removal may close the handle's
        handle = copy.copy(handle)
        handle.root_fd, handle.fd = os.dup(handle.root_fd), os.dup(handle.fd)
    try:

        def remove() -> bool:
            remove_run_dir(target)
            return True

        done = _bounded(remove, CLEANUP_LIMIT_S)
        if done is True and not target.created:
            return ""
        if target.kind != "posix" or handle is None:
            return f"; the run directory {_where(target)} could not be removed: remove it by hand"
        pid = reap_later(handle)
    finally:
        if handle is not None:
            handle.close()
    return (
        f"; the run directory {target.run_dir} is removed by process {pid} once the storage "
        f"answers (for {REAP_LIMIT_S / 60:.0f} min at most)"
    )


def reap_later(handle: Any) -> int:
    """Start the detached reaper for the run directory ``handle`` (a ``RunDir``) holds; its
    pid. The reaper is handed the two descriptors, never a path to resolve again."""
    fds = (handle.root_fd, handle.fd)
    dev, ino = handle.ident
    proc = subprocess.Popen(
        [sys.executable, "-m", "iobench.run.stall", handle.root, handle.name,
         *map(str, fds), str(dev), str(ino), str(REAP_LIMIT_S)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=fds,
        start_new_session=True,  # not in the terminal's process group: Ctrl-C there is not ours
        env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
    )  # fmt: skip
    return proc.pid


def reap(handle: Any, limit_s: float, poll_s: float = 2.0) -> int:
    """Remove the run directory ``handle`` holds (through its descriptors: ``RunDir.remove``;
    nothing else) once the storage answers; give up after ``limit_s`` (the reaper process's
    alarm also ends a call that blocks past it: ``_reaper_main``). 2 when ``handle`` is not
    an iobench run directory."""
    from ..target import RUN_DIR_PREFIX

    if handle is None or not handle.name.startswith(RUN_DIR_PREFIX) or "/" in handle.name:
        return 2
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        gone, _errors, _where = handle.remove()
        if gone:
            return 0
        time.sleep(poll_s)
    return 1


# -- the progress side ------------------------------------------------------------------------
class WatchedProgress(Progress):
    """A Progress that tells the watchdog about a phase's start, totals and end."""

    def __init__(self, inner: Progress, dog: Watchdog):
        self.inner = inner
        self.dog = dog

    def start(self, name: str, total_bytes: int | None, total_ops: int | None) -> None:
        self.dog.started(name, total_bytes)
        self.inner.start(name, total_bytes, total_ops)

    def set_duration(self, seconds: float) -> None:
        self.inner.set_duration(seconds)

    def update(self, done_bytes: int, done_ops: int) -> None:
        self.dog.moved(done_bytes, done_ops)
        self.inner.update(done_bytes, done_ops)

    def beat(self) -> None:
        self.dog.beat()

    def starting(self, forked: int, running: int, total: int) -> None:
        self.dog.starting(forked, running, total)
        self.inner.starting(forked, running, total)

    def close(self) -> None:
        self.dog.ended()
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # the inner progress's own extras (livecsv)
        return getattr(self.inner, name)


def _reaper_main(argv: list[str]) -> int:
    """The detached reaper: ROOT NAME ROOT_FD FD DEV INO LIMIT_S (the descriptors inherited
    from the run). SIGALRM (default action: the process ends) after LIMIT_S ends it even
    inside a system call the storage never answers."""
    import signal

    from ..target import RunDir

    root, name, root_fd, fd, dev, ino, limit = argv
    limit_s = float(limit)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, int(limit_s)))
    handle = RunDir.from_fds(root, name, int(root_fd), int(fd), (int(dev), int(ino)))
    return reap(handle, limit_s)


if __name__ == "__main__":
    sys.exit(_reaper_main(sys.argv[1:]))
