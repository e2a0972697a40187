"""Files iobench writes: ``report --html``, ``history trend --svg`` and ``--output``'s
result.json go only to regular files; a symlink (dangling or not), a directory, a device, a
FIFO, a read-only place or the input itself is refused with exit 2 before anything is written,
and what was at the path (and behind a link) is byte-identical afterwards. An existing regular
file given to --html/--svg is replaced. Two runs given one ``--output`` at once: the second is
refused (exit 2) before it writes anything; a SIGKILLed run's claim does not outlive it.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import SEQ, debris, iobench_cmd, one_line, remount_ro, sub_env, wait_for

from iobench import history
from iobench.result import file as results
from iobench.result.file import PhaseResult, RunResult


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root``: a sha256 of a regular file's bytes, a link's target, or the
    kind and device of anything else (a FIFO or device is never opened: it would block)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            p = Path(dirpath, name)
            st = os.lstat(p)
            rel = str(p.relative_to(root))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link->" + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = f"{stat.S_IFMT(st.st_mode):o}:{st.st_rdev}"
    return out


def _run(run_id: str = "20260101T000000Z-aaaaaa", bw: float = 5e8) -> RunResult:
    run = RunResult(run_id=run_id, command="iobench run x", started_at="2026-01-01T00:00:00+00:00")
    run.workload = {"name": "sequential-write", "spec_hash": "abc", "params": {}}
    run.phases = [PhaseResult("seq-write", "write", bytes=1 << 20, ops=1, bandwidth_bps=bw)]
    return run


def _user_files(root: Path) -> Path:
    """A user's directory the bad paths point into; snapshot() of it must not change."""
    user = root / "user"
    user.mkdir()
    (user / "victim.txt").write_text("the user's own file\n")
    (user / "sub").mkdir()
    return user


def _bad_paths(tmp_path: Path, source: Path) -> dict[str, tuple[str, str]]:
    """label -> (path given to --html/--svg, words of the refusal)."""
    user = tmp_path / "user"
    (tmp_path / "to-victim").symlink_to(user / "victim.txt")
    (tmp_path / "dangling").symlink_to(user / "not-yet.html")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "to-input").symlink_to(source)
    os.link(source, tmp_path / "hardlink-to-input")
    (tmp_path / "afile").write_text("x")
    paths = {
        "a symlink to a user file": (tmp_path / "to-victim", "is a symbolic link"),
        "a dangling symlink": (tmp_path / "dangling", "is a symbolic link"),
        "a directory": (user / "sub", "is a directory"),
        "a FIFO": (tmp_path / "fifo", "is a FIFO"),
        "the input": (source, "is the input"),
        "a symlink to the input": (tmp_path / "to-input", "is a symbolic link"),
        "a hard link to the input": (tmp_path / "hardlink-to-input", "is the input"),
        "under a file": (tmp_path / "afile" / "r.html", "is not a directory"),
    }
    return {"empty": ("", "is empty"), **{k: (str(p), w) for k, (p, w) in paths.items()}}


BAD = ["a symlink to a user file", "a dangling symlink", "a directory", "a FIFO", "the input",
       "a symlink to the input", "a hard link to the input", "under a file", "empty"]  # fmt: skip


def _assert_refused(r, words: str, tmp_path: Path, before: dict[str, str]) -> None:
    assert r.code == 2, r.err
    assert words in one_line(r.err), r.err
    assert r.out == ""  # refused before the report was printed
    assert snapshot(tmp_path) == before  # every file, link, FIFO and the input as they were


@pytest.mark.parametrize("label", BAD)
def test_report_html_refuses_what_is_not_a_new_or_regular_file(cli, tmp_path, label):
    out = tmp_path / "res"
    source = results.save(_run(), out)
    _user_files(tmp_path)
    path, words = _bad_paths(tmp_path, source)[label]
    before = snapshot(tmp_path)
    _assert_refused(cli("report", out, "--html", path), words, tmp_path, before)


