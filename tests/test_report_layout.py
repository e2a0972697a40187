"""The HTML report's layout: status and verdict first, tables that fit the page (checked in a
real browser at 1,280 px), a verdict box coloured by what it rests on."""

from __future__ import annotations

import gzip
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from iobench import report
from iobench.result.file import load

sys.path.insert(0, str(Path(__file__).parent))
from test_report import minimal_run, rich_run

QUICK = Path(__file__).parent / "golden" / "qualify-quick.result.json.gz"


def quick_run():
    """A real ``qualify --quick`` result (22 phases, a loader, an estimate, a FAIL verdict on
    indicative phases), as this VM measured it."""
    from iobench.result.file import RunResult

    return RunResult.from_dict(json.loads(gzip.decompress(QUICK.read_bytes())))


def test_summary_puts_status_second_and_splits_the_wide_table():
    run = quick_run()
    page = report.render_html(run)
    summary = re.search(r'<section id="phases">.*?</section>', page, re.S).group(0)
    heads = re.findall(r"<thead><tr>(.*?)</tr></thead>", summary)
    assert len(heads) == 2  # the summary, then volume, time and spread
    first = re.findall(r"<th[^>]*>(.*?)</th>", heads[0])
    assert first[:2] == ["Phase", "Status"] and len(first) <= 12
    assert "First done" in first and "p99.9" in first
    second = re.findall(r"<th[^>]*>(.*?)</th>", heads[1])
    assert second[:4] == ["Phase", "Moved", "Elapsed", "Worker spread"]
    assert 'class="status-indicative">indicative</td>' in summary


def test_verdict_box_is_coloured_by_what_it_rests_on():
    run = quick_run()
    page = report.render_html(run)
    assert 'class="banner fail rests-indicative"' in page
    assert "Rests on 22 phases: 19 indicative, 3 ok; a smoke test (--quick)" in page
    run.verdict = {**run.verdict, "status": "pass", "result": "pass"}
    page = report.render_html(run)
    assert 'class="banner indicative"' in page and 'class="banner pass' not in page
    steady = rich_run()
    steady.verdict = {"status": "pass", "result": "pass", "reasons": []}
    page = report.render_html(steady)
    assert 'class="banner pass"' in page and "Rests on" in page


