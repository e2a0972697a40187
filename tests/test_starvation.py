"""Starvation model on hand-computed cases (reference/starvation-notes.md, mlperf-storage.md)."""

from __future__ import annotations

import math
from pathlib import Path
from statistics import NormalDist

import pytest

from iobench.core.errors import UsageError
from iobench.formats.registry import FORMATS
from iobench.model.starvation import estimate, predict_au, predict_au_rate_bound, simulate_au
from iobench.model.starvation_inputs import (
    DatasetSize,
    Estimate,
    LoaderParams,
    SweepPoint,
    bandwidth_at,
    dataset_size,
    demand_bps,
    format_dataset_size,
    latency_quantiles_at,
)

MiB = 1 << 20
GiB = 1 << 30
PROFILES = Path(__file__).resolve().parent.parent / "workloads" / "profiles"
Q = [i / 100 for i in range(101)]  # the quantile grid a sweep point carries


def constant_point(readers: int, bandwidth_bps: float, file_bytes: float) -> SweepPoint:
    """A sweep level with zero-variance latency: every file takes readers × size ÷ bandwidth."""
    latency = readers * file_bytes / bandwidth_bps
    return SweepPoint(readers, bandwidth_bps, bandwidth_bps / file_bytes, [latency] * len(Q))


def lognormal_point(readers: int, bandwidth_bps: float, file_bytes: float, sigma=1.0):
    """A heavy-tailed level: lognormal latency shape (quantiles clipped at 0.1 % / 99.9 %)."""
    shape = [math.exp(sigma * NormalDist().inv_cdf(min(max(q, 0.001), 0.999))) for q in Q]
    return SweepPoint(readers, bandwidth_bps, bandwidth_bps / file_bytes, shape)


# The notes' experiment: 2 MiB files, batch 8, 2 workers, one rank, 200 MiB/s at 2 readers.
NOTES_SWEEP = [constant_point(2, 200 * MiB, 2 * MiB)]


def notes_params(compute_s: float, overhead_s: float = 0.0, **kw) -> LoaderParams:
    return LoaderParams(
        batch_size=8,
        sample_bytes=2 * MiB,
        samples_per_file=1,
        compute_s=compute_s,
        workers=kw.pop("workers", 2),
        prefetch=2,
        decode_s_per_sample=kw.pop("decode_s_per_sample", 0.0),
        step_overhead_s=overhead_s,
    )


# ---- demand -----------------------------------------------------------------------------------


def test_demand_matches_reference_figures():
    # unet3d-h100: 7 / 0.323 s × 146,600,628 B = 3,177,103,393 B/s ≈ 3,030 MiB/s
    unet = demand_bps(7, 146_600_628, 0.323)
    assert unet == pytest.approx(7 * 146_600_628 / 0.323)
    assert round(unet / MiB) == 3030
    # resnet50-a100: 400 / 0.435 s × 114,660 B = 105,434,483 B/s ≈ 101 MiB/s
    resnet = demand_bps(400, 114_660, 0.435)
    assert resnet == pytest.approx(105_434_482.76, abs=0.01)
    assert round(resnet / MiB) == 101


PROFILE_KEYS = {
    "description", "model", "accelerator", "format", "sample_size", "sample_size_sd",
    "samples_per_file", "files", "batch_size", "compute_s", "workers", "prefetch", "au_min",
    "epochs",
}  # fmt: skip

# Derived demand per accelerator (MiB/s) from reference/mlperf-storage.md; retinanet is
# derived here: 24 / 0.04755 s × 322,957 B ≈ 155 MiB/s.
PROFILE_DEMAND_MIB = {
    "unet3d-a100": 1539, "unet3d-h100": 3030, "unet3d-b200": 6041,
    "resnet50-a100": 101, "resnet50-h100": 195,
    "cosmoflow-a100": 490, "cosmoflow-h100": 771, "retinanet-b200": 155,
}  # fmt: skip


def test_profiles_have_exactly_the_keys_and_the_reference_demand():
    tomllib = pytest.importorskip("tomllib")
    found = sorted(p.stem for p in PROFILES.glob("*.toml"))
    assert found == sorted(PROFILE_DEMAND_MIB)
    for name, mib in PROFILE_DEMAND_MIB.items():
        spec = tomllib.loads((PROFILES / f"{name}.toml").read_text())
        assert set(spec) == PROFILE_KEYS, name
        assert spec["format"] in FORMATS  # the synthetic formats (jpeg decodes as MLPerf v3.0)
        assert (spec["prefetch"], spec["epochs"]) == (2, 5)
        demand = demand_bps(spec["batch_size"], spec["sample_size"], spec["compute_s"])
        assert round(demand / MiB) == mib, name


