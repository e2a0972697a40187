"""A phase's result from its workers' measurements: the stats' aggregate as a ``PhaseResult``
(over ``stats`` and ``results``; the engines and the phase generators build theirs here)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from .file import PhaseResult
from .stats import WorkerStats, aggregate_workers


def phase_result(
    name: str,
    op: str,
    workers: Sequence[WorkerStats],
    *,
    concurrency: int,
    block_size: int,
    cache: str,
    params: dict[str, Any] | None = None,
) -> PhaseResult:
    """A PhaseResult from workers that share one time origin."""
    agg = aggregate_workers(workers)
    active = [w for w in workers if w.ops > 0]
    # perf_counter -> epoch seconds, so ranks on other hosts can be put on one time line
    to_epoch = time.time() - time.perf_counter()
    extra: dict[str, Any] = {}
    if active:
        extra["start_epoch"] = min(w.start for w in active) + to_epoch
        extra["end_epoch"] = max(w.end for w in active) + to_epoch
        extra["first_end_epoch"] = min(w.end for w in active) + to_epoch
        extra["series_start_s"] = round(agg.series_start_s, 6)  # (report.time_points)
        if agg.latency_series is not None:  # the latency over time (result.timeseries)
            extra["latency_series"] = agg.latency_series
        if agg.worker_times is not None and len(active) > 1:
            extra["worker_times"] = agg.worker_times
    return PhaseResult(
        name=name,
        op=op,
        bytes=agg.bytes,
        ops=agg.ops,
        files=agg.files,
        concurrency=concurrency,
        block_size=block_size,
        elapsed_s=agg.elapsed_s,
        stonewall_s=agg.stonewall_s,
        bandwidth_bps=agg.bandwidth_bps,
        iops=agg.iops,
        bandwidth_stonewall_bps=agg.bandwidth_stonewall_bps,
        latency_s=agg.hist.summary_s(),
        histogram=agg.hist.to_dict(),
        series=agg.series,
        series_interval_s=agg.series_interval_s,
        ops_series=agg.ops_series,
        per_worker=agg.per_worker,
        cache=cache,
        params=dict(params or {}),
        extra=extra,
    )
