"""The self-contained HTML page: inline CSS and SVG plots, no network resources."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..result.file import RunResult, atomic_write_bytes
from .cells import Section, _errors, _indicative_note, _phase_warnings, _status_cell
from .figures import _Plot
from .plots import _build_plots
from .svgplot import esc
from .tables import (
    _baseline_table,
    _cache_table,
    _checkpoint_tables,
    _estimate_tables,
    _loader_table,
    _metadata_table,
    _phase_detail_tables,
    _ranks_table,
    _run_info,
    _verdict,
)

_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --alt:#f6f8fa; --pass:#1a7f37;
        --fail:#cf222e; --warn:#9a6700; --indicative:#f0b429; --model:#8250df; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: var(--fg);
       font: 14px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", "Helvetica Neue", Arial,
             "Liberation Sans", "DejaVu Sans", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 28px 24px 56px; }
header h1 { font-size: 24px; margin: 0; font-weight: 650; letter-spacing: -0.01em; }
header .sub { color: var(--muted); margin: 2px 0 16px; }
h2 { font-size: 17px; font-weight: 650; margin: 34px 0 12px; padding-bottom: 6px;
     border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 18px 0 8px; }
code { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono",
       monospace; background: var(--alt); padding: 1px 5px; border-radius: 4px;
       word-break: break-all; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
.banner { border-radius: 8px; padding: 14px 20px; margin: 20px 0 8px; color: #fff; }
.banner.pass { background: var(--pass); }
.banner.fail { background: var(--fail); }
.banner.rests-indicative { border-left: 12px solid var(--indicative); }
.banner.warn { background: var(--warn); }
.banner.indicative { background: var(--indicative); color: #1f2328; }
.banner .word { font-size: 28px; font-weight: 750; letter-spacing: 0.06em; }
.banner .label { font-size: 12px; text-transform: uppercase; letter-spacing: 0.08em;
                 opacity: 0.85; }
.banner ul { margin: 6px 0 0; padding-left: 20px; }
.banner .basis { font-size: 13px; font-weight: 600; margin-top: 2px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 12.5px;
        max-width: 100%; }
table.wide { width: 100%; }
th, td { padding: 5px 7px; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }
table.grid td.r, table.grid th.r { white-space: nowrap; }
table.grid td:first-child { overflow-wrap: anywhere; min-width: 7em; }
table.grid td { overflow-wrap: break-word; }
th { background: var(--alt); font-weight: 600; border-bottom: 1px solid #afb8c1; }
th.r, td.r { text-align: right; }
tr.bad td { background: #fff1f0; }
td.status-PARTIAL, td.status-FAILED { color: var(--fail); font-weight: 650; }
td.status-indicative { color: var(--warn); font-weight: 650; }
td.worse { color: var(--fail); font-weight: 650; }
td.better { color: var(--pass); }
table.kv th { background: none; border-bottom: 1px solid var(--line); color: var(--muted);
              font-weight: 500; width: 240px; }
.estimate { border-left: 4px solid var(--model); background: #fbf9ff; padding: 4px 18px 14px;
            border-radius: 0 6px 6px 0; }
.estimate .tag { display: inline-block; font-size: 11px; font-weight: 650; color: var(--model);
                 border: 1px solid var(--model); border-radius: 10px; padding: 0 8px;
                 text-transform: uppercase; letter-spacing: 0.06em; }
.note { color: var(--muted); font-size: 13px; margin: 6px 0; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px 8px;
         background: #fff; break-inside: avoid; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
figure.numbers h3 { margin: 2px 0 8px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 14px; margin: 0;
           font-size: 13px; }
dl.facts dt { font-weight: 600; overflow-wrap: anywhere; }
dl.facts dd { margin: 0; }
ul.warnings { padding-left: 0; list-style: none; margin: 0; }
ul.warnings li { border-left: 3px solid var(--warn); background: #fff8c5; padding: 6px 12px;
                 margin: 0 0 6px; border-radius: 0 4px 4px 0; }
ul.errors li { border-left-color: var(--fail); background: #fff1f0; }
footer { color: var(--muted); font-size: 12px; margin-top: 40px; border-top: 1px solid var(--line);
         padding-top: 10px; }
@media print { main { max-width: none; padding: 0; } .plots { display: block; }
               figure { margin-bottom: 12px; } }
"""


def _e(text: Any) -> str:
    """Every text of the HTML page: credentials masked and control characters escaped as on
    the terminal (iobench.core.redact), then HTML-escaped (as every text in a plot)."""
    return esc(text)


