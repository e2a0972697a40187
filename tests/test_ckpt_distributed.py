"""`iobench checkpoint` under torchrun: the model's ranks are dealt to the processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iobench.core.errors import UsageError
from iobench.run.phases.llm_checkpoint import local_ranks
from iobench.target import RUN_DIR_PREFIX

REPO = Path(__file__).resolve().parent.parent


def test_ranks_are_dealt_to_processes():
    assert [list(local_ranks(8, 3, p)) for p in range(3)] == [[0, 1], [2, 3, 4], [5, 6, 7]]
    assert list(local_ranks(8, 1, 0)) == list(range(8))
    with pytest.raises(UsageError, match="8 ranks but torchrun started 9"):
        local_ranks(8, 9, 0)


def test_torchrun_two_processes_write_every_rank(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "user.dat").write_bytes(b"user data")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    out = tmp_path / "out"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        "-m", "iobench", "checkpoint", str(target), "--model", "llama3-8b", "--scale", "1e-4",
        "--no-plain-write", "-q", "--output", str(out), "--set", "rounds=4", "--set", "time=1s",
        "--set", "files=32",  # every phase, briefly: 4 rounds at most, 1 s per timed phase
    ]  # fmt: skip
    p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    res = json.loads((out / "result.json").read_text())
    save = next(ph for ph in res["phases"] if ph["name"] == "ckpt-save")
    # 8 ranks × (weights + optimizer state), 4 per process; each process saves its 8 files a
    # round, and ends its rounds once its own rate is steady (so the processes' counts differ)
    assert save["files"] >= 16 and save["files"] % 8 == 0
    assert save["extra"]["world"] == 2
    got = res["checkpoint"]["measured"]["save"]
    assert got["ranks"] == 8 and got["bytes"] == save["bytes"]
    assert got["rank_seconds_scope"] == "process 0's 4 ranks of 2 processes"
    assert res["checkpoint"]["estimate"]["layout"]["ranks"] == 8
    assert sorted(os.listdir(target)) == ["user.dat"]
    assert not any(n.startswith(RUN_DIR_PREFIX) for n in os.listdir(target))


def test_memory_check_counts_the_processes_on_a_host(monkeypatch):
    from iobench.run.phases.llm_checkpoint import check_memory

    monkeypatch.setattr("iobench.core.cpu.physical_memory", lambda: 8 << 30)
    check_memory(1 << 30, 4, 0.5, per_host=1)  # 2 GiB + 0.5 GiB of copy buffers: fits
    with pytest.raises(UsageError, match="4 processes × 4 ranks") as e:
        check_memory(1 << 30, 4, 0.5, per_host=4)  # 4 × 2.5 GiB > 8 GiB
    # room per process: 2 GiB − 0.5 GiB = 1.5 GiB for 2 × the state: scale 0.5 × 1.5/2
    assert "--scale 0.38 or less" in e.value.hint
