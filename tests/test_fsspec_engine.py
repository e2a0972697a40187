"""The fsspec engine and URL targets: memory:// (fast) and S3 against a real moto server.

The S3 tests use the session's ``moto_server`` (``moto_endpoint`` in conftest.py: one for every
module), create a bucket per test with boto3, and point iobench at it through
IOBENCH_S3_ENDPOINT with dummy credentials (which must never show up in results or messages).
"""

from __future__ import annotations

import json
import multiprocessing
import socket
import uuid

import fsspec
import pytest
from engine_contract import EngineContract

from iobench.core.errors import EngineError, EngineUnavailable, TargetError
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.fsspec import FsspecEngine, join
from iobench.target import (
    RUN_DIR_PREFIX,
    StopFlag,
    create_run_dir,
    remove_run_dir,
    resolve,
    scrub,
    storage,
)

MiB = 1 << 20
KEY_ID = "AKIAIOBENCHTEST00001"
SECRET = "iobench/Secret+Value0123456789abcdefXYZ"


# -- memory:// ---------------------------------------------------------------------------------


@pytest.fixture
def mem_dir():
    """A fresh memory:// directory; the memory store is per process, so clean it afterwards."""
    fs = fsspec.filesystem("memory")
    path = f"/iobench-test-{uuid.uuid4().hex[:8]}"
    fs.makedirs(path, exist_ok=True)
    yield f"memory://{path}"
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture
def engine():
    return FsspecEngine()


class TestFsspecMemory(EngineContract):
    """The engine contract on memory:// (no O_DIRECT, no page cache: cache "none")."""

    @pytest.fixture
    def engine(self):
        return FsspecEngine()

    @pytest.fixture
    def run_dir(self, mem_dir) -> str:
        return mem_dir

    def direct_available(self, run_dir: str) -> bool:
        return False

    def file_size(self, run_dir: str, path: str) -> int:
        fs, root = fsspec.core.url_to_fs(run_dir)
        return fs.size(f"{root}/{path}")

    def unwritable(self, run_dir: str) -> FileSpec:
        """Under an object that is not a prefix: the memory store refuses it."""
        fs, root = fsspec.core.url_to_fs(run_dir)
        fs.pipe_file(f"{root}/blocker", b"not a directory")
        return FileSpec("blocker/x.dat", MiB)


def _ctx(url: str, stop: StopFlag | None = None) -> EngineContext:
    return EngineContext(run_dir=url, stop=stop or StopFlag(), fs_type="memory")


def _files(n: int, size: int, prefix: str = "obj") -> tuple[FileSpec, ...]:
    return tuple(FileSpec(f"{prefix}/f{i:03d}", size) for i in range(n))


def test_write_then_read_whole_and_ranged(engine, mem_dir):
    files = _files(4, 3 * MiB)
    w = engine.run(
        PhaseSpec("w", "write", files, jobs=2, block_size=MiB, fsync="end"), _ctx(mem_dir)
    )
    assert (w.bytes, w.ops, w.files, w.cache) == (12 * MiB, 12, 4, "none")
    assert w.histogram["count"] == w.ops
    assert w.bandwidth_bps == pytest.approx(w.bytes / w.elapsed_s)
    assert w.params["part_size"] == MiB
    assert len(w.warnings) == 1 and "fsync=end is unsupported on memory://" in w.warnings[0]
    fs, root = fsspec.core.url_to_fs(mem_dir)
    assert fs.size(f"{root}/obj/f002") == 3 * MiB
    assert fs.cat_file(f"{root}/obj/f000", start=0, end=4096) != b"\0" * 4096  # written data

    whole = engine.run(
        PhaseSpec("r", "read", files, jobs=2, block_size=0, latency_per="file"), _ctx(mem_dir)
    )
    assert (whole.bytes, whole.ops, whole.cache, whole.warnings) == (12 * MiB, 4, "none", [])
    ranged = engine.run(PhaseSpec("r2", "read", files, jobs=1, block_size=MiB), _ctx(mem_dir))
    assert (ranged.bytes, ranged.ops) == (12 * MiB, 12)
    rand = engine.run(
        PhaseSpec("rr", "randread", files, jobs=2, block_size=4096, size=64 * 4096, mode="shared"),
        _ctx(mem_dir),
    )
    assert (rand.ops, rand.bytes) == (128, 128 * 4096)


