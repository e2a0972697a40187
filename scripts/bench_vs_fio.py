#!/usr/bin/env python3
"""iobench's posix engine against fio, side by side on the same files, interleaved.

For each case both engines run the same PhaseSpec on the same files, in pairs whose order
alternates (posix fio, fio posix, ...) so drift in the device's speed hits both alike; the
table gives each engine's median and the ratio iobench/fio for bandwidth, IOPS, p50 and p99.
Ratios near 1 mean the posix engine measures what fio measures; bandwidth/IOPS ratios below 1
(or latency ratios above 1) mean per-operation overhead in iobench. Bandwidth and IOPS are
medians over the runs; the mean, p50 and p99 come from every run's operations pooled (merged
histograms), which is far steadier than a median of per-run p99s on a noisy device. "between"
is a worker's time per operation less the mean latency (median of runs): what an engine
spends outside its timed call, where the mean's excess is what it spends inside it.

Writes: both engines write fresh random data into every block; fio's ``refill_buffers``
regenerates each block (about 0.25 ms per MiB of CPU here), iobench's posix engine copies a
stamped slice of a random pool (about 0.05 ms per MiB), so on a fast device fio's write
figures carry more of its own data-generation time.

Cases: sequential write and read of 1 MiB blocks with O_DIRECT (one worker, the whole file),
random 4 KiB O_DIRECT reads with 1 and 8 workers (time-based), and a buffered sequential
1 MiB read with the file's page cache dropped (posix_fadvise DONTNEED) before every run of
either engine: it measures reads from the device through the page cache, with readahead.
Both engines advise the kernel of the pattern (POSIX_FADV_SEQUENTIAL: fio's fadvise_hint, the
posix engine's ``advise``) and read into page-aligned buffers (fio's buffered buffers are
aligned through ``mem_align``), so the case compares the same access pattern.

    .venv/bin/python scripts/bench_vs_fio.py [--dir DIR] [--pairs 7] [--size 1GiB] [--time 3s]
                                             [--cases seq-write,randread-8] [--json]
                                             [--device-stats]

``--device-stats`` counts what reached the block device under --dir per run (read requests,
their mean size, the mean number in flight): the access pattern each engine gave the device.

The files are written once before the pairs, in a temporary directory under --dir (default
/var/tmp), which is always removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from iobench.core.units import parse_duration, parse_size
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.fio import FioEngine
from iobench.engines.registry import get_engine
from iobench.result.stats import Histogram
from iobench.target import StopFlag, drop_file_cache, probe_direct_io


@dataclass(frozen=True)
class Case:
    name: str
    title: str
    spec: PhaseSpec
    drop_cache: bool = False
    # targets for iobench/fio: bandwidth and IOPS at least this ...
    min_ratio: float | None = None
    # ... and p50/p99 within this fraction of fio's
    latency_tolerance: float | None = None


def cases(size: int, time_s: float, seed: int) -> list[Case]:
    one = (FileSpec("bench-0.dat", size),)
    eight_regions = one  # 8 workers share the file, each a region of its own (mode "shared")
    return [
        Case(
            "seq-write",
            "seq write 1MiB O_DIRECT",
            PhaseSpec("seq-write", "write", one, block_size=1 << 20, direct=True, fsync="end",
                      seed=seed),
            min_ratio=0.95,
            latency_tolerance=0.15,
        ),
        Case(
            "seq-read",
            "seq read 1MiB O_DIRECT",
            PhaseSpec("seq-read", "read", one, block_size=1 << 20, direct=True, seed=seed),
            min_ratio=0.95,
            latency_tolerance=0.15,
        ),
        Case(
            "randread-1",
            "randread 4KiB O_DIRECT x1",
            PhaseSpec("rand-read", "randread", one, block_size=4096, direct=True,
                      time_s=time_s, seed=seed, mode="shared"),
            min_ratio=0.90,
            latency_tolerance=0.15,
        ),
        Case(
            "randread-8",
            "randread 4KiB O_DIRECT x8",
            PhaseSpec("rand-read", "randread", eight_regions, jobs=8, block_size=4096,
                      direct=True, time_s=time_s, seed=seed, mode="shared"),
            min_ratio=0.90,
            latency_tolerance=0.15,
        ),
        Case(
            "buffered-read",
            "seq read 1MiB buffered, cache dropped",
            PhaseSpec("seq-read", "read", one, block_size=1 << 20, direct=False, seed=seed,
                      params={"cache_dropped": True}),
            drop_cache=True,
            min_ratio=0.95,
        ),
    ]  # fmt: skip


def lay_out(run_dir: str, size: int, seed: int) -> None:
    """Write the bench file once, with random data, fsynced and dropped from the cache."""
    spec = PhaseSpec(
        "layout", "write", (FileSpec("bench-0.dat", size),), block_size=1 << 20, fsync="end",
        seed=seed,
    )  # fmt: skip
    get_engine("posix").run(spec, EngineContext(run_dir=run_dir, stop=StopFlag()))
    drop_file_cache(os.path.join(run_dir, "bench-0.dat"))


def device_stat_path(path: str) -> str | None:
    """/sys/dev/block/MAJ:MIN/stat of the block device (or partition) holding ``path``."""
    dev = os.stat(path).st_dev
    stat = f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat"
    return stat if os.path.exists(stat) else None


def read_device(stat: str) -> list[int]:
    return [int(x) for x in open(stat).read().split()]


def device_delta(before: list[int], after: list[int]) -> dict[str, float]:
    """What reached the device between two readings of its stat file: read requests, their
    mean size, and the mean number in flight while any was (time in queue / busy time). The
    device's, not the engine's: on a shared host other processes' I/O is counted too."""
    d = [b - a for a, b in zip(before, after, strict=True)]
    reads, sectors, busy_ms, queue_ms = d[0], d[2], d[9], d[10]
    return {
        "reads": reads,
        "kib_per_read": sectors * 512 / 1024 / reads if reads else 0.0,
        "in_flight": queue_ms / busy_ms if busy_ms else 0.0,
    }


