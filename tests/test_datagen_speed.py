"""The dataset writer's fast paths give the same files as the slow ones: samples generated into
a reused aligned buffer are the bytes ``SampleSource.sample`` gives; the hand-written tar and
npz are what tarfile and zipfile read (the tar byte for byte what tarfile writes, npz's CRCs
from the pool zlib's); the hand-written parquet is what pyarrow reads; O_DIRECT bodies with
buffered tails land whole."""

from __future__ import annotations

import io
import os
import tarfile
import zipfile
import zlib

import numpy as np
import pytest

from iobench import formats
from iobench.formats import npz, parquet, raw, tar
from iobench.formats.writer import FileBuffer, ImageFile, write_image


def _samples(sizes, file_index=3):
    src = formats.SampleSource(max(sizes), seed=9)
    return src, src.file_samples(file_index, sizes, FileBuffer())


def test_file_samples_are_the_samples_back_to_back():
    sizes = [5000, 1, 0, 70_001, 16, 17]
    src, got = _samples(sizes)
    want = [src.sample(3, j, n) for j, n in enumerate(sizes)]
    assert [g.tobytes() for g in got] == [w.tobytes() for w in want]
    whole = raw.contiguous(got)
    assert whole is not None and bytes(whole) == b"".join(w.tobytes() for w in want)
    assert raw.contiguous(want) is None  # separate arrays: no shared buffer
    assert raw.contiguous([got[0], got[3]]) is None  # not adjacent


def test_buffer_is_page_aligned_and_reused():
    buf = FileBuffer()
    a = buf.take(10_000)
    assert a.__array_interface__["data"][0] % 4096 == 0
    b = buf.take(5000)
    assert b.__array_interface__["data"][0] == a.__array_interface__["data"][0]


