"""The diagnosis: hand-worked cases of each bound, the change it advises and the AU it predicts.

Every case has constant per-sample times, so the simulated AU is the rate bound's
``compute ÷ max(compute + o, batch × (read + cpu) ÷ workers)`` (see starvation.py), worked
out by hand in each test's comment."""

from __future__ import annotations

import json

import pytest

from iobench.core.errors import UsageError
from iobench.model.diagnosis import PipelineTerms, diagnose, format_diagnosis

APPROX = 0.01


def terms(**kw) -> PipelineTerms:
    base = dict(
        read_s_per_sample=0.01,
        decode_s_per_sample=0.04,
        collate_s_per_batch=0.0,
        compute_s=0.1,
        batch_size=10,
        workers=1,
        cpu_cores=8,
        files=1000,
        total_bytes=1000 << 20,
        mean_file_bytes=1 << 20,
        samples_per_file=1,
        read_bandwidth_bps=0.0,  # not measured: every worker taken as reading at once
        open_rate_per_s=0.0,
    )
    base.update(kw)
    return PipelineTerms(**base)


def option(d, kind):
    """The change of ``kind``, listed as helping or apart as not helping."""
    return next(s for s in (*d.options, *d.no_help) if s.kind == kind)


def test_decode_bound_one_worker_advises_five_workers():
    # now: 10 × (10 + 40 ms) ÷ 1 worker = 0.5 s per batch against 0.1 s compute → AU 0.2.
    # 4 workers: 0.5 ÷ 4 = 0.125 s → 0.8; 5 workers: 0.1 s → 1.0 (4 of 7 free cores busy).
    d = diagnose(terms())
    assert d.now.au == pytest.approx(0.2, abs=APPROX)
    assert d.now.bound == "cpu"
    assert d.advice is not None and d.advice.kind == "workers"
    assert d.advice.amount == 5
    assert d.advice.au == pytest.approx(1.0, abs=APPROX)
    # storage is no part of it: N× the bandwidth only trims the 10 ms read (0.5 → 0.4 + 0.1/N
    # s); none reaches, so the smallest N within 2 points of 16×'s 0.246 is named: 3× (0.231)
    bw = option(d, "bandwidth")
    assert bw.amount == 3
    assert bw.au == pytest.approx(0.1 / (10 * (0.01 / 3 + 0.04)), abs=APPROX)
    assert not option(d, "bandwidth").reaches
    assert any(s.startswith("cores: not needed") for s in d.not_estimated)


def test_decode_bound_on_two_cores_advises_cores():
    # 2 cores, one for the main process: W workers on 1 free core cycle in at least W × 40 ms
    # per sample, so from 2 workers on a batch takes 10 × 40 ms = 0.4 s → AU 0.25 at most.
    # 6 cores (5 free) with 5 workers: 4 busy cores, no stretch, 0.1 s per batch → AU 1.0;
    # 4 cores with 3 workers: 10 × 0.05 ÷ 3 = 0.167 s → 0.6.
    d = diagnose(terms(cpu_cores=2))
    w = option(d, "workers")
    assert not w.reaches and w.au == pytest.approx(0.25, abs=APPROX)
    assert d.advice is not None and d.advice.kind == "cores"
    assert d.advice.amount == 6
    assert d.advice.au == pytest.approx(1.0, abs=APPROX)


def test_an_emulated_compute_leaves_its_core_to_the_workers():
    # 2 cores, the main loop sleeping: both are the workers'. 2 workers keep 2 × 40/50 = 1.6
    # busy, no stretch: 10 × 50 ms ÷ 2 = 0.25 s → AU 0.4. With a core kept by the main loop,
    # 2 workers on 1 core cycle in 2 × 40 ms per sample: 10 × 80 ms ÷ 2 = 0.4 s → 0.25.
    d1 = diagnose(terms(cpu_cores=2, workers=2, main_cores_per_gpu=0.0))
    assert d1.now.au == pytest.approx(0.4, abs=APPROX)
    d2 = diagnose(terms(cpu_cores=2, workers=2))
    assert d2.now.au == pytest.approx(0.25, abs=APPROX)


