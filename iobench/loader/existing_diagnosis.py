"""The diagnosis of a run over an existing dataset: its measured terms through
``iobench.model.diagnosis`` (the AU now and after each change, the smallest that reaches the loop's
``au_min``), kept in the result as ``loader.existing.diagnosis`` and rendered as rows of the
loader table. Every AU here is an estimate of the starvation model, with its basis and range.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import UsageError
from ..core.units import format_seconds
from ..model.diagnosis import diagnose
from ..model.diagnosis_terms import PipelineTerms

#: What every figure of the diagnosis is computed from (the rows' basis line).
BASIS = (
    "estimates of the starvation model (a simulated torch DataLoader, steady state) over this "
    "run's measured terms: read and decode CPU per sample, collate per batch, the main loop's "
    "own time and the compute per step; ranges from the terms' 95 % intervals; each option's "
    "full basis in result.json (loader.existing.diagnosis)"
)


def diagnosis_of(job: Any, terms: dict[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """(the diagnosis as a dict, or None; a note when none could be made). The threshold is
    the loop's ``au_min``; with ``--compute sleep`` the main loop is taken to keep no core busy
    (it sleeps), with ``gpu`` one core per accelerator (it launches kernels)."""
    try:
        t = PipelineTerms.from_loader(
            terms,
            cache_read_s_per_sample=terms.get("cache_read_s_per_sample"),
            prefetch=max(int(job.prefetch), 1),
            main_cores_per_gpu=0.0 if job.compute == "sleep" else 1.0,
        )
        d = diagnose(t, float(job.au_min))
    except UsageError as e:
        return None, [f"no diagnosis: {e.one_line()}"]
    out = d.to_dict()
    out["basis"] = BASIS
    return out, []


def _au(s: dict[str, Any]) -> str:
    rng = f" ({s['au_low']:.0%}–{s['au_high']:.0%})" if s["au_high"] > s["au_low"] else ""
    return f"{s['au']:.0%}{rng}"


def diagnosis_rows(d: dict[str, Any] | None) -> list[list[str]]:
    """The loader table's rows of a diagnosis (empty when there is none)."""
    if not isinstance(d, dict) or not isinstance(d.get("now"), dict):
        return []
    now, t = d["now"], d.get("terms") or {}
    rows = [
        [
            "Diagnosis (estimate)",
            f"AU {_au(now)} as run, bound: {now['bound']}; threshold {d['threshold']:.0%}; "
            f"main loop {format_seconds(t.get('step_overhead_s'))}/step (measured)",
        ],
        ["Diagnosis basis", str(d.get("basis") or BASIS)],
    ]
    for s in d.get("options") or []:
        mark = "reaches" if s["reaches_threshold"] else "short of"
        rows.append(
            [f"If {s['kind']} (estimate)", f"AU {_au(s)}, {mark} the threshold: {s['change']}"]
        )
    no_help = [s for s in d.get("no_help") or [] if isinstance(s, dict)]
    if no_help:  # apart: a change whose AU stays within the run's own interval
        rows.append(
            [
                "Does not help (estimate)",
                f"no AU beyond the run's own {_au(now)}: "
                + "; ".join(f"{s['kind']}: {s['change']} (AU {_au(s)})" for s in no_help),
            ]
        )
    rows.extend(["Not estimated", why] for why in d.get("not_estimated") or [])
    rows.extend(["Diagnosis warning", w] for w in d.get("warnings") or [])
    a = d.get("advice")
    if now.get("reaches_threshold"):
        advice = "none needed (the AU as run already reaches the threshold)"
    elif a is None:
        advice = "no single change reaches the threshold (combine them)"
    else:
        advice = f"{a['change']} → AU {_au(a)}"
    rows.append(["Advice (estimate)", advice])
    return rows
