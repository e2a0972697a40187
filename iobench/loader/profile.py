"""``iobench profile``: an existing dataset's shape as a profile TOML, read-only, names left out.

The dataset is listed (a directory walked with ``os.scandir``, hidden entries skipped, links to
directories not followed; a URL with fsspec ``find``, whose listing carries the sizes) and its
files stat'ed: all of them up to ``--sample`` files, beyond that a seeded random sample of that
many (the total bytes then an estimate from it, said so). The format is detected from the
extensions, checked against the first bytes (magic) of a few files, which are opened read-only
(``O_RDONLY | O_NOATIME`` where the owner allows it) along with up to ``INSPECT`` files whose
samples are counted from their framing: tar members grouped by key (WebDataset), Parquet
row count (footer), npz/npy array headers, TFRecord record lengths, HDF5 datasets' first axis.

The profile has the synthetic workloads' keys (``iobench/spec/workload.py``: ``PROFILE_PARAMS``), so
``iobench loader TARGET --profile FILE`` lays out a dataset of the same format, sample size and
spread, samples per file and file count elsewhere, at any scale (``--scale`` here, or
``--set files=N`` there). The rest (file-size percentiles, total bytes, layout, how many files
were looked at) goes in as comments. Only statistics: no file, directory or root name.
"""

from __future__ import annotations

import io
import math
import os
import random
import statistics
import struct
import tarfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from ..core.errors import UsageError
from ..core.inputs import open_regular
from ..core.safeio import check_output_file, protect_input, why_missing, write_atomic
from ..core.units import format_bytes
from ..formats.detect import MAGIC_BYTES, choose, list_local, magic_format
from ..target import is_url, resolve_source, scrub
from .decode_cost import BATCH, DecodeCost, measure

#: Files opened to count their samples and check their magic (at most).
INSPECT = 32
#: Files stat'ed at most by default (beyond, a random sample of this many).
DEFAULT_SAMPLE = 10_000
#: Dataset format (``formats.detect``'s) → the synthetic format that emulates it
#: (iobench/formats/registry.py).
SYNTHETIC = {
    "image": "raw", "raw": "raw", "hdf5": "raw",
    "webdataset": "tar", "tfrecord": "tar",
    "parquet": "parquet",
    "npz": "npz",
}  # fmt: skip


# --------------------------------------------------------------------------------------------
# Listing and reading, read-only


@dataclass
class Listing:
    """The files under a root: relative names (never written out), sizes of those stat'ed."""

    root: str
    names: list[str]
    sizes: dict[int, int]  # index → bytes
    opts: dict[str, Any] = field(default_factory=dict)

    def open(self, i: int) -> IO[bytes]:
        """File ``i`` opened read-only (no access-time update where the owner allows it)."""
        if is_url(self.root):
            from ..target import storage

            fs, p = storage.open_fs(storage.join(self.root, self.names[i]), self.opts or None)
            return fs.open(p, "rb")
        path = os.path.join(self.root, self.names[i])
        try:  # a regular file only: a FIFO swapped in since the listing never blocks
            return open_regular(path, getattr(os, "O_NOATIME", 0))
        except PermissionError:
            return open_regular(path)  # O_NOATIME needs the file's owner


def list_dataset(root: str, sample: int, seed: int = 1) -> Listing:
    """The dataset's files, all stat'ed up to ``sample``, else a random ``sample`` of them."""
    if sample < 1:
        raise UsageError(f"--sample must be at least 1, got {sample}")
    resolve_source(root, "dataset")  # as a TARGET is checked: credentials, /proc, reachable
    root = root.removeprefix("file://")
    if is_url(root):
        from ..target import storage

        fs, base = storage.open_fs(root)
        base = base.rstrip("/")
        try:
            found = fs.find(base, detail=True)
        except (OSError, ValueError) as e:
            raise UsageError(f"cannot list {scrub(root)}: {e}", hint="check the URL") from None
        known = {
            k[len(base) :].lstrip("/"): int(v.get("size") or 0)
            for k, v in found.items()
            if v.get("type", "file") == "file"
        }
        names = sorted(n for n in known if n and not any(p.startswith(".") for p in n.split("/")))
        return Listing(root, names, {i: known[n] for i, n in enumerate(names)})
    if not os.path.isdir(root):
        what = why_missing(root) if not os.path.exists(root) else "is not a directory"
        raise UsageError(
            f"dataset {root!r} {what}", hint="give the directory that holds the dataset"
        )
    names = list_local(root)
    idx = list(range(len(names)))
    if len(idx) > sample:
        idx = sorted(random.Random(seed).sample(idx, sample))
    sizes = {}
    for i in idx:
        try:
            sizes[i] = os.stat(os.path.join(root, names[i])).st_size
        except OSError:
            continue  # vanished or unreadable: not counted
    return Listing(root, names, sizes)