def test_storage_bound_advises_bandwidth_and_workers_do_not_help():
    # 4 workers each 50 ms per sample read, no decode: 10 × 0.05 ÷ 4 = 0.125 s → AU 0.8.
    # The storage is taken as saturated at 4 readers, so 64 workers get the same bandwidth.
    # 1.25× bandwidth: 40 ms per sample → 0.1 s → AU 1.0.
    d = diagnose(terms(read_s_per_sample=0.05, decode_s_per_sample=0.0, workers=4))
    assert d.now.au == pytest.approx(0.8, abs=APPROX)
    assert d.now.bound == "storage"
    assert option(d, "workers").au == pytest.approx(0.8, abs=APPROX)
    assert d.advice is not None and d.advice.kind == "bandwidth"
    assert d.advice.amount == 1.25
    assert d.advice.au == pytest.approx(1.0, abs=APPROX)


def test_small_files_advise_shards():
    # 4 KiB files (one request each), 2 ms read each with 4 readers: all of it per-file cost.
    # Batch 100, 40 ms compute: 100 × 2 ms ÷ 4 = 50 ms → AU 0.8.
    # 256 MiB shards would exceed the 39.1 MiB dataset: one shard of it all, 10,000 samples,
    # read in 128 KiB requests at 2 ms each:
    # 2 ms × 4 KiB ÷ 128 KiB = 62.5 us per sample → 1.6 ms per batch → AU 1.0.
    d = diagnose(
        terms(
            read_s_per_sample=0.002,
            decode_s_per_sample=0.0,
            workers=4,
            batch_size=100,
            compute_s=0.04,
            files=10_000,
            total_bytes=10_000 * 4096,
            mean_file_bytes=4096,
        )
    )
    assert d.terms.small_files and d.terms.open_share == pytest.approx(1.0)
    assert d.now.au == pytest.approx(0.8, abs=APPROX)
    assert d.advice is not None and d.advice.kind == "shards"
    assert d.advice.amount == 10_000 * 4096  # never a shard larger than the dataset
    assert "one 39.1 MiB shard, the whole dataset (10,000 samples per shard" in d.advice.change
    assert d.advice.au == pytest.approx(1.0, abs=APPROX)
    assert "one request each" in d.advice.change
    # more bandwidth moves nothing of a per-request cost
    assert option(d, "bandwidth").au == pytest.approx(0.8, abs=APPROX)


def test_large_files_per_file_cost_from_the_open_rate():
    # 1 MiB files, 20 ms read each with 4 readers, 400 opens/s at 4 readers → 10 ms per file
    # (50 %). Batch 10, compute 40 ms: 10 × 20 ms ÷ 4 = 50 ms → AU 0.8. 256 MiB shards: 256
    # samples per shard, 10 ms ÷ 256 + 10 ms transfer → 25.1 ms per batch → AU 1.0.
    d = diagnose(
        terms(
            read_s_per_sample=0.02,
            decode_s_per_sample=0.0,
            workers=4,
            compute_s=0.04,
            total_bytes=1000 * (1 << 20),
            mean_file_bytes=1 << 20,
            open_rate_per_s=400.0,
        )
    )
    assert not d.terms.small_files and d.terms.open_share == pytest.approx(0.5)
    assert d.now.au == pytest.approx(0.8, abs=APPROX)
    assert d.advice is not None and d.advice.kind == "shards"
    # 1.25×: 10 + 8 ms → 45 ms → 0.89, short; 1.5×: 10 + 6.7 ms → 41.7 ms → 0.96
    assert option(d, "bandwidth").amount == 1.5


