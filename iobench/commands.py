"""Commands beyond run/workloads, registered on the typer app (kept apart so cli.py stays small)."""

from __future__ import annotations
