"""Reports: terminal and markdown text, the self-contained HTML page, and a real browser render."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iobench import report
from iobench.core.units import format_count, format_rate, format_seconds
from iobench.result.file import PhaseResult, RunResult, load, save
from iobench.result.stats import Histogram

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

REASONS = [
    "estimated AU at 16 GPUs is 52.0%, below the 90.0% threshold",
    "randread-4k stopped early: phase partial",
]
RUN_WARNINGS = ["dataset (2 GiB) fits in page cache (24 GiB RAM): read figures may be cache"]
PHASE_WARNING = "O_DIRECT refused on this mount; fell back to buffered I/O with cache drop"


def _hist(rng: np.random.Generator, median_s: float, n: int = 4000) -> dict:
    h = Histogram()
    h.record_array((rng.lognormal(np.log(median_s), 0.35, n) * 1e9).astype(np.int64))
    return h.to_dict()


def _phase(rng: np.random.Generator, name: str, op: str, **kw) -> PhaseResult:
    bw = kw.pop("bandwidth_bps", 0.0)
    block = kw.pop("block_size", 1 * MiB)
    median = kw.pop("median_s", block / bw if bw else 50e-6)
    hist = _hist(rng, median)
    lat = Histogram.from_dict(hist).summary_s()
    series = [bw * f for f in rng.uniform(0.85, 1.1, 12)] if bw else []
    p = PhaseResult(
        name=name,
        op=op,
        block_size=block,
        bandwidth_bps=bw,
        bandwidth_stonewall_bps=bw * 0.97,
        bytes=int(bw * 12),
        elapsed_s=12.0,
        stonewall_s=11.6,
        histogram=hist,
        latency_s=lat,
        series=series,
        series_interval_s=1.0,
        per_worker={"min": bw / 5, "median": bw / 4, "max": bw / 3.5} if bw else {},
        **kw,
    )
    p.iops = kw.get("iops", p.iops) or (bw / block if bw else 0.0)
    return p


def rich_run() -> RunResult:
    """A qualification-style run: sweeps, metadata, loader, estimate, failed verdict, warnings."""
    rng = np.random.default_rng(7)
    phases = []
    for bs, w, r in ((128 * KiB, 900, 1400), (1 * MiB, 2100, 3300), (4 * MiB, 2600, 5200)):
        tag = report._block_short(bs).lower()
        for op, bw in (("write", w), ("read", r)):
            phases.append(
                _phase(
                    rng,
                    f"seq-{op}-bs{tag}",
                    op,
                    block_size=bs,
                    bandwidth_bps=bw * MiB,
                    concurrency=4,
                    cache="direct",
                    params={"sweep": "seq-bs"},
                )
            )
    for jobs, bw in ((1, 700), (2, 1300), (4, 2100), (8, 2400)):
        phases.append(
            _phase(
                rng,
                f"seq-write-j{jobs}",
                "write",
                bandwidth_bps=bw * MiB,
                concurrency=jobs,
                cache="direct",
                params={"sweep": "seq-jobs"},
            )
        )
    rand = _phase(
        rng,
        "randread-4k",
        "randread",
        block_size=4 * KiB,
        bandwidth_bps=180 * MiB,
        concurrency=16,
        cache="dropped",
        status="partial",
    )
    rand.warnings.append(PHASE_WARNING)
    phases.append(rand)
    for op, rate in (
        ("create", 12_345.0),
        ("stat", 98_765.0),
        ("open_read", 23_456.0),
        ("delete", 15_000.0),
    ):
        p = _phase(
            rng, f"meta-{op}", op, block_size=0, iops=rate, concurrency=8, median_s=1 / rate * 8
        )
        p.ops = int(rate * 12)
        p.ops_series = [rate * f for f in rng.uniform(0.9, 1.1, 10)]
        p.cache = "buffered"
        phases.append(p)
    ckpt = _phase(rng, "ckpt-save", "ckpt_save", bandwidth_bps=1500 * MiB, block_size=64 * MiB)
    ckpt.extra = {"metadata_rates": {"fsync": 812.5}}
    phases.append(ckpt)
    return RunResult(
        run_id="20250101T120000Z-abc123",
        command="iobench qualify /mnt/lustre/scratch --profile unet3d-h100 --gpus 8",
        started_at="2025-01-01T12:00:00.000+00:00",
        finished_at="2025-01-01T12:09:30.000+00:00",
        host={
            "hostname": "gpu-node-017",
            "cpus": 96,
            "mem_bytes": 1024 * GiB,
            "os": "Linux 5.15.0",
            "python": "3.11.9",
            "torch": "2.4.0",
            "fio": "fio-3.33",
        },
        target={
            "path_or_url": "/mnt/lustre/scratch",
            "fs_type": "lustre",
            "mount_point": "/mnt/lustre",
            "mount_source": "10.0.0.1@o2ib:/scratch",
            "free_bytes": 512 * GiB * 1024,
            "direct_io": True,
        },
        workload={"name": "qualify", "spec_hash": "deadbeef", "params": {}},
        engine={"name": "posix", "version": "0.1.0"},
        phases=phases,
        loader={
            "profile": "unet3d-h100",
            "gpus": 8,
            "workers": 4,
            "batch_size": 4,
            "steps": 200,
            "au": 0.713,
            "au_per_epoch": [0.70, 0.72],
            "samples_per_s": 1234.5,
            "bytes_per_s": 3.1 * GiB,
            "load_wait_s": {"mean": 0.0123, "p99": 0.0871},
            "compute_s": 0.32,
            "bound": "storage",
            "predicted_au": 0.74,
            "cache": "dropped",
            "points": [{"gpus": 1, "au": 0.99}, {"gpus": 2, "au": 0.97}, {"gpus": 4, "au": 0.91}],
        },
        estimate={
            "profile": "unet3d-h100",
            "threshold": 0.9,
            "demand_bps_per_gpu": 1.4 * GiB,
            "au_at": [{"gpus": g, "au": min(1.0, 4.1 / g)} for g in (1, 2, 4, 8, 16, 32, 64)],
            "max_gpus": 4,
            "basis": "read bandwidth 5.1 GiB/s from seq-read-bs4m (O_DIRECT); profile unet3d-h100",
        },
        verdict={"result": "fail", "reasons": list(REASONS)},
        warnings=list(RUN_WARNINGS),
    )


def minimal_run() -> RunResult:
    return RunResult(
        run_id="r-min",
        command="iobench run seq-write /tmp/x",
        started_at="2025-01-01T00:00:00+00:00",
        phases=[PhaseResult(name="seq-write", op="write", bandwidth_bps=100 * MiB, iops=100.0)],
    )


def _flat(text: str) -> str:
    return " ".join(text.split())


# -- terminal and markdown ---------------------------------------------------------------------


def test_terminal_has_figures_blocks_verdict_and_warnings():
    run = rich_run()
    text = report.render_terminal(run)
    flat = _flat(text)
    assert all(len(line) <= 120 for line in text.splitlines())
    read4m = run.phase("seq-read-bs4m")
    assert format_rate(read4m.bandwidth_bps) in text  # "5200.0 MiB/s"
    assert format_seconds(read4m.latency_s["p99"]) in text
    assert format_seconds(read4m.latency_s["p50"]) in text
    assert "4 MiB" in text and "128 KiB" in text
    assert "PARTIAL" in text  # randread-4k's status marker
    # metadata phases print ops/s prominently, also from a phase's extra rates
    assert f"{format_count(98_765.0)} ops/s" in text
    assert "812 ops/s" in text  # fsync from ckpt-save's extra
    assert "AU measured 71.3% (model predicted 74.0%)" in flat
    assert "mean 12.30 ms, p99 87.10 ms" in flat
    assert "Bound by storage" in flat
    assert "Estimate (model output, not measured)" in text
    assert format_rate(1.4 * GiB) in text
    assert "Max GPUs at AU >= 90.0% 4" in flat
    assert "read bandwidth 5.1 GiB/s from seq-read-bs4m" in flat
    assert "Verdict: FAIL" in text
    for reason in REASONS:
        assert _flat(reason) in flat
    for w in RUN_WARNINGS + [f"randread-4k: {PHASE_WARNING}"]:
        assert _flat(w) in flat
    # the order a reader expects: phases, loader, estimate, verdict, warnings
    order = [text.index(s) for s in ("Phases", "Data loader", "Estimate", "Verdict", "Warnings")]
    assert order == sorted(order)


def test_terminal_fits_120_columns_with_long_names():
    run = minimal_run()
    run.phases[0].name = "a-very-long-phase-name-" * 8
    run.warnings = ["word " * 60]
    text = report.render_terminal(run)
    assert max(len(line) for line in text.splitlines()) <= 120
    # never cut (two names cut alike would stand for two phases): folded over lines, whole
    assert "..." not in text.split("Phases", 1)[1].split("\n\n", 1)[0]
    assert run.phases[0].name in "".join(ln.strip() for ln in text.splitlines()), text


def test_markdown_tables_and_content():
    run = rich_run()
    run.phases[0].name = "seq|write"  # a pipe must not break the table
    md = report.render_markdown(run)
    assert md.startswith("# iobench report")
    assert "**Verdict: FAIL**" in md
    assert "## Phases" in md and "## Data loader (measured)" in md
    assert "## Estimate (model output, not measured)" in md
    assert "seq\\|write" in md
    header = next(line for line in md.splitlines() if line.startswith("| Phase | Op |"))
    n_cols = header.count(" | ") + 1
    rows = [line for line in md.splitlines() if line.startswith("| seq-read-bs")]
    assert len(rows) == 3
    assert all(len(re.split(r"(?<!\\)\|", r)) - 2 == n_cols for r in rows)
    assert format_rate(run.phase("seq-read-bs1m").bandwidth_bps) in md
    assert "| 16 | 25.6% | no |" in md  # AU-at-N table: 4.1/16
    for w in RUN_WARNINGS + [f"randread-4k: {PHASE_WARNING}"] + REASONS:
        assert w in md


def test_minimal_run_renders_everywhere():
    run = minimal_run()
    text = report.render_terminal(run)
    assert "seq-write" in text and "100.0 MiB/s" in text
    assert "Verdict" not in text and "Estimate" not in text
    md = report.render_markdown(run)
    assert "| seq-write | write |" in md
    page = report.render_html(run)
    assert "100.0 MiB/s" in page and "<svg" not in page  # nothing to plot
    assert 'id="verdict"' not in page


def test_sweep_series_groups_by_sweep_and_op():
    run = rich_run()
    bs = report.sweep_series(run.phases, "block_size")
    assert set(bs) == {"seq-bs (write)", "seq-bs (read)"}
    assert bs["seq-bs (read)"] == [
        (128 * KiB, 1400 * MiB),
        (1 * MiB, 3300 * MiB),
        (4 * MiB, 5200 * MiB),
    ]
    conc = report.sweep_series(run.phases, "concurrency")
    assert conc == {
        "seq-jobs (write)": [(1, 700 * MiB), (2, 1300 * MiB), (4, 2100 * MiB), (8, 2400 * MiB)]
    }
    # untagged phases (a dataset layout write beside a loader's) are not sweep points
    plain = [PhaseResult("a", "read", concurrency=c, bandwidth_bps=c * 10.0) for c in (1, 2)]
    assert report.sweep_series(plain, "concurrency") == {}
    # the "base" phase anchors both sweeps: block size at its jobs, jobs at its block size
    base = PhaseResult("b", "read", concurrency=4, block_size=MiB, bandwidth_bps=40.0,
                       params={"sweep": "base"})  # fmt: skip
    bs = PhaseResult("c", "read", concurrency=4, block_size=4 * MiB, bandwidth_bps=80.0,
                     params={"sweep": "block_size"})  # fmt: skip
    j1 = PhaseResult("d", "read", concurrency=1, block_size=MiB, bandwidth_bps=10.0,
                     params={"sweep": "jobs"})  # fmt: skip
    assert report.sweep_series([base, bs, j1], "block_size") == {
        "block_size (read)": [(MiB, 40.0), (4 * MiB, 80.0)]
    }
    assert report.sweep_series([base, bs, j1], "concurrency") == {
        "jobs (read)": [(1.0, 10.0), (4.0, 40.0)]
    }


# -- HTML --------------------------------------------------------------------------------------

PLOT_TITLES = [
    "Bandwidth vs block size",
    "Bandwidth vs workers",
    "Latency CDF: write (1 of 2)",  # seven write phases: small multiples of at most four
    "Latency CDF: write (2 of 2)",
    "Latency CDF: read",
    "Latency CDF: randread",
    "Latency CDF: metadata",
    "Latency tail: write (1 of 2)",
    "Latency tail: write (2 of 2)",
    "Latency tail: read",
    "Latency tail: randread",
    "Latency tail: metadata",
    "Latency histogram: read",
    "Latency histogram: metadata",
    "Latency vs workers",
    "Bandwidth over time: write (1 of 2)",
    "Bandwidth over time: write (2 of 2)",
    "Bandwidth over time: randread",
    "Operations over time: metadata",
    "Metadata operation rates",
    "AU vs GPUs",
]


def _assert_offline(page: str) -> None:
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", page, re.I)
    assert "@import" not in page and "<script" not in page.lower() and "<link" not in page.lower()
    # any remaining http text is an XML namespace name, which is never fetched
    leftover = re.sub(r'xmlns(?::\w+)?="http://www\.w3\.org/[^"]*"', "", page)
    assert "http://" not in leftover and "https://" not in leftover


@pytest.fixture(scope="module")
def rich_page() -> str:
    return report.render_html(rich_run())


def test_html_is_self_contained_with_every_plot(rich_page):
    run = rich_run()
    page = rich_page
    assert page.startswith("<!DOCTYPE html>")
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    _assert_offline(page)
    for title in PLOT_TITLES:
        assert f'id="{report._plot_id(title)}" aria-label="{title}"><svg' in page, title
    assert page.count("<svg") == page.count("</svg>") >= len(PLOT_TITLES)
    assert 'class="banner fail"' in page and ">FAIL<" in page
    for text in REASONS + RUN_WARNINGS + [f"randread-4k: {PHASE_WARNING}"]:
        assert report._e(text) in page
    assert "lustre on /mnt/lustre" in page and "gpu-node-017" in page
    assert run.command in page and run.iobench_version in page
    assert "estimate" in page and "read bandwidth 5.1 GiB/s from seq-read-bs4m" in page
    assert format_rate(run.phase("seq-write-j8").bandwidth_bps) in page
    assert "O_DIRECT: the page cache was bypassed" in page  # cache handling per phase
    # ids inside the inline SVGs must not collide between figures
    clip_ids = re.findall(r'<clipPath id="([^"]+)"', page)
    assert len(clip_ids) == len(set(clip_ids)) > 0


def test_html_single_phase_draws_only_what_it_has():
    run = minimal_run()
    p = run.phases[0]
    p.histogram = _hist(np.random.default_rng(1), 2e-3)
    p.series = [90 * MiB, None, 110 * MiB]  # a missing interval leaves a gap, not a crash
    p.params = None  # as from a result.json written with nulls
    p.warnings = None
    run.loader = {"gpus": 2, "au": 0.8}  # measured AU without any estimate
    page = report.render_html(run)
    for title in ("Latency CDF: write", "Latency tail: write", "Latency histogram: write",
                  "Bandwidth over time: write", "AU vs GPUs"):  # fmt: skip
        assert f'id="{report._plot_id(title)}" aria-label="{title}"><svg' in page
    assert page.count("<svg") == 5  # no sweep, latency-vs-workers, metadata plot or timeline
    assert 'id="estimate"' not in page
    _assert_offline(page)


def test_html_escapes_names_and_pass_banner():
    run = minimal_run()
    run.phases[0].name = "<script>alert(1)</script>"
    run.verdict = {"result": "pass", "reasons": ["all phases within 10% of the baseline"]}
    page = report.render_html(run)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert 'class="banner pass"' in page and ">PASS<" in page


def test_html_plots_need_no_matplotlib(monkeypatch):
    """The plots are hand-written SVG: a page without matplotlib has every one of them."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    page = report.render_html(rich_run())
    assert "plots need matplotlib" not in page
    for title in PLOT_TITLES:
        assert f'id="{report._plot_id(title)}" aria-label="{title}"><svg' in page, title
    assert "seq-read-bs4m" in page and ">FAIL<" in page


