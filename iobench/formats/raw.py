"""``raw``: the samples back to back (one per file unless ``samples_per_file`` says more; the
reader then needs the sample sizes, as a raw-record reader does)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

EXTENSION = "bin"
OVERHEAD_PER_FILE = 0
OVERHEAD_PER_SAMPLE = 0


def contiguous(samples: Sequence[np.ndarray]) -> memoryview | None:
    """The samples as one buffer when they lie back to back in memory (the dataset writer
    builds them so), else None: one write instead of one per sample, no concatenation."""
    if not samples or any(s.dtype != np.uint8 or s.ndim != 1 for s in samples):
        return None
    if any(not s.flags.c_contiguous for s in samples):
        return None
    start = samples[0].__array_interface__["data"][0]
    pos = start
    for s in samples:
        if len(s) and s.__array_interface__["data"][0] != pos:
            return None  # (an empty view's address is its base's: no gap either way)
        pos += len(s)
    first = samples[0]
    base = first.base if isinstance(first.base, np.ndarray) else None
    if base is None:
        return first.data if len(samples) == 1 else None
    lo = base.__array_interface__["data"][0]
    if not (lo <= start and pos <= lo + base.nbytes) or not base.flags.c_contiguous:
        return None
    flat = base.reshape(-1).view(np.uint8)
    return flat[start - lo : pos - lo].data


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    whole = contiguous(samples)
    if whole is not None:
        f.write(whole)
        return
    for s in samples:
        f.write(s.data)


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    """The samples; views of ``data`` when it is a numpy array (the caller's to give away,
    ``formats.reader.decode``), else copies."""
    owned = isinstance(data, np.ndarray)
    view = data.reshape(-1).view(np.uint8) if owned else np.frombuffer(data, dtype=np.uint8)
    if not sizes:
        return [view if owned else view.copy()]
    out, pos = [], 0
    for n in sizes:
        part = view[pos : pos + n]
        out.append(part if owned else part.copy())
        pos += n
    if pos != len(view):
        raise ValueError(f"raw file holds {len(view)} bytes, sample sizes add to {pos}")
    return out
