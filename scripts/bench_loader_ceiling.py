#!/usr/bin/env python
"""The loader's ceiling: iobench's loaders against a plain DataLoader on the same files.

For each configuration (storage × sample size × format × workers × batch) the same files are
read, second epoch, by (a) a plain ``torch.utils.data.DataLoader`` doing the same per-sample
work a training job would (``np.fromfile`` / ``np.load`` / ``tarfile`` / ``pyarrow``, the
default collate), (b) ``iobench loader DS --existing`` and (c) the synthetic loader
(``iobench loader TARGET --profile P``) over the dataset it writes itself, with (d) fio's
buffered 1 MiB reads of the same files as the memory-speed reference. The loaders run in
interleaved rounds (default 5), each its own process, one at a time, the order rotated each
round, and the table gives the medians and each loader's ratio to its plain counterpart.
Every loader's figure covers every epoch but the first (the page cache warm), each less its
first step, with as many epochs as give MIN_STEPS timed steps or more: its samples over the
time they took (what iobench's result records; the plain loader is timed the same way), as
MiB/s of sample payload (samples/s × sample size: the formats' framing not counted), and the
CPU seconds of its processes (main and workers, ``/proc`` schedstat and the reaped workers'
rusage) in those windows per sample, the figure a busy host changes least.

Storage: ``tmpfs`` (a private tmpfs mounted for the bench, named ``ceiling-PID``, unmounted in
a ``finally``; needs root, else /dev/shm) and ``disk`` (under /var/tmp: O_DIRECT for the
synthetic loader and its plain counterpart, buffered with each file's pages dropped for
``--existing`` and its plain counterpart, as each loader reads by default; on tmpfs too,
where the drop holds nothing, so both make the same calls). Format ``npy``
(one ``np.save`` array per file, the issue's case) has no synthetic loader; ``raw`` has no
``--existing`` reader.

    .venv/bin/python scripts/bench_loader_ceiling.py [--quick] [--rounds 5] [--baseline DIR]

``--baseline DIR``: also run (b) and (c) with the iobench package found in DIR (an export of
an older commit), interleaved in the same rounds: the measured effect of a change.
``--ranks N``: (a) and (b)/(c) under ``torchrun --nproc_per_node=N`` (the plain loader with a
DistributedSampler); ``--gpus N``: (c) with ``--gpus N`` on one host against N plain loaders
started at once.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KIB, MIB = 1 << 10, 1 << 20
SIZES = {"112KiB": 112 * KIB, "4MiB": 4 * MIB}
FORMATS = ("raw", "npz", "tar", "parquet", "npy")
SYNTHETIC = {"raw", "npz", "tar", "parquet"}  # the synthetic loader writes these
EXISTING = {"npz", "tar", "parquet", "npy"}  # --existing reads these


# ----------------------------------------------------------------------------- plain loader
def _read_direct(path: str) -> bytes:
    """The file read whole with O_DIRECT into an aligned buffer (what a direct reader does)."""
    import mmap

    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        size = os.fstat(fd).st_size
        buf = mmap.mmap(-1, max(4096, -(-size // 4096) * 4096))
        got = 0
        while got < size:
            n = os.preadv(fd, [memoryview(buf)[got:]], got)
            if n <= 0:
                break
            got += n
        return buf[:got]
    finally:
        os.close(fd)


def _drop(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def plain_sample(path: str, fmt: str, mode: str):
    """One sample as a training job's Dataset reads it: the format's own library on the path
    (or, ``mode`` direct, on the bytes an O_DIRECT read gave); ``mode`` dropped: its pages
    dropped after."""
    import io

    import numpy as np

    src = io.BytesIO(_read_direct(path)) if mode == "direct" else path
    if fmt == "raw":
        out = (np.frombuffer(src.getvalue(), np.uint8).copy() if isinstance(src, io.BytesIO)
               else np.fromfile(path, np.uint8))  # fmt: skip
    elif fmt == "npy":
        out = np.load(src)
    elif fmt == "npz":
        with np.load(src) as z:
            out = {k: z[k] for k in z.files}
    elif fmt == "tar":
        import tarfile

        with tarfile.open(fileobj=src) if isinstance(src, io.BytesIO) else tarfile.open(path) as t:
            out = [np.frombuffer(t.extractfile(m).read(), np.uint8) for m in t if m.isfile()][0]
    else:  # parquet
        import pyarrow.parquet as pq

        col = pq.read_table(src, columns=["data"]).column(0)
        out = np.frombuffer(col[0].as_buffer(), np.uint8).copy()
    if mode == "dropped":
        _drop(path)
    return out


class PlainFiles:
    """A map-style Dataset, one sample per file (``plain_sample``)."""

    def __init__(self, files: list[str], fmt: str, mode: str):
        self.files, self.fmt, self.mode = files, fmt, mode

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        return plain_sample(self.files[i], self.fmt, self.mode)


def plain_child(spec: dict) -> dict:
    """(a): a plain DataLoader over ``spec['files']`` (a DistributedSampler under torchrun);
    its second epoch's samples after the first batch and their seconds (all ranks')."""
    import torch
    from torch.utils.data import DataLoader

    from iobench.core.cpu import loader_pids, processes_cpu_s

    ds = PlainFiles(spec["files"], spec["fmt"], spec["mode"])
    ranks = int(os.environ.get("WORLD_SIZE", "1"))
    sampler = token = None
    if ranks > 1:
        import torch.distributed as dist
        from torch.utils.data.distributed import DistributedSampler

        dist.init_process_group("gloo")
        token = torch.zeros(1)
        sampler = DistributedSampler(ds, shuffle=True, seed=1, drop_last=True)
    w = spec["workers"]
    dl = DataLoader(ds, batch_size=spec["batch"], shuffle=sampler is None, sampler=sampler,
                    num_workers=w, drop_last=True, prefetch_factor=2 if w else None,
                    persistent_workers=spec.get("persistent", False) and w > 0)  # fmt: skip
    torch.manual_seed(1)
    eps = []
    for epoch in range(spec.get("epochs", 2)):
        if sampler is not None:
            sampler.set_epoch(epoch)
        first_end = t_end = time.perf_counter()
        samples = steps = 0
        it = iter(dl)
        cpu0 = None
        for k, batch in enumerate(it):
            if token is not None:  # DDP's gradient all-reduce ends each step (iobench's barrier)
                dist.all_reduce(token)
            t_end = time.perf_counter()
            if k == 0:
                first_end = t_end
                cpu0 = processes_cpu_s(loader_pids(it))  # as iobench's loops read it
                continue
            steps += 1
            samples += len(next(iter(batch.values())) if isinstance(batch, dict) else batch)
        cpu1 = processes_cpu_s(loader_pids(it))
        eps.append({"samples": samples, "timed_s": max(t_end - first_end, 1e-9), "steps": steps,
                    "loader_cpu_s": None if cpu0 is None or cpu1 is None else cpu1 - cpu0})  # fmt: skip
    out: dict = {"epochs": eps}
    if ranks > 1:
        import torch.distributed as dist

        every: list = [None] * ranks
        dist.all_gather_object(every, eps)
        dist.destroy_process_group()
        out = {"epochs": [_rank_sum([e[i] for e in every]) for i in range(len(eps))]}
    return out


# ----------------------------------------------------------------------------- the runs
#: A loader's figures over its timed epochs: (samples/s, CPU seconds per sample or None).
Fig = tuple[float, float | None]
#: Timed steps each loader's figure covers at least: epochs are added (each after the
#: first: its first step left out) until the timed epochs hold this many, or MIN_BYTES of
#: samples (batches of 64 × 4 MiB: 8 steps of 256 MiB, each long enough to time alone).
MIN_STEPS = 24
MIN_BYTES = 2 << 30


def _rank_sum(eps: list[dict]) -> dict:
    """One epoch over every rank: samples and CPU summed, the slowest rank's seconds."""
    cpus = [e.get("loader_cpu_s") for e in eps]
    return {"samples": sum(e["samples"] for e in eps), "timed_s": max(e["timed_s"] for e in eps),
            "loader_cpu_s": None if None in cpus else sum(cpus)}  # fmt: skip


