"""Plan a pass over an EXISTING dataset by listing and stat only: its files, their format
(detected from the names, or given), the size distribution and the layout.

Nothing is opened: a directory is listed (``os.scandir``, hidden entries skipped, directory
links not followed, a link to a file kept only when it resolves inside the dataset's root:
one that leaves it, ``a/shadow.jpg -> /etc/shadow``, is skipped and counted), an fsspec URL
with ``find``. Every file is stat'ed up to
``STAT_ALL_FILES``; beyond, a seeded random sample of ``STAT_SAMPLE`` files is, the total bytes
then an estimate from it (said so in the result). An object store's listing carries the sizes.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core.errors import UsageError
from ..target import scrub
from .registry import READERS, get_reader

#: Up to this many files, every one is stat'ed; beyond, STAT_SAMPLE of them (at random).
STAT_ALL_FILES = 100_000
STAT_SAMPLE = 10_000
PERCENTILES = (0, 10, 50, 90, 99, 100)


@dataclass(frozen=True)
class DatasetScan:
    """An existing dataset's files of one format, as listed and stat'ed."""

    root: str  # the directory or URL given (a URL's secrets scrubbed before display)
    fmt: str
    fmt_source: str  # "detected from N file names" / "--format"
    paths: tuple[str, ...]  # relative to root, sorted
    sizes: dict[int, int]  # file index -> bytes, for the files stat'ed (all, or a sample)
    other_files: int  # files listed that are not of the format (ignored)
    listed: int  # every file listed
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    links_outside: int = 0  # links to files outside the root: skipped, never opened

    @property
    def n_files(self) -> int:
        return len(self.paths)

    @property
    def sampled(self) -> bool:
        return len(self.sizes) < len(self.paths)

    @property
    def total_bytes(self) -> int:
        """The dataset's bytes: exact, or mean of the stat sample × files (``sampled``)."""
        if not self.sizes:
            return 0
        if not self.sampled:
            return sum(self.sizes.values())
        return round(float(np.mean(list(self.sizes.values()))) * len(self.paths))

    def to_dict(self) -> dict[str, Any]:
        """The result's dataset block: counts, size percentiles, layout, how it was looked at."""
        vals = np.asarray(list(self.sizes.values()), dtype=np.float64)
        pct = {f"p{p}": int(np.percentile(vals, p)) for p in PERCENTILES} if len(vals) else {}
        return {
            "root": scrub(self.root),
            "format": self.fmt,
            "format_source": self.fmt_source,
            "files": self.n_files,
            "bytes": self.total_bytes,
            "bytes_basis": (
                f"estimate: mean of {len(self.sizes):,} stat'ed files (a random sample) × "
                f"{self.n_files:,} files"
                if self.sampled
                else f"exact: every one of the {self.n_files:,} files stat'ed"
            ),
            "files_listed": self.listed,
            "files_stat": len(self.sizes),
            "other_files_ignored": self.other_files,
            "links_outside_skipped": self.links_outside,
            "file_bytes": {**pct, "mean": float(vals.mean()) if len(vals) else 0.0},
            "layout": layout(self.fmt, self.paths),
        }


def layout(fmt: str, paths: tuple[str, ...]) -> dict[str, Any]:
    """Classes (ImageFolder: the first directory) or shards, and the directories used."""
    dirs = {os.path.dirname(p) for p in paths}
    out: dict[str, Any] = {"directories": len(dirs)}
    if fmt == "image":
        per_class = Counter(p.partition("/")[0] if "/" in p else "" for p in paths)
        counts = sorted(per_class.values())
        out.update(
            kind="image-folder" if "" not in per_class else "flat image directory",
            classes=len(per_class) if "" not in per_class else 0,
            files_per_class={"min": counts[0], "median": counts[len(counts) // 2],
                             "max": counts[-1]} if counts else {},
        )  # fmt: skip
    else:
        out.update(kind="shards", shards=len(paths))
    return out


def list_local(root: str) -> list[str]:
    """Every regular file under ``root`` (relative, sorted); hidden entries skipped, links
    that leave ``root`` skipped (``walk_local``)."""
    return walk_local(root)[0]


def _inside(path: str, real_root: str) -> bool:
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def walk_local(root: str) -> tuple[list[str], int]:
    """(every regular file under ``root``, relative and sorted; the links to files skipped
    because they resolve outside ``root``). Hidden entries are skipped and links to
    directories not followed; a link to a file is kept only when it stays inside ``root``."""
    out: list[str] = []
    outside = 0
    real_root = os.path.realpath(root)
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(os.path.join(root, rel) if rel else root))
        except OSError as err:
            raise UsageError(
                f"cannot list {os.path.join(root, rel)}: {err.strerror or err}",
                hint="give a dataset directory this user can read",
            ) from None
        for e in entries:
            if e.name.startswith("."):
                continue
            name = f"{rel}/{e.name}" if rel else e.name
            if e.is_dir(follow_symlinks=False):
                stack.append(name)
            elif e.is_file():
                if e.is_symlink() and not _inside(e.path, real_root):
                    outside += 1
                    continue
                out.append(name)
    return sorted(out), outside


