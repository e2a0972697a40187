"""history trend (issue 25): one series per spec, labelled by the keys that set it apart, each
run judged against the run before it by compare's rule, the noise band, confirmed regressions
marked in the table, the JSON and the plot."""

from __future__ import annotations

import json
import re

import pytest
from factories import MiB, make_phase, make_run

from iobench import history
from iobench.compare.trend import trend_report
from iobench.compare.trend_render import render_trend_json, render_trend_svg, render_trend_table


def _run(i: int, bw: float, params: dict, spec: str, workload: str = "sequential-write", **kw):
    run = make_run(
        f"202501{i:02d}T000000Z-r{i:02d}",
        started_at=f"2025-01-{i:02d}T00:00:00.000+00:00",
        workload=workload,
        spec_hash=spec,
        phases=[make_phase("seq-write", "write", bandwidth=[bw * MiB])],
        **kw,
    )
    run.workload["params"] = dict(params)
    return run


SMALL = {"size": 4 * MiB, "jobs": 1, "block_size": MiB}
BIG = {"size": 64 * MiB, "jobs": 2, "block_size": MiB}


@pytest.fixture
def url(tmp_path):
    """Two specs of one workload, the same phase.metric, interleaved in time: the small one
    steady then halved on its last run, the big one steady at 3x."""
    url = str(tmp_path / "h")
    small = [100, 102, 98, 101, 99, 50]
    for i, bw in enumerate(small, 1):
        history.append(_run(2 * i - 1, bw, SMALL, "spec-small"), url)
    for i, bw in enumerate([300, 306, 297, 303], 1):
        history.append(_run(2 * i, bw, BIG, "spec-big"), url)
    return url


def test_two_specs_are_two_series_labelled_by_the_keys_that_differ(url):
    points = history.trend("seq-write.bandwidth", url)
    series = history.trend_series(points)
    assert [(s.spec_hash, s.label, len(s.points)) for s in series] == [
        ("spec-small", "jobs=1 size=4MiB", 6),
        ("spec-big", "jobs=2 size=64MiB", 4),
    ]
    for s in series:  # never joined: every point of a series is of its spec
        assert {p.spec_hash for p in s.points} == {s.spec_hash}


def test_series_of_other_workloads_lead_with_the_workload_name(tmp_path):
    url = str(tmp_path / "h")
    history.append(_run(1, 100, SMALL, "a"), url)
    history.append(_run(2, 100, {**SMALL, "jobs": 4}, "b"), url)
    history.append(_run(3, 90, {"size": MiB, "files": 8}, "c", workload="random-read"), url)
    labels = [s.label for s in history.trend_series(history.trend("seq-write.bandwidth", url))]
    assert labels == ["sequential-write jobs=1", "sequential-write jobs=4", "random-read"]


def test_a_halving_is_a_confirmed_regression_of_its_own_series_only(url):
    report = trend_report("seq-write.bandwidth", url)
    small, big = report.series
    assert [r.point.run_id for _s, r in report.regressions] == ["20250111T000000Z-r11"]
    last = small.runs[-1]
    assert last.baseline == "20250109T000000Z-r09" and last.row.test == "history"
    assert last.row.delta == pytest.approx(50 / 99 - 1)
    assert not big.regressions and big.runs[0].row is None  # the first of its spec: no judgement
    # the band: the runs' geometric mean times and over one spread, the halved run left out
    lo, hi = small.band
    assert small.noise.runs == 5 and 97 * MiB < lo < 99 * MiB and 101 * MiB < hi < 103 * MiB
    assert big.noise.runs == 4 and big.band[0] < 301.5 * MiB < big.band[1] < 306 * MiB


def test_the_table_json_and_plot_carry_the_series_band_and_regression(url):
    report = trend_report("seq-write.bandwidth", url)
    text = render_trend_table(report)
    assert "seq-write.bandwidth: 2 series, one per spec" in text
    assert "jobs=1 size=4MiB (spec spec-small, 6 runs, noise band " in text
    assert "jobs=2 size=64MiB (spec spec-big, 4 runs, noise band " in text
    assert re.search(r"\n  20250111T000000Z-r11 +50.0 MiB/s  n=1 +−49.5 % regression\n", text)
    assert "confirmed regressions (1):" in text
    data = json.loads(render_trend_json(report))
    assert [s["label"] for s in data["series"]] == ["jobs=1 size=4MiB", "jobs=2 size=64MiB"]
    assert data["confirmed_regressions"] == ["20250111T000000Z-r11"]
    assert data["series"][0]["noise"]["runs"] == 5
    last = data["series"][0]["runs"][-1]
    assert last["confirmed_regression"] and last["mark"] == "+" and last["test"] == "history"
    pytest.importorskip("matplotlib")
    svg = render_trend_svg(report)
    for label in ("jobs=1 size=4MiB", "jobs=2 size=64MiB", "confirmed regression"):
        assert label in svg


def test_runs_on_another_host_class_are_not_judged_against_each_other(tmp_path):
    url = str(tmp_path / "h")
    for i, bw in enumerate([100, 101, 99, 100], 1):
        history.append(_run(i, bw, SMALL, "s"), url)
    other = {**make_run().host, "cpus": 8}
    history.append(_run(5, 40, SMALL, "s", host=other), url)
    (series,) = trend_report("seq-write.bandwidth", url).series
    assert series.runs[-1].row is None and not series.regressions


def test_history_trend_command(cli, url, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("history", "trend", "seq-write.bandwidth", "--history", url)
    assert r.code == 0, r.err
    assert "jobs=1 size=4MiB (spec spec-small" in r.out and "jobs=2 size=64MiB" in r.out
    assert "−49.5 % regression" in r.out
    r = cli("history", "trend", "seq-write.bandwidth", "--history", url, "--json")
    assert r.code == 0 and len(json.loads(r.out)["series"]) == 2
    r = cli("history", "trend", "seq-write.bandwidth", "--history", str(tmp_path / "none"))
    assert r.code == 0 and "no values of seq-write.bandwidth" in r.out