def test_partial_run_without_verdict_shows_status_banner():
    run = minimal_run()
    run.status = "interrupted"
    run.error = "interrupted by SIGTERM"
    run.phases[0].status = "partial"
    page = report.render_html(run)
    assert 'class="banner warn"' in page and "INTERRUPTED" in page
    assert "interrupted by SIGTERM" in page
    assert "run: interrupted by SIGTERM" in report.render_terminal(run)


def test_write_report_beside_result(tmp_path):
    run = rich_run()
    save(run, tmp_path)
    path = report.write_report(load(tmp_path), tmp_path)  # round-trips through result.json
    assert path == tmp_path / "report.html"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "result.json"]
    page = path.read_text(encoding="utf-8")
    assert ">FAIL<" in page and "seq-write-j8" in page


# -- a real browser ----------------------------------------------------------------------------


@pytest.fixture
def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (as root: apt-get install -y chromium)")
    return exe


def _chromium(exe: str, *args: str, tmp: Path) -> subprocess.CompletedProcess:
    cmd = [
        exe,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp / 'profile'}",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.slow
def test_chromium_renders_report(tmp_path, chromium, rich_page):
    from matplotlib.image import imread

    page = tmp_path / "report.html"
    page.write_text(rich_page, encoding="utf-8")
    url = page.resolve().as_uri()
    png = tmp_path / "shot.png"
    proc = _chromium(chromium, f"--screenshot={png}", "--window-size=1200,2000", url, tmp=tmp_path)
    assert png.exists(), f"no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    img = imread(png)[..., :3]  # floats in 0..1
    assert img.shape[:2] == (2000, 1200)
    assert img.std() > 0.05
    non_white = (img < 0.94).any(axis=2).mean()
    assert 0.05 < non_white < 0.9
    # the FAIL banner is drawn in its red (#cf222e)
    red = np.abs(img - np.array([0xCF, 0x22, 0x2E]) / 255).max(axis=2) < 0.04
    assert red.sum() > 20_000

    dom = _chromium(chromium, "--dump-dom", url, tmp=tmp_path)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'class="banner fail"' in dom.stdout and ">FAIL<" in dom.stdout
    assert REASONS[0] in dom.stdout
    assert dom.stdout.count("<svg") >= len(PLOT_TITLES)


