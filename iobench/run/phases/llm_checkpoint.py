"""LLM checkpoints as MLPerf Storage writes them: every rank saves its shard, then reads it back.

The checkpoint is a model from ``workloads/checkpoints/`` (``model``), spread over ``ranks``
ranks (default: the model's own). Each emulated rank ``torch.save``s the files DLIO's layout
gives it (``ckpt_layout``: weights only on data-parallel rank 0 under ZeRO-1, one file per layer
with pipeline parallelism; its optimizer shard) and fsyncs them (``ckpt-save``); after the page cache is dropped
every rank ``torch.load``s them back (``ckpt-load``). With ``api = "dcp"`` (or ``"both"``) the
same shards go through ``torch.distributed.checkpoint`` (one file per rank plus ``.metadata``:
``ckpt-dcp-save``/``ckpt-dcp-load``). Reported as MLPerf reports it: bytes ÷ the slowest rank's
time, with the per-rank spread.

``scale`` writes that fraction of every rank's shard (a full llama3-70b checkpoint is 911 GiB);
full-size figures are then the checkpoint model's estimates (``iobench checkpoint``).

One process emulates its share of the ranks as threads that start together; under torchrun
the ranks are dealt to the processes (rank p of W emulates ranks p·R/W … (p+1)·R/W − 1).

The state is built before the timed region from one random pool: each tensor is a different
slice of the pool, stamped every 4 KiB, so generating data never limits the write (MLPerf users
found theirs capped by it) and no page repeats another. ``baseline`` adds
``ckpt-baseline-write``: the same bytes, the same files and writers as a plain buffered
sequential write with fsync, so the overhead of ``torch.save`` shows beside it: at memory speed
that is mostly the CRC-32 torch.save computes over every record (``crc32 = false`` turns it off,
torch 2.6 and later; training pays it unless it does the same). ``metadata``
adds small-file create/open phases whose rates the model uses for many-file checkpoints.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ...checkpoint.model import ModelSpec, RankShard, rank_shard
from ...core import cpu
from ...core.datagen import POOL_MIN, PageStamper
from ...core.errors import EngineError, UsageError
from ...core.plan import Plan
from ...engines.base import FileSpec, PhaseSpec
from ...result.measured import phase_result
from ...result.stats import WorkerStats
from ...target import drop_file_cache
from .checkpoint import (
    META_TIMED,
    _dcp_storage,
    _metadata,
    _rounds,
    dcp_step,
    round_bound,
    round_extra,
)

if TYPE_CHECKING:  # an annotation: the runner sits above
    from ..runner import PhaseRunner

POOL_BYTES = 64 << 20
BASELINE_BLOCK = 4 << 20
MAX_LOCAL_RANKS = 1024  # rank threads in one process
MAX_META_WORKERS = 32  # small-file workers of one process, whatever its rank count
COPY_BYTES = 256 << 20  # the snapshot-rate measurement (twice this in host memory)


# --------------------------------------------------------------------------------------------
# Which ranks, how big


def model_spec(params: dict[str, Any]) -> tuple[ModelSpec, int]:
    """The checkpoint's spec (resharded when ``ranks`` is set) and its dcp files per rank."""
    from ...checkpoint.spec import load_checkpoint_profile

    prof = load_checkpoint_profile(params["model"])
    spec = prof.spec
    if params["ranks"] is not None and params["ranks"] != spec.ranks:
        spec = spec.resharded(params["ranks"])
    return spec, prof.dcp_files_per_rank


def run_ranks(spec: ModelSpec, params: dict[str, Any]) -> int:
    """The ranks this run emulates: the model's, or with ``subset`` N (MLPerf's subset mode:
    ``mlpstorage --num-processes`` below the closed count) ranks 0..N−1 of the full layout,
    writing exactly those ranks' files."""
    n = params.get("subset")
    if n is None:
        return spec.ranks
    if params["ranks"] is not None:
        raise UsageError(
            "--subset and --ranks both given",
            hint="--subset N runs N ranks of the model's own layout (MLPerf's subset mode); "
            "--ranks N spreads the checkpoint evenly over N ranks: give one",
        )
    if n > spec.ranks:
        raise UsageError(f"--subset {n} exceeds the model's {spec.ranks} ranks",
                         hint=f"give --subset 1..{spec.ranks} (MLPerf: 8)")  # fmt: skip
    return n


