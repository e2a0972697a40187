"""Renderings of the estimate's interval and of indicative phases (terminal, markdown, HTML,
the AU-vs-GPUs plot's band)."""

from __future__ import annotations

import pytest
from factories import make_run

from iobench import report
from iobench.result.file import PhaseResult

EST = {
    "profile": "retinanet-b200",
    "threshold": 0.85,
    "demand_bps_per_gpu": 163e6,
    "au_at": [
        {"gpus": 1, "au": 0.97, "low": 0.96, "high": 0.98},
        {"gpus": 4, "au": 0.90, "low": 0.84, "high": 0.93},
        {"gpus": 8, "au": 0.60, "low": 0.55, "high": 0.66},
    ],
    "max_gpus": 6,
    "max_gpus_low": 5,
    "max_gpus_high": 7,
    "interval": {"level": 0.9, "resamples": 100, "seed": 0, "basis": "90% bootstrap interval: x"},
    "warnings": ["unstable: the storage was unstable during the sweep (y)"],
    "basis": "simulated",
}


def _run():
    short = PhaseResult("seq-read", "read", bytes=1, ops=1, elapsed_s=0.5, bandwidth_bps=1e9)
    steady = PhaseResult("seq-write", "write", bytes=1, ops=1, elapsed_s=3.0, bandwidth_bps=1e9,
                         steady=True, steady_at_s=2.5)  # fmt: skip
    return make_run(phases=[short, steady], estimate=dict(EST))


@pytest.mark.parametrize(
    "render", [report.render_terminal, report.render_markdown, report.render_html]
)
def test_every_rendering_shows_the_interval_and_the_indicative_phase(render):
    text = render(_run())
    assert "6 (5–7) estimate, 90% interval; the verdict uses 5" in text
    assert "90% bootstrap interval: x" in text
    assert "unstable: the storage was unstable during the sweep (y)" in text
    assert "84.0%–93.0%" in text  # the band at 4 GPUs
    assert "indicative" in text and "did not reach steady state" in text


def test_status_column_marks_only_the_indicative_phase():
    table = report._phase_table(_run())
    assert [r[-1] for r in table.rows] == ["indicative", "ok"]
    # meets the threshold only when the low end does: 4 GPUs has 0.90 but 0.84 at the low end
    au_table = report._estimate_tables(_run())[1]
    assert [r[-1] for r in au_table.rows] == ["yes", "no", "no"]
    assert au_table.headers == ["GPUs", "Estimated AU", "90% interval", "Meets threshold"]


def test_older_estimate_without_interval_renders_the_point():
    run = make_run(estimate={"threshold": 0.85, "max_gpus": 6, "au_at": [{"gpus": 1, "au": 0.9}]})
    text = report.render_terminal(run)
    assert "6 (estimate)" in text and "interval" not in text.split("Estimated AU")[1]


def test_au_plot_draws_the_band():
    from iobench.report.svgplot import render

    chart = report._au_plot(_run())
    assert len(chart.bands) == 1
    labels = chart.legend_labels()
    assert "90% interval" in labels and "estimate (model)" in labels
    assert any("max 6 (5–7) GPUs (estimate)" in r.text for r in chart.rules)
    svg = render(chart, "au")
    assert 'fill-opacity="0.18"' in svg and "max 6 (5–7) GPUs (estimate)" in svg
