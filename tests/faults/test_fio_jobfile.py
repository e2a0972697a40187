"""What reaches fio's job file and command line: nothing a user chose is written there.

fio's job-file parser splits lines at newlines, cuts a value at ``;`` or ``#``, expands
``${VAR}`` and keywords such as ``$mb_memory``, and creates missing directories of a
``filename=``. A target path written into the job file could therefore name a user's file:
``DIR/A\\nfilename=DIR/victim.txt\\n#B`` overwrote ``DIR/victim.txt``. fio now runs in the run
directory and the job file names files relative to it, so each of these targets runs exactly
as it does with the posix engine: exit 0, the files only under the run directory, every user
file byte-identical (sha256 before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import pytest
from conftest import debris, have, plant

pytestmark = pytest.mark.skipif(
    not have("fio"), reason="fio is not installed (apt-get install fio)"
)

MiB = 1 << 20


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _run_fio(cli, target: Path, out: Path):
    return cli(
        "run", "sequential-write", target, "--set", "time=none",
        "--engine", "fio", "--set", "size=2MiB",
        "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--jobs", "2", "-q",
        "--output", out,
    )  # fmt: skip


def _assert_ran_with_fio(r, out: Path) -> None:
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "complete"
    got = [(p["name"], p["status"], p["bytes"], p["extra"]["engine"]) for p in res["phases"]]
    assert got == [("seq-write", "ok", 4 * MiB, "fio"), ("seq-read", "ok", 4 * MiB, "fio")]
    assert not any("engine_fallback" in p["extra"] for p in res["phases"])


def _targets(root: Path) -> dict[str, str]:
    return {
        # the reported case: a newline, a second filename= and a comment to swallow the rest
        "newline": f"A\nfilename={root}/victim.txt\n#B",
        # fio cuts a value at ';' or '#': the file name became DIR/victim.txt
        "semicolon": "victim.txt;y",
        "hash": "victim.txt#y",
        # fio expands ${VAR} (here to nothing) and creates the missing directories
        "env-var": "t${IOBENCH_TEST_EMPTY}",
        # fio replaces $mb_memory with a number (and then failed to parse the name)
        "keyword": "m$mb_memory",
        # ':' separates file names in filename=
        "colon": "a:b",
        "blanks": " lead and trail ",
    }


@pytest.mark.parametrize(
    "case", ["newline", "semicolon", "hash", "env-var", "keyword", "colon", "blanks"]
)
def test_a_target_path_never_reaches_the_fio_job_file(cli, tmp_path, monkeypatch, case):
    root = tmp_path / "root"
    root.mkdir()
    victim = root / "victim.txt"
    victim.write_bytes(os.urandom(5000))
    before = _sha(victim)
    target = root / _targets(root)[case]
    target.mkdir(parents=True)  # "A\nfilename=DIR" is a directory, "victim.txt\n#B" in it
    planted = plant(root)  # user files around the target, hashed (the target is empty)
    monkeypatch.setenv("IOBENCH_TEST_EMPTY", "")
    out = tmp_path / "out"
    r = _run_fio(cli, target, out)
    _assert_ran_with_fio(r, out)
    assert _sha(victim) == before
    assert planted.unchanged()  # nothing created or changed next to the target either
    assert debris(target) == [] and os.listdir(target) == []
    kept = sorted(p.name for p in out.glob("fio-*.fio"))
    assert kept == ["fio-seq-read.fio", "fio-seq-write.fio"]
    for job in kept:
        text = (out / job).read_text()
        assert str(root) not in text and "filename=seq/r0-w0.dat" in text


def test_a_relative_temp_dir_starting_with_a_dash_is_not_an_option_to_fio(
    cli, tmp_path, monkeypatch
):
    """Python's tempfile.tempdir may be relative; the job file's path reaches fio's argv, where
    "-tmp/…/job.fio" would be read as an option."""
    (tmp_path / "-tmp").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", "-tmp")
    planted = plant(tmp_path / "target")
    out = tmp_path / "out"
    r = _run_fio(cli, planted.path, out)
    _assert_ran_with_fio(r, out)
    assert planted.unchanged() and debris(planted.path) == []
    assert os.listdir(tmp_path / "-tmp") == []  # the job directory was removed


def test_a_file_list_longer_than_a_fio_line_runs_with_posix_and_says_why(planted):
    """600 files in every random reader's list: a filename= line of 9,000 characters, longer
    than the 8,191 fio reads in one line (the rest would be parsed as a line of its own). The
    phase runs with the posix engine and records why."""
    from iobench.engines.base import FileSpec, PhaseSpec
    from iobench.engines.fio import FioEngine
    from iobench.engines.posix import PosixEngine
    from iobench.run.runner import PhaseRunner
    from iobench.target import StopFlag, create_run_dir, remove_run_dir, resolve

    t = resolve(str(planted.path))
    create_run_dir(t, "20261201T000000Z-longfl")
    try:
        files = tuple(FileSpec(f"seq/r0-w{i:03d}.dat", 8192) for i in range(600))
        os.makedirs(t.path("seq"))
        PosixEngine().run(PhaseSpec("w", "write", files, jobs=4, block_size=8192), _ctx(t))
        runner = PhaseRunner(t, FioEngine(), StopFlag())
        res = runner.execute(
            PhaseSpec("rand-read", "randread", files, jobs=2, block_size=4096, size=64 << 10,
                      mode="shared", seed=1)
        )  # fmt: skip
        assert (res.status, res.bytes, res.extra["engine"]) == ("ok", 2 * (64 << 10), "posix")
        assert "8191 characters fio reads" in res.extra["engine_fallback"]
        assert any("ran with the posix engine" in w for w in runner.warnings)
    finally:
        remove_run_dir(t)
    assert debris(planted.path) == [] and planted.unchanged()


def _ctx(t):
    from iobench.engines.base import EngineContext
    from iobench.target import StopFlag

    return EngineContext(t.run_dir, StopFlag())
