#!/usr/bin/env python
"""Validate the starvation model for a many-client loader: ``iobench loader`` under torchrun.

For each compute time (fractions of the time the throttled storage needs per step, so the
cases span starved to compute-bound), launches ``torchrun --standalone --nproc_per_node=N -m
iobench loader`` on a generated profile (default 600 × 2 MiB raw files, batch 8, 2 workers)
inside a blkio cgroup throttled to a known read rate (default 200 MiB/s, shared by all ranks
as one storage system is; O_DIRECT reads), and reads the one result.json rank 0 wrote: the
AU the ranks measured and the AU the model predicted in the same run from its own probe and
calibration. Prints both per case and the error in AU points; exits 1 when any case is off by
more than the tolerance (5 points).

Needs root for the throttle (and raises its priority then); without root it runs
unthrottled and the comparison is noisy. ``--device loop`` puts the data on a private ext4
over a loop device in /dev/shm, throttled the same way (a known speed on a shared host).

    .venv/bin/python scripts/bench_loader_ranks.py [--ranks 2] [--device disk|loop]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_starvation import NICE, TOLERANCE, add_bench_args, bench_device, blkio_throttle

from iobench.core.units import format_rate, parse_size

REPO = Path(__file__).resolve().parents[1]
FRACTIONS = (0.3, 0.6, 0.9, 1.2, 1.8)  # compute ÷ storage time per step


def profile_toml(args, size: int, compute_s: float) -> str:
    return (
        'description = "bench_loader_ranks"\nformat = "raw"\n'
        f"sample_size = {size}\nsample_size_sd = 0\nsamples_per_file = 1\n"
        f"files = {args.files}\nbatch_size = {args.batch}\ncompute_s = {compute_s}\n"
        f"workers = {args.workers}\nprefetch = {args.prefetch}\nau_min = 0.9\n"
        f"epochs = {args.epochs}\n"
    )


def launch(args, where: str, prof: Path, out: Path) -> dict:
    """One torchrun launch of the loader; its result.json."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(REPO)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
           f"--nproc_per_node={args.ranks}", "-m", "iobench", "loader", where, "--profile",
           str(prof), "--direct", "--output", str(out), "--no-history", "-q"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"loader launch failed ({proc.returncode}):\n{proc.stdout[-3000:]}")
    return json.loads((out / "result.json").read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_bench_args(ap, FRACTIONS)
    ap.add_argument("--ranks", type=int, default=2)
    args = ap.parse_args()
    size, rate = parse_size(args.size), parse_size(args.rate)
    fractions = [float(f) for f in args.fractions.split(",")]
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)  # ranks and workers inherit it
    # the storage time per step when every rank loads a batch at the throttled rate
    storage_s = args.ranks * args.batch * size / rate
    rows = []
    with contextlib.ExitStack() as stack:
        where = bench_device(stack, args, size)
        if where is None:
            return 2
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="iobench-bench-")))
        throttle = stack.enter_context(blkio_throttle(where, rate))
        print(f"{args.ranks} ranks on {where}; throttle: {throttle or 'none'}; storage needs "
              f"{storage_s * 1e3:.1f} ms per step at {format_rate(rate)}")  # fmt: skip
        for k, frac in enumerate(fractions):
            c = round(frac * storage_s, 4)
            prof = work / f"case{k}.toml"
            prof.write_text(profile_toml(args, size, c))
            t0 = time.perf_counter()
            res = launch(args, where, prof, work / f"out{k}")
            ld = res["loader"]
            err = ld["predicted_au"] - ld["au"]
            rows.append((c, ld["predicted_au"], ld["au"], err, ld["bound"], ld["steps"]))
            probes = [p for p in res["phases"] if p["name"].startswith("dataset-shuffled-r")]
            print("  probe: " + ", ".join(
                f"{p['concurrency']} readers {format_rate(p['bandwidth_bps'])} "
                f"(stonewall {format_rate(p.get('bandwidth_stonewall_bps') or 0)})"
                for p in probes
            ) + f"; calibration overhead {ld['calibration']['overhead_s'] * 1e3:.2f} ms/step, "
                f"decode {ld['calibration']['decode_s_per_sample'] * 1e6:.0f} us/sample")  # fmt: skip
            print(
                f"  compute {c * 1e3:6.1f} ms: predicted {ld['predicted_au']:6.1%} measured "
                f"{ld['au']:6.1%} error {err * 100:+5.1f} pts  [{ld['bound']}, {ld['steps']} "
                f"steps, {format_rate(ld['bytes_per_s'])}, {time.perf_counter() - t0:.0f} s]",
                flush=True,
            )
    print()
    print("| ranks | compute/step | predicted AU | measured AU | error (pts) | bound |")
    print("|---:|---:|---:|---:|---:|---|")
    for c, p, m, e, b, _ in rows:
        print(f"| {args.ranks} | {c * 1e3:.1f} ms | {p:.1%} | {m:.1%} | {e * 100:+.1f} | {b} |")
    worst = max(abs(r[3]) for r in rows)
    ok = worst <= TOLERANCE
    print(f"\nworst error {worst * 100:.1f} AU points: {'PASS' if ok else 'FAIL'} "
          f"(tolerance {TOLERANCE * 100:.0f})")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
