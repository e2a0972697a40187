"""Sample-format registry: name -> lazily imported module, with an install hint for each
(``core.registry``'s shape). Two registries: the synthetic sample formats the dataset writer
produces (``REGISTRY``, contract :class:`SampleFormat`) and the readers of an existing dataset
(``READERS``, contract :class:`DatasetReader`). Each entry is one module of this package.

This module is import-light (no numpy): ``spec`` reads the list of names from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from ..core.registry import Registry, entry


@runtime_checkable
class SampleFormat(Protocol):
    """What a synthetic sample format's module provides.

    ``EXTENSION`` the file name extension (no dot); ``OVERHEAD_PER_FILE`` /
    ``OVERHEAD_PER_SAMPLE`` a generous bound on a file's bytes beyond its samples (headers,
    padding, footers); ``write(f, samples, keys)`` one file of ``samples`` (uint8 arrays) to a
    binary file object; ``decode(data, sizes)`` the samples of one whole file held in memory,
    as arrays no later read changes (``data`` a numpy array is the caller's to give away, and
    the samples may be views of it; any other bytes-like may be a reused buffer: copied from). Optional module attributes, read with ``getattr``: ``LIBRARY`` (the
    optional library it needs, checked by :func:`get_format`), ``ONE_SAMPLE_PER_FILE`` (its
    files hold one sample each) and ``frame(sizes, keys)`` (the file laid out ahead: its size,
    where each sample's bytes go, a function that fills in the rest around samples already in
    place, so the writer generates each sample straight into the file; None when it cannot)
    and ``decoded_size(nbytes)`` (the bytes ``decode`` gives for a sample planned at
    ``nbytes``, where they differ: a batch pool's slots are sized from it).
    """

    EXTENSION: str
    OVERHEAD_PER_FILE: int
    OVERHEAD_PER_SAMPLE: int

    def write(self, f: Any, samples: Sequence[Any], keys: Sequence[str]) -> None: ...

    def decode(self, data: Any, sizes: Any = None) -> list[Any]: ...


@runtime_checkable
class DatasetReader(Protocol):
    """What a reader of an existing dataset (``iobench loader PATH --existing``) provides.

    ``EXTENSIONS`` (lower case, no dot), ``LIBRARY`` (the optional library it needs, or None)
    and ``samples(data, name)``: the (key, sample) pairs of one whole file held in memory,
    decoded as a training job would; a sample that fails comes back as an exception
    instance, a file that fails raises. Its install hint is the registry entry's ``err``.
    """

    EXTENSIONS: tuple[str, ...]
    LIBRARY: str | None

    def samples(self, data: Any, name: str) -> Iterable[tuple[str, Any]]: ...


#: name -> the format's module and the install hint when the module's library is missing.
REGISTRY = Registry(
    "sample format",
    {
        "raw": entry("iobench.formats.raw"),
        "npz": entry("iobench.formats.npz", "install numpy (pip install numpy)"),
        "parquet": entry("iobench.formats.parquet", "install pyarrow (pip install pyarrow)"),
        "tar": entry("iobench.formats.tar"),
        "jpeg": entry("iobench.formats.jpeg", "install Pillow (pip install pillow)"),
    },
)
FORMATS: tuple[str, ...] = REGISTRY.names()


def get_format(name: str) -> SampleFormat:
    """A format's module by name, its library (``LIBRARY``, where it names one) loaded:
    UsageError (unknown) / EngineUnavailable (missing library, with the hint)."""
    mod = _module(name)
    REGISTRY.require_library(name, getattr(mod, "LIBRARY", None))
    return mod


def _module(name: str) -> SampleFormat:
    """A format's module by name (its optional library not checked: its extension and
    overhead need none)."""
    return cast(SampleFormat, REGISTRY.load(name))


def extension(name: str) -> str:
    """The file name extension (no dot) of format ``name``."""
    return str(_module(name).EXTENSION)


def overhead_bytes(name: str, samples_per_file: int) -> int:
    """A generous bound on one file's bytes beyond its samples (headers, padding, footers)."""
    fmt = _module(name)
    return int(fmt.OVERHEAD_PER_FILE) + int(fmt.OVERHEAD_PER_SAMPLE) * samples_per_file


#: Readers of an EXISTING dataset (``iobench loader PATH --existing``).
READERS = Registry(
    "dataset format",
    {
        "image": entry("iobench.formats.image", "install Pillow (pip install 'iobench[images]')"),
        "webdataset": entry("iobench.formats.webdataset"),
        "parquet": entry("iobench.formats.columnar", "install pyarrow (pip install pyarrow)"),
        "npz": entry("iobench.formats.arrays"),
        "hdf5": entry("iobench.formats.hdf5", "install h5py (pip install 'iobench[hdf5]')"),
        "tfrecord": entry("iobench.formats.tfrecord"),
    },
)


def get_reader(name: str) -> DatasetReader:
    """An existing-dataset reader by name; UsageError (unknown) / EngineUnavailable (its
    optional library is not installed, with the hint)."""
    mod = cast(DatasetReader, READERS.load(name))
    READERS.require_library(name, mod.LIBRARY)
    return mod
