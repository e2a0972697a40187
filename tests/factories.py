"""Small RunResult builders for history and compare tests: exact numbers, no I/O."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from iobench.result.file import PhaseResult, RunResult

MiB = 1 << 20
GiB = 1 << 30

HOST = {
    "hostname": "node-01",
    "cpu_model": "AMD EPYC 9654 96-Core Processor",
    "cpus": 64,
    "mem_bytes": 512 * GiB + 12345,
    "os": "Linux 6.1.0",
    "machine": "x86_64",
    "python": "3.11.9",
    "torch": "2.4.0",
    "fio": None,
}
TARGET = {
    "path_or_url": "/mnt/lustre/scratch",
    "fs_type": "lustre",
    "mount_point": "/mnt/lustre",
    "mount_source": "10.0.0.1@o2ib:/scratch",
    "free_bytes": 10 * GiB,
    "direct_io": True,
}


def make_phase(
    name: str,
    op: str = "read",
    *,
    bandwidth: Sequence[float] = (),
    iops: Sequence[float] = (),
    latency_p99: Sequence[float] = (),
    latency_mean: Sequence[float] = (),
    cache: str = "direct",
    status: str = "ok",
) -> PhaseResult:
    """A phase whose ``repeats`` carry the given per-repeat figures; the phase holds medians.

    A one-value sequence is repeated in every repeat.
    """
    n = max(len(bandwidth), len(iops), len(latency_p99), len(latency_mean))

    def at(values: Sequence[float], i: int) -> float:
        return float(values[0] if len(values) == 1 else values[i])

    repeats: list[dict[str, Any]] = []
    for i in range(n):
        rep: dict[str, Any] = {"latency_s": {}}
        if bandwidth:
            rep["bandwidth_bps"] = at(bandwidth, i)
        if iops:
            rep["iops"] = at(iops, i)
        if latency_p99:
            rep["latency_s"]["p99"] = at(latency_p99, i)
        if latency_mean:
            rep["latency_s"]["mean"] = at(latency_mean, i)
        repeats.append(rep)

    def mid(values: Sequence[float]) -> float:
        return float(statistics.median(values)) if values else 0.0

    latency = {}
    if latency_p99:
        latency["p99"] = mid(latency_p99)
    if latency_mean:
        latency["mean"] = mid(latency_mean)
    return PhaseResult(
        name=name,
        op=op,
        bytes=64 * MiB if bandwidth else 0,
        ops=1000 if iops else 0,
        concurrency=4,
        block_size=1 * MiB,
        elapsed_s=1.0,
        bandwidth_bps=mid(bandwidth),
        iops=mid(iops),
        latency_s=latency,
        cache=cache,
        repeats=repeats if n > 1 else [],
        status=status,
    )


def make_run(
    run_id: str = "20250101T000000Z-aaaaaa",
    *,
    started_at: str = "2025-01-01T00:00:00.000+00:00",
    workload: str = "seq-read",
    spec_hash: str | None = "spec-1",
    phases: Sequence[PhaseResult] = (),
    host: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
    loader: dict[str, Any] | None = None,
    estimate: dict[str, Any] | None = None,
    engine: str = "posix",
    status: str = "complete",
) -> RunResult:
    return RunResult(
        run_id=run_id,
        command=f"iobench run {workload} /mnt/lustre/scratch",
        started_at=started_at,
        finished_at=started_at,
        host=dict(host if host is not None else HOST),
        target=dict(target if target is not None else TARGET),
        workload={"name": workload, "spec_hash": spec_hash, "params": {"block_size": MiB}},
        engine={"name": engine, "version": "1"},
        phases=list(phases),
        loader=loader,
        estimate=estimate,
        status=status,
    )


def noisy(center: float, n: int = 6, spread: float = 0.01) -> list[float]:
    """``n`` distinct values within +-spread (relative) of ``center``, deterministic."""
    if n == 1:
        return [float(center)]
    return [center * (1 - spread + 2 * spread * i / (n - 1)) for i in range(n)]
