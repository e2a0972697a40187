"""Small datasets of every format an existing-dataset run reads, each with a way to corrupt
one of its files (tests/test_loader_existing.py)."""

from __future__ import annotations

import io
import json
import struct
import tarfile
from pathlib import Path

import numpy as np

from iobench.formats.tfrecord import frame

RNG = np.random.default_rng(7)


def _jpeg(h: int = 24, w: int = 32, fmt: str = "JPEG") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(RNG.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(buf, fmt)
    return buf.getvalue()


def images(root: Path, per_class: int = 6) -> int:
    """ImageFolder: two classes, JPEG and PNG; returns the samples."""
    for c in ("cat", "dog"):
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            fmt, ext = ("PNG", "png") if i % 3 == 0 else ("JPEG", "jpg")
            (root / c / f"{i:03d}.{ext}").write_bytes(_jpeg(fmt=fmt))
    return 2 * per_class


def webdataset(root: Path, shards: int = 2, per_shard: int = 6) -> int:
    root.mkdir(parents=True)
    for s in range(shards):
        with tarfile.open(root / f"shard-{s:04d}.tar", "w") as tar:
            for i in range(per_shard):
                key = f"s{s}/{i:05d}"
                for ext, data in (
                    ("jpg", _jpeg()),
                    ("cls", str(i % 3).encode()),
                    ("json", json.dumps({"i": i}).encode()),
                ):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return shards * per_shard


def parquet(root: Path, files: int = 2, rows: int = 10) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True)
    for f in range(files):
        t = pa.table(
            {
                "label": pa.array(np.arange(rows) % 5),
                "x": pa.array(RNG.random(rows).astype(np.float32)),
                "blob": pa.array([bytes(RNG.integers(0, 255, 64, dtype=np.uint8))] * rows),
            }
        )
        pq.write_table(t, root / f"part-{f:03d}.parquet", row_group_size=4)
    return files * rows


def npz(root: Path, files: int = 8) -> int:
    root.mkdir(parents=True)
    for i in range(files):
        if i % 2:
            np.save(root / f"{i:04d}.npy", RNG.random((8, 8)).astype(np.float32))
        else:
            np.savez(root / f"{i:04d}.npz", x=RNG.random((8, 8)), y=np.array(i % 3))
    return files


def hdf5(root: Path, files: int = 2, rows: int = 8) -> int:
    import h5py

    root.mkdir(parents=True)
    for f in range(files):
        with h5py.File(root / f"chunk-{f}.h5", "w") as h:
            h["images"] = RNG.random((rows, 4, 4)).astype(np.float32)
            h["labels"] = np.arange(rows) % 3
    return files * rows


def _key(n: int, wire: int) -> bytes:
    return _varint(n << 3 | wire)


def _varint(x: int) -> bytes:
    out = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        out.append(b | (0x80 if x else 0))
        if not x:
            return bytes(out)


def _ld(n: int, payload: bytes) -> bytes:
    return _key(n, 2) + _varint(len(payload)) + payload


def example(label: int, img: bytes, score: float) -> bytes:
    """A tf.train.Example with an int64, a bytes and a float feature (hand-encoded)."""
    feats = {
        "label": _ld(3, _ld(1, _varint(label & ((1 << 64) - 1)))),  # int64: two's complement
        "image": _ld(1, _ld(1, img)),
        "score": _ld(2, _ld(1, struct.pack("<f", score))),
    }
    entries = b"".join(_ld(1, _ld(1, k.encode()) + _ld(2, v)) for k, v in feats.items())
    return _ld(1, entries)


def tfrecord(root: Path, files: int = 2, records: int = 8) -> int:
    root.mkdir(parents=True)
    for f in range(files):
        recs = [example(i, bytes([i]) * 32, i / 2) for i in range(records)]
        (root / f"train-{f:05d}.tfrecord").write_bytes(b"".join(frame(r) for r in recs))
    return files * records


MAKERS = {
    "image": images,
    "webdataset": webdataset,
    "parquet": parquet,
    "npz": npz,
    "hdf5": hdf5,
    "tfrecord": tfrecord,
}

#: (a corrupt file's relative path, its bytes) per format: a file the reader must refuse.
CORRUPT = {
    "image": ("dog/broken.jpg", lambda: _jpeg()[:200]),  # truncated
    "webdataset": ("shard-9999.tar", lambda: b"not a tar archive" * 40),
    "parquet": ("part-999.parquet", lambda: b"PAR1" + b"\0" * 100),
    "npz": ("9999.npz", lambda: b"PK\x03\x04 not a zip"),
    "hdf5": ("chunk-9.h5", lambda: b"\x89HDF\r\n\x1a\n" + b"\0" * 100),
    "tfrecord": ("train-99999.tfrecord", lambda: b"\x05" * 30),
}
