"""iobench.result.verify: stamped block headers catch flipped bytes, misplaced and lost writes."""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.core.errors import ExitStatus, VerifyError
from iobench.result import verify

BS = 1 << 16


def block(n: int = BS, fid: int = 3, off: int = 5 * BS) -> memoryview:
    buf = memoryview(bytearray(os.urandom(n)))
    assert verify.stamp(buf, fid, off)
    return buf


def test_header_layout_is_32_bytes_and_documented():
    buf = block(fid=7, off=1 << 40)
    magic, fid, off, length, crc = verify.HEADER.unpack_from(buf, 0)
    assert verify.HEADER_SIZE == 32
    assert (magic, fid, off, length) == (b"IOBVRFY1", 7, 1 << 40, BS)
    assert crc == zlib.crc32(bytes(buf[32:]), zlib.crc32(bytes(buf[:28])))


def test_a_good_block_passes():
    verify.check(block(), "/d/f", 5 * BS, 3)
    verify.check(block(), "/d/f", 5 * BS)  # without a file id


@pytest.mark.parametrize("where", [40, BS // 2, BS - 1])
def test_a_single_flipped_payload_byte_is_caught_with_file_and_offset(where):
    buf = block()
    buf[where] ^= 0x01
    with pytest.raises(VerifyError) as ei:
        verify.check(buf, "/data/.iobench-x/seq/r0-w1.dat", 5 * BS, 3)
    e = ei.value
    assert e.exit_status == ExitStatus.RUN_FAILED
    assert (e.path, e.offset, e.kind) == ("/data/.iobench-x/seq/r0-w1.dat", 5 * BS, "payload")
    line = e.one_line()
    assert "/data/.iobench-x/seq/r0-w1.dat at offset 327680" in line
    assert "payload mismatch" in line and "\n" not in line


@pytest.mark.parametrize("where", range(32))
def test_any_flipped_header_byte_is_caught(where):
    buf = block()
    buf[where] ^= 0x80
    with pytest.raises(VerifyError) as ei:
        verify.check(buf, "f", 5 * BS, 3)
    # magic, file id, offset or length bytes: the header; the CRC bytes: the payload check
    assert ei.value.kind == ("payload" if where >= 28 else "header")


def test_a_block_from_another_file_is_a_misplaced_write():
    buf = block(fid=2, off=5 * BS)
    with pytest.raises(VerifyError, match="header mismatch.*file 2, offset 327680") as ei:
        verify.check(buf, "/d/w3.dat", 5 * BS, 3)
    assert ei.value.kind == "header"


def test_a_block_from_another_offset_is_a_misplaced_write():
    buf = block(fid=3, off=4 * BS)
    with pytest.raises(VerifyError, match="expected file 3, offset 327680.*offset 262144"):
        verify.check(buf, "/d/w3.dat", 5 * BS, 3)
    with pytest.raises(VerifyError, match="misplaced"):  # caught without the file id too
        verify.check(buf, "/d/w3.dat", 5 * BS)


def test_a_lost_write_reads_back_as_zeros():
    with pytest.raises(VerifyError, match="all zero"):
        verify.check(memoryview(bytearray(BS)), "/d/f", 0, 0)
    with pytest.raises(VerifyError, match="no iobench header"):
        verify.check(memoryview(bytearray(os.urandom(BS))), "/d/f", 0, 0)


def test_a_short_read_is_caught_by_the_length():
    buf = block()
    with pytest.raises(VerifyError, match="length"):
        verify.check(buf[: BS // 2], "/d/f", 5 * BS, 3)


def test_blocks_shorter_than_the_header_are_left_alone():
    buf = memoryview(bytearray(b"x" * 31))
    assert verify.stamp(buf, 0, 0) is False and bytes(buf) == b"x" * 31
    verify.check(buf, "f", 0, 0)


def test_stamp_and_check_many_blocks_with_a_short_tail():
    buf = memoryview(bytearray(os.urandom(3 * 4096 + 100)))
    assert verify.stamp_blocks(buf, 1, 8192, 4096) == 4
    assert verify.check_blocks(buf, "f", 8192, 4096, 1) == 4
    buf[2 * 4096 + 50] ^= 0xFF
    with pytest.raises(VerifyError) as ei:
        verify.check_blocks(buf, "f", 8192, 4096, 1)
    assert ei.value.offset == 8192 + 2 * 4096


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(32, 8192),
    fid=st.integers(0, 2**64 - 1),
    off=st.integers(0, 2**63),
    flip=st.integers(0, 8191),
    bit=st.integers(0, 7),
)
def test_every_single_bit_flip_is_caught(n, fid, off, flip, bit):
    buf = memoryview(bytearray(os.urandom(n)))
    verify.stamp(buf, fid, off)
    verify.check(buf, "f", off, fid)
    buf[flip % n] ^= 1 << bit
    with pytest.raises(VerifyError):
        verify.check(buf, "f", off, fid)
