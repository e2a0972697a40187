#!/usr/bin/env python3
"""The posix engine's own cost per operation, this checkout against another, interleaved.

On cached data (a 64 MiB file and 2,000 4 KiB files, laid out once, read from the page cache)
an operation costs microseconds, so what the engine does around the system call shows: the
figure is the process CPU time per operation (less sensitive than IOPS to other work on a
shared machine), with the p50 latency beside it. Rounds alternate (before, after, before, ...)
so drift hits both alike; the table gives each side's median and after/before (below 1: the
checkout is cheaper). Worker threads, one worker: the per-op path of every loop.

    .venv/bin/python scripts/bench_engine_overhead.py --before /path/to/old/checkout
                                                      [--rounds 6] [--dir /var/tmp] [--json]

The files live in a temporary directory under --dir, always removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CASES = ("randread4k", "seqread4k", "seqwrite64k", "wholefile-read", "stat")
METRICS = ("cpu_us_op", "p50_us")


def child(run_dir: str) -> dict:
    """One round in this process (the tree on PYTHONPATH): per case, CPU µs/op and p50."""
    from iobench.engines.base import FileSpec, PhaseSpec
    from iobench.engines.registry import get_engine

    eng = get_engine("posix")
    eng.workers = "threads"
    big = (FileSpec("big.dat", 64 << 20),)
    small = tuple(FileSpec(f"s/f{i}.dat", 4096) for i in range(2000))
    if not os.path.exists(os.path.join(run_dir, "big.dat")):
        os.makedirs(os.path.join(run_dir, "s"), exist_ok=True)
        eng.run(PhaseSpec("lay", "write", big, block_size=1 << 20), _ctx(run_dir))
        eng.run(PhaseSpec("lay-small", "create", small), _ctx(run_dir))
    specs = {
        "randread4k": PhaseSpec("r", "randread", big, block_size=4096, time_s=1.5, seed=1),
        "seqread4k": PhaseSpec("s", "read", big, block_size=4096, time_s=1.5),
        "seqwrite64k": PhaseSpec("w", "write", big, block_size=65536, time_s=1.5),
        "wholefile-read": PhaseSpec("f", "read", small, block_size=0, latency_per="file"),
        "stat": PhaseSpec("st", "stat", small),
    }
    out = {}
    for name, spec in specs.items():
        c0 = time.process_time()
        res = eng.run(spec, _ctx(run_dir))
        cpu = time.process_time() - c0
        out[name] = {"cpu_us_op": cpu / res.ops * 1e6, "p50_us": res.latency_s["p50"] * 1e6}
    return out


def _ctx(run_dir: str):
    from iobench.engines.base import EngineContext
    from iobench.target import StopFlag

    return EngineContext(run_dir=run_dir, stop=StopFlag())


def round_of(tree: str, run_dir: str) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", run_dir],
        env=env, cwd=tree, capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(runs: dict[str, list[dict]]) -> list[dict]:
    rows = []
    for case in CASES:
        for m in METRICS:
            b = statistics.median(r[case][m] for r in runs["before"])
            a = statistics.median(r[case][m] for r in runs["after"])
            rows.append({"case": case, "metric": m, "before": b, "after": a, "ratio": a / b})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", help="the other checkout (its root: iobench/ inside)")
    ap.add_argument("--rounds", type=int, default=6, help="rounds per side (>= 1)")
    ap.add_argument("--dir", default="/var/tmp", help="where the temporary files go")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child)))
        return 0
    if not args.before or not os.path.isdir(os.path.join(args.before, "iobench")):
        ap.error("--before must name a checkout with iobench/ inside")
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run_dir = tempfile.mkdtemp(prefix="iobench-overhead-", dir=args.dir)
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    try:
        for _ in range(args.rounds):
            runs["before"].append(round_of(os.path.abspath(args.before), run_dir))
            runs["after"].append(round_of(here, run_dir))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    rows = table(runs)
    if args.json:
        print(json.dumps({"rounds": args.rounds, "rows": rows}, indent=2))
        return 0
    print(f"{'case':16s} {'metric':10s} {'before':>9s} {'after':>9s} {'after/before':>12s}")
    for r in rows:
        print(
            f"{r['case']:16s} {r['metric']:10s} {r['before']:9.3f} {r['after']:9.3f} "
            f"{r['ratio']:12.3f}"
        )
    print(f"\n{args.rounds} rounds per side, alternating; medians; CPU µs per operation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
