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
        "run", "sequential-write", target, "--engine", "fio", "--set", "size=2MiB",
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
