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

import errno
import io
import math
import os
import posixpath
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ...core.errors import EngineError, UsageError, quoted
from ...core.plan import FLOOR_READ_BPS, FLOOR_WRITE_BPS, Plan
from ...engines.base import FileSpec, PhaseSpec
from ...result.measured import phase_result
from ...result.stats import WorkerStats
from ...result.steady import rounds_done
from ...target import drop_file_cache

if TYPE_CHECKING:  # an annotation: the runner sits above
    from ..runner import PhaseRunner


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


def round_bound(params: dict[str, Any], nbytes: int, op: str) -> float | None:
    """A phase of rounds' time bound, as its planned limit (``plan.phase_time_bound``): every
    round at the floor rate, or its ``time`` limit and one round more; None for one round
    (its bytes' bound)."""
    most = int(params.get("rounds") or 1)
    if most <= 1:
        return None
    one = nbytes / (FLOOR_WRITE_BPS if op == "ckpt_save" else FLOOR_READ_BPS)
    limit = params.get("time")
    bound = most * one if not limit else min(most * one, float(limit) + one)
    return math.ceil(bound * 10) / 10


#: The small-file phases that go over their files again and again while ``time`` lasts
#: (``worker.meta_passes``; with ``steady``, until steady): (name, op, reads the files' bytes).
#: ``ckpt-create`` and ``ckpt-delete`` make and remove each file once: one pass.
META_TIMED = (("ckpt-stat", "stat", False), ("ckpt-open_read", "open_read", True))


def _passes(params: dict[str, Any]) -> str:
    if not params.get("time"):
        return "one pass"
    return "passes until steady or the limit" if params.get("steady") else "passes for its time"


def plan(params: dict[str, Any]) -> Plan:
    p = Plan()
    if params["metadata"]:
        sizes = params["file_sizes"] or [4096]
        total = int(np.mean(sizes) * params["files"] * params["jobs"])
        n = params["files"] * params["jobs"]
        p.add("ckpt-create", "create", total, f"{n} files", ops=n)
        for name, op, moved in META_TIMED:
            p.add(name, op, total if moved else 0, f"{n} files, {_passes(params)}",
                  params.get("time"), ops=n)  # fmt: skip
        p.add("ckpt-delete", "delete", 0, f"{n} files, one pass", ops=n)
    else:
        total = 0
    ck = params["checkpoint_size"]
    if ck:
        _check_memory(ck)  # at planning: bad input, before anything is written
        save, load = round_bound(params, ck, "ckpt_save"), round_bound(params, ck, "ckpt_load")
        p.add("ckpt-save", "ckpt_save", ck, f"{params['shards']} shards via torch.save", save)
        p.add("ckpt-load", "ckpt_load", ck, "torch.load", load)
        if params["dcp"]:
            p.add("ckpt-dcp-save", "ckpt_save", ck, "torch.distributed.checkpoint", save)
            p.add("ckpt-dcp-load", "ckpt_load", ck, "torch.distributed.checkpoint", load)
    p.space_bytes = max(total, ck * (2 if params["dcp"] else 1))
    p.built_bytes = ck  # the state dict, random bytes made before the first save
    if ck:
        p.imports = ("torch", "torch.distributed.checkpoint") if params["dcp"] else ("torch",)
    if params["metadata"] and not params["direct"]:  # the read's files dropped from the cache
        p.drops = params["files"] * params["jobs"]
    # small files and their folders, or the shards (and a DCP checkpoint's files), at most
    small = params["files"] * params["jobs"] * 2 if params["metadata"] else 0
    p.inodes = 4 + max(small, (params["shards"] + 2) * (2 if params["dcp"] else 1) if ck else 0)
    return p


def run(params: dict[str, Any], runner: PhaseRunner) -> None:
    if params["metadata"]:
        _metadata(params, runner)
    if params["checkpoint_size"]:
        state = make_state_dict(
            params["checkpoint_size"], params["shards"], params["tensor_size"], params["seed"]
        )
        _torch_save_load(params, runner, state)
        if params["dcp"]:
            _dcp_save_load(params, runner, state)


