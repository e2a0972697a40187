"""The loader during a background checkpoint on blkio-throttled storage (issue 27, validation).

Three cases on the local disk under a cgroup v1 blkio throttle of known read and write rates
(root only; the group is removed in a ``finally``): loader-bound (the loader's demand above the
read throttle), checkpoint-bound (a save that lasts most of the loop beside a compute-bound
loader) and balanced (demand at the read throttle, a save of half the loop). Each runs
``iobench loader DIR --during-checkpoint llama3-8b`` inside the group and prints, per case, the
during-window's measured AU beside the contention model's from the separate measurements only
(the loader's windows without a write, the save alone; the independent share rule, since
blkio throttles reads and writes separately), and the AU over the loop, measured and modelled.

    sudo .venv/bin/python scripts/validate_during.py [DIR] [--read 20MiB] [--write 10MiB]
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


def profile(path: Path, files: int, compute_s: float) -> Path:
    text = (
        'description = "during-checkpoint validation"\nformat = "raw"\nsample_size = "512KiB"\n'
        f"files = {files}\nbatch_size = 4\ncompute_s = {compute_s}\nworkers = 2\nprefetch = 2\n"
        "au_min = 0.9\nepochs = 1\n"
    )
    path.write_text(text)
    return path


def run_case(group: Path, where: Path, name: str, files: int, compute: float, scale: str) -> dict:
    prof = profile(where / f"{name}.toml", files, compute)
    out = where / f"out-{name}"
    argv = [sys.executable, "-m", "iobench", "loader", str(where / "target"), "--profile",
            str(prof), "--during-checkpoint", "llama3-8b", "--checkpoint-scale", scale,
            "--checkpoint-at", "2s", "--output", str(out), "--json", "-q", "--no-history"]  # fmt: skip
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("dir", nargs="?", default=None)
    ap.add_argument("--read", default="20MiB")
    ap.add_argument("--write", default="10MiB")
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
    try:
        with throttled(str(base), parse_size(a.read), parse_size(a.write)) as group:
            for name, files, compute, scale in CASES:
                print(row(name, run_case(group, base, name, files, compute, scale)), flush=True)
    finally:
        if a.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
