"""Text that fits a terminal's width: prose wrapped, table rows folded, never cut.

The one mechanism every command's text output goes through (``cmds.common.out_text``; a
table is laid out by ``core.table`` within the same width), and
the width itself: :func:`terminal_format` / :func:`stdout_format`. A line wider than the width is folded at
word boundaries, its continuation lines hung under the column where its text starts:

- a row of a table (``  name      description``): under the cell after the first gap of two
  or more spaces, so a long last cell wraps in its own column;
- a labelled line (``  Basis: ...``, ``  Warning: ...``): under the text after the label;
- anything else: two columns in from the line's own indent.

A hang that leaves too little room (under :data:`MIN_CELL` columns) falls back to the line's
indent; a word longer than the room is split, except a path or URL (a word with a ``/``),
which stays whole on a line of its own: split, it could no longer be copied or parsed. Nothing is dropped, so a fold of a line gives
back its words in order (``" ".join(...split())`` of both are equal). Base layer: imports
nothing from iobench (``compare`` can fold its table through the same ``fold_text``).
"""

from __future__ import annotations

import re
import textwrap

from .units import is_digits

TERMINAL_WIDTH = 120  # pipes and files: stable text
MIN_TERMINAL_WIDTH = 40  # narrower terminals get 40-column lines (wrapped by the terminal)
MIN_CELL = 20  # the fewest columns a hung continuation keeps for its text


def terminal_format(
    isatty: bool, environ: dict[str, str], tty_columns: int | None
) -> tuple[int, bool]:
    """(width, colour) for stdout: ``COLUMNS`` when set, else the terminal's own width when
    stdout is one, else the fixed :data:`TERMINAL_WIDTH` (pipes and files get stable text);
    never under :data:`MIN_TERMINAL_WIDTH`. Colour only on a terminal, never with ``NO_COLOR``
    set (any value, no-color.org) or ``TERM=dumb``."""
    width = TERMINAL_WIDTH
    cols = str(environ.get("COLUMNS", "")).strip()
    if is_digits(cols) and int(cols) > 0:
        width = int(cols)
    elif isatty and tty_columns and tty_columns > 0:
        width = tty_columns
    colour = isatty and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"
    return max(width, MIN_TERMINAL_WIDTH), colour


def stdout_format() -> tuple[int, bool]:
    """:func:`terminal_format` of this process's stdout."""
    import os
    import sys

    try:
        isatty = sys.stdout is not None and sys.stdout.isatty()
        cols = os.get_terminal_size(sys.stdout.fileno()).columns if isatty else None
    except (OSError, ValueError, AttributeError):
        isatty, cols = False, None
    return terminal_format(isatty, dict(os.environ), cols)


# the first gap of two or more spaces after some text: where a table row's next cell starts
_GAP = re.compile(r"^(\s*\S(?:.*?\S)?\s{2,})\S")
# a short label and its colon at the start of a line: "  Basis: ", "  - seq-read: "
_LABEL = re.compile(r"^(\s*(?:- )?[A-Za-z][\w .()/-]{0,30}:\s)\S")


def _hang(line: str, width: int) -> int:
    """The column continuation lines of ``line`` start at."""
    indent = len(line) - len(line.lstrip(" "))
    for pattern in (_GAP, _LABEL):
        m = pattern.match(line)
        if m and width - len(m.group(1)) >= MIN_CELL:
            return len(m.group(1))
    return min(indent + 2, max(width - MIN_CELL, 0))


def fold_line(line: str, width: int) -> list[str]:
    """``line`` in lines of at most ``width`` columns (itself when it fits)."""
    line = line.rstrip()
    if len(line) <= width or width <= 0:
        return [line]
    hang = _hang(line, width)
    head = len(line) - len(line.lstrip(" "))
    paths = any("/" in w and len(w) > width - hang for w in line.split())
    lines = textwrap.wrap(
        line[head:],
        width=width,
        initial_indent=line[:head],
        subsequent_indent=" " * hang,
        break_on_hyphens=False,
        break_long_words=not paths,
        replace_whitespace=False,
        drop_whitespace=True,
    )
    return [ln.rstrip() for ln in lines] or [line]


def fold_text(text: str, width: int) -> str:
    """Every line of ``text`` folded to ``width`` columns (a trailing newline kept)."""
    end = "\n" if text.endswith("\n") else ""
    body = text[: -len(end)] if end else text
    return "\n".join(ln for line in body.split("\n") for ln in fold_line(line, width)) + end


def wrap_prose(text: str, width: int, indent: str = "", hang: str | None = None) -> list[str]:
    """A paragraph in lines of at most ``width`` columns: ``indent`` before the first,
    ``hang`` (default ``indent``) before the others."""
    return textwrap.wrap(
        " ".join(text.split()),
        width=width,
        initial_indent=indent,
        subsequent_indent=indent if hang is None else hang,
        break_on_hyphens=False,
    ) or [indent.rstrip()]
