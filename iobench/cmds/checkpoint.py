"""``iobench checkpoint``: an LLM checkpoint saved and loaded as MLPerf Storage does, with
the checkpoint model's estimates (stall, recovery, interval, goodput, capacity) beside it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from ..cli import app, out, progress_factory
from .options import (
    HISTORY_OPTION,
    JSON_OPTION,
    KEEP_OPTION,
    NO_HISTORY_OPTION,
    OUTPUT_OPTION,
    QUIET_OPTION,
)

if TYPE_CHECKING:
    from ..ckpt_estimate import Options

# the checkpoint model's options (ckpt_estimate.Options)
_MTBF = typer.Option(None, "--mtbf", help="Mean time between failures of the job, e.g. 3h.")
_FAILURE_RATE = typer.Option(
    None, "--failure-rate", help="Failures per accelerator-day, e.g. 4.7e-4 (or 2e-5/h)."
)
_GPUS = typer.Option(
    None, "--gpus", help="Accelerators the failure rate applies to (default: the ranks)."
)
_INTERVAL = typer.Option(None, "--interval", help="Your checkpoint interval, e.g. 30m.")
_RESTART = typer.Option("0s", "--restart", help="Restart cost per failure, e.g. 10m.")
_CAPACITY = typer.Option(
    None, "--capacity", help="Capacity of the full system for checkpoints, e.g. 2PB."
)
_KEEP_LAST = typer.Option(
    None, "--keep-last", help="Retention: checkpoints kept (the next lands before one goes)."
)


@app.command()
def checkpoint(
    target: str = typer.Argument(..., help="Directory to write the checkpoint to (a run dir)."),
    model: str = typer.Option(
        ..., "--model", help="Checkpoint model (see `iobench workloads`) or TOML path."
    ),
    ranks: int | None = typer.Option(
        None, "--ranks", help="Ranks sharing the checkpoint (default: the model's)."
    ),
    scale: float | None = typer.Option(
        None, "--scale", help="Fraction of every rank's shard written (default 0.001)."
    ),
    api: str | None = typer.Option(
        None, "--api", help="torch (torch.save files, MLPerf), dcp, or both."
    ),
    baseline: bool | None = typer.Option(
        None,
        "--plain-write/--no-plain-write",
        help="Also write the same files as a plain sequential write (torch.save's overhead).",
    ),
    mtbf: str | None = _MTBF,
    failure_rate: str | None = _FAILURE_RATE,
    gpus: int | None = _GPUS,
    interval: str | None = _INTERVAL,
    restart: str = _RESTART,
    capacity: str | None = _CAPACITY,
    keep_last: int | None = _KEEP_LAST,
    output: str | None = OUTPUT_OPTION,
    repeat: int = typer.Option(
        1, "--repeat", help="Save and load N times (MLPerf: 10); the median run is reported."
    ),
    as_json: bool = JSON_OPTION,
    keep: bool = KEEP_OPTION,
    quiet: bool = QUIET_OPTION,
    history: str | None = HISTORY_OPTION,
    no_history: bool = NO_HISTORY_OPTION,
) -> int:
    """Save and load an LLM checkpoint on TARGET; estimate stall, recovery and goodput."""
    from ..api import append_history, check_history_url
    from ..ckpt_run import run_checkpoint
    from ..distributed import coordinator_from_env, is_lead_rank

    opts = _model_options(mtbf, failure_rate, gpus, interval, restart, capacity, keep_last)
    if not no_history:
        check_history_url(history or "")
    lead = is_lead_rank()
    outcome = run_checkpoint(
        target, model, ranks=ranks, scale=scale, api=api, baseline=baseline, opts=opts,
        output=output, keep=keep, repeat=repeat,
        progress_factory=progress_factory(quiet or not lead), coord=coordinator_from_env(),
    )  # fmt: skip
    if lead and not no_history:
        append_history(outcome, history or "")
    if lead:
        _print(outcome, as_json)
    if outcome.error is not None:
        raise outcome.error
    return 0


def _model_options(
    mtbf: str | None,
    failure_rate: str | None,
    gpus: int | None,
    interval: str | None,
    restart: str,
    capacity: str | None,
    keep_last: int | None,
) -> Options:
    """The checkpoint model's options (``ckpt_estimate.Options``), each checked: exit 2."""
    from ..ckpt_estimate import Options, parse_failure_rate
    from ..errors import UsageError
    from ..units import parse_duration, parse_size

    if mtbf is not None and failure_rate is not None:
        raise UsageError("--mtbf and --failure-rate both given", hint="give one of them")
    if gpus is not None and gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    mtbf_s = parse_duration(mtbf, what="--mtbf") if mtbf is not None else None
    if mtbf_s is not None and mtbf_s <= 0:
        raise UsageError("--mtbf must be positive", hint="e.g. --mtbf 3h")
    interval_s = parse_duration(interval, what="--interval") if interval is not None else None
    if interval_s is not None and interval_s <= 0:
        raise UsageError("--interval must be positive", hint="e.g. --interval 30m")
    opts = Options(
        mtbf_s=mtbf_s,
        failure_rate_per_s=parse_failure_rate(failure_rate) if failure_rate else None,
        accelerators=gpus,
        interval_s=interval_s,
        restart_s=parse_duration(restart, what="--restart"),
        capacity_bytes=parse_size(capacity, what="--capacity") if capacity else None,
        keep_last=keep_last,
    )
    if keep_last is not None and keep_last < 1:
        raise UsageError(f"--keep-last must be at least 1, got {keep_last}")
    return opts


def _print(outcome: Any, as_json: bool) -> None:
    """The result (rank 0): result.json, or the phases table and the model's estimates."""
    from .. import report, results
    from ..ckpt_estimate import render

    if as_json:
        out(results.dumps(outcome.run))
        return
    out(report.render_terminal(outcome.run))
    if outcome.run.checkpoint:
        out(render(outcome.run.checkpoint))
    if outcome.result_path:
        out(f"result: {outcome.result_path}")
