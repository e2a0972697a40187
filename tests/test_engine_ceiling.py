"""The posix engine knows its own ceiling (engines.ceiling): measured in memory once per
configuration, and a phase that reaches SHARE of it is called engine-bound, naming --engine fio.
Fake ceilings make the judgement testable; the probe itself runs for real, asserting no speed."""

from __future__ import annotations

import os

import pytest
from engine_contract import MiB

from iobench.engines import ceiling
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.posix import PosixEngine
from iobench.target import StopFlag


def fake(iops: float, op: str = "randread", workers: int = 1) -> ceiling.Ceiling:
    return ceiling.Ceiling(iops, op, "threads", workers, 4096, 0.2)


@pytest.fixture
def measured(tmp_path):
    """A small random-read phase run by the posix engine, and its result."""
    eng, ctx = PosixEngine("threads"), EngineContext(str(tmp_path), StopFlag())
    files = (FileSpec("a.dat", MiB),)
    eng.run(PhaseSpec("w", "write", files, block_size=MiB), ctx)
    phase = PhaseSpec("rr", "randread", files, block_size=4096, size=256 * 4096)
    res = eng.run(phase, ctx)
    assert res.status == "ok" and res.iops > 0 and not res.warnings
    return eng, ctx, phase, res


def test_a_phase_near_the_ceiling_is_called_engine_bound(measured, monkeypatch):
    eng, ctx, phase, res = measured
    monkeypatch.setattr(ceiling, "_MEMO", {})
    monkeypatch.setattr(ceiling, "measure", lambda run, ctx, op, mode, w: fake(res.iops / 0.9))
    eng.review(phase, res, ctx)
    (warning,) = res.warnings
    assert warning.startswith("engine-bound: ") and "90% of what the posix engine" in warning
    assert "rerun with --engine fio" in warning and "memfd" in warning
    recorded = res.extra["engine_ceiling"]
    assert recorded["iops"] == pytest.approx(res.iops / 0.9) and recorded["op"] == "randread"
    assert recorded["per_op_us"] == pytest.approx(1e6 / recorded["iops"], rel=1e-3)


def test_a_phase_far_below_it_says_nothing(measured, monkeypatch):
    eng, ctx, phase, res = measured
    monkeypatch.setattr(ceiling, "_MEMO", {})
    monkeypatch.setattr(ceiling, "measure", lambda run, ctx, op, mode, w: fake(res.iops * 10))
    eng.review(phase, res, ctx)
    assert res.warnings == [] and "engine_ceiling" not in res.extra


def test_the_share_is_the_stated_boundary(measured):
    _, _, _, res = measured
    below = fake(res.iops / ceiling.SHARE * 1.001)
    ceiling.judge(res, below)
    assert res.warnings == []
    # just at the share (not exactly res.iops / SHARE: that product can round one ulp over)
    ceiling.judge(res, fake(res.iops / ceiling.SHARE * (1 - 1e-9)))
    assert len(res.warnings) == 1
    ceiling.judge(res, None)  # not measurable here: nothing claimed
    assert len(res.warnings) == 1


def test_what_is_held_against_the_ceiling(measured):
    _, _, phase, res = measured
    assert ceiling.applies(phase, res)
    probe = ceiling.probe_spec("randread", 1, "5")
    assert not ceiling.applies(probe, res)  # the probe is not judged by itself
    meta = PhaseSpec("st", "stat", phase.files)
    assert not ceiling.applies(meta, res)
    res.status = "partial"
    assert not ceiling.applies(phase, res)


def test_the_probe_runs_in_memory_once_per_configuration(tmp_path, monkeypatch):
    """The probe really runs (the engine's own loop on a memfd reached through /proc), leaves
    nothing in the run directory and no descriptor open, and is measured once."""
    if not hasattr(os, "memfd_create") or not os.path.isdir("/proc/self/fd"):
        pytest.skip("no memfd or /proc here: no ceiling is claimed")
    eng, ctx = PosixEngine("threads"), EngineContext(str(tmp_path), StopFlag())
    monkeypatch.setattr(ceiling, "_MEMO", {})
    calls = []
    real = ceiling.measure

    def counted(*args):
        calls.append(args[2:])
        return real(*args)

    monkeypatch.setattr(ceiling, "measure", counted)
    fds = len(os.listdir("/proc/self/fd"))
    phase = PhaseSpec("rr", "randread", (FileSpec("a.dat", MiB),), block_size=4096)
    c = ceiling.ceiling_for(eng.run, ctx, phase, "threads")
    assert c is not None and c.iops > 0 and c.workers == 1 and c.op == "randread"
    assert c.seconds >= ceiling.PROBE_S * 0.9 and "measured in this run" in c.basis
    assert ceiling.ceiling_for(eng.run, ctx, phase, "threads") is c  # once
    w = ceiling.ceiling_for(eng.run, ctx, PhaseSpec("w", "write", phase.files), "threads")
    assert w is not None and w.op == "write"
    assert calls == [("randread", "threads", 1), ("write", "threads", 1)]
    assert os.listdir(tmp_path) == [] and len(os.listdir("/proc/self/fd")) == fds


def test_no_memory_file_no_ceiling(tmp_path, monkeypatch):
    monkeypatch.setattr(ceiling, "_PROC_FD", str(tmp_path / "no-proc"))
    ctx = EngineContext(str(tmp_path), StopFlag())
    assert ceiling.measure(PosixEngine().run, ctx, "randread", "threads", 1) is None


def test_the_runner_judges_after_the_phases_cpu_sample(runner, monkeypatch):
    """Through the runner (as every command runs phases): the warning is in the kept result,
    and the probe's time is in none of the phase's figures (its client CPU is taken before)."""
    monkeypatch.setattr(ceiling, "_MEMO", {})
    order = []
    monkeypatch.setattr(
        ceiling,
        "measure",
        lambda run, ctx, op, mode, w: order.append("probe") or fake(1.0),
    )
    real_usage = __import__("iobench.core.cpu", fromlist=["usage"]).usage

    def usage(*args, **kw):
        order.append("cpu")
        return real_usage(*args, **kw)

    monkeypatch.setattr("iobench.run.runner.cpu.usage", usage)
    files = (FileSpec("a.dat", MiB),)
    runner.execute(PhaseSpec("w", "write", files, block_size=MiB))
    res = runner.execute(PhaseSpec("rr", "randread", files, block_size=4096, size=64 * 4096))
    assert order == ["cpu", "probe", "cpu", "probe"]  # write, then randread: each after
    assert any(w.startswith("engine-bound") for w in res.warnings)
    assert runner.results[-1] is res and "engine_ceiling" in res.extra
