"""Run a workload against a target: plan, check, create the run directory, execute the
generator's phases through an engine, keep every result, and always clean up.
"""

from __future__ import annotations

import dataclasses
import errno
import fcntl
import os
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import cpu
from . import results as results_mod
from .coordinator import Coordinator, SingleProcess
from .engines.base import EngineContext, PhaseSpec, Progress
from .engines.registry import get_engine
from .errors import (
    DistributedError,
    EngineError,
    Interrupted,
    IobenchError,
    StoreError,
    UsageError,
)
from .phases import get_generator
from .plan import Plan
from .results import PhaseResult, RunResult
from .spec import Workload, check_duration, check_memory
from .stats import mark_steady
from .target import (
    DIRECT_ALIGN,
    SignalGuard,
    StopFlag,
    Target,
    apply_layout,
    check_direct_alignment,
    check_free_space,
    client_cache,
    create_run_dir,
    drop_file_cache,
    fs_class,
    make_url_dirs,
    phase_layout,
    remove_run_dir,
    resolve,
    scrub,
)
from .units import format_bytes

ProgressFactory = Callable[[], Progress]


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):  # pragma: no cover
        return 0


@dataclass
class PhaseRunner:
    """What a generator uses to run phases: engine, target, cache policy, collected results."""

    target: Target
    engine: Any
    stop: StopFlag
    progress_factory: ProgressFactory = Progress
    raw_dir: str | None = None
    results: list[PhaseResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # the other clients (barriers, gathers, the ranks' aggregate); one client: SingleProcess
    coord: Coordinator = field(default_factory=SingleProcess)
    # a time-based phase ends once steady by this (stats.SteadyCriterion); None: at its time
    steady: Any = None
    _fallback: Any = field(default=None, repr=False)  # posix engine for phases the engine refuses

    @property
    def run_dir(self) -> str:
        return self.target.run_dir

    @property
    def rank(self) -> int:
        return self.coord.rank

    @property
    def world(self) -> int:
        return self.coord.world

    def warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)

    def direct(self, requested: bool) -> bool:
        """O_DIRECT when asked for and the target takes it; otherwise warn and fall back."""
        if not requested:
            return False
        if self.target.kind == "fsspec":  # URL targets: nothing to bypass on this side
            self.warn(
                f"direct=true is unsupported on {self.target.fs_type}:// targets (no O_DIRECT, "
                "no client page cache): requests went through fsspec as usual"
            )
            return False
        if not getattr(self.engine, "direct_io", True):
            self.warn(
                f"direct=true is unsupported by the {self.engine.name} engine (no O_DIRECT): "
                "reads and writes went through the page cache, dropped before reads where the "
                "kernel can"
            )
            return False
        if fs_class(self.target.fs_type) == "memory":
            # tmpfs may accept O_DIRECT (Linux >= 6.6), but there is no storage behind it
            self.warn(
                f"{self.target.fs_type} keeps files in memory: O_DIRECT bypasses no cache there, "
                "so reads and writes were buffered and measure memory, not storage"
            )
            return False
        if self.target.direct_io is True:
            return True
        self.warn(
            f"O_DIRECT unavailable on {self.target.fs_type} ({self.target.direct_reason}): "
            "fell back to buffered I/O with the page cache dropped where the kernel can"
        )
        return False

    def cache_state(self, direct: bool) -> str:
        """How reads of this target relate to the page cache, honestly."""
        if direct:
            return "direct"
        if self.target.kind == "fsspec":  # object stores: no page cache between us and them
            return "none"
        if fs_class(self.target.fs_type) == "memory":
            self.warn(
                f"{self.target.fs_type} keeps files in memory: read figures are memory speed, "
                "not storage"
            )
            return "buffered"
        why = client_cache(self.target.fs_type)
        if why:
            self.warn(
                f"{why}: buffered reads on {self.target.fs_type} may come from the client's "
                "memory (cache state client-cache); direct=true reads the storage"
            )
            return "client-cache"
        return "dropped"

    def mkdirs(self, relpaths: list[str]) -> None:
        if self.target.kind == "fsspec":  # object stores have no directories
            make_url_dirs(self.target, relpaths)
            return
        for d in sorted(set(relpaths)):
            os.makedirs(os.path.join(self.run_dir, d), exist_ok=True)

    def drop_cache(self, spec: PhaseSpec) -> None:
        if self.target.kind == "fsspec":  # no page cache to drop for object stores
            return
        for f in spec.files:
            drop_file_cache(os.path.join(self.run_dir, f.path))

    def execute(self, spec: PhaseSpec) -> PhaseResult:
        """Run one phase through the engine; keep its result even when it fails."""
        self.stop.check()
        if self.steady is not None and spec.time_s and spec.steady is None:
            spec = dataclasses.replace(spec, steady=self.steady)
        reading = spec.op in ("read", "randread", "open_read", "stat")
        if reading and not spec.direct:
            self.drop_cache(spec)  # outside the timed region
        ctx = EngineContext(
            run_dir=self.run_dir,
            stop=self.stop,
            progress=self.progress_factory(),
            direct_supported=self.target.direct_io is True,
            direct_align=self.target.direct_align or DIRECT_ALIGN,
            fs_type=self.target.fs_type,
            storage_options=self.target.storage_options,  # fsspec URL targets (endpoint)
            raw_dir=self.raw_dir,
        )
        self.coord.before_phase(spec)
        engine, why = self._engine_for(spec)
        cpu0 = cpu.sample()  # the client's own CPU over the phase (iobench.cpu)
        suspended = self.stop.suspended
        try:
            res = engine.run(spec, ctx)
        except (EngineError, Interrupted) as e:  # a second signal may carry figures too
            partial = getattr(e, "partial", None)
            if partial is not None:
                partial.extra["client_cpu"] = cpu.usage(cpu0, cpu.sample())
                _note_suspension(partial, self.stop.suspended - suspended)
                self._finish(spec, partial, engine, why)
            raise
        res.extra["client_cpu"] = cpu.usage(cpu0, cpu.sample())
        _note_suspension(res, self.stop.suspended - suspended)
        self._finish(spec, res, engine, why)
        res = self.results[-1] = self.coord.after_phase(spec, res)
        self.stop.check()
        return res

    def record(self, res: PhaseResult) -> PhaseResult:
        """Keep a result measured outside an engine (e.g. torch.save checkpoints)."""
        if res.cache == "dropped" and client_cache(self.target.fs_type):
            res.cache = "client-cache"  # dropped from the kernel only
        mark_steady(res, self.steady)
        res = self.coord.after_phase(None, res)
        self.results.append(res)
        return res

    def _engine_for(self, spec: PhaseSpec) -> tuple[Any, str | None]:
        """The engine for this phase, and why it is not the chosen one (None when it is).

        A phase the chosen engine cannot express faithfully (fio has no whole-file reads or
        mdtest-like metadata ops) runs with the posix engine, with a warning, rather than
        measuring something else under the same name.
        """
        check = getattr(self.engine, "why_not", None)
        if not self.engine.supports(spec.op):
            why = f"the {self.engine.name} engine does not run {spec.op!r} phases"
        else:
            why = check(spec) if check else None
        if why is None:
            return self.engine, None
        if self.target.kind != "posix" or getattr(self.engine, "name", "") == "posix":
            raise EngineError(f"phase {spec.name}: {why}")
        if self._fallback is None:
            from .engines.posix import PosixEngine

            self._fallback = PosixEngine()
        self.warn(f"{why}: such phases ran with the posix engine")
        return self._fallback, why

    def _finish(
        self, spec: PhaseSpec, res: PhaseResult, engine: Any = None, why: str | None = None
    ) -> None:
        if spec.op in ("read", "randread", "open_read") and not spec.direct:
            res.cache = self.cache_state(False)
        elif spec.direct:
            res.cache = "direct"
        elif res.cache == "dropped" and client_cache(self.target.fs_type):
            res.cache = "client-cache"  # written, then dropped from the kernel only
        if spec.files:
            layout = phase_layout(self.target, os.path.join(self.run_dir, spec.files[0].path))
            if layout:
                res.extra["layout"] = layout
        res.extra["engine"] = getattr(engine or self.engine, "name", "?")
        mark_steady(res, spec.steady or self.steady)
        if why:
            res.extra["engine_fallback"] = why
            res.warnings.append(f"ran with the posix engine: {why}")
        self.results.append(res)