@pytest.mark.parametrize("label", BAD)
def test_history_trend_svg_refuses_what_is_not_a_new_or_regular_file(cli, tmp_path, label):
    hist = tmp_path / "hist"
    history.append(_run(), str(hist))
    source = results.save(_run("20260101T000000Z-bbbbbb"), tmp_path / "res")
    _user_files(tmp_path)
    path, words = _bad_paths(tmp_path, source)[label]
    if label in ("the input", "a hard link to the input"):  # trend has no input file: a file
        words = None
    before = snapshot(tmp_path)
    r = cli("history", "trend", "seq-write.bandwidth", "--history", hist, "--svg", path)
    if words is None:  # an existing regular file: replaced by the plot
        assert r.code == 0, r.err
        assert "<svg" in Path(path).read_text()
        return
    _assert_refused(r, words, tmp_path, before)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a device node")
@pytest.mark.parametrize("command", ["report", "trend"])
def test_a_device_node_is_never_replaced(cli, tmp_path, command):
    """The reported case: `report R --html /dev/full` as root made /dev/full a regular file.
    Here a device node of our own (the same major/minor as /dev/full) stands in for it."""
    dev = tmp_path / "full"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    out = tmp_path / "res"
    results.save(_run(), out)
    hist = tmp_path / "hist"
    history.append(_run(), str(hist))
    args = {
        "report": ["report", out, "--html", dev],
        "trend": ["history", "trend", "seq-write.bandwidth", "--history", hist, "--svg", dev],
    }[command]
    r = cli(*args)
    assert r.code == 2 and "is a character device" in one_line(r.err)
    st = os.lstat(dev)
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 7)


def test_report_html_replaces_an_existing_regular_file_only(cli, tmp_path):
    """Decision: a regular file given explicitly is replaced (as cp and curl -o do); its
    neighbours are untouched and no temporary file is left."""
    out = tmp_path / "res"
    results.save(_run(), out)
    user = _user_files(tmp_path)
    old = user / "old.html"
    old.write_text("an older report\n")
    before = {k: v for k, v in snapshot(user).items() if k != "old.html"}
    r = cli("report", out, "--html", old)
    assert r.code == 0, r.err
    assert old.read_text().startswith("<!DOCTYPE html>")
    assert {k: v for k, v in snapshot(user).items() if k != "old.html"} == before
    assert [n for n in os.listdir(user) if n.endswith(".tmp")] == []


def test_report_html_on_a_read_only_filesystem(cli, tmp_path, tmpfs):
    mnt = tmpfs("8m")
    results.save(_run(), mnt / "res")
    remount_ro(mnt)
    before = snapshot(mnt)
    r = cli("report", mnt / "res", "--html", mnt / "res" / "report.html")
    assert r.code == 2 and "read-only filesystem" in one_line(r.err)
    assert r.out == "" and snapshot(mnt) == before


def test_a_dangling_link_swapped_in_before_the_rename_is_not_followed(tmp_path):
    """The last-moment check: a link that appears between the check and the rename is an
    OSError, and neither the link nor its target is written."""
    path = tmp_path / "result.json"
    victim = tmp_path / "victim"
    path.symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        results.atomic_write_bytes(path, b"{}")
    assert os.readlink(path) == str(victim) and not victim.exists()
    assert os.listdir(tmp_path) == ["result.json"]


def test_a_first_save_never_replaces_a_result(tmp_path):
    """result.json is linked into place on a run's first save: a file that appeared in the
    meantime (another run) stays, and the save is an error."""
    out = tmp_path / "out"
    results.save(_run("20260101T000000Z-first1"), out)
    before = snapshot(out)
    with pytest.raises(FileExistsError):
        results.save(_run("20260101T000000Z-second"), out, new=True)
    assert snapshot(out) == before


# -- --output -----------------------------------------------------------------------------------


