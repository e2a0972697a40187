"""``qualify``'s time bound, the one its plan line gives: every step's phases at their bound,
the loader's plan in full, and an allowance for start-up per step."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.plan import phase_time_bound
from ..loader.run import loader_write_plan
from ..run.phases import get_generator

#: What no phase times, allowed for each step (and the loader) in the bound: process start-up
#: and imports (torch's), the state dicts and samples built before the timed phases, the
#: loader's worker processes and calibration, the report. Measured on the project VM (2 shared
#: cores): 7-27 s beyond the phases for a run (docs/validation/defaults.md).
STEP_START_S = 20.0


def upper_bound_s(plan: Any) -> float:
    """Seconds the suite may take at most: every step's phases at their bound
    (``plan.phase_time_bound``: a time-based phase at its limit, a size-based one at the floor
    rates, every rank's bytes through one target), the loader's dataset, probe, epochs and
    emulated compute in full (``loader.run.loader_write_plan``), and ``STEP_START_S`` for each
    step and the loader."""
    total = 0.0
    for s in plan.steps:
        for p in get_generator(s.generator).plan(s.params).phases:
            total += phase_time_bound(replace(p, bytes_moved=p.bytes_moved * plan.ranks,
                                              ops=p.ops * plan.ranks))  # fmt: skip
    ld = plan.loader
    prof = replace(plan.profile, files=ld["files"], epochs=ld["epochs"])
    total += loader_write_plan(prof, ld["gpus"], ld["steps"]).upper_s
    return total + STEP_START_S * (len(plan.steps) + 1)
