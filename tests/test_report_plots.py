"""The report's plots that issue 25 found missing: latency and IOPS over time, IOPS against
block size and workers, per-worker and per-rank first done vs last done, the loader's AU per
epoch, load wait and throughput per step, the client CPU over time of CPU-bound phases; and the
run timeline with a baseline. Each appears for a result that records its data and is absent,
without error, for an older one."""

from __future__ import annotations

import copy
import gzip
import json
import re
from pathlib import Path

import pytest

from iobench.report.figures import BASELINE_SUFFIX
from iobench.report.page import render_html
from iobench.report.plots import _SECTIONS
from iobench.report.svgbars import GroupBars, Spans, Stacked
from iobench.report.svgplot import Chart
from iobench.result.file import PhaseResult, RunResult
from iobench.result.measured import phase_result
from iobench.result.stats import WorkerStats

GOLDEN = Path(__file__).parent / "golden"
NEW = ("latency-and-iops-over-time", "per-worker", "per-rank", "client-cpu-over-time",
       "load-wait-per-step", "throughput-per-step")  # fmt: skip


def golden(name: str) -> RunResult:
    return RunResult.from_dict(json.loads(gzip.decompress((GOLDEN / name).read_bytes())))


def figure_ids(page: str) -> list[str]:
    return re.findall(r'<figure id="([^"]+)"', page)


def charts(run: RunResult, baseline: RunResult | None = None) -> list[tuple[str, object, str]]:
    """(title, chart, caption) of every plot the report's sections add."""
    got = []

    def add(chart, caption="", title=None, facts=()):
        got.append((title or getattr(chart, "title", ""), chart, caption))

    for section in _SECTIONS:
        section(run, baseline, add)
    return got


def own_series(chart: object) -> int:
    """Series a plot draws for the run itself (a baseline's dashed twins not counted)."""
    if isinstance(chart, Stacked):
        return max(own_series(c) for c in chart.panels)
    if isinstance(chart, GroupBars):
        return len(chart.series)
    if isinstance(chart, Chart):
        return sum(1 for s in chart.series if not s.label.endswith(BASELINE_SUFFIX))
    return 1


def _worker(origin: float, n: int, lat_ns: int, gap_s: float = 0.004) -> WorkerStats:
    w = WorkerStats(origin=origin, start=origin + 0.01)
    t = w.start
    for i in range(n):
        t += gap_s
        w.add(4096, t, lat_ns * (20 if i % 40 == 0 else 1))
    w.end = t
    return w


def timed_run(lat_ns: int = 200_000, run_id: str = "r1") -> RunResult:
    """A run of two 1-2 s phases recorded through the workers' stats, as the engines do."""
    phases = []
    for name, op, jobs in (("rand-read", "randread", 3), ("rand-write", "randwrite", 2)):
        ws = [_worker(0.0, 300 + 80 * j, lat_ns) for j in range(jobs)]
        phases.append(phase_result(name, op, ws, concurrency=jobs, block_size=4096, cache="direct"))
    return RunResult(run_id=run_id, command="iobench run", started_at="", phases=phases)


# -- older results: the new plots absent, no error ---------------------------------------------


@pytest.mark.parametrize("name", ["qualify-quick.result.json.gz", "qualify-full.result.json.gz"])
def test_an_older_result_renders_without_the_plots_it_has_no_data_for(name):
    run = golden(name)
    page = render_html(run, baseline=golden("loader-tiny.result.json.gz"))
    ids = figure_ids(page)
    assert not [i for i in ids if any(k in i for k in NEW)], ids
    # what older results do record: the sweeps' IOPS, the loader's AU per epoch
    assert "plot-iops-vs-block-size" in ids and "plot-iops-vs-workers" in ids
    assert "plot-au-per-epoch" in ids


# -- IOPS vs block size and workers --------------------------------------------------------------


