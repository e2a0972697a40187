"""The one table renderer (core.table): the same cells in the terminal, markdown and HTML."""

import pytest

from iobench.core.table import Column, Table, cut_middle

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
    assert page.startswith('<table class="wide"><thead><tr><th class="">name</th><th class="r">')
    assert '<td class="r">1.0</td>' in page and '<td class="">a|b</td>' in page


def test_a_row_of_the_wrong_width_and_a_bad_alignment_are_refused():
    with pytest.raises(ValueError):
        Table(COLS, [("a", 1.0)])
    with pytest.raises(ValueError):
        Column("x", "c")
    with pytest.raises(ValueError):
        Table((Column("a"),), [("x",)], pairs=True)


# -- what the report needs: items, cuts, folds, pairs, styles and classes ------------------------

GRID = (
    Column("Phase", get=lambda r: r[0]),
    Column("Op", get=lambda r: r[1], cut=8),
    Column("MiB/s", "r", get=lambda r: r[2], fmt=lambda v: f"{v:.1f}"),
    Column("Status", get=lambda r: r[3], style=lambda c: "red" if c == "FAILED" else "",
           cls=lambda c: f"status-{c}"),
)  # fmt: skip
ITEMS = [("seq-write-r1", "sequential-write", 1234.5, "ok"), ("seq-write-r8", "open", 5.0,
         "FAILED")]  # fmt: skip


def test_rows_come_from_items_through_each_columns_get():
    t = Table.of(GRID, ITEMS, row_cls=lambda r: "" if r[3] == "ok" else "bad")
    assert t.cells()[1] == ["seq-write-r8", "open", "5.0", "FAILED"]
    assert t.row_cls == ["", "bad"]
    assert '<tr class="bad"><td class="">seq-write-r8</td>' in t.html()
    assert '<td class="status-FAILED">FAILED</td>' in t.html()


def test_a_grid_wider_than_the_line_cuts_its_cuttable_columns_in_the_middle_first():
    t = Table.of(GRID, ITEMS)
    full = t.text(indent=2)
    assert max(map(len, full)) == 48
    lines = t.text(width=41, indent=2, rule=True)
    assert lines == [
        "  Phase         Op          MiB/s  Status",
        "  ------------  ---------  ------  ------",
        "  seq-write-r1  seq...ite  1234.5  ok",
        "  seq-write-r8  open          5.0  FAILED",
    ]
    assert max(map(len, t.text(width=40, indent=2))) == 40  # Op at its floor, 8
    assert t.text(width=39, indent=2)[0] == "  seq-write-r1"  # below it: one block per row
    assert cut_middle("loader-dataset-shuffled-r1", 11) == "load...d-r1"


def test_a_grid_that_cannot_fit_becomes_one_block_per_row_its_name_never_cut():
    lines = Table.of(GRID, ITEMS).text(width=28, indent=2)
    assert lines == [
        "  seq-write-r1",
        "    Op sequential-write,",
        "    MiB/s 1234.5, Status ok",
        "  seq-write-r8",
        "    Op open, MiB/s 5.0,",
        "    Status FAILED",
    ]


def test_the_terminal_spans_carry_the_header_bold_and_each_cells_style():
    lines = Table.of(GRID, ITEMS).lines(escape=str.upper)
    assert ("PHASE       ", "bold") in lines[0]
    assert lines[2][-1] == ("FAILED", "red") and lines[1][-1] == ("OK", "")


def test_a_pairs_table_wraps_each_value_beside_its_label():
    t = Table((Column("Item"), Column("Value")), [("Target", "a b c d e f g h"), ("A much "
              "longer label than a third", "v")], pairs=True)  # fmt: skip
    assert t.text(width=24, indent=2) == [
        "  Target    a b c d e f",
        "            g h",
        "  A much longer label",
        "    than a third",
        "            v",
    ]
    assert t.markdown()[:2] == ["| Item | Value |", "|---|---|"]
    assert t.html(cls="kv").startswith('<table class="kv"><tbody><tr><th>Target</th><td>a b')


def test_every_html_class_is_escaped_with_its_cell():
    """A status read from a hostile result.json cannot leave its attribute."""
    t = Table.of(GRID, [("p", "read", 1.0, 'x"><script>')])
    page = t.html()
    assert "<script>" not in page and 'class="status-x&quot;&gt;&lt;script&gt;"' in page
