"""What iobench writes is incompressible and never repeats a 4 KiB page: storage that
compresses or deduplicates (arrays, ZFS, VDO) would otherwise store less than was written and
report a bandwidth the user's data will not see. Checked on a sequential-write file as the
engine writes it, on the blocks of every size, and on a checkpoint's tensors."""

from __future__ import annotations

import hashlib
import os
import zlib

import numpy as np
import pytest

from iobench.core.datagen import DataPool, PageStamper, stamped_pages
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.posix import PosixEngine
from iobench.target import StopFlag

PAGE = 4096


def _pages(data: bytes) -> list[bytes]:
    return [
        hashlib.blake2b(data[k : k + PAGE], digest_size=16).digest()
        for k in range(0, len(data) - PAGE + 1, PAGE)
    ]


@pytest.mark.parametrize("block", [4096, 8192, 65_536, 1 << 20, (1 << 20) + 512])
def test_blocks_share_no_page(block):
    pool = DataPool(block, seed=7)
    try:
        # 4x the pool: every aligned slice of it is used many times over
        blocks = [bytes(pool.next_block(3, i * block)) for i in range(4 * (8 << 20) // block)]
    finally:
        pool.close()
    pages = [p for b in blocks for p in _pages(b)]
    assert len(set(pages)) == len(pages)
    joined = b"".join(blocks[:64])
    assert len(zlib.compress(joined, 1)) > 0.99 * len(joined)


def test_a_sequential_write_file_shares_no_page(tmp_path):
    """64 MiB written through the posix engine (1 MiB blocks from an 8 MiB pool): before the
    stamp on every page, 99 % of such a file's pages were copies of the pool's."""
    path = tmp_path / "f"
    size = 64 << 20
    spec = PhaseSpec(name="w", op="write", block_size=1 << 20, jobs=1, files=(FileSpec("f", size),))
    PosixEngine().run(spec, EngineContext(run_dir=str(tmp_path), stop=StopFlag()))
    assert os.path.getsize(path) == size
    pages = _pages(path.read_bytes())
    assert len(pages) == size // PAGE and len(set(pages)) == len(pages)


def test_page_stamper_counts_pages_and_numbers_them():
    buf = np.zeros(3 * PAGE + 16, dtype=np.uint8)
    assert stamped_pages(len(buf)) == 4 and stamped_pages(15) == 0 and stamped_pages(16) == 1
    PageStamper(buf, len(buf)).stamp(len(buf), 0xAB, 100)
    heads = [buf[k : k + 16].view("<u8").tolist() for k in range(0, len(buf), PAGE)]
    assert heads == [[0xAB, 100], [0xAB, 101], [0xAB, 102], [0xAB, 103]]
    assert not buf[16:PAGE].any()  # only the stamps are written


def test_checkpoint_tensors_share_no_page():
    from iobench.run.phases.llm_checkpoint import _Pool

    pool = _Pool(seed=3, size=8 << 20)
    tensors = [pool.tensor(3 << 20, tag=t).numpy().tobytes() for t in range(12)]
    pages = [p for t in tensors for p in _pages(t)]
    assert len(set(pages)) == len(pages)


def test_dataset_samples_share_no_page():
    """1 MiB samples as the dataset writer builds them share no 4 KiB page. (With one stamp per
    sample, before, two samples whose pool offsets matched modulo 4 KiB shared the pages where
    their slices met: 3.75 % of the pages of 2 GiB, too large a test; the next test checks the
    stamps that prevent it.)"""
    from iobench import formats
    from iobench.formats.samples import FileBuffer

    src = formats.SampleSource(1 << 20, seed=1)
    buf = FileBuffer()
    pages = []
    for f in range(2):
        src.file_samples(f, [1 << 20] * 32, buf)
        pages += _pages(buf.array[: 32 << 20].tobytes())
    assert len(set(pages)) == len(pages) == 16_384


def test_every_page_of_a_sample_is_stamped():
    from iobench import formats

    src = formats.SampleSource(1 << 20, seed=2)
    s = src.sample(5, 9, 3 * PAGE + 20)  # 4 stamps: the last page holds 20 bytes
    heads = [s[k : k + 16].view("<u8").tolist() for k in range(0, len(s), PAGE)]
    assert heads == [[5, (9 << 24) + k] for k in range(4)]
    assert src.sample(5, 9, 7).tobytes() == np.array([5, 9 << 24], "<u8").tobytes()[:7]
