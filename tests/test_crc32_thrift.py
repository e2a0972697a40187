"""The pure pieces under the hand-written formats: CRC-32 combined from pieces is zlib's over
the whole, a slice's CRC from prefix CRCs is zlib's over the slice, and the Thrift compact
encoding is byte for byte the protocol's."""

from __future__ import annotations

import random
import zlib

import numpy as np
import pytest

from iobench import formats
from iobench.formats import crc32, thrift


def test_combine_is_zlib_over_the_concatenation():
    rng = random.Random(1)
    for _ in range(200):
        a = rng.randbytes(rng.randrange(0, 3000))
        b = rng.randbytes(rng.randrange(0, 3000))
        assert crc32.combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(a + b)
    assert crc32.combine(0x12345678, 0, 0) == 0x12345678  # nothing after: unchanged


def test_multiply_has_one_and_commutes():
    one = 1 << 31
    for v in (0, 1, 0xDEADBEEF, 0xFFFFFFFF, one):
        assert crc32.multiply(one, v) == v == crc32.multiply(v, one)
    assert crc32.multiply(0xDEADBEEF, 0x1234567) == crc32.multiply(0x1234567, 0xDEADBEEF)


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_prefix_crc_slices_are_zlibs(step):
    data = np.frombuffer(np.random.default_rng(step).bytes(100_003), dtype=np.uint8)
    p = crc32.PrefixCRC(data, step)
    rng = random.Random(step)
    cases = [(0, 0), (0, len(data)), (len(data), len(data)), (5, 5 + 2 * step + 1)]
    cases += [
        sorted((rng.randrange(len(data) + 1), rng.randrange(len(data) + 1))) for _ in range(200)
    ]
    for start, end in cases:
        assert p.slice(start, end) == zlib.crc32(data[start:end]), (start, end)
        # continuing the CRC of what precedes the slice, as zlib.crc32(data, start) does
        assert p.slice(start, end, 0x1234ABCD) == zlib.crc32(data[start:end], 0x1234ABCD)
    with pytest.raises(ValueError):
        p.slice(10, 5)
    with pytest.raises(ValueError):
        p.slice(0, len(data) + 1)


def test_sample_crc_is_the_crc_of_the_sample():
    src = formats.SampleSource(70 << 20, seed=5)  # a pool over 64 MiB: a step over 4 KiB
    assert src._prefix.step > 4096
    sizes = [0, 1, 16, 17, 4096, 4111, 4112, 16 << 10, 65_536, 65_537, 70 << 20, 65_536]
    starts = [j * 0x01010101 for j in range(len(sizes))]
    want = [
        zlib.crc32(src.sample(7, j, n), s)
        for j, (n, s) in enumerate(zip(sizes, starts, strict=True))
    ]
    assert src.crcs(7, sizes, starts) == want


def test_thrift_compact_bytes():
    # field 1 i32 5 (zigzag 10), field 2 i64 -1 (zigzag 1), field 4 (delta 2) binary "ab"
    s = thrift.struct((1, 5), (2, thrift.i64(-1)), (4, "ab"), (5, None))
    assert s == bytes([0x15, 0x0A, 0x16, 0x01, 0x28, 0x02]) + b"ab" + b"\x00"
    # a field id 20 after 0: the long form (type byte, then the id as zigzag varint)
    assert thrift.struct((20, 0)) == bytes([0x05, 0x28, 0x00, 0x00])
    # a short list (size << 4 | i32) and a long one (0xF0 | type, then the size)
    assert thrift.struct((1, [1, 2])) == bytes([0x19, 0x25, 0x02, 0x04, 0x00])
    long = thrift.struct((1, list(range(15))))
    assert long[:3] == bytes([0x19, 0xF5, 0x0F]) and len(long) == 3 + 15 + 1
    assert thrift.struct((1, thrift.struct())) == bytes([0x1C, 0x00, 0x00])
    assert thrift.varint(300) == bytes([0xAC, 0x02]) and thrift.zigzag(-3) == bytes([5])
    with pytest.raises(ValueError):
        thrift.struct((2, 1), (1, 1))  # out of order
    with pytest.raises(ValueError):
        thrift.struct((1, 2**31))  # not an i32
    with pytest.raises(TypeError):
        thrift.struct((1, [1, "a"]))
