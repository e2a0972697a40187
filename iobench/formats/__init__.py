"""Sample file formats: a registry of formats (one module each), the dataset writer, and the
whole-file reader that decodes through each format's real library.

- ``registry``: name -> format module (``raw``, ``npz``, ``parquet``, ``tar``), install hints;
  import-light, so ``spec`` and the phases read the list of formats from it.
- ``samples``: incompressible unique sample bytes (``SampleSource``) and their CRCs.
- ``writer``: ``write_files`` (phase ``dataset-write``).
- ``reader``: ``FileReader`` (O_DIRECT or buffered whole-file reads), ``decode``.

The writer and reader (numpy, the target and the stats) load on first use of one of their
names, so importing the registry stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

from .registry import FORMATS, REGISTRY, extension, get_format, overhead_bytes

_LAZY = {
    "SampleSource": "samples",
    "sample_key": "writer",
    "split_sizes": "writer",
    "write_sample_file": "writer",
    "write_files": "writer",
    "_put_sample_file": "writer",
    "FileReader": "reader",
    "decode": "reader",
    "read_samples": "reader",
}

__all__ = [
    "EXTENSIONS",
    "FORMATS",
    "REGISTRY",
    "extension",
    "get_format",
    "overhead_bytes",
    *(n for n in _LAZY if not n.startswith("_")),
]


def __getattr__(name: str) -> Any:
    if name == "EXTENSIONS":
        return {n: extension(n) for n in FORMATS}
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
