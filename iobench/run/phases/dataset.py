"""A training dataset: lay out N sample files, then read them whole, in file order and
shuffled, across a sweep of concurrent readers (1, 2, 4, ...).

Phases: ``dataset-write`` (lays the files out, fsynced, cache dropped), then for each reader
count ``dataset-read-r<N>`` (file order) and ``dataset-shuffled-r<N>`` (seeded shuffle).
Each reports samples/s (its ops/s), bytes/s and per-file latency percentiles: the figures the
starvation model is built from.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ...core.datagen import dataset_paths, sample_sizes
from ...core.plan import Plan
from ...distributed import peer_files, read_source
from ...engines.base import FileSpec, PhaseSpec
from ...formats.registry import extension

if TYPE_CHECKING:  # an annotation: the runner sits above
    from ..runner import PhaseRunner


def layout(params: dict[str, Any], prefix: str = "data") -> tuple[FileSpec, ...]:
    sizes = sample_sizes(
        params["files"], params["file_size"], params["size_sd"], params["size_dist"], params["seed"]
    )
    ext = extension(params["format"])
    paths = dataset_paths(params["files"], ext, prefix)
    return tuple(FileSpec(p, s) for p, s in zip(paths, sizes, strict=True))


def _orders(params: dict[str, Any]) -> list[tuple[str, str]]:
    both = [("read", "sequential"), ("shuffled", "shuffled")]
    return {"both": both, "sequential": both[:1], "shuffled": both[1:]}[params["orders"]]


def plan(params: dict[str, Any]) -> Plan:
    files = layout(params)
    total = sum(f.size for f in files)
    p = Plan()
    p.add("dataset-write", "write", total, f"{len(files)} files")
    for r in params["readers"]:
        for label, _ in _orders(params):
            p.add(f"dataset-{label}-r{r}", "read", total, f"{r} readers, whole files",
                  params["time"])  # fmt: skip
    p.space_bytes = int(total * 1.1)  # format overhead (npz headers, tar blocks)
    p.inodes = 1 + len(files) + len({os.path.dirname(f.path) for f in files})
    if params["format"] != "raw":  # samples encoded before they are written
        p.built_bytes = total
    if not params["direct"]:  # every read phase's files dropped from the cache before it
        p.drops = len(files) * (len(p.phases) - 1)
    return p


def write_dataset(
    params: dict[str, Any], runner: PhaseRunner, prefix: str = "data"
) -> tuple[FileSpec, ...]:
    """Lay the dataset out (untimed for the read figures), fsynced and dropped from cache."""
    files = layout(params, prefix)
    runner.mkdirs(sorted({os.path.dirname(f.path) for f in files}))
    if params["format"] == "raw":
        runner.execute(
            PhaseSpec(
                "dataset-write", "write", files, jobs=params["jobs"], block_size=0,
                fsync="file", seed=params["seed"], latency_per="file", drop_cache_after=True,
                verify=params["verify"],
            )
        )  # fmt: skip
        return files
    from ...formats.writer import write_files

    if params["verify"]:
        runner.warn(f"verify: {params['format']} files are checked by decoding them, not by block")
    _, files = write_files(params, runner, files)
    return files


def run(params: dict[str, Any], runner: PhaseRunner) -> None:
    files = write_dataset(params, runner)
    files = peer_files(files, read_source(runner)[1])  # many ranks: another rank's copy (IOR -C)
    direct = runner.direct(params["direct"])
    for r in params["readers"]:
        for label, order in _orders(params):
            runner.execute(
                PhaseSpec(
                    f"dataset-{label}-r{r}", "read", files, jobs=r, block_size=0,
                    direct=direct, seed=params["seed"], order=order, latency_per="file",
                    drop_cache_after=not direct, time_s=params["time"], rate_bps=params["rate"],
                    verify=params["verify"] and params["format"] == "raw",
                    params={"sweep": "readers", "readers": r, "order": order},
                )
            )  # fmt: skip
