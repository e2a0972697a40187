"""The command line: every command parses, calls one library function, and renders.

``main()`` is the one place that turns exceptions into a one-line message and an exit code
(tracebacks only with --debug).
"""

from __future__ import annotations

import errno
import io
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

_state: dict[str, str | None] = {"stopped_by": None}  # the signal that stopped the run


def _print_version(value: bool) -> None:
    if value:
        from . import __version__

        out(f"iobench {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors."),
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    # no docstring: it would become the app's help text; --debug is read from the arguments
    # by ``main`` (before typer parses them), --version by its callback
    pass


# What iobench prints beyond ASCII, as ASCII, for a terminal or pipe that cannot encode it
# (PYTHONIOENCODING=ascii, a latin-1 locale): output degrades, it never crashes.
_ASCII = str.maketrans(
    {"×": "x", "÷": "/", "−": "-", "–": "-", "—": "-", "…": "...", "→": "->", "◀": "<",
     "≥": ">=", "≤": "<=", "µ": "u", "±": "+/-", "²": "^2", "√": "sqrt", "Σ": "sum",
     "∈": "in", "⌈": "ceil(", "⌉": ")", "⌊": "floor(", "⌋": ")"}
)  # fmt: skip


def encodable(text: str, stream) -> str:
    """``text`` as ``stream`` can encode it: known symbols spelled in ASCII, others as ``?``."""
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(enc)
        return text
    except UnicodeEncodeError:
        return text.translate(_ASCII).encode(enc, "replace").decode(enc)
    except LookupError:  # an encoding Python does not know: plain ASCII is safe
        return text.translate(_ASCII).encode("ascii", "replace").decode("ascii")