def _outputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    user = _user_files(tmp_path)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    (tmp_path / "to-file").symlink_to(user / "victim.txt")
    os.mkfifo(tmp_path / "fifo")
    held = tmp_path / "held-dangling"
    held.mkdir()
    (held / "result.json").symlink_to(user / "victim-result.json")
    held_dir = tmp_path / "held-dir"
    (held_dir / "result.json").mkdir(parents=True)
    return {
        "a file": (user / "victim.txt", "it is a file, not a directory"),
        "a FIFO": (tmp_path / "fifo", "it is a FIFO, not a directory"),
        "a dangling symlink": (tmp_path / "dangling", "which does not exist"),
        "a symlink to a file": (tmp_path / "to-file", "not a directory"),
        "a dir whose result.json is a dangling link": (held, "already holds a result.json"),
        "a dir whose result.json is a directory": (held_dir, "already holds a result.json"),
    }


@pytest.mark.parametrize("label", ["a file", "a FIFO", "a dangling symlink", "a symlink to a file",
                                   "a dir whose result.json is a dangling link",
                                   "a dir whose result.json is a directory"])  # fmt: skip
def test_output_that_is_not_a_usable_directory(cli, planted, tmp_path, label):
    path, words = _outputs(tmp_path)[label]
    before = snapshot(tmp_path)
    r = cli("run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ, "--output", path,
            "-q", "--no-history")  # fmt: skip
    assert r.code == 2, r.err
    assert words in one_line(r.err)
    assert r.out == "" and snapshot(tmp_path) == before
    assert debris(planted.path) == [] and planted.unchanged()


def test_output_on_a_read_only_filesystem(cli, planted, tmp_path, tmpfs):
    mnt = tmpfs("8m")
    remount_ro(mnt)
    r = cli("run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ, "--output",
            mnt / "out", "-q", "--no-history")  # fmt: skip
    assert r.code == 2 and "is on a read-only filesystem" in one_line(r.err)
    assert os.listdir(mnt) == [] and debris(planted.path) == [] and planted.unchanged()


