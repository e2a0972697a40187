"""Result history: one immutable Parquet file per run on any fsspec URL, and queries over it.

Each file ``<run_id>.parquet`` holds the run's metrics in long form (one row per run x phase x
metric x repeat, plus one ``aggregate`` row per run x phase x metric holding the median over
the repeats, see :func:`metric_rows`) and, in the file's key-value metadata, the full result
JSON (``iobench.result``) so a stored run can be turned back into a :class:`RunResult`.

Files are never rewritten or deleted: a corrupt file, a foreign Parquet file or one written by a
newer iobench is skipped with a warning naming it. Appends from concurrent processes are safe:
each run writes its own file, through a temporary name, and never replaces an existing one.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import math
import os
import posixpath
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .errors import IobenchError, StoreError, UsageError
from .results import SCHEMA_VERSION, RunResult, dumps, fsync_dir, schema_version_problem
from .results import figure as _lookup
from .stats import Summary, summarize

if TYPE_CHECKING:
    import pyarrow as pa

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


# --- environment fingerprint -------------------------------------------------------------------


def host_class(run: RunResult) -> str:
    """What kind of machine ran it: cpus, memory (GiB, rounded), os, machine; not the hostname.
    A many-client run (torchrun) adds its ranks and hosts: ``…/x86_64 x8 ranks/2 hosts``."""
    host = run.host or {}
    mem = host.get("mem_bytes")
    mem_gib = f"{round(mem / (1 << 30))}GiB" if isinstance(mem, (int, float)) and mem else "?GiB"
    cpus = host.get("cpus")
    text = (
        f"{cpus if cpus else '?'}cpu/{mem_gib}/{host.get('os') or '?'}/{host.get('machine') or '?'}"
    )
    ranks, hosts = run.clients()
    if ranks > 1:
        text += f" x{ranks} ranks/{hosts} host{'s' if hosts != 1 else ''}"
    return text


def fs_identity(run: RunResult) -> str:
    """Which storage it measured: filesystem type and mount source (``nfs4 srv:/export``)."""
    target = run.target or {}
    return f"{target.get('fs_type') or '?'} {target.get('mount_source') or '?'}"


def env_fingerprint(run: RunResult) -> str:
    """A short hash of :func:`host_class` and :func:`fs_identity`: equal means same setup."""
    text = json.dumps([host_class(run), fs_identity(run)])
    return hashlib.sha256(text.encode()).hexdigest()[:12]


# --- long-form metric rows ---------------------------------------------------------------------


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
        "phase_engine": (phase.extra or {}).get("engine") or (run.engine or {}).get("name"),
    }


def metric_rows(run: RunResult) -> list[dict[str, Any]]:
    """One row per run x phase x metric x repeat, and before them one aggregate row per
    run x phase x metric (``aggregate`` true, ``repeat`` -1) holding the median over the repeats
    (:func:`stats.summarize`, the value every rendering shows). Count or average only the rows
    with ``aggregate`` false: those are the measurements.

    A phase without ``repeats`` counts as its own repeat 0. Phase names repeated within one run
    get ``#2``, ``#3``... so their figures never mix.
    """
    workload = run.workload or {}
    target = run.target or {}
    base = {
        "run_id": run.run_id,
        "started_at": run.started_at,
        "command": run.command,
        "workload": workload.get("name"),
        "spec_hash": workload.get("spec_hash"),
        "env_fingerprint": env_fingerprint(run),
        "host_class": host_class(run),
        "fs_type": target.get("fs_type"),
        "fs_identity": fs_identity(run),
        "engine": (run.engine or {}).get("name"),
        "status": run.status,
        "schema_version": run.schema_version,
        "iobench_version": run.iobench_version,
        "verdict": (run.verdict or {}).get("result") if isinstance(run.verdict, dict) else None,
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
    if isinstance(run.loader, dict):
        repeats = run.loader.get("repeats") or []
        rows += _group_rows("loader", "loader", run.loader, repeats, LOADER_METRICS, None, base)
    if isinstance(run.estimate, dict):
        rows += _group_rows("estimate", "estimate", run.estimate, [], ESTIMATE_METRICS, None, base)
    return rows


# --- the store ---------------------------------------------------------------------------------


def _fs(url: str | None):
    """(filesystem, root path, local?, url) of a history location. An S3 history takes its
    endpoint from the environment as targets do (IOBENCH_S3_ENDPOINT, AWS_ENDPOINT_URL…);
    credentials in an object-store URL are refused (a UsageError: exit 2, before any run)."""
    import fsspec
    from fsspec.implementations.local import LocalFileSystem

    from .target import check_url_credentials, storage_options_from_env, url_protocol

    url = url or default_history_url()
    if "://" not in url and "::" not in url:
        url = os.path.expanduser(url)
    opts: dict[str, Any] = {}
    if "://" in url:
        try:
            check_url_credentials(url, "history")
        except UsageError as e:
            raise UsageError(e.message, hint=e.hint) from None
        opts = storage_options_from_env(url_protocol(url))
    try:
        fs, path = fsspec.core.url_to_fs(url, **opts)
    except (ImportError, ValueError) as e:
        raise UsageError(
            f"history {url}: {e}", hint="install the matching fsspec backend"
        ) from None
    return fs, path.rstrip("/") or "/", isinstance(fs, LocalFileSystem), url


def check_url(url: str | None) -> None:
    """UsageError now when ``url`` names no usable store (unknown protocol, backend missing,
    credentials in an object-store URL); nothing is read, written or reached over the network
    (a missing bucket shows when the run is appended: a warning, never a created bucket)."""
    _fs(url)


def _file_name(run_id: str) -> str:
    if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
        raise StoreError(f"run id {run_id!r} cannot name a history file")
    return f"{run_id}.parquet"


def _to_parquet_bytes(run: RunResult) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .redact import redact_obj, storable

    schema = _arrow_schema().with_metadata(
        {
            RESULT_KEY: dumps(run).encode(),
            SCHEMA_KEY: str(run.schema_version).encode(),
            FORMAT_KEY: FORMAT,
        }
    )
    # the rows get what result.json gets: no credentials, and text UTF-8 can hold (a path
    # with an undecodable byte is written \xff, as the terminal shows it)
    rows = [
        {k: storable(v) if isinstance(v, str) else v for k, v in redact_obj(row).items()}
        for row in metric_rows(run)
    ]
    rows = [{**r, "started_at": parse_timestamp(r["started_at"])} for r in rows]
    table = pa.Table.from_pylist(rows, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue().to_pybytes()


def append(run: RunResult, url: str | None = None) -> str:
    """Store ``run`` as ``<run_id>.parquet`` under ``url``; return the file's path or URL.

    Never replaces an existing file: a run id already stored is a :class:`StoreError`. Never
    creates a bucket: an object-store history whose bucket is missing is a StoreError. Any
    failure (I/O, a backend's own exception, missing credentials) is a StoreError with one
    line naming it; the caller turns it into a warning.
    """
    fs, root, local, _url = _fs(url)
    where = url or root
    try:
        name = _file_name(run.run_id)
        data = _to_parquet_bytes(run)
    except IobenchError:  # StoreError; Interrupted (a second Ctrl-C) is not a failed append
        raise
    except Exception as e:  # noqa: BLE001 - pyarrow refusing a value is a failed append
        raise StoreError(f"cannot store run {run.run_id} in history {where}: {_why(e)}") from None
    final = posixpath.join(root, name)
    tmp = posixpath.join(root, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        if local:
            _append_local(Path(final), Path(tmp), data)
            return final
        if hasattr(fs, "split_path"):  # an object store: buckets are made by people, not us
            _check_bucket(fs, root, where)
        else:
            fs.makedirs(root, exist_ok=True)
        if fs.exists(final):
            raise StoreError(
                f"history already holds run {run.run_id} ({fs.unstrip_protocol(final)})"
            )
        fs.pipe_file(tmp, data)
        try:
            # Object stores have no no-replace rename; run ids are unique, so the window
            # between the check above and this move only matters for a duplicated id.
            fs.mv(tmp, final)
        except BaseException:
            try:
                fs.rm(tmp)
            except Exception:
                pass
            raise
    except IobenchError:  # StoreError; Interrupted (a second Ctrl-C) is not a failed append
        raise
    except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
        raise StoreError(f"cannot write run {run.run_id} to history {where}: {_why(e)}") from None
    return fs.unstrip_protocol(final)


def _why(e: BaseException) -> str:
    """One line: the exception's type and message (a backend's may span lines)."""
    text = " ".join(str(e).split())[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _check_bucket(fs, root: str, where: str) -> None:
    bucket = fs.split_path(root)[0]
    try:
        fs.info(bucket)
    except FileNotFoundError:
        raise StoreError(
            f"history bucket {bucket!r} does not exist ({where})",
            hint="create it first, or fix --history / IOBENCH_HISTORY (iobench never creates "
            "buckets)",
        ) from None


def _append_local(final: Path, tmp: Path, data: bytes) -> None:
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        raise StoreError(f"history already holds run {final.stem} ({final})")
    try:
        with open(tmp, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            # link() refuses to replace an existing name: an atomic no-clobber rename.
            os.link(tmp, final)
        except FileExistsError:
            raise StoreError(f"history already holds run {final.stem} ({final})") from None
        except OSError:
            # Filesystems without hard links: check-then-rename (ids are unique anyway).
            if final.exists():
                raise StoreError(f"history already holds run {final.stem} ({final})") from None
            os.rename(tmp, final)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    fsync_dir(final.parent)


@dataclass
class StoredRun:
    """One history file whose footer checked out: where it is and the run it holds."""

    path: str  # a local path or a full URL
    run_id: str
    started_at: str
    result_json: str

    def run(self) -> RunResult:
        return RunResult.from_dict(json.loads(self.result_json))


@dataclass(frozen=True)
class RunSummary:
    """One line of ``iobench history list``."""

    run_id: str
    started_at: str
    command: str
    workload: str | None
    spec_hash: str | None
    status: str
    engine: str | None
    env_fingerprint: str
    host_class: str
    fs_identity: str
    phases: tuple[str, ...]
    path: str


def _time_key(started_at: str, run_id: str) -> tuple[float, str]:
    try:
        t = _dt.datetime.fromisoformat(started_at)
        if t.tzinfo is None:
            t = t.replace(tzinfo=_dt.timezone.utc)
        return (t.timestamp(), run_id)
    except (TypeError, ValueError):
        return (float("-inf"), run_id)


def _list_files(fs, root: str, local: bool) -> list[str]:
    """The store's ``*.parquet`` files, as local paths or full URLs (what warnings name)."""
    try:
        fs.invalidate_cache(root)  # another process may have appended since we last listed
        if not fs.exists(root):
            return []
        paths = fs.glob(posixpath.join(root, "*.parquet"))
    except OSError as e:
        raise StoreError(f"cannot list history {root}: {e}") from None
    paths = sorted(p for p in paths if not posixpath.basename(p).startswith("."))
    return paths if local else [fs.unstrip_protocol(p) for p in paths]


