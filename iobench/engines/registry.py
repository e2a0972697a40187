"""Engine registry: name -> lazily imported class, with an install hint for each
(``core.registry``'s shape, fsspec's ``known_implementations``).

Optional engines cost nothing until used, and a missing tool gives a helpful message. An
engine is a subclass of :class:`~iobench.engines.base.Engine` (its contract: ``available``,
``why_not``, ``run_phase``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.errors import EngineUnavailable
from ..core.registry import Registry, entry

if TYPE_CHECKING:
    from .base import Engine

ENGINES = Registry(
    "engine",
    {
        "fio": entry(
            "iobench.engines.fio.FioEngine",
            "install fio (apt-get install fio) or use --engine posix",
        ),
        "fsspec": entry(
            "iobench.engines.fsspec.FsspecEngine",
            "install the filesystem's fsspec package, e.g. pip install 'iobench[s3]'",
        ),
        "posix": entry("iobench.engines.posix.PosixEngine"),
    },
    attribute=True,
)


def get_engine(name: str, **options: Any) -> Engine:
    """An engine instance by name (``options`` go to its constructor, e.g. the posix engine's
    ``workers``); UsageError/EngineUnavailable with a hint otherwise. Every engine iobench
    runs is built here (tests/test_architecture.py checks it)."""
    cls = ENGINES.load(name)
    ok, why = cls.available()
    if not ok:
        raise EngineUnavailable(f"engine {name!r} is unavailable: {why}", hint=ENGINES.hint(name))
    return cls(**options)
