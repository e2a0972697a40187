"""Credentials never leave the process, and names reach the terminal escaped.

Secrets hold the characters that broke the old masking: ``/`` (a URL's path starts there),
``@`` (user information ends there), ``:`` and ``%``. Every case checks stdout, stderr,
result.json, the history (its Parquet metadata and rows), the listings and the HTML report;
and checks the pieces a backend would quote after splitting the URL at a ``/``, too.
"""

from __future__ import annotations

import json
import re
import sys
import uuid

import fsspec
import pytest
from conftest import SEQ, one_line
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench import report
from iobench.core import redact
from iobench.core.redact import escape_controls, for_terminal, redact_text, redact_url, userinfo
from iobench.result.file import RunResult

# each secret holds one of the characters the issue names, and one holds them all
SECRETS = ["Zq7/Vb3Xk9", "Zq7@Vb3Xk9", "Zq7:Vb3Xk9", "Zq7%2FVb3Xk9", "Zq7/Vb:3@Xk%9"]
KEY = "AKIDQW3RT8"
RUN = ["--set", "size=1MiB", *SEQ, "-q"]


def pieces(secret: str) -> list[str]:
    """The secret, its decoded form, and each piece a backend could quote after splitting it
    at / @ : % (three characters or more)."""
    parts = [p for p in re.split(r"[/@:%]", secret) if len(p) >= 3]
    return [secret, secret.replace("%2F", "/"), KEY, *parts]


def assert_no_secret(secret: str, *texts: str) -> None:
    for text in texts:
        for p in pieces(secret):
            assert p not in text, (p, text)


@pytest.fixture(autouse=True)
def _forget():
    redact.forget()
    yield
    redact.forget()


# -- the masking itself -------------------------------------------------------------------------


@pytest.mark.parametrize("secret", SECRETS)
@pytest.mark.parametrize(
    "scheme", ["s3", "gs", "gcs", "az", "abfs", "http", "https", "ftp", "sftp", "hdfs", "memory"]
)
def test_every_url_form_is_masked(scheme, secret):
    url = f"{scheme}://{KEY}:{secret}@bucket-1/path/x"
    assert userinfo(url) == f"{KEY}:{secret}"
    assert redact_url(url) == f"{scheme}://***@bucket-1/path/x"
    text = f"cannot reach {url}: boom ('{url}') <{url}>"
    assert redact_text(text) == (
        f"cannot reach {scheme}://***@bucket-1/path/x: boom ('{scheme}://***@bucket-1/path/x') "
        f"<{scheme}://***@bucket-1/path/x>"
    )
    # fsspec writes memory:///KEY:… for memory://KEY:…
    assert redact_url(f"memory:///{KEY}:{secret}@b/x") == "memory:///***@b/x"


def test_urls_without_credentials_are_kept():
    for url in ["s3://bucket/name@v1/x", "file:///home/u/a@b", "http://host:8080/p", "memory://x"]:
        assert redact_url(url) == url and redact_text(f"at {url}.") == f"at {url}."


def test_secret_query_values_and_pairs_are_masked():
    url = (
        "https://h.example/b/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKID%2F2026&"
        "X-Amz-Signature=ab12cd&X-Amz-Security-Token=tok/en+1&access_key=ak1&sv=2020&sig=s1g"
    )
    assert redact_url(url) == (
        "https://h.example/b/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=***&"
        "X-Amz-Signature=***&X-Amz-Security-Token=***&access_key=***&sv=2020&sig=***"
    )
    assert redact_text("retry with token=abc123 password=hunter22 size=4") == (
        "retry with token=*** password=*** size=4"
    )
    # the HTML report's escaped '&amp;' separates parameters too
    assert "s1g" not in redact_text("https://h/x?sv=1&amp;sig=s1g")


def test_environment_secrets_and_endpoint_credentials_are_masked(monkeypatch):
    monkeypatch.setenv("AWS_SESSION_TOKEN", "FQoGZXIvYXdzE/session+tok")
    monkeypatch.setenv("IOBENCH_S3_ENDPOINT", "http://minio:Zq7/Vb3Xk9@127.0.0.1:9000")
    text = "token FQoGZXIvYXdzE/session+tok; password Zq7/Vb3Xk9 as given"
    assert redact_text(text) == "token ***; password *** as given"


