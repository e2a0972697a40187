#!/usr/bin/env python
"""Does ``iobench compare`` know its noise? Identical runs must not regress; slow storage must.

Runs ``iobench run sequential-write`` (default size=64MiB, jobs=2, no sweeps, O_DIRECT, one
repeat) as ``--pairs`` (10) pairs of identical runs back to back, all into one fresh history,
and compares each pair (``iobench compare A B --format json``): the first pairs have no history
and one repeat a side, so their moves are "unconfirmed"; later ones have the earlier runs'
noise floor. Then an unthrottled run against one whose reads are throttled to ``--rate``
(40 MiB/s) with the blkio controller (the runs use O_DIRECT, so the throttle bites), compared
twice: with the pairs' history and with none. Prints one table row per comparison (markdown);
exits 0 when the pairs report 0 regressions and the throttled run is a regression naming only
read metrics (seq-read.bandwidth among them), else 1.

``--device loop`` (default) puts the target on a private ext4 over a loop device in /dev/shm:
the throttle then limits a device nobody else uses (the shared virtual disk swung ×4 over six
identical runs here, and its slow moments bring an unthrottled read near a throttled one).
``--device disk`` uses ``--dir`` on the local disk. Needs root (loop device, blkio cgroup).

    .venv/bin/python scripts/bench_compare.py [--pairs 10] [--device loop|disk] [--rate 40MiB]
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
from typing import Any

from bench_starvation import BLKIO, loop_filesystem, whole_disk

from iobench.units import format_rate, parse_size

REPO = Path(__file__).resolve().parents[1]
READ_PHASE = "seq-read"


def iobench(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "iobench", *args], env=env, cwd=REPO, capture_output=True,
        text=True,
    )  # fmt: skip


def run_once(args, env, where: str, out: Path, cgroup: Path | None = None) -> dict[str, Any]:
    """One ``iobench run`` (in ``cgroup`` when given); its result.json."""
    argv = [sys.executable, "-m", "iobench", "run", "sequential-write", where,
            "--set", f"size={args.size}", "--set", f"jobs={args.jobs}", "--set", "block_sizes=[]",
            "--set", "jobs_sweep=[]", "--set", "time=none", "--repeat", str(args.repeat),
            "--output", str(out),
            "--quiet"]  # fmt: skip

    def join_group() -> None:  # in the child, before exec: it and its workers are throttled
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    proc = subprocess.run(
        argv, env=env, cwd=REPO, capture_output=True, text=True, preexec_fn=join_group
    )
    if proc.returncode != 0:
        raise SystemExit(f"iobench run failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads((out / "result.json").read_text())


def compare(env, a: Path, b: Path, history: str) -> tuple[int, dict[str, Any]]:
    proc = iobench(env, "compare", str(a), str(b), "--format", "json", "--history", history)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"iobench compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc.returncode, json.loads(proc.stdout)


def bandwidth(res: dict[str, Any], phase: str) -> float:
    return next(p["bandwidth_bps"] for p in res["phases"] if p["name"] == phase)


@contextlib.contextmanager
def read_throttle(where: str, rate: int):
    """A blkio cgroup limiting reads from the device under ``where``; removed afterwards."""
    group = Path(BLKIO) / f"iobench-bench-compare-{os.getpid()}"
    group.mkdir()
    try:
        dev = whole_disk(os.stat(where).st_dev)
        (group / "blkio.throttle.read_bps_device").write_text(f"{dev} {rate}\n")
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


def evidence(r: dict[str, Any]) -> str:
    """What decided a compare row (its JSON form): the test, the noise floor, the margin."""
    if r["test"] == "history":
        text = f"noise ×{r['noise']['factor']:.3g} ({r['noise']['runs']} runs)"
    elif r["test"]:
        text = r["test"]
    else:
        text = "no test"
    return text + ("; beyond the margin" if r["margin"] else "")


def row(label: str, code: int, report: dict[str, Any], a: dict, b: dict) -> str:
    marks = {r["phase"] + "." + r["metric"]: r["mark"] for r in report["rows"]}
    read = next(
        r for r in report["rows"] if r["phase"] == READ_PHASE and r["metric"] == "bandwidth"
    )
    regs = report["regressions"]
    runs = (report.get("noise_basis") or {}).get("runs", 0)
    w = [format_rate(bandwidth(x, "seq-write")) for x in (a, b)]
    r = [format_rate(bandwidth(x, READ_PHASE)) for x in (a, b)]
    return (
        f"| {label} | {runs} | {w[0]} → {w[1]} `{marks.get('seq-write.bandwidth', '')}` "
        f"| {r[0]} → {r[1]} `{marks.get(READ_PHASE + '.bandwidth', '')}` | {evidence(read)} "
        f"| {len(regs)}{': ' + ', '.join(regs) if regs else ''} "
        f"| {len(report['unconfirmed'])} | {code} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=10)
    ap.add_argument("--device", choices=("loop", "disk"), default="loop")
    ap.add_argument("--dir", default="/var/tmp", help="the target's parent with --device disk")
    ap.add_argument("--size", default="64MiB", help="bytes each worker writes and reads")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--rate", default="40MiB", help="the read throttle, bytes/s")
    args = ap.parse_args()
    if os.geteuid() != 0 or not os.path.isdir(BLKIO):
        print("needs root and the cgroup v1 blkio controller (the throttle)")
        return 2
    rate = parse_size(args.rate)
    work = Path(tempfile.mkdtemp(prefix="iobench-bench-compare-", dir="/var/tmp"))
    history = str(work / "history")
    empty_history = str(work / "no-history")
    env = {**os.environ, "PYTHONPATH": str(REPO), "IOBENCH_HISTORY": history}
    lines = [
        "| comparison | earlier runs | seq-write bandwidth | seq-read bandwidth "
        "| its evidence | regressions | unconfirmed | exit |",
        "|---|---:|---|---|---|---|---:|---:|",
    ]
    ok = True
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        if args.device == "loop":
            size = 2 * args.jobs * parse_size(args.size) + (256 << 20)
            where = stack.enter_context(loop_filesystem(size))
            print(f"device: ext4 on a loop device over /dev/shm, mounted at {where}")
        else:
            where = tempfile.mkdtemp(prefix="target-", dir=args.dir)
            print(f"device: the local disk under {where}")
        print(
            f"workload: sequential-write size={args.size} jobs={args.jobs}, no sweeps, "
            f"O_DIRECT, --repeat {args.repeat}; history {history}"
        )
        for i in range(1, args.pairs + 1):
            a, b = work / f"pair{i}-a", work / f"pair{i}-b"
            ra, rb = run_once(args, env, where, a), run_once(args, env, where, b)
            code, report = compare(env, a, b, history)
            ok &= code == 0 and not report["regressions"]
            lines.append(row(f"identical pair {i}", code, report, ra, rb))
            print(lines[-1], flush=True)
        fast, slow = work / "unthrottled", work / "throttled"
        r_fast = run_once(args, env, where, fast)
        with read_throttle(where, rate) as group:
            r_slow = run_once(args, env, where, slow, group)
        for label, hist in (("with the pairs' history", history), ("no history", empty_history)):
            code, report = compare(env, fast, slow, hist)
            regs = set(report["regressions"])
            named = f"{READ_PHASE}.bandwidth" in regs
            ok &= code == 1 and named and all(r.startswith(READ_PHASE + ".") for r in regs)
            lines.append(
                row(
                    f"reads throttled to {format_rate(rate)}, {label}", code, report, r_fast, r_slow
                )
            )
            print(lines[-1], flush=True)
    print(f"\n{time.monotonic() - started:.0f} s\n")
    print("\n".join(lines))
    print("\nPASS" if ok else "\nFAIL")
    subprocess.run(["rm", "-rf", str(work)], check=False)
    if args.device == "disk":
        subprocess.run(["rm", "-rf", where], check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