def _metadata(params: dict[str, Any], runner: PhaseRunner) -> None:
    files = _small_files(params, runner.rank)
    runner.mkdirs(sorted({os.path.dirname(f.path) for f in files}))
    direct = runner.direct(params["direct"])
    common = dict(
        jobs=params["jobs"], block_size=0, seed=params["seed"], latency_per="file",
        verify=params["verify"],
    )  # fmt: skip
    fsync = "file" if params["fsync"] != "never" else "never"
    runner.execute(PhaseSpec("ckpt-create", "create", files, fsync=fsync, **common))
    # time-based (META_TIMED): passes over the files until steady or ``time``; else once
    timed = params.get("time")
    runner.execute(PhaseSpec("ckpt-stat", "stat", files, time_s=timed, **common))
    # whole-file reads: O_DIRECT takes any file size (the last block is read whole, the
    # kernel returns the file's bytes), so small files of any size are read direct
    runner.execute(
        PhaseSpec(
            "ckpt-open_read",
            "open_read",
            files,
            direct=direct,
            time_s=timed,
            drop_cache_after=bool(timed) and not direct,
            **common,
        )  # fmt: skip
    )  # buffered, pass after pass: each file dropped after its read (untimed), as a dataset's
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


def _parallel(n: int, fn: Any, runner: PhaseRunner) -> list[WorkerStats]:
    """Run ``fn(i, stats)`` for i in 0..n-1 in threads that start together."""
    runner.coord.before_phase(None)  # many ranks: every rank's checkpoint phase starts together
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
        raise EngineError(_describe_failure(errors[0])) from errors[0]
    return stats  # the caller records the figures, then honours a stop request


def _rounds(
    n: int, fn: Any, runner: PhaseRunner, params: dict[str, Any], between: Any = None
) -> tuple[list[WorkerStats], dict[str, list[float]]]:
    """``_parallel``, round after round: every thread runs ``fn(i, stats)`` once a round, and
    the next round starts when all have finished, until ``steady.rounds_done`` (``rounds``
    ran, ``time`` passed, or with ``steady`` the per-round rates are steady). ``between()``
    runs before each later round (a load's cache drop), outside the rounds' clock. Returns
    the stats over every round and ``{"seconds": [...], "bps": [...]}`` per round."""
    most, limit, until = int(params.get("rounds") or 1), params.get("time"), params.get("steady")
    seen: list[Any] = [None] * n
    log: dict[str, list[float]] = {"seconds": [], "bps": []}
    mark: dict[str, Any] = {"t0": None, "bytes": 0, "done": False}

    def close() -> None:  # the barrier's action: one thread, once every thread ended the round
        now = time.perf_counter()
        t0 = mark["t0"] if mark["t0"] is not None else min(st.start for st in seen)
        moved = sum(st.bytes for st in seen)
        dt = max(now - t0, 1e-9)
        log["seconds"].append(round(dt, 6))
        log["bps"].append((moved - mark["bytes"]) / dt)
        mark["bytes"] = moved
        stop = runner.stop.is_set() if hasattr(runner.stop, "is_set") else False
        mark["done"] = stop or rounds_done(log["seconds"], log["bps"], most, limit, bool(until))
        if not mark["done"] and between is not None:
            between()
        mark["t0"] = time.perf_counter()

    barrier = threading.Barrier(n, action=close)

    def body(i: int, st: WorkerStats) -> None:
        seen[i] = st
        while True:
            try:
                fn(i, st)
            except BaseException:
                barrier.abort()  # the other threads stop waiting; this error is the one told
                raise
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                return
            if mark["done"]:
                return

    return _parallel(n, body, runner), log


def _describe_failure(e: BaseException) -> str:
    """One short line for a failed save/load, however deep torch wrapped the cause."""
    text = str(e)
    if isinstance(e, OSError) and e.errno == errno.ENOSPC or "No space left on device" in text:
        where = f" writing {e.filename}" if isinstance(e, OSError) and e.filename else ""
        return f"checkpoint failed: disk full (ENOSPC: No space left on device){where}"
    if isinstance(e, OSError):
        where = f" ({e.filename})" if e.filename else ""
        return f"checkpoint I/O failed: {e.strerror or text}{where}"
    # torch.distributed.checkpoint wraps each rank's traceback: keep its last line
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and ln.strip() != "^"]
    last = lines[-1] if lines else type(e).__name__
    last = quoted(last)
    return f"checkpoint failed: {type(e).__name__}: {last}"


