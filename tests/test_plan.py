"""`iobench plan`: the starvation and checkpoint models inverted (round trips: the planned figure
meets the target in the forward model, 1 % less misses it), the plan file, bad input."""

from __future__ import annotations

import json
import math
import os

import pytest

from iobench.checkpoint import model as cm
from iobench.checkpoint.cluster import relayout
from iobench.checkpoint.inverse import forward, max_stall, plan_checkpoint
from iobench.checkpoint.spec import load_checkpoint_profile
from iobench.core.errors import UsageError
from iobench.model.inverse import au_at, min_read_bandwidth, rate_bound_bandwidth
from iobench.model.starvation_inputs import LoaderParams

MiB, GiB = 1 << 20, 1 << 30
UNET = LoaderParams(7, 146_600_628, 1, 0.323, 4, 2)


@pytest.mark.parametrize(
    "params, gpus, threshold, sd",
    [
        (UNET, 8, 0.90, 68_341_808),  # unet3d-h100: sizes spread as the profile's
        (UNET, 64, 0.90, 0),
        (LoaderParams(400, 114_688, 1, 0.224, 8, 2, decode_s_per_sample=2e-3), 16, 0.9, 0),
        (LoaderParams(4, 2 * MiB, 1, 0.05, 0, 1), 4, 0.8, MiB / 2),  # no workers: no overlap
    ],
)
def test_read_bandwidth_round_trips(params, gpus, threshold, sd):
    plan = min_read_bandwidth(params, gpus, threshold, sample_sd=sd)
    assert au_at(params, gpus, plan.bandwidth_bps, sd) >= threshold
    assert au_at(params, gpus, plan.bandwidth_bps * 0.99, sd) < threshold
    assert plan.au >= threshold > plan.au_below
    assert plan.samples_per_s == pytest.approx(plan.bandwidth_bps / params.sample_bytes)
    assert str(gpus) in plan.basis and "bisection" in plan.basis


def test_read_bandwidth_without_spread_is_the_closed_form():
    # one size, no decode: the accelerators consume threshold × their full demand (the
    # simulation's first steps fill the prefetch queue: within half a percent)
    plan = min_read_bandwidth(UNET, 64, 0.9)
    closed = 0.9 * 64 * 7 * 146_600_628 / 0.323
    assert rate_bound_bandwidth(UNET, 64, 0.9) == pytest.approx(closed)
    assert plan.bandwidth_bps == pytest.approx(closed, rel=5e-3)
    # the spread and the barrier ask for more, never less
    assert min_read_bandwidth(UNET, 64, 0.9, sample_sd=68_341_808).bandwidth_bps > closed


def test_an_au_the_decode_cannot_reach_is_refused():
    slow = LoaderParams(32, MiB, 1, 0.01, 2, 2, decode_s_per_sample=0.01)  # 0.16 s per batch
    with pytest.raises(UsageError, match="out of reach at any read bandwidth"):
        min_read_bandwidth(slow, 2, 0.9)


def _lay(name: str = "llama3-70b") -> cm.Layout:
    return cm.layout(load_checkpoint_profile(name).spec)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"interval_s": 600.0},
        {"restart_s": 120.0, "load_s": 120.0},
        {"metadata_share": 0.0},
        {"metadata_share": 0.3, "interval_s": 600.0, "restart_s": 120.0},
    ],
)
def test_write_bandwidth_round_trips(kw):
    lay, mtbf = _lay(), 3 * 3600.0
    p = plan_checkpoint("llama3-70b", lay, 0.95, mtbf, "given", **kw)
    share = kw.get("metadata_share", 0.1)
    rates = cm.Rates(p.write_bps, p.read_bps, None, p.create_per_s, p.open_per_s)
    at = forward(lay, rates, mtbf, kw.get("restart_s", 0.0), kw.get("interval_s"))
    got = at.user_goodput if "interval_s" in kw else at.best_goodput
    assert got == pytest.approx(0.95, abs=1e-9) and got >= 0.95 - 1e-12
    assert at.stall_s == pytest.approx(p.stall_s)  # the planned rates spend the stall exactly
    assert p.goodput == pytest.approx(got) and p.goodput_below < 0.95
    less = cm.Rates(p.write_bps * 0.99, p.read_bps, None, p.create_per_s, p.open_per_s)
    lower = forward(lay, less, mtbf, kw.get("restart_s", 0.0), kw.get("interval_s"))
    assert (lower.user_goodput if "interval_s" in kw else lower.best_goodput) < 0.95
    assert (p.create_per_s is None) == (share == 0)
    assert p.capacity_bytes == 2 * lay.total_bytes  # retention 1: one kept, the next written


