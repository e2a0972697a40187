"""``iobench loader s3://bucket/prefix --existing``: a dataset already in an object store,
listed (sizes from the listing), read with one GET per object, never written."""

from __future__ import annotations

import json

import boto3
from existing_datasets import MAKERS
from test_fsspec_engine import _no_secrets, s3  # noqa: F401 - fixtures (moto_endpoint: conftest)


def test_an_existing_dataset_in_s3_is_read_and_left_alone(cli, s3, tmp_path):  # noqa: F811
    local = tmp_path / "local"
    n = MAKERS["tfrecord"](local)
    client = boto3.client("s3", endpoint_url=s3.endpoint)
    for p in sorted(local.iterdir()):
        client.put_object(Bucket=s3.name, Key=f"ds/{p.name}", Body=p.read_bytes())
    before = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=s3.name)["Contents"]}
    r = cli(
        "loader", f"s3://{s3.name}/ds", "--existing", "--set", "batch_size=4",
        "--set", "compute_s=1ms", "--workers", "2", "--output", tmp_path / "out",
        "--json", "-q", "--no-history",
    )  # fmt: skip
    _no_secrets(r.out, r.err)
    assert r.code == 0, r.err
    res = json.loads(r.out)
    ex = res["loader"]["existing"]
    assert ex["dataset"]["format"] == "tfrecord" and ex["dataset"]["samples_read"] == n
    assert ex["dataset"]["files"] == 2 and ex["dataset"]["bytes_basis"].startswith("exact")
    assert res["loader"]["cache"] == "none" and ex["failed"]["count"] == 0
    assert ex["split"]["read_s_per_sample"] > 0
    assert ex["terms"]["cache_read_s_per_sample"] is None  # no page cache to measure
    after = {o["Key"]: o["ETag"] for o in client.list_objects_v2(Bucket=s3.name)["Contents"]}
    assert after == before  # nothing written, nothing removed
