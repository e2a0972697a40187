"""compare as a CI gate: it must not pass when nothing was measured, and bad input is named.

Exit codes: 0 no regression, 1 confirmed regression (with --fail-on unconfirmed also an
unconfirmed move the wrong way), 2 bad input (one line on stderr), 3 not comparable: different
workloads or specs, or no metric measured in both runs, with or without --strict; --strict adds
a different host, storage, engine, cache mode or an incomplete run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import one_line
from factories import MiB, make_phase, make_run

from iobench import history
from iobench.result.file import save


def _result(tmp_path: Path, name: str, **kw) -> Path:
    kw.setdefault(
        "phases",
        [make_phase("seq-write", "write", bandwidth=[500 * MiB], latency_p99=[0.01])],
    )
    run = make_run(f"20250101T00000{len(name)}Z-{name}", **kw)
    return save(run, tmp_path / name)


def _edit(path: Path, **changes) -> Path:
    doc = json.loads(path.read_text())
    doc.update(changes)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("extra", [[], ["--strict"], ["--fail-on", "never"], ["--format", "json"]])
def test_current_that_measured_nothing_fails_the_gate(cli, tmp_path, extra):
    """What an interrupt before the first phase leaves: a result with no phases."""
    base = _result(tmp_path, "base")
    empty = _result(tmp_path, "empty", phases=[], status="interrupted")
    r = cli("compare", base, empty, *extra)
    assert r.code == 2, (r.code, r.out, r.err)
    line = one_line(r.err)
    assert "current run 20250101T000005Z-empty measured nothing (interrupted, 0 phases)" in line
    assert "nothing to compare" in line and r.out == ""
    r = cli("compare", empty, base, *extra)
    assert r.code == 2 and "baseline run" in one_line(r.err)


@pytest.mark.parametrize("extra", [[], ["--strict"]])
def test_runs_with_no_metric_in_common_fail_the_gate(cli, tmp_path, extra):
    base = _result(tmp_path, "base")
    other = _result(
        tmp_path, "other", phases=[make_phase("ckpt-save", "ckpt_save", bandwidth=[1e9])]
    )
    r = cli("compare", base, other, *extra)
    assert r.code == 3, (r.code, r.out, r.err)
    assert "nothing compared: no metric was measured in both runs" in r.out


@pytest.mark.parametrize("pattern", ["nosuchmetric=5%", "seq-wirte.bandwidth=5%", "*wait*=5%"])
def test_threshold_pattern_that_matches_nothing_is_bad_input(cli, tmp_path, pattern):
    base, cur = _result(tmp_path, "base"), _result(tmp_path, "cur")
    r = cli("compare", base, cur, "--threshold", pattern)
    assert r.code == 2, (r.code, r.out, r.err)
    line = one_line(r.err)
    key = pattern.split("=")[0]
    assert f"--threshold {key!r} matches no metric of these runs" in line
    assert "use one of bandwidth, latency_p99" in line and r.out == ""
    ok = cli("compare", base, cur, "--threshold", "bandwidth=5%")
    assert ok.code == 0, ok.err


@pytest.mark.parametrize(
    ("version", "words"),
    [
        (0, "schema_version 0 is not valid (iobench results start at 1)"),
        (-3, "schema_version -3 is not valid"),
        ("abc", "schema_version 'abc' is not a version number"),
        ("2", "schema_version '2' is not a version number"),
        (True, "schema_version True is not a version number"),
        (None, "schema_version None is not a version number"),
        (99, "schema_version 99 is newer than this iobench understands (1)"),
    ],
)
def test_bad_schema_version_is_named_as_what_it_is(cli, tmp_path, version, words):
    base = _result(tmp_path, "base")
    bad = _edit(_result(tmp_path, "bad"), schema_version=version)
    r = cli("compare", base, bad)
    assert r.code == 2, (r.code, r.out, r.err)
    line = one_line(r.err)
    assert words in line
    if version != 99:
        assert "newer" not in line and "upgrade" not in line


def test_history_files_with_a_bad_schema_version_are_skipped_and_named(tmp_path):
    url = str(tmp_path / "h")
    good, zero = make_run("20250101T000000Z-good"), make_run("20250102T000000Z-zero")
    zero.schema_version = 0
    for run in (good, zero):
        history.append(run, url)
    seen: list[str] = []
    assert [r.run_id for r in history.list_runs(url, on_warning=seen.append)] == [good.run_id]
    assert len(seen) == 1 and "schema_version 0 is not valid" in seen[0]
    assert "newer" not in seen[0]


@pytest.mark.parametrize("extra", [[], ["--strict"], ["--threshold", "50%"]])
def test_a_different_spec_never_passes_the_gate(cli, tmp_path, extra):
    base = _result(tmp_path, "base")
    other = _result(tmp_path, "other", spec_hash="spec-2")
    r = cli("compare", base, other, *extra)
    assert r.code == 3, (r.code, r.out, r.err)
    assert "not comparable: workload spec differs: spec_hash spec-1 vs spec-2" in r.err
    assert cli("compare", base, other, "--fail-on", "never").code == 0


def test_fail_on_unconfirmed_fails_a_wrong_way_move_no_test_can_confirm(cli, tmp_path):
    base = _result(tmp_path, "base")
    slow = _result(
        tmp_path,
        "slowed",
        phases=[make_phase("seq-write", "write", bandwidth=[250 * MiB], latency_p99=[0.01])],
    )
    r = cli("compare", base, slow)
    assert r.code == 0 and "seq-write.bandwidth −50.0 %" in r.out
    assert "unconfirmed: no spread measured (1/1)" in r.out
    r = cli("compare", base, slow, "--fail-on", "unconfirmed")
    assert r.code == 1, (r.code, r.out, r.err)
    assert cli("compare", slow, base, "--fail-on", "unconfirmed").code == 0  # the right way


def test_strict_fails_a_different_engine(cli, tmp_path):
    base, other = _result(tmp_path, "base"), _result(tmp_path, "other", engine="fio")
    assert cli("compare", base, other).code == 0
    r = cli("compare", base, other, "--strict")
    assert r.code == 3 and "engine differs: posix vs fio" in r.out