# ---- the sweep --------------------------------------------------------------------------------

SWEEP = [
    constant_point(1, 100 * MiB, 2 * MiB),
    constant_point(4, 300 * MiB, 2 * MiB),
    constant_point(8, 400 * MiB, 2 * MiB),
]


def test_bandwidth_interpolates_and_extrapolates_flat():
    assert bandwidth_at(SWEEP, 4) == (300 * MiB, "measured at 4 readers")
    bw, basis = bandwidth_at(SWEEP, 6)  # halfway between 300 and 400
    assert bw == pytest.approx(350 * MiB)
    assert "interpolated between 4 and 8" in basis
    bw, basis = bandwidth_at(SWEEP, 64)
    assert bw == 400 * MiB
    assert "extrapolated beyond 8 readers" in basis
    assert bandwidth_at(SWEEP, 0.5)[0] == 100 * MiB  # below one reader: level 1
    # Below the smallest level measured: the same rate per reader (300 MiB/s ÷ 4 × 2).
    assert bandwidth_at(SWEEP[1:], 2)[0] == pytest.approx(150 * MiB)


def test_latency_grows_linearly_with_concurrency_beyond_saturation():
    at8, _ = latency_quantiles_at(SWEEP, 8)
    assert at8[50] == pytest.approx(8 * 2 * MiB / (400 * MiB))  # 40 ms, as measured
    at32, basis = latency_quantiles_at(SWEEP, 32)
    assert at32[50] == pytest.approx(at8[50] * 32 / 8)  # × readers/r_max × bw(8)/bw_sat (= 1)
    assert "saturated" in basis
    at6, _ = latency_quantiles_at(SWEEP, 6)  # nearest level 8 (tie goes up), scaled to bw(6)
    assert at6[50] == pytest.approx(6 * 2 * MiB / (350 * MiB))


def test_bad_sweeps_are_usage_errors():
    with pytest.raises(UsageError, match="no dataset-read sweep"):
        bandwidth_at([], 4)
    with pytest.raises(UsageError, match="bandwidth must be positive"):
        SweepPoint(4, 0.0, 0.0, [])
    with pytest.raises(UsageError, match="must not decrease"):
        SweepPoint(4, MiB, 1.0, [0.2, 0.1])
    with pytest.raises(UsageError, match="two levels at 4"):
        bandwidth_at([SWEEP[1], SWEEP[1]], 4)


# ---- rate bound -------------------------------------------------------------------------------

# (compute s, predicted AU, measured AU) from reference/starvation-notes.md, 200 MiB/s storage.
NOTES_THROTTLED = [(0.02, 0.25, 0.24), (0.05, 0.63, 0.62), (0.08, 1.00, 0.98),
                   (0.12, 1.00, 0.98), (0.20, 1.00, 0.99)]  # fmt: skip


@pytest.mark.parametrize(("compute_s", "predicted", "measured"), NOTES_THROTTLED)
def test_rate_bound_matches_the_notes_table(compute_s, predicted, measured):
    # L = 8 × 2 MiB ÷ 200 MiB/s = 0.08 s per step: AU = c ÷ max(c, 0.08).
    assert predict_au_rate_bound(notes_params(compute_s), NOTES_SWEEP, 1) == pytest.approx(
        min(1.0, compute_s / 0.08)
    )
    assert predict_au_rate_bound(notes_params(compute_s), NOTES_SWEEP, 1) == pytest.approx(
        predicted, abs=0.006
    )
    # With the measured per-step overhead (~1.7 ms) it lands on the measured AU.
    with_overhead = predict_au_rate_bound(notes_params(compute_s, 0.0017), NOTES_SWEEP, 1)
    assert with_overhead == pytest.approx(measured, abs=0.02)


@pytest.mark.parametrize(("compute_s", "measured"), [(0.01, 0.855), (0.03, 0.945), (0.06, 0.97)])
def test_rate_bound_with_fast_storage_is_the_loader_overhead(compute_s, measured):
    fast = [constant_point(2, 3 * GiB, 2 * MiB)]  # L = 16 MiB ÷ 3 GiB/s ≈ 5.2 ms
    au = predict_au_rate_bound(notes_params(compute_s, 0.0017), fast, 1)
    assert au == pytest.approx(compute_s / (compute_s + 0.0017))
    assert au == pytest.approx(measured, abs=0.02)


