"""qualify --model: checkpoint requirements, verdict lines at their thresholds, bad input."""

from __future__ import annotations

import json

import pytest
from test_ckpt_estimate import SPEC, _run
from test_loader import tiny_profile

from iobench.checkpoint import rows as ckpt_report
from iobench.checkpoint.estimate import Options, build
from iobench.core.errors import UsageError
from iobench.qualify.checkpoint import verdict_item
from iobench.qualify.suite import plan_qualify
from iobench.qualify.verdict import parse_requirements, verdict
from iobench.spec.workload import load_profile

GiB = 1 << 30

# test_ckpt_estimate's run, by hand: a synchronous save stalls 921.7 s (64 GiB at the measured
# data rate + 16 creates); recovery 460.85 s load + 600 s restart = 1060.85 s; MTBF 10 h.
# Goodput is Daly's exponential form G = τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1)).
# At the user's interval of 1 h: 3600 / (36000·e^{0.0294681}·(e^{0.1256028} − 1)) = 0.725510.
# The exact optimum solves e^{(τ+δ)/M}·(1 − τ/M) = 1: 7543.79 s (Daly's closed form: 7543.43 s),
# where G = 0.767497.
# Free space 1 TiB holds 16 checkpoints of 64 GiB.
USER_GOODPUT = 0.725510
BEST_GOODPUT = 0.767497


def _ckpt_run(interval_s: float | None = 3600.0):
    run = _run()
    run.status = "complete"
    opts = Options(mtbf_s=36000.0, restart_s=600.0, interval_s=interval_s)
    run.checkpoint = build(run, SPEC, scale=1 / 1024, opts=opts)
    for p in run.phases:  # long, steady phases: the verdict's figures are not indicative
        p.elapsed_s = max(p.elapsed_s, 5.0)
        p.steady = True
    return run


def test_hand_checked_figures():
    est = _ckpt_run().checkpoint["estimate"]
    assert est["sync"]["user_goodput"] == pytest.approx(USER_GOODPUT, abs=1e-6)
    est = _ckpt_run(None).checkpoint["estimate"]
    assert est["sync"]["best_interval_s"] == pytest.approx(7543.79, abs=0.01)
    assert est["sync"]["best_goodput"] == pytest.approx(BEST_GOODPUT, abs=1e-6)


@pytest.mark.parametrize(
    "require, interval, result",
    [
        ("ckpt-goodput=72.5%", 3600.0, "pass"),  # 72.55 % at your 1 h
        ("ckpt-goodput=72.6%", 3600.0, "fail"),
        ("ckpt-goodput=76.7%", None, "pass"),  # 76.75 % at the best interval
        ("ckpt-goodput=76.8%", None, "fail"),
        ("ckpt-stall=15.4m", 3600.0, "pass"),  # 921.7 s <= 924 s
        ("ckpt-stall=15m", 3600.0, "fail"),  # 921.7 s > 900 s
        ("ckpt_recovery=18m", 3600.0, "pass"),  # 1060.85 s <= 1080 s
        ("ckpt-recovery=17m", 3600.0, "fail"),
        ("ckpt-fit=16", 3600.0, "pass"),
        ("ckpt-fit=17", 3600.0, "fail"),
    ],
)
def test_verdict_at_the_thresholds(require, interval, result):
    run = _ckpt_run(interval)
    v = verdict(run, parse_requirements(require), None, None)
    assert v["result"] == result
    (item,) = v["items"]
    assert item["result"] == result and item["label"] == "estimate"
    line = next(r for r in v["reasons"] if r.startswith(result.upper() + ": "))
    assert "(m)" in line and "see the checkpoint estimate's basis" in line
    assert "indicative" not in line and "NOTE: this verdict rests" not in " ".join(v["reasons"])


