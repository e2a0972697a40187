"""``iobench qualify``: the full suite with a verdict, a report and a history entry."""

from __future__ import annotations

import typer

from ..cli import (
    CSV_OPTION,
    LIVE_CSV_OPTION,
    SERIES_CSV_OPTION,
    STALL_OPTION,
    app,
    arm_watchdog,
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


def _dur(seconds: float) -> str:
    """180.0 -> ``3m``, 30.0 -> ``30s``: as a user would type it after --budget."""
    return f"{seconds / 60:g}m" if seconds >= 60 and seconds % 60 == 0 else f"{seconds:g}s"


@app.command()
def qualify(
    target: str = typer.Argument(..., help="Directory to qualify."),
    profile: str = typer.Option(
        None,
        "--profile",
        metavar="NAME",
        help=f"Training profile, name or TOML path (default {DEFAULT_PROFILE}).",
    ),
    set_: list[str] | None = typer.Option(
        None, "--set", metavar="KEY=VALUE", help="Override a profile key: KEY=VALUE."
    ),
    gpus: int = typer.Option(
        None, "--gpus", metavar="N", help="Accelerators the storage must feed (default 1)."
    ),
    require: str = typer.Option(
        None,
        "--require",
        help="Explicit requirements: read=5GiB/s,creates=20k/s,iops=50k/s,au=0.9,...",
    ),
    quick: bool = typer.Option(False, "--quick", help=f"About {_dur(QUICK_BUDGET_S)} in all."),
    budget: str = typer.Option(
        None,
        "--budget",
        metavar="DURATION",
        help=f"Time budget for the whole suite (default {_dur(DEFAULT_BUDGET_S)}; "
        f"--quick {_dur(QUICK_BUDGET_S)}).",
    ),
    old_budget: str = typer.Option(None, "--time", hidden=True, help="Old name of --budget."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan; write nothing."),
    checkpoint: str = typer.Option(
        None,
        "--checkpoint",
        metavar="SIZE",
        help=f"Full checkpoint size to estimate (default {DEFAULT_CHECKPOINT // 10**9}GB).",
    ),
    model: str = typer.Option(
        None, "--model", help="LLM checkpoint model (workloads/checkpoints), e.g. llama3-70b."
    ),
    mtbf: str = typer.Option(None, "--mtbf", help="With --model: the job's MTBF, e.g. 3h."),
    failure_rate: str = typer.Option(
        None, "--failure-rate", help="With --model: failures per accelerator-day (x --gpus)."
    ),
    interval: str = typer.Option(
        None, "--interval", help="With --model: your checkpoint interval, e.g. 30m."
    ),
    restart: str = typer.Option(
        None, "--restart", help="With --model: restart cost per failure, e.g. 10m."
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
    csv_path: str | None = CSV_OPTION,
    series_csv: str | None = SERIES_CSV_OPTION,
    live_csv: str | None = LIVE_CSV_OPTION,
    stall_timeout: str | None = STALL_OPTION,
) -> int:
    """Qualify TARGET: every phase, the loader, the estimate, and a pass/fail verdict (exit 0/1)."""
    from ..api import append_history, check_history_url
    from ..ckpt_estimate import parse_options

    arm_watchdog(stall_timeout)

    budget = deprecated("--time", "--budget", old_budget, budget)
    from ..coordinator import SingleProcess
    from ..distributed import coordinator_from_env, is_lead_rank
    from ..errors import ExitStatus
    from ..qualify import run_qualify

    ckpt_opts = parse_options(mtbf=mtbf, failure_rate=failure_rate, interval=interval,
                              restart=restart)  # fmt: skip
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
            checkpoint=checkpoint, model=model, ckpt_opts=ckpt_opts,
            coord=coord, sets=set_,
        )  # fmt: skip
    finally:
        close_live_csv(live)
    if plan_text is not None:
        if lead:
            out(plan_text)
        return ExitStatus.OK
    if not lead:
        if outcome.error is not None:
            raise outcome.error
        coord.barrier()  # ranks leave together: torchrun kills the rest when one exits 1 (a fail)
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
    write_exports(run, csv_path, series_csv)
    if outcome.error is not None:
        raise outcome.error
    coord.barrier()  # after rank 0's output: the other ranks wait for it (see above)
    return ExitStatus.OK if run.verdict["result"] == "pass" else ExitStatus.FAILED
