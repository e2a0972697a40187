"""`qualify --require PLAN.json`: exactly the plan's requirements, each a verdict line with
measured against required; the plan file read as hostile input (one line, exit 2)."""

from __future__ import annotations

import json
import os

import pytest

from iobench.checkpoint.cluster import PLAN_KEYS
from iobench.qualify.plan_file import MAX_PLAN_BYTES, load_plan
from iobench.qualify.verdict import REQUIREMENT_KEYS, verdict
from iobench.result import file as results


def _plan(cli, path, *extra) -> dict:
    r = cli("plan", "--gpus", "1", "--profile", "retinanet-b200", "--model", "llama3-8b",
            "--goodput", "90%", "--mtbf", "24h", "--output", path, "--json", *extra)  # fmt: skip
    assert r.code == 0, r.err
    return json.loads(path.read_text())


def _scaled(data: dict, factor: float, path) -> str:
    d = json.loads(json.dumps(data))
    for q in d["requirements"]:
        q["value"] *= factor
    path.write_text(json.dumps(d))
    return str(path)


def test_plan_keys_are_qualify_keys_of_the_same_unit():
    for key, (_what, unit) in PLAN_KEYS.items():
        assert REQUIREMENT_KEYS[key][1] == unit


def test_qualify_checks_exactly_the_plan(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    data = _plan(cli, tmp_path / "plan.json", "--async", "--host-copy", "20GB/s")
    small = _scaled(data, 1e-9, tmp_path / "small.json")  # what any storage delivers
    big = _scaled(data, 1e9, tmp_path / "big.json")  # what none does
    out = tmp_path / "q"
    r = cli("qualify", planted.path, "--quick", "--budget", "6s", "--output", out, "-q",
            "--no-history", "--require", small)  # fmt: skip
    assert r.code == 0, r.err
    run = results.load(out / "result.json")
    v = run.verdict
    assert v["result"] in ("pass", "pass (indicative)")
    keys = [i["key"] for i in v["items"]]
    assert keys == [q["key"] for q in data["requirements"]]  # no gpus/au line of the profile's
    for item in v["items"]:
        assert item["measured"] is not None and item["measured"] >= item["required"] > 0
        assert item["source"] == small
    lines = [x for x in v["reasons"] if x.startswith("PASS: ")]
    assert len(lines) == len(keys) and all(f"[the plan {small}]" in x for x in lines)
    assert all("(required >= " in x for x in lines)
    assert v["reasons"][0].startswith(f"NOTE: the requirements are the plan {small}'s")
    assert run.workload["params"]["require_plan"] == small
    # the plan's checkpoint model was measured (not the default 4-shard step), and its
    # assumptions judged: the MTBF, asynchronous saves at the plan's host copy
    assert run.workload["params"]["steps"]["checkpoint"]["model"].endswith("llama3-8b.toml")
    ck = run.checkpoint
    assert ck["model"]["name"] == "llama3-8b" and ck["estimate"]["save_mode"] == "async"
    est = ck["estimate"]
    assert est["rates"]["copy_bps"] == 20e9 and est["mtbf_s"] == 86_400
    assert est["mtbf_basis"] == f"the plan {small}'s MTBF"
    assert any(f"the plan {small}'s host copy per GPU" in b for b in est["basis"])
    summary = [x for x in v["reasons"] if x.startswith("ESTIMATE: checkpoint llama3-8b")]
    assert len(summary) == 1 and "goodput, asynchronous" in summary[0]
    assert "writes llama3-8b's own layout" in v["reasons"][0]
    # the same run against a plan it cannot meet: every line fails, measured against required
    failed = verdict(run, list(load_plan(big).requirements), None, None)
    assert failed["result"] == "fail"
    assert [i["result"] for i in failed["items"]] == ["fail"] * len(keys)
    for item, q in zip(failed["items"], data["requirements"], strict=True):
        assert item["required"] == pytest.approx(q["value"] * 1e9)
        assert item["required"] > item["measured"]


def _write(path, obj) -> str:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


GOOD = {"kind": "iobench-plan", "version": 1,
        "requirements": [{"key": "ckpt_save", "value": 1e9, "unit": "B/s"}]}  # fmt: skip


def _with(**kw):
    return {**GOOD, **kw}


def _req(**kw):
    return _with(requirements=[{"key": "ckpt_save", "value": 1e9, "unit": "B/s", **kw}])


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "cannot read it as a plan"),
        ("[" * 100_000 + "]" * 100_000, "nested more than"),
        ('{"kind": "iobench-plan", "version": 1, "requirements": [{"key": "ckpt_save", '
         '"unit": "B/s", "value": 1' + "0" * 400 + "}]}", "an integer beyond"),
        ([1, 2], "the top level must be an object"),
        (_with(kind="iobench-result"), "kind must be"),
        (_with(version=2), "plan version 2 is not 1"),
        (_with(version=True), "plan version True"),
        (_with(requirements=[]), "requirements must be a list of 1 to"),
        (_with(requirements="ckpt_save=1"), "requirements must be a list"),
        (_with(requirements=[7]), "requirements[0] must be an object"),
        (_req(key="speed"), "is not a plan requirement"),
        (_req(unit="GiB/s"), "unit of ckpt_save must be 'B/s'"),
        (_req(value=-1), "is not a figure a plan requires"),
        (_req(value="fast"), "must be a number, got str"),
        (_req(value=True), "must be a number, got bool"),
        ('{"kind": "iobench-plan", "version": 1, "requirements": [{"key": "ckpt_save", '
         '"unit": "B/s", "value": NaN}]}', "is not a figure a plan requires"),
        (_req(extra=1), "unknown field 'extra'"),
        (_req(basis=["x"]), "basis must be text"),
        (_with(requirements=GOOD["requirements"] * 2), "ckpt_save is required twice"),
        (_with(inputs={"profile": "../../etc/x"}), "inputs.profile must be a name"),
        (_with(inputs={"profile": "x.toml"}), "inputs.profile must be a name"),
        (_with(inputs={"gpus": 0}), "inputs.gpus must be a whole number"),
        (_with(inputs=[]), "inputs must be an object"),
        (_with(inputs={"model": "llama3-8b", "async": "yes"}), "inputs.async must be true or"),
        (_with(inputs={"model": "llama3-8b", "async": True}), "inputs.async needs inputs.host_copy"),
        (_with(inputs={"model": "llama3-8b", "mtbf_s": -1}), "inputs.mtbf_s must be seconds"),
        (_with(inputs={"model": "llama3-8b", "interval_s": 0}), "must be more than 0 s"),
        (_with(inputs={"model": "llama3-8b", "restart_s": "1h"}), "inputs.restart_s must be"),
    ],
)  # fmt: skip
def test_a_hostile_plan_is_one_line_exit_2(cli, planted, tmp_path, content, message):
    path = _write(tmp_path / "p.json", content)
    out = tmp_path / "q"
    r = cli("qualify", planted.path, "--quick", "--output", out, "--require", path)
    assert r.code == 2, (r.out, r.err)
    assert message in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert r.err.startswith(f"iobench: error: --require {path}: ")
    assert not out.exists() and planted.unchanged()


