"""One table renderer: a column spec (name, alignment, formatter, when shown, how far it may be
cut, a cell's style and class) rendered for the terminal, markdown and HTML.

A :class:`Table` is its columns and its rows of raw values (:meth:`Table.of` takes them from
items through each column's ``get``); each :class:`Column` formats its value (``fmt``), aligns
it (``"l"`` or ``"r"``), may say from the rows whether it is shown at all (``shown``), how its
text reads as a markdown cell (``md``, e.g. a code span), how few characters a grid too wide for
the terminal may cut it to (``cut``, in the middle: names that differ at their ends stay
apart; never cut without it), and from a cell's text its terminal style (``style``, a rich
style name) and its HTML class (``cls``). A ``pairs`` table is a label/value block rather than
a grid. The three renderings read the same cells, so a table never says one thing in the
terminal and another in a CI comment. Escaping is the caller's: each rendering takes the one
escape of the layer that renders (``core.redact.for_terminal``, ``for_markdown``, the page's).

The terminal rendering is lines of spans (text, style) for whoever draws colour; ``text()``
is their plain text. Given a width, a grid cuts its cuttable columns, widest first; one that
still does not fit is laid out as one block per row: the row's first cell, then its
"Header value" pairs filled under it, a pair never split.
"""

from __future__ import annotations

import html as html_mod
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .textfit import fold_line

#: A piece of a terminal line: its text and its style (a rich style name; "" for none).
Span = tuple[str, str]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _same(text: str) -> str:
    return text


def cut_middle(text: str, width: int) -> str:
    """``text`` in ``width`` characters, cut in the middle (``loader-...led-r1``)."""
    if len(text) <= width:
        return text
    keep = max(width - 3, 1)
    head = (keep + 1) // 2
    return text[:head] + "..." + (text[-(keep - head) :] if keep > head else "")


@dataclass(frozen=True)
class Column:
    """One column: its header, alignment (``"l"`` or ``"r"``), how a value reads (``fmt``),
    whether it is shown given every row's value (``shown``; None: always), how its text reads
    as a markdown cell before escaping (``md``; None: as in the terminal), its value from an
    item (``get``, for :meth:`Table.of`; None: the item itself), the fewest characters a grid
    too wide may cut it to (``cut``; None: never), and a cell's terminal style and HTML class
    from its text (``style``, ``cls``; None: none)."""

    name: str
    align: str = "l"
    fmt: Callable[[Any], str] = _text
    shown: Callable[[Sequence[Any]], bool] | None = None
    md: Callable[[str], str] | None = None
    get: Callable[[Any], Any] | None = None
    cut: int | None = None
    style: Callable[[str], str] | None = None
    cls: Callable[[str], str] | None = None

    def __post_init__(self) -> None:
        if self.align not in ("l", "r"):
            raise ValueError(f"column {self.name!r}: align is 'l' or 'r', not {self.align!r}")

    def html_class(self, text: str | None = None) -> str:
        """The cell's HTML class: ``r`` when right-aligned, then ``cls``'s (none for a header)."""
        own = self.cls(text) if text is not None and self.cls is not None else ""
        return " ".join(p for p in ("r" if self.align == "r" else "", own) if p)


