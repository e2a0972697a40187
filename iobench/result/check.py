"""The one check of a result file's values, made when it is read (``RunResult.from_dict``).

A result read as input (``report``, ``compare``, ``estimate``, a history file) may be hand
edited or damaged. Every figure a rendering or ``compare`` reads is checked here, so that none
of them sees a value it cannot hold: a figure is a JSON number (never a string or a boolean),
finite (no ``NaN``/``Infinity``, no number beyond a double) and not negative; a block is an
object, a list a list, a name a string; a latency histogram holds whole counts in the bucket
layout this iobench reads, and a series holds figures. A bad value is a :class:`~iobench.core.errors.StoreError`
naming the field and the value (the reader adds the file: exit 2). A figure that is absent or
``null`` is *not measured* (``None``), never zero: ``compare`` marks it missing and renderings
print ``-``.

Data layer: imports nothing from iobench but ``errors`` and the histogram's layout (``stats``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..core.errors import StoreError
from ..core.units import is_digits
from .stats import N_BUCKETS, SUB_BUCKETS

#: A phase's counts and times: numbers >= 0 (0 when absent: nothing was counted).
PHASE_NUMBERS = (
    "bytes",
    "ops",
    "files",
    "concurrency",
    "block_size",
    "elapsed_s",
    "stonewall_s",
    "series_interval_s",
)
#: A phase's measured rates: numbers >= 0, or None (absent or null: not measured).
PHASE_RATES = ("bandwidth_bps", "iops", "bandwidth_stonewall_bps")
#: A phase's text fields.
PHASE_TEXTS = ("name", "op", "cache", "status")
#: A phase's fields that are JSON objects / lists when present.
PHASE_OBJECTS = ("latency_s", "histogram", "per_worker", "params", "extra", "spread")
PHASE_LISTS = ("series", "ops_series", "ranks", "repeats", "warnings")
#: A phase's lists of figures (per interval): each a number >= 0.
PHASE_SERIES = ("series", "ops_series")
#: A latency histogram's counters (``stats.Histogram.to_dict``): whole numbers >= 0.
HISTOGRAM_COUNTS = ("sub_buckets", "count", "sum_ns", "min_ns", "max_ns")
#: The figures a phase keeps per repeat (dotted keys into ``PhaseResult.to_dict()``; read by
#: ``results``): numbers >= 0 or None.
REPEAT_FIGURES = (
    "bandwidth_bps",
    "iops",
    "bandwidth_stonewall_bps",
    "latency_s.mean",
    "latency_s.p50",
    "latency_s.p90",
    "latency_s.p99",
    "latency_s.p999",
    "latency_s.max",
    "latency_s.min",
)
#: The loader's and the estimate's figures that ``compare`` and the history read.
LOADER_FIGURES = (
    "au",
    "samples_per_s",
    "bytes_per_s",
    "load_wait_s.mean",
    "load_wait_s.p99",
    "existing.split.read_s_per_sample",
    "existing.split.decode_cpu_s_per_sample",
    "existing.split.collate_cpu_s_per_batch",
)
ESTIMATE_FIGURES = ("max_gpus",)
RUN_TEXTS = ("run_id", "command", "started_at", "status")
RUN_OBJECTS = ("host", "target", "workload", "engine", "extra")
RUN_OPTIONAL_OBJECTS = ("loader", "estimate", "checkpoint", "verdict")

HINT = (
    "fix or remove the value in the file (a figure left out is shown as not measured), "
    "or pass a result.json iobench wrote"
)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def bad_figure(value: Any) -> str | None:
    """Why ``value`` is no figure (None when it is one, or when it is None: not measured)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "is not a number"
    try:
        f = float(value)
    except OverflowError:
        return "is beyond any figure"
    if not math.isfinite(f):
        return "is not a finite number"
    if f < 0:
        return "is negative"
    return None


def _fail(field: str, value: Any, why: str, *, shape: bool = False) -> None:
    text = f"{field} = {_shown(value)} {why}"
    raise StoreError(f"not an iobench result ({text})" if shape else text, hint=HINT)


def _dotted(source: Mapping[str, Any], key: str) -> tuple[bool, Any]:
    cur: Any = source
    for part in key.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return False, None
        cur = cur[part]
    return True, cur


def _figures(source: Mapping[str, Any], keys: Sequence[str], where: str) -> None:
    for key in keys:
        found, value = _dotted(source, key)
        why = bad_figure(value) if found else None
        if why:
            _fail(f"{where}.{key}", value, why)


