"""compare: the U test on hand cases, direction- and noise-aware marks, exit codes, rendering."""

from __future__ import annotations

import json
import math
import statistics

import pytest
from factories import MiB, make_phase, make_run, noisy

from iobench import history
from iobench.compare import (
    CompareOptions,
    Noise,
    NoiseBasis,
    compare_metric,
    compare_runs,
    format_percent,
    history_noise,
    mann_whitney_u,
    parse_thresholds,
    render_json,
    render_markdown,
    render_table,
    resolve,
    spec_differences,
    t_quantile,
    t_sf,
    u_distribution,
)
from iobench.errors import ExitStatus, UsageError
from iobench.results import save

# --- Mann-Whitney U: reference values from scipy 1.17 scipy.stats.mannwhitneyu ------------------

A20 = [10.12573, 9.867895, 10.640423, 10.1049, 9.464331, 10.361595, 11.304, 10.947081, 9.296265,
       8.734579, 9.376726, 10.041326, 7.674969, 9.781208, 8.754089, 9.267733, 9.455741, 9.6837,
       10.411631, 11.042513]  # fmt: skip
B20 = [10.671465, 12.166463, 10.134805, 11.15151, 11.70347, 10.894012, 10.056501, 9.878275,
       10.342274, 11.020195, 9.790382, 10.590824, 10.640775, 11.340846, 11.014659, 11.155373,
       10.146171, 10.670386, 11.583975, 12.293431]  # fmt: skip


def test_u_distribution_counts_every_ordering_once():
    counts = u_distribution(6, 6)
    assert len(counts) == 37
    assert sum(counts) == math.comb(12, 6) == 924
    assert counts[0] == counts[-1] == 1
    assert counts == counts[::-1]
    assert u_distribution(2, 2) == [1, 1, 2, 1, 1]  # the six orderings of xxyy by U


