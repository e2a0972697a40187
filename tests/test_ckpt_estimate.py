"""From measured checkpoint phases to the full-size estimates, on a hand-made run."""

from __future__ import annotations

import json

import pytest

from iobench.checkpoint import model as cm
from iobench.checkpoint.estimate import Options, build, measured, parse_failure_rate
from iobench.core.errors import UsageError
from iobench.result.file import PhaseResult, RunResult


def render(block) -> str:
    """The checkpoint section of the terminal report alone (wide: no wrapped lines)."""
    from iobench import report

    run = RunResult(run_id="r", command="c", started_at="t")
    run.checkpoint = block
    return report.render_terminal(run, width=400)


MiB = 1 << 20
GiB = 1 << 30
SPEC = cm.ModelSpec("m", 16 * GiB, 48 * GiB, dp=8)  # 64 GiB, 16 files, 8 GiB per rank


def _phase(name, op, nbytes, files, seconds, **extra):
    return PhaseResult(
        name=name, op=op, bytes=nbytes, ops=files, files=files, concurrency=8,
        elapsed_s=seconds, bandwidth_bps=nbytes / seconds, iops=files / seconds,
        params={"ranks_local": 8, "api": "torch.save"}, extra=extra, cache="dropped",
    )  # fmt: skip


def _run() -> RunResult:
    run = RunResult(run_id="r", command="c", started_at="t", target={"free_bytes": 1 << 40})
    run.phases = [
        PhaseResult(name="ckpt-create", op="create", ops=160, iops=160.0, concurrency=8),
        PhaseResult(name="ckpt-open_read", op="open_read", ops=320, iops=320.0, concurrency=8),
        PhaseResult(
            name="ckpt-baseline-write", op="write", bytes=64 * MiB, ops=16, bandwidth_bps=80 * MiB
        ),  # fmt: skip
        _phase(
            "ckpt-save",
            "ckpt_save",
            64 * MiB,
            16,
            1.0,
            copy_bps=float(GiB),
            copy_basis="host memory copy (no accelerator)",
            rank_seconds=[0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.0, 1.0],
        ),  # fmt: skip
        _phase("ckpt-load", "ckpt_load", 64 * MiB, 16, 0.5, rank_seconds=[0.5] * 8),
    ]
    return run


def test_measured_figures():
    got = measured(_run())
    assert got["save"]["bandwidth_bps"] == 64 * MiB
    assert got["save"]["rank_seconds"] == pytest.approx({"min": 0.5, "median": 0.85, "max": 1.0})
    assert got["save"]["ranks"] == 8
    assert got["baseline"]["save_ratio"] == pytest.approx(0.8)
    assert (got["create_per_s"], got["open_per_s"], got["copy_bps"]) == (160.0, 320.0, GiB)


def test_full_size_estimate_by_hand():
    opts = Options(mtbf_s=36000.0, restart_s=600.0, interval_s=3600.0, keep_last=2)
    block = build(_run(), SPEC, scale=1 / 1024, opts=opts)
    est = block["estimate"]
    # 16 files at 160 creates/s = 0.1 s of the measured 1.0 s: data at 64 MiB / 0.9 s;
    # the full 64 GiB at that rate: 1024 × 0.9 = 921.6 s, plus the same 16 creates
    st = est["stall"]
    assert st["bandwidth_s"] == pytest.approx(921.6)
    assert st["metadata_s"] == pytest.approx(0.1)
    assert st["sync_s"] == pytest.approx(921.7)
    assert st["snapshot_s"] == pytest.approx(8.0)  # the 8 GiB rank shard at 1 GiB/s
    # load: 16 opens at 320/s = 0.05 s of 0.5 s; 1024 × 0.45 = 460.8 s; + 0.05 + 600 restart
    rec = est["recovery"]
    assert rec["load_s"] == pytest.approx(460.85) and rec["total_s"] == pytest.approx(1060.85)
    sync = est["sync"]
    assert sync["daly_s"] == pytest.approx(cm.daly_interval(921.7, 36000.0))
    # Daly's exponential form: 3600 / (36000·e^{1060.85/36000}·(e^{4521.7/36000} − 1))
    assert sync["user_goodput"] == pytest.approx(0.725510, abs=1e-6)
    first = 1 - (921.7 / 3600 + (1800 + 1060.85) / 36000)  # 0.664504: 6 points lower
    assert sync["user_goodput_first_order"] == pytest.approx(first)
    assert any("Daly (2006) exponential" in b for b in est["basis"])
    asyn = est["async"]
    assert asyn["stall_s"] == pytest.approx(8.0) and asyn["min_interval_s"] == pytest.approx(921.7)
    cap = est["capacity"]
    assert cap["fit_free"] == 16 and cap["needed_bytes"] == 192 * GiB and cap["retention_fits"]
    assert est["label"] == "estimate" and "64.0 GiB over 8 ranks" in est["basis"][0]
    # creates at 160/s against 921.6 s of data: (N + 1)/160 > 921.6 ⇔ N > 147,455
    assert est["metadata_dominates_from_ranks"] == 147_456
    json.dumps(block)  # result.json can hold it


