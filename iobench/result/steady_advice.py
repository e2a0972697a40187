"""The one line a run ends with when some of its phases are indicative: how many, which and
why, and the exact option that would make them steady. Pure: a RunResult's phases and its
workload block in, a line out (None when every phase is steady or none can be made so by an
option of the workload).
"""

from __future__ import annotations

import math
from typing import Any

from .steady import (
    DEFAULT_STEADY,
    RAMP_ROUNDS,
    REPEATABLE_META,
    WINDOW_ROUNDS,
    epochs_steady,
    indicative_reason,
    rounds_needed,
)

#: A size-based phase gets this many seconds in the advice: the criterion's ramp and window
#: twice over (stats.DEFAULT_STEADY), as a phase that is steady at all is by then.
TARGET_S = 2 * (DEFAULT_STEADY.ramp_s + DEFAULT_STEADY.dur_s)
#: Generators whose phases take ``time`` (the dataset's layout write does not: files once).
TIMED = ("sequential", "dataset")
LAYOUT = "dataset-write"
#: Generators whose checkpoint phases repeat whole rounds (``rounds``, ``time``, ``steady``).
ROUNDS = ("checkpoint", "llm-checkpoint")


def _get(p: Any, key: str, default: Any = None) -> Any:
    return p.get(key, default) if isinstance(p, dict) else getattr(p, key, default)


def _duration(seconds: float) -> str:
    """As a user types it after ``time=``: ``40s``, ``2m``."""
    s = math.ceil(seconds)
    return f"{s // 60}m" if s >= 60 and s % 60 == 0 else f"{s}s"


def _rounds_option(rounds: dict[str, Any], params: dict[str, Any]) -> str | None:
    """A phase of checkpoint rounds: more rounds when it ran them all, else more time when it
    reached its limit (``--time`` when the run's time was exact, as for a timed phase)."""
    ran, most = len(rounds.get("seconds") or []), int(params.get("rounds") or 1)
    limit = params.get("time")
    if ran >= most:
        return f"--set rounds={max(2 * most, rounds_needed())}"
    if limit and sum(rounds["seconds"]) >= float(limit):
        longer = _duration(2 * float(limit))
        return f"--set time={longer}" if params.get("steady") else f"--time {longer}"
    return None  # stopped early (a signal): no option helps


def _option(phase: Any, generator: str, params: dict[str, Any]) -> str | None:
    """The option that gives this indicative phase time to reach steady state."""
    elapsed = float(_get(phase, "elapsed_s") or 0.0)
    rounds = (_get(phase, "extra") or {}).get("rounds")
    if generator in ROUNDS and rounds:
        return _rounds_option(rounds, params)
    op = _get(phase, "op")
    if (generator == "dataset" and _get(phase, "name") == LAYOUT) or (
        generator in ROUNDS and op == "create"
    ):  # one pass over its files (files once, fsynced): more files make it longer
        files = int(params.get("files") or 0)
        if not files or elapsed <= 0:
            return None
        # too short: files for TARGET_S at this run's rate; long but unsteady: twice the files
        return f"--set files={math.ceil(files * max(TARGET_S / elapsed, 2.0))}"
    if generator not in TIMED and not (generator in ROUNDS and op in REPEATABLE_META):
        return None
    limit = params.get("time")
    if not limit:  # size-based: make it time-based, ending once steady
        return f"--set time={_duration(max(20.0, 4 * TARGET_S))} --set steady=true"
    longer = _duration(2 * float(limit))  # the same for every phase: one option
    return f"--set time={longer}" if params.get("steady") else f"--time {longer}"


def _loader_au(loader: Any, params: dict[str, Any]) -> tuple[dict[str, Any], str, str] | None:
    """The loader's AU per epoch when it is not steady (``steady.epochs_steady``): a
    pseudo-phase naming it, why, and ``--epochs`` enough for the ramp and window (twice the
    epochs run, at least ``rounds_needed``)."""
    aus = [float(a) for a in (_get(loader, "au_per_epoch") or ()) if a is not None]
    if not aus or epochs_steady(aus):
        return None
    n = int(params.get("epochs") or len(aus))
    why = (
        f"AU per epoch not steady over {len(aus)} epochs (after {RAMP_ROUNDS}, the last "
        f"{WINDOW_ROUNDS} within {DEFAULT_STEADY.limit:.0%} of their mean)"
    )
    return {"name": "loader"}, why, f"--epochs {max(2 * n, rounds_needed())}"


def steady_advice(phases: list[Any], workload: dict[str, Any], loader: Any = None) -> str | None:
    """``iobench: 2 of 9 phases indicative (NAME: why; ...); for steady figures add OPTIONS``,
    or None when no phase is indicative. Phases indicative for another reason than their
    length or steadiness (ranks started apart) are named but get no option. A loader run's
    AU per epoch (``loader``, its block) counts as one more phase."""
    reasons = [(p, indicative_reason(p)) for p in phases]
    flagged = [(p, why) for p, why in reasons if why is not None]
    generator = str(workload.get("generator") or "")
    params = dict(workload.get("params") or {})
    au = _loader_au(loader, params) if generator == "loader" and loader else None
    if au is not None:
        flagged.append((au[0], au[1]))
        phases = [*phases, au[0]]
    if not flagged:
        return None
    options: list[str] = [au[2]] if au is not None else []
    for p, why in flagged:
        if why.startswith("ranks started"):
            continue
        opt = _option(p, generator, params) if p is not (au and au[0]) else None
        if opt is not None and opt not in options:
            options.append(opt)
    names = "; ".join(f"{_get(p, 'name')}: {_short(why)}" for p, why in flagged[:3])
    more = f"; {len(flagged) - 3} more" if len(flagged) > 3 else ""
    head = f"iobench: {len(flagged)} of {len(phases)} phases indicative ({names}{more})"
    if not options:
        return f"{head}; no workload option makes them steady"
    return f"{head}; for steady figures add {' '.join(options)}"


def _short(why: str) -> str:
    """The reason without the criterion's long description (the report has it)."""
    return why.split(" (", 1)[0]
