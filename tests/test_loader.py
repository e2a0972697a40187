"""The data loader, the estimate and datasize commands, and the model changes they rely on."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import SMALL
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.loader import (
    COMPUTE_BOUND_AU,
    RankBatchSampler,
    aggregate,
    bound_of,
    cuda_available,
    wait_summary,
)
from iobench.model import starvation as sv
from iobench.result.file import PhaseResult
from iobench.result.stats import Histogram, bucket_bounds, bucket_index
from iobench.run.sweep import sweep_from_phases, sweep_point
from iobench.target import RUN_DIR_PREFIX

MiB = 1 << 20
GiB = 1 << 30


def tiny_profile(tmp_path: Path, **kw) -> Path:
    """24 files of 64 KiB, batch 4, 2 workers, 10 ms compute: 6 steps, a second or two."""
    values = {
        "format": "raw", "sample_size": "64KiB", "files": 24, "batch_size": 4,
        "compute_s": 0.01, "workers": 2, "prefetch": 2, "au_min": 0.9, "epochs": 1, **kw,
    }  # fmt: skip
    text = "".join(
        f"{k} = {json.dumps(v) if isinstance(v, str) else v}\n" for k, v in values.items()
    )
    path = tmp_path / "tiny.toml"
    path.write_text('description = "tiny test profile"\n' + text)
    return path


def run_loader_cli(cli, planted, tmp_path, *args, out="out"):
    r = cli("loader", planted.path, "--output", tmp_path / out, "--json", "-q", *args)
    assert r.code == 0, r.err
    return json.loads(r.out)


def no_run_dirs(path: Path) -> bool:
    mine = [p for p in os.listdir(path) if p.startswith(RUN_DIR_PREFIX)]
    return mine == [".iobench-20200101T000000Z-abcdef"]  # the planted look-alike only


# ---- the loader, end to end ---------------------------------------------------------------


def test_tiny_loader_run(cli, planted, tmp_path):
    res = run_loader_cli(cli, planted, tmp_path, "--profile", tiny_profile(tmp_path))
    ld = res["loader"]
    assert 0 < ld["au"] <= 1
    assert (ld["gpus"], ld["workers"], ld["batch_size"], ld["steps"]) == (1, 2, 4, 6)
    assert ld["au_per_epoch"] == [ld["au"]]
    steps = ld["ranks"][0]["step_series"]  # the report's per-step plots (result.timeseries)
    assert steps["every"] == 1 and len(steps["wait_s"]) == 5  # the first step left out
    assert ld["bound"] in ("storage", "cpu", "compute")
    assert 0 < ld["predicted_au"] <= 1 and ld["prediction_basis"]
    assert ld["cache"] == ("direct" if res["target"]["direct_io"] is True else "dropped")
    w = ld["load_wait_s"]
    assert w["steps"] == 5  # the steps after the first, the samples of every other figure
    assert 0 <= w["min"] <= w["p50"] <= w["p99"] <= w["max"] and w["min"] <= w["mean"] <= w["max"]
    assert w["p99"] == w["max"] >= w["mean"]  # fewer than 100 steps: the p99 is the maximum
    # 5 timed steps (the first is left out) of 4 samples of 64 KiB
    epoch = ld["ranks"][0]["epochs"][0]
    assert (epoch["timed_steps"], epoch["samples"], epoch["bytes"]) == (5, 20, 20 * 64 * 1024)
    assert epoch["compute_s"] >= 5 * 0.01  # measured sleep counts as compute
    assert epoch["load_wait_s"] == w  # one rank, one epoch: the same samples
    assert ld["points"] == [{"gpus": 1, "au": ld["au"]}]
    c = ld["client_cpu"]  # the loop's own CPU: this process and its reaped workers
    assert c["wall_s"] > 0 and c["children_s"] > 0 and 0 < c["share"] <= 1
    names = [p["name"] for p in res["phases"]]
    assert names == ["dataset-write", "dataset-shuffled-r1", "dataset-shuffled-r2"]
    assert res["phases"][0]["files"] == 24
    est = res["estimate"]
    assert est["profile"] == "tiny" and [a["gpus"] for a in est["au_at"]] == [1]
    assert "estimate" in json.dumps(est) or est["basis"]
    assert (tmp_path / "out" / "result.json").is_file()
    assert no_run_dirs(planted.path)
    assert planted.unchanged()


def test_two_emulated_gpus(cli, planted, tmp_path):
    res = run_loader_cli(cli, planted, tmp_path, "--profile", tiny_profile(tmp_path), "--gpus", "2")
    ld = res["loader"]
    assert (ld["gpus"], ld["steps"]) == (2, 3)  # 12 samples per rank, batch 4
    assert 0 < ld["au"] <= 1
    assert [r["rank"] for r in ld["ranks"]] == [0, 1]
    # every rank did the same steps (no rank left waiting at a barrier)
    assert {r["epochs"][0]["steps"] for r in ld["ranks"]} == {3}
    assert "dataset-shuffled-r4" in [p["name"] for p in res["phases"]]
    assert [a["gpus"] for a in res["estimate"]["au_at"]] == [1, 2]
    assert no_run_dirs(planted.path)


def test_buffered_run_warns_that_the_dataset_fits_in_ram(cli, planted, tmp_path):
    prof = tiny_profile(tmp_path, format="npz", samples_per_file=2, files=16)
    r = cli(
        "loader", planted.path, "--profile", prof, "--buffered", "-q", "--output", tmp_path / "o"
    )
    assert r.code == 0, r.err
    assert "Warnings" in r.out and "fits in page cache" in r.out
    res = json.loads((tmp_path / "o" / "result.json").read_text())
    assert res["loader"]["cache"] == "dropped"
    assert any("data loader read the dataset" in w for w in res["warnings"])
    assert res["loader"]["steps"] == 8  # 32 samples in files of 2, batch 4, 2 workers
    assert no_run_dirs(planted.path)


def test_compute_zero_on_fast_storage_is_loader_cpu_bound(cli, planted, tmp_path):
    # 4 KiB samples, batch 2: storage costs little per step; the loader's per-step cost rules
    prof = tiny_profile(tmp_path, sample_size="4KiB", files=64, batch_size=2, compute_s=0)
    res = run_loader_cli(cli, planted, tmp_path, "--profile", prof)
    ld = res["loader"]
    assert ld["au"] == 0 and ld["predicted_au"] is None
    assert ld["bound"] == "cpu", ld["bound_basis"]
    assert ld["samples_per_s"] > 0
    assert res["estimate"] is None
    assert any("compute_s is 0" in w for w in res["warnings"])


@pytest.mark.skipif(not cuda_available(), reason="no CUDA device: --compute gpu cannot run here")
def test_compute_gpu_burns_the_time_on_the_device(cli, planted, tmp_path):
    prof = tiny_profile(tmp_path, compute_s=0.02)
    res = run_loader_cli(cli, planted, tmp_path, "--profile", prof, "--compute", "gpu")
    ld = res["loader"]
    assert 0 < ld["au"] <= 1
    assert ld["compute_measured_s"] == pytest.approx(0.02, rel=0.5)


@pytest.mark.skipif(cuda_available(), reason="a CUDA device is present")
def test_compute_gpu_without_cuda_is_bad_input(cli, planted, tmp_path):
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), "--compute", "gpu")
    assert r.code == 2
    assert r.err.strip() == (
        "iobench: error: --compute gpu needs a CUDA device; use --compute sleep"
    )
    assert planted.unchanged()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "no-such-profile"], "unknown profile 'no-such-profile'"),
        (["--gpus", "0"], "--gpus must be at least 1"),
        (["--compute", "magic"], "--compute 'magic' is not valid"),
        (["--steps", "1"], "--steps must be at least 2"),
        (["--gpus", "7"], "the loop needs at least 2"),  # 24 samples: 3 per rank, batch 4
        (["--set", "batch_size=zero"], "batch_size"),
        (["--set", "colour=blue"], "unknown profile key"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(cli, planted, tmp_path, args, message):
    if "--profile" not in args:
        args = ["--profile", str(tiny_profile(tmp_path)), *args]
    r = cli("loader", planted.path, "--output", tmp_path / "o", *args)
    assert r.code == 2
    assert r.err.startswith("iobench: error: ") and message in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    assert planted.unchanged()


@pytest.mark.parametrize("gpus", ["1", "2"])
def test_a_read_error_fails_the_run_keeps_the_result_and_cleans_up(
    cli, planted, tmp_path, monkeypatch, gpus
):
    from iobench import formats

    real = formats.FileReader.read

    def failing(self, path, fmt, sizes=None):
        # only the measured loop reads with O_DIRECT (the calibration reads cached data)
        if self.direct and path.endswith("s0000005.bin"):
            raise OSError(5, "Input/output error", path)
        return real(self, path, fmt, sizes)

    monkeypatch.setattr(formats.FileReader, "read", failing)  # workers are forked: they see it
    prof = tiny_profile(tmp_path)
    r = cli("loader", planted.path, "--profile", prof, "--gpus", gpus, "-q", "--output",
            tmp_path / "o")  # fmt: skip
    res = json.loads((tmp_path / "o" / "result.json").read_text())
    if res["target"]["direct_io"] is not True:
        pytest.skip("the calibration reads buffered; the injected error needs O_DIRECT reads")
    assert r.code == 4, r.err
    plan, line = r.err.strip().splitlines()  # the plan line before the first byte, the error
    assert plan.startswith("iobench: plan: loader ")
    assert "Input/output error" in line and "s0000005" in line
    assert res["status"] in ("failed", "partial") and "Input/output error" in res["error"]
    assert [p["name"] for p in res["phases"]][:1] == ["dataset-write"]
    assert no_run_dirs(planted.path)


# ---- datasize ------------------------------------------------------------------------------


def test_datasize_follows_the_mlperf_rule(cli):
    r = cli("datasize", "--profile", "unet3d-h100", "--gpus", "8", "--hosts", "1",
            "--host-mem", "512GiB", "--json")  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(r.out)
    # steps term: 500 steps × batch 7 × 8 accelerators = 28,000 samples
    assert d["min_samples_steps"] == 500 * 7 * 8 == 28_000
    # memory term: 1 host × 512 GiB × 5 = 2,748,779,069,440 B ÷ 146,600,628 B per sample
    # = 18,750.3… → 18,751 samples (rounded up)
    assert 5 * 512 * GiB == 2_748_779_069_440
    assert d["min_samples_memory"] == math.ceil(2_748_779_069_440 / 146_600_628) == 18_751
    # the larger wins: 28,000 samples = 28,000 files (1 sample each) > 10,000: 3 subfolders
    assert (d["winner"], d["min_samples"], d["files"], d["subfolders"]) == (
        "steps",
        28_000,
        28_000,
        3,
    )
    assert d["total_bytes"] == 28_000 * 146_600_628
    text = cli("datasize", "--profile", "unet3d-h100", "--gpus", "8", "--host-mem", "512GiB").out
    assert "28,000 samples ◀" in text and "18,751 samples" in text and "3 subfolders" in text


def test_datasize_memory_term_can_win(cli):
    def size(hosts: int, mem: str) -> dict:
        r = cli("datasize", "--profile", "resnet50-a100", "--gpus", "1", "--hosts", str(hosts),
                "--host-mem", mem, "--json")  # fmt: skip
        assert r.code == 0, r.err
        return json.loads(r.out)

    # resnet50-a100, 1 accelerator: steps term 500 × batch 400 × 1 = 200,000 samples.
    # 1 host × 4 GiB × 5 = 21,474,836,480 B ÷ 114,660 B = 187,291.4… → 187,292: steps win.
    d = size(1, "4GiB")
    assert (d["min_samples_steps"], d["min_samples_memory"]) == (200_000, 187_292)
    assert d["winner"] == "steps" and d["files"] == math.ceil(200_000 / 1251) == 160
    # 1 host × 5 GiB × 5 = 26,843,545,600 B ÷ 114,660 B = 234,114.3… → 234,115: memory wins;
    # 234,115 samples ÷ 1,251 per file = 187.1… → 188 files.
    d = size(1, "5GiB")
    assert (d["winner"], d["min_samples"], d["files"]) == ("memory", 234_115, 188)
    assert d["subfolders"] == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--profile", "nope", "--gpus", "8"], "unknown profile 'nope'"),
        (["--profile", "unet3d-h100", "--gpus", "0"], "--gpus must be at least 1"),
        (["--profile", "unet3d-h100", "--gpus", "2", "--hosts", "0"], "--hosts must be at least 1"),
        (["--profile", "unet3d-h100", "--gpus", "2", "--host-mem", "lots"], "--host-mem"),
        (["--profile", "unet3d-h100", "--gpus", "two"], "--gpus"),
    ],
)
def test_datasize_bad_input(cli, args, message):
    r = cli("datasize", *args)
    assert r.code == 2 and message in r.err
    assert len(r.err.strip().splitlines()) == 1


# ---- estimate -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dataset_result(tmp_path_factory):
    from iobench.cli.app import main

    base = tmp_path_factory.mktemp("est")
    (base / "t").mkdir()
    code = main(["run", "dataset-read", str(base / "t"), "--output", str(base / "out"), "-q",
                 "--json", *SMALL["dataset-read"]])  # fmt: skip
    assert code == 0
    return base / "out" / "result.json"


def test_estimate_from_a_dataset_read_result(cli, dataset_result):
    r = cli("estimate", dataset_result, "--profile", "retinanet-b200", "--gpus", "4", "--json")
    assert r.code == 0, r.err
    est = json.loads(r.out)
    assert [a["gpus"] for a in est["au_at"]] == [1, 2, 3, 4]
    assert all(0 <= a["au"] <= 1 for a in est["au_at"])
    assert est["threshold"] == 0.85  # the profile's pass line
    assert isinstance(est["max_gpus"], int) and est["max_gpus"] >= 0
    assert [s["readers"] for s in est["sweep"]] == [1, 2]
    assert est["demand_bps_per_gpu"] == pytest.approx(24 / 0.04755 * 322_957)
    assert "taken as 0" in est["basis"]  # no loader calibration in a dataset-read result
    text = cli("estimate", dataset_result, "--profile", "retinanet-b200", "--min-au", "50%")
    assert text.code == 0
    assert "model output, not measured" in text.out and "AU >= 50%" in text.out
    assert "Max GPUs (estimate)" in text.out and "Basis:" in text.out


def test_estimate_reads_a_loader_result_and_its_calibration(cli, planted, tmp_path):
    prof = tiny_profile(tmp_path)
    run_loader_cli(cli, planted, tmp_path, "--profile", prof)
    r = cli("estimate", tmp_path / "out", "--profile", prof, "--gpus", "2", "--json")
    assert r.code == 0, r.err
    est = json.loads(r.out)
    assert "from that run's calibration" in est["basis"]
    assert [s["readers"] for s in est["sweep"]] == [1, 2]


def test_estimate_bad_input(cli, dataset_result, tmp_path):
    r = cli("estimate", tmp_path / "missing.json", "--profile", "retinanet-b200")
    assert r.code == 2 and "no result at" in r.err
    r = cli("estimate", dataset_result, "--profile", "retinanet-b200", "--min-au", "0")
    assert r.code == 2 and "--min-au" in r.err
    r = cli("estimate", dataset_result, "--profile", "retinanet-b200", "--gpus", "0")
    assert r.code == 2 and "--gpus must be at least 1" in r.err
    bare = json.loads(dataset_result.read_text())
    bare["phases"] = [p for p in bare["phases"] if p["name"] == "dataset-write"]
    (tmp_path / "bare.json").write_text(json.dumps(bare))
    r = cli("estimate", tmp_path / "bare.json", "--profile", "retinanet-b200")
    assert r.code == 2 and "has no dataset-read sweep" in r.err
    assert len(r.err.strip().splitlines()) == 1


# ---- the pieces -----------------------------------------------------------------------------


def test_rank_sampler_gives_every_rank_disjoint_equal_shards():
    ranks = [RankBatchSampler(103, 1, 4, r, 3, 2, seed=9) for r in range(3)]
    for epoch in (0, 1):
        seen = []
        for s in ranks:
            s.set_epoch(epoch)
            batches = list(s)
            assert len(batches) == len(s) == 103 // 3 // 4 == 8
            assert all(len(b) == 4 for b in batches)
            seen.extend(i for b in batches for i in b)
        assert len(seen) == len(set(seen)) == 96  # nothing read twice; the remainder dropped
    s = ranks[0]
    s.set_epoch(0)
    first = list(s)
    s.set_epoch(1)
    assert list(s) != first  # reshuffled per epoch, seeded
    s.set_epoch(0)
    assert list(s) == first
    assert len(RankBatchSampler(103, 1, 4, 0, 3, 2, seed=9, max_steps=5)) == 5


def test_rank_sampler_reads_a_multi_sample_file_in_one_worker():
    spf, workers = 5, 2
    s = RankBatchSampler(12, spf, 4, 0, 1, workers, seed=1)
    batches = list(s)
    # 12 files dealt to 2 workers (6 each, 30 samples): 7 batches of 4 per worker
    assert len(batches) == len(s) == 14
    owner: dict[int, int] = {}
    for k, b in enumerate(batches):
        for i in b:
            assert owner.setdefault(i // spf, k % workers) == k % workers
    assert sorted(i for b in batches for i in b) == sorted(set(i for b in batches for i in b))


def test_bound_names_what_limited_the_run():
    assert bound_of(COMPUTE_BOUND_AU, 1.0, 0.95, 0.96) == "compute"
    # step 0.10 s, compute 0.02: on cached data 0.03 → cpu lost 0.01, storage 0.07
    assert bound_of(0.2, 0.10, 0.02, 0.03) == "storage"
    # compute 0: cached 2 ms per step; the real run took 2.2 ms → the loader's own cost rules
    assert bound_of(0.0, 0.0022, 0.0, 0.002) == "cpu"
    # with the probe's storage time: a busy host stretching the step stays a CPU bound
    assert bound_of(0.0, 0.009, 0.0, 0.002, storage_s=0.0005) == "cpu"
    assert bound_of(0.3, 0.08, 0.02, 0.022, storage_s=0.07) == "storage"


def _phase(name: str, ops_series: list[float], latencies_ns: list[int]) -> PhaseResult:
    from iobench.result.stats import Histogram

    h = Histogram()
    h.record_array(latencies_ns)
    return PhaseResult(
        name=name, op="read", bytes=len(latencies_ns) * MiB, ops=len(latencies_ns),
        bandwidth_bps=200 * MiB, iops=100.0, histogram=h.to_dict(), ops_series=ops_series,
        series_interval_s=0.1, concurrency=2,
    )  # fmt: skip


def test_sweep_points_come_from_dataset_phases():
    lat = [10_000_000] * 50 + [20_000_000] * 50
    steady = [37.0] + [100.0] * 8 + [3.0]  # first and last intervals are partial: left out
    phases = [
        _phase("dataset-read-r2", steady, lat),
        _phase("dataset-shuffled-r2", steady, lat),
        _phase("dataset-shuffled-r4", [100.0] * 3, lat),
        _phase("dataset-write", steady, lat),
    ]
    phases[0].bandwidth_bps = 1.0  # the shuffled level wins over the sequential one
    pts = sweep_from_phases(phases)
    assert [(p.readers, p.bandwidth_bps) for p in pts] == [(2, 200 * MiB), (4, 200 * MiB)]
    p2 = pts[0]
    assert len(p2.latency_quantiles) == 101
    assert p2.latency_quantiles[0] == pytest.approx(0.010, rel=0.02)
    assert p2.latency_quantiles[-1] == pytest.approx(0.020, rel=0.02)
    assert (p2.completions, p2.interval_s) == ((10.0,) * 8, 0.1)
    assert pts[1].completions == ()  # 1 full interval: too short to judge
    assert sweep_point(phases[1]).readers == 2


# ---- model changes this work made (starvation.py) -------------------------------------------


def _flat(levels, bw=200 * MiB, size=2 * MiB, **kw):
    return [sv.SweepPoint(r, bw, bw / size, [r * size / bw] * 101, **kw) for r in levels]


def test_decode_overlaps_reads_on_saturated_storage():
    # 2 workers, 2 MiB samples, 200 MiB/s flat from 1 reader (saturated), decode 5 ms/sample.
    # Response-time law: k = 2·r/(r + d), r = k × 10 ms → k = 1.5, r = 15 ms; a worker's cycle
    # r + d = 20 ms, 2 workers → 10 ms per sample = 2 MiB ÷ 200 MiB/s: decode hidden.
    params = sv.LoaderParams(8, 2 * MiB, 1, compute_s=0.05, workers=2, decode_s_per_sample=0.005)
    r, k, _ = sv.read_time_at(params, _flat([1, 2]), 1)
    assert (k, r) == (pytest.approx(1.5), pytest.approx(0.015))
    assert sv.predict_au_rate_bound(params, _flat([1, 2]), 1) == pytest.approx(0.05 / 0.08)
    # With only the 2-reader level the per-reader rate below it is kept (no saturation shown):
    # storage 80 ms + decode 20 ms per step, as before.
    assert sv.predict_au_rate_bound(params, _flat([2]), 1) == pytest.approx(0.5)
    # Decode too slow for the storage to matter: a lone reader's 10 ms, cycle 10 + 40 ms.
    slow = sv.LoaderParams(8, 2 * MiB, 1, compute_s=0.05, workers=2, decode_s_per_sample=0.04)
    r, k, _ = sv.read_time_at(slow, _flat([1, 2]), 1)
    assert (r, k) == (pytest.approx(0.010), pytest.approx(2 * 0.010 / 0.050))
    assert sv.predict_au_rate_bound(slow, _flat([1, 2]), 1) == pytest.approx(0.05 / 0.2)


def test_shared_latency_spread_costs_no_au():
    # A throttle's bimodal per-file latency: 90 % fast, 10 % waiting for the next time slice.
    q = np.quantile(np.r_[np.full(900, 0.002), np.full(100, 0.092)], np.linspace(0, 1, 101))
    q = np.maximum.accumulate(q).tolist()
    mean = sv._quantile_mean(np.asarray(q))
    cv_file = math.sqrt(sv._quantile_var(np.asarray(q))) / mean

    def point(counts):
        return sv.SweepPoint(2, 200 * MiB, 100, q, completions=tuple(counts), interval_s=0.1)

    steady = point([10.0] * 20)  # the same 10 files every 0.1 s: the sharing conserves supply
    assert sv.independent_share(steady)[0] == 0.0
    assert sv.independent_share(point([]))[0] == 1.0  # no series: all independent
    # windows of 0.2 s: 20 files each; CV measured half the independent CV → a quarter share
    cv_indep = cv_file / math.sqrt(20)
    d = cv_indep / 2 * 20
    counts = [10 + d / 2, 10 + d / 2, 10 - d / 2, 10 - d / 2] * 5
    share, basis = sv.independent_share(point(counts), window_s=0.2)
    sample_cv = np.std([20 + d, 20 - d] * 5, ddof=1) / 20
    assert share == pytest.approx((sample_cv / cv_indep) ** 2)
    assert "per 0.2 s" in basis and "10 windows" in basis
    knee = sv.LoaderParams(8, 2 * MiB, 1, compute_s=0.08, workers=2)
    shared = sv.simulate_au(knee, [steady], 1)
    indep = sv.simulate_au(knee, [point([])], 1)
    assert shared == pytest.approx(1.0, abs=0.01)  # steady aggregate: the rate bound holds
    assert indep < shared - 0.03  # the same spread, independent, costs AU at the knee


# ---- the loader's statistics: one set of samples, consistent figures -----------------------


def test_a_p99_is_never_below_the_mean_of_fewer_than_100_steps():
    """The reported run: 8 steps, 7 timed waits, one long stall. The p99 was the second
    largest wait (177 us) under a 1.71 ms mean; it is the stall now."""
    h = Histogram()
    for ns in [150_000, 160_000, 170_000, 177_000, 140_000, 155_000, 11_018_000]:
        h.record(ns)
    w = wait_summary(h)
    assert w["steps"] == 7 and w["mean"] == pytest.approx(1.71e-3, rel=1e-12)
    assert w["p99"] == w["max"] == 11.018e-3  # was 177 us, the 6th of 7
    assert w["p50"] == pytest.approx(160e-6, rel=1 / 64)
    assert wait_summary(Histogram()) == {"steps": 0}  # no samples: no figures, not zeros


def _epoch(waits: list[int], compute: list[float], step_s: float) -> dict:
    """A rank's epoch as ``_rank_loop`` returns it: waits of the steps after the first."""
    h = Histogram()
    for ns in waits:
        h.record(ns)
    n = len(waits)
    timed = max(n * step_s, 1e-9)
    return {
        "steps": n + 1, "timed_steps": n, "timed_s": timed, "wall_s": timed + step_s,
        "au": sum(compute) / timed, "compute_s": sum(compute), "main_cpu_s": 0.0,
        "samples": 4 * n, "bytes": 4 * n * 1024, "read_s": 0.0, "decode_s": 0.0,
        "wait": h.to_dict(),
    }  # fmt: skip


