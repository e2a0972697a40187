#!/usr/bin/env python3
"""Writing the synthetic dataset against ``sequential-write``, per format, interleaved.

For each format (raw, npz, parquet, tar) and each repeat, ``iobench run sequential-write``
writes ``--size`` bytes with ``--jobs`` writers (a file per writer, O_DIRECT, 1 MiB blocks,
fsync at the end), then the dataset writer (``iobench.formats.write_files``, what ``iobench
loader`` lays its dataset out with) writes the same bytes with the same writers as files of
``--file-size`` holding samples of ``--sample-size`` (O_DIRECT bodies, fsync per file). The
order alternates between repeats (seq first, then dataset first) so drift in the device's
speed hits both alike. Each repeat's ratio is dataset ÷ sequential-write; the table gives the
medians of both bandwidths and of the ratios (the goal: ≥ 0.90). Beside them, as a reference
for what files of that size cost on the storage, fio writes the same number of files of the
same size (1 MiB O_DIRECT writes of fresh random bytes, fsync as each closes, created on
open, not preallocated; ``--no-fio`` leaves it out). Both runs use the same
target directory, whose free space is checked first (twice the size, plus 10 %); everything
written is removed, also on error or Ctrl-C.

    PYTHONPATH=. .venv/bin/python scripts/bench_datagen.py [--dir DIR] [--size 4GiB]
        [--jobs 2] [--file-size 256MiB] [--sample-size 1MiB] [--repeats 3]
        [--formats raw,npz,parquet,tar] [--json] [--no-fio]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from iobench import formats
from iobench.core import cpu
from iobench.core.units import format_bytes, parse_size
from iobench.engines.base import FileSpec
from iobench.engines.registry import get_engine
from iobench.run.runner import PhaseRunner
from iobench.target import StopFlag, create_run_dir, remove_run_dir, resolve

REPO = Path(__file__).resolve().parents[1]
GIB = 1 << 30


def seq_write(where: str, size: int, jobs: int) -> tuple[float, float]:
    """``iobench run sequential-write``'s bandwidth (bytes/s) for ``size`` bytes in all, and
    the CPU seconds its phase took (its client_cpu)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "iobench", "run", "sequential-write", where,
           "--set", f"size={size // jobs}", "--set", f"jobs={jobs}", "--set", "read_back=false",
           "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--set", "time=none",
           "--no-history", "-q",
           "--json"]  # fmt: skip
    out = tempfile.mkdtemp(prefix="iobench-bench-datagen-out-")
    try:
        proc = subprocess.run(
            [*cmd, "--output", os.path.join(out, "r")], cwd=REPO, env=env,
            capture_output=True, text=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"sequential-write failed ({proc.returncode}): {proc.stderr[-2000:]}")
    phases = [p for p in json.loads(proc.stdout)["phases"] if p["op"] == "write"]
    cpu_s = float((phases[0].get("extra") or {}).get("client_cpu", {}).get("cpu_s", 0.0))
    return float(phases[0]["bandwidth_bps"]), cpu_s