def test_rate_bound_adds_decode_to_storage_and_shares_bandwidth_across_gpus():
    # L = 0.08 s; D = 8 × 5 ms ÷ 2 workers = 0.02 s; supply = 0.10 s; AU = 0.05 ÷ 0.10.
    params = notes_params(0.05, decode_s_per_sample=0.005)
    assert predict_au_rate_bound(params, NOTES_SWEEP, 1) == pytest.approx(0.5)
    # 2 GPUs × 2 workers = 4 readers, beyond the sweep: 200 MiB/s shared, L = 0.16 s.
    assert predict_au_rate_bound(notes_params(0.08), NOTES_SWEEP, 2) == pytest.approx(0.5)
    # No workers: the main process loads (L = 16 MiB ÷ 100 MiB/s at 1 reader), then computes.
    one = [constant_point(1, 100 * MiB, 2 * MiB)]
    serial = notes_params(0.04, 0.001, workers=0)
    assert predict_au_rate_bound(serial, one, 1) == pytest.approx(0.04 / (0.16 + 0.001 + 0.04))


# ---- simulation -------------------------------------------------------------------------------


@pytest.mark.parametrize("compute_s", [0.02, 0.05, 0.08, 0.12, 0.20])
@pytest.mark.parametrize("overhead_s", [0.0, 0.0017])
def test_simulation_without_variance_agrees_with_the_rate_bound(compute_s, overhead_s):
    params = notes_params(compute_s, overhead_s)
    des = simulate_au(params, NOTES_SWEEP, 1)
    assert des == pytest.approx(predict_au_rate_bound(params, NOTES_SWEEP, 1), abs=0.02)


def test_a_latency_tail_costs_au_near_the_knee_only():
    tail = [lognormal_point(2, 200 * MiB, 2 * MiB)]  # same bandwidth, heavy-tailed per-file time
    knee = notes_params(0.08)
    assert predict_au_rate_bound(knee, tail, 1) == pytest.approx(1.0)
    assert simulate_au(knee, tail, 1) < 0.95  # the mean says 1.0; the tail says otherwise
    # Far from the knee, the tail averages out.
    assert simulate_au(notes_params(0.02), tail, 1) == pytest.approx(0.25, abs=0.02)
    assert simulate_au(notes_params(0.40), tail, 1) == pytest.approx(1.0, abs=0.02)


def test_simulation_is_deterministic_per_seed():
    tail = [lognormal_point(2, 200 * MiB, 2 * MiB)]
    params = notes_params(0.08)
    assert simulate_au(params, tail, 1, seed=7) == simulate_au(params, tail, 1, seed=7)
    assert simulate_au(params, tail, 1, seed=7) != simulate_au(params, tail, 1, seed=8)


def test_the_barrier_makes_more_gpus_wait_for_the_slowest():
    # Bandwidth grows linearly with readers, so each rank's supply is the same at 1 and 2 GPUs.
    tail = [lognormal_point(2, 200 * MiB, 2 * MiB), lognormal_point(4, 400 * MiB, 2 * MiB)]
    flat = [constant_point(2, 200 * MiB, 2 * MiB), constant_point(4, 400 * MiB, 2 * MiB)]
    knee = notes_params(0.08)
    assert simulate_au(knee, tail, 2) < simulate_au(knee, tail, 1) - 0.01
    assert simulate_au(knee, flat, 2) == pytest.approx(simulate_au(knee, flat, 1))


def test_prediction_names_the_bound():
    storage = predict_au(notes_params(0.02, 0.0017), NOTES_SWEEP, 1)
    assert (storage.bound, round(storage.au_rate_bound, 3)) == ("storage", 0.25)
    assert "rate bound 0.250" in storage.basis
    compute = predict_au(notes_params(0.20), NOTES_SWEEP, 1)
    assert compute.bound == "compute"
    fast = [constant_point(2, 3 * GiB, 2 * MiB)]
    assert predict_au(notes_params(0.01, 0.0017), fast, 1).bound == "cpu"  # per-step overhead
    decode = notes_params(0.02, decode_s_per_sample=0.05)  # D = 8 × 50 ms ÷ 2 = 0.2 s ≫ L
    assert predict_au(decode, fast, 1).bound == "cpu"


# ---- estimate ---------------------------------------------------------------------------------


def saturated(bandwidth_bps: float) -> list[SweepPoint]:
    """Storage already saturated at 2 readers (= one GPU's workers)."""
    return [constant_point(2, bandwidth_bps, 2 * MiB)]


