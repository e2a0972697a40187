"""The command line: every command parses, calls one library function, and renders.

``main()`` is the one place that turns exceptions into a one-line message and an exit code
(tracebacks only with --debug).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback

import typer

from .errors import ExitStatus, IobenchError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="iobench: can this storage feed these GPUs? Storage and data-loader throughput analyzer.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

_state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
) -> None:
    _state["debug"] = debug


def out(text: str) -> None:
    """Write a line to stdout. A stdout that cannot take it (a full disk, a hung-up terminal)
    loses the output, not the command: the failure is noted once and reported by ``main``."""
    if _state.get("stdout_error") is not None:
        return
    try:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    except BrokenPipeError:
        # the reader went away (| head): the rest is not wanted; the exit status stays the
        # command's (click would turn EPIPE into exit 1, which reads as "regression")
        _state["stdout_error"] = ""
        _discard_stdout()
    except (OSError, ValueError) as e:  # ValueError: the stream was closed under us
        _state["stdout_error"] = getattr(e, "strerror", None) or str(e)
        _discard_stdout()


def err(text: str) -> None:
    """Write a line to stderr (best effort: a terminal that has hung up cannot take it)."""
    try:
        sys.stderr.write(text if text.endswith("\n") else text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def _discard_stdout() -> None:
    """Point fd 1 and sys.stdout at /dev/null, so nothing (and no flush at exit) fails again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    except OSError:
        pass


def _open_closed_std_fds() -> None:
    """A closed stdin, stdout or stderr (``>&-``) is reopened on /dev/null: otherwise the next
    file iobench opens (a result, a data file) would take fd 1 or 2 and receive whatever is
    printed, and Python's sys.stdout is None. The output is discarded, as the user asked."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        try:
            null = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        except OSError:
            continue
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            mode = "r" if fd == 0 else "w"
            setattr(sys, name, open(fd, mode, closefd=False))  # noqa: SIM115


class StopSignal(KeyboardInterrupt):
    """A stop signal outside a run session, raised as Ctrl-C is: a KeyboardInterrupt passes
    the ``except Exception`` of code that skips what it cannot read (history files, probes)."""

    def __init__(self, signum: int):
        from .target import _signame

        super().__init__(_signame(signum))
        self.signame = _signame(signum)


def _stop_early(signum: int, _frame: object) -> None:
    """Before a run has a run directory there is nothing to clean: a stop signal ends the
    command at once, as Ctrl-C does, with its one line and 130."""
    stop = StopSignal(signum)
    _state["stopped_by"] = stop.signame
    raise stop


def _interrupted_by(e: BaseException | None) -> str:
    return getattr(e, "signame", None) or "SIGINT"


def _install_stop_handlers() -> dict[int, object]:
    """Every stop signal (SIGHUP, SIGQUIT, SIGUSR1, ... as SIGINT/SIGTERM) ends the command with
    130 and one line; during a run, run_session's SignalGuard takes over from these."""
    from .target import STOP_SIGNALS

    old: dict[int, object] = {}
    if threading.current_thread() is not threading.main_thread():
        return old
    for s in STOP_SIGNALS:
        try:
            old[s] = signal.signal(s, _stop_early)
        except (OSError, ValueError):  # pragma: no cover
            pass
    return old


def progress_factory(quiet: bool):
    from .progress import TqdmProgress

    return lambda: TqdmProgress(enabled=not quiet)


def _lead() -> bool:
    from .distributed import is_lead_rank

    return is_lead_rank()


def _render_run(run, as_json: bool) -> str:
    from . import report, results

    if as_json:
        return results.dumps(run)
    return report.render_terminal(run)


def finish_run(outcome, as_json: bool, quiet: bool = False) -> int:
    """Print a run's result, then turn its error (if any) into the exit status.

    Under torchrun only rank 0 prints: the other ranks' figures are inside its aggregate.
    """
    if not _lead():
        if outcome.error is not None:
            raise outcome.error
        return ExitStatus.OK
    out(_render_run(outcome.run, as_json))
    if outcome.result_path and not as_json:
        out(f"result: {outcome.result_path}")
    if outcome.error is not None:
        raise outcome.error
    return ExitStatus.OK