# --------------------------------------------------------------------------------------------
# Samples per file, from each format's framing


def _tar_samples(f: IO[bytes], size: int) -> list[int]:
    """WebDataset: members grouped by key (the name up to its first dot): bytes per sample.

    ValueError when a member's data runs past the end of the file (a truncated shard):
    listing the headers alone seeks over the data and would not notice."""
    per_key: dict[str, int] = {}
    with tarfile.open(fileobj=f, mode="r:") as tf:
        for m in tf:
            if m.offset_data + m.size > size:
                raise ValueError(
                    f"truncated tar: a member's data ends at byte {m.offset_data + m.size:,} "
                    f"of a {size:,}-byte file"
                )
            if m.isfile():
                base = m.name.rsplit("/", 1)[-1]
                key = m.name[: len(m.name) - len(base)] + base.split(".", 1)[0]
                per_key[key] = per_key.get(key, 0) + m.size
    return list(per_key.values())


def _npy_rows(f: IO[bytes]) -> int:
    version = np.lib.format.read_magic(f)
    reader = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    shape, _, _ = reader(f)
    return int(shape[0]) if shape else 1


def _npz_samples(f: IO[bytes]) -> int:
    """One array per sample (iobench's and DLIO's layout), or, for a few arrays sharing their
    first axis (``x``, ``y`` columns), that axis's length."""
    with zipfile.ZipFile(f) as z:
        members = [n for n in z.namelist() if n.endswith(".npy")]
        if not members:
            raise ValueError("no .npy member")
        if len(members) > 4:
            return len(members)
        rows = set()
        for n in members:
            with z.open(n) as m:
                rows.add(_npy_rows(io.BufferedReader(m)))  # type: ignore[type-var]  # a ZipExtFile has readinto
    return rows.pop() if len(rows) == 1 else len(members)


def _tfrecord_samples(f: IO[bytes], size: int) -> int:
    """Records by their framing: u64 length, u32 CRC, data, u32 CRC; it must end at the end."""
    n, pos = 0, 0
    while pos < size:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("truncated record header")
        (length,) = struct.unpack("<Q", head)
        pos += 8 + 4 + length + 4
        if pos > size:
            raise ValueError("record runs past the end of the file")
        f.seek(pos)
        n += 1
    return n


def _hdf5_samples(f: IO[bytes]) -> int:
    import importlib

    try:  # an optional extra (pyproject: hdf5), loaded by name as the format readers do
        h5py = importlib.import_module("h5py")
    except ImportError:
        raise ValueError("h5py is not installed (pip install h5py)") from None
    lengths = []
    with h5py.File(f, "r") as h:
        h.visititems(
            lambda _, o: (
                lengths.append(o.shape[0]) if isinstance(o, h5py.Dataset) and o.shape else None
            )
        )
    if not lengths:
        raise ValueError("no dataset with a first axis")
    return int(max(lengths))


def count_samples(fmt: str, f: IO[bytes], size: int) -> list[int] | int:
    """Samples in one file: their sizes where the framing gives them, else their count."""
    if fmt in ("image", "raw"):
        return 1
    if fmt == "webdataset":
        return _tar_samples(f, size)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(f).metadata.num_rows)
    if fmt == "npz":  # an npz archive or a plain npy file: its magic says which
        npy = f.read(6) == b"\x93NUMPY"
        f.seek(0)
        return _npy_rows(f) if npy else _npz_samples(f)
    if fmt == "tfrecord":
        return _tfrecord_samples(f, size)
    return _hdf5_samples(f)


# --------------------------------------------------------------------------------------------
# The profile


