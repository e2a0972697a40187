"""The terminal summary (through rich, within a width, optionally in colour) and the markdown
rendering of the report's tables.
"""

from __future__ import annotations

import io
import textwrap
from collections.abc import Iterable
from typing import Any

from ..core.redact import for_markdown
from ..core.table import Span
from ..core.textfit import MIN_TERMINAL_WIDTH, TERMINAL_WIDTH, fold_line
from ..result.file import RunResult
from .cells import STATUS_STYLE, Section, _errors, _phase_warnings, pairs
from .tables import _run_info, _sections, _verdict

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


def _styled(text: str, style: str = "") -> Any:
    from rich.text import Text

    return Text(text, style=style or "", no_wrap=True, end="")


def _spans(spans: list[Span]) -> Any:
    """A line of a table (core.table's spans) as one rich Text, each span in its style."""
    out = _styled("")
    for text, style in spans:
        out.append(text, style=style or None)
    return out


def _table_lines(t: Section, width: int) -> list[Any]:
    """A table laid out within ``width``, indented two (a grid with a rule under its header),
    every text masked and escaped (for_terminal) before it is measured and cut."""
    lines = t.table.lines(width=width, indent=2, rule=not t.table.pairs, escape=_clean)
    return [_spans(ln) for ln in lines]


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
    lines += _table_lines(pairs("", _run_info(run)[1:]), width)
    for t in _sections(run, baseline):
        lines += [_styled("")] + [_styled(ln, "bold") for ln in fold_line(_clean(t.title), width)]
        lines += _table_lines(t, width)
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
        head.append(_clean(verdict[0]), style=STATUS_STYLE.get(verdict[0], "bold yellow"))
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


def _md_table(t: Section) -> list[str]:
    return t.table.markdown(_md_cell)


def render_markdown(run: RunResult, baseline: RunResult | None = None) -> str:
    """The same content as markdown tables, for pasting into a qualification report."""
    run_id = _md_cell(run.run_id).replace("`", "'")  # a code span has no escapes
    out = [f"# iobench report: run `{run_id}`", ""]
    verdict = _verdict(run)
    if verdict:
        out.append(f"**Verdict: {verdict[0]}**")
        out += [""] + [f"- {_md_cell(r)}" for r in verdict[1]] + [""]
    out += _md_table(pairs("", _run_info(run)))
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
