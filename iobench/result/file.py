"""Run and phase results, and their versioned JSON form (schema_version 1).

All rates are bytes/s and all times seconds inside the file; labels live only in renderings.
Readers accept older schema versions and ignore unknown keys, so a newer iobench can read
history written by an older one.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import math
import os
import platform
import socket
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..core.errors import StoreError, UsageError
from ..core.inputs import loads_json, open_regular
from ..core.safeio import check_output_file as claim_output_file
from .blocks import (
    CheckpointBlock,
    EngineBlock,
    EstimateBlock,
    HostBlock,
    LatencyBlock,
    LoaderBlock,
    PhaseExtraBlock,
    SpreadBlock,
    TargetBlock,
    VerdictBlock,
    WorkloadBlock,
)
from .check import PHASE_RATES, check_run
from .stats import Summary, summarize

SCHEMA_VERSION = 1


@dataclass  # mutable: engines and the runner fill it (stats, steady state, warnings, repeats)
class PhaseResult:
    """What one phase measured. Engines fill it through ``stats.aggregate_workers``."""

    name: str
    op: str
    bytes: int = 0
    ops: int = 0
    files: int = 0
    concurrency: int = 1
    block_size: int = 0
    elapsed_s: float = 0.0  # last done: first start to last end
    stonewall_s: float = 0.0  # first done: first start to first worker end
    # None only in a result read from a file that lacks the figure (result_check: not measured)
    bandwidth_bps: float | None = 0.0
    iops: float | None = 0.0
    bandwidth_stonewall_bps: float | None = 0.0
    latency_s: dict[str, float] = field(default_factory=dict)  # mean p50 p90 p99 p999 max min
    histogram: dict[str, Any] = field(default_factory=dict)  # stats.Histogram.to_dict()
    series: list[float] = field(default_factory=list)  # bandwidth per interval, bytes/s
    series_interval_s: float = 1.0
    ops_series: list[float] = field(default_factory=list)  # ops per second per interval
    per_worker: dict[str, float] = field(default_factory=dict)  # bandwidth min/median/max
    ranks: list[dict[str, Any]] = field(default_factory=list)
    cache: str = (
        "buffered"  # "direct" | "dropped" | "client-cache" | "buffered" | "none" (object stores)
    )
    repeats: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)  # effective phase parameters
    extra: dict[str, Any] = field(default_factory=dict)  # engine- or phase-specific figures
    # steady state (stats.steady_state): None in results written before it was recorded
    steady: bool | None = None
    steady_at_s: float | None = None  # seconds after the phase's start
    steady_criterion: str | None = None
    status: str = "ok"  # "ok" | "partial" | "failed"
    error: str | None = None
    # figure key -> stats.Summary.to_dict() over the repeats (n, median, min, max, cv); only
    # with repeats. Renderings recompute it with metric_summary, so older results show it too.
    spread: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PhaseResult:
        """The phase of a result file; a rate it does not hold is None (not measured), never
        the 0.0 a phase that moved nothing records."""
        names = {f.name for f in dataclasses.fields(cls)}
        absent: dict[str, Any] = dict.fromkeys(k for k in PHASE_RATES if k not in d)
        return cls(**{k: v for k, v in d.items() if k in names}, **absent)

    # typed views of the dict fields (iobench.result.blocks), for renderings
    @property
    def latency(self) -> LatencyBlock:
        return LatencyBlock.from_dict(self.latency_s)

    @property
    def worker_spread(self) -> SpreadBlock:
        return SpreadBlock.from_dict(self.per_worker)

    @property
    def extra_block(self) -> PhaseExtraBlock:
        return PhaseExtraBlock.from_dict(self.extra)


# mutable: a run accumulates as it goes (phases, warnings, status, error; the loader, estimate,
# checkpoint and verdict blocks are set after their steps); renderings read the typed blocks
@dataclass
class RunResult:
    """One invocation of iobench: the unit stored in history and compared."""

    run_id: str
    command: str
    started_at: str
    finished_at: str | None = None
    schema_version: int = SCHEMA_VERSION
    iobench_version: str = __version__
    host: dict[str, Any] = field(default_factory=dict)
    target: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)  # name, spec_hash, params
    engine: dict[str, Any] = field(default_factory=dict)  # name, version
    phases: list[PhaseResult] = field(default_factory=list)
    loader: dict[str, Any] | None = None
    estimate: dict[str, Any] | None = None
    checkpoint: dict[str, Any] | None = None  # iobench checkpoint: measured + model (ckpt_estimate)
    verdict: dict[str, Any] | None = None  # {"status": blocks.VERDICT_STATUSES, ...}
    warnings: list[str] = field(default_factory=list)
    status: str = "complete"  # "complete" | "partial" | "failed" | "interrupted"
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        return d

    def clients(self) -> tuple[int, int]:
        """(torchrun ranks, hosts) the phases were aggregated over; (1, 1) for one client."""
        ranks = hosts = 1
        for p in self.phases:
            extra = p.extra or {}
            ranks = max(
                ranks, int((p.params or {}).get("ranks") or 1), int(extra.get("world") or 1)
            )
            hosts = max(hosts, int(extra.get("hosts") or 1))
        return ranks, hosts

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunResult:
        if not isinstance(d, dict) or "run_id" not in d:
            raise StoreError("not an iobench result (no run_id)")
        problem = schema_version_problem(d.get("schema_version", 1))
        if problem:
            raise StoreError(
                f"result {problem}",
                hint="upgrade iobench" if "newer" in problem else "pass an iobench result.json",
            )
        check_run(d)  # every figure a number, finite, not negative (StoreError naming it)
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names and k != "phases"}
        kwargs.setdefault("command", "")
        kwargs.setdefault("started_at", "")
        run = cls(**kwargs)
        run.phases = [PhaseResult.from_dict(p) for p in d.get("phases", [])]
        return run

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)

    # -- the blocks, typed (iobench.result.blocks): renderings read these; the dicts above stay what
    # result.json holds and what the writers fill, so the file is unchanged byte for byte.

    @property
    def host_block(self) -> HostBlock:
        return HostBlock.from_dict(self.host)

    @property
    def target_block(self) -> TargetBlock:
        return TargetBlock.from_dict(self.target)

    @property
    def workload_block(self) -> WorkloadBlock:
        return WorkloadBlock.from_dict(self.workload)

    @property
    def engine_block(self) -> EngineBlock:
        return EngineBlock.from_dict(self.engine)

    @property
    def loader_block(self) -> LoaderBlock | None:
        """The loader block (None when the run has none, or it is not an object)."""
        return LoaderBlock.from_dict(self.loader) if isinstance(self.loader, dict) else None

    @property
    def estimate_block(self) -> EstimateBlock | None:
        return EstimateBlock.from_dict(self.estimate) if isinstance(self.estimate, dict) else None

    @property
    def verdict_block(self) -> VerdictBlock | None:
        return VerdictBlock.from_dict(self.verdict) if isinstance(self.verdict, dict) else None

    @property
    def checkpoint_block(self) -> CheckpointBlock | None:
        c = self.checkpoint
        return CheckpointBlock.from_dict(c) if isinstance(c, dict) else None


def schema_version_problem(version: Any) -> str | None:
    """Why ``version`` is not a schema_version this iobench reads (None when it is)."""
    if isinstance(version, bool) or not isinstance(version, int):
        return f"schema_version {version!r} is not a version number"
    if version < 1:
        return f"schema_version {version} is not valid (iobench results start at 1)"
    if version > SCHEMA_VERSION:
        return f"schema_version {version} is newer than this iobench understands ({SCHEMA_VERSION})"
    return None


# --- a figure's value over repeats -------------------------------------------------------------

# The figures a phase keeps per repeat, as dotted keys into PhaseResult.to_dict():
# ``result_check.REPEAT_FIGURES``, which checks them when a file is read.


def figure(source: Mapping[str, Any] | None, key: str) -> float | None:
    """``latency_s.p99`` -> source["latency_s"]["p99"] as a finite float, else None."""
    cur: Any = source
    for part in key.split("."):
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    if isinstance(cur, bool) or not isinstance(cur, (int, float)):
        return None
    value = float(cur)
    return value if math.isfinite(value) else None


def repeat_values(
    summary: Mapping[str, Any], repeats: Sequence[Mapping[str, Any]], key: str
) -> list[float]:
    """A figure's value in each repeat that has it; the summary's own value when none does
    (a single measurement is its own only repeat)."""
    values = [
        v
        for r in repeats
        if isinstance(r, Mapping) and not r.get("in_flight")  # a repeat cut short is no figure
        for v in [figure(r, key)]
        if v is not None
    ]
    if values:
        return values
    own = figure(summary, key)
    return [] if own is None else [own]


def metric_summary(phase: PhaseResult, key: str) -> Summary | None:
    """``key``'s median over the phase's repeats with n, min-max and CV (None: not measured).

    The phase's fields are read in place (a shallow view, nothing is written): a deep copy per
    figure (``to_dict``, the histogram and series included) made a report's hundreds of
    look-ups cost seconds."""
    view = {f.name: getattr(phase, f.name) for f in dataclasses.fields(phase)}
    return summarize(repeat_values(view, phase.repeats or [], key))


def metric_value(phase: PhaseResult, key: str) -> float | None:
    """A phase figure's value in this run: the median over its repeats (the one rule)."""
    s = metric_summary(phase, key)
    return None if s is None else s.median


