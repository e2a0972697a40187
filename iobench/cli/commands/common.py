"""What every command shares: the typer ``app`` the commands register on, the output
functions (``out``, ``err``, ``out_report``: masked, never failing on encoding or a lost
stdout), the run options (``--stall-timeout``, ``--csv``, ``--live-csv``, ``--series-csv``)
and ``finish_run``. ``iobench.cli.app`` re-exports them and runs the app."""

from __future__ import annotations

import errno
import io
import os
import sys
from typing import TYPE_CHECKING

import typer

from ...core.errors import ExitStatus

if TYPE_CHECKING:
    from ...run.guard import StallSetting

app = typer.Typer(
    add_completion=True,  # --install-completion, --show-completion (docs: reference/cli)
    no_args_is_help=True,
    help="iobench: can this storage feed these GPUs? Storage and data-loader throughput analyzer.",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from ... import __version__

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
    (:func:`iobench.core.redact.for_terminal`). A stdout that cannot be written (closed, a full
    disk, a closed pipe) is said once on stderr and changes no exit status: that is decided
    by what the command did (a run by its own outcome; its result.json has the figures)."""
    if _stdout_lost:
        return
    if styled:  # colour codes kept; every other control character escaped as always
        from ...core.redact import for_terminal_styled

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


def out_text(text: str) -> None:
    """:func:`out` for text a person reads (tables, prose, plans): every line folded to
    stdout's width (``COLUMNS``, the terminal's, or 120 into a pipe; :mod:`iobench.core.textfit`),
    never cut. JSON, CSV and markdown go through :func:`out` as they are."""
    from ...core.redact import for_terminal
    from ...core.textfit import fold_text, stdout_format

    out(fold_text(for_terminal(text), stdout_format()[0]))


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
    from ...core.redact import for_terminal

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
        from ...core.errors import UsageError

        raise UsageError(f"give {new} once (not also {old}, its old name)")
    return old_value


STALL_OPTION = typer.Option(
    None,
    "--stall-timeout",
    help="Give up (exit 4, partial result kept) when a phase's I/O makes no progress for "
    "this long: blocked storage (default 60s, or the workload's stall_timeout; 0: never).",
)


def stall_setting(value: str | None) -> StallSetting:
    """--stall-timeout: the I/O watchdog, armed, for this command's runs (each run session's
    guard runs its own; iobench.run.guard)."""
    from ...core.units import check_stall_timeout, parse_duration
    from ...run import supervisor
    from ...run.guard import StallSetting

    supervisor.mode_from_env()  # IOBENCH_SUPERVISE, checked before anything is written
    if value is None:
        return StallSetting(armed=True)
    seconds = parse_duration(value, what="--stall-timeout")
    return StallSetting(armed=True, timeout_s=check_stall_timeout(seconds, text=value))


def progress_factory(quiet: bool, lines: bool = False):
    """A bar per phase on a terminal; with ``lines``, where stderr is no terminal (a pipe, a
    log), one line per phase as it finishes instead of silence."""
    from ..progress import PhaseLines, TqdmProgress

    if lines and not quiet and not sys.stderr.isatty():
        return PhaseLines
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
    from ..livecsv import LiveCsv

    return LiveCsv(path)


def close_live_csv(live) -> None:
    if live is None:
        return
    live.close()
    if live.error:
        err(f"iobench: warning: --live-csv {live.path}: {live.error}; its rows stop there")


def _lead() -> bool:
    from ...distributed import is_lead_rank

    return is_lead_rank()


def out_report(run, baseline=None) -> None:
    """Print a run's terminal summary at stdout's width, in colour on a terminal
    (:func:`iobench.report.stdout_format`: plain and 120 columns into a pipe or file)."""
    from ... import report

    width, colour = report.stdout_format()
    text = report.render_terminal(run, width=width, colour=colour, baseline=baseline)
    out(text, styled=colour)


def check_exports(csv_path: str | None, series_csv: str | None) -> None:
    """Refuse a bad --csv/--series-csv path before anything runs (exit 2, nothing written)."""
    from ...history.export import check_output

    for path, flag in ((csv_path, "--csv"), (series_csv, "--series-csv")):
        if path:
            check_output(path, flag)


def write_exports(run, csv_path: str | None, series_csv: str | None) -> None:
    """--csv: one row per phase; --series-csv: one row per phase x interval. Rank 0 only;
    a partial run's rows are written too (its status column says so)."""
    if run is None or not (csv_path or series_csv) or not _lead():
        return
    from ...history import export

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
        from ...result import file as results

        out(results.dumps(outcome.run))
    else:
        out_report(outcome.run)
    if outcome.result_path and not as_json:
        out_text(f"result: {outcome.result_path}")
    write_exports(outcome.run, *exports)
    if outcome.error is not None:
        raise outcome.error
    _steady_advice(outcome.run)
    return ExitStatus.OK


def _steady_advice(run) -> None:
    """A run with indicative phases ends with one line on stderr: which, and the option
    that would make them steady (iobench.result.steady_advice)."""
    from ...result.steady_advice import steady_advice

    line = (
        steady_advice(list(run.phases or []), dict(run.workload or {}), run.loader) if run else None
    )
    if line:
        err(line)


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


DRY_RUN_OPTION = typer.Option(
    False, "--dry-run", help="Print the plan (bytes, time bound, free space); write nothing."
)


def announce(line: str) -> None:
    """The plan line before the first byte (session.open_run): on stderr, rank 0's."""
    err(line)


def print_plan(text) -> int:
    """--dry-run: the plan's text on stdout (rank 0); nothing was written."""
    if _lead():
        out(text)
    return ExitStatus.OK
