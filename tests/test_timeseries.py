"""What a phase and the loader record over time and per worker (issue 25): bounded in size,
mergeable, and close to the exact figures."""

from __future__ import annotations

import time

import numpy as np

from iobench.core.cpu import CpuSampler
from iobench.result.measured import phase_result
from iobench.result.stats import Histogram, WorkerStats, aggregate_workers
from iobench.result.timeseries import (
    LAT_SLOTS_MAX,
    LatencySeriesBlock,
    LatSlots,
    lat_bucket,
    lat_buckets,
    step_series,
    worker_times,
)


def test_the_coarse_bucket_is_the_same_scalar_and_vectorised():
    values = np.array([0, 1, 7, 8, 9, 100, 4095, 4096, 10**6, 3 * 10**9, 2**60], dtype=np.int64)
    assert lat_buckets(values).tolist() == [lat_bucket(int(v)) for v in values]


def _worker(origin: float, lat_ns, step_s: float = 0.002, start: float = 0.05) -> WorkerStats:
    w = WorkerStats(origin=origin, start=origin + start)
    t = origin + start
    for lat in lat_ns:
        t += step_s
        w.add(4096, t, int(lat))
    w.end = t
    return w


def test_latency_series_is_p50_and_p99_per_interval_within_the_bucket_width():
    # 2 s of 100 us operations, one in fifty at 5 ms: every interval's p99 is the slow one
    lat = [5_000_000 if i % 50 == 0 else 100_000 for i in range(1000)]
    a, b = _worker(0.0, lat), _worker(0.0, lat[::-1])
    agg = aggregate_workers([a, b])
    ls = LatencySeriesBlock.from_dict(agg.latency_series)
    assert ls.interval_s == 0.1 and len(ls.ops) == len(agg.series)
    assert sum(ls.ops) == 2000
    full = [i for i, n in enumerate(ls.ops) if n >= 90]
    assert full, ls.ops
    for i in full:
        assert abs(ls.p50_s[i] - 100e-6) / 100e-6 < 0.13
        assert abs(ls.p99_s[i] - 5e-3) / 5e-3 < 0.13
    # the phase's whole-run p50 from the exact histogram agrees
    assert abs(agg.hist.percentile_ns(0.5) / 1e9 - ls.p50_s[full[0]]) / 100e-6 < 0.13


def test_a_long_phase_keeps_at_most_lat_slots_max_slots_and_merges_exactly():
    w = WorkerStats(origin=0.0, start=0.0)
    for i in range(30_000):  # 30 minutes at 0.06 s
        w.add(1, i * 0.06, 1000 + i)
    slots = {k // 200 for k in w.lat.counts}
    assert len(slots) <= LAT_SLOTS_MAX and w.lat.every > 1
    assert sum(w.lat.counts.values()) == 30_000
    fine = LatSlots()
    fine.add(5, 1000)
    merged = LatSlots(w.lat.every, dict(w.lat.counts)).merge(fine)
    assert sum(merged.counts.values()) == 30_001 and merged.every == w.lat.every
    series = aggregate_workers([w]).latency_series
    assert series is not None and len(series["ops"]) <= 600 and sum(series["ops"]) == 30_000


def test_the_sketch_survives_a_forked_workers_round_trip():
    w = _worker(0.0, [100_000] * 100)
    back = WorkerStats.from_dict(w.to_dict())
    assert back.lat.counts == w.lat.counts and back.lat.every == w.lat.every


def test_phase_result_records_worker_times_and_the_latency_series():
    ws = [_worker(0.0, [100_000] * n) for n in (100, 200, 300)]
    p = phase_result("p", "read", ws, concurrency=3, block_size=4096, cache="direct")
    wt = p.extra["worker_times"]
    assert wt["workers"] == 3 and wt["ops"] == [100, 200, 300]
    assert min(wt["end_s"]) == round(p.stonewall_s, 6) and max(wt["end_s"]) == round(p.elapsed_s, 6)
    assert sum(p.extra["latency_series"]["ops"]) == 600
    one = phase_result("q", "read", ws[:1], concurrency=1, block_size=4096, cache="direct")
    assert "worker_times" not in one.extra  # one worker: nothing to compare


def test_worker_times_lists_at_most_the_limit_and_counts_them_all():
    spans = [(float(i), float(i) + 1, 10, 1) for i in range(2000)]
    wt = worker_times(spans, 0.0)
    assert wt["workers"] == 2000 and len(wt["end_s"]) == 1024


def test_step_series_merges_steps_to_the_limit():
    n = 5000
    t0 = np.arange(n) * 0.01
    steps = np.column_stack([t0, t0 + 0.002, t0 + 0.009, t0 + 0.01, np.full(n, 1000.0)])
    steps[7, 1] = steps[7, 0] + 0.5  # one long wait
    s = step_series(steps, 1000)
    assert s is not None and s["every"] == 5 and len(s["wait_s"]) == 1000
    assert s["wait_max_s"][1] == 0.5 and abs(s["wait_s"][0] - 0.002) < 1e-9
    assert abs(s["bytes_per_s"][0] - 1000 / 0.01) < 1
    assert step_series(np.empty((0, 5))) is None


def test_the_cpu_sampler_records_over_time_and_stops():
    with CpuSampler(interval_s=0.02) as s:
        end = time.perf_counter() + 0.2
        while time.perf_counter() < end:
            pass  # busy: this process's share is high
    got = s.series()
    assert got is not None and len(got["host_share"]) >= 3
    assert all(v is None or 0 <= v <= 1 for v in got["host_share"] + got["self_share"])
    assert max(v for v in got["self_share"] if v is not None) > 0.2
    assert not s._thread.is_alive()


def test_the_cpu_sampler_halves_past_its_capacity():
    s = CpuSampler(interval_s=0.1)
    for i in range(s.MAX):
        s.host[i] = s.own[i] = float(i % 2)
    s.n = s.MAX
    s._halve()
    assert s.n == s.MAX // 2 and s.interval == 0.2 and s.host[0] == 0.5


def test_an_old_worker_dict_without_a_sketch_still_loads():
    d = _worker(0.0, [1000] * 10).to_dict()
    del d["lat"]
    w = WorkerStats.from_dict(d)
    assert w.lat.counts == {} and Histogram.from_dict(d["hist"]).count == 10


def test_a_many_client_aggregate_keeps_no_single_ranks_series():
    """Rank 0's latency series, workers and CPU are not the phase's: the aggregate has
    ``ranks`` (the per-rank plot) instead."""
    from iobench.distributed.aggregate import aggregate_ranks

    recs = []
    for k in range(2):
        p = phase_result("p", "read", [_worker(0.0, [100_000] * 50) for _ in range(2)],
                         concurrency=2, block_size=4096, cache="direct")  # fmt: skip
        p.extra["cpu_series"] = {"interval_s": 0.25, "host_share": [0.5] * 3}
        assert "latency_series" in p.extra and "worker_times" in p.extra
        recs.append({"rank": k, "host": "h", "clock_offset_s": 0.0, "result": p.to_dict()})
    agg = aggregate_ranks(recs)
    assert not {"latency_series", "worker_times", "cpu_series"} & set(agg.extra)
    assert len(agg.ranks) == 2 and agg.extra["world"] == 2
