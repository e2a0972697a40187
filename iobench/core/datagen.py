"""Incompressible data: a random pool that blocks are cut from, stamped to stay unique.

Generating random bytes costs far more than writing them to a fast device, so a pool is
filled once, before the timed region, and every block is a different aligned slice of it
with a unique 16-byte stamp (file id, offset, counter) at the start of each of its 4 KiB
pages: compression cannot shrink what is written, and block-level deduplication (which
storage arrays and ZFS do on 4 KiB and larger blocks) finds no two pages alike, though the
pages come from one pool.
"""

from __future__ import annotations

import mmap
import struct

import numpy as np

POOL_MIN = 8 << 20
ALIGN = 4096
_STAMP = struct.Struct("<QQ")


def stamped_pages(n: int) -> int:
    """How many 16-byte page stamps ``n`` bytes hold (one per 4 KiB page that has room)."""
    return (n - _STAMP.size) // ALIGN + 1 if n >= _STAMP.size else 0


def stamp_pages(arr: np.ndarray, first: int, second: int) -> None:
    """Stamp every 4 KiB page of ``arr`` (one-off: ``PageStamper`` for a reused buffer)."""
    PageStamper(arr, len(arr)).stamp(len(arr), first, second)


class PageStamper:
    """Stamps the start of every 4 KiB page of one buffer (up to ``size`` bytes) with the
    u64s ``first`` and ``second`` plus the page's number: arrays made once, three numpy calls
    a block."""

    def __init__(self, buf: np.ndarray, size: int):
        pages = max(1, stamped_pages(size))
        self.heads = np.lib.stride_tricks.as_strided(
            buf, shape=(pages, _STAMP.size), strides=(ALIGN, 1), writeable=True
        )
        self.stamps = np.zeros((pages, 2), dtype="<u8")
        self.index = np.arange(pages, dtype=np.uint64)
        self.raw = self.stamps.view(np.uint8).reshape(pages, _STAMP.size)

    def stamp(self, n: int, first: int, second: int) -> None:
        pages = stamped_pages(n)
        self.stamps[:pages, 0] = first & 0xFFFFFFFFFFFFFFFF
        np.add(
            self.index[:pages], np.uint64(second & 0xFFFFFFFFFFFFFFFF), out=self.stamps[:pages, 1]
        )
        self.heads[:pages] = self.raw[:pages]


def random_bytes(n: int, seed: int) -> bytes:
    """``n`` random bytes from a seeded generator (reproducible, incompressible)."""
    return np.random.default_rng(seed).bytes(n)


class DataPool:
    """A page-aligned pool of random bytes and a page-aligned staging buffer for one worker."""

    def __init__(self, block_size: int, seed: int):
        self.block_size = max(block_size, 1)
        size = max(POOL_MIN, 4 * self.block_size)
        size = -(-size // ALIGN) * ALIGN
        self.pool = mmap.mmap(-1, size)
        self.pool.write(random_bytes(size, seed))
        self.view = memoryview(self.pool)
        self.slots = max(1, (size - self.block_size) // ALIGN + 1)
        self.counter = 0
        bsz = -(-self.block_size // ALIGN) * ALIGN
        self.staging = mmap.mmap(-1, bsz)
        self.staging_view = memoryview(self.staging)[: self.block_size]
        self.stamper = PageStamper(np.frombuffer(self.staging, dtype=np.uint8), bsz)

    def next_block(self, file_id: int, offset: int, n: int | None = None) -> memoryview:
        """A fresh block: a new slice of the pool, each 4 KiB page stamped with (file, offset,
        counter and page).

        The slice is copied into the aligned staging buffer (memcpy speed, far cheaper than
        generating random bytes) so O_DIRECT always sees an aligned buffer.
        """
        n = self.block_size if n is None else n
        self.counter += 1
        start = (self.counter * 7919 % self.slots) * ALIGN
        if start + n > len(self.pool):
            start = 0
        out = self.staging_view[:n]
        out[:] = self.view[start : start + n]
        if n < ALIGN + _STAMP.size:  # one page: the fast path (4 KiB random writes)
            if n >= _STAMP.size:
                _STAMP.pack_into(self.staging, 0, (file_id << 40) ^ offset, self.counter << 20)
        else:
            self.stamper.stamp(n, (file_id << 40) ^ offset, self.counter << 20)
        return out

    def close(self) -> None:
        del self.stamper  # (its arrays point into the staging map)
        self.staging_view.release()
        self.view.release()
        self.pool.close()
        self.staging.close()


def sample_sizes(n: int, mean: int, sd: int, dist: str, seed: int, minimum: int = 512) -> list[int]:
    """``n`` file sizes: fixed, normal (as DLIO draws them) or lognormal with that mean/sd."""
    if dist == "fixed" or sd <= 0:
        return [int(mean)] * n
    rng = np.random.default_rng(seed)
    if dist == "normal":
        sizes = rng.normal(mean, sd, n)
    elif dist == "lognormal":
        sigma2 = np.log(1 + (sd / mean) ** 2)
        sizes = rng.lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2), n)
    else:
        raise ValueError(f"unknown size distribution {dist!r}")
    return [int(s) for s in np.maximum(sizes, minimum)]


FILES_PER_DIR = 10_000


def dataset_paths(n: int, ext: str, prefix: str = "data") -> list[str]:
    """Relative paths of ``n`` sample files, at most 10,000 per subdirectory."""
    return [f"{prefix}/d{i // FILES_PER_DIR:04d}/s{i:07d}.{ext}" for i in range(n)]
