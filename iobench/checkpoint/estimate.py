"""From a checkpoint run's measured phases to the checkpoint model's labelled estimates.

``measured(run)`` collects what the ``llm-checkpoint`` phases measured (MLPerf's figure: bytes
÷ the slowest rank's time, with the per-rank spread; the copy, create and open rates; the
plain sequential write beside ``torch.save``). ``build(...)`` turns those into the
``checkpoint`` block of result.json: the measured figures, then estimates for the full-size
checkpoint from ``ckpt_model``, each with its basis (``ckpt_report`` renders it). No I/O.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ..core.errors import UsageError
from ..core.units import format_bytes, format_rate, format_seconds
from ..result.blocks import TargetBlock
from ..result.file import RunResult
from . import model as cm

#: MLPerf Storage's threshold for figures that are not cache: written data over 3 × RAM.
CACHE_MULTIPLE = 3


@dataclass(frozen=True)
class Options:
    """What the user gave for the model: failures, interval, restart, capacity, retention."""

    mtbf_s: float | None = None
    failure_rate_per_s: float | None = None  # per accelerator
    accelerators: int | None = None  # default: the checkpoint's ranks
    interval_s: float | None = None
    restart_s: float = 0.0
    capacity_bytes: int | None = None
    keep_last: int | None = None
    mtbf_basis: str = ""  # where a given mtbf_s comes from (default: --mtbf)
    copy_bps: float | None = None  # the snapshot's host copy per GPU, given: not the measured
    copy_basis: str = ""
    save_mode: str = "sync"  # the save mode the verdict's summary judges (a plan's --async)


def _phase(run: RunResult, name: str) -> Any:
    return next((p for p in run.phases if p.name == name and p.ops), None)


def _io(p: Any) -> dict[str, Any]:
    secs = list((p.extra or {}).get("rank_seconds") or [])
    spread = {"min": min(secs), "median": statistics.median(secs), "max": max(secs)} if secs else {}
    world = int((p.extra or {}).get("world") or 1)
    # under torchrun a phase keeps process 0's extra: its own ranks' times only
    scope = "all ranks" if world == 1 else f"process 0's {len(secs)} ranks of {world} processes"
    return {
        "rank_seconds_scope": scope,
        "phase": p.name,
        "api": (p.params or {}).get("api"),
        "bytes": p.bytes,
        "files": p.files,
        "ranks": int((p.params or {}).get("ranks_local") or p.concurrency)
        * int((p.extra or {}).get("world") or 1),
        "seconds": p.elapsed_s,
        "bandwidth_bps": p.bandwidth_bps,
        "rank_seconds": spread,
        "cache": p.cache,
    }


def measured(run: RunResult) -> dict[str, Any]:
    """The figures the run's checkpoint phases measured (absent phases are left out)."""
    out: dict[str, Any] = {}
    for key, name in (
        ("save", "ckpt-save"), ("load", "ckpt-load"),
        ("dcp_save", "ckpt-dcp-save"), ("dcp_load", "ckpt-dcp-load"),
    ):  # fmt: skip
        p = _phase(run, name)
        if p is not None:
            out[key] = _io(p)
    save = _phase(run, "ckpt-save") or _phase(run, "ckpt-dcp-save")
    if save is not None and (save.extra or {}).get("copy_bps"):
        out["copy_bps"] = save.extra["copy_bps"]
        out["copy_basis"] = save.extra.get("copy_basis", "")
    base = _phase(run, "ckpt-baseline-write")
    if base is not None:
        out["baseline"] = {"bandwidth_bps": base.bandwidth_bps, "bytes": base.bytes}
        if "save" in out and base.bandwidth_bps:
            out["baseline"]["save_ratio"] = out["save"]["bandwidth_bps"] / base.bandwidth_bps
    for key, name in (("create_per_s", "ckpt-create"), ("open_per_s", "ckpt-open_read")):
        p = _phase(run, name)
        if p is not None and p.iops:
            out[key] = p.iops
            out[f"{key.split('_')[0]}_workers"] = p.concurrency
    return out


def _data_rate(io: dict[str, Any], per_s: float | None) -> tuple[float, float]:
    """(bytes/s of the data alone, seconds of metadata in the measured time): the measured
    time less its files at the measured create/open rate, so the full-size estimate does not
    count those files twice."""
    meta = io["files"] / per_s if per_s else 0.0
    data_s = io["seconds"] - meta
    if data_s <= 0.5 * io["seconds"]:  # metadata would be most of it: keep the plain figure
        return io["bandwidth_bps"], -1.0
    return io["bytes"] / data_s, meta


