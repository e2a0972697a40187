"""The checkpoint model on values worked by hand (reference/checkpoint-reliability.md)."""

from __future__ import annotations

import math

import pytest

from iobench.checkpoint import model as cm
from iobench.core.errors import UsageError

GiB = 1 << 30
TiB = 1 << 40
H = 3600.0


# -- layout ------------------------------------------------------------------------------------


def test_mlperf_llama3_70b_layout():
    # MLPerf Storage llama3-70b: 130 GiB weights + 781 GiB optimizer over 64 ranks, fully sharded
    spec = cm.ModelSpec("llama3-70b", 130 * GiB, 781 * GiB, dp=64)
    assert spec.ranks == 64 and spec.total_bytes == 911 * GiB
    s = cm.rank_shard(spec, 0)
    assert s.model_bytes == 130 * GiB // 64 == int(2.03125 * GiB)
    assert s.optimizer_bytes == 781 * GiB // 64 == int(12.203125 * GiB)
    assert s.files == 2
    lay = cm.layout(spec)
    assert lay.total_bytes == 911 * GiB
    assert (lay.writers, lay.files, lay.dcp_files) == (64, 128, 65)
    assert lay.max_rank_bytes == lay.min_rank_bytes == s.total_bytes
    assert cm.layout(spec, dcp_files_per_rank=4).dcp_files == 257


def test_from_params_defaults_are_16_bytes_per_parameter():
    spec = cm.from_params("x", 405e9)
    assert spec.model_bytes == 810_000_000_000  # bf16
    assert spec.optimizer_bytes == 4_860_000_000_000  # fp32 master + two fp32 moments
    assert spec.total_bytes == 5_670_000_000_000  # ≈ 5.2 TiB of training state (~16 B/param)
    assert "405 parameters" not in spec.basis and "4.05e+11 parameters" in spec.basis


def test_zero1_layout_by_hand():
    # 8e9 params, dp=4 tp=2: two slices of 8e9 B weights and 48e9 B optimizer state; ZeRO-1:
    # dp-rank 0 of each slice (ranks 0 and 4) saves the weights, every rank 1/4 of the state.
    spec = cm.from_params("x", 8e9, dp=4, tp=2, sharding="optimizer")
    shards = [cm.rank_shard(spec, r) for r in range(8)]
    assert [s.model_bytes for s in shards] == [8e9, 0, 0, 0, 8e9, 0, 0, 0]
    assert all(s.optimizer_bytes == 12e9 for s in shards)
    lay = cm.layout(spec)
    assert lay.total_bytes == 112e9
    assert (lay.writers, lay.files, lay.dcp_files) == (8, 10, 9)
    assert (lay.max_rank_bytes, lay.min_rank_bytes) == (20e9, 12e9)


def test_ddp_layout_only_first_replica_writes():
    spec = cm.from_params("x", 8e9, dp=4, tp=2, sharding="none")
    lay = cm.layout(spec)
    assert (lay.writers, lay.files, lay.dcp_files) == (2, 4, 3)
    assert lay.max_rank_bytes == lay.min_rank_bytes == 56e9
    assert lay.total_bytes == 112e9


def test_parts_are_exact_and_sum_to_the_whole():
    spec = cm.ModelSpec("odd", 1001, 2003, dp=3, tp=2, pp=2)
    shards = [cm.rank_shard(spec, r) for r in range(spec.ranks)]
    assert sum(s.model_bytes for s in shards) == 1001
    assert sum(s.optimizer_bytes for s in shards) == 2003
    assert max(s.total_bytes for s in shards) - min(s.total_bytes for s in shards) <= 2


def test_resharded_keeps_the_size():
    spec = cm.from_params("x", 8e9, dp=4, tp=2, sharding="none").resharded(16)
    lay = cm.layout(spec)
    assert (lay.ranks, lay.writers, lay.files, lay.total_bytes) == (16, 16, 32, 112e9)


