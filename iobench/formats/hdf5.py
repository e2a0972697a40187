"""``hdf5``: an HDF5 file's datasets read with h5py; sample ``i`` is row ``i`` of every
dataset whose first axis is the longest (the sample axis), as an HDF5 Dataset class reads it.

h5py is an optional extra (``pip install 'iobench[hdf5]'``), imported on first decode.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np

NAME = "hdf5"
EXTENSIONS = ("h5", "hdf5", "hdf")
LIBRARY = "h5py"


def _datasets(f: Any) -> dict[str, Any]:
    import h5py

    found: dict[str, Any] = {}

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset) and obj.shape:
            found[name] = obj

    f.visititems(visit)
    return found


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """(``name#i``, {dataset: row i}) for every row along the sample axis."""
    import h5py

    with h5py.File(io.BytesIO(bytes(data)), "r") as f:
        dsets = _datasets(f)
        if not dsets:
            return
        n = max(d.shape[0] for d in dsets.values())
        arrays = {k: np.asarray(d[()]) for k, d in dsets.items() if d.shape[0] == n}
    for i in range(n):
        yield f"{name}#{i}", {k: a[i] for k, a in arrays.items()}


def count(data: Any) -> int:
    """The rows along the sample axis, from the file's metadata (no dataset read)."""
    import h5py

    with h5py.File(io.BytesIO(bytes(data)), "r") as f:
        dsets = _datasets(f)
        return max((d.shape[0] for d in dsets.values()), default=0)
