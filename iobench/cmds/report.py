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
    out(rep.render_markdown(run) if markdown else rep.render_terminal(run))
    if run.checkpoint and not markdown:
        from ..ckpt_estimate import render as render_checkpoint

        out(render_checkpoint(run.checkpoint))
    if html:
        path = Path(html)
        results.atomic_write_bytes(path, rep.render_html(run).encode())
        out(f"report: {path}")
    return 0
