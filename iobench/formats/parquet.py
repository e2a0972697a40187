"""``parquet``: columns ``key`` (string) and ``data`` (binary), one row per sample, row groups of
about ``ROW_GROUP_BYTES``, data pages of about ``DATA_PAGE_BYTES``, no compression (the bytes
are random anyway).

Written by hand (the dataset writer generates every sample straight into its place in the
file, ``frame``): both columns required, PLAIN-encoded data pages (v1) of whole values, no
dictionary, no statistics, and the footer in Thrift's compact protocol, which pyarrow, and any
Parquet reader, reads as it reads its own files. Arrow's writer copies every value into its
pages, which costs more CPU than the write (0.45 s per GiB here); it still writes a file
whose one sample would not fit a page (over 2 GiB, ``large_binary``)."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import thrift

EXTENSION = "parquet"
OVERHEAD_PER_FILE = 64 << 10
OVERHEAD_PER_SAMPLE = 256
#: Target bytes per parquet row group (whole samples; at least one sample per group).
ROW_GROUP_BYTES = 64 << 20
#: A data page is closed once its values reach this many bytes (whole values; at least one).
DATA_PAGE_BYTES = 8 << 20

_MAGIC = b"PAR1"
_LEN = struct.Struct("<I")  # a PLAIN BYTE_ARRAY value's length, and the footer's
_MAX_PAGE = 2**31 - 1  # page sizes are Thrift i32
_BYTE_ARRAY, _REQUIRED, _UTF8, _PLAIN, _RLE, _DATA_PAGE, _UNCOMPRESSED = 6, 0, 0, 0, 3, 0, 0
CREATED_BY = "iobench"


def row_group_rows(sample_sizes: Sequence[int]) -> int:
    """Rows per parquet row group: about ROW_GROUP_BYTES of samples, at least one."""
    mean = max(1.0, float(np.mean(sample_sizes))) if len(sample_sizes) else 1.0
    return max(1, min(len(sample_sizes) or 1, int(ROW_GROUP_BYTES // mean)))


def _page_header(body: int, values: int) -> bytes:
    data_page = thrift.struct((1, values), (2, _PLAIN), (3, _RLE), (4, _RLE))
    return thrift.struct((1, _DATA_PAGE), (2, body), (3, body), (5, data_page))


def _column_chunk(name: str, start: int, size: int, values: int) -> thrift.Struct:
    meta = thrift.struct(
        (1, _BYTE_ARRAY),
        (2, [_PLAIN]),
        (3, [name]),
        (4, _UNCOMPRESSED),
        (5, thrift.i64(values)),
        (6, thrift.i64(size)),
        (7, thrift.i64(size)),
        (9, thrift.i64(start)),
    )
    return thrift.struct((2, thrift.i64(start)), (3, meta))


def _footer(rows: int, groups: list[tuple[int, int, int, list[thrift.Struct]]]) -> bytes:
    """FileMetaData: the schema (required string ``key``, required binary ``data``) and the
    row groups, each (first byte, bytes, rows, column chunks)."""
    string = thrift.struct((1, thrift.struct()))  # LogicalType{STRING: StringType{}}
    schema = [
        thrift.struct((4, "schema"), (5, 2)),
        thrift.struct((1, _BYTE_ARRAY), (3, _REQUIRED), (4, "key"), (6, _UTF8), (10, string)),
        thrift.struct((1, _BYTE_ARRAY), (3, _REQUIRED), (4, "data")),
    ]
    row_groups = [
        thrift.struct(
            (1, chunks),
            (2, thrift.i64(size)),
            (3, thrift.i64(n)),
            (5, thrift.i64(start)),
            (6, thrift.i64(size)),
        )
        for start, size, n, chunks in groups
    ]
    meta = thrift.struct(
        (1, 1), (2, schema), (3, thrift.i64(rows)), (4, row_groups), (6, CREATED_BY)
    )
    return meta + _LEN.pack(len(meta)) + _MAGIC


def frame(
    sizes: Sequence[int], keys: Sequence[str]
) -> tuple[int, list[int], Callable[[Any], None]] | None:
    """The file laid out ahead (see tar.frame): (its size, where each sample's bytes go, a
    function that writes the page headers, value lengths and footer around samples already
    in place). None when a sample is too large for a page (``write`` then uses arrow)."""
    if any(n + _LEN.size > _MAX_PAGE - DATA_PAGE_BYTES for n in sizes):
        return None
    per_group = row_group_rows(sizes)
    pieces: list[tuple[int, bytes]] = [(0, _MAGIC)]  # (where, bytes) beside the samples
    offsets: list[int] = []
    groups = []
    pos = len(_MAGIC)
    for first in range(0, len(sizes), per_group):
        rows = range(first, min(first + per_group, len(sizes)))
        start = pos
        key_body = b"".join(_LEN.pack(len(k)) + k for k in (keys[j].encode() for j in rows))
        head = _page_header(len(key_body), len(rows))
        pieces.append((pos, head + key_body))
        pos += len(head) + len(key_body)
        chunks = [_column_chunk("key", start, pos - start, len(rows))]
        data_start = pos
        for page in _pages([sizes[j] for j in rows], first):
            body = sum(sizes[j] for j in page) + _LEN.size * len(page)
            head = _page_header(body, len(page))
            pieces.append((pos, head))
            pos += len(head)
            for j in page:
                pieces.append((pos, _LEN.pack(sizes[j])))
                offsets.append(pos + _LEN.size)
                pos += _LEN.size + sizes[j]
        chunks.append(_column_chunk("data", data_start, pos - data_start, len(rows)))
        groups.append((start, pos - start, len(rows), chunks))
    tail = _footer(len(sizes), groups)
    pieces.append((pos, tail))
    total = pos + len(tail)

    def finish(image: Any) -> None:
        for at, raw in pieces:
            image[at : at + len(raw)] = np.frombuffer(raw, dtype=np.uint8)

    return total, offsets, finish


def _pages(sizes: Sequence[int], first: int) -> list[range]:
    """A row group's data pages: runs of rows (numbered from ``first``) closed once their
    values reach DATA_PAGE_BYTES."""
    pages, start, filled = [], 0, 0
    for i, n in enumerate(sizes):
        filled += n + _LEN.size
        if filled >= DATA_PAGE_BYTES:
            pages.append(range(first + start, first + i + 1))
            start, filled = i + 1, 0
    if start < len(sizes):
        pages.append(range(first + start, first + len(sizes)))
    return pages


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    sizes = [len(s) for s in samples]
    laid = frame(sizes, keys)
    if laid is None:
        _write_with_arrow(f, samples, keys)
        return
    total, offsets, finish = laid
    image = np.empty(total, dtype=np.uint8)
    for at, s in zip(offsets, samples, strict=True):
        image[at : at + len(s)] = s
    finish(image)
    f.write(image.data)


def _write_with_arrow(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    """The same columns through pyarrow (``large_binary`` values, one page per value)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    lengths = np.array([len(s) for s in samples], dtype=np.int64)
    offsets = np.zeros(len(samples) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    values = pa.py_buffer(np.concatenate(samples) if samples else np.zeros(0, np.uint8))
    data = pa.Array.from_buffers(
        pa.large_binary(), len(samples), [None, pa.py_buffer(offsets), values]
    )
    schema = pa.schema(
        [pa.field("key", pa.string(), nullable=False), pa.field("data", data.type, False)]
    )
    table = pa.table({"key": pa.array(list(keys), pa.string()), "data": data}, schema=schema)
    out = pa.BufferOutputStream()
    pq.write_table(
        table,
        out,
        row_group_size=row_group_rows(lengths.tolist()),
        compression="NONE",
        use_dictionary=False,
        write_statistics=False,
        data_page_size=DATA_PAGE_BYTES,
    )
    f.write(memoryview(out.getvalue()))


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # nothing decoded may point into a reused read buffer (arrow can hand out slices of its
    # input): a numpy array is the caller's to give away (formats.reader.decode), else a copy
    owned = data if isinstance(data, np.ndarray) else bytes(data)
    pf = pq.ParquetFile(pa.BufferReader(pa.py_buffer(owned)))
    out: list[np.ndarray] = []
    for rg in range(pf.num_row_groups):
        col = pf.read_row_group(rg, columns=["data"]).column(0)
        for chunk in col.chunks:  # iobench's own files: no nulls
            out.extend(v if v is not None else np.zeros(0, np.uint8) for v in binary_values(chunk))
    return out


def binary_values(chunk: Any) -> list[np.ndarray | None]:
    """The values of a pyarrow (large_)binary array as numpy views of its data buffer (None
    for a null: iobench's own files hold none; an existing dataset's may)."""
    import pyarrow as pa

    _, offs_buf, data_buf = chunk.buffers()
    width = np.int64 if pa.types.is_large_binary(chunk.type) else np.int32
    offs = np.frombuffer(offs_buf, dtype=width)[chunk.offset : chunk.offset + len(chunk) + 1]
    values = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0)
    views: list[np.ndarray | None] = [values[offs[i] : offs[i + 1]] for i in range(len(chunk))]
    if chunk.null_count:
        valid = chunk.is_valid().to_numpy(zero_copy_only=False)
        views = [v if ok else None for v, ok in zip(views, valid, strict=True)]
    return views
