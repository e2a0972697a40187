"""The loader during a background checkpoint on blkio-throttled storage (issue 27, validation).

Three cases on the local disk under a cgroup v1 blkio throttle of known read and write rates
(root only; the group is removed in a ``finally``): loader-bound (the loader's demand above the
read throttle), checkpoint-bound (a save that lasts most of the loop beside a compute-bound
loader) and balanced (demand at the read throttle, a save of half the loop). Each runs
``iobench loader DIR --during-checkpoint llama3-8b`` inside the group and prints, per case, the
during-window's measured AU beside the contention model's from the separate measurements only
(the loader's windows without a write, the save alone; the independent share rule, since
blkio throttles reads and writes separately), and the AU over the loop, measured and modelled.

Then (``--beside``, issue 27's second job) four cases where another job competes, each against
the case above it ran as its baseline (the loader, the save and the other job each alone):

- **reader beside reader** (loader-bound + ``reader:max``): both read through the one read
  throttle, a combined limit: checks the *share* rule proper, the loader's read ``C·R/(R+X)``
  and its AU moved by the rate bound (``contention.au_beside``), against the AU and read rate
  of the windows without a save;
- **paced reader** (balanced + ``reader:8MiB/s``): the same limit, the other job below it;
- **writer beside the save** (checkpoint-bound + ``writer:max``): both write through the one
  write throttle: the save's rate during by the queued-bytes rule (``contention.queue_share``)
  beside the demand rule's ``C_w·W/(W+X)``, and the independent rule for the loader (the
  writes take nothing from its reads);
- **writer beside the loader** (loader-bound + ``writer:max``): reads and writes throttled
  separately: the independent rule, the loader's AU unchanged.

Or (``--mount DIR``) the cases of ``MOUNT_CASES`` on a mounted file system as it is, e.g. the
one-machine CephFS of ``scripts/ceph_cluster.sh``: no throttle, so the model's inputs are the
separate measurements only; printed beside the independent rule the loader records is
``contention.au_writes_first`` (reads and writes on one server, the save first), and two of
the cases pace the save (``--checkpoint-rate``).

    sudo .venv/bin/python scripts/validate_during.py [DIR] [--read 20MiB] [--write 10MiB] [--beside]
    sudo .venv/bin/python scripts/validate_during.py --mount MOUNTPOINT
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from throttle import in_group, throttled, why_unavailable  # noqa: E402

MiB = 1 << 20
KEEP_JSON: Path | None = None
READ_PROBE: str | None = None  # --read-probe N: the saves the loader's read probe measures

# name, files, compute_s, checkpoint scale, epochs, --checkpoint-at
CASES = [
    ("loader-bound", 240, 0.05, "0.0002", 1, "2s"),
    ("checkpoint-bound", 120, 0.2, "0.0006", 1, "2s"),
    ("balanced", 240, 0.1, "0.0003", 1, "2s"),
]
# on a mount as it is (CephFS): the compute times that make each case there
MOUNT_CASES = [
    ("loader-bound", 240, 0.005, "0.002", 5, "1s"),
    ("checkpoint-bound", 240, 0.05, "0.004", 1, "0.5s"),
    ("balanced", 240, 0.015, "0.001", 3, "1s"),
    ("loader-bound, save paced", 240, 0.005, "0.001", 5, "1s", "100MiB/s"),
    ("balanced, save paced", 240, 0.015, "0.001", 3, "1s", "100MiB/s"),
]
# --long: saves of seconds, several in each loop (a whole save's window, pooled over saves:
# the cases above lasted 0.3-1 s, 6-14 steps, one save), the first 30 steps into the loop,
# mid-epoch (60 steps an epoch), the prefetch queue in steady state; (…, every) last
LONG_MOUNT_CASES = [
    ("loader-bound", 240, 0.005, "0.01", 16, "30steps", None, "4s"),
    ("checkpoint-bound", 240, 0.05, "0.01", 4, "30steps", None, "4s"),
    ("balanced", 240, 0.015, "0.005", 12, "30steps", None, "3s"),
    ("loader-bound, save paced", 240, 0.005, "0.003", 16, "30steps", "100MiB/s", "5s"),
    ("balanced, save paced", 240, 0.015, "0.003", 12, "30steps", "100MiB/s", "5s"),
]
# name, baseline case, --beside, what it checks
BESIDE = [
    ("reader beside reader", "loader-bound", "reader:max", "share rule, reads (one limit)"),
    ("paced reader", "balanced", "reader:8MiB/s", "share rule, reads (one limit)"),
    ("writer beside the save", "checkpoint-bound", "writer:max", "share rule, writes (one limit)"),
    ("writer beside the loader", "loader-bound", "writer:max", "independent rule (two limits)"),
]


def profile(path: Path, files: int, compute_s: float, epochs: int = 1) -> Path:
    text = (
        'description = "during-checkpoint validation"\nformat = "raw"\nsample_size = "512KiB"\n'
        f"files = {files}\nbatch_size = 4\ncompute_s = {compute_s}\nworkers = 2\nprefetch = 2\n"
        f"au_min = 0.9\nepochs = {epochs}\n"
    )
    path.write_text(text)
    return path


def run_case(group: Path | None, where: Path, case: tuple, beside: str | None = None,
             target: Path | None = None) -> dict:  # fmt: skip
    """One case; inside the blkio ``group`` (None: as it is, on ``target``, e.g. a CephFS)."""
    name, files, compute, scale, epochs, at = case[:6]
    paced = ["--checkpoint-rate", case[6]] if len(case) > 6 and case[6] else []  # a paced save
    paced += ["--checkpoint-every", case[7]] if len(case) > 7 else []  # saves again
    prof = profile(where / f"{name}.toml", files, compute, epochs)
    out = where / f"out-{name}{'-' + beside.replace(':', '-').replace('/', '') if beside else ''}"
    argv = [sys.executable, "-m", "iobench", "loader", str(target or where / "target"), "--profile",
            str(prof), "--during-checkpoint", "llama3-8b", "--checkpoint-scale", scale,
            "--checkpoint-at", at, "--output", str(out), "--json", "-q", "--no-history",
            *paced, *(["--beside", beside] if beside else []),
            *(["--read-probe", READ_PROBE] if READ_PROBE else [])]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = in_group(group, argv) if group is not None else argv
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"{name}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
    if KEEP_JSON:  # --keep-json DIR: each case's result, to recompute the rules from
        (KEEP_JSON / f"{out.name}-{os.getpid()}.json").write_text(r.stdout)
    return json.loads(r.stdout)


def row(name: str, res: dict) -> str:
    d = res["loader"]["during_checkpoint"]
    s, m = d["summary"], d["model_au"] or {}
    wo, du = s["without"] or {}, s["during"] or {}
    rule = m.get("share_rule") or {}

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"

    def rate(x):
        return "-" if x is None else f"{x / MiB:.1f}"

    diff = (
        f"{100 * (rule['au_during'] - du['au']):+.1f}"
        if rule.get("au_during") is not None and du.get("au") is not None
        else "-"
    )
    return (
        f"| {name} | {pct(wo.get('au'))} | {rate(wo.get('read_bps'))} | {pct(du.get('au'))} | "
        f"{rate(du.get('read_bps'))} | {pct(rule.get('au_during'))} | {diff} | "
        f"{rate(d['alone']['write_bps'])} | {rate(s.get('write_bps'))} | "
        f"{pct(m.get('au_measured'))} | {pct(m.get('au_share_rule'))} | "
        + " | ".join(probe_cells(d))
        + " |"
    )


def beside_row(name: str, what: str, base: dict, res: dict, compute: float, read_c: float,
               write_c: float) -> str:  # fmt: skip
    """The share rule from the baseline's separate figures, beside the measured ones."""
    from iobench.checkpoint.contention import au_beside, queue_share, share
    from iobench.loader.beside import FILE_BYTES

    b0, d = base["loader"]["during_checkpoint"], res["loader"]["during_checkpoint"]
    wo0, wo, du = b0["summary"]["without"], d["summary"]["without"], d["summary"]["during"]
    o = d["beside"]
    demand = 4 * 512 * 1024 / compute  # batch 4 of 512 KiB per compute step, one accelerator
    x = o["rate_bps"] or o["alone_bps"]  # the other job's demand: its pace, else its rate alone
    w_alone = d["alone"]["write_bps"]
    if o["kind"] == "reader":
        # in flight: the loader's 2 workers one 512 KiB sample each, the other job 1 MiB
        au_m, read_m = au_beside(wo0["au"], wo0["read_bps"], x, read_c, demand,
                                 queued=(2 * 512 * 1024, 1 << 20))  # fmt: skip
        save_m = save_d = w_alone  # the save draws on the write limit: untouched
    else:
        au_m, read_m = wo0["au"], wo0["read_bps"]  # independent: reads keep their rate
        save_d = share(w_alone, x, write_c)[0]
        # queued at once: each of the save's writers one file (the mean), the other job one
        queued = d["writers"] * d["bytes"] / d["files"]
        save_m = queue_share([w_alone, x], [queued, FILE_BYTES], write_c)[0]
    save = d["summary"]["write_bps"]

    def pct(v):
        return "-" if v is None else f"{100 * v:.1f}%"

    def rate(v):
        return "-" if v is None else f"{v / MiB:.1f}"

    return (
        f"| {name} | {what} | {pct(wo0['au'])} | {pct(wo['au'])} | {pct(au_m)} | "
        f"{100 * (au_m - wo['au']):+.1f} | {rate(wo['read_bps'])} | {rate(read_m)} | "
        f"{rate(o['alone_bps'])} | {rate(o['without_bps'])} | {rate(o['during_bps'])} | "
        f"{rate(save)} | {rate(save_m)} | {rate(save_d)} | {pct(du['au'])} |"
    )


