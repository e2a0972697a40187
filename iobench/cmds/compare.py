"""``iobench compare``: direction- and noise-aware comparison with an exit code CI can trust."""

from __future__ import annotations

import typer

from ..errors import UsageError
from .common import app, err, out


@app.command()
def compare(
    refs: list[str] = typer.Argument(
        ...,
        help="BASELINE CURRENT, or just CURRENT with --baseline (result.json, run dir, run id, latest, latest~N).",
    ),
    baseline: str = typer.Option(
        None, "--baseline", help="Baseline when only CURRENT is given (e.g. latest)."
    ),
    threshold: str = typer.Option(
        "",
        "--threshold",
        help="10% for all, or per metric pattern, e.g. bandwidth=5% or "
        "bandwidth=5%,*iops*=15% (comma-separated).",
    ),
    fmt: str = typer.Option("table", "--format", help="table | markdown | json."),
    fail_on: str = typer.Option("regression", "--fail-on", help="regression | never."),
    strict: bool = typer.Option(False, "--strict", help="Exit 3 when the runs are not comparable."),
    history: str = typer.Option(
        None, "--history", help="History URL for run ids, latest and the noise floor."
    ),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Also show every metric, not one line per phase."
    ),
) -> int:
    """Compare two runs; exit 1 when a metric regressed beyond its threshold and the noise
    (the run-to-run spread of earlier runs of the same spec on this host and storage)."""
    from .. import compare as cmp
    from .. import report as rep

    _check_args(refs, baseline, fmt)
    options = cmp.CompareOptions(strict=strict, fail_on=fail_on)
    if threshold:
        options = cmp.parse_thresholds(threshold, options)
    base, current = _resolve(refs, baseline, history)
    warn = lambda text: err(f"iobench: warning: {text}")  # noqa: E731
    noise = cmp.history_noise(base, current, history, options, on_warning=warn)
    report = cmp.compare_runs(base, current, options, noise)
    render = {"table": cmp.render_table, "markdown": cmp.render_markdown, "json": cmp.render_json}
    text = render[fmt](report, verbose=verbose)
    colour = fmt == "table" and rep.stdout_format()[1]  # a terminal, NO_COLOR unset
    out(rep.colour_compare(text) if colour else text, styled=colour)
    if not report.comparable and fmt != "json":
        err(f"iobench: not comparable: {report.reason}")
    return int(report.exit_status())


def _check_args(refs: list[str], baseline: str | None, fmt: str) -> None:
    """A UsageError for a format or a set of references compare cannot take."""
    if fmt not in ("table", "markdown", "json"):
        raise UsageError(f"--format: expected table, markdown or json, got {fmt!r}")
    if len(refs) > 2:
        raise UsageError("compare takes BASELINE and CURRENT (two references at most)")
    if len(refs) == 1 and not baseline:
        raise UsageError(
            "compare needs a baseline", hint="give BASELINE CURRENT or --baseline latest"
        )
    if len(refs) == 2 and baseline:
        raise UsageError("give the baseline once: as the first argument or with --baseline")


def _resolve(refs: list[str], baseline: str | None, history: str | None):
    """(baseline, current) runs; ``--baseline latest`` naming CURRENT itself means the run
    before it."""
    from .. import compare as cmp

    current = cmp.resolve(refs[-1], history, what="current")
    if len(refs) == 2:
        return cmp.resolve(refs[0], history, what="baseline"), current
    wl = current.workload.get("name")
    base = cmp.resolve(baseline, history, workload=wl, what="baseline")
    if base.run_id == current.run_id and baseline.strip() == "latest":
        base = cmp.resolve("latest~1", history, workload=wl, what="baseline")
    return base, current
