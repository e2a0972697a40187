#!/usr/bin/env python
"""Is the checkpoint write storage-bound? torch.save + fsync against a plain sequential write.

The issue's rule: checkpoint data generation must not be the bottleneck, so ``ckpt-save``
(``torch.save`` + fsync, the llm-checkpoint workload's timed write) must reach at least 90 % of
a plain sequential write of the same bytes, to the same files, by the same writers
(``ckpt-baseline-write``: buffered, 4 MiB blocks, fsync per file).

For each rank count and each storage speed it runs the workload's own phase functions in one
run directory, ``--rounds`` rounds of three writes each, interleaved and rotated every round so
that neither the order nor a drift of the shared host favours one of them:

- ``plain``: the plain sequential write (``ckpt-baseline-write``);
- ``torch.save``: the checkpoint save as the workload times it (torch's default: a CRC-32 of
  every record, what a training job pays unless it turns it off);
- ``torch.save, no CRC``: the same with ``crc32 = false`` (torch 2.6 and later).

The state is built once, before the timed rounds, from the workload's random pool: the
rounds time writing only. Two storage speeds, on a private ext4 over a loop device in
/dev/shm (``--device loop``, root, the default) or under ``--dir``:

- ``throttled``: a blkio cgroup limits writes to ``--write-rate`` (default 200 MiB/s): storage
  slower than the host's memory, as any real checkpoint target is per client;
- ``memory``: no throttle: the loop device writes at memory speed, the hardest case for the
  serialisation (on a small loaded host torch.save's own CPU work shows here).

Every write also records the client's own CPU (user + system seconds of this process, every
writer thread): CPU seconds per GiB written do not swing with the host's load as wall-clock rates
do, and their inverse is the rate one core could feed.

Prints every round's ratios, the median and the range per case, and a markdown table; exits 1
when a throttled case's median ratio (torch.save, torch's default) is under 90 %. The memory-
speed rows are printed as measured, and judged only with ``--strict``.

    .venv/bin/python scripts/bench_ckpt_write.py [--ranks 1,4] [--size 1GiB] [--rounds 5]
        [--write-rate 200MiB] [--device loop|disk] [--strict]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
from typing import Any
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_checkpoint import model_file, throttle
from bench_starvation import NICE, loop_filesystem

from iobench.core.units import format_bytes, format_rate, parse_size
from iobench.run.phases import llm_checkpoint as lc
from iobench.run.runner import run_workload
from iobench.spec.workload import load_workload

TOLERANCE = 0.10
GiB = 1 << 30
KINDS = ("plain", "torch.save", "torch.save, no CRC")


def _rounds_run(rounds: int, order: list[str]) -> Any:
    """The llm-checkpoint generator's ``run`` replaced by ``rounds`` rotated write rounds."""

    def gen_run(params: dict[str, Any], runner: Any) -> None:
        mine = lc.shards(params, runner.world, runner.rank)
        pool = lc._Pool(params["seed"])
        states = [lc.make_rank_state(s, params["tensor_size"], pool) for s in mine]
        for r in range(rounds):
            for kind in KINDS[r % 3 :] + KINDS[: r % 3]:
                order.append(kind)
                if kind == "plain":
                    lc._baseline(params, runner, mine)
                else:
                    p = {**params, "crc32": kind == "torch.save"}
                    lc._torch(p, runner, mine, states, None)

    return gen_run


def measure(where: str, model: str, rounds: int) -> list[dict[str, float]]:
    """Per round: each kind's bandwidth (bytes ÷ the slowest writer's time) and the client's
    CPU seconds per GiB written (``extra.client_cpu``: this process's user + system time,
    every writer thread; robust to a loaded host where wall-clock rates are not)."""
    order: list[str] = []
    wl = load_workload(
        "llm-checkpoint",
        {"model": model, "scale": 1, "metadata": False, "baseline": True, "api": "torch",
         "tensor_size": "16MiB"},
    )  # fmt: skip
    with mock.patch.object(lc, "run", _rounds_run(rounds, order)):
        outcome = run_workload(wl, where, save=False)
    if outcome.error is not None:
        raise outcome.error
    writes = [p for p in outcome.run.phases if p.name in ("ckpt-baseline-write", "ckpt-save")]
    if len(writes) != len(order):
        raise RuntimeError(f"{len(writes)} write phases for {len(order)} writes")
    out: list[dict[str, float]] = []
    for i, (kind, p) in enumerate(zip(order, writes, strict=True)):
        if i % 3 == 0:
            out.append({})
        out[-1][kind] = p.bandwidth_bps
        out[-1][kind + " cpu"] = p.extra["client_cpu"]["cpu_s"] / (p.bytes / GiB)
    return out


