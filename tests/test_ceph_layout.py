"""CephFS awareness without a cluster: detection, layouts through the ``ceph.*`` virtual xattrs
(a stand-in that keeps CephFS's rules), and the client-cache state of ceph-fuse.

The real thing (a one-machine cluster, two ceph-fuse mounts) is tested in ``tests/ceph/``.
"""

from __future__ import annotations

import errno
import json
import os

import pytest
from conftest import without_run_notes

from iobench import target as target_mod
from iobench.core.errors import TargetError
from iobench.target import (
    MountInfo,
    apply_layout,
    client_cache,
    create_run_dir,
    fs_class,
    parse_mountinfo,
    read_ceph_layout,
    remove_run_dir,
    resolve,
)

# /proc/self/mountinfo lines as ceph-fuse 16.2 and the kernel client write them
MOUNTINFO = (
    "812 27 0:61 / /var/tmp/iobench-ceph/mnt/iobench-a rw,nosuid,nodev,relatime shared:440 - "
    "fuse.ceph-fuse ceph-fuse rw,user_id=0,group_id=0,allow_other\n"
    "813 27 0:62 / /mnt/cephk rw,relatime shared:441 - ceph 10.0.0.1:6789:/ rw,name=admin\n"
    "814 27 0:63 / /mnt/gluster rw,relatime shared:442 - fuse.glusterfs srv:/vol rw\n"
)
DEFAULT = {"stripe_unit": 4 << 20, "stripe_count": 1, "object_size": 4 << 20, "pool": "cephfs_data"}


class FakeCephXattrs:
    """CephFS's layout xattrs over a real directory tree, with its rules: a directory has a
    ``ceph.dir.layout`` only once one is set (ENODATA before); a file has the layout of its
    nearest directory that has one (else the default); setting a directory's layout merges the
    given fields into the inherited one and refuses (EINVAL) a stripe unit that is not a
    multiple of 64 KiB or does not divide the object size."""

    def __init__(self) -> None:
        self.dirs: dict[str, dict] = {}
        self.sets: list[tuple[str, str]] = []
        self.refuse: int | None = None

    def inherited(self, path: str) -> dict:
        p = os.path.dirname(path) if not os.path.isdir(path) else path
        while True:
            if p in self.dirs:
                return self.dirs[p]
            if p == os.path.dirname(p):
                return DEFAULT
            p = os.path.dirname(p)

    def getxattr(self, path, name, *, follow_symlinks=True):
        path = str(path)
        os.stat(path)  # ENOENT like the real call
        kind, _, fld = name.removeprefix("ceph.").partition(".layout")
        fld = fld.lstrip(".")
        if os.path.isdir(path):
            if kind != "dir" or path not in self.dirs:
                raise OSError(errno.ENODATA, os.strerror(errno.ENODATA))
            lay = self.dirs[path]
        elif kind == "file":
            lay = self.inherited(path)
        else:
            raise OSError(errno.ENODATA, os.strerror(errno.ENODATA))
        text = str(lay[fld]) if fld else " ".join(f"{k}={v}" for k, v in lay.items())
        return text.encode()

    def setxattr(self, path, name, value, flags=0, *, follow_symlinks=True):
        path = str(path)
        self.sets.append((path, value.decode()))
        if self.refuse:
            raise OSError(self.refuse, os.strerror(self.refuse))
        assert name == "ceph.dir.layout"
        lay = dict(self.inherited(path))
        for kv in value.decode().split():
            k, v = kv.split("=")
            lay[k] = v if k == "pool" else int(v)
        su, obj, count = lay["stripe_unit"], lay["object_size"], lay["stripe_count"]
        if su % (64 << 10) or obj % su or count < 1:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        self.dirs[path] = lay


