#!/usr/bin/env python
"""How long does ``iobench report --html`` take, against the text report of the same result?

For each result (default: the checked-in ``qualify --quick`` and full ``qualify`` results of
this VM, ``tests/golden/qualify-{quick,full}.result.json.gz``; others with ``--result``) it
measures, side by side in alternating rounds:

- the command: ``iobench report RESULT`` (the text report, which sets the floor: Python's
  start-up, the imports, reading the result) and ``iobench report RESULT --html FILE``, each
  as a fresh process, wall time;
- the rendering alone, in this process: ``render_terminal`` and ``render_html``, CPU time.

and prints medians over ``--rounds`` (5) with the HTML/text ratio, as a markdown table; each
command's CPU seconds (user + system) beside its wall time, since a shared machine inflates the
wall time more. With
``--old TREE`` (a checkout of an older commit, e.g. ``git worktree add /tmp/old 764a5c7``) the
old tree's ``report --html`` is timed in the same rounds (its own imports, its own plots).

    .venv/bin/python scripts/bench_report.py [--rounds 5] [--result R.json ...] [--old TREE]
"""

from __future__ import annotations

import argparse
import gzip
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = [REPO / "tests" / "golden" / f"qualify-{k}.result.json.gz" for k in ("quick", "full")]


def _plain(path: Path, tmp: Path) -> Path:
    """A result file iobench reads: gunzipped into ``tmp`` when given as ``.gz``."""
    if path.suffix != ".gz":
        return path
    out = tmp / path.name.removesuffix(".gz")
    out.write_bytes(gzip.decompress(path.read_bytes()))
    return out


CPU: dict[str, list[float]] = {}  # way -> CPU seconds (user + system) of each command


def _cli(tree: Path, *args: str, way: str = "") -> float:
    """Wall seconds of ``python -m iobench ARGS`` run from ``tree`` (its CPU seconds, which a
    loaded machine inflates less, kept under ``way`` in :data:`CPU`)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "iobench", *args], env=env, cwd=tree,
                          capture_output=True, text=True)  # fmt: skip
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"iobench {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    CPU.setdefault(way, []).append(cpu)
    return wall


def _timed(fn) -> float:
    """CPU seconds of ``fn()`` in this process (its wall time is the machine's load's)."""
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def measure(result: Path, rounds: int, tmp: Path, old: Path | None) -> dict[str, list[float]]:
    """Seconds of each way of rendering ``result``, one list per way, rounds interleaved."""
    from iobench import report
    from iobench.result.file import load

    run = load(result)
    times: dict[str, list[float]] = {"text": [], "html": [], "render_text": [], "render_html": []}
    if old is not None:
        times["old_html"] = []
    for i in range(rounds):
        out = tmp / f"r{i}.html"
        times["text"].append(_cli(REPO, "report", str(result), way=f"{result}:text"))
        times["html"].append(_cli(REPO, "report", str(result), "--html", str(out),
                                  way=f"{result}:html"))  # fmt: skip
        times["render_text"].append(_timed(lambda: report.render_terminal(run)))
        times["render_html"].append(_timed(lambda: report.render_html(run)))
        if old is not None:
            times["old_html"].append(
                _cli(old, "report", str(result), "--html", str(tmp / "o.html"), way=f"{result}:old")
            )
    for way in ("text", "html", "old"):
        if f"{result}:{way}" in CPU:
            times[f"cpu_{way}"] = CPU[f"{result}:{way}"]
    times["size"] = [float(len(report.render_html(run).encode()))]
    times["plots"] = [float(report.render_html(run).count("<svg"))]
    return times


def _med(v: list[float]) -> float:
    return statistics.median(v)


def table(rows: list[tuple[str, dict[str, list[float]]]], old: bool) -> str:
    head = ("| result | phases | plots | page | `report` (text) | `report --html` | ratio "
            "| CPU text | CPU html | render text (CPU) | render html (CPU) |"
            + (" old `--html` | old CPU | old / new |" if old else ""))  # fmt: skip
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, t in rows:
        cells = [
            name,
            f"{int(t['phases'][0])}",
            f"{int(t['plots'][0])}",
            f"{t['size'][0] / 1024:.0f} KiB",
            f"{_med(t['text']):.2f} s",
            f"{_med(t['html']):.2f} s",
            f"{_med(t['html']) / _med(t['text']):.2f}",
            f"{_med(t['cpu_text']):.2f} s",
            f"{_med(t['cpu_html']):.2f} s",
            f"{_med(t['render_text']) * 1000:.0f} ms",
            f"{_med(t['render_html']) * 1000:.0f} ms",
        ]
        if old:
            cells += [
                f"{_med(t['old_html']):.1f} s",
                f"{_med(t['cpu_old']):.1f} s",
                f"{_med(t['old_html']) / _med(t['html']):.0f}x",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--result", action="append", type=Path, help="result.json (or .json.gz)")
    ap.add_argument("--old", type=Path, help="an older checkout to time beside this one")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from iobench.result.file import load

    rows = []
    with tempfile.TemporaryDirectory(prefix="iobench-bench-report-") as d:
        tmp = Path(d)
        for given in args.result or FIXTURES:
            path = _plain(given, tmp)
            times = measure(path, args.rounds, tmp, args.old)
            times["phases"] = [float(len(load(path).phases))]
            rows.append((given.name, times))
    print(f"{platform.node()}: {os.cpu_count()} CPUs, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; {args.rounds} rounds, medians")  # fmt: skip
    print()
    print(table(rows, args.old is not None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