def _html_table(t: Section, wide: bool = False) -> str:
    """A table of the page (core.table): a grid in a box that scrolls rather than overflow,
    or a label/value block."""
    if t.table.pairs:
        return t.table.html(_e, "kv")
    return f'<div class="scroll">{t.table.html(_e, "grid wide" if wide else "grid")}</div>'


def _rests_on(run: RunResult) -> str:
    """What the verdict rests on: its phases by status (``22 phases: 3 ok, 19 indicative``),
    and whether it was a smoke test."""
    counts: dict[str, int] = {}
    for p in run.phases:
        cell = _status_cell(p)
        counts[cell] = counts.get(cell, 0) + 1
    if not counts:
        return ""
    n = len(run.phases)
    text = f"Rests on {n} phase{'s' if n != 1 else ''}: " + ", ".join(
        f"{v} {k}" for k, v in counts.items()
    )
    v = run.verdict_block
    if v is not None and v.smoke_test:
        text += "; a smoke test (--quick)"
    return text


def _html_banner(run: RunResult) -> str:
    verdict = _verdict(run)
    if verdict:
        result, reasons = verdict
        # coloured by what it rests on: a pass on indicative phases is amber, never green
        kind = {"PASS": "pass", "PASS (INDICATIVE)": "indicative", "FAIL": "fail"}.get(
            result, "warn"
        )
        items = "".join(f"<li>{_e(r)}</li>" for r in reasons)
        basis = _rests_on(run)
        basis = f'<div class="basis">{_e(basis)}</div>' if basis else ""
        if kind == "fail" and run.verdict_block is not None and run.verdict_block.indicative:
            kind += " rests-indicative"  # a fail on indicative phases: an amber edge
        return (
            f'<section class="banner {kind}" id="verdict"><div class="label">Verdict</div>'
            f'<div class="word">{_e(result)}</div>{basis}'
            f"{f'<ul>{items}</ul>' if items else ''}</section>"
        )
    if run.status != "complete":
        msg = f"<ul><li>{_e(run.error)}</li></ul>" if run.error else ""
        return (
            f'<section class="banner warn" id="verdict"><div class="label">Run status</div>'
            f'<div class="word">{_e(run.status.upper())}</div>{msg}</section>'
        )
    return ""


def _plot_id(title: str) -> str:
    """An element id for a plot: ``plot-latency-tail-read`` (titles are unique; the page
    numbers a repeat all the same)."""
    return "plot-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _html_header(run: RunResult) -> list[str]:
    """The page's head, title, run information and verdict banner."""
    wl = run.workload_block.name
    title = f"iobench report: {wl or run.run_id}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>",
        "<header>",
        f"<h1>{_e(title)}</h1>",
        f'<div class="sub">Storage and data-loader throughput, run {_e(run.run_id)}</div>',
    ]
    meta = []
    for k, v in _run_info(run):
        value = f"<code>{_e(v)}</code>" if k == "Command" else _e(v)
        meta.append(f"<dt>{_e(k)}</dt><dd>{value}</dd>")
    parts.append(f'<dl class="meta">{"".join(meta)}</dl></header>')
    parts.append(_html_banner(run))
    return parts


def _html_summary(run: RunResult) -> list[str]:
    """The Summary section: every phase, status second, then their volume, time and spread."""
    if not run.phases:
        return []
    summary, volume = _phase_detail_tables(run)
    parts = ['<section id="phases"><h2>Summary</h2>']
    parts.append(_html_table(summary, wide=True))
    parts.append(
        '<p class="note">Bandwidth is all bytes over first start to last end (last done); '
        "first done is the figure when the first worker finished.</p>"
    )
    if _indicative_note(run):
        parts.append(f'<p class="note">{_e(_indicative_note(run))}</p>')
    parts.append(f"<h3>{_e(volume.title)}</h3>")
    parts.append(_html_table(volume))
    if volume.note:
        parts.append(f'<p class="note">{_e(volume.note)}</p>')
    parts.append("</section>")
    return parts


def _html_sections(run: RunResult, baseline: RunResult | None) -> list[str]:
    """The baseline's deltas, the ranks, metadata and loader tables."""
    parts = []
    if baseline is not None and run.phases:
        bt = _baseline_table(run, baseline)
        parts.append(f'<section id="baseline"><h2>{_e(bt.title)}</h2>')
        parts.append(_html_table(bt) + f'<p class="note">{_e(bt.note)}</p></section>')
    ranks_t = _ranks_table(run)
    if ranks_t is not None:
        parts.append(f'<section id="clients"><h2>{_e(ranks_t.title)}</h2>')
        parts.append(_html_table(ranks_t) + f'<p class="note">{_e(ranks_t.note)}</p></section>')
    meta_t = _metadata_table(run)
    if meta_t:
        parts.append(f'<section id="metadata"><h2>{_e(meta_t.title)}</h2>')
        parts.append(_html_table(meta_t) + "</section>")
    loader = _loader_table(run)
    if loader:
        parts.append(f'<section id="loader"><h2>{_e(loader.title)}</h2>')
        parts.append(_html_table(loader) + "</section>")
    return parts