def test_mann_whitney_exact_completely_separated_6_vs_6():
    result = mann_whitney_u([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
    assert result.method == "exact"
    assert result.u == 0
    assert result.p_value == pytest.approx(2 / 924, rel=1e-12)  # 0.0021645
    reverse = mann_whitney_u([7, 8, 9, 10, 11, 12], [1, 2, 3, 4, 5, 6])
    assert reverse.u == 36
    assert reverse.p_value == pytest.approx(2 / 924, rel=1e-12)


def test_mann_whitney_normal_approximation_matches_scipy():
    normal = mann_whitney_u([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12], method="normal")
    assert normal.p_value == pytest.approx(0.005074868097940253, rel=1e-9)
    assert normal.p_value < 0.01  # same decision as the exact test
    tied = mann_whitney_u([1, 2, 3, 4, 5, 7], [7, 8, 9, 10, 11, 12])
    assert tied.method == "normal"  # a tie forces the approximation
    assert tied.u == 0.5
    assert tied.p_value == pytest.approx(0.006392268870767702, rel=1e-9)
    many_ties = mann_whitney_u([1.0, 2, 2, 3, 5, 8, 8], [2, 4, 6, 8, 9, 10])
    assert many_ties.u == 11
    assert many_ties.p_value == pytest.approx(0.16996790760227598, rel=1e-9)


def test_mann_whitney_exact_and_normal_agree_at_20_vs_20():
    exact = mann_whitney_u(A20, B20)
    assert exact.method == "exact"
    assert exact.u == 67
    assert exact.p_value == pytest.approx(0.00017653796731999564, rel=1e-9)
    normal = mann_whitney_u(A20, B20, method="normal")
    assert normal.p_value == pytest.approx(0.0003381948100293378, rel=1e-9)


def test_mann_whitney_interleaved_and_identical_samples():
    interleaved = mann_whitney_u([1, 3, 5, 7, 9, 11], [2, 4, 6, 8, 10, 12])
    assert interleaved.p_value == pytest.approx(0.6991341991341992, rel=1e-12)
    assert mann_whitney_u([5.0] * 6, [5.0] * 6).p_value == 1.0
    with pytest.raises(ValueError):
        mann_whitney_u([], [1.0])
    with pytest.raises(ValueError):
        mann_whitney_u([1, 2], [2, 3], method="exact")


# --- one metric ----------------------------------------------------------------------------------

OPTS = CompareOptions()


def test_bandwidth_down_25_percent_is_a_regression_with_u_test():
    row = compare_metric(
        "seq-read", "bandwidth", "B/s", "higher", noisy(1000 * MiB), noisy(750 * MiB), OPTS
    )
    assert row.test == "mann-whitney"
    assert row.p_value == pytest.approx(2 / 924)
    assert row.delta == pytest.approx(-0.25)
    assert row.change == pytest.approx(-0.25)
    assert row.mark == "+"


def test_bandwidth_down_25_percent_three_repeats_is_a_regression_by_ranges():
    row = compare_metric(
        "seq-read", "bandwidth", "B/s", "higher", noisy(1000.0, 3), noisy(750.0, 3), OPTS
    )
    assert row.test == "ranges" and row.significant and row.mark == "+"


def test_one_repeat_a_side_without_history_is_unconfirmed():
    # two identical single runs on a noisy disk: -25 % is a move, not evidence
    row = compare_metric("seq-read", "bandwidth", "B/s", "higher", [1000.0], [750.0], OPTS)
    assert row.test is None and not row.significant
    assert row.mark == "?" and row.confirm_repeats == 3
    two = compare_metric("seq-read", "bandwidth", "B/s", "higher", [1000.0] * 2, [750.0] * 3, OPTS)
    assert two.mark == "?"  # the baseline's two repeats cannot be tested
    same = compare_metric("seq-read", "bandwidth", "B/s", "higher", [1000.0], [950.0], OPTS)
    assert same.mark == " " and same.confirm_repeats is None


def test_beyond_the_large_margin_is_confirmed_without_evidence():
    # throughput: x10 (-90 %) is the margin; latency: x100
    drop = compare_metric("seq-read", "bandwidth", "B/s", "higher", [1000.0], [99.0], OPTS)
    assert drop.margin and drop.significant and drop.mark == "+"
    assert compare_metric("r", "bandwidth", "B/s", "higher", [1000.0], [101.0], OPTS).mark == "?"
    lat = compare_metric("r", "latency_p99", "s", "lower", [0.001], [0.05], OPTS)
    assert lat.mark == "?" and not lat.margin  # x50 in a tail latency can be noise
    assert compare_metric("r", "latency_p99", "s", "lower", [0.001], [0.2], OPTS).mark == "+"
    stalled = compare_metric("w", "bandwidth", "B/s", "higher", [1000.0], [0.0], OPTS)
    assert stalled.mark == "+"  # zero is infinitely far


def test_history_noise_decides_when_there_is_enough_of_it():
    tight = Noise.of([100.0, 101.0, 99.0, 100.5, 99.5, 100.0, 100.2, 99.8, 100.1, 99.9], 0.001)
    assert tight.runs == 10
    row = compare_metric("r", "bandwidth", "B/s", "higher", [1000.0], [800.0], OPTS, tight)
    assert row.test == "history" and row.noise is tight and row.mark == "+"
    wide = Noise.of([50.0, 100.0, 200.0, 400.0, 100.0, 70.0], 0.001)
    row = compare_metric("r", "bandwidth", "B/s", "higher", [1000.0], [400.0], OPTS, wide)
    assert row.test == "history" and row.mark == "~"
    # the history decides even where the repeats would have: 6 a side, fully apart
    row = compare_metric("r", "bandwidth", "B/s", "higher", noisy(1000.0), noisy(400.0), OPTS, wide)
    assert row.test == "history" and row.mark == "~"
    few = Noise.of([100.0, 101.0], 0.001)  # two runs: not a noise floor
    row = compare_metric("r", "bandwidth", "B/s", "higher", [1000.0], [800.0], OPTS, few)
    assert row.test is None and row.mark == "?"


def test_noise_floor_is_a_student_t_bound_on_log_values():
    values = [100.0, 110.0, 90.0, 105.0]
    logs = [math.log(v) for v in values]
    sd = statistics.stdev(logs)
    noise = Noise.of(values, 0.001)
    assert noise.runs == 4 and noise.sd_log == pytest.approx(sd)
    assert noise.floor == pytest.approx(12.923979 * math.sqrt(2) * sd, rel=1e-6)
    assert noise.factor == pytest.approx(math.exp(noise.floor))
    assert Noise.of([100.0, 0.0], 0.001) is None  # one positive value


@pytest.mark.parametrize(
    ("q", "df", "expected"),  # scipy.stats.t.ppf
    [(0.9995, 2, 31.599055), (0.9995, 3, 12.923979), (0.9995, 19, 3.883406),
     (0.995, 10, 3.169273), (0.975, 5, 2.570582), (0.9995, 1, 636.619249)],
)  # fmt: skip
def test_t_quantile_matches_scipy(q, df, expected):
    assert t_quantile(q, df) == pytest.approx(expected, rel=1e-6)
    assert t_sf(expected, df) == pytest.approx(1 - q, rel=1e-5)


def test_latency_up_30_percent_is_a_regression_and_down_an_improvement():
    up = compare_metric("r", "latency_p99", "s", "lower", noisy(0.010), noisy(0.013), OPTS)
    assert up.delta == pytest.approx(0.30) and up.change == pytest.approx(-0.30)
    assert up.threshold == 0.20 and up.mark == "+"
    down = compare_metric("r", "latency_p99", "s", "lower", noisy(0.010), noisy(0.007), OPTS)
    assert down.change == pytest.approx(0.30) and down.mark == "-"
    # 15 % slower latency is within the 20 % latency threshold
    small = compare_metric("r", "latency_p99", "s", "lower", noisy(0.010), noisy(0.0115), OPTS)
    assert small.mark == " "


def test_bandwidth_up_is_an_improvement():
    row = compare_metric("w", "bandwidth", "B/s", "higher", noisy(100.0), noisy(150.0), OPTS)
    assert row.change == pytest.approx(0.5) and row.mark == "-"


def test_large_change_inside_the_noise_is_tilde():
    # medians 100 vs 80 (-20 %), but the repeats' ranges overlap: not significant
    row = compare_metric(
        "w", "bandwidth", "B/s", "higher", [60.0, 100.0, 140.0], [50.0, 80.0, 110.0], OPTS
    )
    assert row.test == "ranges" and not row.significant and row.mark == "~"
    # six a side, interleaved: median +16.7 % but Mann-Whitney p = 0.70
    base = [100.0, 300.0, 500.0, 700.0, 900.0, 1100.0]
    cur = [200.0, 400.0, 600.0, 800.0, 1000.0, 1200.0]
    row = compare_metric("w", "bandwidth", "B/s", "higher", base, cur, OPTS)
    assert row.change == pytest.approx(1 / 6)
    assert row.test == "mann-whitney" and row.p_value == pytest.approx(0.6991341991341992)
    assert row.mark == "~"


def test_within_threshold_is_blank_even_when_significant():
    row = compare_metric("w", "bandwidth", "B/s", "higher", noisy(100.0), noisy(95.0, 6), OPTS)
    assert row.significant and row.mark == " "


def test_missing_side_is_x():
    row = compare_metric("w", "bandwidth", "B/s", "higher", [1.0], [], OPTS)
    assert row.mark == "x" and row.current is None and row.change is None


# --- thresholds ----------------------------------------------------------------------------------


def test_parse_thresholds_single_value_sets_both_defaults():
    o = parse_thresholds("5%")
    assert o.threshold_throughput == pytest.approx(0.05)
    assert o.threshold_latency == pytest.approx(0.05)
    assert o.per_metric == ()


def test_parse_thresholds_per_metric_patterns_in_order():
    o = parse_thresholds("bandwidth=5%,latency_p99=30%,*iops*=15%, latency=25%")
    assert o.per_metric == (("bandwidth", 0.05), ("latency_p99", 0.30), ("*iops*", 0.15))
    assert o.threshold_latency == pytest.approx(0.25)
    assert o.threshold_throughput == 0.10
    assert o.threshold_for("seq-read", "bandwidth") == 0.05
    assert o.threshold_for("seq-read", "bandwidth_stonewall") == 0.10  # not a match for "bandwidth"
    assert o.threshold_for("rand", "iops") == 0.15
    assert o.threshold_for("rand", "latency_p99") == 0.30
    assert o.threshold_for("rand", "latency_mean") == 0.25
    assert o.threshold_for("loader", "load_wait_p99") == 0.25  # load_wait counts as latency
    keep = parse_thresholds("bandwidth=5%", CompareOptions(strict=True, fail_on="never"))
    assert keep.strict and keep.fail_on == "never"


def test_threshold_pattern_on_phase_dot_metric():
    o = parse_thresholds("seq-read.*=50%")
    assert o.threshold_for("seq-read", "bandwidth") == 0.5
    assert o.threshold_for("rand-read", "bandwidth") == 0.10


@pytest.mark.parametrize("text", ["", "abc", "=5%", "bandwidth=", "bandwidth=x%", "-5%", ","])
def test_parse_thresholds_rejects_bad_input_in_one_line(text):
    with pytest.raises(UsageError) as e:
        parse_thresholds(text)
    line = e.value.one_line()
    assert "--threshold" in line and "\n" not in line


def test_bad_fail_on_is_a_usage_error():
    with pytest.raises(UsageError, match="--fail-on"):
        CompareOptions(fail_on="sometimes")


# --- two runs ------------------------------------------------------------------------------------


def _run(run_id="20250101T000000Z-aaaaaa", bw=1000 * MiB, p99=0.010, iops=5000.0, **kw):
    phases = kw.pop(
        "phases",
        [
            make_phase("seq-read", "read", bandwidth=noisy(bw), latency_p99=noisy(p99)),
            make_phase("rand-read", "randread", iops=noisy(iops), latency_p99=noisy(p99 / 10)),
        ],
    )
    return make_run(run_id, phases=phases, **kw)


def test_same_run_against_itself_has_no_marks_and_exits_ok():
    run = _run()
    report = compare_runs(run, run)
    assert report.comparable
    assert {r.mark for r in report.rows} == {" "}
    assert not report.regressions and not report.improvements
    assert report.exit_status() == ExitStatus.OK
    assert any("same run" in w for w in report.warnings)
    names = [r.name for r in report.rows]
    assert names == [
        "seq-read.bandwidth",
        "seq-read.latency_p99",
        "rand-read.iops",
        "rand-read.latency_p99",
    ]


def test_regressions_and_improvements_across_runs():
    base = _run()
    cur = _run("20250102T000000Z-bbbbbb", bw=750 * MiB, p99=0.013, iops=8000.0)
    report = compare_runs(base, cur)
    marks = {r.name: r.mark for r in report.rows}
    assert marks["seq-read.bandwidth"] == "+"
    assert marks["seq-read.latency_p99"] == "+"
    assert marks["rand-read.iops"] == "-"
    assert marks["rand-read.latency_p99"] == "+"
    assert [r.name for r in report.regressions] == [
        "seq-read.bandwidth",
        "seq-read.latency_p99",
        "rand-read.latency_p99",
    ]
    assert [r.name for r in report.improvements] == ["rand-read.iops"]
    assert report.exit_status() == ExitStatus.FAILED
    assert report.summary().startswith("3 regressions: seq-read.bandwidth −25.0 %")
    assert [r.name for r in report.headlines()] == ["seq-read.bandwidth", "rand-read.iops"]
    never = compare_runs(base, cur, CompareOptions(fail_on="never"))
    assert never.exit_status() == ExitStatus.OK


def test_per_metric_override_changes_the_verdict():
    base = _run()
    cur = _run("20250102T000000Z-bbbbbb", bw=930 * MiB, p99=0.013)  # bandwidth -7 %, p99 +30 %
    default = {r.name: r.mark for r in compare_runs(base, cur).rows}
    assert default["seq-read.bandwidth"] == " "
    assert default["seq-read.latency_p99"] == "+"
    opts = parse_thresholds("bandwidth=5%,latency_p99=40%")
    custom = {r.name: r.mark for r in compare_runs(base, cur, opts).rows}
    assert custom["seq-read.bandwidth"] == "+"
    assert custom["seq-read.latency_p99"] == " "


def test_different_spec_hash_is_not_comparable():
    base = _run()
    cur = _run("20250102T000000Z-bbbbbb", spec_hash="spec-2")
    report = compare_runs(base, cur)
    assert not report.comparable
    assert "spec_hash spec-1 vs spec-2" in report.reason  # the params are the same: the hash
    assert report.exit_status() == ExitStatus.OK  # not strict, no regression
    strict = compare_runs(base, cur, CompareOptions(strict=True))
    assert strict.exit_status() == ExitStatus.NOT_COMPARABLE == 3
    worse = compare_runs(base, _run("20250102T000000Z-bbbbbb", spec_hash="spec-2", bw=500 * MiB))
    assert worse.exit_status() == ExitStatus.FAILED  # not strict: regressions still fail
    assert worse.summary().startswith("not comparable (")
    never = compare_runs(base, cur, CompareOptions(strict=True, fail_on="never"))
    assert never.exit_status() == ExitStatus.OK


def test_different_workload_name_is_not_comparable():
    report = compare_runs(_run(), _run("x", workload="rand-read", spec_hash="spec-1"))
    assert not report.comparable and "seq-read vs rand-read" in report.reason


def test_different_client_counts_are_not_comparable():
    base = _run()
    cur = _run("20250102T000000Z-bbbbbb")
    for p in cur.phases:
        p.params = {**p.params, "ranks": 8}
        p.extra = {**p.extra, "world": 8}
    report = compare_runs(base, cur)
    assert not report.comparable and "clients differ: 1 vs 8 torchrun ranks" in report.reason
    assert compare_runs(cur, cur).comparable


def test_environment_differences_warn_but_compare():
    base = _run()
    host = {**base.host, "cpus": 32, "hostname": "other"}
    target = {**base.target, "fs_type": "nfs4", "mount_source": "srv:/export"}
    cur = _run("20250102T000000Z-bbbbbb", host=host, target=target, engine="fio")
    report = compare_runs(base, cur)
    assert report.comparable
    text = "\n".join(report.warnings)
    assert "host differs: 64cpu/512GiB/Linux 6.1.0/x86_64 vs 32cpu/512GiB" in text
    assert "storage differs: lustre 10.0.0.1@o2ib:/scratch vs nfs4 srv:/export" in text
    assert "engine differs: posix vs fio" in text
    assert report.exit_status() == ExitStatus.OK
    # the hostname alone is not part of the environment
    same_class = _run("c", host={**base.host, "hostname": "node-99"})
    assert not any("host differs" in w for w in compare_runs(base, same_class).warnings)


def test_metric_on_one_side_only_is_x_and_does_not_fail():
    base = _run()
    cur = _run(
        "20250102T000000Z-bbbbbb",
        phases=[make_phase("seq-read", "read", bandwidth=noisy(1000 * MiB))],
    )
    report = compare_runs(base, cur)
    marks = {r.name: r.mark for r in report.rows}
    assert marks["rand-read.iops"] == "x"
    assert marks["seq-read.latency_p99"] == "x"
    assert marks["seq-read.bandwidth"] == " "
    assert report.exit_status() == ExitStatus.OK
    assert "3 on one side only" in report.summary()


def test_loader_and_estimate_metrics_are_compared():
    loader = {"au": 0.95, "samples_per_s": 2000.0, "bytes_per_s": 400 * MiB}
    loader["load_wait_s"] = {"mean": 0.002, "p99": 0.010}
    base = _run(loader=loader, estimate={"max_gpus": 64})
    worse_loader = {**loader, "au": 0.70, "load_wait_s": {"mean": 0.002, "p99": 0.030}}
    cur = _run("20250102T000000Z-bbbbbb", loader=worse_loader, estimate={"max_gpus": 32})
    single = {r.name: r.mark for r in compare_runs(base, cur).rows}
    assert single["loader.au"] == "?"  # one measurement a side, no history
    tight = Noise.of([1.0, 1.01, 0.99, 1.0, 1.005, 0.995], 0.001)
    keys = [("loader", m) for m in ("au", "load_wait_p99", "load_wait_mean")]
    basis = NoiseBasis(None, 6, "spec-1", "h", "f", {**dict.fromkeys(keys, tight)})
    basis.metrics[("estimate", "max_gpus")] = tight
    marks = {r.name: r.mark for r in compare_runs(base, cur, noise=basis).rows}
    assert marks["loader.au"] == "+"
    assert marks["loader.load_wait_p99"] == "+"
    assert marks["loader.load_wait_mean"] == " "
    assert marks["estimate.max_gpus"] == "+"


def test_partial_runs_and_cache_mode_changes_warn():
    base = _run()
    cur = _run(
        "20250102T000000Z-bbbbbb",
        status="partial",
        phases=[
            make_phase("seq-read", "read", bandwidth=noisy(1000 * MiB), cache="buffered"),
        ],
    )
    text = "\n".join(compare_runs(base, cur).warnings)
    assert "current run is partial" in text
    assert "phase seq-read: page cache handled differently (direct vs buffered)" in text


# --- rendering -----------------------------------------------------------------------------------


def _regressed_report():
    base = _run()
    cur = _run("20250102T000000Z-bbbbbb", bw=750 * MiB, p99=0.013, iops=8000.0)
    return compare_runs(base, cur)


def test_render_table_leads_with_one_line_per_phase_and_lists_every_regression():
    text = render_table(_regressed_report())
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("phase"))
    assert lines[header].split() == [
        "phase", "metric", "baseline", "current", "change", "threshold", "evidence"
    ]  # fmt: skip
    rows = lines[header + 1 : header + 3]
    assert lines[header + 3] == ""  # one line per phase: seq-read, rand-read
    assert lines[header].index("metric") == rows[0].index("bandwidth") == rows[1].index("iops")
    bw_line, iops_line = rows
    assert bw_line.startswith("+  seq-read")
    assert "1000.0 MiB/s (n=6, 990.0–1010.0 MiB/s, CV 1 %)" in bw_line
    assert "750.0 MiB/s (n=6, 742.5–757.5 MiB/s, CV 1 %)" in bw_line
    assert "−25.0 %" in bw_line and "U p=0.0022 (6/6); also regressed: latency_p99" in bw_line
    assert iops_line.startswith("-  rand-read") and "also regressed: latency_p99" in iops_line
    assert "every metric:" not in text
    regression_lines = [line for line in lines if line.startswith("regression: ")]
    assert len(regression_lines) == 3
    assert "10.00 ms -> 13.00 ms" in text  # latency in seconds, labelled
    assert lines[-1] == (
        "3 regressions: seq-read.bandwidth −25.0 %, seq-read.latency_p99 +30.0 %, "
        "rand-read.latency_p99 +30.0 %"
    )


def test_render_table_verbose_adds_every_metric():
    text = render_table(_regressed_report(), verbose=True)
    lines = text.splitlines()
    start = lines.index("every metric:")
    rows = lines[start + 2 : start + 6]
    metrics = ["bandwidth", "latency_p99", "iops", "latency_p99"]
    offsets = {line.index(m) for line, m in zip(rows, metrics, strict=True)}
    assert len(offsets) == 1 and lines[start + 1].index("metric") in offsets
    assert "5.0k ops/s" in text and "8.0k ops/s" in text
    assert rows[1].startswith("+  seq-read") and "13.00 ms" in rows[1]


def test_render_table_unconfirmed_says_what_would_confirm_it():
    base = _run(phases=[make_phase("seq-read", "read", bandwidth=[1000 * MiB], iops=[1000.0])])
    cur = _run("b", phases=[make_phase("seq-read", "read", bandwidth=[600 * MiB], iops=[600.0])])
    report = compare_runs(base, cur)
    assert report.exit_status() == ExitStatus.OK
    text = render_table(report)
    assert "?  seq-read  bandwidth" in text and "unconfirmed (1/1)" in text
    assert (
        "unconfirmed (2): seq-read.bandwidth −40.0 %, 1 more with --verbose: too few repeats and "
        "0 earlier runs in the history to tell them from noise; --repeat 3 on both sides, or 3 "
        "earlier runs of this spec on this host and storage, would confirm or dismiss them"
    ) in text
    assert "seq-read.bandwidth −40.0 %, seq-read.iops −40.0 %:" in render_table(
        report, verbose=True
    )
    assert text.endswith("no regressions: 2 metrics compared, 2 unconfirmed\n")


def test_render_table_not_comparable_and_warnings_shown():
    base = _run()
    cur = _run("20250102T000000Z-bbbbbb", spec_hash="spec-2", engine="fio")
    text = render_table(compare_runs(base, cur))
    assert "not comparable: workload spec differs" in text
    assert "warning: engine differs: posix vs fio" in text


def test_render_markdown_table():
    text = render_markdown(_regressed_report())
    assert "|  | phase | metric | baseline | current | change | threshold | evidence |" in text
    assert "|---|---|---|---:|---:|---:|---:|---|" in text
    assert (
        "| `+` | seq-read | bandwidth | 1000.0 MiB/s (n=6, 990.0–1010.0 MiB/s, CV 1 %) | "
        "750.0 MiB/s (n=6, 742.5–757.5 MiB/s, CV 1 %) | −25.0 % |"
    ) in text
    assert "| `-` | rand-read | iops |" in text
    assert "| `+` | seq-read | latency_p99 |" not in text
    assert "| `+` | seq-read | latency_p99 | 10.00 ms | 13.00 ms |" in render_markdown(
        _regressed_report(), verbose=True
    )
    assert text.endswith(
        "\n\n**3 regressions: seq-read.bandwidth −25.0 %, "
        "seq-read.latency_p99 +30.0 %, rand-read.latency_p99 +30.0 %**\n"
    )


def test_render_json_round_trips_numbers():
    report = _regressed_report()
    doc = json.loads(render_json(report))
    assert doc["comparable"] is True
    assert doc["exit_status"] == 1
    assert doc["regressions"] == [
        "seq-read.bandwidth",
        "seq-read.latency_p99",
        "rand-read.latency_p99",
    ]
    bw = doc["rows"][0]
    assert bw["metric"] == "bandwidth" and bw["unit"] == "B/s"
    assert bw["baseline"] == pytest.approx(1000 * MiB)
    assert bw["current"] == pytest.approx(750 * MiB)
    assert bw["change"] == pytest.approx(-0.25)
    assert bw["p_value"] == pytest.approx(2 / 924)
    assert len(bw["baseline_repeats"]) == 6
    assert bw["baseline_spread"]["n"] == 6
    assert bw["baseline_spread"]["min"] == pytest.approx(990 * MiB)
    assert bw["test"] == "mann-whitney" and bw["noise"] is None and bw["margin"] is False
    assert doc["phases"] == [
        {"phase": "seq-read", "metric": "bandwidth", "mark": "+"},
        {"phase": "rand-read", "metric": "iops", "mark": "-"},
    ]
    assert doc["unconfirmed"] == []


def test_render_json_with_zero_baseline_has_no_infinity():
    base = _run(phases=[make_phase("w", "write", bandwidth=[0.0])])
    cur = _run("b", phases=[make_phase("w", "write", bandwidth=[10.0])])
    report = compare_runs(base, cur)
    assert report.rows[0].change == math.inf and report.rows[0].mark == "-"
    assert json.loads(render_json(report))["rows"][0]["change"] is None
    assert "+inf %" in render_table(report)


def test_format_percent():
    assert format_percent(-0.231) == "−23.1 %"
    assert format_percent(0.3) == "+30.0 %"
    assert format_percent(-0.00001) == "+0.0 %"
    assert format_percent(0.1, signed=False) == "10.0 %"
    assert format_percent(None) == "-"


# --- resolving references ------------------------------------------------------------------------


@pytest.fixture()
def stored(tmp_path):
    url = str(tmp_path / "history")
    runs = [
        _run("20250101T000000Z-aaaaaa", started_at="2025-01-01T00:00:00+00:00"),
        _run("20250102T000000Z-abcdef", started_at="2025-01-02T00:00:00+00:00"),
        _run(
            "20250103T000000Z-cccccc",
            started_at="2025-01-03T00:00:00+00:00",
            workload="rand-read",
            spec_hash="spec-9",
        ),
    ]
    for run in runs:
        history.append(run, url)
    return url, runs


def test_resolve_result_file_and_directory(tmp_path, stored):
    url, runs = stored
    path = save(runs[1], tmp_path / "out")
    assert resolve(str(path), url).run_id == runs[1].run_id
    assert resolve(str(tmp_path / "out"), url).run_id == runs[1].run_id


def test_resolve_run_ids_and_latest(stored):
    url, _runs = stored
    assert resolve("20250102T000000Z-abcdef", url).run_id == "20250102T000000Z-abcdef"
    assert resolve("20250102", url).run_id == "20250102T000000Z-abcdef"
    assert resolve("latest", url).run_id == "20250103T000000Z-cccccc"
    assert resolve("latest", url, workload="seq-read").run_id == "20250102T000000Z-abcdef"
    assert resolve("latest~1", url, workload="seq-read").run_id == "20250101T000000Z-aaaaaa"
    assert resolve("latest~2", url).run_id == "20250101T000000Z-aaaaaa"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("nope", "'nope' is neither a result file nor a run in history"),
        ("2025010", "ambiguous"),
        ("latest~3", "holds 3 runs"),
        ("./missing/result.json", "no such result file"),
        ("", "empty reference"),
    ],
)
def test_resolve_bad_reference_is_one_line_usage_error(stored, ref, message):
    url, _runs = stored
    with pytest.raises(UsageError) as e:
        resolve(ref, url, what="baseline")
    assert message in e.value.one_line()
    assert "\n" not in e.value.one_line()


