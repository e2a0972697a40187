"""``iobench loader`` on an S3 URL target, against the session's local moto server."""

from __future__ import annotations

import json

import pytest
from test_fsspec_engine import _no_secrets, s3  # noqa: F401 - fixtures (moto_endpoint: conftest)
from test_loader import tiny_profile

from iobench.target import RUN_DIR_PREFIX


def _loader(cli, s3, tmp_path, *args):  # noqa: F811 - s3 is the fixture's value
    url = f"s3://{s3.name}/x"
    r = cli("loader", url, "--output", tmp_path / "out", "--json", "-q", *args)
    _no_secrets(r.out, r.err)
    assert r.code == 0, r.err
    res = json.loads(r.out)
    saved = (tmp_path / "out" / "result.json").read_text()
    _no_secrets(saved)
    assert json.loads(saved)["run_id"] == res["run_id"]
    # only the user's objects are left: the run's .iobench-* prefix is gone
    assert s3.keys() == s3.user_keys
    assert not [k for k in s3.keys() if RUN_DIR_PREFIX in k and "20200101T000000Z" not in k]
    return res


def _check_common(res):
    ld = res["loader"]
    assert 0 < ld["au"] <= 1
    assert ld["cache"] == "none"
    assert res["target"]["kind"] == "fsspec"
    assert [p["cache"] for p in res["phases"]] == ["none"] * len(res["phases"])
    assert not any("page cache" in w and "fits" in w for w in res["warnings"])
    assert not any("direct=true" in w for w in res["warnings"])
    return ld


def test_tiny_loader_on_s3(cli, s3, tmp_path):  # noqa: F811
    prof = tiny_profile(tmp_path, format="npz")
    res = _loader(cli, s3, tmp_path, "--profile", prof, "--steps", "3")
    ld = _check_common(res)
    assert (ld["gpus"], ld["workers"], ld["batch_size"], ld["steps"]) == (1, 2, 4, 3)
    epoch = ld["ranks"][0]["epochs"][0]
    assert (epoch["timed_steps"], epoch["samples"]) == (2, 8)
    names = [p["name"] for p in res["phases"]]
    assert names == ["dataset-write", "dataset-shuffled-r1", "dataset-shuffled-r2"]
    assert res["phases"][0]["files"] == 24
    assert res["phases"][1]["bytes"] == res["phases"][0]["bytes"]  # every object read once
    assert 0 < ld["predicted_au"] <= 1


def test_resnet50_profile_on_s3(cli, s3, tmp_path):  # noqa: F811
    sets = ["files=2", "samples_per_file=40", "batch_size=8", "sample_size=4KiB"]
    args = [a for kv in sets for a in ("--set", kv)]
    res = _loader(
        cli, s3, tmp_path, "--profile", "resnet50-h100", *args, "--steps", "2", "--epochs", "1"
    )
    ld = _check_common(res)
    assert ld["profile"] == "resnet50-h100" and ld["steps"] == 2
    assert ld["dataset"]["files"] == 2 and ld["dataset"]["samples_per_file"] == 40


@pytest.mark.parametrize("fmt", ["parquet", "tar"])
def test_other_formats_on_s3(cli, s3, tmp_path, fmt):  # noqa: F811
    prof = tiny_profile(tmp_path, format=fmt, files=8, samples_per_file=4, workers=1)
    ld = _check_common(_loader(cli, s3, tmp_path, "--profile", prof, "--steps", "2"))
    assert ld["dataset"]["format"] == fmt


def test_two_gpus_on_s3(cli, s3, tmp_path):  # noqa: F811
    prof = tiny_profile(tmp_path, workers=1)
    res = _loader(cli, s3, tmp_path, "--profile", prof, "--gpus", "2", "--steps", "2")
    ld = _check_common(res)
    assert ld["gpus"] == 2 and [r["rank"] for r in ld["ranks"]] == [0, 1]


def test_formats_round_trip_through_a_url():
    """Every format written to and read back from memory:// decodes to the same samples."""
    import uuid

    import fsspec
    import numpy as np

    from iobench import formats

    root = f"memory://iobench-fmt-{uuid.uuid4().hex[:8]}"
    samples = [np.arange(n, dtype=np.uint8) for n in (100, 2000, 7)]
    keys = [formats.sample_key(0, j) for j in range(3)]
    try:
        for fmt in formats.FORMATS:
            if fmt == "jpeg":  # lossy, one sample per file: tests/test_replay.py
                continue
            url = f"{root}/f.{formats.EXTENSIONS[fmt]}"
            n = formats._put_sample_file(url, fmt, samples, keys, None)
            assert n == fsspec.core.url_to_fs(url)[0].size(url)
            sizes = [len(s) for s in samples] if fmt == "raw" else None
            got = formats.read_samples(url, fmt, direct=True, sizes=sizes)
            assert [g.tobytes() for g in got] == [s.tobytes() for s in samples]
    finally:
        fs, path = fsspec.core.url_to_fs(root)
        if fs.exists(path):
            fs.rm(path, recursive=True)


@pytest.mark.slow
def test_torchrun_loader_on_s3_two_ranks(s3, tmp_path):  # noqa: F811
    """Two ranks, each one accelerator, reading the whole dataset (both ranks' objects) through
    fsspec; the probe reads the other rank's objects; only the user's objects are left."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    prof = tiny_profile(tmp_path, files=16, workers=1, epochs=2)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env["PYTHONPATH"] = str(repo)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "iobench", "loader", f"s3://{s3.name}/x", "--profile", str(prof),
           "--output", str(out), "--no-history", "-q"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    _no_secrets(proc.stdout, proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    res = json.loads((out / "result.json").read_text())
    ld = _check_common(res)
    assert ld["gpus"] == 2 and ld["steps"] == 2 and ld["dataset"]["files"] == 16
    assert [r["rank"] for r in ld["ranks"]] == [0, 1]
    probe = res["phases"][1]
    assert [r["read_from"] for r in probe["ranks"]] == [1, 0]
    assert probe["ops"] == 16  # every object, each rank the other's half
    assert not any("do not see each other" in w for w in res["warnings"])
    assert s3.keys() == s3.user_keys
