"""A comparison rendered: the terminal table, markdown and JSON."""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Sequence
from typing import Any

from ..core.redact import for_markdown
from ..core.table import Column, Table
from ..core.units import format_spread
from ..result.stats import summarize
from .metric import TAIL_BEYOND, CompareRow, format_percent, format_value, tail_ops_needed
from .noise import Noise
from .options import MARK_MISSING, MARK_SAME, MARK_UNCONFIRMED, CompareOptions
from .runs import CompareReport, RunRef


def _value_formatter(unit: str):
    return lambda v: format_value(v, unit)


def _with_spread(value: float | None, repeats: Sequence[float], unit: str) -> str:
    """``845.0 MiB/s (n=6, 559.0–1320.0 MiB/s, CV 29 %)``; ``(n=1)`` for one measurement."""
    s = summarize(repeats)
    if value is None or s is None:
        return format_value(value, unit)
    spread = format_spread(s.n, s.min, s.max, s.cv, _value_formatter(unit))
    return f"{format_value(value, unit)} ({spread})"


def _evidence_text(row: CompareRow, options: CompareOptions) -> str:
    """The test, its p, the corrected p over the family, and the sizes it rested on."""
    n = f"({len(row.baseline_repeats)}/{len(row.current_repeats)})"
    if row.tail_ops is not None:
        return f"not judged: {row.tail_ops} ops a repeat {n}"
    if row.test is None or row.p_value is None:
        return f"no spread measured {n}"
    corr = "Holm" if options.correction == "holm" else "BH"
    adj = "" if row.p_adjusted is None else f", {corr} {row.p_adjusted:.2g} of {row.family}"
    if row.test == "history" and row.noise is not None:
        runs = f"{row.noise.runs} runs, sd ×{row.noise.spread:.3g}"
        return f"history p={row.p_value:.2g}{adj} ({runs})"
    return f"t p={row.p_value:.2g}{adj} {n}"


def confirm_text(row: CompareRow) -> str:
    """What would confirm (or dismiss) an unconfirmed row: a change of the threshold's size at
    the spread observed."""
    size = format_percent(row.threshold, signed=False)
    need = tail_ops_needed(row.metric)
    if row.tail_ops is not None and need is not None:
        return (
            f"{row.tail_ops} operations a repeat are too few to judge this percentile: "
            f"{need:,} would put {TAIL_BEYOND} beyond it"
        )
    if row.test is None:
        return f"no spread measured: --repeat {row.confirm_repeats} on both sides would measure it"
    if row.test == "history":
        if row.confirm_runs is None:
            return f"the runs scatter too widely to confirm a {size} change one run a side"
        return f"{row.confirm_runs} earlier runs at this spread would confirm a {size} change"
    if row.confirm_repeats is None:
        return f"over 1000 repeats a side would be needed for a {size} change at this spread"
    return f"--repeat {row.confirm_repeats} on both sides would confirm a {size} change"


def _test_text(row: CompareRow, options: CompareOptions | None = None) -> str:
    """What decided the row: the evidence and its verdict."""
    if row.mark == MARK_MISSING:
        return "one side only"
    if row.mark == MARK_SAME:
        return "within threshold"
    text = _evidence_text(row, options or CompareOptions())
    if row.mark == MARK_UNCONFIRMED:
        return f"unconfirmed: {text}"
    return text


def _phase_text(report: CompareReport, row: CompareRow) -> str:
    """The headline row's evidence, and the phase's other regressions."""
    text = _test_text(row, report.options)
    others = [r.metric for r in report.regressions if r.phase == row.phase and r is not row]
    if others:
        text += f"; also regressed: {', '.join(others)}"
    return text


def _cells(row: CompareRow, report: CompareReport, *, headline: bool) -> list[str]:
    if headline:
        base = _with_spread(row.baseline, row.baseline_repeats, row.unit)
        cur = _with_spread(row.current, row.current_repeats, row.unit)
        evidence = _phase_text(report, row)
    else:
        base, cur = format_value(row.baseline, row.unit), format_value(row.current, row.unit)
        evidence = _test_text(row, report.options)
    # a figure a run does not hold (absent, null) is not measured: never shown as a value
    base = "not measured" if row.baseline is None else base
    cur = "not measured" if row.current is None else cur
    return [
        row.mark,
        row.phase,
        row.metric,
        base,
        cur,
        format_percent(row.delta),
        format_percent(row.threshold, signed=False),
        evidence,
    ]


#: The comparison's columns (core.table): the mark, reads as a code span in markdown.
COLUMNS = (
    Column("", md=lambda t: f"`{t}`" if t.strip() else ""),
    Column("phase"),
    Column("metric"),
    Column("baseline", "r"),
    Column("current", "r"),
    Column("change", "r"),
    Column("threshold", "r"),
    Column("evidence"),
)