def _check_footer(fs, path: str) -> tuple[Any, dict[bytes, bytes]]:
    """Open ``path`` and check it is an iobench history file this version reads.

    Returns the open ParquetFile's schema and metadata; raises ``_Skip`` with the reason.
    """
    import pyarrow.parquet as pq

    try:
        with fs.open(path, "rb") as f:
            schema = pq.ParquetFile(f).schema_arrow
    except Exception as e:  # corrupt footer, truncated file, I/O error: all mean "skip"
        raise _Skip(f"cannot read it ({type(e).__name__}: {e})") from None
    meta = schema.metadata or {}
    missing = [c for c in COLUMNS if c not in schema.names and c not in _LATER_COLUMNS]
    if missing or RESULT_KEY not in meta:
        what = ", ".join(missing) if missing else "iobench.result metadata"
        raise _Skip(f"not an iobench history file (missing {what})")
    try:
        version = int(meta.get(SCHEMA_KEY, b"1"))
    except ValueError:
        raise _Skip(f"bad schema_version {meta.get(SCHEMA_KEY)!r}") from None
    problem = schema_version_problem(version)
    if problem:
        raise _Skip(problem + ("; upgrade iobench" if version > SCHEMA_VERSION else ""))
    return schema, meta


class _Skip(Exception):
    pass


