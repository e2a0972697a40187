"""The one table renderer (core.table): the same cells in the terminal, markdown and HTML."""

import pytest

from iobench.core.table import Column, Table

COLS = (
    Column("name"),
    Column("MiB/s", "r", fmt=lambda v: f"{v:,.1f}"),
    Column("note", shown=lambda values: any(values)),
    Column("mark", md=lambda t: f"`{t}`" if t else ""),
)


def test_the_terminal_aligns_each_column_to_its_widest_cell():
    t = Table(COLS, [("seq-write", 1234.5, "", "+"), ("r", 5.0, "", "")])
    assert t.header() == ["name", "MiB/s", "mark"]  # note: never set, not shown
    assert t.text() == ["name         MiB/s  mark", "seq-write  1,234.5  +", "r              5.0"]


def test_markdown_and_html_read_the_same_cells():
    t = Table(COLS, [("a|b", 1.0, "x", "+")])
    md = t.markdown(lambda s: s.replace("|", "\\|"))
    assert md == [
        "| name | MiB/s | note | mark |",
        "|---|---:|---|---|",
        "| a\\|b | 1.0 | x | `+` |",
    ]
    page = t.html(cls="wide")
    assert page.startswith('<table class="wide"><thead><tr><th>name</th><th class="num">MiB/s')
    assert '<td class="num">1.0</td>' in page and "<td>a|b</td>" in page


def test_a_row_of_the_wrong_width_and_a_bad_alignment_are_refused():
    with pytest.raises(ValueError):
        Table(COLS, [("a", 1.0)])
    with pytest.raises(ValueError):
        Column("x", "c")
