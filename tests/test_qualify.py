"""qualify: plan, dry run, a small real run with a verdict, report and history."""

from __future__ import annotations

import json
import re
import time

import pytest
from test_loader import tiny_profile

from iobench.core.errors import UsageError
from iobench.qualify.suite import plan_qualify
from iobench.qualify.verdict import parse_requirements
from iobench.spec.workload import load_profile


def test_dry_run_writes_nothing(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("qualify", planted.path, "--quick", "--dry-run")
    assert r.code == 0, r.err
    for needle in (
        "sequential",
        "checkpoint",
        "dataset",
        "loader",
        "free space needed",
        "expected time",
    ):
        assert needle in r.out
    assert "nothing was written" in r.out
    assert planted.unchanged()
    assert not (tmp_path / "iobench-results").exists()
    assert not (tmp_path / "history").exists()


def test_plan_fits_budget_and_space():
    prof = load_profile("unet3d-h100")
    quick = plan_qualify(prof, 8, budget_s=30, quick=True, free_bytes=50 << 30)
    full = plan_qualify(prof, 8, budget_s=180, quick=False, free_bytes=50 << 30)
    assert quick.expected_s < full.expected_s
    assert quick.space_bytes <= full.space_bytes
    tight = plan_qualify(prof, 8, budget_s=180, quick=False, free_bytes=2 << 30)
    seq = tight.steps[0]
    assert seq.params["size"] * 8 <= (2 << 30) // 10 + (8 << 20) * 8
    assert quick.spec_hash() != full.spec_hash()


def test_requirements_parse():
    reqs = parse_requirements("read=5GiB/s,creates=20k/s,au=90%,gpus=8")
    assert [(r.key, r.value) for r in reqs] == [
        ("read", 5 << 30),
        ("creates", 20_000),
        ("au", 0.9),
        ("gpus", 8),
    ]
    for bad in ("read", "speed=1", "read=fast", "creates=5GiB/s", "gpus=many"):
        with pytest.raises(UsageError):
            parse_requirements(bad)


def _bound_s(line: str) -> float:
    """The seconds of a plan line's wall-time bound, ``wall time at most about 86.53 s`` /
    ``4.0 min``."""
    m = re.search(r"wall time at most about ([0-9.]+) (s|min) ", line)
    assert m, line
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1)


