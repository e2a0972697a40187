"""The data loader: a real torch DataLoader over the generated files, with emulated compute.

``run_loader`` lays a profile's dataset out on the target, probes the storage with the same
files at the loader's concurrency, measures the loader's own CPU costs on cached data
(compute 0), then runs the training loop DLIO's way and predicts the same configuration with
the starvation model, so the measured and the predicted AU sit side by side.

Modules, each importing only those before it:

- ``dataset``: the dataset's plan, its generation on the target, its index, the storage probe;
- ``torchdata``: the torch Dataset, collate function and per-rank batch sampler;
- ``loop``: one emulated accelerator's training loop, its config, result and calibration figures;
- ``ranks``: one loop per rank (processes, or this rank under torchrun), aggregated;
- ``calibration``: the loader's own costs on cached data, the model's prediction, the bound;
- ``run``: ``run_loader`` (the command) and the result's loader and estimate blocks.
"""

from __future__ import annotations

from . import ranks
from .calibration import (
    COMPUTE_BOUND_AU,
    bound_of,
    calibrate,
    cpu_step_s,
    emulated_compute_s,
    loader_params,
    predict,
    storage_supply_s,
)
from .dataset import (
    DatasetIndex,
    data_seed,
    generate_dataset,
    plan_dataset,
    planned_bytes,
    probe_storage,
    shard_indexes,
)
from .loop import Calibration, LoopConfig, LoopResult, wait_summary
from .ranks import aggregate, run_loop
from .run import COMPUTE_KINDS, cuda_available, run_loader
from .torchdata import RankBatchSampler, SampleDataset, collate_samples, own_steps

__all__ = [
    "COMPUTE_BOUND_AU",
    "COMPUTE_KINDS",
    "Calibration",
    "DatasetIndex",
    "LoopConfig",
    "LoopResult",
    "RankBatchSampler",
    "SampleDataset",
    "aggregate",
    "bound_of",
    "calibrate",
    "collate_samples",
    "cpu_step_s",
    "cuda_available",
    "data_seed",
    "emulated_compute_s",
    "generate_dataset",
    "loader_params",
    "own_steps",
    "plan_dataset",
    "planned_bytes",
    "predict",
    "probe_storage",
    "ranks",
    "run_loader",
    "run_loop",
    "shard_indexes",
    "storage_supply_s",
    "wait_summary",
]
