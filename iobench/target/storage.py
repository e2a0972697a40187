"""File access for code outside the engines (dataset formats, the loader) on any target.

A path is a local file or an fsspec URL (``s3://bucket/key``, ``memory://x``): local files go
through the OS (buffered, fsync available), URLs through fsspec with the storage options of
the environment (the S3 endpoint from IOBENCH_S3_ENDPOINT / AWS_ENDPOINT_URL; credentials from
the backend's usual chain). fsspec makes a fresh filesystem instance in a forked process
(DataLoader workers), so call these functions in the worker, not before the fork.
"""

from __future__ import annotations

import os
import posixpath
from typing import IO, Any

from . import is_url, storage_options_from_env, url_protocol


def open_fs(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """(fsspec filesystem, path in it) for a URL; options default to the environment's."""
    from fsspec.core import url_to_fs

    opts = storage_options
    if not opts and "://" in url:
        opts = storage_options_from_env(url_protocol(url))
    return url_to_fs(url, **(opts or {}))


def join(base: str, rel: str) -> str:
    """``base/rel`` for a directory or a URL (``..`` resolved for URLs: stores do not)."""
    if not is_url(base):
        return os.path.join(base, rel)
    joined = posixpath.join(base.rstrip("/"), rel)
    if ".." not in rel.split("/"):
        return joined
    scheme, _, rest = joined.partition("://")
    return f"{scheme}://{posixpath.normpath(rest)}"


def open_write(path: str, storage_options: dict[str, Any] | None = None) -> IO[bytes]:
    """A binary file to write whole (an upload that completes on close, for URLs)."""
    if not is_url(path):
        return open(path, "wb", buffering=1 << 20)
    fs, p = open_fs(path, storage_options)
    return fs.open(p, "wb")


def open_read(path: str, storage_options: dict[str, Any] | None = None) -> IO[bytes]:
    """A binary file to read (ranged GETs as it is read, for URLs)."""
    if not is_url(path):
        return open(path, "rb")
    fs, p = open_fs(path, storage_options)
    return fs.open(p, "rb")


def read_bytes(path: str, storage_options: dict[str, Any] | None = None) -> bytes:
    """The whole file: one read, or one GET of the whole object."""
    if not is_url(path):
        with open(path, "rb") as f:
            return f.read()
    fs, p = open_fs(path, storage_options)
    return fs.cat_file(p)


def size(path: str, storage_options: dict[str, Any] | None = None) -> int:
    if not is_url(path):
        return os.path.getsize(path)
    fs, p = open_fs(path, storage_options)
    return int(fs.size(p))


def durable(f: IO[bytes]) -> None:
    """fsync a local file before close; an object is durable once its upload completes."""
    fileno = getattr(f, "fileno", None)
    if fileno is None:
        return
    try:
        fd = fileno()
    except (OSError, ValueError, AttributeError, NotImplementedError):
        return  # fsspec files have no descriptor
    f.flush()
    os.fsync(fd)
