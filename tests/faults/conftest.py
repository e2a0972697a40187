"""Shared helpers of the fault-injection suite: small filesystems, signals sent from inside a
chosen phase, stand-in tools, and the checks every fault case makes (exit code, one line on
stderr, the result kept and marked, nothing left in the target, user files byte-identical).

pytest imports every ``conftest.py`` outside a package under the one module name ``conftest``,
so this file replaces ``tests/conftest.py`` in ``sys.modules`` once it is loaded; it re-exports
what the other test modules import from there (``SMALL``, ``snapshot``) so that either order of
collection works.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from iobench.target import RUN_DIR_PREFIX

_spec = importlib.util.spec_from_file_location(
    "_iobench_tests_conftest", Path(__file__).resolve().parent.parent / "conftest.py"
)
_base = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules[_spec.name] = _base  # dataclasses look their module up there
_spec.loader.exec_module(_base)  # type: ignore[union-attr]
SMALL: dict[str, list[str]] = _base.SMALL
snapshot = _base.snapshot
CliResult = _base.CliResult

ROOT = Path(__file__).resolve().parents[2]
PLANTED_LOOKALIKE = _base.PLANTED_LOOKALIKE
plant = _base.plant
without_run_notes = _base.without_run_notes

# a sequential-write run small enough for a second, with no sweeps
SEQ = ["--set", "jobs=2", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--set", "time=none"]


# -- the checks every case makes ------------------------------------------------------------


PLAN_LINE = "iobench: plan: "


def one_line(err: str) -> str:
    """The single non-empty line on stderr (asserts there is exactly one, and no traceback),
    besides the plan line a run prints before its first byte (``iobench: plan: ``)."""
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(PLAN_LINE)]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{err}"
    assert "Traceback" not in err
    assert lines[0].startswith("iobench: error: "), lines[0]
    return lines[0]


def debris(target: Path) -> list[str]:
    """Run directories (or anything named like one) left in ``target``, the planted one aside."""
    return sorted(
        n for n in os.listdir(target) if n.startswith(RUN_DIR_PREFIX) and n != PLANTED_LOOKALIKE
    )


def result(out: Path) -> dict[str, Any]:
    return json.loads((Path(out) / "result.json").read_text())


def assert_failed_run(
    r: Any, out: Path, planted: Any, code: int, *words: str, status: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Exit ``code``, one line naming ``words``, result.json kept and marked, no debris."""
    assert r.code == code, r.err
    line = one_line(r.err)
    for w in words:
        assert w in line, (w, line)
    res = result(out)
    allowed = status or (
        ("interrupted",) if code == 130 else ("failed", "partial") if code == 4 else ()
    )
    assert res["status"] in allowed, res["status"]
    assert res["error"], "the result names the error"
    assert debris(planted.path) == []
    assert planted.unchanged()
    return res


def no_temp_files(directory: Path) -> bool:
    return not [p for p in Path(directory).rglob("*") if p.name.endswith(".tmp")]


# -- a small filesystem -----------------------------------------------------------------------