@dataclass(frozen=True)
class DatasetProfile:
    """An existing dataset's statistics (no names), and how they were obtained."""

    fmt: str
    fmt_basis: str
    files: int
    files_listed: int
    files_stat: int
    total_bytes: int
    bytes_exact: bool
    file_pct: dict[str, int]
    samples_per_file: int
    spf_basis: str
    sample_size: int
    sample_size_sd: int
    inspected: int
    unreadable: int
    mismatched: int
    layout: dict[str, Any]
    decode: DecodeCost | None = None
    decode_note: str = ""

    @property
    def synthetic_format(self) -> str:
        return SYNTHETIC[self.fmt]


def _detect(listing: Listing, fmt: str | None) -> tuple[str, str, list[int]]:
    """(format, basis, the indices of its files): ``formats.detect``'s detector, which also
    knows ``raw`` (.bin) here: a profile needs no reader."""
    fmt, source, chosen = choose(listing.names, fmt, profile_only=True)
    return fmt, "given (--format)" if source == "--format" else source, chosen


def _inspect(listing: Listing, fmt: str, pick: list[int]) -> tuple[Any, ...]:
    """(samples per inspected file, sample sizes where framed, the files that could not be
    read, magic mismatches) over the files ``pick``ed."""
    counts: list[int] = []
    sizes: list[int] = []
    bad: set[int] = set()
    mismatched: set[int] = set()
    for i in pick:
        try:
            size = listing.sizes.get(i)
            with listing.open(i) as f:
                head = f.read(MAGIC_BYTES)
                said = magic_format(head)
                if said is not None and said != fmt:
                    mismatched.add(i)
                    continue
                f.seek(0)
                if size is None:
                    size = f.seek(0, io.SEEK_END)
                    f.seek(0)
                got = count_samples(fmt, f, size)
        except Exception:  # noqa: BLE001 - OSError, a framing error, a format library's own: the file is bad
            bad.add(i)
            continue
        if isinstance(got, list):
            counts.append(len(got))
            sizes.extend(got)
        else:
            counts.append(got)
    return counts, sizes, bad, mismatched


