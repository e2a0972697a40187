"""The history-schema page's examples (pandas and DuckDB) run against a real export."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from factories import MiB, make_phase, make_run

from iobench import history

README = Path(__file__).resolve().parent.parent / "docs" / "reference" / "history-schema.md"


def _section_blocks() -> list[str]:
    text = README.read_text()
    start = text.index("## Queries")
    return re.findall(r"```python\n(.*?)```", text[start:], re.S)


def test_readme_has_one_pandas_and_one_duckdb_example():
    blocks = _section_blocks()
    assert len(blocks) == 2
    assert "import pandas" in blocks[0] and "import duckdb" in blocks[1]


@pytest.fixture
def exported(cli, tmp_path, monkeypatch):
    url = tmp_path / "h"
    for i, bw in enumerate((100, 200, 300)):
        p = make_phase("seq-read-bs128k", "read", bandwidth=[bw * MiB])
        p.block_size, p.concurrency = 128 * 1024, 4
        run = make_run(
            f"2025010{i + 1}T000000Z-aaaaa{i}",
            started_at=f"2025-01-0{i + 1}T12:00:00.000+00:00",
            phases=[p],
        )
        history.append(run, str(url))
    monkeypatch.chdir(tmp_path)
    r = cli("history", "export", "history.parquet", "--history", url)
    assert r.code == 0, r.err
    return tmp_path


def test_readme_pandas_example_runs(exported, capsys):
    pytest.importorskip("pandas")
    exec(compile(_section_blocks()[0], "README.md (pandas)", "exec"), {})
    out = capsys.readouterr().out
    # the median of 100, 200 and 300 MiB/s, under workload, phase, block size and cache
    assert re.search(r"seq-read\s+seq-read-bs128k\s+131072\s+direct\s+200\.0", out), out


def test_readme_duckdb_example_runs(exported, capsys):
    pytest.importorskip("duckdb")
    exec(compile(_section_blocks()[1], "README.md (duckdb)", "exec"), {})
    out = capsys.readouterr().out
    for day, mib in (("2025-01-01", "100.0"), ("2025-01-02", "200.0"), ("2025-01-03", "300.0")):
        assert re.search(rf"{day}.*seq-read-bs128k.*131072.*4.*{mib}.*1", out), out
