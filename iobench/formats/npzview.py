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

``read_stored`` reads such an archive from an open file in one pass instead: each array
allocated from its headers and read straight into itself, its CRC-32 taken part by part as
the parts arrive, the central directory checked last (the loaders' buffered reads of an
``.npz``; the array is then the one copy of the bytes, the kernel's).
"""

from __future__ import annotations

import io
import math
import os
import struct
import time
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


Entry = tuple[str, bytes, int, int, int]  # name, its raw bytes, CRC-32, size, local's offset


def _directory(buf: memoryview, base: int) -> tuple[list[Entry], int] | None:
    """(the central directory's entries in its order: name, its raw bytes, CRC-32, size, its
    local header's offset; where the directory starts), ``buf`` holding the archive's bytes
    from offset ``base`` to its end (the directory, the end record, any comment); None for
    what is not read in place: a split archive, zip64, a directory not where the end record
    says or with a gap after it, an encrypted or compressed member, a name twice."""
    found = _end_record(buf)
    if found is None:
        return None
    end_at, (_, disk, dir_disk, _, count, dir_size, dir_at, _) = found
    if disk or dir_disk or count == 0xFFFF or _ZIP64 in (dir_size, dir_at):
        return None  # a split archive, or zip64 (its own records): zipfile reads it
    pos = dir_at - base
    if pos < 0 or pos + dir_size != end_at:
        return None  # data before the archive, or a gap: zipfile's offsets apply
    out: list[Entry] = []
    names: set[str] = set()
    for _ in range(count):
        if pos + CENTRAL.size > end_at:
            return None
        entry = CENTRAL.unpack_from(buf, pos)
        flags, method, crc, packed, size = entry[5], entry[6], entry[9], entry[10], entry[11]
        name_len, extra_len, comment_len, offset = entry[12], entry[13], entry[14], entry[18]
        if entry[0] != CENTRAL_SIG or flags & _ENCRYPTED or method != 0 or packed != size:
            return None
        if _ZIP64 in (size, offset) or offset + LOCAL.size > dir_at:
            return None
        raw = bytes(buf[pos + CENTRAL.size : pos + CENTRAL.size + name_len])
        name = raw.decode("utf-8" if flags & _UTF8 else "cp437")
        pos += CENTRAL.size + name_len + extra_len + comment_len
        if name in names:
            return None
        names.add(name)
        out.append((name, raw, crc, size, offset))
    if pos != end_at:
        return None
    return out, dir_at


def members(data: Any) -> list[tuple[str, memoryview, int]] | None:
    """(name, its bytes as a slice of ``data``, its recorded CRC-32) of every member of the
    zip archive ``data`` (a bytes-like, the whole archive), in the directory's order; None
    when the archive is not one of stored members read in place (see the module)."""
    buf = memoryview(data).cast("B")
    found = _directory(buf, 0)
    if found is None:
        return None
    entries, dir_at = found
    out: list[tuple[str, memoryview, int]] = []
    for name, raw, crc, size, offset in entries:
        local = LOCAL.unpack_from(buf, offset)
        start = offset + LOCAL.size + local[10] + local[11]
        local_name = bytes(buf[offset + LOCAL.size : offset + LOCAL.size + local[10]])
        if local[0] != LOCAL_SIG or local_name != raw or start + size > dir_at:
            return None
        out.append((name, buf[start : start + size], crc))
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


def _header_len(first: bytes) -> int | None:
    """The length of the .npy header that ``first`` (a file's first 12 bytes or more) opens,
    its magic and length field included; None for what is not a version 1 or 2 .npy."""
    if len(first) < 10 or not first.startswith(_MAGIC) or first[6] not in (1, 2):
        return None
    start = 10 if first[6] == 1 else 12
    return start + int.from_bytes(first[8:start], "little")


def npy_view(data: np.ndarray) -> np.ndarray | None:
    """The .npy array held in ``data`` (a uint8 array) as a view of it, or None."""
    hlen = _header_len(bytes(data[:12]))
    if hlen is None or hlen > len(data):
        return None
    got = _header(bytes(data[:hlen]))
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
        out.append((name, arr.copy(order="K")))
    return _keyed(out)


def _keyed(named: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]] | None:
    """(member name, array) pairs as np.load's (key, array): keys without ``.npy``; None
    where two names give one key ("a" and "a.npy": np.load's lookup decides which)."""
    out = [(name.removesuffix(".npy"), arr) for name, arr in named]
    return out if len({k for k, _ in out}) == len(out) else None


#: Bytes ``read_stored`` reads into an array at a time, each part's CRC-32 taken while it
#: is in cache (zipfile reads a member in parts of this size, numpy's ``BUFFER_SIZE``).
PART = 1 << 18
#: Bytes read ahead of a member's data for its local header, name and .npy header.
_HEAD = 4096
#: The longest .npy header read in one pass (numpy's ``max_header_size`` is 10,000 bytes).
_HEADER_MAX = 1 << 16
_DESCRIPTOR = 0x8  # sizes and CRC after the data: the local header's are not known
_ZIP64_EXTRA = 1


def _local_size(local: tuple[Any, ...], extra: bytes) -> int | None:
    """A stored member's size from its local header, or from its zip64 extra field where the
    header says 0xFFFFFFFF (``np.savez`` writes every member so: zipfile's ``force_zip64``)."""
    packed, size = local[8], local[9]
    if packed != _ZIP64 or size != _ZIP64:
        return size if packed == size else None
    pos = 0
    while pos + 4 <= len(extra):
        tag, n = struct.unpack_from("<2H", extra, pos)
        if tag == _ZIP64_EXTRA and n >= 16:
            size, packed = struct.unpack_from("<2Q", extra, pos + 4)
            return int(size) if packed == size else None
        pos += 4 + n
    return None


def _member(
    fd: int, head: bytes, pos: int, size: int
) -> tuple[str, bytes, int, int, np.ndarray, int, int] | None:
    """The stored member whose local header starts ``head`` (the file's bytes from ``pos``):
    (name, raw name, recorded CRC-32, size, its array allocated, where the array's bytes
    start, the CRC-32 of the .npy header before them); None for one not read in place."""
    if len(head) < LOCAL.size:
        return None
    local = LOCAL.unpack_from(head)
    if local[3] & (_ENCRYPTED | _DESCRIPTOR) or local[4] != 0:
        return None
    name_at, name_len, extra_len = LOCAL.size, local[10], local[11]
    raw = head[name_at : name_at + name_len]
    n = _local_size(local, head[name_at + name_len : name_at + name_len + extra_len])
    start = pos + name_at + name_len + extra_len
    if n is None or len(raw) != name_len or start + n > size:
        return None
    npy = head[start - pos : start - pos + n]
    hlen = _header_len(npy)
    if hlen is None or hlen > min(n, _HEADER_MAX):
        return None  # past numpy's own limit on a header: np.load says what it makes of it
    if hlen > len(npy):  # a header beyond the first read (a long shape or dtype)
        npy = os.pread(fd, hlen, start)
    layout = _header(bytes(npy[:hlen]))
    if layout is None:
        return None
    dtype, shape, fortran, offset = layout
    if offset + math.prod(shape) * dtype.itemsize != n:
        return None
    arr = np.empty(shape, dtype, order="F" if fortran else "C")
    name = raw.decode("utf-8" if local[3] & _UTF8 else "cp437")
    return name, raw, local[7], n, arr, start + offset, zlib.crc32(npy[:offset])


def _fill(fd: int, arr: np.ndarray, at: int, crc: int) -> tuple[int, float] | None:
    """Read ``arr``'s bytes from offset ``at`` straight into it in ``PART`` parts, the CRC-32
    (from ``crc``) taken over each as it arrives: (the CRC-32, seconds spent taking it);
    None when the file ends first."""
    if not arr.nbytes:
        return crc, 0.0
    flat = arr.reshape(-1, order="A").view(np.uint8).data  # its memory in order, any dtype
    spent, done = 0.0, 0
    while done < arr.nbytes:
        part = flat[done : done + PART]
        k = os.preadv(fd, [part], at + done)
        if k <= 0:
            return None
        t0 = time.perf_counter()
        crc = zlib.crc32(part[:k], crc)
        spent += time.perf_counter() - t0
        done += k
    return crc, spent


def read_stored(
    fd: int, size: int, clock: list[float] | None = None
) -> list[tuple[str, np.ndarray]] | None:
    """``npz_arrays`` of the ``.npz`` open on ``fd`` (``size`` bytes), read from its start to
    its end in one pass: each member's array allocated from its .npy header and read straight
    into it in ``PART`` parts, each part's CRC-32 taken as it arrives (the array the one copy
    of its bytes, the kernel's), the central directory read last and checked against the
    local headers. ``clock``, given, has the seconds spent in the checks and headers added to
    ``clock[0]`` (the decode's share of the pass; the rest is the read's).

    None where the file is not read so (what ``npz_arrays`` refuses, a data descriptor, a
    member shorter than its header says, a CRC that disagrees): the caller reads the file
    whole and hands it to ``npz_arrays`` / ``np.load``, whose errors then stand."""
    spent = 0.0
    got: list[tuple[Entry, np.ndarray]] = []  # as the directory should list it, the array
    pos = 0
    while (head := os.pread(fd, _HEAD, pos))[:4] == LOCAL_SIG:
        t0 = time.perf_counter()
        member = _member(fd, head, pos, size)
        spent += time.perf_counter() - t0
        if member is None:
            return None
        name, raw, crc, n, arr, at, head_crc = member
        filled = _fill(fd, arr, at, head_crc)
        if filled is None or filled[0] != crc:
            return None  # short, or np.load's "Bad CRC-32" stands
        spent += filled[1]
        got.append(((name, raw, crc, n, pos), arr))
        pos = at + arr.nbytes  # the member's end (its header and array are its n bytes)
    tail = head if len(head) >= size - pos else os.pread(fd, size - pos, pos)
    t0 = time.perf_counter()
    found = _directory(memoryview(tail).cast("B"), pos) if got else None
    ok = found is not None and found[1] == pos and found[0] == [entry for entry, _ in got]
    if clock is not None:
        clock[0] += spent + time.perf_counter() - t0
    if not ok:
        return None
    return _keyed([(entry[0], arr) for entry, arr in got])