@pytest.fixture
def ceph(tmp_path, monkeypatch):
    """A target dir seen as a ceph-fuse mount, its layout xattrs kept by the stand-in."""
    fake = FakeCephXattrs()
    monkeypatch.setattr(os, "getxattr", fake.getxattr)
    monkeypatch.setattr(os, "setxattr", fake.setxattr)
    root = tmp_path / "cephfs"
    root.mkdir()
    mounts = [MountInfo(str(root), "fuse.ceph-fuse", "ceph-fuse", "rw")]
    monkeypatch.setattr(target_mod, "read_mountinfo", lambda *a, **k: mounts)
    fake.root = root
    return fake


def _run_dir(root) -> target_mod.Target:
    t = resolve(str(root))
    create_run_dir(t, "20260101T000000Z-cephfs")
    return t


def test_ceph_mounts_are_named_and_classed():
    by_type = {m.fs_type: m for m in parse_mountinfo(MOUNTINFO)}
    assert by_type["fuse.ceph-fuse"].mount_point == "/var/tmp/iobench-ceph/mnt/iobench-a"
    assert by_type["ceph"].source == "10.0.0.1:6789:/"
    assert [fs_class(t) for t in ("fuse.ceph-fuse", "ceph", "fuse.glusterfs")] == ["parallel"] * 3
    assert "ceph-fuse keeps file data in its own object cache" in client_cache("fuse.ceph-fuse")
    assert client_cache("ceph") is None  # the kernel client uses the page cache
    assert client_cache("ext4") is None


def test_stripe_settings_set_the_dir_layout_then_the_file_layout_is_recorded(ceph):
    t = _run_dir(ceph.root)
    try:
        warnings = apply_layout(t, {"stripe_count": 2, "stripe_size": 1 << 20})
        assert os.listdir(t.run_dir) == []  # the probe file is gone
    finally:
        remove_run_dir(t)
    assert warnings == []
    assert ceph.sets == [(t.run_dir, "stripe_count=2 stripe_unit=1048576")]
    assert t.layout == {
        "source": "ceph.file.layout xattrs",
        "stripe_unit": 1 << 20,
        "stripe_count": 2,
        "object_size": 4 << 20,
        "pool": "cephfs_data",
    }
    assert t.to_dict()["fs_class"] == "parallel"


def test_a_stripe_unit_above_the_object_size_raises_it(ceph):
    t = _run_dir(ceph.root)
    try:
        apply_layout(t, {"stripe_count": None, "stripe_size": 8 << 20})
        apply_layout(t, {"stripe_count": None, "stripe_size": 3 << 20})  # 4 MiB % 3 MiB != 0
    finally:
        remove_run_dir(t)
    assert [v for _, v in ceph.sets] == [
        "stripe_unit=8388608 object_size=8388608",
        "stripe_unit=3145728 object_size=6291456",  # 2 x 3 MiB: the 8 MiB objects of the first
    ]
    assert (t.layout["stripe_unit"], t.layout["object_size"]) == (3 << 20, 6 << 20)


def test_layout_recorded_without_stripe_settings(ceph):
    t = _run_dir(ceph.root)
    try:
        assert apply_layout(t, {}) == []
    finally:
        remove_run_dir(t)
    assert ceph.sets == []
    assert t.layout["stripe_count"] == 1 and t.layout["object_size"] == 4 << 20


@pytest.mark.parametrize(
    ("params", "refuse", "message"),
    [
        ({"stripe_count": 0}, None, "stripe_count 0 is not valid on CephFS"),
        ({"stripe_count": -1}, None, "stripe_count -1 is not valid on CephFS"),
        ({"stripe_size": 100_000}, None, "is not a multiple of 64 KiB"),
        ({"stripe_count": 2}, errno.EPERM, "the client needs the 'p' capability"),
        ({"stripe_count": 2}, errno.EINVAL, "setting ceph.dir.layout 'stripe_count=2'"),
    ],
)
def test_refused_layouts_are_one_line_target_errors(ceph, params, refuse, message):
    ceph.refuse = refuse
    t = _run_dir(ceph.root)
    try:
        with pytest.raises(TargetError) as e:
            apply_layout(t, params)
    finally:
        remove_run_dir(t)
    assert message in e.value.one_line() and "\n" not in e.value.one_line()
    assert (len(ceph.sets) == 1) == (refuse is not None)  # bad input never reaches the client
    assert os.listdir(ceph.root) == []


