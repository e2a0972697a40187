"""A completed run exits by its own outcome, whatever its history or its stdout did.

The history is a side effect: a store that cannot be reached, has no credentials, holds no such
bucket, or refuses a value is a warning in the result (and the table still prints). Standard
output that is full, closed or a closed pipe is one line on stderr (none for a closed pipe),
never a traceback and never the exit status. And no history ever creates a bucket.
"""

from __future__ import annotations

import errno
import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import SEQ, iobench_cmd, one_line, result, sub_env, without_run_notes

RUN = ["--set", "size=1MiB", *SEQ, "-q"]


def _history_warning(out: Path) -> str:
    res = result(out)
    assert res["status"] == "complete"
    found = [w for w in res["warnings"] if w.startswith("history not updated: ")]
    assert len(found) == 1, res["warnings"]
    return found[0]


@pytest.fixture
def moto(moto_endpoint, monkeypatch):
    """The environment pointing at the moto server (IOBENCH_S3_ENDPOINT) with credentials; a
    fresh bucket; ``buckets()`` lists what exists."""
    import boto3

    for k in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAIOBENCHTEST00002")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "iobench-history-secret-0123")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("IOBENCH_S3_ENDPOINT", moto_endpoint)
    client = boto3.client("s3", endpoint_url=moto_endpoint)
    bucket = f"iobench-h-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)

    class Moto:
        name = bucket
        endpoint = moto_endpoint

        @staticmethod
        def buckets() -> set[str]:
            return {b["Name"] for b in client.list_buckets()["Buckets"]}

        @staticmethod
        def keys() -> list[str]:
            resp = client.list_objects_v2(Bucket=bucket)
            return sorted(o["Key"] for o in resp.get("Contents", []))

    return Moto


# -- the history --------------------------------------------------------------------------------


@pytest.mark.slow
def test_s3_history_uses_the_documented_endpoint_variable(cli, planted, moto, tmp_path):
    """IOBENCH_S3_ENDPOINT is where an s3:// history goes (it went to AWS before)."""
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, *RUN, "--output", out,
            "--history", f"s3://{moto.name}/hist")  # fmt: skip
    assert r.code == 0, r.err
    res = result(out)
    assert res["status"] == "complete" and not any("history" in w for w in res["warnings"])
    assert moto.keys() == [f"hist/{res['run_id']}.parquet"]
    listed = cli("history", "list", "--history", f"s3://{moto.name}/hist")
    assert listed.code == 0 and res["run_id"] in listed.out


@pytest.mark.slow
def test_a_typo_in_the_s3_history_bucket_creates_no_bucket(cli, planted, moto, tmp_path):
    before = moto.buckets()
    typo = f"{moto.name}-typo"
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, *RUN, "--output", out,
            "--history", f"s3://{typo}/hist")  # fmt: skip
    assert r.code == 0, r.err
    assert moto.buckets() == before
    warning = _history_warning(out)
    assert f"history bucket '{typo}' does not exist" in warning
    assert "iobench never creates buckets" in warning
    assert "Warnings (1)" in r.out and "history not updated" in r.out  # the table still prints


@pytest.mark.slow
def test_s3_history_without_credentials_is_a_warning(cli, planted, moto, monkeypatch, tmp_path):
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # an earlier test's instance holds credentials
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, *RUN, "--output", out,
            "--history", f"s3://{moto.name}/hist")  # fmt: skip
    assert r.code == 0, r.err
    assert "NoCredentialsError" in _history_warning(out)
    assert "seq-write" in r.out and planted.unchanged()


@pytest.mark.parametrize("command", ["list", "compare"])
def test_a_history_that_cannot_be_listed_is_one_line_not_an_internal_error(
    cli, monkeypatch, tmp_path, command
):
    """Reading an S3 history without credentials (or with its endpoint down) used to be exit 4
    "internal error: NoCredentialsError" in ``history list`` and ``compare latest``: a
    backend's own exception at the listing is a StoreError naming it (the issue-23 audit)."""
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("IOBENCH_S3_ENDPOINT", "http://127.0.0.1:1")
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()  # an earlier test's instance holds credentials
    argv = {
        "list": ["history", "list", "--history", "s3://no-such-bucket/h"],
        "compare": ["compare", "latest", "latest", "--history", "s3://no-such-bucket/h"],
    }[command]
    r = cli(*argv)
    assert r.code == 4, r.err
    line = one_line(r.err)
    assert "cannot list history no-such-bucket/h: NoCredentialsError" in line, line
    assert "internal error" not in line