def test_estimate_by_hand_on_saturated_storage():
    # Demand per GPU = 8 × 2 MiB ÷ 0.08 s = 200 MiB/s; storage gives 1,000 MiB/s in all, so
    # AU(N) = min(1, 1000 ÷ (200 N)) = min(1, 5/N): 1, 1, 1, 0.625 at N = 1, 2, 4, 8, and the
    # largest N with AU ≥ 0.9 is 5 (AU(6) = 0.833).
    est = estimate(notes_params(0.08), saturated(1000 * MiB), threshold=0.9, profile="hand")
    assert est.demand_bps_per_gpu == pytest.approx(200 * MiB)
    assert [g for g, _ in est.au_at] == [1, 2, 4, 8]  # stops once AU < 0.75 × threshold
    assert [au for _, au in est.au_at] == pytest.approx([1, 1, 1, 0.625], abs=0.02)
    assert est.max_gpus == 5
    d = est.to_dict()
    assert list(d) == ["profile", "threshold", "demand_bps_per_gpu", "au_at", "max_gpus", "basis"]
    assert d["au_at"][3]["gpus"] == 8 and d["profile"] == "hand"


def test_max_gpus_respects_the_threshold_and_grows_with_bandwidth():
    params = notes_params(0.08, 0.0017)
    found = []
    for mib in (150, 400, 1000, 3000, 10_000):
        sweep = [lognormal_point(2, mib * MiB, 2 * MiB, sigma=0.5)]
        est: Estimate = estimate(params, sweep, [1, 2, 4], threshold=0.9, steps=200)
        assert [g for g, _ in est.au_at] == [1, 2, 4]
        if est.max_gpus:
            assert simulate_au(params, sweep, est.max_gpus, steps=200) >= 0.9
        assert simulate_au(params, sweep, est.max_gpus + 1, steps=200) < 0.9
        found.append(est.max_gpus)
    assert found == sorted(found)
    assert found[0] == 0 and found[-1] > 40  # 150 MiB/s starves even one GPU


# ---- dataset sizing ---------------------------------------------------------------------------


def test_dataset_size_unet3d_h100_eight_gpus():
    # 500 steps:  500 × batch 7 × 8 accelerators                  = 28,000 samples
    # memory:     1 host × 512 GiB × 5 = 2,748,779,069,440 B
    #             ÷ 146,600,628 B per sample = 18,750.12…          → 18,751 samples
    # the steps term wins: 28,000 files of one sample, > 10,000 so ⌈28,000 ÷ 10,000⌉ = 3
    # subfolders; 28,000 × 146,600,628 B = 4,104,817,584,000 B (3.7 TiB).
    ds = dataset_size(7, 8, 1, 512 * GiB, 146_600_628, 1)
    assert ds == DatasetSize(
        min_samples_steps=28_000,
        min_samples_memory=18_751,
        min_samples=28_000,
        winner="steps",
        files=28_000,
        subfolders=3,
        total_bytes=4_104_817_584_000,
        batch_size=7,
        accelerators=8,
        hosts=1,
        host_mem_bytes=512 * GiB,
        sample_bytes=146_600_628,
        samples_per_file=1,
    )
    text = format_dataset_size(ds)
    assert "500 × batch 7 × 8 accelerators = 28,000 samples ◀" in text
    assert "5 × 1 host × 512.0 GiB" in text and "= 18,751 samples" in text
    assert "the 500 steps per epoch term wins" in text
    assert "28,000 (1 sample per file), in 3 subfolders" in text
    assert "3.7 TiB" in text


def test_dataset_size_memory_term_and_shards():
    # One GPU: 500 × 7 × 1 = 3,500 < 18,751, so memory wins: 18,751 files in 2 subfolders.
    one = dataset_size(7, 1, 1, 512 * GiB, 146_600_628, 1)
    assert (one.winner, one.min_samples, one.files, one.subfolders) == ("memory", 18_751, 18_751, 2)
    # resnet50: 500 × 400 × 8 = 1,600,000 samples, less than
    # 2,748,779,069,440 ÷ 114,660 = 23,973,304.29 → 23,973,305;
    # files = ⌈23,973,305 ÷ 1,251⌉ = 19,164; bytes = 19,164 × 1,251 × 114,660.
    res = dataset_size(400, 8, 1, 512 * GiB, 114_660, 1251)
    assert (res.min_samples_steps, res.min_samples_memory) == (1_600_000, 23_973_305)
    assert (res.winner, res.files, res.subfolders) == ("memory", 19_164, 2)
    assert res.total_bytes == 2_748_877_644_240
    # Exactly 10,000 files need no subfolders; 10,001 need two.
    assert dataset_size(20, 1, 1, 0, 1, 1).subfolders == 0
    assert dataset_size(1, 1, 1, 10_001, 5, 1).subfolders == 2
    with pytest.raises(UsageError):
        dataset_size(7, 0, 1, GiB, 1, 1)