def test_read_ceph_layout_of_a_file_and_a_dir(ceph):
    d = ceph.root / "d"
    d.mkdir()
    (d / "f").write_bytes(b"x")
    assert read_ceph_layout(str(d)) == {}  # no layout set on it: it inherits
    assert read_ceph_layout(str(d / "f")) == DEFAULT
    os.setxattr(str(d), "ceph.dir.layout", b"stripe_count=4")
    assert read_ceph_layout(str(d))["stripe_count"] == 4
    assert read_ceph_layout(str(d / "f"))["stripe_count"] == 4


def test_run_on_ceph_fuse_records_layout_per_phase_and_client_cache(cli, ceph, tmp_path):
    """End to end on a (stand-in) ceph-fuse mount: the run dir is striped before any file, each
    phase records its first file's layout, buffered reads say client-cache (not dropped)."""
    out = tmp_path / "out"
    r = cli(
        "run", "sequential-write", ceph.root, "--set", "time=none",
        "--output", out, "--json", "--quiet",
        "--set", "size=1MiB", "--set", "jobs=1", "--set", "block_sizes=[]",
        "--set", "jobs_sweep=[]", "--set", "stripe_count=2", "--set", "stripe_size=1MiB",
        "--set", "direct=false",
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    assert res["target"]["fs_type"] == "fuse.ceph-fuse"
    assert res["target"]["layout"]["stripe_count"] == 2
    assert ceph.sets[0][1] == "stripe_count=2 stripe_unit=1048576"
    phases = {p["name"]: p for p in res["phases"]}
    assert phases, res
    for p in phases.values():
        assert p["extra"]["layout"] == {
            "stripe_unit": 1 << 20, "stripe_count": 2, "object_size": 4 << 20,
            "pool": "cephfs_data",
        }  # fmt: skip
    reads = [p for p in phases.values() if p["op"] in ("read", "randread")]
    assert reads and all(p["cache"] == "client-cache" for p in reads)
    writes = [p for p in phases.values() if p["op"] == "write"]
    assert writes and all(p["cache"] in ("buffered", "client-cache") for p in writes)
    assert any("cache state client-cache" in w for w in res["warnings"])
    assert os.listdir(ceph.root) == []


def test_direct_reads_on_ceph_fuse_stay_direct(cli, ceph, tmp_path):
    out = tmp_path / "out"
    r = cli(
        "run", "sequential-write", ceph.root, "--set", "time=none",
        "--output", out, "--json", "--quiet",
        "--set", "size=1MiB", "--set", "jobs=1", "--set", "block_sizes=[]",
        "--set", "jobs_sweep=[]",
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    assert res["target"]["direct_io"] is True
    assert {p["cache"] for p in res["phases"]} == {"direct"}
    assert not any("client-cache" in w for w in res["warnings"])


def test_run_with_a_refused_layout_is_exit_2_and_leaves_nothing(cli, ceph, tmp_path):
    ceph.refuse = errno.EPERM
    out = tmp_path / "out"
    r = cli(
        "run", "sequential-write", ceph.root, "--set", "time=none", "--output", out, "--quiet",
        "--set", "size=1MiB", "--set", "jobs=1", "--set", "stripe_count=2",
    )  # fmt: skip
    assert r.code == 2, r.err
    lines = without_run_notes(r.err)  # the plan line comes before the run directory's layout
    assert len(lines) == 1 and "the client needs the 'p' capability" in lines[0]
    assert os.listdir(ceph.root) == []
    assert not out.exists()
