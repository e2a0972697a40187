"""``webdataset``: tar shards whose members ``<key>.<ext>`` group into samples by key (the
WebDataset convention: the key is the member's path up to the first dot of its file name),
each part decoded by its extension as WebDataset's default decoders do: images with Pillow
(an optional extra), ``.npy`` with numpy, ``.json`` parsed, ``.cls``/``.txt`` as text, any
other part kept as bytes. A part that fails to decode fails its sample, not the shard; a
broken tar header fails the rest of the shard.

The loader hands this reader the shard as a fresh writable uint8 array (``ARRAY_INPUT``):
the headers are parsed over it in place (``BufferFile``, no copy of the shard) and each part
is a view of it, so a raw or ``.npy`` part is not copied again after the read (a training
job's ``tarfile`` reads each member once from the file).
"""

from __future__ import annotations

import io
import json
import posixpath
import tarfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from .arrays import npy_view
from .tar import BufferFile

NAME = "webdataset"
EXTENSIONS = ("tar",)
LIBRARY = None
IMAGE_PARTS = frozenset({"jpg", "jpeg", "png", "ppm", "pgm", "webp", "bmp"})
TEXT_PARTS = frozenset({"txt", "text", "cls", "cls2", "index", "id"})
#: ``read_file`` gives this reader the shard as a writable uint8 array it may keep views of.
ARRAY_INPUT = True


def split_key(member: str) -> tuple[str, str]:
    """(the sample key, the part's extension) of a member name."""
    head, base = posixpath.split(member)
    stem, _, ext = base.partition(".")
    return posixpath.join(head, stem) if head else stem, ext.lower()


def decode_part(ext: str, raw: Any) -> Any:
    """One part of a sample, decoded by its extension (the last component counts); ``raw``:
    its bytes, or a writable uint8 view of the shard (kept as the part where it is one)."""
    last = ext.rsplit(".", 1)[-1]
    if isinstance(raw, np.ndarray):
        if last == "npy":
            arr = npy_view(raw)
            if arr is not None:
                return arr
        if last not in IMAGE_PARTS:
            if last not in TEXT_PARTS and last not in ("npy", "json"):
                return raw  # owned and writable: a view of the shard read for it
            raw = raw.tobytes()
    if last in IMAGE_PARTS:
        from PIL import Image

        with Image.open(io.BytesIO(raw)) as im:
            im.load()
            return np.array(im.convert("RGB"))
    if last == "npy":
        return np.load(io.BytesIO(raw), allow_pickle=False)
    if last == "json":
        return json.loads(raw)
    if last in TEXT_PARTS:
        text = raw.decode("utf-8")
        return int(text) if last == "cls" else text
    return np.frombuffer(bytearray(raw), dtype=np.uint8)  # owned and writable


def _decoded(key: str, parts: dict[str, Any]) -> Any:
    try:
        return {ext: decode_part(ext, raw) for ext, raw in parts.items()}
    except ImportError:
        raise
    except Exception as e:  # noqa: BLE001 - any decoder's failure is this sample's
        return ValueError(f"{key}: {type(e).__name__}: {e}")


def samples(data: Any, name: str) -> Iterator[tuple[str, Any]]:
    """(``shard#key``, {ext: decoded part}) per sample, in shard order; a sample that fails
    to decode comes back as an exception instance (the caller counts it)."""
    key: str | None = None
    parts: dict[str, Any] = {}
    in_place = isinstance(data, np.ndarray)
    src: Any = BufferFile(data) if in_place else io.BytesIO(data)
    with tarfile.open(fileobj=src, mode="r:") as tar:
        for m in tar:
            if not m.isfile():
                continue
            k, ext = split_key(m.name)
            if k != key and parts:
                yield f"{name}#{key}", _decoded(f"{name}#{key}", parts)
                parts = {}
            key = k
            if in_place and not m.issparse():
                raw: Any = data[m.offset_data : m.offset_data + m.size]
            else:
                f = tar.extractfile(m)
                if f is None:
                    continue
                raw = f.read()
            if len(raw) != m.size:
                raise ValueError(f"member {m.name} truncated ({len(raw)} of {m.size} bytes)")
            parts[ext] = raw
    if parts:
        yield f"{name}#{key}", _decoded(f"{name}#{key}", parts)
