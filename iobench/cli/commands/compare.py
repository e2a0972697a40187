"""``iobench compare``: direction- and noise-aware comparison with an exit code CI can trust."""

from __future__ import annotations

import typer

from ...core.errors import UsageError
from .common import app, err, out

TAIL_DF_HELP = (
    "Most degrees of freedom the history's test assumes (4: runs with heavy tails; "
    "normal: Student's k - 1, for log-normal runs)."
)


@app.command()
def compare(
    refs: list[str] = typer.Argument(
        ...,
        help="BASELINE CURRENT, or just CURRENT (result.json, run dir, run id, latest, latest~N): "
        "alone, its baseline is the latest earlier run of its spec on this host and storage.",
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
    fail_on: str = typer.Option(
        "regression",
        "--fail-on",
        help="regression | unconfirmed (also an unconfirmed move the wrong way) | never.",
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Also exit 3 when host, storage, engine or cache mode differ or a run is incomplete "
        "(different workloads or specs always exit 3).",
    ),
    alpha: float = typer.Option(
        0.01, "--alpha", help="Family-wise false-alarm level over all the metrics judged."
    ),
    correction: str = typer.Option(
        "holm", "--correction", help="holm (family-wise) | bh (false-discovery rate)."
    ),
    history: str = typer.Option(
        None, "--history", help="History URL for run ids, latest, the baseline and the noise."
    ),
    tail_df: str = typer.Option("4", "--tail-df", help=TAIL_DF_HELP),
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Also show every metric, not one line per phase."
    ),
) -> int:
    """Compare two runs; exit 1 when a metric regressed beyond its threshold, confirmed with the
    false-alarm rate held to --alpha over every metric (docs/concepts/compare.md); 3 when the
    runs are not comparable."""
    from ... import compare as cmp

    _check_args(refs, baseline, fmt)
    options = _options(threshold, strict=strict, fail_on=fail_on, alpha=alpha,
                       correction=correction, tail_df=tail_df)  # fmt: skip
    warn = lambda text: err(f"iobench: warning: {text}")  # noqa: E731
    base, current, chosen = _resolve(refs, baseline, history, warn)
    noise = cmp.history_noise(base, current, history, options, on_warning=warn)
    report = cmp.compare_runs(base, current, options, noise, baseline_choice=chosen)
    _emit(report, fmt, verbose)
    if not report.comparable and fmt != "json":
        err(f"iobench: not comparable: {report.reason}")
    return int(report.exit_status())


def _options(threshold: str, *, tail_df: str, **given):
    """The comparison's options from the command line (``--threshold`` parsed over them)."""
    from ... import compare as cmp

    options = cmp.CompareOptions(tail_df=cmp.parse_tail_df(tail_df), **given)
    return cmp.parse_thresholds(threshold, options) if threshold else options


def _emit(report, fmt: str, verbose: bool) -> None:
    """The report on stdout: the table at the terminal's width (in colour on a terminal),
    markdown or JSON."""
    from ... import compare as cmp
    from ... import report as rep

    width, colour = rep.stdout_format()
    if fmt == "table":
        text = cmp.render_table(report, verbose=verbose, width=width)
    else:
        render = {"markdown": cmp.render_markdown, "json": cmp.render_json}[fmt]
        text, colour = render(report, verbose=verbose), False
    out(rep.colour_compare(text) if colour else text, styled=colour)


def _check_args(refs: list[str], baseline: str | None, fmt: str) -> None:
    """A UsageError for a format or a set of references compare cannot take."""
    if fmt not in ("table", "markdown", "json"):
        raise UsageError(f"--format: expected table, markdown or json, got {fmt!r}")
    if len(refs) > 2:
        raise UsageError("compare takes BASELINE and CURRENT (two references at most)")
    if len(refs) == 2 and baseline:
        raise UsageError("give the baseline once: as the first argument or with --baseline")


def _resolve(refs: list[str], baseline: str | None, history: str | None, warn):
    """(baseline, current, how the baseline was chosen or None); ``--baseline latest`` naming
    CURRENT itself means the run before it; no baseline at all means the latest earlier run of
    the same spec, host class and storage (:func:`iobench.compare.latest_like`)."""
    from ... import compare as cmp

    current = cmp.resolve(refs[-1], history, what="current")
    if len(refs) == 2:
        return cmp.resolve(refs[0], history, what="baseline"), current, None
    if not baseline:
        base, chosen = cmp.latest_like(current, history, on_warning=warn)
        return base, current, chosen
    wl = current.workload.get("name")
    base = cmp.resolve(baseline, history, workload=wl, what="baseline")
    if base.run_id == current.run_id and baseline.strip() == "latest":
        base = cmp.resolve("latest~1", history, workload=wl, what="baseline")
    return base, current, None
