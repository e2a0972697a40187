"""The one output rule (``iobench.core.safeio``) and the run directory held by descriptor
(``iobench.target.RunDir``), case by case from the hostile probe of issue 23: a user's dataset
and files are never written, whatever the output path; a TARGET renamed and swapped for a link
mid-run neither redirects the cleanup nor hides iobench's own files.

Each case checks the exit code, the one line on stderr, and that the user's files (the
dataset, the file behind a link, a device node, a FIFO) are byte-identical afterwards."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import SEQ, debris, one_line, plant, snapshot, swap_for_lookalike, wait_for
from existing_datasets import images

from iobench.core import safeio
from iobench.engines import posix as posix_engine
from iobench.run import stall as watchdog
from iobench.target import RunDir

pytest.importorskip("PIL", reason="Pillow is the images extra")

LOADER = ["--set", "batch_size=4", "--set", "compute_s=1ms", "--workers", "0", "-q", "--json"]


@pytest.fixture
def ds(tmp_path) -> Path:
    d = tmp_path / "DS"
    images(d)
    return d


def _refused(r, *words: str) -> str:
    assert r.code == 2, r.err
    line = one_line(r.err)
    for w in words:
        assert w in line, (w, line)
    return line


# -- 1. --csv / --series-csv / --output inside the dataset (loader --existing) ---------------


@pytest.mark.parametrize(
    "flag,rel",
    [
        ("--csv", "cat/001.jpg"),  # a dataset JPEG: used to be replaced by CSV, exit 0
        ("--series-csv", "cat/001.jpg"),
        ("--csv", "new.csv"),  # a new file inside the dataset
        ("--series-csv", "dog/new.csv"),
        ("--output", "res"),  # the result directory
    ],
)
def test_loader_existing_writes_nothing_inside_the_dataset(cli, ds, tmp_path, flag, rel):
    before = snapshot(ds)
    extra = [] if flag == "--output" else ["--output", tmp_path / "out"]
    r = cli("loader", ds, "--existing", *LOADER, "--no-history", flag, ds / rel, *extra)
    _refused(r, "lies inside the dataset", str(ds))
    assert snapshot(ds) == before and not (tmp_path / "out").exists()


def test_the_default_result_directory_inside_the_dataset_is_refused(cli, ds, monkeypatch):
    before = snapshot(ds)
    monkeypatch.chdir(ds / "cat")  # ./iobench-results/RUN_ID would be inside the dataset
    r = cli("loader", ds, "--existing", *LOADER, "--no-history")
    _refused(r, "lies inside the dataset")
    assert snapshot(ds) == before


def test_a_history_inside_the_dataset_is_refused(cli, ds, tmp_path):
    before = snapshot(ds)
    out = tmp_path / "out"
    r = cli("loader", ds, "--existing", *LOADER, "--history", ds / "hist", "--output", out)
    _refused(r, "--history", "lies inside the dataset")
    assert snapshot(ds) == before and not out.exists()


# -- 2. TARGET renamed and swapped for a link mid-run --------------------------------------------


def _swap(par: Path, victim: Path) -> dict:
    """An action: mv par/T par/T.old; ln -s victim par/T, after planting in ``victim`` a
    directory named like this run's with four files iobench never created."""
    seen: dict = {}

    def action() -> None:
        name = debris(par / "T")[0]
        planted = victim / name
        planted.mkdir()
        for i in range(4):
            (planted / f"user-{i}.dat").write_bytes(os.urandom(1000))
        seen["name"], seen["before"] = name, snapshot(victim)
        os.rename(par / "T", par / "T.old")
        os.symlink(victim, par / "T")

    action.seen = seen  # type: ignore[attr-defined]
    return action  # type: ignore[return-value]


