"""CRC-32 (zlib's, as zip files carry it) of pieces put together, without reading them again.

A CRC-32 is linear over GF(2): the CRC of ``A + B`` is the CRC of ``A`` multiplied by
x^(8·len(B)) modulo the CRC polynomial, xor the CRC of ``B`` (what zlib's ``crc32_combine``
computes; the pre- and post-conditioning cancel out). So the CRC of any slice of a fixed
buffer follows from the CRCs of its prefixes: ``PrefixCRC`` keeps them every ``step`` bytes,
once, and a slice then costs two CRCs of less than ``step`` bytes and one multiplication.
The dataset writer uses it for npz members: its samples are slices of one random pool, so
their CRCs need not be computed over every byte again (they are exactly what zlib gives).
"""

from __future__ import annotations

import threading
import zlib
from functools import lru_cache
from typing import Any

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
        return self.prefix(end) ^ multiply(x8n(end - start), crc ^ self.prefix(start))
