"""`iobench run` end to end, in-process: results, cache honesty, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SMALL

from iobench.target import RUN_DIR_PREFIX


def _run_json(cli, workload, target, out, *extra):
    r = cli("run", workload, target, "--output", out, "--json", "--quiet", *SMALL[workload], *extra)
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_sequential_write_direct_on_ext4(cli, planted, tmp_path):
    res = _run_json(cli, "sequential-write", planted.path, tmp_path / "out")
    names = [p["name"] for p in res["phases"]]
    assert names == ["seq-write", "seq-read"]
    for p in res["phases"]:
        assert p["bytes"] == 2 * (4 << 20)
        assert p["bandwidth_bps"] == pytest.approx(p["bytes"] / p["elapsed_s"])
        assert p["histogram"]["count"] == p["ops"] == p["bytes"] // (1 << 20)
        assert p["latency_s"]["p50"] <= p["latency_s"]["p99"] <= p["latency_s"]["max"]
        if res["target"]["direct_io"] is True:
            assert p["cache"] == "direct"
    assert res["schema_version"] == 1
    assert res["target"]["fs_type"]
    assert res["workload"]["spec_hash"]
    assert planted.unchanged()
    assert (tmp_path / "out" / "result.json").is_file()


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm here")
def test_tmpfs_falls_back_and_warns(cli, tmp_path):
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        res = _run_json(cli, "sequential-write", shm, tmp_path / "out")
        assert os.listdir(shm) == []
    # tmpfs refuses O_DIRECT before Linux 6.6 and accepts it after; either way it is memory
    assert res["target"]["direct_io"] in (True, "unsupported")
    assert all(p["cache"] != "direct" for p in res["phases"])
    text = " ".join(res["warnings"])
    assert "memory" in text and "O_DIRECT" in text


@pytest.mark.parametrize("workload", ["checkpoint-smallfile", "dataset-read", "random-read"])
def test_other_generators(cli, planted, tmp_path, workload):
    res = _run_json(cli, workload, planted.path, tmp_path / "out")
    names = {p["name"] for p in res["phases"]}
    expected = {
        "checkpoint-smallfile": {
            "ckpt-create", "ckpt-stat", "ckpt-open_read", "ckpt-delete",
            "ckpt-save", "ckpt-load", "ckpt-dcp-save", "ckpt-dcp-load",
        },
        "dataset-read": {
            "dataset-write", "dataset-read-r1", "dataset-shuffled-r1",
            "dataset-read-r2", "dataset-shuffled-r2",
        },
        "random-read": {"seq-write", "rand-read"},
    }[workload]  # fmt: skip
    assert expected <= names
    for p in res["phases"]:
        assert p["status"] == "ok"
        assert p["ops"] > 0
    if workload == "dataset-read":
        reads = [p for p in res["phases"] if p["name"].startswith("dataset-read")]
        assert all(p["ops"] == 32 and p["params"]["latency_per"] == "file" for p in reads)
    if workload == "checkpoint-smallfile":
        create = next(p for p in res["phases"] if p["name"] == "ckpt-create")
        assert create["ops"] == 16 and create["iops"] > 0
        save = next(p for p in res["phases"] if p["name"] == "ckpt-save")
        assert save["extra"]["seconds_per_checkpoint"] > 0
    assert planted.unchanged()


def test_repeat_keeps_every_repeat(cli, planted, tmp_path):
    res = _run_json(cli, "sequential-write", planted.path, tmp_path / "out", "--repeat", "3")
    for p in res["phases"]:
        assert len(p["repeats"]) == 3
        bws = sorted(r["bandwidth_bps"] for r in p["repeats"])
        assert p["bandwidth_bps"] == bws[1]  # the median repeat's figures
    assert planted.unchanged()


def test_table_output_and_workloads_list(cli, planted, tmp_path):
    r = cli(
        "run",
        "sequential-write",
        planted.path,
        "--output",
        tmp_path / "o",
        "-q",
        *SMALL["sequential-write"],
    )
    assert r.code == 0
    assert "seq-write" in r.out and "MiB/s" in r.out and "result:" in r.out
    r = cli("workloads")
    assert r.code == 0 and "sequential-write" in r.out and "unet3d-h100" in r.out


# -- bad input: one line on stderr, exit 2, nothing written ------------------------------------


def _bad_cases(tmp_path: Path, target: Path) -> dict[str, list[str]]:
    f = tmp_path / "afile"
    f.write_text("x")
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_text("generator = \n[params\n")
    unknown_key = tmp_path / "unknown.toml"
    unknown_key.write_text('generator = "sequential"\n[params]\nsize = "1MiB"\nblok_size = "4k"\n')
    wrong_type = tmp_path / "wrongtype.toml"
    wrong_type.write_text('generator = "sequential"\n[params]\njobs = "many"\n')
    t = str(target)
    return {
        "unknown workload": ["run", "no-such-workload", t],
        "bad size unit": ["run", "sequential-write", t, "--set", "size=12XB"],
        "zero jobs": ["run", "sequential-write", t, "--set", "jobs=0"],
        "negative jobs": ["run", "sequential-write", t, "--jobs", "-3"],
        "zero files": ["run", "dataset-read", t, "--set", "files=0"],
        "unknown --set key": ["run", "sequential-write", t, "--set", "sise=1MiB"],
        "--set without =": ["run", "sequential-write", t, "--set", "size"],
        "target missing": ["run", "sequential-write", str(tmp_path / "nope")],
        "target a file": ["run", "sequential-write", str(f)],
        "malformed TOML": ["run", str(bad_toml), t],
        "unknown TOML key": ["run", str(unknown_key), t],
        "wrong TOML type": ["run", str(wrong_type), t],
        "too big for free space": ["run", "sequential-write", t, "--set", "size=900TiB"],
        "unknown engine": ["run", "sequential-write", t, "--engine", "nope"],
        "zero repeat": ["run", "sequential-write", t, "--repeat", "0"],
        "bad --time": ["run", "sequential-write", t, "--time", "soon"],
        "unknown command": ["frobnicate"],
        "unknown option": ["run", "sequential-write", t, "--frob"],
    }


def test_bad_inputs_one_line_exit_2_nothing_written(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for label, args in _bad_cases(tmp_path, planted.path).items():
        r = cli(*args)
        assert r.code == 2, (label, r.err)
        lines = [ln for ln in r.err.splitlines() if ln.strip()]
        assert len(lines) == 1, (label, r.err)
        assert "Traceback" not in r.err
        assert r.out == "", label
        assert planted.unchanged(), label
    assert not (tmp_path / "iobench-results").exists()


def test_target_not_writable(tmp_path):
    """Permission denied: run as an unprivileged user (root would write anyway)."""
    import tempfile

    base = Path(tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    base.chmod(0o755)  # the unprivileged user must be able to reach the target
    ro = base / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    cmd = [sys.executable, "-m", "iobench", "run", "sequential-write", str(ro)]
    if os.geteuid() == 0:
        import shutil

        if not shutil.which("setpriv"):
            pytest.skip("as root, needs setpriv to drop privileges")
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    env = {**os.environ, "HOME": str(base)}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=base, timeout=120)
        if os.geteuid() == 0 and "iobench: error" not in p.stderr:
            pytest.skip(
                f"the unprivileged user cannot run this checkout: {p.stderr.strip()[-200:]}"
            )
        assert p.returncode == 2, p.stderr
        assert "not writable" in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert list(ro.iterdir()) == []
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


def test_target_not_writable_as_root_via_readonly_bind(cli, tmp_path):
    """As root, permissions do not stop writes: a read-only filesystem does."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    ro = tmp_path / "romount"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)]).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        r = cli("run", "sequential-write", ro, *SMALL["sequential-write"])
        assert r.code == 2 and "read-only" in r.err and len(r.err.strip().splitlines()) == 1
    finally:
        subprocess.run(["umount", str(ro)])


# -- signals: partial results kept and marked, nothing left behind ----------------------------


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_phase_cleans_up(planted, tmp_path, sig):
    out = tmp_path / "out"
    env = {**os.environ, "IOBENCH_HISTORY": str(tmp_path / "hist")}
    # rate-limited so the phase is certainly running when the signal lands
    proc = subprocess.Popen(
        [sys.executable, "-m", "iobench", "run", "sequential-write", str(planted.path),
         "--set", "time=none",
         "--set", "size=64MiB", "--set", "jobs=2", "--set", "rate=8MiB", "--set", "block_sizes=[]",
         "--set", "jobs_sweep=[]", "--output", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    deadline = time.time() + 60
    while time.time() < deadline:
        if any(n.startswith(RUN_DIR_PREFIX) and "2020" not in n for n in os.listdir(planted.path)):
            break
        time.sleep(0.05)
    time.sleep(1.0)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    assert planted.unchanged()
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "interrupted"
    assert res["phases"] and res["phases"][0]["status"] == "partial"
    assert 0 < res["phases"][0]["bytes"] < 2 * (64 << 20)
