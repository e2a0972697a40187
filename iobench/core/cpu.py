"""The client's own CPU use over a phase: iobench's process and the children it reaped.

A storage figure is only the storage's when the client had CPU to spare: a phase that kept
every core of the host busy measured the client. ``os.times()`` before and after the phase
gives user + system seconds of this process (its threads) and of the child processes that
ended inside it (fio, worker processes); over the phase's wall time and the CPUs this process
may run on, that is the share of the host the client used.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

SATURATED_SHARE = 0.8  # at or above this share of the usable CPUs the client may be the limit
# at or above this share of the host's CPUs busy (any process: iobench's or another job's), a
# CPU-bound client had no CPU to spare: what it measured was the host's cores
HOST_BUSY_SHARE = 0.9


def physical_memory() -> int:
    """This host's physical memory in bytes (0 when the system will not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return 0


_MODEL_KEYS = ("model name", "hardware", "cpu model", "model")  # x86, then ARM/POWER's names


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The CPU's model name (``AMD EPYC 9654 96-Core Processor``), whitespace collapsed: the
    first of :data:`_MODEL_KEYS` that ``cpuinfo`` names, else ``platform.processor()``; None
    when neither says."""
    import platform

    found: dict[str, str] = {}
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as f:
            for line in f.read(1 << 20).splitlines():
                key, sep, value = line.partition(":")
                key = key.strip().lower()
                if sep and key in _MODEL_KEYS and value.strip():
                    found.setdefault(key, " ".join(value.split()))
    except OSError:
        pass
    for key in _MODEL_KEYS:
        if key in found:
            return found[key]
    return " ".join(platform.processor().split()) or None


@dataclass(frozen=True)
class CpuSample:
    wall_s: float
    self_s: float  # user + system of this process
    children_s: float  # user + system of the children it has waited for
    host_busy: int = 0  # the host's CPU time busy, all processes (/proc/stat, clock ticks)
    host_total: int = 0  # and in all (0: not known)


def _host_ticks() -> tuple[int, int]:
    """(busy, total) clock ticks of every CPU of the host since boot (/proc/stat's ``cpu``
    line: idle and iowait are not busy); (0, 0) where the system does not say."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal (guest in user)
    idle = sum(fields[3:5])
    return total - idle, total


def sample() -> CpuSample:
    t = os.times()
    busy, total = _host_ticks()
    return CpuSample(t.elapsed, t.user + t.system, t.children_user + t.children_system, busy, total)


def usable_cpus() -> int:
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return max(os.cpu_count() or 1, 1)


def usage(before: CpuSample, after: CpuSample, cpus: int | None = None) -> dict[str, Any]:
    """``{"cpu_s", "self_s", "children_s", "wall_s", "cpus", "share"}`` between two samples:
    ``share`` is CPU seconds over (wall seconds x usable CPUs), 0..1 (None without wall time)."""
    cpus = cpus or usable_cpus()
    wall = max(after.wall_s - before.wall_s, 0.0)
    own = max(after.self_s - before.self_s, 0.0)
    kids = max(after.children_s - before.children_s, 0.0)
    share = min((own + kids) / (wall * cpus), 1.0) if wall > 0 else None
    ticks = after.host_total - before.host_total
    host = (after.host_busy - before.host_busy) / ticks if ticks > 0 else None
    return {
        "cpu_s": round(own + kids, 3),
        "self_s": round(own, 3),
        "children_s": round(kids, 3),
        "wall_s": round(wall, 3),
        "cpus": cpus,
        "share": None if share is None else round(share, 4),
        "host_share": None if host is None else round(min(max(host, 0.0), 1.0), 4),
    }


def saturated(client_cpu: Any) -> bool:
    """Whether a recorded ``extra["client_cpu"]`` reached :data:`SATURATED_SHARE`."""
    share = client_cpu.get("share") if isinstance(client_cpu, dict) else None
    return isinstance(share, (int, float)) and share >= SATURATED_SHARE


