"""The library functions the command line calls, one per command.

Each takes plain values (strings as typed by a user are parsed here, at the boundary) and
returns results; none prints.
"""

from __future__ import annotations

from typing import Any

from .core.errors import Interrupted, StoreError, UsageError, quoted
from .run.guard import UNARMED, StallSetting
from .run.runner import dry_run_workload, run_workload
from .run.session import RunOutcome
from .spec.workload import load_workload, parse_overrides
from .target import is_url


def _default_engine(target: str, engine: str | None) -> str:
    if engine is not None:  # an empty --engine "$ENGINE" is an unknown engine, not the default
        return engine
    return "fsspec" if is_url(target) else "posix"


def run(
    workload: str,
    target: str,
    *,
    engine: str | None = None,
    sets: list[str] | None = None,
    jobs: int | None = None,
    direct: bool | None = None,
    time: str | None = None,
    repeat: int = 1,
    output: str | None = None,
    keep: bool = False,
    verify: bool = False,
    progress_factory: Any = None,
    history: str | None = None,
    command: str | None = None,
    announce: Any = None,
    dry_run: bool = False,
    stall: StallSetting = UNARMED,
) -> RunOutcome | str:
    """``iobench run``: load the workload, run it, save the result (and append to history).

    ``announce`` gets the plan line before the first byte; ``dry_run``: the checks and the
    plan's text are all (returned), nothing is written; ``stall``: the I/O watchdog
    (``StallSetting(armed=True)``: it gives up on I/O that makes no progress, exit 4)."""
    overrides: dict[str, Any] = parse_overrides(sets)
    if jobs is not None:
        overrides["jobs"] = str(jobs)
    if direct is not None:
        overrides["direct"] = direct
    if time is not None:  # --time: every phase runs that long (--set steady=true: its limit)
        overrides["time"] = time
        overrides.setdefault("steady", False)
    if verify:
        overrides["verify"] = True
    if repeat < 1:
        raise UsageError(
            f"--repeat must be at least 1, got {repeat}", hint="give --repeat 1 or more"
        )
    wl = load_workload(workload, overrides)
    check_history_url(history)
    if dry_run:
        return dry_run_workload(
            wl, target, engine_name=_default_engine(target, engine), repeat=repeat,
            output=output, command=command,
        )  # fmt: skip
    from .distributed import coordinator_from_env

    coord = coordinator_from_env()
    kwargs: dict[str, Any] = {}
    if progress_factory is not None:
        kwargs["progress_factory"] = progress_factory
    outcome = run_workload(
        wl, target, engine_name=_default_engine(target, engine), repeat=repeat, output=output,
        keep=keep, command=command, coord=coord, announce=announce, stall=stall, **kwargs,
    )  # fmt: skip
    if history is not None and coord.rank == 0:
        append_history(outcome, history)
    return outcome


def check_history_url(url: str | None) -> None:
    """Refuse a history URL that can never be written (unknown protocol, backend missing)
    before the run starts: bad input is exit 2 with nothing written, not a surprise after."""
    if url is None:
        return
    from . import history as history_mod

    history_mod.check_url(url or None)


def append_history(outcome: RunOutcome, url: str) -> None:
    """Append a run to the history store; a failure there is a warning, not a lost run: the
    run exits by its own outcome, whatever the history did (a backend's own exception, missing
    credentials, a path pyarrow refuses included).

    The warning is added to the saved result.json too (re-written atomically).
    """
    try:
        from . import history as history_mod
    except ImportError:  # history arrives with its own module
        return
    try:
        history_mod.append(outcome.run, url or None)
    except (StoreError, UsageError) as e:
        _history_warning(outcome, e.one_line())
    except Interrupted:
        raise
    except Exception as e:  # noqa: BLE001 - nothing the history does may turn a run into exit 4
        text = quoted(e)
        _history_warning(outcome, f"{type(e).__name__}: {text}" if text else type(e).__name__)


def _history_warning(outcome: RunOutcome, why: str) -> None:
    outcome.run.warnings.append(f"history not updated: {why}")
    if outcome.result_path is not None:
        from .result import file as results

        try:
            results.save(outcome.run, outcome.result_path.parent)
        except OSError:  # the figures are printed and the first save stands
            pass
