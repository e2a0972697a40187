"""The plan line every writing command prints on stderr before its first byte (bytes, a time
bound, the target's free space), and ``--dry-run`` on run, loader and checkpoint: the plan,
nothing written (qualify's dry run is the model)."""

from __future__ import annotations

import os

import pytest
from conftest import SMALL

from iobench.core.plan import Plan, PlannedPhase, plan_line, write_plan
from iobench.run.runner import run_workload
from iobench.spec.workload import load_workload

DRY = {
    "run": ["run", "sequential-write", "{T}"],
    "checkpoint": ["checkpoint", "{T}", "--model", "llama3-8b", "--scale", "0.0001"],
    "loader": ["loader", "{T}", "--profile", "unet3d-h100"],
}


def _files(root) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root)
                  for f in fs)  # fmt: skip


@pytest.mark.parametrize("cmd", sorted(DRY))
def test_dry_run_prints_the_plan_and_writes_nothing(cmd, cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = _files(planted.path)
    args = [a.replace("{T}", str(planted.path)) for a in DRY[cmd]]
    r = cli(*args, "--dry-run", "--output", tmp_path / "out", "--no-history")
    assert r.code == 0, r.err
    first = r.out.splitlines()[0]
    assert first.startswith(f"iobench: plan: {cmd} ")
    assert " writes " in first and " free; phases at most about " in first
    assert r.out.rstrip().endswith("nothing was written (dry run)")
    assert _files(planted.path) == before and planted.unchanged()
    assert not (tmp_path / "out").exists() and not (tmp_path / "iobench-results").exists()


def test_a_dry_run_refuses_bad_input_as_a_run_would(cli, planted, tmp_path):
    r = cli("run", "sequential-write", planted.path, "--set", "size=900TiB", "--dry-run")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "free" in r.err


def test_the_loader_dry_run_says_the_unet3d_dataset_before_writing_it(cli, planted, tmp_path):
    """The loader laid ~19 GiB out with nothing printed: its plan says so first."""
    r = cli("loader", planted.path, "--profile", "unet3d-h100", "--dry-run")
    assert r.code == 0, r.err
    assert "writes 18.4 GiB" in r.out.splitlines()[0]


def test_the_plan_line_comes_before_the_first_byte(planted, tmp_path):
    """run_workload announces once every check passed, with nothing yet on the target."""
    seen: list[tuple[str, list[str]]] = []
    before = _files(planted.path)
    overrides = dict(a.split("=", 1) for a in SMALL["sequential-write"] if "=" in a)
    wl = load_workload("sequential-write", overrides)
    outcome = run_workload(wl, str(planted.path), output=str(tmp_path / "out"), save=False,
                           announce=lambda line: seen.append((line, _files(planted.path))))  # fmt: skip
    assert outcome.error is None
    ((line, files_then),) = seen
    assert files_then == before
    assert line.startswith("iobench: plan: run sequential-write writes 8.0 MiB to ")
    assert "free; phases at most about" in line


def test_a_run_prints_the_plan_line_on_stderr(cli, planted, tmp_path):
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"], "-q",
            "--output", tmp_path / "out", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    assert r.err.splitlines()[0].startswith("iobench: plan: run sequential-write writes 8.0 MiB")


def test_write_plan_bounds_time_based_and_size_based_phases():
    p = Plan(space_bytes=1 << 30)
    p.add("w", "write", 1 << 30, "", 20.0)  # 1 GiB at the 100 MiB/s floor: 10.24 s < 20 s
    p.add("r", "read", 1 << 30, "", 20.0)
    p.add("ds", "write", 2 << 30)  # 20.48 s at the floor
    p.add("meta", "create", 0, ops=2000)  # 2 s at 1000 ops/s
    wp = write_plan("run x", p)
    assert wp.write_bytes == 3 << 30 and wp.rewrites
    assert wp.upper_s == pytest.approx(20 + 20 + 20.48 + 2)
    line = plan_line(wp, "/mnt/x", "ext4", 5 << 30)
    assert line.startswith("iobench: plan: run x writes at least 3.0 GiB (its files once; ")
    assert "to /mnt/x [ext4], 5.0 GiB free; phases at most about 62.48 s" in line
    assert "2 time-based phases at their 20 s limit" in line
    assert isinstance(wp.phases[0], PlannedPhase)


def test_the_wall_time_bound_adds_what_no_phase_times():
    """The phases' bound, plus the start-up, each phase's set-up, the data built before it is
    written and the cache drops and removals at the floor rates (``plan.untimed_s``)."""
    from iobench.core.plan import FLOOR_BUILD_BPS, FLOOR_META_OPS, PHASE_GAP_S, START_S

    p = Plan(space_bytes=1 << 30, built_bytes=200 << 20, drops=1000, inodes=500)
    p.add("w", "write", 1 << 30, "", 20.0)
    p.add("r", "read", 1 << 30, "", 20.0)
    wp = write_plan("run x", p)
    untimed = START_S + 2 * PHASE_GAP_S + (200 << 20) / FLOOR_BUILD_BPS + 1500 / FLOOR_META_OPS
    assert wp.wall_s == pytest.approx(wp.upper_s + untimed) and wp.upper_s == 40
    line = plan_line(wp, "/mnt/x", "ext4", 5 << 30)
    assert line.endswith(
        f"; wall time at most about {wp.wall_s:.2f} s (the phases, 20 s start-up, 2 s set-up a "
        "phase, 200.0 MiB of data built at 20.0 MiB/s, 1500 cache drops and removals at 1000/s)"
    )


def _wall_bound_s(err: str) -> float:
    import re

    m = re.search(r"; wall time at most about ([0-9.]+) (s|min) \(", err.splitlines()[0])
    assert m, err
    return float(m.group(1)) * (60 if m.group(2) == "min" else 1)


@pytest.mark.parametrize("cmd", ["run", "loader"])
def test_a_real_run_ends_within_its_printed_wall_time_bound(cmd, planted, tmp_path):
    """From the plan line to the process's end, as a user times it: at most the line's bound
    (the checks and imports before the line, torch's included, are done when it is printed)."""
    import subprocess
    import sys
    import time

    from test_loader import tiny_profile

    if cmd == "run":  # the shipped defaults: time-based, steady; stat/open_read pass after pass
        args = ["run", "checkpoint-smallfile", planted.path, "--set", "files=8", "--set",
                "jobs=2", "--set", "checkpoint_size=4MiB", "--set", "shards=2",
                "--set", "tensor_size=1MiB", "--set", "dcp=false"]  # fmt: skip
    else:
        args = ["loader", planted.path, "--profile", tiny_profile(tmp_path), "--epochs", "2"]
    with subprocess.Popen([sys.executable, "-m", "iobench", *map(str, args), "-q",
                           "--no-history", "--output", str(tmp_path / "out")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as proc:  # fmt: skip
        line = proc.stderr.readline()
        t0 = time.perf_counter()
        rest = proc.stderr.read()
        code = proc.wait(timeout=600)
    wall = time.perf_counter() - t0
    assert code == 0, line + rest
    assert line.startswith(f"iobench: plan: {cmd} ")
    assert wall <= _wall_bound_s(line), (line, wall)
    assert planted.unchanged()


def test_qualify_plan_line_gives_a_bound_of_every_step():
    """Its bound counts every step's phases at their bound, the loader and the start-up: more
    than the old estimate (29 s for --quick, which took 86 s), and each part raises it."""
    from dataclasses import replace

    from iobench.core.plan import phase_time_bound
    from iobench.qualify.bound import STEP_START_S, upper_bound_s
    from iobench.qualify.suite import _write_plan, plan_qualify
    from iobench.spec.workload import load_profile

    plan = plan_qualify(load_profile("retinanet-b200"), 1, budget_s=30.0, quick=True)
    wp = _write_plan(None, plan)
    line = plan_line(wp, "/t", "ext4", 1 << 40)
    assert line.startswith("iobench: plan: qualify (quick) writes at least ")
    assert "phases at most about" in line and "not a bound" not in line
    assert f"{STEP_START_S:g} s start-up per step" in line
    assert wp.bound and wp.wall_s == upper_bound_s(plan) > wp.upper_s > plan.expected_s
    from iobench.run.phases import get_generator

    phases = sum(phase_time_bound(p) for s in plan.steps
                 for p in get_generator(s.generator).plan(s.params).phases)  # fmt: skip
    assert wp.upper_s > phases  # + the loader's
    assert wp.wall_s > wp.upper_s + STEP_START_S * (len(plan.steps) + 1)
    two = replace(plan, ranks=2)  # every rank's bytes through one target
    assert upper_bound_s(two) > wp.wall_s


# -- the loader's AU against its profile's pass line (au_min) ---------------------------------


def test_the_loader_says_when_its_au_is_below_the_profiles_pass_line(cli, planted, tmp_path):
    """compute 1 ms against reads of 64 KiB samples: an AU far below a 99 % pass line."""
    from test_loader import tiny_profile

    prof = tiny_profile(tmp_path, au_min=0.99, compute_s=0.001)
    r = cli("loader", planted.path, "--profile", prof, "--output", tmp_path / "o", "-q",
            "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    import json

    ld = json.loads((tmp_path / "o" / "result.json").read_text())["loader"]
    assert ld["au_min"] == 0.99 and ld["au"] < 0.99 and ld["au_below_min"] is True
    row = next(ln for ln in r.out.splitlines() if "AU measured" in ln)
    assert "BELOW the profile's 99.0% pass line (au_min)" in row


def test_the_au_cell_meets_or_falls_below_the_pass_line():
    from iobench.report.cells import au_cell
    from iobench.result.blocks import LoaderBlock

    assert au_cell(LoaderBlock(au=0.823, au_min=0.85)).endswith(
        "BELOW the profile's 85.0% pass line (au_min)"
    )
    assert "meets the profile's 85.0%" in au_cell(LoaderBlock(au=0.9, au_min=0.85))
    assert au_cell(LoaderBlock(au=0.9)) == "90.0%"  # older results: no pass line recorded
