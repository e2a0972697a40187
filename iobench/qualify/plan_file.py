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
#: The longest text field (basis, what) read from a plan.
MAX_TEXT = 8192
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")  # a name, never a path
_HINT = "pass a plan file written by `iobench plan --output FILE`"


@dataclass(frozen=True)
class PlanRequirements:
    """What a plan file asks of qualify, and the cluster it was made for."""

    path: str
    requirements: tuple[Requirement, ...]
    profile: str | None
    gpus: int | None
    model: str | None

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
    return PlanRequirements(path, reqs, profile, gpus, model)