def test_plan_files_that_are_not_plans(cli, planted, tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (MAX_PLAN_BYTES + 1))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for path, message in ((big, "is more than a plan"), (fifo, "it is a FIFO"),
                          (tmp_path, "it is a directory"), (tmp_path / "none.json", "no such plan file (and no KEY=VALUE item)")):  # fmt: skip
        r = cli("qualify", planted.path, "--quick", "--require", path)
        assert r.code == 2 and message in r.err, (path, r.err)
        assert len(r.err.strip().splitlines()) == 1
    assert planted.unchanged()


def test_the_plan_sets_the_profile(cli, planted, tmp_path):
    path = _write(tmp_path / "p.json", _with(inputs={"profile": "unet3d-h100", "gpus": 64}))
    r = cli("qualify", planted.path, "--quick", "--dry-run", "--require", path)
    assert r.code == 0, r.err
    assert "for unet3d-h100 x 1 GPU(s)" in r.out
    r = cli("qualify", planted.path, "--quick", "--dry-run", "--require", path,
            "--profile", "resnet50-h100")  # fmt: skip
    assert r.code == 2 and "is not the plan's profile (unet3d-h100)" in r.err


def test_new_requirement_keys_parse_by_hand():
    from iobench.qualify.verdict import parse_requirements

    reqs = {r.key: r.value for r in parse_requirements("dataset_read=2GiB/s,free=1TiB")}
    assert reqs == {"dataset_read": 2.0 * (1 << 30), "free": float(1 << 40)}


