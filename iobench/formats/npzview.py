"""Numpy's files read in place: an ``.npy`` held in memory viewed as its array
(``npy_view``), and an ``.npz`` as ``np.savez`` writes it (stored members, no zip64) read
without zipfile's copies (``npz_arrays``); the zip records (zipfile's own struct formats),
which the ``npz`` writer shares.

``members`` walks the central directory of an archive held whole in memory and gives each
stored member's bytes as a slice of it, with the CRC-32 its directory entry records, where
``zipfile`` would copy each member out in chunks (``np.load`` of an ``.npz`` reads every
array through ``ZipExtFile``: a copy into chunks, a copy into the array). Anything it does
not read in place (a compressed or encrypted member, zip64, data before the archive, names
that disagree or repeat, a record out of bounds) gives None: the caller hands the archive to
``np.load``, whose reading and errors stand.
"""

from __future__ import annotations

import io
import math
import struct
import zlib
from typing import Any

import numpy as np

LOCAL = struct.Struct("<4s2B4HL2L2H")  # zipfile's structFileHeader
CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # structCentralDir
END = struct.Struct("<4s4H2LH")  # structEndArchive
LOCAL_SIG, CENTRAL_SIG, END_SIG = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
_COMMENT_MAX = 0xFFFF
_ZIP64 = 0xFFFFFFFF
_ENCRYPTED, _UTF8 = 0x1, 0x800
_MAGIC = b"\x93NUMPY"


def _end_record(buf: memoryview) -> tuple[int, tuple[Any, ...]] | None:
    """(where the end-of-central-directory record starts, its fields), as zipfile finds it:
    at the end, else the last one within a comment's length of it."""
    n = len(buf)
    if n < END.size:
        return None
    at = n - END.size
    if bytes(buf[at : at + 4]) != END_SIG:
        tail = bytes(buf[max(0, n - END.size - _COMMENT_MAX) :])
        found = tail.rfind(END_SIG)
        if found < 0:
            return None
        at = max(0, n - END.size - _COMMENT_MAX) + found
        if at + END.size > n:
            return None
    return at, END.unpack_from(buf, at)


def members(data: Any) -> list[tuple[str, memoryview, int]] | None:
    """(name, its bytes as a slice of ``data``, its recorded CRC-32) of every member of the
    zip archive ``data`` (a bytes-like, the whole archive), in the directory's order; None
    when the archive is not one of stored members read in place (see the module)."""
    buf = memoryview(data).cast("B")
    found = _end_record(buf)
    if found is None:
        return None
    end_at, (_, disk, dir_disk, _, count, dir_size, dir_at, _) = found
    if disk or dir_disk or count == 0xFFFF or _ZIP64 in (dir_size, dir_at):
        return None  # a split archive, or zip64 (its own records): zipfile reads it
    if dir_at + dir_size != end_at:
        return None  # data before the archive, or a gap: zipfile's offsets apply
    out: list[tuple[str, memoryview, int]] = []
    names: set[str] = set()
    pos = dir_at
    for _ in range(count):
        if pos + CENTRAL.size > end_at:
            return None
        entry = CENTRAL.unpack_from(buf, pos)
        flags, method, crc, packed, size = entry[5], entry[6], entry[9], entry[10], entry[11]
        name_len, extra_len, comment_len, offset = entry[12], entry[13], entry[14], entry[18]
        if entry[0] != CENTRAL_SIG or flags & _ENCRYPTED or method != 0 or packed != size:
            return None
        if _ZIP64 in (size, offset):
            return None
        raw = bytes(buf[pos + CENTRAL.size : pos + CENTRAL.size + name_len])
        name = raw.decode("utf-8" if flags & _UTF8 else "cp437")
        pos += CENTRAL.size + name_len + extra_len + comment_len
        if name in names or offset + LOCAL.size > dir_at:
            return None
        names.add(name)
        local = LOCAL.unpack_from(buf, offset)
        start = offset + LOCAL.size + local[10] + local[11]
        local_name = bytes(buf[offset + LOCAL.size : offset + LOCAL.size + local[10]])
        if local[0] != LOCAL_SIG or local_name != raw or start + size > dir_at:
            return None
        out.append((name, buf[start : start + size], crc))
    if pos != end_at:
        return None
    return out


def _header(head: bytes) -> tuple[np.dtype, tuple[int, ...], bool, int] | None:
    """(dtype, shape, fortran order, data offset) of an .npy header (``head``: its first
    bytes, through the header's end), None when it is not one numpy can view in place."""
    try:
        buf = io.BytesIO(head)
        version = np.lib.format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(buf)
        else:
            return None
    except (ValueError, SyntaxError, TypeError):
        return None
    if dtype.hasobject:
        return None  # an object array needs pickle: np.load refuses it
    return dtype, tuple(shape), bool(fortran), buf.tell()


def npy_view(data: np.ndarray) -> np.ndarray | None:
    """The .npy array held in ``data`` (a uint8 array) as a view of it, or None."""
    b = bytes(data[:12])
    if len(b) < 10 or not b.startswith(_MAGIC) or b[6] not in (1, 2):
        return None
    start = 10 if b[6] == 1 else 12
    n = int.from_bytes(b[8:start], "little")
    if start + n > len(data):
        return None
    got = _header(bytes(data[: start + n]))
    if got is None:
        return None
    dtype, shape, fortran, offset = got
    if offset + math.prod(shape) * dtype.itemsize != len(data):
        return None  # truncated or trailing bytes: np.load says which
    flat = data[offset:].view(dtype) if dtype.itemsize else np.empty(0, dtype)
    return flat.reshape(shape, order="F" if fortran else "C")


def npz_arrays(data: Any) -> list[tuple[str, np.ndarray]] | None:
    """(key, array) of every member of the ``.npz`` held whole in ``data`` (a bytes-like), as
    ``np.load`` gives them (keys without ``.npy``, in the archive's order; each array its own
    fresh copy, its member's CRC-32 checked first), read in place: None where ``np.load``
    must read it (``members``: not stored members in place; a member that is not
    an ``.npy`` numpy can view, or whose CRC-32 is wrong: np.load's error then stands)."""
    found = members(data)
    if not found:
        return None
    out = []
    for name, raw, crc in found:
        arr = npy_view(np.frombuffer(raw, np.uint8)) if raw.nbytes else None
        if arr is None or zlib.crc32(raw) != crc:
            return None
        out.append((name.removesuffix(".npy"), arr.copy(order="K")))
    if len({k for k, _ in out}) != len(out):
        return None  # "a" and "a.npy": np.load's lookup decides which
    return out
