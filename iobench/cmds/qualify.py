"""``iobench qualify``: the full suite with a verdict, a report and a history entry."""

from __future__ import annotations

import typer

from ..cli import app, out, out_report, progress_factory


@app.command()
def qualify(
    target: str = typer.Argument(..., help="Directory to qualify."),
    profile: str = typer.Option(
        None, "--profile", help="Training profile (default resnet50-h100)."
    ),
    gpus: int = typer.Option(
        None, "--gpus", help="Accelerators the storage must feed (default 1)."
    ),
    require: str = typer.Option(
        None,
        "--require",
        help="Explicit requirements: read=5GiB/s,creates=20k/s,iops=50k/s,au=0.9,...",
    ),
    quick: bool = typer.Option(False, "--quick", help="About 30 s in all."),
    budget: str = typer.Option(
        None, "--time", help="Time budget for the suite (default 3m; --quick 30s)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
    checkpoint: str = typer.Option(
        None, "--checkpoint", help="Full checkpoint size to estimate (default 105GB)."
    ),
    engine: str = typer.Option("posix", "--engine", help="posix | fio."),
    output: str = typer.Option(
        None, "--output", help="Result directory (default ./iobench-results/RUN_ID)."
    ),
    history: str = typer.Option(
        None, "--history", help="History URL (default ~/.local/share/iobench/history)."
    ),
    no_history: bool = typer.Option(False, "--no-history", help="Do not append to the history."),
    as_json: bool = typer.Option(False, "--json", help="Print result.json instead of the table."),
    keep: bool = typer.Option(False, "--keep", help="Keep the run directory on the target."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
) -> int:
    """Qualify TARGET: every phase, the loader, the estimate, and a pass/fail verdict (exit 0/1)."""
    from ..api import append_history, check_history_url
    from ..distributed import hooks_from_env, is_lead_rank
    from ..errors import ExitStatus
    from ..qualify import run_qualify

    lead = is_lead_rank()  # under torchrun rank 0 prints, appends and writes the report
    if not no_history:
        check_history_url(history or "")
    outcome, plan_text = run_qualify(
        target, profile_name=profile, gpus=gpus, require=require, quick=quick, budget=budget,
        dry_run=dry_run, output=output, keep=keep, engine_name=engine,
        progress_factory=progress_factory(quiet or not lead), checkpoint=checkpoint,
        hooks=None if dry_run else hooks_from_env(),
    )  # fmt: skip
    if plan_text is not None:
        if lead:
            out(plan_text)
        return ExitStatus.OK
    if not lead:
        if outcome.error is not None:
            raise outcome.error
        return ExitStatus.OK if outcome.run.verdict["result"] == "pass" else ExitStatus.FAILED
    if not no_history:
        append_history(outcome, history or "")
    from .. import results

    run = outcome.run
    out(results.dumps(run)) if as_json else out_report(run)
    if not as_json and outcome.result_path:
        out(f"result: {outcome.result_path}")
        out(f"report: {outcome.result_path.parent / 'report.html'}")
        out(f"verdict: {run.verdict['result'].upper()}")
    if outcome.error is not None:
        raise outcome.error
    return ExitStatus.OK if run.verdict["result"] == "pass" else ExitStatus.FAILED
