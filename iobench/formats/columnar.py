"""``parquet`` (existing dataset): each row group read and converted to numpy columns, one
sample per row, as a training job's columnar reader does. A binary column's value is a uint8
array of its bytes (images embedded in a parquet file are not decoded, the row is the
sample): torch's collate makes tensors of those, moved to the main process through shared
memory, where Python ``bytes`` would be pickled through the worker's pipe (measured: 4 MiB
rows at 613 MiB/s with one worker and with two, against a plain DataLoader's 727 and 1,224)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

NAME = "parquet"
EXTENSIONS = ("parquet", "pq")
LIBRARY = "pyarrow"


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """Every row of every row group: (``name#row``, {column: value})."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # the read's bytes, or its fresh array: the reader's to give away, no copy needed
    pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(data)))
    row = 0
    for rg in range(pf.num_row_groups):
        table = pf.read_row_group(rg)
        cols = {n: _column(table.column(n)) for n in table.column_names}
        for i in range(table.num_rows):
            yield f"{name}#{row}", {n: c[i] for n, c in cols.items()}
            row += 1


def _column(col: Any) -> Any:
    """A column's values: a binary column's as writable uint8 arrays (one copy of each value,
    as a training job's ``np.frombuffer(...).copy()``), any other through ``to_numpy``."""
    import numpy as np
    import pyarrow as pa

    if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
        return col.to_numpy(zero_copy_only=False)
    out: list[Any] = []
    for chunk in col.chunks:
        valid = chunk.is_valid().to_numpy(zero_copy_only=False) if chunk.null_count else None
        _, offs_buf, data_buf = chunk.buffers()
        width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
        offs = np.frombuffer(offs_buf, width)[chunk.offset : chunk.offset + len(chunk) + 1]
        values = (
            np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
        )
        for i in range(len(chunk)):
            out.append(
                None if valid is not None and not valid[i] else values[offs[i] : offs[i + 1]].copy()
            )
    return out


def count(data: Any) -> int:
    """The rows the file's footer says it holds (the footer alone is parsed): what a file
    whose row groups cannot be decoded counts as failed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(pa.BufferReader(pa.py_buffer(data))).metadata.num_rows)
