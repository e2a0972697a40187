"""The loader and an asynchronous checkpoint on the same storage: the AU over a whole
checkpoint interval, and the goodput that counts the AU lost while the write runs.

Pure functions. An async save stalls training only for its snapshot; its write then runs in
the background for ``w`` seconds of every interval ``τ`` (from one save's start to the next's),
and while it runs the loader reads with the bandwidth the write leaves it. Over the interval

    AU(τ) = ( AU_alone · (τ − w) + AU_during · w ) / τ,        w = min(write time, τ)

where ``AU_alone`` comes with the loader's read bandwidth alone and ``AU_during`` with its read
bandwidth during the write. Two sources for the latter, and the result's ``basis`` says which:

- **measured**: the during-window of ``iobench loader --during-checkpoint`` (its AU, read and
  write rates), the figures as they are;
- **share rule**, from separate measurements only (the loader alone, the write alone): the
  storage's combined bandwidth ``C`` is shared in proportion to demand, each side capped by
  its own rate alone. When the loader's read rate alone ``R`` and the write's rate alone ``W``
  together fit (``R + W ≤ C``) both keep them; else the read gets ``C·R/(R+W)``, the write
  ``C·W/(R+W)``. Without a ``C`` the rule is **independent** (reads and writes limited
  separately, as blkio's read and write throttles, or a full-duplex link, limit them): both
  keep their alone rates. The loader's AU during is its AU alone moved as the starvation
  model's rate bound with storage the only supply term, ``bound(b) = min(AU_cap, b ÷ demand)``
  (demand: what the accelerators read per second at AU 1; ``AU_cap`` the loader's own ceiling),
  moves from the read bandwidth alone to the read bandwidth during:
  ``AU_during = AU_alone · bound(read during) ÷ bound(read alone)``.

Where the demand split is wrong, two more rules (each with its measured basis in its
docstring): ``queue_share``, jobs on one first-in-first-out limit split by the bytes each has
queued at once (blkio: a save's many fsyncing writers beside one other writer), and
``au_writes_first``, reads and writes on one server with the save first (the one-machine
CephFS).

The asynchronous goodput counting the contention is Daly's exact goodput of the async save
(stall = snapshot, plus the wait for the previous write when it outlasts the interval; the write
in flight) times ``AU(τ) ÷ AU_alone``: the fraction of the training that an uncontended loader
would have done which the run really does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core.errors import UsageError
from .daly import goodput_exact
from .model import async_stall


def _positive(**values: float | None) -> None:
    for key, v in values.items():
        if v is not None and not (v > 0 and math.isfinite(v)):
            raise UsageError(f"contention model: {key} must be positive, got {v!r}")


def _fraction(**values: float | None) -> None:
    for key, v in values.items():
        if v is not None and not (0 <= v <= 1):
            raise UsageError(f"contention model: {key} must be in [0, 1], got {v!r}")


def au_over_interval(au_alone: float, au_during: float, write_s: float, interval_s: float) -> float:
    """``(AU_alone·(τ − w) + AU_during·w) ÷ τ`` with ``w`` the write's time, at most ``τ``."""
    _positive(interval=interval_s)
    _fraction(au_alone=au_alone, au_during=au_during)
    if write_s < 0:
        raise UsageError(f"contention model: write time must be >= 0, got {write_s!r}")
    w = min(write_s, interval_s)
    return (au_alone * (interval_s - w) + au_during * w) / interval_s


def share(read_bps: float, write_bps: float, capacity_bps: float | None) -> tuple[float, float]:
    """(read, write) bandwidth while both run: demand-proportional shares of ``capacity_bps``,
    each capped by its alone rate; both alone rates when they fit or no capacity is given."""
    _positive(read=read_bps, write=write_bps, capacity=capacity_bps)
    if capacity_bps is None or read_bps + write_bps <= capacity_bps:
        return read_bps, write_bps
    total = read_bps + write_bps
    return capacity_bps * read_bps / total, capacity_bps * write_bps / total


