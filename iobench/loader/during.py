"""The loader measured during an asynchronous checkpoint write: ``--during-checkpoint MODEL``.

The order of the measurement: once the dataset is laid out, probed and the loader calibrated,
the checkpoint is written once **alone** (the same files, sizes, writers and pacing: its rate
with the storage to itself), then the background writer (``ckpt_writer``) starts beside the
training loop and saves ``at`` into the timed steps (seconds, or steps ended), then ``every``
after each save started. The loop
keeps every timed step's clock readings (``LoopConfig.timeline``), on the clock the writer's
start and end are taken on, so each step falls in a window:

- **before** checkpoint 1, **during** checkpoint k (its first block written to its last file
  fsynced), **after** checkpoint k (up to the next one's start, or the loop's end).

In each window, from every rank's steps: AU = compute time inside the window ÷ the window's
time inside the rank's timed spans (each epoch's steps after its first), the mean over ranks;
load-wait percentiles of the steps whose midpoint lies in it; read bandwidth = the bytes of
those steps' batches ÷ the window's time, summed over ranks (the rate batches were delivered,
the read rate in steady state); during a save, its write rate beside the same write alone.
``summary`` pools the windows of each kind (without a write, during one). Pure functions of
plain data, but ``measure`` which runs the writer around the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..core.errors import EngineError
from ..result.stats import Histogram
from .beside import (
    ALONE_S,
    BesideProcess,
    beside_block,
    job_dir,
    lay_out,
    remove_job_dir,
    run_job,
)
from .ckpt_writer import (
    BackgroundWriter,
    CheckpointPlan,
    checkpoint_dir,
    close_pools,
    make_pools,
    remove_checkpoint_dir,
    save_rate,
    save_seconds,
    shard_plan,
    write_checkpoint,
)
from .loop import LoopResult, StepClock, wait_summary
from .readprobe import GAP_S, IDLE_S, ProbeSpec, ReadProbe, probe_block

Interval = tuple[float, float]


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def windows(records: Sequence[dict[str, Any]], lo: float, hi: float) -> list[dict[str, Any]]:
    """The windows of the loop's span [lo, hi] around the saves ``records`` (start, end),
    clipped to the span: kind (before, during, after), the save's number, start and end."""
    out: list[dict[str, Any]] = []
    cursor = lo
    for i, rec in enumerate(sorted(records, key=lambda r: r["start"]), 1):
        s, e = (min(max(rec[k], lo), hi) for k in ("start", "end"))
        if s > cursor:
            out.append({"kind": "before" if i == 1 else "after",
                        "checkpoint": 1 if i == 1 else i - 1, "start": cursor, "end": s})  # fmt: skip
        if e > s:
            out.append({"kind": "during", "checkpoint": i, "start": s, "end": e})
        cursor = max(cursor, e)
    if hi > cursor:
        n = len(records)
        out.append({"kind": "after" if n else "before", "checkpoint": max(n, 1),
                    "start": cursor, "end": hi})  # fmt: skip
    return out


def _steps(timeline: dict[str, Any]) -> np.ndarray:
    """A rank's timed steps as rows (wait start, wait end, compute end, step end, bytes)."""
    return np.frombuffer(timeline["steps"], dtype=np.float64).reshape(-1, 5)


def window_stats(timelines: Sequence[dict[str, Any]], parts: Sequence[Interval]) -> dict[str, Any]:
    """AU, load wait, read bandwidth and steps over the union of ``parts`` (disjoint)."""
    au, hist, bps, steps, secs = [], Histogram(), 0.0, 0, 0.0
    for tl in timelines:
        t = sum(_overlap(s0, s1, a, b) for s0, s1 in tl["spans"] for a, b in parts)
        if t <= 0:
            continue
        st = _steps(tl)
        comp = sum(
            float(np.clip(np.minimum(st[:, 2], b) - np.maximum(st[:, 1], a), 0, None).sum())
            for a, b in parts
        )
        mid = (st[:, 0] + st[:, 3]) / 2
        sel = np.zeros(len(st), dtype=bool)
        for a, b in parts:
            sel |= (mid >= a) & (mid < b)
        hist.record_array(((st[sel, 1] - st[sel, 0]) * 1e9).astype(np.int64))
        au.append(min(1.0, comp / t))
        bps += float(st[sel, 4].sum()) / t
        steps += int(sel.sum())
        secs = max(secs, t)
    return {
        "seconds": secs, "steps": steps, "au": float(np.mean(au)) if au else None,
        "load_wait_s": wait_summary(hist), "read_bps": bps if au else None,
    }  # fmt: skip


