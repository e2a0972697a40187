"""Target handling (mount tables, run directories, O_DIRECT probe) and workload specs."""

from __future__ import annotations

import os

import pytest

from iobench.core.errors import SpecError, TargetError
from iobench.spec.workload import (
    COMMON_PARAMS,
    coerce,
    load_profile,
    load_workload,
    parse_overrides,
)
from iobench.target import (
    RUN_DIR_PREFIX,
    check_free_space,
    create_run_dir,
    find_mount,
    fs_class,
    parse_mountinfo,
    probe_direct_io,
    remove_run_dir,
    resolve,
)

# Recorded lines: a Lustre client, a GPFS mount, NFS, overlay, tmpfs, ext4 root, and a mount
# point with a space (escaped as \040 by the kernel).
MOUNTINFO = r"""22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 22 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24684092k
101 22 0:52 / /mnt/lustre rw,relatime shared:80 - lustre 10.0.0.1@o2ib:10.0.0.2@o2ib:/scratch rw,flock,lazystatfs
102 101 0:53 / /mnt/lustre/project rw,relatime - lustre 10.0.0.1@o2ib:/project rw
103 22 0:54 / /gpfs/fs1 rw,relatime - gpfs fs1 rw
104 22 0:55 / /mnt/nfs rw,relatime - nfs4 filer:/export rw,vers=4.2
105 22 0:56 / /var/lib/docker/overlay2/x/merged rw - overlay overlay rw,lowerdir=/a
106 22 0:57 / /mnt/with\040space rw - xfs /dev/nvme0n1 rw
"""


def test_parse_mountinfo_and_longest_prefix():
    mounts = parse_mountinfo(MOUNTINFO)
    assert len(mounts) == 8
    m = find_mount("/mnt/lustre/project/run1", mounts)
    assert (m.fs_type, m.mount_point, m.source) == (
        "lustre",
        "/mnt/lustre/project",
        "10.0.0.1@o2ib:/project",
    )
    assert find_mount("/mnt/lustre/other", mounts).source.endswith(":/scratch")
    assert find_mount("/mnt/lustreX", mounts).fs_type == "ext4"  # not a path prefix
    assert find_mount("/gpfs/fs1/data", mounts).fs_type == "gpfs"
    assert find_mount("/mnt/nfs/a", mounts).fs_type == "nfs4"
    assert find_mount("/mnt/with space/d", mounts).fs_type == "xfs"
    assert find_mount("/home/u", mounts).fs_type == "ext4"


@pytest.mark.parametrize(
    "fs,cls",
    [("lustre", "parallel"), ("gpfs", "parallel"), ("nfs4", "network"), ("nfs", "network"),
     ("tmpfs", "memory"), ("ext4", "local"), ("xfs", "local"), ("overlay", "local"), ("weird", "unknown")],
)  # fmt: skip
def test_fs_class(fs, cls):
    assert fs_class(fs) == cls


def test_resolve_with_recorded_mount_table(tmp_path):
    fake = f"1 0 1:1 / / rw - ext4 /dev/root rw\n2 1 0:9 / {tmp_path} rw - lustre 10.0.0.1@o2ib:/scratch rw\n"
    t = resolve(str(tmp_path), mountinfo=parse_mountinfo(fake))
    assert t.fs_type == "lustre" and t.mount_source == "10.0.0.1@o2ib:/scratch"
    assert t.to_dict()["fs_class"] == "parallel"


def test_run_dir_lifecycle_touches_nothing_else(planted):
    t = resolve(str(planted.path))
    run_dir = create_run_dir(t, "test-1")
    assert os.path.basename(run_dir) == RUN_DIR_PREFIX + "test-1"
    assert t.direct_io in (True, "unsupported")
    with open(os.path.join(run_dir, "x"), "w") as f:
        f.write("x")
    with pytest.raises(TargetError):
        create_run_dir(resolve(str(planted.path)), "test-1")  # never reuse an existing one
    remove_run_dir(t)
    assert not os.path.exists(run_dir)
    assert planted.unchanged()


def test_remove_refuses_foreign_directories(planted):
    t = resolve(str(planted.path))
    t.run_dir = str(planted.path / "sub")  # not ours
    t.created = True
    remove_run_dir(t)
    assert planted.unchanged()


def test_free_space_check(tmp_path):
    t = resolve(str(tmp_path))
    check_free_space(t, 1 << 20)
    with pytest.raises(TargetError) as e:
        check_free_space(t, t.free_bytes)
    assert "free" in e.value.message


def test_direct_probe(tmp_path):
    ok, why = probe_direct_io(str(tmp_path))
    assert ok or why
    assert list(tmp_path.iterdir()) == []


# -- specs ------------------------------------------------------------------------------------


def test_load_workload_and_overrides():
    wl = load_workload("sequential-write", {"size": "8MiB", "jobs": "2", "block_sizes": "[64k,1m]"})
    assert wl.params["size"] == 8 << 20 and wl.params["jobs"] == 2
    assert wl.params["block_sizes"] == [65536, 1 << 20]
    assert wl.generator == "sequential"
    other = load_workload("sequential-write", {"size": "16MiB"})
    assert wl.spec_hash != other.spec_hash
    assert (
        load_workload(
            "sequential-write", {"size": "8MiB", "jobs": 2, "block_sizes": [65536, 1 << 20]}
        ).spec_hash
        == wl.spec_hash
    )


@pytest.mark.parametrize(
    "key,value,needle",
    [
        ("size", "12XB", "size"),
        ("jobs", "0", "at least 1"),
        ("direct", "maybe", "true or false"),
        ("fsync", "always", "never, file, end"),
        ("time", "soon", "duration"),
        ("nope", "1", "unknown parameter"),
    ],
)
def test_bad_overrides_name_the_key(key, value, needle):
    with pytest.raises(SpecError) as e:
        load_workload("sequential-write", {key: value})
    assert key in e.value.one_line() and needle in e.value.one_line()


def test_bad_files_name_file_and_key(tmp_path):
    p = tmp_path / "w.toml"
    p.write_text('generator = "dataset"\n[params]\nfiles = -4\n')
    with pytest.raises(SpecError) as e:
        load_workload(str(p))
    assert str(p) in e.value.one_line() and "files" in e.value.one_line()
    p.write_text('generator = "nope"\n')
    with pytest.raises(SpecError, match="generator"):
        load_workload(str(p))
    p.write_text('generator = "dataset"\nextra = 1\n')
    with pytest.raises(SpecError, match="extra"):
        load_workload(str(p))


def test_parse_overrides():
    assert parse_overrides(["a=1", "b = x=y"]) == {"a": "1", "b": "x=y"}
    with pytest.raises(SpecError):
        parse_overrides(["novalue"])
    with pytest.raises(SpecError):
        parse_overrides(["=1"])


def test_coerce_optional_and_lists():
    assert coerce("time", COMMON_PARAMS["time"], "", "x") is None
    assert coerce("rate", COMMON_PARAMS["rate"], "100MiB/s", "x") == 100 << 20


def test_profiles_load_with_overrides():
    p = load_profile("unet3d-h100", {"compute_s": "100ms", "batch_size": "4"})
    assert p.compute_s == pytest.approx(0.1) and p.batch_size == 4 and p.format == "npz"
    with pytest.raises(SpecError):
        load_profile("unet3d-h100", {"bogus": "1"})
    with pytest.raises(SpecError, match="unknown profile"):
        load_profile("no-such-profile")
