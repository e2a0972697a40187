"""``npy`` / ``npz``: numpy files of an existing dataset, one sample per file (DLIO's unet3d
layout): an ``.npy`` is one array, an ``.npz`` a dict of its arrays (read whole, no pickle)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np

NAME = "npz"
EXTENSIONS = ("npz", "npy")
LIBRARY = None
SAMPLES_PER_FILE = 1  # a failed file is one failed sample


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """The one sample of a numpy file: an array (npy) or a dict of arrays (npz)."""
    loaded = np.load(io.BytesIO(data), allow_pickle=False)
    if isinstance(loaded, np.ndarray):
        yield name, loaded
        return
    with loaded as z:
        yield name, {k: np.asarray(z[k]) for k in z.files}
