"""`iobench checkpoint` end to end (in-process, tiny scale) and its bad input."""

from __future__ import annotations

import json

import pytest

from iobench.checkpoint.model import layout, rank_shard
from iobench.checkpoint.spec import load_checkpoint_profile

GiB = 1 << 30
SCALE = 1e-4  # llama3-8b: 105 GiB × 1e-4 ≈ 10.8 MiB over 8 ranks
# every phase, briefly: 3 rounds at most, 1 s per time-based phase, 32 small files per writer
FAST = ("--set", "rounds=3", "--set", "time=1s", "--set", "files=32")
# the save and load alone (the tests of their files and bytes): no small-file phases
SAVE_LOAD = ("--set", "metadata=false", "--set", "rounds=3")


def test_checkpoint_run_measures_and_estimates(cli, planted, tmp_path):
    out = tmp_path / "out"
    r = cli(
        "checkpoint", planted.path, "--model", "llama3-8b", "--scale", SCALE, "--api", "both",
        "--mtbf", "3h", "--interval", "30m", "--restart", "5m", "--keep-last", "2",
        "--capacity", "1TiB", "--output", out, "-q", *FAST,
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
    assert block["model"]["total_bytes"] == spec.total_bytes and block["scale"] == SCALE
    assert spec.total_bytes == 112_425_623_552  # DLIO's arithmetic (test_ckpt_layout), not 105 GiB
    assert block["measured"]["save"]["bytes"] == save["bytes"]
    est = block["estimate"]
    assert est["label"] == "estimate" and est["layout"] == layout(spec).to_dict()
    assert est["mtbf_s"] == 3 * 3600 and est["mtbf_basis"] == "given (--mtbf)"
    assert est["recovery"]["restart_s"] == 300
    assert est["sync"]["user_interval_s"] == 1800
    assert (
        est["capacity"]["fit_capacity"] == 9
        and est["capacity"]["needed_bytes"] == 3 * spec.total_bytes
    )
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
        (["--model", "llama3-8b", "--set", "rounds"], "--set 'rounds' is not KEY=VALUE"),
        (["--model", "llama3-8b", "--set", "rounds=many"], "rounds"),
        (["--model", "llama3-8b", "--set", "no_such_key=1"], "no_such_key"),
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
        "--no-plain-write", "--output", out, "-q", "--no-history", *SAVE_LOAD,
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    save = next(p for p in res["phases"] if p["name"] == "ckpt-save")
    load = next(p for p in res["phases"] if p["name"] == "ckpt-load")
    per_round = [p["bytes"] / len(p["extra"]["rounds"]["seconds"]) for p in (save, load)]
    assert save["params"]["crc32"] is False and per_round[0] == per_round[1]  # read back whole
    assert torch.serialization.get_crc32_options() is True  # torch's default again
    assert planted.unchanged()


TINY_ARCH = """description = "tiny: TP 2 x PP 2 x DP 2, ZeRO-1"
layers = 3
hidden_size = 256
ffn_hidden_size = 512
attention_heads = 8
kv_heads = 2
vocab_size = 1024
tp = 2
pp = 2
dp = 2
zero_stage = 1
"""


def test_architecture_model_writes_dlio_layout(cli, planted, tmp_path):
    # 3 layers over 2 stages: stage 0 holds layers 0 (embedding), 1, 2; stage 1 holds 3, 4
    # (head), 5 (norm): data-parallel rank 0 (ranks 0..3) saves 3 layer files each, every
    # rank one optimizer file: 4 × 3 + 8 = 20 files, the uneven shards the layout gives
    model = tmp_path / "tiny.toml"
    model.write_text(TINY_ARCH)
    out = tmp_path / "out"
    r = cli(
        "checkpoint", planted.path, "--model", model, "--scale", 1.0, "--api", "torch",
        "--no-plain-write", "--output", out, "-q", "--no-history", *SAVE_LOAD,
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    save = next(p for p in res["phases"] if p["name"] == "ckpt-save")
    spec = load_checkpoint_profile(str(model)).spec
    rounds = len(save["extra"]["rounds"]["seconds"])  # every round saves the whole checkpoint
    assert save["files"] == 20 * rounds and layout(spec).files == 20
    assert save["concurrency"] == 8
    per_round = save["bytes"] / rounds
    assert spec.total_bytes <= per_round < spec.total_bytes * 1.1  # + torch.save headers
    # MLPerf's figure: the bytes over the slowest rank's time
    slowest = max(save["extra"]["rank_seconds"])
    assert save["elapsed_s"] >= slowest * 0.999
    assert save["bytes"] / save["elapsed_s"] <= save["bytes"] / slowest * 1.001
    shards = [rank_shard(spec, r) for r in range(8)]
    assert len({s.total_bytes for s in shards}) > 1  # uneven
    assert [s.files for s in shards] == [4, 4, 4, 4, 1, 1, 1, 1]


def test_plan_from_given_rates_no_target(cli, tmp_path, monkeypatch):
    import math

    monkeypatch.chdir(tmp_path)
    r = cli(
        "checkpoint", "--model", "llama3-405b", "--write-rate", "156GiB/s", "--read-rate",
        "200GiB/s", "--gpus", "16384", "--mtbf", "3h", "--restart", "5m",
    )  # fmt: skip
    assert r.code == 0, r.err
    assert r.out.startswith("Checkpoint plan (planned from the given rates, not measured)")
    total = load_checkpoint_profile("llama3-405b").spec.total_bytes  # 5,292.2 GiB
    stall = total / (156 * GiB)  # 33.92 s
    rec = total / (200 * GiB) + 300
    assert "33.92 s synchronous" in r.out and "1544 files" in r.out
    r = cli(
        "checkpoint", "--model", "llama3-405b", "--write-rate", "156GiB/s", "--read-rate",
        "200GiB/s", "--mtbf", "3h", "--restart", "5m", "--interval", "30m", "--json",
    )  # fmt: skip
    est = json.loads(r.out)
    assert est["label"] == "plan" and est["stall"]["sync_s"] == pytest.approx(stall)
    assert est["recovery"]["total_s"] == pytest.approx(rec)
    m = 3 * 3600
    by_hand = 1800 / (m * math.exp(rec / m) * (math.exp((1800 + stall) / m) - 1))
    assert est["sync"]["user_goodput"] == pytest.approx(by_hand, rel=1e-12)
    assert "planned from the given rates (no I/O)" in est["basis"][0]
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    "args, message",
    [
        (["--write-rate", "156GiB/s"], "planning needs --read-rate"),
        (["--read-rate", "1GiB/s"], "planning needs --write-rate"),
        ([], "planning needs --write-rate"),
        (["--write-rate", "fast", "--read-rate", "1GiB/s"], "--write-rate 'fast' is not a"),
        (["--write-rate", "20k/s", "--read-rate", "1GiB/s"], "not a positive byte rate"),
        (["--write-rate", "0GiB/s", "--read-rate", "1GiB/s"], "not a positive byte rate"),
        (["--write-rate", "1GiB/s", "--read-rate", "1GiB/s", "--scale", "0.1"], "--scale with"),
        (["--write-rate", "1GiB/s", "--read-rate", "1GiB/s", "--mtbf", "x"], "--mtbf"),
        (["--write-rate", "1GiB/s", "--read-rate", "1GiB/s", "--ranks", "0"], "--ranks"),
        (["--write-rate", "1GiB/s", "--read-rate", "1GiB/s", "--set", "rounds=3"], "--set with"),
    ],
)
def test_plan_bad_input_is_one_line_exit_2(cli, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    r = cli("checkpoint", "--model", "llama3-8b", *args)
    assert r.code == 2, (r.out, r.err)
    assert message in r.err and len(r.err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_plan_refuses_a_target_with_rates(cli, planted, tmp_path):
    r = cli("checkpoint", planted.path, "--model", "llama3-8b", "--write-rate", "1GiB/s",
            "--read-rate", "1GiB/s")  # fmt: skip
    assert r.code == 2 and "TARGET with --write-rate/--read-rate" in r.err
    assert planted.unchanged()


def test_subset_runs_eight_ranks_of_the_full_layout(cli, planted, tmp_path):
    # MLPerf's subset mode: llama3-405b's ranks 0..7 (tensor-parallel ranks of stage 0,
    # data-parallel rank 0): layers 0..4 and an optimizer shard each, 48 files
    out = tmp_path / "out"
    r = cli(
        "checkpoint", planted.path, "--model", "llama3-405b", "--subset", 8, "--scale", 1e-6,
        "--api", "torch", "--no-plain-write", "--output", out, "-q", "--no-history", *SAVE_LOAD,
    )  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((out / "result.json").read_text())
    save = next(p for p in res["phases"] if p["name"] == "ckpt-save")
    rounds = len(save["extra"]["rounds"]["seconds"])  # every round saves the whole subset
    assert save["files"] == 48 * rounds and save["concurrency"] == 8
    assert 1 <= rounds <= 3  # --set rounds=3, and --set metadata=false: no small-file phases
    assert [p["name"] for p in res["phases"]] == ["ckpt-save", "ckpt-load"]
    spec = load_checkpoint_profile("llama3-405b").spec
    written = sum(rank_shard(spec, r).scaled(1e-6).total_bytes for r in range(8))
    per_round = save["bytes"] / rounds
    assert written <= per_round < written + 48 * 2048  # + torch.save's headers per file
    block = res["checkpoint"]
    assert block["subset"] == 8 and block["model"]["total_bytes"] == spec.total_bytes
    assert any("MLPerf subset mode: ranks 0..7 of the 512-rank" in b
               for b in block["estimate"]["basis"])  # fmt: skip
    assert planted.unchanged()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--subset", "0"], "--subset must be at least 1"),
        (["--subset", "9"], "--subset 9 exceeds the model's 8 ranks"),
        (["--subset", "4", "--ranks", "4"], "--subset and --ranks both given"),
    ],
)
def test_subset_bad_input(cli, planted, tmp_path, args, message):
    out = tmp_path / "out"
    r = cli("checkpoint", planted.path, "--model", "llama3-8b", *args, "--output", out, "-q")
    assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1
    assert not out.exists() and planted.unchanged()