def round_extra(res: Any, rounds: dict[str, list[float]] | None) -> None:
    """A phase of rounds' figures: every round's seconds and rate (``extra.rounds``, judged by
    ``steady.rounds_steady``) and the median round's seconds as the seconds per checkpoint."""
    if not rounds or not rounds["seconds"]:
        res.extra["seconds_per_checkpoint"] = res.elapsed_s
        return
    res.extra["rounds"] = rounds
    res.extra["seconds_per_checkpoint"] = float(np.median(rounds["seconds"]))


def _record(
    runner: PhaseRunner, name: str, op: str, ran: Any, params: dict, cache: str, note: str
) -> None:
    stats, rounds = ran
    res = phase_result(
        name, op, stats, concurrency=len(stats), block_size=0, cache=cache,
        params={"shards": len(stats), "checkpoint_size": params["checkpoint_size"], "api": note},
    )  # fmt: skip
    store = _store(runner)
    if store is not None and op == "ckpt_save":
        res.warnings.append(
            f"fsync is unsupported on {runner.target.fs_type}:// (nothing to fsync): a shard is "
            "durable when its upload completes, inside the timed region"
        )
    round_extra(res, rounds)
    res.extra["host_memory_bytes"] = params["checkpoint_size"]
    runner.record(res)
    runner.stop.check()  # after recording: a completed save is kept when a signal came


def _store(runner: PhaseRunner) -> tuple[Any, str] | None:
    """(fsspec filesystem, run-dir path) when the target is a URL (an object store), else None."""
    target = getattr(runner, "target", None)
    if target is None or getattr(target, "kind", "posix") != "fsspec":
        return None
    from ...target.storage import open_fs

    return open_fs(runner.run_dir, target.storage_options)


