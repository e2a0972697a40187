"""``qualify --dry-run``: the plan as text (phases, bytes, space needed, expected time)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.units import format_bytes, format_rate, format_seconds
from ..model.starvation_inputs import RESAMPLES
from ..target import Target
from .bound import upper_bound_s

if TYPE_CHECKING:
    from .suite import QualifyPlan

# Assumed rates for the dry-run's time estimate of size-based steps (labelled as such).
ASSUMED_WRITE_BPS = 500 << 20
ASSUMED_READ_BPS = 1 << 30


def render_plan(plan: QualifyPlan, target: Target | None) -> str:
    """The dry-run text: phases, bytes, space needed and expected time (an estimate)."""
    lines = [
        f"iobench qualify plan ({'quick' if plan.quick else 'full'}, budget {format_seconds(plan.budget_s)}) "
        f"for {plan.profile.name} x {plan.gpus} GPU(s)",
    ]
    if target is not None:
        lines.append(
            f"target {target.root} [{target.fs_type}], {format_bytes(target.free_bytes)} free"
        )
    lines.append("")
    lines.append(f"  {'step':<12} {'workload':<22} {'expected':>10} {'space':>10}  what")
    for s in plan.steps:
        lines.append(
            f"  {s.name:<12} {s.workload:<22} {format_seconds(s.expected_s):>10} "
            f"{format_bytes(s.space_bytes):>10}  {s.note}"
        )
    ld = plan.loader
    lines.append(
        f"  {'loader':<12} {plan.profile.name:<22} {format_seconds(ld['expected_s']):>10} "
        f"{format_bytes(ld['space_bytes']):>10}  {ld['gpus']} emulated GPU(s), {ld['files']} files, "
        f"{ld['epochs']} epochs x {ld['steps']} steps"
    )
    if plan.during is not None:
        d = plan.during
        lines.append(
            f"  {'beside-ckpt':<12} {d.model:<22} {format_seconds(ld['expected_s']):>10} "
            f"{format_bytes(ld['space_bytes'] + d.total_bytes):>10}  the loader again beside an "
            f"async save of at most {format_bytes(d.total_bytes)} (sized from ckpt-save's rate), "
            f"at {d.at:g} steps: AU during it vs au_min"
        )
    lines.append(
        f"  {'estimate':<12} {'starvation model':<22} {'~5 s':>10} {'0 B':>10}  AU vs GPUs from the dataset sweep, "
        f"{RESAMPLES} bootstrap resamples for its interval"
    )
    lines.append("")
    lines.append(
        f"free space needed: {format_bytes(plan.space_bytes)} (steps run one after another; each cleans up)"
    )
    lines.append(
        f"expected time: about {format_seconds(plan.expected_s)} (estimate: time-based phases plus "
        f"size-based ones at an assumed {format_rate(ASSUMED_WRITE_BPS)} write / {format_rate(ASSUMED_READ_BPS)} read)"
    )
    lines.append(f"at most: {format_seconds(upper_bound_s(plan))} (the plan line's bound)")
    lines.append("nothing was written (dry run)")
    return "\n".join(lines)
