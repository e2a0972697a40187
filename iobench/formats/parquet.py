"""``parquet``: columns ``key`` (string) and ``data`` (binary), one row per sample, row groups of
about ``ROW_GROUP_BYTES`` (pyarrow, no compression: the bytes are random anyway)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .raw import contiguous

EXTENSION = "parquet"
OVERHEAD_PER_FILE = 64 << 10
OVERHEAD_PER_SAMPLE = 256
#: Target bytes per parquet row group (whole samples; at least one sample per group).
ROW_GROUP_BYTES = 64 << 20
#: The smallest data page arrow is asked for (its default is 1 MiB).
DATA_PAGE_BYTES = 8 << 20


_FALLBACKS = [0]  # in-place encodings that overflowed their room (tests read it)


def row_group_rows(sample_sizes: Sequence[int]) -> int:
    """Rows per parquet row group: about ROW_GROUP_BYTES of samples, at least one."""
    mean = max(1.0, float(np.mean(sample_sizes))) if len(sample_sizes) else 1.0
    return max(1, min(len(sample_sizes) or 1, int(ROW_GROUP_BYTES // mean)))


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    lengths = np.array([len(s) for s in samples], dtype=np.int64)
    offsets = np.zeros(len(samples) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = offsets[-1] >= 2**31 - 1
    typ = pa.large_binary() if large else pa.binary()
    offs = offsets if large else offsets.astype(np.int32)
    whole = contiguous(samples)
    if whole is not None:
        values: Any = pa.py_buffer(whole)
    else:
        values = pa.py_buffer(np.concatenate(samples) if samples else np.zeros(0, np.uint8))
    data = pa.Array.from_buffers(typ, len(samples), [None, pa.py_buffer(offs), values])
    table = pa.table({"key": pa.array(list(keys), pa.string()), "data": data})
    opts = dict(
        row_group_size=row_group_rows(lengths.tolist()),
        compression="NONE",
        use_dictionary=False,
        write_statistics=False,
        # pages of at least DATA_PAGE_BYTES and twice the largest sample: arrow spends ten
        # times the CPU on values as large as its 1 MiB default page
        data_page_size=max(DATA_PAGE_BYTES, 2 * int(lengths.max(initial=0))),
    )
    # arrow writing through a Python file object makes a call per page and runs at a third
    # of the speed: it encodes into memory, in place when the file is the dataset writer's
    # image (``reserve``/``commit``), else into a buffer written once
    if hasattr(f, "reserve"):
        room = f.reserve(int(offsets[-1]) + OVERHEAD_PER_FILE + OVERHEAD_PER_SAMPLE * len(samples))
        sink = pa.FixedSizeBufferWriter(pa.py_buffer(room))
        try:
            pq.write_table(table, sink, **opts)
        except (OSError, pa.ArrowException):
            _FALLBACKS[0] += 1  # over the stated overhead: the buffered path below
        else:
            f.commit(sink.tell())
            return
    out = pa.BufferOutputStream()
    pq.write_table(table, out, **opts)
    f.write(memoryview(out.getvalue()))


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    # a copy, as BytesIO makes for npz and tar: nothing decoded may point into a reused
    # read buffer (arrow can hand out slices of its input)
    pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(bytes(data))))
    out = []
    for rg in range(pf.num_row_groups):
        col = pf.read_row_group(rg, columns=["data"]).column(0)
        for chunk in col.chunks:
            out.extend(_binary_values(chunk))
    return out


def _binary_values(chunk: Any) -> list[np.ndarray]:
    """The values of a pyarrow (large_)binary array as numpy views of its data buffer."""
    _, offs_buf, data_buf = chunk.buffers()
    width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
    offs = np.frombuffer(offs_buf, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
    values = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0)
    return [values[offs[i] : offs[i + 1]] for i in range(len(chunk))]
