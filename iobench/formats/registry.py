"""Sample-format registry: name -> lazily imported module, with an install hint for each.

Each format is one module of this package with the same small interface:

- ``EXTENSION``: the file name extension (no dot);
- ``OVERHEAD_PER_FILE`` / ``OVERHEAD_PER_SAMPLE``: a generous bound on a file's bytes beyond its
  samples (headers, padding, footers);
- ``write(f, samples, keys)``: one file of ``samples`` (uint8 arrays) to a binary file object;
- ``decode(data, sizes)``: the samples of one whole file held in memory, as arrays it owns;
- optionally ``LIBRARY`` (the optional library it needs, checked by ``get_format``) and
  ``ONE_SAMPLE_PER_FILE`` (its files hold one sample each);
- optionally ``frame(sizes, keys)``: the file laid out ahead, (its size, where each sample's
  bytes go, a function that fills in the rest around samples already in place), so the
  dataset writer generates each sample straight into the file (None when it cannot).

This module is import-light (no numpy): ``spec`` reads the list of names from it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..core.errors import EngineUnavailable, UsageError

#: name -> (module, install hint when the module's library is missing).
REGISTRY: dict[str, tuple[str, str]] = {
    "raw": ("iobench.formats.raw", ""),
    "npz": ("iobench.formats.npz", "install numpy (pip install numpy)"),
    "parquet": ("iobench.formats.parquet", "install pyarrow (pip install pyarrow)"),
    "tar": ("iobench.formats.tar", ""),
    "jpeg": ("iobench.formats.jpeg", "install Pillow (pip install pillow)"),
}
FORMATS: tuple[str, ...] = tuple(REGISTRY)


def get_format(name: str) -> ModuleType:
    """A format's module by name, its library (``LIBRARY``, where it names one) loaded:
    UsageError (unknown) / EngineUnavailable (missing library, with the hint)."""
    mod = _module(name)
    library = getattr(mod, "LIBRARY", None)
    if library:
        try:
            importlib.import_module(library)
        except ImportError as e:
            raise EngineUnavailable(
                f"sample format {name!r} needs {library} ({e})", hint=REGISTRY[name][1] or None
            ) from None
    return mod


def _module(name: str) -> ModuleType:
    """A format's module by name (its optional library not checked: its extension and
    overhead need none)."""
    entry = REGISTRY.get(name)
    if entry is None:
        raise UsageError(
            f"unknown sample format {name!r}", hint=f"choose one of: {', '.join(FORMATS)}"
        )
    module, hint = entry
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise EngineUnavailable(
            f"sample format {name!r} cannot be loaded ({e})", hint=hint or None
        ) from None


def extension(name: str) -> str:
    """The file name extension (no dot) of format ``name``."""
    return str(_module(name).EXTENSION)


def overhead_bytes(name: str, samples_per_file: int) -> int:
    """A generous bound on one file's bytes beyond its samples (headers, padding, footers)."""
    fmt = _module(name)
    return int(fmt.OVERHEAD_PER_FILE) + int(fmt.OVERHEAD_PER_SAMPLE) * samples_per_file


#: Readers of an EXISTING dataset (``iobench loader PATH --existing``): name -> module. Each
#: module has ``EXTENSIONS`` (lower case, no dot), ``LIBRARY`` (the optional library it needs,
#: or None), ``HINT`` (how to install it) and ``samples(data, name)``: the (key, sample) pairs
#: of one whole file held in memory, decoded as a training job would; a sample that fails
#: comes back as an exception instance, a file that fails raises.
READERS: dict[str, str] = {
    "image": "iobench.formats.image",
    "webdataset": "iobench.formats.webdataset",
    "parquet": "iobench.formats.columnar",
    "npz": "iobench.formats.arrays",
    "hdf5": "iobench.formats.hdf5",
    "tfrecord": "iobench.formats.tfrecord",
}


def get_reader(name: str) -> ModuleType:
    """An existing-dataset reader by name; UsageError (unknown) / EngineUnavailable (its
    optional library is not installed, with the hint)."""
    module = READERS.get(name)
    if module is None:
        raise UsageError(
            f"unknown dataset format {name!r}", hint=f"choose one of: {', '.join(READERS)}"
        )
    mod = importlib.import_module(module)
    if mod.LIBRARY:
        try:
            importlib.import_module(mod.LIBRARY)
        except ImportError as e:
            raise EngineUnavailable(
                f"dataset format {name!r} needs {mod.LIBRARY} ({e})", hint=mod.HINT or None
            ) from None
    return mod