def local_ranks(ranks: int, world: int, rank: int) -> range:
    """The model ranks process ``rank`` of ``world`` emulates."""
    if ranks < world:
        raise UsageError(
            f"the checkpoint has {ranks} ranks but torchrun started {world} processes",
            hint="start at most as many processes as ranks, or pass --ranks",
        )
    return range(rank * ranks // world, (rank + 1) * ranks // world)


def scaled(shard: RankShard, scale: float) -> RankShard:
    return shard.scaled(scale)


def shards(params: dict[str, Any], world: int = 1, rank: int = 0) -> list[RankShard]:
    """This process's ranks' shards at ``scale``."""
    spec, _ = model_spec(params)
    return _shards_of(spec, params["scale"], world, rank, run_ranks(spec, params))


def _shards_of(spec: ModelSpec, scale: float, world: int, rank: int, n: int) -> list[RankShard]:
    return [scaled(rank_shard(spec, r), scale) for r in local_ranks(n, world, rank)]


def memory_needed(total: int, extra: int = 0) -> int:
    """Host memory one process needs: its ranks' state, as much again while every rank holds
    what it loaded (MLPerf Storage does not say; dlio_benchmark issue 308), the
    snapshot-rate buffers, and ``extra``: the other buffers the run starts (``run_buffers``)."""
    return 2 * total + 2 * COPY_BYTES + extra


def baseline_block(shards: list[RankShard], tensor_size: int) -> int:
    """The plain write's block: the tensor size, at most 4 MiB, at most the largest file
    (rounded up to 4 KiB): a thousand writers of tiny files do not each hold 16 MiB."""
    largest = max((f.nbytes for s in shards for f in s.file_parts()), default=1)
    return max(4096, min(tensor_size, BASELINE_BLOCK, -(-largest // 4096) * 4096))


def run_buffers(params: dict[str, Any], shards: list[RankShard]) -> int:
    """Buffers the run allocates besides the state: every engine worker's data pool (at least
    ``datagen.POOL_MIN``, 4 blocks) for the plain write and the small-file phases, each with at
    most ``MAX_META_WORKERS`` workers."""
    out = 0
    if params["baseline"]:
        block = baseline_block(shards, params["tensor_size"])
        out += min(len(shards), MAX_META_WORKERS) * max(POOL_MIN, 4 * block)
    if params["metadata"]:
        jobs, _ = meta_workers(params["files"], len(shards))
        out += jobs * POOL_MIN
    return out


def check_memory(total: int, ranks: int, scale: float, per_host: int = 1, extra: int = 0) -> None:
    """Refuse (exit 2) when ``per_host`` processes of ``total`` bytes each (plus ``extra`` of
    buffers) exceed host memory; the hint gives the largest scale that fits."""
    mem = cpu.physical_memory()
    need = per_host * memory_needed(total, extra)
    if mem and need > mem:
        room = mem / per_host - 2 * COPY_BYTES - extra
        fit = scale * room / (2 * total) if room > 0 else 0.0
        where = f"{per_host} processes × " if per_host > 1 else ""
        raise UsageError(
            f"{where}{ranks} ranks' shards at scale {scale:g} need about {need >> 20} MiB of "
            f"host memory (state + loaded copy) but this host has {mem >> 20} MiB",
            hint=f"pass --scale {fit:.2g} or less (or spread the ranks over more hosts)",
        )


def meta_workers(files_per_rank: int, ranks: int) -> tuple[int, int]:
    """(workers, files per worker) of the small-file phases: the ``ranks``' files dealt to at
    most ``MAX_META_WORKERS`` workers, never one worker (a process, past the CPU count) per
    rank; the total is at least ``files_per_rank × ranks``."""
    jobs = max(1, min(ranks, MAX_META_WORKERS))
    return jobs, -(-files_per_rank * ranks // jobs)


def _too_many_local(n: int) -> None:
    raise UsageError(
        f"{n} ranks would run as threads of one process (at most {MAX_LOCAL_RANKS})",
        hint="pass --ranks N (the same checkpoint over fewer ranks) or start more "
        "processes with torchrun",
    )


def plan(params: dict[str, Any]) -> Plan:
    # under torchrun each process emulates its share of the ranks: memory is checked for the
    # largest share times the processes on this host; space for the whole scaled checkpoint
    # (on shared storage every process writes to the same filesystem)
    from ...distributed import launched_world

    world = launched_world()
    spec, _ = model_spec(params)
    n_run = run_ranks(spec, params)
    if -(-n_run // world) > MAX_LOCAL_RANKS:  # before every rank's shard is computed
        _too_many_local(-(-n_run // world))
    everyone = _shards_of(spec, params["scale"], 1, 0, n_run)
    total_all = sum(s.total_bytes for s in everyone)
    if total_all == 0:
        raise UsageError(
            f"scale {params['scale']:g} leaves nothing to write",
            hint="raise --scale (the fraction of each rank's shard written)",
        )
    share = max(
        (everyone[r.start : r.stop] for r in (local_ranks(n_run, world, p)
                                              for p in range(world))),
        key=lambda ss: sum(s.total_bytes for s in ss),
    )  # fmt: skip
    if len(share) > MAX_LOCAL_RANKS:
        _too_many_local(len(share))
    total = sum(s.total_bytes for s in share)
    if not params["crc32"]:
        _crc32_options()  # refused before anything is written where torch lacks the switch
    per_host = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) if world > 1 else 1
    check_memory(total, len(share), params["scale"], per_host, run_buffers(params, share))
    mine = share
    p = Plan()
    n = len(mine)
    apis = ("torch", "dcp") if params["api"] == "both" else (params["api"],)
    if params["metadata"]:
        jobs, per = meta_workers(params["files"], n)
        k = per * jobs
        small, many = 4096 * k, f"{k} files"
        p.add("ckpt-create", "create", small, f"{many} of {n} ranks, {jobs} workers", ops=k)
        for name, op, moved in META_TIMED:  # time-based passes, as checkpoint-smallfile's
            p.add(name, op, small if moved else 0, many, params.get("time"), ops=k)
        p.add("ckpt-delete", "delete", 0, f"{many}, one pass", ops=k)
    if params["baseline"]:
        p.add("ckpt-baseline-write", "write", total, f"{n} writers, buffered + fsync",
              params.get("time"))  # fmt: skip
    for api in apis:
        pre = "ckpt" if api == "torch" else "ckpt-dcp"
        how = "torch.save" if api == "torch" else "torch.distributed.checkpoint"
        p.add(f"{pre}-save", "ckpt_save", total, f"{n} ranks via {how}",
              round_bound(params, total, "ckpt_save"))  # fmt: skip
        p.add(f"{pre}-load", "ckpt_load", total, f"{n} ranks",
              round_bound(params, total, "ckpt_load"))  # fmt: skip
    p.space_bytes = total_all
    p.built_bytes = total  # every rank's state, built before its first save
    p.imports = ("torch", "torch.distributed.checkpoint") if "dcp" in apis else ("torch",)
    if params["metadata"] and not params["direct"]:  # the read's files dropped from the cache
        p.drops = k
    return p


# --------------------------------------------------------------------------------------------
# The state: fast, incompressible, never repeating


class _Pool:
    """One random pool; every tensor is a different slice of it with a unique stamp."""

    def __init__(self, seed: int, size: int = POOL_BYTES):
        self.data = np.frombuffer(np.random.default_rng(seed).bytes(size), dtype=np.uint8)
        self.counter = 0

    def tensor(self, n: int, tag: int) -> Any:
        import torch

        out = torch.empty(n, dtype=torch.uint8)
        view = out.numpy()
        size = len(self.data)
        self.counter += 1
        pos, off = 0, (self.counter * 7919 * 4096) % size
        while pos < n:
            k = min(n - pos, size - off)
            view[pos : pos + k] = self.data[off : off + k]
            pos += k
            off = 0
        # a stamp every 4 KiB: no two pages alike, so deduplication finds nothing to share
        PageStamper(view, n).stamp(n, tag, self.counter << 32)
        return out


def make_rank_state(shard: RankShard, tensor_size: int, pool: _Pool) -> list[dict[str, Any]]:
    """One state dict per file the rank saves (``shard.file_parts()``: weights, per layer
    where DLIO saves them so, then optimizer state), of uint8 tensors of the files' sizes."""
    import torch

    def fill(total: int, names: tuple[str, ...], kind: int) -> dict[str, Any]:
        sd: dict[str, Any] = {}
        left, k = total, 0
        while left > 0:
            n = min(tensor_size, left)
            sd[f"layer{k}.{names[k % len(names)]}"] = pool.tensor(n, (shard.rank << 8) | kind)
            left -= n
            k += 1
        return sd

    out = []
    for f in shard.file_parts():
        if f.kind == "model":
            out.append(fill(f.nbytes, ("weight",), 1))
        else:
            sd = fill(f.nbytes, ("exp_avg", "exp_avg_sq", "master"), 2)
            sd["step"] = torch.tensor([shard.rank])
            out.append(sd)
    return out


# --------------------------------------------------------------------------------------------
# Run


def run(params: dict[str, Any], runner: PhaseRunner) -> None:
    if getattr(runner.target, "kind", "posix") != "posix":
        raise UsageError(
            "llm checkpoints run on a directory target", hint="give a mount point, not a URL"
        )
    mine = shards(params, runner.world, runner.rank)
    if params["metadata"]:
        jobs, per = meta_workers(params["files"], len(mine))
        meta = {
            "files": per, "file_sizes": [4096], "jobs": jobs,
            "seed": params["seed"], "direct": params["direct"], "verify": False,
            "fsync": "file", "time": params.get("time"),
        }  # fmt: skip
        _metadata(meta, runner)
    if params["baseline"]:  # before the state exists: its writers need memory of their own
        _baseline(params, runner, mine)
    pool = _Pool(params["seed"] + runner.rank)
    states = [make_rank_state(s, params["tensor_size"], pool) for s in mine]
    copy_bps = _copy_rate(pool) or None
    if params["api"] in ("torch", "both"):
        _torch(params, runner, mine, states, copy_bps)
    if params["api"] in ("dcp", "both"):
        _dcp(params, runner, mine, states, copy_bps)


def _copy_rate(pool: _Pool) -> float:
    """Bytes/s of a snapshot into a preallocated host buffer (asynchronous checkpointing
    reuses its staging memory): ``COPY_BYTES`` in 64 MiB tensors, whatever the scale (small
    tensors would copy from the CPU caches), the second of two passes (the first faults the
    buffer in). A device-to-host copy when CUDA is present, a host memory copy otherwise."""
    import torch

    cuda = torch.cuda.is_available()
    n = COPY_BYTES // (64 << 20)
    src = [pool.tensor(64 << 20, 0xC0FFEE) for _ in range(n)]
    if cuda:  # pragma: no cover - needs a GPU
        src = [t.cuda() for t in src]
    dst = [torch.empty(64 << 20, dtype=torch.uint8, pin_memory=cuda) for _ in range(n)]
    dt = 0.0
    for _ in range(2):
        if cuda:  # pragma: no cover
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for d, t in zip(dst, src, strict=True):
            d.copy_(t, non_blocking=cuda)
        if cuda:  # pragma: no cover
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
    del src, dst
    return COPY_BYTES / dt if dt > 0 else 0.0


def _rels(sub: str, shard: RankShard) -> list[str]:
    """The rank's files relative to the run directory, DLIO's names where the model has an
    architecture."""
    return [f"{sub}/{f.name}" for f in shard.file_parts()]


def _ranks(
    n: int, fn: Any, runner: PhaseRunner, params: dict[str, Any], between: Any = None
) -> tuple[list[WorkerStats], dict[str, Any], dict[str, list[float]]]:
    """``checkpoint._rounds`` (the phase's rounds, each every rank's call), and the client's
    own CPU over it (``extra.client_cpu``, as the engines record it): the share that says
    whether the client, not the storage, was the limit."""
    cpu0 = cpu.sample()
    stats, rounds = _rounds(n, fn, runner, params, between)
    return stats, cpu.usage(cpu0, cpu.sample()), rounds


def _record(
    runner: PhaseRunner, name: str, op: str,
    ran: tuple[list[WorkerStats], dict[str, Any], dict[str, list[float]]], cache: str,
    api: str, params: dict[str, Any], copy_bps: float | None, mine: list[RankShard],
) -> None:  # fmt: skip
    stats, client_cpu, rounds = ran
    res = phase_result(
        name, op, stats, concurrency=len(stats), block_size=0, cache=cache,
        params={
            "model": params["model"], "scale": params["scale"], "api": api,
            "ranks_local": len(mine), "first_rank": mine[0].rank if mine else 0,
            "crc32": params["crc32"],
        },
    )  # fmt: skip
    round_extra(res, rounds)
    res.extra["client_cpu"] = client_cpu
    res.extra["rank_seconds"] = [round(w.end - w.start, 6) for w in stats]
    res.extra["host_memory_bytes"] = sum(s.total_bytes for s in mine)
    if copy_bps and op == "ckpt_save":
        res.extra["copy_bps"] = copy_bps
        res.extra["copy_basis"] = (
            "device-to-host copy (CUDA)" if _cuda() else "host memory copy (no accelerator)"
        )
    runner.record(res)
    runner.stop.check()


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _crc32_options() -> Any:
    """torch.serialization.set_crc32_options (torch 2.6 and later)."""
    import torch.serialization as ser

    fn = getattr(ser, "set_crc32_options", None)
    if fn is None:
        raise UsageError(
            "crc32 = false needs torch 2.6 or later (torch.serialization.set_crc32_options)",
            hint="upgrade torch, or leave crc32 at its default (true)",
        )
    return fn


def _torch(
    params: dict[str, Any], runner: PhaseRunner, mine: list[RankShard], states: list, copy_bps: Any
) -> None:
    import torch

    runner.mkdirs(["llm-ckpt"])
    rels = [_rels("llm-ckpt", s) for s in mine]
    paths = [[runner.held(r) for r in rs] for rs in rels]  # through the held descriptor

    def save(i: int, st: WorkerStats) -> None:
        for rel, path, sd in zip(rels[i], paths[i], states[i], strict=True):
            t0 = time.perf_counter_ns()
            with runner.create_file(rel) as f:
                torch.save(sd, f)
                f.flush()
                os.fsync(f.fileno())
            t1 = time.perf_counter_ns()
            st.add(os.path.getsize(path), t1 / 1e9, t1 - t0)
            st.files += 1

    if params["crc32"]:
        ran = _ranks(len(mine), save, runner, params)
    else:  # a process-wide switch: set for the timed saves only, then torch's default again
        crc = _crc32_options()
        before = torch.serialization.get_crc32_options()
        crc(False)
        try:
            ran = _ranks(len(mine), save, runner, params)
        finally:
            crc(before)
    _record(runner, "ckpt-save", "ckpt_save", ran, "buffered", "torch.save", params,
            copy_bps, mine)  # fmt: skip
    written = [p for pair in paths for p in pair if os.path.exists(p)]

    def drop() -> None:
        for p in written:
            drop_file_cache(p)

    drop()
    cache = runner.cache_state(False)

    def load(i: int, st: WorkerStats) -> None:
        for rel, path, sd in zip(rels[i], paths[i], states[i], strict=True):
            if not os.path.exists(path):
                continue
            t0 = time.perf_counter_ns()
            obj = torch.load(path, map_location="cpu", weights_only=True)
            t1 = time.perf_counter_ns()
            if set(obj) != set(sd):
                shown = os.path.join(runner.run_dir, rel)
                raise EngineError(f"checkpoint file {shown} read back with different keys")
            del obj
            st.add(os.path.getsize(path), t1 / 1e9, t1 - t0)
            st.files += 1

    ran = _ranks(len(mine), load, runner, params, between=drop)
    _record(runner, "ckpt-load", "ckpt_load", ran, cache, "torch.load", params, None, mine)
    for p in written:
        os.unlink(p)


def _dcp(
    params: dict[str, Any], runner: PhaseRunner, mine: list[RankShard], states: list, copy_bps: Any
) -> None:

    import torch
    import torch.distributed.checkpoint as dcp

    storage = _dcp_storage(runner, max(len(mine), 1))
    if storage is None:  # pragma: no cover - URL targets are refused above
        return
    make_writer, make_reader, listing, _, where = storage
    flat = {
        f"rank{s.rank}.{f.name}.{k}": v
        for s, sds in zip(mine, states, strict=True)
        for f, sd in zip(s.file_parts(), sds, strict=True)
        for k, v in sd.items()
    }

    save = dcp_step(lambda: dcp.save(flat, storage_writer=make_writer(), no_dist=True), listing)
    ran = _ranks(1, save, runner, params)
    api = "torch.distributed.checkpoint"
    _record(runner, "ckpt-dcp-save", "ckpt_save", ran, "buffered", api, params, copy_bps, mine)

    def drop() -> None:
        for name, _ in listing():
            drop_file_cache(name)

    drop()
    into = {k: torch.empty_like(v) for k, v in flat.items()}

    load = dcp_step(lambda: dcp.load(into, storage_reader=make_reader(), no_dist=True), listing)
    ran = _ranks(1, load, runner, params, between=drop)
    _record(runner, "ckpt-dcp-load", "ckpt_load", ran, runner.cache_state(False), api, params,
            None, mine)  # fmt: skip
    key = next(iter(flat))
    if not torch.equal(into[key], flat[key]):
        raise EngineError(f"torch.distributed.checkpoint in {where} read back different data")
    for name, _ in listing():
        os.unlink(name)


def _baseline(params: dict[str, Any], runner: PhaseRunner, mine: list[RankShard]) -> None:
    """A plain sequential write of the same files by the same writers (threads, as the ranks
    here are; at most ``MAX_META_WORKERS``, the files dealt to them): buffered, fsync per
    file, blocks of at most 4 MiB (each writer's pool is 4 blocks, at least 8 MiB)."""
    runner.mkdirs(["llm-base"])
    files: list[FileSpec] = []
    # the files in rounds (every rank's first file, then every rank's second, ...), dealt
    # round-robin to the writers: with as many writers as ranks and equal file counts each
    # writer gets its rank's files; otherwise the same files, spread as evenly as it goes
    parts = [s.file_parts() for s in mine]
    for k in range(max((len(p) for p in parts), default=0)):
        for s, p in zip(mine, parts, strict=True):
            if k < len(p):
                files.append(FileSpec(f"llm-base/r{s.rank}-{p[k].name}.dat", p[k].nbytes))
    spec = PhaseSpec(
        "ckpt-baseline-write", "write", tuple(files), jobs=min(len(mine), MAX_META_WORKERS),
        block_size=baseline_block(mine, params["tensor_size"]), direct=False, fsync="file",
        seed=params["seed"], time_s=params.get("time"),  # with steady: ends once steady
        params={"sweep": "base", "baseline_for": "ckpt-save", "workers": "threads"},
    )  # fmt: skip
    runner.execute(spec)
    for f in files:
        try:
            os.unlink(runner.held(f.path))
        except FileNotFoundError:
            pass
