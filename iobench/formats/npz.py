"""``npz``: ``np.savez`` (stored, not compressed) with one uint8 array per sample under keys
``s00000``, ``s00001``, … (DLIO's unet3d format is one sample per npz file)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np

EXTENSION = "npz"
OVERHEAD_PER_FILE = 1024
OVERHEAD_PER_SAMPLE = 512


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    np.savez(f, **{f"s{j:05d}": s for j, s in enumerate(samples)})


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return [np.asarray(z[k], dtype=np.uint8) for k in sorted(z.files)]
