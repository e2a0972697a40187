"""The history's files: the store behind a URL (:func:`_fs`), one run as Parquet bytes, and
reading every file whose footer checks out (:func:`read_history`), skipping the others with a
warning.
"""

from __future__ import annotations

import datetime as _dt
import os
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.errors import IobenchError, StoreError, UsageError, quoted
from ..core.inputs import NotRegularFile, file_kind, loads_json, open_regular
from ..result.file import SCHEMA_VERSION, RunResult, dumps, schema_version_problem

if TYPE_CHECKING:
    import pyarrow as pa
from .schema import (
    _LATER_COLUMNS,
    COLUMNS,
    FORMAT,
    FORMAT_KEY,
    RESULT_KEY,
    SCHEMA_KEY,
    SUMMARY_REPEAT,
    Headline,
    Warn,
    _arrow_schema,
    default_history_url,
    metric_rows,
    parse_timestamp,
)


def _fs(url: str | None):
    """(filesystem, root path, local?, url) of a history location. An S3 history takes its
    endpoint from the environment as targets do (IOBENCH_S3_ENDPOINT, AWS_ENDPOINT_URL…);
    credentials in an object-store URL are refused (a UsageError: exit 2, before any run)."""
    import fsspec
    from fsspec.implementations.local import LocalFileSystem

    from ..target import check_url_credentials, local_path, storage_options_from_env, url_protocol

    url = url or default_history_url()
    if url.lower().startswith("file://"):
        local_path(url, "history")  # file:// with no path is refused, never the working dir
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
    (a missing bucket shows when the run is appended: a warning, never a created bucket; so
    does a local history that is no directory: storing is a side effect of a run). A local
    history inside an input of the command (``loader --existing``'s dataset) is refused: the
    output rule (:mod:`iobench.core.safeio`)."""
    from ..core.safeio import refuse_inside_input

    _fs_, root, local, _url = _fs(url)
    if local:
        refuse_inside_input(root, "--history", "--history DIR")


def _file_name(run_id: str) -> str:
    if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
        raise StoreError(f"run id {run_id!r} cannot name a history file")
    return f"{run_id}.parquet"


def _to_parquet_bytes(run: RunResult) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..core.redact import redact_obj, storable

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


def _why(e: BaseException) -> str:
    """One line: the exception's type and message (a backend's may span lines)."""
    text = quoted(e)
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


@dataclass(frozen=True)
class StoredRun:
    """One history file whose footer checked out: where it is and the run it holds."""

    path: str  # a local path or a full URL
    run_id: str
    started_at: str
    result_json: str

    def run(self) -> RunResult:
        """The stored result, read as a result.json is (bounded JSON, every figure checked):
        a bad one is a UsageError naming the file, the field and the value."""
        try:
            return RunResult.from_dict(loads_json(self.result_json))
        except StoreError as e:
            raise UsageError(f"history file {self.path}: {e.message}", hint=e.hint) from None
        except ValueError as e:
            raise UsageError(f"history file {self.path}: {e}", hint=_REMOVE) from None


_REMOVE = "remove the file from the history (it was not written by iobench as it is)"


def open_stored(fs, path: str, local: bool):
    """A history file opened to read: a local one only if it is a regular file (a FIFO named
    ``*.parquet`` would block the open for ever), through ``inputs.open_regular``."""
    return open_regular(path) if local else fs.open(path, "rb")


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
    target: str | None = None  # the target as given (path or URL)
    verdict: str | None = None  # qualify's: pass, pass (indicative), fail; None otherwise
    headline: Headline | None = None


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
        if local:
            _check_directory(root)
        paths = fs.glob(posixpath.join(root, "*.parquet"))
    except OSError as e:
        raise StoreError(f"cannot list history {root}: {e}") from None
    except IobenchError:
        raise
    except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors (no credentials, no endpoint) have no common base
        raise StoreError(f"cannot list history {root}: {_why(e)}") from None
    paths = sorted(p for p in paths if not posixpath.basename(p).startswith("."))
    return paths if local else [fs.unstrip_protocol(p) for p in paths]


def _check_directory(root: str) -> None:
    """A local history is a directory: a file, FIFO or device given as one is bad input."""
    try:
        kind = file_kind(os.stat(root).st_mode)
    except OSError as e:
        raise UsageError(f"history {root}: {e.strerror}", hint=_HINT_DIR) from None
    if kind != "a directory":
        raise UsageError(f"history {root} is {kind or 'a file'}, not a directory", hint=_HINT_DIR)


_HINT_DIR = "pass a directory (or a URL) to --history / IOBENCH_HISTORY"


def _check_footer(fs, path: str, local: bool = False) -> tuple[Any, dict[bytes, bytes]]:
    """Open ``path`` and check it is an iobench history file this version reads.

    Returns the open ParquetFile's schema and metadata; raises ``_Skip`` with the reason.
    """
    import pyarrow.parquet as pq

    try:
        with open_stored(fs, path, local) as f:
            schema = pq.ParquetFile(f).schema_arrow
    except NotRegularFile as e:
        raise _Skip(f"it is {e.kind}, not a history file (never opened)") from None
    except Exception as e:  # noqa: BLE001 - corrupt footer, truncated file, I/O error: all mean "skip"
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
            _schema, meta = _check_footer(fs, path, local)
            try:
                d = loads_json(meta[RESULT_KEY])
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
    fs, _root, local, _url = _fs(url)
    schema = _arrow_schema()
    tables = []
    for stored in _scan(url, warnings.append):
        try:
            with open_stored(fs, stored.path, local) as f:
                names = pq.ParquetFile(f).schema_arrow.names
                table = pq.read_table(f, columns=[c for c in COLUMNS if c in names])
            table = _upgrade(table, schema)
        except Exception as e:  # noqa: BLE001 - a corrupt data page shows only now (any reader error)
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
