"""``iobench datasize``: the MLPerf Storage minimum dataset for a profile and a cluster."""

from __future__ import annotations

import json

import typer

from .common import app, out, out_text


@app.command()
def datasize(
    profile: str = typer.Option(
        ..., "--profile", help="Profile name (see `iobench workloads`) or TOML path."
    ),
    set_: list[str] | None = typer.Option(None, "--set", help="Override a profile key: KEY=VALUE."),
    gpus: int = typer.Option(..., "--gpus", help="Accelerators in total (all hosts)."),
    hosts: int = typer.Option(1, "--hosts", help="Client hosts."),
    host_mem: str | None = typer.Option(
        None, "--host-mem", help="Memory per host, e.g. 512GiB (default: this host's RAM)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> int:
    """How big the training dataset must be (both terms of the rule, and which one wins)."""
    from ...core.errors import UsageError
    from ...core.units import parse_size
    from ...model.starvation_inputs import dataset_size, format_dataset_size
    from ...run.session import physical_memory
    from ...spec.workload import load_profile, parse_overrides

    prof = load_profile(profile, parse_overrides(set_))
    if gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}")
    if hosts < 1:
        raise UsageError(f"--hosts must be at least 1, got {hosts}")
    mem = parse_size(host_mem, what="--host-mem") if host_mem is not None else physical_memory()
    if host_mem is not None and mem <= 0:
        raise UsageError(f"--host-mem must be more than 0, got {host_mem!r}")
    ds = dataset_size(prof.batch_size, gpus, hosts, mem, prof.sample_size, prof.samples_per_file)
    if as_json:
        out(json.dumps({"profile": prof.name, **ds.to_dict()}, indent=2))
        return 0
    out_text(f"Profile {prof.name}: batch {prof.batch_size}, {prof.sample_size:,} B per sample")
    out_text(format_dataset_size(ds))
    if host_mem is None:
        out_text("  (host memory: this host's RAM; pass --host-mem for the clients')")
    return 0
