"""The command line: the typer app, one module per command, progress, the live CSV."""