def test_cache_tier_mean_over_epochs():
    # storage-bound (AU 0.8) with a cache read of 1 ms: epochs 2+ take 25 ms per batch → AU 1.0;
    # over 5 epochs: 5 ÷ (1/0.8 + 4/1) = 0.952.
    d = diagnose(
        terms(
            read_s_per_sample=0.05,
            decode_s_per_sample=0.0,
            workers=4,
            cache_read_s_per_sample=0.001,
        )
    )
    c = option(d, "cache")
    assert c.au == pytest.approx(5 / (1 / 0.8 + 4), abs=APPROX)
    assert d.advice is not None and d.advice.kind == "cache"  # before bandwidth in effort
    # a cache holding half the dataset: epochs 2+ read 0.5 × 1 + 0.5 × 50 = 25.5 ms
    # → 63.75 ms per batch → AU 1.0 still
    half = option(diagnose(replace_terms(d.terms, cache_bytes=d.terms.total_bytes // 2)), "cache")
    assert "holding 50%" in half.change
    assert half.au == pytest.approx(5 / (1 / 0.8 + 4), abs=APPROX)


def replace_terms(t, **kw):
    from dataclasses import replace

    return replace(t, **kw)


def test_ranges_give_the_au_its_interval():
    # read 40–60 ms: 10 × 0.06 ÷ 4 = 0.15 s → 0.667; 10 × 0.04 ÷ 4 = 0.1 s → 1.0
    d = diagnose(
        terms(
            read_s_per_sample=0.05,
            decode_s_per_sample=0.0,
            workers=4,
            read_range=(0.04, 0.06),
        )
    )
    assert d.now.au_low == pytest.approx(0.1 / 0.15, abs=APPROX)
    assert d.now.au_high == pytest.approx(1.0, abs=APPROX)
    # the advice must reach the threshold at the low end: 1.25× gives 48 ms at worst → 0.833
    assert d.advice is not None and d.advice.kind == "bandwidth"
    assert d.advice.au_low >= 0.9
    assert d.advice.amount == 1.5  # 60 ms ÷ 1.5 = 40 ms → 1.0
    assert "pessimistic and optimistic ends" in d.advice.basis


def test_already_reaching_needs_no_advice():
    d = diagnose(terms(workers=8))
    assert d.now.reaches
    assert d.advice is None
    assert "none needed" in format_diagnosis(d)


def test_rendering_and_dict_label_every_figure_an_estimate():
    d = diagnose(terms(cpu_cores=2))
    text = format_diagnosis(d)
    assert "estimates by the starvation model" in text
    assert "advice (estimate): 6 CPU cores" in text
    out = json.loads(json.dumps(d.to_dict()))
    assert all(o["estimate"] and o["basis"].startswith("estimate: ") for o in out["options"])
    assert out["advice"]["kind"] == "cores"
    assert out["terms"]["sample_bytes"] == 1 << 20


@pytest.mark.parametrize(
    "kw",
    [
        {"read_s_per_sample": 0.0},
        {"decode_s_per_sample": -1.0},
        {"batch_size": 0},
        {"cpu_cores": 0},
        {"compute_s": float("nan")},
        {"read_range": (0.02, 0.01)},
        {"cache_read_s_per_sample": 0.0},
    ],
)
def test_bad_terms_are_refused(kw):
    with pytest.raises(UsageError):
        terms(**kw)


def test_bad_threshold_is_refused():
    with pytest.raises(UsageError):
        diagnose(terms(), threshold=0.0)


def test_terms_from_the_existing_loader_result():
    m = {
        "read_s_per_sample": 0.002,
        "open_s_per_file": 0.0015,
        "decode_s_per_sample": 0.0,
        "collate_s_per_batch": 0.0,
        "compute_s_per_step": 0.04,
        "batch_size": 100,
        "workers": 4,
        "cpu_cores": 8,
        "files": 10_000,
        "bytes": 10_000 * 4096,
        "samples_per_file": 1.0,
        "mean_file_bytes": 4096.0,
        "read_bps": 2e6,
        "read_bps_aggregate": 8e6,
        "file_open_per_s": 1 / 0.0015,
        "au": 0.79,
        "cache": "dropped",
    }
    t = PipelineTerms.from_loader(m)
    # 1.5 ms per file per worker, 4 workers → 2,667 opens/s aggregate; but 4 KiB files are
    # one request each: their whole 2 ms read is per-file cost
    assert t.open_rate_per_s == pytest.approx(4 / 0.0015)
    assert t.small_files and t.open_s_per_file == pytest.approx(0.002)
    big = PipelineTerms.from_loader({**m, "mean_file_bytes": 1 << 20, "bytes": 10_000 << 20})
    assert big.open_s_per_file == pytest.approx(0.0015) and big.open_share == pytest.approx(0.75)
    assert t.measured_au == 0.79 and t.total_bytes == 10_000 * 4096
    assert PipelineTerms.from_loader(m, cpu_cores=2).cpu_cores == 2
    ranged = PipelineTerms.from_loader({**m, "read_range": [0.0018, 0.0022], "decode_range": None})
    assert ranged.read_range == (0.0018, 0.0022) and ranged.decode_range is None
    with pytest.raises(UsageError, match="lack or garble"):
        PipelineTerms.from_loader({k: v for k, v in m.items() if k != "batch_size"})


def test_a_model_that_misses_the_measured_au_says_so():
    # now: AU 0.2 by the model. Measured 0.1: 1 s per step against the model's 0.5 s.
    d = diagnose(terms(measured_au=0.1))
    assert len(d.warnings) == 1 and "10 points above the measured 10%" in d.warnings[0]
    assert "500.00 ms per step are not in the measured terms" in d.warnings[0]
    assert "warning: the model's AU" in format_diagnosis(d)
    assert diagnose(terms(measured_au=0.22)).warnings == ()  # within 5 points
    assert "below the measured" in diagnose(terms(measured_au=0.4)).warnings[0]


def test_the_storage_gives_what_the_readers_measured_at_once():
    # 2 workers, 2 MiB samples read in 25 ms each, but the storage delivered 88 MiB/s: by
    # Little's law 88 MiB/s × 25 ms ÷ 2 MiB = 1.1 readers at once → 1: the storage gives one
    # sample per 25 ms (80 MiB/s), not two. Batch 4, compute 44 ms: 4 × 25 ms = 100 ms per step
    # → AU 0.44 (with every worker reading at once: 50 ms → 0.88).
    kw = dict(
        read_s_per_sample=0.025,
        decode_s_per_sample=0.0,
        workers=2,
        batch_size=4,
        compute_s=0.044,
        total_bytes=1000 * (2 << 20),
        mean_file_bytes=2 << 20,
    )
    once = diagnose(terms(**kw, read_bandwidth_bps=88 * 2**20))
    assert once.terms.active_readers == 1
    assert once.now.au == pytest.approx(0.44, abs=APPROX)
    both = diagnose(terms(**kw))
    assert both.terms.active_readers == 2
    assert both.now.au == pytest.approx(0.88, abs=APPROX)
    # 2× bandwidth on one reader at a time: 12.5 ms per sample → 50 ms → 0.88, short;
    # 3×: 8.3 ms → 33 ms → AU 1.0
    assert once.advice is not None and once.advice.kind == "bandwidth"
    assert once.advice.amount == 3.0


def test_workers_beyond_the_cores_are_not_advised():
    # 2 cores, one for the main loop: W workers cycle in at least W × 40 ms per sample on the
    # one free core, so from 2 workers on a batch takes 10 × 40 ms = 0.4 s → AU 0.25 whatever
    # W; the option names the smallest such count, not the last tried (64)
    w = option(diagnose(terms(cpu_cores=2)), "workers")
    assert w.amount == 2
    assert w.au == pytest.approx(0.25, abs=APPROX)


def test_two_workers_on_two_cores_are_advised_when_they_reach():
    # the main loop sleeping (0 cores), 1 worker: 10 × 50 ms = 0.5 s per batch against 0.3 s
    # compute → AU 0.6; 2 workers keep 1.6 cores busy of 2: 0.25 s → AU 1.0. Not "more cores".
    d = diagnose(terms(cpu_cores=2, compute_s=0.3, main_cores_per_gpu=0.0))
    assert d.now.au == pytest.approx(0.6, abs=APPROX)
    assert d.advice is not None and d.advice.kind == "workers" and d.advice.amount == 2
    assert d.advice.au == pytest.approx(1.0, abs=APPROX)


def test_the_main_loops_own_time_caps_every_option():
    # compute 0.1 s plus 25 ms of main loop per step: AU at most 0.1 / 0.125 = 0.8 whatever
    # the loader does; its interval carries into the AU's
    d = diagnose(terms(step_overhead_s=0.025, overhead_range=(0.02, 0.03)))
    assert all(s.au <= 0.8 + APPROX for s in d.options)
    assert d.advice is None
    assert option(d, "workers").au == pytest.approx(0.8, abs=APPROX)
    # 8 workers: a batch every 62.5 ms, the step 0.1 + 0.025 s (0.02–0.03)
    now = diagnose(terms(workers=8, step_overhead_s=0.025, overhead_range=(0.02, 0.03))).now
    assert now.au == pytest.approx(0.8, abs=APPROX)
    assert now.au_low == pytest.approx(0.1 / 0.13, abs=APPROX)
    assert now.au_high == pytest.approx(0.1 / 0.12, abs=APPROX)
    assert "main loop 25.00 ms/step" in format_diagnosis(d)


def test_from_loader_takes_the_step_overhead_and_its_range():
    m = {
        "read_s_per_sample": 0.01, "decode_s_per_sample": 0.04, "collate_s_per_batch": 0.0,
        "compute_s_per_step": 0.1, "batch_size": 10, "workers": 1, "cpu_cores": 8,
        "files": 1000, "bytes": 1000 << 20, "mean_file_bytes": 1 << 20,
        "samples_per_file": 1, "read_bps_aggregate": 0.0, "open_s_per_file": 0.0,
        "au": 0.2, "step_overhead_s": 0.004, "step_overhead_range": [0.003, 0.005],
    }  # fmt: skip
    t = PipelineTerms.from_loader(m)
    assert t.step_overhead_s == 0.004 and t.overhead_range == (0.003, 0.005)
    assert t.to_dict()["overhead_range"] == [0.003, 0.005]


def test_a_shard_holds_at_most_the_dataset():
    # 100 files of 1 KiB: a 256 MiB shard would hold 262,144 samples; there are 100
    t = terms(files=100, total_bytes=100 << 10, mean_file_bytes=1024, open_rate_per_s=100.0)
    s = option(diagnose(t), "shards")
    assert "(100 samples per shard" in s.change


def test_the_hosts_other_load_is_kept_in_every_configuration():
    # decode took 2× its CPU time with 1 worker on 8 cores (no own contention): the host's
    # other load stretches every configuration's CPU ×2: 10 × (10 + 80) ms = 0.9 s → AU 0.11
    d = diagnose(terms(decode_wall_s_per_sample=0.08))
    assert d.now.au == pytest.approx(0.1 / 0.9, abs=APPROX)
    assert "× 2.00 the host's other load" in d.now.basis
    m = {
        "read_s_per_sample": 0.01, "decode_s_per_sample": 0.04, "collate_s_per_batch": 0.01,
        "compute_s_per_step": 0.1, "batch_size": 10, "workers": 1, "cpu_cores": 8,
        "files": 1000, "bytes": 1000 << 20, "mean_file_bytes": 1 << 20,
        "samples_per_file": 1, "read_bps_aggregate": 0.0, "open_s_per_file": 0.0,
        "collate_range": [0.005, 0.015],
    }  # fmt: skip
    t = PipelineTerms.from_loader(m)
    # 10 × (10 + 40 + 1) ms = 0.51 s per batch → AU 0.196; with decode wall 80 ms (×2 on the
    # CPU's 41 ms per sample: the host's other load) 0.92 s → 0.109
    assert diagnose(t).now.au == pytest.approx(0.1 / 0.51, abs=APPROX)
    t2 = PipelineTerms.from_loader({**m, "decode_wall_s_per_sample": 0.08})
    assert diagnose(t2).now.au == pytest.approx(0.1 / (10 * (0.01 + 2 * 0.041)), abs=APPROX)


def test_a_change_is_listed_only_when_it_raises_the_au_beyond_the_runs_interval():
    # storage-bound at 4 readers (taken as saturated): 10 × 50 ms ÷ 4 = 0.125 s per batch
    # against 0.1 s compute → AU 0.8 (0.73–0.89 over read 45–55 ms). More workers read no
    # faster: their AU stays 0.8, inside the run's own interval, so they are listed apart as
    # not helping, never as "If workers: AU 80 %" beside a run at 80 %.
    d = diagnose(terms(read_s_per_sample=0.05, decode_s_per_sample=0.0, workers=4,
                       read_range=(0.045, 0.055)))  # fmt: skip
    # more cores (with a worker per core) read no faster either; more bandwidth helps
    assert [s.kind for s in d.no_help] == ["workers", "cores"]
    assert [s.kind for s in d.options] == ["bandwidth"]
    assert all(s.au > d.now.au_high or s.au_low > d.now.au for s in d.options)
    text = format_diagnosis(d)
    assert "  does not help (no AU beyond the run's own 80% (73%–89%)): workers: 5 loader" in text
    assert not any(ln.lstrip().startswith("workers:") for ln in text.splitlines())
    out = json.loads(json.dumps(d.to_dict()))
    assert [s["kind"] for s in out["no_help"]] == ["workers", "cores"]
    assert "workers" not in [s["kind"] for s in out["options"]]


def test_a_change_within_half_a_point_does_not_help_when_the_terms_carry_no_range():
    from dataclasses import replace

    from iobench.model.diagnosis import MIN_GAIN, helps_beyond

    # storage-bound without a range: the run's interval is its point, 0.8; workers stay there
    d = diagnose(terms(read_s_per_sample=0.05, decode_s_per_sample=0.0, workers=4))
    assert d.now.au_low == d.now.au_high == d.now.au
    assert "workers" in {s.kind for s in d.no_help} and d.advice in d.options
    now = d.now
    assert not helps_beyond(now, replace(now, au=now.au + MIN_GAIN, au_low=now.au, au_high=1))
    assert helps_beyond(now, replace(now, au=now.au + 2 * MIN_GAIN))
    # an AU at its ceiling: the change lifts the pessimistic end beyond the run's point
    wide = replace(now, au=0.8, au_low=0.6, au_high=1.0)
    assert helps_beyond(wide, replace(now, au=1.0, au_low=1.0, au_high=1.0))
    assert not helps_beyond(wide, replace(now, au=0.85, au_low=0.7, au_high=1.0))


def test_the_basis_text_is_formatted():
    d = diagnose(terms(step_overhead_s=0.004))
    for s in (d.now, *d.options, *d.no_help):
        assert "{" not in s.basis and "main loop 4.00 ms/step measured" in s.basis, s.basis


def test_the_loader_rows_list_what_does_not_help_apart():
    from iobench.loader.existing_diagnosis import diagnosis_rows

    d = diagnose(terms(read_s_per_sample=0.05, decode_s_per_sample=0.0, workers=4,
                       read_range=(0.045, 0.055)))  # fmt: skip
    rows = dict(diagnosis_rows(json.loads(json.dumps(d.to_dict()))))
    assert "If workers (estimate)" not in rows and "If bandwidth (estimate)" in rows
    apart = rows["Does not help (estimate)"]
    assert apart.startswith("no AU beyond the run's own 80% (73%–89%): workers: 5 loader")
    # an older result's diagnosis (no no_help key) still renders
    old = {k: v for k, v in d.to_dict().items() if k != "no_help"}
    assert "Does not help (estimate)" not in dict(diagnosis_rows(old))