@pytest.mark.parametrize(
    "kwargs",
    [dict(dp=0), dict(tp=-1), dict(sharding="zero3"), dict(model_bytes=0, optimizer_bytes=0)],
)
def test_bad_specs_are_usage_errors(kwargs):
    base = dict(name="m", model_bytes=1, optimizer_bytes=1)
    with pytest.raises(UsageError):
        cm.ModelSpec(**{**base, **kwargs})


def test_rank_outside_is_an_error():
    with pytest.raises(UsageError, match="outside 0..7"):
        cm.rank_shard(cm.ModelSpec("m", 8, 8, dp=8), 8)


# -- stall and recovery ------------------------------------------------------------------------


def test_sync_stall_bandwidth_and_metadata():
    lay = cm.layout(cm.ModelSpec("m", 64 * GiB, 576 * GiB, dp=64))  # 640 GiB, 128 files
    rates = cm.Rates(write_bps=10 * GiB, read_bps=20 * GiB, create_per_s=64.0, open_per_s=128.0)
    st = cm.stall(lay, rates)
    assert st.bandwidth_s == 64.0 and st.metadata_s == 2.0 and st.sync_s == 66.0
    assert st.files == 128 and not st.metadata_dominates and st.snapshot_s is None
    rec = cm.recovery(lay, rates, restart_s=300)
    assert (rec.bandwidth_s, rec.metadata_s, rec.load_s, rec.total_s) == (32.0, 1.0, 33.0, 333.0)


