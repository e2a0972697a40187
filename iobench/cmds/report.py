"""``iobench report``: re-render a saved result as text, markdown or a self-contained HTML page."""

from __future__ import annotations

from pathlib import Path

import typer

from ..cli import app, out


@app.command()
def report(
    result: str = typer.Argument(..., help="A result.json or its directory."),
    html: str = typer.Option(None, "--html", help="Write the HTML report to this file."),
    markdown: bool = typer.Option(False, "--markdown", help="Print markdown instead of the table."),
) -> int:
    """Render a saved result (the HTML report beside it is re-written with --html)."""
    from .. import report as rep
    from .. import results

    run = results.load(result)
    source = Path(result) / "result.json" if Path(result).is_dir() else Path(result)
    if html is not None:  # before anything is printed: a refused path writes nothing
        results.claim_output_file(html, inputs=(source,), option="--html")
    out(rep.render_markdown(run) if markdown else rep.render_terminal(run))
    if run.checkpoint and not markdown:
        from ..ckpt_estimate import render as render_checkpoint

        out(render_checkpoint(run.checkpoint))
    if html is not None:
        path = results.write_output_file(
            html, rep.render_html(run).encode(), inputs=(source,), option="--html"
        )
        out(f"report: {path}")
    return 0
