"""``jpeg``: one JPEG image per file, as MLPerf Storage's retinanet reads (DLIO ``format:
jpeg``): an 8-bit greyscale image whose pixels are the sample's random bytes (DLIO's
generator: ``np.random.randint`` pixels through ``PIL.Image.fromarray(...).save(format="JPEG")``
at Pillow's default quality), decoded as DLIO's ImageReader decodes it
(``np.asarray(Image.open(f))``): every sample costs the loader a real JPEG decode.

Sized to the sample: random pixels compress to a steady number of bytes per pixel at a given
quality, measured once per process on a 256×256 image, so the image's side is chosen for a
file of about the sample's size (DLIO takes the side as √record_length instead, and its files
come out near half the record length, as its documentation warns; iobench keeps the bytes the
profile states, so the storage demand is the profile's).

Pillow is needed (``LIBRARY``): the registry checks it before a run and says how to install it.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

EXTENSION = "jpg"
LIBRARY = "PIL"
ONE_SAMPLE_PER_FILE = True
#: Header and tables, and how far above its sample size a file may come out (the bytes per
#: pixel of noise vary by a few per cent from image to image).
OVERHEAD_PER_FILE = 4096
OVERHEAD_PER_SAMPLE = 64 << 10
_BPP: list[float] = []  # bytes per pixel of random pixels at Pillow's default quality


def bytes_per_pixel() -> float:
    """What a JPEG of random greyscale pixels takes per pixel here (measured once)."""
    if not _BPP:
        from PIL import Image

        px = np.random.default_rng(0).integers(0, 256, (256, 256), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(px).save(buf, format="JPEG")
        _BPP.append(len(buf.getvalue()) / px.size)
    return _BPP[0]


def side_for(nbytes: int) -> int:
    """The side of the square image whose JPEG is about ``nbytes``."""
    return max(8, round(math.sqrt(max(nbytes - 700, 64) / bytes_per_pixel())))


def decoded_size(nbytes: int) -> int:
    """The bytes ``decode`` gives for a sample planned at ``nbytes``: its image's pixels."""
    return side_for(nbytes) ** 2


def encode(sample: np.ndarray) -> bytes:
    """One sample's bytes as the pixels of a JPEG of about its size (repeated to fill it)."""
    from PIL import Image

    side = side_for(len(sample))
    flat = sample.reshape(-1).view(np.uint8)
    px = np.resize(flat, side * side) if len(flat) else np.zeros(side * side, np.uint8)
    buf = io.BytesIO()
    Image.fromarray(px.reshape(side, side)).save(buf, format="JPEG")
    return buf.getvalue()


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    if len(samples) != 1:
        raise ValueError(f"a jpeg file holds one sample, not {len(samples)}")
    f.write(encode(samples[0]))


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    """The image's pixels, decoded whole (DLIO: ``np.asarray(Image.open(f))``), flat."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        px = np.asarray(im)
    return [px.reshape(-1)]