def build(
    run: RunResult, spec: cm.ModelSpec, *, scale: float, dcp_files_per_rank: int = 1,
    opts: Options | None = None, source: str = "", subset: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The ``checkpoint`` block: model, measured figures, and the full-size estimates
    (``subset``: MLPerf's subset mode ran ranks 0..subset−1 of the full layout)."""
    opts = opts or Options()
    got = measured(run)
    block: dict[str, Any] = {
        "model": {**spec.to_dict(), "ranks": spec.ranks, "total_bytes": spec.total_bytes,
                  "source": source},
        "scale": scale,
        "subset": subset,
        "measured": got,
    }  # fmt: skip
    dcp = "save" not in got and "dcp_save" in got
    save = got.get("save") or got.get("dcp_save")
    load = got.get("load") or got.get("dcp_load")
    if save is None or load is None:
        block["estimate"] = None
        block["estimate_missing"] = "no complete save and load was measured"
        return block
    lay = cm.layout(spec, dcp_files_per_rank=dcp_files_per_rank)
    write_bps, save_meta = _data_rate(save, got.get("create_per_s"))
    read_bps, load_meta = _data_rate(load, got.get("open_per_s"))
    copy = opts.copy_bps or got.get("copy_bps")
    rates = cm.Rates(write_bps, read_bps, copy, got.get("create_per_s"), got.get("open_per_s"))
    copy_basis = opts.copy_basis if opts.copy_bps else got.get("copy_basis")
    basis = _basis(got, save, spec, scale, rates, save_meta, load_meta, copy_basis)
    if subset is not None:
        basis.append(
            f"MLPerf subset mode: ranks 0..{subset - 1} of the {spec.ranks}-rank layout ran, "
            "writing exactly their files; the full layout is assumed to reach the same "
            "aggregate rate"
        )
    free = TargetBlock.from_dict(getattr(run, "target", None)).free_bytes
    block["estimate"] = _estimate(lay, rates, basis, spec, opts, dcp, dcp_files_per_rank, free)
    if opts.save_mode != "sync":  # the save mode a plan judges (qualify --require PLAN.json)
        block["estimate"]["save_mode"] = opts.save_mode
    return block


def _basis(
    got: dict[str, Any], save: dict[str, Any], spec: cm.ModelSpec, scale: float,
    rates: cm.Rates, save_meta: float, load_meta: float, copy_basis: str | None = None,
) -> list[str]:  # fmt: skip
    """What the full-size estimates assume, one sentence each."""
    ranks_run = save["ranks"]
    basis = [
        f"aggregate rates measured with {ranks_run} writer(s) saving {format_bytes(save['bytes'])}"
        f" ({scale:.3g} of each rank's shard) and loading it back, applied to the full "
        f"{format_bytes(spec.total_bytes)} over {spec.ranks} ranks: assumes the storage "
        "sustains the same aggregate rate at full size and rank count",
    ]
    if save_meta < 0 or load_meta < 0:
        basis.append(
            "the measured files at the measured create/open rates would take most of the "
            "measured time: the plain measured rates were used, so the full-size files' "
            "metadata is counted twice (a larger --scale avoids this)"
        )
    if save_meta > 0:
        basis.append(
            f"the measured save time less {format_seconds(save_meta)} of file creates at the "
            "measured create rate gives the data rate; full-size files are added back at that rate"
        )
    if rates.create_per_s:
        basis.append(
            f"file creates at {rates.create_per_s:,.0f}/s and opens at "
            f"{(rates.open_per_s or 0):,.0f}/s measured by {got.get('create_workers', '?')} "
            "small-file writers, assumed to hold at every rank count"
        )
    if rates.copy_bps:
        basis.append(
            f"asynchronous snapshot: the largest rank shard at {format_rate(rates.copy_bps)} "
            f"({copy_basis or 'measured copy'})"
        )
    return basis


def _mtbf(opts: Options, accel: int) -> tuple[float, str]:
    """(MTBF seconds, its basis): given, from a given failure rate, or Llama 3's rate."""
    if opts.mtbf_s is not None:
        return opts.mtbf_s, opts.mtbf_basis or "given (--mtbf)"
    if opts.failure_rate_per_s is not None:
        mtbf = cm.mtbf_from_rate(opts.failure_rate_per_s, accel)
        return mtbf, (
            f"{opts.failure_rate_per_s * cm.DAY_S:.3g} failures per accelerator-day "
            f"(--failure-rate) × {accel} accelerators"
        )
    mtbf = cm.mtbf_from_rate(cm.LLAMA3_RATE_PER_GPU_S, accel)
    return mtbf, (
        f"Llama 3 405B pre-training rate ({cm.LLAMA3_INTERRUPTIONS} unexpected interruptions"
        f" in 54 days on {cm.LLAMA3_GPUS:,} GPUs = "
        f"{cm.LLAMA3_RATE_PER_GPU_S * cm.DAY_S:.3g} per GPU-day) × {accel} accelerators"
    )


def _estimate(
    lay: Any, rates: cm.Rates, basis: list[str], spec: cm.ModelSpec, opts: Options, dcp: bool,
    dcp_files_per_rank: int, free: int | None,
) -> dict[str, Any]:  # fmt: skip
    """The labelled full-size estimates: stall, recovery, the best intervals, capacity."""
    st = cm.stall(lay, rates, dcp=dcp)
    st_dcp = cm.stall(lay, rates, dcp=True)
    rec = cm.recovery(lay, rates, opts.restart_s, dcp=dcp)
    accel = opts.accelerators or spec.ranks
    mtbf, mtbf_basis = _mtbf(opts, accel)
    sync = cm.plan_sync(st, mtbf, rec.total_s, opts.interval_s)
    asyn = cm.plan_async(st, mtbf, rec.total_s, opts.interval_s) if st.snapshot_s else None
    cap = cm.capacity(
        lay.total_bytes, free_bytes=free, capacity_bytes=opts.capacity_bytes,
        keep_last=opts.keep_last,
    )  # fmt: skip
    centre = sync.best_interval_s
    grid = [centre * 10 ** (k / 10) for k in range(-13, 14)]  # 0.05× to 20×, 10 per decade
    curve = cm.goodput_curve(grid, st, mtbf, rec.total_s)
    basis = [*basis, (
        "goodput: Daly (2006) exponential form, τ / (M·e^{R/M}·(e^{(τ+δ)/M} − 1)·(1 + w/M)), which "
        "counts failures during a checkpoint and during recovery; the best interval maximises "
        "it (first-order figures in result.json: best_goodput_first_order)"
    )]  # fmt: skip
    return {
        "label": "estimate",
        "basis": basis,
        "layout": lay.to_dict(),
        "dcp": dcp,
        "rates": {
            "write_bps": rates.write_bps,
            "read_bps": rates.read_bps,
            "copy_bps": rates.copy_bps,
            "create_per_s": rates.create_per_s,
            "open_per_s": rates.open_per_s,
        },  # fmt: skip
        "stall": st.to_dict(),
        "stall_dcp": st_dcp.to_dict(),
        "recovery": rec.to_dict(),
        "mtbf_s": mtbf,
        "mtbf_basis": mtbf_basis,
        "accelerators": accel,
        "sync": sync.to_dict(),
        "async": asyn.to_dict() if asyn else None,
        "capacity": cap.to_dict(),
        "curve": [{"interval_s": t, "sync": g, "async": a} for t, g, a in curve],
        "metadata_dominates_from_ranks": (
            cm.metadata_crossover_ranks(
                lay.total_bytes, rates.write_bps, rates.create_per_s, dcp_files_per_rank
            )
            if rates.create_per_s
            else None
        ),
    }


def parse_options(
    *, mtbf: str | None = None, failure_rate: str | None = None, gpus: int | None = None,
    interval: str | None = None, restart: str | None = None, capacity: str | None = None,
    keep_last: int | None = None,
) -> Options:  # fmt: skip
    """The command line's checkpoint-model options, checked (UsageError: exit 2, one line)."""
    from ..core.units import bounded_duration, parse_duration, parse_size

    if mtbf is not None and failure_rate is not None:
        raise UsageError("--mtbf and --failure-rate both given", hint="give one of them")
    if gpus is not None and gpus < 1:
        raise UsageError(f"--gpus must be at least 1, got {gpus}", hint="e.g. --gpus 1024")
    mtbf_s = parse_duration(mtbf, what="--mtbf") if mtbf is not None else None
    if mtbf_s is not None and not (0 < mtbf_s < float("inf")):
        raise UsageError(f"--mtbf must be a positive duration, got {mtbf!r}", hint="e.g. 3h")
    interval_s = parse_duration(interval, what="--interval") if interval is not None else None
    if interval_s is not None and not (0 < interval_s < float("inf")):
        raise UsageError(
            f"--interval must be a positive duration, got {interval!r}", hint="e.g. 30m"
        )
    restart_s = parse_duration(restart, what="--restart") if restart is not None else 0.0
    if not (0 <= restart_s < float("inf")):
        raise UsageError(f"--restart must be a duration >= 0, got {restart!r}", hint="e.g. 10m")
    if interval_s is not None:  # an interval or a restart beyond a week is no checkpoint plan
        bounded_duration(interval_s, "--interval", interval)
    bounded_duration(restart_s, "--restart", restart)
    if keep_last is not None and keep_last < 1:
        raise UsageError(f"--keep-last must be at least 1, got {keep_last}", hint="e.g. 3")
    cap = parse_size(capacity, what="--capacity") if capacity is not None else None
    if cap is not None and cap <= 0:
        raise UsageError(f"--capacity must be more than 0, got {capacity!r}", hint="e.g. 2PB")
    return Options(
        mtbf_s=mtbf_s,
        failure_rate_per_s=parse_failure_rate(failure_rate) if failure_rate else None,
        accelerators=gpus, interval_s=interval_s, restart_s=restart_s, capacity_bytes=cap,
        keep_last=keep_last,
    )  # fmt: skip


def parse_failure_rate(text: str) -> float:
    """``4.7e-4`` or ``4.7e-4/day`` (failures per accelerator-day), ``2e-5/h``: per second."""
    s = str(text).strip().lower()
    unit = cm.DAY_S
    for suffix, secs in (("/day", cm.DAY_S), ("/d", cm.DAY_S), ("/h", cm.HOUR_S)):
        if s.endswith(suffix):
            s, unit = s[: -len(suffix)], secs
            break
    try:
        value = float(s)
    except ValueError:
        value = -1.0
    if not (value > 0 and value < float("inf")):
        raise UsageError(
            f"--failure-rate {text!r} is not valid",
            hint="give failures per accelerator-day, e.g. 4.7e-4 (or 2e-5/h)",
        )
    return value / unit


PLAN_LABEL = "planned from the given rates"


def parse_bandwidth(text: str | None, what: str) -> float | None:
    """``156GiB/s`` as bytes/s (UsageError naming ``what`` unless a positive byte rate)."""
    from ..core.units import parse_rate

    if text is None:
        return None
    try:
        v, unit = parse_rate(text)
    except UsageError:
        unit, v = "", -1.0
    if unit != "B/s" or not (0 < v < float("inf")):
        raise UsageError(f"{what} {text!r} is not a positive byte rate", hint="e.g. 156GiB/s")
    return v


def plan(
    spec: cm.ModelSpec, rates: cm.Rates, opts: Options, *, dcp_files_per_rank: int = 1,
    copy_basis: str = "",
) -> dict[str, Any]:  # fmt: skip
    """The estimate tables for ``spec`` at rates the user gives (no I/O, nothing measured):
    the same stall, recovery, interval, goodput and capacity figures, labelled as planned."""
    lay = cm.layout(spec, dcp_files_per_rank=dcp_files_per_rank)
    gib = 1 << 30
    basis = [
        f"{PLAN_LABEL} (no I/O): write {rates.write_bps / gib:.4g} GiB/s, read "
        f"{rates.read_bps / gib:.4g} GiB/s, each the checkpoint's bytes over the slowest "
        "rank's time, as MLPerf Storage reports it"
        + (f", snapshot copy {rates.copy_bps / gib:.4g} GiB/s per rank" if rates.copy_bps else ""),
        *(
            [
                f"asynchronous saves: the snapshot, the largest rank shard "
                f"{format_bytes(lay.max_rank_bytes)} at the host copy ({copy_basis or 'given'}), "
                "stalls; the write runs in the background and must finish before the next save"
            ]
            if rates.copy_bps
            else []
        ),
        f"{spec.name}: {lay.total_bytes / gib:,.1f} GiB over {lay.ranks} ranks "
        f"({spec.basis or 'as given'})",
        "file creates and opens not counted (no rate given)",
    ]
    est = _estimate(lay, rates, basis, spec, opts, False, dcp_files_per_rank, None)
    est["label"] = "plan"
    return est
