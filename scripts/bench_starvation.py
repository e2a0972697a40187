#!/usr/bin/env python
"""Validate the starvation model against the real DataLoader on storage of a known speed.

Lays out a dataset (default 600 × 2 MiB raw files) in a run directory under /var/tmp, puts
this process (and so its ranks and DataLoader workers) in a blkio cgroup throttled to a known
read rate (default 200 MiB/s; O_DIRECT reads, so the device really is the bottleneck), probes
the storage with the same files at 1 reader and at the loader's concurrency, measures the
loader's own costs on cached data, then for 1 and 2 emulated accelerators and compute times
spanning AU ≈ 20 % to ≈ 100 % predicts the AU with the model and measures it with the real
loader. 600 files: at 2 accelerators each rank still does 37 steps, so the start of a run
(worker start-up, the prefetch head start) is a small part of it.

Prints predicted vs measured AU per case and the error in AU points; exits 1 when any case
is off by more than the tolerance (5 points). Needs root for the throttle (and raises its
own priority then: other jobs on a small shared host would otherwise decide the figures);
without root the run goes on unthrottled and the comparison is noisy. On a shared host the
local disk's speed also depends on the neighbours' I/O: ``--device loop`` puts the dataset on
a private ext4 over a loop device in /dev/shm, throttled the same way, whose only limit is
the throttle.

    .venv/bin/python scripts/bench_starvation.py [--device disk|loop] [--files 600] [--rate 200MiB]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace

from iobench import loader as ld
from iobench.core.units import format_rate, parse_size
from iobench.engines.registry import get_engine
from iobench.run.runner import PhaseRunner
from iobench.spec.workload import Profile
from iobench.target import StopFlag, create_run_dir, remove_run_dir, resolve

BLKIO = "/sys/fs/cgroup/blkio"
TOLERANCE = 0.05
NICE = -15
FRACTIONS = (0.2, 0.4, 0.6, 0.8, 1.0, 1.5)  # compute ÷ storage time per step


def whole_disk(dev: int) -> str:
    """MAJ:MIN of the disk holding ``dev`` (the throttle wants a whole disk, not a partition)."""
    mm = f"{os.major(dev)}:{os.minor(dev)}"
    sys_dir = f"/sys/dev/block/{mm}"
    if os.path.exists(os.path.join(sys_dir, "partition")):
        parent = os.path.dirname(os.path.realpath(sys_dir))
        with open(os.path.join(parent, "dev")) as f:
            return f.read().strip()
    return mm


def _sh(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def loop_filesystem(size: int) -> Iterator[str]:
    """A fresh ext4 on a loop device over an image in /dev/shm, mounted; all removed after.

    A device nobody else uses: on a shared host the local disk's speed also depends on the
    neighbours' I/O, so a throttle on it is a ceiling, not a known speed.
    """
    shm = tempfile.mkdtemp(prefix="iobench-bench-", dir="/dev/shm")
    img = os.path.join(shm, "disk.img")
    mnt = tempfile.mkdtemp(prefix="iobench-bench-mnt-")
    dev = None
    mounted = False
    try:
        with open(img, "wb") as f:
            f.truncate(size)
        _sh("mkfs.ext4", "-q", "-F", img)
        dev = _sh("losetup", "--find", "--show", img)
        _sh("mount", dev, mnt)
        mounted = True
        yield mnt
    finally:
        if mounted:
            _sh("umount", mnt)
        if dev:
            _sh("losetup", "-d", dev)
        os.rmdir(mnt)
        if os.path.exists(img):
            os.unlink(img)
        os.rmdir(shm)


@contextlib.contextmanager
def blkio_throttle(path: str, read_bps: int) -> Iterator[str | None]:
    """Put this process in a blkio cgroup with a read limit on the disk holding ``path``."""
    if os.geteuid() != 0 or not os.path.isdir(BLKIO):
        why = "not root" if os.geteuid() != 0 else f"no cgroup v1 blkio at {BLKIO}"
        print(f"NOTE: {why}: running unthrottled (the comparison is noisy on this disk)")
        yield None
        return
    dev = whole_disk(os.stat(path).st_dev)
    cg = os.path.join(BLKIO, f"iobench-bench-{os.getpid()}")
    os.mkdir(cg)
    try:
        with open(os.path.join(cg, "blkio.throttle.read_bps_device"), "w") as f:
            f.write(f"{dev} {read_bps}\n")
        with open(os.path.join(cg, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        yield f"{dev} at {format_rate(read_bps)}"
    finally:
        with open(os.path.join(BLKIO, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
        for _ in range(50):  # children (ranks, workers) may take a moment to be reaped
            try:
                os.rmdir(cg)
                break
            except OSError:
                time.sleep(0.1)
        else:
            print(f"WARNING: could not remove cgroup {cg}", file=sys.stderr)


def add_bench_args(ap: argparse.ArgumentParser, fractions: tuple[float, ...]) -> None:
    """The options both model benches take: where, the dataset, the throttle, the loader."""
    ap.add_argument("--dir", default="/var/tmp", help="where the run directory goes (disk)")
    ap.add_argument(
        "--device",
        choices=("disk", "loop"),
        default="disk",
        help="disk: the local disk under --dir; loop: a private ext4 on a loop device over "
        "/dev/shm (root; a known speed even when neighbours use the disk)",
    )
    # 600 files: at 2 GPUs each rank still does 37 steps, so start-up is a small part of a run
    ap.add_argument("--files", type=int, default=600)
    ap.add_argument("--size", default="2MiB", help="bytes per file (one sample each)")
    ap.add_argument("--rate", default="200MiB", help="read throttle, bytes/s (all ranks)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--prefetch", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--fractions", default=",".join(str(f) for f in fractions))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_bench_args(ap, FRACTIONS)
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    size = parse_size(args.size)
    rate = parse_size(args.rate)
    gpus_list = [int(g) for g in args.gpus.split(",")]
    fractions = [float(f) for f in args.fractions.split(",")]
    profile = Profile(
        name="bench", path="", description="", model="bench", accelerator="emulated",
        format="raw", sample_size=size, sample_size_sd=0, samples_per_file=1,
        files=args.files, batch_size=args.batch, compute_s=0.05, workers=args.workers,
        prefetch=args.prefetch, au_min=0.9, epochs=args.epochs,
    )  # fmt: skip
    if os.geteuid() == 0:
        # Other jobs on a small shared host would otherwise decide the figures (sleep
        # overshoot, loader CPU): as root, run ahead of them (ranks and workers inherit it).
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
        print(f"priority: nice {NICE} (root)")
    with contextlib.ExitStack() as stack:
        where = bench_device(stack, args, size)
        if where is None:
            return 2
        return bench(args, where, profile, size, rate, gpus_list, fractions)


def bench_device(stack: contextlib.ExitStack, args: argparse.Namespace, size: int) -> str | None:
    """Where the bench writes: ``--dir``, or with ``--device loop`` a private ext4 (root),
    removed when ``stack`` closes; None when that is refused."""
    if args.device != "loop":
        return args.dir
    if os.geteuid() != 0:
        print("--device loop needs root")
        return None
    where = stack.enter_context(loop_filesystem(int(args.files * size * 1.3) + (256 << 20)))
    print(f"device: ext4 on a loop device over /dev/shm, mounted at {where}")
    return where


def bench(args, where, profile, size, rate, gpus_list, fractions) -> int:
    target = resolve(where)
    create_run_dir(target, f"bench-starvation-{os.getpid()}")
    if target.direct_io is not True:
        remove_run_dir(target)
        print(f"{where} refuses O_DIRECT ({target.direct_reason}): pick another --dir")
        return 2
    rows = []
    try:
        runner = PhaseRunner(target, get_engine("posix"), StopFlag())
        files, sizes = ld.plan_dataset(profile, args.seed)
        index = ld.generate_dataset(runner, profile, files, sizes, args.seed)
        print(
            f"dataset: {index.n_files} files, {index.total_bytes / 2**20:.0f} MiB in {target.run_dir}"
        )
        with blkio_throttle(target.run_dir, rate) as throttle:
            print(f"throttle: {throttle or 'none'}")
            levels = sorted({1} | {args.workers * g for g in gpus_list})
            sweep = ld.probe_storage(runner, index, levels, direct=True, seed=args.seed)
            for p in sweep:
                q = p.latency_quantiles
                print(
                    f"probe: {p.readers} readers {format_rate(p.bandwidth_bps)}, "
                    f"{p.files_per_s:.0f} files/s, latency p50 {q[50] * 1e3:.1f} ms "
                    f"p99 {q[99] * 1e3:.1f} ms"
                )
            for gpus in gpus_list:
                calib = ld.calibrate(
                    index, batch_size=args.batch, workers=args.workers, prefetch=args.prefetch,
                    gpus=gpus, seed=args.seed,
                )  # fmt: skip
                print(
                    f"calibration at {gpus} GPU(s): ceiling {calib.step_s * 1e3:.2f} ms/step, "
                    f"overhead {calib.overhead_s * 1e3:.2f} ms/step, decode "
                    f"{calib.decode_s_per_sample * 1e6:.0f} us/sample, sleep overshoot "
                    f"{calib.sleep_overshoot_s * 1e3:.2f} ms"
                )
                base = ld.loader_params(
                    index, batch_size=args.batch, workers=args.workers, prefetch=args.prefetch,
                    compute_s=1.0, calibration=calib,
                )  # fmt: skip
                storage_s = ld.storage_supply_s(base, sweep, gpus)
                for frac in fractions:
                    c = round(frac * storage_s, 4)
                    params = ld.loader_params(
                        index, batch_size=args.batch, workers=args.workers,
                        prefetch=args.prefetch, compute_s=c, calibration=calib,
                    )  # fmt: skip
                    cfg = ld.LoopConfig(
                        index, "direct", args.batch, args.workers, args.prefetch, c, "sleep",
                        gpus, args.epochs, None, args.seed,
                    )  # fmt: skip
                    ce = ld.emulated_compute_s(c, "sleep", calib)
                    pred = ld.predict(
                        replace(params, compute_s=ce), sweep, gpus, cfg.steps_per_epoch
                    )
                    if frac == fractions[0]:
                        print(f"  model: {pred.basis.split('; per-sample read time: ')[-1]}")
                    t0 = time.perf_counter()
                    res = ld.run_loop(cfg)
                    wall = time.perf_counter() - t0
                    cpu_s = ld.cpu_step_s(c, calib)
                    bound = ld.bound_of(res.au, res.step_s, res.compute_s, cpu_s, storage_s)
                    err = pred.au - res.au
                    rows.append(
                        (gpus, c, pred.au, pred.au_rate_bound, res.au, err, bound, res.steps)
                    )
                    print(
                        f"  gpus {gpus} compute {c * 1e3:6.1f} ms: predicted {pred.au:6.1%} "
                        f"(rate bound {pred.au_rate_bound:6.1%}) measured {res.au:6.1%} "
                        f"error {err * 100:+5.1f} pts  [{bound}, {res.steps} steps, "
                        f"{format_rate(res.bytes_per_s)}, compute measured "
                        f"{res.compute_s * 1e3:.1f} ms, {wall:.1f} s]",
                        flush=True,
                    )
    finally:
        remove_run_dir(target)
    print()
    print("| GPUs | compute/step | predicted AU | rate bound | measured AU | error (pts) | bound |")
    print("|---:|---:|---:|---:|---:|---:|---|")
    for gpus, c, p, rb, m, e, b, _ in rows:
        print(
            f"| {gpus} | {c * 1e3:.1f} ms | {p:.1%} | {rb:.1%} | {m:.1%} | {e * 100:+.1f} | {b} |"
        )
    worst = max(abs(r[5]) for r in rows)
    ok = worst <= TOLERANCE
    print(
        f"\nworst error {worst * 100:.1f} AU points: "
        f"{'PASS' if ok else 'FAIL'} (tolerance {TOLERANCE * 100:.0f})"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
