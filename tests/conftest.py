"""Shared fixtures: in-process CLI calls and a target with planted user files."""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from iobench.cli.app import main

# Small sizes for every generator, so CLI runs take a second or two.
# The shipped workloads' phases are time-based, each ending once steady (up to 20 s): tests run
# them size-based, their files moved once, as before that default.
SIZE_BASED = ["--set", "time=none"]


def without_run_notes(err: str) -> list[str]:
    """stderr's lines less the two a run adds around its own: the plan line before its first
    byte and the line naming its indicative phases at the end."""
    return [ln for ln in err.splitlines()
            if not ln.startswith("iobench: plan: ") and " phases indicative (" not in ln]  # fmt: skip


SMALL = {
    "sequential-write": [
        "--set", "size=4MiB", "--set", "jobs=2", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]",
        *SIZE_BASED,
    ],
    "checkpoint-smallfile": [
        "--set", "files=8", "--set", "jobs=2", "--set", "file_sizes=[4KiB,64KiB]",
        "--set", "checkpoint_size=4MiB", "--set", "shards=2", "--set", "tensor_size=1MiB",
        *SIZE_BASED,  # one pass a phase: the shipped 20 s until steady is for real storage
    ],
    "dataset-read": [
        "--set", "files=32", "--set", "file_size=32KiB", "--set", "size_sd=8KiB",
        "--set", "readers=[1,2]", "--set", "jobs=2", *SIZE_BASED,
    ],
    "random-read": ["--set", "size=4MiB", "--set", "jobs=1", "--set", "rand_jobs=2", *SIZE_BASED],
}  # fmt: skip


@pytest.fixture(autouse=True, scope="session")
def _private_history(tmp_path_factory):
    """No test (nor a subprocess it starts) may touch the user's history."""
    old = os.environ.get("IOBENCH_HISTORY")
    os.environ["IOBENCH_HISTORY"] = str(tmp_path_factory.mktemp("history-session"))
    yield
    if old is None:
        os.environ.pop("IOBENCH_HISTORY", None)
    else:
        os.environ["IOBENCH_HISTORY"] = old


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run ``iobench ARGS`` in-process; history goes to a temp dir, never the user's."""
    monkeypatch.setenv("IOBENCH_HISTORY", str(tmp_path / "history"))

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a hash of its bytes (dirs and links marked)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = Path(dirpath, d)
            out[str(p.relative_to(root))] = "link" if p.is_symlink() else "dir"
        for f in filenames:
            p = Path(dirpath, f)
            if p.is_symlink():
                out[str(p.relative_to(root))] = "link->" + os.readlink(p)
            else:
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


PLANTED_LOOKALIKE = ".iobench-20200101T000000Z-abcdef"  # not created by the run under test


def plant(target: Path):
    """User files in ``target`` (including a look-alike of iobench's run directories); the
    returned object's ``unchanged()`` says whether they are all still byte-identical."""
    target.mkdir(parents=True, exist_ok=True)
    (target / "data.bin").write_bytes(os.urandom(10000))
    (target / "notes.txt").write_text("user notes\n")
    old = target / PLANTED_LOOKALIKE
    old.mkdir()
    (old / "keep.dat").write_bytes(b"not yours")
    (target / "sub").mkdir()
    (target / "sub" / "file").write_text("x")
    before = snapshot(target)

    class Planted:
        path = target

        @staticmethod
        def unchanged() -> bool:
            return snapshot(target) == before

    return Planted


@pytest.fixture
def planted(tmp_path):
    """A target directory holding user files, including look-alikes of iobench's own names."""
    return plant(tmp_path / "target")


# -- a stand-in fio ---------------------------------------------------------------------------

FIO_STUB = """#!/bin/sh
if [ "$1" = "--version" ]; then echo fio-3.33; exit 0; fi
out=""
for a in "$@"; do case "$a" in --output=*) out="${a#--output=}";; esac; done
"""


@pytest.fixture
def fake_fio(tmp_path, monkeypatch):
    """Put a shell script named fio first on PATH ; returns a function taking its body."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()

    def install(body: str) -> Path:
        from iobench.core import tools

        path = bindir / "fio"
        path.write_text(FIO_STUB + body + "\n")
        path.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
        tools.fio_version.cache_clear()
        return path

    yield install
    from iobench.core import tools

    tools.fio_version.cache_clear()


@pytest.fixture
def runner(tmp_path):
    """A PhaseRunner (posix engine) over a run directory in ``tmp_path``, removed after."""
    from iobench.engines.posix import PosixEngine
    from iobench.run.runner import PhaseRunner
    from iobench.target import StopFlag, create_run_dir, remove_run_dir, resolve

    target = resolve(str(tmp_path))
    create_run_dir(target, "test-run")
    yield PhaseRunner(target, PosixEngine(), StopFlag())
    remove_run_dir(target)


# -- one moto server for the session ------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint():
    """A local ``moto_server`` (S3) on a free loopback port, started once for the whole session:
    defined here, not in a test module, since a fixture imported into several modules is a
    separate fixture in each (one server per module)."""
    exe = shutil.which("moto_server") or str(Path(sys.executable).parent / "moto_server")
    if not os.path.exists(exe):
        pytest.skip("moto_server is not installed (pip install 'moto[server]')")
    pytest.importorskip("s3fs")
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("moto_server did not start")
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
