"""The contention model (issue 27): the loader's AU over a checkpoint interval with an async
save's write running beside it, and the goodput that counts it."""

from __future__ import annotations

import pytest

from iobench.checkpoint.contention import (
    ContentionInputs,
    au_at_bandwidth,
    au_over_interval,
    au_writes_first,
    contention,
    goodput,
    queue_share,
    share,
)
from iobench.checkpoint.daly import goodput_exact
from iobench.core.errors import UsageError

MiB = 1 << 20


def test_no_write_is_the_au_alone_and_a_write_all_interval_long_the_au_during():
    assert au_over_interval(0.9, 0.4, 0.0, 60.0) == pytest.approx(0.9)
    assert au_over_interval(0.9, 0.4, 60.0, 60.0) == pytest.approx(0.4)
    assert au_over_interval(0.9, 0.4, 600.0, 60.0) == pytest.approx(0.4)  # capped at τ
    assert au_over_interval(0.9, 0.4, 15.0, 60.0) == pytest.approx((0.9 * 45 + 0.4 * 15) / 60)


def test_the_share_rule_splits_the_capacity_by_demand_capped_by_the_alone_rates():
    assert share(100.0, 50.0, None) == (100.0, 50.0)  # independent
    assert share(100.0, 50.0, 200.0) == (100.0, 50.0)  # both fit
    r, w = share(300.0, 100.0, 200.0)
    assert (r, w) == pytest.approx((150.0, 50.0)) and r + w == pytest.approx(200.0)


def test_two_writers_on_one_fifo_limit_split_by_queued_bytes_not_by_demand():
    # 8 writers fsyncing 4 MiB beside one writer of 8 MiB files, both wanting the whole
    # 10 MiB/s: 32 of the 40 MiB queued is the save's, so it gets 8 MiB/s; the demand rule
    # (share) would give about half each
    save, other = queue_share([10 * MiB, 10 * MiB], [8 * 4 * MiB, 8 * MiB], 10 * MiB)
    assert (save, other) == pytest.approx((8 * MiB, 2 * MiB))
    assert share(10 * MiB, 10 * MiB, 10 * MiB) == pytest.approx((5 * MiB, 5 * MiB))
    # one stream each, the same flush: the same part, whatever their rates alone
    assert queue_share([30.0, 12.0], [1.0, 1.0], 20.0) == pytest.approx([10.0, 10.0])


def test_a_job_below_its_queue_share_keeps_its_pace_and_the_rest_is_shared_again():
    # max-min: the paced reader keeps its 8 of 20, the loader takes the other 12
    assert queue_share([30.0, 8.0], [1.0, 1.0], 20.0) == pytest.approx([12.0, 8.0])
    # three jobs: the smallest capped, the other two split the rest 3:1 by their queued bytes
    assert queue_share([100.0, 100.0, 2.0], [3.0, 1.0, 4.0], 18.0) == pytest.approx(
        [12.0, 4.0, 2.0]
    )
    # all fit: every job keeps its rate alone
    assert queue_share([5.0, 1.0], [1.0, 9.0], 20.0) == pytest.approx([5.0, 1.0])


@pytest.mark.parametrize(
    "args",
    [([1.0], [1.0, 2.0], 5.0), ([], [], 5.0), ([1.0], [0.0], 5.0), ([1.0], [1.0], -1.0)],
)
def test_queue_share_refuses_bad_inputs(args):
    with pytest.raises(UsageError):
        queue_share(*args)


def test_writes_first_the_loader_reads_in_the_time_the_save_leaves():
    # a save paced at a quarter of the storage's write rate leaves 3/4 of the time: the
    # loader's read 100 -> 75 MiB/s, its AU 0.5 × 0.75, plus 0.5 s of prefetched batches
    # over the save's 10 s; the independent rule would keep the AU alone, 0.5
    au, read = au_writes_first(0.5, 100 * MiB, 200 * MiB, 100 * MiB, 400 * MiB, 10.0, 0.5)
    assert read == pytest.approx(75 * MiB)
    assert au == pytest.approx(0.5 * 0.75 + 0.05)


def test_writes_first_an_unpaced_save_leaves_the_loader_its_prefetched_batches_only():
    au, read = au_writes_first(0.9, 100 * MiB, 50 * MiB, 300 * MiB, 300 * MiB, 2.0, 0.2)
    assert read == 0.0 and au == pytest.approx(0.1)
    # a save shorter than the prefetched batches costs nothing
    assert au_writes_first(0.9, 100 * MiB, 50 * MiB, 300 * MiB, 300 * MiB, 0.1, 0.2)[0] == 0.9
    with pytest.raises(UsageError):
        au_writes_first(0.9, 100 * MiB, 50 * MiB, 300 * MiB, 300 * MiB, 2.0, -1.0)


