"""The checkpoint section: the same figures in the terminal, markdown and HTML reports."""

from __future__ import annotations

import html
import re

import pytest
from test_ckpt_estimate import SPEC, _run

from iobench import report
from iobench.checkpoint import rows as ckpt_report
from iobench.checkpoint.estimate import Options, build
from iobench.result.file import RunResult


def _ckpt_run():
    run = _run()
    opts = Options(mtbf_s=36000.0, restart_s=600.0, interval_s=3600.0, keep_last=2,
                   capacity_bytes=1 << 40)  # fmt: skip
    run.checkpoint = build(run, SPEC, scale=1 / 1024, opts=opts, source="hand-made")
    return run


def _rows(run):
    return [(t["title"], label, value) for t in ckpt_report.tables(run.checkpoint)
            for label, value in t["rows"]]  # fmt: skip


def test_rows_hold_the_figures_worked_by_hand():
    rows = {label: value for _, label, value in _rows(_ckpt_run())}
    # 64 MiB in 1.0 s = 0.0625 GiB/s; the plain write 80 MiB/s: torch.save at 80 %
    assert rows["Save (torch.save + fsync)"].startswith("0.0625 GiB/s: 64.0 MiB in 16 files")
    assert rows["Plain write, same files"] == "0.0781 GiB/s; torch.save reached 80 % of it"
    assert rows["Bytes per checkpoint"] == "64.0 GiB in 16 files (largest rank 8.0 GiB)"
    assert rows["Stall per checkpoint"].startswith("15.4 min synchronous")  # 921.7 s
    assert rows["Stall, asynchronous"].startswith("8.00 s snapshot")  # 8 GiB at 1 GiB/s
    assert rows["Recovery"].startswith("17.7 min (load 7.7 min; restart 10.0 min as given)")
    # Daly's exponential form (test_ckpt_qualify): 72.55 % at the 1 h interval
    assert rows["Goodput, synchronous"].endswith("; 72.6 % at your interval 60.0 min")
    assert rows["Capacity"] == (
        "64.0 GiB per checkpoint; 16 fit in the target's free space; 16 in 1.0 TiB; "
        "keep-last 2 needs 192.0 GiB (fits)"
    )
    assert "bandwidth dominates" in rows["Metadata vs bandwidth"]
    # exact optimum 7544 s, Daly 7543 s, Young √(2·921.7·36000) = 8146 s; asynchronous: the
    # optimum for the 8 s snapshot (Daly 753.6 s) is shorter than the 921.7 s write
    assert rows["Interval, synchronous"] == "2.1 h (exact optimum; Daly 2.1 h; Young 2.3 h)"
    assert rows["Interval, asynchronous"] == (
        "15.4 min (raised to the write, 15.4 min; Daly 12.6 min; Young 12.6 min)"
    )


def test_terminal_markdown_and_html_show_the_same_figures():
    run = _ckpt_run()
    rows = _rows(run)
    assert len(rows) > 20
    text = report.render_terminal(run, width=2000)  # wide: no value is wrapped
    md = report.render_markdown(run)
    page = report.render_html(run)
    for _title, label, value in rows:
        assert re.search(rf"^  {re.escape(label)} +{re.escape(value)}$", text, re.M), label
        assert f"| {label} | {value.replace('|', chr(92) + '|')} |" in md, label
        assert f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>" in page
    for title in (ckpt_report.MEASURED_TITLE, ckpt_report.ESTIMATE_TITLE):
        assert f"\n{title}\n" in text and f"## {title}" in md
        assert f"<h3>{html.escape(title)}</h3>" in page
    assert 'id="checkpoint"' in page and ckpt_report.ESTIMATE_NOTE in md


@pytest.mark.parametrize(
    "render", [report.render_terminal, report.render_markdown, report.render_html]
)
def test_no_checkpoint_block_no_section(render):
    out = render(RunResult(run_id="r", command="c", started_at="t"))
    assert "Checkpoint" not in out


def test_report_command_shows_the_section(cli, tmp_path):
    from iobench.result import file as results

    run = _ckpt_run()
    results.save(run, tmp_path)
    rows = _rows(run)
    r = cli("report", tmp_path, "--markdown")
    assert r.code == 0 and all(f"| {label} | {value} |" in r.out for _, label, value in rows)
    r = cli("report", tmp_path)
    assert r.code == 0 and ckpt_report.ESTIMATE_TITLE in r.out
    assert r.out.count(ckpt_report.ESTIMATE_TITLE) == 1  # printed once, not twice