def client_bound(client_cpu: Any) -> bool:
    """Whether the client had no CPU to spare over a recorded ``client_cpu``: it used
    :data:`SATURATED_SHARE` of its CPUs, or the host's CPUs were :data:`HOST_BUSY_SHARE` busy
    (other jobs included). A CPU-bound measurement (the loader's emulation) then measured the
    host's cores."""
    if not isinstance(client_cpu, dict):
        return False
    host = client_cpu.get("host_share")
    return saturated(client_cpu) or (isinstance(host, (int, float)) and host >= HOST_BUSY_SHARE)


class CpuSampler:
    """The client's CPU over time: a daemon thread reads /proc/stat and ``os.times()`` every
    ``interval_s`` (one read a sample, in its own thread: nothing on the workers' timed path)
    into preallocated arrays; past :attr:`MAX` samples neighbours are averaged and the
    interval doubles. Use as a context manager; :meth:`series` is ``extra.cpu_series``
    (``result.timeseries.CpuSeriesBlock``), None for fewer than two samples.

    ``self_share`` counts this process's threads; forked workers' CPU is counted only when
    they are reaped (``os.times``), so with process workers the host's share is the one to read.
    """

    MAX = 1200

    def __init__(self, interval_s: float = 0.25):
        import threading
        from array import array

        self.interval = interval_s
        self.host = array("d", bytes(8 * self.MAX))
        self.own = array("d", bytes(8 * self.MAX))
        self.n = 0
        self.cpus = usable_cpus()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="iobench-cpu", daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        last = sample()
        every = self.interval
        while not self._stop.wait(every):
            now = sample()
            wall = now.wall_s - last.wall_s
            ticks = now.host_total - last.host_total
            host = (now.host_busy - last.host_busy) / ticks if ticks > 0 else math.nan
            own = (now.self_s - last.self_s) / (wall * self.cpus) if wall > 0 else math.nan
            if self.n == self.MAX:
                self._halve()
                every = self.interval
            self.host[self.n] = min(max(host, 0.0), 1.0) if host == host else math.nan
            self.own[self.n] = min(max(own, 0.0), 1.0) if own == own else math.nan
            self.n += 1
            last = now

    def _halve(self) -> None:
        half = self.n // 2
        for a in (self.host, self.own):
            for i in range(half):
                a[i] = (a[2 * i] + a[2 * i + 1]) / 2
        self.n = half
        self.interval *= 2

    def series(self) -> dict[str, Any] | None:
        n = self.n
        if n < 2:
            return None

        def r(v: float) -> float | None:
            return None if v != v else round(v, 4)

        return {
            "interval_s": self.interval,
            "cpus": self.cpus,
            "host_share": [r(v) for v in self.host[:n]],
            "self_share": [r(v) for v in self.own[:n]],
        }


def processes_cpu_s(pids: Any) -> float | None:
    """CPU seconds (user + system, every thread) the live processes ``pids`` have run so far
    (nanoseconds from ``/proc/PID/task/*/schedstat``; a process gone counts 0), plus those of
    this process's children it has waited for (``RUSAGE_CHILDREN``); None where ``/proc``
    does not say. Read at both ends of a timed window for a loader's main process and its
    DataLoader workers, the difference is the CPU they spent in it, a worker that ended in it
    included (its whole time moves to the children's once it is reaped, and its part from
    before the window was counted at the start): a figure a busy host changes far less than
    the wall time."""
    import resource

    if not os.path.isdir("/proc/self/task"):
        return None
    total = 0
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # ended (and reaped: its time is the children's below)
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue  # a thread that ended in between
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return total / 1e9 + kids.ru_utime + kids.ru_stime


def loader_pids(it: Any) -> list[int]:
    """This process and the worker processes of a DataLoader iterator ``it``."""
    return [os.getpid(), *(p.pid for p in getattr(it, "_workers", ()) if p.pid)]
