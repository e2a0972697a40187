"""Result history: one immutable Parquet file per run on any fsspec URL, and queries over it.

Each file ``<run_id>.parquet`` holds the run's metrics in long form (one row per run x phase x
metric x repeat, plus one ``aggregate`` row per run x phase x metric holding the median over
the repeats, see :func:`metric_rows`) and, in the file's key-value metadata, the full result
JSON (``iobench.result``) so a stored run can be turned back into a :class:`RunResult`.

Files are never rewritten or deleted: a corrupt file, a foreign Parquet file or one written by a
newer iobench is skipped with a warning naming it. Appends from concurrent processes are safe:
each run writes its own file, through a temporary name, and never replaces an existing one.

The package is layered, each module importing only those before it: ``schema`` (columns,
metrics, the rows of a run) → ``files`` (the store behind a URL, a run as Parquet, reading the
files) → ``query`` (runs, the latest, a metric's trend as one series per spec). :func:`append`, the one writer, lives
here beside the names it calls, so that a test can replace any of them on ``iobench.history``.
"""

from __future__ import annotations

import os
import posixpath
import uuid
from pathlib import Path

from ..core.errors import IobenchError, StoreError
from ..result.file import RunResult
from .files import (
    RunSummary,
    StoredRun,
    _check_bucket,
    _file_name,
    _fs,
    _to_parquet_bytes,
    _why,
    check_url,
    read_history,
)
from .query import (
    SpecSeries,
    TrendPoint,
    get_run,
    latest_run,
    list_runs,
    param_text,
    runs_before,
    split_metric,
    trend,
    trend_series,
)
from .schema import (
    ALL_METRICS,
    COLUMNS,
    ESTIMATE_METRICS,
    FORMAT,
    FORMAT_KEY,
    HEADLINE_METRICS,
    LOADER_METRICS,
    PHASE_METRICS,
    RESULT_KEY,
    SCHEMA_KEY,
    SUMMARY_REPEAT,
    Headline,
    HostClass,
    Warn,
    _arrow_schema,
    default_history_url,
    env_fingerprint,
    fs_identity,
    headline,
    host_class,
    kernel_series,
    memory_gib,
    metric_rows,
    named_phases,
    parse_timestamp,
    same_setup,
    target_of,
    when_text,
)


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
            _append_local(Path(final), Path(tmp), data, default=_is_default(url))
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
            except Exception:  # noqa: BLE001 - best effort; the original error is re-raised
                pass
            raise
    except IobenchError:  # StoreError; Interrupted (a second Ctrl-C) is not a failed append
        raise
    except Exception as e:  # noqa: BLE001 - botocore/aiohttp errors have no common base
        raise StoreError(f"cannot write run {run.run_id} to history {where}: {_why(e)}") from None
    return fs.unstrip_protocol(final)


def _is_default(url: str | None) -> bool:
    """Whether ``url`` falls back to the default history (``~/.local/share/iobench``)."""
    return not url and not os.environ.get("IOBENCH_HISTORY")


def _append_local(final: Path, tmp: Path, data: bytes, default: bool) -> None:
    """Store ``data`` as ``final`` by the one output rule (:func:`iobench.core.safeio.write_atomic`:
    a new O_EXCL|O_NOFOLLOW temporary file linked into place, never replacing a file, never
    inside an input dataset). The default history is made only below an existing home."""
    from ..core.safeio import write_atomic

    if default:
        home = Path.home()
        if not home.is_dir():
            raise StoreError(
                f"no history: the home directory {home} does not exist, and the default history "
                "is made only below one",
                hint="set IOBENCH_HISTORY or pass --history DIR, or --no-history",
            )
    if final.exists():
        raise StoreError(f"history already holds run {final.stem} ({final})")
    try:
        write_atomic(final, data, replace=False)
    except FileExistsError:
        raise StoreError(f"history already holds run {final.stem} ({final})") from None


__all__ = [
    "Warn",
    "RESULT_KEY",
    "SCHEMA_KEY",
    "FORMAT_KEY",
    "FORMAT",
    "SUMMARY_REPEAT",
    "PHASE_METRICS",
    "LOADER_METRICS",
    "ESTIMATE_METRICS",
    "ALL_METRICS",
    "COLUMNS",
    "_arrow_schema",
    "parse_timestamp",
    "when_text",
    "default_history_url",
    "HostClass",
    "HEADLINE_METRICS",
    "Headline",
    "headline",
    "target_of",
    "host_class",
    "kernel_series",
    "memory_gib",
    "same_setup",
    "fs_identity",
    "env_fingerprint",
    "metric_rows",
    "named_phases",
    "check_url",
    "StoredRun",
    "RunSummary",
    "read_history",
    "list_runs",
    "get_run",
    "runs_before",
    "latest_run",
    "split_metric",
    "TrendPoint",
    "trend",
    "SpecSeries",
    "trend_series",
    "param_text",
    "append",
]