@pytest.mark.slow
def test_chromium_draws_the_new_plots(tmp_path, chromium, rich_page):
    """The latency-tail and latency-vs-workers figures are in the page (by element id) and
    draw something: a page holding only them is not blank and shows the first line colour."""
    from matplotlib.image import imread

    ids = ["plot-latency-tail-write-1-of-2", "plot-latency-tail-read", "plot-latency-vs-workers"]
    figures = []
    for fid in ids:
        m = re.search(rf'<figure id="{fid}".*?</figure>', rich_page, flags=re.S)
        assert m, fid
        figures.append(m.group(0))
    page = tmp_path / "plots.html"
    page.write_text(
        f"<!DOCTYPE html><html><head><style>{report._CSS}</style></head><body><main>"
        f'<div class="plots">{"".join(figures)}</div></main></body></html>',
        encoding="utf-8",
    )
    png = tmp_path / "plots.png"
    url = page.resolve().as_uri()
    proc = _chromium(chromium, f"--screenshot={png}", "--window-size=1200,1000", url, tmp=tmp_path)
    assert png.exists(), f"no screenshot (rc {proc.returncode}): {proc.stderr[-2000:]}"
    img = imread(png)[..., :3]
    # two figures a row at this width: where each of the three lies
    for rows, cols in ((slice(0, 380), slice(0, 600)), (slice(0, 380), slice(600, 1200)),
                       (slice(380, 760), slice(0, 600))):  # fmt: skip
        region = img[rows, cols]
        assert (region < 0.94).any(axis=2).mean() > 0.03, (rows, cols)
        blue = np.abs(region - np.array([0x09, 0x69, 0xDA]) / 255).max(axis=2) < 0.08
        assert blue.sum() > 200, (rows, cols)
    dom = _chromium(chromium, "--dump-dom", rich_page_url(tmp_path, rich_page), tmp=tmp_path)
    for fid in ids:
        assert f'id="{fid}"' in dom.stdout


def rich_page_url(tmp: Path, text: str) -> str:
    page = tmp / "full.html"
    page.write_text(text, encoding="utf-8")
    return page.resolve().as_uri()