def test_plot_titles_are_unique_and_the_quick_run_draws_no_one_dot_plot():
    page = report.render_html(quick_run())
    ids = re.findall(r'<figure id="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    titles = re.findall(r'<figure id="[^"]+"(?: class="numbers")? aria-label="([^"]+)"', page)
    assert len(titles) == len(set(titles))
    # ckpt-stat ran 8 ms, ckpt-delete two 0.1 s intervals: numbers, not plots of a dot or two
    fig = re.search(r'<figure id="plot-operations-over-time-metadata".*?</figure>', page, re.S)
    assert "<dt>ckpt-stat</dt><dd>15.4k ops/s over 8.29 ms: under half of one 0.1 s" in fig.group(0)
    assert "<dt>ckpt-delete</dt><dd>853 ops/s over 149.99 ms: 2 intervals of 0.1 s" in fig.group(0)
    assert ">ckpt-stat</text>" not in fig.group(0) and ">ckpt-create</text>" in fig.group(0)
    # metadata rates 213/s to 15.4k/s: a log axis
    bars = re.search(r'<figure id="plot-metadata-operation-rates".*?</figure>', page, re.S)
    assert "(log scale)" in bars.group(0)


# -- a real browser ----------------------------------------------------------------------------

MEASURE = """<script>
(function () {
  var main = document.querySelector("main");
  var inner = main.getBoundingClientRect().right - parseFloat(getComputedStyle(main).paddingRight);
  var out = {width: window.innerWidth, tables: [], status: null};
  document.querySelectorAll("table").forEach(function (t) {
    var box = t.parentElement;
    out.tables.push({section: (t.closest("section") || {}).id || "", scroll: box.scrollWidth,
                     client: box.clientWidth, right: t.getBoundingClientRect().right,
                     inner: inner});
  });
  document.querySelectorAll("#phases th").forEach(function (th) {
    if (th.textContent.trim() === "Status" && out.status === null) {
      var r = th.getBoundingClientRect();
      out.status = {left: r.left, right: r.right};
    }
  });
  document.title = "MEASURED" + JSON.stringify(out);
})();
</script>"""


@pytest.fixture
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (as root: apt-get install -y chromium)")
    return exe


def chromium_args(exe: str, tmp: Path, *args: str) -> list[str]:
    return [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--no-first-run", f"--user-data-dir={tmp / 'profile'}", *args]  # fmt: skip


def measure(exe: str, page: str, tmp: Path, width: int = 1280) -> dict:
    """The page's tables and its Status header as Chromium lays them out at ``width``."""
    path = tmp / "measured.html"
    path.write_text(page.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    cmd = chromium_args(exe, tmp, f"--window-size={width},1000", "--dump-dom",
                        path.resolve().as_uri())  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)
    m = re.search(r"<title>MEASURED(.*?)</title>", proc.stdout, re.S)
    assert m, f"no measurement (rc {proc.returncode}): {proc.stderr[-2000:]}"
    return json.loads(html.unescape(m.group(1)))


def assert_fits(got: dict, width: int = 1280) -> None:
    assert got["width"] == width
    assert got["tables"], "no table measured"
    for t in got["tables"]:
        assert t["scroll"] <= t["client"], t  # nothing behind a horizontal scroll
        assert t["right"] <= t["inner"] + 0.5, t  # inside the page's column
    status = got["status"]
    assert status is not None and 0 <= status["left"] < status["right"] <= width


def sequential_write_page(cli, tmp_path: Path) -> str:
    (tmp_path / "t").mkdir()
    res = cli("run", "sequential-write", tmp_path / "t", "--set", "time=none",
              "--set", "size=2MiB", "--no-history", "--output", tmp_path / "o", "-q")  # fmt: skip
    assert res.code == 0, res.err
    return report.render_html(load(tmp_path / "o"))


@pytest.mark.slow
def test_chromium_quick_report_fits_1280_with_status_visible(tmp_path, chromium):
    assert_fits(measure(chromium, report.render_html(quick_run()), tmp_path))


@pytest.mark.slow
def test_chromium_sequential_write_report_fits_1280(tmp_path, chromium, cli):
    assert_fits(measure(chromium, sequential_write_page(cli, tmp_path), tmp_path))


@pytest.mark.slow
def test_chromium_measurement_catches_a_table_too_wide(tmp_path, chromium):
    """The check can fail: a run whose phase name cannot wrap in a page forced narrow."""
    run = minimal_run()
    page = report.render_html(run).replace(
        "<style>", "<style>table.grid td { white-space: nowrap !important; } "
    )
    page = page.replace(run.phases[0].name, "x" * 400)
    got = measure(chromium, page, tmp_path)
    assert any(t["scroll"] > t["client"] or t["right"] > t["inner"] for t in got["tables"])


# -- the plots drawn from what a result already records ----------------------------------------


def test_latency_bins_rebin_the_stored_buckets_into_shares():
    run = rich_run()
    p = run.phase("seq-read-bs1m")
    bins = report.latency_bins(p.histogram)
    assert sum(s for _, _, s in bins) == pytest.approx(1.0)
    assert all(hi == pytest.approx(lo * 10**0.1) for lo, hi, _ in bins)  # 10 bins a decade
    assert all(b[1] == pytest.approx(n[0]) for b, n in zip(bins, bins[1:], strict=False))
    median = p.latency_s["p50"]
    peak = max(bins, key=lambda b: b[2])
    assert peak[0] / 2 < median < peak[1] * 2
    assert report.latency_bins({}) == [] and report.latency_bins({"buckets": "x"}) == []


def test_timeline_puts_every_phase_on_one_axis_with_first_and_last_done():
    run = quick_run()
    rows = report.timeline_rows(run.phases)
    assert len(rows) == len(run.phases)
    assert rows[0][1] == 0.0 and all(s <= f <= e for _, s, f, e in rows)
    starts = [s for _, s, _, _ in rows]
    assert starts == sorted(starts)  # in the order they ran
    page = report.render_html(run)
    fig = re.search(r'<figure id="plot-run-timeline".*?</figure>', page, re.S).group(0)
    assert fig.count("<rect") >= len(rows) and ">loader-dataset-shuffled-r8</text>" in fig
    # a phase without epochs (an older result) is left out, not drawn at 0
    del run.phases[3].extra["start_epoch"]
    assert len(report.timeline_rows(run.phases)) == len(run.phases) - 1


def test_latency_histogram_plot_per_op_with_the_baseline_dashed():
    run, base = rich_run(), rich_run()
    base.run_id = "base-run"
    page = report.render_html(run, baseline=base)
    fig = re.search(r'<figure id="plot-latency-histogram-read".*?</figure>', page, re.S).group(0)
    assert "seq-read-bs1m (baseline)" in fig and 'stroke-dasharray="6 4"' in fig
    assert "from the stored histogram buckets" in fig