def during_block(
    plan: CheckpointPlan,
    alone: dict[str, Any],
    records: Sequence[dict[str, Any]],
    timelines: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    """The ``loader.during_checkpoint`` block of result.json."""
    spans = [s for tl in timelines for s in tl["spans"]]
    lo = min((s[0] for s in spans), default=0.0)
    hi = max((s[1] for s in spans), default=lo)
    alone_bps = save_rate(alone)
    saves = []
    for rec in records:
        bps = save_rate(rec)
        saves.append({
            "checkpoint": rec["index"], "start_s": rec["start"] - lo, "end_s": rec["end"] - lo,
            "seconds": rec["end"] - rec["start"], "bytes": rec["bytes"], "files": rec["files"],
            "write_bps": bps, "complete": rec["complete"],
            "vs_alone": bps / alone_bps if bps and alone_bps else None,
            **({k: rec[k] for k in ("slowest_s", "skew_s", "ranks")} if rec.get("ranks", 1) > 1 else {}),
        })  # fmt: skip
    wins = []
    for w in windows(records, lo, hi):
        row = {"kind": w["kind"], "checkpoint": w["checkpoint"], "start_s": w["start"] - lo,
               "end_s": w["end"] - lo, **window_stats(timelines, [(w["start"], w["end"])])}  # fmt: skip
        wins.append(row)
    by_kind = {
        kind: [(w["start"], w["end"]) for w in windows(records, lo, hi) if (w["kind"] == "during") == (kind == "during")]
        for kind in ("without", "during")
    }  # fmt: skip
    done = [s for s in saves if s["complete"]]
    written = sum(s["bytes"] for s in done)
    took = sum(s.get("slowest_s", s["seconds"]) for s in done)
    return {
        **plan.to_dict(),
        "alone": {
            "seconds": save_seconds(alone),
            "bytes": alone["bytes"],
            "write_bps": alone_bps,
        },  # fmt: skip
        "checkpoints": saves,
        "windows": wins,
        "summary": {
            "without": window_stats(timelines, by_kind["without"]) if by_kind["without"] else None,
            "during": window_stats(timelines, by_kind["during"]) if by_kind["during"] else None,
            "write_bps": written / took if took > 0 else None,
            "write_vs_alone": written / took / alone_bps if took > 0 and alone_bps else None,
        },
        "basis": (
            "windows cut at the writer's start and end of each save (perf_counter, the loop's "
            "clock); AU = compute inside the window / the window's time inside each rank's "
            "timed steps, mean over ranks; load wait and read bandwidth from the steps whose "
            "midpoint lies in the window (bytes of their batches / window time); write rate = "
            "bytes / (last fsync - first write) of each save, beside the same save written "
            "alone before the loop; the saved state is staged random data (no accelerator "
            "copy is emulated)"
        ),
    }


def model_block(
    block: dict[str, Any], demand_bps: float | None, span_au: float | None,
    buffer_s: float = 0.0,
) -> dict[str, Any] | None:  # fmt: skip
    """The contention model (``checkpoint.contention``) over the loop's span: from the
    measured windows, and from the separate measurements only (the loader without a write,
    the save alone) with the independent share rule and, with a ``read_probe``, the probe
    rule (``buffer_s`` per save: the compute of the loader's full prefetch queue); beside the
    AU measured over the span. None without both kinds of window or a demand (compute 0)."""
    from ..checkpoint.contention import ContentionInputs, contention

    s, alone = block["summary"], block["alone"]
    wo, du = s.get("without"), s.get("during")
    if not (wo and du and wo["au"] is not None and du["au"] is not None and demand_bps):
        return None
    if not (wo["read_bps"] and du["read_bps"] and alone["write_bps"] and du["seconds"] > 0):
        return None
    written = 0.0
    for c, w in ((c, [x for x in block["windows"] if x["kind"] == "during" and x["checkpoint"] == c["checkpoint"]])
                 for c in block["checkpoints"]):  # fmt: skip
        inside = sum(x["seconds"] for x in w)
        written += c["bytes"] * min(1.0, inside / c["seconds"]) if c["seconds"] > 0 else 0.0
    tau = wo["seconds"] + du["seconds"]
    base = {"interval_s": tau, "checkpoint_bytes": max(written, 1.0),
            "write_alone_bps": alone["write_bps"], "read_alone_bps": wo["read_bps"],
            "au_alone": wo["au"], "demand_bps": demand_bps}  # fmt: skip
    measured = contention(ContentionInputs(**base, au_during=du["au"], read_during_bps=du["read_bps"],
                                           write_during_bps=max(written, 1.0) / du["seconds"]))  # fmt: skip
    rule = contention(ContentionInputs(**base))
    out = {
        "au_measured": span_au,
        "au_from_windows": measured.au_interval,
        "au_share_rule": rule.au_interval,
        "write_s_share_rule": rule.write_s,
        "write_s_measured": du["seconds"],
        "from_windows": measured.to_dict(),
        "share_rule": rule.to_dict(),
    }
    p = block.get("read_probe") or {}
    idle, during = p.get("idle") or {}, p.get("during") or {}
    if idle.get("read_bps") and during.get("read_bps"):
        saves = sum(1 for x in block["windows"] if x["kind"] == "during")
        by_probe = contention(ContentionInputs(
            **base, probe_idle_bps=idle["read_bps"], probe_during_bps=during["read_bps"],
            probe_during_range=tuple(p["during_range_bps"]) if p.get("during_range_bps") else None,
            write_probe_bps=p.get("save_bps"), buffer_s=buffer_s * saves))  # fmt: skip
        out.update(au_probe_rule=by_probe.au_interval, probe_rule=by_probe.to_dict())
    return out


class _Stop:
    """``stopped`` as the event a job in this process waits on."""

    def __init__(self, stopped: Callable[[], bool]):
        self.stopped = stopped

    def is_set(self) -> bool:
        return self.stopped()

    def wait(self, s: float) -> bool:
        import time

        time.sleep(s)
        return self.stopped()


def merge_saves(per_rank: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every torchrun rank's records of each save as one: from the first rank's first block
    to the last rank's last fsync, every rank's bytes and files, ``slowest_s`` the slowest
    rank's own time (the save's rate is its bytes over that), ``skew_s`` the spread of the
    ranks' starts; complete only when every rank's part is."""
    ranks = len(per_rank)
    out = []
    for k in sorted({r["index"] for recs in per_rank for r in recs}):
        parts = [r for recs in per_rank for r in recs if r["index"] == k]
        out.append({
            "index": k, "start": min(p["start"] for p in parts),
            "end": max(p["end"] for p in parts), "bytes": sum(p["bytes"] for p in parts),
            "files": sum(p["files"] for p in parts),
            "complete": len(parts) == ranks and all(p["complete"] for p in parts),
            "error": next((p["error"] for p in parts if p["error"]), None),
            "slowest_s": max(p["end"] - p["start"] for p in parts),
            "skew_s": max(p["start"] for p in parts) - min(p["start"] for p in parts),
            "ranks": len(parts),
        })  # fmt: skip
    return out


def _gathered(coord: Any, value: Any) -> list[Any]:
    return [value] if coord is None or coord.world == 1 else coord.all_gather_object(value)


def _block(plan: CheckpointPlan, alone: dict[str, Any], records: list[dict[str, Any]],
           res: LoopResult, demand_bps: float | None, probed: dict[str, Any] | None = None,
           buffer_s: float = 0.0) -> dict[str, Any]:  # fmt: skip
    """The block of the windows (and the read probe's), with the model over the loop's span."""
    timelines = [r["timeline"] for r in res.ranks if "timeline" in r]
    block = during_block(plan, alone, records, timelines)
    if probed:
        block["read_probe"] = probed
    whole = window_stats(timelines, [_span(res)]) if timelines else {}
    block["model_au"] = model_block(block, demand_bps, whole.get("au"), buffer_s)
    return block


def _span(res: LoopResult) -> Interval:
    """The loop's span: the first rank's first timed step to the last one's last."""
    spans = [s for r in res.ranks if "timeline" in r for s in r["timeline"]["spans"]]
    return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else (0.0, 0.0)


def _torchrun_note(world: int, records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "ranks": world, "start_skew_s": max((r["skew_s"] for r in records), default=None),
        "basis": "every rank wrote its shard (the model's ranks r with r mod ranks = its "
        "rank); the ranks' saves started together at the loop's step barrier; each save's "
        "window from the first rank's first block to the last rank's last fsync, its rate "
        "its bytes over the slowest rank's time; AU per window the mean over ranks",
    }  # fmt: skip


def _save_alone(mine: CheckpointPlan, fd: int, stopped: Callable[[], bool], rank: int,
                coord: Any) -> dict[str, Any]:  # fmt: skip
    """The save alone (every torchrun rank's shard at once), merged; EngineError on a failure."""
    pools = make_pools(mine, 3 + rank)
    try:
        if coord is not None and coord.world > 1:
            coord.barrier()  # every rank's shard alone, at once: the whole save alone
        rec = write_checkpoint(mine, fd, 0, stopped, pools)
    finally:
        close_pools(pools)
    alone = merge_saves([[a] for a in _gathered(coord, rec)])[0]
    if alone["error"]:
        raise EngineError(alone["error"])
    return alone


def _saves(writer: BackgroundWriter, coord: Any) -> list[dict[str, Any]]:
    """Every rank's writer stopped, its records gathered (a failure raised on every rank)."""
    try:
        got: tuple[list[dict[str, Any]], str | None] = (writer.finish(), None)
    except EngineError as e:
        got = ([], str(e))
    gathered = _gathered(coord, got)
    failed = next((err for _, err in gathered if err), None)
    if failed:
        raise EngineError(failed)
    return merge_saves([recs for recs, _ in gathered])


def _probed_save(mine: CheckpointPlan, fd: int, stopped: Callable[[], bool], rank: int,
                 coord: Any, probe: ProbeSpec | None) -> dict[str, Any]:  # fmt: skip
    """The save written ``probe_saves`` times more, the read probe (rank 0's) alone for
    ``IDLE_S`` and then beside them: the ``read_probe`` block (rank 0's, broadcast at the
    end; the other ranks write their shards at once, as in the save alone)."""
    import time

    def pause(s: float) -> tuple[float, float]:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < s and not stopped():
            time.sleep(0.02)
        return t0, time.perf_counter()

    if probe is None or not mine.probe_saves:
        return {}
    rp = ReadProbe(probe) if rank == 0 else None
    try:
        if rp is not None:
            rp.start()
            idle = pause(IDLE_S)
        saves = []
        for k in range(mine.probe_saves):
            if k and rp is not None:
                pause(GAP_S)
            saves.append(_save_alone(mine, fd, stopped, rank, coord))
        return probe_block(probe, rp.finish(), idle, saves) if rp is not None else {}
    finally:
        if rp is not None:
            rp.close()


def measure(
    plan: CheckpointPlan,
    run_dir_fd: int,
    stopped: Callable[[], bool],
    loop: Callable[[StepClock], LoopResult],
    demand_bps: float | None = None,
    direct: bool = True,
    coord: Any = None,
    probe: ProbeSpec | None = None,
    buffer_s: float = 0.0,
) -> tuple[LoopResult, dict[str, Any]]:
    """The save alone (and ``plan.beside``, the other job, alone), with ``probe`` the save
    again beside the read probe, then ``loop()`` with the background writer (and the other
    job) beside it; the loop's result and the ``during_checkpoint`` block. Every file goes
    and comes inside the run directory. ``buffer_s``: the loader's full prefetch queue's
    compute (the probe rule). Under torchrun (``coord``, one host) every rank writes its
    shard (``shard_plan``) alone, all at once, then beside its own loop; the step barrier
    keeps the ranks' steps, and so their saves' starts, together; each save's records are
    merged (``merge_saves``), and rank 0 alone runs the other job and the read probe."""
    import time

    world, rank = (coord.world, coord.rank) if coord is not None else (1, 0)
    mine = shard_plan(plan, rank, world) if world > 1 else plan
    job = plan.beside if rank == 0 else None
    fd = checkpoint_dir(run_dir_fd)
    jfd = job_dir(run_dir_fd) if job else None
    clock = StepClock()
    try:
        if job and jfd is not None:
            lay_out(job, jfd)
        alone = _save_alone(mine, fd, stopped, rank, coord)
        probed = _probed_save(mine, fd, stopped, rank, coord, probe)
        until = time.perf_counter() + ALONE_S  # the other job alone, after the saves alone
        job_alone = (run_job(job, jfd, _Stop(stopped), until, direct)
                     if job is not None and jfd is not None else [])  # fmt: skip
        writer = BackgroundWriter(mine, fd)
        other = BesideProcess(job, jfd, direct) if job and jfd is not None else None
        try:
            writer.start(clock)
            if other is not None:
                other.start()
            res = loop(clock)
            records = _saves(writer, coord)
            samples = other.finish() if other is not None else []
        finally:
            writer.close()
            if other is not None:
                other.close()
    finally:
        remove_checkpoint_dir(run_dir_fd, fd)
        if jfd is not None:
            remove_job_dir(run_dir_fd, jfd)
    block = _block(plan, alone, records, res, demand_bps, probed or None, buffer_s)
    if job is not None:
        block["beside"] = beside_block(job, job_alone, samples, block["windows"], *_span(res))
    if world > 1:
        block["torchrun"] = _torchrun_note(world, records)
        block = coord.broadcast_object(block)  # rank 0's (it alone ran the other job)
    return res, block


def beside(
    plan: CheckpointPlan, tgt: Any, stop: Any, warn: Callable[[str], None],
    loop: Callable[[StepClock], LoopResult], demand_bps: float | None = None,
    direct: bool = True, coord: Any = None, probe: ProbeSpec | None = None,
    buffer_s: float = 0.0,
) -> tuple[LoopResult, dict[str, Any]]:  # fmt: skip
    """``measure`` in the run directory of ``tgt`` (checked in place first), its notes warned."""
    from ..target import check_run_dir_in_place

    check_run_dir_in_place(tgt)
    res, block = measure(plan, tgt.handle.fd, stop.is_set, loop, demand_bps, direct, coord,
                         probe, buffer_s)  # fmt: skip
    for note in notes(block):
        warn(note)
    return res, block


def notes(block: dict[str, Any]) -> list[str]:
    """Warnings worth a line: no save during the loop, a save cut off by the loop's end."""
    out = []
    if not block["checkpoints"]:
        out.append(
            f"no checkpoint started during the loop (--checkpoint-at {block['at']:g}"
            f"{block['at_unit']}): "
            "the during-window is empty; lower --checkpoint-at or raise --steps/--epochs"
        )
    cut = [c["checkpoint"] for c in block["checkpoints"] if not c["complete"]]
    if cut:
        out.append(
            f"checkpoint {cut[0]} was still being written when the loop ended: stopped, its "
            "write rate covers the part written"
        )
    return out
