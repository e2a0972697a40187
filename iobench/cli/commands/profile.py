"""``iobench profile``: an existing dataset's shape as a profile TOML the loader can emulate."""

from __future__ import annotations

import typer

from .common import app, out_text


@app.command()
def profile(
    path: str = typer.Argument(..., help="The dataset: a directory or an fsspec URL (read only)."),
    output: str = typer.Option(
        "profile.toml", "--output", help="The profile TOML to write (never inside the dataset)."
    ),
    sample: int = typer.Option(
        10_000, "--sample", help="Files stat'ed at most; beyond, a random sample of this many."
    ),
    fmt: str | None = typer.Option(
        None, "--format", help="The dataset format, when the extensions do not say it."
    ),
    scale: float = typer.Option(
        1.0, "--scale", help="Files in the profile: the dataset's × this (emulate it smaller)."
    ),
    set_: list[str] | None = typer.Option(
        None,
        "--set",
        help="A profile key the dataset does not give: KEY=VALUE, e.g. batch_size=256.",
    ),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing --output."),
) -> int:
    """Profile an existing dataset read-only (statistics only, no names) as a profile TOML."""
    import math

    from ...core.errors import UsageError
    from ...core.units import format_bytes
    from ...loader.profile import (
        check_output,
        check_sets,
        profile_dataset,
        render_toml,
        write_profile,
    )
    from ...spec.workload import KIND_MAXIMUM, PROFILE_PARAMS

    most = KIND_MAXIMUM["count"]  # the files a profile may hold
    if not (math.isfinite(scale) and 0 < scale <= most):
        raise UsageError(
            f"--scale must be more than 0 and at most {most:,}, got {scale!r}",
            hint="e.g. --scale 0.1 for a tenth of the dataset's files",
        )
    sets = check_sets(set_)
    dest = check_output(output, path, force)
    loop = {k: sets.get(k, PROFILE_PARAMS[k].default) for k in ("batch_size", "workers")}
    prof, basis = profile_dataset(path, sample=sample, fmt=fmt, **loop)
    if math.ceil(prof.files * scale) > most:  # before the write, never in the written file
        limit = most / prof.files  # floored, so that the scale shown is one that fits
        shown = f"{math.floor(limit)}" if limit >= 1 else f"{math.floor(limit * 1e6) / 1e6:g}"
        raise UsageError(
            f"--scale {scale:g} makes {prof.files:,} files {math.ceil(prof.files * scale):,}, "
            f"more than {most:,}",
            hint=f"give --scale {shown} or less",
        )
    write_profile(render_toml(prof, basis, scale=scale, sets=sets), dest)
    looked = (
        f"all {prof.files_stat:,} stat'ed"
        if prof.bytes_exact
        else f"{prof.files_stat:,} of {prof.files:,} stat'ed (a random sample; bytes estimated)"
    )
    out_text(
        f"{prof.fmt} dataset: {prof.files:,} files ({looked}), "
        f"{format_bytes(prof.total_bytes)}, {prof.samples_per_file:,} sample(s) per file "
        f"({prof.inspected} opened to count), sample {format_bytes(prof.sample_size)} "
        f"± {format_bytes(prof.sample_size_sd)}"
    )
    out_text(
        f"unreadable: {prof.unreadable} of the {prof.inspected} files opened "
        f"({prof.mismatched} more whose contents say another format)"
    )
    out_text(f"decode: {prof.decode_note}")
    out_text(f"profile written to {output} (emulated as {prof.synthetic_format})")
    return 0
