"""File access on directories and URLs (what the dataset formats and the loader use)."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from iobench.target import storage


@pytest.fixture(params=["local", "memory"])
def base(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path)
        return
    fs = fsspec.filesystem("memory")
    path = f"/storage-test-{uuid.uuid4().hex[:8]}"
    fs.makedirs(path, exist_ok=True)
    yield f"memory://{path}"
    fs.rm(path, recursive=True)


def test_write_read_size(base):
    path = storage.join(base, "a.bin")
    with storage.open_write(path) as f:
        f.write(b"x" * 5000)
        storage.durable(f)
    assert storage.size(path) == 5000
    assert storage.read_bytes(path) == b"x" * 5000
    with storage.open_read(path) as f:
        f.seek(4990)
        assert f.read() == b"x" * 10


def test_join():
    assert storage.join("/t/run", "d/f") == "/t/run/d/f"
    assert storage.join("s3://b/x/.iobench-1-r0", "d/f") == "s3://b/x/.iobench-1-r0/d/f"
    assert storage.join("s3://b/x/.iobench-1-r0/", "../.iobench-1-r1/f") == (
        "s3://b/x/.iobench-1-r1/f"
    )


def test_missing_is_file_not_found(base):
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(storage.join(base, "nothing"))
