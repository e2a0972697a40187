"""One value per run: the median over repeats, per metric, with its spread beside it."""

from __future__ import annotations

import pytest
from factories import MiB, make_phase, make_run

from iobench import report
from iobench.core.units import format_rate, format_spread
from iobench.result.file import PhaseResult, metric_summary, metric_value
from iobench.result.stats import summarize
from iobench.run.runner import merge_repeats

BWS = [559.0, 780.0, 800.0, 890.0, 903.0, 1320.0]  # MiB/s, six repeats


def test_summarize_median_range_and_cv():
    s = summarize(BWS)
    assert (s.n, s.median, s.min, s.max) == (6, 845.0, 559.0, 1320.0)
    assert s.cv == pytest.approx(0.28608, abs=1e-5)  # sample sd / mean
    one = summarize([5.0])
    assert (one.n, one.median, one.cv) == (1, 5.0, None)
    assert summarize([]) is None
    assert summarize([float("nan"), 2.0]).n == 1  # non-finite values are not measurements


def _repeat(bw_mib: float, p99: float) -> list[PhaseResult]:
    return [
        PhaseResult(
            name="seq-read",
            op="read",
            bytes=64 * MiB,
            elapsed_s=64 / bw_mib,
            bandwidth_bps=bw_mib * MiB,
            iops=bw_mib,
            latency_s={"p50": p99 / 2, "p99": p99},
        )
    ]


def test_merge_repeats_holds_the_median_of_every_figure():
    p99s = [0.010, 0.002, 0.030, 0.004, 0.006, 0.008]
    merged = merge_repeats([_repeat(bw, p) for bw, p in zip(BWS, p99s, strict=True)])
    (phase,) = merged
    assert phase.bandwidth_bps == 845.0 * MiB  # not the median-bandwidth repeat's 890 or 903
    assert phase.iops == 845.0
    assert phase.latency_s["p99"] == pytest.approx(0.007)  # its own median, not repeat 3's
    assert phase.spread["bandwidth_bps"]["n"] == 6
    assert phase.spread["bandwidth_bps"]["min"] == 559.0 * MiB
    assert phase.spread["latency_s.p99"]["max"] == 0.030
    # volume and time come from one real repeat: the upper-middle one by bandwidth (890 MiB/s)
    assert phase.extra["detail_repeat"] == 3
    assert phase.elapsed_s == 64 / 890.0
    assert [r["bandwidth_bps"] for r in phase.repeats] == [b * MiB for b in BWS]
    assert metric_value(phase, "bandwidth_bps") == phase.bandwidth_bps


def test_metric_value_of_an_older_result_is_the_median_over_its_repeats():
    phase = make_phase("w", "write", bandwidth=[b * MiB for b in BWS])
    phase.bandwidth_bps = 903.0 * MiB  # what iobench stored before: the median-bandwidth repeat
    assert metric_value(phase, "bandwidth_bps") == 845.0 * MiB
    assert metric_summary(phase, "bandwidth_bps").n == 6
    single = make_phase("w", "write", bandwidth=[100.0])
    assert metric_value(single, "bandwidth_bps") == 100.0
    assert metric_summary(single, "bandwidth_bps").n == 1
    assert metric_value(single, "latency_s.p99") is None


def test_format_spread():
    assert format_spread(1, 5.0, 5.0, None, format_rate) == "n=1"
    text = format_spread(6, 559 * MiB, 1320 * MiB, 0.28608, format_rate)
    assert text == "n=6, 559.0–1320.0 MiB/s, CV 29 %"
    mixed = format_spread(2, 900 * MiB, 20 * 1024 * MiB, 1.0, format_rate)
    assert mixed == "n=2, 900.0 MiB/s–20.00 GiB/s, CV 100 %"


def test_every_report_rendering_shows_the_median_and_its_spread():
    phase = make_phase("seq-read", "read", bandwidth=[b * MiB for b in BWS])
    phase.bandwidth_bps = 903.0 * MiB  # an older result: the renderings still show the median
    run = make_run(phases=[phase])
    spread = "n=6, 559-1320 MiB/s, CV 29 %"
    for text in (report.render_terminal(run), report.render_markdown(run)):
        assert "845.0 MiB/s" in text and "903.0 MiB/s" not in text
        assert spread in text and "Over repeats" in text
    html = report.render_html(run)
    assert "845.0 MiB/s" in html and spread in html and "medians over the repeats" in html


def test_single_runs_show_no_repeat_column():
    run = make_run(phases=[make_phase("seq-read", "read", bandwidth=[100 * MiB])])
    assert "Over repeats" not in report.render_terminal(run)
