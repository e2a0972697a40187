"""``iobench estimate``: AU against accelerator count from a saved dataset-read sweep."""

from __future__ import annotations

import json

import typer

from ..cli import app, deprecated, out


@app.command()
def estimate(
    result: str = typer.Argument(
        ..., help="result.json (or its directory) of `iobench run dataset-read`, loader or qualify."
    ),
    profile: str = typer.Option(
        ..., "--profile", help="Profile name (see `iobench workloads`) or TOML path."
    ),
    set_: list[str] | None = typer.Option(None, "--set", help="Override a profile key: KEY=VALUE."),
    gpus: int | None = typer.Option(
        None, "--gpus", help="Show AU at 1..N accelerators (default: doubling until it falls)."
    ),
    min_au: str | None = typer.Option(
        None,
        "--min-au",
        metavar="FRACTION",
        help="AU pass line, e.g. 0.9 or 90% (default: the profile's au_min).",
    ),
    old_threshold: str | None = typer.Option(
        None, "--threshold", hidden=True, help="Old name of --min-au."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the estimate as JSON."),
) -> int:
    """Estimate the AU this storage gives N accelerators of a profile (model output)."""
    from ..sweep import describe, estimate_from_result
    from ..units import format_rate

    threshold = deprecated("--threshold", "--min-au", old_threshold, min_au)
    est, sweep, run = estimate_from_result(
        result, profile, sets=set_, gpus=gpus, threshold=threshold
    )
    if as_json:
        doc = {**est.to_dict(), "source_run": run.run_id, "sweep": describe(sweep)}
        out(json.dumps(doc, indent=2))
        return 0
    thr = est.threshold
    lines = [
        f"Estimate (model output, not measured): profile {est.profile}, from run {run.run_id}",
        f"  Demand per GPU       {format_rate(est.demand_bps_per_gpu)} at full utilisation",
        f"  Threshold            AU >= {thr:.0%}",
        f"  Max GPUs (estimate)  {est.max_gpus}"
        + (" (even one accelerator starves)" if est.max_gpus == 0 else ""),
        "",
        "  GPUs  Estimated AU  Meets threshold",
        "  ----  ------------  ---------------",
    ]
    for n, au in est.au_at:
        lines.append(f"  {n:>4}  {au:>12.1%}  {'yes' if au >= thr else 'no'}")
    lines += ["", "  Storage sweep used (measured):"]
    for p in describe(sweep):
        p99 = p["latency_p99_s"]
        tail = f", file p99 {p99 * 1e3:.1f} ms" if p99 is not None else ""
        lines.append(
            f"    {p['readers']:>4} readers  {format_rate(p['bandwidth_bps'])}, "
            f"{p['files_per_s']:,.0f} files/s{tail}"
        )
    lines += ["", f"  Basis: {est.basis}"]
    out("\n".join(lines))
    return 0
