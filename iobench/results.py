"""Run and phase results, and their versioned JSON form (schema_version 1).

All rates are bytes/s and all times seconds inside the file; labels live only in renderings.
Readers accept older schema versions and ignore unknown keys, so a newer iobench can read
history written by an older one.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import os
import platform
import socket
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import __version__
from .errors import StoreError, UsageError

SCHEMA_VERSION = 1


@dataclass
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
    bandwidth_bps: float = 0.0
    iops: float = 0.0
    bandwidth_stonewall_bps: float = 0.0
    latency_s: dict[str, float] = field(default_factory=dict)  # mean p50 p90 p99 p999 max min
    histogram: dict[str, Any] = field(default_factory=dict)  # stats.Histogram.to_dict()
    series: list[float] = field(default_factory=list)  # bandwidth per interval, bytes/s
    series_interval_s: float = 1.0
    ops_series: list[float] = field(default_factory=list)  # ops per second per interval
    per_worker: dict[str, float] = field(default_factory=dict)  # bandwidth min/median/max
    ranks: list[dict[str, Any]] = field(default_factory=list)
    cache: str = "buffered"  # "direct" | "dropped" | "buffered" | "none" (object stores)
    repeats: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)  # effective phase parameters
    extra: dict[str, Any] = field(default_factory=dict)  # engine- or phase-specific figures
    status: str = "ok"  # "ok" | "partial" | "failed"
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PhaseResult:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


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
    verdict: dict[str, Any] | None = None  # {"result": "pass"|"fail", "reasons": [...]}
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
        version = d.get("schema_version", 1)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreError(
                f"result schema_version {version!r} is newer than this iobench understands "
                f"({SCHEMA_VERSION})",
                hint="upgrade iobench",
            )
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in names and k != "phases"}
        kwargs.setdefault("command", "")
        kwargs.setdefault("started_at", "")
        run = cls(**kwargs)
        run.phases = [PhaseResult.from_dict(p) for p in d.get("phases", [])]
        return run

    def phase(self, name: str) -> PhaseResult | None:
        return next((p for p in self.phases if p.name == name), None)


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
    from .engines.registry import fio_version  # local: keeps results import-light

    torch_version = _torch_version()
    mem = 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        pass
    return {
        "hostname": socket.gethostname(),
        "cpus": os.cpu_count() or 1,
        "mem_bytes": mem,
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "torch": torch_version,
        "fio": fio_version(),
    }


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so a reader sees the old file or the new one, never half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; results are meant to be shared
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(path.parent)


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
    return json.dumps(run.to_dict(), indent=2, sort_keys=False, default=_json_default) + "\n"


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def save(run: RunResult, directory: Path) -> Path:
    """Write ``result.json`` atomically into ``directory``; return its path."""
    path = Path(directory) / "result.json"
    atomic_write_bytes(path, dumps(run).encode())
    return path


def load(path: str | Path) -> RunResult:
    """Read a result.json (or a directory holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "result.json"
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise UsageError(
            f"no result at {p}", hint="pass a result.json, its directory or a run id"
        ) from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(
            f"cannot read result {p}: {e}", hint="pass an iobench result.json"
        ) from None
    try:
        return RunResult.from_dict(data)
    except StoreError as e:
        raise UsageError(
            f"{p}: {e.message}", hint=e.hint or "pass an iobench result.json"
        ) from None
