#!/usr/bin/env python
"""Validate the checkpoint model's save and load times on storage of a known speed.

Puts this process (its rank threads included) in a blkio cgroup throttled to known write and
read rates (default 100 MiB/s and 200 MiB/s) on the device under the run directory: a private
ext4 over a loop device in /dev/shm by default (``--device loop``, root), whose only limit is
the throttle. torch.save writes through the page cache and fsyncs every file: the fsync
submits the dirty pages from the writer's own context, so the throttle applies (the
checkpoints stay far below the kernel's background-writeback threshold). Reads follow a
page-cache drop (fadvise DONTNEED) of every file.

For each rank count (default 2 and 4) it runs ``iobench checkpoint``'s workload once at a
small probe size, feeds what it measured (aggregate save/load rates, create/open rates) to the
checkpoint model exactly as ``iobench checkpoint`` does for ``--scale``, predicts the save and
load times of three larger checkpoints (default 512 MiB, 768 MiB, 1 GiB; the probe
256 MiB, long enough that the throttle's first-slice burst is a small part of it), then measures
them. Prints predicted vs measured per case, and the plain-throttle figure (bytes ÷ the
throttle) beside it; exits 1 when any prediction is off by more than 5 %.

Whether the checkpoint write itself is storage-bound (``torch.save`` within 10 % of a plain
sequential write of the same files by the same writers, throttled and at memory speed) is
``scripts/bench_ckpt_write.py``.

    .venv/bin/python scripts/bench_checkpoint.py [--device loop|disk] [--ranks 2,4]
        [--sizes 512MiB,768MiB,1GiB] [--probe 256MiB] [--write-rate 100MiB] [--read-rate 200MiB]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_starvation import NICE, loop_filesystem, whole_disk

from iobench.checkpoint.estimate import build
from iobench.checkpoint.spec import load_checkpoint_profile
from iobench.core.units import format_bytes, format_rate, parse_size
from iobench.run.runner import run_workload
from iobench.spec.workload import load_workload

BLKIO = "/sys/fs/cgroup/blkio"
TOLERANCE = 0.05
MODEL_SHARE = 1 / 7  # weights : optimizer state = 1 : 6, as MLPerf's llama3 figures (≈ 15 : 90)


@contextlib.contextmanager
def throttle(path: str, read_bps: int, write_bps: int) -> Iterator[str | None]:
    """This process in a blkio cgroup with read and write limits on the disk under ``path``."""
    if os.geteuid() != 0 or not os.path.isdir(BLKIO):
        print("NOTE: no root or no cgroup v1 blkio: running unthrottled (noisy)")
        yield None
        return
    dev = whole_disk(os.stat(path).st_dev)
    cg = os.path.join(BLKIO, f"iobench-bench-ckpt-{os.getpid()}")
    os.mkdir(cg)
    try:
        with open(os.path.join(cg, "blkio.throttle.read_bps_device"), "w") as f:
            f.write(f"{dev} {read_bps}\n")
        with open(os.path.join(cg, "blkio.throttle.write_bps_device"), "w") as f:
            f.write(f"{dev} {write_bps}\n")
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        yield f"{dev}: writes {format_rate(write_bps)}, reads {format_rate(read_bps)}"
    finally:
        with open(os.path.join(BLKIO, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
        else:
            print(f"WARNING: could not remove cgroup {cg}", file=sys.stderr)


def model_file(tmp: str, ranks: int, size: int) -> str:
    """A checkpoint profile of ``size`` bytes over ``ranks`` ranks (1 : 6 weights : state)."""
    path = os.path.join(tmp, f"bench-r{ranks}-{size}.toml")
    model = int(size * MODEL_SHARE)
    with open(path, "w") as f:
        f.write(
            f'description = "bench"\nranks = {ranks}\nmodel_size = {model}\n'
            f"optimizer_size = {size - model}\n"
        )
    return path


def run(where: str, model: str, *, metadata: bool, baseline: bool = False):
    wl = load_workload(
        "llm-checkpoint",
        {"model": model, "scale": 1, "metadata": metadata, "baseline": baseline, "api": "torch",
         "tensor_size": "16MiB"},
    )  # fmt: skip
    outcome = run_workload(wl, where, save=False)
    if outcome.error is not None:
        raise outcome.error
    return outcome.run


def phase(run, name):
    return next(p for p in run.phases if p.name == name)


def validate(args, where: str, tmp: str, ranks_list, sizes, probe, wr, rr) -> tuple[list, bool]:
    """Median of ``args.repeat`` runs for the probe's predictions and for each measurement:
    on a small shared host one run alone swings by ±10 %."""
    rows, ok = [], True
    n = args.repeat
    with throttle(where, rr, wr) as thr:
        print(f"throttle: {thr or 'none'}; median of {n} runs per figure")
        # a first write of the largest size, unmeasured: the loop device's backing pages in
        # /dev/shm are allocated on first touch, which would slow the first large run
        run(where, model_file(tmp, ranks_list[0], max(sizes)), metadata=False)
        for ranks in ranks_list:
            probes = [run(where, model_file(tmp, ranks, probe), metadata=True) for _ in range(n)]
            for pr in probes:
                print(
                    f"probe {ranks} ranks, {format_bytes(probe)}: save "
                    f"{format_rate(phase(pr, 'ckpt-save').bandwidth_bps)}, load "
                    f"{format_rate(phase(pr, 'ckpt-load').bandwidth_bps)}, creates "
                    f"{phase(pr, 'ckpt-create').iops:,.0f}/s"
                )
            for size in sizes:
                spec = load_checkpoint_profile(model_file(tmp, ranks, size)).spec
                ests = [build(pr, spec, scale=probe / size)["estimate"] for pr in probes]
                runs = [run(where, model_file(tmp, ranks, size), metadata=False) for _ in range(n)]
                for what, key, name, rate in (
                    ("save", ("stall", "sync_s"), "ckpt-save", wr),
                    ("load", ("recovery", "load_s"), "ckpt-load", rr),
                ):
                    pred = statistics.median(e[key[0]][key[1]] for e in ests)
                    times = [phase(g, name).elapsed_s for g in runs]
                    meas = statistics.median(times)
                    err = pred / meas - 1
                    ok &= abs(err) <= TOLERANCE
                    rows.append((ranks, size, what, pred, meas, err, size / rate))
                    print(
                        f"  {ranks} ranks {format_bytes(size):>10} {what}: predicted "
                        f"{pred:6.2f} s measured {meas:6.2f} s error {err * 100:+5.1f} % "
                        f"(bytes ÷ throttle {size / rate:6.2f} s; runs "
                        f"{', '.join(f'{t:.2f}' for t in times)})",
                        flush=True,
                    )
    return rows, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp", help="where the run directory goes (disk)")
    ap.add_argument("--device", choices=("disk", "loop"), default="loop")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--sizes", default="512MiB,768MiB,1GiB")
    ap.add_argument("--probe", default="256MiB")
    ap.add_argument("--write-rate", default="100MiB")
    ap.add_argument("--read-rate", default="200MiB")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    args = ap.parse_args()
    ranks_list = [int(r) for r in args.ranks.split(",")]
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    probe, wr, rr = (parse_size(x) for x in (args.probe, args.write_rate, args.read_rate))
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
    with contextlib.ExitStack() as stack:
        if args.device == "loop":
            if os.geteuid() != 0:
                print("--device loop needs root")
                return 2
            where = stack.enter_context(loop_filesystem(int(max(sizes) * 1.5) + (512 << 20)))
            print(f"device: ext4 on a loop device over /dev/shm, mounted at {where}")
        else:
            where = args.dir
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="iobench-bench-ckpt-"))
        rows, ok = validate(args, where, tmp, ranks_list, sizes, probe, wr, rr)
    print()
    if rows:
        print("| ranks | checkpoint | op | predicted s | measured s | error | bytes ÷ throttle s |")
        print("|---:|---:|---|---:|---:|---:|---:|")
    for ranks, size, what, pred, meas, err, naive in rows:
        print(
            f"| {ranks} | {format_bytes(size)} | {what} | {pred:.2f} | {meas:.2f} | "
            f"{err * 100:+.1f} % | {naive:.2f} |"
        )
    print()
    worst = max((abs(r[5]) for r in rows), default=0.0)
    print(f"worst save/load prediction error {worst * 100:.1f} % (tolerance {TOLERANCE:.0%})")
    if not ok:
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