def _torch_save_load(
    params: dict[str, Any], runner: PhaseRunner, state: list[dict[str, Any]]
) -> None:
    store = _store(runner)
    if store is not None:
        _torch_save_load_url(params, runner, state, *store)
        return
    import torch

    runner.mkdirs(["ckpt-torch"])
    rels = [f"ckpt-torch/shard{runner.rank}-{i}.pt" for i in range(len(state))]
    shown = [os.path.join(runner.run_dir, r) for r in rels]  # what messages name
    paths = [runner.held(r) for r in rels]  # through the run directory's descriptor

    def save(i: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        with runner.create_file(rels[i]) as f:
            torch.save(state[i], f)
            f.flush()
            os.fsync(f.fileno())
        t1 = time.perf_counter_ns()
        st.add(os.path.getsize(paths[i]), t1 / 1e9, t1 - t0)
        st.files += 1

    ran = _rounds(len(state), save, runner, params)
    _record(runner, "ckpt-save", "ckpt_save", ran, params, "buffered", "torch.save")
    cache = "dropped"

    def drop() -> None:
        for p in paths:
            drop_file_cache(p)

    drop()
    if runner.cache_state(False) != "dropped":
        cache = "client-cache" if runner.cache_state(False) == "client-cache" else "buffered"

    def load(i: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        obj = torch.load(paths[i], map_location="cpu", weights_only=True)
        t1 = time.perf_counter_ns()
        if set(obj) != set(state[i]):
            raise EngineError(f"checkpoint shard {shown[i]} read back with different keys")
        st.add(os.path.getsize(paths[i]), t1 / 1e9, t1 - t0)
        st.files += 1

    ran = _rounds(len(state), load, runner, params, between=drop)
    _record(runner, "ckpt-load", "ckpt_load", ran, params, cache, "torch.load")
    for p in paths:
        os.unlink(p)


def _torch_save_load_url(
    params: dict[str, Any], runner: PhaseRunner, state: list[dict[str, Any]], fs: Any, base: str
) -> None:
    """torch.save into ``fs.open(path, "wb")`` (a streamed upload) and torch.load from one GET
    of each shard, on an object store: no fsync, no page cache (cache "none")."""
    import torch

    paths = [
        posixpath.join(base, "ckpt-torch", f"shard{runner.rank}-{i}.pt") for i in range(len(state))
    ]
    sizes = [0] * len(state)

    def save(i: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        with fs.open(paths[i], "wb") as f:
            torch.save(state[i], f)
            sizes[i] = f.tell()
        t1 = time.perf_counter_ns()  # after close: the upload has completed
        st.add(sizes[i], t1 / 1e9, t1 - t0)
        st.files += 1

    ran = _rounds(len(state), save, runner, params)
    _record(runner, "ckpt-save", "ckpt_save", ran, params, "none", "torch.save")

    def load(i: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        data = fs.cat_file(paths[i])
        obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
        t1 = time.perf_counter_ns()
        if set(obj) != set(state[i]):
            raise EngineError(f"checkpoint shard {paths[i]} read back with different keys")
        st.add(len(data), t1 / 1e9, t1 - t0)
        st.files += 1

    ran = _rounds(len(state), load, runner, params)
    _record(runner, "ckpt-load", "ckpt_load", ran, params, "none", "torch.load")
    for p in paths:
        fs.rm_file(p)


def _dcp_storage(runner: PhaseRunner, threads: int) -> tuple[Any, Any, Any, str, str] | None:
    """(make writer, make reader, list (path, size) of the checkpoint, cache, where) for DCP:
    FileSystemWriter/Reader on a directory, FsspecWriter/Reader on a URL target; None (with a
    warning) when this torch has no fsspec storage."""
    import torch.distributed.checkpoint as dcp

    store = _store(runner)
    if store is None:
        where = os.path.join(runner.run_dir, f"ckpt-dcp-{runner.rank}")
        ckpt_dir = runner.held(f"ckpt-dcp-{runner.rank}")  # DCP takes a path: the held one

        def listing() -> list[tuple[str, int]]:
            return [
                (os.path.join(ckpt_dir, n), os.path.getsize(os.path.join(ckpt_dir, n)))
                for n in os.listdir(ckpt_dir)
            ]

        return (
            lambda: dcp.FileSystemWriter(ckpt_dir, thread_count=threads, sync_files=True),
            lambda: dcp.FileSystemReader(ckpt_dir),
            listing, "", where,
        )  # fmt: skip
    try:
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader, FsspecWriter
    except ImportError:
        runner.warn(
            "this torch has no fsspec storage for torch.distributed.checkpoint: DCP phases skipped"
        )
        return None
    fs, base = store
    path = posixpath.join(base, f"ckpt-dcp-{runner.rank}")
    url = fs.unstrip_protocol(path)
    opts = runner.target.storage_options

    def url_listing() -> list[tuple[str, int]]:
        fs.invalidate_cache(path)
        return [(p, int(i["size"])) for p, i in fs.find(path, detail=True).items()]

    # sync_files would fall back to os.sync() of the whole host: meaningless for a store
    return (
        lambda: FsspecWriter(url, thread_count=threads, sync_files=False, **opts),
        lambda: FsspecReader(url, **opts),
        url_listing, "none", url,
    )  # fmt: skip


def dcp_step(call: Any, listing: Any) -> Any:
    """A worker that times one torch.distributed.checkpoint ``call`` (a save or a load) and
    counts the files and bytes ``listing()`` finds after it: how every DCP phase is measured."""

    def step(_: int, st: WorkerStats) -> None:
        t0 = time.perf_counter_ns()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "assuming the intent is to save in a single process"
            call()
        t1 = time.perf_counter_ns()
        files = listing()
        st.add(sum(n for _, n in files), t1 / 1e9, t1 - t0)
        st.files += len(files)

    return step


def _dcp_save_load(
    params: dict[str, Any], runner: PhaseRunner, state: list[dict[str, Any]]
) -> None:
    import torch
    import torch.distributed.checkpoint as dcp

    storage = _dcp_storage(runner, len(state))
    if storage is None:
        return
    make_writer, make_reader, listing, cache, where = storage
    flat = {f"shard{i}.{k}": v for i, sd in enumerate(state) for k, v in sd.items()}

    # no_dist: each rank (and each single process) writes its own checkpoint
    save = dcp_step(lambda: dcp.save(flat, storage_writer=make_writer(), no_dist=True), listing)
    ran = _rounds(1, save, runner, params)
    api = "torch.distributed.checkpoint"
    _record(runner, "ckpt-dcp-save", "ckpt_save", ran, params, cache or "buffered", api)

    def drop() -> None:
        if not cache:
            for name, _ in listing():
                drop_file_cache(name)

    drop()
    target = {k: torch.empty_like(v) for k, v in flat.items()}

    load = dcp_step(lambda: dcp.load(target, storage_reader=make_reader(), no_dist=True), listing)
    ran = _rounds(1, load, runner, params, between=drop)
    cache = cache or runner.cache_state(False)
    _record(runner, "ckpt-dcp-load", "ckpt_load", ran, params, cache, api)
    key = next(iter(flat))
    if not torch.equal(target[key], flat[key]):
        raise EngineError(f"torch.distributed.checkpoint in {where} read back different data")
