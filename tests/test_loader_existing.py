"""``iobench loader PATH --existing``: the user's own dataset, read-only, every format decoded
for real, corrupt samples counted and named, the split of the time measured, bad input one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import snapshot
from existing_datasets import CORRUPT, MAKERS

from iobench.formats import tfrecord as tfr
from iobench.formats.detect import scan

pytest.importorskip("PIL", reason="Pillow is the images extra")
pytest.importorskip("h5py", reason="h5py is the hdf5 extra")

BASE = ["--set", "batch_size=4", "--set", "compute_s=1ms", "--no-history", "--json", "-q"]


def _run(cli, data, out, *args):
    return cli("loader", data, "--existing", *BASE, "--output", out, *args)


def _ok(r):
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.parametrize("fmt", sorted(MAKERS))
def test_every_format_is_detected_decoded_and_split(cli, tmp_path, fmt):
    data = tmp_path / "data"
    n = MAKERS[fmt](data)
    before = snapshot(data)
    res = _ok(_run(cli, data, tmp_path / "out", "--workers", "0"))
    ld = res["loader"]
    ex = ld["existing"]
    assert ex["dataset"]["format"] == fmt
    assert ex["dataset"]["format_source"].startswith("detected from the names")
    assert ex["dataset"]["samples_read"] == n  # every sample decoded, none failed
    assert ex["failed"] == {"count": 0, "ok": n, "share": 0.0, "examples": [], "files": 0,
                            "estimated": 0, "basis": "every failed sample counted", "transform": 0}  # fmt: skip
    sp = ex["split"]
    assert sp["read_s_per_sample"] > 0 and sp["decode_s_per_sample"] > 0
    assert sp["collate_s_per_batch"] > 0 and sp["open_s_per_file"] > 0
    assert ld["bound"] in ("storage", "decode CPU", "compute")
    assert (sp["check_s_per_sample"] > 0) == (fmt == "tfrecord")
    assert ld["cache"] in ("dropped", "cached")
    assert ex["terms"]["files"] == ex["dataset"]["files"]
    assert ex["terms"]["cache_read_s_per_sample"] > 0 and ex["terms"]["gpus"] == 1
    lo, hi = ex["terms"]["read_range"]
    assert 0 <= lo <= hi
    assert ex["terms"]["samples_per_file"] == pytest.approx(n / ex["dataset"]["files"])
    assert res["phases"] == [] and res["workload"]["generator"] == "loader-existing"
    assert snapshot(data) == before  # nothing written, renamed or removed in the dataset
    assert not (data / "out").exists()


def test_the_split_is_per_worker_and_the_table_shows_it(cli, tmp_path):
    data = tmp_path / "data"
    MAKERS["image"](data, per_class=12)
    res = _ok(_run(cli, data, tmp_path / "out", "--workers", "2"))
    ex = res["loader"]["existing"]
    assert sorted(w["worker"] for w in ex["workers"]) == [0, 1]
    assert sum(w["samples"] for w in ex["workers"]) == 24
    assert all(w["read_s_per_sample"] > 0 for w in ex["workers"])
    text = cli("report", tmp_path / "out" / "result.json")
    assert text.code == 0, text.err
    from iobench.core.units import format_seconds

    per = format_seconds(ex["split"]["read_s_per_sample"])
    assert f"read {per}" in text.out  # the same figure as the JSON holds
    md = cli("report", tmp_path / "out" / "result.json", "--markdown")
    assert f"read {per}" in md.out
    from iobench import history
    from iobench.result.file import load

    rows = {
        r["metric"]: r["value"]
        for r in history.metric_rows(load(tmp_path / "out" / "result.json"))
        if r["phase"] == "loader" and r["repeat"] == 0
    }
    assert rows["read_s_per_sample"] == ex["split"]["read_s_per_sample"]  # the same value
    assert rows["decode_cpu_s_per_sample"] == ex["split"]["decode_cpu_s_per_sample"]
    assert rows["au"] == res["loader"]["au"]
    # the diagnosis: in the JSON (threshold from the loop's au_min), in every rendering
    d = ex["diagnosis"]
    assert d["threshold"] == 0.9 and d["now"]["estimate"] is True
    assert d["terms"]["step_overhead_s"] == ex["terms"]["step_overhead_s"] >= 0
    lo, hi = ex["terms"]["step_overhead_range"]
    assert 0 <= lo <= ex["terms"]["step_overhead_s"] <= hi
    now = f"AU {d['now']['au']:.0%}"
    for out in (text.out, md.out):
        assert "Diagnosis (estimate)" in out and "Advice (estimate)" in out
        assert now in out and "starvation model" in out


@pytest.mark.parametrize("fmt", sorted(CORRUPT))
def test_a_corrupt_file_is_counted_and_named(cli, tmp_path, fmt):
    data = tmp_path / "data"
    MAKERS[fmt](data)
    rel, body = CORRUPT[fmt]
    (data / rel).write_bytes(body())
    r = _run(cli, data, tmp_path / "out", "--workers", "0")
    # one bad file in a few dozen samples: more than the 1 % allowed, exit 4, one line
    assert r.code == 4, r.err
    lines = [ln for ln in r.err.splitlines() if "error" in ln]
    assert len(lines) == 1 and rel in lines[0] and "samples failed" in lines[0]
    saved = json.loads((tmp_path / "out" / "result.json").read_text())
    assert saved["status"] == "failed"
    failed = saved["loader"]["existing"]["failed"]
    assert failed["count"] == 1 and failed["examples"][0].startswith(rel)


def test_a_few_bad_tfrecord_crcs_are_skipped_below_the_threshold(cli, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    recs = [tfr.frame(bytes([i % 251]) * 40) for i in range(300)]
    bad = bytearray(recs[7])
    bad[20] ^= 0xFF  # a byte of the record's data: its data CRC fails
    recs[7] = bytes(bad)
    (data / "a.tfrecord").write_bytes(b"".join(recs))
    res = _ok(_run(cli, data, tmp_path / "out", "--workers", "0"))
    failed = res["loader"]["existing"]["failed"]
    offset = sum(len(r) for r in recs[:7])
    assert failed["count"] == 1 and failed["ok"] == 299
    # the Python CRC check is iobench's cost, reported apart from the decode a job would pay
    assert res["loader"]["existing"]["split"]["check_s_per_sample"] > 0
    assert failed["examples"] == [f"a.tfrecord#{offset}: ValueError: data CRC mismatch in the "
                                  f"record at byte {offset}"]  # fmt: skip
    assert any("1 sample(s) failed" in w for w in res["warnings"])


def test_tfrecord_framing_and_crcs():
    assert tfr.crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert tfr.crc32c(b"") == 0
    for n in (1, 7, 8, 9, 1000):
        data = os.urandom(n)
        slow = 0xFFFFFFFF
        for b in data:
            slow ^= b
            for _ in range(8):
                slow = (slow >> 1) ^ (0x82F63B78 if slow & 1 else 0)
        assert tfr.crc32c(data) == slow ^ 0xFFFFFFFF
    good = tfr.frame(b"abc") + tfr.frame(b"")
    assert [r for _, r in tfr.records(good)] == [b"abc", b""]
    broken_len = bytearray(good)
    broken_len[0] ^= 1
    with pytest.raises(ValueError, match="length CRC mismatch"):
        list(tfr.records(bytes(broken_len)))
    with pytest.raises(ValueError, match="runs past the end|truncated"):
        list(tfr.records(good[:-3]))


def test_tf_example_features_are_decoded():
    from existing_datasets import example

    ex = tfr.parse_example(example(-3, b"\x01\x02", 1.5))
    assert ex["label"].tolist() == [-3] and ex["image"] == [b"\x01\x02"]
    assert ex["score"].tolist() == [1.5]
    assert tfr.parse_example(b"\xff\xff not protobuf") is None


def test_the_users_transform_runs_and_its_failures_are_counted(cli, tmp_path, monkeypatch):
    pkg = tmp_path / "mods"
    pkg.mkdir()
    (pkg / "aug_wf.py").write_text(
        "import numpy as np\n"
        "def flip(x):\n"
        "    if isinstance(x, dict):\n"
        "        return {k: np.flip(np.asarray(v)).copy() for k, v in x.items()}\n"
        "    return np.flip(x) * 2\n"
        "def strided(x):\n"
        "    return np.flip(x)\n"
        "def picky(x):\n"
        "    if int(x[0]) == 9:\n"
        "        raise ValueError('sample nine')\n"
        "    return x\n"
        "def boom(x):\n"
        "    raise RuntimeError('augment failed')\n"
    )
    monkeypatch.syspath_prepend(str(pkg))
    data = tmp_path / "data"
    MAKERS["npz"](data)
    res = _ok(_run(cli, data, tmp_path / "out", "--workers", "0", "--transform", "aug_wf:flip"))
    ex = res["loader"]["existing"]
    assert ex["transform"] == "aug_wf:flip" and ex["split"]["transform_s_per_sample"] > 0
    assert ex["failed"]["count"] == 0 and ex["dataset"]["samples_read"] == 8
    r = _run(cli, data, tmp_path / "out2", "--workers", "0", "--transform", "aug_wf:boom")
    assert r.code == 4  # every sample failed: the run did
    assert "augment failed" in r.err and "RuntimeError" in r.err
    # a transform whose output torch cannot collate fails the run as training would: one line
    r = _run(cli, data, tmp_path / "out4", "--workers", "0", "--format", "npz",
             "--transform", "aug_wf:strided")  # fmt: skip
    assert r.code == 4 and "collating a batch failed" in r.err, r.err
    assert len(r.err.strip().splitlines()) == 1
    # one sample of 300 failing in the transform: counted and named, not fatal
    many = tmp_path / "many"
    many.mkdir()
    recs = b"".join(tfr.frame(bytes([i % 251]) * 40) for i in range(300))
    (many / "a.tfrecord").write_bytes(recs)
    res = _ok(_run(cli, many, tmp_path / "out3", "--workers", "0", "--transform", "aug_wf:picky"))
    failed = res["loader"]["existing"]["failed"]
    assert failed["count"] == 2 and failed["ok"] == 298  # records 9 and 260 (260 % 251 = 9)
    assert all("ValueError: sample nine" in e for e in failed["examples"])


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--transform", "no_such_module_wf:f"], "cannot import no_such_module_wf"),
        (["--transform", "os.path"], "is not MODULE:FUNCTION"),
        (["--transform", "os:no_such_fn"], "os has no no_such_fn"),
        (["--format", "csv"], "unknown dataset format 'csv'"),
        (["--set", "files=10"], "--set files describes a synthetic dataset"),
        (["--gpus", "2"], "one emulated accelerator"),
        (["--direct"], "--direct does not apply to --existing"),
        (["--steps", "1"], "--steps must be at least 2"),
        (["--keep"], "--keep does not apply to --existing"),
    ],
)
def test_bad_options_are_one_line_and_write_nothing(cli, tmp_path, args, needle):
    data = tmp_path / "data"
    MAKERS["npz"](data)
    r = _run(cli, data, tmp_path / "out", *args)
    assert r.code == 2, r.err
    assert needle in r.err and len(r.err.strip().splitlines()) == 1
    assert "Traceback" not in r.err
    assert not (tmp_path / "out").exists()


def test_bad_datasets_are_one_line(cli, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden").write_text("x")
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "a.xyz").write_text("x")
    cases = [
        (tmp_path / "missing", "does not exist"),
        (empty, "holds no files"),
        (unknown, "no known dataset format among 1 files (extensions: .xyz ×1)"),
        (empty / ".hidden", "is not a directory"),
    ]
    for path, needle in cases:
        r = _run(cli, path, tmp_path / "out")
        assert r.code == 2 and needle in r.err, (path, r.err)
        assert len(r.err.strip().splitlines()) == 1
    r = cli("loader", unknown, "--format", "npz", "--no-history")
    assert r.code == 2 and "--format applies to --existing only" in r.err
    data = tmp_path / "data"
    MAKERS["npz"](data)
    r = _run(cli, data, data / "results")
    assert r.code == 2 and "lies inside the dataset" in r.err
    assert not (data / "results").exists()


def test_loader_needs_a_profile_without_existing(cli, tmp_path):
    r = cli("loader", tmp_path, "--no-history", "--output", tmp_path / "o")
    assert r.code == 2 and r.err.strip() == (
        "iobench: error: iobench loader needs --profile; or --existing for your dataset"
    )
    assert not (tmp_path / "o").exists()


def test_format_override_takes_files_without_the_extension(cli, tmp_path):
    data = tmp_path / "data"
    MAKERS["tfrecord"](data)
    for p in data.iterdir():
        p.rename(p.with_suffix(""))  # train-00000: TFRecord shards often carry no extension
    r = _run(cli, data, tmp_path / "o1")
    assert r.code == 2 and "give --format" in r.err
    res = _ok(_run(cli, data, tmp_path / "o2", "--format", "tfrecord", "--workers", "0"))
    assert res["loader"]["existing"]["dataset"]["format_source"] == "--format"
    assert res["loader"]["existing"]["dataset"]["samples_read"] == 16


def test_a_huge_dataset_is_planned_from_a_stat_sample(tmp_path, monkeypatch):
    from iobench.formats import detect

    data = tmp_path / "data"
    MAKERS["npz"](data, files=30)
    monkeypatch.setattr(detect, "STAT_ALL_FILES", 20)
    monkeypatch.setattr(detect, "STAT_SAMPLE", 10)
    plan = scan(str(data))
    d = plan.to_dict()
    assert (d["files"], d["files_listed"], d["files_stat"]) == (30, 30, 10)
    assert d["bytes_basis"].startswith("estimate: mean of 10 stat'ed files")
    assert d["file_bytes"]["p0"] <= d["file_bytes"]["p50"] <= d["file_bytes"]["p100"]
    monkeypatch.setattr(detect, "STAT_ALL_FILES", 100)
    exact = scan(str(data)).to_dict()
    assert exact["files_stat"] == 30 and exact["bytes"] == sum(
        p.stat().st_size for p in data.iterdir()
    )
    assert exact["layout"] == {"directories": 1, "kind": "shards", "shards": 30}


def test_image_folder_layout_is_recorded(tmp_path):
    data = tmp_path / "data"
    MAKERS["image"](data, per_class=3)
    (data / "README.txt").write_text("not an image")
    d = scan(str(data)).to_dict()
    assert d["layout"]["kind"] == "image-folder" and d["layout"]["classes"] == 2
    assert d["files"] == 6 and d["other_files_ignored"] == 1


def _mount_ro(src: Path, dst: Path) -> None:
    dst.mkdir()
    subprocess.run(["mount", "--bind", str(src), str(dst)], check=True)
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(dst)], check=True)
    except subprocess.CalledProcessError:
        subprocess.run(["umount", str(dst)], check=False)
        raise


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only bind mount needs root")
@pytest.mark.skipif(not shutil.which("mount"), reason="no mount(8)")
def test_a_read_only_bind_mount_is_read_and_left_untouched(tmp_path):
    src = tmp_path / "src"
    MAKERS["webdataset"](src)
    before = snapshot(src)
    ro = tmp_path / "ro"
    _mount_ro(src, ro)
    try:
        with pytest.raises(OSError):
            (ro / "probe").write_text("x")  # the mount really is read-only
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        r = subprocess.run(
            [sys.executable, "-m", "iobench", "loader", str(ro), "--existing", *BASE,
             "--workers", "2", "--output", str(tmp_path / "out")],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res["status"] == "complete"
        assert res["loader"]["existing"]["dataset"]["samples_read"] == 12
        assert res["target"]["run_dir"] == ""
        assert snapshot(ro) == before
    finally:
        subprocess.run(["umount", str(ro)], check=False)
    assert snapshot(src) == before


def test_the_diagnosis_takes_au_min_and_a_run_without_compute_has_none(cli, tmp_path):
    data = tmp_path / "data"
    MAKERS["npz"](data)
    res = _ok(_run(cli, data, tmp_path / "o1", "--workers", "0", "--set", "au_min=0.5"))
    assert res["loader"]["existing"]["diagnosis"]["threshold"] == 0.5
    args = ("--workers", "0", "--set", "compute_s=0")
    res = _ok(cli("loader", data, "--existing", *BASE, "--output", tmp_path / "o2", *args))
    assert res["loader"]["existing"]["diagnosis"] is None
    assert any("no diagnosis" in w and "compute_s" in w for w in res["warnings"])


def test_step_overhead_counts_the_loop_and_the_hand_off_not_the_wait():
    from iobench.loader.existing import step_overhead
    from iobench.loader.existing_summary import overhead_of

    # batch finished at 1.5, the loop asked at 1.0 and got it at 1.6 with 0.02 s of its own
    # CPU: 0.1 s loop before + 0.05 s bookkeeping + 0.1 s fetch after the batch was made, of
    # which 0.08 s the worker's hand-off
    own, handoff = step_overhead(0.9, (1.0, 1.6, 1.65), 1.5, 0.02)
    assert (own, handoff) == (pytest.approx(0.25), pytest.approx(0.08))
    assert step_overhead(1.0, (1.0, 1.2, 1.2), 0.5, 0.01) == (pytest.approx(0.2), None)
    assert step_overhead(1.0, (1.0, 1.2, 1.2), 0.0, 0.01) == (0.0, None)  # unknown: waiting
    got = overhead_of([{"overhead_s": [0.01, 0.03], "handoff_s": [0.004]}, {"overhead_s": [0.02]}])
    assert got["step_overhead_s"] == pytest.approx(0.02)
    assert (got["handoff_s_per_batch"], got["handoff_batches"]) == (0.004, 1)
    lo, hi = got["step_overhead_range"]
    assert 0.01 <= lo <= 0.02 <= hi <= 0.03
    none = overhead_of([{"overhead_s": []}])
    assert (none["step_overhead_s"], none["step_overhead_range"], none["handoff_batches"]) == (
        0,
        None,
        0,
    )
