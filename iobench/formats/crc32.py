"""CRC-32 (zlib's, as zip files carry it) of pieces put together, without reading them again.

A CRC-32 is linear over GF(2): the CRC of ``A + B`` is the CRC of ``A`` multiplied by
x^(8·len(B)) modulo the CRC polynomial, xor the CRC of ``B`` (what zlib's ``crc32_combine``
computes; the pre- and post-conditioning cancel out). So the CRC of any slice of a fixed
buffer follows from the CRCs of its prefixes: ``PrefixCRC`` keeps them every ``step`` bytes,
once, and a slice then costs two CRCs of less than ``step`` bytes and one multiplication.
The dataset writer uses it for npz members: its samples are slices of one random pool, so
their CRCs need not be computed over every byte again (they are exactly what zlib gives).

The CRC is also linear in the message: changing a few bytes of a message (the stamps on each
4 KiB page of a sample) changes its CRC by the CRC's linear part of the difference
(``linear_rows``: many short rows at once), moved to where the bytes sit (``multiply_many``:
one constant, many values, by table).
"""

from __future__ import annotations

import threading
import zlib
from functools import lru_cache
from typing import Any

import numpy as np

POLY = 0xEDB88320  # the CRC-32 polynomial, bit-reflected (bit 31 is x^0)
_ONE = 1 << 31  # the polynomial 1 in that representation


def multiply(a: int, b: int) -> int:
    """a·b modulo the CRC polynomial (both bit-reflected 32-bit polynomials)."""
    product = 0
    m = _ONE
    while a:
        if a & m:
            product ^= b
            a ^= m
        m >>= 1
        b = (b >> 1) ^ POLY if b & 1 else b >> 1
    return product


def _x_to_the_2_to_the() -> list[int]:
    """x^(2^k) modulo the polynomial, k = 0..63 (x^1, x^2, x^4, ...)."""
    table = [_ONE >> 1]
    for _ in range(63):
        table.append(multiply(table[-1], table[-1]))
    return table


_X2N = _x_to_the_2_to_the()


@lru_cache(maxsize=4096)
def x8n(n: int) -> int:
    """x^(8n) modulo the polynomial: the operator that moves a CRC past ``n`` zero bytes
    (cached: a dataset's samples come in a few sizes)."""
    if n < 0:
        raise ValueError("a length is not negative")
    p, k = _ONE, 3
    while n:
        if n & 1:
            p = multiply(_X2N[k & 63], p)
        n >>= 1
        k += 1
    return p


def combine(crc_a: int, crc_b: int, len_b: int) -> int:
    """The CRC-32 of ``A + B`` from the CRC-32s of ``A`` and ``B`` and ``B``'s length."""
    return multiply(x8n(len_b), crc_a) ^ crc_b


class PrefixCRC:
    """CRC-32 of any slice of one read-only buffer, from its prefixes' CRCs every ``step``
    bytes (computed on first use, one pass over the buffer)."""

    def __init__(self, data: Any, step: int = 4096):
        self.data = memoryview(data).cast("B")
        self.step = max(1, int(step))
        self._marks: list[int] | None = None
        self._lock = threading.Lock()

    def _prefixes(self) -> list[int]:
        with self._lock:
            if self._marks is None:
                marks, crc = [0], 0
                for at in range(0, len(self.data) - self.step + 1, self.step):
                    crc = zlib.crc32(self.data[at : at + self.step], crc)
                    marks.append(crc)
                self._marks = marks
            return self._marks

    def prefix(self, end: int) -> int:
        """The CRC-32 of ``data[:end]``."""
        marks = self._prefixes()
        k = min(end // self.step, len(marks) - 1)
        return zlib.crc32(self.data[k * self.step : end], marks[k])

    def slice(self, start: int, end: int, crc: int = 0) -> int:
        """``zlib.crc32(data[start:end], crc)``: the CRC-32 of ``data[start:end]``, or, given
        the CRC-32 of what comes before it, of the whole (one multiplication: the CRC of
        P + S is x^(8|S|)·(crc(P) xor crc(prefix before S)) xor crc(prefix up to S's end))."""
        if not 0 <= start <= end <= len(self.data):
            raise ValueError(f"slice {start}:{end} outside a buffer of {len(self.data)} bytes")
        if end - start <= 2 * self.step:
            return zlib.crc32(self.data[start:end], crc)
        return combine(crc ^ self.prefix(start), self.prefix(end), end - start)


def _byte_table() -> np.ndarray:
    """The CRC register after one byte from 0 (zlib's table, bit-reflected)."""
    table = []
    for v in range(256):
        c = v
        for _ in range(8):
            c = (c >> 1) ^ POLY if c & 1 else c >> 1
        table.append(c)
    return np.array(table, dtype=np.uint32)


_BYTES = _byte_table()


def linear_rows(rows: np.ndarray) -> np.ndarray:
    """The linear part of the CRC-32 of each row of a (m, w) uint8 array: the register from 0,
    no final xor (``zlib.crc32(row) ^ zlib.crc32(bytes(w))``), so that the CRC of ``a xor b``
    is the CRC of ``a`` xor this of ``b`` for messages of one length."""
    crc = np.zeros(len(rows), dtype=np.uint32)
    for b in range(rows.shape[1]):
        crc = _BYTES[(crc ^ rows[:, b]) & 0xFF] ^ (crc >> 8)
    return crc


@lru_cache(maxsize=256)
def _times(c: int) -> np.ndarray:
    """Tables for ``multiply(c, x)``: one per byte of x (the product is linear in x)."""
    return np.array(
        [[multiply(c, v << (8 * b)) for v in range(256)] for b in range(4)], dtype=np.uint32
    )


def multiply_many(c: int, xs: np.ndarray) -> np.ndarray:
    """``multiply(c, x)`` for every x of a uint32 array (four table lookups each)."""
    t = _times(c)
    return t[0][xs & 0xFF] ^ t[1][(xs >> 8) & 0xFF] ^ t[2][(xs >> 16) & 0xFF] ^ t[3][xs >> 24]


def spread_rows(lin: np.ndarray, spacing: int, after: int) -> np.ndarray:
    """The linear CRC of messages that are zero but for short pieces every ``spacing`` bytes:
    ``lin`` (s, k) holds each piece's linear CRC (as ``linear_rows`` gives, pieces of equal
    width w), piece i of a message starting at byte i·spacing, ``after`` the bytes of the
    message after the last piece's first byte + w. Reduced in a tree (log k steps)."""
    s, k = lin.shape
    if k == 0:
        return np.zeros(s, dtype=np.uint32)
    width = 1 << (k - 1).bit_length()
    acc = np.zeros((s, width), dtype=np.uint32)
    acc[:, width - k :] = lin  # leading zero pieces add nothing
    gap = spacing
    while acc.shape[1] > 1:
        acc = multiply_many(x8n(gap), acc[:, 0::2]) ^ acc[:, 1::2]
        gap *= 2
    return multiply_many(x8n(after), acc[:, 0])
