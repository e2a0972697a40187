"""What the history stores of a run: the columns, the metrics, and the long-form rows
(:func:`metric_rows`); the run's host class, storage identity and environment fingerprint.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..result.file import RunResult
from ..result.file import figure as _lookup
from ..result.stats import summarize

if TYPE_CHECKING:
    pass


Warn = Callable[[str], None] | None


RESULT_KEY = b"iobench.result"


SCHEMA_KEY = b"iobench.schema_version"


FORMAT_KEY = b"iobench.format"


FORMAT = b"history-2"  # 2: started_at a UTC timestamp; block_size, jobs, cache, ...


SUMMARY_REPEAT = -1  # the `repeat` of a phase's aggregate row (also marked `aggregate`)


# name -> (where it comes from, unit, direction); phase metrics in the order they are reported
PHASE_METRICS: dict[str, tuple[str, str, str]] = {
    "bandwidth": ("bandwidth_bps", "B/s", "higher"),
    "iops": ("iops", "ops/s", "higher"),
    "bandwidth_stonewall": ("bandwidth_stonewall_bps", "B/s", "higher"),
    "latency_mean": ("latency_s.mean", "s", "lower"),
    "latency_p50": ("latency_s.p50", "s", "lower"),
    "latency_p99": ("latency_s.p99", "s", "lower"),
    "latency_p999": ("latency_s.p999", "s", "lower"),
}


LOADER_METRICS: dict[str, tuple[str, str, str]] = {
    "au": ("au", "fraction", "higher"),
    "samples_per_s": ("samples_per_s", "samples/s", "higher"),
    "bytes_per_s": ("bytes_per_s", "B/s", "higher"),
    "load_wait_mean": ("load_wait_s.mean", "s", "lower"),
    "load_wait_p99": ("load_wait_s.p99", "s", "lower"),
    # a run over an existing dataset (--existing): the measured split of a sample's time
    "read_s_per_sample": ("existing.split.read_s_per_sample", "s", "lower"),
    "decode_cpu_s_per_sample": ("existing.split.decode_cpu_s_per_sample", "s", "lower"),
    "collate_cpu_s_per_batch": ("existing.split.collate_cpu_s_per_batch", "s", "lower"),
}


ESTIMATE_METRICS: dict[str, tuple[str, str, str]] = {
    "max_gpus": ("max_gpus", "GPUs", "higher"),
}


ALL_METRICS = {**PHASE_METRICS, **LOADER_METRICS, **ESTIMATE_METRICS}


COLUMNS: tuple[str, ...] = (
    "run_id",
    "started_at",
    "command",
    "workload",
    "spec_hash",
    "phase",
    "op",
    "metric",
    "value",
    "unit",
    "direction",
    "repeat",
    "aggregate",
    "env_fingerprint",
    "host_class",
    "fs_type",
    "fs_identity",
    "engine",
    "status",
    "schema_version",
    "iobench_version",
    "block_size",
    "jobs",
    "cache",
    "phase_engine",
    "verdict",
)


_INT_COLUMNS = {"repeat", "schema_version", "block_size", "jobs"}


_FLOAT_COLUMNS = {"value"}


_BOOL_COLUMNS = {"aggregate"}


_TIME_COLUMNS = {"started_at"}  # UTC timestamps; files before schema history-2 held ISO strings


# Columns added after the first stored files: an older file without one still reads (its
# value is derived on read, or null), where a missing required column means "not an iobench
# file".
_LATER_COLUMNS = {"aggregate", "block_size", "jobs", "cache", "phase_engine", "verdict"}


def _arrow_schema():
    import pyarrow as pa

    def typ(name: str):
        if name in _INT_COLUMNS:
            return pa.int64()
        if name in _FLOAT_COLUMNS:
            return pa.float64()
        if name in _BOOL_COLUMNS:
            return pa.bool_()
        if name in _TIME_COLUMNS:
            return pa.timestamp("us", tz="UTC")
        return pa.string()

    return pa.schema([pa.field(name, typ(name)) for name in COLUMNS])


def parse_timestamp(text: Any) -> _dt.datetime | None:
    """An ISO timestamp as an aware UTC datetime (naive ones are taken as UTC); None if not one."""
    if isinstance(text, _dt.datetime):
        t = text
    else:
        try:
            t = _dt.datetime.fromisoformat(str(text))
        except (TypeError, ValueError):
            return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.astimezone(_dt.timezone.utc)


def default_history_url() -> str:
    """``$IOBENCH_HISTORY`` if set, else ``~/.local/share/iobench/history``."""
    env = os.environ.get("IOBENCH_HISTORY")
    if env:
        return env
    return str(Path.home() / ".local" / "share" / "iobench" / "history")


def host_class(run: RunResult) -> str:
    """What kind of machine ran it: cpus, memory (GiB, rounded), os, machine; not the hostname.
    A many-client run (torchrun) adds its ranks and hosts: ``…/x86_64 x8 ranks/2 hosts``."""
    host = run.host_block
    mem = host.mem_bytes
    mem_gib = f"{round(mem / (1 << 30))}GiB" if isinstance(mem, (int, float)) and mem else "?GiB"
    cpus = host.cpus
    text = f"{cpus if cpus else '?'}cpu/{mem_gib}/{host.os or '?'}/{host.machine or '?'}"
    ranks, hosts = run.clients()
    if ranks > 1:
        text += f" x{ranks} ranks/{hosts} host{'s' if hosts != 1 else ''}"
    return text


def fs_identity(run: RunResult) -> str:
    """Which storage it measured: filesystem type and mount source (``nfs4 srv:/export``)."""
    target = run.target_block
    return f"{target.fs_type or '?'} {target.mount_source or '?'}"


def env_fingerprint(run: RunResult) -> str:
    """A short hash of :func:`host_class` and :func:`fs_identity`: equal means same setup."""
    text = json.dumps([host_class(run), fs_identity(run)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _source_values(
    source: dict[str, Any], table: dict[str, tuple[str, str, str]], phase: dict[str, Any] | None
) -> dict[str, float]:
    values = {}
    for name, (key, _unit, _direction) in table.items():
        value = _lookup(source, key)
        if value is None:
            continue
        # A zero throughput means "not measured" (a stat phase moves no bytes), unless the
        # phase did move bytes/ops, where zero is a real (and terrible) figure.
        if phase is not None and value == 0:
            if name == "bandwidth" and not phase.get("bytes"):
                continue
            if name == "iops" and not phase.get("ops"):
                continue
            if name == "bandwidth_stonewall":
                continue
        values[name] = value
    return values


def _group_rows(
    name: str,
    op: str,
    summary: dict[str, Any],
    repeats: list[dict[str, Any]],
    table: dict[str, tuple[str, str, str]],
    phase: dict[str, Any] | None,
    base: dict[str, Any],
    setup: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    sources = [(i, r) for i, r in enumerate(repeats) if isinstance(r, dict)]
    per_repeat = [(i, _source_values(r, table, phase)) for i, r in sources]
    own = _source_values(summary, table, phase)
    if not any(values for _i, values in per_repeat):
        per_repeat = [(0, own)]  # a single measurement is its own only repeat
    rows = []

    def row(metric: str, value: float, repeat: int) -> dict[str, Any]:
        _key, unit, direction = table[metric]
        return {
            **base,
            **(setup or {}),
            "phase": name,
            "op": op,
            "metric": metric,
            "value": value,
            "unit": unit,
            "direction": direction,
            "repeat": repeat,
            "aggregate": repeat == SUMMARY_REPEAT,
        }

    for metric in table:
        values = [v[metric] for _i, v in per_repeat if metric in v]
        if not values and metric in own:
            values = [own[metric]]  # the repeats lacked it: the phase's own figure stands
            per_metric = [(0, own[metric])]
        else:
            per_metric = [(i, v[metric]) for i, v in per_repeat if metric in v]
        summary_of = summarize(values)
        if summary_of is None:
            continue
        rows.append(row(metric, summary_of.median, SUMMARY_REPEAT))
        rows += [row(metric, value, i) for i, value in per_metric]
    return rows


def _setup(run: RunResult, phase) -> dict[str, Any]:
    """How a phase ran: block size (bytes), workers, cache state and the engine that measured it
    (fio hands phases it cannot express to posix, so it can differ from the run's)."""
    return {
        "block_size": phase.block_size or None,
        "jobs": phase.concurrency or None,
        "cache": phase.cache or None,
        "phase_engine": phase.extra_block.engine or run.engine_block.name,
    }


def metric_rows(run: RunResult) -> list[dict[str, Any]]:
    """One row per run x phase x metric x repeat, and before them one aggregate row per
    run x phase x metric (``aggregate`` true, ``repeat`` -1) holding the median over the repeats
    (:func:`stats.summarize`, the value every rendering shows). Count or average only the rows
    with ``aggregate`` false: those are the measurements.

    A phase without ``repeats`` counts as its own repeat 0. Phase names repeated within one run
    get ``#2``, ``#3``... so their figures never mix.
    """
    workload = run.workload_block
    verdict = run.verdict_block
    base = {
        "run_id": run.run_id,
        "started_at": run.started_at,
        "command": run.command,
        "workload": workload.name,
        "spec_hash": workload.spec_hash,
        "env_fingerprint": env_fingerprint(run),
        "host_class": host_class(run),
        "fs_type": run.target_block.fs_type,
        "fs_identity": fs_identity(run),
        "engine": run.engine_block.name,
        "status": run.status,
        "schema_version": run.schema_version,
        "iobench_version": run.iobench_version,
        "verdict": verdict.judged if verdict is not None else None,
        **dict.fromkeys(("block_size", "jobs", "cache", "phase_engine")),
    }
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for phase in run.phases:
        seen[phase.name] = seen.get(phase.name, 0) + 1
        name = phase.name if seen[phase.name] == 1 else f"{phase.name}#{seen[phase.name]}"
        d = phase.to_dict()
        rows += _group_rows(
            name, phase.op, d, phase.repeats, PHASE_METRICS, d, base, _setup(run, phase)
        )
    loader = run.loader_block
    if loader is not None:  # the metrics are dotted keys into the block as written
        repeats = list(loader.repeats or ())
        rows += _group_rows(
            "loader", "loader", run.loader or {}, repeats, LOADER_METRICS, None, base
        )
    if isinstance(run.estimate, dict):
        rows += _group_rows("estimate", "estimate", run.estimate, [], ESTIMATE_METRICS, None, base)
    return rows