HEADER = (
    "| case | AU without | read MiB/s without | AU during (measured) | read MiB/s during | "
    "AU during (model) | model − measured (points) | write MiB/s alone | write MiB/s during | "
    "AU over the loop (measured) | AU over the loop (model) | probe MiB/s alone → beside the "
    "save | read MiB/s during, probe rule | AU during, probe rule | model − measured (points) "
    "| load (1 min) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


MOUNT_HEADER = (
    "| case | AU without | read MiB/s without | AU during (measured) | read MiB/s during | "
    "save MiB/s alone | save MiB/s during | AU during, independent rule | model − measured "
    "(points) | AU during, writes first | model − measured (points) | probe MiB/s alone → "
    "beside the save | read MiB/s during, probe rule | AU during, probe rule | model − "
    "measured (points) | load (1 min) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    "---|---|---|"
)


def probe_cells(d: dict) -> list[str]:
    """The read probe (alone → beside the save) and the probe rule's read and AU during, its
    difference from the measured AU during."""
    p, rule = d.get("read_probe") or {}, (d.get("model_au") or {}).get("probe_rule")
    idle, during = (p.get("idle") or {}).get("read_bps"), (p.get("during") or {}).get("read_bps")
    if not rule or not idle or not during:
        return ["-"] * 4
    au = d["summary"]["during"]["au"]
    lo, hi = rule.get("au_during_range") or (rule["au_during"], rule["au_during"])
    return [f"{idle / MiB:.0f} → {during / MiB:.1f}", f"{rule['read_during_bps'] / MiB:.1f}",
            f"{100 * rule['au_during']:.1f}% ({100 * lo:.1f}–{100 * hi:.1f})",
            f"{100 * (rule['au_during'] - au):+.1f}"]  # fmt: skip


def mount_row(case: tuple, res: dict, write_max: float) -> str:
    """Measured beside both rules from the separate figures: the independent one the loader
    records (``model_au``) and ``contention.au_writes_first`` (one server, the save first)."""
    from iobench.checkpoint.contention import au_writes_first

    d = res["loader"]["during_checkpoint"]
    wo, du, rule = d["summary"]["without"], d["summary"]["during"], d["model_au"]["share_rule"]
    compute, w_alone = case[2], d["alone"]["write_bps"]
    demand = 4 * 512 * 1024 / compute  # batch 4 of 512 KiB per compute step
    buffer_s = 2 * 2 * compute  # 2 workers × prefetch 2 batches, each a step of compute
    write_s = d["bytes"] / w_alone  # the save keeps its rate alone
    au_wf, _ = au_writes_first(wo["au"], wo["read_bps"], demand, w_alone, write_max,
                                     write_s, buffer_s)  # fmt: skip
    cells = [f"{100 * wo['au']:.1f}%", f"{wo['read_bps'] / MiB:.1f}", f"{100 * du['au']:.1f}%",
             f"{du['read_bps'] / MiB:.1f}", f"{w_alone / MiB:.1f}",
             f"{d['summary']['write_bps'] / MiB:.1f}", f"{100 * rule['au_during']:.1f}%",
             f"{100 * (rule['au_during'] - du['au']):+.1f}", f"{100 * au_wf:.1f}%",
             f"{100 * (au_wf - du['au']):+.1f}", *probe_cells(d), load()]  # fmt: skip
    return f"| {case[0]} | " + " | ".join(cells) + " |"


def on_mount(mount: Path, cases: list[tuple]) -> int:
    """The cases on a mounted file system as it is (a CephFS: no imposed limit), the model
    fed with the separate measurements (the loader without a save, the save alone; for a
    paced save, the storage's write rate is the first unpaced case's save alone)."""
    where = Path(tempfile.mkdtemp(prefix="iobench-during-mnt-", dir="/var/tmp"))
    print(f"on {mount} (no throttle: the separate rates measured), load {load()}")
    print(MOUNT_HEADER)
    write_max = None
    try:
        for case in cases:
            res = run_case(None, where, case, target=mount)
            alone = res["loader"]["during_checkpoint"]["alone"]["write_bps"]
            unpaced = len(case) == 6 or not case[6]
            write_max = write_max or (alone if unpaced else None)
            print(mount_row(case, res, alone if unpaced else write_max), flush=True)
    finally:
        shutil.rmtree(where, ignore_errors=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--read", default="20MiB")
    ap.add_argument("--write", default="10MiB")
    ap.add_argument("--beside", action="store_true", help="also the cases with another job")
    ap.add_argument("--mount", default=None, help="a mounted file system (CephFS), no throttle")
    ap.add_argument("--long", action="store_true", help="--mount: LONG_MOUNT_CASES")
    ap.add_argument("--read-probe", default=None, help="the loader's --read-probe N")
    ap.add_argument("--keep-json", default=None, help="keep each case's result.json here")
    a = ap.parse_args()
    global KEEP_JSON, READ_PROBE
    READ_PROBE = a.read_probe
    if a.keep_json:
        KEEP_JSON = Path(a.keep_json)
        KEEP_JSON.mkdir(parents=True, exist_ok=True)
    from iobench.core.units import parse_size

    if a.mount:
        return on_mount(Path(a.mount), LONG_MOUNT_CASES if a.long else MOUNT_CASES)
    base = Path(a.dir or tempfile.mkdtemp(prefix="iobench-during-val-", dir="/var/tmp"))
    why = why_unavailable(str(base))
    if why:
        print(f"skipped: {why}", file=sys.stderr)
        return 2
    (base / "target").mkdir(exist_ok=True)
    print(f"read throttle {a.read}/s, write throttle {a.write}/s on {base}, load {load()}")
    print(HEADER)
    results, cases = {}, {c[0]: c for c in CASES}
    read_c, write_c = parse_size(a.read), parse_size(a.write)
    try:
        with throttled(str(base), read_c, write_c, prefix="during2") as group:
            for case in CASES:
                results[case[0]] = run_case(group, base, case)
                print(f"{row(case[0], results[case[0]])} {load()} |", flush=True)
            if a.beside:
                print("\n| case | checks | AU alone (baseline) | AU beside (measured, no save) | "
                      "AU beside (model) | model − measured (points) | loader read MiB/s "
                      "(measured) | loader read MiB/s (model) | other job MiB/s alone | other "
                      "job MiB/s beside, no save | other job MiB/s beside, during the save | "
                      "save MiB/s during (measured) | save MiB/s during (queued-bytes rule) | "
                      "save MiB/s during (demand rule) | AU during "
                      "the save (measured) | load (1 min) |")  # fmt: skip
                print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
                for name, case, spec, what in BESIDE:
                    res = run_case(group, base, cases[case], spec)
                    print(beside_row(name, what, results[case], res, cases[case][2], read_c,
                                     write_c),
                          f"{load()} |", flush=True)  # fmt: skip
    finally:
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