def test_small_qualify_fails_an_impossible_requirement(cli, planted, tmp_path):
    """... and took no longer than its plan line's bound (the wall time measured here); into
    a pipe (no terminal: no bars) it says each phase as it finishes. A tiny profile (2 workers,
    64 KiB samples): the requirements are the storage's; the default profile's run is the
    tutorial's (tests/test_doc_outputs.py) and test_ckpt_qualify's."""
    out = tmp_path / "q"
    prof = tiny_profile(tmp_path, files=48)
    t0 = time.perf_counter()
    r = cli(
        "qualify", planted.path, "--quick", "--budget", "6s", "--output", out,
        "--require", "read=1PiB/s,stats=1/s", "--profile", prof,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    assert r.code == 1, r.err
    line = r.err.splitlines()[0]
    assert line.startswith("iobench: plan: qualify (quick) ") and "not a bound" not in line
    assert _bound_s(line) >= wall, (line, wall)
    assert "verdict: FAIL" in r.out and "report:" in r.out
    res = json.loads((out / "result.json").read_text())
    v = res["verdict"]
    assert v["result"] == "fail"
    assert any(x.startswith("FAIL: best sequential read") for x in v["reasons"])
    assert any(x.startswith("PASS: stats per second") for x in v["reasons"])
    names = {p["name"] for p in res["phases"]}
    assert {"seq-write", "seq-read", "rand-read", "ckpt-create", "ckpt-save"} <= names
    done = re.findall(r"^iobench: phase (\S+) done: .+ in .+$", r.err, flags=re.M)
    assert done[:3] == ["seq-write", "seq-read", "seq-write-bs128k"], r.err
    assert {"rand-read", "ckpt-create", "ckpt-stat"} <= set(done)
    assert any(n.startswith("dataset-shuffled-r") for n in names)
    assert res["loader"]["au"] > 0 and res["loader"]["predicted_au"] is not None
    assert res["estimate"]["au_at"] and "basis" in res["estimate"]
    save = next(p for p in res["phases"] if p["name"] == "ckpt-save")
    assert "estimate" in save["extra"]["full_checkpoint_estimate"]["basis"]
    html = (out / "report.html").read_text()
    assert "FAIL" in html and "<svg" in html
    assert planted.unchanged()
    hist = cli("history", "list")
    assert res["run_id"] in hist.out


@pytest.mark.parametrize(
    "args",
    [
        ["--gpus", "0"],
        ["--profile", "nope"],
        ["--require", "speed=9"],
        ["--budget", "1s"],
        ["--budget", "later"],
        ["--checkpoint", "big"],
    ],
)
def test_qualify_bad_input(cli, planted, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    r = cli("qualify", planted.path, "--quick", "--dry-run", *args)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert planted.unchanged()


def test_plan_gives_phases_time_to_reach_steady_state():
    from iobench.qualify.suite import QUICK_DATASET_LIMIT_S, dataset_phase_limit
    from iobench.result.steady import DEFAULT_STEADY

    prof = load_profile("retinanet-b200")
    need = DEFAULT_STEADY.ramp_s + DEFAULT_STEADY.dur_s  # 2.5 s
    full = plan_qualify(prof, 1, budget_s=60, quick=False, free_bytes=50 << 30)
    seq, _, ds = full.steps
    assert seq.params["time"] >= 3.0 > need
    assert ds.params["time"] == dataset_phase_limit(60, 8, False) == 4.0
    assert dataset_phase_limit(180, 8, False) == pytest.approx(0.35 * 180 / 8)
    assert dataset_phase_limit(3600, 8, False) == 30.0
    quick = plan_qualify(prof, 1, budget_s=30, quick=True, free_bytes=50 << 30)
    assert quick.steps[2].params["time"] == QUICK_DATASET_LIMIT_S > need
    assert "until steady or 3.0 s" in quick.steps[2].note
    # a shorter --quick budget shrinks the quick limits in proportion, to MIN_PHASE_S at least
    from iobench.qualify.bound import upper_bound_s
    from iobench.qualify.suite import QUICK_CKPT_LIMIT_S
    from iobench.result.steady import MIN_PHASE_S

    assert quick.steps[1].params["time"] == QUICK_CKPT_LIMIT_S == 2.0
    half = plan_qualify(prof, 1, budget_s=15, quick=True, free_bytes=50 << 30)
    assert half.steps[2].params["time"] == QUICK_DATASET_LIMIT_S / 2
    assert half.steps[1].params["time"] == MIN_PHASE_S == QUICK_CKPT_LIMIT_S / 2
    small = plan_qualify(prof, 1, budget_s=6, quick=True, free_bytes=50 << 30)
    assert small.steps[1].params["time"] == small.steps[2].params["time"] == MIN_PHASE_S
    assert upper_bound_s(small) < upper_bound_s(quick)  # the plan's bound says so


def test_phase_lines_say_each_phase_as_it_finishes():
    """Where stderr is no terminal, qualify's progress is one line per phase, written (and
    flushed) when the phase closes; ``-q`` prints none."""
    import io

    from iobench.cli.commands.common import progress_factory
    from iobench.cli.progress import PhaseLines, TqdmProgress

    clock = iter([10.0, 12.0]).__next__
    buf = io.StringIO()
    p = PhaseLines(clock=clock, file=buf)
    p.start("seq-write", 4 << 20, None)
    p.update(2 << 20, 2)
    assert buf.getvalue() == ""
    p.close()
    assert buf.getvalue() == "iobench: phase seq-write done: 2.0 MiB in 2.00 s (1.0 MiB/s)\n"
    p.close()  # a second close says nothing more
    assert buf.getvalue().count("\n") == 1
    assert progress_factory(False, lines=True) is PhaseLines  # pytest's stderr is no terminal
    assert isinstance(progress_factory(True, lines=True)(), TqdmProgress)  # -q: silent