def test_iops_vs_block_size_bars_are_the_phases_iops_with_a_baseline_tick():
    run = golden("seq-write-small.result.json.gz")
    base = copy.deepcopy(run)
    for p in base.phases:
        p.iops = (p.iops or 0) * 2
    got = {t: c for t, c, _ in charts(run, base)}
    bars = got["IOPS vs block size"]
    assert isinstance(bars, GroupBars) and bars.categories == ("128k", "1M", "4M", "8M")
    write = next(s for s in bars.series if "write" in s.label)
    assert write.values[0] == pytest.approx(run.phase("seq-write-bs128k").iops)
    assert write.baseline[0] == pytest.approx(2 * run.phase("seq-write-bs128k").iops)
    assert all(write.hollow)  # every phase of this short run is indicative
    assert bars.axis.log  # 17.6/s to 4.0k/s
    jobs = got["IOPS vs workers"]
    assert isinstance(jobs, GroupBars) and jobs.categories == ("1", "2", "4")


# -- per worker and per rank -------------------------------------------------------------------


def test_per_worker_spans_mark_first_done_and_last_done():
    run = golden("seq-write-small.result.json.gz")
    got = [(t, c, cap) for t, c, cap in charts(run) if t.startswith("Per-worker: ")]
    assert 1 <= len(got) <= 6
    title, spans, caption = got[0]
    p = run.phase(title.removeprefix("Per-worker: "))
    assert isinstance(spans, Spans) and len(spans.rows) == p.concurrency
    first, last = (r.value for r in spans.rules[:2])
    assert first == pytest.approx(p.stonewall_s, abs=1e-5)
    assert last == pytest.approx(p.elapsed_s, abs=1e-5)
    assert "first done" in spans.rules[0].text and "last done" in spans.rules[1].text
    assert "MiB/s" in caption and all(r[4].endswith("MiB/s") for r in spans.rows)
    page = render_html(run)
    assert "plot-per-worker-" + p.name.replace("_", "-") in page


def test_per_rank_spans_come_from_a_many_client_phase_and_bad_values_are_left_out():
    p = PhaseResult("seq-read", "read", bytes=4 << 20, ops=4, concurrency=4, elapsed_s=2.0,
                    stonewall_s=1.2, bandwidth_bps=2e6, bandwidth_stonewall_bps=3e6)  # fmt: skip
    p.ranks = [{"rank": k, "host": f"h{k % 2}", "start": 100.0 + 0.1 * k, "end": 101.2 + 0.25 * k,
                "bytes": 1 << 20, "ops": 1} for k in range(4)]  # fmt: skip
    p.ranks.append({"rank": 9, "start": "soon", "end": None})  # hand-edited: not drawn
    p.extra["worker_times"] = {"workers": 2, "start_s": ["x", 0.1], "end_s": [1, "y"]}
    run = RunResult(run_id="r", command="", started_at="", phases=[p])
    got = {t: c for t, c, _ in charts(run)}
    spans = got["Per-rank: seq-read"]
    assert [r[0] for r in spans.rows] == [f"rank {k} (h{k % 2})" for k in range(4)]
    assert spans.rules[0].value == pytest.approx(1.2) and spans.rules[1].value == pytest.approx(
        1.95
    )
    assert "Per-worker: seq-read" not in got  # no two usable workers
    render_html(run)


def test_per_worker_draws_the_workers_that_finished_last_past_its_rows():
    ws = [_worker(0.0, 20 + j, 100_000) for j in range(40)]
    p = phase_result("many", "read", ws, concurrency=40, block_size=4096, cache="direct")
    run = RunResult(run_id="r", command="", started_at="", phases=[p])
    ((_, spans, caption),) = [x for x in charts(run) if x[0] == "Per-worker: many"]
    assert len(spans.rows) == 32 and "The 32 of 40 workers that finished last" in caption
    assert max(r[2] for r in spans.rows) == pytest.approx(p.elapsed_s, abs=1e-5)


# -- latency and IOPS over time --------------------------------------------------------------------


