"""Everyday use of the report (issue 17): the terminal's width and colour, the partial last
interval, latency tails, the client's CPU, the cache table folded, and --baseline overlays."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from iobench import report
from iobench.core import cpu
from iobench.core.redact import for_terminal_styled
from iobench.report.svgplot import render
from iobench.result.file import PhaseResult, RunResult, save

sys.path.insert(0, str(Path(__file__).parent))
from test_report import minimal_run, rich_run

MiB = 1 << 20


# -- width and colour --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("isatty", "env", "cols", "expected"),
    [
        (False, {}, None, (120, False)),  # a pipe or file: the fixed width, plain
        (False, {"COLUMNS": "60"}, None, (60, False)),  # COLUMNS is honoured everywhere
        (True, {}, 87, (87, True)),  # a terminal: its own width, colour
        (True, {"COLUMNS": "200"}, 87, (200, True)),
        (True, {"NO_COLOR": "1"}, 87, (87, False)),
        (True, {"TERM": "dumb"}, 87, (87, False)),
        (True, {"COLUMNS": "12"}, 87, (report.MIN_TERMINAL_WIDTH, True)),
        (True, {"COLUMNS": "x"}, 87, (87, True)),  # not a number: the terminal's width
    ],
)
def test_terminal_format(isatty, env, cols, expected):
    assert report.terminal_format(isatty, env, cols) == expected


@pytest.mark.parametrize("width", [40, 60, 90, 120, 200])
def test_every_line_fits_the_width_and_every_figure_is_still_there(width):
    text = report.render_terminal(rich_run(), width=width)
    assert max(len(line) for line in text.splitlines()) <= width
    assert "\x1b" not in text
    flat = " ".join(text.split())
    for figure in ("900.0 MiB/s", "5200.0 MiB/s", "98.8k ops/s", "Verdict: FAIL"):
        assert figure in flat, (width, figure)


def test_narrow_terminal_gives_one_block_per_phase():
    text = report.render_terminal(rich_run(), width=60)
    lines = text.splitlines()
    i = lines.index("  seq-write-bs128k")
    assert lines[i + 1].startswith("    Op write, Jobs 4, Block 128 KiB, Bandwidth 900.0 MiB/s")


def test_colour_marks_status_and_verdict_and_plain_has_none():
    run = rich_run()
    plain = report.render_terminal(run)
    coloured = report.render_terminal(run, colour=True)
    assert "\x1b" not in plain
    assert "\x1b[1;31mFAIL\x1b[0m" in coloured  # the verdict
    assert "\x1b[1;31mPARTIAL\x1b[0m" in coloured and "\x1b[32mok\x1b[0m" in coloured
    # the same text once the colour codes are taken out
    assert re.sub("\x1b\\[[0-9;]*m", "", coloured) == plain


def test_colour_keeps_only_its_own_codes():
    """A name holding escape sequences is shown escaped; only rich's SGR codes stay raw."""
    run = minimal_run()
    run.phases[0].name = "evil\x1b]0;owned\x07\x1b[2J"
    shown = for_terminal_styled(report.render_terminal(run, colour=True))
    assert "\x1b]" not in shown and "\x07" not in shown and "\x1b[2J" not in shown
    assert "evil\\x1b]0;owned\\x07\\x1b[2J" in shown
    assert "\x1b[1m" in shown  # bold titles survive


def test_cli_report_into_a_pipe_is_plain_and_honours_columns(cli, tmp_path, monkeypatch):
    save(rich_run(), tmp_path / "r")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("COLUMNS", "60")
    res = cli("report", tmp_path / "r")
    assert res.code == 0, res.err
    assert max(len(line) for line in res.out.splitlines()) <= 60
    assert "\x1b" not in res.out
    monkeypatch.delenv("COLUMNS")
    res = cli("report", tmp_path / "r")
    assert 60 < max(len(line) for line in res.out.splitlines()) <= 120  # the documented width


# -- rates over time ---------------------------------------------------------------------------


def test_partial_last_interval_is_normalised_by_its_time():
    # 0.38 s: the last 0.1 s interval covered 0.08 s; its 40 "per 0.1 s" were 50 per second
    pts = report.time_points([100.0, 100.0, 100.0, 40.0], 0.1, 0.38)
    assert pts[:3] == [(0.1, 100.0), (0.2, 100.0), (pytest.approx(0.3), 100.0)]
    assert pts[3][0] == pytest.approx(0.38) and pts[3][1] == pytest.approx(50.0)