def _list_url(url: str, opts: dict[str, Any]) -> dict[str, int]:
    """{relative key: size} of every object under ``url`` (the listing carries sizes)."""
    from ..target import storage

    fs, root = storage.open_fs(url, opts or None)
    root = root.rstrip("/")
    found = fs.find(root, detail=True)
    out = {}
    for key, info in found.items():
        rel = key[len(root) :].lstrip("/") if key.startswith(root) else key
        if rel and not any(part.startswith(".") for part in rel.split("/")):
            if info.get("type", "file") == "file":
                out[rel] = int(info.get("size") or 0)
    return dict(sorted(out.items()))


def _ext(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[-1].lower() if "." in base else ""


#: Formats detected (and profiled: one sample per file, no framing) that no reader decodes.
PROFILE_ONLY: dict[str, tuple[str, ...]] = {"raw": ("bin",)}
#: Bytes read from a file's start to check its magic (``magic_format``).
MAGIC_BYTES = 512


def magic_format(head: bytes) -> str | None:
    """The reader format a file's first bytes say (``npz`` for an npz or npy file), or None
    (TFRecord and raw have no magic)."""
    if head.startswith(b"\xff\xd8\xff") or head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith((b"\x93NUMPY", b"PK\x03\x04", b"PK\x05\x06")):
        return "npz"
    if head.startswith(b"\x89HDF\r\n\x1a\n"):
        return "hdf5"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "webdataset"
    return None


def format_names(profile_only: bool = False) -> tuple[str, ...]:
    """The formats detected: the readers' (and, for a profile, PROFILE_ONLY's)."""
    return (*READERS, *(PROFILE_ONLY if profile_only else ()))


def get_reader_exts(name: str) -> tuple[str, ...]:
    """A reader's file extensions (its module only: the optional library is not needed)."""
    return tuple(READERS.load(name).EXTENSIONS)


def extensions_of(fmt: str) -> tuple[str, ...]:
    """A format's file extensions."""
    return PROFILE_ONLY[fmt] if fmt in PROFILE_ONLY else get_reader_exts(fmt)


def detect_format(files: list[str], *, profile_only: bool = False) -> tuple[str, int]:
    """(the format most files are of, how many) by extension; UsageError when none is known.
    ``profile_only``: PROFILE_ONLY's formats count too."""
    names = format_names(profile_only)
    owner = {ext: name for name in names for ext in extensions_of(name)}
    votes = Counter(owner[e] for e in map(_ext, files) if e in owner)
    if not votes:
        seen = Counter(_ext(f) or "(none)" for f in files).most_common(5)
        raise UsageError(
            f"no known dataset format among {len(files):,} files (extensions: "
            + ", ".join(f".{e} ×{n}" for e, n in seen)
            + ")",
            hint=f"give --format ({', '.join(names)})",
        )
    return votes.most_common(1)[0]


def choose(
    files: list[str], fmt: str | None, *, profile_only: bool = False
) -> tuple[str, str, list[int]]:
    """(the format, how it was chosen, the indices of its files): detected from the names, or
    ``fmt`` as given (then every file when none has its extensions)."""
    if fmt is None:
        fmt, votes = detect_format(files, profile_only=profile_only)
        source = f"detected from the names of {votes:,} of {len(files):,} files"
    else:
        if fmt not in format_names(profile_only):
            raise UsageError(
                f"unknown dataset format {fmt!r}",
                hint=f"choose one of: {', '.join(format_names(profile_only))}",
            )
        source = "--format"
    exts = set(extensions_of(fmt))
    chosen = [i for i, f in enumerate(files) if _ext(f) in exts]
    if not chosen and source == "--format":
        chosen = list(range(len(files)))
    return fmt, source, chosen


def scan(
    root: str,
    fmt: str | None = None,
    *,
    storage_options: dict[str, Any] | None = None,
    seed: int = 1,
) -> DatasetScan:
    """List (and stat) the dataset at ``root``; UsageError for an empty or unknown one."""
    from ..target import is_url

    opts = dict(storage_options or {})
    if fmt is not None:
        get_reader(fmt)  # unknown name or missing library: before anything is listed
    sizes_known: dict[str, int] | None = None
    outside = 0
    if is_url(root):
        sizes_known = _list_url(root, opts)
        files = list(sizes_known)
    else:
        files, outside = walk_local(root)
    if not files:
        skipped = f" ({outside:,} link(s) leaving it skipped)" if outside else ""
        raise UsageError(
            f"dataset {scrub(root)} holds no files{skipped}",
            hint="point at the dataset's directory",
        )
    fmt, source, idx = choose(files, fmt)
    paths = tuple(files[i] for i in idx)
    if sizes_known is not None:
        sizes = {i: sizes_known[p] for i, p in enumerate(paths)}
    else:
        sizes = _stat_sizes(root, paths, seed)
    return DatasetScan(
        root, fmt, source, paths, sizes, len(files) - len(paths), len(files), opts, outside
    )


def _stat_sizes(root: str, paths: tuple[str, ...], seed: int) -> dict[int, int]:
    """{index: bytes} for every file, or a random STAT_SAMPLE of them beyond STAT_ALL_FILES."""
    idx: list[int] = list(range(len(paths)))
    if len(idx) > STAT_ALL_FILES:
        idx = sorted(random.Random(seed).sample(idx, STAT_SAMPLE))
    out = {}
    for i in idx:
        try:
            out[i] = os.stat(os.path.join(root, paths[i])).st_size
        except OSError:
            continue  # vanished or unreadable: the run counts it when it reads it
    return out