def test_metadata_dominates_a_many_file_dcp_checkpoint():
    # 1024 ranks × 4 files + .metadata = 4097 creates at 500/s = 8.194 s against 1 GiB at 1 GiB/s
    lay = cm.layout(cm.ModelSpec("m", GiB // 2, GiB // 2, dp=1024), dcp_files_per_rank=4)
    st = cm.stall(lay, cm.Rates(write_bps=GiB, read_bps=GiB, create_per_s=500.0), dcp=True)
    assert st.files == 4097
    assert st.metadata_s == pytest.approx(8.194)
    assert st.bandwidth_s == 1.0 and st.metadata_dominates


def test_metadata_crossover():
    # 1 GiB at 1 GiB/s = 1 s of data; 500 creates/s: (N·4 + 1)/500 > 1 ⇔ N > 124.75 → 125
    assert cm.metadata_crossover_ranks(GiB, GiB, 500.0, 4) == 125
    lay = cm.layout(cm.ModelSpec("m", GiB // 2, GiB // 2, dp=125), dcp_files_per_rank=4)
    rates = cm.Rates(write_bps=GiB, read_bps=GiB, create_per_s=500.0)
    assert cm.stall(lay, rates, dcp=True).metadata_dominates
    lay = cm.layout(cm.ModelSpec("m", GiB // 2, GiB // 2, dp=124), dcp_files_per_rank=4)
    assert not cm.stall(lay, rates, dcp=True).metadata_dominates
    assert cm.metadata_crossover_ranks(1, 1e12, 1.0) == 1  # a tiny checkpoint: from the start


def test_async_snapshot_is_the_largest_shard_at_the_copy_rate():
    lay = cm.layout(cm.from_params("x", 8e9, dp=4, tp=2, sharding="optimizer"))
    st = cm.stall(lay, cm.Rates(write_bps=1e9, read_bps=2e9, copy_bps=4e9))
    assert st.snapshot_s == 5.0  # 20e9 B on rank 0 at 4e9 B/s
    assert st.write_s == st.sync_s == 112.0
    assert cm.async_stall(5.0, 112.0, 600.0) == 5.0
    assert cm.async_stall(5.0, 112.0, 100.0) == 17.0  # waits 12 s for the previous write


# -- failures, intervals, goodput --------------------------------------------------------------


def test_llama3_anchor():
    # 419 unexpected interruptions in 54 days on 16,384 GPUs
    per_gpu_day = cm.LLAMA3_RATE_PER_GPU_S * cm.DAY_S
    assert per_gpu_day == pytest.approx(419 / 884_736)
    assert per_gpu_day == pytest.approx(4.7359e-4, rel=1e-4)
    mtbf = cm.mtbf_from_rate(cm.LLAMA3_RATE_PER_GPU_S, 16_384)
    assert mtbf / H == pytest.approx(1296 / 419)  # 54 × 24 h ÷ 419 ≈ 3.093 h
    assert mtbf / H == pytest.approx(3.0931, rel=1e-4)
    # the same rate on 1,024 GPUs: 16 × longer
    assert cm.mtbf_from_rate(cm.LLAMA3_RATE_PER_GPU_S, 1024) == pytest.approx(16 * mtbf)


def test_young_and_daly_by_hand():
    # δ = 60 s, M = 3 h: √(2·60·10800) = √1,296,000 = 1138.42 s
    assert cm.young_interval(60, 3 * H) == pytest.approx(1138.420, abs=1e-3)
    # x = δ/2M = 1/360: 1138.420 × (1 + 0.0175682 + 0.000308642) − 60 = 1098.772
    assert cm.daly_interval(60, 3 * H) == pytest.approx(1098.772, abs=1e-3)
    assert cm.daly_interval(3 * H, H) == H  # δ ≥ 2M: checkpoint every M
    with pytest.raises(UsageError):
        cm.young_interval(0, H)


def test_goodput_by_hand():
    # τ = 1 h, δ = 60 s, M = 10 h, R = 900 s: 60/3600 + (1800 + 900)/36000 = 0.0916667
    assert cm.lost_fraction(3600, 60, 36000, 900) == pytest.approx(0.0916667, abs=1e-7)
    assert cm.goodput(3600, 60, 36000, 900) == pytest.approx(0.9083333, abs=1e-7)
    # asynchronous: δ = 5 s snapshot, 100 s write in flight: 5/3600 + 2800/36000 = 0.0791667
    assert cm.lost_fraction(3600, 5, 36000, 900, in_flight_s=100) == pytest.approx(
        0.0791667, abs=1e-7
    )
    assert cm.goodput(60, 60, 100, 900) == 0.0  # clamped: no progress at all


def test_daly_interval_minimises_the_lost_fraction_near_its_optimum():
    d, m = 60.0, 3 * H
    best = cm.daly_interval(d, m)
    at = cm.lost_fraction(best, d, m)
    assert at < cm.lost_fraction(best * 0.8, d, m) and at < cm.lost_fraction(best * 1.25, d, m)


def _exact(t, d, m, r, w=0.0):
    """Daly's exponential goodput written out: τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1)·(1 + w/M))."""
    return t / (m * math.exp(r / m) * (math.exp((t + d) / m) - 1) * (1 + w / m))


def test_plans_sync_and_async():
    st = cm.Stall(60.0, 60.0, 0.0, 128, False, 5.0, 60.0)
    sync = cm.plan_sync(st, 3 * H, 600, 3600)
    # the exact optimum: e^{(τ+δ)/M}·(1 − τ/M) = 1, 5 ms from Daly's 1098.771 s estimate
    assert sync.best_interval_s == pytest.approx(1098.776, abs=1e-3)
    assert sync.daly_s == pytest.approx(1098.771, abs=1e-3)
    assert sync.best_goodput == pytest.approx(_exact(1098.776, 60, 3 * H, 600), abs=1e-6)
    assert sync.best_goodput == pytest.approx(0.849719, abs=1e-6)
    # first order beside it: 60/1098.776 + (549.388 + 600)/10800 = 0.161031
    assert sync.best_goodput_first_order == pytest.approx(1 - 0.161031, abs=1e-5)
    # at 1 h: 3600 / (10800·e^{0.05556}·(e^{3660/10800} − 1)) = 0.781680 (first order 0.761111)
    assert sync.user_goodput == pytest.approx(0.781680, abs=1e-6)
    assert sync.user_goodput_first_order == pytest.approx(1 - 0.238889, abs=1e-5)
    assert "Daly (2006) exponential" in sync.goodput_model
    a = cm.plan_async(st, 3 * H, 600, 30)
    # √(2·5·10800) = 328.634; x = 5/21600: × (1 + 0.0050715 + 0.0000257) − 5 = 325.309
    assert a.daly_s == pytest.approx(325.309, abs=1e-3)
    assert a.stall_s == 5.0 and a.best_interval_s > a.min_interval_s == 60.0
    best = a.best_interval_s
    g = _exact(best, 5, 3 * H, 600, 60)
    assert a.best_goodput == pytest.approx(g, abs=1e-9)
    assert g > _exact(best * 0.98, 5, 3 * H, 600, 60) and g > _exact(best * 1.02, 5, 3 * H, 600, 60)
    assert a.user_stall_s == 35.0  # 5 s snapshot + 30 s waiting for the previous write
    # 30 s of work per 65 s (30 + 5 + 30 waiting): 43 %, where first order's 35/30 said none
    assert a.user_goodput == pytest.approx(_exact(30, 35, 3 * H, 600, 30), abs=1e-9)
    assert a.user_goodput == pytest.approx(0.434078, abs=1e-6)
    assert a.user_goodput_first_order == 0.0
    # a write longer than the optimum raises the interval to at least the write time
    slow = cm.Stall(900.0, 900.0, 0.0, 128, False, 5.0, 900.0)
    b = cm.plan_async(slow, 3 * H, 600, None)
    assert b.best_interval_s >= 900.0 and b.min_interval_s == 900.0
    assert b.best_goodput == pytest.approx(_exact(b.best_interval_s, 5, 3 * H, 600, 900))
    assert b.user_goodput is None


def test_async_plan_needs_a_copy_rate():
    with pytest.raises(UsageError, match="copy rate"):
        cm.plan_async(cm.Stall(1.0, 1.0, 0.0, 2, False, None, 1.0), H, 0, None)


def test_goodput_curve():
    st = cm.Stall(60.0, 60.0, 0.0, 2, False, 5.0, 60.0)
    (t, g_sync, g_async), *_ = cm.goodput_curve([3600.0, 7200.0], st, 36000.0, 900.0)
    assert t == 3600.0
    assert g_sync == pytest.approx(_exact(3600, 60, 36000, 900), abs=1e-12)
    assert g_sync == pytest.approx(0.911382, abs=1e-6)  # first order: 0.908333
    assert g_async == pytest.approx(_exact(3600, 5, 36000, 900, 60), abs=1e-12)


# -- capacity ----------------------------------------------------------------------------------


def test_capacity_and_retention():
    c = cm.capacity(912 * GiB, free_bytes=10 * TiB, capacity_bytes=3 * TiB, keep_last=3)
    assert c.fit_free == 11  # 10240 / 912 = 11.2
    assert c.fit_capacity == 3  # 3072 / 912 = 3.4
    assert c.needed_bytes == 4 * 912 * GiB  # the fourth lands before the oldest is deleted
    assert c.retention_fits is False  # 3648 GiB > 3 TiB
    c = cm.capacity(912 * GiB, free_bytes=10 * TiB, keep_last=3)
    assert c.retention_fits is True and c.fit_capacity is None
    assert cm.capacity(GiB).retention_fits is None
    with pytest.raises(UsageError, match="keep-last"):
        cm.capacity(GiB, keep_last=0)


def test_non_finite_rates_are_rejected():
    with pytest.raises(UsageError):
        cm.Rates(write_bps=math.inf, read_bps=1.0)
    with pytest.raises(UsageError):
        cm.Rates(write_bps=1.0, read_bps=1.0, copy_bps=0.0)