@pytest.mark.parametrize("secret", SECRETS)
def test_remembered_command_line_secrets_are_masked_without_their_url(secret):
    redact.remember_argv(["run", "x", f"--history=s3://{KEY}:{secret}@bkt/h"])
    # what botocore says about such a "bucket name": the URL's scheme is gone
    text = f'Invalid bucket name "{KEY}:{secret}@bkt": Bucket name must match'
    assert_no_secret(secret, redact_text(text))


@settings(max_examples=200, deadline=None)
@given(
    secret=st.text(alphabet="abcXYZ019/@:%+=~!$", min_size=6, max_size=30),
    scheme=st.sampled_from(["s3", "ftp", "https", "memory"]),
)
def test_any_password_is_masked(secret, scheme):
    masked = redact_text(f"error at {scheme}://user:{secret}@host.example/pre/fix: failed")
    assert secret not in masked
    assert masked.startswith(f"error at {scheme}://***@")


def test_terminal_escapes():
    name = "/t/a\x1b[31mred\x1b]0;title\x07\r\x9b\u202eevil\udcff"
    assert escape_controls(name) == "/t/a\\x1b[31mred\\x1b]0;title\\x07\\x0d\\x9b\\u202eevil\\xff"
    assert escape_controls("table\n\tline") == "table\n\tline"
    assert for_terminal("\x1b s3://k:Zq7/Vb3Xk9@b/x") == "\\x1b s3://***@b/x"


def test_html_report_masks_every_text(monkeypatch):
    secret = "Zq7/Vb:3@Xk%9"
    url = f"memory://{KEY}:{secret}@bucket/x"
    run = RunResult(
        run_id="20260101T000000Z-aaaaaa",
        command=f"iobench run sequential-write {url}",
        started_at="2026-01-01T00:00:00+00:00",
        target={"path_or_url": url, "run_dir": url + "/.iobench-x", "fs_type": "memory"},
        warnings=[f"could not remove {url}/.iobench-x: boom", "path \udcff\x1b[2J"],
        status="complete",
    )
    html = report.render_html(run)
    assert_no_secret(secret, html)
    assert "***@bucket/x" in html
    html.encode("utf-8")  # an undecodable byte of a path does not break the page
    assert "\x1b" not in html


def test_progress_bar_names_are_escaped_and_masked(monkeypatch):
    import io

    from iobench.cli.progress import TqdmProgress

    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    bar = TqdmProgress(enabled=True)
    bar.start("read s3://k:Zq7/Vb3Xk9@b/x\x1b[2J", 100, None)
    bar.update(50, 1)
    bar.close()
    assert "Zq7" not in tty.getvalue() and "\x1b[2J" not in tty.getvalue()
    assert "\\x1b[2J" in tty.getvalue()


# -- whole runs: everything a run writes or prints ----------------------------------------------


@pytest.mark.parametrize("secret", SECRETS)
def test_object_store_urls_with_credentials_are_refused_masked(cli, tmp_path, planted, secret):
    """s3fs would take KEY:SECRET@bucket for a bucket name and quote it back; refused before
    any backend sees it (exit 2, nothing written), the URL masked."""
    url = f"s3://{KEY}:{secret}@bucket/x"
    r = cli("run", "dataset-read", url, "--output", tmp_path / "o")
    assert r.code == 2
    line = one_line(r.err)
    assert "target s3://***@bucket/x has credentials" in line and "AWS_ACCESS_KEY_ID" in line
    assert_no_secret(secret, r.out, r.err)
    r = cli("--debug", "run", "sequential-write", planted.path, *RUN, "--output", tmp_path / "o",
            "--history", f"s3://{KEY}:{secret}@bucket/h")  # fmt: skip
    assert r.code == 2 and "history s3://***@bucket/h has credentials" in r.err
    assert "Traceback" in r.err  # --debug shows the traceback, masked like every other line
    assert_no_secret(secret, r.out, r.err)
    assert not (tmp_path / "o").exists() and planted.unchanged()


