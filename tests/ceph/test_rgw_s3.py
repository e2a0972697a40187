"""S3 semantics against a real server: the RADOS Gateway of the session's Ceph cluster on
127.0.0.1 (moto stays for the fault injection it does better). Unlike moto, RGW checks
credentials, so a wrong secret is refused as it would be in production."""

from __future__ import annotations

import json
import uuid

import pytest

from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.target import (
    RUN_DIR_PREFIX,
    StopFlag,
    create_run_dir,
    remove_run_dir,
    resolve,
    run_dir_visible,
)

pytestmark = [pytest.mark.ceph, pytest.mark.root, pytest.mark.slow]

MiB = 1 << 20


@pytest.fixture
def rgw(ceph_cluster, monkeypatch):
    """A fresh bucket on RGW holding two user objects; the environment points iobench at it."""
    pytest.importorskip("s3fs")
    boto3 = pytest.importorskip("boto3")
    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ceph_cluster.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ceph_cluster.secret_key)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("IOBENCH_S3_ENDPOINT", ceph_cluster.s3_endpoint)
    client = boto3.client("s3", endpoint_url=ceph_cluster.s3_endpoint)
    bucket = f"iobench-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    user = {"x/keep.txt": b"user data", f"x/{RUN_DIR_PREFIX}20200101T000000Z-abcdef/old": b"no"}
    for key, body in user.items():
        client.put_object(Bucket=bucket, Key=key, Body=body)

    class Bucket:
        name = bucket
        endpoint = ceph_cluster.s3_endpoint
        secrets = (ceph_cluster.secret_key, ceph_cluster.access_key)
        user_keys = sorted(user)

        @staticmethod
        def keys() -> list[str]:
            resp = client.list_objects_v2(Bucket=bucket)
            return sorted(o["Key"] for o in resp.get("Contents", []))

    yield Bucket
    for key in Bucket.keys():
        client.delete_object(Bucket=bucket, Key=key)
    client.delete_bucket(Bucket=bucket)


def _no_secrets(bucket, *texts: str) -> None:
    for t in texts:
        for s in bucket.secrets:
            assert s not in t


def test_rgw_dataset_read_lists_writes_reads_and_cleans_up(cli, rgw, tmp_path):
    out = tmp_path / "out"
    r = cli(
        "run", "dataset-read", f"s3://{rgw.name}/x", "--output", out, "--json", "--quiet",
        "--no-history", "--set", "files=16", "--set", "file_size=64KiB",
        "--set", "readers=[1,2]", "--set", "jobs=2", "--set", "size_dist=fixed",
        "--set", "time=none",
    )  # fmt: skip
    assert r.code == 0, r.err
    text = (out / "result.json").read_text()
    res = json.loads(text)
    for p in res["phases"]:
        assert p["status"] == "ok" and p["cache"] == "none"
        assert (p["ops"], p["bytes"]) == (16, 16 * 64 * 1024)
    assert res["target"]["fs_type"] == "s3" and res["target"]["mount_source"] == rgw.endpoint
    # consistency after delete: the listing right after the run shows only the user's objects
    assert rgw.keys() == rgw.user_keys
    _no_secrets(rgw, text, r.out, r.err)


def test_rgw_multipart_write_and_ranged_reads(rgw):
    """Two 15 MiB objects in 5 MiB parts (three parts each), read back in 4 MiB ranges."""
    from iobench.engines.fsspec import FsspecEngine

    t = resolve(f"s3://{rgw.name}/x")
    create_run_dir(t, "20260101T000000Z-rgwmpu")
    try:
        engine = FsspecEngine()
        ctx = EngineContext(run_dir=t.run_dir, stop=StopFlag(), storage_options=t.storage_options)
        files = tuple(FileSpec(f"seq/f{i}.dat", 15 * MiB) for i in range(2))
        w = engine.run(PhaseSpec("w", "write", files, jobs=2, block_size=5 * MiB), ctx)
        assert (w.bytes, w.ops, w.params["part_size"]) == (30 * MiB, 6, 5 * MiB)
        r = engine.run(PhaseSpec("r", "read", files, jobs=2, block_size=4 * MiB), ctx)
        assert (r.bytes, r.ops) == (30 * MiB, 8)  # 4 + 4 + 4 + 3 MiB per object
        assert r.status == "ok"
    finally:
        remove_run_dir(t)
    assert rgw.keys() == rgw.user_keys


def test_rgw_listing_sees_another_run_dir_then_not_after_delete(rgw):
    mine, other = resolve(f"s3://{rgw.name}/x"), resolve(f"s3://{rgw.name}/x")
    create_run_dir(mine, "20260101T000000Z-rgw-r0")
    create_run_dir(other, "20260101T000000Z-rgw-r1")
    try:
        assert run_dir_visible(mine, "20260101T000000Z-rgw-r1")
    finally:
        remove_run_dir(other)
    assert not run_dir_visible(mine, "20260101T000000Z-rgw-r1")
    remove_run_dir(mine)
    assert not mine.created and rgw.keys() == rgw.user_keys


def test_rgw_missing_bucket_is_one_line_exit_2(cli, rgw, tmp_path):
    r = cli("run", "dataset-read", "s3://no-such-bucket-iobench/x", "--output", tmp_path / "o")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "bucket 'no-such-bucket-iobench' does not exist" in r.err
    assert not (tmp_path / "o").exists()
    _no_secrets(rgw, r.out, r.err)


@pytest.mark.parametrize("which", ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"])
def test_rgw_bad_credentials_are_one_line_exit_2_without_the_secret(
    cli, rgw, monkeypatch, tmp_path, which
):
    wrong = "wrong-" + uuid.uuid4().hex
    monkeypatch.setenv(which, wrong)
    r = cli("run", "dataset-read", f"s3://{rgw.name}/x", "--output", tmp_path / "o")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert "denied" in r.err
    assert not (tmp_path / "o").exists()
    _no_secrets(rgw, r.out, r.err)
    assert wrong not in r.out + r.err
    assert rgw.keys() == rgw.user_keys
