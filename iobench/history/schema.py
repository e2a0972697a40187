"""What the history stores of a run: the columns, the metrics, and the long-form rows
(:func:`metric_rows`); the run's host class, storage identity and environment fingerprint.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
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


def when_text(started_at: Any) -> str:
    """``2025-01-02T03:04:05.678+00:00`` -> ``2025-01-02 03:04:05Z`` (UTC, whole seconds)."""
    t = parse_timestamp(started_at)
    return t.strftime("%Y-%m-%d %H:%M:%SZ") if t else (str(started_at or "") or "?")


def default_history_url() -> str:
    """``$IOBENCH_HISTORY`` if set, else ``~/.local/share/iobench/history``."""
    env = os.environ.get("IOBENCH_HISTORY")
    if env:
        return env
    return str(Path.home() / ".local" / "share" / "iobench" / "history")


_KERNEL_RE = re.compile(r"^(?P<system>\S+)\s+(?P<major>\d+)\.(?P<minor>\d+)")


def kernel_series(os_text: str | None) -> str | None:
    """``Linux 6.18.44-fc-v1045`` -> ``Linux 6.18``: the system and the kernel's major.minor,
    not the build (a kernel update within a series keeps the host class). Text that names no
    version is kept whole."""
    if not os_text:
        return None
    m = _KERNEL_RE.match(os_text.strip())
    return f"{m['system']} {m['major']}.{m['minor']}" if m else " ".join(os_text.split())


def memory_gib(mem_bytes: Any) -> int | None:
    """Memory in GiB to two significant figures (at least 1): 503.4 GiB -> 500, 62.8 -> 63.

    The kernel's total moves by MiBs between kernels (firmware and kernel reservations); whole
    GiB would flip at every .5 GiB, two figures only when the total moves by about 1 %
    across a boundary."""
    if not isinstance(mem_bytes, (int, float)) or isinstance(mem_bytes, bool) or mem_bytes <= 0:
        return None
    gib = mem_bytes / (1 << 30)
    places = max(len(str(int(gib))) - 2, 0)
    return max(int(round(gib, -places)), 1)


@dataclass(frozen=True)
class HostClass:
    """What kind of machine ran a run, the key of its noise floor: CPU model, logical CPUs,
    memory (:func:`memory_gib`), system and kernel major.minor (:func:`kernel_series`), machine
    architecture; for a many-client (torchrun) run also its ranks and hosts. Never the hostname
    nor the kernel's build."""

    cpu_model: str | None
    cpus: int | None
    mem_gib: int | None
    kernel: str | None
    machine: str | None
    ranks: int = 1
    hosts: int = 1

    @classmethod
    def of(cls, run: RunResult) -> HostClass:
        host = run.host_block
        model = " ".join(host.cpu_model.split()) if isinstance(host.cpu_model, str) else None
        cpus = host.cpus if isinstance(host.cpus, int) and host.cpus > 0 else None
        ranks, hosts = run.clients()
        return cls(
            model or None, cpus, memory_gib(host.mem_bytes), kernel_series(host.os),
            host.machine or None, ranks, hosts,
        )  # fmt: skip

    def matches(self, other: HostClass) -> bool:
        """Same class. A run stored before iobench recorded the CPU model (no ``cpu_model``)
        matches on the other fields alone, as it did when it was stored."""
        if self.cpu_model is None or other.cpu_model is None:
            return dataclasses.replace(self, cpu_model=None) == dataclasses.replace(
                other, cpu_model=None
            )
        return self == other

    def __str__(self) -> str:
        mem = f"{self.mem_gib}GiB" if self.mem_gib else "?GiB"
        text = (
            f"{self.cpu_model or '?'}/{self.cpus or '?'}cpu/{mem}/{self.kernel or '?'}"
            f"/{self.machine or '?'}"
        )
        if self.ranks > 1:
            text += f" x{self.ranks} ranks/{self.hosts} host{'s' if self.hosts != 1 else ''}"
        return text


