"""The measured terms of an input pipeline, as ``iobench.model.diagnosis`` takes them (see its module
docstring for how they become the starvation model's inputs). Pure: no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError

#: A read request's size: a file no larger costs one request (the Linux default readahead).
REQUEST_BYTES = 128 << 10
#: The terms' (low, high) intervals of a mean: of the read, decode, collate, step overhead.
RANGES = ("read_range", "decode_range", "collate_range", "overhead_range")


@dataclass(frozen=True)
class PipelineTerms:
    """What a loader run over an existing dataset measured (means; seconds, bytes).

    ``read_s_per_sample``: wall seconds a worker spent reading one sample from storage, with
    ``gpus × workers`` readers; ``decode_s_per_sample``: CPU seconds decoding (and transforming)
    it; ``collate_s_per_batch``: seconds collating one batch (in the worker, as torch does);
    ``open_rate_per_s``: files opened and stat'ed per second by that many readers (0: not
    measured); ``cache_read_s_per_sample``: a sample's read from a local cache tier or the page
    cache (None: not measured), ``cache_bytes`` that tier's capacity (None: taken as the whole
    dataset). ``steps_per_epoch``: the run's steps, for the figure of a run that short (None:
    steady state). ``main_cores_per_gpu``: the cores each GPU's main process keeps busy (1: a
    training loop launching kernels; 0: an emulated compute that sleeps). ``*_range``: (low,
    high) of a mean, when the measurement gives its spread (``overhead_range``: of
    ``step_overhead_s``, the main loop's own seconds per step, neither compute nor waiting for
    a worker: the loop, the batch hand-off). ``decode_wall_s_per_sample``: the decode's wall
    time, whose excess over its CPU time beyond what the workers' own count explains is the
    host's other load (``diagnose``: kept in every configuration).
    """

    read_s_per_sample: float
    decode_s_per_sample: float
    collate_s_per_batch: float
    compute_s: float
    batch_size: int
    workers: int
    cpu_cores: int
    files: int
    total_bytes: int
    mean_file_bytes: float
    samples_per_file: int
    read_bandwidth_bps: float
    open_rate_per_s: float
    gpus: int = 1
    prefetch: int = 2
    step_overhead_s: float = 0.0
    cache_read_s_per_sample: float | None = None
    cache_bytes: int | None = None
    measured_au: float | None = None
    steps_per_epoch: int | None = None
    main_cores_per_gpu: float = 1.0
    read_range: tuple[float, float] | None = None
    decode_range: tuple[float, float] | None = None
    collate_range: tuple[float, float] | None = None
    overhead_range: tuple[float, float] | None = None
    decode_wall_s_per_sample: float | None = None

    def __post_init__(self) -> None:
        positive = {
            "read_s_per_sample": self.read_s_per_sample,
            "compute_s": self.compute_s,
            "mean_file_bytes": self.mean_file_bytes,
            "total_bytes": self.total_bytes,
        }
        non_negative = {
            "decode_s_per_sample": self.decode_s_per_sample,
            "collate_s_per_batch": self.collate_s_per_batch,
            "read_bandwidth_bps": self.read_bandwidth_bps,
            "open_rate_per_s": self.open_rate_per_s,
            "step_overhead_s": self.step_overhead_s,
            "workers": self.workers,
        }
        at_least_one = {
            "batch_size": self.batch_size,
            "cpu_cores": self.cpu_cores,
            "files": self.files,
            "samples_per_file": self.samples_per_file,
            "gpus": self.gpus,
            "prefetch": self.prefetch,
        }
        for name, v in positive.items():
            if not (math.isfinite(v) and v > 0):
                raise UsageError(f"pipeline terms: {name} must be positive, got {v!r}")
        for name, v in non_negative.items():
            if not (math.isfinite(v) and v >= 0):
                raise UsageError(f"pipeline terms: {name} must be non-negative, got {v!r}")
        for name, v in at_least_one.items():
            if v < 1:
                raise UsageError(f"pipeline terms: {name} must be at least 1, got {v!r}")
        self._check_optional()

    def _check_optional(self) -> None:
        c = self.cache_read_s_per_sample
        if c is not None and not (math.isfinite(c) and c > 0):
            raise UsageError(f"pipeline terms: cache_read_s_per_sample must be positive, got {c!r}")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 2:
            raise UsageError("pipeline terms: steps_per_epoch must be at least 2")
        if not 0 <= self.main_cores_per_gpu <= self.cpu_cores:
            raise UsageError("pipeline terms: main_cores_per_gpu must be in [0, cpu_cores]")
        if self.cache_bytes is not None and self.cache_bytes < 0:
            raise UsageError("pipeline terms: cache_bytes must be non-negative")
        for name in RANGES:
            r = getattr(self, name)
            if r is not None and not (0 <= r[0] <= r[1] and math.isfinite(r[1])):
                raise UsageError(f"pipeline terms: {name} must be (low, high), 0 ≤ low ≤ high")

    @classmethod
    def from_loader(cls, m: dict[str, Any], **override: Any) -> PipelineTerms:
        """The terms from ``iobench loader PATH --existing``'s ``loader.existing.terms`` (its
        keys: ``open_s_per_file`` per worker becomes the aggregate open rate of ``gpus ×
        workers`` readers; ``bytes``, ``compute_s_per_step``, ``read_bps_aggregate`` and ``au``
        map to ``total_bytes``, ``compute_s``, ``read_bandwidth_bps`` and ``measured_au``).
        ``override``: fields to set beside them (``gpus``, ``cache_read_s_per_sample``, …)."""
        try:
            gpus = int(override.get("gpus", m.get("gpus", 1)))
            readers = gpus * max(int(m["workers"]), 1)
            open_s = float(m.get("open_s_per_file") or 0.0)
            kw: dict[str, Any] = {
                "read_s_per_sample": float(m["read_s_per_sample"]),
                "decode_s_per_sample": float(m["decode_s_per_sample"]),
                "collate_s_per_batch": float(m["collate_s_per_batch"]),
                "compute_s": float(m["compute_s_per_step"]),
                "batch_size": int(m["batch_size"]),
                "workers": int(m["workers"]),
                "cpu_cores": int(m["cpu_cores"]),
                "files": int(m["files"]),
                "total_bytes": int(m["bytes"]),
                "mean_file_bytes": float(m["mean_file_bytes"]),
                "samples_per_file": max(1, round(float(m["samples_per_file"]))),
                "read_bandwidth_bps": float(m.get("read_bps_aggregate") or 0.0),
                "open_rate_per_s": readers / open_s if open_s > 0 else 0.0,
                "measured_au": m.get("au"),
                "gpus": gpus,
            }
            kw["step_overhead_s"] = float(m.get("step_overhead_s") or 0.0)
            if m.get("decode_wall_s_per_sample") is not None:
                kw["decode_wall_s_per_sample"] = float(m["decode_wall_s_per_sample"])
            for k, src in zip(RANGES, (*RANGES[:3], "step_overhead_range"), strict=True):
                if m.get(src) is not None:
                    lo, hi = m[src]
                    kw[k] = (float(lo), float(hi))
        except (KeyError, TypeError, ValueError) as e:
            raise UsageError(f"pipeline terms: the loader's terms lack or garble {e}") from None
        kw.update(override)
        return cls(**kw)

    @property
    def sample_bytes(self) -> float:
        return self.total_bytes / (self.files * self.samples_per_file)

    @property
    def readers(self) -> int:
        """The storage readers of the measured run: ``gpus × max(workers, 1)``."""
        return self.gpus * max(self.workers, 1)

    @property
    def open_s_per_file(self) -> float:
        """The size-independent seconds per file read: a small file's whole read time (see
        ``small_files``), else ``readers ÷ open rate`` (0 when the rate was not measured), at
        most the file's whole read time."""
        whole = self.read_s_per_sample * self.samples_per_file
        if self.small_files:
            return whole
        if self.open_rate_per_s <= 0:
            return 0.0
        return min(self.readers / self.open_rate_per_s, whole)

    @property
    def active_readers(self) -> int:
        """The readers that read at once in the measured run, by Little's law: the delivered
        bandwidth × a sample's read time ÷ its bytes, rounded, between 1 and ``readers``
        (``readers`` when the bandwidth was not measured). The storage is modelled as giving
        each of them a sample per read time, and nothing more beyond them."""
        if self.read_bandwidth_bps <= 0:
            return self.readers
        k = self.read_bandwidth_bps * self.read_s_per_sample / self.sample_bytes
        return min(max(1, round(k)), self.readers)

    @property
    def small_files(self) -> bool:
        """Files of at most one read request (REQUEST_BYTES): each costs a request whatever
        its size, so its whole read time is per-file cost."""
        return self.mean_file_bytes <= REQUEST_BYTES

    @property
    def open_share(self) -> float:
        """The share of each sample's read time that is per-file cost."""
        return self.open_s_per_file / self.samples_per_file / self.read_s_per_sample

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in RANGES:
            out[k] = list(out[k]) if out[k] is not None else None
        out["sample_bytes"] = self.sample_bytes
        out["open_share"] = self.open_share
        return out
