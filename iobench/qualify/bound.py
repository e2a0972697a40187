"""``qualify``'s time bounds, the ones its plan line gives: every step's phases at their bound,
the loader's plan in full, and what no phase times (start-up, set-up, data built) per step, by
the arithmetic ``run`` and ``loader`` use for theirs (``plan.untimed_s``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.plan import START_S, phase_time_bound, untimed_s
from ..loader.run import loader_write_plan
from ..run.phases import get_generator

#: What no phase times, allowed for each step (and the loader) in the bound: process start-up
#: and imports (torch's), the state dicts and samples built before the timed phases, the
#: loader's worker processes and calibration, the report (``plan.START_S``, as ``run``'s).
STEP_START_S = START_S


def bounds_s(plan: Any) -> tuple[float, float]:
    """(the phases' bound, the wall-time bound) of the suite, in seconds: every step's phases
    at their bound (``plan.phase_time_bound``: a time-based phase at its limit, a size-based
    one at the floor rates, every rank's bytes through one target) and the loader's dataset,
    probe, epochs and emulated compute in full (``loader.run.loader_write_plan``); the wall
    adds each step's and the loader's ``plan.untimed_s`` (start-up, set-up, data built)."""
    phases = untimed = 0.0
    for s in plan.steps:
        gp = get_generator(s.generator).plan(s.params)
        for p in gp.phases:
            phases += phase_time_bound(replace(p, bytes_moved=p.bytes_moved * plan.ranks,
                                               ops=p.ops * plan.ranks))  # fmt: skip
        untimed += untimed_s(gp)
    ld = plan.loader
    prof = replace(plan.profile, files=ld["files"], epochs=ld["epochs"])
    lw = loader_write_plan(prof, ld["gpus"], ld["steps"])
    phases += lw.upper_s
    untimed += (lw.wall_s or lw.upper_s) - lw.upper_s
    if getattr(plan, "during", None) is not None:  # the loader again, beside the model's save
        lw = loader_write_plan(prof, ld["gpus"], ld["steps"], during=plan.during)
        phases += lw.upper_s
        untimed += (lw.wall_s or lw.upper_s) - lw.upper_s
    return phases, phases + untimed


def upper_bound_s(plan: Any) -> float:
    """Seconds the suite may take at most, wall time (``bounds_s``)."""
    return bounds_s(plan)[1]
