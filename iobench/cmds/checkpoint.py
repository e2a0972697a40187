"""``iobench checkpoint``: an LLM checkpoint saved and loaded as MLPerf Storage does, with
the checkpoint model's estimates (stall, recovery, interval, goodput, capacity) beside it."""

from __future__ import annotations

import typer

from .common import (
    DRY_RUN_OPTION,
    STALL_OPTION,
    announce,
    app,
    arm_watchdog,
    finish_run,
    print_plan,
    progress_factory,
)

_MODEL_OPTION = typer.Option(
    ..., "--model", help="Checkpoint model (see `iobench workloads`) or TOML path."
)
_RANKS_OPTION = typer.Option(
    None, "--ranks", help="Ranks sharing the checkpoint (default: the model's)."
)
_SCALE_OPTION = typer.Option(
    None, "--scale", help="Fraction of every rank's shard written (default 0.001)."
)
_API_OPTION = typer.Option(None, "--api", help="torch (torch.save files, MLPerf), dcp, or both.")
_BASELINE_OPTION = typer.Option(
    None,
    "--plain-write/--no-plain-write",
    help="Also write the same files as a plain sequential write (torch.save's overhead).",
)
_CRC32_OPTION = typer.Option(
    None,
    "--crc32/--no-crc32",
    help="torch.save's CRC-32 per record (torch's default; off needs torch >= 2.6).",
)
_MTBF_OPTION = typer.Option(None, "--mtbf", help="Mean time between failures of the job, e.g. 3h.")
_FAILURE_RATE_OPTION = typer.Option(
    None, "--failure-rate", help="Failures per accelerator-day, e.g. 4.7e-4 (or 2e-5/h)."
)
_GPUS_OPTION = typer.Option(
    None, "--gpus", help="Accelerators the failure rate applies to (default: the ranks)."
)
_INTERVAL_OPTION = typer.Option(None, "--interval", help="Your checkpoint interval, e.g. 30m.")
_CAPACITY_OPTION = typer.Option(
    None, "--capacity", help="Capacity of the full system for checkpoints, e.g. 2PB."
)
_KEEP_LAST_OPTION = typer.Option(
    None, "--keep-last", help="Retention: checkpoints kept (the next lands before one goes)."
)
_OUTPUT_OPTION = typer.Option(
    None, "--output", help="Result directory (default ./iobench-results/RUN_ID)."
)
_REPEAT_OPTION = typer.Option(
    1, "--repeat", help="Save and load N times (MLPerf: 10); the median run is reported."
)
_HISTORY_OPTION = typer.Option(None, "--history", help="History URL to append this run to.")


@app.command()
def checkpoint(
    target: str = typer.Argument(..., help="Directory to write the checkpoint to (a run dir)."),
    model: str = _MODEL_OPTION,
    ranks: int | None = _RANKS_OPTION,
    scale: float | None = _SCALE_OPTION,
    api: str | None = _API_OPTION,
    baseline: bool | None = _BASELINE_OPTION,
    crc32: bool | None = _CRC32_OPTION,
    mtbf: str | None = _MTBF_OPTION,
    failure_rate: str | None = _FAILURE_RATE_OPTION,
    gpus: int | None = _GPUS_OPTION,
    interval: str | None = _INTERVAL_OPTION,
    restart: str = typer.Option("0s", "--restart", help="Restart cost per failure, e.g. 10m."),
    capacity: str | None = _CAPACITY_OPTION,
    keep_last: int | None = _KEEP_LAST_OPTION,
    output: str | None = _OUTPUT_OPTION,
    repeat: int = _REPEAT_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print result.json instead of the table."),
    keep: bool = typer.Option(False, "--keep", help="Keep the run directory on the target."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    history: str | None = _HISTORY_OPTION,
    no_history: bool = typer.Option(False, "--no-history", help="Do not append to the history."),
    stall_timeout: str | None = STALL_OPTION,
    dry_run: bool = DRY_RUN_OPTION,
) -> int:
    """Save and load an LLM checkpoint on TARGET; estimate stall, recovery and goodput."""
    arm_watchdog(stall_timeout)
    from ..api import append_history, check_history_url
    from ..ckpt_estimate import parse_options
    from ..ckpt_run import run_checkpoint
    from ..distributed import coordinator_from_env, is_lead_rank

    opts = parse_options(
        mtbf=mtbf, failure_rate=failure_rate, gpus=gpus, interval=interval, restart=restart,
        capacity=capacity, keep_last=keep_last,
    )  # fmt: skip
    if not no_history:
        check_history_url(history or "")
    lead = is_lead_rank()
    args = dict(ranks=ranks, scale=scale, api=api, baseline=baseline, crc32=crc32, opts=opts,
                output=output, repeat=repeat)  # fmt: skip
    if dry_run:
        return print_plan(run_checkpoint(target, model, dry_run=True, **args))
    outcome = run_checkpoint(
        target, model, keep=keep, announce=announce, **args,
        progress_factory=progress_factory(quiet or not lead), coord=coordinator_from_env(),
    )  # fmt: skip
    if lead and not no_history:
        append_history(outcome, history or "")
    # rank 0 prints the result and, when phases are indicative, the option that helps
    return finish_run(outcome, as_json, quiet)