def host_class(run: RunResult) -> str:
    """:class:`HostClass` as text: ``AMD EPYC 9654/64cpu/500GiB/Linux 6.1/x86_64``; a
    many-client run (torchrun) adds its ranks and hosts: ``… x8 ranks/2 hosts``."""
    return str(HostClass.of(run))


def target_of(run: RunResult) -> str | None:
    """The target the run measured, as given (a path or URL); a relative path as the absolute
    one its run directory (``TARGET/.iobench-<run_id>``) was made in."""
    target = run.target_block
    given = target.path_or_url
    run_dir = target.run_dir
    if isinstance(given, str) and "://" not in given and not given.startswith("/"):
        if isinstance(run_dir, str) and run_dir.startswith("/"):
            parent, _sep, base = run_dir.rstrip("/").rpartition("/")
            if base.startswith(".iobench-") and parent:
                return parent
    return given if isinstance(given, str) and given else None


def fs_identity(run: RunResult) -> str:
    """Which storage it measured: filesystem type and mount source (``nfs4 srv:/export``)."""
    target = run.target_block
    return f"{target.fs_type or '?'} {target.mount_source or '?'}"


def env_fingerprint(run: RunResult) -> str:
    """A short hash of :func:`host_class` and :func:`fs_identity`: a label of the setup. Whether
    two runs share a setup is :func:`same_setup` (a run stored before the CPU model was recorded
    has another fingerprint, yet the same setup)."""
    text = json.dumps([host_class(run), fs_identity(run)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def same_setup(a: RunResult, b: RunResult) -> bool:
    """Whether two runs ran on the same host class (:meth:`HostClass.matches`) and storage
    (:func:`fs_identity`): the runs whose spread is one noise floor."""
    return HostClass.of(a).matches(HostClass.of(b)) and fs_identity(a) == fs_identity(b)


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


# Each phase's headline metric: the first of these it has (compare's one line per phase too).
HEADLINE_METRICS = ("bandwidth", "iops", "au", "samples_per_s", "bytes_per_s", "max_gpus")


@dataclass(frozen=True)
class Headline:
    """A run's main figure, to pick a baseline by: the loader's AU (``loader``, and qualify's
    AU, on which its verdict rests), else the first phase's headline metric (bandwidth, else
    IOPS), else the estimate's GPUs; the median over the repeats."""

    phase: str
    metric: str
    value: float
    unit: str


def headline(run: RunResult) -> Headline | None:
    """:class:`Headline` of ``run`` from its aggregate rows (:func:`metric_rows`); None when
    it measured nothing."""
    rows = [r for r in metric_rows(run) if r["aggregate"] and r["metric"] in HEADLINE_METRICS]
    loader = [r for r in rows if r["phase"] == "loader" and r["metric"] == "au"]
    phases = [r for r in rows if r["phase"] not in ("loader", "estimate")]
    first = phases[0]["phase"] if phases else None
    ranked = (
        loader
        or sorted(
            (r for r in phases if r["phase"] == first),
            key=lambda r: HEADLINE_METRICS.index(r["metric"]),
        )
        or sorted(rows, key=lambda r: HEADLINE_METRICS.index(r["metric"]))
    )
    if not ranked:
        return None
    r = ranked[0]
    return Headline(r["phase"], r["metric"], r["value"], r["unit"])


def named_phases(run: RunResult) -> list[tuple[str, Any]]:
    """``(name, phase)`` of every phase in run order, named as the history stores them: a name
    repeated within the run gets ``#2``, ``#3``... so their figures never mix."""
    out: list[tuple[str, Any]] = []
    seen: dict[str, int] = {}
    for phase in run.phases:
        seen[phase.name] = seen.get(phase.name, 0) + 1
        out.append(
            (phase.name if seen[phase.name] == 1 else f"{phase.name}#{seen[phase.name]}", phase)
        )
    return out


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
    for name, phase in named_phases(run):
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
