"""Data verification: a 32-byte header stamped into every data block, checked on read.

Layout (little-endian), at the start of each written block::

    0   8  magic     b"IOBVRFY1"
    8   8  file_id   the file's index in the phase (the same in the write and the read phase)
    16  8  offset    the block's byte offset in its file
    24  4  length    the block's length in bytes, header included
    28  4  crc32     zlib.crc32 of bytes 0..28 of the header, then of the payload (bytes 32..)

The CRC covers the header's own fields, so a block that carries another block's header (a
misplaced write) or a flipped bit anywhere is caught; the fields say which: wrong file id or
offset is a *header* mismatch (the block landed in the wrong place), a wrong CRC with the right
fields is a *payload* mismatch (the bytes changed). The CRC is zlib's C implementation
(hardware-assisted where the platform has it), far faster than the I/O it checks.

Blocks shorter than the header cannot carry one: ``stamp`` leaves them alone and ``check``
accepts them (``MIN_BLOCK`` is the smallest verified block).
"""

from __future__ import annotations

import struct
import zlib

from ..core.errors import VerifyError

MAGIC = b"IOBVRFY1"
HEADER = struct.Struct("<8sQQII")
HEADER_SIZE = HEADER.size  # 32
MIN_BLOCK = HEADER_SIZE
_CRC_AT = 28  # the CRC covers the header up to here, then the payload

assert HEADER_SIZE == 32


def _crc(buf: memoryview, head: bytes) -> int:
    return zlib.crc32(buf[HEADER_SIZE:], zlib.crc32(head[:_CRC_AT])) & 0xFFFFFFFF


def stamp(buf: memoryview, file_id: int, offset: int) -> bool:
    """Write the header into the first 32 bytes of ``buf`` (one whole block, about to be
    written at ``offset`` of file ``file_id``). Returns False for a block too short to carry
    one (left unchanged)."""
    n = len(buf)
    if n < MIN_BLOCK:
        return False
    head = HEADER.pack(MAGIC, file_id, offset, n, 0)
    crc = _crc(buf, head)
    HEADER.pack_into(buf, 0, MAGIC, file_id, offset, n, crc)
    return True


def stamp_blocks(buf: memoryview, file_id: int, offset: int, block_size: int) -> int:
    """Stamp every ``block_size`` block of ``buf`` (written at ``offset``); the last one may be
    shorter. Returns the number of blocks stamped."""
    done = 0
    for start in range(0, len(buf), block_size):
        done += stamp(buf[start : start + block_size], file_id, offset + start)
    return done


def _fail(path: str, offset: int, length: int, kind: str, detail: str) -> VerifyError:
    err = VerifyError(
        f"data verification failed: {path} at offset {offset} ({length} byte block): "
        f"{kind} mismatch: {detail}",
        hint="the storage returned different data than was written",
        path=path,
        offset=offset,
        kind=kind,
    )
    return err


def check(buf: memoryview, path: str, offset: int, file_id: int | None = None) -> None:
    """Check one block read back from ``offset`` of ``path``; VerifyError (exit 4) naming the
    file, the block's byte offset and whether the header or the payload differs.

    ``file_id`` None skips the file check (a reader that does not know the writer's ids).
    """
    n = len(buf)
    if n < MIN_BLOCK:
        return
    magic, fid, off, length, crc = HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        what = (
            "all zero (a block never written, or lost)"
            if not any(buf)
            else (f"no iobench header (magic {bytes(magic)!r})")
        )
        raise _fail(path, offset, n, "header", what)
    if (file_id is not None and fid != file_id) or off != offset or length != n:
        expected = f"file {file_id}, " if file_id is not None else ""
        raise _fail(
            path, offset, n, "header",
            f"expected {expected}offset {offset}, length {n}; the block says file {fid}, "
            f"offset {off}, length {length} (a misplaced or stale write)",
        )  # fmt: skip
    got = _crc(buf, bytes(buf[:HEADER_SIZE]))
    if got != crc:
        raise _fail(
            path, offset, n, "payload",
            f"crc32 {got:#010x} read, {crc:#010x} written (the block's bytes changed)",
        )  # fmt: skip


def check_blocks(
    buf: memoryview, path: str, offset: int, block_size: int, file_id: int | None = None
) -> int:
    """Check every ``block_size`` block of ``buf`` (read from ``offset``, a block boundary);
    returns the number checked."""
    done = 0
    for start in range(0, len(buf), block_size):
        block = buf[start : start + block_size]
        check(block, path, offset + start, file_id)
        done += len(block) >= MIN_BLOCK
    return done
