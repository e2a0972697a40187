"""Calibration and prediction: the loader's own CPU costs measured on cached data, the
starvation model's prediction of the same configuration, and the bound of a measured run."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from .. import formats
from ..model import starvation as sv
from ..target import StopFlag, drop_file_cache, storage
from . import ranks
from .dataset import DatasetIndex
from .loop import Calibration, LoopConfig, LoopResult
from .torchdata import DecodeEmulation, RankBatchSampler

#: The bound is "compute" when the measured AU reaches this.
COMPUTE_BOUND_AU = 0.95


#: The compute-0 calibration: at most this many steps per rank, over at most this many bytes.
CALIBRATION_STEPS = 30


CALIBRATION_BYTES = 1 << 30


CALIBRATION_SLEEP_S = 0.005


#: Simulations averaged for the predicted AU of a run with few steps.
PREDICT_SEEDS = 8


def calibrate(
    index: DatasetIndex,
    *,
    batch_size: int,
    workers: int,
    prefetch: int,
    gpus: int = 1,
    seed: int = 1,
    stop: StopFlag | None = None,
    decode: DecodeEmulation | None = None,
) -> Calibration:
    """The loader's ceiling, decode cost and per-step overhead, on a cached subset of the files.

    Two runs over the same files, read once beforehand into the page cache (dropped after),
    each a warm-up epoch then a measured one: compute 0 gives the ceiling; then a sleep long
    enough that the workers keep ahead (twice the ceiling's step, at least
    CALIBRATION_SLEEP_S) gives the main loop's own time per step beside compute,
    with the profile's ``decode`` emulation spent as in the run,
    ``step − measured compute``, and the workers' decode time per sample. A sleeping main loop
    wakes to cold caches, so its overhead is larger than the compute-0 loop's CPU time, and it
    is the one a training step pays; its workers do not compete with a spinning main loop for
    cores, as in a run that waits on storage.
    """
    sub, steps = _calibration_subset(index, batch_size, workers, gpus)
    sub, local_copy = _cached_copy(sub)
    paths = [os.path.join(sub.run_dir, p) for p in sub.paths]
    reader = formats.FileReader(direct=False)
    for p in paths:
        reader.read_bytes(p)

    def loop(compute_s: float, epochs: int) -> LoopResult:
        cfg = LoopConfig(
            sub, "cached", batch_size, workers, prefetch, compute_s, "sleep", gpus, epochs,
            steps, seed, decode=decode or DecodeEmulation(),
        )  # fmt: skip
        return ranks.run_loop(cfg, stop, first_epoch=epochs - 1)

    try:
        ceiling = loop(0.0, 2)
        sleep_s = max(CALIBRATION_SLEEP_S, 2 * ceiling.step_s)
        paced = loop(sleep_s, 2)
    finally:
        if local_copy is not None:
            shutil.rmtree(local_copy, ignore_errors=True)
        else:
            for p in paths:
                drop_file_cache(p)
    return Calibration(
        step_s=ceiling.step_s,
        overhead_s=max(paced.step_s - paced.compute_s, 0.0),
        decode_s_per_sample=paced.decode_s_per_sample,
        read_s_per_sample=paced.read_s_per_sample,
        samples_per_s=ceiling.samples_per_s,
        steps=ceiling.steps,
        files=sub.n_files,
        sleep_s=sleep_s,
        sleep_overshoot_s=max(paced.compute_s - sleep_s, 0.0),
    )


def _calibration_subset(
    index: DatasetIndex, batch_size: int, workers: int, gpus: int
) -> tuple[DatasetIndex, int]:
    """(the files the calibration reads, its steps per epoch): at most CALIBRATION_STEPS steps
    over at most CALIBRATION_BYTES, the whole dataset when a subset gives under 2 steps."""
    per_step = batch_size * gpus * index.bytes_per_sample
    steps = max(2, min(CALIBRATION_STEPS, int(CALIBRATION_BYTES // max(per_step, 1)) - 1))
    need = gpus * (steps + 1) * batch_size
    n_files = -(-need // index.samples_per_file) + gpus * max(workers, 1)
    sub = index.subset(n_files)
    if (
        RankBatchSampler.available_steps(
            sub.n_files, sub.samples_per_file, batch_size, gpus, workers
        )
        < 2
    ):
        sub = index
    return sub, steps


def _cached_copy(sub: DatasetIndex) -> tuple[DatasetIndex, str | None]:
    """``sub`` where its pages can be cached: itself locally; from an object store (no page
    cache in front of it), a local copy in a temporary directory (returned, to remove)."""
    if not sub.remote:
        return sub, None
    local_copy = tempfile.mkdtemp(prefix="iobench-calibration-")
    try:
        for i, rel in enumerate(sub.paths):
            dest = os.path.join(local_copy, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as fh:
                fh.write(storage.read_bytes(sub.path(i), sub.storage_options or None))
    except BaseException:
        shutil.rmtree(local_copy, ignore_errors=True)
        raise
    return replace(sub, run_dir=local_copy, storage_options={}), local_copy


def loader_params(
    index: DatasetIndex,
    *,
    batch_size: int,
    workers: int,
    prefetch: int,
    compute_s: float,
    calibration: Calibration | None,
) -> sv.LoaderParams:
    """The starvation model's view of this loader (sample bytes as stored on disk)."""
    return sv.LoaderParams(
        batch_size=batch_size,
        sample_bytes=index.bytes_per_sample,
        samples_per_file=index.samples_per_file,
        compute_s=compute_s,
        workers=workers,
        prefetch=prefetch,
        decode_s_per_sample=calibration.decode_s_per_sample if calibration else 0.0,
        step_overhead_s=calibration.overhead_s if calibration else 0.0,
    )