def test_a_slash_in_a_password_is_refused_for_any_url(cli, tmp_path):
    r = cli("run", "dataset-read", f"ftp://{KEY}:Zq7/Vb3Xk9@127.0.0.1:1/x", "--output", tmp_path)
    assert r.code == 2
    assert "ftp://***@127.0.0.1:1/x has a '/' in its user name or password" in one_line(r.err)
    assert "%2F" in r.err
    assert_no_secret("Zq7/Vb3Xk9", r.out, r.err)


def _memory_files(prefix: str) -> dict[str, bytes]:
    fs = fsspec.filesystem("memory")
    return {p: fs.cat_file(p) for p in fs.find(prefix)}


@pytest.mark.parametrize("secret", SECRETS)
def test_memory_urls_with_credentials_never_reach_results_history_or_output(
    cli, tmp_path, monkeypatch, secret
):
    """memory:// (any path is a name there) runs; the run dir, the command line, result.json,
    --json, the table, the history's metadata and rows, history list/show: all masked."""
    tag = uuid.uuid4().hex[:8]
    target = f"memory://{KEY}:{secret}@bucket-{tag}/x?X-Amz-Signature=Sig{tag}"
    hist = f"memory://{KEY}:{secret}@hist-{tag}/h"
    out = tmp_path / "out"
    args = ["run", "sequential-write", target, *RUN, "--output", str(out), "--history", str(hist)]
    monkeypatch.setattr(sys, "argv", ["iobench", *args])  # what result.json's command records
    r = cli(*args)
    assert r.code == 0, r.err
    text = (out / "result.json").read_text()
    res = json.loads(text)
    assert res["status"] == "complete"
    assert not [w for w in res["warnings"] if "history" in w], res["warnings"]
    assert res["target"]["run_dir"].startswith(f"memory:///***@bucket-{tag}/x?X-Amz-Signature=***")
    assert f"memory://***@hist-{tag}/h" in res["command"]
    stored = _memory_files(f"/{KEY}:{secret}@hist-{tag}")
    assert len(stored) == 1  # the history file was written where the user asked
    blob = b"".join(stored.values()).decode("latin-1")
    listed = cli("history", "list", "--history", hist)
    shown = cli("history", "show", res["run_id"], "--history", hist)
    shown_json = cli("history", "show", res["run_id"], "--history", hist, "--json")
    as_json = cli("run", "sequential-write", target, *RUN, "--output", tmp_path / "o2", "--json")
    for c in (listed, shown, shown_json, as_json):
        assert c.code == 0, c.err
    assert_no_secret(secret, r.out, r.err, text, blob, listed.out, listed.err, shown.out,
                     shown_json.out, as_json.out, as_json.err)  # fmt: skip
    assert f"Sig{tag}" not in text + blob + r.out + shown.out + as_json.out


def test_unexpected_exception_carrying_a_secret_is_one_masked_line(cli, monkeypatch, tmp_path):
    """The one error printer masks what nobody expected too (a two-line message from a
    backend), and so does --debug's traceback."""
    from iobench import api

    secret = "Zq7/Vb:3@Xk%9"

    def boom(*a, **k):
        raise RuntimeError(f"create failed 's3://{KEY}:{secret}@b':\nInvalid bucket {KEY}:{secret}")

    monkeypatch.setattr(api, "load_workload", boom)
    for debug in ([], ["--debug"]):
        r = cli(*debug, "run", "sequential-write", tmp_path, "--output", tmp_path / "o",
                "--history", f"ftp://{KEY}:{secret.replace('/', '%2F')}@h/x")  # fmt: skip
        assert r.code == 4
        assert_no_secret(secret, r.out, r.err)
        if not debug:
            assert "internal error: RuntimeError: create failed 's3://***@b': Invalid" in one_line(
                r.err
            )


