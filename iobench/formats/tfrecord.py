"""``tfrecord``: TFRecord files read without TensorFlow. Each record is framed as
``uint64 length, uint32 masked crc32c(length), data, uint32 masked crc32c(data)``
(little-endian); both CRCs are checked. A record that parses as a ``tf.train.Example`` is
decoded into {feature: list of values} (a minimal protobuf reader: bytes, float and int64
lists); any other record is the sample as bytes. A CRC mismatch fails that record; a broken
length field fails the rest of the file (the framing is lost).

The CRC is computed here in Python (slicing-by-8, ~10 MiB/s), far slower than TensorFlow's C++
check: ``CHECK_S`` accumulates the seconds spent on it in this process, so that a loader can
leave it out of the decode time a training job would pay, and report it apart.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

NAME = "tfrecord"
EXTENSIONS = ("tfrecord", "tfrecords", "tfr")
LIBRARY = None
_POLY = 0x82F63B78  # CRC-32C (Castagnoli), reflected
_MASK_DELTA = 0xA282EAD8
#: Seconds this process spent checking CRCs (iobench's own cost, not a training job's).
CHECK_S = [0.0]


def _tables() -> list[list[int]]:
    t0 = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (_POLY if c & 1 else 0)
        t0.append(c)
    tables = [t0]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ t0[prev[i] & 0xFF] for i in range(256)])
    return tables


_T = _tables()


def crc32c(data: Any) -> int:
    """CRC-32C of ``data`` (slicing-by-8)."""
    t0, t1, t2, t3, t4, t5, t6, t7 = _T
    crc = 0xFFFFFFFF
    mv = memoryview(data).cast("B")
    n8 = len(mv) // 8
    if n8:
        words = np.frombuffer(mv[: n8 * 8], dtype="<u8").tolist()
        for w in words:
            lo = (w & 0xFFFFFFFF) ^ crc
            hi = w >> 32
            crc = (
                t7[lo & 0xFF] ^ t6[(lo >> 8) & 0xFF] ^ t5[(lo >> 16) & 0xFF] ^ t4[lo >> 24]
                ^ t3[hi & 0xFF] ^ t2[(hi >> 8) & 0xFF] ^ t1[(hi >> 16) & 0xFF] ^ t0[hi >> 24]
            )  # fmt: skip
    for b in mv[n8 * 8 :]:
        crc = t0[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(data: Any) -> int:
    """TFRecord's masked CRC-32C (its time added to CHECK_S)."""
    t0 = time.perf_counter()
    crc = crc32c(data)
    CHECK_S[0] += time.perf_counter() - t0
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record: bytes) -> bytes:
    """One record framed as TFRecord writes it (for tests and tools)."""
    head = struct.pack("<Q", len(record))
    return (
        head + struct.pack("<I", masked_crc(head)) + record + struct.pack("<I", masked_crc(record))
    )


def records(data: Any) -> Iterator[tuple[int, Any]]:
    """(offset, the record's bytes, or a ValueError for a data CRC mismatch) per record."""
    mv = memoryview(data).cast("B")
    pos, end = 0, len(mv)
    while pos < end:
        if end - pos < 12:
            raise ValueError(f"truncated record header at byte {pos}")
        (length,) = struct.unpack_from("<Q", mv, pos)
        (lcrc,) = struct.unpack_from("<I", mv, pos + 8)
        if masked_crc(mv[pos : pos + 8]) != lcrc:
            raise ValueError(f"length CRC mismatch at byte {pos}: framing lost")
        start = pos + 12
        if start + length + 4 > end:
            raise ValueError(f"record at byte {pos} runs past the end ({length} bytes)")
        body = mv[start : start + length]
        (dcrc,) = struct.unpack_from("<I", mv, start + length)
        if masked_crc(body) != dcrc:
            yield pos, ValueError(f"data CRC mismatch in the record at byte {pos}")
        else:
            yield pos, bytes(body)
        pos = start + length + 4


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of one protobuf message (varint and length only)."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        num, wire = tag >> 3, tag & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("field runs past the message")
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        else:
            raise ValueError(f"wire type {wire} not supported")
        yield num, wire, value


def _feature(buf: bytes) -> Any:
    for kind, _, lst in _fields(buf):
        values = [v for num, _, v in _fields(lst) if num == 1]
        if kind == 1:  # bytes_list
            return [bytes(v) for v in values]
        if kind == 2:  # float_list, packed
            return np.frombuffer(b"".join(values), dtype="<f4").copy()
        if kind == 3:  # int64_list, packed varints
            out: list[int] = []
            for v in values:
                p = 0
                while p < len(v):
                    x, p = _varint(v, p)
                    out.append(x - (1 << 64) if x >= 1 << 63 else x)
            return np.asarray(out, dtype=np.int64)
    return []


def parse_example(record: bytes) -> dict[str, Any] | None:
    """A ``tf.train.Example`` as {feature: values}, or None when the record is not one."""
    try:
        out: dict[str, Any] = {}
        for num, wire, features in _fields(record):
            if num != 1 or wire != 2:
                return None
            for fnum, fwire, entry in _fields(features):
                if fnum != 1 or fwire != 2:
                    return None
                kv = {n: v for n, _, v in _fields(entry)}
                out[bytes(kv[1]).decode("utf-8")] = _feature(kv.get(2, b""))
        return out or None
    except (ValueError, KeyError, IndexError, UnicodeDecodeError):
        return None


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """(``name#offset``, the Example's features or the record's bytes) per record; a record
    whose data CRC fails comes back as an exception instance (the caller counts it)."""
    for pos, rec in records(data):
        if isinstance(rec, Exception):
            yield f"{name}#{pos}", rec
            continue
        ex = parse_example(rec)
        yield f"{name}#{pos}", ex if ex is not None else np.frombuffer(bytearray(rec), np.uint8)
