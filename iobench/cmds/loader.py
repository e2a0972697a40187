"""``iobench loader``: the profile's dataset through a real torch DataLoader, with emulated
compute on N accelerators, measured beside the starvation model's prediction."""

from __future__ import annotations

import typer

from ..cli import (
    CSV_OPTION,
    SERIES_CSV_OPTION,
    app,
    check_exports,
    finish_run,
    progress_factory,
)
from .options import (
    HISTORY_OPTION,
    JSON_OPTION,
    KEEP_OPTION,
    NO_HISTORY_OPTION,
    OUTPUT_OPTION,
    QUIET_OPTION,
)


@app.command()
def loader(
    target: str = typer.Argument(..., help="Directory to lay the dataset out in (a run dir)."),
    profile: str = typer.Option(
        ..., "--profile", help="Profile name (see `iobench workloads`) or TOML path."
    ),
    set_: list[str] | None = typer.Option(None, "--set", help="Override a profile key: KEY=VALUE."),
    gpus: int | None = typer.Option(
        None,
        "--gpus",
        help="Emulated accelerators (default 1): one process each on this host; under "
        "torchrun, one per rank across hosts.",
    ),
    workers: int | None = typer.Option(
        None, "--workers", help="DataLoader workers per accelerator (default: the profile's)."
    ),
    steps: int | None = typer.Option(
        None, "--steps", help="Steps per epoch and accelerator (default: every full batch)."
    ),
    epochs: int | None = typer.Option(
        None, "--epochs", help="Passes over the dataset (default: the profile's)."
    ),
    compute: str = typer.Option(
        "sleep", "--compute", help="Emulated compute: sleep, or gpu (calibrated CUDA matmuls)."
    ),
    direct: bool | None = typer.Option(
        None, "--direct/--buffered", help="O_DIRECT reads (default when the target takes them)."
    ),
    output: str | None = OUTPUT_OPTION,
    as_json: bool = JSON_OPTION,
    keep: bool = KEEP_OPTION,
    quiet: bool = QUIET_OPTION,
    history: str | None = HISTORY_OPTION,
    no_history: bool = NO_HISTORY_OPTION,
    csv_path: str | None = CSV_OPTION,
    series_csv: str | None = SERIES_CSV_OPTION,
) -> int:
    """Measure the accelerator utilisation a DataLoader reaches on TARGET, and predict it."""
    from ..api import append_history, check_history_url
    from ..distributed import coordinator_from_env, is_lead_rank
    from ..loader import run_loader

    check_exports(csv_path, series_csv)
    if not no_history:
        check_history_url(history or "")
    outcome = run_loader(
        target, profile, sets=set_, gpus=gpus, workers=workers, steps=steps, epochs=epochs,
        compute=compute, direct=direct, output=output, keep=keep,
        progress_factory=progress_factory(quiet or not is_lead_rank()), coord=coordinator_from_env(),
    )  # fmt: skip
    if not no_history and is_lead_rank():
        append_history(outcome, history or "")
    return finish_run(outcome, as_json, quiet, (csv_path, series_csv))
