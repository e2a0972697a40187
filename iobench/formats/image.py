"""``image``: an image folder (ImageFolder layout ``class/xxx.jpg``), one sample per file,
decoded with Pillow to an ``H×W×C`` uint8 array as torchvision's loader does (RGB).

Pillow is an optional extra (``pip install 'iobench[images]'``), imported on first decode.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import numpy as np

NAME = "image"
EXTENSIONS = ("jpg", "jpeg", "png")
LIBRARY = "PIL"
SAMPLES_PER_FILE = 1  # a failed file is one failed sample


def label_of(relpath: str) -> str:
    """The class of an ImageFolder file: its first directory ("" at the top)."""
    head, sep, _ = relpath.partition("/")
    return head if sep else ""


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """The one sample of an image file: (its name, the decoded RGB array)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        im.load()  # the whole decode here: a truncated file fails now, not later
        arr = np.array(im.convert("RGB"))  # owned and writable, as torchvision's
    yield name, arr
