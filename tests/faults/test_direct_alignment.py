"""Direct I/O asked for (explicitly or by default) with sizes it cannot take.

``--set block_size=4KB`` (4,000 bytes) on an O_DIRECT-capable disk used to fall back to the
page cache with only a warning (626 MiB/s, a 2 us p50). A block size, or a size that fixes
files' last blocks and workers' offsets, that is not a multiple of the target's O_DIRECT
alignment is now refused at planning: exit 2, one line naming the alignment and the two
fixes, nothing written (not even the run directory). Where O_DIRECT is unavailable (tmpfs,
a filesystem that refuses it) the run still falls back to buffered I/O and says so; whole-file
reads (datasets with drawn sizes, small checkpoint files) take any size by design.
"""

from __future__ import annotations

import pytest
from conftest import SEQ, debris, one_line, result

import iobench.run.session as session_mod
import iobench.target as target_mod
from iobench.target import device_logical_block_size, probe_direct_alignment, probe_direct_io

S = [*SEQ, "--set", "size=4MiB", "-q"]


def _needs_direct_disk(path) -> int:
    """The O_DIRECT alignment measured at ``path`` (skip where there is no such disk)."""
    lbs = device_logical_block_size(str(path))
    if lbs is None or not probe_direct_io(str(path))[0]:
        pytest.skip("the test directory is not on an O_DIRECT-capable block device")
    return probe_direct_alignment(str(path))


@pytest.mark.parametrize(
    "sets, name",
    [
        (["block_size=4KB"], "block_size=4000 bytes"),
        (["block_sizes=[4KiB,1000]"], "block_sizes[1]=1000 bytes"),
        (["size=1000000"], "size=1000000 bytes"),
        (["randread=true", "rand_block_size=1000"], "rand_block_size=1000 bytes"),
    ],
)
def test_unalignable_direct_sizes_are_refused_before_anything_is_written(
    cli, planted, tmp_path, monkeypatch, sets, name
):
    _needs_direct_disk(planted.path)

    def no_run_dir(*a, **k):
        raise AssertionError("the run directory was created")

    monkeypatch.setattr(session_mod, "create_run_dir", no_run_dir)
    args = [a for s in sets for a in ("--set", s)]
    r = cli("run", "sequential-write", planted.path, *S, *args, "--output", tmp_path / "out")
    assert r.code == 2, r.err
    line = one_line(r.err)
    assert name in line and "cannot be aligned for direct I/O" in line
    assert "O_DIRECT needs multiples of" in line and "logical block size" in line
    assert "use --buffered, or an aligned" in line
    assert r.out == "" and not (tmp_path / "out").exists()
    assert debris(planted.path) == [] and planted.unchanged()