def test_latency_and_iops_over_time_with_the_baseline_dashed():
    run, base = timed_run(), timed_run(lat_ns=400_000, run_id="b1")
    got = {t: (c, cap) for t, c, cap in charts(run, base)}
    stacked, caption = got["Latency and IOPS over time: randread"]
    assert isinstance(stacked, Stacked) and len(stacked.panels) == 2
    lat, iops = stacked.panels
    labels = [s.label for s in lat.series]
    assert labels == ["rand-read p50", "rand-read p99", "rand-read p99 (baseline)"]
    p99 = dict(lat.series[1].points)
    # one op in forty at 4 ms: the p99 of an interval of ~70 operations is its slowest
    assert max(p99.values()) == pytest.approx(4e-3, rel=0.13)
    assert min(v for _, v in lat.series[0].points) == pytest.approx(2e-4, rel=0.13)
    assert lat.series[2].dash == "dashed" and "Dashed: baseline b1" in caption
    assert [s.label for s in iops.series] == ["rand-read", "rand-read (baseline)"]
    assert lat.x.hi == iops.x.hi  # one time axis
    page = render_html(run, base)
    assert "plot-latency-and-iops-over-time-randread" in figure_ids(page)


def test_a_phase_without_a_latency_series_draws_none():
    run = timed_run()
    del run.phases[0].extra["latency_series"]
    titles = [t for t, _, _ in charts(run)]
    assert "Latency and IOPS over time: randread" not in titles
    assert "Latency and IOPS over time: randwrite" in titles


# -- the client CPU over time ------------------------------------------------------------------


def _cpu(run: RunResult, name: str, share: float, host: float) -> None:
    p = run.phase(name)
    p.extra["client_cpu"] = {"share": share, "host_share": host, "cpus": 2}
    p.extra["cpu_series"] = {"interval_s": 0.25, "cpus": 2, "host_share": [host] * 8,
                             "self_share": [share] * 8}  # fmt: skip


def test_cpu_over_time_only_for_the_phases_flagged_cpu_bound():
    run = timed_run()
    _cpu(run, "rand-read", 0.3, 0.97)  # the host's CPUs busy: flagged
    _cpu(run, "rand-write", 0.1, 0.2)  # CPU to spare: not drawn
    ((title, chart, caption),) = [x for x in charts(run) if x[0].startswith("Client CPU")]
    assert [s.label for s in chart.series] == ["rand-read: host busy", "rand-read: iobench"]
    assert {r.value for r in chart.rules} == {0.8, 0.9}
    _cpu(run, "rand-read", 0.3, 0.2)
    assert not [x for x in charts(run) if x[0].startswith("Client CPU")]


def test_a_loader_run_draws_its_steps_epochs_and_cpu():
    run = golden("loader-tiny.result.json.gz")
    got = {t: (c, cap) for t, c, cap in charts(run, run)}
    wait, _ = got["Load wait per step"]
    assert wait.series[0].label == "rank 0"
    steps = run.loader_block.ranks[0].extra["step_series"]
    assert len(wait.series[0].points) == len(steps["t_s"]) >= 20
    assert wait.series[-1].label == "rank 0 (baseline)" and wait.series[-1].dash == "dashed"
    tput, _ = got["Throughput per step"]
    assert len(tput.series[0].points) == len(steps["t_s"])
    au, _ = got["AU per epoch"]
    assert au.categories == ("epoch 1", "epoch 2")
    assert list(au.series[0].values) == pytest.approx(run.loader["au_per_epoch"])
    assert au.rules[0].value == pytest.approx(0.9)
    assert any(t.startswith("Client CPU") for t in got)  # the loader's loop, on a busy host
    ids = figure_ids(render_html(run, run))
    for fid in ("plot-load-wait-per-step", "plot-throughput-per-step", "plot-au-per-epoch"):
        assert fid in ids


# -- every new plot: at most four series; the timeline with a baseline ---------------------------