def test_au_at_a_bandwidth_is_the_rate_bound():
    assert au_at_bandwidth(50.0, 100.0) == pytest.approx(0.5)
    assert au_at_bandwidth(500.0, 100.0, au_cap=0.95) == pytest.approx(0.95)


def _inputs(**kw):
    base = {"interval_s": 100.0, "checkpoint_bytes": 1000 * MiB, "write_alone_bps": 100 * MiB,
            "read_alone_bps": 200 * MiB, "au_alone": 1.0, "demand_bps": 200 * MiB}  # fmt: skip
    return ContentionInputs(**{**base, **kw})


def test_the_measured_during_window_is_the_basis_when_there_is_one():
    c = contention(_inputs(au_during=0.5, read_during_bps=100 * MiB, write_during_bps=50 * MiB))
    assert c.basis_kind == "measured" and c.write_s == pytest.approx(20.0)
    assert c.au_interval == pytest.approx((1.0 * 80 + 0.5 * 20) / 100)
    assert "measured" in c.basis


def test_separate_measurements_use_the_stated_share_rule():
    # 300 MiB/s of storage for 200 read + 100 write: it all fits, nothing is lost
    fits = contention(_inputs(capacity_bps=300 * MiB))
    assert fits.basis_kind == "share" and fits.au_interval == pytest.approx(1.0)
    # 200 MiB/s: read gets 2/3 of it (133 MiB/s), write 67 MiB/s: w = 15 s at AU 2/3
    c = contention(_inputs(capacity_bps=200 * MiB))
    assert c.read_during_bps == pytest.approx(200 * MiB * 2 / 3)
    assert c.write_s == pytest.approx(1000 / (200 / 3))
    assert c.au_during == pytest.approx(2 / 3)
    assert c.au_interval == pytest.approx(1 - (1 / 3) * c.write_s / 100)
    assert "proportion to demand" in c.basis
    free = contention(_inputs())  # no capacity: independent limits, nothing lost
    assert free.basis_kind == "independent" and free.au_interval == pytest.approx(1.0)


def test_goodput_counts_the_au_lost_during_the_write():
    inp = _inputs(capacity_bps=200 * MiB, snapshot_s=2.0)
    c = contention(inp)
    g = goodput(c, inp, mtbf_s=86400.0)
    plain = goodput_exact(100.0, 2.0, 86400.0, 0.0, c.write_s)
    assert g["goodput"] == pytest.approx(plain)
    assert g["goodput_with_contention"] == pytest.approx(plain * c.au_interval)
    assert g["goodput_with_contention"] < g["goodput"]


@pytest.mark.parametrize(
    "kw", [{"interval_s": 0.0}, {"au_alone": 1.5}, {"write_alone_bps": -1.0},
           {"capacity_bps": float("nan")}, {"snapshot_s": -1.0}],
)  # fmt: skip
def test_bad_inputs_are_usage_errors(kw):
    with pytest.raises(UsageError):
        _inputs(**kw)


def test_no_read_lost_keeps_the_au_alone_whatever_the_bound_says():
    # the loader's AU alone (0.87) sits above its rate bound at the read rate alone (16/20):
    # a write that takes no read bandwidth must leave it as it was
    c = contention(_inputs(au_alone=0.87, read_alone_bps=16 * MiB, demand_bps=20 * MiB))
    assert c.basis_kind == "independent" and c.au_during == pytest.approx(0.87)
    assert c.au_interval == pytest.approx(0.87)


def test_the_loader_beside_another_job_on_one_limit_by_hand():
    from iobench.checkpoint.contention import au_beside

    # the loader reads 20 alone (AU 0.5, demand 40), another job 20, one limit of 20: the
    # loader's share 20·20/40 = 10, its AU 0.5 × (10/40 ÷ 20/40) = 0.25
    assert au_beside(0.5, 20.0, 20.0, 20.0, 40.0) == pytest.approx((0.25, 10.0))
    # they fit (10 + 5 <= 20): nothing lost
    assert au_beside(0.9, 10.0, 5.0, 20.0, 10.0) == pytest.approx((0.9, 10.0))
    # a compute-bound loader (cap 0.98 reached at 9.8 of demand 10) keeps its AU while its
    # share stays above what it needs: 30·12/(12+24) = 10 ≥ 9.8
    au, read = au_beside(0.98, 12.0, 24.0, 30.0, 10.0, au_cap=0.98)
    assert read == pytest.approx(10.0) and au == pytest.approx(0.98)
    # a paced reader (8 of a 20 limit) below its part of the queue keeps its pace, the loader
    # (one request in flight each) gets the other 12, not the demand rule's 20·15/23 = 13.0
    au, read = au_beside(0.8, 15.0, 8.0, 20.0, 20.0, queued=(1.0, 1.0))
    assert read == pytest.approx(12.0) and au == pytest.approx(0.8 * 12 / 15)
    assert au_beside(0.8, 15.0, 8.0, 20.0, 20.0)[1] == pytest.approx(20 * 15 / 23)


