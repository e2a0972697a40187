"""``tar``: a webdataset-like shard, one ``<key>.bin`` member per sample."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Sequence
from typing import Any

import numpy as np

EXTENSION = "tar"
OVERHEAD_PER_FILE = 20 << 10
OVERHEAD_PER_SAMPLE = 1024
_TAR_COPY = 1 << 20


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    with tarfile.open(fileobj=f, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        tar.copybufsize = _TAR_COPY
        for key, s in zip(keys, samples, strict=True):
            info = tarfile.TarInfo(f"{key}.bin")
            info.size = len(s)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(memoryview(s)))


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        out = []
        for m in tar:
            if m.isfile():
                fobj = tar.extractfile(m)
                assert fobj is not None
                out.append(np.frombuffer(fobj.read(), dtype=np.uint8))
        return out
