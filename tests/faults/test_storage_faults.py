"""Storage faults: the disk fills up mid-run, the target is read-only or not ours to write,
the run directory vanishes, the result directory is full, the cleanup itself fails, O_DIRECT
is refused. Each: the exit code, one line naming the cause, what was measured kept and
marked, nothing left in the target, user files byte-identical.

A full disk is honest here: the run passes the free-space check, then the test fills the
(small tmpfs) filesystem from inside the phase, outside the target, as another process
writing to the same filesystem would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from conftest import (
    SEQ,
    SMALL,
    assert_failed_run,
    debris,
    fill,
    have,
    iobench_cmd,
    no_temp_files,
    one_line,
    plant,
    remount_ro,
    result,
    snapshot,
    sub_env,
)

import iobench.target as target_mod


def _seq(target: Path, out: Path, *extra: str) -> list:
    return ["run", "sequential-write", target, "--set", "size=4MiB", *SEQ, "--output", out,
            "-q", *extra]  # fmt: skip


# -- disk full --------------------------------------------------------------------------------


def test_disk_full_mid_write(cli, tmpfs, tmp_path, trip):
    fs = tmpfs("128m")
    planted = plant(fs / "target")
    t = trip("seq-write", fill(fs), on=(os, "pwrite"), after=2)
    r = cli(*_seq(planted.path, tmp_path / "out"))
    assert t.fired_in == "seq-write"
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "disk full", "ENOSPC", "seq-write")
    assert [p["name"] for p in res["phases"]] == ["seq-write"]  # the read never started
    assert res["phases"][0]["status"] in ("partial", "failed")
    assert "disk full" in res["phases"][0]["error"]
    assert sorted(os.listdir(fs)) == ["filler", "target"]


def test_disk_full_mid_write_with_forked_workers(cli, tmpfs, tmp_path, trip):
    fs = tmpfs("128m")
    planted = plant(fs / "target")
    t = trip("seq-write", fill(fs), on=(os, "pwrite"), after=2)
    args = _seq(planted.path, tmp_path / "out", "--set", "jobs=3", "--set", "size=2MiB")
    r = cli(*args)  # 3 workers on 2 CPUs: worker processes
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "disk full")
    assert res["phases"][0]["extra"].get("workers") in ("processes", None)


@pytest.mark.skipif(not have("fio"), reason="fio is not installed (apt-get install fio)")
def test_disk_full_with_fio(cli, tmpfs, tmp_path, trip):
    fs = tmpfs("128m")
    planted = plant(fs / "target")
    t = trip("seq-write", fill(fs), on=(subprocess, "Popen"), after=1)  # before fio starts
    r = cli(*_seq(planted.path, tmp_path / "out", "--engine", "fio"))
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "No space left on device")
    assert res["phases"][0]["name"] == "seq-write"
    assert res["phases"][0]["status"] in ("partial", "failed")


def test_disk_full_in_torch_save(cli, tmpfs, tmp_path, trip):
    import torch

    fs = tmpfs("128m")
    planted = plant(fs / "target")
    t = trip(None, fill(fs), on=(torch, "save"), after=1)
    r = cli("run", "checkpoint-smallfile", planted.path, *SMALL["checkpoint-smallfile"],
            "--output", tmp_path / "out", "-q")  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "disk full", "No space left")
    # the metadata phases before the checkpoint are kept
    assert [p["name"] for p in res["phases"]][:2] == ["ckpt-create", "ckpt-stat"]


def test_disk_full_in_dcp_save_is_one_short_line(cli, tmpfs, tmp_path, monkeypatch, trip):
    import torch.distributed.checkpoint as dcp

    fs = tmpfs("128m")
    planted = plant(fs / "target")
    t = trip(None, fill(fs), on=(dcp, "save"), after=1)
    r = cli("run", "checkpoint-smallfile", planted.path, *SMALL["checkpoint-smallfile"],
            "--set", "metadata=false", "--output", tmp_path / "out", "-q")  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "No space left on device")
    assert [p["name"] for p in res["phases"]] == ["ckpt-save", "ckpt-load"]
    # torch's writer thread died: recorded as a warning, not a traceback on stderr
    assert any("thread" in w and "No space left" in w for w in res["warnings"])
    assert len(one_line(r.err)) < 400 and "Traceback" not in res["error"]


def test_disk_full_writing_the_dataset(cli, tmpfs, tmp_path, trip):
    fs = tmpfs("128m")
    planted = plant(fs / "target")
    t = trip(None, fill(fs), on=(os, "fsync"), after=1)  # the dataset's first file is written
    r = cli("run", "dataset-read", planted.path, *SMALL["dataset-read"], "--output",
            tmp_path / "out", "-q")  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "disk full", "dataset-write")
    assert res["phases"][0]["name"] == "dataset-write"
    assert res["phases"][0]["status"] in ("partial", "failed")


def test_result_directory_full(cli, planted, tmpfs, tmp_path, trip):
    """The run succeeds but its result cannot be saved: exit 4, the figures still printed,
    no temporary file left beside the (absent) result.json."""
    fs = tmpfs("1m", name="results")
    out = fs / "out"
    t = trip("seq-read", fill(fs), on=(os, "preadv"), after=1)
    r = cli(*_seq(planted.path, out))
    assert t.fired
    assert r.code == 4, r.err
    line = one_line(r.err)
    assert "could not be saved" in line and "No space left" in line
    assert "seq-read" in r.out and "MiB/s" in r.out  # what was measured is not lost
    assert not (out / "result.json").exists() and no_temp_files(fs)
    assert debris(planted.path) == [] and planted.unchanged()


# -- an unusable target: exit 2, nothing written ----------------------------------------------


def test_target_on_a_read_only_filesystem(cli, tmpfs, tmp_path, monkeypatch):
    fs = tmpfs("8m")
    planted = plant(fs / "target")
    remount_ro(fs)
    monkeypatch.chdir(tmp_path)
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"])
    assert r.code == 2
    assert "read-only" in one_line(r.err) and str(planted.path) in r.err
    assert r.out == "" and planted.unchanged()
    assert not (tmp_path / "iobench-results").exists()


@pytest.fixture
def nobody_base():
    """A world-traversable temp dir under /var/tmp that user nobody can reach."""
    if os.geteuid() != 0 or not have("setpriv"):
        pytest.skip("needs root and setpriv to run as user nobody")
    base = Path(tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _as_nobody(base: Path, *args) -> subprocess.CompletedProcess:
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *iobench_cmd(*args)]
    env = sub_env(base, HOME=str(base))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=base, timeout=120)
    if "iobench: error" not in p.stderr and p.returncode != 0:
        pytest.skip(f"user nobody cannot run this checkout: {p.stderr.strip()[-200:]}")
    return p


def test_permission_denied_as_an_unprivileged_user(nobody_base):
    base = nobody_base
    # a target owned by root (0755): nobody may enter it, not write in it
    planted = plant(base / "target")
    walled = base / "walled"  # 0700: nobody may not even look inside
    walled.mkdir(mode=0o700)
    inner = plant(walled / "target")
    results = base / "results"  # a writable target, but a result dir nobody cannot write
    results.mkdir(mode=0o755)
    mine = base / "mine"
    mine.mkdir()
    mine.chmod(0o777)
    cases = {
        "not writable": ["run", "sequential-write", planted.path, *SMALL["sequential-write"]],
        "not accessible": ["run", "sequential-write", inner.path, *SMALL["sequential-write"]],
        "cannot write results": ["run", "sequential-write", mine, *SMALL["sequential-write"],
                                 "--output", results / "out"],
        "loader not writable": ["loader", planted.path, "--profile", "resnet50-h100"],
    }  # fmt: skip
    for words, args in cases.items():
        p = _as_nobody(base, *args)
        assert p.returncode == 2, (words, p.stderr)
        assert words.removeprefix("loader ") in one_line(p.stderr), p.stderr
        assert p.stdout == ""
    assert planted.unchanged() and inner.unchanged()
    assert os.listdir(mine) == [] and os.listdir(results) == []
    assert not (base / "iobench-results").exists()


# -- the run directory vanishes, or cannot be removed -----------------------------------------


def test_run_directory_removed_mid_run(cli, planted, tmp_path, trip):
    """Someone's cleanup job deletes .iobench-* while the write phase runs: the write goes on
    into unlinked files; the read finds nothing, and the line says what happened."""

    def remove_run_dir():
        for d in debris(planted.path):
            shutil.rmtree(planted.path / d)

    t = trip("seq-write", remove_run_dir, on=(os, "pwrite"), after=2)
    r = cli(*_seq(planted.path, tmp_path / "out", "--set", "rate=16MiB"))
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "was removed during the run")
    assert "No such file" in res["error"]
    assert [(p["name"], p["status"]) for p in res["phases"]][0] == ("seq-write", "ok")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for chattr +i")
def test_cleanup_that_fails_is_named(cli, planted, tmp_path, trip):
    """A file in the run directory cannot be removed (immutable): the run still succeeds,
    and the result says what was left behind and where."""
    stuck: list[Path] = []

    def make_immutable():
        f = next((planted.path / debris(planted.path)[0] / "seq").iterdir())
        if subprocess.run(["chattr", "+i", str(f)], capture_output=True).returncode == 0:
            stuck.append(f)

    trip("seq-read", make_immutable, on=(os, "preadv"), after=1)
    try:
        r = cli(*_seq(planted.path, tmp_path / "out"))
        if not stuck:
            pytest.skip("this filesystem has no immutable attribute")
        assert r.code == 0, r.err
        res = result(tmp_path / "out")
        left = [w for w in res["warnings"] if "could not remove the run directory" in w]
        assert len(left) == 1 and debris(planted.path)[0] in left[0]
        assert "remove it by hand" in left[0]
    finally:
        for f in stuck:
            subprocess.run(["chattr", "-i", str(f)])
        for d in debris(planted.path):
            shutil.rmtree(planted.path / d)
    assert planted.unchanged()


def test_a_symlink_in_place_of_the_run_dir_is_never_followed(cli, planted, tmp_path, monkeypatch):
    """If the run directory is swapped for a link to someone's data before the cleanup, the
    cleanup removes nothing through it."""
    import iobench.run.session as session_mod

    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.dat").write_bytes(os.urandom(4096))
    before = snapshot(victim)
    moved = tmp_path / "moved"
    real = session_mod.remove_run_dir

    def swap_then_remove(t):
        os.rename(t.run_dir, moved)
        os.symlink(victim, t.run_dir)
        real(t)

    monkeypatch.setattr(session_mod, "remove_run_dir", swap_then_remove)
    r = cli(*_seq(planted.path, tmp_path / "out"))
    assert r.code == 0, r.err
    assert snapshot(victim) == before
    link = planted.path / debris(planted.path)[0]
    assert link.is_symlink()  # left as it was found: it is not ours to remove
    assert not moved.exists()  # ours, removed through its descriptor where it was moved to
    warning = next(w for w in result(tmp_path / "out")["warnings"] if "symbolic link" in w)
    assert "through the descriptor it held" in warning and str(moved) in warning
    link.unlink()
    assert planted.unchanged()


# -- O_DIRECT refused -------------------------------------------------------------------------


def test_o_direct_refused_falls_back_and_says_so(cli, planted, tmp_path, monkeypatch):
    monkeypatch.setattr(target_mod, "probe_direct_io", lambda d, fd=None: (False, "EINVAL"))
    r = cli(*_seq(planted.path, tmp_path / "out"), "--direct")
    assert r.code == 0, r.err
    res = result(tmp_path / "out")
    assert res["target"]["direct_io"] == "unsupported"
    assert res["target"]["direct_reason"] == "EINVAL"
    read = next(p for p in res["phases"] if p["op"] == "read")
    assert read["cache"] == "dropped"
    assert all(p["cache"] != "direct" for p in res["phases"])
    assert any("O_DIRECT unavailable" in w and "EINVAL" in w for w in res["warnings"])
    assert debris(planted.path) == [] and planted.unchanged()


# -- two runs at once ---------------------------------------------------------------------------


def test_two_runs_on_the_same_target_at_once(planted, tmp_path):
    """Two processes, one target, one history: two run directories, two results, two history
    files, nothing left."""
    hist = tmp_path / "history"
    procs = [
        subprocess.Popen(
            iobench_cmd(
                "run",
                "sequential-write",
                planted.path,
                "--set",
                "size=8MiB",
                "--set",
                "rate=16MiB",
                *SEQ,
                "--output",
                tmp_path / f"out{k}",
                "-q",
                "--history",
                hist,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=sub_env(tmp_path),
        )  # fmt: skip
        for k in range(2)
    ]
    seen: set[str] = set()
    while any(p.poll() is None for p in procs):
        seen.update(debris(planted.path))
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_o, e) in zip(procs, outs, strict=True):
        assert p.returncode == 0, e
    ids = {result(tmp_path / f"out{k}")["run_id"] for k in range(2)}
    assert len(ids) == 2
    assert len(seen) == 2, seen  # each had its own run directory
    assert sorted(f.stem for f in hist.glob("*.parquet")) == sorted(ids)
    assert no_temp_files(hist)
    for k in range(2):
        assert all(ph["status"] == "ok" for ph in result(tmp_path / f"out{k}")["phases"])
    assert debris(planted.path) == [] and planted.unchanged()
    listing = subprocess.run(
        iobench_cmd("history", "list", "--history", hist), capture_output=True, text=True,
        env=sub_env(tmp_path), timeout=60,
    )  # fmt: skip
    assert listing.returncode == 0 and all(i in listing.stdout for i in ids)