def test_small_object_put_head_get_delete(engine, mem_dir):
    files = tuple(FileSpec(f"ckpt/f{i}", s) for i, s in enumerate([4096, 65536, 1] * 4))
    fs, root = fsspec.core.url_to_fs(mem_dir)
    common = dict(jobs=3, block_size=0, latency_per="file")
    create = engine.run(PhaseSpec("c", "create", files, fsync="file", **common), _ctx(mem_dir))
    assert (create.ops, create.bytes) == (12, 4 * (4096 + 65536 + 1))
    assert create.warnings and "fsync=file" in create.warnings[0]
    st = engine.run(PhaseSpec("s", "stat", files, **common), _ctx(mem_dir))
    assert (st.ops, st.bytes) == (12, 0)
    get = engine.run(PhaseSpec("g", "open_read", files, **common), _ctx(mem_dir))
    assert get.bytes == create.bytes
    delete = engine.run(PhaseSpec("d", "delete", files, **common), _ctx(mem_dir))
    assert delete.ops == 12
    assert fs.find(root) == []


def test_missing_object_fails_the_phase_in_one_line(engine, mem_dir):
    with pytest.raises(EngineError) as e:
        engine.run(PhaseSpec("r", "read", _files(2, 4096, "nothing"), block_size=0), _ctx(mem_dir))
    assert "not found" in e.value.one_line() and "\n" not in e.value.one_line()
    assert e.value.partial.status == "failed"


def test_shared_mode_write_and_randwrite_are_refused(engine, mem_dir):
    assert not engine.supports("randwrite")
    spec = PhaseSpec("w", "write", _files(1, MiB), jobs=2, mode="shared")
    assert "mode=shared" in engine.why_not(spec)
    with pytest.raises(EngineError, match="mode=shared"):
        engine.run(spec, _ctx(mem_dir))


def test_join_resolves_another_ranks_run_dir():
    assert join("bkt/x/.iobench-1-r0", "seq/a") == "bkt/x/.iobench-1-r0/seq/a"
    assert join("bkt/x/.iobench-1-r0/", "../.iobench-1-r2/seq/a") == "bkt/x/.iobench-1-r2/seq/a"


def test_memory_url_target_run_dir_lifecycle(mem_dir):
    t = resolve(mem_dir)
    assert (t.kind, t.fs_type, t.direct_io) == ("fsspec", "memory", "unsupported")
    run_dir = create_run_dir(t, "20260101T000000Z-aaaaaa")
    assert run_dir == f"{mem_dir}/{RUN_DIR_PREFIX}20260101T000000Z-aaaaaa"
    fs, root = fsspec.core.url_to_fs(mem_dir)
    fs.pipe_file(f"{root}/keep.txt", b"user data")
    with pytest.raises(TargetError, match="already exists"):
        create_run_dir(resolve(mem_dir), "20260101T000000Z-aaaaaa")
    remove_run_dir(t)
    assert not t.created
    assert fs.find(root) == [f"{root}/keep.txt"]
    assert t.to_dict()["fs_class"] == "object"


def test_run_on_memory_url(cli, mem_dir, tmp_path):
    out = tmp_path / "out"
    r = cli(
        "run", "sequential-write", mem_dir, "--set", "time=none",
        "--output", out, "--json", "--quiet",
        "--set", "size=2MiB", "--set", "jobs=2", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]",
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    assert res["engine"]["name"] == "fsspec"
    assert res["target"]["kind"] == "fsspec"
    assert [(p["name"], p["bytes"], p["cache"]) for p in res["phases"]] == [
        ("seq-write", 4 * MiB, "none"),
        ("seq-read", 4 * MiB, "none"),
    ]
    assert any("direct=true is unsupported on memory://" in w for w in res["warnings"])
    assert not any("page cache" in w and "fits" in w for w in res["warnings"])
    fs, root = fsspec.core.url_to_fs(mem_dir)
    assert fs.find(root) == []