def _warn(on_warning: Warn, path: str, reason: str) -> None:
    if on_warning is not None:
        on_warning(f"history: skipped {path}: {reason}")


def _scan(url: str | None, on_warning: Warn) -> Iterator[StoredRun]:
    fs, root, local, _url = _fs(url)
    seen: set[str] = set()
    for path in _list_files(fs, root, local):
        try:
            _schema, meta = _check_footer(fs, path)
            try:
                d = json.loads(meta[RESULT_KEY])
                run_id = d["run_id"]
                started_at = d.get("started_at") or ""
                version = d.get("schema_version", 1)
            except (ValueError, KeyError, TypeError) as e:
                raise _Skip(f"stored result is unreadable ({e})") from None
            problem = schema_version_problem(version)
            if problem:
                newer = "newer" in problem
                raise _Skip(problem + ("; upgrade iobench" if newer else ""))
            if run_id in seen:
                raise _Skip(f"run {run_id} is stored twice; using the first file")
        except _Skip as e:
            _warn(on_warning, path, str(e))
            continue
        seen.add(run_id)
        yield StoredRun(
            path=path, run_id=run_id, started_at=started_at, result_json=meta[RESULT_KEY].decode()
        )


def read_history(url: str | None = None) -> tuple[pa.Table, list[str]]:
    """Every stored metric row as one ``pyarrow.Table`` (columns :data:`COLUMNS`), and warnings.

    Returns ``(table, warnings)``; each unreadable, foreign or too-new file is skipped and named
    in ``warnings``, never modified.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    warnings: list[str] = []
    fs, _root, _local, _url = _fs(url)
    schema = _arrow_schema()
    tables = []
    for stored in _scan(url, warnings.append):
        try:
            with fs.open(stored.path, "rb") as f:
                names = pq.ParquetFile(f).schema_arrow.names
                table = pq.read_table(f, columns=[c for c in COLUMNS if c in names])
            table = _upgrade(table, schema)
        except Exception as e:  # a corrupt data page shows only now
            _warn(warnings.append, stored.path, f"cannot read it ({type(e).__name__}: {e})")
            continue
        tables.append(table.replace_schema_metadata(None))
    if not tables:
        return schema.empty_table(), warnings
    return pa.concat_tables(tables), warnings


def _upgrade(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A table read from any history file, in this version's columns and types: an older
    file's string ``started_at`` becomes a timestamp, columns it lacks are derived or null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "aggregate" not in table.column_names:  # written before the column existed
        table = table.append_column("aggregate", pc.equal(table["repeat"], SUMMARY_REPEAT))
    for name in COLUMNS:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(len(table), schema.field(name).type))
    i = table.column_names.index("started_at")
    if not pa.types.is_timestamp(table.schema.field(i).type):
        times = [parse_timestamp(v) for v in table["started_at"].to_pylist()]
        table = table.set_column(i, "started_at", pa.array(times, schema.field("started_at").type))
    return table.select(list(COLUMNS)).cast(schema)


def _stored_runs(url: str | None, on_warning: Warn) -> list[StoredRun]:
    runs = list(_scan(url, on_warning))
    runs.sort(key=lambda s: _time_key(s.started_at, s.run_id))
    return runs


def list_runs(url: str | None = None, *, on_warning: Warn = None) -> list[RunSummary]:
    """Every stored run, oldest first. Skipped files are reported through ``on_warning``."""
    out = []
    for stored in _stored_runs(url, on_warning):
        try:
            run = stored.run()
        except Exception as e:
            _warn(on_warning, stored.path, f"stored result is unreadable ({e})")
            continue
        out.append(
            RunSummary(
                run_id=run.run_id,
                started_at=run.started_at,
                command=run.command,
                workload=(run.workload or {}).get("name"),
                spec_hash=(run.workload or {}).get("spec_hash"),
                status=run.status,
                engine=(run.engine or {}).get("name"),
                env_fingerprint=env_fingerprint(run),
                host_class=host_class(run),
                fs_identity=fs_identity(run),
                phases=tuple(p.name for p in run.phases),
                path=stored.path,
            )
        )
    return out


def get_run(run_id: str, url: str | None = None, *, on_warning: Warn = None) -> RunResult:
    """The stored run with this id, or the only one whose id starts with it."""
    stored = _stored_runs(url, on_warning)
    exact = [s for s in stored if s.run_id == run_id]
    matches = exact or ([s for s in stored if s.run_id.startswith(run_id)] if run_id else [])
    where = url or default_history_url()
    if not matches:
        raise UsageError(f"no run {run_id!r} in history {where}", hint="see `iobench history list`")
    if len(matches) > 1:
        names = ", ".join(s.run_id for s in matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise UsageError(f"run id prefix {run_id!r} is ambiguous: {names}", hint="give more of it")
    try:
        return matches[0].run()
    except Exception as e:
        raise StoreError(
            f"history file {matches[0].path} holds an unreadable result: {e}"
        ) from None


def _workload_matches(stored: StoredRun, workload: str | None) -> bool:
    if workload is None:
        return True
    w = json.loads(stored.result_json).get("workload") or {}
    return workload in (w.get("name"), w.get("spec_hash"))


def runs_before(
    url: str | None = None,
    workload: str | None = None,
    before: str | None = None,
    *,
    on_warning: Warn = None,
) -> list[StoredRun]:
    """Stored runs, oldest first, of ``workload`` (name or spec hash) started before ``before``."""
    limit = _time_key(before, "")[0] if before else None
    if before and limit == float("-inf"):
        raise UsageError(f"--before: expected an ISO timestamp, got {before!r}")
    out = []
    for s in _stored_runs(url, on_warning):
        if not _workload_matches(s, workload):
            continue
        if limit is not None and not _time_key(s.started_at, s.run_id)[0] < limit:
            continue
        out.append(s)
    return out


def latest_run(
    url: str | None = None,
    workload: str | None = None,
    before: str | None = None,
    *,
    on_warning: Warn = None,
) -> RunResult | None:
    """The most recent stored run (of ``workload``, started strictly before ``before``), or None.

    ``workload`` matches the workload name or its spec hash; ``before`` is an ISO timestamp.
    """
    runs = runs_before(url, workload, before, on_warning=on_warning)
    return runs[-1].run() if runs else None


def split_metric(metric: str, phase: str | None = None) -> tuple[str | None, str]:
    """``seq-read.bandwidth`` -> ("seq-read", "bandwidth"); a bare metric keeps ``phase``."""
    if metric in ALL_METRICS:
        return phase, metric
    head, dot, tail = metric.rpartition(".")
    if dot and tail in ALL_METRICS and phase is None:
        return head, tail
    known = ", ".join(ALL_METRICS)
    raise UsageError(f"unknown metric {metric!r}", hint=f"use one of {known} (or PHASE.METRIC)")


class TrendPoint(NamedTuple):
    """One run's value of a metric: the median over its repeats, with their spread."""

    started_at: str
    run_id: str
    value: float
    spread: Summary