def test_write_bandwidth_by_hand():
    # Daly's form at the optimum, solved for δ by hand at one point: G(δ) = target
    from iobench.checkpoint.daly import goodput_exact, optimum_interval_exact

    m = 3 * 3600.0
    d = max_stall(0.95, m, restart_s=120.0, load_s=60.0)
    assert goodput_exact(optimum_interval_exact(d, m), d, m, 180.0) == pytest.approx(0.95)
    assert goodput_exact(optimum_interval_exact(d * 1.01, m), d * 1.01, m, 180.0) < 0.95


def test_a_goodput_no_bandwidth_reaches_is_refused():
    with pytest.raises(UsageError, match="out of reach with an MTBF"):
        max_stall(0.99, 3600.0, restart_s=600.0, load_s=60.0)


def test_the_model_fills_the_cluster():
    spec = load_checkpoint_profile("llama3-405b").spec  # TP 8 × PP 32 × DP 2
    big, note = relayout(spec, 16384)
    assert big.arch.dp == 64 and "DP 64" in note
    assert big.total_bytes == pytest.approx(spec.total_bytes, rel=1e-2)  # + 5h per rank
    assert cm.layout(big).files > cm.layout(spec).files
    same, note = relayout(spec, 1000)  # not a multiple of TP×PP: its own layout
    assert same is spec and "not a multiple" in note