def test_the_alignment_measured_in_the_run_directory_refuses_too(
    cli, planted, tmp_path, monkeypatch
):
    """A filesystem whose O_DIRECT needs more than its device's logical block size (btrfs:
    its 4 KiB sectors), or one on no block device: the probe's figure decides, before any
    phase; the run directory (made for the probe) is removed again."""
    _needs_direct_disk(planted.path)
    monkeypatch.setattr(target_mod, "device_logical_block_size", lambda p, **k: None)
    monkeypatch.setattr(target_mod, "probe_direct_alignment", lambda d, fd=None: 4096)
    r = cli("run", "sequential-write", planted.path, *S, "--set", "block_size=1536",
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 2, r.err
    line = one_line(r.err)
    assert "block_size=1536 bytes" in line and "multiples of 4096 bytes" in line
    assert "measured in the run directory" in line and "such as 4KiB" in line
    assert not (tmp_path / "out").exists()
    assert debris(planted.path) == [] and planted.unchanged()


def test_a_block_size_at_the_measured_alignment_runs_direct(cli, planted, tmp_path):
    align = _needs_direct_disk(planted.path)
    bs = 3 * align  # 1536 bytes on a 512-byte device: not a page, still aligned
    r = cli("run", "sequential-write", planted.path, *S, "--set", f"block_size={bs}",
            "--set", f"size={64 * bs}", "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 0, r.err
    res = result(tmp_path / "out")
    assert res["target"]["direct_align"] == align
    got = [(p["name"], p["cache"], p["bytes"], p["ops"]) for p in res["phases"]]
    assert got == [
        ("seq-write", "direct", 2 * 64 * bs, 2 * 64),
        ("seq-read", "direct", 2 * 64 * bs, 2 * 64),
    ]
    assert debris(planted.path) == [] and planted.unchanged()


def test_random_reads_split_three_ways_stay_aligned(cli, planted, tmp_path):
    """8 MiB files split over 3 random readers: each region started 2,796,202 bytes in, an
    EINVAL under O_DIRECT (exit 4); regions now start on the block grid."""
    _needs_direct_disk(planted.path)
    r = cli("run", "sequential-write", planted.path, *SEQ, "--set", "size=8MiB", "-q",
            "--set", "randread=true", "--set", "rand_jobs=3", "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 0, r.err
    rand = next(p for p in result(tmp_path / "out")["phases"] if p["name"] == "rand-read")
    assert (rand["status"], rand["cache"], rand["concurrency"]) == ("ok", "direct", 3)
    assert rand["bytes"] == 3 * (8 << 20)
    assert debris(planted.path) == [] and planted.unchanged()


def test_tmpfs_still_falls_back_to_buffered(cli, tmp_path, tmpfs):
    from conftest import plant

    planted = plant(tmpfs("128m") / "t")
    r = cli("run", "sequential-write", planted.path, *S, "--set", "block_size=4KB",
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 0, r.err
    res = result(tmp_path / "out")
    assert [p["cache"] for p in res["phases"]] == ["buffered", "buffered"]
    assert any("keeps files in memory" in w for w in res["warnings"])
    assert debris(planted.path) == [] and planted.unchanged()


def test_o_direct_refused_by_the_filesystem_still_falls_back(cli, planted, tmp_path, monkeypatch):
    """A filesystem on no block device that refuses O_DIRECT (a FUSE mount): nothing to align
    to, the buffered fallback, recorded as such."""
    monkeypatch.setattr(target_mod, "device_logical_block_size", lambda p, **k: None)
    monkeypatch.setattr(target_mod, "probe_direct_io", lambda d, fd=None: (False, "EINVAL"))
    r = cli("run", "sequential-write", planted.path, *S, "--set", "block_size=4KB",
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 0, r.err
    res = result(tmp_path / "out")
    assert res["target"]["direct_io"] == "unsupported" and "direct_align" not in res["target"]
    assert [p["cache"] for p in res["phases"]] == ["buffered", "dropped"]
    assert any("O_DIRECT unavailable" in w for w in res["warnings"])
    assert debris(planted.path) == [] and planted.unchanged()


def test_whole_files_of_any_size_are_read_direct(cli, planted, tmp_path):
    """Dataset files of drawn sizes and small checkpoint files of 1000 and 3000 bytes: a
    whole-file O_DIRECT read asks for whole blocks and gets the file's bytes, so no size is
    rounded and none refused."""
    _needs_direct_disk(planted.path)
    r = cli("run", "dataset-read", planted.path, "--set", "time=none",
            "--set", "files=12", "--set", "file_size=10000",
            "--set", "size_sd=3000", "--set", "readers=[2]", "--set", "orders=sequential", "-q",
            "--output", tmp_path / "d")  # fmt: skip
    assert r.code == 0, r.err
    ds = result(tmp_path / "d")["phases"]
    assert [p["name"] for p in ds] == ["dataset-write", "dataset-read-r2"]
    assert ds[1]["cache"] == "direct" and ds[1]["bytes"] == ds[0]["bytes"]
    assert ds[1]["bytes"] % 512  # sizes drawn from a distribution, not rounded
    r = cli("run", "checkpoint-smallfile", planted.path, "--set", "files=4",
            "--set", "file_sizes=[1000,3000]", "--set", "checkpoint_size=0", "--set", "time=none", "--jobs", "2", "-q",
            "--output", tmp_path / "c")  # fmt: skip
    assert r.code == 0, r.err
    ck = {p["name"]: p for p in result(tmp_path / "c")["phases"]}
    assert ck["ckpt-open_read"]["cache"] == "direct"
    assert ck["ckpt-open_read"]["bytes"] == ck["ckpt-create"]["bytes"]
    assert debris(planted.path) == [] and planted.unchanged()
