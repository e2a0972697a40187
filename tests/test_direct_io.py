"""Direct I/O alignment: what the target needs (sysfs before anything is written, the probe
in the run directory after), and the one-line refusal of sizes O_DIRECT cannot take."""

from __future__ import annotations

import os

import pytest

from iobench.core.errors import UsageError
from iobench.run.phases import sequential
from iobench.spec.workload import load_workload
from iobench.target import (
    Target,
    check_direct_alignment,
    device_logical_block_size,
    direct_alignment,
    probe_direct_alignment,
    probe_direct_io,
)


def _fake_sysfs(tmp_path, path, *, partition: bool, lbs: str = "4096"):
    dev = os.stat(path).st_dev
    node = tmp_path / "sys" / "dev" / "block" / f"{os.major(dev)}:{os.minor(dev)}"
    node.mkdir(parents=True)
    queue = (node.parent if partition else node) / "queue"
    queue.mkdir(exist_ok=True)
    (queue / "logical_block_size").write_text(lbs + "\n")
    return str(tmp_path / "sys")


@pytest.mark.parametrize("partition", [False, True])
def test_device_logical_block_size_from_sysfs(tmp_path, partition):
    if os.major(os.stat(tmp_path).st_dev) == 0:
        pytest.skip("tmp_path is on no block device here")
    sysfs = _fake_sysfs(tmp_path, tmp_path, partition=partition)
    assert device_logical_block_size(str(tmp_path), sysfs=sysfs) == 4096


def test_device_logical_block_size_unknown(tmp_path):
    assert device_logical_block_size(str(tmp_path / "missing")) is None
    assert device_logical_block_size(str(tmp_path), sysfs=str(tmp_path / "nosys")) is None
    assert device_logical_block_size("/proc") is None  # no block device behind it


def test_probe_measures_the_alignment_o_direct_takes(tmp_path):
    if not probe_direct_io(str(tmp_path))[0]:
        pytest.skip("no O_DIRECT on tmp_path")
    a = probe_direct_alignment(str(tmp_path))
    assert a in (512, 1024, 2048, 4096)
    lbs = device_logical_block_size(str(tmp_path))
    if lbs:
        assert a >= lbs  # never less than the device itself takes
    assert os.listdir(tmp_path) == []  # the probe file is gone


def _target(**kw) -> Target:
    base = dict(path_or_url="/d", root="/d", fs_type="ext4", mount_source="/dev/vda")
    return Target(**{**base, **kw})


def test_check_names_the_size_the_alignment_and_both_fixes():
    t = _target(direct_io=True, direct_align=512)
    with pytest.raises(UsageError) as ei:
        check_direct_alignment({"block_size": 4000, "size": 8 << 20}, t)
    line = ei.value.one_line()
    assert int(ei.value.exit_status) == 2 and "\n" not in line
    assert line == (
        "block_size=4000 bytes cannot be aligned for direct I/O: O_DIRECT needs multiples of "
        "512 bytes (O_DIRECT on /dev/vda (ext4), measured in the run directory); use "
        "--buffered, or an aligned block_size such as 4KiB"
    )
    with pytest.raises(UsageError) as ei:
        check_direct_alignment({"block_sizes[0]": 4096, "block_sizes[1]": 1000}, t)
    assert ei.value.one_line().startswith("block_sizes[1]=1000 bytes cannot be aligned")
    assert ei.value.one_line().endswith("aligned block_sizes such as 1KiB")
    with pytest.raises(UsageError) as ei:
        check_direct_alignment({"size": 10**6}, _target(direct_io=True, direct_align=4096))
    assert ei.value.one_line().endswith("aligned size such as 976KiB")  # the nearest: 244 x 4 KiB
    check_direct_alignment({"block_size": 1536, "size": 512 * 7}, t)  # aligned: no error


def test_alignment_applies_only_where_o_direct_is_used():
    sizes = {"block_size": 4000}
    for t in (
        _target(fs_type="tmpfs", direct_io=True, direct_align=512),  # memory: buffered anyway
        _target(direct_io="unsupported"),  # the probe refused O_DIRECT: buffered fallback
        _target(kind="fsspec", fs_type="s3"),
    ):
        assert direct_alignment(t) is None
        check_direct_alignment(sizes, t)
    assert direct_alignment(_target(direct_io=True, direct_align=4096))[0] == 4096
    assert direct_alignment(_target(direct_io=True))[0] == 4096  # not measured: 4 KiB


def test_sequential_plan_lists_every_size_that_reaches_o_direct():
    wl = load_workload(
        "sequential-write",
        {"block_sizes": [4096, 1 << 20], "randread": True, "rand_block_size": 8192},
    )
    assert sequential.plan(wl.params).direct_sizes == {
        "block_size": wl.params["block_size"], "size": wl.params["size"],
        "block_sizes[0]": 4096, "block_sizes[1]": 1 << 20, "rand_block_size": 8192,
    }  # fmt: skip
    buffered = load_workload("sequential-write", {"direct": False, "block_size": 4000})
    assert sequential.plan(buffered.params).direct_sizes == {}
