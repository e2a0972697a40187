#!/usr/bin/env python
"""Does ``iobench compare`` control its false alarms? Identical runs must not regress; reads
throttled to half the rate must, naming only the read metrics.

For each ``--repeats`` count (1, 3, 6) it runs ``iobench run sequential-write`` (size=16MiB,
jobs=2, no sweeps, O_DIRECT) as ``--pairs`` (20) pairs of identical runs back to back, each run
appended to a fresh history of that repeat count, and compares every pair twice
(``iobench compare A B --format json``): with that history (the earlier pairs' run-to-run
spread decides once there are 3 earlier runs) and with an empty one (the repeats' t test
decides; at --repeat 1 nothing can: unconfirmed). Every comparison of identical runs must
report 0 regressions (exit 0). A third comparison with the history and ``--tail-df normal``
(Student's k - 1 degrees of freedom, the rule before the tail was held at 4) is shown beside
them, not judged, and a table gives how far each run of a history lay from the runs before it.

Then the read throttle (cgroup v1 blkio, read_bps on the device) at half the median unthrottled
read rate of the repeat-3 pairs: an unthrottled run against a throttled one at --repeat 3 (no
history: the t test), and at --repeat 1 against a history of 5 earlier unthrottled runs. Each
must exit 1 with seq-read.bandwidth among its regressions and only seq-read metrics there.

``--device loop`` (default) puts the target on a private ext4 over a loop device in /dev/shm
(a device nobody else uses, so the throttle sets a known rate); ``--device disk`` uses ``--dir``.
Needs root (loop device, blkio cgroup). Prints markdown tables and PASS/FAIL (exit 0/1).

    .venv/bin/python scripts/bench_compare.py [--pairs 20] [--repeats 1,3,6] [--size 16MiB]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_starvation import BLKIO, loop_filesystem, whole_disk

from iobench import history as stored
from iobench.compare import RUN_TAIL_DF, Noise, history_df, prediction_p_value, t_sf
from iobench.core.units import format_rate, parse_size
from iobench.result.file import load

REPO = Path(__file__).resolve().parents[1]
READ_PHASE = "seq-read"
CGROUP = "iobench-cmp-helper"


def run_once(
    args, where: str, out: Path, repeat: int, history: Path, cgroup=None, size=None, time="none"
) -> dict:
    """One ``iobench run`` appended to ``history`` (in ``cgroup`` when given); its result.
    ``time``: the phases' ``time=`` (``none``: size-based, each file moved once; a duration:
    the workload's own time-based phases, which end once steady)."""
    argv = [sys.executable, "-m", "iobench", "run", "sequential-write", where,
            "--set", f"size={size or args.size}", "--set", f"jobs={args.jobs}", "--set", "block_sizes=[]",
            "--set", "jobs_sweep=[]", "--set", f"time={time}", "--repeat", str(repeat),
            "--output", str(out), "--history", str(history), "--quiet"]  # fmt: skip

    def join_group() -> None:  # in the child, before exec: it and its workers are throttled
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        argv, env=env, cwd=REPO, capture_output=True, text=True, preexec_fn=join_group
    )
    if proc.returncode != 0:
        raise SystemExit(f"iobench run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads((out / "result.json").read_text())


COMPARE_OPTS: list[str] = []  # --compare-opts: the options every comparison is given


def compare(a: Path, b: Path, history: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "iobench", "compare", str(a), str(b), "--format", "json",
            "--history", str(history), *COMPARE_OPTS, *extra]  # fmt: skip
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"iobench compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.returncode, json.loads(proc.stdout)


def read_bw(res: dict[str, Any]) -> float:
    return next(p["bandwidth_bps"] for p in res["phases"] if p["name"] == READ_PHASE)


@contextlib.contextmanager
def read_throttle(where: str, rate: int):
    """The blkio cgroup ``iobench-cmp-helper`` limiting reads from the device under ``where``;
    removed afterwards, whatever happens."""
    group = Path(BLKIO) / CGROUP
    group.mkdir()
    try:
        set_read_rate(group, where, rate)
        yield group
    finally:
        for _ in range(50):  # the run's processes may take a moment to be reaped
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        else:
            print(f"WARNING: could not remove cgroup {group}", file=sys.stderr)


def tests_used(report: dict[str, Any]) -> str:
    seen = {r["test"] or "none" for r in report["rows"] if r["mark"] != "x"}
    return "+".join(sorted(seen))


class Tally:
    """One line of the identical-pairs table: a repeat count and a history mode."""

    def __init__(self, repeat: int, mode: str):
        self.repeat, self.mode = repeat, mode
        self.pairs = self.regressions = self.flagged = self.unconfirmed = self.improved = 0
        self.tests: set[str] = set()
        self.min_p: float | None = None

    def add(self, code: int, report: dict[str, Any]) -> bool:
        self.pairs += 1
        regs = report["regressions"]
        self.regressions += len(regs)
        self.flagged += bool(regs) or code != 0
        self.unconfirmed += len(report["unconfirmed"])
        self.improved += len(report["improvements"])
        self.tests.add(tests_used(report))
        ps = [r["p_adjusted"] for r in report["rows"] if r.get("p_adjusted") is not None]
        if ps:
            self.min_p = min(ps + ([self.min_p] if self.min_p is not None else []))
        for r in [*regs, *report["improvements"]]:  # what a false alarm was: printed as found
            row = next((x for x in report["rows"] if f"{x['phase']}.{x['metric']}" == r), None)
            if isinstance(row, dict):
                print(f"  flagged ({self.mode}): {row.get('phase')}.{row.get('metric')} "
                      f"{row.get('baseline'):.4g} -> {row.get('current'):.4g}, "
                      f"{row.get('test')} p={row.get('p_value'):.2g}, corrected {row.get('p_adjusted'):.2g}",
                      flush=True)  # fmt: skip
        return code == 0 and not regs

    def line(self) -> str:
        p = "-" if self.min_p is None else f"{self.min_p:.2g}"
        return (
            f"| {self.repeat} | {self.mode} | {self.pairs} | {self.flagged} | {self.regressions} "
            f"| {self.improved} | {self.unconfirmed} | {p} | {', '.join(sorted(self.tests))} |"
        )


def throttled_line(label: str, code: int, report: dict, fast: dict, slow: dict) -> tuple:
    regs = report["regressions"]
    ok = (
        code == 1
        and f"{READ_PHASE}.bandwidth" in regs
        and all(r.startswith(READ_PHASE + ".") for r in regs)
    )
    read = next(
        r for r in report["rows"] if r["phase"] == READ_PHASE and r["metric"] == "bandwidth"
    )
    p = read.get("p_adjusted")
    runs = (report.get("noise_basis") or {}).get("runs", 0)
    text = (
        f"| {label} | {runs} | {format_rate(read_bw(fast))} → {format_rate(read_bw(slow))} "
        f"| {read['test']}, sd ×{math.exp(read['sd_log'] or 0):.3g} | {'-' if p is None else f'{p:.2g}'} | {len(regs)}: {', '.join(regs)} "
        f"| {code} | {'yes' if ok else 'NO'} |"
    )
    return ok, text


def run_logs(out: Path) -> dict[str, float]:
    """One run's ln(median of its repeats) per ``phase.metric``: the values the history's test
    holds a run to. IOPS (bandwidth ÷ block size: the same residual) and the tail percentiles
    (too few operations a repeat to be judged at these sizes) are left out."""
    values: dict[str, list[float]] = {}
    for row in stored.metric_rows(load(out / "result.json")):
        v = row["value"]
        if row["aggregate"] or "iops" in row["metric"] or row["metric"].startswith("latency_p99"):
            continue
        if v is not None and math.isfinite(v) and v > 0:
            values.setdefault(f"{row['phase']}.{row['metric']}", []).append(v)
    return {k: math.log(statistics.median(v)) for k, v in values.items()}


FAR = 5.0  # |t| beyond this: the far tail, counted beside what each reference expects there


class Tails:
    """How far each run of a history lay from the runs before it: the statistic of
    ``prediction_p_value``, t = (ln x - mean) / (s sqrt(1 + 1/k)), of every run with at least
    3 before it, per metric, and how many of them each reference (Student's k - 1 df; at most
    RUN_TAIL_DF) puts beyond p < 0.01 and p < 0.001, against the count such a level gives."""

    def __init__(self, repeat: int):
        self.repeat = repeat
        self.runs: list[dict[str, float]] = []
        self.held: list[tuple[float, Noise]] = []  # (ln x, the runs before it)

    def add(self, logs: dict[str, float]) -> None:
        for key, x in logs.items():
            before = [r[key] for r in self.runs if key in r]
            if len(before) >= 3 and statistics.stdev(before) > 0:
                noise = Noise(len(before), statistics.stdev(before), statistics.fmean(before))
                self.held.append((x, noise))
        self.runs.append(logs)

    def t(self, x: float, n: Noise) -> float:
        assert n.mean_log is not None
        return abs(x - n.mean_log) / (n.sd_log * math.sqrt(1 + 1 / n.runs))

    def below(self, level: float, tail_df) -> int:
        return sum((prediction_p_value(x, n, tail_df) or 1.0) < level for x, n in self.held)

    def line(self) -> str:
        n = len(self.held)
        ts = [self.t(x, noise) for x, noise in self.held]
        dfs = (None, RUN_TAIL_DF)
        cells = [f"{self.below(lv, df)}" for lv in (0.01, 0.001) for df in dfs]
        exp = [sum(2 * t_sf(FAR, history_df(h.runs, df)) for _, h in self.held) for df in dfs]
        return (f"| {self.repeat} | {len(self.runs)} | {n} | {max(ts, default=0.0):.2f} "
                f"| {0.01 * n:.1f} | {cells[0]} | {cells[1]} | {0.001 * n:.2f} | {cells[2]} "
                f"| {cells[3]} | {sum(t > FAR for t in ts)} | {exp[0]:.3f} | {exp[1]:.2f} |")  # fmt: skip


def print_tails(tails: list[Tails]) -> None:
    print(
        "\nEach run against the runs of its history before it (from the 4th run on): "
        "residuals beyond a level, by the reference t distribution's degrees of freedom\n"
    )
    print("| repeat | runs | residuals | largest t | expected at p<0.01 | k-1 df | at most 4 df "
          "| expected at p<0.001 | k-1 df | at most 4 df | beyond t 5 | expected, k-1 df "
          "| expected, at most 4 df |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print("\n".join(t.line() for t in tails))


def identical_pairs(
    args, where: str, work: Path, repeat: int, tallies: list, tails: list
) -> bool:  # fmt: skip
    history, empty = work / f"history-r{repeat}", work / "empty-history"
    history.mkdir()
    with_h, without = Tally(repeat, "history"), Tally(repeat, "none")
    normal = Tally(repeat, "history, k-1 df")  # the same history, its tail not held at 4 df
    tail = Tails(repeat)
    tails.append(tail)
    ok = True
    for i in range(1, args.pairs + 1):
        a, b = work / f"r{repeat}-pair{i}-a", work / f"r{repeat}-pair{i}-b"
        run_once(args, where, a, repeat, history)
        run_once(args, where, b, repeat, history)
        tail.add(run_logs(a))
        tail.add(run_logs(b))
        ok &= with_h.add(*compare(a, b, history))
        ok &= without.add(*compare(a, b, empty))
        normal.add(*compare(a, b, history, "--tail-df", "normal"))  # shown, not judged
        print(
            f"repeat {repeat} pair {i}: {with_h.regressions} / {without.regressions} regressions",
            flush=True,
        )
    tallies += [with_h, without, normal]
    return ok


def set_read_rate(group: Path, where: str, rate: int) -> None:
    dev = whole_disk(os.stat(where).st_dev)
    (group / "blkio.throttle.read_bps_device").write_text(f"{dev} {rate}\n")


def throttled(args, where: str, work: Path) -> tuple[bool, list[str], int]:
    """The throttled comparisons at ``--throttle-size`` (the throttle works in 100 ms slices:
    a read must last well over that for a rate to hold). With ``--storage-rate`` every run of
    this part reads through a throttle at that rate (a storage of a steady rate, the loop
    device's memory-bound swings taken out) and the slow runs at half the median of the 5
    earlier runs."""
    lines, ok = [], True
    empty, h5 = work / "empty-history", work / "history-5"
    h5.mkdir()
    size = args.throttle_size
    timed = dict(size=size, time=args.throttle_time)
    storage = parse_size(args.storage_rate) if args.storage_rate else None
    with contextlib.ExitStack() as stack:
        group = stack.enter_context(read_throttle(where, storage)) if storage else None
        what = "unthrottled" if storage is None else f"at the storage's {format_rate(storage)}"
        rates = [read_bw(run_once(args, where, work / f"h5-{i}", 1, h5, group, **timed))
                 for i in range(5)]  # fmt: skip
        rate = int(statistics.median(rates) / 2)
        print(f"reads of the 5 earlier runs ({what}): " + ", ".join(map(format_rate, rates)))
        print(f"throttle: reads to {format_rate(rate)} (half the median of those 5 runs)")
        for repeat, hist, label in ((3, empty, "--repeat 3, no history"),
                                    (1, h5, "--repeat 1, 5 earlier runs")):  # fmt: skip
            fast, slow = work / f"fast-r{repeat}", work / f"slow-r{repeat}"
            scratch = work / f"scratch-r{repeat}"
            scratch.mkdir()
            r_fast = run_once(args, where, fast, repeat, scratch, group, **timed)
            if group is not None and storage is not None:
                set_read_rate(group, where, rate)
                r_slow = run_once(args, where, slow, repeat, scratch, group, **timed)
                set_read_rate(group, where, storage)
            else:
                with read_throttle(where, rate) as g:
                    r_slow = run_once(args, where, slow, repeat, scratch, g, **timed)
            code, report = compare(fast, slow, hist)
            good, text = throttled_line(label, code, report, r_fast, r_slow)
            ok &= good
            lines.append(text)
            print(text, flush=True)
            if repeat == 1:  # the same comparison with Student's k - 1: shown, not judged
                code, report = compare(fast, slow, hist, "--tail-df", "normal")
                text = throttled_line(label + " (k-1 df)", code, report, r_fast, r_slow)[1]
                lines.append(text)
                print(text, flush=True)
    return ok, lines, rate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--repeats", default="1,3,6", help="repeat counts, comma-separated")
    ap.add_argument("--device", choices=("loop", "disk"), default="loop")
    ap.add_argument("--dir", default="/var/tmp", help="the target's parent with --device disk")
    ap.add_argument("--size", default="16MiB", help="bytes each worker writes and reads")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--throttle-size", default="256MiB", help="size= of the throttled runs")
    ap.add_argument("--throttle-time", default="none", help="time= of the throttled runs "
                    "(none: size-based; e.g. 20s: the workload's time-based phases, ended once "
                    "steady)")  # fmt: skip
    ap.add_argument(
        "--storage-rate",
        default=None,
        help="throttle every run of the throttled "
        "part to this read rate (a storage of a steady rate), the slow ones to half",
    )
    ap.add_argument("--skip-pairs", action="store_true", help="only the throttled comparisons")
    ap.add_argument("--compare-opts", default="", help="options for every `iobench compare`, "
                    "e.g. '--correction bh'")  # fmt: skip
    args = ap.parse_args()
    COMPARE_OPTS[:] = args.compare_opts.split()
    if os.geteuid() != 0 or not os.path.isdir(BLKIO):
        print("needs root and the cgroup v1 blkio controller (the throttle)")
        return 2
    repeats = [int(x) for x in args.repeats.split(",")]
    work = Path(tempfile.mkdtemp(prefix="iobench-cmp-helper-", dir="/var/tmp"))
    tallies: list[Tally] = []
    tails: list[Tails] = []
    ok = True
    started = time.monotonic()
    try:
        with contextlib.ExitStack() as stack:
            if args.device == "loop":
                biggest = max(parse_size(args.size), parse_size(args.throttle_size))
                size = 2 * args.jobs * biggest + (256 << 20)
                where = stack.enter_context(loop_filesystem(size))
                print(f"device: ext4 on a loop device over /dev/shm, mounted at {where}")
            else:
                where = tempfile.mkdtemp(prefix="target-", dir=args.dir)
                stack.callback(subprocess.run, ["rm", "-rf", where], check=False)
            print(
                f"workload: sequential-write size={args.size} jobs={args.jobs}, no sweeps, O_DIRECT"
            )
            (work / "empty-history").mkdir()
            for repeat in [] if args.skip_pairs else repeats:
                ok &= identical_pairs(args, where, work, repeat, tallies, tails)
            good, lines, rate = throttled(args, where, work)
            ok &= good
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    print(f"\n{time.monotonic() - started:.0f} s\n")
    print("| repeat | history | pairs | pairs flagged | regressions | improvements "
          "| unconfirmed | least corrected p | tests |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|---:|---|")
    print("\n".join(t.line() for t in tallies))
    print_tails(tails)
    print(f"\nreads throttled to {format_rate(rate)}:\n")
    print("| comparison | earlier runs | seq-read bandwidth | test | corrected p | regressions "
          "| exit | pass |")  # fmt: skip
    print("|---|---:|---|---|---:|---|---:|---|")
    print("\n".join(lines))
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