def _layout(fmt: str, names: list[str], chosen: list[int]) -> dict[str, Any]:
    """Directory counts and depth (and classes for an image folder): numbers only."""
    dirs = Counter(os.path.dirname(names[i]) for i in chosen)
    per_dir = sorted(dirs.values())
    out: dict[str, Any] = {
        "directories": len(dirs),
        "depth_max": max(names[i].count("/") for i in chosen),
        "files_per_directory_median": per_dir[len(per_dir) // 2],
        "files_per_directory_max": per_dir[-1],
    }
    if fmt == "image":
        tops = {names[i].split("/", 1)[0] for i in chosen if "/" in names[i]}
        out["kind"] = "image folder (one directory per class)" if tops else "flat image directory"
        out["classes"] = len(tops)
    else:
        out["kind"] = "shards"
    return out


def _sample_terms(
    fmt: str, counts: list[int], framed: list[int], file_sizes: list[int]
) -> tuple[int, str, float, float, str]:
    """(samples per file, its basis, mean and sd of a sample's bytes, their basis)."""
    spf_mean = statistics.fmean(counts)
    spf = max(1, round(spf_mean))
    spread = f"{min(counts):,}–{max(counts):,}" if min(counts) != max(counts) else "all"
    spf_basis = f"mean {spf_mean:,.1f} over {len(counts)} files inspected ({spread})"
    if fmt in ("image", "raw"):
        spf_basis = "one sample per file (the format's own)"
    mean_file = statistics.fmean(file_sizes)
    if framed:
        mean, sd = statistics.fmean(framed), statistics.pstdev(framed)
        basis = f"{len(framed):,} samples' sizes from the framing of the inspected files"
    elif spf == 1:
        mean, sd = mean_file, statistics.pstdev(file_sizes)
        basis = f"the sizes of {len(file_sizes):,} files (one sample each)"
    else:
        mean = mean_file / spf_mean
        sd = statistics.pstdev(file_sizes) / spf_mean
        basis = (
            "file size ÷ samples per file (the framing does not give each sample's size, "
            "so the spread is the files', scaled)"
        )
    return spf, spf_basis, mean, sd, basis


def profile_dataset(
    root: str,
    *,
    sample: int = DEFAULT_SAMPLE,
    fmt: str | None = None,
    seed: int = 1,
    batch_size: int = BATCH,
    workers: int = 0,
) -> tuple[DatasetProfile, dict[str, str]]:
    """The dataset's profile and the basis of each figure; UsageError for an empty dataset, an
    unknown format, or files none of which can be read as it. ``batch_size`` and ``workers``:
    the loop the profile is for (the decode measured holding a batch's samples, a worker's
    start-up spread over the samples each of ``workers`` decodes per epoch; 0: left out)."""
    listing = list_dataset(root, sample, seed)
    if not listing.names:
        raise UsageError("the dataset holds no files", hint="point at the dataset's directory")
    fmt, fmt_basis, chosen = _detect(listing, fmt)
    if is_url(root) and len(chosen) > sample:
        keep = set(random.Random(seed).sample(chosen, sample))
        listing.sizes = {i: s for i, s in listing.sizes.items() if i in keep}
    stat = [listing.sizes[i] for i in chosen if i in listing.sizes]
    if not stat:
        raise UsageError("none of the dataset's files could be stat'ed", hint="check permissions")
    pick = sorted(chosen if len(chosen) <= INSPECT else random.Random(seed).sample(chosen, INSPECT))
    counts, framed, unread, mismatched = _inspect(listing, fmt, pick)
    inspected, bad = len(pick), len(unread)
    if not counts:
        raise UsageError(
            f"none of the {inspected} {fmt} files inspected could be read as {fmt} "
            f"({bad} unreadable, {len(mismatched)} whose contents say another format)",
            hint="give --format, or check that the files are intact",
        )
    # the decode pass reads the files whole: a file whose framing held but whose samples do
    # not decode (a truncated JPEG) is unreadable too
    readable = [i for i in pick if i not in unread and i not in mismatched]
    spf, spf_basis, mean, sd, size_basis = _sample_terms(fmt, counts, framed, stat)
    per_start = len(chosen) * spf // workers if workers > 0 else 0
    decode, decode_note, undecoded = measure(
        fmt, readable, listing.open, listing.names.__getitem__,
        batch_size=batch_size, per_start=per_start,
    )  # fmt: skip
    bad = len(unread | undecoded)
    exact = len(stat) == len(chosen)
    total = sum(stat) if exact else round(statistics.fmean(stat) * len(chosen))
    pct = {f"p{p}": int(np.percentile(stat, p)) for p in (0, 10, 50, 90, 99, 100)}
    prof = DatasetProfile(
        fmt=fmt, fmt_basis=fmt_basis, files=len(chosen), files_listed=len(listing.names),
        files_stat=len(stat), total_bytes=total, bytes_exact=exact, file_pct=pct,
        samples_per_file=spf, spf_basis=spf_basis, sample_size=max(1, round(mean)),
        sample_size_sd=round(sd), inspected=inspected, unreadable=bad, mismatched=len(mismatched),
        layout=_layout(fmt, listing.names, chosen), decode=decode, decode_note=decode_note,
    )  # fmt: skip
    return prof, {"samples_per_file": spf_basis, "sample_size": size_basis}


def _toml_str(s: str) -> str:
    """A TOML basic string (ours: ASCII text, quotes and backslashes escaped)."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _decode_keys(p: DatasetProfile, lines: list[str], values: dict[str, Any]) -> None:
    """The profile's decode keys and their comments (``lines``, ``values``), when measured."""
    if p.decode is None:
        return
    lines.append(
        "# decode_s (CPU per sample) is spent by the replay's workers as a CPU burn; "
        "decode_wall_s and open_s (the profiled storage's; the replay's target pays its own) "
        "are for comparison."
    )
    values.update(
        decode_s=round(p.decode.cpu_s, 7),
        decode_wall_s=round(p.decode.wall_s, 7),
        open_s=round(p.decode.open_s, 7),
    )
    if p.decode.collate == "list":
        lines.append(
            "# collate = list: the decoded samples' shapes differ, so a training job's "
            "default_collate hands a batch on as one tensor per sample, each moved through "
            "shared memory at its decoded size; the replay does the same (decoded_size)"
        )
        values.update(collate="list", decoded_size=p.decode.decoded_bytes)
    else:
        lines.append(
            "# The decoded samples stack into one tensor a batch; the decoded size is not "
            f"replayed unless set (--set decoded_size={p.decode.decoded_bytes}; "
            "docs/validation/replay.md measured it 3-4 AU points below the plain burn)"
        )


def render_toml(
    p: DatasetProfile, basis: dict[str, str], *, scale: float = 1.0, sets: dict[str, Any]
) -> str:
    """The profile TOML: the synthetic workloads' keys, statistics as comments, no names."""
    files = max(1, math.ceil(p.files * scale))
    total = "exact" if p.bytes_exact else f"estimate from {p.files_stat:,} files stat'ed"
    pct = ", ".join(f"{k} {format_bytes(v)}" for k, v in p.file_pct.items())
    lay = ", ".join(f"{k} {v}" for k, v in p.layout.items())
    desc = (
        f"existing {p.fmt} dataset: {p.files:,} files, {format_bytes(p.total_bytes)}, "
        f"{p.samples_per_file:,} sample(s) per file"
    )
    lines = [
        "# A profile of an existing dataset, written by `iobench profile` (statistics only: no",
        "# file or directory names). Emulate it with",
        "#   iobench loader TARGET --profile THIS.toml [--set files=N] [--set batch_size=B ...]",
        f"# format: {p.fmt} ({p.fmt_basis}); emulated as {p.synthetic_format}",
        f"# files: {p.files:,} of {p.files_listed:,} listed; {p.files_stat:,} stat'ed; "
        f"{p.inspected} opened to count samples ({p.unreadable} unreadable, {p.mismatched} "
        "whose contents say another format)",
        f"# total bytes: {p.total_bytes:,} ({total})",
        f"# file size: {pct}",
        f"# samples per file: {basis['samples_per_file']}",
        f"# sample size: {basis['sample_size']}",
        f"# layout: {lay}",
        f"# decode: {p.decode_note}",
    ]
    if scale != 1.0:
        lines.append(f"# scaled ×{scale:g}: {files:,} files instead of {p.files:,}")
    values: dict[str, Any] = {
        "description": desc,
        "model": "custom",
        "format": p.synthetic_format,
        "sample_size": p.sample_size,
        "sample_size_sd": p.sample_size_sd,
        "samples_per_file": p.samples_per_file,
        "files": files,
    }
    _decode_keys(p, lines, values)
    values.update(sets)
    lines.append(
        "# batch_size, compute_s, workers, prefetch, epochs: not the dataset's; the defaults "
        "unless --set gave them"
    )
    for k, v in values.items():
        text = _toml_str(v) if isinstance(v, str) else repr(v)
        lines.append(f"{k} = {text}")
    return "\n".join(lines) + "\n"


def check_sets(items: list[str] | None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as profile values (the keys and types of ``PROFILE_PARAMS``)."""
    from ..core.errors import SpecError
    from ..spec.workload import PROFILE_PARAMS, coerce, parse_overrides

    out = {}
    for key, value in parse_overrides(items).items():
        if key not in PROFILE_PARAMS:
            raise SpecError(
                f"--set {key!r}: unknown profile key",
                hint=f"profile keys are {', '.join(sorted(PROFILE_PARAMS))}",
            )
        out[key] = coerce(key, PROFILE_PARAMS[key], value, "--set")
    return out


def check_output(output: str, root: str, force: bool) -> str:
    """The path to write the profile at, by the one output rule (:mod:`iobench.core.safeio`):
    UsageError when it is a URL, inside the dataset (by inode: a bind mount or a link to it
    too), a link (even a dangling one), a directory, device or FIFO, in a missing directory,
    or an existing file without ``force`` (which replaces only a regular file)."""
    if "://" in output:
        raise UsageError(f"--output {output!r} is a URL", hint="give a local file path")
    protect_input(root)
    if not str(output).strip():
        raise UsageError("--output is empty", hint="pass a file name to --output")
    parent = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(parent):
        raise UsageError(
            f"--output {output!r}: its directory does not exist", hint="create it first"
        )
    if not force and os.path.isfile(output) and not os.path.islink(output):
        raise UsageError(f"--output {output!r} exists", hint="give another path, or --force")
    check_output_file(output, replace=force, option="--output")
    return output


def write_profile(text: str, path: str) -> None:
    """Write the profile at ``path`` whole or not at all (:func:`iobench.core.safeio.write_atomic`):
    a new temporary file beside it, loaded back as a profile (the schema the loader reads),
    then renamed into place."""
    from ..core.errors import StoreError
    from ..spec.workload import load_profile

    try:
        write_atomic(path, text.encode("utf-8"), verify=load_profile)
    except OSError as e:  # something put at the path since the check: refused, not followed
        raise StoreError(f"cannot write --output {path}: {e.strerror or e}") from None
