"""``iobench history``: list stored runs, show one, or follow a metric over time."""

from __future__ import annotations

import typer

from ..cli import app, err, out, out_report
from ..errors import UsageError


@app.command()
def history(
    action: str = typer.Argument("list", help="list | show RUN | trend METRIC"),
    arg: str = typer.Argument(
        None, help="RUN for show, METRIC (e.g. seq-read.bandwidth) for trend."
    ),
    url: str = typer.Option(
        None, "--history", help="History URL (default ~/.local/share/iobench/history)."
    ),
    workload: str = typer.Option(None, "--workload", help="Only runs of this workload."),
    svg: str = typer.Option(None, "--svg", help="trend: also write the plot to this SVG file."),
    as_json: bool = typer.Option(False, "--json", help="show: print the result JSON."),
) -> int:
    """Runs kept in the Parquet history, one immutable file per run."""
    from .. import history as hist
    from .. import results
    from ..units import format_count, format_rate, format_seconds, format_spread

    warn = lambda text: err(f"iobench: warning: {text}")  # noqa: E731
    if action == "list":
        runs = hist.list_runs(url, on_warning=warn)
        if workload:
            runs = [r for r in runs if r.workload == workload or r.spec_hash == workload]
        if not runs:
            out(f"no runs in {url or hist.default_history_url()}")
            return 0
        out(f"{'run id':<28} {'started':<25} {'workload':<22} {'status':<10} {'engine':<7} phases")
        for r in runs:
            out(
                f"{r.run_id:<28} {r.started_at[:24]:<25} {r.workload:<22} {r.status:<10} {r.engine:<7} {len(r.phases)}"
            )
        return 0
    if action == "show":
        if not arg:
            raise UsageError("history show needs a RUN id", hint="see iobench history list")
        run = hist.get_run(arg, url, on_warning=warn)
        out(results.dumps(run)) if as_json else out_report(run)
        return 0
    if action == "trend":
        if not arg:
            raise UsageError("history trend needs a METRIC", hint="e.g. seq-read.bandwidth")
        phase, metric = hist.split_metric(arg)
        if svg is not None:  # a path that would be refused is refused before anything else
            results.claim_output_file(svg, option="--svg")
        points = hist.trend(arg, url, workload=workload, on_warning=warn)
        if not points:
            out(f"no values of {arg} in history")
            return 0
        unit = hist.ALL_METRICS.get(metric, (None, ""))[1]
        fmt = {"B/s": format_rate, "s": format_seconds}.get(unit, lambda v: format_count(v))
        values = [fmt(p.value) for p in points]
        width = max(len(arg), *(len(v) for v in values))
        out(f"{'started':<25} {'run id':<28} {arg:>{width}}  over repeats")
        for p, value in zip(points, values, strict=True):
            s = p.spread
            spread = format_spread(s.n, s.min, s.max, s.cv, fmt)
            out(f"{p.started_at[:24]:<25} {p.run_id:<28} {value:>{width}}  {spread}")
        if svg is not None:
            path = results.write_output_file(
                svg, hist.trend_svg(points, arg, unit).encode(), option="--svg"
            )
            out(f"plot: {path}")
        return 0
    raise UsageError(
        f"unknown history action {action!r}", hint="use list, show RUN or trend METRIC"
    )
