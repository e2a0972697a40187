"""One run's session: the result it fills, its run directory, signals routed to a stop flag,
and the one way out on success, error, Ctrl-C and any terminating signal (``open_run``).

``open_run`` is what every command that runs I/O enters (``runner.run_workload`` for run and
checkpoint, ``loader.run_loader``, ``qualify.run_qualify``): a new result with the run id the
coordinator shares, the input checks every rank agrees on, the output directory claimed, then
``run_session`` (the run directory created, signals deferred around it, every failure kept in
the result, the run directory removed) and the result saved and marked.
"""

from __future__ import annotations

import errno
import os
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from ..core.coordinator import Coordinator, SingleProcess
from ..core.cpu import physical_memory
from ..core.errors import (
    DistributedError,
    EngineError,
    Interrupted,
    IobenchError,
    StoreError,
    UsageError,
)
from ..core.plan import WritePlan, dry_run_text, plan_line
from ..core.units import format_bytes
from ..result import file as results_mod
from ..result.file import PhaseResult, RunResult
from ..target import SignalGuard, StopFlag, Target, create_run_dir, remove_run_dir, scrub
from .guard import UNARMED, RunGuard, StallSetting, Unguarded
from .outdir import (
    OutputClaim,
    claim_output_dir,
    held_claim,
    missing_dirs,
    output_dir_for,
    release_output_dir,
    remove_if_empty,
)


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


@dataclass
class RunOutcome:
    run: RunResult
    result_path: Path | None
    error: IobenchError | None = None


class PhaseCollector(Protocol):
    """What a session reads back from its runner (``runner.PhaseRunner``)."""

    results: list[PhaseResult]
    warnings: list[str]


@dataclass
class RunSession:
    """One run's directory, stop flag, runner and error, between ``run_session`` and outcome."""

    run: RunResult
    target: Target
    out_dir: Path
    save: bool
    keep: bool
    stop: StopFlag = field(default_factory=StopFlag)
    runner: PhaseCollector | None = None
    error: IobenchError | None = None
    coord: Coordinator = field(default_factory=SingleProcess)
    guard: RunGuard = field(default_factory=Unguarded)  # run_session's (signals, the watchdog)
    #: from ``run_session``'s start until ``outcome`` has saved, the handlers under its guard:
    #: a stop signal after the guard's end only sets a flag (nothing is left to stop, and the
    #: save must not be cut)
    hold: SignalGuard | None = None

    def release(self) -> None:
        """The stop signals back to the command's own handlers (the hold ended)."""
        if self.hold is not None:
            self.hold.__exit__(None, None, None)
            self.hold = None

    def fail(self, e: IobenchError) -> None:
        """End the run with ``e``: marked interrupted, failed, or partial (phases measured)."""
        run, coord = self.run, self.coord
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
            e = _name_vanished_run_dir(self.target, _name_disk_full(e))
        self.error = e
        run.status = "interrupted" if interrupted else "failed"
        run.error = e.one_line()
        if self.runner is not None:
            run.phases = self.runner.results
            if any(p.ops for p in run.phases) and not interrupted:
                run.status = "partial"

    def outcome(self) -> RunOutcome:
        """Collect warnings, stamp the end time, save result.json (when saving)."""
        run = self.run
        if self.runner is not None:
            run.warnings.extend(w for w in self.runner.warnings if w not in run.warnings)
        run.warnings.extend(w for w in self.target.warnings if w not in run.warnings)
        run.warnings.extend(_honesty_warnings(run, self.target))
        run.finished_at = results_mod.now_iso()
        if not self.save:
            self.release()
            return RunOutcome(run, None, self.error)
        claim = held_claim(self.out_dir)
        if claim is not None and claim.warning and claim.warning not in run.warnings:
            run.warnings.append(claim.warning)
        try:
            # every phase is measured: a stop signal now has nothing left to stop, and must
            # not cut the save (the figures would be lost), so it only sets a flag (the hold)
            try:
                path = results_mod.save(run, self.out_dir, new=True)  # never another's
            finally:
                release_output_dir(self.out_dir)  # saved (or not): the next run may have it
                self.release()
        except OSError as e:
            return RunOutcome(run, None, self._not_saved(e))
        return RunOutcome(run, path, self.error)

    def _not_saved(self, e: OSError) -> IobenchError:
        """The figures are still printed; the one line says they were not saved, and why."""
        problem = f"the result could not be saved to {self.out_dir}: {e.strerror or e}"
        if isinstance(self.error, Interrupted):
            return Interrupted(f"{self.error.message}; {problem}")
        if self.error is not None:
            return StoreError(f"{self.error.message}; {problem}")
        return StoreError(problem, hint="pass a writable --output DIR with free space")


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
    stall: StallSetting = UNARMED,
) -> Iterator[RunSession]:
    """Create the run directory, route signals to a stop flag, and always clean up.

    The body sets ``session.runner`` and runs its phases. An engine failure, an interruption,
    an I/O error or an unexpected exception ends the body and is kept in ``session.error``, the
    run marked and its phases so far kept; bad input (UsageError) still raises (and the output
    directory this session created, still empty, is removed). The run directory is removed on
    every path unless ``keep``; removing it is never cut short by a second signal, and a
    signal that arrives during the cleanup still ends the run as interrupted. Under torchrun
    an interruption or error while another rank on this host has died is that rank's failure
    (DistributedError, exit 4): torchrun stops every rank, and its workers, when one dies.
    ``session.outcome()`` then saves and returns the run.
    """
    s = RunSession(run, target, out_dir, save, keep, coord=coord or SingleProcess())
    # held until outcome() saved: a signal between the guard's end and the save only sets a
    # flag (the command's own handler would raise there and lose the result)
    s.hold = SignalGuard(StopFlag()).__enter__()
    s.hold.defer()
    try:
        yield from _session_body(s, target, run_dir_id, stall)
    except BaseException:  # bad input, or what is not ours to keep: no outcome() will come
        s.release()
        raise