def test_the_probe_rule_adds_the_time_per_byte_the_save_added_to_the_probe():
    from iobench.checkpoint.contention import read_beside_probe

    # a loader that waited reads 200 alone; the probe went 250 -> 20 beside the save: the save
    # added 1/20 - 1/250 s per MiB to every read, so the loader reads 1/(1/200 + 0.046) MiB/s
    r = read_beside_probe(200 * MiB, 250 * MiB, 20 * MiB, waited=True)
    assert r == pytest.approx(MiB / (1 / 200 + 1 / 20 - 1 / 250))
    # one that kept up reads at the probe's speed when it falls behind: the probe's 20
    assert read_beside_probe(40 * MiB, 250 * MiB, 20 * MiB, waited=False) == pytest.approx(20 * MiB)
    # a probe the save did not slow (blkio's separate limits): the read alone, unchanged
    assert read_beside_probe(200 * MiB, 250 * MiB, 260 * MiB, waited=True) == pytest.approx(
        200 * MiB
    )
    with pytest.raises(UsageError):
        read_beside_probe(200 * MiB, 0.0, 20 * MiB, waited=True)


def test_the_probe_rule_by_hand_with_its_interval():
    # a loader that waited (AU 0.5 of demand 400: read alone 200); the probe 250 -> 20 (range
    # 15-25 over the saves); the save writes 1000 MiB at 100 MiB/s beside the probe
    inp = _inputs(au_alone=0.5, read_alone_bps=200 * MiB, demand_bps=400 * MiB,
                  probe_idle_bps=250 * MiB, probe_during_bps=20 * MiB,
                  probe_during_range=(15 * MiB, 25 * MiB), write_probe_bps=100 * MiB,
                  buffer_s=1.0)  # fmt: skip
    c = contention(inp)
    read = MiB / (1 / 200 + 1 / 20 - 1 / 250)
    assert c.basis_kind == "probe" and c.read_during_bps == pytest.approx(read)
    assert c.write_s == pytest.approx(10.0)
    assert c.au_during == pytest.approx(0.5 * read / (200 * MiB))  # the rate bound moved
    lo, hi = c.au_during_range
    assert lo < c.au_during < hi  # the slowest and the fastest probed save
    # it waited, so its queue stood empty: no buffer in the interval either
    assert hi == pytest.approx(0.5 * (MiB / (1 / 200 + 1 / 25 - 1 / 250)) / (200 * MiB))
    assert c.au_interval_range[0] <= c.au_interval <= c.au_interval_range[1]
    assert "read probe" in c.basis and "interval" in c.basis
    # a loader that kept up (AU 1): its full queue's compute (1 s over the 10 s save) only in
    # the interval's top, the point none of it (the queue full again by the save's end)
    up = contention(_inputs(au_alone=1.0, read_alone_bps=100 * MiB, demand_bps=100 * MiB,
                            probe_idle_bps=250 * MiB, probe_during_bps=20 * MiB,
                            write_probe_bps=100 * MiB, buffer_s=1.0))  # fmt: skip
    assert up.au_during == pytest.approx(0.2)
    assert up.au_during_range == pytest.approx((0.2, 0.3))
    # the measured during-window still wins when there is one
    both = contention(_inputs(au_during=0.4, write_during_bps=50 * MiB, probe_idle_bps=250 * MiB,
                              probe_during_bps=20 * MiB))  # fmt: skip
    assert both.basis_kind == "measured" and both.au_during_range is None


@pytest.mark.parametrize("kw", [{"probe_idle_bps": 0.0}, {"probe_during_bps": -1.0},
                                {"buffer_s": -1.0}, {"write_probe_bps": float("inf")}])  # fmt: skip
def test_bad_probe_inputs_are_usage_errors(kw):
    with pytest.raises(UsageError):
        _inputs(**kw)