waits_st = st.lists(
    st.one_of(st.integers(0, 10_000), st.integers(10_000, 10**11)), min_size=1, max_size=60
)


@given(
    data=st.lists(st.lists(waits_st, min_size=2, max_size=2), min_size=1, max_size=3),
    first_epoch=st.integers(0, 1),
    step_ms=st.floats(1, 100),
    frac=st.floats(0, 1),
)
@settings(max_examples=150, deadline=None)
def test_loader_statistics_come_from_one_set_of_samples(data, first_epoch, step_ms, frac):
    """Ranks x 2 epochs of random waits: the load-wait figures are those of every timed step of
    the counted epochs merged (the same samples), ordered min <= p50 <= p99 <= max and
    min <= mean <= max, p99 >= mean under 100 steps; AU per epoch and overall lie between the
    ranks' own."""
    step_s = step_ms / 1e3
    ranks = [
        {"rank": r, "epochs": [_epoch(ws, [frac * step_s] * len(ws), step_s) for ws in eps]}
        for r, eps in enumerate(data)
    ]
    cfg = type("Cfg", (), {"gpus": len(ranks), "workers": 2, "batch_size": 4, "epochs": 2})()
    res = aggregate(cfg, ranks, first_epoch)
    counted = [v for eps in data for ws in eps[first_epoch:] for v in ws]
    w = wait_summary(res.wait)
    assert w["steps"] == len(counted)
    assert w["min"] == min(counted) / 1e9 and w["max"] == max(counted) / 1e9
    assert w["mean"] == pytest.approx(sum(counted) / len(counted) / 1e9, rel=1e-12, abs=1e-18)
    assert w["min"] <= w["p50"] <= w["p99"] <= w["max"]
    assert w["min"] <= w["mean"] * (1 + 1e-12) and w["mean"] <= w["max"] * (1 + 1e-12)
    if len(counted) < 100:
        assert w["p99"] == w["max"] >= w["mean"] * (1 - 1e-12)
    for q, key in ((0.5, "p50"), (0.99, "p99")):  # numpy's nearest rank, within its bucket
        exact = int(np.percentile(counted, q * 100, method="inverted_cdf"))
        lo, hi = bucket_bounds(bucket_index(exact))
        assert lo / 1e9 <= w[key] <= hi / 1e9 or w[key] == exact / 1e9
    per_rank = [np.mean([ep["au"] for ep in r["epochs"][first_epoch:]]) for r in ranks]
    assert min(per_rank) - 1e-12 <= res.au <= max(per_rank) + 1e-12
    for k, e in enumerate(range(first_epoch, 2)):
        aus = [r["epochs"][e]["au"] for r in ranks]
        assert min(aus) - 1e-12 <= res.au_per_epoch[k] <= max(aus) + 1e-12
    assert 0 <= res.au <= 1 + 1e-12