def _session_body(s: RunSession, target: Target, run_dir_id: str | None,
                  stall: StallSetting) -> Iterator[RunSession]:  # fmt: skip
    """``run_session``'s body inside the hold: the guard, the body, the cleanup."""
    run, out_dir, save, keep = s.run, s.out_dir, s.save, s.keep
    guard = s.guard = RunGuard(s, stall)  # signals to the stop flag; the watchdog when armed
    made: list[Path] = []  # output directories this session created, deepest first
    with guard, _thread_errors_as_warnings(run):
        try:
            try:
                with (
                    guard.signals.deferred()
                ):  # the run dir is ours once it exists: record that first
                    create_run_dir(target, run_dir_id or run.run_id)
                run.target = target.to_dict()
                if save:
                    made[:] = missing_dirs(out_dir)
                    out_dir.mkdir(parents=True, exist_ok=True)
                yield s
            finally:
                guard.signals.defer()  # from here on a signal only sets the flag: cleanup finishes
        except UsageError:
            for d in made:  # bad input writes nothing: not even an empty results directory
                remove_if_empty(d)
            raise
        except BaseException as e:  # noqa: BLE001 - kept in the result (as_run_error)
            s.fail(as_run_error(e))
        finally:
            if not keep:
                remove_run_dir(target)
            elif target.created:
                run.warnings.append(f"--keep: the run directory {target.run_dir} was left in place")
        if s.error is None and s.stop.is_set():
            # a signal after the last phase's check (or during the cleanup): the user asked
            # to stop, so the run says so even though every phase completed
            s.fail(Interrupted(f"interrupted by {_signal_name(s.stop.signal)}"))


def as_run_error(e: BaseException) -> IobenchError:
    """What ended a run's body, as the error its result keeps (a bug must not cost the phases
    already measured: it becomes an internal error)."""
    if isinstance(e, IobenchError):  # an engine failure, an interruption, a StoreError...
        return e
    if isinstance(e, OSError):
        where = f" ({e.filename})" if getattr(e, "filename", None) else ""
        return EngineError(f"I/O error: {e.strerror or e}{where}")
    if isinstance(e, KeyboardInterrupt):  # Ctrl-C, or a stop signal raised as one
        return Interrupted(f"interrupted by {getattr(e, 'signame', None) or 'SIGINT'}")
    if not isinstance(e, Exception):  # SystemExit, GeneratorExit: not ours to keep
        raise e
    return EngineError(
        f"internal error: {type(e).__name__}: {e}", hint="rerun with --debug and report it"
    )


C = TypeVar("C")


@dataclass
class RunContext(Generic[C]):
    """What ``open_run`` yields: the run's result, coordinator, output directory, the target
    its checks resolved (and what else they returned), and the session around the body."""

    run: RunResult
    coord: Coordinator
    out_dir: Path
    writer: bool  # this process saves result.json (rank 0, when saving)
    target: Target
    checked: C  # what the checks returned beside the target (the engine, the plan)
    session: RunSession
    outcome: RunOutcome | None = None

    @property
    def stop(self) -> StopFlag:
        return self.session.stop