def new_run_id() -> str:
    """Sortable and unique: UTC timestamp plus a random suffix."""
    now = _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")


def _torch_version() -> str | None:
    """torch's version without importing it (seconds of start-up, and an import that fails
    in odd environments): the loaded module's when a command already uses torch, else the
    installed distribution's."""
    loaded = sys.modules.get("torch")
    if loaded is not None and getattr(loaded, "__version__", None):
        return str(loaded.__version__)
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("torch")
    except (PackageNotFoundError, ValueError):  # pragma: no cover - torch is a dependency
        return None


def host_info() -> dict[str, Any]:
    """Host and environment capture saved with every run."""
    from ..core.cpu import cpu_model
    from ..core.tools import fio_version  # local: keeps results import-light

    torch_version = _torch_version()
    mem = 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        pass
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpus": os.cpu_count() or 1,
        "mem_bytes": mem,
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch_version,
        "fio": fio_version(),
    }


# -- files iobench writes: result.json, report.html, --svg plots ----------------------------------
#
# Every file iobench writes goes through the one output rule, :mod:`iobench.core.safeio`: only
# regular files, never through a link, never a directory, device, FIFO or socket, never one of
# the command's inputs nor inside an input dataset (by inode), a new temporary file (O_EXCL |
# O_NOFOLLOW) renamed into place. These names are that module's, kept here for their callers.


