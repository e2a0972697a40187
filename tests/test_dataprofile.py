"""``iobench profile``: an existing dataset's statistics as a profile the loader reads, read-only,
with no names; every format's samples counted from its framing; bad input refused."""

from __future__ import annotations

import io
import os
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest
import tomllib
from conftest import snapshot

from iobench.loader.profile import magic_format, profile_dataset, render_toml
from iobench.spec.workload import load_profile


def _jpeg(n: int) -> bytes:
    """A real JPEG (it decodes) padded to ``n`` bytes after its end marker."""
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (90, 30, 200)).save(buf, format="JPEG")
    data = buf.getvalue()
    if n < len(data):  # too small for a real one: its magic only
        return data[:4] + bytes(n - 4)
    return data + bytes(n - len(data))


@pytest.fixture
def images(tmp_path: Path) -> Path:
    root = tmp_path / "secret-imagenet"
    for c, sizes in (("n01440764", (1000, 3000)), ("n02102040", (2000, 2000))):
        (root / c).mkdir(parents=True)
        for i, n in enumerate(sizes):
            (root / c / f"private_{c}_{i}.JPEG").write_bytes(_jpeg(n))
    return root


def _profile(cli, root: Path, out: Path, *args: str) -> dict:
    r = cli("profile", root, "--output", out, *args)
    assert r.code == 0, r.err
    return tomllib.loads(out.read_text())


def test_image_folder_profile_has_statistics_and_no_names(cli, images, tmp_path):
    before = snapshot(images)
    out = tmp_path / "p.toml"
    data = _profile(cli, images, out)
    text = out.read_text()
    # sizes 1000, 3000, 2000, 2000: mean 2000, population sd √500,000 ≈ 707
    assert data["format"] == "raw" and data["samples_per_file"] == 1
    assert data["files"] == 4 and data["sample_size"] == 2000 and data["sample_size_sd"] == 707
    assert "classes 2" in text and "image folder" in text and "total bytes: 8,000 (exact)" in text
    for name in ("secret", "imagenet", "n01440764", "private", "JPEG"):
        assert name not in text
    assert snapshot(images) == before  # nothing written, renamed or changed in the dataset
    prof = load_profile(str(out))  # the loader's own reader takes it
    assert (prof.format, prof.files, prof.sample_size) == ("raw", 4, 2000)


def test_webdataset_shards_count_samples_by_key(tmp_path):
    root = tmp_path / "wds"
    root.mkdir()
    for s in range(2):
        with tarfile.open(root / f"shard-{s}.tar", "w") as t:
            for k in range(5):
                for ext, n in (("jpg", 300 + 100 * k), ("cls", 4)):
                    ti = tarfile.TarInfo(f"{s:02d}{k:03d}.{ext}")
                    ti.size = n
                    t.addfile(ti, io.BytesIO(b"x" * n))
    p, basis = profile_dataset(str(root))
    # samples of 304, 404, …, 704 bytes (jpg + cls): mean 504, sd √20,000 ≈ 141
    assert (p.fmt, p.synthetic_format, p.samples_per_file) == ("webdataset", "tar", 5)
    assert (p.sample_size, p.sample_size_sd) == (504, 141)
    assert "from the framing" in basis["sample_size"]