def test_a_target_renamed_and_swapped_for_a_link_mid_run(cli, tmp_path, trip):
    par = tmp_path / "par"
    planted = plant(par / "T")
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious.dat").write_bytes(os.urandom(4096))
    action = _swap(par, victim)
    t = trip("seq-write", action, on=(os, "pwrite"), after=2)
    out = tmp_path / "out"
    r = cli("run", "sequential-write", par / "T", "--set", "size=4MiB", *SEQ, "--output", out,
            "-q", "--no-history")  # fmt: skip
    assert t.fired
    assert r.code == 4, r.err
    assert "renamed or replaced during the run" in one_line(r.err)
    assert snapshot(victim) == action.seen["before"]  # its look-alike run dir: all four files
    old = par / "T.old"
    assert debris(old) == []  # our own 4 MiB run directory: removed where it was moved
    os.unlink(par / "T")
    os.rename(old, par / "T")
    assert planted.unchanged()
    res = json.loads((out / "result.json").read_text())
    assert any(
        "renamed or replaced" in w and "through the descriptor it held" in w
        for w in res["warnings"]
    ), res["warnings"]


@pytest.mark.parametrize("workers", ["threads", "processes"])
def test_a_swap_in_the_middle_of_a_create_phase_writes_nothing_behind_the_link(
    cli, tmp_path, trip, monkeypatch, workers
):
    """The swap of the test above, but in a phase that keeps creating files (ckpt-create) and
    with the victim holding a tree shaped like this run's: no file may be created there,
    by one worker thread or by four forked worker processes (the host said to have 1 CPU)."""
    jobs = 1 if workers == "threads" else 4
    if workers == "processes":
        monkeypatch.setattr(posix_engine, "_cpus", lambda: 1)
    par = tmp_path / "par"
    plant(par / "T")
    victim = tmp_path / "victim"
    victim.mkdir()
    action = swap_for_lookalike(par, victim)
    t = trip("ckpt-create", action, on=(os, "fsync"), after=5)
    r = cli("run", "checkpoint-smallfile", par / "T", "--set", f"jobs={jobs}", "--set", "files=40",
            "--set", 'file_sizes=["4KiB"]', "--set", "dcp=false", "--set", "checkpoint_size=1MiB",
            "--set", "shards=1", "--set", "rounds=1", "--set", "time=none",
            "--output", tmp_path / "out", "-q", "--no-history")  # fmt: skip
    assert t.fired and r.code == 4, r.err
    # the workers create beneath the run directory's descriptor: none of the creates made
    # after the swap lands behind the link (35 of 40 did when they opened by path)
    assert snapshot(victim) == action.before()  # type: ignore[attr-defined]
    phases = json.loads((tmp_path / "out" / "result.json").read_text())["phases"]
    assert next(p for p in phases if p["name"] == "ckpt-create")["extra"]["workers"] == workers


def test_the_reaper_removes_through_its_descriptors_after_a_swap(tmp_path):
    """The detached reaper (a real process, handed the descriptors) removes iobench's own run
    directory from where TARGET was moved, and nothing behind the link in its place."""
    par = tmp_path / "par"
    (par / "T").mkdir(parents=True)
    h = RunDir.create(str(par / "T"), ".iobench-20260101T000000Z-reaper")
    (par / "T" / h.name / "sub").mkdir()
    (par / "T" / h.name / "sub" / "f").write_bytes(b"ours")
    victim = tmp_path / "victim"
    (victim / h.name).mkdir(parents=True)
    for i in range(4):
        (victim / h.name / f"user-{i}").write_bytes(os.urandom(100))
    before = snapshot(victim)
    os.rename(par / "T", par / "T.old")
    os.symlink(victim, par / "T")
    pid = watchdog.reap_later(h)
    h.close()
    wait_for(lambda: not (par / "T.old" / h.name).exists(), timeout=30, step=0.1)
    wait_for(lambda: subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode)
    assert snapshot(victim) == before


# -- 3, 4 and the major ones: profile --output ------------------------------------------------