def _html_estimate(run: RunResult) -> list[str]:
    """The Estimate section, labelled as such, with its basis."""
    est = _estimate_tables(run)
    if not est:
        return []
    parts = ['<section id="estimate"><h2>Estimate</h2><div class="estimate">']
    parts.append('<p><span class="tag">estimate</span> ')
    parts.append(f"{_e(est[0].note)}</p>")
    parts.append(_html_table(est[0]))
    for t in est[1:]:
        parts.append(f"<h3>{_e(t.title)}</h3>{_html_table(t)}")
        if t.note:
            parts.append(f'<p class="note">{_e(t.note)}</p>')
    parts.append("</div></section>")
    return parts


def _html_checkpoint(run: RunResult) -> list[str]:
    """The Checkpoint section: the same tables as the terminal and markdown reports."""
    parts = []
    for t in _checkpoint_tables(run):
        note = f'<p class="note">{_e(t.note)}</p>' if t.note else ""
        parts.append(f"<h3>{_e(t.title)}</h3>{_html_table(t)}{note}")
    if not parts:
        return []
    return ['<section id="checkpoint"><h2>Checkpoint</h2><div class="estimate">', *parts,
            "</div></section>"]  # fmt: skip


def _figure(p: _Plot, fid: str) -> str:
    """One figure: its SVG, or its figures as numbers (a phase too short to plot)."""
    cap = f"<figcaption>{_e(p.caption)}</figcaption>" if p.caption else ""
    facts = ""
    if p.facts:
        rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in p.facts)
        facts = f'<dl class="facts">{rows}</dl>'
    head = "" if p.svg else f"<h3>{_e(p.title)}</h3>"
    cls = "" if p.svg else ' class="numbers"'
    return (f'<figure id="{fid}"{cls} aria-label="{_e(p.title)}">{p.svg}{head}{facts}{cap}'
            "</figure>")  # fmt: skip


def _html_plots(run: RunResult, baseline: RunResult | None) -> list[str]:
    """The Plots section: one figure per plot, each with an id of its own."""
    plots = _build_plots(run, baseline)
    if not plots:
        return []
    parts = ['<section id="plots"><h2>Plots</h2><div class="plots">']
    seen: dict[str, int] = {}
    for p in plots:
        fid = _plot_id(p.title)
        seen[fid] = seen.get(fid, 0) + 1
        parts.append(_figure(p, fid if seen[fid] == 1 else f"{fid}-{seen[fid]}"))
    parts.append("</div></section>")
    return parts


def _html_footer(run: RunResult) -> list[str]:
    """Errors, warnings, the cache handling and the footer."""
    parts = []
    errors = _errors(run)
    if errors:
        items = "".join(f"<li>{_e(e)}</li>" for e in errors)
        parts.append(f'<section id="errors"><h2>Errors ({len(errors)})</h2>')
        parts.append(f'<ul class="warnings errors">{items}</ul></section>')
    warnings = _phase_warnings(run)
    if warnings:
        items = "".join(f"<li>{_e(w)}</li>" for w in warnings)
        parts.append(f'<section id="warnings"><h2>Warnings ({len(warnings)})</h2>')
        parts.append(f'<ul class="warnings">{items}</ul></section>')
    cache = _cache_table(run)
    if cache:
        parts.append(
            f'<section id="cache"><h2>{_e(cache.title)}</h2>{_html_table(cache)}</section>'
        )
    parts.append(
        f"<footer>Generated by iobench {_e(run.iobench_version)} from result schema "
        f"{_e(run.schema_version)}. Figures are measured in this run unless labelled estimate."
        "</footer></main></body></html>"
    )
    return parts


def render_html(run: RunResult, baseline: RunResult | None = None) -> str:
    """One self-contained HTML page: inline CSS and SVG plots, no network resources; with a
    ``baseline``, its deltas table and its curves dashed in every plot."""
    parts = _html_header(run) + _html_summary(run) + _html_sections(run, baseline)
    parts += _html_estimate(run) + _html_checkpoint(run) + _html_plots(run, baseline)
    parts += _html_footer(run)
    return "\n".join(p for p in parts if p) + "\n"


def write_report(run: RunResult, directory: str | Path) -> Path:
    """Write ``report.html`` atomically into ``directory`` (beside result.json); return its path."""
    path = Path(directory) / "report.html"
    atomic_write_bytes(path, render_html(run).encode("utf-8"))
    return path
