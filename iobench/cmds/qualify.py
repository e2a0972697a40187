"""``iobench qualify``: the full suite with a verdict, a report and a history entry."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from ..cli import (
    CSV_OPTION,
    LIVE_CSV_OPTION,
    SERIES_CSV_OPTION,
    app,
    check_exports,
    close_live_csv,
    deprecated,
    open_live_csv,
    out,
    out_report,
    progress_factory,
    with_live_csv,
    write_exports,
)
from ..qualify import DEFAULT_BUDGET_S, DEFAULT_CHECKPOINT, DEFAULT_PROFILE, QUICK_BUDGET_S
from .options import JSON_OPTION, KEEP_OPTION, NO_HISTORY_OPTION, OUTPUT_OPTION, QUIET_OPTION

if TYPE_CHECKING:
    from ..runner import RunOutcome


def _dur(seconds: float) -> str:
    """180.0 -> ``3m``, 30.0 -> ``30s``: as a user would type it after --budget."""
    return f"{seconds / 60:g}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g}s"


_PROFILE_OPTION = typer.Option(
    None,
    "--profile",
    metavar="NAME",
    help=f"Training profile, name or TOML path (default {DEFAULT_PROFILE}).",
)
_SET_OPTION = typer.Option(
    None, "--set", metavar="KEY=VALUE", help="Override a profile key: KEY=VALUE."
)
_GPUS_OPTION = typer.Option(
    None, "--gpus", metavar="N", help="Accelerators the storage must feed (default 1)."
)
_REQUIRE_OPTION = typer.Option(
    None,
    "--require",
    help="Explicit requirements: read=5GiB/s,creates=20k/s,iops=50k/s,au=0.9,...",
)
_BUDGET_OPTION = typer.Option(
    None,
    "--budget",
    metavar="DURATION",
    help=f"Time budget for the whole suite (default {_dur(DEFAULT_BUDGET_S)}; "
    f"--quick {_dur(QUICK_BUDGET_S)}).",
)
_CHECKPOINT_OPTION = typer.Option(
    None,
    "--checkpoint",
    metavar="SIZE",
    help=f"Full checkpoint size to estimate (default {DEFAULT_CHECKPOINT // 10**9}GB).",
)
_HISTORY_OPTION = typer.Option(
    None, "--history", help="History URL (default ~/.local/share/iobench/history)."
)


@app.command()
def qualify(
    target: str = typer.Argument(..., help="Directory to qualify."),
    profile: str = _PROFILE_OPTION,
    set_: list[str] | None = _SET_OPTION,
    gpus: int = _GPUS_OPTION,
    require: str = _REQUIRE_OPTION,
    quick: bool = typer.Option(False, "--quick", help=f"About {_dur(QUICK_BUDGET_S)} in all."),
    budget: str = _BUDGET_OPTION,
    old_budget: str = typer.Option(None, "--time", hidden=True, help="Old name of --budget."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
    checkpoint: str = _CHECKPOINT_OPTION,
    engine: str = typer.Option("posix", "--engine", help="posix | fio."),
    output: str | None = OUTPUT_OPTION,
    history: str = _HISTORY_OPTION,
    no_history: bool = NO_HISTORY_OPTION,
    as_json: bool = JSON_OPTION,
    keep: bool = KEEP_OPTION,
    quiet: bool = QUIET_OPTION,
    csv_path: str | None = CSV_OPTION,
    series_csv: str | None = SERIES_CSV_OPTION,
    live_csv: str | None = LIVE_CSV_OPTION,
) -> int:
    """Qualify TARGET: every phase, the loader, the estimate, and a pass/fail verdict (exit 0/1)."""
    from ..api import check_history_url

    budget = deprecated("--time", "--budget", old_budget, budget)
    from ..coordinator import SingleProcess
    from ..distributed import coordinator_from_env, is_lead_rank
    from ..errors import ExitStatus
    from ..qualify import run_qualify

    lead = is_lead_rank()  # under torchrun rank 0 prints, appends and writes the report
    if not dry_run:
        check_exports(csv_path, series_csv)
    if not no_history:
        check_history_url(history or "")
    coord = SingleProcess() if dry_run else coordinator_from_env()  # a dry run joins no group
    live = None if dry_run else open_live_csv(live_csv)
    try:
        outcome, plan_text = run_qualify(
            target, profile_name=profile, gpus=gpus, require=require, quick=quick, budget=budget,
            dry_run=dry_run, output=output, keep=keep, engine_name=engine,
            progress_factory=with_live_csv(progress_factory(quiet or not lead), live),
            checkpoint=checkpoint,
            coord=coord, sets=set_,
        )  # fmt: skip
    finally:
        close_live_csv(live)
    if plan_text is not None:
        if lead:
            out(plan_text)
        return ExitStatus.OK
    assert outcome is not None
    if lead:
        _report(outcome, None if no_history else history or "", as_json, (csv_path, series_csv))
    if outcome.error is not None:
        raise outcome.error
    coord.barrier()  # ranks leave together: torchrun kills the rest when one exits 1 (a fail)
    return ExitStatus.OK if outcome.run.verdict["result"] == "pass" else ExitStatus.FAILED


def _report(
    outcome: RunOutcome, history: str | None, as_json: bool, exports: tuple[str | None, ...]
) -> None:
    """Rank 0: the history entry, the result or the table, the files, the exports."""
    from .. import results
    from ..api import append_history

    if history is not None:
        append_history(outcome, history)
    run = outcome.run
    out(results.dumps(run)) if as_json else out_report(run)
    if not as_json and outcome.result_path:
        out(f"result: {outcome.result_path}")
        out(f"report: {outcome.result_path.parent / 'report.html'}")
        out(f"verdict: {run.verdict['result'].upper()}")
    write_exports(run, *exports)
