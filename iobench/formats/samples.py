"""The dataset writer's sample bytes: incompressible, unique, and cheap to make.

A random pool is filled once, before the timed region; each sample is a copy of it from a
different, unaligned offset, with a 16-byte stamp (file, sample, page) at the start of each of
its 4 KiB pages: compression cannot shrink it and block-level deduplication finds no two pages
alike (without the page stamps, a few GiB of 1 MiB samples repeated 4 % of their pages, as two
samples at the same offset modulo 4 KiB share the pages where their slices of the pool meet).

Each sample's CRC-32 (what an npz member carries) follows from the pool's, without a pass over
its bytes: the CRC of its pool slice from the pool's prefix CRCs, then the stamps' difference
added by linearity (``crc32``).
"""

from __future__ import annotations

import mmap
import zlib
from collections.abc import Sequence

import numpy as np

from ..core.datagen import POOL_MIN, random_bytes, stamp_pages, stamped_pages
from ..target import DIRECT_ALIGN
from . import crc32

PAGE = 4096
#: Samples this small have their CRC computed over their bytes (cheaper than the algebra).
DIRECT_CRC_BELOW = 16 << 10
_STAMP_BYTES = 16


class SampleSource:
    """Incompressible, unique sample bytes: slices of one random pool, every 4 KiB page of a
    sample stamped with (file, sample << 24 | page)."""

    def __init__(self, max_sample: int, seed: int):
        size = max(POOL_MIN, int(max_sample) + 2 * DIRECT_ALIGN)
        self.pool = np.frombuffer(random_bytes(size, seed), dtype=np.uint8)
        self.seed = seed
        # prefix CRCs every 4 KiB, or every 1/16384th of a larger pool (computed on first use)
        self._prefix = crc32.PrefixCRC(self.pool, max(4096, size >> 14))

    def _offset(self, file_index: int, j: int, n: int) -> int:
        span = len(self.pool) - n
        return ((file_index * 1_000_003 + j * 7919 + self.seed * 131) * 2_654_435_761) % max(
            span, 1
        )

    def sample(self, file_index: int, j: int, n: int) -> np.ndarray:
        """One sample in a fresh array."""
        out = np.empty(n, dtype=np.uint8)
        self._fill(out, file_index, j)
        return out

    def crcs(self, file_index: int, sizes: Sequence[int], starts: Sequence[int]) -> list[int]:
        """``zlib.crc32(sample(file_index, j, sizes[j]), starts[j])`` for every sample j of a
        file (``starts[j]``: the CRC-32 of what precedes it, as zlib continues one), without a
        pass over the samples' bytes: the CRC of each pool slice (one multiplication) xor the
        linear CRC of what the page stamps changed (all samples of one size at once)."""
        out = [0] * len(sizes)
        by_size: dict[int, list[int]] = {}
        for j, n in enumerate(sizes):
            if n < DIRECT_CRC_BELOW:
                out[j] = zlib.crc32(self.sample(file_index, j, n).data, starts[j])
            else:
                by_size.setdefault(int(n), []).append(j)
        for n, js in by_size.items():
            offs = np.array([self._offset(file_index, j, n) for j in js], dtype=np.int64)
            pages = stamped_pages(n)
            at = offs[:, None] + PAGE * np.arange(pages)[None, :]  # (samples, pages)
            under = self.pool[at[..., None] + np.arange(_STAMP_BYTES)]  # the pool's bytes
            stamps = np.empty((len(js), pages, 2), dtype="<u8")
            stamps[..., 0] = file_index
            stamps[..., 1] = (np.array(js, dtype=np.uint64) << np.uint64(24))[:, None] + (
                np.arange(pages, dtype=np.uint64)
            )
            diff = stamps.view(np.uint8).reshape(len(js), pages, _STAMP_BYTES) ^ under
            lin = crc32.linear_rows(diff.reshape(-1, _STAMP_BYTES)).reshape(len(js), pages)
            changed = crc32.spread_rows(lin, PAGE, n - PAGE * (pages - 1) - _STAMP_BYTES)
            for j, off, delta in zip(js, offs.tolist(), changed.tolist(), strict=True):
                out[j] = self._prefix.slice(off, off + n, starts[j]) ^ delta
        return out

    def _fill(self, out: np.ndarray, file_index: int, j: int) -> None:
        n = len(out)
        off = self._offset(file_index, j, n)
        out[:] = self.pool[off : off + n]
        if n >= _STAMP_BYTES:
            stamp_pages(out, file_index, j << 24)
        else:  # too short for a whole stamp: its first bytes
            out[:] = np.array([file_index, j << 24], dtype="<u8").view(np.uint8)[:n]

    def file_samples(
        self,
        file_index: int,
        sizes: Sequence[int],
        buf: FileBuffer,
        offsets: Sequence[int] | None = None,
    ) -> list[np.ndarray]:
        """A file's samples, the same bytes ``sample`` gives, in ``buf`` (a writer thread's
        buffer, reused file after file: its pages are already mapped, so filling it is a
        memcpy, not a page fault per 4 KiB as a fresh array is): back to back, or at
        ``offsets`` (where a format's ``frame`` puts them) in the buffer as already sized."""
        if offsets is None:
            whole = buf.take(int(sum(sizes)))
            offsets = [0]
            for n in sizes[:-1]:
                offsets.append(offsets[-1] + n)
        else:
            whole = buf.array
        out = []
        for j, (at, n) in enumerate(zip(offsets, sizes, strict=True)):
            view = whole[at : at + n]
            self._fill(view, file_index, j)
            out.append(view)
        return out


class FileBuffer:
    """One writer thread's buffer, page-aligned (what O_DIRECT needs), grown as needed and
    reused for every file."""

    def __init__(self) -> None:
        self.array = np.empty(0, dtype=np.uint8)

    def take(self, n: int, keep: int = 0) -> np.ndarray:
        """At least ``n`` bytes; the first ``keep`` bytes carried over when it grows."""
        if len(self.array) < n:
            size = -(-max(n, 2 * len(self.array), DIRECT_ALIGN) // DIRECT_ALIGN) * DIRECT_ALIGN
            bigger = np.frombuffer(mmap.mmap(-1, size), dtype=np.uint8)
            bigger[:keep] = self.array[:keep]
            self.array = bigger
        return self.array[:n]

    def prefault(self, n: int) -> FileBuffer:
        """Size it for ``n`` bytes and touch every page now (as fio allocates its buffers
        before it starts the clock): the first file then pays no page faults."""
        self.take(n)
        self.array[:n:DIRECT_ALIGN] = 0  # (DIRECT_ALIGN is the page size)
        return self