def test_plan_cli_text_and_plan_file(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ("plan", "--gpus", "8", "--profile", "resnet50", "--accelerator", "h100",
            "--model", "llama3-8b", "--goodput", "95%", "--mtbf", "3h", "--retention", "3")  # fmt: skip
    r = cli(*args, "--output", "plan.json")
    assert r.code == 0, r.err
    assert r.out.startswith("Storage plan (planned") and "plan written to plan.json" in r.out
    for label in ("dataset read bandwidth", "checkpoint write bandwidth", "capacity (free space)"):
        assert label in r.out
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["kind"] == "iobench-plan" and data["version"] == 1
    keys = [q["key"] for q in data["requirements"]]
    assert keys == ["dataset_read", "samples", "ckpt_save", "creates", "ckpt_load", "reads", "free"]
    assert all(q["basis"] and q["value"] > 0 for q in data["requirements"])
    assert data["inputs"]["profile"] == "resnet50-h100" and data["inputs"]["gpus"] == 8
    ck = data["checkpoint"]
    assert ck["goodput"] >= 0.95 - 1e-9 > ck["goodput_below"]
    assert data["capacity_bytes"] == 4 * ck["checkpoint_bytes"] + data["dataset_bytes"]
    # an existing file is replaced only with --force; --json prints the same plan
    r = cli(*args, "--output", "plan.json")
    assert r.code == 2 and "already exists" in r.err
    r = cli(*args, "--json", "--output", "plan.json", "--force")
    assert r.code == 0 and json.loads(r.out)["requirements"] == data["requirements"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "llama3-8b"], "--model needs a --goodput target"),
        (["--goodput", "95%", "--profile", "unet3d-h100"], "--goodput needs --model"),
        (["--model", "llama3-8b", "--goodput", "100%"], "--goodput must be in (0, 100 %)"),
        (["--model", "llama3-8b", "--goodput", "99.9%", "--mtbf", "1h", "--restart", "30m"],
         "out of reach with an MTBF"),
        (["--profile", "unet3d-h100", "--accelerator", "a100"], "emulates h100, not"),
        (["--profile", "nosuch"], "unknown profile"),
        (["--au", "90%"], "--au needs --profile"),
        ([], "a plan needs --profile"),
        (["--profile", "unet3d-h100", "--format", "xml"], "--format 'xml'"),
        (["--model", "llama3-8b", "--goodput", "95%", "--retention", "0"], "--retention"),
        (["--profile", "unet3d-h100", "--output", "."], "is a directory"),
        (["--model", "llama3-8b", "--goodput", "95%", "--metadata-share", "100%"],
         "--metadata-share"),
    ],
)  # fmt: skip
def test_plan_bad_input_is_one_line_exit_2(cli, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    r = cli("plan", "--gpus", "4", *args)
    assert r.code == 2, (r.out, r.err)
    assert message in r.err and len(r.err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_llama3_scale_plan_is_finite():
    # the question: write bandwidth for goodput ≥ 95 % for llama3-405b on 16,384 GPUs
    spec, _ = relayout(load_checkpoint_profile("llama3-405b").spec, 16384)
    mtbf = cm.mtbf_from_rate(cm.LLAMA3_RATE_PER_GPU_S, 16384)
    p = plan_checkpoint("llama3-405b", cm.layout(spec), 0.95, mtbf, "llama 3", restart_s=120.0)
    assert math.isfinite(p.write_bps) and p.write_bps > 100 * GiB
    assert p.goodput >= 0.95 - 1e-9 > p.goodput_below


def test_published_reliability_rows():
    """docs/validation/checkpoint-model.md, section 4: the figures the rows print."""
    from iobench.checkpoint.daly import goodput_exact, optimum_interval_exact

    day = 86_400.0
    spec = load_checkpoint_profile("llama3-405b-16k").spec
    m = 54 * day / 419
    assert m / 3600 == pytest.approx(3.09, abs=0.005)
    d = spec.total_bytes / 2e12  # Tectonic's 2 TB/s sustained
    assert d == pytest.approx(2.85, abs=0.005)
    tau = optimum_interval_exact(d, m)
    assert goodput_exact(tau, d, m, d) == pytest.approx(0.977, abs=5e-4)
    # the recovery that brings it to the published 90 %
    first_miss = next(x / 10 for x in range(1, 3000) if goodput_exact(tau, d, m, x * 6) < 0.9)
    assert first_miss == pytest.approx(15.3, abs=0.1)  # minutes of recovery per interruption
    for restart, need in ((600.0, 0.46e12), (840.0, 1.32e12)):
        p = plan_checkpoint("llama3-405b-16k", cm.layout(spec), 0.90, m, "llama 3",
                            restart_s=restart)  # fmt: skip
        assert p.write_bps / need == pytest.approx(1.0, abs=0.01)
    opt = cm.failure_rate(54, 992, 56 * day) * day
    assert opt == pytest.approx(9.72e-4, rel=1e-3)
    assert opt / (cm.LLAMA3_RATE_PER_GPU_S * day) == pytest.approx(2.05, abs=0.005)
    assert cm.LLAMA3_RATE_PER_GPU_S * 992 * 56 * day == pytest.approx(26.3, abs=0.05)


def test_plan_output_never_follows_a_link(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.txt").write_text("user data")
    os.symlink("mine.txt", tmp_path / "plan.json")
    os.symlink("absent.txt", tmp_path / "dangling.json")
    for name in ("plan.json", "dangling.json"):
        r = cli("plan", "--gpus", "2", "--profile", "unet3d-h100", "--output", name, "--force")
        assert r.code == 2 and "symbolic link" in r.err and len(r.err.strip().splitlines()) == 1
    assert (tmp_path / "mine.txt").read_text() == "user data"
    assert not (tmp_path / "absent.txt").exists()


# -- asynchronous saves: the stall is the host copy, the write runs behind and must fit --------


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"interval_s": 900.0},
        {"restart_s": 120.0, "load_s": 120.0},
        {"metadata_share": 0.0},
        {"metadata_share": 0.3, "restart_s": 60.0},
    ],
)
def test_async_write_bandwidth_round_trips(kw):
    from iobench.checkpoint.inverse import HOST_COPY_BPS

    lay, mtbf = _lay(), 3 * 3600.0
    p = plan_checkpoint("llama3-70b", lay, 0.95, mtbf, "given", host_copy_bps=HOST_COPY_BPS, **kw)
    assert p.mode == "async" and p.host_copy_bps == HOST_COPY_BPS
    assert p.stall_s == pytest.approx(lay.max_rank_bytes / HOST_COPY_BPS)  # the snapshot
    rates = cm.Rates(p.write_bps, p.read_bps, HOST_COPY_BPS, p.create_per_s, p.open_per_s)
    at = forward(lay, rates, mtbf, kw.get("restart_s", 0.0), kw.get("interval_s"))
    assert at.mode == "async" and at.in_flight_s == pytest.approx(p.write_s)
    got = at.user_goodput if "interval_s" in kw else at.best_goodput
    assert got == pytest.approx(0.95, abs=1e-9) and p.goodput == pytest.approx(got)
    assert p.goodput_below < 0.95 and not p.write_fits
    assert p.write_s <= p.interval_s  # the background write ends before the next save
    if "interval_s" not in kw:  # the best interval: the optimum for the snapshot, or the write
        opt = cm.optimum_interval_exact(p.stall_s, mtbf)
        assert p.interval_s == pytest.approx(max(opt, p.write_s))
    sync = plan_checkpoint("llama3-70b", lay, 0.95, mtbf, "given", **kw)
    assert p.write_bps < sync.write_bps / 5  # the stall is no longer the write


