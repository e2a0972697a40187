"""Two writers on one blkio write limit: how the limit is split (issue 27, the share rule).

Each case runs two jobs at once inside one cgroup v1 blkio group whose write throttle is
``--write`` (root only; the group is removed in a ``finally``). A job is ``streams`` threads,
each writing files of ``file`` bytes in 1 MiB buffered writes, fsync and unlink per file, as
the checkpoint writer (one thread per rank, fsync per file) and ``--beside writer`` (one
thread, 8 MiB files) do. Each job's rate is the bytes of the files whose fsync ended inside
the window both ran in (less a second at each end), over the window.

Printed per case beside the measured split: ``contention.queue_share`` (weight: streams ×
file bytes, the bytes each job has queued at once), the demand-proportional
``contention.share`` (both want the whole limit: half each) and a split by stream count.
The three cases tell the three apart.

    sudo PYTHONPATH=$PWD .venv/bin/python scripts/validate_write_share.py [--write 10MiB] [--time 12]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from throttle import in_group, throttled, why_unavailable  # noqa: E402

MiB = 1 << 20
# name, (streams, file MiB) of job A, of job B
CASES = [
    ("a save beside one writer", (8, 4), (1, 8)),
    ("small files beside big", (1, 2), (1, 8)),
    ("many streams, same bytes queued", (4, 1), (1, 4)),
]


def job(streams: int, file_bytes: int, seconds: float, where: str) -> None:
    """The child: ``streams`` writer threads; prints the (fsync end, bytes) of every file."""
    done: list[tuple[float, int]] = []
    stop = time.perf_counter() + seconds
    block = os.urandom(MiB)

    def writer(i: int) -> None:
        k = 0
        while time.perf_counter() < stop:
            name = os.path.join(where, f"{os.getpid()}-{i}-{k}")
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                for _ in range(file_bytes // MiB):
                    os.write(fd, block)
                os.fsync(fd)
                done.append((time.perf_counter(), file_bytes))
            finally:
                os.close(fd)
                os.unlink(name)
            k += 1

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(streams)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"start": start, "end": time.perf_counter(), "files": done}))


def rate(res: dict, lo: float, hi: float) -> float:
    return sum(n for t, n in res["files"] if lo <= t < hi) / (hi - lo)


def run(group: Path, where: Path, a: tuple[int, int], b: tuple[int, int], secs: float) -> list:
    procs = []
    for streams, mib in (a, b):
        argv = [sys.executable, __file__, "--job", str(streams), str(mib), str(secs), str(where)]
        procs.append(subprocess.Popen(in_group(group, argv), stdout=subprocess.PIPE, text=True))
    res = [json.loads(p.communicate(timeout=secs + 120)[0]) for p in procs]
    lo = max(r["start"] for r in res) + 1.0
    hi = min(r["end"] for r in res) - 1.0
    return [rate(r, lo, hi) for r in res]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", default="10MiB")
    ap.add_argument("--time", type=float, default=12.0)
    ap.add_argument("--job", nargs=4, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.job:
        job(int(a.job[0]), int(a.job[1]) * MiB, float(a.job[2]), a.job[3])
        return 0
    from iobench.checkpoint.contention import queue_share, share
    from iobench.core.units import parse_size

    base = Path(tempfile.mkdtemp(prefix="iobench-write-share-", dir="/var/tmp"))
    why = why_unavailable(str(base))
    if why:
        print(f"skipped: {why}", file=sys.stderr)
        return 2
    cap = parse_size(a.write)
    print(
        f"write throttle {a.write}/s on {base}, {a.time:g} s per case, load {os.getloadavg()[0]:.1f}"
    )
    print("| case | job A (streams × file) | job B | measured A / B MiB/s | queued-bytes rule | "
          "demand rule | stream-count rule | load (1 min) |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    try:
        with throttled(str(base), 1 << 40, cap, prefix="wshare") as group:
            for name, ja, jb in CASES:
                got = run(group, base, ja, jb, a.time)
                q = queue_share([cap, cap], [ja[0] * ja[1] * MiB, jb[0] * jb[1] * MiB], cap)
                d = share(cap, cap, cap)
                s = [cap * ja[0] / (ja[0] + jb[0]), cap * jb[0] / (ja[0] + jb[0])]
                cells = [f"{x[0] / MiB:.1f} / {x[1] / MiB:.1f}" for x in (got, q, d, s)]
                print(f"| {name} | {ja[0]} × {ja[1]} MiB | {jb[0]} × {jb[1]} MiB | "
                      f"{' | '.join(cells)} | {os.getloadavg()[0]:.1f} |", flush=True)  # fmt: skip
    finally:
        for p in base.iterdir():
            p.unlink()
        base.rmdir()
    return 0


if __name__ == "__main__":
    sys.exit(main())
