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
    import pyarrow as pa

    from .parquet import binary_values

    if not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
        return col.to_numpy(zero_copy_only=False)
    return [None if v is None else v.copy() for c in col.chunks for v in binary_values(c)]


def count(data: Any) -> int:
    """The rows the file's footer says it holds (the footer alone is parsed): what a file
    whose row groups cannot be decoded counts as failed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(pa.BufferReader(pa.py_buffer(data))).metadata.num_rows)