def test_unknown_protocol_is_one_line_exit_2(cli, tmp_path):
    r = cli("run", "sequential-write", "nosuchproto://b/x", "--output", tmp_path / "o")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "unknown protocol 'nosuchproto'" in r.err
    assert not (tmp_path / "o").exists()


def test_posix_engine_on_a_url_is_refused_before_anything_is_written(cli, mem_dir, tmp_path):
    r = cli("run", "sequential-write", mem_dir, "--engine", "posix", "--output", tmp_path / "o")
    assert r.code == 2 and "use --engine fsspec" in r.err
    assert not (tmp_path / "o").exists()
    fs, root = fsspec.core.url_to_fs(mem_dir)
    assert fs.find(root) == []


def test_missing_s3fs_names_the_extra(monkeypatch):
    def no_s3(protocol):
        raise ImportError("Install s3fs to access S3")

    monkeypatch.setattr(fsspec, "get_filesystem_class", no_s3)
    with pytest.raises(EngineUnavailable) as e:
        resolve("s3://bucket/x")
    assert e.value.exit_status == 2
    assert "pip install 'iobench[s3]'" in e.value.one_line()


def test_scrub_removes_credentials(monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    text = f"ftp://user:pw@host/x failed with {SECRET} and s3://b/k"
    assert scrub(text) == "ftp://***@host/x failed with *** and s3://b/k"


# -- S3 against a moto server -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3(moto_endpoint, monkeypatch):
    """A fresh bucket with two user objects in it, and the environment pointing at moto."""
    import boto3

    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY_ID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("IOBENCH_S3_ENDPOINT", moto_endpoint)
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    bucket = f"iobench-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    user = {"x/keep.txt": b"user data", "x/.iobench-20200101T000000Z-abcdef/old": b"not ours"}
    for key, body in user.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)

    class S3:
        name = bucket
        endpoint = moto_endpoint

        @staticmethod
        def keys() -> list[str]:
            resp = client.list_objects_v2(Bucket=bucket)
            return sorted(o["Key"] for o in resp.get("Contents", []))

        user_keys = sorted(user)

    return S3


def _no_secrets(*texts: str) -> None:
    for t in texts:
        assert SECRET not in t and KEY_ID not in t


@pytest.mark.slow
def test_s3_dataset_read(cli, s3, tmp_path):
    out = tmp_path / "out"
    r = cli(
        "run", "dataset-read", f"s3://{s3.name}/x", "--set", "time=none",
        "--output", out, "--json", "--quiet",
        "--set", "files=16", "--set", "file_size=64KiB", "--set", "readers=[1,2]",
        "--set", "jobs=2", "--set", "size_dist=fixed",
    )  # fmt: skip
    assert r.code == 0, r.err
    text = (out / "result.json").read_text()
    res = json.loads(text)
    phases = {p["name"]: p for p in res["phases"]}
    assert set(phases) == {
        "dataset-write", "dataset-read-r1", "dataset-shuffled-r1",
        "dataset-read-r2", "dataset-shuffled-r2",
    }  # fmt: skip
    for p in phases.values():
        assert p["status"] == "ok" and p["cache"] == "none"
        assert (p["ops"], p["bytes"]) == (16, 16 * 64 * 1024)
    assert res["target"]["fs_type"] == "s3" and res["target"]["mount_source"] == s3.endpoint
    assert res["target"]["run_dir"].startswith(f"s3://{s3.name}/x/{RUN_DIR_PREFIX}")
    assert s3.keys() == s3.user_keys  # the run prefix is gone, the user's objects are not
    _no_secrets(text, r.out, r.err)