def test_async_write_by_hand():
    # Daly's form with the write in flight, at τ = max(τ*(s), w), solved for w at one point
    from iobench.checkpoint.daly import goodput_exact, optimum_interval_exact
    from iobench.checkpoint.inverse import max_write

    m, s = 3 * 3600.0, 0.5
    w = max_write(0.95, s, m, restart_s=120.0, load_s=60.0)
    tau = max(optimum_interval_exact(s, m), w)
    assert goodput_exact(tau, s, m, 180.0, w) == pytest.approx(0.95)
    tau2 = max(optimum_interval_exact(s, m), w * 1.01)
    assert goodput_exact(tau2, s, m, 180.0, w * 1.01) < 0.95
    # the snapshot and the recovery alone miss the target: no write bandwidth reaches it
    with pytest.raises(UsageError, match="out of reach with asynchronous saves"):
        max_write(0.99, 30.0, 3600.0, restart_s=60.0)


def test_an_async_write_fills_a_loose_interval():
    # a goodput any write that fits meets: the write takes the whole interval, no more
    lay, mtbf = _lay(), 24 * 3600.0
    p = plan_checkpoint("llama3-70b", lay, 0.5, mtbf, "given", interval_s=600.0,
                        host_copy_bps=25e9)  # fmt: skip
    assert p.write_fits and p.write_s == pytest.approx(600.0)
    assert p.write_bps == pytest.approx(lay.total_bytes / (0.9 * 600.0))
    less = cm.Rates(p.write_bps * 0.99, p.read_bps, 25e9, p.create_per_s * 0.99, p.open_per_s)
    below = forward(lay, less, mtbf, 0.0, 600.0)
    assert below.user_stall_s > p.stall_s  # 1 % slower: the next save waits for the write
    assert any("the fit bounds it" in b for b in p.basis)