def _ref_line(label: str, ref: RunRef) -> str:
    return f"{label:<9} {ref.run_id}  {ref.workload or '-'}  {ref.started_at}"


def _noise_line(report: CompareReport) -> str | None:
    if report.noise is None:
        return None
    return report.noise.describe(report.options.min_history, report.options.tail_df)


def _regression_lines(report: CompareReport) -> list[str]:
    return [
        f"regression: {r.name} {format_value(r.baseline, r.unit)} -> "
        f"{format_value(r.current, r.unit)} ({format_percent(r.delta)}, threshold "
        f"{format_percent(r.threshold, signed=False)}, {_test_text(r, report.options)})"
        for r in report.regressions
    ]


def _unconfirmed_lines(report: CompareReport, *, verbose: bool = False) -> list[str]:
    """One line: the unconfirmed moves (headline metrics, and every one the wrong way; all of
    them with ``verbose``), each with what would confirm or dismiss it."""
    rows = report.unconfirmed
    if not rows:
        return []
    heads = {id(r) for r in report.headlines()}
    shown = [r for r in rows if verbose or r.worse or id(r) in heads]
    items = [f"{r.name} {format_percent(r.delta)} ({confirm_text(r)})" for r in shown]
    if len(shown) < len(rows):
        items.append(f"{len(rows) - len(shown)} more with --verbose")
    level = f"{report.options.alpha:g}"
    return [
        f"unconfirmed ({len(rows)}): beyond the threshold, not confirmed at family level "
        f"{level}: " + "; ".join(items)
    ]


def _grid(rows: list[list[str]], width: int | None = None) -> list[str]:
    """The rows as aligned columns; when they would not fit ``width``, folded: one block a
    row, its name and change on the first line and the rest indented beneath, wrapped."""
    lines = Table(COLUMNS, rows).text()
    if width is None or max(len(x) for x in lines) <= width:
        return lines
    out = []
    for mark, phase, metric, base, cur, change, threshold, evidence in rows:
        out += _wrap(f"{mark or ' '}  {phase} {metric}  {change} (threshold {threshold})", width)
        for label, text in (("baseline", base), ("current", cur), ("evidence", evidence)):
            out += _wrap(f"{label}: {text}", width, indent="     ")
    return out


def _wrap(text: str, width: int | None, indent: str = "") -> list[str]:
    """A line of prose wrapped to ``width`` (continuations indented two more); as is without."""
    if width is None or len(indent + text) <= width:
        return [indent + text]
    return textwrap.wrap(
        text, width, initial_indent=indent, subsequent_indent=indent + "  ",
        break_long_words=True, break_on_hyphens=False,
    )  # fmt: skip


def render_table(report: CompareReport, *, verbose: bool = False, width: int | None = None) -> str:
    """Aligned text: the runs, the noise basis, warnings, one line per phase (its headline
    metric, with the spread over repeats), every regression and unconfirmed move, a summary.
    ``verbose`` adds the table of every metric. With ``width`` (the terminal's ``COLUMNS``)
    every line fits it: prose wraps, a table too wide folds into one block per row."""
    head = [_ref_line("baseline", report.baseline), _ref_line("current", report.current)]
    if report.baseline_choice:
        head.append(report.baseline_choice)
    noise = _noise_line(report)
    if noise:
        head.append(noise)
    if not report.comparable:
        head.append(f"not comparable: {report.reason}")
    head += [f"warning: {w}" for w in report.warnings]
    lines = [x for line in head for x in _wrap(line, width)]
    lines.append("")
    lines += _grid([_cells(r, report, headline=True) for r in report.headlines()], width)
    if verbose:
        lines += ["", "every metric:"]
        lines += _grid([_cells(r, report, headline=False) for r in report.rows], width)
    lines.append("")
    tail = _regression_lines(report) + _unconfirmed_lines(report, verbose=verbose)
    tail.append(report.summary())
    lines += [x for line in tail for x in _wrap(line, width)]
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return for_markdown(text)  # the one markdown escape (redact.py): HTML inert, | escaped


def _md_code(text: str) -> str:
    return _md_escape(text).replace("`", "'")  # a code span has no escapes


def _md_table(report: CompareReport, rows: list[CompareRow], *, headline: bool) -> list[str]:
    cells = [_cells(row, report, headline=headline) for row in rows]
    return Table(COLUMNS, cells).markdown(_md_escape)


