"""``iobench qualify``: the full suite with a verdict, a report and a history entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from ...qualify.suite import DEFAULT_BUDGET_S, DEFAULT_CHECKPOINT, DEFAULT_PROFILE, QUICK_BUDGET_S
from .common import (
    CSV_OPTION,
    LIVE_CSV_OPTION,
    SERIES_CSV_OPTION,
    STALL_OPTION,
    announce,
    app,
    check_exports,
    close_live_csv,
    deprecated,
    open_live_csv,
    out,
    out_report,
    out_text,
    progress_factory,
    stall_setting,
    with_live_csv,
    write_exports,
)

if TYPE_CHECKING:
    from ...result.file import RunResult
    from ...run.session import RunOutcome


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
    help="Explicit requirements, comma-separated, e.g. read=5GiB/s,au=0.9 "
    "(keys: write, read, iops, creates, stats, reads, deletes, ckpt_save, ckpt_load, "
    "samples, dataset_read, free, au, gpus; with --model the checkpoint's), or a plan "
    "file from `iobench plan --output PLAN.json`: exactly its requirements.",
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
_MODEL_OPTION = typer.Option(
    None, "--model", help="LLM checkpoint model (workloads/checkpoints), e.g. llama3-70b."
)
_FAILURE_RATE_OPTION = typer.Option(
    None, "--failure-rate", help="With --model: failures per accelerator-day (x --gpus)."
)
_INTERVAL_OPTION = typer.Option(
    None, "--interval", help="With --model: your checkpoint interval, e.g. 30m."
)
_RESTART_OPTION = typer.Option(
    None, "--restart", help="With --model: restart cost per failure, e.g. 10m."
)
_OUTPUT_OPTION = typer.Option(
    None, "--output", help="Result directory (default ./iobench-results/RUN_ID)."
)
_FAIL_ON_OPTION = typer.Option(
    "fail",
    "--fail-on",
    help="fail | indicative: exit 1 on a fail (default), or also on a pass (indicative), one "
    "that rests on indicative phases (docs/concepts/verdict.md).",
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
    model: str = _MODEL_OPTION,
    mtbf: str = typer.Option(None, "--mtbf", help="With --model: the job's MTBF, e.g. 3h."),
    failure_rate: str = _FAILURE_RATE_OPTION,
    interval: str = _INTERVAL_OPTION,
    restart: str = _RESTART_OPTION,
    engine: str = typer.Option("posix", "--engine", help="posix | fio."),
    output: str = _OUTPUT_OPTION,
    history: str = _HISTORY_OPTION,
    fail_on: str = _FAIL_ON_OPTION,
    no_history: bool = typer.Option(False, "--no-history", help="Do not append to the history."),
    as_json: bool = typer.Option(False, "--json", help="Print result.json instead of the table."),
    keep: bool = typer.Option(False, "--keep", help="Keep the run directory on the target."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    csv_path: str | None = CSV_OPTION,
    series_csv: str | None = SERIES_CSV_OPTION,
    live_csv: str | None = LIVE_CSV_OPTION,
    stall_timeout: str | None = STALL_OPTION,
) -> int:
    """Qualify TARGET: every phase, the loader, the estimate, and a verdict (docs/concepts/verdict.md)."""
    from ...checkpoint.estimate import parse_options
    from ...core.coordinator import SingleProcess
    from ...core.errors import ExitStatus
    from ...distributed import coordinator_from_env, is_lead_rank

    _check(fail_on, dry_run, (csv_path, series_csv), None if no_history else history or "")
    stall = stall_setting(stall_timeout)
    budget = deprecated("--time", "--budget", old_budget, budget)
    ckpt_opts = parse_options(mtbf=mtbf, failure_rate=failure_rate, interval=interval,
                              restart=restart)  # fmt: skip
    lead = is_lead_rank()  # under torchrun rank 0 prints, appends and writes the report
    coord = SingleProcess() if dry_run else coordinator_from_env()  # a dry run joins no group
    outcome, plan_text = _run(
        live_csv, quiet or not lead, target, profile_name=profile, gpus=gpus, require=require,
        quick=quick, budget=budget, dry_run=dry_run, output=output, keep=keep, engine_name=engine,
        checkpoint=checkpoint, model=model, ckpt_opts=ckpt_opts, coord=coord, sets=set_,
        stall=stall,
    )  # fmt: skip
    if plan_text is not None:
        if lead:
            out_text(plan_text)
        return ExitStatus.OK
    if lead:
        _report(outcome, None if no_history else history or "", as_json, (csv_path, series_csv))
    if outcome.error is not None:
        raise outcome.error
    coord.barrier()  # ranks leave together: torchrun kills the rest when one exits 1 (a fail)
    return _exit_status(outcome.run, fail_on)


def _check(
    fail_on: str, dry_run: bool, exports: tuple[str | None, ...], history: str | None
) -> None:
    """The options checked before anything runs (UsageError: exit 2, nothing written)."""
    from ...api import check_history_url
    from ...qualify.verdict import check_fail_on

    check_fail_on(fail_on)
    if not dry_run:
        check_exports(*exports)
    if history is not None:
        check_history_url(history)


def _exit_status(run: RunResult, fail_on: str) -> int:
    """1 for a fail (and, with ``--fail-on indicative``, a pass (indicative)), else 0."""
    from ...core.errors import ExitStatus
    from ...qualify.verdict import verdict_fails

    judged = run.verdict_block.judged if run.verdict_block is not None else None
    return ExitStatus.FAILED if verdict_fails(judged, fail_on) else ExitStatus.OK


def _run(live_csv: str | None, quiet: bool, target: str, **kwargs: Any) -> Any:
    """``run_qualify`` with the progress bars (unless ``quiet``) and the --live-csv file."""
    from ...qualify.suite import run_qualify

    live = None if kwargs["dry_run"] else open_live_csv(live_csv)
    try:
        factory = with_live_csv(progress_factory(quiet, lines=True), live)
        return run_qualify(target, progress_factory=factory, write_report=_write_report,
                           announce=announce, **kwargs)  # fmt: skip
    finally:
        close_live_csv(live)


def _write_report(run: RunResult, out_dir: Any) -> None:
    """report.html beside result.json (rank 0, from ``run_qualify``); the output layer is
    imported only then, as before the run layer stopped importing it."""
    from ...report import write_report

    write_report(run, out_dir)


def _report(
    outcome: RunOutcome, history: str | None, as_json: bool, exports: tuple[str | None, ...]
) -> None:
    """Rank 0: the history entry, the result or the table, the files, the exports."""
    from ...api import append_history
    from ...result import file as results

    if history is not None:
        append_history(outcome, history)
    run = outcome.run
    out(results.dumps(run)) if as_json else out_report(run)
    if not as_json and outcome.result_path:
        out_text(f"result: {outcome.result_path}")
        out_text(f"report: {outcome.result_path.parent / 'report.html'}")
        block = run.verdict_block
        out_text(f"verdict: {str(block.judged if block else None).upper()}")
    write_exports(run, *exports)
