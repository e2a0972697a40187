"""``qualify --require PLAN.json``: the requirements of a plan file ``iobench plan --output``
wrote, read as hostile input.

The file is opened only if it is a regular file (``core.inputs.open_regular``: a FIFO never
blocks the open), read to at most ``MAX_PLAN_BYTES``, parsed with bounded nesting and integers
(``loads_json``), and its shape checked field by field: ``kind`` and ``version``, then every
requirement a known key (``checkpoint.cluster.PLAN_KEYS``) with that key's unit and a finite,
non-negative value, each key once. Anything else is one line (UsageError, exit 2) naming the
file and the field, before anything runs. The requirements are ``verdict.Requirement``s, so the
verdict judges them as it judges ``--require KEY=VALUE``: one line each, measured against
required.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Any

from ..checkpoint.cluster import PLAN_KEYS, PLAN_KIND, PLAN_VERSION
from ..core.errors import UsageError
from ..core.inputs import loads_json, open_regular
from .verdict import REQUIREMENT_KEYS, Requirement

#: A plan file holds a few figures and their basis: a few KiB. Anything bigger is not one.
MAX_PLAN_BYTES = 1 << 20
#: The largest figure a plan may require (bytes, bytes/s or operations/s): far beyond any system.
MAX_VALUE = 2.0**80
#: The longest time a plan's inputs may name (an MTBF of years is still a plan).
MAX_SECONDS = 100 * 365 * 86_400.0
#: The longest text field (basis, what) read from a plan.
MAX_TEXT = 8192
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")  # a name, never a path
_HINT = "pass a plan file written by `iobench plan --output FILE`"


@dataclass(frozen=True)
class PlanCheckpoint:
    """The plan's checkpoint assumptions, which qualify's checkpoint estimate takes: the
    failures, the interval, the restart, the save mode and its host copy."""

    mtbf_s: float | None
    interval_s: float | None
    restart_s: float
    asynchronous: bool
    host_copy_bps: float | None


@dataclass(frozen=True)
class PlanRequirements:
    """What a plan file asks of qualify, and the cluster it was made for."""

    path: str
    requirements: tuple[Requirement, ...]
    profile: str | None
    gpus: int | None
    model: str | None
    checkpoint: PlanCheckpoint | None = None  # what the plan assumed of its checkpoints

    def note(self) -> str:
        """The verdict's note: the plan's figures are the whole cluster's."""
        who = (
            f"{self.gpus:,} accelerator{'s' if self.gpus != 1 else ''}"
            if self.gpus
            else "its cluster"
        )
        return (
            f"NOTE: the requirements are the plan {self.path}'s, for {who}: aggregate figures "
            "of the whole cluster, judged against what this run measured"
            + (
                f"; its checkpoint step writes {self.model}'s own layout at a small scale"
                + (
                    ", saves judged asynchronous"
                    if self.checkpoint and self.checkpoint.asynchronous
                    else ""
                )  # fmt: skip
                if self.model
                else ""
            )
        )


def looks_like_plan(text: str | None) -> bool:
    """Whether ``--require`` names a file rather than ``KEY=VALUE`` items."""
    return bool(text) and "=" not in str(text)


def _bad(path: str, what: str) -> UsageError:
    return UsageError(f"--require {path}: {what}", hint=_HINT)


def _read(path: str) -> Any:
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size > MAX_PLAN_BYTES:
                raise _bad(
                    path, f"{size:,} bytes is more than a plan ({MAX_PLAN_BYTES >> 10} KiB at most)"
                )
            data = f.read(MAX_PLAN_BYTES + 1)
        if len(data) > MAX_PLAN_BYTES:  # grew after the fstat
            raise _bad(path, f"more than a plan ({MAX_PLAN_BYTES >> 10} KiB at most)")
        return loads_json(data.decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"--require {path}: no such plan file (and no KEY=VALUE item)",
            hint="give KEY=VALUE items, e.g. read=5GiB/s, or a plan file `iobench plan --output` wrote",
        ) from None
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError among them
        detail = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise _bad(path, f"cannot read it as a plan ({detail})") from None