def _never_fail_on_encoding() -> None:
    """Writes that bypass out()/err() (click's help, tqdm) replace what cannot be encoded."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="replace")
            except (ValueError, OSError):  # pragma: no cover - a stream already in use oddly
                pass


_stdout_lost: list[str] = []  # why stdout stopped taking text (said once on stderr)


def out(text: str, styled: bool = False) -> None:
    """Write a line to stdout: credentials masked, control characters escaped
    (:func:`iobench.redact.for_terminal`). A stdout that cannot be written (closed, a full
    disk, a closed pipe) is said once on stderr and changes no exit status: that is decided
    by what the command did (a run by its own outcome; its result.json has the figures)."""
    if _stdout_lost:
        return
    if styled:  # colour codes kept; every other control character escaped as always
        from .redact import for_terminal_styled

        line = for_terminal_styled(text if text.endswith("\n") else text + "\n")
    else:
        line = _terminal(text)
    try:
        if sys.stdout is None:  # started with fd 1 closed (`>&-`)
            raise OSError(errno.EBADF, "it is closed")
        sys.stdout.write(encodable(line, sys.stdout))
        sys.stdout.flush()  # a full disk shows now, not in the interpreter's last flush
    except (OSError, ValueError) as e:
        _lose_stdout(e)


def err(text: str) -> None:
    """Write a line to stderr (masked and escaped as :func:`out`); never raises."""
    try:
        if sys.stderr is not None:
            sys.stderr.write(encodable(_terminal(text), sys.stderr))
            sys.stderr.flush()
    except (OSError, ValueError):
        pass  # nowhere left to say anything


def out_flush() -> None:
    """Flush stdout (what a broken stdout left unsaid is said by :func:`out`'s rules)."""
    try:
        if sys.stdout is not None and not _stdout_lost:
            sys.stdout.flush()
    except (OSError, ValueError) as e:
        _lose_stdout(e)


def _terminal(text: str) -> str:
    from .redact import for_terminal

    return for_terminal(text if text.endswith("\n") else text + "\n")


def _lose_stdout(e: BaseException) -> None:
    """Stop writing stdout; point fd 1 at /dev/null so that the interpreter's final flush of
    what is still buffered cannot fail again. A closed pipe (`| head`) is normal: silent."""
    epipe = isinstance(e, BrokenPipeError) or getattr(e, "errno", None) == errno.EPIPE
    reason = "the pipe is closed" if epipe else (getattr(e, "strerror", None) or str(e))
    _stdout_lost.append(reason)
    try:
        fd = sys.stdout.fileno() if sys.stdout is not None else -1
        if fd >= 0:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass  # no descriptor (a test's capture): nothing to flush later
    if not epipe:
        err(f"iobench: warning: cannot write to standard output ({reason}); nothing more is "
            "printed there")  # fmt: skip


def _std_fds_open() -> None:
    """Started with stdin, stdout or stderr closed: put /dev/null there, so that no file the
    run opens can take fd 0-2 (a tool writing "its stdout" would write into our data)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one
            except OSError:
                pass


def deprecated(old: str, new: str, old_value, new_value):
    """The value of an option renamed from ``old`` to ``new``: the old spelling still works,
    with one warning line on stderr; giving both is a usage error."""
    if old_value is None:
        return new_value
    err(f"iobench: warning: {old} is deprecated; use {new}")
    if new_value is not None:
        from .errors import UsageError

        raise UsageError(f"give {new} once (not also {old}, its old name)")
    return old_value


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


STALL_OPTION = typer.Option(
    None,
    "--stall-timeout",
    help="Give up (exit 4, partial result kept) when a phase's I/O makes no progress for "
    "this long: blocked storage (default 60s, or the workload's stall_timeout; 0: never).",
)


def arm_watchdog(value: str | None) -> None:
    """--stall-timeout: arm the I/O watchdog (iobench.watchdog) for this command's runs."""
    from . import watchdog
    from .units import parse_duration

    watchdog.configure(None if value is None else parse_duration(value, what="--stall-timeout"))


def progress_factory(quiet: bool):
    from .progress import TqdmProgress

    return lambda: TqdmProgress(enabled=not quiet)


def with_live_csv(factory, live):
    """``factory``'s progress per phase, with ``live``'s rows (a LiveCsv) when there is one."""
    if live is None:
        return factory
    return lambda: live.wrap(factory())


def open_live_csv(path: str | None):
    """--live-csv: checked now (exit 2 before anything runs), created at the first phase.
    Rank 0 only under torchrun: its rows are its own ranks' progress."""
    if not path or not _lead():
        return None
    from .livecsv import LiveCsv

    return LiveCsv(path)


def close_live_csv(live) -> None:
    if live is None:
        return
    live.close()
    if live.error:
        err(f"iobench: warning: --live-csv {live.path}: {live.error}; its rows stop there")


def _lead() -> bool:
    from .distributed import is_lead_rank

    return is_lead_rank()


def out_report(run, baseline=None) -> None:
    """Print a run's terminal summary at stdout's width, in colour on a terminal
    (:func:`iobench.report.stdout_format`: plain and 120 columns into a pipe or file)."""
    from . import report

    width, colour = report.stdout_format()
    text = report.render_terminal(run, width=width, colour=colour, baseline=baseline)
    out(text, styled=colour)


def check_exports(csv_path: str | None, series_csv: str | None) -> None:
    """Refuse a bad --csv/--series-csv path before anything runs (exit 2, nothing written)."""
    from .export import check_output

    for path, flag in ((csv_path, "--csv"), (series_csv, "--series-csv")):
        if path:
            check_output(path, flag)


def write_exports(run, csv_path: str | None, series_csv: str | None) -> None:
    """--csv: one row per phase; --series-csv: one row per phase x interval. Rank 0 only;
    a partial run's rows are written too (its status column says so)."""
    if run is None or not (csv_path or series_csv) or not _lead():
        return
    from . import export

    if csv_path:
        text = export.to_csv(export.phase_rows(run), export.PHASE_COLUMNS)
        export.write_output(csv_path, text.encode(), "--csv")
    if series_csv:
        text = export.to_csv(export.series_rows(run), export.SERIES_COLUMNS)
        export.write_output(series_csv, text.encode(), "--series-csv")


def finish_run(
    outcome,
    as_json: bool,
    quiet: bool = False,
    exports: tuple[str | None, str | None] = (None, None),
) -> int:
    """Print a run's result, write its --csv/--series-csv ``exports``, then turn its error
    (if any) into the exit status.

    Under torchrun only rank 0 prints: the other ranks' figures are inside its aggregate.
    """
    if not _lead():
        if outcome.error is not None:
            raise outcome.error
        return ExitStatus.OK
    if as_json:
        from . import results

        out(results.dumps(outcome.run))
    else:
        out_report(outcome.run)
    if outcome.result_path and not as_json:
        out(f"result: {outcome.result_path}")
    write_exports(outcome.run, *exports)
    if outcome.error is not None:
        raise outcome.error
    return ExitStatus.OK


CSV_OPTION = typer.Option(
    None, "--csv", metavar="FILE", help="Also write one CSV row per phase to FILE."
)
LIVE_CSV_OPTION = typer.Option(
    None,
    "--live-csv",
    metavar="FILE",
    help="Write every phase's running totals and rates to FILE once a second while it runs.",
)
SERIES_CSV_OPTION = typer.Option(
    None,
    "--series-csv",
    metavar="FILE",
    help="Also write the per-interval bandwidth and IOPS of every phase to FILE as CSV.",
)


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
    csv_path: str | None = CSV_OPTION,
    series_csv: str | None = SERIES_CSV_OPTION,
    live_csv: str | None = LIVE_CSV_OPTION,
    stall_timeout: str | None = STALL_OPTION,
) -> int:
    """Run one workload against TARGET and print what it measured."""
    from . import api

    arm_watchdog(stall_timeout)
    check_exports(csv_path, series_csv)
    live = open_live_csv(live_csv)
    try:
        outcome = api.run(
            workload, target, engine=engine, sets=set_, jobs=jobs, direct=direct, time=time_,
            repeat=repeat, output=output, keep=keep, verify=verify,
            progress_factory=with_live_csv(progress_factory(quiet or not _lead()), live),
            history=None if no_history else (history or ""),
        )  # fmt: skip
    finally:
        close_live_csv(live)
    return finish_run(outcome, as_json, quiet, (csv_path, series_csv))


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
    from .ckpt_spec import list_checkpoint_profiles

    out("")
    out("Checkpoint models (iobench checkpoint TARGET --model NAME):")
    for name, desc in list_checkpoint_profiles():
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


