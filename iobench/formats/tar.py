"""``tar``: a webdataset-like shard, one ``<key>.bin`` member per sample.

Written by hand, as tarfile would write it (a USTAR header block per member, the data padded
to 512 bytes, two zero blocks, the whole padded to tarfile's 10 KiB record): tarfile copies
every member through a file object in chunks, which costs more than the write itself."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

EXTENSION = "tar"
OVERHEAD_PER_FILE = 20 << 10
OVERHEAD_PER_SAMPLE = 1024
_BLOCK = tarfile.BLOCKSIZE
_RECORD = tarfile.RECORDSIZE
_ZEROS = bytes(_RECORD)


def header(name: str, size: int, cache: dict[int, bytes]) -> bytes:
    """The USTAR header tarfile writes for a regular member (mode 644, owner and time 0):
    tarfile's own for the first name of each length, patched (name, size, checksum) after."""
    raw = name.encode()
    if len(raw) > 100 or size >= 8**11 or not raw.isascii():
        info = tarfile.TarInfo(name)
        info.size, info.mode = size, 0o644
        return info.tobuf(tarfile.USTAR_FORMAT, tarfile.ENCODING, "surrogateescape")
    if len(raw) not in cache:
        info = tarfile.TarInfo("x" * len(raw))
        info.mode = 0o644
        cache[len(raw)] = info.tobuf(tarfile.USTAR_FORMAT, tarfile.ENCODING, "surrogateescape")
    buf = bytearray(cache[len(raw)])
    buf[: len(raw)] = raw
    buf[124:136] = b"%011o\0" % size
    buf[148:156] = b"        "
    buf[148:156] = b"%06o\0 " % sum(buf)
    return bytes(buf)


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    written = 0
    cache: dict[int, bytes] = {}
    for key, s in zip(keys, samples, strict=True):
        head = header(f"{key}.bin", len(s), cache)
        f.write(head)
        f.write(s.data)
        pad = -len(s) % _BLOCK
        if pad:
            f.write(_ZEROS[:pad])
        written += len(head) + len(s) + pad
    end = written + 2 * _BLOCK
    f.write(_ZEROS[: 2 * _BLOCK + (-end % _RECORD)])


def frame(
    sizes: Sequence[int], keys: Sequence[str]
) -> tuple[int, list[int], Callable[[Any], None]] | None:
    """The file ``write`` writes, laid out ahead: (its size, where each sample's bytes go,
    a function that fills in the rest of a buffer whose samples are in place). The dataset
    writer generates the samples straight into their places: no copy after."""
    cache: dict[int, bytes] = {}
    heads, offsets, pos = [], [], 0
    for key, n in zip(keys, sizes, strict=True):
        heads.append(header(f"{key}.bin", n, cache))
        offsets.append(pos + _BLOCK)
        pos += _BLOCK + n + (-n % _BLOCK)
    total = pos + 2 * _BLOCK + (-(pos + 2 * _BLOCK) % _RECORD)

    def finish(image: Any) -> None:
        for head, at, n in zip(heads, offsets, sizes, strict=True):
            image[at - _BLOCK : at] = np.frombuffer(head, dtype=np.uint8)
            image[at + n : at + n + (-n % _BLOCK)] = 0
        image[pos:total] = 0

    return total, offsets, finish


class BufferFile:
    """A read-only binary file over a buffer, without copying it (``io.BytesIO`` copies
    anything but ``bytes``): what ``tarfile`` needs to walk a shard's headers."""

    def __init__(self, data: Any):
        self.view = memoryview(data).cast("B")
        self.pos = 0

    def read(self, n: int | None = -1) -> bytes:
        end = len(self.view) if n is None or n < 0 else min(self.pos + n, len(self.view))
        out = self.view[self.pos : end].tobytes()
        self.pos = max(end, self.pos)
        return out

    def seek(self, offset: int, whence: int = 0) -> int:
        base = (0, self.pos, len(self.view))[whence]
        self.pos = max(base + offset, 0)
        return self.pos

    def tell(self) -> int:
        return self.pos


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    """The members' bytes; views of ``data`` when it is a numpy array (the caller's to give
    away: its headers walked in place, nothing copied), else copies."""
    owned = isinstance(data, np.ndarray)
    src: Any = BufferFile(data) if owned else io.BytesIO(data)
    with tarfile.open(fileobj=src, mode="r:") as tar:
        out = []
        for m in tar:
            if m.isfile() and owned and not m.issparse():
                if m.offset_data + m.size > len(data):
                    raise tarfile.ReadError(f"member {m.name} truncated")
                out.append(data[m.offset_data : m.offset_data + m.size])
            elif m.isfile():
                fobj = tar.extractfile(m)
                assert fobj is not None
                out.append(np.frombuffer(fobj.read(), dtype=np.uint8))
        return out