def write_output_file(
    path: str | Path,
    data: bytes,
    *,
    inputs: tuple[str | Path, ...] = (),
    replace: bool = True,
    option: str = "output",
) -> Path:
    """``claim_output_file`` then ``atomic_write_bytes``: the one way a command writes a file."""
    path = claim_output_file(path, inputs=inputs, replace=replace, option=option)
    atomic_write_bytes(path, data, replace=replace)
    return path


def atomic_write_bytes(path: Path, data: bytes, *, replace: bool = True) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the new one, never half
    (:func:`iobench.core.safeio.write_atomic`: only a regular file is ever replaced; a link, a
    directory, device or FIFO found at the last moment, or any file when ``replace`` is false,
    is an OSError)."""
    from ..core.safeio import write_atomic

    write_atomic(path, data, replace=replace)


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: some filesystems refuse)."""
    try:
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:  # pragma: no cover - some filesystems refuse fsync on directories
        pass


def dumps(run: RunResult) -> str:
    """The result as JSON text: what result.json, ``--json`` and the history hold. Every
    string passes through :func:`iobench.core.redact.redact_obj` here, the one writer of results,
    so a credential in a URL, a command line or a backend's message is never stored."""
    from ..core.redact import redact_obj

    d = redact_obj(run.to_dict())
    return json.dumps(d, indent=2, sort_keys=False, default=_json_default) + "\n"


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def save(run: RunResult, directory: Path, *, new: bool = False) -> Path:
    """Write ``result.json`` atomically into ``directory``; return its path.

    ``new``: the run's first save, which never replaces a file (another run's result); later
    saves of the same run (a warning added, qualify's verdict) replace its own regular file.
    """
    path = Path(directory) / "result.json"
    atomic_write_bytes(path, dumps(run).encode(), replace=not new)
    return path


# A result.json holds figures and histograms, not samples: even a long qualify run is a few
# MiB. Anything bigger is not one of ours, and is not read into memory to find that out.
MAX_RESULT_BYTES = 256 << 20


def load(path: str | Path) -> RunResult:
    """Read a result.json (or a directory holding one)."""
    p = Path(path)
    hint = "pass an iobench result.json"
    if p.is_dir():
        p = p / "result.json"
    try:
        with open_regular(p) as f:  # a FIFO would block, a device never end: never read
            size = os.fstat(f.fileno()).st_size
            if size > MAX_RESULT_BYTES:
                raise UsageError(
                    f"cannot read result {p}: {size:,} bytes is more than any result "
                    f"({MAX_RESULT_BYTES >> 20} MiB at most)",
                    hint=hint,
                )
            data = loads_json(f.read(MAX_RESULT_BYTES + 1).decode("utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"no result at {p}", hint="pass a result.json, its directory or a run id"
        ) from None
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError among them
        detail = e.strerror if isinstance(e, OSError) and e.strerror else e
        raise UsageError(f"cannot read result {p}: {detail}", hint=hint) from None
    try:
        return RunResult.from_dict(data)
    except StoreError as e:
        raise UsageError(f"{p}: {e.message}", hint=e.hint or hint) from None
    except (TypeError, AttributeError, ValueError) as e:  # a JSON of the wrong shape
        raise UsageError(f"{p}: not an iobench result ({e})", hint=hint) from None
