"""``iobench report``: re-render a saved result as text, markdown or a self-contained HTML page,
optionally against a baseline run (its deltas in the tables, its curves in every plot)."""

from __future__ import annotations

from pathlib import Path

import typer

from .common import app, out, out_report, out_text


@app.command()
def report(
    result: str = typer.Argument(..., help="A result.json or its directory."),
    html: str = typer.Option(None, "--html", help="Write the HTML report to this file."),
    markdown: bool = typer.Option(False, "--markdown", help="Print markdown instead of the table."),
    baseline: str = typer.Option(
        None,
        "--baseline",
        help="Overlay this run (result.json, run dir, run id, latest, latest~N) and show deltas.",
    ),
    history: str = typer.Option(
        None, "--history", help="History URL for run ids and latest (with --baseline)."
    ),
) -> int:
    """Render a saved result (the HTML report beside it is re-written with --html)."""
    from ... import report as rep
    from ...result import file as results

    run = results.load(result)
    source = Path(result) / "result.json" if Path(result).is_dir() else Path(result)
    base = _baseline(run, baseline, history) if baseline else None
    if html is not None:  # before anything is printed: a refused path writes nothing
        results.claim_output_file(html, inputs=(source,), option="--html")
    if markdown:
        out(rep.render_markdown(run, baseline=base))
    else:
        out_report(run, baseline=base)
    if html is not None:
        path = results.write_output_file(
            html, rep.render_html(run, baseline=base).encode(), inputs=(source,), option="--html"
        )
        out_text(f"report: {path}")
    return 0


def _baseline(run, ref: str, history: str | None):
    """The baseline run as ``compare`` resolves it; ``latest`` naming this very run means the
    one before it."""
    from ... import compare as cmp

    wl = (run.workload or {}).get("name")
    base = cmp.resolve(ref, history, workload=wl, what="baseline")
    if base.run_id == run.run_id and ref.strip() == "latest":
        base = cmp.resolve("latest~1", history, workload=wl, what="baseline")
    return base
