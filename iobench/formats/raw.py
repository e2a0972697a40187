"""``raw``: the samples back to back (one per file unless ``samples_per_file`` says more; the
reader then needs the sample sizes, as a raw-record reader does)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

EXTENSION = "bin"
OVERHEAD_PER_FILE = 0
OVERHEAD_PER_SAMPLE = 0


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    for s in samples:
        f.write(memoryview(s))


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    view = np.frombuffer(data, dtype=np.uint8)
    if not sizes:
        return [view.copy()]
    out, pos = [], 0
    for n in sizes:
        out.append(view[pos : pos + n].copy())
        pos += n
    if pos != len(view):
        raise ValueError(f"raw file holds {len(view)} bytes, sample sizes add to {pos}")
    return out