def test_resolve_latest_on_empty_history(tmp_path):
    with pytest.raises(UsageError, match="holds 0 runs of workload seq-read"):
        resolve("latest", str(tmp_path / "empty"), workload="seq-read")


# --- the noise floor from the history ------------------------------------------------------------


def _day(i: int) -> str:
    return f"2025-01-{i:02d}T00:00:00.000+00:00"


def _seq(run_id: str, day: int, bw: float, **kw):
    phases = [make_phase("seq-read", "read", bandwidth=[bw * MiB], latency_p99=[0.01])]
    return make_run(run_id, started_at=_day(day), phases=phases, **kw)


def test_history_noise_uses_earlier_runs_of_the_same_spec_host_class_and_storage(tmp_path):
    url = str(tmp_path / "h")
    same = [
        _seq(f"2025010{i}T000000Z-same0{i}", i, bw) for i, bw in enumerate([100, 104, 96, 101], 1)
    ]
    others = [
        _seq("20250102T000000Z-otherhost", 2, 500, host={**make_run().host, "cpus": 8}),
        _seq("20250102T000000Z-otherfs", 2, 500, target={**make_run().target, "fs_type": "nfs"}),
        _seq("20250103T000000Z-otherspec", 3, 500, spec_hash="spec-2"),
        _seq("20250103T000000Z-partial", 3, 500, status="partial"),
        _seq("20250109T000000Z-later", 9, 500),
    ]
    base, cur = _seq("20250105T000000Z-base", 5, 100), _seq("20250106T000000Z-cur", 6, 50)
    for run in [*same, *others, base, cur]:
        history.append(run, url)
    basis = history_noise(base, cur, url)
    assert basis.runs == 4 and basis.spec_hash == "spec-1"
    assert basis.host_class == "64cpu/512GiB/Linux 6.1.0/x86_64"
    noise = basis.metrics[("seq-read", "bandwidth")]
    assert noise == Noise.of([100 * MiB, 104 * MiB, 96 * MiB, 101 * MiB], 0.001)
    assert ("seq-read", "latency_p99") in basis.metrics
    report = compare_runs(base, cur, noise=basis)
    row = next(r for r in report.rows if r.metric == "bandwidth")
    assert row.test == "history" and row.mark == "+"  # −50 % against a ×1.5 floor
    assert report.exit_status() == ExitStatus.FAILED
    text = render_table(report)
    assert (
        "noise: 4 earlier runs of spec spec-1 on 64cpu/512GiB/Linux 6.1.0/x86_64, "
        "lustre 10.0.0.1@o2ib:/scratch"
    ) in text
    assert f"beyond noise ×{noise.factor:.2f} (4 runs)" in text
    # two earlier runs are not enough for a noise floor
    few = history_noise(base, _seq("20250103T000000Z-early", 3, 50), url)
    assert few.runs == 2 and few.metrics == {}
    assert "(3 needed for a noise floor)" in few.describe(3)