# What to type after an option, by option name; others by type (N, X, TEXT).
METAVARS = {
    "--set": "KEY=VALUE",
    "--history": "URL",
    "--output": "DIR",
    "--engine": "NAME",
    "--profile": "NAME",
    "--workload": "NAME",
    "--time": "DURATION",
    "--format": "FORMAT",
    "--threshold": "PERCENT",
    "--baseline": "RUN",
    "--html": "FILE",
    "--svg": "FILE",
    "--host-mem": "SIZE",
    "--require": "KEY=VALUE,...",
    "--compute": "sleep|gpu",
    "--fail-on": "regression|never",
}


def _type_name(param) -> str:
    """The declared Python type of a parameter (typer >= 0.2x) or click's type name."""
    desc = getattr(param, "type_descriptor", None)
    ann = getattr(desc, "annotation", None)
    if ann is not None:
        return getattr(ann, "__name__", str(ann))
    return str(getattr(getattr(param, "type", None), "name", "text"))


def plain_metavars(command) -> None:
    """Show what to type, never a Python type: typer >= 0.2x prints ``<bool>`` beside flags and
    ``<list[str]>`` beside ``--set``. Flags get none, arguments their name in capitals, options
    :data:`METAVARS` or N / X / TEXT."""
    for sub in getattr(command, "commands", {}).values():
        plain_metavars(sub)
    make_help = getattr(command, "get_help_option", None)
    if make_help is not None:  # -h/--help is made per call: tidy each one

        def get_help_option(ctx, _make=make_help):
            option = _make(ctx)
            if option is not None:
                option.metavar = ""
            return option

        command.get_help_option = get_help_option
    for p in getattr(command, "params", []):
        if getattr(p, "param_type_name", "") == "argument":
            if p.metavar is None:
                p.metavar = (p.name or "").upper()
            p.display_type_rich = lambda ctx: None  # the name says it all
        elif getattr(p, "is_flag", False) or getattr(p, "count", False):
            p.metavar = ""
        elif p.metavar is None:
            name = next((o for o in p.opts if o.startswith("--")), "")
            kind = _type_name(p)
            p.metavar = METAVARS.get(name) or {"int": "N", "float": "X"}.get(kind, "TEXT")