def render_markdown(report: CompareReport, *, verbose: bool = False) -> str:
    """Markdown (for a CI comment) with the same content as :func:`render_table`."""
    b, c = report.baseline, report.current
    lines = [
        f"**baseline** `{_md_code(b.run_id)}` ({_md_escape(b.workload or '-')}, "
        f"{_md_escape(b.started_at)})  ",
        f"**current** `{_md_code(c.run_id)}` ({_md_escape(c.workload or '-')}, "
        f"{_md_escape(c.started_at)})",
        "",
    ]
    noise = _noise_line(report)
    if noise:
        lines += [_md_escape(noise), ""]
    if report.baseline_choice:
        lines += [_md_escape(report.baseline_choice), ""]
    if not report.comparable:
        lines += [f"> **not comparable:** {_md_escape(report.reason or '')}", ""]
    if report.warnings:
        lines += [f"- warning: {_md_escape(w)}" for w in report.warnings] + [""]
    lines += _md_table(report, report.headlines(), headline=True)
    if verbose:
        lines += ["", "Every metric:", ""] + _md_table(report, report.rows, headline=False)
    lines.append("")
    notes = _regression_lines(report) + _unconfirmed_lines(report, verbose=verbose)
    notes = [f"- {_md_escape(x)}" for x in notes]
    lines += notes + ([""] if notes else [])  # the summary must not join the list
    lines.append(f"**{_md_escape(report.summary())}**")
    return "\n".join(lines) + "\n"


def _finite(x: float | None) -> float | None:
    return x if x is None or math.isfinite(x) else None


def _spread_json(values: Sequence[float]) -> dict[str, Any] | None:
    s = summarize(values)
    return None if s is None else s.to_dict()


def _ref_json(r: RunRef) -> dict[str, Any]:
    return {
        "run_id": r.run_id,
        "started_at": r.started_at,
        "workload": r.workload,
        "spec_hash": r.spec_hash,
        "env_fingerprint": r.env_fingerprint,
    }


def _noise_json(n: Noise | None) -> dict[str, Any] | None:
    if n is None:
        return None
    return {"runs": n.runs, "sd_log": n.sd_log, "spread": n.spread}


def _row_json(r: CompareRow) -> dict[str, Any]:
    return {
        "phase": r.phase,
        "metric": r.metric,
        "unit": r.unit,
        "direction": r.direction,
        "baseline": r.baseline,
        "current": r.current,
        "baseline_repeats": list(r.baseline_repeats),
        "current_repeats": list(r.current_repeats),
        "baseline_spread": _spread_json(r.baseline_repeats),
        "current_spread": _spread_json(r.current_repeats),
        "delta": _finite(r.delta),
        "change": _finite(r.change),
        "threshold": r.threshold,
        "test": r.test,
        "p_value": r.p_value,
        "p_adjusted": r.p_adjusted,
        "family": r.family,
        "tail_ops": r.tail_ops,
        "sd_log": r.sd_log,
        "noise": _noise_json(r.noise),
        "significant": r.significant,
        "confirm_repeats": r.confirm_repeats,
        "confirm_runs": r.confirm_runs,
        "mark": r.mark,
    }


def _options_json(o: CompareOptions) -> dict[str, Any]:
    return {
        "threshold_throughput": o.threshold_throughput,
        "threshold_latency": o.threshold_latency,
        "per_metric": [list(p) for p in o.per_metric],
        "strict": o.strict,
        "fail_on": o.fail_on,
        "alpha": o.alpha,
        "correction": o.correction,
        "power": o.power,
        "spread_repeats": o.spread_repeats,
        "min_history": o.min_history,
        "tail_df": o.tail_df,
    }


def render_json(report: CompareReport, *, verbose: bool = False) -> str:
    """The report as JSON: raw numbers (bytes/s, seconds), no labels; infinities as null.
    Every metric is always there (``verbose`` changes nothing)."""
    rows = [_row_json(r) for r in report.rows]
    basis = report.noise
    doc = {
        "baseline": _ref_json(report.baseline),
        "current": _ref_json(report.current),
        "comparable": report.comparable,
        "reason": report.reason,
        "baseline_choice": report.baseline_choice,
        "mismatches": list(report.mismatches),
        "warnings": list(report.warnings),
        "noise_basis": None
        if basis is None
        else {
            "history": basis.url,
            "runs": basis.runs,
            "spec_hash": basis.spec_hash,
            "host_class": basis.host_class,
            "fs_identity": basis.fs_identity,
        },
        "options": _options_json(report.options),
        "phases": [
            {"phase": r.phase, "metric": r.metric, "mark": r.mark} for r in report.headlines()
        ],
        "rows": rows,
        "regressions": [r.name for r in report.regressions],
        "improvements": [r.name for r in report.improvements],
        "unconfirmed": [r.name for r in report.unconfirmed],
        "unconfirmed_worse": [r.name for r in report.unconfirmed_worse],
        "summary": report.summary(),
        "exit_status": int(report.exit_status()),
    }
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"
