"""``iobench loader``: the profile's dataset through a real torch DataLoader, with emulated
compute on N accelerators, measured beside the starvation model's prediction."""

from __future__ import annotations

import typer

from .common import (
    CSV_OPTION,
    DRY_RUN_OPTION,
    SERIES_CSV_OPTION,
    STALL_OPTION,
    announce,
    app,
    check_exports,
    finish_run,
    print_plan,
    progress_factory,
    stall_setting,
)

_PROFILE_OPTION = typer.Option(
    None,
    "--profile",
    help="Profile name (see `iobench workloads`) or TOML path (needed without --existing).",
)
_EXISTING_OPTION = typer.Option(
    False, "--existing", help="Read the dataset already at TARGET, read-only (see README)."
)
_FMT_OPTION = typer.Option(
    None,
    "--format",
    help="With --existing: the format; detected from the file names when left out.",
)
_TRANSFORM_OPTION = typer.Option(
    None, "--transform", help="With --existing: your per-sample transform, MODULE:FUNCTION."
)
_GPUS_OPTION = typer.Option(
    None,
    "--gpus",
    help="Emulated accelerators (default 1): one process each on this host; under "
    "torchrun, one per rank across hosts.",
)
_WORKERS_OPTION = typer.Option(
    None, "--workers", help="DataLoader workers per accelerator (default: the profile's)."
)
_STEPS_OPTION = typer.Option(
    None, "--steps", help="Steps per epoch and accelerator (default: every full batch)."
)
_EPOCHS_OPTION = typer.Option(
    None, "--epochs", help="Passes over the dataset (default: the profile's)."
)
_COMPUTE_OPTION = typer.Option(
    "sleep", "--compute", help="Emulated compute: sleep, or gpu (calibrated CUDA matmuls)."
)
_DIRECT_OPTION = typer.Option(
    None, "--direct/--buffered", help="O_DIRECT reads (default when the target takes them)."
)
_OUTPUT_OPTION = typer.Option(
    None, "--output", help="Result directory (default ./iobench-results/RUN_ID)."
)
_HISTORY_OPTION = typer.Option(None, "--history", help="History URL to append this run to.")
_DURING_OPTION = typer.Option(
    None,
    "--during-checkpoint",
    help="Write this model's checkpoint (see `iobench workloads`) in the background while the "
    "loader reads, as an async save does; AU before, during and after each save.",
)
_CKPT_SCALE_OPTION = typer.Option(
    None, "--checkpoint-scale", help="Fraction of every rank's shard written (default 0.001)."
)
_CKPT_AT_OPTION = typer.Option(
    None,
    "--checkpoint-at",
    metavar="DURATION",
    help="When the first save starts: a duration into the timed steps, or Nsteps (default 2s).",
)
_CKPT_EVERY_OPTION = typer.Option(
    None,
    "--checkpoint-every",
    metavar="DURATION",
    help="Save again this long (a duration, or Nsteps) after each save started (default: once).",
)
_CKPT_RATE_OPTION = typer.Option(
    None,
    "--checkpoint-rate",
    metavar="BANDWIDTH",
    help="A plain writer paced at this rate instead of as fast as it can, e.g. 200MiB/s.",
)
_BESIDE_OPTION = typer.Option(
    None,
    "--beside",
    metavar="KIND:RATE",
    help="With --during-checkpoint: another job on the same storage beside the loop, "
    "writer:RATE (a sequential writer) or reader:RATE (a reader of its own files); RATE a "
    "bandwidth or max.",
)
_READ_PROBE_OPTION = typer.Option(
    None,
    "--read-probe",
    metavar="N",
    help="With --during-checkpoint: the saves the read probe measures before the loop (the "
    "loader's reads, its workers at once, beside the save written again; the model's probe "
    "rule), default 2; 0 for none.",
)