def queue_share(
    alone_bps: Sequence[float], queued_bytes: Sequence[float], capacity_bps: float
) -> list[float]:
    """Each job's bandwidth on one FIFO limit ``capacity_bps``: weighted max-min fairness
    (water-filling) with weight its bytes queued at once (``queued_bytes``: streams × bytes
    each submits per flush), each capped by its rate alone (or its pace).

    The basis: a blkio throttle (cgroup v1 blk-throttle) dispatches one group's bios first in,
    first out at its limit. A writer that dirties a file in the page cache and fsyncs it
    submits the whole file at once and waits for it; the jobs' flushes then cycle through the
    queue, each stream served once per cycle of everyone's queued bytes, so job i gets
    ``C·q_i/Σq``: more streams or bigger flushes take more, whatever the demand. A job whose
    cap is below its share keeps its cap and the rest is shared again among the others by
    their weights. Measured on blkio (docs/validation/during-checkpoint.md): a save of 8
    writers fsyncing 4 MiB files beside one writer of 8 MiB files took 8.3 of 10.7 MiB/s,
    this rule 8.6, the demand-proportional ``share`` 5.2."""
    if len(alone_bps) != len(queued_bytes) or not alone_bps:
        raise UsageError("contention model: one queued size per job, at least one job")
    _positive(capacity=capacity_bps)
    for a, q in zip(alone_bps, queued_bytes, strict=True):
        _positive(alone=a, queued=q)
    out = [0.0] * len(alone_bps)
    left, free = float(capacity_bps), set(range(len(alone_bps)))
    while free:
        weight = sum(queued_bytes[i] for i in free)
        capped = {i for i in free if alone_bps[i] <= left * queued_bytes[i] / weight}
        if not capped:  # every job left takes its weighted part of what is left
            for i in free:
                out[i] = left * queued_bytes[i] / weight
            break
        for i in capped:
            out[i] = float(alone_bps[i])
            left -= alone_bps[i]
        free -= capped
    return out


def au_at_bandwidth(read_bps: float, demand_bps: float, au_cap: float = 1.0) -> float:
    """The rate bound with storage the only supply term: ``min(AU_cap, read ÷ demand)``."""
    _positive(read=read_bps, demand=demand_bps)
    _fraction(au_cap=au_cap)
    return min(au_cap, read_bps / demand_bps)


def au_moved(au_alone: float, read_alone_bps: float, read_bps: float, demand_bps: float,
             au_cap: float = 1.0) -> float:  # fmt: skip
    """The AU alone moved as the rate bound moves from the read alone to ``read_bps``: no read
    lost leaves the AU alone as it was, whatever the bound says of it."""
    ratio = au_at_bandwidth(read_bps, demand_bps, au_cap) / au_at_bandwidth(
        read_alone_bps, demand_bps, au_cap
    )
    return au_alone * min(1.0, ratio)


def au_beside(
    au_alone: float, read_alone_bps: float, other_bps: float, capacity_bps: float,
    demand_bps: float, au_cap: float = 1.0, queued: tuple[float, float] | None = None,
) -> tuple[float, float]:  # fmt: skip
    """(AU, read bandwidth) of the loader beside another job that draws on the same limit
    ``capacity_bps`` at ``other_bps`` (its rate alone, or its pace): the share rule's read
    (``share``; with ``queued``, the loader's and the other job's bytes in flight, the
    queued-bytes rule ``queue_share``), and the AU alone moved by the rate bound's ratio, as
    ``contention`` does."""
    if queued is None:
        read_d, _ = share(read_alone_bps, other_bps, capacity_bps)
    else:
        read_d = queue_share([read_alone_bps, other_bps], list(queued), capacity_bps)[0]
    return au_moved(au_alone, read_alone_bps, read_d, demand_bps, au_cap), read_d


