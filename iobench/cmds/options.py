"""Options that several commands share, declared once (typer takes the same default object in
every command that lists it): where the result goes, how it is printed, the history."""

from __future__ import annotations

import typer

OUTPUT_OPTION = typer.Option(
    None, "--output", help="Result directory (default ./iobench-results/RUN_ID)."
)
JSON_OPTION = typer.Option(False, "--json", help="Print result.json instead of the table.")
KEEP_OPTION = typer.Option(False, "--keep", help="Keep the run directory on the target.")
QUIET_OPTION = typer.Option(False, "--quiet", "-q", help="No progress bars.")
HISTORY_OPTION = typer.Option(None, "--history", help="History URL to append this run to.")
NO_HISTORY_OPTION = typer.Option(False, "--no-history", help="Do not append to the history.")