def _number(path: str, where: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _bad(path, f"{where} must be a number, got {type(v).__name__}")
    if not (math.isfinite(v) and 0 <= v <= MAX_VALUE):
        raise _bad(path, f"{where} = {v!r} is not a figure a plan requires (0 .. 2^80)")
    return float(v)


def _requirement(path: str, i: int, item: Any, seen: set[str]) -> Requirement:
    where = f"requirements[{i}]"
    if not isinstance(item, dict):
        raise _bad(path, f"{where} must be an object")
    unknown = sorted(set(item) - {"key", "value", "unit", "what", "basis"})
    if unknown:
        raise _bad(path, f"{where}: unknown field {str(unknown[0])[:40]!r}")
    key = item.get("key")
    if not isinstance(key, str) or key not in PLAN_KEYS:
        raise _bad(path, f"{where}.key {str(key)[:40]!r} is not a plan requirement "
                   f"(one of {', '.join(PLAN_KEYS)})")  # fmt: skip
    if key in seen:
        raise _bad(path, f"{where}: {key} is required twice")
    seen.add(key)
    unit = PLAN_KEYS[key][1]
    if item.get("unit") != unit:
        raise _bad(
            path, f"{where}.unit of {key} must be {unit!r}, got {str(item.get('unit'))[:20]!r}"
        )
    for field in ("what", "basis"):
        text = item.get(field, "")
        if not isinstance(text, str) or len(text) > MAX_TEXT:
            raise _bad(path, f"{where}.{field} must be text of at most {MAX_TEXT} characters")
    value = _number(path, f"{where}.value", item.get("value"))
    return Requirement(key, value, REQUIREMENT_KEYS[key][1], source=path)


def _inputs(path: str, data: dict[str, Any]) -> tuple[str | None, int | None, str | None]:
    inputs = data.get("inputs", {})
    if not isinstance(inputs, dict):
        raise _bad(path, "inputs must be an object")
    names = []
    for field in ("profile", "model"):
        v = inputs.get(field)
        if v is not None and not (isinstance(v, str) and _NAME.fullmatch(v)):
            raise _bad(path, f"inputs.{field} must be a name (letters, digits, _ and -)")
        names.append(v)
    gpus = inputs.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or
                             not 1 <= gpus <= 1 << 20):  # fmt: skip
        raise _bad(path, "inputs.gpus must be a whole number 1 .. 1,048,576")
    return names[0], gpus, names[1]


def _seconds(path: str, inputs: dict[str, Any], field: str) -> float | None:
    v = inputs.get(field)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= MAX_SECONDS:
        raise _bad(path, f"inputs.{field} must be seconds, 0 .. {MAX_SECONDS:g}")
    return float(v)


def _checkpoint(path: str, data: dict[str, Any]) -> PlanCheckpoint | None:
    """The plan's checkpoint assumptions (None: the plan has no checkpoint model)."""
    inputs = data.get("inputs", {})
    if inputs.get("model") is None:
        return None
    asyn = inputs.get("async", False)
    if not isinstance(asyn, bool):
        raise _bad(path, "inputs.async must be true or false")
    copy = inputs.get("host_copy_bps")
    if copy is not None:
        copy = _number(path, "inputs.host_copy_bps", copy)
    if asyn and not copy:
        raise _bad(path, "inputs.async needs inputs.host_copy_bps, the snapshot's copy rate")
    mtbf, interval = _seconds(path, inputs, "mtbf_s"), _seconds(path, inputs, "interval_s")
    if (mtbf is not None and mtbf <= 0) or (interval is not None and interval <= 0):
        raise _bad(path, "inputs.mtbf_s and inputs.interval_s must be more than 0 s")
    restart = _seconds(path, inputs, "restart_s") or 0.0
    return PlanCheckpoint(mtbf, interval, restart, asyn, copy if asyn else None)


