"""One registry shape for every pluggable part: name -> ``{"class": dotted path, "err": hint}``.

The shape is fsspec's ``known_implementations``: ``"class"`` names the object to load (a
class for engines, a module for sample formats, dataset readers and generators) by its
dotted path, imported only when first asked for, and ``"err"`` says how to install what it
needs (empty when it needs nothing). An unknown name is a :class:`UsageError` that lists
the choices; a failed import is :class:`EngineUnavailable` carrying the hint. Engines,
sample formats, dataset readers and workload generators are all registries of this kind
(``engines/registry.py``, ``formats/registry.py``, ``run/phases/__init__.py``), each with a
Protocol for what its entries provide.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import EngineUnavailable, UsageError

Entry = Mapping[str, str]


def entry(path: str, err: str = "") -> dict[str, str]:
    """One registry entry: what to load (``module`` or ``module.attribute``) and the hint."""
    return {"class": path, "err": err}


@dataclass(frozen=True)
class Registry(Mapping[str, Entry]):
    """A read-only mapping of names to entries, with :meth:`load`.

    ``kind`` names the entries in messages ("engine", "sample format", …); ``attribute``
    says whether ``"class"`` is ``module.attribute`` (engines) or a module (the rest)."""

    kind: str
    entries: Mapping[str, Entry]
    attribute: bool = False

    def __post_init__(self) -> None:
        for name, value in self.entries.items():
            if set(value) != {"class", "err"} or not value["class"]:
                raise ValueError(f"{self.kind} {name!r}: an entry is {{'class': …, 'err': …}}")

    def __getitem__(self, name: str) -> Entry:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def names(self) -> tuple[str, ...]:
        return tuple(self.entries)

    def hint(self, name: str) -> str | None:
        """The install hint of ``name`` (None when it needs nothing)."""
        return self.entries[name]["err"] or None

    def known(self, name: str) -> Entry:
        """The entry of ``name``; UsageError naming the choices when there is none."""
        found = self.entries.get(name)
        if found is None:
            raise UsageError(
                f"unknown {self.kind} {name!r}", hint=f"choose one of: {', '.join(self.entries)}"
            )
        return found

    def load(self, name: str) -> Any:
        """The object ``name`` names, imported now; UsageError (unknown) or EngineUnavailable
        (its module or a library it imports is missing, with the hint)."""
        path = self.known(name)["class"]
        module, attr = path.rpartition(".")[::2] if self.attribute else (path, "")
        try:
            loaded = importlib.import_module(module)
        except ImportError as e:
            raise EngineUnavailable(
                f"{self.kind} {name!r} cannot be loaded ({e})", hint=self.hint(name)
            ) from None
        return getattr(loaded, attr) if attr else loaded

    def require_library(self, name: str, library: str | None) -> None:
        """EngineUnavailable (with the hint) when ``library``, which ``name`` needs, is missing."""
        if not library:
            return
        try:
            importlib.import_module(library)
        except ImportError as e:
            raise EngineUnavailable(
                f"{self.kind} {name!r} needs {library} ({e})", hint=self.hint(name)
            ) from None