def _mount_tmpfs(where: Path, options: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    where.mkdir(parents=True, exist_ok=True)
    p = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if p.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")


def _umount(where: Path) -> None:
    for _ in range(50):
        if subprocess.run(["umount", str(where)], capture_output=True).returncode == 0:
            return
        time.sleep(0.1)  # a process of the test may still hold a file there
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


@pytest.fixture
def tmpfs(tmp_path) -> Iterator[Callable[..., Path]]:
    """``tmpfs(size="128m", ro=False)``: a fresh tmpfs mounted under tmp_path, unmounted after."""
    mounted: list[Path] = []

    def mount(size: str = "128m", name: str = "mnt") -> Path:
        where = tmp_path / name
        _mount_tmpfs(where, f"size={size}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        _umount(where)


def remount_ro(where: Path) -> None:
    p = subprocess.run(["mount", "-o", "remount,ro", str(where)], capture_output=True, text=True)
    if p.returncode:
        pytest.skip(f"cannot remount read-only: {p.stderr.strip()}")


def wait_for(pred: Callable[[], Any], timeout: float = 30.0, step: float = 0.01) -> Any:
    """Poll ``pred`` until it returns something true; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {pred}")


def run_dirs(target: Path) -> list[Path]:
    return [target / n for n in debris(target)]


class Background(threading.Thread):
    """A daemon thread whose exception (an assertion) is re-raised by ``result()``."""

    def __init__(self, fn: Callable[[], Any]):
        super().__init__(daemon=True)
        self.fn = fn
        self.error: BaseException | None = None
        self.value: Any = None

    def run(self) -> None:
        try:
            self.value = self.fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            self.error = e

    def result(self, timeout: float = 60.0) -> Any:
        self.join(timeout)
        if self.error is not None:
            raise self.error
        return self.value


# -- signals sent from inside a chosen phase ---------------------------------------------------


def first_time(marker, note: bytes = b"") -> bool:
    """Create ``marker`` (with ``note`` in it) unless it exists: True for the one caller, in
    any process, that created it."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    try:
        os.write(fd, note)
    finally:
        os.close(fd)
    return True


class Trip:
    """Do ``action`` once, from inside the phase whose name starts with ``phase`` (any phase
    when None), on the ``after``-th call of a patched function: send signals to this (the
    test's) process, fill the filesystem, remove the run directory...

    The current phase is tracked by wrapping ``PhaseRunner.execute``; worker threads and forked
    worker processes both call the patched function, and a marker file made with O_EXCL makes
    the action happen once whichever of them gets there first. Signals sent from a worker land
    asynchronously in the main thread, as a user's Ctrl-C does.
    """

    def __init__(self, monkeypatch, tmp_path: Path, phase: str | None, action, after: int = 2):
        import iobench.run.runner as runner_mod

        self.phase = phase
        self.action = action
        self.after = after
        self.calls = 0
        self.marker = str(tmp_path / f"trip-{time.monotonic_ns()}")
        self.current = [""]
        real_execute = runner_mod.PhaseRunner.execute
        trip = self

        def execute(self_, spec):
            trip.current[0] = spec.name
            try:
                return real_execute(self_, spec)
            finally:
                trip.current[0] = ""

        monkeypatch.setattr(runner_mod.PhaseRunner, "execute", execute)

    def armed(self) -> bool:
        return self.phase is None or self.current[0].startswith(self.phase)

    def maybe_fire(self) -> None:
        if not self.armed():
            return
        self.calls += 1
        if self.calls < self.after:
            return
        # (a forked worker may be the one firing)
        if first_time(self.marker, self.current[0].encode()):
            self.action()

    @property
    def fired(self) -> bool:
        return os.path.exists(self.marker)

    @property
    def fired_in(self) -> str:
        """The phase the action happened in."""
        with open(self.marker) as f:
            return f.read()

    def wrap(self, monkeypatch, owner: Any, name: str) -> None:
        """Fire from inside ``owner.name`` (e.g. ``os.pwrite``) when armed."""
        real = getattr(owner, name)
        trip = self

        def wrapper(*a, **k):
            trip.maybe_fire()
            return real(*a, **k)

        monkeypatch.setattr(owner, name, wrapper)


def swap_for_lookalike(par: Path, victim: Path, files: bool = False) -> Callable[[], None]:
    """An action: mv par/T par/T.old; ln -s victim par/T, after making in ``victim`` a tree
    of directories shaped like this run's (``.iobench-<run_id>/...``), so that a create by a
    path resolved through TARGET would succeed there; with ``files``, each of the run's files
    has a namesake there holding the user's bytes (an open with O_TRUNC by that path would
    empty it). ``action.before()`` is the victim's snapshot at the swap (kept in a file:
    a forked worker may be the one swapping): nothing may differ from it afterwards."""
    kept = victim.parent / f"{victim.name}-at-the-swap.json"

    def action() -> None:
        name = debris(par / "T")[0]
        for d, _dirs, names in os.walk(par / "T" / name):
            rel = os.path.relpath(d, par / "T" / name)
            (victim / name / rel).mkdir(parents=True, exist_ok=True)
            for n in names if files else ():
                (victim / name / rel / n).write_bytes(os.urandom(1000))
        kept.write_text(json.dumps(snapshot(victim)))
        os.rename(par / "T", par / "T.old")
        os.symlink(victim, par / "T")

    action.before = lambda: json.loads(kept.read_text())  # type: ignore[attr-defined]
    return action


def send(*signals: int) -> Callable[[], None]:
    """An action: send ``signals`` to this process (50 ms apart)."""
    pid = os.getpid()

    def action() -> None:
        for k, s in enumerate(signals):
            if k:
                time.sleep(0.05)
            os.kill(pid, s)

    return action


def fill(fs_root: Path) -> Callable[[], None]:
    """An action: fill the filesystem at ``fs_root`` to the last byte (outside the target)."""

    def action() -> None:
        try:
            with open(fs_root / "filler", "ab") as f:
                chunk = b"\0" * (1 << 20)
                while True:
                    f.write(chunk)
                    f.flush()
        except OSError as e:
            assert e.errno == errno.ENOSPC, e

    return action


@pytest.fixture
def trip(monkeypatch, tmp_path):
    """``trip(phase, action, on=(os, "pwrite"), after=2)`` -> a :class:`Trip`, armed."""

    def make(phase, action, on=(os, "pwrite"), after: int = 2) -> Trip:
        if isinstance(action, list):
            action = send(*action)
        t = Trip(monkeypatch, tmp_path, phase, action, after)
        t.wrap(monkeypatch, *on)
        return t

    return make


class MainThreadTrip:
    """A progress callback that sends signals from the main thread once the named phase has
    made progress: each signal's handler runs at once, so two signals are two handler calls
    (the second raises in the middle of the engine's coordination loop)."""

    def __init__(self, phase: str, signals):
        self.phase = phase
        self.signals = list(signals)
        self.name = ""
        self.fired = False

    def factory(self, quiet: bool = True):
        from iobench.engines.base import Progress

        trip = self

        class P(Progress):
            def start(self, name, total_bytes, total_ops):
                trip.name = name

            def update(self, done_bytes, done_ops):
                if trip.fired or not trip.name.startswith(trip.phase):
                    return
                if done_bytes or done_ops:
                    trip.fired = True
                    for s in trip.signals:
                        os.kill(os.getpid(), s)

        return P


def children() -> set[int]:
    """Live child processes of this process (zombies included: they are not reaped yet)."""
    me = os.getpid()
    out = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me:
            out.add(int(d))
    return out


def wait_no_new_children(before: set[int], timeout: float = 10.0) -> set[int]:
    deadline = time.monotonic() + timeout
    left = children() - before
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = children() - before
    return left


# -- subprocess runs ------------------------------------------------------------------------


def iobench_cmd(*args: Any) -> list[str]:
    return [sys.executable, "-m", "iobench", *[str(a) for a in args]]


def sub_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "IOBENCH_HISTORY": str(tmp_path / "history"), **extra}
    # no empty entry: '' is the working directory, which Python cannot resolve once deleted
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def have(tool: str) -> bool:
    return shutil.which(tool) is not None