def test_any_exception_of_the_history_is_a_warning(cli, planted, monkeypatch, tmp_path):
    """Not only OSError: whatever a backend raises (here a RuntimeError spanning two lines)."""
    from iobench import history

    def boom(*a, **k):
        raise RuntimeError("backend said no\nat all")

    monkeypatch.setattr(history, "_to_parquet_bytes", boom)
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, *RUN, "--output", out,
            "--history", tmp_path / "h")  # fmt: skip
    assert r.code == 0, r.err
    assert _history_warning(out).endswith(": RuntimeError: backend said no at all")


def test_a_failed_run_keeps_its_own_exit_status_when_the_history_fails(
    cli, planted, monkeypatch, tmp_path
):
    from iobench import api

    def boom(*a, **k):
        raise ValueError("history exploded")

    monkeypatch.setattr("iobench.history.append", boom)
    monkeypatch.setattr(api, "run_workload", _failing_run(api.run_workload))
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, *RUN, "--output", out,
            "--history", tmp_path / "h")  # fmt: skip
    assert r.code == 4
    assert "phase seq-write: injected" in one_line(r.err)
    assert any("ValueError: history exploded" in w for w in result(out)["warnings"])


def _failing_run(real):
    """run_workload whose outcome carries an engine error (the result is saved as failed)."""
    from iobench.core.errors import EngineError

    def run(*a, **k):
        outcome = real(*a, **k)
        outcome.error = EngineError("phase seq-write: injected")
        return outcome

    return run


# -- standard output ----------------------------------------------------------------------------


class _FullStdout:
    """A stdout whose every write fails as /dev/full does."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize("fails", [False, True])
def test_a_full_stdout_never_decides_the_exit_status(cli, planted, monkeypatch, tmp_path, fails):
    from iobench import api

    if fails:
        monkeypatch.setattr(api, "run_workload", _failing_run(api.run_workload))
    out = tmp_path / "out"
    args = ["run", "sequential-write", planted.path, *RUN, "--output", out]
    monkeypatch.setattr(sys, "stdout", _FullStdout())
    r = cli(*args)
    assert r.code == (4 if fails else 0), r.err
    lines = without_run_notes(r.err)
    assert lines[0] == (
        "iobench: warning: cannot write to standard output (No space left on device); "
        "nothing more is printed there"
    )
    assert len(lines) == (2 if fails else 1) and "Traceback" not in r.err
    assert result(out)["run_id"]  # the figures are in result.json


def _subprocess_run(tmp_path: Path, planted, redirect: str) -> subprocess.CompletedProcess:
    argv = iobench_cmd("run", "sequential-write", planted.path, *RUN, "--output", tmp_path / "out")
    return subprocess.run(
        ["bash", "-c", f"exec {shlex.join(argv)} {redirect}"],
        env=sub_env(tmp_path),
        stderr=subprocess.PIPE,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "redirect, said",
    [
        (">/dev/full", "cannot write to standard output (No space left on device)"),
        (">&-", "cannot write to standard output (it is closed)"),
    ],
)
def test_stdout_full_or_closed_from_a_shell(planted, tmp_path, redirect, said):
    if redirect == ">/dev/full" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    p = _subprocess_run(tmp_path, planted, redirect)
    assert p.returncode == 0, p.stderr
    said = f"iobench: warning: {said}; nothing more is printed there"
    assert without_run_notes(p.stderr) == [said]
    assert json.loads((tmp_path / "out" / "result.json").read_text())["status"] == "complete"
    assert planted.unchanged()


@pytest.mark.slow
def test_a_closed_pipe_is_silent_and_keeps_the_exit_status(planted, tmp_path):
    """`iobench run … | head -1`: the reader goes away; no message, no traceback, exit 0."""
    out = tmp_path / "out"
    p = subprocess.Popen(
        iobench_cmd("run", "sequential-write", planted.path, *RUN, "--output", out),
        env=sub_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    p.stdout.close()  # nobody reads: the first write meets EPIPE
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert without_run_notes(err.decode()) == []  # the run's plan and steadiness lines only
    assert json.loads((out / "result.json").read_text())["status"] == "complete"
