"""Every workload generator's declared parameters (beyond ``spec.COMMON_PARAMS``): the
tables ``spec`` validates a workload file against and the generators in ``phases/`` read.
Here, below both, so loading a workload imports no generator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..formats.registry import FORMATS


@dataclass(frozen=True)
class Param:
    """A declared parameter: its kind, default and one line of help."""

    kind: str  # size | duration | count | int | float | bool | choice | str | sizes | counts | rate | percent
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    optional: bool = False  # None allowed (e.g. time = unset)
    maximum: float | None = None  # None: the kind's bound in KIND_MAXIMUM (if any)


SEQUENTIAL: dict[str, Param] = {
    "mode": Param("choice", "file-per-worker", "file layout", ("file-per-worker", "shared")),
    "read_back": Param("bool", True, "read the files back after each write"),
    "block_sizes": Param("sizes", [], "block-size sweep (empty: none)"),
    "jobs_sweep": Param("counts", [], "writer-count sweep (empty: none)"),
    "randread": Param("bool", False, "add a random-read phase over the written files"),
    "rand_block_size": Param("size", 4096, "block size of the random-read phase", minimum=512),
    "rand_jobs": Param("count", 0, "random-read workers (0: same as jobs)", minimum=0),
    "iodepth": Param("count", 1, "random-read queue depth per worker (fio: libaio)", minimum=1),
}


#: The checkpoint phases' rounds (both checkpoint generators).
ROUNDS = Param(
    "count",
    1,
    "most save/load rounds per checkpoint phase (each the whole checkpoint; "
    "time: their limit, steady: end once the per-round rate is steady)",
    minimum=1,
)

CHECKPOINT: dict[str, Param] = {
    "files": Param("count", 256, "small files per rank directory", minimum=1),
    "file_sizes": Param("sizes", [4096, 65536, 1 << 20], "small-file sizes, drawn in turn"),
    "metadata": Param("bool", True, "run the small-file create/stat/read/delete phases"),
    "checkpoint_size": Param(
        "size", 256 << 20, "total bytes of the synthetic state dict", minimum=0
    ),
    "shards": Param("count", 4, "checkpoint shards (one per emulated rank)", minimum=1),
    "dcp": Param("bool", True, "also save/load with torch.distributed.checkpoint"),
    "tensor_size": Param("size", 16 << 20, "bytes per tensor in the state dict", minimum=4096),
    "rounds": ROUNDS,
}


DATASET: dict[str, Param] = {
    "files": Param("count", 1024, "sample files in the dataset", minimum=1),
    "file_size": Param("size", 256 << 10, "mean bytes per file", minimum=1),
    "size_dist": Param(
        "choice", "fixed", "file-size distribution", ("fixed", "normal", "lognormal")
    ),
    "size_sd": Param("size", 0, "standard deviation of the file size", minimum=0),
    "readers": Param("counts", [1, 2, 4, 8], "reader-count sweep"),
    "orders": Param("choice", "both", "read orders", ("both", "sequential", "shuffled")),
    "format": Param("choice", "raw", "sample file format", FORMATS),
    "samples_per_file": Param(
        "count", 1, "samples per file (parquet row groups, tar members)", minimum=1
    ),
}


LLM_CHECKPOINT: dict[str, Param] = {
    "model": Param("str", "llama3-8b", "checkpoint model (workloads/checkpoints/NAME.toml)"),
    "ranks": Param(
        "count",
        None,
        "ranks sharing the checkpoint (default: the model's)",
        optional=True,
        minimum=1,
    ),  # fmt: skip
    "subset": Param(
        "count",
        None,
        "MLPerf subset mode: run ranks 0..N-1 of the model's full layout",
        optional=True,
        minimum=1,
    ),  # fmt: skip
    "scale": Param("float", 1.0, "fraction of every rank's shard written", minimum=0),
    "api": Param("choice", "torch", "torch.save files, DCP, or both", ("torch", "dcp", "both")),
    "baseline": Param("bool", False, "also a plain sequential write of the same files"),
    "metadata": Param("bool", True, "small-file create/open phases (the metadata rates)"),
    "files": Param("count", 64, "small files per writer in the metadata phases", minimum=1),
    "tensor_size": Param("size", 64 << 20, "bytes per tensor in the state dicts", minimum=4096),
    "crc32": Param(
        "bool", True, "torch.save's CRC-32 of every record (torch's default, what training pays)"
    ),
    "rounds": ROUNDS,
}


GENERATOR_PARAMS: dict[str, dict[str, Param]] = {
    "sequential": SEQUENTIAL,
    "checkpoint": CHECKPOINT,
    "dataset": DATASET,
    "llm-checkpoint": LLM_CHECKPOINT,
}


def generator_names() -> list[str]:
    return sorted(GENERATOR_PARAMS)