@app.command()
def run(
    workload: str = typer.Argument(
        ..., help="Workload name (see `iobench workloads`) or TOML path."
    ),
    target: str = typer.Argument(..., help="Directory to test (or an fsspec URL)."),
    engine: str = typer.Option(
        None, "--engine", help="posix | fio | fsspec (default: posix, fsspec for URLs)."
    ),
    set_: list[str] | None = typer.Option(None, "--set", help="Override a parameter: KEY=VALUE."),
    jobs: int | None = typer.Option(None, "--jobs", help="Workers (same as --set jobs=N)."),
    direct: bool | None = typer.Option(
        None, "--direct/--buffered", help="O_DIRECT or page-cache I/O."
    ),
    time_: str | None = typer.Option(None, "--time", help="Time-based phases of this duration."),
    repeat: int = typer.Option(
        1, "--repeat", help="Run the workload N times; every repeat is kept."
    ),
    output: str | None = typer.Option(
        None, "--output", help="Result directory (default ./iobench-results/RUN_ID)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print result.json instead of the table."),
    keep: bool = typer.Option(False, "--keep", help="Keep the run directory on the target."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bars."),
    verify: bool = typer.Option(
        False, "--verify", help="Checksum every block and check it on read."
    ),
    history: str | None = typer.Option(
        None, "--history", help="History URL to append this run to."
    ),
    no_history: bool = typer.Option(False, "--no-history", help="Do not append to the history."),
) -> int:
    """Run one workload against TARGET and print what it measured."""
    from . import api

    outcome = api.run(
        workload, target, engine=engine, sets=set_, jobs=jobs, direct=direct, time=time_,
        repeat=repeat, output=output, keep=keep, verify=verify,
        progress_factory=progress_factory(quiet or not _lead()),
        history=None if no_history else (history or ""),
    )  # fmt: skip
    return finish_run(outcome, as_json, quiet)


@app.command()
def workloads() -> int:
    """List workloads and profiles with one-line descriptions."""
    from .spec import list_files

    out("Workloads (iobench run NAME TARGET):")
    for name, desc in list_files("workload"):
        out(f"  {name:<24} {desc}")
    out("")
    out("Profiles (--profile NAME):")
    for name, desc in list_files("profile"):
        out(f"  {name:<24} {desc}")
    return ExitStatus.OK


def _register_optional_commands() -> None:
    """Commands whose modules may be absent in a partial install are added when importable."""
    from .cmds import register_all

    register_all()


def _click_exceptions():
    """The exception module of the click that typer itself runs on.

    typer >= 0.26 vendors click as ``typer._click``; older releases import click, their own
    dependency. Taking whichever typer.core holds needs neither declared nor guessed.
    """
    import typer.core

    click = getattr(typer.core, "_click", None) or typer.core.click
    return click.exceptions


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, map every error to one line and an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    _state["debug"] = debug
    _state["stdout_error"] = None
    _state["stopped_by"] = None
    code: int
    if argv is None:
        _open_closed_std_fds()
    old_handlers = _install_stop_handlers()
    cx = _click_exceptions()
    try:
        _register_optional_commands()
        cmd = typer.main.get_command(app)
        rv = cmd.main(args=args, prog_name="iobench", standalone_mode=False)
        code = int(rv) if isinstance(rv, int) else 0
        if code == ExitStatus.INTERRUPTED and _state.get("stopped_by"):
            # typer turns a KeyboardInterrupt (Ctrl-C, StopSignal) into a silent 130
            err(f"iobench: error: interrupted by {_state['stopped_by']}")
    except IobenchError as e:
        if debug:
            traceback.print_exc()
        err(f"iobench: error: {e.one_line()}")
        code = int(e.exit_status)
    except cx.NoArgsIsHelpError as e:
        err(e.format_message())
        code = int(ExitStatus.USAGE)
    except cx.UsageError as e:
        msg = e.format_message().replace("\n", " ")
        hint = (
            f" (see iobench {e.ctx.info_name} --help)"
            if e.ctx and e.ctx.info_name != "iobench"
            else " (see iobench --help)"
        )
        err(f"iobench: error: {msg}{hint}")
        code = int(ExitStatus.USAGE)
    except (typer.Abort, getattr(cx, "Abort", typer.Abort)) as e:
        # click turns a KeyboardInterrupt (Ctrl-C, or StopSignal) into Abort
        cause = e.__cause__ or e.__context__
        name = _interrupted_by(cause) if isinstance(cause, KeyboardInterrupt) else None
        err(f"iobench: error: interrupted by {name}" if name else "iobench: error: interrupted")
        code = int(ExitStatus.INTERRUPTED)
    except (typer.Exit, getattr(cx, "Exit", typer.Exit)) as e:
        code = int(e.exit_code)
        if isinstance(e.__cause__, KeyboardInterrupt):
            # typer turns Ctrl-C (and StopSignal) into a silent Exit(130): say what happened
            err(f"iobench: error: interrupted by {_interrupted_by(e.__cause__)}")
            code = int(ExitStatus.INTERRUPTED)
    except KeyboardInterrupt as e:
        err(f"iobench: error: interrupted by {_interrupted_by(e)}")
        code = int(ExitStatus.INTERRUPTED)
    except BrokenPipeError:
        _discard_stdout()  # (no "Exception ignored" when Python flushes it at exit)
        code = 0
    except Exception as e:  # noqa: BLE001 - the one place that reports what nobody expected
        if debug:
            traceback.print_exc()
        err(
            f"iobench: error: internal error: {type(e).__name__}: {e} (rerun with --debug and report it)"
        )
        code = int(ExitStatus.RUN_FAILED)
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
    except (OSError, ValueError) as e:
        _state["stdout_error"] = _state.get("stdout_error") or getattr(e, "strerror", None) or e
        _discard_stdout()
    if _state["stdout_error"]:
        # the command did what it did (its exit status says so); only its printout is lost
        err(
            f"iobench: warning: the output could not be written to stdout ({_state['stdout_error']})"
        )
    if argv is None:
        # the command has finished: a signal now must not cut Python's exit (torch's atexit
        # handlers) with a traceback and turn a decided exit status into another
        for s in old_handlers:
            signal.signal(s, signal.SIG_IGN)
        sys.exit(code)
    for s, h in old_handlers.items():
        signal.signal(s, h)  # type: ignore[arg-type]
    return code


__all__ = ["app", "main", "out", "err", "finish_run", "progress_factory"]
