"""The training loop of one emulated accelerator, its configuration and result, and the
calibration figures the model takes.

The loop (per emulated accelerator, one process each when ``gpus`` > 1): time the wait for the
next batch (load), then the emulated compute (a measured ``sleep``, or a calibrated CUDA matmul
burn), then a barrier across ranks (all-reduce). AU per rank and epoch =
Σ compute over steps after the first ÷ (wall − the first step's duration); the run's AU is the
mean over ranks, then over epochs. Every rank reads its own shard of the samples each epoch
(DistributedSampler-like, reshuffled per epoch with a seed) and does the same number of steps:
the remainder is dropped, so no rank waits at a barrier the others never reach.
"""

from __future__ import annotations

import os
import time
import warnings
from array import array
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..core.cpu import loader_pids, processes_cpu_s
from ..core.errors import DistributedError
from ..core.units import format_bytes
from ..result.stats import Histogram
from ..result.timeseries import STEP_POINTS_MAX, STEP_POINTS_TOTAL, step_series
from ..target import StopFlag
from .dataset import DatasetIndex
from .torchdata import (
    BatchPool,
    DecodeEmulation,
    RankBatchSampler,
    SampleDataset,
    _worker_init,
    collate_samples,
)


class _GpuBurn:
    """Emulated compute on a CUDA device: fp16 matmuls, their count calibrated to the time."""

    def __init__(self, rank: int):
        import torch

        self.torch = torch
        self.device = torch.device("cuda", rank % torch.cuda.device_count())
        torch.cuda.set_device(self.device)
        n = 4096
        self.a = torch.randn(n, n, device=self.device, dtype=torch.float16)
        self.b = torch.randn(n, n, device=self.device, dtype=torch.float16)
        self.c = torch.empty_like(self.a)
        self._run(10)
        t0 = time.perf_counter()
        self._run(50)
        self.per_iter = max((time.perf_counter() - t0) / 50, 1e-7)

    def _run(self, iters: int) -> None:
        for _ in range(iters):
            self.torch.mm(self.a, self.b, out=self.c)
        self.torch.cuda.synchronize(self.device)

    def __call__(self, seconds: float) -> None:
        iters = max(1, round(seconds / self.per_iter))
        t0 = time.perf_counter()
        self._run(iters)
        # follow clock changes: the measured time counts as compute either way
        self.per_iter = 0.7 * self.per_iter + 0.3 * (time.perf_counter() - t0) / iters


@dataclass(frozen=True)
class LoopConfig:
    """One training-loop run: the dataset, the loader and the emulated accelerators."""

    index: DatasetIndex
    mode: str  # direct | dropped | cached | buffered
    batch_size: int
    workers: int
    prefetch: int
    compute_s: float
    compute: str = "sleep"  # sleep | gpu
    gpus: int = 1
    epochs: int = 1
    steps: int | None = None  # per epoch and rank (None: every full batch)
    seed: int = 1
    #: the sampler's (rank, ranks) when not (this rank, gpus): a rank that cannot see the
    #: others' files shuffles its own as a world of one
    shard: tuple[int, int] | None = None
    #: the profiled pipeline's decode, spent per sample in the workers (a profile's decode_s)
    decode: DecodeEmulation = DecodeEmulation()
    #: keep every timed step's clock readings (``timeline`` in the rank's figures): the
    #: windows of a run beside a background checkpoint write (``loader.during``)
    timeline: bool = False
    #: rank 0's progress shared with the background checkpoint writer (``StepClock``)
    clock: Any = None
    #: the rank whose steps ``clock`` counts: 0 on one client (its loop processes share the
    #: clock), every torchrun rank its own (each beside its own writer)
    clock_rank: int = 0

    def sampler(self, rank: int) -> RankBatchSampler:
        r, world = self.shard or (rank, self.gpus)
        return RankBatchSampler(
            self.index.n_files, self.index.samples_per_file, self.batch_size, r, world,
            self.workers, self.seed, self.steps,
        )  # fmt: skip

    @property
    def steps_per_epoch(self) -> int:
        return self.sampler(0).steps

    @property
    def pooled(self) -> bool:
        """Batches go through a ``BatchPool``: the synthetic loader's own hand-off, not a
        replayed pipeline's. A profile's decode emulation replays what a measured pipeline
        spent, and that pipeline handed each batch on in fresh shared memory (torch's
        default collate) or one tensor a sample; the replay keeps its hand-off too."""
        return not self.decode.active

    @property
    def local_loops(self) -> int:
        """Loop processes on this host: the emulated accelerators, or torchrun's local ranks."""
        try:
            local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        except ValueError:
            local = 1
        return max(self.gpus, local, 1)

    @property
    def sample_bytes_max(self) -> int:
        """The largest sample a worker hands on: as planned, as its format decodes it (the
        format's ``decoded_size``: a JPEG's pixels) or as the replayed decode widens it. A
        batch pool's slots are sized from it."""
        from .. import formats

        planned = max((max(s) for s in self.index.sizes if s), default=0)
        decoded = getattr(formats.get_format(self.index.fmt), "decoded_size", None)
        if decoded is not None and planned:
            planned = max(planned, int(decoded(planned)))
        return max(planned, self.decode.size)