def trend(
    metric: str,
    url: str | None = None,
    phase: str | None = None,
    workload: str | None = None,
    *,
    on_warning: Warn = None,
) -> list[TrendPoint]:
    """One metric across stored runs, oldest first: per run the median over its repeats
    (the measurement rows, never the aggregate row), with n, min-max and CV.

    ``metric`` may be ``PHASE.METRIC``. When the metric occurs in several phases and none is
    named, that is a :class:`UsageError` listing them.
    """
    import pyarrow.compute as pc

    phase, metric = split_metric(metric, phase)
    table, warnings = read_history(url)
    for w in warnings:
        if on_warning is not None:
            on_warning(w)
    mask = pc.and_(pc.equal(table["metric"], metric), pc.invert(table["aggregate"]))
    if workload is not None:
        mask = pc.and_(
            mask,
            pc.or_(pc.equal(table["workload"], workload), pc.equal(table["spec_hash"], workload)),
        )
    rows = table.filter(mask).select(["started_at", "run_id", "phase", "value"]).to_pylist()
    phases = sorted({r["phase"] for r in rows})
    if phase is None and len(phases) > 1:
        raise UsageError(
            f"metric {metric} occurs in phases {', '.join(phases)}",
            hint=f"name one, e.g. {phases[0]}.{metric}",
        )
    runs: dict[str, tuple[str, list[float]]] = {}
    for r in rows:
        if phase is None or r["phase"] == phase:
            started = r["started_at"]
            started = started.isoformat(timespec="milliseconds") if started else ""
            runs.setdefault(r["run_id"], (started, []))[1].append(r["value"])
    points = []
    for run_id, (started_at, values) in runs.items():
        summary = summarize(values)
        if summary is not None:
            points.append(TrendPoint(started_at, run_id, summary.median, summary))
    points.sort(key=lambda p: _time_key(p.started_at, p.run_id))
    return points


