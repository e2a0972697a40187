"""Engine registry: name -> lazily imported class, with an install hint for each.

Optional engines cost nothing until used, and a missing tool gives a helpful message.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..core.errors import EngineUnavailable, UsageError
from ..core.tools import fio_version as fio_version  # re-exported: fio and the tests use it here

if TYPE_CHECKING:
    from .base import Engine

ENGINES: dict[str, dict[str, str]] = {
    "fio": {
        "class": "iobench.engines.fio.FioEngine",
        "err": "install fio (apt-get install fio) or use --engine posix",
    },
    "fsspec": {
        "class": "iobench.engines.fsspec.FsspecEngine",
        "err": "install the filesystem's fsspec package, e.g. pip install 'iobench[s3]'",
    },
    "posix": {"class": "iobench.engines.posix.PosixEngine", "err": ""},
}


def get_engine(name: str, **options: Any) -> Engine:
    """An engine instance by name (``options`` go to its constructor, e.g. the posix engine's
    ``workers``); UsageError/EngineUnavailable with a hint otherwise. Every engine iobench
    runs is built here (tests/test_architecture.py checks it)."""
    entry = ENGINES.get(name)
    if entry is None:
        raise UsageError(
            f"unknown engine {name!r}",
            hint=f"choose one of: {', '.join(sorted(ENGINES))}",
        )
    module_name, _, cls_name = entry["class"].rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except ImportError as e:
        raise EngineUnavailable(
            f"engine {name!r} cannot be loaded ({e})", hint=entry["err"]
        ) from None
    ok, why = cls.available()
    if not ok:
        raise EngineUnavailable(f"engine {name!r} is unavailable: {why}", hint=entry["err"])
    return cls(**options)
