"""The report's renderings of recorded results, byte for byte (issue 24: one table renderer,
renderings unchanged): every fixture under ``tests/golden`` rendered for the terminal (plain
at 80, 110, 120, 129 and 200 columns, where some widths cut columns or fold a table into one
block per row; in colour at 110 and 120), as markdown and as the HTML page's tables, against
the expected renderings checked in beside it (``report/NAME.expected.json.gz``).

The expected files were rendered by the report's code before its tables moved onto
``core.table`` (main b355e6b), except where that output was wrong (docs/validation/report-tables.md
says what changed and why). To re-record after a deliberate change to the report:
``IOBENCH_UPDATE_GOLDEN=1 pytest tests/test_report_golden.py``, then review the diff it prints.
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import re
from pathlib import Path

import pytest

from iobench import report
from iobench.result.file import RunResult

GOLDEN = Path(__file__).parent / "golden"
EXPECTED = GOLDEN / "report"
WIDTHS = (80, 110, 120, 129, 200)
COLOUR_WIDTHS = (110, 120)

#: (fixture, its baseline or None): every recorded result, and two rendered against a baseline
#: (better and worse).
CASES = [
    (p.name.removesuffix(".result.json.gz"), None)
    for p in sorted([*GOLDEN.glob("*.result.json.gz"), *EXPECTED.glob("*.result.json.gz")])
] + [("rich", "rich-base"), ("rich-base", "rich")]

# the page's tables: a grid in its scroll box, or a label/value block
_TABLES = re.compile(r'<div class="scroll"><table.*?</table></div>|<table class="kv">.*?</table>')


def fixture(name: str) -> RunResult:
    path = GOLDEN / f"{name}.result.json.gz"
    path = path if path.exists() else EXPECTED / f"{name}.result.json.gz"
    return RunResult.from_dict(json.loads(gzip.decompress(path.read_bytes())))


def renderings(run: RunResult, baseline: RunResult | None) -> dict[str, str]:
    """Every rendering of ``run`` the golden files hold."""
    out = {f"w{w}": report.render_terminal(run, width=w, baseline=baseline) for w in WIDTHS}
    for w in COLOUR_WIDTHS:
        out[f"colour{w}"] = report.render_terminal(run, width=w, colour=True, baseline=baseline)
    out["markdown"] = report.render_markdown(run, baseline=baseline)
    page = report.render_html(run, baseline=baseline)
    out["html tables"] = "\n".join(_TABLES.findall(page)) + "\n"
    return out


def _name(name: str, base: str | None) -> str:
    return name if base is None else f"{name}+{base}"


@pytest.mark.parametrize(("name", "base"), CASES, ids=[_name(*c) for c in CASES])
def test_renderings_of_recorded_results_are_unchanged(name, base):
    got = renderings(fixture(name), fixture(base) if base else None)
    path = EXPECTED / f"{_name(name, base)}.expected.json.gz"
    if os.environ.get("IOBENCH_UPDATE_GOLDEN"):
        data = json.dumps(got, indent=0, sort_keys=True).encode()
        path.write_bytes(gzip.compress(data, mtime=0))
    want = json.loads(gzip.decompress(path.read_bytes()))
    assert sorted(got) == sorted(want)
    for key in sorted(want):
        if got[key] != want[key]:
            diff = difflib.unified_diff(
                want[key].splitlines(), got[key].splitlines(), "expected", "got", lineterm=""
            )
            pytest.fail(f"{path.name}: {key} differs\n" + "\n".join(list(diff)[:60]))


def test_the_fixtures_cover_every_kind_of_table():
    """Each table the report draws appears in some fixture's renderings, and some widths cut a
    column, fold a grid into blocks and colour a status and a change."""
    texts = {}
    for name, base in CASES:
        path = EXPECTED / f"{_name(name, base)}.expected.json.gz"
        texts[_name(name, base)] = json.loads(gzip.decompress(path.read_bytes()))
    every = "\n".join(t for r in texts.values() for t in r.values())
    for title in (
        "Phases", "Clients (per-rank spread)", "Metadata operations", "Data loader (measured)",
        "Estimate (model output, not measured)", "Estimated AU at N GPUs (model output)",
        "Against baseline", "Over repeats", "Slowest host", "What it means", "Client CPU",
    ):  # fmt: skip
        assert title in every, title
    plain = [t for r in texts.values() for k, t in r.items() if k.startswith("w")]
    assert any("..." in t for t in plain)  # a column cut in the middle
    assert any("\n    Op " in t for t in plain)  # a grid folded into one block per row
    colour = [t for r in texts.values() for k, t in r.items() if k.startswith("colour")]
    assert any("\x1b[1;31m" in t for t in colour) and any("\x1b[32m" in t for t in colour)
    html = "\n".join(r["html tables"] for r in texts.values())
    for cls in ('class="status-indicative"', 'class="r worse"', 'class="r better"',
                '<tr class="bad">', '<table class="kv">', '<table class="grid wide">'):  # fmt: skip
        assert cls in html, cls


def test_the_slowest_rank_is_never_cut():
    """At 129 columns the clients table fits only by cutting a column: it used to cut the
    slowest rank, so every row read ``ran....67``; a rank's name is never cut, the table is
    folded instead."""
    text = report.render_terminal(fixture("clients"), width=129)
    assert "ran...." not in text
    assert "Slowest rank 3 x1.67" in text and "Slowest rank 6 x1.67" in text


def test_a_hostile_status_cannot_leave_its_class_attribute():
    """A phase's status is text from result.json: on the page it names the cell's class
    (``status-…``), escaped with it, so it cannot close the attribute and open a tag."""
    run = fixture("interval")
    run.phases[0].status = 'x"><script src=//evil.example></script>'
    page = report.render_html(run)
    assert "<script" not in page.lower()
    assert 'class="status-X&quot;&gt;&lt;SCRIPT SRC=//EVIL.EXAMPLE&gt;' in page