def _run_app(args: list[str]) -> int:
    """The command's exit status (typer's ``standalone_mode=False``: errors raise)."""
    _register_optional_commands()
    cmd = typer.main.get_command(app)
    plain_metavars(cmd)
    rv = cmd.main(args=args, prog_name="iobench", standalone_mode=False)
    code = int(rv) if isinstance(rv, int) else 0
    if code == ExitStatus.INTERRUPTED and _state.get("stopped_by"):
        # typer turns a KeyboardInterrupt (Ctrl-C, StopSignal) into a silent 130
        err(f"iobench: error: interrupted by {_state['stopped_by']}")
    return code


def _error_code(e: BaseException, debug: bool) -> int:
    """Say what ended the command in one line on stderr; return its exit status (SystemExit
    and the like are not ours: raised again)."""
    cx = _click_exceptions()
    if isinstance(e, IobenchError):
        if debug:
            err(traceback.format_exc())
        err(f"iobench: error: {e.one_line()}")
        return int(e.exit_status)
    if isinstance(e, cx.NoArgsIsHelpError):
        err(e.format_message())
        return int(ExitStatus.USAGE)
    if isinstance(e, cx.UsageError):
        msg = e.format_message().replace("\n", " ")
        name = e.ctx.info_name if e.ctx and e.ctx.info_name != "iobench" else None
        err(f"iobench: error: {msg} (see iobench {f'{name} ' if name else ''}--help)")
        return int(ExitStatus.USAGE)
    if isinstance(e, typer.Abort | getattr(cx, "Abort", typer.Abort)):
        # click turns a KeyboardInterrupt (Ctrl-C, or StopSignal) into Abort
        cause = e.__cause__ or e.__context__
        name = _interrupted_by(cause) if isinstance(cause, KeyboardInterrupt) else None
        err(f"iobench: error: interrupted by {name}" if name else "iobench: error: interrupted")
        return int(ExitStatus.INTERRUPTED)
    if isinstance(e, typer.Exit | getattr(cx, "Exit", typer.Exit)):
        if isinstance(e.__cause__, KeyboardInterrupt):
            # typer turns Ctrl-C (and StopSignal) into a silent Exit(130): say what happened
            err(f"iobench: error: interrupted by {_interrupted_by(e.__cause__)}")
            return int(ExitStatus.INTERRUPTED)
        return int(e.exit_code)
    if isinstance(e, KeyboardInterrupt):
        err(f"iobench: error: interrupted by {_interrupted_by(e)}")
        return int(ExitStatus.INTERRUPTED)
    if isinstance(e, BrokenPipeError):
        return 0
    if not isinstance(e, Exception):
        raise e
    if debug:  # the one place that reports what nobody expected
        err(traceback.format_exc())  # masked like every other line (README, "Secrets")
    what = f"{type(e).__name__}: {' '.join(str(e).split())}"
    err(f"iobench: error: internal error: {what} (rerun with --debug and report it)")
    return int(ExitStatus.RUN_FAILED)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, map every error to one line and an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    _std_fds_open()
    _stdout_lost.clear()
    from .redact import forget, remember_argv

    forget()
    remember_argv(args)  # the credentials typed in URLs are masked wherever they show up
    debug = "--debug" in args
    _state["stopped_by"] = None
    old_handlers = _install_stop_handlers()
    _never_fail_on_encoding()
    try:
        code = _run_app(args)
    except BaseException as e:  # noqa: BLE001 - each kind its one line and status (_error_code)
        code = _error_code(e, debug)
    from .watchdog import disarm

    disarm()  # the command's runs are over (tests call main many times in one process)
    out_flush()
    if argv is None:
        # the command has finished: a signal now must not cut Python's exit (torch's atexit
        # handlers) with a traceback and turn a decided exit status into another
        for s in old_handlers:
            signal.signal(s, signal.SIG_IGN)
        sys.exit(code)
    for s, h in old_handlers.items():
        signal.signal(s, h)  # type: ignore[arg-type]
    return code


__all__ = [
    "app", "main", "out", "err", "finish_run", "progress_factory", "arm_watchdog", "STALL_OPTION", "check_exports",
    "write_exports", "CSV_OPTION", "SERIES_CSV_OPTION", "LIVE_CSV_OPTION", "open_live_csv", "with_live_csv",
    "close_live_csv", "deprecated",
]  # fmt: skip