def test_verdict_line_shows_the_report_figure():
    run = _ckpt_run()
    est = run.checkpoint["estimate"]
    v = verdict(run, parse_requirements("ckpt-goodput=60%,ckpt-stall=1h"), None, None)
    goodput, stall = v["reasons"][:2]
    # the very strings of the report's rows, the judged figure named, the basis given
    assert ckpt_report.goodput_text(est["sync"]) in goodput
    assert "72.6 % at your interval 60.0 min; judged at your interval" in goodput
    assert "(required >= 60.0 %)" in goodput and "MTBF 10.0 h: given (--mtbf)" in goodput
    assert ckpt_report.stall_text(est["stall"]) in stall and "(required <= 60.0 min)" in stall
    rows = dict(r for t in ckpt_report.tables(run.checkpoint) for r in t["rows"])
    assert rows["Goodput, synchronous"] == ckpt_report.goodput_text(est["sync"])
    assert rows["Stall per checkpoint"] == ckpt_report.stall_text(est["stall"])
    assert v["items"][0]["estimate"] == pytest.approx(USER_GOODPUT, abs=1e-6)


def test_indicative_phases_and_missing_estimate():
    run = _ckpt_run()
    save = next(p for p in run.phases if p.name == "ckpt-save")
    save.steady = False
    v = verdict(run, parse_requirements("ckpt-stall=1h,ckpt-fit=1"), None, None)
    assert v["reasons"][0].startswith("NOTE: this verdict rests")  # what it rests on first
    assert "[indicative: ckpt-save did not reach steady state" in v["reasons"][1]
    assert "indicative" not in v["reasons"][2]  # capacity rests on no measurement
    assert v.get("indicative") and v["status"] in ("pass (indicative)", "fail")
    run.checkpoint = None  # e.g. the run failed before the checkpoint step
    passed, line, item = verdict_item(run, parse_requirements("ckpt-goodput=90%")[0])
    assert not passed and line.startswith("FAIL: checkpoint goodput") and "not estimated" in line
    assert item["estimate"] is None


def test_summary_line_without_a_checkpoint_requirement():
    run = _ckpt_run()
    v = verdict(run, parse_requirements("creates=1/s"), None, None)
    line = next(r for r in v["reasons"] if r.startswith("ESTIMATE: checkpoint m"))
    assert ckpt_report.goodput_text(run.checkpoint["estimate"]["sync"]) in line
    run.checkpoint = None  # qualify without --model: no checkpoint line at all
    v = verdict(run, parse_requirements("creates=1/s"), None, None)
    assert not any("checkpoint" in r for r in v["reasons"])


def test_requirements_parse():
    reqs = parse_requirements(
        "ckpt-goodput=97%,ckpt-stall=5m,ckpt_recovery=0.5h,ckpt-fit=3,read=1GiB"
    )
    assert [(r.key, r.value) for r in reqs] == [
        ("ckpt-goodput", 0.97), ("ckpt-stall", 300.0), ("ckpt-recovery", 1800.0),
        ("ckpt-fit", 3.0), ("read", float(GiB)),
    ]  # fmt: skip
    assert [r.describe() for r in reqs[:4]] == [
        "ckpt-goodput >= 97.0 %", "ckpt-stall <= 5.0 min", "ckpt-recovery <= 30.0 min",
        "ckpt-fit >= 3",
    ]  # fmt: skip
    for bad in ("ckpt-goodput=0", "ckpt-goodput=150%", "ckpt-goodput=high", "ckpt-stall=0s",
                "ckpt-stall=soon", "ckpt-fit=0", "ckpt-fit=2.5", "ckpt-speed=1"):  # fmt: skip
        with pytest.raises(UsageError):
            parse_requirements(bad)


