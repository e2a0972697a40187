"""Sample file formats: every format written, then really decoded back, byte for byte."""

from __future__ import annotations

import json
import os
import zlib

import numpy as np
import pytest
from conftest import SMALL

from iobench import formats
from iobench.core.errors import EngineError
from iobench.engines.base import FileSpec

#: The formats whose files give back every sample's bytes (jpeg is lossy and holds one sample
#: per file: tests/test_replay.py covers it).
EXACT = [f for f in formats.FORMATS if f != "jpeg"]


def _samples(n: int, sizes: list[int]) -> list[np.ndarray]:
    src = formats.SampleSource(max(sizes), seed=3)
    return [src.sample(n, j, s) for j, s in enumerate(sizes)]


@pytest.mark.parametrize("fmt", EXACT)
@pytest.mark.parametrize("sizes", [[70_001], [4096, 1, 12_345, 65_536]], ids=["one", "four"])
@pytest.mark.parametrize("direct", [False, True], ids=["buffered", "direct"])
def test_round_trip(tmp_path, fmt, sizes, direct):
    samples = _samples(7, sizes)
    path = tmp_path / f"f.{formats.EXTENSIONS[fmt]}"
    keys = [formats.sample_key(7, j) for j in range(len(sizes))]
    with open(path, "wb") as f:
        formats.write_sample_file(f, fmt, samples, keys)
    back = formats.read_samples(str(path), fmt, direct, sizes if fmt == "raw" else None)
    assert [len(b) for b in back] == sizes
    for a, b in zip(samples, back, strict=True):
        assert b.dtype == np.uint8
        assert a.tobytes() == b.tobytes()
    # the file holds the samples plus at most the format's stated overhead
    extra = os.path.getsize(path) - sum(sizes)
    assert 0 <= extra <= formats.overhead_bytes(fmt, len(sizes))


def test_formats_are_what_they_say(tmp_path):
    """Each file opens with its own library, not only with ours."""
    import tarfile

    import pyarrow.parquet as pq

    samples = _samples(1, [1000, 2000, 3000])
    keys = [formats.sample_key(1, j) for j in range(3)]
    paths = {}
    for fmt in ("npz", "parquet", "tar"):
        paths[fmt] = tmp_path / f"x.{fmt}"
        with open(paths[fmt], "wb") as f:
            formats.write_sample_file(f, fmt, samples, keys)
    with np.load(paths["npz"]) as z:
        assert sorted(z.files) == ["s00000", "s00001", "s00002"]
        assert z["s00001"].tobytes() == samples[1].tobytes()
    pf = pq.ParquetFile(paths["parquet"])
    assert pf.metadata.num_rows == 3
    assert pf.schema_arrow.names == ["key", "data"]
    assert pf.read().column("key").to_pylist() == keys
    with tarfile.open(paths["tar"]) as tar:
        assert tar.getnames() == [f"{k}.bin" for k in keys]


def test_parquet_row_groups_hold_about_row_group_bytes(monkeypatch, tmp_path):
    import pyarrow.parquet as pq

    monkeypatch.setattr(formats.get_format("parquet"), "ROW_GROUP_BYTES", 3000)
    samples = _samples(2, [1000] * 7)
    path = tmp_path / "x.parquet"
    with open(path, "wb") as f:
        formats.write_sample_file(f, "parquet", samples, [str(j) for j in range(7)])
    # 3000 B ÷ 1000 B per sample = 3 rows per group: 3 + 3 + 1
    assert pq.ParquetFile(path).num_row_groups == 3
    assert [len(s) for s in formats.read_samples(str(path), "parquet")] == [1000] * 7


def test_raw_with_wrong_sizes_is_an_error(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match="add to 90"):
        formats.read_samples(str(path), "raw", sizes=[40, 50])


@pytest.mark.parametrize("fmt", EXACT)
def test_write_files_records_the_phase_and_real_sizes(runner, fmt):
    files = [FileSpec(f"data/d0000/s{i:07d}.{formats.EXTENSIONS[fmt]}", 0) for i in range(6)]
    sizes = [[30_000 + 1000 * i + j for j in range(3)] for i in range(6)]
    params = {"format": fmt, "samples_per_file": 3, "jobs": 2, "seed": 5}
    res, written = formats.write_files(params, runner, files, sizes)
    assert runner.results == [res]
    assert (res.name, res.op, res.ops, res.files, res.cache) == (
        "dataset-write",
        "write",
        6,
        6,
        "dropped",
    )
    on_disk = [os.path.getsize(os.path.join(runner.run_dir, f.path)) for f in written]
    assert [f.size for f in written] == on_disk
    assert res.bytes == sum(on_disk)
    assert res.histogram["count"] == 6  # one latency per file, open to close
    blobs = []
    for f, s in zip(written, sizes, strict=True):
        got = formats.read_samples(os.path.join(runner.run_dir, f.path), fmt, True, s)
        assert [len(a) for a in got] == s
        blobs.extend(a.tobytes() for a in got)
    assert len(set(blobs)) == len(blobs)  # every sample is different (stamped)
    joined = b"".join(blobs)
    assert len(zlib.compress(joined, 1)) > 0.99 * len(joined)  # incompressible


def test_write_files_splits_payload_when_no_sizes_given(runner):
    files = [FileSpec("data/a.tar", 10_000), FileSpec("data/b.tar", 10_001)]
    _, written = formats.write_files({"format": "tar", "samples_per_file": 4}, runner, files)
    got = formats.read_samples(os.path.join(runner.run_dir, written[1].path), "tar")
    assert [len(a) for a in got] == [2501, 2500, 2500, 2500]


def test_write_files_io_error_is_kept_and_raised(runner):
    blocker = os.path.join(runner.run_dir, "data")
    with open(blocker, "w") as f:  # a file where the directory should go
        f.write("x")
    runner.mkdirs = lambda dirs: None
    with pytest.raises(EngineError, match="dataset-write"):
        formats.write_files({"format": "npz"}, runner, [FileSpec("data/x.npz", 100)])
    assert runner.results[-1].status == "failed"


@pytest.mark.parametrize("fmt", ["npz", "parquet", "tar"])
def test_dataset_workload_writes_and_reads_every_format(cli, planted, tmp_path, fmt):
    args = [*SMALL["dataset-read"], "--set", f"format={fmt}", "--set", "samples_per_file=4"]
    r = cli("run", "dataset-read", planted.path, "--output", tmp_path / "o", "--json", "-q", *args)
    assert r.code == 0, r.err
    res = json.loads(r.out)
    write = res["phases"][0]
    assert write["name"] == "dataset-write" and write["params"]["format"] == fmt
    assert write["params"]["samples"] == 32 * 4
    reads = [p for p in res["phases"][1:]]
    assert reads and all(p["bytes"] == write["bytes"] for p in reads)
    assert planted.unchanged()