@contextmanager
def open_run(
    check: Callable[[RunResult], tuple[Target, C]],
    *,
    output: str | None,
    command: str | None = None,
    coord: Coordinator | None = None,
    save: bool = True,
    keep: bool = False,
    plan: Callable[[Target, C], WritePlan] | None = None,
    announce: Callable[[str], None] | None = None,
    stall: StallSetting = UNARMED,
) -> Iterator[RunContext[C]]:
    """The one run set-up of every command that runs I/O, and its one way out.

    A new result whose run id every rank shares; its output directory; ``check(run)`` (the
    input checks that may differ between hosts: the target, free space; it may fill the
    result's workload and engine blocks) agreed on by every rank, and then, last, the output
    directory claimed by the writer; then ``run_session`` around the body. On exit
    ``ctx.outcome`` holds the result, saved and marked (success, error, Ctrl-C, signals),
    the run directory removed; after a failure this rank's later collectives fail at once.
    Bad input raises UsageError with nothing written and the claim released. Once every check
    passed, before the first byte, rank 0 gives ``announce`` the plan line of ``plan(target,
    checked)`` (plan.plan_line). ``stall``: the watchdog's setting (the session's guard)."""
    coord = coord or SingleProcess()
    run = new_result(command)
    run.run_id = coord.shared_run_id(run.run_id)
    out_dir = output_dir_for(output, run.run_id)
    writer = save and coord.rank == 0
    claims: list[OutputClaim] = []

    def checked() -> tuple[Target, C]:
        target, extra = check(run)
        if writer:  # last: the one check that creates something (the output directory)
            claims.append(claim_output_dir(out_dir))
        return target, extra

    try:
        target, extra = coord.agreed(checked)
        if plan is not None and announce is not None and coord.rank == 0:
            announce(target_plan_line(plan(target, extra), target))
        run_dir_id = coord.run_dir_id(run.run_id)
        with run_session(
            run,
            target,
            out_dir,
            keep=keep,
            save=writer,
            run_dir_id=run_dir_id,
            coord=coord,
            stall=stall,
        ) as s:
            ctx = RunContext(run, coord, out_dir, writer, target, extra, s)
            yield ctx
        ctx.outcome = s.outcome()
        if ctx.outcome.error is not None:
            coord.abandon(ctx.outcome.error.one_line())
    finally:
        for claim in claims:  # released at the save; here on the ways out that never save
            claim.release()


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
    return EngineError(f"{what}: {e.message}", hint=e.hint, partial=e.partial)


def _name_vanished_run_dir(target: Target, e: IobenchError) -> IobenchError:
    """An I/O failure because someone removed the run directory (or the target) mid-run is
    named as such: the ENOENT on one file alone does not say what happened."""
    if target.kind != "posix" or not target.created:
        return e
    handle = getattr(target, "handle", None)
    moved = handle.moved() if handle is not None and handle.alive() else None
    if moved is not None and moved not in e.message:  # renamed or swapped, not removed
        return EngineError(
            f"{moved}: {e.message}",
            hint="make sure nothing moves the target while iobench runs",
            partial=e.partial,
        )
    if os.path.isdir(target.run_dir):
        return e
    if isinstance(e, DistributedError):  # ranks remove each other's run dirs on failure
        return e
    if getattr(e, "errno", None) != errno.ENOENT and "No such file" not in e.message:
        return e  # a failure of its own kind, whatever happened to the directory later
    gone = target.run_dir if os.path.isdir(target.root) else target.root
    return EngineError(
        f"the run directory {target.run_dir} was removed during the run "
        f"({'it' if gone == target.run_dir else 'the target ' + gone} no longer exists): "
        f"{e.message}",
        hint="make sure nothing cleans the target while iobench runs",
        partial=e.partial,
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
            f"({format_bytes(mem)} RAM): read figures may be the page cache's speed, not the "
            "storage's (read with --direct, or more data than RAM, to measure the storage)"
        )
    return [w for w in out if w not in run.warnings]


def target_plan_line(wp: WritePlan, target: Target) -> str:
    """``plan.plan_line`` on ``target``: its root, type and free space."""
    return plan_line(wp, target.root, target.fs_type, target.free_bytes)


def dry_run(
    check: Callable[[RunResult], tuple[Target, C]],
    plan: Callable[[Target, C], WritePlan],
    *,
    output: str | None,
    command: str | None = None,
) -> str:
    """``--dry-run``: the checks a run makes (bad input refused alike, the output path too),
    then the plan (plan.dry_run_text); nothing is created or written."""
    run = new_result(command)
    output_dir_for(output, run.run_id)  # refused as a real run would be; creates nothing
    target, extra = check(run)
    wp = plan(target, extra)
    return dry_run_text(wp, target_plan_line(wp, target))