_PLOT_SCALE = {"B/s": (1 << 20, "MiB/s"), "s": (1e-3, "ms"), "fraction": (0.01, "%")}


def trend_svg(points: list[TrendPoint], metric: str, unit: str) -> str:
    """An SVG line plot of :func:`trend` points, min-max bars where a run had repeats
    (needs matplotlib: ``iobench[plot]``)."""
    try:
        # Figure + savefig use the Agg/SVG canvases directly: no pyplot, no global backend.
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("matplotlib is missing; install iobench[plot]") from None
    if not points:
        raise UsageError(f"no stored values of {metric} to plot")
    scale, label = _PLOT_SCALE.get(unit, (1, unit))
    xs = []
    for started_at, run_id, *_rest in points:
        key = _time_key(started_at, run_id)[0]
        xs.append(_dt.datetime.fromtimestamp(key, _dt.timezone.utc) if math.isfinite(key) else None)
    use_dates = all(x is not None for x in xs)
    if not use_dates:
        xs = list(range(len(points)))
    ys = [p.value / scale for p in points]
    fig = Figure(figsize=(8, 3.2))
    ax = fig.add_subplot()
    ax.plot(xs, ys, marker="o", linewidth=1.5)
    ranged = [i for i, p in enumerate(points) if p.spread.n > 1]
    if ranged:
        lo = [ys[i] - points[i].spread.min / scale for i in ranged]
        hi = [points[i].spread.max / scale - ys[i] for i in ranged]
        ax.errorbar(
            [xs[i] for i in ranged], [ys[i] for i in ranged], yerr=[lo, hi], fmt="none",
            ecolor="0.5", capsize=3, linewidth=1, label="min-max of the repeats",
        )  # fmt: skip
        ax.legend(loc="lower right", fontsize="small")
    ax.set_title(metric)
    ax.set_ylabel(label)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if use_dates:
        fig.autofmt_xdate()
    else:
        ax.set_xlabel("run")
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    return buf.getvalue()
