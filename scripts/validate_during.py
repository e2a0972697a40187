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
  write throttle: the share rule on writes, the save's rate during ``C_w·W/(W+X)``, and the
  independent rule for the loader (the writes take nothing from its reads);
- **writer beside the loader** (loader-bound + ``writer:max``): reads and writes throttled
  separately: the independent rule, the loader's AU unchanged.

    sudo .venv/bin/python scripts/validate_during.py [DIR] [--read 20MiB] [--write 10MiB] [--beside]
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

# name, files, compute_s, checkpoint scale
CASES = [
    ("loader-bound", 240, 0.05, "0.0002"),
    ("checkpoint-bound", 120, 0.2, "0.0006"),
    ("balanced", 240, 0.1, "0.0003"),
]
# name, baseline case, --beside, what it checks
BESIDE = [
    ("reader beside reader", "loader-bound", "reader:max", "share rule, reads (one limit)"),
    ("paced reader", "balanced", "reader:8MiB/s", "share rule, reads (one limit)"),
    ("writer beside the save", "checkpoint-bound", "writer:max", "share rule, writes (one limit)"),
    ("writer beside the loader", "loader-bound", "writer:max", "independent rule (two limits)"),
]


def profile(path: Path, files: int, compute_s: float) -> Path:
    text = (
        'description = "during-checkpoint validation"\nformat = "raw"\nsample_size = "512KiB"\n'
        f"files = {files}\nbatch_size = 4\ncompute_s = {compute_s}\nworkers = 2\nprefetch = 2\n"
        "au_min = 0.9\nepochs = 1\n"
    )
    path.write_text(text)
    return path


def run_case(group: Path, where: Path, name: str, files: int, compute: float, scale: str,
             beside: str | None = None) -> dict:  # fmt: skip
    prof = profile(where / f"{name}.toml", files, compute)
    out = where / f"out-{name}{'-' + beside.replace(':', '-').replace('/', '') if beside else ''}"
    argv = [sys.executable, "-m", "iobench", "loader", str(where / "target"), "--profile",
            str(prof), "--during-checkpoint", "llama3-8b", "--checkpoint-scale", scale,
            "--checkpoint-at", "2s", "--output", str(out), "--json", "-q", "--no-history",
            *(["--beside", beside] if beside else [])]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(in_group(group, argv), capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{name}: exit {r.returncode}: {r.stderr.strip()[-400:]}")
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
        f"{pct(m.get('au_measured'))} | {pct(m.get('au_share_rule'))} |"
    )


def beside_row(name: str, what: str, base: dict, res: dict, compute: float, read_c: float,
               write_c: float) -> str:  # fmt: skip
    """The share rule from the baseline's separate figures, beside the measured ones."""
    from iobench.checkpoint.contention import au_beside, share

    b0, d = base["loader"]["during_checkpoint"], res["loader"]["during_checkpoint"]
    wo0, wo, du = b0["summary"]["without"], d["summary"]["without"], d["summary"]["during"]
    o = d["beside"]
    demand = 4 * 512 * 1024 / compute  # batch 4 of 512 KiB per compute step, one accelerator
    x = o["rate_bps"] or o["alone_bps"]  # the other job's demand: its pace, else its rate alone
    w_alone = d["alone"]["write_bps"]
    if o["kind"] == "reader":
        au_m, read_m = au_beside(wo0["au"], wo0["read_bps"], x, read_c, demand)
        save_m = w_alone  # the save draws on the write limit: untouched
    else:
        au_m, read_m = wo0["au"], wo0["read_bps"]  # independent: reads keep their rate
        save_m = share(w_alone, x, write_c)[0]
    save = d["summary"]["write_bps"]

    def pct(v):
        return "-" if v is None else f"{100 * v:.1f}%"

    def rate(v):
        return "-" if v is None else f"{v / MiB:.1f}"

    return (
        f"| {name} | {what} | {pct(wo0['au'])} | {pct(wo['au'])} | {pct(au_m)} | "
        f"{100 * (au_m - wo['au']):+.1f} | {rate(wo['read_bps'])} | {rate(read_m)} | "
        f"{rate(o['alone_bps'])} | {rate(o['without_bps'])} | {rate(o['during_bps'])} | "
        f"{rate(save)} | {rate(save_m)} | {pct(du['au'])} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--read", default="20MiB")
    ap.add_argument("--write", default="10MiB")
    ap.add_argument("--beside", action="store_true", help="also the cases with another job")
    a = ap.parse_args()
    from iobench.core.units import parse_size

    base = Path(a.dir or tempfile.mkdtemp(prefix="iobench-during-val-", dir="/var/tmp"))
    why = why_unavailable(str(base))
    if why:
        print(f"skipped: {why}", file=sys.stderr)
        return 2
    (base / "target").mkdir(exist_ok=True)
    print(f"read throttle {a.read}/s, write throttle {a.write}/s on {base}")
    print("| case | AU without | read MiB/s without | AU during (measured) | read MiB/s during | "
          "AU during (model) | model − measured (points) | write MiB/s alone | write MiB/s "
          "during | AU over the loop (measured) | AU over the loop (model) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results, cases = {}, {c[0]: c for c in CASES}
    read_c, write_c = parse_size(a.read), parse_size(a.write)
    try:
        with throttled(str(base), read_c, write_c, prefix="during2") as group:
            for name, files, compute, scale in CASES:
                results[name] = run_case(group, base, name, files, compute, scale)
                print(row(name, results[name]), flush=True)
            if a.beside:
                print("\n| case | checks | AU alone (baseline) | AU beside (measured, no save) | "
                      "AU beside (model) | model − measured (points) | loader read MiB/s "
                      "(measured) | loader read MiB/s (model) | other job MiB/s alone | other "
                      "job MiB/s beside, no save | other job MiB/s beside, during the save | "
                      "save MiB/s during (measured) | save MiB/s during (model) | AU during "
                      "the save (measured) |")  # fmt: skip
                print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
                for name, case, spec, what in BESIDE:
                    _, files, compute, scale = cases[case]
                    res = run_case(group, base, case, files, compute, scale, spec)
                    print(beside_row(name, what, results[case], res, compute, read_c, write_c),
                          flush=True)  # fmt: skip
    finally:
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