def test_a_real_qualify_quick_result_draws_every_new_plot():
    """``qualify --quick`` on this VM at 8fcf0d6 (tests/golden/qualify-quick-series…): every
    family of the new plots is drawn from what it recorded."""
    run = golden("qualify-quick-series.result.json.gz")
    ids = figure_ids(render_html(run, golden("qualify-quick.result.json.gz")))
    for family in (
        *NEW[:1],
        "per-worker",
        "client-cpu-over-time",
        "load-wait-per-step",
        "throughput-per-step",
        "au-per-epoch",
        "iops-vs-block-size",
        "iops-vs-workers",
    ):
        assert any(i.startswith("plot-" + family) for i in ids), family
    assert "plot-latency-and-iops-over-time-randread" in ids
    assert len([i for i in ids if i.startswith("plot-per-worker-")]) == 6  # the laggiest six
    # two epochs: the line breaks between them (each epoch's first step is not timed)
    wait = {t: c for t, c, _ in charts(run)}["Load wait per step"].series[0]
    gaps = [p for p in wait.points if p[1] != p[1]]
    assert len(gaps) == 1 and len(wait.points) == 1 + len(
        run.loader["ranks"][0]["step_series"]["t_s"]
    )


@pytest.mark.parametrize("name", ["seq-write-small.result.json.gz", "loader-tiny.result.json.gz",
                                  "qualify-quick-series.result.json.gz"])  # fmt: skip
def test_every_new_plot_draws_at_most_four_series(name):
    run = golden(name)
    news = ("IOPS", "Per-", "Latency and IOPS", "Client CPU", "Load wait", "Throughput", "AU per")
    got = [(t, c) for t, c, _ in charts(run, run) if t.startswith(news)]
    assert got
    for title, chart in got:
        assert own_series(chart) <= 4, title
    assert own_series(charts(timed_run(), timed_run())[0][1]) <= 4


def test_the_timeline_draws_the_baselines_phases_dashed():
    run = golden("qualify-quick.result.json.gz")
    base = golden("qualify-full.result.json.gz")
    title, chart, caption = charts(run, base)[0]
    assert title == "Run timeline"
    shared = {p.name for p in run.phases} & {p.name for p in base.phases}
    assert len(chart.ghosts) == len(shared) > 10 and "Dashed outlines: baseline" in caption
    page = render_html(run, base)
    fig = re.search(r'<figure id="plot-run-timeline".*?</figure>', page, re.S).group(0)
    assert fig.count('stroke-dasharray="4 2" opacity="0.7"') == len(shared)
    assert not charts(run)[0][1].ghosts


def test_hand_edited_series_of_the_wrong_shape_draw_nothing_and_raise_nothing():
    run = timed_run()
    for p in run.phases:
        p.extra["latency_series"] = {"interval_s": 0.1, "ops": 5, "p50_s": "x", "p99_s": None}
        p.extra["worker_times"] = {"start_s": 3, "end_s": {"a": 1}}
        p.extra["cpu_series"] = {"interval_s": "fast", "host_share": 0.9}
        p.extra["client_cpu"] = {"share": 0.99}
    run.loader = {"au_per_epoch": "high", "ranks": [{"rank": 0, "epochs": [7],
                                                     "step_series": {"t_s": 7}}]}  # fmt: skip
    titles = [t for t, _, _ in charts(run, run)]
    assert not [t for t in titles if t.startswith(("Latency and", "Per-", "Client CPU", "Load"))]
    render_html(run, run)


def test_a_real_run_records_the_series_and_its_page_draws_them(cli, tmp_path):
    """End to end: the engines record the latency series and the workers' spans, the runner
    the CPU over time; the page draws them."""
    from iobench.result.file import load

    (tmp_path / "t").mkdir()
    res = cli("run", "sequential-write", tmp_path / "t", "--set", "time=1s", "--set", "size=8MiB",
              "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--set", "jobs=2",
              "--no-history", "--output", tmp_path / "o", "-q")  # fmt: skip
    assert res.code == 0, res.err
    run = load(tmp_path / "o")
    for p in run.phases:
        ls = p.extra["latency_series"]
        assert sum(ls["ops"]) == p.ops and len(ls["ops"]) >= 8
        assert p.extra["worker_times"]["workers"] == 2
        assert len(p.extra["cpu_series"]["host_share"]) >= 2
    ids = figure_ids(render_html(run))
    assert "plot-latency-and-iops-over-time-write" in ids
    assert "plot-per-worker-seq-write" in ids and "plot-per-worker-seq-read" in ids
