"""Parallel-filesystem awareness: Lustre striping (lfs) and GPFS attributes (mmlsattr).

Stand-in ``lfs`` and ``mmlsattr`` scripts on PATH replay recorded outputs (tests/data) and log
every call; the filesystem type comes from recorded mountinfo lines.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from pathlib import Path

import pytest

from iobench import target as target_mod
from iobench.core.errors import TargetError
from iobench.target import (
    RUN_DIR_PREFIX,
    apply_layout,
    create_run_dir,
    parse_lfs_getstripe,
    parse_mmlsattr,
    parse_mountinfo,
    remove_run_dir,
    resolve,
)

DATA = Path(__file__).parent / "data"

STANDIN = """#!/bin/sh
# stand-in for {name}: log the call (and how many entries the directory held), replay output
last=""
for a in "$@"; do last="$a"; done
n=$(ls -A "$last" 2>/dev/null | wc -l)
echo "$* entries=$n" >> "{log}"
case "$1" in
  setstripe)
    case " $* " in *" -c 99 "*) echo "lfs setstripe: invalid stripe count 99 (max 16)" >&2; exit 22;; esac
    exit 0;;
esac
cat "{replay}"
"""


def _standin(bindir: Path, name: str, replay: Path, log: Path) -> None:
    bindir.mkdir(exist_ok=True)
    script = bindir / name
    script.write_text(STANDIN.format(name=name, log=log, replay=replay))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def _mounts_at(fs_type: str, where: Path):
    """The recorded mount of ``fs_type``, moved onto ``where`` (so resolve() finds it there)."""
    mounts = parse_mountinfo((DATA / "mountinfo-parallel.txt").read_text())
    m = next(m for m in mounts if m.fs_type == fs_type)
    return [dataclasses.replace(m, mount_point=str(where))]


def test_recorded_mountinfo_names_lustre_and_gpfs():
    mounts = parse_mountinfo((DATA / "mountinfo-parallel.txt").read_text())
    by_type = {m.fs_type: m for m in mounts}
    assert by_type["lustre"].source == "10.0.0.1@o2ib:/fs"
    assert by_type["lustre"].mount_point == "/mnt/lustre"
    assert by_type["gpfs"].source == "fs1"


def test_parse_lfs_getstripe_plain():
    got = parse_lfs_getstripe((DATA / "lustre" / "lfs-getstripe-d.txt").read_text())
    assert got == {
        "stripe_count": 4,
        "stripe_size": 4 << 20,
        "pattern": "raid0",
        "stripe_offset": -1,
        "pool": "flash",
    }


def test_parse_lfs_getstripe_progressive_layout():
    got = parse_lfs_getstripe((DATA / "lustre" / "lfs-getstripe-d-pfl.txt").read_text())
    assert got["stripe_count"] == 1 and got["stripe_size"] == 1 << 20  # the first component
    assert [c["extent_end"] for c in got["components"]] == [64 << 20, 1 << 30, None]
    assert got["components"][2]["stripe_count"] == -1
    assert got["components"][2]["pool"] == "capacity"


def test_parse_lfs_getstripe_older_client_and_file_forms():
    old = parse_lfs_getstripe((DATA / "lustre" / "lfs-getstripe-d-old.txt").read_text())
    assert old == {"stripe_count": 8, "stripe_size": 1 << 20, "stripe_offset": -1}
    lmm = parse_lfs_getstripe((DATA / "lustre" / "lfs-getstripe-lmm.txt").read_text())
    assert lmm == {
        "stripe_count": 2,
        "stripe_size": 16 << 20,
        "pattern": "raid0",
        "stripe_offset": 7,
    }


def test_parse_mmlsattr():
    got = parse_mmlsattr((DATA / "gpfs" / "mmlsattr-L.txt").read_text())
    assert got == {
        "metadata_replication": 2,
        "max_metadata_replication": 2,
        "data_replication": 1,
        "max_data_replication": 3,
        "pool": "system",
        "fileset": "scratch",
    }


def _parallel_fs(tmp_path, monkeypatch, name: str, tool: str, recording: Path):
    """An empty target dir ``name`` and a stand-in ``tool`` on PATH replaying ``recording``
    and logging its calls: (root, log)."""
    root = tmp_path / name
    root.mkdir()
    log = tmp_path / f"{tool}.log"
    _standin(tmp_path / "bin", tool, recording, log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return root, log


@pytest.fixture
def lustre(tmp_path, monkeypatch):
    """A target dir seen as Lustre, with a stand-in lfs replaying a recorded getstripe."""
    return _parallel_fs(
        tmp_path, monkeypatch, "lustre", "lfs", DATA / "lustre" / "lfs-getstripe-d.txt"
    )


def test_setstripe_before_any_file_then_layout_recorded(lustre):
    root, log = lustre
    t = resolve(str(root), mountinfo=_mounts_at("lustre", root))
    assert t.fs_type == "lustre" and t.mount_source == "10.0.0.1@o2ib:/fs"
    create_run_dir(t, "20260101T000000Z-aaaaaa")
    try:
        warnings = apply_layout(t, {"stripe_count": 4, "stripe_size": 4 << 20})
    finally:
        remove_run_dir(t)
    calls = log.read_text().splitlines()
    assert calls == [
        f"setstripe -c 4 -S 4194304 {t.run_dir} entries=0",  # an empty run dir: no file yet
        f"getstripe -d {t.run_dir} entries=0",
    ]
    assert warnings == []
    assert t.layout["stripe_count"] == 4 and t.layout["pool"] == "flash"
    assert t.to_dict()["layout"]["source"] == "lfs getstripe -d"


def test_layout_recorded_without_stripe_settings(lustre):
    root, log = lustre
    t = resolve(str(root), mountinfo=_mounts_at("lustre", root))
    create_run_dir(t, "20260101T000000Z-bbbbbb")
    try:
        apply_layout(t, {"stripe_count": None, "stripe_size": None})
    finally:
        remove_run_dir(t)
    assert [c.split()[0] for c in log.read_text().splitlines()] == ["getstripe"]
    assert t.layout["stripe_size"] == 4 << 20


def test_refused_setstripe_is_one_line_target_error(lustre):
    root, _ = lustre
    t = resolve(str(root), mountinfo=_mounts_at("lustre", root))
    create_run_dir(t, "20260101T000000Z-cccccc")
    try:
        with pytest.raises(TargetError) as e:
            apply_layout(t, {"stripe_count": 99, "stripe_size": None})
        with pytest.raises(TargetError, match="multiple of 64 KiB"):
            apply_layout(t, {"stripe_count": None, "stripe_size": 100_000})
    finally:
        remove_run_dir(t)
    assert "invalid stripe count 99" in e.value.one_line()
    assert "\n" not in e.value.one_line()
    assert os.listdir(root) == []


def test_gpfs_attributes_recorded_and_stripes_ignored(tmp_path, monkeypatch):
    root, log = _parallel_fs(
        tmp_path, monkeypatch, "gpfs", "mmlsattr", DATA / "gpfs" / "mmlsattr-L.txt"
    )
    t = resolve(str(root), mountinfo=_mounts_at("gpfs", root))
    create_run_dir(t, "20260101T000000Z-dddddd")
    try:
        warnings = apply_layout(t, {"stripe_count": 4, "stripe_size": None})
    finally:
        remove_run_dir(t)
    assert log.read_text().split()[:2] == ["-L", t.run_dir]
    assert t.layout["data_replication"] == 1 and t.layout["pool"] == "system"
    assert t.layout["block_size"] == os.statvfs(root).f_bsize
    assert any("ignored" in w and "GPFS" in w for w in warnings)


def test_stripes_ignored_with_a_warning_elsewhere(tmp_path):
    t = resolve(str(tmp_path))
    create_run_dir(t, "20260101T000000Z-eeeeee")
    try:
        warnings = apply_layout(t, {"stripe_count": 2})
    finally:
        remove_run_dir(t)
    assert t.layout == {}
    assert warnings and "not Lustre" in warnings[0]


def test_run_stripes_the_run_dir_and_records_layout(cli, lustre, monkeypatch, tmp_path):
    """End to end: `iobench run --set stripe_count/stripe_size` on a (stand-in) Lustre mount."""
    root, log = lustre
    mounts = _mounts_at("lustre", root)
    monkeypatch.setattr(target_mod, "read_mountinfo", lambda *a, **k: mounts)
    out = tmp_path / "out"
    r = cli(
        "run", "sequential-write", root, "--set", "time=none", "--output", out, "--json", "--quiet",
        "--set", "size=1MiB", "--set", "jobs=1", "--set", "block_sizes=[]",
        "--set", "jobs_sweep=[]", "--set", "stripe_count=4", "--set", "stripe_size=4MiB",
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    assert res["target"]["fs_type"] == "lustre"
    assert res["target"]["layout"]["stripe_count"] == 4
    assert res["workload"]["params"]["stripe_size"] == 4 << 20
    first = log.read_text().splitlines()[0]
    assert first.startswith("setstripe -c 4 -S 4194304 ") and first.endswith("entries=0")
    assert RUN_DIR_PREFIX in first
    assert os.listdir(root) == []
