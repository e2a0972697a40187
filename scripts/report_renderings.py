"""Every rendering of the report's recorded results, to compare two checkouts byte for byte.

Renders each fixture of ``tests/golden`` (and ``tests/golden/report``; ``rich`` and
``rich-base`` also against each other as baselines) as ``iobench report`` does: the terminal
summary at every width from 40 to 200 columns, plain and in colour, the markdown and the whole
HTML page. Prints one line per rendering (its name and a hash); with ``--write DIR`` writes
each rendering too. Run it once per checkout and diff the outputs::

    PYTHONPATH=/path/to/old python scripts/report_renderings.py > old.txt
    PYTHONPATH=$PWD python scripts/report_renderings.py > new.txt
    diff old.txt new.txt

(the fixtures are read from this script's checkout; the code is whichever ``iobench`` the
path finds first). Slow on purpose: about a minute of CPU for the 2,600 renderings.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
from pathlib import Path

from iobench import report
from iobench.result.file import RunResult

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"
PAIRS = [("rich", "rich-base"), ("rich-base", "rich")]


def _load(name: str) -> RunResult:
    path = GOLDEN / f"{name}.result.json.gz"
    path = path if path.exists() else GOLDEN / "report" / f"{name}.result.json.gz"
    return RunResult.from_dict(json.loads(gzip.decompress(path.read_bytes())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", default="40-200", help="LO-HI or a comma list (default 40-200)")
    ap.add_argument("--write", type=Path, help="also write every rendering into this folder")
    args = ap.parse_args()
    if "-" in args.widths:
        lo, hi = (int(x) for x in args.widths.split("-"))
        widths = list(range(lo, hi + 1))
    else:
        widths = [int(x) for x in args.widths.split(",")]
    names = sorted(
        p.name.removesuffix(".result.json.gz")
        for p in [*GOLDEN.glob("*.result.json.gz"), *GOLDEN.glob("report/*.result.json.gz")]
    )
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
    for name, base in [(n, None) for n in names] + PAIRS:
        run, baseline = _load(name), (_load(base) if base else None)
        tag = name if base is None else f"{name}+{base}"
        out = {}
        for w in widths:
            for colour in (False, True):
                text = report.render_terminal(run, width=w, colour=colour, baseline=baseline)
                out[f"{tag}.{'colour' if colour else 'w'}{w}.txt"] = text
        out[f"{tag}.md"] = report.render_markdown(run, baseline=baseline)
        out[f"{tag}.html"] = report.render_html(run, baseline=baseline)
        for key, text in out.items():
            print(key, hashlib.sha256(text.encode()).hexdigest()[:16])
            if args.write:
                (args.write / key).write_text(text)


if __name__ == "__main__":
    main()