def au_writes_first(
    au_alone: float, read_alone_bps: float, demand_bps: float, write_bps: float,
    write_max_bps: float, write_s: float, buffer_s: float, au_cap: float = 1.0,
) -> tuple[float, float]:  # fmt: skip
    """(AU during the save, the loader's read during it) where reads and writes share one
    server and the save goes first: the one-machine CephFS (one host's CPUs and disk behind
    the OSDs, ceph-fuse and both jobs).

    The basis, measured there (docs/validation/during-checkpoint.md): the save kept 71-100 %
    of its rate alone beside the loader while the loader's read fell to 4-37 % of its own,
    the two fractions summing to 0.87-1.38 in 12 of 15 rows: one server shared in time, the
    save first (likely its writers' whole files in flight at each fsync against the loader's
    two reads). Its fit there: within 3 points for a loader-bound case, within 5 in 3 of 5
    runs (5.5 in 4) for the checkpoint-bound and balanced ones. So the save keeps its rate ``write_bps`` (its pace, or the storage's whole write
    rate ``write_max_bps`` when unpaced) and takes ``write_bps ÷ write_max_bps`` of the
    server's time; the loader reads in the time left, ``read_alone·(1 − that)`` (its read
    alone taken as its ceiling), its AU moved by the rate bound as ``contention`` does; and
    for the ``write_s`` the save lasts the loader still computes on the batches it had
    prefetched (``buffer_s``: workers × prefetch batches × compute per step)."""
    _positive(read_alone=read_alone_bps, demand=demand_bps, write=write_bps,
              write_max=write_max_bps, write_s=write_s)  # fmt: skip
    _fraction(au_alone=au_alone, au_cap=au_cap)
    if buffer_s < 0:
        raise UsageError(f"contention model: buffer must be >= 0 s, got {buffer_s!r}")
    read_d = read_alone_bps * max(0.0, 1.0 - write_bps / write_max_bps)
    ratio = min(au_cap, read_d / demand_bps) / au_at_bandwidth(read_alone_bps, demand_bps, au_cap)
    return min(au_alone, au_alone * min(1.0, ratio) + buffer_s / write_s), read_d


#: The loader alone "waited for data" below this share of its ceiling (``au_cap``): its
#: workers then read back to back and its prefetch queue stood empty; at or above it they
#: kept ahead, the queue full.
KEEPS_UP = 0.95


def read_beside_probe(read_alone_bps: float, probe_idle_bps: float, probe_during_bps: float,
                      waited: bool) -> float:  # fmt: skip
    """The loader's read while the save runs, by the probe rule: the time per byte the save
    added to the probe's reads, ``1/P_during − 1/P_idle`` (the wait behind its writes, the
    server's time it took), added to the loader's own time per byte alone: ``1/R`` (its read
    alone) when it ``waited`` for data (its workers read back to back, so ``R`` is its
    reading speed), else the probe's alone ``1/P_idle`` (reads of its files at its
    concurrency, what its workers do when they fall behind). Never above that speed alone."""
    _positive(read_alone=read_alone_bps, probe_idle=probe_idle_bps, probe_during=probe_during_bps)
    base = read_alone_bps if waited else max(read_alone_bps, probe_idle_bps)
    added = max(0.0, 1.0 / probe_during_bps - 1.0 / probe_idle_bps)
    return 1.0 / (1.0 / base + added)


@dataclass(frozen=True)
class ContentionInputs:
    """One interval's loader and checkpoint: alone, and (when measured) during the write."""

    interval_s: float  # τ: one save's start to the next's
    checkpoint_bytes: float
    write_alone_bps: float  # the same save with the storage to itself
    read_alone_bps: float  # the loader's read rate with no write running
    au_alone: float
    demand_bps: float  # what the accelerators read per second at AU 1
    au_cap: float = 1.0  # the loader's own ceiling (its AU alone when storage does not limit it)
    # the during-window of a mixed run, when there is one: the measured basis
    au_during: float | None = None
    read_during_bps: float | None = None
    write_during_bps: float | None = None
    # the share rule's combined bandwidth (None: independent reads and writes)
    capacity_bps: float | None = None
    snapshot_s: float = 0.0  # the async stall per save (the host copy)
    # the probe rule (``read_beside_probe``): the read probe alone and beside the save, the
    # save's rate beside it, the compute the loader's full prefetch queue holds (every save)
    probe_idle_bps: float | None = None
    probe_during_bps: float | None = None
    probe_during_range: tuple[float, float] | None = None  # the slowest and fastest save's
    write_probe_bps: float | None = None
    buffer_s: float = 0.0

    def __post_init__(self) -> None:
        _positive(interval=self.interval_s, checkpoint_bytes=self.checkpoint_bytes,
                  write_alone=self.write_alone_bps, read_alone=self.read_alone_bps,
                  demand=self.demand_bps, read_during=self.read_during_bps,
                  write_during=self.write_during_bps, capacity=self.capacity_bps,
                  probe_idle=self.probe_idle_bps, probe_during=self.probe_during_bps,
                  write_probe=self.write_probe_bps)  # fmt: skip
        _fraction(au_alone=self.au_alone, au_cap=self.au_cap, au_during=self.au_during)
        if self.snapshot_s < 0:
            raise UsageError(f"contention model: snapshot must be >= 0 s, got {self.snapshot_s!r}")
        if not self.buffer_s >= 0:
            raise UsageError(f"contention model: buffer must be >= 0 s, got {self.buffer_s!r}")

    @property
    def measured(self) -> bool:
        return self.au_during is not None and self.write_during_bps is not None

    @property
    def waited(self) -> bool:
        """The loader alone waited for data (``KEEPS_UP``): its prefetch queue stood empty."""
        return self.au_alone < KEEPS_UP * self.au_cap

    @property
    def probed(self) -> bool:
        return self.probe_idle_bps is not None and self.probe_during_bps is not None


