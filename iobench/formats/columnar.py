"""``parquet`` (existing dataset): each row group read and converted to numpy columns, one
sample per row, as a training job's columnar reader does (binary columns stay bytes: images
embedded in a parquet file are not decoded, the row is the sample)."""

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

    pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(bytes(data))))
    row = 0
    for rg in range(pf.num_row_groups):
        table = pf.read_row_group(rg)
        cols = {n: table.column(n).to_numpy(zero_copy_only=False) for n in table.column_names}
        for i in range(table.num_rows):
            yield f"{name}#{row}", {n: c[i] for n, c in cols.items()}
            row += 1


def count(data: Any) -> int:
    """The rows the file's footer says it holds (the footer alone is parsed): what a file
    whose row groups cannot be decoded counts as failed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(pa.BufferReader(pa.py_buffer(bytes(data)))).metadata.num_rows)