def measure(engine: Any, case: Case, run_dir: str, stat: str | None = None) -> dict[str, Any]:
    if case.drop_cache:
        for f in case.spec.files:
            drop_file_cache(os.path.join(run_dir, f.path))
    before = read_device(stat) if stat else None
    res = engine.run(case.spec, EngineContext(run_dir=run_dir, stop=StopFlag()))
    device = device_delta(before, read_device(stat)) if stat and before else None
    mean_s = Histogram.from_dict(res.histogram).mean_ns / 1e9
    # each worker's time per operation less the mean latency: what the engine spends outside
    # the timed call (for fio the exact clat mean it reports)
    per_op_s = res.elapsed_s * case.spec.jobs / res.ops if res.ops else 0.0
    return {
        "device": device,
        "bandwidth_bps": res.bandwidth_bps,
        "iops": res.iops,
        "mean_s": mean_s,
        "between_s": per_op_s - mean_s if res.ops else 0.0,
        "p50_s": res.latency_s.get("p50", 0.0),
        "p99_s": res.latency_s.get("p99", 0.0),
        "elapsed_s": res.elapsed_s,
        "histogram": res.histogram,
    }


METRICS = (("bandwidth_bps", "MiB/s", 1 / (1 << 20)), ("iops", "IOPS", 1.0),
           ("mean_s", "mean us", 1e6), ("between_s", "between us", 1e6),
           ("p50_s", "p50 us", 1e6), ("p99_s", "p99 us", 1e6))  # fmt: skip


DEVICE_KEYS = ("reads", "kib_per_read", "in_flight")


def device_lines(rows: list[dict[str, Any]], stat: str) -> list[str]:
    """Per case, what reached the device under each engine (medians of runs)."""
    out = [f"\nat the device ({stat}; medians of runs; other processes' I/O counted too):"]
    for row in rows:
        for name, d in row.get("device", {}).items():
            out.append(
                f"  {row['title']:<38} {name:<8} {d['reads']:>7,.0f} reads of "
                f"{d['kib_per_read']:>6,.0f} KiB, {d['in_flight']:5.2f} in flight"
            )
    return out


def pooled(runs: list[dict[str, Any]], q: float) -> float:
    """A percentile of every run's latencies together (merged histograms, never averaged)."""
    return (
        Histogram.merged(Histogram.from_dict(r["histogram"]) for r in runs).percentile_ns(q) / 1e9
    )


def pooled_mean(runs: list[dict[str, Any]]) -> float:
    """The mean latency of every run's operations together, in seconds."""
    return Histogram.merged(Histogram.from_dict(r["histogram"]) for r in runs).mean_ns / 1e9


