"""`iobench checkpoint` end to end (in-process, tiny scale) and its bad input."""

from __future__ import annotations

import json

import pytest

from iobench.ckpt_model import layout, rank_shard
from iobench.ckpt_spec import load_checkpoint_profile

GiB = 1 << 30
SCALE = 1e-4  # llama3-8b: 105 GiB × 1e-4 ≈ 10.8 MiB over 8 ranks


def test_checkpoint_run_measures_and_estimates(cli, planted, tmp_path):
    out = tmp_path / "out"
    r = cli(
        "checkpoint", planted.path, "--model", "llama3-8b", "--scale", SCALE, "--api", "both",
        "--mtbf", "3h", "--interval", "30m", "--restart", "5m", "--keep-last", "2",
        "--capacity", "1TiB", "--output", out, "-q",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert "Checkpoint estimates (model output" in r.out and "size ÷ slowest rank" in r.out
    res = json.loads((out / "result.json").read_text())
    names = [p["name"] for p in res["phases"]]
    for n in ("ckpt-create", "ckpt-baseline-write", "ckpt-save", "ckpt-load", "ckpt-dcp-save",
              "ckpt-dcp-load"):  # fmt: skip
        assert n in names
    spec = load_checkpoint_profile("llama3-8b").spec
    shards = [rank_shard(spec, r) for r in range(8)]
    written = sum(int(s.model_bytes * SCALE) + int(s.optimizer_bytes * SCALE) for s in shards)
    save = next(p for p in res["phases"] if p["name"] == "ckpt-save")
    rounds = len(save["extra"]["rounds"]["seconds"])  # every round saves the whole checkpoint
    assert save["files"] == 16 * rounds and save["concurrency"] == 8
    assert written <= save["bytes"] / rounds < written * 1.05  # torch.save adds its headers
    assert save["cache"] == "buffered"
    cpu = save["extra"]["client_cpu"]  # the client's own CPU, as engine phases record it
    assert cpu["cpu_s"] >= 0 and cpu["wall_s"] > 0 and 0 <= cpu["share"] <= 1
    load = next(p for p in res["phases"] if p["name"] == "ckpt-load")
    assert load["bytes"] / len(load["extra"]["rounds"]["seconds"]) == save["bytes"] / rounds
    base = next(p for p in res["phases"] if p["name"] == "ckpt-baseline-write")
    assert base["bytes"] >= written and base["files"] >= 16  # time-based: once or more
    block = res["checkpoint"]
    assert block["model"]["total_bytes"] == 105 * GiB and block["scale"] == SCALE
    assert block["measured"]["save"]["bytes"] == save["bytes"]
    est = block["estimate"]
    assert est["label"] == "estimate" and est["layout"] == layout(spec).to_dict()
    assert est["mtbf_s"] == 3 * 3600 and est["mtbf_basis"] == "given (--mtbf)"
    assert est["recovery"]["restart_s"] == 300
    assert est["sync"]["user_interval_s"] == 1800
    assert est["capacity"]["fit_capacity"] == 9 and est["capacity"]["needed_bytes"] == 315 * GiB
    assert planted.unchanged()
    assert not [p for p in planted.path.iterdir() if p.name.startswith(".iobench-2026")]
    r = cli("report", out, "--html", tmp_path / "r.html")
    assert r.code == 0 and "Checkpoint estimates (model output" in r.out
    assert "Checkpoint goodput vs interval" in (tmp_path / "r.html").read_text()
    stored = [p for p in (tmp_path / "history").rglob("*") if p.is_file()]
    assert stored and res["run_id"] in " ".join(p.name for p in stored)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "llama9"], "unknown model 'llama9'"),
        (["--model", "llama3-8b", "--scale", "0"], "--scale must be in (0, 1]"),
        (["--model", "llama3-8b", "--scale", "1.5"], "--scale must be in (0, 1]"),
        (["--model", "llama3-8b", "--mtbf", "3h", "--failure-rate", "1e-3"], "both given"),
        (["--model", "llama3-8b", "--failure-rate", "often"], "--failure-rate 'often'"),
        (["--model", "llama3-8b", "--mtbf", "soon"], "--mtbf"),
        (["--model", "llama3-8b", "--keep-last", "0"], "--keep-last"),
        (["--model", "llama3-8b", "--api", "mpi"], "api = 'mpi' is not valid"),
        (["--model", "llama3-1t", "--scale", "1"], "need about"),
        (["--model", "llama3-8b", "--repeat", "0"], "--repeat must be at least 1"),
        (["--model", "llama3-405b-16k", "--scale", "1e-6"], "16384 ranks would run as threads"),
        (["--model", "llama3-8b", "--ranks", "0"], "--ranks must be at least 1"),
        (["--model", "llama3-8b", "--restart", "-5s"], "--restart"),
        (["--model", "llama3-8b", "--capacity", "big"], "--capacity"),
        (["--model", "llama3-8b", "--capacity", "0"], "--capacity must be more than 0"),
        (["--model", "llama3-8b", "--interval", "0s"], "--interval must be a positive"),
        (["--model", "llama3-8b", "--gpus", "0"], "--gpus must be at least 1"),
        (["--model", "llama3-8b", "--history", "foo://x"], "foo"),
    ],
)
def test_bad_input_is_one_line_exit_2_nothing_written(cli, planted, tmp_path, args, message):
    out = tmp_path / "out"
    r = cli("checkpoint", planted.path, *args, "--output", out, "-q")
    assert r.code == 2, (r.out, r.err)
    assert message in r.err and len(r.err.strip().splitlines()) == 1
    assert not out.exists() and planted.unchanged()


def test_no_crc32_saves_without_torch_crc_and_restores_it(cli, planted, tmp_path):
    import torch

    out = tmp_path / "out"
    r = cli(
        "checkpoint", planted.path, "--model", "llama3-8b", "--scale", 1e-5, "--no-crc32",
        "--no-plain-write", "--output", out, "-q", "--no-history",
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    save = next(p for p in res["phases"] if p["name"] == "ckpt-save")
    load = next(p for p in res["phases"] if p["name"] == "ckpt-load")
    per_round = [p["bytes"] / len(p["extra"]["rounds"]["seconds"]) for p in (save, load)]
    assert save["params"]["crc32"] is False and per_round[0] == per_round[1]  # read back whole
    assert torch.serialization.get_crc32_options() is True  # torch's default again
    assert planted.unchanged()