def load_plan(path: str) -> PlanRequirements:
    """The requirements of the plan file at ``path`` (UsageError on anything else)."""
    data = _read(path)
    if not isinstance(data, dict):
        raise _bad(path, "not a plan (the top level must be an object)")
    if data.get("kind") != PLAN_KIND:
        raise _bad(path, f"not a plan (kind must be {PLAN_KIND!r})")
    version = data.get("version")
    if isinstance(version, bool) or version != PLAN_VERSION:
        raise _bad(path, f"plan version {str(version)[:20]} is not {PLAN_VERSION}, the one "
                   "this iobench reads")  # fmt: skip
    items = data.get("requirements")
    if not isinstance(items, list) or not 1 <= len(items) <= len(PLAN_KEYS):
        raise _bad(path, f"requirements must be a list of 1 to {len(PLAN_KEYS)} objects")
    seen: set[str] = set()
    reqs = tuple(_requirement(path, i, item, seen) for i, item in enumerate(items))
    profile, gpus, model = _inputs(path, data)
    return PlanRequirements(path, reqs, profile, gpus, model, _checkpoint(path, data))


def _agree(plan: PlanRequirements, flag: str, given: float | None, planned: float | None) -> None:
    if given is None:
        return
    if planned is None or not math.isclose(given, planned, rel_tol=1e-6):
        said = f"{planned:g} s" if planned is not None else "none"
        raise UsageError(
            f"{flag} is not the plan's ({said}): the plan {plan.path} sets it",
            hint=f"leave out {flag}, or make a plan with it (`iobench plan … --output`)",
        )


def settle_model(plan: PlanRequirements | None, model: str | None, opts: Any, gpus: int | None,
                 checkpoint: str | None = None) -> tuple[str | None, Any]:  # fmt: skip
    """(checkpoint model, checkpoint options) of ``qualify --require PLAN.json``: the plan's
    model and assumptions (MTBF, interval, restart, save mode and host copy), so its
    checkpoint step and estimate are the plan's; a command-line value beside them that is not
    the plan's is bad input (UsageError), one that agrees is taken. Without a plan (or a
    plan without a checkpoint model): ``model`` and ``opts`` as given."""
    from dataclasses import replace

    from ..checkpoint.estimate import Options
    from ..checkpoint.spec import load_checkpoint_profile

    pc = plan.checkpoint if plan is not None else None
    if plan is None or plan.model is None or pc is None:  # no plan, or no checkpoint model
        return model, opts
    if checkpoint is not None:
        raise UsageError(
            f"--checkpoint {checkpoint}: the plan {plan.path}'s checkpoint model "
            f"({plan.model}) gives the checkpoint's size",
            hint="leave out --checkpoint",
        )
    if model is not None:
        name = load_checkpoint_profile(model).spec.name
        if name != plan.model:
            raise UsageError(
                f"--model {model} is not the plan's checkpoint model ({plan.model})",
                hint=f"leave out --model: the plan {plan.path} sets it",
            )
    opts = opts or Options()
    accel = gpus or plan.gpus
    mtbf = opts.mtbf_s
    if opts.failure_rate_per_s is not None and accel:
        mtbf = 1.0 / (opts.failure_rate_per_s * accel)
    _agree(plan, "--mtbf" if opts.mtbf_s is not None else "--failure-rate", mtbf, pc.mtbf_s)
    _agree(plan, "--interval", opts.interval_s, pc.interval_s)
    _agree(plan, "--restart", opts.restart_s or None, pc.restart_s or None)
    async_basis = (
        f"the plan {plan.path}'s host copy per GPU (not measured here: a GPU's device-to-host "
        "copy, which the storage does not set)"
    )
    return model or plan.model, replace(
        opts, mtbf_s=pc.mtbf_s, failure_rate_per_s=None,
        mtbf_basis=f"the plan {plan.path}'s MTBF" if pc.mtbf_s else "",
        accelerators=opts.accelerators or plan.gpus, interval_s=pc.interval_s,
        restart_s=pc.restart_s, copy_bps=pc.host_copy_bps,
        copy_basis=async_basis if pc.asynchronous else "",
        save_mode="async" if pc.asynchronous else "sync",
    )  # fmt: skip