@dataclass(frozen=True)
class LoopResult:
    """What a training-loop run measured (rates summed over ranks, AU averaged)."""

    gpus: int
    workers: int
    batch_size: int
    epochs: int
    steps: int  # per epoch and rank
    au: float
    au_per_epoch: list[float]
    samples_per_s: float
    bytes_per_s: float
    wait: Histogram
    compute_s: float  # measured compute per step (mean)
    step_s: float  # wall per step after the first (mean)
    main_cpu_s: float  # main-thread CPU per step (mean): the loader's per-step overhead
    read_s_per_sample: float  # worker seconds reading, per sample
    decode_s_per_sample: float  # worker seconds decoding and collating, per sample
    ranks: list[dict[str, Any]] = field(default_factory=list)
    decode_cpu_s_per_sample: float = 0.0  # worker thread CPU decoding (emulation included)


def _rank_loop(
    cfg: LoopConfig, rank: int, barrier: Any, stop: StopFlag | None, device: int | None = None
) -> dict[str, Any]:
    """One rank's training loop; returns its per-epoch figures (plain data, picklable).

    ``barrier.wait()`` ends every step (and starts every epoch); a barrier with
    ``checks_stop`` carries the stop flag itself (many hosts stop at the same step).
    ``device``: the CUDA device index for ``--compute gpu`` (default: ``rank``).
    """
    with warnings.catch_warnings():
        # torch warns on stderr when workers outnumber cores; the run records it once instead
        warnings.filterwarnings(
            "ignore", message="This DataLoader will create", category=UserWarning
        )
        out = _rank_loop_body(cfg, rank, barrier, stop, rank if device is None else device)
    # the steps, bounded, for the report's plots (result.timeseries.step_series)
    steps = np.frombuffer(out["timeline"]["steps"], dtype=np.float64).reshape(-1, 5)
    world = cfg.shard[1] if cfg.shard else cfg.gpus
    limit = min(STEP_POINTS_MAX, max(STEP_POINTS_TOTAL // max(world, 1), 50))
    if (series := step_series(steps, limit)) is not None:
        out["step_series"] = series
    if not cfg.timeline:
        del out["timeline"]
    return out


class StepClock:
    """Rank 0's progress, readable from another process (the background checkpoint writer,
    ``loader.ckpt_writer``): when its timed steps began (perf_counter at the end of its first
    step, 0 until then) and how many steps it has ended, every epoch's counted."""

    def __init__(self) -> None:
        import multiprocessing as mp

        self.shared = mp.get_context("fork").RawArray("d", 2)

    def tick(self, first: bool, t: float) -> None:
        if first:
            self.shared[0] = t
        self.shared[1] += 1

    @property
    def started(self) -> float:
        return float(self.shared[0])

    @property
    def steps(self) -> int:
        return int(self.shared[1])


def _ticker(cfg: LoopConfig, rank: int) -> Callable[[bool, float], None]:
    """What each step tells ``cfg.clock``: ``cfg.clock_rank``'s steps; nothing elsewhere."""
    if cfg.clock is None or rank != cfg.clock_rank:
        return lambda first, t: None
    return cfg.clock.tick


def _rank_loop_body(  # noqa: PLR0915 - the measured loop: one frame, no calls between clocks
    cfg: LoopConfig, rank: int, barrier: Any, stop: StopFlag | None, device: int
) -> dict[str, Any]:
    from torch.utils.data import DataLoader

    sampler = cfg.sampler(rank)
    check_stop = stop is not None and not getattr(barrier, "checks_stop", False)
    w = cfg.workers
    pool = BatchPool.for_loop(
        w, cfg.prefetch, cfg.batch_size, cfg.sample_bytes_max, cfg.local_loops
    ) if cfg.pooled else None  # fmt: skip
    loader: DataLoader[Any] = DataLoader(
        SampleDataset(cfg.index, cfg.mode, cfg.decode),  # type: ignore[arg-type]  # map-style by duck typing
        batch_sampler=sampler, num_workers=w,
        collate_fn=partial(collate_samples, per_sample=cfg.decode.per_sample, pool=pool), pin_memory=False, prefetch_factor=cfg.prefetch if w else None,
        persistent_workers=w > 0, worker_init_fn=_worker_init if w else None,
        # the pool's mapping is inherited: forked workers, whatever the default start method
        multiprocessing_context="fork" if pool is not None else None,
    )  # fmt: skip
    give_back: Callable[[Any], bool] = pool.give_back if pool is not None else lambda b: False
    compute: Callable[[float], None] = time.sleep
    if cfg.compute == "gpu":
        compute = _GpuBurn(device)
    epochs = []
    it = None
    interrupted = False
    # per timed step: perf_counter at the wait's start and end, compute end, step end, bytes
    # (kept whole with cfg.timeline; else only as the bounded step_series)
    steps_t = array("d")
    tick = _ticker(cfg, rank)
    spans: list[tuple[float, float]] = []
    try:
        for epoch in range(cfg.epochs):
            sampler.set_epoch(epoch)
            if barrier is not None:
                barrier.wait()
            t_start = time.perf_counter()
            it = iter(loader)
            wait = Histogram()
            first_end = t_start
            cpu0: float | None = None
            compute_sum = cpu_sum = read_sum = decode_sum = decode_cpu = 0.0
            samples = nbytes = pooled = 0
            for k in range(sampler.steps):
                if check_stop and stop is not None:
                    stop.check()
                t0 = time.perf_counter()
                c0 = time.thread_time()
                data, sizes, times = next(it)
                t1 = time.perf_counter()
                if cfg.compute_s > 0:
                    compute(cfg.compute_s)
                t2 = time.perf_counter()
                if barrier is not None:
                    barrier.wait()
                t3 = time.perf_counter()
                c3 = time.thread_time()
                pooled += give_back(data)
                tick(k == 0 and epoch == 0, t3)
                if k == 0:
                    first_end = t3  # DLIO leaves the first step out
                    cpu0 = processes_cpu_s(loader_pids(it))
                    continue
                wait.record(int((t1 - t0) * 1e9))
                if cfg.compute_s > 0:
                    compute_sum += t2 - t1
                cpu_sum += c3 - c0
                samples += len(sizes)
                nbytes += times[3]  # as stored: a decoded sample may be larger
                read_sum += times[0]
                decode_sum += times[1]
                decode_cpu += times[2]
                steps_t.extend((t0, t1, t2, t3, float(times[3])))
                del data
            t_end = time.perf_counter()
            cpu1 = processes_cpu_s(loader_pids(it))
            spans.append((first_end, t_end))
            timed = max(t_end - first_end, 1e-9)
            n = max(sampler.steps - 1, 0)
            epochs.append(
                {
                    "epoch": epoch,
                    "steps": sampler.steps,
                    "au": compute_sum / timed if n else 0.0,
                    "wall_s": t_end - t_start,
                    "timed_s": timed,
                    "first_step_s": first_end - t_start,
                    "samples": samples,
                    "bytes": nbytes,
                    "compute_s": compute_sum,
                    "main_cpu_s": cpu_sum,
                    "read_s": read_sum,
                    "decode_s": decode_sum,
                    "decode_cpu_s": decode_cpu,
                    # main process and workers over the timed steps (None: not known)
                    "loader_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0,
                    "timed_steps": n,
                    # batches handed on through the pool (the rest: fresh shared memory)
                    "pooled_batches": pooled,
                    "wait": wait.to_dict(),
                }
            )
    except Exception as e:
        if stop is None or not stop.is_set() or isinstance(e, DistributedError):
            raise  # another rank failing is that, even when a stop came with it
        # Interrupted (workers quit on the signal too). Raised outside this block: a second
        # signal can land inside DataLoader's iterator constructor, and the traceback would
        # keep that half-built iterator (and its worker processes) alive for as long as the
        # error is kept; leaving the block frees it, and its finaliser stops the workers.
        interrupted = True
    finally:
        if pool is not None:
            pool.close()
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
        del it, loader
    if interrupted and stop is not None:
        stop.check()
    handoff = {"kind": handoff_kind(cfg, pool), "slots": pool.workers * pool.slots if pool else 0,
               "slot_bytes": pool.slot_bytes if pool else 0}  # fmt: skip
    return {"rank": rank, "epochs": epochs, "handoff": handoff,
            "timeline": {"steps": steps_t, "spans": spans}}  # fmt: skip


def handoff_block(res: LoopResult) -> dict[str, Any]:
    """How the workers handed their batches to the loop (rank 0's; every rank's is alike), how
    many went that way, and what it means for the figures."""
    h: dict[str, Any] = dict((res.ranks[0].get("handoff") if res.ranks else None) or {})
    kind = h.setdefault("kind", "unknown")
    eps = [ep for r in res.ranks for ep in r.get("epochs", ())]
    h["batches"] = sum(ep["steps"] for ep in eps)
    h["pooled_batches"] = sum(ep.get("pooled_batches", 0) for ep in eps)
    if kind == "pool" and h["batches"] and not h["pooled_batches"]:
        kind = h["kind"] = "shared memory"  # no batch fitted a slot: none went through it
        basis = ("each batch in fresh shared memory, as torch's default collate hands it on "
                 f"(no batch fitted the pool's slots of {format_bytes(h['slot_bytes'])})")  # fmt: skip
    elif kind == "pool":
        rest = h["batches"] - h["pooled_batches"]
        basis = (
            f"each worker's batches written into reused shared-memory slots ({h['slots']} of "
            f"{format_bytes(h['slot_bytes'])}, made once before the workers forked); the loop "
            "takes a slot's number and hands it back after its step, so no batch is faulted "
            "into fresh memory (what torch's default collate pays, a cost of the host, not "
            "the storage)"
            + (f"; {rest} batch(es) larger than a slot went into fresh shared memory" if rest else "")
        )  # fmt: skip
    elif kind == "shared memory":
        basis = ("each batch in fresh shared memory, as torch's default collate hands it on "
                 "(a replayed pipeline's hand-off, or a pool too large for the memory)")  # fmt: skip
    elif kind == "per sample":
        basis = ("one tensor a sample, each through fresh shared memory, as the replayed "
                 "pipeline handed its decoded samples on")  # fmt: skip
    else:
        basis = "no workers: each batch collated in the loop's own process"
    h["basis"] = basis
    return h


def ranks_block(res: LoopResult) -> list[dict[str, Any]]:
    """Every rank's epochs, each with its load-wait summary (the result's ``loader.ranks``)."""
    return [
        {
            "rank": r["rank"],
            **({"host": r["host"]} if "host" in r else {}),
            **({"step_series": r["step_series"]} if "step_series" in r else {}),
            "epochs": [
                {
                    **_without(ep, "wait"),
                    "load_wait_s": wait_summary(Histogram.from_dict(ep["wait"])),
                }
                for ep in r["epochs"]
            ],
        }
        for r in res.ranks
    ]


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def handoff_kind(cfg: LoopConfig, pool: BatchPool | None) -> str:
    """How a rank's batches reach its loop: "pool" (``BatchPool``), "shared memory" (fresh
    a batch, as torch's default collate), "per sample" (one tensor a sample) or "in
    process" (no workers)."""
    if cfg.workers <= 0:
        return "in process"
    if cfg.decode.per_sample:
        return "per sample"
    return "pool" if pool is not None else "shared memory"


def _last_line(e: BaseException) -> str:
    """An error as one line: torch re-raises a worker's error with its whole traceback."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else type(e).__name__


def wait_summary(hist: Histogram) -> dict[str, Any]:
    """The load-wait statistics of one set of samples (the steps after each epoch's first):
    mean, min, p50, p99 and max from the same histogram, and how many steps they cover (a
    p99 of fewer than 100 steps is their maximum)."""
    s = hist.summary_s()
    if not s:
        return {"steps": 0}
    return {**{k: s[k] for k in ("mean", "min", "p50", "p99", "max")}, "steps": hist.count}


@dataclass(frozen=True)
class Calibration:
    """The loader's own CPU costs, measured on cached data (no storage in the way)."""

    step_s: float  # wall per step at compute 0: the loader's ceiling
    overhead_s: float  # main-loop time per step beside compute, when data is ready
    decode_s_per_sample: float  # worker decode + collate per sample (paced run)
    read_s_per_sample: float  # worker read per sample from the page cache (paced run)
    samples_per_s: float  # at compute 0
    steps: int
    files: int
    sleep_s: float  # the compute of the run that measured overhead_s
    sleep_overshoot_s: float = 0.0  # how much longer than asked a sleep lasted (mean)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def mean(cls, calibrations: Sequence[Calibration]) -> Calibration:
        """Every rank's calibration averaged (a many-client run's loader costs)."""
        cs = list(calibrations)
        if len(cs) == 1:
            return cs[0]
        d: dict[str, Any] = {k: float(np.mean([getattr(c, k) for c in cs])) for k in asdict(cs[0])}
        for k in ("steps", "files"):
            d[k] = int(min(getattr(c, k) for c in cs))
        return cls(**d)