def fio_files(where: str, args: argparse.Namespace) -> float:
    """fio writing the dataset's files (same count, size and writers; 1 MiB O_DIRECT writes,
    one file open at a time, fsync as it closes, each created when opened and not
    preallocated, fresh random bytes in every write (``refill_buffers``), as the dataset
    writer does): bytes/s. The reference for what files of this size cost on this storage."""
    spf = max(1, args.file_size // args.sample_size)
    per_job = max(1, args.size // (spf * args.sample_size) // args.jobs)
    d = tempfile.mkdtemp(prefix="fio-files-", dir=where)
    try:
        proc = subprocess.run(
            ["fio", "--name=dataset", f"--directory={d}", "--rw=write", "--bs=1M", "--direct=1",
             "--ioengine=psync", f"--numjobs={args.jobs}", f"--nrfiles={per_job}",
             f"--filesize={spf * args.sample_size}", f"--size={per_job * spf * args.sample_size}",
             "--fsync_on_close=1", "--openfiles=1", "--fallocate=none", "--create_on_open=1",
             "--refill_buffers=1",
             "--file_service_type=sequential",
             "--group_reporting", "--output-format=json"],
            capture_output=True, text=True,
        )  # fmt: skip
    finally:
        shutil.rmtree(d, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"fio failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return float(json.loads(proc.stdout)["jobs"][0]["write"]["bw_bytes"])


def dataset_write(where: str, fmt: str, args: argparse.Namespace) -> tuple[float, float]:
    """The dataset writer's bandwidth (bytes/s) for ``--size`` bytes, and its CPU seconds."""
    spf = max(1, args.file_size // args.sample_size)
    n_files = max(1, args.size // (spf * args.sample_size))
    ext = formats.EXTENSIONS[fmt]
    files = [FileSpec(f"data/d0000/s{i:07d}.{ext}", spf * args.sample_size) for i in range(n_files)]
    target = resolve(where)
    create_run_dir(target, f"datagen-{fmt}-{os.getpid()}")
    try:
        runner = PhaseRunner(target, get_engine("posix"), StopFlag())
        params = {"format": fmt, "samples_per_file": spf, "jobs": args.jobs, "seed": 1}
        before = cpu.sample()
        res, _ = formats.write_files(params, runner, files)
        return res.bandwidth_bps, float(cpu.usage(before, cpu.sample())["cpu_s"])
    finally:
        remove_run_dir(target)


def check_space(where: str, size: int) -> None:
    free = shutil.disk_usage(where).free
    need = int(2 * size * 1.1)
    if free < need:
        raise SystemExit(
            f"{where}: {format_bytes(free)} free, the bench needs {format_bytes(need)}: "
            "give --dir elsewhere or a smaller --size"
        )


def run(args: argparse.Namespace, where: str) -> list[dict]:
    rows = []
    for fmt in args.formats:
        seq, data, ratios, cpu_seq, cpu_data, fio, fio_ratios = [], [], [], [], [], [], []
        for r in range(args.repeats):
            if r % 2 == 0:
                s, cs = seq_write(where, args.size, args.jobs)
                d, cd = dataset_write(where, fmt, args)
                f = fio_files(where, args) if args.fio else None
            else:
                f = fio_files(where, args) if args.fio else None
                d, cd = dataset_write(where, fmt, args)
                s, cs = seq_write(where, args.size, args.jobs)
            seq.append(s)
            data.append(d)
            ratios.append(d / s)
            cpu_seq.append(cs / (args.size / GIB))
            cpu_data.append(cd / (args.size / GIB))
            also = ""
            if f:
                fio.append(f)
                fio_ratios.append(d / f)
                also = f"; fio, same files {f / GIB:.3f} GiB/s, ratio {d / f:.3f}"
            print(
                f"  {fmt} repeat {r + 1}: dataset {d / GIB:.3f} GiB/s ({cpu_data[-1]:.2f} CPU "
                f"s/GiB), sequential-write {s / GIB:.3f} GiB/s ({cpu_seq[-1]:.2f} CPU s/GiB), "
                f"ratio {d / s:.3f}{also}",
                flush=True,
            )
        rows.append(
            {
                "format": fmt,
                "dataset_gibps": statistics.median(data) / GIB,
                "seq_gibps": statistics.median(seq) / GIB,
                "ratio": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "dataset_cpu_s_per_gib": statistics.median(cpu_data),
                "seq_cpu_s_per_gib": statistics.median(cpu_seq),
                "repeats": args.repeats,
                "fio_files_gibps": statistics.median(fio) / GIB if fio else None,
                "ratio_to_fio_files": statistics.median(fio_ratios) if fio else None,
            }
        )
    return rows


def main() -> int:
    # a termination signal unwinds like Ctrl-C: the finally below removes what was written
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--size", default="4GiB")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--file-size", default="256MiB")
    ap.add_argument("--sample-size", default="1MiB")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--formats", default="raw,npz,parquet,tar")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--no-fio", dest="fio", action="store_false",
        help="leave out the reference run of fio writing the same files",
    )  # fmt: skip
    args = ap.parse_args()
    args.size, args.file_size = parse_size(args.size), parse_size(args.file_size)
    args.sample_size = parse_size(args.sample_size)
    args.formats = [f for f in args.formats.split(",") if f]
    if args.fio and shutil.which("fio") is None:
        print("bench_datagen: fio not found, the fio reference is left out", file=sys.stderr)
        args.fio = False
    check_space(args.dir, args.size)
    where = tempfile.mkdtemp(prefix="iobench-bench-datagen-", dir=args.dir)
    started = time.time()
    try:
        print(
            f"{format_bytes(args.size)} per run, {args.jobs} writers, files of "
            f"{format_bytes(args.file_size)}, samples of {format_bytes(args.sample_size)}, "
            f"{args.repeats} interleaved repeats, in {args.dir}; load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
            flush=True,
        )
        rows = run(args, where)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    if args.json:
        print(json.dumps(rows, indent=2))
    print(
        "| format | dataset writer GiB/s | sequential-write GiB/s | ratio (median; min–max) "
        "| CPU s/GiB: dataset / sequential-write | fio, same files: GiB/s (ratio) |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        ref = "–"
        if r["fio_files_gibps"] is not None:
            ref = f"{r['fio_files_gibps']:.3f} ({r['ratio_to_fio_files']:.2f})"
        print(
            f"| {r['format']} | {r['dataset_gibps']:.3f} | {r['seq_gibps']:.3f} | "
            f"{r['ratio']:.2f} ({r['ratio_min']:.2f}–{r['ratio_max']:.2f}) | "
            f"{r['dataset_cpu_s_per_gib']:.2f} / {r['seq_cpu_s_per_gib']:.2f} | {ref} |"
        )
    print(
        f"({time.time() - started:.0f} s; load average at the end "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)"
    )
    return 0 if all(r["ratio"] >= 0.9 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