def test_the_plan_sets_the_checkpoint_model(cli, planted, tmp_path, monkeypatch):
    """The plan's model is the checkpoint step (not the default 4 shards); --model or a
    checkpoint option beside it must be the plan's (else one line, exit 2, nothing run)."""
    monkeypatch.chdir(tmp_path)
    _plan(cli, tmp_path / "plan.json", "--interval", "30m")
    path = str(tmp_path / "plan.json")
    r = cli("qualify", planted.path, "--quick", "--dry-run", "--require", path)
    assert r.code == 0, r.err
    assert "llm-checkpoint" in r.out and "llama3-8b:" in r.out
    for agree in (("--model", "llama3-8b"), ("--mtbf", "24h"), ("--interval", "30m")):
        r = cli("qualify", planted.path, "--quick", "--dry-run", "--require", path, *agree)
        assert r.code == 0, (agree, r.err)
    for args, message in (
        (("--model", "llama3-70b"), "--model llama3-70b is not the plan's checkpoint model (llama3-8b)"),
        (("--mtbf", "3h"), "--mtbf is not the plan's (86400 s)"),
        (("--failure-rate", "1e-3"), "--failure-rate is not the plan's (86400 s)"),
        (("--interval", "10m"), "--interval is not the plan's (1800 s)"),
        (("--restart", "5m"), "--restart is not the plan's (none)"),
        (("--checkpoint", "1GiB"), "checkpoint model (llama3-8b) gives the checkpoint's size"),
    ):  # fmt: skip
        out = tmp_path / "q"
        r = cli("qualify", planted.path, "--quick", "--require", path, "--output", out, *args)
        assert r.code == 2 and message in r.err, (args, r.err)
        assert len(r.err.strip().splitlines()) == 1 and not out.exists()
    assert planted.unchanged()
    # a plan without a checkpoint model keeps the plain checkpoint step
    sync = _write(tmp_path / "p.json", _with(inputs={"profile": "unet3d-h100"}))
    r = cli("qualify", planted.path, "--quick", "--dry-run", "--require", sync)
    assert r.code == 0 and "llm-checkpoint" not in r.out


def test_settle_model_takes_the_plans_assumptions(tmp_path):
    from iobench.checkpoint.estimate import Options
    from iobench.checkpoint.spec import load_checkpoint_profile
    from iobench.qualify.plan_file import settle_model

    inputs = {"model": "llama3-8b", "gpus": 64, "mtbf_s": 7200, "interval_s": 900,
              "restart_s": 120, "async": True, "host_copy_bps": 3e10}  # fmt: skip
    plan = load_plan(_write(tmp_path / "p.json", _with(inputs=inputs)))
    model, opts = settle_model(plan, None, Options(), None)
    assert model == "llama3-8b" and opts.save_mode == "async" and opts.copy_bps == 3e10
    assert (opts.mtbf_s, opts.interval_s, opts.restart_s, opts.accelerators) == (7200, 900, 120, 64)
    assert opts.mtbf_basis.startswith("the plan ") and "host copy" in opts.copy_basis
    # the model given as its TOML file names the same model: agreed, and the file is kept
    path = str(load_checkpoint_profile("llama3-8b").path)
    assert settle_model(plan, path, Options(), None)[0] == path
    # no plan, or a plan without a model: as given
    assert settle_model(None, "llama3-70b", None, None) == ("llama3-70b", None)
    bare = load_plan(_write(tmp_path / "b.json", GOOD))
    assert settle_model(bare, "llama3-70b", Options(), None)[0] == "llama3-70b"
