"""result.json and history files are written atomically (temporary name, fsync, rename): a
write cut short by an error, an interruption or a kill leaves the old state intact and, when
the process lives on to clean up, no temporary file.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SEQ, debris, no_temp_files, one_line, snapshot

from iobench import history
from iobench.core.errors import StoreError
from iobench.result import file as results
from iobench.result.file import RunResult


def _raise(exc):
    def f(*a, **k):
        raise exc

    return f


@pytest.mark.parametrize(
    ("target", "exc"),
    [
        ("rename", OSError(errno.EIO, "Input/output error")),
        ("fsync", OSError(errno.ENOSPC, "No space left on device")),
        ("fsync", KeyboardInterrupt()),
    ],
    ids=["rename-fails", "disk-full-at-fsync", "ctrl-c-mid-write"],
)
def test_atomic_write_cut_short_keeps_the_old_file(tmp_path, monkeypatch, target, exc):
    path = tmp_path / "result.json"
    path.write_bytes(b'{"old": true}\n')
    monkeypatch.setattr(results.os, target, _raise(exc))
    with pytest.raises(type(exc)):
        results.atomic_write_bytes(path, b'{"new": true}\n' * 1000)
    monkeypatch.undo()
    assert path.read_bytes() == b'{"old": true}\n'
    assert os.listdir(tmp_path) == ["result.json"]


def test_a_killed_writer_leaves_the_old_file_and_only_a_hidden_temp(tmp_path):
    """SIGKILL between write and rename: nobody can clean up, but readers see the old file,
    and the leftover is a dot-file that history listings skip."""
    path = tmp_path / "result.json"
    path.write_bytes(b"old\n")
    code = (
        "import os, sys, time\n"
        "from iobench.result import file as results\n"
        "real = os.fsync\n"
        "def slow(fd):\n"
        "    print('writing', flush=True); time.sleep(60)\n"
        "results.os.fsync = slow\n"
        f"results.atomic_write_bytes({str(path)!r}, b'new' * 100000)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert proc.stdout.readline().strip() == "writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert path.read_bytes() == b"old\n"
    left = [n for n in os.listdir(tmp_path) if n != "result.json"]
    assert len(left) == 1 and left[0].startswith(".result.json.") and left[0].endswith(".tmp")


def _run(run_id: str) -> RunResult:
    return RunResult(run_id=run_id, command="iobench run x", started_at="2026-01-01T00:00:00+00:00")


@pytest.mark.parametrize(
    "fail",
    ["link-and-rename", "fsync", "interrupt"],
)
def test_history_append_cut_short_leaves_no_trace(tmp_path, monkeypatch, fail):
    hist = tmp_path / "history"
    history.append(_run("20260101T000000Z-aaaaaa"), str(hist))
    before = snapshot(hist)
    if fail == "link-and-rename":
        monkeypatch.setattr(history.os, "link", _raise(OSError(errno.EPERM, "no links here")))
        monkeypatch.setattr(history.os, "rename", _raise(OSError(errno.EIO, "I/O error")))
        expected: type[BaseException] = StoreError
    elif fail == "fsync":
        monkeypatch.setattr(history.os, "fsync", _raise(OSError(errno.ENOSPC, "disk full")))
        expected = StoreError
    else:
        monkeypatch.setattr(history.os, "fsync", _raise(KeyboardInterrupt()))
        expected = KeyboardInterrupt
    with pytest.raises(expected):
        history.append(_run("20260102T000000Z-bbbbbb"), str(hist))
    monkeypatch.undo()
    assert snapshot(hist) == before
    assert [r.run_id for r in history.list_runs(str(hist))] == ["20260101T000000Z-aaaaaa"]


def test_history_never_replaces_a_stored_run(tmp_path):
    hist = tmp_path / "history"
    history.append(_run("20260101T000000Z-aaaaaa"), str(hist))
    before = snapshot(hist)
    with pytest.raises(StoreError, match="already holds run"):
        history.append(_run("20260101T000000Z-aaaaaa"), str(hist))
    assert snapshot(hist) == before and no_temp_files(hist)


def test_result_save_failing_at_the_end_of_a_run(cli, planted, tmp_path, monkeypatch):
    """The rename of result.json fails (a first save links the temp file into place, so that
    it never replaces anything): exit 4, the figures are printed, no temp file."""
    monkeypatch.setattr(results.os, "replace", _raise(OSError(errno.EIO, "Input/output error")))
    monkeypatch.setattr(results.os, "link", _raise(OSError(errno.EIO, "Input/output error")))
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, "--set", "size=4MiB", *SEQ, "--output",
            out, "-q", "--no-history")  # fmt: skip
    assert r.code == 4, r.err
    assert "could not be saved" in one_line(r.err) and "Input/output error" in r.err
    assert "seq-write" in r.out
    assert not (out / "result.json").exists() and no_temp_files(out)
    assert debris(planted.path) == [] and planted.unchanged()


def test_history_append_failing_after_a_run(cli, planted, tmp_path, monkeypatch):
    """The run's history entry cannot be stored: the run stands (exit 0), its result says
    why, and the history holds what it held."""
    hist = tmp_path / "history"
    history.append(_run("20260101T000000Z-aaaaaa"), str(hist))
    before = snapshot(hist)
    # the history's no-clobber move fails (no hard links, then the rename): result.json's own
    # save, by the same rule (iobench.core.safeio), is left to work
    from iobench.core import safeio

    real_link, real_rename = os.link, os.rename

    def in_hist(kw) -> bool:
        return os.readlink(f"/proc/self/fd/{kw['dst_dir_fd']}") == str(hist)

    def link(*a, **kw):
        if in_hist(kw):
            raise OSError(errno.EPERM, "no links here")
        return real_link(*a, **kw)

    def rename(*a, **kw):
        if kw.get("dst_dir_fd") is not None and in_hist(kw):
            raise OSError(errno.EIO, "Input/output error")
        return real_rename(*a, **kw)

    monkeypatch.setattr(safeio.os, "link", link)
    monkeypatch.setattr(safeio.os, "rename", rename)
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, "--set", "size=4MiB", *SEQ, "--output",
            out, "-q", "--history", hist)  # fmt: skip
    monkeypatch.undo()
    assert r.code == 0, r.err
    saved = results.load(out)
    assert any("history not updated" in w and "Input/output error" in w for w in saved.warnings)
    assert snapshot(hist) == before
    assert Path(out / "result.json").is_file() and no_temp_files(out)
