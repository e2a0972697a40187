"""Results as files other tools read: CSV rows per phase, the per-interval series, and the
history table as CSV, Parquet or JSON.

Pure row builders (``phase_rows``, ``series_rows``, ``history_rows``) and encoders
(``to_csv``, ``to_json``); the one place that writes a file is :func:`write_output`.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import os
from pathlib import Path
from typing import Any

from ..core.errors import UsageError
from ..result.blocks import WaitBlock
from ..result.file import RunResult

# One row per phase (and one for the loader), in this order; units in the names.
PHASE_COLUMNS: tuple[str, ...] = (
    "run_id",
    "started_at",
    "workload",
    "phase",
    "op",
    "status",
    "engine",
    "block_size",
    "jobs",
    "cache",
    "bytes",
    "ops",
    "files",
    "elapsed_s",
    "bandwidth_bps",
    "iops",
    "latency_mean_s",
    "latency_p50_s",
    "latency_p99_s",
    "latency_p999_s",
    "repeats",
    "au",
    "verdict",
)
# One row per phase x interval, as elbencho's --livecsv: when the interval ended, what moved.
SERIES_COLUMNS: tuple[str, ...] = (
    "run_id",
    "phase",
    "interval",
    "t_start_s",
    "t_end_s",
    "bandwidth_bps",
    "iops",
)
HISTORY_FORMATS = ("csv", "parquet", "json")


def phase_rows(run: RunResult) -> list[dict[str, Any]]:
    """One row per phase (then one for the loader, if it ran): the figures every rendering shows."""
    base = {
        "run_id": run.run_id,
        "started_at": run.started_at,
        "workload": run.workload_block.name,
        "verdict": verdict.judged if (verdict := run.verdict_block) is not None else None,
    }
    run_engine = run.engine_block.name
    rows = []
    for p in run.phases:
        lat = p.latency
        rows.append(
            {
                **base,
                "phase": p.name,
                "op": p.op,
                "status": p.status,
                "engine": p.extra_block.engine or run_engine,
                "block_size": p.block_size or None,
                "jobs": p.concurrency,
                "cache": p.cache,
                "bytes": p.bytes,
                "ops": p.ops,
                "files": p.files,
                "elapsed_s": p.elapsed_s,
                "bandwidth_bps": p.bandwidth_bps if p.bytes else None,
                "iops": p.iops if p.ops else None,
                "latency_mean_s": lat.mean,
                "latency_p50_s": lat.p50,
                "latency_p99_s": lat.p99,
                "latency_p999_s": lat.p999,
                "repeats": len(p.repeats) or 1,
            }
        )
    ld = run.loader_block
    if ld is not None:
        wait = ld.load_wait_s if isinstance(ld.load_wait_s, WaitBlock) else WaitBlock()
        rows.append(
            {
                **base,
                "phase": "loader",
                "op": "loader",
                "status": ld.status or run.status,
                "engine": "torch",
                "bandwidth_bps": ld.bytes_per_s,
                "latency_mean_s": wait.mean,
                "latency_p99_s": wait.p99,
                "repeats": len(ld.repeats or ()) or 1,
                "au": ld.au,
            }
        )
    return [{c: r.get(c) for c in PHASE_COLUMNS} for r in rows]


def series_rows(run: RunResult) -> list[dict[str, Any]]:
    """One row per phase x interval of the measured per-interval series (bandwidth and IOPS)."""
    rows = []
    for p in run.phases:
        step = p.series_interval_s or 1.0
        n = max(len(p.series), len(p.ops_series))
        for i in range(n):
            rows.append(
                {
                    "run_id": run.run_id,
                    "phase": p.name,
                    "interval": i,
                    "t_start_s": round(i * step, 6),
                    "t_end_s": round((i + 1) * step, 6),
                    "bandwidth_bps": p.series[i] if i < len(p.series) else None,
                    "iops": p.ops_series[i] if i < len(p.ops_series) else None,
                }
            )
    return rows


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, _dt.datetime):
        return value.isoformat(timespec="milliseconds")
    if isinstance(value, float):
        return repr(value)  # every digit: the CSV round-trips exactly
    return value


def to_csv(rows: list[dict[str, Any]], columns: tuple[str, ...] | list[str]) -> str:
    """RFC 4180 CSV with a header; empty cells for missing values."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([_cell(r.get(c)) for c in columns])
    return buf.getvalue()


def to_json(rows: list[dict[str, Any]]) -> str:
    """A JSON array of row objects; timestamps as ISO 8601 text, NaN and infinities as null
    (strict JSON has neither)."""

    def default(o: Any) -> Any:
        if isinstance(o, _dt.datetime):
            return o.isoformat(timespec="milliseconds")
        raise TypeError(f"{type(o).__name__} is not JSON serializable")

    def finite(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    rows = [{k: finite(v) for k, v in r.items()} for r in rows]
    return json.dumps(rows, indent=1, default=default, allow_nan=False) + "\n"


def history_rows(url: str | None, workload: str | None = None) -> tuple[Any, list[str]]:
    """The history's metric table (pyarrow), only ``workload``'s runs if given, and warnings."""
    import pyarrow.compute as pc

    from .. import history

    table, warnings = history.read_history(url)
    if workload:
        mask = pc.or_(pc.equal(table["workload"], workload), pc.equal(table["spec_hash"], workload))
        table = table.filter(pc.fill_null(mask, False))
    return table, warnings


def encode_history(table: Any, fmt: str) -> bytes:
    """The history table as ``csv``, ``parquet`` or ``json`` bytes."""
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        return sink.getvalue().to_pybytes()
    rows = table.to_pylist()
    if fmt == "csv":
        return to_csv(rows, table.column_names).encode()
    if fmt == "json":
        return to_json(rows).encode()
    raise UsageError(f"--format: expected csv, parquet or json, got {fmt!r}")


def check_output(path: str, what: str) -> Path:
    """Refuse, before anything runs, an output path iobench must not write (exit 2): the
    project's one safe-output rule, :func:`results.claim_output_file`."""
    from ..core.safeio import check_output_file as claim_output_file

    return claim_output_file(path, option=what)


def _atomic_write(path: Path, data: bytes) -> None:
    from ..result.file import atomic_write_bytes

    atomic_write_bytes(path, data)


def write_output(path: str | os.PathLike, data: bytes, what: str = "output") -> None:
    """Write one output file (atomically). The single place exports write: the safe-output
    rule (regular files only, never an input, never through a symlink) applies here."""
    from ..core.errors import StoreError

    p = check_output(str(path), what)
    try:
        _atomic_write(p, data)
    except OSError as e:
        raise StoreError(f"cannot write {what} {path}: {e.strerror or e}") from None
