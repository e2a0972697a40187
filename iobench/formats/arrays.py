"""``npy`` / ``npz``: numpy files of an existing dataset, one sample per file (DLIO's unet3d
layout): an ``.npy`` is one array, an ``.npz`` a dict of its arrays (read whole, no pickle).

The loader hands this reader the file as a fresh writable uint8 array (``ARRAY_INPUT``): an
``.npy`` then comes back as a view of it (its header parsed by numpy's own parser for every
file, as ``np.load`` does), so the file's bytes are copied once, by the read, as ``np.load``
of a path copies them once into the array it returns; anything else (``.npz``, an object
array, a malformed header, bytes) goes through ``np.load``, whose errors stand."""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from typing import Any

import numpy as np

NAME = "npz"
EXTENSIONS = ("npz", "npy")
LIBRARY = None
SAMPLES_PER_FILE = 1  # a failed file is one failed sample
#: ``read_file`` gives this reader the file as a writable uint8 array it may keep views of.
ARRAY_INPUT = True
_MAGIC = b"\x93NUMPY"


def _header(head: bytes) -> tuple[np.dtype, tuple[int, ...], bool, int] | None:
    """(dtype, shape, fortran order, data offset) of an .npy header (``head``: its first
    bytes, through the header's end), None when it is not one numpy can view in place."""
    try:
        buf = io.BytesIO(head)
        version = np.lib.format.read_magic(buf)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(buf)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(buf)
        else:
            return None
    except (ValueError, SyntaxError, TypeError):
        return None
    if dtype.hasobject:
        return None  # an object array needs pickle: np.load refuses it
    return dtype, tuple(shape), bool(fortran), buf.tell()


def npy_view(data: np.ndarray) -> np.ndarray | None:
    """The .npy array held in ``data`` (a uint8 array) as a view of it, or None."""
    b = bytes(data[:12])
    if len(b) < 10 or not b.startswith(_MAGIC) or b[6] not in (1, 2):
        return None
    start = 10 if b[6] == 1 else 12
    n = int.from_bytes(b[8:start], "little")
    if start + n > len(data):
        return None
    got = _header(bytes(data[: start + n]))
    if got is None:
        return None
    dtype, shape, fortran, offset = got
    if offset + math.prod(shape) * dtype.itemsize != len(data):
        return None  # truncated or trailing bytes: np.load says which
    flat = data[offset:].view(dtype) if dtype.itemsize else np.empty(0, dtype)
    return flat.reshape(shape, order="F" if fortran else "C")


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """The one sample of a numpy file: an array (npy) or a dict of arrays (npz)."""
    if isinstance(data, np.ndarray):
        arr = npy_view(data) if data.dtype == np.uint8 and data.flags.writeable else None
        if arr is not None:
            yield name, arr
            return
        data = data.data  # its memoryview: BytesIO takes it
    loaded = np.load(io.BytesIO(data), allow_pickle=False)
    if isinstance(loaded, np.ndarray):
        yield name, loaded
        return
    with loaded as z:
        yield name, {k: np.asarray(z[k]) for k in z.files}