def _note_suspension(res: PhaseResult, times: int) -> None:
    """A phase during which the process was stopped (Ctrl-Z, SIGSTOP) and resumed measured
    the pause as well: its figures say so."""
    if times > 0:
        res.warnings.append(
            "the process was suspended (SIGTSTP/SIGSTOP) and resumed during this phase: its "
            "elapsed time includes the pause, so its bandwidth and latencies are understated"
        )


def plan_workload(workload: Workload) -> Plan:
    """The generator's plan, once the parameters are known to fit in this host's memory."""
    check_memory(workload.params, physical_memory())
    check_duration(workload.params)
    return get_generator(workload.generator).plan(workload.params)


def merge_repeats(
    repeats: list[list[PhaseResult]], in_flight: list[PhaseResult] | None = None
) -> list[PhaseResult]:
    """One PhaseResult per phase name, every repeat kept in ``repeats``.

    Each figure of :data:`results.REPEAT_FIGURES` is its median over the completed repeats (the
    one rule, :func:`results.metric_value`), with n, min-max and CV in ``spread``. What cannot
    be a median (volume, time, histogram, series, per-worker spread) comes from the repeat whose
    bandwidth is the median, named in ``extra["detail_repeat"]``.

    ``in_flight``: the phases of a repeat cut short (an interruption, a failure). They are
    listed in each phase's ``repeats`` marked ``in_flight``, but the figures come from the
    completed repeats; a phase that no completed repeat reached is the in-flight one itself.
    """
    if len(repeats) == 1 and not in_flight:
        return repeats[0]
    by_name: dict[str, list[PhaseResult]] = {}
    flying: dict[str, list[PhaseResult]] = {}
    order: list[str] = []
    for rep in [*repeats, in_flight or []]:
        for p in rep:
            if p.name not in order:
                order.append(p.name)
    for rep in repeats:
        for p in rep:
            by_name.setdefault(p.name, []).append(p)
    for p in in_flight or []:
        flying.setdefault(p.name, []).append(p)
    merged = []
    for name in order:
        runs = by_name.get(name, [])
        cut = flying.get(name, [])
        if runs:
            ranked = sorted(range(len(runs)), key=lambda i: runs[i].bandwidth_bps or runs[i].iops)
            detail = ranked[len(ranked) // 2]
            chosen = runs[detail]
        else:
            detail, chosen = len(cut) - 1, cut[-1]
        out = PhaseResult.from_dict(chosen.to_dict())
        out.repeats = [
            {
                "repeat": i,
                "bandwidth_bps": p.bandwidth_bps,
                "iops": p.iops,
                "bandwidth_stonewall_bps": p.bandwidth_stonewall_bps,
                "elapsed_s": p.elapsed_s,
                "bytes": p.bytes,
                "ops": p.ops,
                "latency_s": p.latency_s,
                "status": p.status,
                **({"in_flight": True, "error": p.error} if i >= len(runs) else {}),
            }
            for i, p in enumerate([*runs, *cut])
        ]
        out.spread = {}
        for key in results_mod.REPEAT_FIGURES:
            summary = results_mod.metric_summary(out, key)
            if summary is None:
                continue
            out.spread[key] = summary.to_dict()
            head, _, tail = key.partition(".")
            if tail:
                getattr(out, head)[tail] = summary.median
            else:
                setattr(out, head, summary.median)
        out.extra = {**out.extra, "detail_repeat": detail}
        merged.append(out)
    return merged


def describe_command() -> str:
    # scrub: a URL's user:password@ (ftp://, sftp://) must not reach result.json
    return scrub("iobench " + " ".join(shlex.quote(a) for a in sys.argv[1:]))


def new_result(command: str | None = None, run_id: str | None = None) -> RunResult:
    return RunResult(
        run_id=run_id or results_mod.new_run_id(),
        command=command or describe_command(),
        started_at=results_mod.now_iso(),
        host=results_mod.host_info(),
    )


def output_dir_for(output: str | None, run_id: str) -> Path:
    if output is not None:
        if not str(output).strip():  # --output "$UNSET": not a request for the default
            raise UsageError("--output is empty", hint="pass a directory, or leave --output out")
        return Path(output)
    return Path("iobench-results") / run_id


def check_output_dir(path: Path) -> None:
    """Refuse an output directory we cannot write, before anything else is written.

    A symlink to a directory is followed (as a TARGET link is); a dangling one, a file, a
    FIFO or a device in its place, a directory that is not writable (or on a read-only
    filesystem) and one that already holds a result.json (even a dangling link of that name)
    are bad input.
    """
    path = Path(path)
    hint = "pass a writable --output DIR"
    if os.path.lexists(path):
        if not path.exists():
            raise UsageError(
                f"--output {path} is a symbolic link to {os.readlink(path)}, which does not exist",
                hint="pass a directory, or a link to one",
            )
        if not path.is_dir():
            kind = results_mod.file_kind(os.stat(path).st_mode) or "a file"
            raise UsageError(
                f"cannot write results to {path}: it is {kind}, not a directory", hint=hint
            )
        probe = path
    else:
        probe = path.parent
        while not os.path.lexists(probe) and probe != probe.parent:
            probe = probe.parent
        if not probe.is_dir():
            raise UsageError(
                f"cannot write results to {path}: {probe} is not a directory", hint=hint
            )
    if not os.access(probe, os.W_OK | os.X_OK):
        ro = results_mod.on_read_only_fs(probe)
        why = "is on a read-only filesystem" if ro else "is not writable by this user"
        raise UsageError(f"cannot write results to {path}: {probe} {why}", hint=hint)
    if os.path.lexists(path / "result.json"):
        raise UsageError(f"{path} already holds a result.json", hint="pass a new --output DIR")


class OutputClaim:
    """A run's hold on its output directory, from its input checks until its result is saved.

    ``acquire`` checks the directory, creates it when missing and takes an exclusive flock on
    it: a second run given the same ``--output`` is refused (exit 2) before it writes anything,
    rather than replacing the first one's result.json. The kernel drops the lock when the
    process dies, even by SIGKILL, so a killed run never blocks the directory. ``release``
    drops it and removes the directories it created when they are still empty (a refused or
    unsaved run leaves nothing behind). Under torchrun only rank 0, the writer, claims.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        self.fd: int | None = None
        self.made: list[Path] = []
        self.warning: str | None = None

    def acquire(self) -> None:
        check_output_dir(self.path)
        self.made = _missing_dirs(self.path)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            self.release()
            raise UsageError(
                f"cannot write results to {self.path}: {e.strerror or e}",
                hint="pass a writable --output DIR",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            self.release()
            raise UsageError(
                f"another iobench run is writing its result to {self.path}",
                hint="pass a new --output DIR (each run needs its own)",
            ) from None
        except OSError as e:  # a filesystem without flock: result.json is still never replaced
            self.warning = (
                f"the output directory {self.path} could not be locked ({e.strerror or e}): "
                "two runs given it at once are not told apart until one saves its result"
            )
        self.fd = fd
        if os.path.lexists(self.path / "result.json"):  # saved while we waited for the lock
            self.release()
            raise UsageError(
                f"{self.path} already holds a result.json", hint="pass a new --output DIR"
            )

    def release(self) -> None:
        if _CLAIMS.get(self.path) is self:
            del _CLAIMS[self.path]
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        for d in self.made:  # deepest first; those still empty are ours and unused
            _remove_if_empty(d)
        self.made = []


# The claims this process holds, by output directory (one at most per directory: a second
# acquire of the same directory is refused, even in the same process).
_CLAIMS: dict[Path, OutputClaim] = {}


def claim_output_dir(path: Path) -> OutputClaim:
    """``check_output_dir``, then hold the directory (OutputClaim) until the run's result is
    saved (``RunSession.outcome``), its owner releases it, or the process ends."""
    claim = OutputClaim(path)
    claim.acquire()
    _CLAIMS[claim.path] = claim
    return claim


def release_output_dir(path: Path) -> None:
    """Release this process's claim on ``path``, if it holds one."""
    claim = _CLAIMS.get(Path(path))
    if claim is not None:
        claim.release()


@dataclass
class RunOutcome:
    run: RunResult
    result_path: Path | None
    error: IobenchError | None = None


@dataclass
class RunSession:
    """One run's directory, stop flag, runner and error, between ``run_session`` and outcome."""

    run: RunResult
    target: Target
    out_dir: Path
    save: bool
    keep: bool
    stop: StopFlag = field(default_factory=StopFlag)
    runner: PhaseRunner | None = None
    error: IobenchError | None = None

    def outcome(self) -> RunOutcome:
        """Collect warnings, stamp the end time, save result.json (when saving)."""
        run = self.run
        if self.runner is not None:
            run.warnings.extend(w for w in self.runner.warnings if w not in run.warnings)
        run.warnings.extend(w for w in self.target.warnings if w not in run.warnings)
        run.warnings.extend(_honesty_warnings(run, self.target))
        run.finished_at = results_mod.now_iso()
        if not self.save:
            return RunOutcome(run, None, self.error)
        claim = _CLAIMS.get(Path(self.out_dir))
        if claim is not None and claim.warning and claim.warning not in run.warnings:
            run.warnings.append(claim.warning)
        try:
            # every phase is measured: a stop signal now has nothing left to stop, and must
            # not cut the save (the figures would be lost), so it only sets a flag
            guard = SignalGuard(StopFlag())
            try:
                with guard, guard.deferred():
                    path = results_mod.save(run, self.out_dir, new=True)  # never another's
            finally:
                release_output_dir(self.out_dir)  # saved (or not): the next run may have it
        except OSError as e:
            # the figures are still printed; the one line says they were not saved, and why
            problem = f"the result could not be saved to {self.out_dir}: {e.strerror or e}"
            if isinstance(self.error, Interrupted):
                err: IobenchError = Interrupted(f"{self.error.message}; {problem}")
            elif self.error is not None:
                err = StoreError(f"{self.error.message}; {problem}")
            else:
                err = StoreError(problem, hint="pass a writable --output DIR with free space")
            return RunOutcome(run, None, err)
        return RunOutcome(run, path, self.error)


@contextmanager
def run_session(
    run: RunResult,
    target: Target,
    out_dir: Path,
    *,
    keep: bool = False,
    save: bool = True,
    run_dir_id: str | None = None,
    coord: Coordinator | None = None,
) -> Iterator[RunSession]:
    """Create the run directory, route signals to a stop flag, and always clean up.

    The body sets ``session.runner`` and runs its phases. An engine failure, an interruption,
    an I/O error or an unexpected exception ends the body and is kept in ``session.error``, the
    run marked and its phases so far kept; bad input (UsageError) still raises (and the output
    directory this session created, still empty, is removed). The run directory is removed on
    every path unless ``keep``; removing it is never cut short by a second signal, and a
    signal that arrives during the cleanup still ends the run as interrupted. Under torchrun
    (``coord``) an interruption or error while another rank on this host has died is that
    rank's failure (DistributedError, exit 4): torchrun stops every rank, and its workers, when
    one dies.
    ``session.outcome()`` then saves and returns the run.
    """
    s = RunSession(run, target, out_dir, save, keep)
    coord = coord or SingleProcess()
    guard = SignalGuard(s.stop)
    made: list[Path] = []  # output directories this session created, deepest first

    def kept_phases() -> None:
        if s.runner is not None:
            run.phases = s.runner.results

    def fail(e: IobenchError) -> None:
        interrupted = isinstance(e, Interrupted)
        dead = None if isinstance(e, DistributedError) else coord.peer_failure()
        if dead:
            # torchrun stopped this rank (or its DataLoader workers) because another rank
            # died: that rank's failure, not a stop or an error of this rank's own
            e = DistributedError(
                f"{dead}; torchrun stopped rank {coord.rank} ({e.message})",
                hint="see that rank's output; torchrun names the first failure",
            )
            interrupted = False
            coord.remove_peer_run_dirs()  # the dead rank cannot remove its own
        if not interrupted:
            e = _name_vanished_run_dir(target, _name_disk_full(e))
        s.error = e
        run.status = "interrupted" if interrupted else "failed"
        run.error = e.one_line()
        if s.runner is not None:
            kept_phases()
            if any(p.ops for p in run.phases) and not interrupted:
                run.status = "partial"

    with guard, _thread_errors_as_warnings(run):
        try:
            try:
                with guard.deferred():  # the run dir is ours once it exists: record that first
                    create_run_dir(target, run_dir_id or run.run_id)
                run.target = target.to_dict()
                if save:
                    made[:] = _missing_dirs(out_dir)
                    out_dir.mkdir(parents=True, exist_ok=True)
                yield s
            finally:
                guard.defer()  # from here on a signal only sets the flag: cleanup finishes
        except UsageError:
            for d in made:  # bad input writes nothing: not even an empty results directory
                _remove_if_empty(d)
            raise
        except (EngineError, Interrupted) as e:
            fail(e)
        except OSError as e:
            where = f" ({e.filename})" if getattr(e, "filename", None) else ""
            fail(EngineError(f"I/O error: {e.strerror or e}{where}"))
        except KeyboardInterrupt as e:  # Ctrl-C, or a stop signal raised as one (cli.StopSignal)
            fail(Interrupted(f"interrupted by {getattr(e, 'signame', None) or 'SIGINT'}"))
        except IobenchError as e:  # StoreError and the like: the run failed, its results stay
            fail(e)
        except Exception as e:  # noqa: BLE001 - a bug must not cost the phases already measured
            fail(
                EngineError(
                    f"internal error: {type(e).__name__}: {e}",
                    hint="rerun with --debug and report it",
                )
            )
        finally:
            if not keep:
                remove_run_dir(target)
            elif target.created:
                run.warnings.append(f"--keep: the run directory {target.run_dir} was left in place")
        if s.error is None and s.stop.is_set():
            # a signal after the last phase's check (or during the cleanup): the user asked
            # to stop, so the run says so even though every phase completed
            fail(Interrupted(f"interrupted by {_signal_name(s.stop.signal)}"))


@contextmanager
def _thread_errors_as_warnings(run: RunResult) -> Iterator[None]:
    """A library's own thread that dies (torch.distributed.checkpoint's writer threads on a
    full disk) would print its traceback on stderr; during a run it becomes a warning in the
    result instead, and the failure reaches the user through the phase that used the thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = threading.excepthook

    def hook(args: Any) -> None:
        if args.exc_type is SystemExit:
            return
        lines = [ln.strip() for ln in str(args.exc_value).splitlines() if ln.strip()]
        name = args.thread.name if args.thread is not None else "?"
        text = f"thread {name} failed: {args.exc_type.__name__}: {lines[-1] if lines else ''}"
        if text not in run.warnings:
            run.warnings.append(text)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = old


def _signal_name(signum: int | None) -> str:
    import signal as signal_mod

    try:
        return signal_mod.Signals(signum).name if signum is not None else "request"
    except ValueError:
        return f"signal {signum}"


def _missing_dirs(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist yet, deepest first."""
    out = []
    p = Path(path)
    while not p.exists() and p != p.parent:
        out.append(p)
        p = p.parent
    return out


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def _name_disk_full(e: IobenchError) -> IobenchError:
    """Say "disk full" when an error was caused by ENOSPC (or EDQUOT) but does not say so
    (torch.save reports a full disk as a failed write)."""
    cause: BaseException | None = e
    seen = 0
    while cause is not None and seen < 8:
        if isinstance(cause, OSError) and cause.errno in (errno.ENOSPC, errno.EDQUOT):
            break
        cause = cause.__cause__ or cause.__context__
        seen += 1
    else:
        return e
    if cause is None or any(w in e.message for w in ("disk full", "quota exceeded", "inodes")):
        return e
    what = "disk full (ENOSPC)" if cause.errno == errno.ENOSPC else "quota exceeded (EDQUOT)"
    err = EngineError(f"{what}: {e.message}", hint=e.hint)
    if getattr(e, "partial", None) is not None:
        err.partial = e.partial  # type: ignore[attr-defined]
    return err


def _name_vanished_run_dir(target: Target, e: IobenchError) -> IobenchError:
    """An I/O failure because someone removed the run directory (or the target) mid-run is
    named as such: the ENOENT on one file alone does not say what happened."""
    if target.kind != "posix" or not target.created or os.path.isdir(target.run_dir):
        return e
    if isinstance(e, DistributedError):  # ranks remove each other's run dirs on failure
        return e
    if getattr(e, "errno", None) != errno.ENOENT and "No such file" not in e.message:
        return e  # a failure of its own kind, whatever happened to the directory later
    gone = target.run_dir if os.path.isdir(target.root) else target.root
    err = EngineError(
        f"the run directory {target.run_dir} was removed during the run "
        f"({'it' if gone == target.run_dir else 'the target ' + gone} no longer exists): "
        f"{e.message}",
        hint="make sure nothing cleans the target while iobench runs",
    )
    partial = getattr(e, "partial", None)
    if partial is not None:
        err.partial = partial  # type: ignore[attr-defined]
    return err


def run_workload(
    workload: Workload,
    target_spec: str,
    *,
    engine_name: str = "posix",
    repeat: int = 1,
    output: str | None = None,
    keep: bool = False,
    progress_factory: ProgressFactory = Progress,
    command: str | None = None,
    coord: Coordinator | None = None,
    save: bool = True,
) -> RunOutcome:
    """Run ``workload`` on ``target_spec``; always returns the (possibly partial) result.

    Bad input raises UsageError before anything is written. Failures during the run come back
    in ``RunOutcome.error`` with the partial result saved and marked.
    """
    if repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {repeat}")
    coord = coord or SingleProcess()
    run = new_result(command)
    run.run_id = coord.shared_run_id(run.run_id)
    out_dir = output_dir_for(output, run.run_id)
    is_writer = coord.rank == 0
    claims: list[OutputClaim] = []

    def check() -> tuple[Any, Target]:
        # checks that may differ between hosts: under torchrun any rank refusing ends them all
        engine = get_engine(engine_name)
        target = resolve(target_spec)
        if target.kind == "fsspec" and engine.name != "fsspec":  # posix/fio need a directory
            raise UsageError(
                f"the {engine.name} engine cannot write to {target.path_or_url}",
                hint="use --engine fsspec (the default for URLs)",
            )
        plan = plan_workload(workload)
        check_free_space(target, plan.space_bytes, plan.inodes)
        # direct I/O that cannot be aligned: refused before anything is written, at the
        # device's logical block size; again below at what the run directory's probe measured
        check_direct_alignment(plan.direct_sizes, target)
        if save and is_writer:  # last: the one check that creates something (the output dir)
            claims.append(claim_output_dir(out_dir))
        return engine, target

    try:
        engine, target = coord.agreed(check)
        return _run_claimed(
            run, workload, engine, target, out_dir, repeat=repeat, keep=keep,
            progress_factory=progress_factory, coord=coord, writes=save and is_writer,
        )  # fmt: skip
    finally:
        for claim in claims:  # released at the save; here on the ways out that never save
            claim.release()


def _run_claimed(
    run: RunResult,
    workload: Workload,
    engine: Any,
    target: Target,
    out_dir: Path,
    *,
    repeat: int,
    keep: bool,
    progress_factory: ProgressFactory,
    coord: Coordinator,
    writes: bool,
) -> RunOutcome:
    """``run_workload`` once its inputs are checked and its output directory is claimed."""

    run.workload = workload.to_dict()
    run.engine = {"name": engine.name, "version": engine.version()}
    gen = get_generator(workload.generator)
    run_dir_id = coord.run_dir_id(run.run_id)
    with run_session(
        run, target, out_dir, keep=keep, save=writes, run_dir_id=run_dir_id, coord=coord
    ) as s:
        # the probe may need more than the device's logical block size (btrfs: its sectors);
        # under torchrun every rank refuses when one does
        direct_sizes = plan_workload(workload).direct_sizes
        coord.agreed(lambda: check_direct_alignment(direct_sizes, target))
        # Lustre: stripe the run dir as the workload asks, before any file is created; record
        # the Lustre/GPFS layout in target.layout
        run.warnings.extend(
            w for w in apply_layout(target, workload.params) if w not in run.warnings
        )
        run.target = target.to_dict()
        coord.attach(target)  # every rank's run dir exists: can ranks read each other's?
        runner = s.runner = PhaseRunner(
            target,
            engine,
            s.stop,
            progress_factory,
            raw_dir=str(out_dir) if writes else None,
            coord=coord,
        )
        repeats: list[list[PhaseResult]] = []
        try:
            for _ in range(repeat):
                runner.results = []
                gen.run(workload.params, runner)
                repeats.append(runner.results)
        except BaseException:
            if repeat > 1:  # the session keeps runner.results: every repeat, not the last only
                runner.results = merge_repeats(repeats, in_flight=runner.results)
                run.warnings.append(_cut_short(repeats, repeat))
            raise
        run.phases = merge_repeats(repeats)
    return s.outcome()


def _cut_short(repeats: list[list[PhaseResult]], requested: int) -> str:
    done = len(repeats)
    figures = (
        f"figures are the median of the {done} completed repeat{'s' * (done != 1)}"
        if done
        else "figures are those of the repeat in flight"
    )
    return (
        f"--repeat {requested}: stopped during repeat {done + 1} of {requested}; {figures}, "
        "and each phase's repeats[] keeps the one in flight, marked in_flight"
    )


def _honesty_warnings(run: RunResult, target: Target) -> list[str]:
    """Flag figures that the page cache may have produced."""
    out = []
    mem = physical_memory()
    written = max((p.bytes for p in run.phases if p.op in ("write", "create")), default=0)
    buffered_reads = [
        p for p in run.phases if p.op in ("read", "open_read") and p.cache not in ("direct", "none")
    ]
    if buffered_reads and mem and written and written < mem:
        out.append(
            f"data read without O_DIRECT ({format_bytes(written)}) fits in page cache "
            f"({format_bytes(mem)} RAM): read figures may be cache"
        )
    return [w for w in out if w not in run.warnings]