def _kinds(d: Mapping[str, Any], where: str, keys: Sequence[str], kind: type, what: str) -> None:
    for key in keys:
        if key in d and not isinstance(d[key], kind):
            _fail(f"{where}.{key}", d[key], f"is not {what}", shape=True)


def check_phase(d: Any, where: str) -> None:
    """One phase object of result.json (``where``: ``phases[0]``)."""
    if not isinstance(d, Mapping):
        _fail(where, d, "is not a phase (a JSON object)", shape=True)
    name = d.get("name")
    if isinstance(name, str):
        where = f"{where} ({name})"
    _kinds(d, where, PHASE_TEXTS, str, "a string")
    _kinds(d, where, PHASE_OBJECTS, Mapping, "an object")
    _kinds(d, where, PHASE_LISTS, list, "a list")
    for key in (*PHASE_NUMBERS, *PHASE_RATES):
        why = bad_figure(d.get(key))
        if why:
            _fail(f"{where}.{key}", d[key], why)
        if key in PHASE_NUMBERS and key in d and d[key] is None:
            _fail(f"{where}.{key}", None, "is not a number")
    for key, value in (d.get("latency_s") or {}).items():
        why = bad_figure(value)
        if why:
            _fail(f"{where}.latency_s.{key}", value, why)
    for i, r in enumerate(d.get("repeats") or []):
        if not isinstance(r, Mapping):
            _fail(f"{where}.repeats[{i}]", r, "is not an object", shape=True)
        _figures(r, REPEAT_FIGURES, f"{where}.repeats[{i}]")
    for key in PHASE_SERIES:
        for i, value in enumerate(d.get(key) or []):
            why = bad_figure(value) or ("is not a number" if value is None else None)
            if why:
                _fail(f"{where}.{key}[{i}]", value, why)
    if d.get("histogram"):
        check_histogram(d["histogram"], f"{where}.histogram")


def _whole(value: Any) -> str | None:
    why = bad_figure(value)
    if why is None and (value is None or value != int(value)):
        return "is not a whole number"
    return why


def check_histogram(h: Mapping[str, Any], where: str) -> None:
    """A latency histogram as ``stats.Histogram.to_dict`` writes it: whole counts, the bucket
    layout this iobench reads, each bucket key an index into it."""
    for key in HISTOGRAM_COUNTS:
        why = _whole(h[key]) if key in h else None
        if why:
            _fail(f"{where}.{key}", h[key], why)
    if h.get("sub_buckets", SUB_BUCKETS) != SUB_BUCKETS:
        _fail(f"{where}.sub_buckets", h["sub_buckets"], f"is not {SUB_BUCKETS}, the layout read")
    buckets = h.get("buckets", {})
    if not isinstance(buckets, Mapping):
        _fail(f"{where}.buckets", buckets, "is not an object", shape=True)
    for k, n in buckets.items():
        if not (isinstance(k, str) and is_digits(k) and int(k) < N_BUCKETS):
            _fail(f"{where}.buckets", k, f"is not a bucket index (0 to {N_BUCKETS - 1})")
        why = _whole(n)
        if why:
            _fail(f"{where}.buckets[{k}]", n, why)


def check_run(d: Mapping[str, Any]) -> None:
    """A result object read from a file: StoreError naming the first bad field and value."""
    _kinds(d, "result", RUN_TEXTS, str, "a string")
    _kinds(d, "result", RUN_OBJECTS, Mapping, "an object")
    for key in RUN_OPTIONAL_OBJECTS:
        if d.get(key) is not None and not isinstance(d[key], Mapping):
            _fail(f"result.{key}", d[key], "is not an object", shape=True)
    _kinds(d, "result", ("phases", "warnings"), list, "a list")
    for i, p in enumerate(d.get("phases") or []):
        check_phase(p, f"phases[{i}]")
    loader = d.get("loader")
    if isinstance(loader, Mapping):
        _figures(loader, LOADER_FIGURES, "loader")
        for i, r in enumerate(loader.get("repeats") or []):
            if isinstance(r, Mapping):
                _figures(r, LOADER_FIGURES, f"loader.repeats[{i}]")
    estimate = d.get("estimate")
    if isinstance(estimate, Mapping):
        _figures(estimate, ESTIMATE_FIGURES, "estimate")