@pytest.mark.slow
def test_s3_checkpoint_small_objects_and_torch(cli, s3, tmp_path):
    out = tmp_path / "out"
    r = cli(
        "run", "checkpoint-smallfile", f"s3://{s3.name}/x", "--output", out, "--json", "--quiet",
        "--set", "files=8", "--set", "jobs=2", "--set", "file_sizes=[4KiB,64KiB]",
        "--set", "checkpoint_size=2MiB", "--set", "shards=2", "--set", "tensor_size=512KiB",
        "--set", "time=none", "--set", "rounds=1",  # one pass a phase (the shipped 20 s until
        # steady, 50 rounds at most, are for real storage)
    )  # fmt: skip
    assert r.code == 0, r.err
    text = (out / "result.json").read_text()
    phases = {p["name"]: p for p in json.loads(text)["phases"]}
    for name, op in [("ckpt-create", "create"), ("ckpt-stat", "stat"),
                     ("ckpt-open_read", "open_read"), ("ckpt-delete", "delete")]:  # fmt: skip
        assert phases[name]["op"] == op and phases[name]["ops"] == 16  # one pass of 16 files
        assert phases[name]["iops"] > 0 and phases[name]["latency_s"]["p99"] > 0
    for name in ("ckpt-save", "ckpt-load", "ckpt-dcp-save", "ckpt-dcp-load"):
        assert phases[name]["status"] == "ok" and phases[name]["cache"] == "none"
        assert phases[name]["bytes"] >= 2 * MiB
    assert any("fsync is unsupported on s3://" in w for w in phases["ckpt-save"]["warnings"])
    assert s3.keys() == s3.user_keys
    _no_secrets(text, r.out, r.err)


@pytest.mark.slow
def test_s3_missing_bucket_is_one_line_exit_2(cli, s3, tmp_path):
    r = cli("run", "dataset-read", "s3://no-such-bucket-iobench/x", "--output", tmp_path / "o")
    assert r.code == 2
    assert r.err.count("\n") == 1
    assert "bucket 'no-such-bucket-iobench' does not exist" in r.err
    assert not (tmp_path / "o").exists()
    _no_secrets(r.out, r.err)


@pytest.mark.slow
def test_s3_wrong_endpoint_is_one_line_exit_2(cli, s3, monkeypatch, tmp_path):
    monkeypatch.setenv("IOBENCH_S3_ENDPOINT", f"http://127.0.0.1:{_free_port()}")
    r = cli("run", "dataset-read", f"s3://{s3.name}/x", "--output", tmp_path / "o")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "cannot reach" in r.err
    _no_secrets(r.out, r.err)


@pytest.mark.slow
def test_s3_large_multipart_write(s3):
    """A sequential write in 5 MiB parts: three parts per object, then ranged reads back."""
    t = resolve(f"s3://{s3.name}/x")
    create_run_dir(t, "20260101T000000Z-mpumpu")
    try:
        engine = FsspecEngine()
        ctx = EngineContext(run_dir=t.run_dir, stop=StopFlag(), storage_options=t.storage_options)
        files = _files(2, 15 * MiB, "seq")
        w = engine.run(PhaseSpec("w", "write", files, jobs=2, block_size=5 * MiB), ctx)
        assert (w.bytes, w.ops, w.params["part_size"]) == (30 * MiB, 6, 5 * MiB)
        r = engine.run(PhaseSpec("r", "read", files, jobs=2, block_size=4 * MiB), ctx)
        assert (r.bytes, r.ops) == (30 * MiB, 8)  # 4 + 4 + 4 + 3 MiB per object
    finally:
        remove_run_dir(t)
    assert s3.keys() == s3.user_keys


def _child_reads(url: str, q) -> None:
    q.put(storage.read_bytes(url))


@pytest.mark.slow
def test_s3_reads_in_a_forked_worker(s3):
    """DataLoader workers are forked after the parent used s3fs: the child must get its own
    filesystem (fsspec drops its instance cache in a new pid) instead of hanging on the
    parent's event loop."""
    url = f"s3://{s3.name}/x/keep.txt"
    assert storage.read_bytes(url) == b"user data"  # the parent's instance and loop exist now
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_reads, args=(url, q))
    p.start()
    try:
        assert q.get(timeout=60) == b"user data"
    finally:
        p.join(30)
        if p.exitcode is None:
            p.kill()
    assert p.exitcode == 0