def test_plan_with_a_model_replaces_the_checkpoint_step():
    prof = load_profile("retinanet-b200")
    plan = plan_qualify(prof, 1, budget_s=30, quick=True, free_bytes=50 << 30, model="llama3-8b")
    step = next(s for s in plan.steps if s.name == "checkpoint")
    assert step.workload == "llm-checkpoint" and step.params["model"].endswith("llama3-8b.toml")
    assert step.params["baseline"] and step.params["api"] == "torch"
    written = step.params["scale"] * 105 * GiB
    assert 30 << 20 < written < 50 << 20  # the budget's checkpoint size, spread over 8 ranks
    full = plan_qualify(prof, 1, budget_s=30, quick=False, free_bytes=50 << 30, model="llama3-8b")
    assert next(s for s in full.steps if s.name == "checkpoint").params["api"] == "both"
    plain = plan_qualify(prof, 1, budget_s=30, quick=True, free_bytes=50 << 30)
    assert next(s for s in plain.steps if s.name == "checkpoint").workload == "checkpoint-smallfile"


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "llama9"], "unknown model 'llama9'"),
        (["--require", "ckpt-goodput=97%"], "--require ckpt-goodput needs --model"),
        (["--mtbf", "3h"], "--mtbf needs --model"),
        (["--interval", "30m"], "--interval needs --model"),
        (["--model", "llama3-8b", "--checkpoint", "100GB"], "--checkpoint and --model both"),
        (["--model", "llama3-8b", "--mtbf", "soon"], "--mtbf"),
        (["--model", "llama3-8b", "--mtbf", "0s"], "--mtbf must be a positive"),
        (["--model", "llama3-8b", "--interval", "0s"], "--interval must be a positive"),
        (["--model", "llama3-8b", "--restart", "-1m"], "--restart"),
        (["--model", "llama3-8b", "--failure-rate", "often"], "--failure-rate 'often'"),
        (["--model", "llama3-8b", "--mtbf", "3h", "--failure-rate", "1e-3"], "both given"),
        (["--model", "llama3-8b", "--require", "ckpt-goodput=150%"], "ckpt-goodput"),
        (["--model", "llama3-8b", "--require", "ckpt-fit=0"], "ckpt-fit"),
        (["--model", "llama3-405b-16k"], "16384 ranks would run as threads"),
    ],
)
def test_bad_input_is_one_line_exit_2(cli, planted, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    r = cli("qualify", planted.path, "--quick", *args, "--output", tmp_path / "q", "-q")
    assert r.code == 2, (r.out, r.err)
    assert message in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert not (tmp_path / "q").exists() and planted.unchanged()
    assert not (tmp_path / "history").exists()


def test_dry_run_shows_the_model_step(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("qualify", planted.path, "--quick", "--dry-run", "--model", "llama3-70b")
    assert r.code == 0, r.err
    flat = " ".join(r.out.split())  # the plan folds to the width (120 into a pipe)
    assert "llm-checkpoint" in flat and "of the full 911.2 GiB) over 64 ranks" in flat
    assert planted.unchanged()


def test_small_qualify_with_a_model(cli, planted, tmp_path):
    out = tmp_path / "q"
    prof = tiny_profile(tmp_path, files=48)  # 2 workers, 64 KiB samples: a short loader step
    r = cli(
        "qualify", planted.path, "--quick", "--budget", "6s", "--model", "llama3-8b",
        "--gpus", "64", "--interval", "30m", "--restart", "5m", "--output", out, "-q",
        "--require", "ckpt-fit=1,ckpt-stall=1000h,read=1PiB/s", "--profile", prof,
    )  # fmt: skip
    assert r.code == 1, r.err  # no storage reads 1 PiB/s
    res = json.loads((out / "result.json").read_text())
    block = res["checkpoint"]
    assert block["model"]["name"] == "llama3-8b" and block["estimate"]["accelerators"] == 64
    assert "× 64 accelerators" in block["estimate"]["mtbf_basis"]
    assert block["estimate"]["recovery"]["restart_s"] == 300
    names = {p["name"] for p in res["phases"]}
    assert {"ckpt-create", "ckpt-baseline-write", "ckpt-save", "ckpt-load"} <= names
    items = {i["key"]: i for i in res["verdict"]["items"]}
    assert items["ckpt-stall"]["result"] == "pass"
    assert items["ckpt-stall"]["estimate"] == block["estimate"]["stall"]["sync_s"]
    assert items["ckpt-fit"]["result"] == ("pass" if items["ckpt-fit"]["estimate"] else "fail")
    line = next(x for x in res["verdict"]["reasons"] if "checkpoint stall" in x)
    stall = ckpt_report.stall_text(block["estimate"]["stall"])
    assert f"estimate {stall} (required <= 41.7 d)" in line  # 1000 h as the report writes it
    html = (out / "report.html").read_text()
    assert stall in html and 'id="checkpoint"' in html and "Checkpoint goodput vs interval" in html
    assert stall in r.out and "verdict: FAIL" in r.out
    assert planted.unchanged()