def summarise(case: Case, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Medians of bandwidth and IOPS over the runs; p50/p99 over all runs' operations pooled."""
    out: dict[str, Any] = {"case": case.name, "title": case.title, "pairs": len(runs["posix"])}
    if runs["posix"][0].get("device"):
        out["device"] = {
            name: {k: statistics.median(r["device"][k] for r in rs) for k in DEVICE_KEYS}
            for name, rs in (("iobench", runs["posix"]), ("fio", runs["fio"]))
        }
    for key, _, _ in METRICS:
        if key in ("p50_s", "p99_s"):
            q = 0.5 if key == "p50_s" else 0.99
            a, b = pooled(runs["posix"], q), pooled(runs["fio"], q)
        elif key == "mean_s":
            a, b = pooled_mean(runs["posix"]), pooled_mean(runs["fio"])
        else:
            a = statistics.median(r[key] for r in runs["posix"])
            b = statistics.median(r[key] for r in runs["fio"])
        ratio = a / b if b else float("nan")
        if key in ("bandwidth_bps", "iops"):
            ok = None if case.min_ratio is None else ratio >= case.min_ratio
        elif key == "between_s":  # microseconds over a few tenths: a ratio with no target
            ok = None
        else:
            tol = case.latency_tolerance
            ok = None if tol is None else abs(ratio - 1) <= tol
        out[key] = {"iobench": a, "fio": b, "ratio": ratio, "target_met": ok,
                    "iobench_runs": [r[key] for r in runs["posix"]],
                    "fio_runs": [r[key] for r in runs["fio"]]}  # fmt: skip
    return out


def table(rows: list[dict[str, Any]]) -> str:
    head = ("case", "metric", "iobench", "fio", "iobench/fio", "target")
    lines = []
    for row in rows:
        for key, label, scale in METRICS:
            m = row[key]
            mark = {True: "met", False: "MISSED", None: ""}[m["target_met"]]
            lines.append((row["title"], label, f"{m['iobench'] * scale:,.1f}",
                          f"{m['fio'] * scale:,.1f}", f"{m['ratio']:.3f}", mark))  # fmt: skip
    widths = [max(len(str(r[i])) for r in [head, *lines]) for i in range(len(head))]
    fmt = lambda r: "  ".join(  # noqa: E731
        str(c).ljust(w) if i < 2 or i == 5 else str(c).rjust(w)
        for i, (c, w) in enumerate(zip(r, widths, strict=True))
    ).rstrip()
    return "\n".join([fmt(head), fmt(tuple("-" * w for w in widths)), *map(fmt, lines)])


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp", help="directory to put the temp dir in")
    ap.add_argument("--pairs", type=int, default=7, help="posix/fio pairs per case (>= 1)")
    ap.add_argument("--size", default="1GiB", help="bench file size")
    ap.add_argument("--time", default="3s", help="duration of each time-based (randread) run")
    ap.add_argument("--cases", default="", help="comma-separated subset of case names")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--posix-workers", default="auto", choices=("auto", "threads", "processes"),
        help="the posix engine's worker mode (auto: processes when workers > CPUs)",
    )  # fmt: skip
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument(
        "--device-stats", action="store_true",
        help="also count what reached the block device holding --dir (/sys/dev/block/*/stat):"
        " read requests, their mean size and how many were in flight, per engine",
    )  # fmt: skip
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    if args.pairs < 1:
        ap.error("--pairs must be at least 1")
    ok, why = FioEngine.available()
    if not ok:
        print(f"bench_vs_fio: {why}", file=sys.stderr)
        return 2
    size = parse_size(args.size)
    time_s = parse_duration(args.time)
    chosen = cases(size, time_s, args.seed)
    if args.cases:
        wanted = set(args.cases.split(","))
        unknown = wanted - {c.name for c in chosen}
        if unknown:
            print(f"bench_vs_fio: unknown case(s) {sorted(unknown)}", file=sys.stderr)
            return 2
        chosen = [c for c in chosen if c.name in wanted]
    run_dir = tempfile.mkdtemp(prefix="iobench-bench-", dir=args.dir)
    engines = {"posix": get_engine("posix", workers=args.posix_workers), "fio": get_engine("fio")}
    rows = []
    t0 = time.monotonic()
    try:
        direct_ok, reason = probe_direct_io(run_dir)
        if not direct_ok:
            print(f"bench_vs_fio: O_DIRECT unavailable in {run_dir}: {reason}", file=sys.stderr)
            return 2
        lay_out(run_dir, size, args.seed)
        stat = device_stat_path(run_dir) if args.device_stats else None
        if args.device_stats and stat is None:
            print(f"bench_vs_fio: no block device stat file for {run_dir}", file=sys.stderr)
            return 2
        for case in chosen:
            runs: dict[str, list[dict[str, Any]]] = {"posix": [], "fio": []}
            for i in range(args.pairs):
                order = ("posix", "fio") if i % 2 == 0 else ("fio", "posix")
                for name in order:
                    runs[name].append(measure(engines[name], case, run_dir, stat))
            rows.append(summarise(case, runs))
            if not args.json:
                print(f"# {case.title}: done ({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    info = {
        "cpus": os.cpu_count(),
        "fio": engines["fio"].version(),
        "size_bytes": size,
        "time_s": time_s,
        "pairs": args.pairs,
        "posix_workers": args.posix_workers,
        "wall_s": time.monotonic() - t0,
    }
    if args.json:
        print(json.dumps({"info": info, "cases": rows}, indent=2))
    else:
        print(table(rows))
        if stat:
            print("\n".join(device_lines(rows, stat)))
        print(
            f"\n{info['fio']}, {info['cpus']} CPUs, file {args.size}, randread {args.time} per "
            f"run, {args.pairs} pairs (order alternating); bandwidth/IOPS/between: medians of "
            f"runs (between: a worker's time per operation less the mean latency), "
            f"mean/p50/p99: all runs' operations pooled; {info['wall_s']:.0f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
