"""The loader's dataset: its plan (files and sample sizes), its generation on the target
(phase ``dataset-write``), the index a Dataset reads, and the storage probe over its files."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import formats
from ..core.coordinator import Coordinator
from ..core.datagen import dataset_paths, sample_sizes
from ..core.errors import UsageError
from ..engines.base import FileSpec, PhaseSpec
from ..model import starvation as sv
from ..run.runner import PhaseRunner
from ..run.sweep import sweep_from_phases
from ..spec.workload import Profile
from ..target import is_url, storage

#: The storage probe reads every file once up to this many bytes; beyond, it runs PROBE_TIME_S.
PROBE_ALL_BYTES = 1 << 30


PROBE_TIME_S = 8.0


#: Threads laying the dataset out.
WRITE_JOBS = 4


@dataclass(frozen=True)
class DatasetIndex:
    """The generated files and their samples: what a Dataset (and its workers) needs."""

    run_dir: str  # a local directory or an fsspec URL
    fmt: str
    paths: tuple[str, ...]  # relative to run_dir
    sizes: tuple[tuple[int, ...], ...]  # sample payload bytes, per file
    file_bytes: tuple[int, ...]  # on disk
    samples_per_file: int
    #: fsspec options (endpoint, credentials) for a URL run_dir; never written to results
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def remote(self) -> bool:
        """The files are objects behind fsspec (no O_DIRECT, no page cache)."""
        return is_url(self.run_dir)

    def path(self, f: int) -> str:
        """File ``f``'s path or URL."""
        return storage.join(self.run_dir, self.paths[f])

    @property
    def n_files(self) -> int:
        return len(self.paths)

    @property
    def n_samples(self) -> int:
        return len(self.paths) * self.samples_per_file

    @property
    def total_bytes(self) -> int:
        return sum(self.file_bytes)

    @property
    def bytes_per_sample(self) -> float:
        """Mean on-disk bytes per sample (format overhead included: what storage moves)."""
        return self.total_bytes / max(self.n_samples, 1)

    def files(self) -> tuple[FileSpec, ...]:
        return tuple(FileSpec(p, n) for p, n in zip(self.paths, self.file_bytes, strict=True))

    def subset(self, n_files: int) -> DatasetIndex:
        n = max(1, min(n_files, self.n_files))
        return DatasetIndex(
            self.run_dir,
            self.fmt,
            self.paths[:n],
            self.sizes[:n],
            self.file_bytes[:n],
            self.samples_per_file,
            self.storage_options,
        )


def plan_dataset(profile: Profile, seed: int = 1) -> tuple[tuple[FileSpec, ...], list[list[int]]]:
    """The profile's files (payload sizes) and sample sizes, drawn as DLIO does (normal);
    UsageError / EngineUnavailable (its library missing) for a format that cannot lay it out."""
    spf = profile.samples_per_file
    if getattr(formats.get_format(profile.format), "ONE_SAMPLE_PER_FILE", False) and spf != 1:
        raise UsageError(
            f"profile {profile.name}: format {profile.format} holds one sample per file, not {spf}",
            hint="set samples_per_file = 1",
        )
    n = profile.files * spf
    flat = sample_sizes(n, profile.sample_size, profile.sample_size_sd, "normal", seed)
    per_file = [flat[i * spf : (i + 1) * spf] for i in range(profile.files)]
    paths = dataset_paths(profile.files, formats.EXTENSIONS[profile.format])
    return tuple(FileSpec(p, sum(s)) for p, s in zip(paths, per_file, strict=True)), per_file


def planned_bytes(profile: Profile, files: Sequence[FileSpec]) -> int:
    """Bytes the dataset will occupy, with the format's overhead."""
    over = formats.overhead_bytes(profile.format, profile.samples_per_file)
    return sum(f.size for f in files) + over * len(files)


def generate_dataset(
    runner: PhaseRunner,
    profile: Profile,
    files: Sequence[FileSpec],
    sizes: Sequence[Sequence[int]],
    seed: int = 1,
) -> DatasetIndex:
    """Write the files (phase ``dataset-write``: fsynced, cache dropped); return their index."""
    params = {
        "format": profile.format,
        "samples_per_file": profile.samples_per_file,
        "jobs": min(WRITE_JOBS, os.cpu_count() or 1),
        "seed": seed,
    }
    _, written = formats.write_files(params, runner, files, sizes)
    return DatasetIndex(
        runner.run_dir,
        profile.format,
        tuple(f.path for f in written),
        tuple(tuple(s) for s in sizes),
        tuple(f.size for f in written),
        profile.samples_per_file,
        dict(getattr(runner.target, "storage_options", None) or {}),
    )


def probe_storage(
    runner: PhaseRunner,
    index: DatasetIndex,
    readers: Sequence[int],
    *,
    direct: bool,
    seed: int = 1,
    time_s: float | None = None,
) -> list[sv.SweepPoint]:
    """Whole-file shuffled reads of the dataset at each reader count (phases
    ``dataset-shuffled-r<N>``), with the loader's cache handling; the sweep they give.

    Every file is read once, or for ``time_s`` seconds when the dataset is larger than
    PROBE_ALL_BYTES (and ``time_s`` is not given).
    """
    if time_s is None and index.total_bytes > PROBE_ALL_BYTES:
        time_s = PROBE_TIME_S
    phases = []
    for r in sorted(set(readers)):
        phases.append(
            runner.execute(
                PhaseSpec(
                    f"dataset-shuffled-r{r}", "read", index.files(), jobs=r, block_size=0,
                    direct=direct, seed=seed, order="shuffled", latency_per="file",
                    drop_cache_after=not direct, time_s=time_s,
                    params={"sweep": "readers", "readers": r, "order": "shuffled",
                            "purpose": "loader storage probe"},
                )
            )
        )  # fmt: skip
    return sweep_from_phases(phases)


def data_seed(seed: int, rank: int) -> int:
    """The seed of the bytes rank ``rank`` writes: every rank's files differ (no dedup)."""
    return seed + 7919 * rank


def shard_indexes(
    coord: Coordinator, own: DatasetIndex, n_files: int
) -> tuple[DatasetIndex, DatasetIndex]:
    """(the dataset every rank's loader reads, the files this rank's storage probe reads).

    Collective. File ``i`` was written by rank ``i mod ranks``; where the ranks see each
    other's run directories the loader's index holds every file, in that global order, with
    paths from this rank's run directory, and the probe reads the files of the rank this one
    reads back (IOR -C: not its own, so this client's cache cannot answer). Elsewhere both are
    this rank's own files.
    """
    shards = coord.all_gather_object((own.paths, own.sizes, own.file_bytes))
    if not coord.shared_target:
        return own, own
    world = coord.world

    def of(k: int, i: int) -> tuple[str, tuple[int, ...], int]:
        paths, sizes, nbytes = shards[k]
        return coord.read_prefix(k) + paths[i], tuple(sizes[i]), int(nbytes[i])

    every = [of(i % world, i // world) for i in range(n_files)]
    src = coord.read_shift()
    theirs = [of(src, i) for i in range(len(shards[src][0]))]

    def index(entries: Sequence[tuple[str, tuple[int, ...], int]]) -> DatasetIndex:
        return replace(
            own,
            paths=tuple(e[0] for e in entries),
            sizes=tuple(e[1] for e in entries),
            file_bytes=tuple(e[2] for e in entries),
        )

    return index(every), index(theirs)