def _devnode(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root for mknod of a character device")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own


@pytest.mark.parametrize(
    "kind,force,words",
    [
        ("link", True, "is a symbolic link"),
        ("link", False, "is a symbolic link"),
        ("dangling", False, "is a symbolic link"),  # used to create the file it points to
        ("dangling", True, "is a symbolic link"),
        ("chardev", True, "is a character device"),  # used to become a regular file
        ("fifo", True, "is a FIFO"),
        ("dir", True, "is a directory"),  # used to be exit 4, "internal error"
    ],
)
def test_profile_output_never_through_a_link_nor_onto_a_non_regular_file(
    cli, ds, tmp_path, kind, force, words
):
    user = tmp_path / "user.txt"
    user.write_text("the user's own file\n")
    out = tmp_path / "out-path"
    if kind == "link":
        out.symlink_to(user)
    elif kind == "dangling":
        out.symlink_to(tmp_path / "not-yet")
    elif kind == "chardev":
        _devnode(out)
    elif kind == "fifo":
        os.mkfifo(out)
    else:
        out.mkdir()
    before = os.lstat(out)
    r = cli("profile", ds, "--output", out, *(["--force"] if force else []))
    _refused(r, words)
    after = os.lstat(out)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert user.read_text() == "the user's own file\n"
    assert not (tmp_path / "not-yet").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_profile_force_over_a_regular_file_replaces_only_it(cli, ds, tmp_path):
    out = tmp_path / "p.toml"
    out.write_text("old\n")
    hard = tmp_path / "hard-link"
    os.link(out, hard)  # a second name of the old file: its bytes are not touched
    r = cli("profile", ds, "--output", out, "--force")
    assert r.code == 0, r.err
    assert "[profile]" in out.read_text() or "batch_size" in out.read_text()
    assert hard.read_text() == "old\n"


@pytest.mark.parametrize("rel", ["cat/001.jpg", "p.toml"])
def test_profile_output_inside_the_dataset_is_refused_even_with_force(cli, ds, rel):
    before = snapshot(ds)
    r = cli("profile", ds, "--output", ds / rel, "--force")
    _refused(r, "lies inside the dataset")
    assert snapshot(ds) == before


# -- 5. a bind mount of the dataset --------------------------------------------------------------


@pytest.fixture
def bind(ds, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for a bind mount")
    where = tmp_path / "bind"
    where.mkdir()
    p = subprocess.run(["mount", "--bind", str(ds), str(where)], capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"cannot bind-mount here: {p.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


@pytest.mark.parametrize(
    "args",
    [
        ["profile", "{ds}", "--output", "{bind}/cat/001.jpg", "--force"],
        ["profile", "{ds}", "--output", "{bind}/p.toml"],
        ["loader", "{ds}", "--existing", *LOADER, "--no-history", "--output", "{bind}/res"],
        ["loader", "{ds}", "--existing", *LOADER, "--no-history", "--csv", "{bind}/c.csv",
         "--output", "{tmp}/out"],
    ],
    ids=["profile-force", "profile-new", "loader-output", "loader-csv"],
)  # fmt: skip
def test_a_bind_mount_of_the_dataset_is_the_dataset(cli, ds, bind, tmp_path, args):
    before = snapshot(ds)
    argv = [a.format(ds=ds, bind=bind, tmp=tmp_path) for a in args]
    _refused(cli(*argv), "lies inside the dataset")
    assert snapshot(ds) == before and not (tmp_path / "out").exists()


@pytest.fixture
def bind_inside(ds, tmp_path):
    """A bind mount of a directory *inside* the dataset (``DS/cat``): its ancestors are not the
    dataset's, so only where it lies in its filesystem tells it is the dataset's."""
    if os.geteuid() != 0:
        pytest.skip("needs root for a bind mount")
    where = tmp_path / "sub"
    where.mkdir()
    src = ds / "cat"
    p = subprocess.run(["mount", "--bind", str(src), str(where)], capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"cannot bind-mount here: {p.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


@pytest.mark.parametrize(
    "args",
    [
        ["profile", "{ds}", "--output", "{sub}/001.jpg", "--force"],  # used to replace it
        ["profile", "{ds}", "--output", "{sub}/p.toml"],  # used to write DS/cat/p.toml
        ["loader", "{ds}", "--existing", *LOADER, "--no-history", "--output", "{sub}/res"],
        ["loader", "{ds}", "--existing", *LOADER, "--no-history", "--csv", "{sub}/c.csv",
         "--output", "{tmp}/out"],
        ["profile", "{sub}", "--output", "{ds}/cat/p.toml"],  # the dataset given through it
    ],
    ids=["profile-force", "profile-new", "loader-output", "loader-csv", "dataset-through-it"],
)  # fmt: skip
def test_a_bind_mount_of_a_directory_inside_the_dataset_is_the_dataset(
    cli, ds, bind_inside, tmp_path, args
):
    before = snapshot(ds)
    argv = [a.format(ds=ds, sub=bind_inside, tmp=tmp_path) for a in args]
    _refused(cli(*argv), "lies inside the dataset")
    assert snapshot(ds) == before and not (tmp_path / "out").exists()


def test_fs_location_reads_the_mount_root_and_its_escapes():
    """The location is the mount's device and root plus the path below its mount point: a
    bind mount of DS/cat at /b holds the same place as DS/cat itself."""
    info = (
        "25 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
        "40 25 8:1 /data/my\\040ds/cat /b rw - ext4 /dev/sda1 rw\n"
        "41 25 0:50 / /data/my\\040ds/cat/t rw - tmpfs tmpfs rw\n"
    )
    assert safeio.fs_location("/b/x", info) == ("8:1", "/data/my ds/cat/x")
    assert safeio.fs_location("/data/my ds/cat/x", info) == ("8:1", "/data/my ds/cat/x")
    assert safeio.fs_location("/data/my ds/cat/t/y", info) == ("0:50", "/y")


@pytest.mark.parametrize(
    "args,dest",
    [
        (["profile", "{ds}", "--output", "{dest}", "--force"], "/sys/kernel/mm/transparent_hugepage/enabled"),
        (["profile", "{ds}", "--output", "{dest}"], "/sys/kernel/iobench-audit.toml"),
        (["history", "export", "{dest}"], "/sys/kernel/iobench-audit.parquet"),
    ],
    ids=["profile-force-over-a-setting", "profile-new", "history-export"],
)  # fmt: skip
def test_an_output_on_a_kernel_interface_is_refused_before_anything_runs(cli, ds, args, dest):
    """A sysfs (or proc) file looks regular, so ``--force`` passed it: the write failed only
    at the end (exit 4, after the dataset was read; found by the issue-23 audit)."""
    if not os.path.isdir("/sys/kernel"):
        pytest.skip("no /sys here")
    if os.path.exists(dest):
        before = Path(dest).read_bytes()
    argv = [a.format(ds=ds, dest=dest) for a in args]
    line = _refused(cli(*argv), "is on sysfs, a kernel interface, not storage")
    assert dest in line
    if os.path.exists(dest):
        assert Path(dest).read_bytes() == before


# -- the history default, symlink loops ------------------------------------------------------


def test_no_history_home_is_created(cli, tmp_path, monkeypatch):
    """HOME=/nonexistent (a service account): the default history would be made below it.
    It is not; the result says there is no history, the run is fine."""
    home = tmp_path / "nonexistent"
    monkeypatch.delenv("IOBENCH_HISTORY", raising=False)
    monkeypatch.setenv("HOME", str(home))
    planted = plant(tmp_path / "T")
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, "--set", "size=4MiB", *SEQ,
            "--output", out, "-q")  # fmt: skip
    assert r.code == 0, r.err
    assert not home.exists()
    res = json.loads((out / "result.json").read_text())
    assert any("no history" in w and str(home) in w for w in res["warnings"]), res["warnings"]
    assert planted.unchanged()


@pytest.mark.parametrize("command", ["profile", "loader", "run"])
def test_a_symlink_loop_is_named_as_one(cli, tmp_path, command):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    argv = {
        "profile": ["profile", loop, "--output", tmp_path / "p.toml"],
        "loader": ["loader", loop, "--existing", *LOADER, "--no-history"],
        "run": ["run", "sequential-write", loop, "--output", tmp_path / "out", "-q"],
    }[command]
    r = cli(*argv)
    assert r.code == 2, r.err
    assert "symbolic link loop" in one_line(r.err)
    assert os.readlink(loop) == str(loop)


# -- the rest of the family: the writers the list does not name -------------------------------


def test_live_csv_swapped_for_a_fifo_before_its_first_row_is_not_opened(tmp_path):
    """--live-csv is checked at the start and created at the first phase: a FIFO (or a link)
    put there meanwhile is refused at that moment (never opened: a FIFO would block)."""
    from iobench.cli.livecsv import LiveCsv

    path = tmp_path / "live.csv"
    live = LiveCsv(str(path))
    os.mkfifo(path)
    live.row("seq-write", (0, 0), (0.0, 0, 0))
    live.close()
    assert live.error and "FIFO" in live.error
    assert stat.S_ISFIFO(os.lstat(path).st_mode)


def test_write_atomic_refuses_a_directory_inside_a_protected_dataset(tmp_path):
    """The rule at the write itself: whatever a command checked before, a file bound for a
    directory inside a recorded input (here through a symlinked path to it) is an OSError."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (tmp_path / "alias").symlink_to(data)
    safeio.forget_inputs()
    safeio.protect_input(data)
    try:
        with pytest.raises(PermissionError, match="lies inside the dataset"):
            safeio.write_atomic(tmp_path / "alias" / "sub" / "x.csv", b"x")
        with pytest.raises(PermissionError):
            safeio.write_atomic(tmp_path / "alias" / "new-dir" / "x.csv", b"x")
        assert sorted(os.listdir(data)) == ["sub"] and os.listdir(data / "sub") == []
        safeio.write_atomic(tmp_path / "elsewhere.csv", b"ok")  # outside: written
    finally:
        safeio.forget_inputs()
    assert (tmp_path / "elsewhere.csv").read_bytes() == b"ok"


@pytest.mark.parametrize("command", ["export", "trend"])
def test_history_outputs_never_land_inside_the_history_they_read(cli, tmp_path, command):
    """``history export FILE`` / ``history trend --svg FILE`` read the history: a file written
    into it would be read back as a stored run (a .parquet export) or sit among them."""
    planted = plant(tmp_path / "T")
    hist = tmp_path / "history"  # the cli fixture's IOBENCH_HISTORY
    r = cli("run", "sequential-write", planted.path, "--set", "size=4MiB", *SEQ,
            "--output", tmp_path / "out", "-q")  # fmt: skip
    assert r.code == 0, r.err
    before = snapshot(hist)
    argv = {
        "export": ["history", "export", hist / "all.parquet"],
        "trend": ["history", "trend", "seq-write.bandwidth", "--svg", hist / "t.svg"],
    }[command]
    _refused(cli(*argv), "lies inside the history")
    assert snapshot(hist) == before


def test_a_link_planted_after_profiles_check_is_not_followed(cli, ds, tmp_path, monkeypatch):
    """Between the check and the write (the dataset is being read), a link to the user's file
    appears at --output: the write refuses it at the last moment, the file is untouched."""
    import iobench.loader.profile as dp

    user = tmp_path / "user.txt"
    user.write_text("mine\n")
    out = tmp_path / "p.toml"
    real = dp.profile_dataset

    def then_plant(*a, **k):
        got = real(*a, **k)
        out.symlink_to(user)
        return got

    monkeypatch.setattr(dp, "profile_dataset", then_plant)
    r = cli("profile", ds, "--output", out)
    assert r.code == 4, r.err
    assert "is a symbolic link" in one_line(r.err)
    assert user.read_text() == "mine\n" and out.is_symlink()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