def test_partial_last_interval_under_half_is_left_out():
    assert len(report.time_points([100.0, 100.0, 100.0, 4.0], 0.1, 0.34)) == 3
    # whole intervals, or no elapsed time to judge by: drawn as stored
    assert report.time_points([1.0, 2.0], 1.0, 2.0) == [(1.0, 1.0), (2.0, 2.0)]
    assert report.time_points([1.0, 2.0], 1.0, None) == [(1.0, 1.0), (2.0, 2.0)]


def test_first_and_last_intervals_are_taken_over_the_time_the_phase_covered():
    # the grid started 0.05 s before the phase, which ran 0.33 s: 0.05 s of the first
    # interval, 0.08 s of the last
    pts = report.time_points([50.0, 100.0, 100.0, 60.0], 0.1, 0.33, start_s=0.05)
    assert [round(t, 6) for t, _ in pts] == [0.05, 0.15, 0.25, 0.33]
    assert [round(v, 6) for _, v in pts] == [100.0, 100.0, 100.0, 75.0]
    # 0.02 s of the first interval: too short to be a rate
    assert len(report.time_points([10.0, 100.0, 100.0], 0.1, 0.22, start_s=0.08)) == 2
    # an older result whose grid offset is unknown (0.08 s over two intervals): as stored
    assert report.time_points([170.0, 1110.0], 0.1, 0.08) == [(0.1, 170.0), (0.2, 1110.0)]


def test_a_measured_phase_records_where_its_series_starts():
    from iobench.result.measured import phase_result
    from iobench.result.stats import WorkerStats

    w = WorkerStats()
    w.origin = 0.0
    w.start, w.end = 0.25, 0.63
    for t in (0.3, 0.4, 0.5, 0.6):
        w.add(1 << 20, t, 1000)
    p = phase_result("x", "read", [w], concurrency=1, block_size=1 << 20, cache="direct")
    assert p.extra["series_start_s"] == pytest.approx(0.05)
    assert p.elapsed_s == pytest.approx(0.38)


def test_a_phase_too_short_to_plot_is_shown_as_its_figures():
    """A phase of one or two intervals draws no one-dot plot: its rate is shown as a number
    (beside the plot of the longer phases of its op, or alone when none is longer)."""
    run = minimal_run()
    run.phases[0].series = [5e8]  # one interval
    run.phases[0].series_interval_s = 0.1
    run.phases[0].elapsed_s = 0.1
    page = report.render_html(run)
    fig = re.search(r'<figure id="plot-bandwidth-over-time-write".*?</figure>', page, re.S)
    assert fig and "<svg" not in fig.group(0)
    assert "seq-write" in fig.group(0) and "1 interval of 0.1 s, too short to draw" in fig.group(0)
    long = PhaseResult(name="long", op="write", bandwidth_bps=1e8, series=[1e8] * 5,
                       series_interval_s=0.1)  # fmt: skip
    run.phases.append(long)
    page = report.render_html(run)
    fig = re.search(r'<figure id="plot-bandwidth-over-time-write".*?</figure>', page, re.S)
    assert "<svg" in fig.group(0) and "too short to draw" in fig.group(0)
    assert "<title id=" in fig.group(0) and ">seq-write</text>" not in fig.group(0)  # no dot


def test_charts_keep_to_four_series_with_distinct_titles_and_colours():
    run = rich_run()
    plots = report._build_plots(run)
    titles = [p.title for p in plots]
    assert len(titles) == len(set(titles))
    from iobench.report.figures import _cdf_plot

    curves = [(f"p{i}", report._cdf(run.phases[0].histogram)) for i in range(4)]
    chart = _cdf_plot(curves)
    assert len({s.colour for s in chart.series}) == 4


def test_rates_apart_by_more_than_ten_times_get_a_log_axis():
    from iobench.report.figures import _metadata_plot, _time_plot

    assert _metadata_plot([("create", 196.0), ("stat", 16_900.0)]).axis.log
    assert not _metadata_plot([("create", 196.0), ("stat", 900.0)]).axis.log
    chart = _time_plot([("a", [(0.1, 1e6)] * 3), ("b", [(0.1, 1e8)] * 3)], ops=False)
    assert chart.y.log
    assert not _time_plot([("a", [(0.1, 1e6)] * 3)], ops=False).y.log


def test_indicative_sweep_points_are_hollow():
    run = rich_run()
    run.phases[0].steady = False  # seq-write-bs128k: not steady, so indicative
    flags = report.sweep_indicative(run.phases, "block_size")
    assert flags["seq-bs (write)"] == [True, False, False]
    page = report.render_html(run)
    fig = re.search(r'<figure id="plot-bandwidth-vs-block-size".*?</figure>', page, re.S)
    assert fig.group(0).count('fill="#fff" stroke="#0969da"') == 1
    assert "hollow points: indicative" in fig.group(0)


# -- latency tails -----------------------------------------------------------------------------