def test_parquet_npz_npy_tfrecord_counted_from_their_framing(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    cases = {}
    d = tmp_path / "pq"
    d.mkdir()
    for i in range(3):
        pq.write_table(pa.table({"x": list(range(7))}), d / f"{i}.parquet")
    cases[d] = ("parquet", "parquet", 7)
    d = tmp_path / "npz-samples"  # one array per sample, as iobench and DLIO write
    d.mkdir()
    np.savez(d / "a.npz", **{f"s{j:05d}": np.zeros(10, np.uint8) for j in range(6)})
    cases[d] = ("npz", "npz", 6)
    d = tmp_path / "npz-columns"  # x and y columns of 50 rows
    d.mkdir()
    np.savez(d / "a.npz", x=np.zeros((50, 3)), y=np.zeros(50))
    cases[d] = ("npz", "npz", 50)
    d = tmp_path / "npy"
    d.mkdir()
    np.save(d / "a.npy", np.zeros((12, 4), np.float32))
    cases[d] = ("npz", "npz", 12)  # one detector (formats.detect): npy files are npz's
    d = tmp_path / "tfr"
    d.mkdir()
    with open(d / "a.tfrecord", "wb") as f:
        for _ in range(9):
            f.write(struct.pack("<Q", 20) + bytes(4) + bytes(20) + bytes(4))
    cases[d] = ("tfrecord", "tar", 9)
    for root, (fmt, synthetic, spf) in cases.items():
        p, _ = profile_dataset(str(root))
        assert (p.fmt, p.synthetic_format, p.samples_per_file) == (fmt, synthetic, spf), root


def test_corrupt_files_are_counted_and_all_corrupt_is_refused(cli, tmp_path):
    from iobench.formats.tfrecord import frame

    root = tmp_path / "tfr"
    root.mkdir()
    good = frame(bytes(20))  # its CRCs hold: the decode pass reads it too
    (root / "a.tfrecord").write_bytes(good * 3)
    (root / "b.tfrecord").write_bytes(good + struct.pack("<Q", 1000))  # runs past the end
    p, _ = profile_dataset(str(root))
    assert (p.unreadable, p.samples_per_file, p.inspected) == (1, 3, 2)
    (root / "a.tfrecord").write_bytes(b"\x01")
    r = cli("profile", root, "--output", tmp_path / "p.toml")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert "could be read as tfrecord" in r.err
    assert not (tmp_path / "p.toml").exists()


def test_contents_that_say_another_format_are_not_counted(tmp_path):
    root = tmp_path / "pq"
    root.mkdir()
    (root / "a.parquet").write_bytes(_jpeg(100))
    assert magic_format(_jpeg(100)) == "image"
    with pytest.raises(Exception, match="1 whose contents say another format"):
        profile_dataset(str(root))


def test_a_huge_dataset_is_sampled_and_says_so(cli, tmp_path):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(40):
        (root / f"{i}.jpg").write_bytes(_jpeg(1000 + 10 * i))
    out = tmp_path / "p.toml"
    data = _profile(cli, root, out, "--sample", "10", "--scale", "0.25")
    text = out.read_text()
    assert "10 stat'ed" in text and "estimate from 10 files stat'ed" in text
    assert data["files"] == 10  # 40 × 0.25
    assert "scaled ×0.25: 10 files instead of 40" in text
    p, _ = profile_dataset(str(root), sample=10)
    assert p.files_stat == 10 and not p.bytes_exact and p.files == 40


def test_set_gives_the_loop_keys(cli, images, tmp_path):
    data = _profile(
        cli, images, tmp_path / "p.toml", "--set", "batch_size=32", "--set", "compute_s=0.2"
    )
    assert data["batch_size"] == 32 and data["compute_s"] == 0.2


def test_render_is_valid_toml_with_odd_text(images):
    p, basis = profile_dataset(str(images))
    text = render_toml(p, basis, sets={"description": 'quote " and \\ backslash'})
    assert tomllib.loads(text)["description"] == 'quote " and \\ backslash'


@pytest.mark.parametrize(
    "args,needle",
    [
        (["{missing}"], "does not exist"),
        (["{file}"], "is not a directory"),
        (["{empty}"], "holds no files"),
        (["{odd}"], "no known dataset format"),
        (["{images}", "--output", "{images}/p.toml"], "inside the dataset"),
        (["{images}", "--output", "{existing}"], "exists"),
        (["{images}", "--output", "{tmp}/no/such/dir/p.toml"], "directory does not exist"),
        (["{images}", "--set", "nope=1"], "unknown profile key"),
        (["{images}", "--set", "batch_size=zero"], "batch_size"),
        (["{images}", "--scale", "0"], "--scale"),
        (["{images}", "--sample", "0"], "--sample"),
        (["{images}", "--format", "dicom"], "unknown dataset format"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(
    cli, images, tmp_path, monkeypatch, args, needle
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "a.xyz").write_bytes(b"1")
    (tmp_path / "file").write_bytes(b"1")
    existing = tmp_path / "existing.toml"
    existing.write_text("keep me\n")
    names = {
        "missing": tmp_path / "missing", "file": tmp_path / "file", "empty": tmp_path / "empty",
        "odd": tmp_path / "odd", "images": images, "existing": existing, "tmp": tmp_path,
    }  # fmt: skip
    before = set(os.listdir(tmp_path))
    r = cli("profile", *[a.format(**names) for a in args])
    assert r.code == 2, r.out
    assert len(r.err.strip().splitlines()) == 1 and needle in r.err
    assert "Traceback" not in r.err
    assert set(os.listdir(tmp_path)) == before
    assert existing.read_text() == "keep me\n"


def test_force_overwrites(cli, images, tmp_path):
    out = tmp_path / "p.toml"
    out.write_text("old\n")
    assert _profile(cli, images, out, "--force")["files"] == 4


def test_an_fsspec_url_is_listed_with_its_sizes(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    for i in range(3):
        fs.pipe(f"/wg-profile/{i}.jpg", _jpeg(500 + i))
    try:
        p, _ = profile_dataset("memory://wg-profile")
        assert (p.fmt, p.files, p.total_bytes, p.inspected) == ("image", 3, 1503, 3)
    finally:
        fs.rm("/wg-profile", recursive=True)


def test_one_detector_for_the_profile_and_the_loader(tmp_path):
    from iobench.core.errors import UsageError
    from iobench.formats import detect
    from iobench.loader.profile import magic_format as profile_magic

    assert profile_magic is detect.magic_format  # the same detector, not a copy
    assert detect.magic_format(b"\x93NUMPY\x01\x00") == "npz"  # npy files are npz's reader's
    assert detect.magic_format(b"PK\x03\x04") == "npz"
    root = tmp_path / "bins"
    root.mkdir()
    for i in range(3):
        (root / f"{i}.bin").write_bytes(bytes(100 + i))
    (root / "notes.txt").write_text("x")
    p, _ = profile_dataset(str(root))  # a profile needs no reader: raw, one sample per file
    assert (p.fmt, p.files, p.samples_per_file) == ("raw", 3, 1)
    assert p.fmt_basis == "detected from the names of 3 of 4 files"
    with pytest.raises(UsageError, match="no known dataset format"):
        detect.scan(str(root))  # the loader has no reader for it


def _shard(path: Path, members: int = 5, size: int = 3000) -> None:
    with tarfile.open(path, "w") as t:
        for k in range(members):
            ti = tarfile.TarInfo(f"{k:03d}.bin")
            ti.size = size
            t.addfile(ti, io.BytesIO(b"x" * size))


def test_a_truncated_tar_shard_counts_as_unreadable(cli, tmp_path):
    """Listing a tar's headers seeks over the data: a shard cut inside a member's data still
    lists every header before the cut, and counted as readable."""
    root = tmp_path / "wds"
    root.mkdir()
    _shard(root / "a.tar")
    _shard(root / "b.tar")
    whole = (root / "b.tar").read_bytes()
    (root / "b.tar").write_bytes(whole[:7000])  # inside the third member's data
    p, _ = profile_dataset(str(root))
    assert (p.inspected, p.unreadable, p.samples_per_file) == (2, 1, 5)
    out = tmp_path / "p.toml"
    r = cli("profile", root, "--output", out)
    assert r.code == 0, r.err
    assert "unreadable: 1 of the 2 files opened" in r.out  # the output, not only the TOML
    assert "(1 unreadable" in out.read_text()


def test_the_output_states_the_unreadable_count_when_none_failed(cli, images, tmp_path):
    r = cli("profile", images, "--output", tmp_path / "p.toml")
    assert r.code == 0 and "unreadable: 0 of the 4 files opened" in r.out