def test_history_noise_without_a_history_or_spec_hash(tmp_path):
    base, cur = _seq("a", 1, 100), _seq("b", 2, 50)
    assert history_noise(base, cur, str(tmp_path / "none")).runs == 0
    nohash = _seq("c", 2, 50, spec_hash=None)
    assert history_noise(base, nohash, str(tmp_path / "none")).metrics == {}


# --- what compare refuses -------------------------------------------------------------------------


def test_not_comparable_names_the_keys_that_differ():
    base, cur = _run(), _run("b")
    base.workload = {**base.workload, "generator": "sequential"}
    base.workload["params"] = {"size": 64 * MiB, "jobs": 2, "direct": True, "block_sizes": []}
    cur.workload = {**cur.workload, "generator": "sequential", "spec_hash": "spec-2"}
    cur.workload["params"] = {"size": 128 * MiB, "jobs": 2, "direct": False, "seed": 7}
    report = compare_runs(base, cur)
    assert report.reason == (
        "workload spec differs: block_sizes [] vs unset; direct true vs false; "
        "seed unset vs 7; size 64.0 MiB vs 128.0 MiB"
    )
    assert spec_differences(base.workload, {**cur.workload, "generator": "dataset"})[0] == (
        "generator sequential vs dataset"
    )


def test_a_run_that_measured_nothing_is_bad_input():
    empty = _run("20250102T000000Z-bbbbbb", phases=[], status="interrupted")
    with pytest.raises(UsageError) as e:
        compare_runs(_run(), empty)
    assert e.value.one_line().startswith(
        "current run 20250102T000000Z-bbbbbb measured nothing (interrupted, 0 phases): "
        "nothing to compare"
    )
    with pytest.raises(UsageError, match="baseline run .* measured nothing"):
        compare_runs(empty, _run(), CompareOptions(fail_on="never"))


def test_runs_with_no_metric_in_common_are_not_comparable_even_without_strict():
    other = _run("b", phases=[make_phase("ckpt", "ckpt_save", bandwidth=[5.0])])
    report = compare_runs(_run(), other)
    assert report.compared == [] and len(report.missing) == 5
    assert report.exit_status() == ExitStatus.NOT_COMPARABLE
    assert report.summary() == "nothing compared: no metric was measured in both runs"
    assert compare_runs(_run(), other, CompareOptions(fail_on="never")).exit_status() == 0


def test_a_threshold_pattern_that_matches_no_metric_is_bad_input():
    for pattern in ("nosuchmetric=5%", "seq-raed.bandwidth=5%", "*wait*=5%"):
        with pytest.raises(UsageError) as e:
            compare_runs(_run(), _run("b"), parse_thresholds(pattern))
        line = e.value.one_line()
        assert f"--threshold {pattern.split('=')[0]!r} matches no metric of these runs" in line
        assert "bandwidth, latency_p99, iops" in line
    ok = compare_runs(_run(), _run("b"), parse_thresholds("seq-read.*=5%,iops=1%,latency=5%"))
    assert ok.exit_status() == ExitStatus.OK