def emulated_compute_s(compute_s: float, kind: str, calibration: Calibration | None) -> float:
    """The compute an emulated step really does: a sleep lasts a little longer than asked
    (the calibration measured by how much), and DLIO counts the measured sleep as compute."""
    if kind == "sleep" and calibration is not None and compute_s > 0:
        return compute_s + calibration.sleep_overshoot_s
    return compute_s


def predict(
    params: sv.LoaderParams, sweep: Sequence[sv.SweepPoint], gpus: int, steps: int = 500
) -> sv.Prediction:
    """The model's AU for a run of ``steps`` steps per epoch: simulations averaged over seeds.

    A short run's AU depends on its start (prefetch filling, the first step left out), so the
    simulation runs the same number of steps, averaged over PREDICT_SEEDS seeds.
    """
    steps = max(int(steps), 2)
    pred = sv.predict_au(params, sweep, gpus, steps=steps, seed=0)
    aus = [pred.au] + [
        sv.simulate_au(params, sweep, gpus, steps=steps, seed=s) for s in range(1, PREDICT_SEEDS)
    ]
    au = float(np.mean(aus))
    basis = f"{pred.basis}; AU averaged over {PREDICT_SEEDS} seeds"
    return sv.Prediction(au=au, au_rate_bound=pred.au_rate_bound, bound=pred.bound, basis=basis)


def storage_supply_s(params: sv.LoaderParams, sweep: Sequence[sv.SweepPoint], gpus: int) -> float:
    """Seconds storage needs per step and rank at the loader's concurrency (no CPU costs)."""
    bw, _ = sv.bandwidth_at(sweep, gpus * max(params.workers, 1))
    return params.batch_size * params.sample_bytes / (bw / gpus)


def cpu_step_s(compute_s: float, calib: Calibration) -> float:
    """The step the loader would take with storage out of the way (cached data)."""
    if compute_s <= 0:
        return calib.step_s
    return max(compute_s + calib.overhead_s, calib.step_s)


def bound_of(
    au: float, step_s: float, compute_s: float, cpu_s: float, storage_s: float | None = None
) -> str:
    """What limited the run: "compute", "cpu" (the loader itself) or "storage".

    Compute when the AU reaches COMPUTE_BOUND_AU. Otherwise, when the storage probe gave the
    seconds storage needs per step at the loader's concurrency (``storage_s``), the slower of
    the two supplies names the bound: storage if it needs longer than the loader's own step on
    cached data (``cpu_s``), else the loader's CPU. This compares two independent measurements,
    so a busy host slowing the real run does not turn a CPU bound into a storage one. Without a
    probe, the time lost per step is split: what the loader loses even on cached data
    (``cpu_s − compute``) against what the real run lost beyond that (``step_s − cpu_s``).
    """
    if au >= COMPUTE_BOUND_AU:
        return "compute"
    if storage_s is not None:
        return "storage" if storage_s > cpu_s else "cpu"
    lost_cpu = max(cpu_s - compute_s, 0.0)
    lost_storage = max(step_s - cpu_s, 0.0)
    return "storage" if lost_storage > lost_cpu else "cpu"
