"""One table renderer: a column spec (name, alignment, formatter, when shown) rendered for the
terminal, markdown and HTML.

A :class:`Table` is its columns and its rows of raw values; each :class:`Column` formats its
value (``fmt``), aligns it (``"l"`` or ``"r"``), may say from the rows whether it is shown at
all (``shown``) and how its text reads as a markdown cell (``md``, e.g. a code span). The three
renderings read the same cells, so a table never says one thing in the terminal and another
in a CI comment. Escaping is the caller's: ``markdown(escape=…)`` and ``html(escape=…)`` take
the one escape of the layer that renders (``core.redact.for_markdown``, ``html.escape``).
"""

from __future__ import annotations

import html as html_mod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


def _text(value: Any) -> str:
    return "" if value is None else str(value)


@dataclass(frozen=True)
class Column:
    """One column: its header, alignment (``"l"`` or ``"r"``), how a value reads (``fmt``),
    whether it is shown given every row's value (``shown``; None: always) and how its text
    reads as a markdown cell before escaping (``md``; None: as in the terminal)."""

    name: str
    align: str = "l"
    fmt: Callable[[Any], str] = _text
    shown: Callable[[Sequence[Any]], bool] | None = None
    md: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        if self.align not in ("l", "r"):
            raise ValueError(f"column {self.name!r}: align is 'l' or 'r', not {self.align!r}")


@dataclass(frozen=True)
class Table:
    """Columns and rows of raw values (one value per column, in order)."""

    columns: Sequence[Column]
    rows: Sequence[Sequence[Any]]

    def __post_init__(self) -> None:
        n = len(self.columns)
        for row in self.rows:
            if len(row) != n:
                raise ValueError(f"a row of {len(row)} values for {n} columns")

    def visible(self) -> list[int]:
        """The indexes of the columns shown."""
        return [
            i
            for i, c in enumerate(self.columns)
            if c.shown is None or c.shown([row[i] for row in self.rows])
        ]

    def header(self) -> list[str]:
        return [self.columns[i].name for i in self.visible()]

    def cells(self) -> list[list[str]]:
        """Every row's cells as text (the shown columns only)."""
        shown = self.visible()
        return [[self.columns[i].fmt(row[i]) for i in shown] for row in self.rows]

    def text(self, *, gap: str = "  ", header: bool = True) -> list[str]:
        """Aligned columns, each as wide as its widest cell, trailing blanks stripped."""
        shown = self.visible()
        table = ([self.header()] if header else []) + self.cells()
        if not table:
            return []
        widths = [max(len(r[k]) for r in table) for k in range(len(shown))]
        right = [self.columns[i].align == "r" for i in shown]
        return [
            gap.join(
                c.rjust(w) if r else c.ljust(w)
                for c, w, r in zip(cells, widths, right, strict=True)
            ).rstrip()
            for cells in table
        ]

    def markdown(self, escape: Callable[[str], str] = lambda s: s) -> list[str]:
        """A GitHub markdown table: right-aligned columns marked ``---:``."""
        shown = self.visible()
        lines = ["| " + " | ".join(self.header()) + " |"]
        lines.append(
            "|" + "|".join("---:" if self.columns[i].align == "r" else "---" for i in shown) + "|"
        )
        for cells in self.cells():
            out = []
            for i, text in zip(shown, cells, strict=True):
                md = self.columns[i].md
                out.append(escape(md(text) if md is not None else text))
            lines.append("| " + " | ".join(out) + " |")
        return lines

    def html(self, escape: Callable[[str], str] = html_mod.escape, cls: str = "") -> str:
        """An HTML table (``<thead>``/``<tbody>``), right-aligned cells with class ``num``."""
        shown = self.visible()
        num = [self.columns[i].align == "r" for i in shown]

        def cell(tag: str, text: str, right: bool) -> str:
            attr = ' class="num"' if right else ""
            return f"<{tag}{attr}>{escape(text)}</{tag}>"

        head = "".join(cell("th", h, r) for h, r in zip(self.header(), num, strict=True))
        body = "".join(
            "<tr>" + "".join(cell("td", c, r) for c, r in zip(cells, num, strict=True)) + "</tr>"
            for cells in self.cells()
        )
        klass = f' class="{escape(cls)}"' if cls else ""
        return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
