"""``iobench estimate``: AU against accelerator count from a saved dataset-read sweep."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import typer

from .common import app, deprecated, out, out_text

if TYPE_CHECKING:
    from ...result.file import RunResult


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
    from ...run.sweep import describe, estimate_from_result

    threshold = deprecated("--threshold", "--min-au", old_threshold, min_au)
    est, sweep, run = estimate_from_result(
        result, profile, sets=set_, gpus=gpus, threshold=threshold
    )
    if as_json:
        doc = {**est.to_dict(), "source_run": run.run_id, "sweep": describe(sweep)}
        out(json.dumps(doc, indent=2))
        return 0
    out_text(_render(est, sweep, run))
    return 0


def _render(est: Any, sweep: Any, run: RunResult) -> str:
    """The estimate as a terminal table, labelled model output, with its measured basis."""
    from ...core.units import format_rate
    from ...run.sweep import describe

    thr = est.threshold
    iv = est.interval
    span = f" ({iv.max_gpus_low}–{iv.max_gpus_high}), {iv.level:.0%} interval" if iv else ""
    lines = [
        f"Estimate (model output, not measured): profile {est.profile}, from run {run.run_id}",
        f"  Demand per GPU       {format_rate(est.demand_bps_per_gpu)} at full utilisation",
        f"  Threshold            AU >= {thr:.0%}",
        f"  Max GPUs (estimate)  {est.max_gpus}{span}"
        + (" (even one accelerator starves)" if est.max_gpus == 0 else ""),
    ]
    if iv:
        lines.append(f"  Conservative end     {est.conservative_max_gpus} (what a verdict uses)")
    band = {g: (lo, hi) for g, lo, hi in iv.au_band} if iv else {}
    lines += [
        "",
        "  GPUs  Estimated AU  Interval       Meets threshold (low end)",
        "  ----  ------------  -------------  -------------------------",
    ]
    for n, au in est.au_at:
        lo, hi = band.get(n, (au, au))
        lines.append(
            f"  {n:>4}  {au:>12.1%}  {f'{lo:.1%}–{hi:.1%}':>13}  {'yes' if lo >= thr else 'no'}"
        )
    if est.warnings:
        lines.append("")
    lines += [f"  Warning: {w}" for w in est.warnings]
    lines += ["", "  Storage sweep used (measured):"]
    for p in describe(sweep):
        p99 = p["latency_p99_s"]
        tail = f", file p99 {p99 * 1e3:.1f} ms" if p99 is not None else ""
        lines.append(
            f"    {p['readers']:>4} readers  {format_rate(p['bandwidth_bps'])}, "
            f"{p['files_per_s']:,.0f} files/s{tail}"
        )
    if iv:
        lines += ["", f"  Interval: {iv.basis}"]
    lines += ["", f"  Basis: {est.basis}"]
    return "\n".join(lines)