def test_tail_plot_marks_the_percentiles_on_a_log_axis():
    run = rich_run()
    p = run.phase("seq-read-bs1m")
    chart = report._tail_plot([(p.name, report._cdf(p.histogram))])
    assert chart.y.log and chart.x.log
    assert {r.text for r in chart.rules} >= {"p50", "p99", "p99.9"}
    svg = render(chart, "t")
    assert ">p99.9</text>" in svg and ">seq-read-bs1m</text>" in svg


def test_latency_against_concurrency_uses_the_table_figures():
    series = report.latency_series(rich_run().phases)
    assert "write, 1 MiB" in series
    xs = [x for x, _ in series["write, 1 MiB"]]
    assert xs == [1.0, 2.0, 4.0, 8.0]
    run = rich_run()
    j8 = run.phase("seq-write-j8")
    assert series["write, 1 MiB"][-1][1]["p99"] == report._value(j8, "latency_s.p99")


# -- the client's CPU --------------------------------------------------------------------------


def test_cpu_usage_between_two_samples():
    a = cpu.CpuSample(wall_s=10.0, self_s=1.0, children_s=0.5)
    b = cpu.CpuSample(wall_s=12.0, self_s=3.0, children_s=1.1)
    u = cpu.usage(a, b, cpus=2)
    assert u == {"cpu_s": 2.6, "self_s": 2.0, "children_s": 0.6, "wall_s": 2.0, "cpus": 2,
                 "share": 0.65, "host_share": None}  # fmt: skip
    assert not cpu.saturated(u)
    assert cpu.saturated(cpu.usage(a, cpu.CpuSample(11.0, 2.0, 1.5), cpus=2))  # 2 s on 2 x 1 s
    assert cpu.usage(a, a, cpus=4)["share"] is None  # no wall time


def test_report_shows_client_cpu_and_names_a_saturated_phase():
    run = minimal_run()
    run.phases.append(PhaseResult(name="seq-read", op="read", bandwidth_bps=50 * MiB))
    run.phases[0].extra["client_cpu"] = {"share": 0.93, "cpus": 2, "cpu_s": 1.9, "wall_s": 1.0}
    run.phases[1].extra["client_cpu"] = {"share": 0.2, "cpus": 2, "cpu_s": 0.4, "wall_s": 1.0}
    table = report._phase_table(run)
    col = table.headers.index("CPU")
    assert [r[col] for r in table.rows] == ["93% !", "20%"]
    assert "seq-write: the client used 80% or more" in table.note
    assert "seq-read:" not in table.note
    for text in (report.render_terminal(run), report.render_markdown(run), report.render_html(run)):
        assert "93% !" in text and "the client, not the storage" in " ".join(text.split())
    assert re.search("\x1b\\[1;31m *93% !\x1b", report.render_terminal(run, colour=True))


def test_older_results_without_cpu_show_no_column():
    assert "CPU" not in report._phase_table(minimal_run()).headers


def test_a_run_records_its_client_cpu(cli, tmp_path):
    (tmp_path / "t").mkdir()
    res = cli("run", "sequential-write", tmp_path / "t", "--set", "time=none",
              "--set", "size=2MiB", "--set",
              "block_sizes=1MiB", "--set", "jobs_sweep=1", "--set", "read_back=false",
              "--no-history", "--output", tmp_path / "o", "-q")  # fmt: skip
    assert res.code == 0, res.err
    from iobench.result.file import load

    for p in load(tmp_path / "o").phases:
        c = p.extra["client_cpu"]
        assert c["cpus"] >= 1 and c["wall_s"] > 0 and 0 <= c["share"] <= 1
        assert c["cpu_s"] == pytest.approx(c["self_s"] + c["children_s"], abs=0.002)
    assert "Client CPU" in res.out


# -- cache table, baseline ---------------------------------------------------------------------


def test_cache_table_is_one_row_per_mode():
    t = report._cache_table(rich_run())
    modes = [r[0] for r in t.rows]
    assert len(modes) == len(set(modes)) == len(t.rows) < 6
    assert t.headers == ["Cache", "What it means", "Phases"]
    run = minimal_run()
    run.phases.append(PhaseResult(name="b", op="read"))
    assert report._cache_table(run).rows == [
        ["buffered", report._CACHE_MEANING["buffered"], "all 2"]
    ]


def _pair() -> tuple[RunResult, RunResult]:
    run, base = rich_run(), rich_run()
    base.run_id = "base-run"
    base.phases = [p for p in base.phases if p.name != "seq-write-j8"]
    for p in base.phases:
        p.bandwidth_bps *= 0.5
        p.iops *= 0.5
    base.phases.append(PhaseResult(name="old-phase", op="read", bandwidth_bps=1.0))
    return run, base


