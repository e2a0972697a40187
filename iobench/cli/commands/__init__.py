"""Commands beyond run/workloads: one module each, registering on ``common.app`` when imported.

Each module does ``from .common import app, out, err`` (the app and what the commands share;
``iobench.cli.app`` re-exports them and runs the app) and defines ``@app.command()`` functions
that parse, call one library function, render, and return an exit status.
"""

from __future__ import annotations

import importlib

COMMAND_MODULES = (
    "loader", "estimate", "datasize", "qualify", "compare", "history", "report", "checkpoint",
    "profile", "plan",
)  # fmt: skip


def register_all() -> None:
    for name in COMMAND_MODULES:
        try:
            importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
