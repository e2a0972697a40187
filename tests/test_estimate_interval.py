"""The estimate's interval (moving-block bootstrap over the sweep's completions), the search
it reruns, the signs of unstable storage, and how the verdict and renderings use it."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from iobench.model.interval import (
    block_length,
    estimate_interval,
    resample_factor,
    scaled_point,
    unstable_reasons,
)
from iobench.model.starvation import estimate, max_gpus_for
from iobench.model.starvation_inputs import MAX_GPUS, EstimateInterval, LoaderParams, SweepPoint
from iobench.qualify.verdict import Requirement, verdict
from iobench.result.file import PhaseResult
from iobench.run.sweep import cpu_contended, size_mismatch
from iobench.spec.workload import load_profile

MiB = 1 << 20


def point(readers: int, bw: float, completions: tuple[float, ...] = (), file_bytes=MiB):
    lat = readers * file_bytes / bw
    return SweepPoint(
        readers, bw, bw / file_bytes, [lat] * 101, completions, 0.1 if completions else 0.0
    )


PARAMS = LoaderParams(batch_size=8, sample_bytes=MiB, samples_per_file=1, compute_s=0.04,
                      workers=2, prefetch=2)  # fmt: skip  # 200 MiB/s per GPU


def test_block_length_is_the_ceiling_of_the_root():
    assert [block_length(n) for n in (1, 2, 4, 5, 24, 25, 26)] == [1, 2, 2, 3, 5, 5, 6]


def test_resample_factor_is_one_without_variability_or_data():
    rng = np.random.default_rng(0)
    assert resample_factor([7.0] * 30, rng) == 1.0
    assert resample_factor([], rng) == 1.0
    assert resample_factor([5.0], rng) == 1.0
    assert resample_factor([0.0, 0.0], rng) == 1.0


def test_resample_factor_is_a_mean_of_whole_blocks():
    # blocks of 2 over [2, 2, 2, 10, 10, 10] (mean 6) sum to 4, 4, 12, 20 or 20; a replicate
    # is 3 blocks, so its total is 4k (3 <= k <= 15) and its factor 4k / 36 = k / 9
    seen = set()
    rng = np.random.default_rng(1)
    for _ in range(200):
        k = resample_factor([2.0, 2.0, 2.0, 10.0, 10.0, 10.0], rng) * 9
        assert k == pytest.approx(round(k)) and 3 <= round(k) <= 15
        seen.add(round(k))
    assert len(seen) > 3  # it does vary


def test_scaled_point_keeps_littles_law():
    p = point(4, 400 * MiB, (1.0, 2.0))
    q = scaled_point(p, 2.0)
    assert (q.bandwidth_bps, q.files_per_s) == (800 * MiB, 2 * p.files_per_s)
    assert q.latency_quantiles[0] == pytest.approx(p.latency_quantiles[0] / 2)
    assert scaled_point(p, 1.0) is p


@pytest.mark.parametrize("start", [1, 3, 7, 8, 100])
def test_max_gpus_for_finds_the_same_count_from_any_start(start):
    calls: list[int] = []

    def au(n: int) -> float:
        calls.append(n)
        return 1.0 if n <= 7 else 0.5

    assert max_gpus_for(au, 0.9, start)[0] == 7
    assert len(calls) <= 16


def test_max_gpus_for_edges():
    assert max_gpus_for(lambda n: 0.1, 0.9, 5) == (
        0,
        "even 1 accelerator falls below the threshold",
    )
    assert max_gpus_for(lambda n: 1.0, 0.9)[0] == MAX_GPUS
    # from 1 it doubles, then bisects, as the estimate always did
    calls: list[int] = []
    max_gpus_for(lambda n: calls.append(n) or (1.0 if n <= 5 else 0.0), 0.9)
    assert calls[:5] == [1, 2, 4, 8, 6]


def test_interval_of_a_steady_sweep_is_the_point():
    sweep = [point(1, 150 * MiB, (15.0,) * 20), point(2, 300 * MiB, (30.0,) * 20)]
    est = estimate(PARAMS, sweep, [1, 2, 4], 0.9)
    iv = estimate_interval(PARAMS, sweep, est, resamples=20)
    assert (iv.max_gpus_low, iv.max_gpus_high) == (est.max_gpus, est.max_gpus)
    assert [(g, lo, hi) for g, lo, hi in iv.au_band] == [(g, a, a) for g, a in est.au_at]
    assert iv.spread == 0.0
    assert iv.blocks == ((1, 20, 5), (2, 20, 5))


def test_interval_of_a_noisy_sweep_contains_the_point_and_is_deterministic():
    rng = np.random.default_rng(5)
    noisy = tuple(float(x) for x in rng.normal(60, 15, 30).clip(1))
    sweep = [point(1, 150 * MiB, noisy), point(4, 540 * MiB, noisy)]
    est = estimate(PARAMS, sweep, None, 0.9)
    a = estimate_interval(PARAMS, sweep, est, resamples=30, seed=3)
    b = estimate_interval(PARAMS, sweep, est, resamples=30, seed=3)
    assert a == b
    assert a.max_gpus_low <= est.max_gpus <= a.max_gpus_high
    assert a.max_gpus_low < a.max_gpus_high  # ±~5 % bandwidth moves the count here
    for (g, lo, hi), (g2, au) in zip(a.au_band, est.au_at, strict=True):
        assert g == g2 and lo <= au <= hi
    d = dataclasses.replace(est, interval=a).to_dict()
    assert d["max_gpus"] == est.max_gpus and d["max_gpus_low"] == a.max_gpus_low
    assert d["interval"]["resamples"] == 30 and d["interval"]["seed"] == 3
    assert "30 resamples (seed 3)" in d["interval"]["basis"]
    assert {"low", "high"} <= set(d["au_at"][0])


def test_a_level_without_series_is_not_resampled_and_says_so():
    sweep = [point(1, 150 * MiB), point(2, 300 * MiB, (30.0, 31.0, 29.0))]
    est = estimate(PARAMS, sweep, [1], 0.9)
    iv = estimate_interval(PARAMS, sweep, est, resamples=5)
    assert iv.fixed_levels == (1,)
    assert "not resampled (no series: phase too short): 1 readers" in iv.basis
    none = estimate_interval(PARAMS, [point(1, 150 * MiB)], est, resamples=5)
    assert none.basis.startswith("no interval")


def _interval(bounds, spread=0.05) -> EstimateInterval:
    return EstimateInterval(0.9, 10, 0, 1, 1, (), (), (), spread, tuple(bounds))


def test_unstable_when_more_readers_each_read_faster_or_a_level_spreads():
    # 458 MiB/s at 1 reader, then 1590 at 4: 397 each, below 458: consistent
    assert (
        unstable_reasons(_interval([(1, 440 * MiB, 470 * MiB), (4, 1500 * MiB, 1700 * MiB)])) == []
    )
    # 520 at 2 (260 each), 1590 at 4 (375 each at the low end 1500): the device changed
    reasons = unstable_reasons(_interval([(2, 500 * MiB, 540 * MiB), (4, 1500 * MiB, 1700 * MiB)]))
    assert reasons == [
        "4 readers each read faster (375.0 MiB/s at the interval's low end) than 2 did "
        "(270.0 MiB/s at its high end)"
    ]
    assert unstable_reasons(_interval([], spread=0.3)) == [
        "a sweep level's resampled bandwidth spreads ±30% (over ±25%)"
    ]


def test_size_mismatch_names_the_assumption_and_the_command():
    assert size_mismatch(300_000, 500_000, "p") is None  # within 2×
    text = size_mismatch(322_957, 146_600_628, "unet3d-h100")
    assert "454× over the 2× allowed" in text
    assert "the prediction assumed per-file time scales with size" in text
    assert "`iobench qualify TARGET --profile unet3d-h100`" in text
    assert size_mismatch(None, 1, "p") is None


def test_cpu_contended_from_the_calibration_sleeps():
    assert cpu_contended(None) is None
    assert cpu_contended({"sleep_s": 0.01, "sleep_overshoot_s": 0.002}) is None
    text = cpu_contended({"sleep_s": 0.005, "sleep_overshoot_s": 0.0069, "overhead_s": 0.0147})
    assert text.startswith("unstable: the host's CPUs were contended")
    assert "sleeps of 5.0 ms overshot by 6.9 ms" in text and "14.7 ms/step" in text


def _run(estimate=None, phases=(), status="complete"):
    return SimpleNamespace(phases=list(phases), loader={"au": 0.95}, estimate=estimate, checkpoint=None,
                           status=status, error=None)  # fmt: skip


def test_verdict_judges_the_estimate_at_its_conservative_end():
    prof = load_profile("retinanet-b200")
    est = {"max_gpus": 7, "max_gpus_low": 5, "max_gpus_high": 9, "interval": {"level": 0.9}}
    v = verdict(_run(est), [], prof, 6)
    assert v["result"] == "fail"
    line = v["reasons"][0]
    assert line.startswith("FAIL: accelerators the storage keeps above the AU threshold")
    assert "estimate 7 (5–9), judged at the conservative end 5 (required >= 6)" in line
    item = v["items"][0]
    assert item["key"] == "gpus" and "measured" not in item
    assert (item["estimate"], item["low"], item["high"], item["judged"]) == (7, 5, 9, 5)
    assert verdict(_run(est), [], prof, 5)["result"] == "pass"
    # an older result without an interval: the point is all there is
    assert verdict(_run({"max_gpus": 7}), [], prof, 7)["result"] == "pass"


def test_verdict_says_when_it_rests_on_indicative_figures_and_quick_is_a_smoke_test():
    short = PhaseResult("seq-read", "read", ops=10, bandwidth_bps=5e9, elapsed_s=0.5)
    steady = PhaseResult("seq-read-j1", "read", ops=10, bandwidth_bps=1e9, elapsed_s=3,
                         steady=True, steady_at_s=2.5)  # fmt: skip
    v = verdict(_run(None, [short, steady]), [Requirement("read", 1e9, "B/s")], None, None)
    # its own status, never the word of a pass on steady phases; what it rests on comes first
    assert v["status"] == v["result"] == "pass (indicative)" and v["indicative"] is True
    assert v["reasons"][0].startswith("NOTE: this verdict rests on indicative figures (1 of 2 ")
    assert "[indicative: seq-read ran 0.50 s, under the 1 s minimum]" in v["reasons"][1]
    assert v["items"][0]["indicative"] == "seq-read ran 0.50 s, under the 1 s minimum"
    fine = verdict(_run(None, [steady]), [Requirement("read", 1e9, "B/s")], None, None)
    assert fine["status"] == "pass"
    assert "indicative" not in fine and not any("NOTE" in r for r in fine["reasons"])
    quick = verdict(_run(None, [steady]), [], None, None, quick=True)
    assert quick["smoke_test"] is True and quick["status"] == "pass (indicative)"
    assert quick["reasons"][0].startswith("NOTE: --quick is a smoke test")
    # no requirement: the pass rests on every phase, so one indicative phase makes it so
    bare = verdict(_run(None, [short, steady]), [], None, None)
    assert bare["status"] == "pass (indicative)"
    low = verdict(_run(None, [short]), [Requirement("read", 9e9, "B/s")], None, None)
    assert low["status"] == low["result"] == "fail"


def test_sweep_notes_tell_unsteady_from_short_and_the_verdict_says_unstable():
    from iobench.run.sweep import indicative_sweep

    kw = {"ops": 9, "bandwidth_bps": 1e8}
    drifting = PhaseResult("dataset-shuffled-r2", "read", elapsed_s=3.0, steady=False,
                           steady_criterion="bw_slope:10%", **kw)  # fmt: skip
    short = PhaseResult("dataset-shuffled-r1", "read", elapsed_s=0.1, **kw)
    fine = PhaseResult("dataset-shuffled-r4", "read", elapsed_s=3.0, steady=True, **kw)
    unused = PhaseResult("dataset-read-r4", "read", elapsed_s=0.1, **kw)  # shuffled preferred
    sweep = [point(1, 1e8), point(2, 2e8), point(4, 3e8)]
    assert indicative_sweep([short, drifting, unused, fine], sweep) == [
        "indicative: dataset-shuffled-r1 ran 0.10 s, under the 1 s minimum",
        "indicative, storage unstable: dataset-shuffled-r2 did not reach steady state in "
        "3.00 s (bw_slope:10%)",
    ]
    est = {"max_gpus": 3, "max_gpus_low": 3, "max_gpus_high": 3, "warnings": ["unstable: x"]}
    v = verdict(_run(est), [], load_profile("retinanet-b200"), 1)
    assert v["reasons"][0].endswith("; unstable: x")
    assert any(r.startswith("NOTE: the storage (or the host) was unstable") for r in v["reasons"])


def test_model_disagreeing_with_the_measured_loader_is_said():
    from iobench.run.sweep import model_disagreement

    sweep = [point(1, 150 * MiB, (15.0,) * 20), point(2, 300 * MiB, (30.0,) * 20)]
    est = estimate(PARAMS, sweep, [1, 2], 0.9)
    est = dataclasses.replace(est, interval=estimate_interval(PARAMS, sweep, est, resamples=5))
    au1 = dict(est.au_at)[1]
    assert model_disagreement(est, None) is None
    assert model_disagreement(est, {"gpus": 1, "au": au1 - 0.05}) is None  # within tolerance
    assert model_disagreement(est, {"gpus": 3, "au": 0.1}) is None  # not a count it lists
    text = model_disagreement(est, {"gpus": 1, "au": au1 - 0.2})
    assert text.startswith(f"unstable: the loader measured AU {au1 - 0.2:.1%} at 1 GPU(s)")
    assert f"gives {au1:.1%} ({au1:.1%}–{au1:.1%}), more than 5% apart" in text