def test_baseline_table_gives_deltas_and_names_what_differs():
    run, base = _pair()
    t = report._baseline_table(run, base)
    row = next(r for r in t.rows if r[0] == "seq-read-bs4m")
    assert row[1:4] == ["5200.0 MiB/s", "2600.0 MiB/s", "+100.0%"]
    assert row[6] == "+0.0%"  # same histogram, same p99
    assert "seq-write-j8" not in [r[0] for r in t.rows]
    assert "Not in the baseline: seq-write-j8." in t.note
    assert "Only in the baseline: old-phase." in t.note
    coloured = report.render_terminal(run, baseline=base, colour=True)
    assert "\x1b[32m+100.0%" in coloured  # more bandwidth: better
    t2 = report._baseline_table(base, run)
    assert any(r[3] == "-50.0%" for r in t2.rows)
    assert "\x1b[31m-50.0%" in report.render_terminal(base, baseline=run, colour=True)


def test_baseline_overlays_every_plot_kind():
    run, base = _pair()
    page = report.render_html(run, baseline=base)
    assert 'id="baseline"' in page and "Against baseline base-run" in page
    assert page.count("Dashed: baseline base-run") >= 4  # CDF, tail (x2 ops), time plots
    assert "dashed: baseline base-run" in page  # the sweep plots
    assert "Crosses: baseline base-run&#x27;s p99." in page  # latency vs workers
    assert 'class="r better"' in page


def test_cli_report_baseline_by_path_and_latest(cli, tmp_path):
    run, base = _pair()
    save(run, tmp_path / "cur")
    save(base, tmp_path / "base")
    res = cli("report", tmp_path / "cur", "--baseline", tmp_path / "base", "--markdown")
    assert res.code == 0, res.err
    assert "## Against baseline base-run" in res.out and "+100.0%" in res.out
    res = cli("report", tmp_path / "cur", "--baseline", "latest")
    assert res.code == 2 and "history" in res.err  # an empty history: one clear line


def test_loader_table_shows_the_loop_client_cpu():
    run = minimal_run()
    run.loader = {"gpus": 2, "au": 0.7, "client_cpu": {"share": 0.97, "cpus": 2}}
    rows = dict(report._loader_table(run).rows)
    assert rows["Client CPU"] == (
        "97% of 2 CPUs over the loop: the client, not the storage, may have been the limit"
    )
    run.loader["client_cpu"] = {"share": 0.31, "cpus": 16}
    assert dict(report._loader_table(run).rows)["Client CPU"] == "31% of 16 CPUs over the loop"
    del run.loader["client_cpu"]  # older results
    assert "Client CPU" not in dict(report._loader_table(run).rows)


def test_compare_table_colours_regressions_and_improvements_only():
    text = (
        "   phase  metric\n"
        "+  slow\x1b[2J  bandwidth  -20.0 %\n"
        "-  fast  bandwidth  +20.0 %\n"
        "?  maybe  bandwidth  +11.0 %\n"
        "regression: slow.bandwidth 100 -> 80\n"
    )
    shown = for_terminal_styled(report.colour_compare(text))
    lines = shown.split("\n")
    assert lines[0] == "   phase  metric" and lines[3] == "?  maybe  bandwidth  +11.0 %"
    assert lines[1] == "\x1b[31m+  slow\\x1b[2J  bandwidth  -20.0 %\x1b[0m"  # escaped name
    assert lines[2].startswith("\x1b[32m-  fast") and lines[4].startswith("\x1b[1;31mregression:")
    assert re.sub("\x1b\\[[0-9;]*m", "", shown) == text.replace("\x1b", "\\x1b")


def test_cli_report_baseline_latest_is_the_run_before(cli, tmp_path):
    (tmp_path / "t").mkdir()
    args = ("--set", "size=2MiB", "--set", "block_sizes=1MiB", "--set", "jobs_sweep=1",
            "--set", "time=none", "-q")  # fmt: skip
    ids = []
    for name in ("a", "b"):
        res = cli("run", "sequential-write", tmp_path / "t", *args, "--output", tmp_path / name)
        assert res.code == 0, res.err
        from iobench.result.file import load

        ids.append(load(tmp_path / name).run_id)
    for ref in ("latest", "latest~1", ids[0]):  # "latest" is run b itself: the one before
        res = cli("report", tmp_path / "b", "--baseline", ref, "--markdown")
        assert res.code == 0, res.err
        assert f"## Against baseline {ids[0]}" in res.out, ref
    res = cli("report", tmp_path / "b", "--baseline", "latest~5")
    assert res.code == 2 and "holds 2 runs" in res.err
