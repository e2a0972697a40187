"""fio missing, failing, killed or printing junk, through the CLI (tests/test_fio_engine.py
covers the same stand-ins at the engine level); a history directory holding a corrupt file, a
truncated one and one from a newer iobench.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import ROOT, SEQ, assert_failed_run, debris, one_line, result, snapshot

GOLDEN = ROOT / "tests" / "golden" / "fio-3.33-seqwrite.json"
needs_golden = pytest.mark.skipif(not GOLDEN.is_file(), reason="tests/golden is not present")


def _fio_run(planted, out: Path, *extra: str) -> list:
    # the golden output is 2 jobs x 4 MiB of 1 MiB writes
    return ["run", "sequential-write", planted.path, "--engine", "fio", "--set", "size=4MiB",
            *SEQ, "--output", out, "-q", *extra]  # fmt: skip


def test_fio_missing_from_path(cli, planted, tmp_path, monkeypatch):
    from iobench.core import tools

    empty = tmp_path / "emptybin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    tools.fio_version.cache_clear()
    monkeypatch.chdir(tmp_path)
    r = cli("run", "sequential-write", planted.path, "--engine", "fio", *SEQ)
    tools.fio_version.cache_clear()
    assert r.code == 2
    assert "install fio (apt-get install fio) or use --engine posix" in one_line(r.err)
    assert r.out == "" and not (tmp_path / "iobench-results").exists()
    assert debris(planted.path) == [] and planted.unchanged()


def test_fio_failing(cli, planted, tmp_path, fake_fio):
    fake_fio('echo "fio: first line" >&2; echo "fio: this stand-in always fails" >&2; exit 1')
    r = cli(*_fio_run(planted, tmp_path / "out"))
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "status 1", "always fails")
    assert res["status"] == "failed"
    assert [(p["name"], p["status"]) for p in res["phases"]] == [("seq-write", "failed")]


def test_fio_killed(cli, planted, tmp_path, fake_fio):
    fake_fio("kill -9 $$")
    r = cli(*_fio_run(planted, tmp_path / "out"))
    assert_failed_run(r, tmp_path / "out", planted, 4, "fio exited with status -9")


@needs_golden
def test_fio_output_truncated(cli, planted, tmp_path, fake_fio):
    fake_fio(f'head -c 3000 "{GOLDEN}" > "$out"; echo "fio: cut short" >&2')
    r = cli(*_fio_run(planted, tmp_path / "out"))
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "could not be read", "cut short")
    assert res["phases"][0]["name"] == "seq-write"


@needs_golden
def test_fio_output_with_junk_around_the_json(cli, planted, tmp_path, fake_fio):
    fake_fio(f'{{ echo "fio: some warning"; cat "{GOLDEN}"; echo "fio: bye"; }} > "$out"')
    r = cli(*_fio_run(planted, tmp_path / "out", "--set", "read_back=false"))
    assert r.code == 0, r.err
    res = result(tmp_path / "out")
    (p,) = res["phases"]
    assert (p["name"], p["bytes"], p["ops"], p["status"]) == ("seq-write", 8 << 20, 8, "ok")
    assert Path(p["extra"]["fio_json"]).read_text().startswith("fio: some warning")
    assert debris(planted.path) == [] and planted.unchanged()


# -- history ------------------------------------------------------------------------------------


def _bad_history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A history dir with a corrupt file, a truncated one and one from a newer iobench."""
    from iobench import history
    from iobench.result.file import RunResult

    hist = tmp_path / "history"
    hist.mkdir()
    (hist / "20200101T000000Z-corrupt.parquet").write_bytes(b"PAR1" + os.urandom(3000))
    newer = RunResult(run_id="20200102T000000Z-newer0", command="iobench run x", started_at="")
    newer.schema_version = 99
    good = history._to_parquet_bytes(newer)
    (hist / "20200102T000000Z-newer0.parquet").write_bytes(good)
    (hist / "20200103T000000Z-cut000.parquet").write_bytes(good[: len(good) // 2])
    return hist, snapshot(hist)


def test_run_and_history_with_corrupt_files(cli, planted, tmp_path):
    hist, before = _bad_history(tmp_path)
    r = cli("run", "sequential-write", planted.path, "--set", "size=4MiB", *SEQ,
            "--output", tmp_path / "out", "-q", "--history", hist)  # fmt: skip
    assert r.code == 0, r.err
    run_id = result(tmp_path / "out")["run_id"]
    after = snapshot(hist)
    assert {k: v for k, v in after.items() if k in before} == before  # byte-identical
    assert set(after) - set(before) == {f"{run_id}.parquet"}

    for args in (["list"], ["show", run_id], ["trend", "seq-write.bandwidth"]):
        r = cli("history", *args, "--history", hist)
        assert r.code == 0, (args, r.err)
        assert run_id in r.out or args[0] == "show"
        warnings = [ln for ln in r.err.splitlines() if ln.strip()]
        assert len(warnings) == 3, r.err
        assert all(ln.startswith("iobench: warning: history: skipped ") for ln in warnings)
        text = " ".join(warnings)
        assert "corrupt.parquet" in text and "cut000.parquet" in text
        assert "schema_version 99 is newer" in text and "upgrade iobench" in text
    assert {k: v for k, v in snapshot(hist).items() if k in before} == before
    assert debris(planted.path) == [] and planted.unchanged()


def test_history_that_cannot_be_written_is_a_warning(cli, planted, tmp_path):
    """The run is not lost because its history entry could not be stored."""
    blocker = tmp_path / "hist-is-a-file"
    blocker.write_text("not a directory")
    r = cli("run", "sequential-write", planted.path, "--set", "size=4MiB", *SEQ,
            "--output", tmp_path / "out", "-q", "--history", blocker)  # fmt: skip
    assert r.code == 0, r.err
    res = result(tmp_path / "out")
    assert res["status"] == "complete"
    assert any(w.startswith("history not updated") for w in res["warnings"]), res["warnings"]
    assert blocker.read_text() == "not a directory"
