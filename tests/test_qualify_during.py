"""``qualify --profile P --model M`` (issue 27): the loader measured again during M's save, its
AU judged on a verdict line of its own, the contention model over the interval beside it."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from test_loader import no_run_dirs, tiny_profile

from iobench.qualify.during import KEY, at_steps, interval_model, sized, verdict_item
from iobench.qualify.suite import plan_qualify
from iobench.spec.workload import load_profile

MiB = 1 << 20


def test_a_small_qualify_with_a_profile_and_a_model_measures_the_loader_during_its_save(
    cli, planted, tmp_path
):
    out = tmp_path / "q"
    prof = tiny_profile(tmp_path, files=48, compute_s=0.02)
    r = cli(
        "qualify", planted.path, "--quick", "--budget", "6s", "--profile", prof,
        "--model", "llama3-8b", "--interval", "30m", "--output", out, "-q",
    )  # fmt: skip
    assert r.code in (0, 1), r.err
    res = json.loads((out / "result.json").read_text())
    d = res["loader"]["during_checkpoint"]
    assert d["model"] == "llama3-8b" and d["checkpoints"] and d["alone"]["write_bps"] > 0
    assert d["loop"]["steps"] == res["workload"]["params"]["loader"]["steps"]
    assert d["at"] == at_steps(res["workload"]["params"]["loader"]) and d["at_unit"] == "steps"
    assert d["bytes"] <= 16 * MiB  # at most the checkpoint step's size (the quick budget's)
    assert "ckpt-save" in d["loop"]["sized_from"]
    kinds = {w["kind"] for w in d["windows"]}
    assert {"before", "during"} <= kinds
    # the verdict's own line, with what it rests on, and the model over your 30 m interval
    item = next(i for i in res["verdict"]["items"] if i["key"] == KEY)
    assert item["required"] == 0.9 and item["measured"] == d["summary"]["during"]["au"]
    line = next(x for x in res["verdict"]["reasons"] if "during a checkpoint write" in x)
    assert "rests on:" in line and "during-window" in line and "separate loader run" in line
    m = d["model_interval"]
    assert m["interval_s"] == 1800 and m["interval_from"] == "your --interval"
    assert 0 <= m["au_interval"] <= 1 and m["label"] == "estimate"
    assert (
        "modelled over your --interval (30 min" in line or "modelled over your --interval" in line
    )
    # the main loader step ran without a save: its figures are the first run's
    assert res["loader"]["steps"] == d["loop"]["steps"]
    html = (out / "report.html").read_text()
    assert "during a checkpoint write" in html and "separate loader run" in html
    assert no_run_dirs(planted.path) and planted.unchanged()


def test_the_plan_names_the_run_beside_the_save_only_with_a_profile_and_a_model():
    prof = load_profile("retinanet-b200")
    both = plan_qualify(prof, 1, budget_s=30, quick=True, free_bytes=50 << 30,
                        model="llama3-8b", during=True)  # fmt: skip
    assert both.during is not None and both.during.total_bytes <= 42 * MiB
    model_only = plan_qualify(prof, 1, budget_s=30, quick=True, free_bytes=50 << 30,
                              model="llama3-8b")  # fmt: skip
    assert model_only.during is None
    assert both.space_bytes >= both.loader["space_bytes"] + both.during.total_bytes
    assert both.expected_s > model_only.expected_s
    assert both.spec_hash() != model_only.spec_hash()
    from iobench.qualify.bound import upper_bound_s
    from iobench.qualify.plan_text import render_plan

    assert upper_bound_s(both) > upper_bound_s(model_only)  # the plan line's bound covers it
    assert "beside-ckpt" in render_plan(both, None) and "beside-ckpt" not in render_plan(
        model_only, None
    )


def test_the_save_is_sized_from_the_measured_rate_capped_by_the_step():
    loader = {"steps": 8, "epochs": 2}
    # 16 steps of 50 ms at 20 MiB/s: half the loop is 8 MiB
    got = sized("llama3-8b", loader, 0.05, 64 * MiB, 20 * MiB)
    assert got.total_bytes == pytest.approx(8 * MiB, rel=0.02) and got.at == 2
    assert sized("llama3-8b", loader, 0.05, 16 * MiB, 2000 * MiB).total_bytes <= 16 * MiB
    assert sized("llama3-8b", loader, 0.001, 64 * MiB, 1 * MiB).total_bytes >= 3.9 * MiB


def _block(au_wo=0.9, au_du=0.6, slow=0.5):
    return {
        "model": "llama3-8b", "bytes": 8 * MiB,
        "summary": {"without": {"au": au_wo, "read_bps": 100.0, "steps": 10, "seconds": 4.0},
                    "during": {"au": au_du, "read_bps": 60.0, "steps": 6, "seconds": 2.0},
                    "write_bps": 10 * MiB, "write_vs_alone": slow},
        "windows": [{"kind": "before"}, {"kind": "during"}, {"kind": "after"}],
    }  # fmt: skip


def test_the_model_over_the_interval_by_hand():
    # 100 GB written in 100 s alone, half as fast beside the loader: 200 s of a 1000 s interval
    est = {"layout": {"total_bytes": 100e9}, "stall": {"write_s": 100.0},
           "sync": {"user_interval_s": 1000.0, "best_interval_s": 5000.0}}  # fmt: skip
    m = interval_model(_block(), est, demand_bps=120.0)
    assert m["write_s"] == pytest.approx(200.0)
    assert m["au_interval"] == pytest.approx((0.9 * 800 + 0.6 * 200) / 1000)
    assert m["interval_from"] == "your --interval"
    est["sync"]["user_interval_s"] = None
    assert interval_model(_block(), est, 120.0)["interval_s"] == 5000.0
    assert interval_model(_block(), {}, 120.0) is None  # no checkpoint estimate
    assert interval_model(_block(), est, None) is None  # compute 0: no demand


@pytest.mark.parametrize(("au", "result"), [(0.9, "pass"), (0.899, "fail"), (None, "fail")])
def test_the_verdict_line_at_the_pass_line(au, result):
    run = SimpleNamespace(loader={"during_checkpoint": _block(au_du=au)})
    passed, line, item = verdict_item(run, 0.9)
    assert passed == (result == "pass") and item["result"] == result
    assert line.startswith(result.upper() + ": ") and "rests on: 6 steps in 1 during-window" in line
    assert "0.50× its rate alone" in line
    assert verdict_item(SimpleNamespace(loader={}), 0.9) is None