@pytest.mark.slow
def test_endpoint_with_credentials_from_the_environment(cli, moto_endpoint, monkeypatch, tmp_path):
    """IOBENCH_S3_ENDPOINT=http://user:SECRET@host: the endpoint is recorded masked and every
    message quoting it is masked (here: a bucket that does not exist)."""
    secret = "Zq7/Vb:3@Xk%9"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secretvalue0123")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    host = moto_endpoint.removeprefix("http://")
    monkeypatch.setenv("IOBENCH_S3_ENDPOINT", f"http://minio:{secret.replace('/', '%2F')}@{host}")
    r = cli("run", "dataset-read", "s3://no-such-bucket-iobench/x", "--output", tmp_path / "o")
    assert r.code == 2
    assert_no_secret(secret, r.out, r.err)
    assert "secretvalue0123" not in r.out + r.err


# -- terminal escapes ---------------------------------------------------------------------------


def test_escape_sequences_in_a_missing_target_are_escaped(cli, tmp_path):
    bad = tmp_path / "no\x1b]0;pwned\x07\x1b[2Jsuch\r"
    r = cli("run", "sequential-write", bad)
    assert r.code == 2
    line = one_line(r.err)
    assert "\x1b" not in r.err and "\r" not in r.err and "\x07" not in r.err
    assert "no\\x1b]0;pwned\\x07\\x1b[2Jsuch\\x0d does not exist" in line


def test_a_target_named_with_escapes_and_undecodable_bytes_runs_and_prints_escaped(
    cli, tmp_path, monkeypatch
):
    """A directory whose name holds an escape sequence and a byte that is no UTF-8: the run
    completes, the table shows the name escaped, the history append succeeds."""
    target = tmp_path / ("dir\x1b[31m" + b"\xff".decode("utf-8", "surrogateescape"))
    target.mkdir()
    out = tmp_path / "out"
    hist = tmp_path / "hist"
    args = [
        "run",
        "sequential-write",
        str(target),
        *RUN,
        "--output",
        str(out),
        "--history",
        str(hist),
    ]
    monkeypatch.setattr(sys, "argv", ["iobench", *args])  # the command column holds the name
    r = cli(*args)
    assert r.code == 0, r.err
    assert "\x1b" not in r.out + r.err
    assert "dir\\x1b[31m\\xff" in r.out
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "complete" and not res["warnings"], res["warnings"]
    assert len(list(hist.glob("*.parquet"))) == 1
    listed = cli("history", "list", "--history", hist)
    assert listed.code == 0 and res["run_id"] in listed.out


def test_a_long_warning_is_masked_before_it_is_wrapped():
    """The table wraps warnings at 120 columns: a URL cut in two would escape the masking at
    stdout, so bullets are masked first."""
    secret = "Zq7/Vb:3@Xk%9" + "w" * 150  # longer than a line
    url = f"memory://{KEY}:{secret}@bucket/x"
    run = RunResult(
        run_id="20260101T000000Z-aaaaaa",
        command="iobench run x",
        started_at="2026-01-01T00:00:00+00:00",
        warnings=[f"history not updated: cannot write run to history {url}: boom"],
    )
    text = report.render_terminal(run)
    assert "history not updated: cannot write run to history memory://***@bucket/x: boom" in text
    assert "wwwww" not in text and "Zq7" not in text


def test_a_stored_result_from_before_the_masking_is_shown_masked(cli, tmp_path):
    """A result.json written by an older iobench still holds the URL: `iobench report` shows
    it masked, also where the Command line wraps (the masking comes before the wrapping)."""
    secret = "Zq7/Vb:3@Xk%9" + "w" * 130
    url = f"memory://{KEY}:{secret}@bucket/x"
    run = RunResult(
        run_id="20260101T000000Z-aaaaaa",
        command=f"iobench run sequential-write {url} --set size=1MiB",
        started_at="2026-01-01T00:00:00+00:00",
        target={"path_or_url": url, "fs_type": "memory"},
    )
    (tmp_path / "result.json").write_text(json.dumps(run.to_dict()))
    r = cli("report", tmp_path / "result.json")
    assert r.code == 0, r.err
    assert "iobench run sequential-write memory://***@bucket/x --set size=1MiB" in r.out
    assert_no_secret(secret, r.out, r.err)
    assert "wwwww" not in r.out
