"""TARGET swapped for a link in the middle of a phase, for every writer that is not the posix
engine's create loop (``test_output_rule`` holds that one): fio, torch.save, torch DCP.

Each swap leaves, behind the link, a tree of directories shaped like this run's, so that a
file opened by a path resolved again through TARGET would be created there; every writer
opens through the run directory's descriptor instead, and nothing appears behind the link."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import SEQ, have, plant, snapshot, swap_for_lookalike


def _setup(tmp_path: Path, files: bool = False) -> tuple[Path, Path, object]:
    par, victim = tmp_path / "par", tmp_path / "victim"
    plant(par / "T")
    victim.mkdir()
    return par, victim, swap_for_lookalike(par, victim, files)


@pytest.mark.skipif(not have("fio"), reason="fio is not installed (apt-get install fio)")
def test_fio_started_after_a_swap_writes_nothing_behind_the_link(cli, tmp_path, trip):
    """The swap between the phase's check and fio's start: fio's working directory is the
    run directory through the held descriptor (/proc/self/fd/N), not TARGET's name."""
    par, victim, action = _setup(tmp_path)
    t = trip("seq-write", action, on=(subprocess, "Popen"), after=1)
    r = cli("run", "sequential-write", par / "T", "--engine", "fio", "--set", "size=4MiB", *SEQ,
            "--output", tmp_path / "out", "-q", "--no-history")  # fmt: skip
    assert t.fired and r.code == 4, r.err  # the next phase (seq-read) refuses
    assert snapshot(victim) == action.before()  # type: ignore[attr-defined]
    assert "renamed or replaced during the run" in r.err


CKPT = ["--set", "metadata=false", "--set", "checkpoint_size=1MiB", "--set", "shards=1",
        "--set", "time=none", "--set", "tensor_size=64KiB"]  # fmt: skip


def test_torch_save_after_a_swap_writes_nothing_behind_the_link(cli, tmp_path, trip):
    """The swap inside the first of three rounds of saves, the user's files behind the link
    named like the shards: the later rounds' files are opened (O_TRUNC) beneath the run
    directory's descriptor (``PhaseRunner.create_file``), and the user's are not emptied."""
    torch = pytest.importorskip("torch")
    par, victim, action = _setup(tmp_path, files=True)
    t = trip(None, action, on=(torch, "save"), after=1)
    r = cli("run", "checkpoint-smallfile", par / "T", *CKPT, "--set", "dcp=false",
            "--set", "rounds=3", "--output", tmp_path / "out", "-q", "--no-history")  # fmt: skip
    assert t.fired and r.code == 4, r.err  # the run stops after the phase (record)
    assert "renamed or replaced during the run" in r.err
    assert snapshot(victim) == action.before()  # type: ignore[attr-defined]


def test_dcp_after_a_swap_writes_nothing_behind_the_link(cli, tmp_path, trip):
    """DCP's FileSystemWriter takes a path: it gets the held one (/proc/self/fd/N/...)."""
    pytest.importorskip("torch")
    dcp = pytest.importorskip("torch.distributed.checkpoint")
    par, victim, action = _setup(tmp_path)
    t = trip(None, action, on=(dcp, "save"), after=1)
    r = cli("run", "checkpoint-smallfile", par / "T", *CKPT, "--set", "dcp=true",
            "--set", "rounds=1", "--output", tmp_path / "out", "-q", "--no-history")  # fmt: skip
    assert t.fired and r.code == 4, r.err  # the run stops after the phase (record)
    assert "renamed or replaced during the run" in r.err
    assert snapshot(victim) == action.before()  # type: ignore[attr-defined]