@app.command()
def loader(
    target: str = typer.Argument(
        ...,
        help="Directory to lay the dataset out in (a run dir); with --existing, the dataset "
        "(directory or fsspec URL) to read, never written.",
    ),
    profile: str | None = _PROFILE_OPTION,
    existing: bool = _EXISTING_OPTION,
    fmt: str | None = _FMT_OPTION,
    transform: str | None = _TRANSFORM_OPTION,
    set_: list[str] | None = typer.Option(None, "--set", help="Override a profile key: KEY=VALUE."),
    gpus: int | None = _GPUS_OPTION,
    workers: int | None = _WORKERS_OPTION,
    steps: int | None = _STEPS_OPTION,
    epochs: int | None = _EPOCHS_OPTION,
    compute: str = _COMPUTE_OPTION,
    direct: bool | None = _DIRECT_OPTION,
    output: str | None = _OUTPUT_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print result.json instead of the table."),
    keep: bool = typer.Option(False, "--keep", help="Keep the run directory on the target."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    history: str | None = _HISTORY_OPTION,
    no_history: bool = typer.Option(False, "--no-history", help="Do not append to the history."),
    csv_path: str | None = CSV_OPTION,
    series_csv: str | None = SERIES_CSV_OPTION,
    stall_timeout: str | None = STALL_OPTION,
    dry_run: bool = DRY_RUN_OPTION,
    during_checkpoint: str | None = _DURING_OPTION,
    checkpoint_scale: float | None = _CKPT_SCALE_OPTION,
    checkpoint_at: str | None = _CKPT_AT_OPTION,
    checkpoint_every: str | None = _CKPT_EVERY_OPTION,
    checkpoint_rate: str | None = _CKPT_RATE_OPTION,
    beside: str | None = _BESIDE_OPTION,
    read_probe: str | None = _READ_PROBE_OPTION,
) -> int:
    """Measure the accelerator utilisation a DataLoader reaches on TARGET, and predict it."""
    from ...api import append_history
    from ...distributed import is_lead_rank

    stall = _check_inputs(target, existing, stall_timeout, csv_path, series_csv, history,
                          no_history)  # fmt: skip
    during = _during(during_checkpoint, checkpoint_scale, checkpoint_at, checkpoint_every,
                     checkpoint_rate, existing or bool(fmt or transform), beside, read_probe)  # fmt: skip
    if existing or fmt or transform:
        _no_dry_run(dry_run)
        from .loader_existing import existing_run

        outcome = existing_run(
            target, existing, profile, set_, fmt=fmt, transform=transform, gpus=gpus,
            workers=workers, steps=steps, epochs=epochs, compute=compute, direct=direct,
            output=output, keep=keep, quiet=quiet, stall=stall,
        )  # fmt: skip
    else:
        outcome = _synthetic(target, profile, set_, gpus, workers, steps, epochs, compute,
                             direct, output, keep, quiet, stall, dry_run=dry_run, during=during)  # fmt: skip
        if dry_run:
            return print_plan(outcome)
    if not no_history and is_lead_rank():
        append_history(outcome, history or "")
    return finish_run(outcome, as_json, quiet, (csv_path, series_csv))


def _check_inputs(target, existing, stall_timeout, csv_path, series_csv, history, no_history):
    """The checks before any work: the watchdog's setting (returned), the input dataset,
    exports, the history."""
    from ...api import check_history_url

    stall = stall_setting(stall_timeout)
    if existing:  # the dataset is an input: no output of this run may land inside it
        from ...core.safeio import protect_input

        protect_input(target)
    check_exports(csv_path, series_csv)
    if not no_history:
        check_history_url(history or "")
    return stall


def _no_dry_run(dry_run: bool) -> None:
    if dry_run:
        from ...core.errors import UsageError

        raise UsageError("--dry-run plans what a run writes; --existing only reads",
                         hint="drop --dry-run")  # fmt: skip


def _during(model, scale, at, every, rate, existing, beside=None, read_probe=None):
    """The background checkpoint's plan (``loader.ckpt_writer``), None without one; its
    options without --during-checkpoint, or beside --existing, are bad input."""
    from ...core.errors import UsageError
    from ...core.units import bounded_duration, is_digits, parse_count, parse_duration, parse_rate

    given = [n for n, v in (("--checkpoint-scale", scale), ("--checkpoint-at", at),
                            ("--checkpoint-every", every), ("--checkpoint-rate", rate),
                            ("--beside", beside), ("--read-probe", read_probe))
             if v is not None]  # fmt: skip
    if model is None:
        if given:
            raise UsageError(f"{given[0]} needs --during-checkpoint MODEL",
                             hint="name the model whose checkpoint to write")  # fmt: skip
        return None
    if existing:
        raise UsageError("--during-checkpoint writes a checkpoint; --existing only reads",
                         hint="drop one of them")  # fmt: skip
    from ...loader.ckpt_writer import DEFAULT_AT_S, MAX_PROBE_SAVES, PROBE_SAVES, plan_checkpoint

    def when(text, what):  # 20steps, or a duration (500ms, 30s, 5m)
        if text is None:
            return None
        t = str(text).strip()
        for unit in ("steps", "step"):
            n = t[: -len(unit)].strip()
            if t.endswith(unit) and is_digits(n):
                return float(n), "steps"
        return bounded_duration(parse_duration(t, what=what), what, text), "s"

    bps = None
    if rate is not None:
        bps, unit = parse_rate(rate)
        if unit != "B/s":
            raise UsageError(f"--checkpoint-rate {rate!r} is not a byte rate", hint="e.g. 200MiB/s")
    from dataclasses import replace

    from ...loader.beside import parse_beside

    job = parse_beside(beside) if beside is not None else None
    probes = PROBE_SAVES
    if read_probe is not None:
        probes = parse_count(read_probe, what="--read-probe (saves the read probe measures)",
                             minimum=0)  # fmt: skip
        if probes > MAX_PROBE_SAVES:
            raise UsageError(f"--read-probe {probes}: at most {MAX_PROBE_SAVES} saves",
                             hint="2 give a spread; 0 turns the probe off")  # fmt: skip
    plan = plan_checkpoint(model, scale, when(at, "--checkpoint-at") or (DEFAULT_AT_S, "s"),
                           when(every, "--checkpoint-every"), bps)  # fmt: skip
    return replace(plan, beside=job, probe_saves=probes)


def _synthetic(target, profile, set_, gpus, workers, steps, epochs, compute, direct, output,
               keep, quiet, stall, dry_run=False, during=None):  # fmt: skip
    from ...core.coordinator import SingleProcess
    from ...core.errors import UsageError
    from ...distributed import coordinator_from_env, is_lead_rank
    from ...loader import run_loader

    if profile is None:
        raise UsageError("iobench loader needs --profile", hint="or --existing for your dataset")
    return run_loader(
        target, profile, sets=set_, gpus=gpus, workers=workers, steps=steps, epochs=epochs,
        compute=compute, direct=direct, output=output, keep=keep, announce=announce,
        progress_factory=progress_factory(quiet or not is_lead_rank()), dry_run=dry_run,
        coord=SingleProcess() if dry_run else coordinator_from_env(),  # a dry run joins no group
        stall=stall,
        during=during,
    )  # fmt: skip