def case(where: str, tmp: str, ranks: int, size: int, rounds: int, label: str) -> dict[str, Any]:
    got = measure(where, model_file(tmp, ranks, size), rounds)
    row: dict[str, Any] = {"label": label, "ranks": ranks, "size": size, "rounds": rounds}
    row["plain"] = statistics.median(g["plain"] for g in got)
    for kind in KINDS[1:]:
        ratios = [g[kind] / g["plain"] for g in got]
        row[kind] = (statistics.median(ratios), min(ratios), max(ratios))
        row[kind + " bps"] = statistics.median(g[kind] for g in got)
    for kind in KINDS:
        row[kind + " cpu"] = statistics.median(g[kind + " cpu"] for g in got)
    print(f"  {label}, {ranks} writer(s), {format_bytes(size)}:", flush=True)
    for i, g in enumerate(got):
        print(
            f"    round {i + 1}: plain {format_rate(g['plain'])}, torch.save "
            f"{format_rate(g['torch.save'])} ({g['torch.save'] / g['plain'] * 100:.0f} %), "
            f"no CRC {format_rate(g['torch.save, no CRC'])} "
            f"({g['torch.save, no CRC'] / g['plain'] * 100:.0f} %); CPU s/GiB "
            + " / ".join(f"{g[k + ' cpu']:.2f}" for k in KINDS),
            flush=True,
        )
    return row


def table(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| storage | writers | checkpoint | plain write | torch.save (ratio, range) "
        "| torch.save, no CRC (ratio, range) | client CPU s per GiB: plain / torch.save / no CRC |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = []
        for kind in KINDS[1:]:
            med, lo, hi = r[kind]
            cells.append(
                f"{format_rate(r[kind + ' bps'])} = {med * 100:.0f} % "
                f"({lo * 100:.0f}–{hi * 100:.0f} %)"
            )
        out.append(
            f"| {r['label']} | {r['ranks']} | {format_bytes(r['size'])} | "
            f"{format_rate(r['plain'])} | {cells[0]} | {cells[1]} | "
            + " / ".join(f"{r[k + ' cpu']:.2f}" for k in KINDS)
            + " |"
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="/var/tmp", help="where the run directory goes (disk)")
    ap.add_argument("--device", choices=("disk", "loop"), default="loop")
    ap.add_argument("--ranks", default="1,4")
    ap.add_argument("--size", default="1GiB", help="checkpoint bytes (all writers together)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--write-rate", default="200MiB", help="the throttled case's write limit")
    ap.add_argument("--read-rate", default="2GiB", help="the throttled case's read limit")
    ap.add_argument("--skip-memory", action="store_true")
    ap.add_argument("--skip-throttled", action="store_true")
    ap.add_argument("--strict", action="store_true", help="judge the memory-speed rows too")
    args = ap.parse_args()
    if args.rounds < 1:
        print("--rounds must be at least 1")
        return 2
    ranks_list = [int(r) for r in args.ranks.split(",")]
    size, wr, rr = (parse_size(x) for x in (args.size, args.write_rate, args.read_rate))
    if os.geteuid() == 0:
        os.setpriority(os.PRIO_PROCESS, 0, NICE)
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        if args.device == "loop":
            if os.geteuid() != 0:
                print("--device loop needs root")
                return 2
            where = stack.enter_context(loop_filesystem(3 * size + (512 << 20)))
            print(f"device: ext4 on a loop device over /dev/shm, mounted at {where}")
        else:
            where = args.dir
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="iobench-bench-ckpt-"))
        # first touch of the loop device's backing pages, unmeasured
        measure(where, model_file(tmp, ranks_list[0], size), 1)
        if not args.skip_throttled:
            with throttle(where, rr, wr) as thr:
                label = f"throttled {format_rate(wr)}" if thr else "unthrottled (no blkio)"
                print(f"throttle: {thr or 'none'}")
                rows += [case(where, tmp, n, size, args.rounds, label) for n in ranks_list]
        if not args.skip_memory:
            print("no throttle: the loop device at memory speed")
            label = "memory speed" if args.device == "loop" else "disk, unthrottled"
            rows += [case(where, tmp, n, size, args.rounds, label) for n in ranks_list]
    print()
    print("\n".join(table(rows)))
    print()
    ok = True
    for r in rows:
        judged = r["label"].startswith("throttled") or args.strict
        med = r["torch.save"][0]
        if judged and med < 1 - TOLERANCE:
            ok = False
        print(
            f"{r['label']}, {r['ranks']} writer(s): torch.save at {med * 100:.0f} % of the plain "
            f"write ({'judged' if judged else 'shown, not judged'}; rule >= "
            f"{(1 - TOLERANCE) * 100:.0f} %)"
        )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