@dataclass(frozen=True)
class Contention:
    """The interval's AU with the write running beside the loader, and how it was found."""

    au_alone: float
    au_during: float
    au_interval: float
    read_during_bps: float | None
    write_during_bps: float
    write_s: float  # the write's time beside the loader
    overlap: float  # w ÷ τ
    basis_kind: str  # measured | probe | share | independent
    basis: str
    # the probe rule's interval: AU during and over the interval, (low, high)
    au_during_range: tuple[float, float] | None = None
    au_interval_range: tuple[float, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def contention(inp: ContentionInputs) -> Contention:
    """The AU over one interval: from the measured during-window, else the share rule."""
    if inp.measured:
        assert inp.au_during is not None and inp.write_during_bps is not None
        au_d, read_d, write_d, kind = (
            inp.au_during,
            inp.read_during_bps,
            inp.write_during_bps,
            "measured",
        )
        how = "AU, read and write rates during the save measured (the mixed run's during-window)"
    elif inp.probed:
        return _by_probe(inp)
    else:
        read_d, write_d = share(inp.read_alone_bps, inp.write_alone_bps, inp.capacity_bps)
        kind = "independent" if inp.capacity_bps is None else "share"
        au_d = au_moved(inp.au_alone, inp.read_alone_bps, read_d, inp.demand_bps, inp.au_cap)
        how = (
            "separate measurements; reads and writes limited independently (no combined "
            "bandwidth given): both keep their alone rates"
            if kind == "independent"
            else f"separate measurements; the storage's {inp.capacity_bps:.4g} B/s shared in "
            "proportion to demand (read alone, write alone), each capped by its alone rate; "
            "AU during = AU alone × bound(read during) ÷ bound(read alone), bound(b) = "
            "min(AU cap, b ÷ demand)"
        )
    w = inp.checkpoint_bytes / write_d
    au = au_over_interval(inp.au_alone, au_d, w, inp.interval_s)
    basis = _interval_basis(inp, w, "write rate during") + how
    return Contention(inp.au_alone, au_d, au, read_d, write_d, w, min(w, inp.interval_s) / inp.interval_s,
                      kind, basis)  # fmt: skip


def _interval_basis(inp: ContentionInputs, w: float, rate: str) -> str:
    """The basis's first part: the formula over the interval, ``w`` from ``rate``."""
    return (
        f"AU over the interval = (AU alone × (τ − w) + AU during × w) ÷ τ with τ "
        f"{inp.interval_s:.4g} s, w = {w:.4g} s (checkpoint bytes ÷ {rate}); "
    )


def _au_by_probe(inp: ContentionInputs, probe_during_bps: float, buffered: float,
                 w: float) -> tuple[float, float]:  # fmt: skip
    """(AU during, the loader's read during) by the probe rule at one probed read rate, with
    ``buffered`` (0 to 1) of the prefetched compute counted over the save's ``w`` seconds."""
    assert inp.probe_idle_bps is not None
    read_d = read_beside_probe(inp.read_alone_bps, inp.probe_idle_bps, probe_during_bps,
                               inp.waited)  # fmt: skip
    au_d = au_moved(inp.au_alone, inp.read_alone_bps, read_d, inp.demand_bps, inp.au_cap)
    if not inp.waited:
        au_d = min(inp.au_alone, au_d + buffered * inp.buffer_s / w)
    return au_d, read_d


def _by_probe(inp: ContentionInputs) -> Contention:
    """``contention`` by the probe rule (``read_beside_probe``): the loader's read during the
    save from the read probe (pooled over the probed saves), the save's rate the one it kept
    beside the probe; the AU alone moved by the rate bound. When the loader kept up alone its
    prefetch queue was full as the save began and drains while the save runs; what that adds
    over the save is the queue at its start less the queue at its end. On the one-machine
    CephFS the reads came back before the save's last fsync and the queue stood full again
    by its end (docs/validation/during-checkpoint.md: the step timeline of one save), so the
    point counts none of it; a save whose end still holds the reads back leaves the queue
    empty and gains all of it (``buffer_s`` of compute over the save's time). The interval:
    none of it at the slowest probed save's read, all of it at the fastest's."""
    assert inp.probe_idle_bps is not None and inp.probe_during_bps is not None
    write_d = inp.write_probe_bps or inp.write_alone_bps
    w = inp.checkpoint_bytes / write_d
    au_d, read_d = _au_by_probe(inp, inp.probe_during_bps, 0.0, w)
    slow, fast = inp.probe_during_range or (inp.probe_during_bps, inp.probe_during_bps)
    lo = min(au_d, _au_by_probe(inp, min(slow, inp.probe_during_bps), 0.0, w)[0])
    hi = max(au_d, _au_by_probe(inp, max(fast, inp.probe_during_bps), 1.0, w)[0])
    au = au_over_interval(inp.au_alone, au_d, w, inp.interval_s)
    span = tuple(au_over_interval(inp.au_alone, x, w, inp.interval_s) for x in (lo, hi))
    waited = inp.waited
    basis = (
        _interval_basis(inp, w, "the save's rate beside the read probe")
        + "separate measurements and the read probe: the loader's read during = "
        f"1 ÷ (1/{'its read alone' if waited else 'the probe alone'} + 1/probe during − "
        f"1/probe alone) = {read_d:.4g} B/s (probe {inp.probe_idle_bps:.4g} → "
        f"{inp.probe_during_bps:.4g} B/s), AU during = AU alone × bound(read during) ÷ "
        f"bound(read alone)"
        + f"; interval {lo:.3f}–{hi:.3f} (the slowest probed save's read; the fastest's"
        + ("" if waited else f" plus the {inp.buffer_s:.3g} s of compute the loader's full "
           "prefetch queue held, over the save's time")
        + ")"
    )  # fmt: skip
    return Contention(inp.au_alone, au_d, au, read_d, write_d, w,
                      min(w, inp.interval_s) / inp.interval_s, "probe", basis, (lo, hi),
                      (span[0], span[1]))  # fmt: skip


def goodput(
    c: Contention, inp: ContentionInputs, mtbf_s: float, recovery_s: float = 0.0
) -> dict[str, Any]:
    """Daly's exact goodput of the async save, and the same counting the AU the write costs."""
    stall = async_stall(inp.snapshot_s, c.write_s, inp.interval_s)
    g = goodput_exact(inp.interval_s, stall, mtbf_s, recovery_s, min(c.write_s, inp.interval_s))
    counted = g * (c.au_interval / c.au_alone) if c.au_alone > 0 else 0.0
    return {
        "goodput": g,
        "goodput_with_contention": counted,
        "stall_s": stall,
        "basis": (
            f"Daly's exact goodput (τ {inp.interval_s:.4g} s, stall {stall:.4g} s, MTBF "
            f"{mtbf_s:.4g} s, recovery {recovery_s:.4g} s, write in flight {c.write_s:.4g} s), "
            f"times AU over the interval ÷ AU alone ({c.au_interval:.4f} ÷ {c.au_alone:.4f}): "
            f"{c.basis_kind}"
        ),
    }