def _fig(epochs: list[dict]) -> Fig:
    """(samples/s, CPU s per sample) over every epoch but the first (the page cache warm, the
    workers started): the samples after each epoch's first step over the seconds they took;
    the CPU of the loader's processes (main and workers) in those seconds over the samples."""
    timed = epochs[1:]
    n = sum(e["samples"] for e in timed)
    cpus = [e.get("loader_cpu_s") for e in timed]
    rate = n / max(sum(e["timed_s"] for e in timed), 1e-9)
    return rate, (None if None in cpus or not n else sum(cpus) / n)


def epochs_for(files: int, batch: int, size: int) -> int:
    """Epochs such that the timed ones (all but the first) hold MIN_STEPS steps or more, or
    MIN_BYTES of samples of ``size`` bytes."""
    per = max(files // batch - 1, 1)
    need = min(MIN_STEPS, -(-MIN_BYTES // (batch * size)))
    return 1 + -(-need // per)


def _env(code: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["PYTHONPATH"] = f"{code}{os.pathsep}{REPO / 'scripts'}"
    return env


def _launcher(ranks: int) -> list[str]:
    if ranks <= 1:
        return [sys.executable]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={ranks}"]  # fmt: skip


def run_plain(files: list[str], fmt: str, mode: str, workers: int, batch: int, ranks: int,
              gpus: int, work: Path, epochs: int = 2, persistent: bool = False) -> Fig:  # fmt: skip
    """(a) in its own process; under torchrun with ``ranks`` (or ``gpus``: the synthetic
    loader's ``--gpus`` runs one process per accelerator on this host, so the plain loader
    runs as many ranks), a DistributedSampler and an all-reduce ending each step, as DDP."""
    spec = work / "plain.json"
    spec.write_text(json.dumps({"files": files, "fmt": fmt, "mode": mode, "workers": workers,
                                "batch": batch, "epochs": epochs, "persistent": persistent}))  # fmt: skip
    me = str(Path(__file__).resolve())
    cmd = [*_launcher(max(ranks, gpus)), me, "--plain-child", str(spec)]
    proc = subprocess.run(cmd, env=_env(REPO), capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"plain loader failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return _fig(json.loads(proc.stdout.strip().splitlines()[-1])["epochs"])


def _iobench(code: Path, args: list[str], out: Path, ranks: int) -> dict:
    cmd = [*_launcher(ranks), "-m", "iobench", "loader", *args, "--output", str(out),
           "--no-history", "-q"]  # fmt: skip
    # run from ``code``: ``-m`` puts the working directory first on the path
    proc = subprocess.run(cmd, cwd=code, env=_env(code), capture_output=True, text=True)
    if proc.returncode not in (0, 1):  # 1: the AU below the profile's minimum (compute 0)
        raise SystemExit(f"iobench loader failed ({proc.returncode}): {proc.stderr[-2000:]}")
    res = json.loads((out / "result.json").read_text())
    shutil.rmtree(out, ignore_errors=True)
    return res


def run_existing(code: Path, root: str, workers: int, batch: int, ranks: int, work: Path,
                 epochs: int = 2) -> Fig:  # fmt: skip
    res = _iobench(code, [root, "--existing", "--workers", str(workers), "--epochs", str(epochs),
                          "--set", f"batch_size={batch}", "--set", "compute_s=0"],
                   work / "out-existing", ranks)  # fmt: skip
    return _fig(res["loader"]["existing"]["epochs"])  # one client: --existing runs no ranks


def profile_toml(fmt: str, size: int, files: int, workers: int, batch: int, epochs: int = 2) -> str:
    return (f'description = "bench_loader_ceiling"\nformat = "{fmt}"\nsample_size = {size}\n'
            f"sample_size_sd = 0\nsamples_per_file = 1\nfiles = {files}\nbatch_size = {batch}\n"
            f"compute_s = 0\nworkers = {workers}\nprefetch = 2\nau_min = 0\nepochs = {epochs}\n")  # fmt: skip


def run_synthetic(code: Path, target: str, prof: Path, direct: bool, ranks: int, gpus: int,
                  work: Path, keep: bool = False) -> Fig:  # fmt: skip
    args = [target, "--profile", str(prof), "--direct" if direct else "--buffered"]
    if gpus > 1:
        args += ["--gpus", str(gpus)]
    if keep:
        args.append("--keep")
    res = _iobench(code, args, work / "out-synthetic", ranks)
    ranks_eps = [r["epochs"] for r in res["loader"]["ranks"]]
    return _fig([_rank_sum([eps[i] for eps in ranks_eps]) for i in range(len(ranks_eps[0]))])


def run_fio(files: list[str], jobs: int, work: Path, where: str) -> float | None:
    """(d): fio, ``jobs`` jobs of buffered reads over the files under ``where`` (1 MiB, or 16 KiB for files
    under 1 MiB: fio skips a file smaller than its block), their second pass."""
    if shutil.which("fio") is None:
        return None
    bs = "1M" if min(os.path.getsize(f) for f in files) >= MIB else "16k"
    cmd = ["fio", "--name=ceiling", f"--opendir={where}", "--rw=read", f"--bs={bs}",
           f"--numjobs={jobs}", "--group_reporting", "--ioengine=psync", "--loops=2",
           "--output-format=json", "--file_service_type=sequential", "--invalidate=0"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    if proc.returncode:
        return None
    job = json.loads(proc.stdout[proc.stdout.index("{") :])["jobs"][0]
    return job["read"]["bw_bytes"]


# ----------------------------------------------------------------------------- storage
@contextlib.contextmanager
def storage(kind: str, need: int) -> Iterator[str]:
    """A directory on ``kind`` (tmpfs: a private mount, unmounted after; disk: /var/tmp)."""
    if kind == "tmpfs":
        base = Path(tempfile.mkdtemp(prefix="ceiling-", dir="/tmp"))
        mounted = False
        try:
            if os.geteuid() == 0:
                size = need + (64 << 20)
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}",
                                f"ceiling-{os.getpid()}", str(base)], check=True)  # fmt: skip
                mounted = True
                yield str(base)
            else:
                with tempfile.TemporaryDirectory(prefix="ceiling-", dir="/dev/shm") as d:
                    yield d
        finally:
            if mounted:  # a killed loader's workers may hold it a moment: retry, then detach
                for _ in range(20):
                    if (
                        subprocess.run(
                            ["umount", str(base)], check=False, stderr=subprocess.DEVNULL
                        ).returncode
                        == 0
                    ):
                        break
                    time.sleep(0.25)
                else:
                    subprocess.run(["umount", "--lazy", str(base)], check=False)
            shutil.rmtree(base, ignore_errors=True)
    else:
        with tempfile.TemporaryDirectory(prefix="ceiling-", dir="/var/tmp") as d:
            yield d


def write_npy(root: str, size: int, files: int) -> list[str]:
    import numpy as np

    rng = np.random.default_rng(1)
    os.makedirs(os.path.join(root, "npy"), exist_ok=True)
    out = []
    for i in range(files):
        p = os.path.join(root, "npy", f"s{i:06d}.npy")
        np.save(p, rng.integers(0, 255, size, dtype=np.uint8))
        out.append(p)
    return out


# ----------------------------------------------------------------------------- instrumentation
def _cpu_read() -> None:
    """What each loop reads twice an epoch: its processes' CPU (a main process, two workers)."""
    from iobench.core.cpu import processes_cpu_s

    processes_cpu_s([os.getpid()] * 3)


def instrumentation_cost(path: str) -> dict[str, float]:  # noqa: PLR0915 - one timed call each
    """Microseconds of iobench's own bookkeeping, the calls each loader makes around the work
    (timed here with the real objects, in one process, best of 5): per sample, per file and
    per batch; the work itself (open, read, decode, collate) not included."""
    import pickle
    import timeit

    from iobench.formats.registry import get_reader
    from iobench.loader.existing import _add, step_overhead
    from iobench.loader.existing_data import _DECODING, BatchStats, Stages, _checks, _spent
    from iobench.result.stats import Histogram

    reader, stages, st = get_reader("npz"), Stages(2), BatchStats()
    fd = os.open(path, os.O_RDONLY)
    hist, acc = Histogram(), {}

    def ex_sample() -> None:  # _file_samples around one next(gen)
        stages.set(1, 5, 2)
        t0, c0, k0 = time.perf_counter(), time.thread_time(), _checks(reader)
        _DECODING["on"] = True
        _DECODING["on"] = False
        _spent(st, t0, c0, k0, reader)

    def ex_file() -> None:  # read_file's clocks and the cache handling of mode dropped
        stages.set(1, 5, 1)
        t0 = time.perf_counter()
        os.fstat(fd)
        st.open_s += time.perf_counter() - t0
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        t1 = time.perf_counter()
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        st.read_s += (t1 - t0) + (time.perf_counter() - t1)

    def ex_batch() -> None:  # collate's clocks, the hand-off of the figures, the main loop's
        t0, c0 = time.perf_counter(), time.thread_time()
        b = BatchStats(worker=1, samples=8)
        b.collate_s, b.collate_cpu_s = time.perf_counter() - t0, time.thread_time() - c0
        b.ready_t = time.perf_counter()
        got = pickle.loads(pickle.dumps(b))
        t1 = time.perf_counter()
        _add(acc, got)
        hist.record(int((t1 - t0) * 1e9))
        step_overhead(t0, (t0, t1, t1), got.ready_t, 0.0)

    def syn_sample() -> None:  # FileReader.read's and __getitem__'s clocks
        t0 = time.perf_counter()
        t1, c1 = time.perf_counter(), time.thread_time()
        _ = (t1 - t0, time.perf_counter() - t1, time.thread_time() - c1)

    def syn_batch() -> None:  # collate_samples' sums, the loop's clocks per step
        t0, c0 = time.perf_counter(), time.thread_time()
        times = [(None, 1e-3, 1e-3, 1e-3, 100)] * 8
        _ = (sum(b[1] for b in times), sum(b[2] for b in times), sum(b[3] for b in times))
        t1 = time.perf_counter()
        hist.record(int((t1 - t0) * 1e9))
        _ = (time.perf_counter(), time.perf_counter(), time.thread_time() - c0)

    from iobench.loader.torchdata import BatchPool, PoolBatch

    pool = BatchPool(1, 4, 4096)

    def syn_pool() -> None:  # a worker takes its next slot, the loop hands it back
        pool.give_back(PoolBatch(pool.take(0), 4096))

    n = 20000
    out = {}
    for name, fn in (("existing per sample", ex_sample), ("existing per file", ex_file),
                     ("existing per batch", ex_batch), ("synthetic per sample", syn_sample),
                     ("synthetic per batch", syn_batch),
                     ("synthetic per batch, the pool's slot taken and handed back", syn_pool),
                     ("either, per epoch (one of two CPU reads)", _cpu_read)):  # fmt: skip
        out[name] = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
    os.close(fd)
    return out


# ----------------------------------------------------------------------------- the bench
def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def bench_config(args, kind: str, root: str, size_name: str, fmt: str, work: Path) -> list[dict]:
    """Every (workers, batch) of one (storage, size, format): the rows of the table."""
    size = SIZES[size_name]
    files_n = max(-(-args.dataset_bytes // size), 4 * max(args.batch) * max(args.workers))
    disk = kind == "disk"
    # the dataset: the synthetic loader writes it (one kept run), npy written here
    if fmt in SYNTHETIC:
        prof = work / f"{fmt}.toml"
        prof.write_text(profile_toml(fmt, size, files_n, 1, 8))
        run_synthetic(REPO, root, prof, disk, 1, 1, work, keep=True)
        kept = sorted(glob.glob(os.path.join(root, ".iobench-*")))[-1]
        data = os.path.join(kept, "data")
        files = sorted(glob.glob(os.path.join(data, "**", "*.*"), recursive=True))
    else:
        data = os.path.join(root, "npy")
        files = write_npy(root, size, files_n)
        kept = None
    fio = run_fio(files, max(args.workers), work, data)
    rows = []
    for w in args.workers:
        for b in args.batch:
            t0, epochs = time.perf_counter(), epochs_for(files_n, b, size)
            prof = work / f"{fmt}-{w}-{b}.toml"
            prof.write_text(profile_toml(fmt, size, files_n, w, b, epochs))
            runs = loaders(args, fmt, files, data, root, prof, disk, w, b, epochs, work)
            figs: dict[str, list[Fig]] = {}
            for r in range(args.rounds):  # interleaved, one at a time, the order rotated
                for name, fn in runs[r % len(runs) :] + runs[: r % len(runs)]:
                    figs.setdefault(name, []).append(fn())
            row = summary_row(figs, size)
            row.update(storage=kind, size=size_name, format=fmt, workers=w, batch=b, fio=fio,
                       files=len(files), epochs=epochs, steps=epochs_steps(files_n, b, epochs),
                       seconds=round(time.perf_counter() - t0, 1))  # fmt: skip
            rows.append(row)
            print(json.dumps(row), flush=True)
    if kept:
        shutil.rmtree(kept, ignore_errors=True)
    shutil.rmtree(os.path.join(root, "npy"), ignore_errors=True)
    return rows


def epochs_steps(files: int, batch: int, epochs: int) -> int:
    """Timed steps behind a figure: every epoch's but the first, each less its first step."""
    return (epochs - 1) * (files // batch - 1)


def loaders(args, fmt, files, data, root, prof, disk, w, b, epochs, work) -> list:
    """(name, run) of every loader of one configuration. The plain counterparts do what the
    loader they face does: of --existing, buffered reads with each file's pages dropped
    before and after (``--existing``'s default, on tmpfs too, where a drop holds nothing),
    a DataLoader per epoch; of the synthetic loader, its O_DIRECT (disk) or cached reads,
    persistent workers."""
    plain = partial(run_plain, files, fmt, workers=w, batch=b, ranks=args.ranks, gpus=args.gpus,
                    work=work, epochs=epochs)  # fmt: skip
    runs = []
    if fmt in SYNTHETIC:
        runs.append(("plain", partial(plain, mode="direct" if disk else "cached", persistent=True)))
    if fmt in EXISTING and args.gpus <= 1 and args.ranks <= 1:  # one client only
        runs.append(("plain-dropped", partial(plain, mode="dropped")))
    codes = [("new", REPO)] + ([("base", Path(args.baseline))] if args.baseline else [])
    for tag, code in codes:
        if fmt in EXISTING and args.gpus <= 1 and args.ranks <= 1:
            runs.append((f"existing-{tag}",
                         partial(run_existing, code, data, w, b, args.ranks, work, epochs)))  # fmt: skip
        if fmt in SYNTHETIC:
            runs.append((f"synthetic-{tag}", partial(run_synthetic, code, root, prof, disk,
                                                     args.ranks, args.gpus, work)))  # fmt: skip
    return runs


def summary_row(figs: dict[str, list[Fig]], size: int) -> dict:
    """Medians of the rounds (MiB/s, CPU µs per sample), each loader's ratio to its plain
    counterpart (wall: rate over rate, and the median of each round's own ratio; CPU: the
    plain loader's CPU per sample over its own, so above 1 is cheaper too), and the rounds."""
    row: dict = {"rounds": {k: [round(x[0] * size / MIB, 1) for x in v] for k, v in figs.items()}}
    m = {k: med([x[0] for x in v]) for k, v in figs.items()}
    cpu = {k: med([x[1] for x in v if x[1] is not None]) for k, v in figs.items()}
    for k in m:
        row[f"{k}_MiBps"] = m[k] * size / MIB
        row[f"{k}_cpu_us"] = cpu[k] * 1e6
        base = "plain-dropped" if k.startswith("existing") else "plain"
        if k.startswith(("existing", "synthetic")):
            row[f"{k}_ratio"] = m[k] / m[base]
            # each round's own ratio (the two ran minutes apart, at about the same load)
            row[f"{k}_paired_ratio"] = med(
                [x[0] / y[0] for x, y in zip(figs[k], figs[base], strict=True)]
            )
            row[f"{k}_cpu_ratio"] = cpu[base] / cpu[k]
    return row


#: A virtual machine's free page reporting (virtio-balloon): freed guest memory handed back to
#: the hypervisor, which must fault it in again when the guest reuses it.
PAGE_REPORTING = Path("/sys/module/page_reporting/parameters")


def _reported_kib() -> int | None:
    try:
        return int((PAGE_REPORTING / "reported_kib").read_text())
    except (OSError, ValueError):
        return None


def page_reporting(before: int | None, after: int | None) -> str:
    """One line on the host's free page reporting over the run: a loader's batches are fresh
    memory each time, and on a VM whose freed pages go back to the hypervisor at once the cost
    of faulting them in again varies from epoch to epoch (measured on this VM: the synthetic
    loader's epochs at 494-998 MiB/s with ``min_free_ms`` 0, 1,008-1,032 with 10000)."""
    if before is None or after is None:
        return "free page reporting: none (not a VM that reports freed pages)"
    knobs = []
    for name in ("min_free_ms", "page_reporting_order"):
        with contextlib.suppress(OSError):
            knobs.append(f"{name} {(PAGE_REPORTING / name).read_text().strip()}")
    return (
        f"free page reporting: {(after - before) / 1024:,.0f} MiB handed back to the "
        f"hypervisor during the run ({', '.join(knobs) or 'its settings unreadable'})"
    )


def table(rows: list[dict], baseline: bool) -> str:
    """Per configuration: each loader's MiB/s and CPU µs per sample (medians), and its
    ratios to its plain counterpart (wall; CPU, the plain's over its own: above 1 cheaper)."""
    head = ["storage", "size", "format", "W", "B", "steps", "fio MiB/s", "loader", "MiB/s",
            "CPU µs/sample", "plain MiB/s", "plain CPU µs", "wall ratio", "paired", "CPU ratio"]  # fmt: skip
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def f(v: float | None, fmt: str = ",.0f") -> str:
        return "n/a" if v is None or v != v else format(v, fmt)

    tags = ("new", "base") if baseline else ("new",)
    for r in rows:
        for k in [f"{kind}-{t}" for t in tags for kind in ("existing", "synthetic")]:
            if f"{k}_MiBps" not in r:
                continue
            base = "plain-dropped" if k.startswith("existing") else "plain"
            cells = [r["storage"], r["size"], r["format"], str(r["workers"]), str(r["batch"]),
                     str(r["steps"]), f(r["fio"] / MIB if r["fio"] else None), k,
                     f(r[f"{k}_MiBps"]), f(r[f"{k}_cpu_us"]), f(r[f"{base}_MiBps"]),
                     f(r[f"{base}_cpu_us"]), f(r[f"{k}_ratio"], ".3f"),
                     f(r[f"{k}_paired_ratio"], ".3f"),
                     f(r[f"{k}_cpu_ratio"], ".3f")]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--plain-child":
        res = plain_child(json.loads(Path(sys.argv[2]).read_text()))
        if int(os.environ.get("RANK", "0")) == 0:
            print(json.dumps(res))
        return 0
    # a kill ends the bench through its finally blocks: the private tmpfs unmounted, the
    # loader running at the time killed by subprocess.run (a stopped run once left both)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="tmpfs only, npy, raw and tar, 2 workers, batch 8, 3 rounds",
    )
    ap.add_argument("--storage", default="tmpfs,disk")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--batch", default="8,64")
    ap.add_argument("--dataset-bytes", default=str(256 * MIB), help="bytes per dataset (at least)")
    ap.add_argument("--baseline", help="a directory holding an older iobench package")
    ap.add_argument("--ranks", type=int, default=1, help="torchrun ranks on this host")
    ap.add_argument("--gpus", type=int, default=1, help="the synthetic loader's --gpus")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument(
        "--instrumentation",
        action="store_true",
        help="only time iobench's own bookkeeping per sample, file and batch",
    )
    args = ap.parse_args()
    if args.instrumentation:
        with tempfile.NamedTemporaryFile(dir="/dev/shm") as f:
            f.write(b"x" * 4096)
            f.flush()
            for k, v in instrumentation_cost(f.name).items():
                print(f"| {k} | {v:.1f} µs |")
        return 0
    if args.quick:
        args.storage, args.formats, args.workers, args.batch = "tmpfs", "npy,raw,tar", "2", "8"
        args.rounds = min(args.rounds, 3)
    args.workers = [int(x) for x in args.workers.split(",")]
    args.batch = [int(x) for x in args.batch.split(",")]
    args.dataset_bytes = int(args.dataset_bytes)
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, -5)
    load0, reported0 = os.getloadavg(), _reported_kib()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="ceiling-work-") as w:
        work = Path(w)
        for kind in args.storage.split(","):
            for size_name in args.sizes.split(","):
                need = max(args.dataset_bytes, 4 * max(args.batch) * max(args.workers)
                           * SIZES[size_name]) * 3  # fmt: skip
                for fmt in args.formats.split(","):
                    with storage(kind, need) as root:
                        rows.extend(bench_config(args, kind, root, size_name, fmt, work))
    load1, reported1 = os.getloadavg(), _reported_kib()
    print()
    print(table(rows, bool(args.baseline)))
    print(f"\nload average before {load0[0]:.2f}, after {load1[0]:.2f}; {args.rounds} rounds, "
          f"medians; ranks {args.ranks}, gpus {args.gpus}")  # fmt: skip
    print(page_reporting(reported0, reported1))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    worst = [r[k] for r in rows for k in r if k.endswith("-new_ratio")]
    return 0 if worst and min(worst) >= 0.95 else 1


if __name__ == "__main__":
    sys.exit(main())
