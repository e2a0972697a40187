"""``iobench checkpoint``: an LLM checkpoint saved and loaded as MLPerf Storage does, with
the checkpoint model's estimates (stall, recovery, interval, goodput, capacity) beside it.
Without TARGET, ``--write-rate``/``--read-rate`` plan from given rates: the same estimate
tables, no I/O (``_plan_from_rates``)."""

from __future__ import annotations

import functools
from typing import Any

import typer

from .common import (
    DRY_RUN_OPTION,
    STALL_OPTION,
    announce,
    app,
    finish_run,
    out,
    print_plan,
    progress_factory,
    stall_setting,
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
_WRITE_RATE_OPTION = typer.Option(
    None, "--write-rate", help="Plan without TARGET: aggregate save rate, e.g. 156GiB/s."
)
_READ_RATE_OPTION = typer.Option(
    None, "--read-rate", help="Plan without TARGET: aggregate load rate, e.g. 200GiB/s."
)
_ASYNC_OPTION = typer.Option(
    False, "--async", help="Plan without TARGET: asynchronous saves too (the host copy's stall)."
)
_HOST_COPY_OPTION = typer.Option(
    None,
    "--host-copy",
    metavar="RATE",
    help="With --async: device-to-host copy per GPU (default 63 GB/s, PCIe 5.0 x16).",
)
_SET_OPTION = typer.Option(
    None,
    "--set",
    metavar="KEY=VALUE",
    help="Override an llm-checkpoint workload parameter, e.g. metadata=false.",
)
_SUBSET_OPTION = typer.Option(
    None, "--subset", help="MLPerf subset mode: run ranks 0..N-1 of the model's layout (MLPerf: 8)."
)
_TARGET_ARGUMENT = typer.Argument(
    None, help="Directory to write the checkpoint to (a run dir); none: plan from rates."
)


def _plans_without_target(fn: Any) -> Any:
    """``checkpoint`` without TARGET, or with --write-rate/--read-rate, plans from the given
    rates (``_plan_from_rates``) instead of measuring."""

    @functools.wraps(fn)
    def wrapper(**kw: Any) -> int:
        if kw["target"] is None or (kw["write_rate"], kw["read_rate"]) != (None, None):
            return _plan_from_rates(kw)
        if kw["asynchronous"] or kw["host_copy"] is not None:
            from ...core.errors import UsageError

            raise UsageError(
                f"{'--async' if kw['asynchronous'] else '--host-copy'} plans from given rates: a "
                "run measures its own snapshot copy and reports both save modes",
                hint="leave it out, or give --write-rate/--read-rate and no TARGET to plan",
            )
        return fn(**kw)

    return wrapper


@app.command()
@_plans_without_target
def checkpoint(
    target: str | None = _TARGET_ARGUMENT,
    model: str = _MODEL_OPTION,
    ranks: int | None = _RANKS_OPTION,
    subset: int | None = _SUBSET_OPTION,
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
    write_rate: str | None = _WRITE_RATE_OPTION,
    read_rate: str | None = _READ_RATE_OPTION,
    asynchronous: bool = _ASYNC_OPTION,
    host_copy: str | None = _HOST_COPY_OPTION,
    set_: list[str] | None = _SET_OPTION,
) -> int:
    """Save and load an LLM checkpoint on TARGET; estimate stall, recovery and goodput."""
    stall = stall_setting(stall_timeout)
    from ...api import append_history, check_history_url
    from ...checkpoint.estimate import parse_options
    from ...distributed import coordinator_from_env, is_lead_rank
    from ...run.checkpoint import run_checkpoint

    opts = parse_options(
        mtbf=mtbf, failure_rate=failure_rate, gpus=gpus, interval=interval, restart=restart,
        capacity=capacity, keep_last=keep_last,
    )  # fmt: skip
    if not no_history:
        check_history_url(history or "")
    assert target is not None  # without one, _plans_without_target plans instead
    lead = is_lead_rank()
    args: dict[str, Any] = dict(ranks=ranks, scale=scale, api=api, baseline=baseline, crc32=crc32, opts=opts,
                output=output, repeat=repeat, subset=subset, sets=set_)  # fmt: skip
    if dry_run:
        return print_plan(run_checkpoint(target, model, dry_run=True, **args))
    outcome = run_checkpoint(
        target, model, keep=keep, announce=announce, **args,
        progress_factory=progress_factory(quiet or not lead), coord=coordinator_from_env(),
        stall=stall,
    )  # fmt: skip
    assert not isinstance(outcome, str)  # the plan's text comes only with dry_run
    if lead and not no_history:
        append_history(outcome, history or "")
    # rank 0 prints the result and, when phases are indicative, the option that helps
    return finish_run(outcome, as_json, quiet)


def _plan_from_rates(g: dict) -> int:
    """``iobench checkpoint --model M --write-rate R --read-rate R …`` (no TARGET): the
    estimate tables from given rates, nothing written anywhere; ``g`` holds every option of
    ``checkpoint`` as the command line set it."""
    import json

    from ...checkpoint import model as cm
    from ...checkpoint.estimate import parse_bandwidth, parse_options, plan
    from ...checkpoint.rows import plan_text
    from ...checkpoint.spec import load_checkpoint_profile
    from ...core.errors import UsageError
    from .plan import host_copy

    run_only = {
        "TARGET": g["target"], "--scale": g["scale"], "--api": g["api"],
        "--plain-write": g["baseline"], "--crc32": g["crc32"], "--output": g["output"],
        "--history": g["history"], "--repeat": None if g["repeat"] == 1 else g["repeat"],
        "--keep": g["keep"] or None, "--stall-timeout": g["stall_timeout"],
        "--subset": g["subset"], "--dry-run": g["dry_run"] or None, "--set": g["set_"] or None,
    }  # fmt: skip
    refused = [k for k, v in run_only.items() if v is not None]
    if refused:
        raise UsageError(
            f"{refused[0]} with --write-rate/--read-rate: a plan measures nothing",
            hint="give TARGET to measure, or the rates (and no TARGET) to plan",
        )
    write_rate, read_rate, ranks = g["write_rate"], g["read_rate"], g["ranks"]
    if write_rate is None or read_rate is None:
        raise UsageError(
            f"planning needs --{'write' if write_rate is None else 'read'}-rate (no TARGET given)",
            hint="e.g. --write-rate 156GiB/s --read-rate 200GiB/s, or give TARGET to measure",
        )
    if ranks is not None and ranks < 1:
        raise UsageError(f"--ranks must be at least 1, got {ranks}", hint="e.g. --ranks 8")
    opts = parse_options(
        mtbf=g["mtbf"], failure_rate=g["failure_rate"], gpus=g["gpus"], interval=g["interval"],
        restart=g["restart"], capacity=g["capacity"], keep_last=g["keep_last"],
    )  # fmt: skip
    if g["host_copy"] is not None and not g["asynchronous"]:
        raise UsageError("--host-copy needs --async", hint="add --async")
    copy, copy_basis = host_copy(g["asynchronous"], g["host_copy"])
    rates = cm.Rates(
        parse_bandwidth(write_rate, "--write-rate") or 0.0,
        parse_bandwidth(read_rate, "--read-rate") or 0.0, copy,
        basis="given on the command line",
    )  # fmt: skip
    prof = load_checkpoint_profile(g["model"])
    spec = prof.spec
    if ranks is not None and ranks != spec.ranks:
        spec = spec.resharded(ranks)
    est = plan(spec, rates, opts, dcp_files_per_rank=prof.dcp_files_per_rank,
               copy_basis=copy_basis)  # fmt: skip
    out(json.dumps(est, indent=2) if g["as_json"] else plan_text(est))
    return 0
