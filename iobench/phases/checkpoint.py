"""Checkpoint I/O: small-file IOPS and metadata, and real sharded checkpoints.

Small files (mdtest-like, one directory per emulated rank): ``ckpt-create`` (create, write,
fsync, close), ``ckpt-stat``, ``ckpt-open_read`` and ``ckpt-delete``, each a rate per
operation with latency percentiles.

Sharded checkpoints of a synthetic state dict of ``checkpoint_size`` bytes over ``shards``
files: ``ckpt-save`` (``torch.save`` + fsync per shard, shards written in parallel as ranks
would) and ``ckpt-load`` (``torch.load`` after the page cache was dropped), then the same
with ``torch.distributed.checkpoint`` (the layout FSDP jobs write): ``ckpt-dcp-save`` and
``ckpt-dcp-load``. Reported as GiB/s and seconds per checkpoint (the slowest shard's time).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from typing import Any

import numpy as np

from ..engines.base import FileSpec, PhaseSpec
from ..errors import EngineError, UsageError
from ..plan import Plan
from ..spec import Param
from ..stats import WorkerStats, phase_result
from ..target import drop_file_cache

PARAMS: dict[str, Param] = {
    "files": Param("count", 256, "small files per rank directory", minimum=1),
    "file_sizes": Param("sizes", [4096, 65536, 1 << 20], "small-file sizes, drawn in turn"),
    "metadata": Param("bool", True, "run the small-file create/stat/read/delete phases"),
    "checkpoint_size": Param("size", 256 << 20, "total bytes of the synthetic state dict", minimum=0),
    "shards": Param("count", 4, "checkpoint shards (one per emulated rank)", minimum=1),
    "dcp": Param("bool", True, "also save/load with torch.distributed.checkpoint"),
    "tensor_size": Param("size", 16 << 20, "bytes per tensor in the state dict", minimum=4096),
}


def _small_files(params: dict[str, Any], rank: int = 0) -> tuple[FileSpec, ...]:
    sizes = params["file_sizes"] or [4096]
    rng = np.random.default_rng(params["seed"])
    jobs = params["jobs"]
    out = []
    for i in range(params["files"]):
        for r in range(jobs):
            size = sizes[int(rng.integers(len(sizes)))]
            out.append(FileSpec(f"ckpt/n{rank}-r{r}/f{i:06d}", size))
    return tuple(out)


def plan(params: dict[str, Any]) -> Plan:
    p = Plan()
    if params["metadata"]:
        sizes = params["file_sizes"] or [4096]
        total = int(np.mean(sizes) * params["files"] * params["jobs"])
        n = params["files"] * params["jobs"]
        p.add("ckpt-create", "create", total, f"{n} files")
        p.add("ckpt-stat", "stat", 0, f"{n} files")
        p.add("ckpt-open_read", "open_read", total, f"{n} files")
        p.add("ckpt-delete", "delete", 0, f"{n} files")
    else:
        total = 0
    ck = params["checkpoint_size"]
    if ck:
        p.add("ckpt-save", "ckpt_save", ck, f"{params['shards']} shards via torch.save")
        p.add("ckpt-load", "ckpt_load", ck, "torch.load")
        if params["dcp"]:
            p.add("ckpt-dcp-save", "ckpt_save", ck, "torch.distributed.checkpoint")
            p.add("ckpt-dcp-load", "ckpt_load", ck, "torch.distributed.checkpoint")
    p.space_bytes = max(total, ck * (2 if params["dcp"] else 1))
    return p


def run(params: dict[str, Any], runner: Any) -> None:
    if params["metadata"]:
        _metadata(params, runner)
    if params["checkpoint_size"]:
        _check_memory(params["checkpoint_size"])
        state = make_state_dict(params["checkpoint_size"], params["shards"], params["tensor_size"], params["seed"])
        _torch_save_load(params, runner, state)
        if params["dcp"]:
            _dcp_save_load(params, runner, state)


def _metadata(params: dict[str, Any], runner: Any) -> None:
    files = _small_files(params, runner.rank)
    runner.mkdirs(sorted({os.path.dirname(f.path) for f in files}))
    direct = runner.direct(params["direct"])
    common = dict(jobs=params["jobs"], block_size=0, seed=params["seed"], latency_per="file")
    fsync = "file" if params["fsync"] != "never" else "never"
    runner.execute(PhaseSpec("ckpt-create", "create", files, fsync=fsync, **common))
    runner.execute(PhaseSpec("ckpt-stat", "stat", files, **common))
    aligned = all(f.size % 4096 == 0 for f in files)
    runner.execute(PhaseSpec("ckpt-open_read", "open_read", files, direct=direct and aligned, **common))
    runner.execute(PhaseSpec("ckpt-delete", "delete", files, **common))


def _check_memory(size: int) -> None:
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return
    if size * 2 > mem:
        raise UsageError(
            f"checkpoint_size needs about {size * 2 >> 20} MiB of host memory (state dict + "
            f"load buffer) but this host has {mem >> 20} MiB",
            hint="lower checkpoint_size with --set",
        )


def make_state_dict(total: int, shards: int, tensor_size: int, seed: int) -> list[dict[str, Any]]:
    """Per shard, a dict of uint8 tensors of random (incompressible) bytes; built untimed."""
    import torch

    gen = np.random.default_rng(seed)
    per_shard = max(total // shards, 1)
    out = []
    for s in range(shards):
        sd: dict[str, Any] = {}
        left, k = per_shard, 0
        while left > 0:
            n = min(tensor_size, left)
            arr = np.frombuffer(gen.bytes(n), dtype=np.uint8)
            sd[f"layer{k}.weight"] = torch.from_numpy(arr.copy())
            left -= n
            k += 1
        sd["step"] = torch.tensor([s])
        out.append(sd)
    return out


def _parallel(n: int, fn: Any, runner: Any) -> list[WorkerStats]:
    """Run ``fn(i, stats)`` for i in 0..n-1 in threads that start together."""
    origin = time.perf_counter()
    stats = [WorkerStats(origin=origin) for _ in range(n)]
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def body(i: int) -> None:
        try:
            barrier.wait()
            st = stats[i]
            st.start = time.perf_counter()
            fn(i, st)
            st.end = time.perf_counter()
        except BaseException as e:  # noqa: BLE001 - reported after join
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        while t.is_alive():
            t.join(0.2)
    if errors:
        e = errors[0]
        if isinstance(e, OSError):
            raise EngineError(f"checkpoint I/O failed: {e.strerror or e} ({e.filename})") from e
        raise EngineError(f"checkpoint failed: {e}") from e
    runner.stop.check()
    return stats


def _fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _record(runner: Any, name: str, op: str, stats: list[WorkerStats], params: dict, cache: str, note: str) -> None:
    res = phase_result(
        name, op, stats, concurrency=len(stats), block_size=0, cache=cache,
        params={"shards": len(stats), "checkpoint_size": params["checkpoint_size"], "api": note},
    )  # fmt: skip
    res.extra["seconds_per_checkpoint"] = res.elapsed_s
    res.extra["host_memory_bytes"] = params["checkpoint_size"]
    runner.record(res)


def _torch_save_load(params: dict[str, Any], runner: Any, state: list[dict[str, Any]]) -> None:
    import torch

    runner.mkdirs(["ckpt-torch"])
    paths = [os.path.join(runner.run_dir, "ckpt-torch", f"shard{runner.rank}-{i}.pt") for i in range(len(state))]

    def save(i: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        with open(paths[i], "wb") as f:
            torch.save(state[i], f)
            f.flush()
            os.fsync(f.fileno())
        t1 = time.perf_counter_ns()
        st.add(os.path.getsize(paths[i]), t1 / 1e9, t1 - t0)
        st.files += 1

    stats = _parallel(len(state), save, runner)
    _record(runner, "ckpt-save", "ckpt_save", stats, params, "buffered", "torch.save")
    cache = "dropped"
    for p in paths:
        drop_file_cache(p)
    if runner.cache_state(False) != "dropped":
        cache = "buffered"

    def load(i: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        obj = torch.load(paths[i], map_location="cpu", weights_only=True)
        t1 = time.perf_counter_ns()
        if set(obj) != set(state[i]):
            raise EngineError(f"checkpoint shard {paths[i]} read back with different keys")
        st.add(os.path.getsize(paths[i]), t1 / 1e9, t1 - t0)
        st.files += 1

    stats = _parallel(len(state), load, runner)
    _record(runner, "ckpt-load", "ckpt_load", stats, params, cache, "torch.load")
    for p in paths:
        os.unlink(p)


def _dcp_save_load(params: dict[str, Any], runner: Any, state: list[dict[str, Any]]) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    flat = {f"shard{i}.{k}": v for i, sd in enumerate(state) for k, v in sd.items()}
    ckpt_dir = os.path.join(runner.run_dir, f"ckpt-dcp-{runner.rank}")
    threads = len(state)

    def save(_: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
            writer = dcp.FileSystemWriter(ckpt_dir, thread_count=threads, sync_files=True)
            dcp.save(flat, storage_writer=writer)
        t1 = time.perf_counter_ns()
        st.add(_dir_bytes(ckpt_dir), t1 / 1e9, t1 - t0)
        st.files += len(os.listdir(ckpt_dir))

    stats = _parallel(1, save, runner)
    _record(runner, "ckpt-dcp-save", "ckpt_save", stats, params, "buffered", "torch.distributed.checkpoint")
    for name in os.listdir(ckpt_dir):
        drop_file_cache(os.path.join(ckpt_dir, name))
    target = {k: torch.empty_like(v) for k, v in flat.items()}

    def load(_: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            dcp.load(target, storage_reader=dcp.FileSystemReader(ckpt_dir))
        t1 = time.perf_counter_ns()
        st.add(_dir_bytes(ckpt_dir), t1 / 1e9, t1 - t0)
        st.files += len(os.listdir(ckpt_dir))

    stats = _parallel(1, load, runner)
    cache = runner.cache_state(False)
    _record(runner, "ckpt-dcp-load", "ckpt_load", stats, params, cache, "torch.distributed.checkpoint")
    key = next(iter(flat))
    if not torch.equal(target[key], flat[key]):
        raise EngineError(f"torch.distributed.checkpoint in {ckpt_dir} read back different data")


def _dir_bytes(d: str) -> int:
    return sum(os.path.getsize(os.path.join(d, n)) for n in os.listdir(d))
