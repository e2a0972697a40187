"""``--verify`` end to end: a byte flipped on the storage between the write and the read-back
is caught, named by file and offset, and fails the run (exit 4) with nothing left behind.

No test hook in the product: a real ``iobench run`` in a subprocess, rate-limited so the test
can flip one byte of one data file (with os.pwrite) after the write phase has finished and
before the read phase reaches that block.
"""

from __future__ import annotations

import os
import subprocess

from conftest import SEQ, debris, iobench_cmd, one_line, result, sub_env, wait_for

MiB = 1 << 20
SIZE = 8 * MiB


def test_clean_verified_run_passes(cli, planted, tmp_path):
    r = cli("run", "sequential-write", planted.path, "--verify", "--set", "size=4MiB", *SEQ,
            "--output", tmp_path / "out", "-q")  # fmt: skip
    assert r.code == 0, r.err
    res = result(tmp_path / "out")
    assert res["workload"]["params"]["verify"] is True
    assert debris(planted.path) == [] and planted.unchanged()


def test_flipped_byte_is_caught_with_file_and_offset(planted, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen(
        iobench_cmd("run", "sequential-write", planted.path, "--verify",
                    "--set", f"size={SIZE}", "--set", "rate=4MiB", *SEQ, "--output", out, "-q"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=sub_env(tmp_path),
    )  # fmt: skip
    try:
        run_dir = planted.path / wait_for(lambda: debris(planted.path), timeout=60)[0]
        victim = run_dir / "seq" / "r0-w1.dat"
        files = [run_dir / "seq" / "r0-w0.dat", victim]
        # the write phase is over once both files hold all their bytes (the read is paced
        # like the write: its last block comes about 1.75 s later)
        wait_for(lambda: all(f.exists() and f.stat().st_size == SIZE for f in files), 60)
        block = SIZE - MiB  # the last 1 MiB block of the second worker's file
        fd = os.open(victim, os.O_RDWR)
        try:
            old = os.pread(fd, 1, block + 4096)
            os.pwrite(fd, bytes([old[0] ^ 0x01]), block + 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
        _stdout, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 4, err
    line = one_line(err)
    assert "r0-w1.dat" in line and f"offset {block}" in line and "payload" in line
    res = result(out)
    assert res["status"] in ("partial", "failed")
    read = next(p for p in res["phases"] if p["name"] == "seq-read")
    assert read["status"] in ("partial", "failed") and "r0-w1.dat" in read["error"]
    assert debris(planted.path) == [] and planted.unchanged()