@dataclass(frozen=True)
class Table:
    """Columns and rows of raw values (one value per column, in order); ``row_cls``: each
    row's HTML class; ``pairs``: a two-column label/value block rather than a grid."""

    columns: Sequence[Column]
    rows: Sequence[Sequence[Any]]
    row_cls: Sequence[str] = ()
    pairs: bool = False

    def __post_init__(self) -> None:
        n = len(self.columns)
        for row in self.rows:
            if len(row) != n:
                raise ValueError(f"a row of {len(row)} values for {n} columns")
        if self.pairs and n != 2:
            raise ValueError(f"a pairs table has a label and a value column, not {n}")

    @classmethod
    def of(
        cls,
        columns: Sequence[Column],
        items: Iterable[Any],
        *,
        row_cls: Callable[[Any], str] | None = None,
        pairs: bool = False,
    ) -> Table:
        """A row per item, each column's value its ``get`` of the item; ``row_cls`` of an item
        gives its row's HTML class."""
        items = list(items)
        rows = [[x if c.get is None else c.get(x) for c in columns] for x in items]
        return cls(columns, rows, [row_cls(x) for x in items] if row_cls else (), pairs)

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

    def text(self, **kw: Any) -> list[str]:
        """The plain text of :meth:`lines`."""
        return ["".join(t for t, _ in line) for line in self.lines(**kw)]

    def lines(
        self,
        *,
        width: int | None = None,
        indent: int = 0,
        gap: str = "  ",
        header: bool = True,
        rule: bool = False,
        escape: Callable[[str], str] = _same,
    ) -> list[list[Span]]:
        """The terminal rendering, each line as spans: aligned columns, each as wide as its
        widest cell, trailing blanks stripped, the header bold (and a ``rule`` of dashes under
        it); within ``width``, cut or folded as the module says. A pairs table: each label,
        then its value wrapped beside it."""
        if self.pairs:
            return self._pairs(indent, width, escape)
        cols = [self.columns[i] for i in self.visible()]
        head = [escape(h) for h in self.header()]
        rows = [[escape(c) for c in r] for r in self.cells()]
        table = ([head] if header else []) + rows
        if not table:
            return []
        widths = [max(len(r[k]) for r in table) for k in range(len(cols))]
        room = (width or 0) - indent - len(gap) * (len(cols) - 1)
        if width is not None and not _cut_to(widths, cols, room):
            return _records(head, rows, indent, width)
        pad = " " * indent

        def line(cells: list[str], bold: bool) -> list[Span]:
            spans: list[Span] = [(pad, "")]
            for j, (c, w, col) in enumerate(zip(cells, widths, cols, strict=True)):
                c = cut_middle(c, w)
                spans += [(gap, "")] if j else []
                text = c.rjust(w) if col.align == "r" else c.ljust(w)
                spans.append((text, "bold" if bold else col.style(c) if col.style else ""))
            return _rstrip(spans)

        out = [line(head, True)] if header else []
        out += [[(pad + gap.join("-" * w for w in widths), "")]] if rule else []
        return out + [line(r, False) for r in rows]

    def _pairs(
        self, indent: int, width: int | None, escape: Callable[[str], str]
    ) -> list[list[Span]]:
        """Labels in a column (at most a third of the width; a longer one on its own lines,
        never cut), each value wrapped beside its label."""
        rows = [[escape(c) for c in r] for r in self.cells()]
        if not rows:
            return []
        longest = max(len(label) for label, _ in rows)
        label_w = longest if width is None else min(longest, max(width // 3, 8))
        out: list[list[Span]] = []
        for label, value in rows:
            if len(label) > label_w:  # the label on its own line(s), the value under it
                out += [[(ln, "")] for ln in fold_line(" " * indent + label, width or 0)]
                label = ""
            first = " " * indent + label.ljust(label_w) + "  "
            if width is None:
                wrapped = [(first + value).rstrip()]
            else:
                wrapped = textwrap.wrap(value, width=width, initial_indent=first,
                                        subsequent_indent=" " * len(first),
                                        break_on_hyphens=False) or [first.rstrip()]  # fmt: skip
            out += [[(ln, "")] for ln in wrapped]
        return out

    def markdown(self, escape: Callable[[str], str] = _same) -> list[str]:
        """A GitHub markdown table: right-aligned columns marked ``---:``."""
        shown = self.visible()
        lines = ["| " + " | ".join(escape(h) for h in self.header()) + " |"]
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
        """An HTML table of class ``cls``: a grid (``<thead>``/``<tbody>``, every row and cell
        with its class: ``r`` when right-aligned, the column's ``cls``, the row's ``row_cls``)
        or a pairs table (a ``<th>`` label beside each value)."""
        klass = f' class="{escape(cls)}"' if cls else ""
        if self.pairs:
            body = "".join(
                f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in self.cells()
            )
            return f"<table{klass}><tbody>{body}</tbody></table>"
        cols = [self.columns[i] for i in self.visible()]
        head = "".join(
            f'<th class="{escape(c.html_class())}">{escape(h)}</th>'
            for c, h in zip(cols, self.header(), strict=True)
        )
        rows = []
        for i, cells in enumerate(self.cells()):
            rc = escape(self.row_cls[i]) if i < len(self.row_cls) else ""
            tds = "".join(
                f'<td class="{escape(c.html_class(t))}">{escape(t)}</td>'
                for c, t in zip(cols, cells, strict=True)
            )
            rows.append(f'<tr class="{rc}">{tds}</tr>')
        body = "".join(rows)
        return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cut_to(widths: list[int], cols: list[Column], room: int) -> bool:
    """Cut the widest cuttable column first, each to no fewer than its ``cut`` characters,
    until ``widths`` fit ``room``; whether they do."""
    excess = sum(widths) - room
    while excess > 0:
        can = [k for k, c in enumerate(cols) if c.cut is not None and widths[k] > c.cut]
        if not can:
            return False
        k = max(can, key=lambda j: widths[j])
        n = min(excess, widths[k] - (cols[k].cut or 0))
        widths[k] -= n
        excess -= n
    return True


def _rstrip(spans: list[Span]) -> list[Span]:
    """``spans`` without the blanks that end them."""
    out = list(spans)
    while out and not out[-1][0].rstrip():
        out.pop()
    if out:
        out[-1] = (out[-1][0].rstrip(), out[-1][1])
    return out


def _records(head: list[str], rows: list[list[str]], indent: int, width: int) -> list[list[Span]]:
    """A grid too wide for ``width``: each row's first cell (bold, whole, folded when wider
    than the line), then its "Header value" pairs filled under it, a pair never split (a pair
    wider than the line is folded on its own lines, never cut)."""
    out: list[list[Span]] = []
    pad = " " * (indent + 2)
    for r in rows:
        for part in textwrap.wrap(r[0], width - indent, break_on_hyphens=False) or [""]:
            out.append([(" " * indent, ""), (part, "bold")])
        pairs = [f"{h} {c}" for h, c in zip(head[1:], r[1:], strict=True) if c.strip()]
        line = ""
        for pair in pairs:
            if len(pad) + len(pair) + 1 > width:  # wider than a line: on lines of its own
                if line:
                    out.append([(line + ",", "")])
                out += [[(ln, "")] for ln in fold_line(pad + pair, width - 1)]
                out[-1].append((",", ""))
                line = ""
                continue
            joined = f"{line}, {pair}" if line else pad + pair
            if line and len(joined) + 1 > width:  # room for the comma
                out.append([(line + ",", "")])
                joined = pad + pair
            line = joined
        if line:
            out.append([(line, "")])
        elif out and out[-1][-1][0].endswith(","):
            out[-1][-1] = (out[-1][-1][0][:-1], out[-1][-1][1])  # the row's last pair ends it
    return out