def test_default_mtbf_is_the_llama3_rate_on_the_ranks():
    est = build(_run(), SPEC, scale=1 / 1024)["estimate"]
    assert est["mtbf_s"] == pytest.approx(1296 / 419 * 3600 * 16384 / 8)
    assert "Llama 3" in est["mtbf_basis"] and "× 8 accelerators" in est["mtbf_basis"]
    est = build(
        _run(), SPEC, scale=1 / 1024,
        opts=Options(failure_rate_per_s=1e-3 / cm.DAY_S, accelerators=1000),
    )["estimate"]  # fmt: skip
    assert est["mtbf_s"] == pytest.approx(cm.DAY_S)  # 1e-3 per day × 1000


def test_no_estimate_without_a_load():
    run = _run()
    run.phases = run.phases[:-1]
    block = build(run, SPEC, scale=1.0)
    assert block["estimate"] is None and "no complete save and load" in block["estimate_missing"]
    assert "none: no complete save and load" in render(block)


def test_render_labels_estimates_and_basis():
    text = render(build(_run(), SPEC, scale=1 / 1024, opts=Options(mtbf_s=36000.0)))
    assert "0.000977 of every rank's shard written" in text
    assert (
        "size ÷ slowest rank" in text
        and "500.00 ms / 850.00 ms / 1.00 s" in text
        and "0.0625 GiB/s" in text
    )
    assert "torch.save reached 80 % of it" in text
    assert "Checkpoint estimates (model output, not measured)" in text
    assert "64.0 GiB in 16 files (largest rank 8.0 GiB)" in text
    assert "15.4 min synchronous" in text  # 921.7 s
    assert "Basis" in text and "MTBF" in text and "no restart cost given" in text


@pytest.mark.parametrize(
    "text, per_s",
    [("4.7e-4", 4.7e-4 / 86400), ("4.7e-4/day", 4.7e-4 / 86400), ("2e-5/h", 2e-5 / 3600)],
)
def test_parse_failure_rate(text, per_s):
    assert parse_failure_rate(text) == pytest.approx(per_s)


@pytest.mark.parametrize("text", ["", "often", "-1", "0", "inf"])
def test_bad_failure_rate(text):
    with pytest.raises(UsageError, match="--failure-rate"):
        parse_failure_rate(text)


def test_older_results_have_no_checkpoint_block():
    d = _run().to_dict()
    del d["checkpoint"]
    assert RunResult.from_dict(d).checkpoint is None


def test_goodput_curve_spans_the_best_interval():
    est = build(_run(), SPEC, scale=1 / 1024, opts=Options(mtbf_s=36000.0))["estimate"]
    curve = est["curve"]
    assert len(curve) == 27
    mid = curve[13]
    assert mid["interval_s"] == pytest.approx(est["sync"]["best_interval_s"])
    assert mid["sync"] == pytest.approx(est["sync"]["best_goodput"])
    assert curve[0]["interval_s"] == pytest.approx(mid["interval_s"] / 10**1.3)
    assert max(c["sync"] for c in curve) == pytest.approx(mid["sync"], abs=2e-3)


def test_html_report_has_the_goodput_plot():
    from iobench import report

    run = _run()
    run.checkpoint = build(run, SPEC, scale=1 / 1024, opts=Options(interval_s=1800.0))
    html = report.render_html(run)
    assert "Checkpoint goodput vs interval" in html
    i = html.index("Checkpoint goodput vs interval")
    assert "<svg" in html[i : i + 5000]


def test_render_says_when_no_interval_makes_progress():
    # a 921.7 s stall against a 1 s MTBF: no segment ever completes (e^{921.7} overflows)
    block = build(_run(), SPEC, scale=1 / 1024, opts=Options(mtbf_s=1.0, restart_s=600.0))
    assert block["estimate"]["sync"]["best_goodput"] == 0.0
    assert "no interval makes progress" in render(block)
