"""``npy`` / ``npz``: numpy files of an existing dataset, one sample per file (DLIO's unet3d
layout): an ``.npy`` is one array, an ``.npz`` a dict of its arrays (read whole, no pickle).

The loader hands this reader the file as a fresh writable uint8 array (``ARRAY_INPUT``): an
``.npy`` then comes back as a view of it (its header parsed by numpy's own parser for every
file, as ``np.load`` does), so the file's bytes are copied once, by the read, as ``np.load``
of a path copies them once into the array it returns. An ``.npz`` of stored members (what
``np.savez`` writes) is read in place (``npz_arrays``): each member's CRC-32 checked and its
array copied out once, the work ``np.load`` does without its chunked copies; anything else
(a compressed ``.npz``, an object array, a malformed header, bytes) goes through
``np.load``, whose errors stand."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np

from .npzview import npy_view, npz_arrays, read_stored

NAME = "npz"
EXTENSIONS = ("npz", "npy")
LIBRARY = None
SAMPLES_PER_FILE = 1  # a failed file is one failed sample
#: ``read_file`` gives this reader the file as a writable uint8 array it may keep views of.
ARRAY_INPUT = True


class ReadArrays:
    """An ``.npz`` read and decoded in one pass (``read_fd``): its (key, array) members, and
    its size in bytes as its ``len`` (what the loader counts as read)."""

    __slots__ = ("members", "nbytes")

    def __init__(self, members: list[tuple[str, np.ndarray]], nbytes: int):
        self.members, self.nbytes = members, nbytes

    def __len__(self) -> int:
        return self.nbytes


def read_fd(fd: int, size: int, clock: list[float]) -> ReadArrays | None:
    """The ``.npz`` open on ``fd`` (``size`` bytes) read and decoded in one pass, each array
    read straight into itself and its CRC-32 taken as each part arrives
    (``npzview.read_stored``; ``clock[0]`` gets the decode's share); None for anything else
    (an ``.npy``, an archive not of stored members): the loader then reads it whole."""
    members = read_stored(fd, size, clock)
    return None if members is None else ReadArrays(members, size)


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """The one sample of a numpy file: an array (npy) or a dict of arrays (npz)."""
    if isinstance(data, ReadArrays):
        yield name, dict(data.members)
        return
    if isinstance(data, np.ndarray):
        arr = npy_view(data) if data.dtype == np.uint8 and data.flags.writeable else None
        if arr is not None:
            yield name, arr
            return
        data = data.data  # its memoryview: BytesIO takes it
    members = npz_arrays(data)
    if members is not None:
        yield name, dict(members)
        return
    loaded = np.load(io.BytesIO(data), allow_pickle=False)
    if isinstance(loaded, np.ndarray):
        yield name, loaded
        return
    with loaded as z:
        yield name, {k: np.asarray(z[k]) for k in z.files}
