"""``npz``: ``np.savez`` (stored, not compressed) with one uint8 array per sample under keys
``s00000``, ``s00001``, … (DLIO's unet3d format is one sample per npz file).

Written by hand as a stored zip of ``.npy`` members (the local headers carry each member's
CRC-32, computed once over the bytes in place): ``np.savez`` copies every array in chunks
through zipfile, which costs more than the write. Beyond the plain zip's limits (65,535
members, 4 GiB) ``np.savez`` writes it (zip64)."""

from __future__ import annotations

import io
import zlib
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from .npzview import CENTRAL as _CENTRAL
from .npzview import CENTRAL_SIG, END_SIG, LOCAL_SIG, npz_arrays, read_stored
from .npzview import END as _END
from .npzview import LOCAL as _LOCAL

EXTENSION = "npz"
OVERHEAD_PER_FILE = 1024
OVERHEAD_PER_SAMPLE = 512

_DOS_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01, zipfile's default
_VERSION = 20
_PLAIN_LIMIT = 0xFFFFFFFF - (1 << 20)


@lru_cache(maxsize=1024)
def _npy_header(n: int) -> bytes:
    """The .npy header of ``n`` uint8s (cached: numpy's writer costs ~25 us a call, and a
    dataset's samples come in few sizes)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "|u1", "fortran_order": False, "shape": (n,)}
    )
    return buf.getvalue()


def _local(crc: int, size: int, name: bytes) -> bytes:
    """A stored member's local header (its name follows)."""
    return _LOCAL.pack(LOCAL_SIG, _VERSION, 0, 0, 0, 0, _DOS_DATE, crc, size, size, len(name), 0)


def _central(crc: int, size: int, name: bytes, offset: int) -> bytes:
    """A stored member's entry in the central directory, its name included."""
    fields = (_VERSION, 3, _VERSION, 0, 0, 0, 0, _DOS_DATE, crc, size, size, len(name))
    return _CENTRAL.pack(CENTRAL_SIG, *fields, 0, 0, 0, 0, 0o644 << 16, offset) + name


def write(f: Any, samples: Sequence[np.ndarray], keys: Sequence[str]) -> None:
    total = sum(len(s) for s in samples) + len(samples) * OVERHEAD_PER_SAMPLE
    if len(samples) >= 0xFFFF or total >= _PLAIN_LIMIT:
        arrays: dict[str, Any] = {f"s{j:05d}": s for j, s in enumerate(samples)}
        np.savez(f, **arrays)
        return
    central = []
    offset = 0
    for j, s in enumerate(samples):
        name = f"s{j:05d}.npy".encode()
        header = _npy_header(len(s))
        data = np.ascontiguousarray(s, dtype=np.uint8).data
        crc = zlib.crc32(data, zlib.crc32(header))
        size = len(header) + len(s)
        local = _local(crc, size, name)
        f.write(local + name + header)
        f.write(data)
        central.append(_central(crc, size, name, offset))
        offset += len(local) + len(name) + size
    directory = b"".join(central)
    f.write(directory)
    f.write(_END.pack(END_SIG, 0, 0, len(central), len(central), len(directory), offset, 0))


#: ``frame`` takes ``sample_crcs`` when the caller can tell the samples' CRCs (the dataset
#: writer can, from its pool).
SAMPLE_CRCS = True


def frame(
    sizes: Sequence[int],
    keys: Sequence[str],
    sample_crcs: Callable[[list[int]], list[int]] | None = None,
) -> tuple[int, list[int], Callable[[Any], None]] | None:
    """The file ``write`` writes, laid out ahead (see tar.frame): the headers, CRCs and the
    directory filled in once the samples are in place. With ``sample_crcs(starts)`` (what
    ``zlib.crc32(sample j, starts[j])`` gives, for every j) the members' CRCs are taken from
    it, else computed over the image. None beyond the plain zip's limits."""
    if len(sizes) >= 0xFFFF or sum(sizes) + len(sizes) * OVERHEAD_PER_SAMPLE >= _PLAIN_LIMIT:
        return None
    names = [f"s{j:05d}.npy".encode() for j in range(len(sizes))]
    npy = [_npy_header(n) for n in sizes]
    starts, offsets, pos = [], [], 0
    for name, head, n in zip(names, npy, sizes, strict=True):
        starts.append(pos)
        pos += _LOCAL.size + len(name) + len(head)
        offsets.append(pos)
        pos += n
    directory_at = pos
    directory_len = sum(_CENTRAL.size + len(name) for name in names)
    total = directory_at + directory_len + _END.size

    def finish(image: Any) -> None:
        central: list[bytes] = []
        heads = [zlib.crc32(head) for head in npy]
        known = sample_crcs(heads) if sample_crcs is not None else None
        for name, head, n, start, at in zip(names, npy, sizes, starts, offsets, strict=True):
            if known is None:
                crc = zlib.crc32(memoryview(image[at : at + n]), heads[len(central)])
            else:
                crc = known[len(central)]
            size = len(head) + n
            local = _local(crc, size, name)
            image[start:at] = np.frombuffer(local + name + head, dtype=np.uint8)
            central.append(_central(crc, size, name, start))
        end = _END.pack(END_SIG, 0, 0, len(central), len(central), directory_len, directory_at, 0)
        image[directory_at:total] = np.frombuffer(b"".join(central) + end, dtype=np.uint8)

    return total, offsets, finish


def decode(data: Any, sizes: Sequence[int] | None = None) -> list[np.ndarray]:
    """The samples in key order: read in place as ``np.load`` reads them (each member's
    CRC-32 checked, its array copied out once: ``npzview.npz_arrays``), else by ``np.load``."""
    members = npz_arrays(data)
    if members is not None:
        return _in_key_order(members)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return [np.asarray(z[k], dtype=np.uint8) for k in sorted(z.files)]


def read_fd(fd: int, size: int, clock: list[float]) -> list[np.ndarray] | None:
    """``decode`` of the file open on ``fd`` (``size`` bytes), read and decoded in one pass:
    each sample read straight into its own array, its CRC-32 taken as each part arrives
    (``npzview.read_stored``; ``clock[0]`` gets the decode's share of the pass). None where
    the file must be read whole and given to ``decode``."""
    members = read_stored(fd, size, clock)
    return None if members is None else _in_key_order(members)


def _in_key_order(members: list[tuple[str, np.ndarray]]) -> list[np.ndarray]:
    """The samples of an archive's (key, array) members, in key order, as uint8 arrays."""
    return [np.asarray(a, dtype=np.uint8) for _, a in sorted(members, key=lambda m: m[0])]
