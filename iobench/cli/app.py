"""The command line: every command parses, calls one library function, and renders.

``main()`` is the one place that turns exceptions into a one-line message and an exit code
(tracebacks only with --debug).
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback

import typer

from ..core.errors import ExitStatus, IobenchError
from .commands.common import (
    CSV_OPTION,
    DRY_RUN_OPTION,
    LIVE_CSV_OPTION,
    SERIES_CSV_OPTION,
    STALL_OPTION,
    _lead,
    _never_fail_on_encoding,
    _std_fds_open,
    _stdout_lost,
    announce,
    app,
    check_exports,
    close_live_csv,
    err,
    finish_run,
    open_live_csv,
    out_flush,
    out_text,
    print_plan,
    progress_factory,
    stall_setting,
    with_live_csv,
)


class StopSignal(KeyboardInterrupt):
    """A stop signal outside a run session, raised as Ctrl-C is: a KeyboardInterrupt passes
    the ``except Exception`` of code that skips what it cannot read (history files, probes)."""

    def __init__(self, signum: int):
        from ..target import _signame

        super().__init__(_signame(signum))
        self.signame = _signame(signum)


def _interrupted_by(e: BaseException | None) -> str:
    return getattr(e, "signame", None) or "SIGINT"


class EarlyStop:
    """One command's stop signals before a run session takes them over (its guard): every
    stop signal (SIGHUP, SIGQUIT, SIGUSR1, ... as SIGINT/SIGTERM) ends the command at once, as
    Ctrl-C does, with its one line and 130 (before a run has a run directory there is nothing
    to clean). ``by``: the signal that stopped it."""

    def __init__(self) -> None:
        self.by: str | None = None

    def handler(self, signum: int, _frame: object) -> None:
        stop = StopSignal(signum)
        self.by = stop.signame
        raise stop

    def install(self) -> dict[int, object]:
        """The handlers installed (main thread only); the old ones returned."""
        from ..target import STOP_SIGNALS

        old: dict[int, object] = {}
        if threading.current_thread() is not threading.main_thread():
            return old
        for s in STOP_SIGNALS:
            try:
                old[s] = signal.signal(s, self.handler)
            except (OSError, ValueError):  # pragma: no cover
                pass
        return old


_TIME_HELP = (
    "Every phase runs exactly this long, e.g. 30s (default: the workload's; the shipped ones "
    "end each phase once steady, within 20 s)."
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
    time_: str | None = typer.Option(None, "--time", help=_TIME_HELP),
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
    dry_run: bool = DRY_RUN_OPTION,
) -> int:
    """Run one workload against TARGET and print what it measured."""
    from .. import api

    stall = stall_setting(stall_timeout)
    if dry_run:
        return print_plan(api.run(
            workload, target, engine=engine, sets=set_, jobs=jobs, direct=direct, time=time_,
            repeat=repeat, output=output, verify=verify, dry_run=True,
            history=None if no_history else (history or ""),
        ))  # fmt: skip
    check_exports(csv_path, series_csv)
    live = open_live_csv(live_csv)
    try:
        outcome = api.run(
            workload, target, engine=engine, sets=set_, jobs=jobs, direct=direct, time=time_,
            repeat=repeat, output=output, keep=keep, verify=verify, announce=announce,
            progress_factory=with_live_csv(progress_factory(quiet or not _lead()), live),
            history=None if no_history else (history or ""), stall=stall,
        )  # fmt: skip
    finally:
        close_live_csv(live)
    return finish_run(outcome, as_json, quiet, (csv_path, series_csv))


@app.command()
def workloads() -> int:
    """List workloads and profiles with one-line descriptions."""
    from ..checkpoint.spec import list_checkpoint_profiles
    from ..spec.workload import list_files

    groups = (
        ("Workloads (iobench run NAME TARGET):", list_files("workload")),
        ("Profiles (--profile NAME):", list_files("profile")),
        ("Checkpoint models (iobench checkpoint TARGET --model NAME):", list_checkpoint_profiles()),
    )
    lines: list[str] = []
    for title, entries in groups:
        lines += ["", title] if lines else [title]
        lines += [f"  {name:<24} {desc}" for name, desc in entries]
    out_text("\n".join(lines))  # descriptions wrap in their column at COLUMNS
    return ExitStatus.OK


def _register_optional_commands() -> None:
    """Commands whose modules may be absent in a partial install are added when importable."""
    from .commands import register_all

    register_all()


def _click_exceptions():
    """The exception module of the click that typer itself runs on.

    typer >= 0.26 vendors click as ``typer._click``; older releases import click, their own
    dependency. Taking whichever typer.core holds needs neither declared nor guessed.
    """
    import typer.core

    click = getattr(typer.core, "_click", None) or vars(typer.core)["click"]  # (older: untyped)
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
    "--fail-on": "RULE",  # compare: regression|never|unconfirmed; qualify: fail|indicative
    "--budget": "DURATION",
    "--stall-timeout": "DURATION",
    "--mtbf": "DURATION",
    "--interval": "DURATION",
    "--restart": "DURATION",
    "--checkpoint": "SIZE",
    "--capacity": "SIZE",
    "--model": "NAME",
    "--api": "API",
    "--failure-rate": "RATE",
    "--write-rate": "BANDWIDTH",
    "--read-rate": "BANDWIDTH",
    "--transform": "MOD:FUNC",
    "--goodput": "PERCENT",
    "--au": "PERCENT",
    "--metadata-share": "PERCENT",
    "--recovery": "DURATION",
    "--dataset": "SIZE",
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


def teach(command) -> None:
    """The help as shown: plain metavars, and every command's examples at its end
    (``cmds/examples.py``; the documentation's reference renders the same)."""
    from .commands.examples import epilog

    plain_metavars(command)
    for name, sub in getattr(command, "commands", {}).items():
        sub.epilog = epilog(name) or sub.epilog


def _run_app(args: list[str], early: EarlyStop) -> int:
    """The command's exit status (typer's ``standalone_mode=False``: errors raise)."""
    _register_optional_commands()
    cmd = typer.main.get_command(app)
    teach(cmd)
    rv = cmd.main(args=args, prog_name="iobench", standalone_mode=False)
    code = int(rv) if isinstance(rv, int) else 0
    if code == ExitStatus.INTERRUPTED and early.by:
        # typer turns a KeyboardInterrupt (Ctrl-C, StopSignal) into a silent 130
        err(f"iobench: error: interrupted by {early.by}")
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
    from ..core.redact import forget, remember_argv
    from ..core.safeio import forget_inputs

    forget()
    forget_inputs()  # the input datasets of this command only (tests call main many times)
    remember_argv(args)  # the credentials typed in URLs are masked wherever they show up
    debug = "--debug" in args
    early = EarlyStop()
    old_handlers = early.install()
    _never_fail_on_encoding()
    try:
        code = _run_app(args, early)
    except BaseException as e:  # noqa: BLE001 - each kind its one line and status (_error_code)
        code = _error_code(e, debug)
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
    "main",
]