@pytest.mark.parametrize("sizes", [[1000, 2000, 3000], [0, 511, 512, 513], [70_001]])
def test_tar_is_byte_for_byte_what_tarfile_writes(sizes):
    _, samples = _samples(sizes)
    keys = [formats.sample_key(3, j) for j in range(len(sizes))]
    ours = io.BytesIO()
    tar.write(ours, samples, keys)
    theirs = io.BytesIO()
    with tarfile.open(fileobj=theirs, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for k, s in zip(keys, samples, strict=True):
            info = tarfile.TarInfo(f"{k}.bin")
            info.size, info.mode = len(s), 0o644
            t.addfile(info, io.BytesIO(s.tobytes()))
    assert ours.getvalue() == theirs.getvalue()


def test_tar_long_names_take_tarfiles_own_path():
    name = "p" * 60 + "/" + "n" * 60  # over 100 bytes: tarfile puts the directory in the prefix
    head = tar.header(name, 10, {})
    assert len(head) == 512 and head[345 : 345 + 60] == b"p" * 60 and head[:60] == b"n" * 60


def test_npz_is_a_valid_zip_and_the_zip64_fallback_reads_the_same(monkeypatch):
    sizes = [5000, 1, 0, 300]
    _, samples = _samples(sizes)
    plain = io.BytesIO()
    npz.write(plain, samples, [""] * 4)
    assert zipfile.ZipFile(io.BytesIO(plain.getvalue())).testzip() is None  # every CRC right
    monkeypatch.setattr(npz, "_PLAIN_LIMIT", 0)
    big = io.BytesIO()
    npz.write(big, samples, [""] * 4)  # np.savez (zip64)
    for data in (plain.getvalue(), big.getvalue()):
        assert [a.tobytes() for a in npz.decode(data)] == [s.tobytes() for s in samples]
    assert plain.getvalue() != big.getvalue()


def test_parquet_by_hand_is_what_pyarrow_reads(monkeypatch):
    """The hand-written file (required string ``key``, required binary ``data``, PLAIN pages
    of whole values, Thrift footer) is a Parquet file as pyarrow reads it: full validation,
    the keys, the row groups and pages as sized, and the same samples as arrow's own writer
    gives (the path for a sample too large for a page)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setattr(parquet, "ROW_GROUP_BYTES", 6000)  # 3 samples of ~2 KB a group
    monkeypatch.setattr(parquet, "DATA_PAGE_BYTES", 4000)  # 2 samples a page
    sizes = [2000] * 47 + [0, 1, 16, 17]  # 17 row groups: the footer's long-form list
    src, samples = _samples(sizes)
    keys = [formats.sample_key(3, j) for j in range(len(sizes))]
    ours = io.BytesIO()
    parquet.write(ours, samples, keys)
    pf = pq.ParquetFile(pa.BufferReader(ours.getvalue()))
    table = pf.read()
    table.validate(full=True)
    assert pf.schema_arrow == pa.schema(
        [pa.field("key", pa.string(), nullable=False), pa.field("data", pa.binary(), False)]
    )
    assert table.column("key").to_pylist() == keys
    assert [v.as_py() for v in table.column("data")] == [s.tobytes() for s in samples]
    assert pf.num_row_groups == 17 and pf.metadata.num_rows == len(sizes)
    data = pf.metadata.row_group(0).column(1)
    assert data.compression == "UNCOMPRESSED" and data.encodings == ("PLAIN",)
    assert data.total_compressed_size == data.total_uncompressed_size  # headers included
    pages = list(parquet._pages([2000] * 3, 0))
    assert [list(p) for p in pages] == [[0, 1], [2]]
    # a sample over what a page can hold: arrow's writer (large_binary), same samples
    monkeypatch.setattr(parquet, "_MAX_PAGE", 4000 + 2000)
    assert parquet.frame(sizes, keys) is None
    big = io.BytesIO()
    parquet.write(big, samples, keys)
    assert pq.ParquetFile(pa.BufferReader(big.getvalue())).schema_arrow.field(1).type == (
        pa.large_binary()
    )
    for got in (ours.getvalue(), big.getvalue()):
        assert [a.tobytes() for a in parquet.decode(got)] == [s.tobytes() for s in samples]


def test_npz_member_crcs_from_the_pool_are_zlibs():
    """npz's frame given the samples' CRC-32s from the source (no pass over the bytes) gives
    the file byte for byte as computing them over the image does, and zipfile checks them."""
    sizes = [0, 5, 16, 17, 4096, 70_001, 3 << 20]
    keys = [formats.sample_key(3, j) for j in range(len(sizes))]
    src = formats.SampleSource(max(sizes), seed=9)
    for starts in ([0] * len(sizes), list(range(0xDEADBEEF, 0xDEADBEEF + len(sizes)))):
        want = [
            zlib.crc32(src.sample(3, j, n), s)
            for j, (n, s) in enumerate(zip(sizes, starts, strict=True))
        ]
        assert src.crcs(3, sizes, starts) == want
    images = []
    for known in (lambda starts: src.crcs(3, sizes, starts), None):
        total, offsets, finish = npz.frame(sizes, keys, known)
        buf = FileBuffer()
        buf.take(total)
        src.file_samples(3, sizes, buf, offsets)
        finish(buf.array[:total])
        images.append(buf.array[:total].tobytes())
    assert images[0] == images[1]
    assert zipfile.ZipFile(io.BytesIO(images[0])).testzip() is None


def test_image_file_seeks_like_a_file():
    img = ImageFile()
    img.write(b"abcdef")
    img.seek(2)
    img.write(b"XY")
    img.seek(0, io.SEEK_END)
    img.write(b"!")
    assert bytes(img.image()) == b"abXYef!" and img.tell() == 7


@pytest.mark.parametrize("n", [0, 100, 4096, 3 * 4096 + 17])
@pytest.mark.parametrize("direct", [False, True])
def test_write_image_lands_whole(tmp_path, n, direct):
    buf = FileBuffer()
    data = buf.take(n)
    data[:] = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
    path = str(tmp_path / "f")
    assert write_image(path, memoryview(data), direct) == n
    with open(path, "rb") as f:
        assert f.read() == data.tobytes()
    assert write_image(path, memoryview(data[: n // 2]), direct) == n // 2  # truncated
    assert os.path.getsize(path) == n // 2


@pytest.mark.parametrize("fmt", ["tar", "npz", "parquet"])
@pytest.mark.parametrize("sizes", [[1000, 2000, 3000], [0, 511, 512, 513], [70_001]])
def test_framed_file_is_byte_for_byte_what_write_writes(fmt, sizes):
    """The writer's in-place path (samples generated into a format's frame) and the format's
    own ``write`` give the same file."""
    mod = formats.get_format(fmt)
    keys = [formats.sample_key(3, j) for j in range(len(sizes))]
    src, samples = _samples(sizes)
    ours = io.BytesIO()
    mod.write(ours, samples, keys)
    total, offsets, finish = mod.frame(sizes, keys)
    buf = FileBuffer()
    image = buf.take(total)
    image[:] = 0xAB  # stale bytes from an earlier file must all be overwritten
    src.file_samples(3, sizes, buf, offsets)
    finish(image)
    assert image.tobytes() == ours.getvalue()