def test_output_a_symlink_to_a_directory_is_followed(cli, planted, tmp_path):
    """Decision, as for TARGET: a link to a directory is followed; the link stays as it was."""
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    r = cli("run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ, "--output", link,
            "-q", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    assert (real / "result.json").is_file() and os.readlink(link) == str(real)
    assert debris(planted.path) == [] and planted.unchanged()


# -- two runs, one --output -------------------------------------------------------------------


def _slow_run(planted, out: Path, tmp_path: Path) -> subprocess.Popen:
    """A run that holds its output directory for seconds: 2 workers at 1 MiB/s each."""
    return subprocess.Popen(
        iobench_cmd("run", "sequential-write", planted.path, "--set", "size=3MiB", *SEQ,
                    "--set", "rate=1MiB", "--set", "read_back=false", "--output", out, "--json",
                    "-q", "--no-history"),
        env=sub_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_second_run_into_the_same_output_is_refused(cli, planted, tmp_path):
    out = tmp_path / "out"
    first = _slow_run(planted, out, tmp_path)
    try:
        wait_for(lambda: debris(planted.path))  # its run dir exists: it holds the claim
        mine = debris(planted.path)
        r = cli("run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ, "--output",
                out, "-q", "--no-history")  # fmt: skip
        assert r.code == 2, r.err
        assert "another iobench run is writing its result to" in one_line(r.err)
        assert r.out == ""
        assert debris(planted.path) == mine  # the second wrote nothing to the target
        assert not (out / "result.json").exists()
        stdout, stderr = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, stderr
    assert json.loads((out / "result.json").read_text())["run_id"] == json.loads(stdout)["run_id"]
    assert debris(planted.path) == [] and planted.unchanged()


def test_a_sigkilled_run_does_not_hold_the_output_forever(cli, planted, tmp_path):
    """The claim is a flock: the kernel drops it with the process. (The killed run's own run
    directory stays: nobody could remove it; see docs/RELIABILITY.md.)"""
    out = tmp_path / "out"
    first = _slow_run(planted, out, tmp_path)
    try:
        left = wait_for(lambda: debris(planted.path))
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    r = cli("run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ, "--output", out,
            "-q", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    assert (out / "result.json").is_file()
    assert debris(planted.path) == left  # only the killed run's directory, as it left it
    for name in left:
        import shutil

        shutil.rmtree(planted.path / name)
    assert planted.unchanged()


def _unlocked(path: Path) -> bool:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_the_claim_is_released_on_every_way_out(cli, planted, tmp_path, trip):
    """In one process: after a run that completed, one interrupted and one refused, the output
    directory is free again (no lock leaked), and a refused run removes the directory it made."""
    done = tmp_path / "done"
    r = cli("run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ, "--output", done,
            "-q", "--no-history")  # fmt: skip
    assert r.code == 0 and _unlocked(done)
    again = cli("run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ, "--output",
                done, "-q", "--no-history")  # fmt: skip
    assert again.code == 2 and _unlocked(done)
    stopped = tmp_path / "stopped"
    trip("seq-write", [signal.SIGINT], on=(os, "pwrite"))
    r = cli("run", "sequential-write", planted.path, "--set", "size=4MiB", *SEQ, "--output",
            stopped, "-q", "--no-history")  # fmt: skip
    assert r.code == 130 and _unlocked(stopped)
    assert debris(planted.path) == [] and planted.unchanged()


def test_a_claim_refused_or_released_removes_the_directories_it_made(tmp_path):
    from iobench.core.errors import UsageError
    from iobench.run.outdir import OutputClaim

    path = tmp_path / "made" / "deeper"
    first = OutputClaim(path)
    first.acquire()
    assert path.is_dir() and not _unlocked(path)
    second = OutputClaim(path)
    with pytest.raises(UsageError, match="another iobench run"):
        second.acquire()
    assert path.is_dir()  # the first one's, not the second's to remove
    first.release()
    assert not (tmp_path / "made").exists()  # still empty: made by the claim, removed by it
    kept = OutputClaim(path)
    kept.acquire()
    (path / "result.json").write_text("{}")
    kept.release()
    assert (path / "result.json").is_file() and _unlocked(path)


@pytest.mark.parametrize("command", ["run", "loader", "qualify"])
def test_every_command_with_output_is_refused_a_held_directory(cli, planted, tmp_path, command):
    """run, loader and qualify all claim their --output (here held by a claim of this process,
    as another run's would be): exit 2, nothing written to the target or the directory."""
    from iobench.run.outdir import OutputClaim

    out = tmp_path / "out"
    held = OutputClaim(out)
    held.acquire()
    try:
        args = {
            "run": ["run", "sequential-write", planted.path, "--set", "size=1MiB", *SEQ],
            "loader": ["loader", planted.path, "--profile", "resnet50-h100"],
            "qualify": ["qualify", planted.path, "--quick"],
        }[command]
        r = cli(*args, "--output", out, "-q", "--no-history")
        assert r.code == 2, r.err
        assert "another iobench run is writing its result to" in one_line(r.err)
        assert r.out == "" and os.listdir(out) == []
        assert debris(planted.path) == [] and planted.unchanged()
    finally:
        held.release()


def test_fio_output_kept_beside_the_result_never_through_a_link(cli, planted, tmp_path, fake_fio):
    """fio's raw JSON (and job file) kept in --output: links planted there under those names
    are left as they were, nothing is created where they point, and the output is kept under
    the next free name."""
    from conftest import ROOT

    golden = ROOT / "tests" / "golden" / "fio-3.33-seqwrite.json"
    if not golden.is_file():
        pytest.skip("tests/golden is not present")
    fake_fio(f'cat "{golden}" > "$out"')
    out = tmp_path / "out"
    out.mkdir()
    user = _user_files(tmp_path)
    (out / "fio-seq-write.json").symlink_to(user / "made-by-iobench.json")
    (out / "fio-seq-write-2.fio").symlink_to(user / "victim.txt")
    before = snapshot(user)
    r = cli("run", "sequential-write", planted.path, "--engine", "fio", "--set", "size=4MiB", *SEQ,
            "--set", "read_back=false", "--output", out, "-q", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    assert snapshot(user) == before
    assert os.readlink(out / "fio-seq-write.json") == str(user / "made-by-iobench.json")
    kept = json.loads((out / "result.json").read_text())["phases"][0]["extra"].get("fio_json")
    # the .fio beside -2.json is a link: that keeping is skipped, and the figures stand
    assert kept in (None, str(out / "fio-seq-write-2.json"))
    assert debris(planted.path) == [] and planted.unchanged()
