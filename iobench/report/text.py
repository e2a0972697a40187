"""The terminal summary (through rich, within a width, optionally in colour) and the markdown
rendering of the report's tables.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Iterable
from typing import Any

from ..core.redact import for_markdown
from ..core.textfit import MIN_TERMINAL_WIDTH, TERMINAL_WIDTH, fold_line
from ..result.file import RunResult
from .cells import _delta_style, _errors, _is_delta, _phase_warnings, _Table
from .tables import _run_info, _sections, _verdict

# Styles of the coloured terminal (rich style names); plain output carries none of them.
_STATUS_STYLE = {
    "ok": "green",
    "indicative": "yellow",
    "one-pass": "cyan",
    "PARTIAL": "bold red",
    "FAILED": "bold red",
    "PASS": "bold green",
    "PASS (INDICATIVE)": "bold yellow",  # never the colour of a pass on steady phases
    "FAIL": "bold red",
}


# compare's table: a line's first characters -> its style (the marks of iobench.compare)
_COMPARE_STYLES = (
    ("+  ", "red"),  # MARK_WORSE
    ("-  ", "green"),  # MARK_BETTER
    ("regression:", "bold red"),
    ("not comparable", "yellow"),
    ("warning:", "yellow"),
)


def colour_compare(text: str) -> str:
    """``iobench compare``'s table with regressions red, improvements green and warnings
    yellow (ANSI SGR codes). The text is masked and escaped first (for_terminal), so the only
    escape sequences in the result are the colour codes."""
    out = []
    for line in _clean(text).split("\n"):
        style = next((st for start, st in _COMPARE_STYLES if line.startswith(start)), "")
        out.append(f"\x1b[{_SGR[style]}m{line}\x1b[0m" if style and line else line)
    return "\n".join(out)


_SGR = {"red": "31", "green": "32", "yellow": "33", "bold red": "1;31"}


def _clean(text: Any) -> str:
    """Cell text as the terminal shows it (iobench.core.redact) before it is measured and cut."""
    from ..core.redact import for_terminal

    return for_terminal(text)


def _cut(c: str, w: int, middle: bool = False) -> str:
    """``c`` in ``w`` characters; ``middle`` cuts there instead of at the end, for names that
    differ at their ends (``loader-dataset-shuffled-r1`` and ``-r8`` stay apart)."""
    if len(c) <= w:
        return c
    keep = max(w - 3, 1)
    if not middle:
        return c[:keep] + "..."
    head = (keep + 1) // 2
    return c[:head] + "..." + (c[-(keep - head) :] if keep > head else "")


def _fit(cells: list[str], widths: list[int]) -> list[str]:
    return [_cut(c, w, middle=True) for c, w in zip(cells, widths, strict=True)]


def _styled(text: str, style: str = "") -> Any:
    from rich.text import Text

    return Text(text, style=style or "", no_wrap=True, end="")


def _cell_style(t: _Table, col: int, cell: str) -> str:
    if cell.endswith(" !"):  # the client CPU at saturation
        return "bold red"
    if col == len(t.headers) - 1 and t.title == "Phases":
        return _STATUS_STYLE.get(cell.strip(), "")
    if t.headers[col].startswith("Δ") and _is_delta(cell):
        return _delta_style(t.headers[col], cell.strip())
    return ""


def _terminal_grid(t: _Table, indent: int = 2, width: int = TERMINAL_WIDTH) -> list[Any]:
    n = len(t.headers)
    headers = [_clean(h) for h in t.headers]
    rows = [[_clean(c) for c in r] for r in t.rows]
    widths = [max([len(headers[i])] + [len(r[i]) for r in rows]) for i in range(n)]
    excess = indent + sum(widths) + 2 * (n - 1) - width
    # Shrink the widest left-aligned text columns first, to no fewer than 8 characters; the
    # first column (the phase's or row's name) is never shortened: two names cut alike
    # (``dataset...led-r1``) would stand for two phases. Numbers and the status keep their
    # width; a grid that still does not fit is laid out as one block per row.
    floors = [widths[0] if i == 0 else 8 for i in range(n)]
    while excess > 0:
        text_cols = [i for i in range(n - 1) if t.align[i] == "l" and widths[i] > floors[i]]
        if not text_cols:
            break
        i = max(text_cols, key=lambda j: widths[j])
        cut = min(excess, widths[i] - floors[i])
        widths[i] -= cut
        excess -= cut
    if excess > 0:  # a narrow terminal: one block per row rather than columns of "..."
        return _terminal_records(headers, rows, t, indent, width)
    pad = " " * indent
    from rich.text import Text

    def line(cells: list[str], style: bool = True) -> Any:
        cells = _fit(cells, widths)
        out = Text(pad, no_wrap=True, end="")
        for j, (c, w, a) in enumerate(zip(cells, widths, t.align, strict=True)):
            if j:
                out.append("  ")
            text = c.rjust(w) if a == "r" else c.ljust(w)
            out.append(text, style=(_cell_style(t, j, c) or None) if style else "bold")
        out.rstrip()
        out.truncate(width)
        return out

    out = [line(headers, style=False), _styled(pad + "  ".join("-" * w for w in widths))]
    out.extend(line(r) for r in rows)
    return out


def _terminal_records(
    headers: list[str], rows: list[list[str]], t: _Table, indent: int, width: int
) -> list[Any]:
    """A grid too wide for the terminal: each row's first cell, then its "Header value"
    pairs filled under it, a pair never split (a pair wider than the line is folded on its
    own lines, never cut)."""
    out = []
    for r in rows:
        for part in textwrap.wrap(r[0], width - indent, break_on_hyphens=False) or [""]:
            head = _styled(" " * indent)  # the name whole, folded when wider than the line
            head.append(part, style="bold")
            out.append(head)
        pairs = [f"{h} {c}" for h, c in zip(headers[1:], r[1:], strict=True) if c.strip()]
        line = ""
        pad = " " * (indent + 2)
        for pair in pairs:  # a pair is never split across lines
            if len(pad) + len(pair) + 1 > width:  # wider than a line: on lines of its own
                if line:
                    out.append(_styled(line + ","))
                out.extend(_styled(ln) for ln in fold_line(pad + pair, width - 1))
                out[-1].append(",")
                line = ""
                continue
            joined = f"{line}, {pair}" if line else pad + pair
            if line and len(joined) + 1 > width:  # room for the comma
                out.append(_styled(line + ","))
                joined = " " * (indent + 2) + pair
            line = joined
        if line:
            out.append(_styled(line))
        elif out and out[-1].plain.endswith(","):
            out[-1].right_crop(1)  # the row's last pair ends it
    return out


def _terminal_kv(t: _Table, indent: int = 2, width: int = TERMINAL_WIDTH) -> list[Any]:
    label_w = min(max(len(_clean(r[0])) for r in t.rows), max(width // 3, 8))
    out: list[Any] = []
    for label, value in t.rows:
        label = _clean(label)
        if len(label) > label_w:  # never cut: the label on its own line(s), the value under
            out.extend(_styled(ln) for ln in fold_line(" " * indent + label, width))
            label = ""
        first = " " * indent + label.ljust(label_w) + "  "
        lines = textwrap.wrap(
            _clean(value),  # masked before wrapping: a URL cut in two is no longer one
            width=width,
            initial_indent=first,
            subsequent_indent=" " * len(first),
            break_on_hyphens=False,
        ) or [first.rstrip()]
        out.extend(_styled(ln) for ln in lines)
    return out


def _bullets(items: Iterable[str], width: int = TERMINAL_WIDTH) -> list[Any]:
    out: list[Any] = []
    for item in items:
        out.extend(
            _styled(ln)
            for ln in textwrap.wrap(
                _clean(item), width=width, initial_indent="  - ", subsequent_indent="    "
            )
        )
    return out


def render_terminal(
    run: RunResult,
    width: int = TERMINAL_WIDTH,
    colour: bool = False,
    baseline: RunResult | None = None,
) -> str:
    """The summary printed after a run, rendered through rich: lines of at most ``width``
    columns; with ``colour``, statuses, the verdict and changes against a baseline in colour
    (ANSI SGR codes only). Every text from the run is masked and escaped
    (:func:`iobench.core.redact.for_terminal`) before it is laid out, so the widths hold."""
    width = max(int(width), MIN_TERMINAL_WIDTH)
    head = _clean(f"iobench {run.iobench_version} - run {run.run_id} - {run.status}")
    lines: list[Any] = [_styled(ln, "bold") for ln in fold_line(head, width)]
    info = _Table("", ["", ""], _run_info(run)[1:], "ll", kv=True)
    lines += _terminal_kv(info, width=width)
    for t in _sections(run, baseline):
        lines += [_styled("")] + [_styled(ln, "bold") for ln in fold_line(_clean(t.title), width)]
        lines += _terminal_kv(t, width=width) if t.kv else _terminal_grid(t, width=width)
        if t.note:
            lines += [
                _styled(ln, "dim")
                for ln in textwrap.wrap(
                    _clean(t.note), width, initial_indent="  ", subsequent_indent="  "
                )
            ]
    verdict = _verdict(run)
    if verdict:
        head = _styled("Verdict: ")
        head.append(_clean(verdict[0]), style=_STATUS_STYLE.get(verdict[0], "bold yellow"))
        lines += [_styled(""), head]
        lines += _bullets(verdict[1], width)
    errors = _errors(run)
    if errors:
        lines += [_styled(""), _styled(f"Errors ({len(errors)})", "bold red")]
        lines += _bullets(errors, width)
    warnings = _phase_warnings(run)
    if warnings:
        lines += [_styled(""), _styled(f"Warnings ({len(warnings)})", "bold yellow")]
        lines += _bullets(warnings, width)
    for ln in lines:
        ln.truncate(width)
    if not colour:
        return "\n".join(ln.plain for ln in lines) + "\n"
    return _ansi(lines, width)


def _ansi(lines: list[Any], width: int) -> str:
    """``lines`` (rich Texts) printed with ANSI SGR colour codes only."""
    from rich.console import Console

    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        force_terminal=True,
        color_system="standard",
        no_color=False,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
        soft_wrap=True,
    )
    for ln in lines:
        console.print(ln)
    return buf.getvalue()


def _md_cell(text: str) -> str:
    return for_markdown(text)  # the one markdown escape (redact.py), as compare's


def _md_table(t: _Table) -> list[str]:
    headers = ["Item", "Value"] if t.kv else t.headers
    align = {"l": "---", "r": "---:"}
    out = [
        "| " + " | ".join(_md_cell(h) for h in headers) + " |",
        "|" + "|".join(align[a] for a in t.align) + "|",
    ]
    out.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows)
    return out


def render_markdown(run: RunResult, baseline: RunResult | None = None) -> str:
    """The same content as markdown tables, for pasting into a qualification report."""
    run_id = _md_cell(run.run_id).replace("`", "'")  # a code span has no escapes
    out = [f"# iobench report: run `{run_id}`", ""]
    verdict = _verdict(run)
    if verdict:
        out.append(f"**Verdict: {verdict[0]}**")
        out += [""] + [f"- {_md_cell(r)}" for r in verdict[1]] + [""]
    out += _md_table(_Table("", ["", ""], _run_info(run), "ll", kv=True))
    sections = _sections(run, baseline)
    for t in sections:
        out += ["", f"## {_md_cell(t.title)}", ""]
        if t.note:
            out += [f"_{_md_cell(t.note)}_", ""]
        out += _md_table(t)
    errors = _errors(run)
    if errors:
        out += ["", "## Errors", ""] + [f"- {_md_cell(e)}" for e in errors]
    warnings = _phase_warnings(run)
    if warnings:
        out += ["", "## Warnings", ""] + [f"- {_md_cell(w)}" for w in warnings]
    return "\n".join(out) + "\n"
