"""`iobench checkpoint` under faults: a full disk in torch.save, a signal mid-save. Each: the
exit code, one line naming the cause, the result kept and marked (with its checkpoint block),
nothing left in the target, user files byte-identical."""

from __future__ import annotations

import signal

import pytest
from conftest import assert_failed_run, fill, plant

# the phases before the save briefly: 1 s per time-based phase, 32 small files per writer
CKPT = ["--model", "llama3-8b", "--scale", "1e-4", "-q", "--set", "time=1s", "--set", "files=32"]


def test_disk_full_in_torch_save(cli, tmpfs, tmp_path, trip):
    import torch

    fs = tmpfs("128m")
    planted = plant(fs / "target")
    t = trip(None, fill(fs), on=(torch, "save"), after=1)
    r = cli("checkpoint", planted.path, *CKPT, "--output", tmp_path / "out")
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "disk full", "No space left")
    names = [p["name"] for p in res["phases"]]
    assert names[:5] == ["ckpt-create", "ckpt-stat", "ckpt-open_read", "ckpt-delete",
                         "ckpt-baseline-write"]  # fmt: skip
    assert "ckpt-load" not in names
    block = res["checkpoint"]
    assert block["estimate"] is None and "no complete save and load" in block["estimate_missing"]
    assert block["measured"]["create_per_s"] > 0


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_in_torch_save(cli, planted, tmp_path, trip, sig):
    import torch

    t = trip(None, [sig], on=(torch, "save"), after=1)
    r = cli("checkpoint", planted.path, *CKPT, "--output", tmp_path / "out")
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 130, "interrupted", sig.name)
    names = [p["name"] for p in res["phases"]]
    assert "ckpt-baseline-write" in names and "ckpt-load" not in names
    assert res["checkpoint"]["estimate"] is None