def test_plan_async_cli_and_plan_file(cli, tmp_path, monkeypatch):
    from iobench.checkpoint.inverse import HOST_COPY_BPS

    monkeypatch.chdir(tmp_path)
    base = ("plan", "--gpus", "8", "--profile", "resnet50", "--accelerator", "h100",
            "--model", "llama3-8b", "--goodput", "95%", "--mtbf", "3h")  # fmt: skip
    r = cli(*base, "--async", "--output", "a.json")
    assert r.code == 0, r.err
    assert "asynchronous saves" in r.out and "snapshot stall" in r.out
    assert "dataset read + checkpoint write bandwidth" in r.out and "PCIe 5.0 x16" in r.out
    assert "not counted: the AU the data loader loses" in r.out
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["inputs"]["async"] is True and a["inputs"]["host_copy_bps"] == HOST_COPY_BPS
    ck = a["checkpoint"]
    assert ck["mode"] == "async" and ck["goodput"] >= 0.95 - 1e-9 > ck["goodput_below"]
    combined = next(f for f in a["figures"] if f["what"].startswith("dataset read + "))
    req = {q["key"]: q["value"] for q in a["requirements"]}
    assert combined["key"] is None  # not a qualify requirement
    assert combined["value"] == pytest.approx(req["dataset_read"] + req["ckpt_save"])
    r = cli(*base, "--json")
    s = json.loads(r.out)
    assert s["inputs"]["async"] is False and s["checkpoint"]["mode"] == "sync"
    assert req["ckpt_save"] < {q["key"]: q["value"] for q in s["requirements"]}["ckpt_save"]
    r = cli(*base, "--async", "--host-copy", "20GB/s", "--json")
    slow = json.loads(r.out)
    assert slow["inputs"]["host_copy_bps"] == 20e9
    assert slow["checkpoint"]["stall_s"] > ck["stall_s"]
    assert "given (--host-copy 20GB/s)" in slow["checkpoint"]["host_copy_basis"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "llama3-8b", "--goodput", "95%", "--host-copy", "20GB/s"],
         "--host-copy needs --async"),
        (["--profile", "unet3d-h100", "--async"], "--async needs --model"),
        (["--model", "llama3-8b", "--goodput", "95%", "--async", "--host-copy", "fast"],
         "--host-copy 'fast' is not a positive byte rate"),
        (["--model", "llama3-8b", "--goodput", "95%", "--async", "--host-copy", "0GB/s"],
         "--host-copy '0GB/s' is not a positive byte rate"),
    ],
)  # fmt: skip
def test_plan_async_bad_input_is_one_line_exit_2(cli, tmp_path, monkeypatch, args, message):
    test_plan_bad_input_is_one_line_exit_2(cli, tmp_path, monkeypatch, args, message)


def test_checkpoint_forward_plan_has_async_saves(cli):
    base = ("checkpoint", "--model", "llama3-70b", "--write-rate", "70GiB/s",
            "--read-rate", "90GiB/s", "--mtbf", "3h")  # fmt: skip
    r = cli(*base)
    assert r.code == 0 and "Stall, asynchronous" not in r.out
    r = cli(*base, "--async", "--json")
    est = json.loads(r.out)
    assert est["async"] is not None and est["rates"]["copy_bps"] == pytest.approx(
        63.015e9, rel=1e-4
    )
    assert est["stall"]["snapshot_s"] == pytest.approx(
        est["layout"]["max_rank_bytes"] / 63.015e9, rel=1e-4
    )
    assert any("PCIe 5.0 x16" in b for b in est["basis"])
    r = cli(*base, "--async", "--host-copy", "10GiB/s")
    assert r.code == 0 and "Stall, asynchronous" in r.out and "--host-copy 10GiB/s" in r.out
    for args, message in ((("--host-copy", "10GiB/s"), "--host-copy needs --async"),):
        r = cli(*base, *args)
        assert r.code == 2 and message in r.err and len(r.err.strip().splitlines()) == 1
    r = cli("checkpoint", "/nonexistent-target", "--model", "llama3-8b", "--async")
    assert r.code == 2 and "--async plans from given rates" in r.err


@pytest.mark.parametrize(
    "model, gib_s, restart_s, stall_s, goodput, first",
    [
        ("llama3-70b", 70, 0.0, 13.02, 0.9513, 0.9505),
        ("llama3-405b", 156, 0.0, 33.92, 0.9211, 0.9189),
        ("llama3-1t", 294, 0.0, 52.47, 0.9018, 0.8982),
        ("llama3-405b", 156, 600.0, 33.92, 0.8728, 0.8650),
    ],
)
def test_mlperf_v3_median_rows(model, gib_s, restart_s, stall_s, goodput, first):
    """docs/validation/checkpoint-model.md, section 3: the v3.0 medians on 16,384 GPUs."""
    from iobench.checkpoint.estimate import Options, plan

    spec = load_checkpoint_profile(model).spec
    rates = cm.Rates(gib_s * GiB, gib_s * GiB)
    est = plan(spec, rates, Options(accelerators=16384, restart_s=restart_s))
    assert est["stall"]["sync_s"] == pytest.approx(stall_s, abs=0.005)
    assert est["sync"]["best_goodput"] == pytest.approx(goodput, abs=5e-5)
    assert est["sync"]["best_goodput_first_order"] == pytest.approx(first, abs=5e-5)
