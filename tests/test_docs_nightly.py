"""The nightly-CI guide's script (docs/guides/nightly.sh), run end to end: two nights, then a
third on slower storage (a blkio read throttle) that must exit 1 and leave the baseline; a
changed workload exits 3 and leaves it too. Exit codes as the guide's table documents them.

The two good nights are run once for the module (``good_nights``); each third-night test works
on its own copy of their state directory (the target, empty between nights, is the same one)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import throttle

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "docs" / "guides" / "nightly.sh"
SMALL = "--set size=16MiB --set jobs=1 --set block_sizes=[] --set jobs_sweep=[] --set time=none"
# Phases this small (tens of milliseconds, mostly page cache) vary by tens of percent from one
# process to the next; the throttled night (O_DIRECT reads at 16 MiB/s, the local disk's are
# hundreds of MiB/s) is tens of times slower, so a wide threshold keeps the good nights quiet
# without hiding the regression.
WIDE = "--threshold 60%"


def _iobench(tmp_path: Path, group: Path | None = None) -> str:
    """The IOBENCH command the script runs: this checkout's iobench (in ``group`` if given)."""
    wrapper = tmp_path / ("iobench-slow" if group else "iobench")
    join = f"echo $$ > {group}/cgroup.procs\n" if group else ""
    wrapper.write_text(
        f"#!/bin/sh\n{join}PYTHONPATH={shlex.quote(str(ROOT))} "
        f'exec {shlex.quote(sys.executable)} -m iobench "$@"\n'
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def _night(target: Path, state: Path, iobench: str, **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "IOBENCH": iobench, "NIGHTLY_OPTS": SMALL, "COMPARE_OPTS": WIDE, **env}
    return subprocess.run(
        ["bash", str(SCRIPT), str(target), str(state)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def _nights(state: Path) -> list[Path]:
    return sorted((state / "nights").iterdir(), key=lambda p: p.stat().st_mtime_ns)


def test_the_guide_shows_the_script_it_tests():
    page = (ROOT / "docs" / "guides" / "nightly-ci.md").read_text()
    assert '--8<-- "docs/guides/nightly.sh"' in page  # the page includes the file itself
    for code in ("| 0 |", "| 1 |", "| 3 |"):
        assert code in page


def _two_good_nights(tmp_path: Path) -> tuple[Path, Path]:
    target, state = tmp_path / "target", tmp_path / "state"
    target.mkdir()
    iobench = _iobench(tmp_path)
    first = _night(target, state, iobench)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "first night" in first.stdout
    second = _night(target, state, iobench)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "new baseline" in second.stdout
    assert (state / "baseline.json").read_bytes() == (_nights(state)[-1] / "run" / "result.json").read_bytes()  # fmt: skip
    assert list(target.iterdir()) == []  # nothing left on the target
    return target, state


@pytest.fixture(scope="module")
def good_nights(tmp_path_factory) -> tuple[Path, Path]:
    """The target and the state directory after two good nights, run once for the module."""
    return _two_good_nights(tmp_path_factory.mktemp("nights"))


def _after_good_nights(good_nights: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """The (shared, empty) target and this test's own copy of the two nights' state."""
    target, state = good_nights
    assert list(target.iterdir()) == []
    mine = tmp_path / "state"
    shutil.copytree(state, mine, symlinks=True)  # mtimes kept: _nights orders by them
    return target, mine


@pytest.mark.slow
@pytest.mark.root
def test_a_regression_on_the_third_night_fails_and_keeps_the_baseline(tmp_path, request):
    why = throttle.why_unavailable(str(tmp_path))
    if why:
        pytest.skip(why)
    target, state = _after_good_nights(request.getfixturevalue("good_nights"), tmp_path)
    good = (state / "baseline.json").read_bytes()
    with throttle.throttled(str(target), 16 << 20, 1 << 40) as group:  # reads at 16 MiB/s: 1 s
        third = _night(target, state, _iobench(tmp_path, group))
    assert third.returncode == 1, third.stdout + third.stderr
    assert "REGRESSION" in third.stderr
    night = _nights(state)[-1]
    assert (night / "exit").read_text().strip() == "1"
    assert "seq-read" in (night / "compare.md").read_text()
    assert (state / "baseline.json").read_bytes() == good  # a bad night never becomes the baseline
    assert list(target.iterdir()) == []


@pytest.mark.slow
def test_a_changed_workload_is_not_comparable_and_keeps_the_baseline(tmp_path, good_nights):
    target, state = _after_good_nights(good_nights, tmp_path)
    good = (state / "baseline.json").read_bytes()
    third = _night(target, state, _iobench(tmp_path), WORKLOAD="checkpoint-smallfile",
                   NIGHTLY_OPTS="--set files=8 --set checkpoint_size=4MiB --set dcp=false --set time=none --set rounds=1 --set jobs=1")  # fmt: skip
    assert third.returncode == 3, third.stdout + third.stderr
    assert "not comparable" in third.stderr
    assert (state / "baseline.json").read_bytes() == good


def test_a_failed_run_passes_its_exit_status_through(tmp_path):
    state = tmp_path / "state"
    r = _night(tmp_path / "missing", state, _iobench(tmp_path), NIGHTLY_OPTS="--set nope=1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert not (state / "baseline.json").exists()
    env = {k: v for k, v in os.environ.items() if k != "NIGHTLY_OPTS"}
    r = subprocess.run(["bash", str(SCRIPT), str(tmp_path), str(state)], capture_output=True,
                       text=True, env={**env, "IOBENCH": _iobench(tmp_path), "WORKLOAD": "nope"},
                       timeout=120)  # fmt: skip
    assert r.returncode == 2 and "unbound" not in r.stderr, r.stderr  # NIGHTLY_OPTS is optional
