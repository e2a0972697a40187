"""A profile's replay keeps what made the real pipeline slow: ``iobench profile`` measures the
decode (CPU, wall, decoded size) and the per-file open the way ``loader --existing`` decodes,
and the synthetic loader spends that decode per sample in its workers and reports it."""

from __future__ import annotations

import io
import itertools
import json
import os
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
import tomllib

from iobench.core.errors import EngineUnavailable
from iobench.loader import decode_cost
from iobench.loader.dataset import DatasetIndex
from iobench.loader.profile import profile_dataset
from iobench.loader.torchdata import DecodeEmulation, SampleDataset, burn_cpu
from iobench.spec.workload import load_profile

PIL = pytest.importorskip("PIL.Image")


def _photo(h: int, w: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 255, (h, w, 3), dtype=np.uint8)
    buf = io.BytesIO()
    PIL.fromarray(img).save(buf, format="JPEG", quality=90)
    return buf.getvalue()


@pytest.fixture
def jpegs(tmp_path: Path) -> Path:
    root = tmp_path / "imgs"
    for i in range(6):
        (root / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        (root / f"c{i % 2}" / f"{i}.jpg").write_bytes(_photo(48, 64, i))
    return root


def test_the_profile_carries_the_decode_cost_and_its_basis(cli, jpegs, tmp_path):
    p, _ = profile_dataset(str(jpegs))
    d = p.decode
    assert d is not None and (d.files, d.samples) == (6, 6)
    assert d.decoded_bytes == 48 * 64 * 3  # RGB, as the --existing reader decodes it
    assert 0 < d.cpu_s < 1 and d.wall_s >= d.cpu_s * 0.5 and d.open_s > 0
    assert d.cpu_range[0] <= d.cpu_s <= d.cpu_range[1]
    out = tmp_path / "p.toml"
    r = cli("profile", jpegs, "--output", out)
    assert r.code == 0, r.err
    assert "decode: CPU" in r.out  # the output says it, not only the TOML
    data = tomllib.loads(out.read_text())
    assert data["decode_s"] > 0 and data["open_s"] > 0 and data["decode_wall_s"] > 0
    assert "decoded_size" not in data  # measured (the comment), replayed only when set
    assert f"--set decoded_size={48 * 64 * 3}" in out.read_text()
    assert "# decode: CPU" in out.read_text() and "of 6 files" in out.read_text()
    prof = load_profile(str(out))
    assert (prof.decode_s, prof.decoded_size) == (data["decode_s"], 0)


def test_raw_files_have_nothing_to_decode(tmp_path):
    root = tmp_path / "raw"
    root.mkdir()
    for i in range(3):
        (root / f"{i}.bin").write_bytes(bytes(1000))
    p, _ = profile_dataset(str(root))
    assert p.decode is None and "no decode" in p.decode_note


def test_a_missing_decoder_library_says_decode_not_measured(jpegs, monkeypatch):
    def missing(name):
        raise EngineUnavailable(f"dataset format {name!r} needs PIL", hint="install Pillow")

    monkeypatch.setattr(decode_cost, "get_reader", missing)
    p, _ = profile_dataset(str(jpegs))
    assert (
        p.decode is None and p.decode_note.startswith("not measured") and "Pillow" in p.decode_note
    )


class _FakeReader:
    """A decoder with a start-up: its first decode in a process burns START_S of thread CPU
    (a forked child inherits whether it has started), each decode STEADY_S; it records the
    files it decodes in order and, per decode, how many of its earlier samples are alive."""

    LIBRARY = None
    START_S, STEADY_S = 0.02, 0.001

    def __init__(self) -> None:
        self.started = False
        self.calls: list[str] = []
        self.alive: list[int] = []
        self.refs: list[weakref.ref] = []

    def samples(self, data: bytes, name: str):
        if not self.started:
            self.started = True
            burn_cpu(self.START_S)
        burn_cpu(self.STEADY_S)
        self.calls.append(name)
        self.alive.append(sum(r() is not None for r in self.refs))
        arr = np.frombuffer(data, np.uint8).copy()
        self.refs.append(weakref.ref(arr))
        yield name, arr


def _fake_measure(monkeypatch, n: int = 6, **kw):
    fake = _FakeReader()
    monkeypatch.setattr(decode_cost, "get_reader", lambda name: fake)
    blobs = [bytes([i]) * 64 for i in range(n)]
    cost, note, failed = decode_cost.measure(
        "image", list(range(n)), lambda i: io.BytesIO(blobs[i]), lambda i: f"f{i}", **kw
    )
    return fake, cost, note, failed


def test_the_decode_is_measured_as_a_worker_decodes(monkeypatch):
    """Samples held a batch at a time (a decode's CPU depends on what the allocator holds),
    passes over the files, never one file twice in a row (a worker never decodes so)."""
    monkeypatch.setattr(decode_cost, "COLLATE_PROBE", 0)  # no sample kept for the probe
    fake, cost, _, failed = _fake_measure(monkeypatch, batch_size=4)
    assert not failed and cost is not None and cost.files == 6
    assert len(fake.calls) == 1 + 6 * decode_cost.REPEATS  # the untimed one, then the passes
    assert all(a != b for a, b in itertools.pairwise(fake.calls))
    # each pass: the batch being filled is alive, a full batch collated and dropped
    assert fake.alive[-6:] == [0, 1, 2, 3, 0, 1]


def test_a_workers_start_up_is_measured_in_a_fresh_process_and_spread(monkeypatch):
    _, cost, note, _ = _fake_measure(monkeypatch, per_start=10)
    steady = _FakeReader.STEADY_S
    assert cost is not None and 0.8 * _FakeReader.START_S <= cost.start_s < 0.02 + 0.01
    assert cost.per_start == 10 and "spread over the 10 samples" in note
    assert cost.cpu_s == pytest.approx(steady + cost.start_s / 10, rel=0.1)
    _, left, note, _ = _fake_measure(monkeypatch)  # no workers: the start-up left out
    assert left is not None and left.cpu_s == pytest.approx(steady, rel=0.25)
    assert left.start_s > 0.8 * _FakeReader.START_S and "left out" in note


def test_a_child_that_hangs_gives_no_start_up_and_is_killed(monkeypatch):
    """A lock held across the fork (another thread importing) hangs the child: no figure."""
    parent = os.getpid()

    class Hangs(_FakeReader):
        def samples(self, data: bytes, name: str):
            while os.getpid() != parent:
                time.sleep(1)
            yield from super().samples(data, name)

    fake = Hangs()
    monkeypatch.setattr(decode_cost, "get_reader", lambda name: fake)
    monkeypatch.setattr(decode_cost, "START_TIMEOUT_S", 0.3)
    t0 = time.perf_counter()
    cost, _, _ = decode_cost.measure(
        "image", [0, 1], lambda i: io.BytesIO(bytes(8)), str, per_start=10
    )
    assert cost is not None and cost.start_s == 0.0 and cost.cpu_s < 0.01
    assert time.perf_counter() - t0 < 10  # three children given up on, not waited for


def test_the_profile_spreads_the_start_up_over_a_workers_samples(jpegs):
    p, _ = profile_dataset(str(jpegs), workers=2)
    assert p.decode is not None and p.decode.per_start == 3  # 6 samples, 2 workers
    assert p.decode.start_s > 0 and "spread over the 3 samples" in p.decode_note
    q, _ = profile_dataset(str(jpegs))
    assert q.decode is not None and q.decode.per_start == 0


def test_a_truncated_jpeg_counts_as_unreadable(jpegs):
    victim = next(jpegs.rglob("*.jpg"))
    victim.write_bytes(victim.read_bytes()[:300])  # the magic holds, the decode fails
    p, _ = profile_dataset(str(jpegs))
    assert (p.inspected, p.unreadable) == (6, 1) and p.decode.files == 5


def _raw_index(tmp_path: Path, n: int = 6, size: int = 4096) -> DatasetIndex:
    run = tmp_path / "run"
    run.mkdir()
    paths = []
    for i in range(n):
        (run / f"{i}.bin").write_bytes(np.random.default_rng(i).bytes(size))
        paths.append(f"{i}.bin")
    return DatasetIndex(
        str(run), "raw", tuple(paths), tuple((size,) for _ in paths), (size,) * n, 1
    )


def test_the_burn_spends_thread_cpu_not_wall():
    c0, t0 = time.thread_time(), time.perf_counter()
    burn_cpu(0.02)
    cpu, wall = time.thread_time() - c0, time.perf_counter() - t0
    assert 0.02 <= cpu < 0.03 and wall >= cpu * 0.9


def test_the_worker_spends_the_profile_decode_per_sample(tmp_path):
    idx = _raw_index(tmp_path)
    plain = SampleDataset(idx, "cached")
    emulated = SampleDataset(idx, "cached", DecodeEmulation(cpu_s=0.005, size=20_000))
    for i in range(6):
        s0 = plain[i]
        s1 = emulated[i]
        assert len(s0[0]) == 4096 and len(s1[0]) == 20_000  # handed on at the decoded size
        assert s1[4] == s0[4] == 4096  # the stored bytes still count as the sample's
        assert 0.005 <= s1[3] < 0.005 + 0.003  # thread CPU: the burn and the raw copy
        assert s1[2] >= s1[3] * 0.9 or s1[2] >= 0.005  # wall at least the CPU (busy host: more)
        assert s0[3] < 0.002
    np.testing.assert_array_equal(emulated[0][0][:4096], plain[0][0])  # its own bytes, repeated


def _profile(tmp_path: Path, **kw) -> Path:
    values = {
        "format": "raw", "sample_size": "16KiB", "files": 24, "batch_size": 4,
        "compute_s": 0.01, "workers": 2, "prefetch": 2, "au_min": 0.9, "epochs": 1, **kw,
    }  # fmt: skip
    text = "".join(
        f"{k} = {json.dumps(v) if isinstance(v, str) else v}\n" for k, v in values.items()
    )
    path = tmp_path / "replay.toml"
    path.write_text('description = "replay test profile"\n' + text)
    return path


def test_the_replay_spends_and_reports_the_decode_per_sample(cli, planted, tmp_path):
    prof = _profile(tmp_path, decode_s=0.004, decoded_size="64KiB", open_s=0.0001)
    r = cli("loader", planted.path, "--profile", prof, "--output", tmp_path / "o", "--json", "-q")
    assert r.code == 0, r.err
    ld = json.loads(r.out)["loader"]
    d = ld["decode"]
    assert (d["profile_cpu_s"], d["profile_decoded_size"], d["profile_open_s"]) == (
        0.004, 64 << 10, 0.0001,
    )  # fmt: skip
    assert 0.004 <= d["cpu_s_per_sample"] < 0.004 + 0.003  # measured in the workers
    assert d["wall_s_per_sample"] >= 0.004 * 0.9 and "burnt per sample" in d["basis"]
    epoch = ld["ranks"][0]["epochs"][0]
    assert epoch["bytes"] == epoch["samples"] * (16 << 10)  # stored bytes, not decoded ones
    assert ld["calibration"]["decode_s_per_sample"] >= 0.004  # the model sees the decode too
    assert planted.unchanged()


def test_a_profile_without_decode_hashes_as_before(cli, planted, tmp_path):
    r = cli("loader", planted.path, "--profile", _profile(tmp_path), "--output", tmp_path / "o",
            "--json", "-q")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads(r.out)
    params = res["workload"]["params"]
    assert not {"decode_s", "decode_wall_s", "decoded_size", "open_s", "collate"} & set(params)
    d = res["loader"]["decode"]
    assert d["profile_cpu_s"] == 0 and "no decode cost to emulate" in d["basis"]
    assert d["cpu_s_per_sample"] < 0.002


def test_images_of_different_sizes_are_handed_on_one_tensor_per_sample(cli, tmp_path):
    """A batch of decoded images of different shapes does not stack: the real pipeline hands on
    one tensor per sample (a shared-memory move each), and the profile says so, with the
    decoded size each is moved at; images of one shape stack and the profile keeps the old
    keys."""
    root = tmp_path / "mixed"
    for i in range(6):
        (root / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        (root / f"c{i % 2}" / f"{i}.jpg").write_bytes(_photo(40 + 4 * i, 64, i))
    p, _ = profile_dataset(str(root))
    assert p.decode is not None and p.decode.collate == "list"
    assert "one tensor per sample" in p.decode.basis()
    out = tmp_path / "mixed.toml"
    assert cli("profile", root, "--output", out).code == 0
    data = tomllib.loads(out.read_text())
    assert data["collate"] == "list" and data["decoded_size"] == p.decode.decoded_bytes
    prof = load_profile(str(out))
    assert (prof.collate, prof.decoded_size) == ("list", p.decode.decoded_bytes)


def test_one_shape_stacks_and_the_profile_keeps_its_keys(jpegs, tmp_path):
    p, _ = profile_dataset(str(jpegs))
    assert p.decode is not None and p.decode.collate == "stack"
    assert decode_cost.collate_kind([np.zeros((2, 3)), np.zeros((2, 3))]) == "stack"
    assert decode_cost.collate_kind([np.zeros((2, 3)), np.zeros((3, 3))]) == "list"
    assert decode_cost.collate_kind([np.zeros(4)]) == "stack"  # one sample: nothing to tell


def test_the_replay_hands_a_batch_on_as_the_profile_says(tmp_path):
    """collate = list: a worker hands the main process one shared-memory tensor per sample,
    at the decoded size, as the real pipeline's collate does."""
    import torch
    from torch.utils.data import DataLoader

    from iobench.loader.torchdata import collate_samples

    idx = _raw_index(tmp_path)
    ds = SampleDataset(idx, "cached", DecodeEmulation(size=10_000, per_sample=True))
    loader = DataLoader(
        ds, batch_size=3, num_workers=1,
        collate_fn=lambda b: collate_samples(b, per_sample=True),
    )  # fmt: skip
    data, sizes, times = next(iter(loader))
    assert isinstance(data, list) and len(data) == 3 == len(sizes)
    assert all(isinstance(t, torch.Tensor) and t.numel() == 10_000 for t in data)
    assert all(t.is_shared() for t in data)  # each moved through shared memory
    assert sizes == [10_000] * 3 and times[3] == 3 * 4096  # the stored bytes still count
    one, sizes1, _ = collate_samples([ds[0], ds[1]])  # the default: one tensor a batch
    assert isinstance(one, torch.Tensor) and one.numel() == 20_000 and sizes1 == [10_000] * 2


def test_a_list_profile_replays_with_its_own_hash(cli, planted, tmp_path):
    prof = _profile(tmp_path, decoded_size="32KiB", collate="list")
    r = cli("loader", planted.path, "--profile", prof, "--output", tmp_path / "o", "--json", "-q")
    assert r.code == 0, r.err
    params = json.loads(r.out)["workload"]["params"]
    assert params["collate"] == "list" and params["decoded_size"] == 32 << 10
    assert planted.unchanged()


# ---- the jpeg sample format (MLPerf retinanet's) ------------------------------------------


def test_jpeg_files_are_real_jpegs_of_the_sample_size():
    from iobench.formats import get_format

    jpeg = get_format("jpeg")
    for n in (16 << 10, 322_957):  # retinanet's sample (reference/mlperf-storage.md)
        sample = np.random.default_rng(n).integers(0, 256, n, dtype=np.uint8)
        data = jpeg.encode(sample)
        assert data[:3] == b"\xff\xd8\xff" and abs(len(data) - n) < 0.05 * n
        (px,) = jpeg.decode(data)
        side = jpeg.side_for(n)
        assert px.shape == (side * side,) and px.dtype == np.uint8  # greyscale, as DLIO's


def test_the_jpeg_format_without_pillow_is_a_clear_error(monkeypatch):
    import sys

    from iobench.formats import registry

    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL raises ImportError
    with pytest.raises(EngineUnavailable, match="needs PIL") as e:
        registry.get_format("jpeg")
    assert "pillow" in (e.value.hint or "").lower()
    assert registry.extension("jpeg") == "jpg"  # listing names needs no Pillow


def test_retinanet_decodes_jpeg_as_mlperf_does():
    prof = load_profile("retinanet-b200")
    assert (prof.format, prof.sample_size, prof.samples_per_file) == ("jpeg", 322_957, 1)


def test_a_jpeg_dataset_costs_the_loader_a_real_decode(cli, planted, tmp_path):
    def run(fmt: str) -> dict:
        prof = _profile(tmp_path, format=fmt, sample_size="64KiB")
        r = cli("loader", planted.path, "--profile", prof, "--output", tmp_path / fmt,
                "--json", "-q")  # fmt: skip
        assert r.code == 0, r.err
        return json.loads(r.out)["loader"]

    jpg, raw = run("jpeg"), run("raw")
    assert jpg["dataset"]["format"] == "jpeg"
    # a 64 KiB JPEG decodes in about a millisecond; a raw sample is one copy (microseconds)
    assert jpg["decode"]["cpu_s_per_sample"] > 5 * raw["decode"]["cpu_s_per_sample"]
    assert jpg["decode"]["cpu_s_per_sample"] > 2e-4
    epoch = jpg["ranks"][0]["epochs"][0]
    assert epoch["bytes"] == epoch["samples"] * (64 << 10)  # the sample size, not the pixels


def test_jpeg_with_many_samples_per_file_is_bad_input(cli, planted, tmp_path):
    prof = _profile(tmp_path, format="jpeg", samples_per_file=2)
    r = cli("loader", planted.path, "--profile", prof, "--output", tmp_path / "o")
    assert r.code == 2 and "one sample per file" in r.err and len(r.err.strip().splitlines()) == 1
    assert planted.unchanged()
