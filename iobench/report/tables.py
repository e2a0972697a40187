"""The content of a report as formatted tables: phases, ranks, metadata, loader, estimate, run
information, the verdict and the deltas against a baseline. The terminal, the markdown and the
HTML page render these same tables, so they never disagree.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..checkpoint.rows import tables as ckpt_tables
from ..core.table import Column, Table
from ..core.units import format_bytes, format_count, format_rate, format_seconds
from ..result.blocks import (
    AuPoint,
    CpuBlock,
    EpochBlock,
    EstimateBlock,
    HostBlock,
    IntervalBlock,
    LoaderBlock,
    RankBlock,
    SpreadBlock,
    TargetBlock,
    WaitBlock,
)
from ..result.file import PhaseResult, RunResult
from .cells import (
    _CACHE_MEANING,
    _SPREAD_HEADER,
    _SPREAD_NOTE,
    METADATA_OPS,
    Section,
    _block,
    _client_cpu,
    _count,
    _cpu_cell,
    _cpu_note,
    _gpus,
    _has_repeats,
    _indicative_note,
    _is_num,
    _many_client_phases,
    _pct,
    _rate,
    _rate_range,
    _repeat_spread,
    _secs,
    _status_cell,
    _value,
    au_cell,
    cpu_class,
    cpu_style,
    delta_column,
    metadata_rates,
    pairs,
    status_class,
    status_style,
)
from .during import tables as during_tables


def _ops_cell(p: PhaseResult) -> str:
    """Ops/s, suffixed for a metadata operation (the terminal's phases table)."""
    ops = _count(_value(p, "iops"))
    return ops + " ops/s" if p.op in METADATA_OPS and ops != "-" else ops


def _has_spread(phases: Sequence[PhaseResult]) -> bool:
    return any(len(p.repeats or []) > 1 for p in phases)


def _has_client_cpu(phases: Sequence[PhaseResult]) -> bool:
    return any(_client_cpu(p) is not None for p in phases)


def _row_cls(p: PhaseResult) -> str:
    return "" if p.status == "ok" else "bad"


def _moved(p: PhaseResult) -> str:
    return format_bytes(p.bytes) if p.bytes else (f"{p.ops:,} ops" if p.ops else "-")


def _worker_spread(p: PhaseResult) -> str:
    pw = p.worker_spread
    if _is_num(pw.min) and _is_num(pw.max) and pw.max > 0:
        return _rate_range(pw.min, pw.max)
    return "-"


# The phases' columns, each reading a PhaseResult. A name is never cut (two names cut alike,
# ``dataset...led-r1``, would stand for two phases); the other text columns may be, to 8
# characters; numbers and the status keep their width.
_PHASE = Column("Phase", get=lambda p: p.name)
_OP = Column("Op", get=lambda p: p.op, cut=8)
_JOBS = Column("Jobs", "r", get=lambda p: str(p.concurrency))
_BLOCK = Column("Block", "r", get=lambda p: _block(p.block_size))
_BANDWIDTH = Column("Bandwidth", "r", get=lambda p: _rate(_value(p, "bandwidth_bps")))
_SPREAD = Column(_SPREAD_HEADER, "r", fmt=_repeat_spread, shown=_has_spread)
_P50 = Column("p50", "r", get=lambda p: _secs(_value(p, "latency_s.p50")))
_P99 = Column("p99", "r", get=lambda p: _secs(_value(p, "latency_s.p99")))
# the client's; the note says so (the table fits 120 columns)
_CPU = Column("CPU", "r", fmt=_cpu_cell, shown=_has_client_cpu, style=cpu_style, cls=cpu_class)
_CACHE = Column("Cache", get=lambda p: p.cache or "-", cut=8)
_STATUS = Column("Status", get=_status_cell, style=status_style, cls=status_class)

PHASE_COLUMNS = (_PHASE, _OP, _JOBS, _BLOCK, _BANDWIDTH, Column("Ops/s", "r", get=_ops_cell),
                 _SPREAD, _P50, _P99, _CPU, _CACHE, _STATUS)  # fmt: skip
# The page's phases, in two tables that fit its width (none scrolls, no column is hidden): the
# summary, status second, then each phase's volume, time and spreads.
DETAIL_COLUMNS = (
    _PHASE, _STATUS, _OP, _JOBS, _BLOCK, _BANDWIDTH,
    Column("First done", "r", get=lambda p: _rate(_value(p, "bandwidth_stonewall_bps"))),
    Column("Ops/s", "r", get=lambda p: _count(_value(p, "iops"))), _P50, _P99,
    Column("p99.9", "r", get=lambda p: _secs(_value(p, "latency_s.p999"))), _CACHE,
)  # fmt: skip
VOLUME_COLUMNS = (
    _PHASE, Column("Moved", "r", get=_moved),
    Column("Elapsed", "r", get=lambda p: _secs(p.elapsed_s) if p.elapsed_s else "-"),
    Column("Worker spread", "r", get=_worker_spread), _SPREAD, replace(_CPU, name="Client CPU"),
)  # fmt: skip


def _phase_table(run: RunResult) -> Section:
    spread = _has_repeats(run)
    notes = (_SPREAD_NOTE if spread else "", _cpu_note(run), _indicative_note(run))
    note = " ".join(n for n in notes if n)
    return Section("Phases", Table.of(PHASE_COLUMNS, run.phases, row_cls=_row_cls), note)


def _phase_detail_tables(run: RunResult) -> list[Section]:
    """The HTML page's phases: the summary, then each phase's bytes (or operations), time,
    the workers' spread, the repeats' spread and the client's CPU (the last two when the run
    has them)."""
    summary = Section("Phases", Table.of(DETAIL_COLUMNS, run.phases, row_cls=_row_cls))
    note = " ".join(n for n in (_SPREAD_NOTE if _has_repeats(run) else "", _cpu_note(run)) if n)
    volume = Table.of(VOLUME_COLUMNS, run.phases, row_cls=_row_cls)
    return [summary, Section("Volume, time and spread", volume, note)]


_METADATA_COLUMNS = (Column("Phase"), Column("Operation", cut=8), Column("Rate", "r"),
                     Column("p99", "r"))  # fmt: skip


def _metadata_table(run: RunResult) -> Section | None:
    rows = []
    for p in run.phases:
        rates = metadata_rates(p)
        for op, r in rates.items():
            p99 = p.latency.p99 if op == p.op else None
            rows.append([p.name, op, f"{format_count(r)} ops/s", _secs(p99)])
    if not rows:
        return None
    return Section("Metadata operations", Table(_METADATA_COLUMNS, rows))


def _loader_config(ld: LoaderBlock) -> str:
    """``profile p, 8 GPUs, 4 workers, ...``: how the loader ran."""
    config = []
    if ld.profile:
        config.append(f"profile {ld.profile}")
    for value, label in ((ld.gpus, "GPUs"), (ld.workers, "workers"), (ld.steps, "steps")):
        if value is not None:
            config.append(f"{value} {label}")
    if ld.batch_size is not None:
        config.append(f"batch {ld.batch_size}")
    if ld.hosts:
        config.append(f"one rank per GPU on {ld.hosts} host{'s' if ld.hosts != 1 else ''}")
    return ", ".join(config) or "-"


def _loader_rates(ld: LoaderBlock) -> list[list[str]]:
    """The loader's measured rates and times, each row when the result has it."""
    rows = []
    if ld.samples_per_s is not None:
        rows.append(["Samples/s", _count(ld.samples_per_s)])
    if ld.bytes_per_s is not None:
        rows.append(["Throughput", _rate(ld.bytes_per_s)])
    wait = ld.load_wait_s
    if isinstance(wait, WaitBlock) and not wait.empty:
        rows.append(["Load wait", f"mean {_secs(wait.mean)}, p99 {_secs(wait.p99)}"])
    if ld.compute_s is not None:
        rows.append(["Compute per step", _secs(ld.compute_s)])
    if ld.bound:
        rows.append(["Bound by", str(ld.bound)])
    if isinstance(ld.existing, Mapping):  # a run over the user's own dataset
        from ..loader.existing_summary import table_rows

        rows += table_rows(ld.to_dict())
    return rows


def _loader_au_rows(run: RunResult, ld: LoaderBlock) -> list[list[str]]:
    """AU per epoch, per rank and at each measured GPU count, when there are several."""
    rows = []
    epochs = ld.au_per_epoch or ()
    if epochs:
        rows.append(["AU per epoch", ", ".join(_pct(a) for a in epochs)])
    per_rank = _loader_rank_au(ld)
    if len(per_rank) > 1:
        (lo, lo_who), (hi, hi_who) = min(per_rank), max(per_rank)
        rows.append(["AU per rank", f"min {_pct(lo)} ({lo_who}), max {_pct(hi)} ({hi_who})"])
    points = _loader_points(run)
    if len(points) > 1:
        rows.append(["Measured points", ", ".join(f"{_gpus(g)}: {_pct(a)}" for g, a in points)])
    return rows


def _loader_table(run: RunResult) -> Section | None:
    ld = run.loader_block
    if ld is None or ld.empty:
        return None
    rows = [["Configuration", _loader_config(ld)], ["AU measured", au_cell(ld)]]
    rows += _loader_rates(ld) + _loader_au_rows(run, ld)
    if ld.cache:
        rows.append(["Cache", str(ld.cache)])
    c = ld.client_cpu
    if isinstance(c, CpuBlock) and _is_num(c.share):
        from ..core.cpu import saturated

        text = f"{c.share * 100:.0f}% of {c.cpus if c.has('cpus') else '?'} CPUs over the loop"
        if saturated(c.to_dict()):
            text += ": the client, not the storage, may have been the limit"
        rows.append(["Client CPU", text])
    return pairs("Data loader (measured)", rows)


def _loader_rank_au(ld: LoaderBlock) -> list[tuple[float, str]]:
    """(mean AU over the epochs, "rank k on host") of every rank of a loader run."""
    out = []
    for r in ld.ranks or ():
        if not isinstance(r, RankBlock):
            continue
        epochs = r.epochs or ()
        aus = [e.au for e in epochs if isinstance(e, EpochBlock) and _is_num(e.au)]
        if aus:
            who = f"rank {r.rank}" + (f" on {r.host}" if r.host else "")
            out.append((sum(aus) / len(aus), who))
    return out


def _loader_points(run: RunResult) -> list[tuple[float, float]]:
    """Measured (GPUs, AU) pairs: the loader's own run plus any extra measured points."""
    ld = run.loader_block or LoaderBlock()
    pts: dict[float, float] = {}
    for pt in ld.points or ():
        if isinstance(pt, AuPoint) and _is_num(pt.gpus) and _is_num(pt.au):
            pts[float(pt.gpus)] = float(pt.au)
    if _is_num(ld.gpus) and _is_num(ld.au):
        pts.setdefault(float(ld.gpus), float(ld.au))
    return sorted((int(g) if g.is_integer() else g, a) for g, a in pts.items())


def _basis_text(basis: Any) -> str:
    if isinstance(basis, dict):
        parts = []
        for k, v in basis.items():
            if _is_num(v) and str(k).endswith("_bps"):
                v = format_rate(v)
            elif _is_num(v) and str(k).endswith("_s"):
                v = format_seconds(v)
            parts.append(f"{k}={v}")
        return ", ".join(parts)
    if isinstance(basis, (list, tuple)):
        return "; ".join(str(b) for b in basis)
    return str(basis) if basis is not None else "-"


def _estimate_tables(run: RunResult) -> list[Section]:
    est = run.estimate_block
    if est is None or est.empty:
        return []
    thr = est.threshold
    rows = []
    if est.profile:
        rows.append(["Profile", str(est.profile)])
    if _is_num(est.demand_bps_per_gpu):
        rows.append(["Demand per GPU", _rate(est.demand_bps_per_gpu)])
    if thr is not None:
        rows.append(["Threshold", f"AU >= {_pct(thr)}"])
    if est.max_gpus is not None:
        rows.append([f"Max GPUs at AU >= {_pct(thr)}", _max_gpus_text(est)])
    if isinstance(est.interval, IntervalBlock) and est.interval.basis:
        rows.append(["Interval", str(est.interval.basis)])
    for w in est.warnings or ():
        rows.append(["Warning", str(w)])
    rows.append(["Basis", _basis_text(est.basis)])
    note = "Predicted from the measured figures by the starvation model; see basis."
    out = [pairs("Estimate (model output, not measured)", rows, note)]
    if est.points:
        grid = Table.of(_au_columns(est), est.points)
        banded = any(_is_num(a.low) for a in est.points)
        note = "meets the threshold when the interval's low end does" if banded else ""
        out.append(Section("Estimated AU at N GPUs (model output)", grid, note))
    return out


def _meets(a: AuPoint, thr: float | None) -> str:
    """Whether a point meets the threshold: its conservative end decides, as in the verdict."""
    judged = a.low if _is_num(a.low) else a.au
    if _is_num(thr) and _is_num(judged):
        return "yes" if judged >= thr else "no"
    return "-"


def _au_columns(est: EstimateBlock) -> tuple[Column, ...]:
    """The estimated AU at each GPU count: the interval's column when a point has one."""
    level = _level(est)
    return (
        Column("GPUs", "r", get=lambda a: str(a.gpus if a.has("gpus") else "-")),
        Column("Estimated AU", "r", get=lambda a: _pct(a.au)),
        Column(f"{level:.0%} interval" if _is_num(level) else "Interval", "r",
               fmt=lambda a: f"{_pct(a.low)}–{_pct(a.high)}" if _is_num(a.low) else "-",
               shown=lambda points: any(_is_num(a.low) for a in points)),
        Column("Meets threshold", get=lambda a: _meets(a, est.threshold)),
    )  # fmt: skip


def _level(est: EstimateBlock) -> Any:
    """The interval's confidence level, as the file holds it (None without an interval)."""
    return est.interval.level if isinstance(est.interval, IntervalBlock) else None


def _max_gpus_text(est: EstimateBlock) -> str:
    """ "7 (5–9), 90% interval; the verdict uses 5" or the point alone (older results)."""
    point = est.max_gpus
    if not _is_num(est.max_gpus_low):
        return f"{point} (estimate)"
    lo, hi = est.max_gpus_low, est.max_gpus_high if est.has("max_gpus_high") else point
    level = _level(est)
    share = f"{level:.0%} interval" if _is_num(level) else "interval"
    return f"{point} ({lo}–{hi}) estimate, {share}; the verdict uses {lo}"


def _clients_text(run: RunResult) -> str | None:
    """``3 ranks on 1 host (torchrun)`` for a many-client run, else None."""
    world, hosts = run.clients()
    if world <= 1:
        return None
    return (
        f"{world} ranks on {hosts} host{'s' if hosts != 1 else ''} (torchrun): every phase "
        "is the aggregate, all bytes ÷ (last end − first start), clocks aligned to rank 0"
    )


def _rank_spread(p: PhaseResult) -> SpreadBlock:
    sp = p.extra_block.rank_spread
    return sp if isinstance(sp, SpreadBlock) else SpreadBlock()


def _by_bytes(p: PhaseResult) -> bool:
    sp = _rank_spread(p)
    return (sp.unit if sp.has("unit") else "bandwidth_bps") == "bandwidth_bps"


def _rank_figure(p: PhaseResult, v: Any) -> str:
    """A rate of a many-client phase in the unit of its ranks' spread."""
    if not _is_num(v) or not v:
        return "-"
    return _rate(v) if _by_bytes(p) else f"{format_count(v)} ops/s"


def _slowest(d: Any, what: str) -> str:
    if not isinstance(d, SpreadBlock) or d.slowest is None:
        return "-"
    ratio = d.max_over_min
    return f"{what}{d.slowest}" + (f" x{ratio:.2f}" if _is_num(ratio) else "")


def _many_hosts(phases: Sequence[PhaseResult]) -> bool:
    return any(int(p.extra_block.hosts or 1) > 1 for p in phases)


# Per-rank spread of a many-client phase: the aggregate, the stonewall figure (when the first
# rank finished) and the ranks' own rates, the slowest named (and the hosts' spread when there
# are several). A rank's or host's name is never cut.
RANK_COLUMNS = (
    _PHASE,
    Column("Ranks", "r", get=lambda p: str(p.extra_block.world if p.extra_block.has("world")
                                              else "-")),
    Column("Aggregate", "r",
           get=lambda p: _rank_figure(p, p.bandwidth_bps if _by_bytes(p) else p.iops)),
    Column("Stonewall", "r",
           get=lambda p: _rank_figure(p, p.bandwidth_stonewall_bps if _by_bytes(p) else None)),
    Column("Rank min", "r", get=lambda p: _rank_figure(p, _rank_spread(p).min)),
    Column("Rank max", "r", get=lambda p: _rank_figure(p, _rank_spread(p).max)),
    Column("Slowest", get=lambda p: _slowest(_rank_spread(p), "rank ")),
    Column("Slowest host", fmt=lambda p: _slowest(p.extra_block.host_spread, ""),
           shown=_many_hosts),
)  # fmt: skip


def _ranks_table(run: RunResult) -> Section | None:
    phases = _many_client_phases(run)
    if not phases:
        return None
    return Section(
        "Clients (per-rank spread)",
        Table.of(RANK_COLUMNS, phases),
        note="Aggregate: all ranks' bytes over the last end minus the first start; stonewall: "
        "what all ranks had moved when the first one finished, over that time; slowest: the "
        "rank with the lowest rate, x the fastest's over its.",
    )


def _run_info(run: RunResult) -> list[list[str]]:
    rows = [["Run", run.run_id]]
    wl = run.workload_block
    if wl.name:
        rows.append(["Workload", str(wl.name)])
    if run.command:
        rows.append(["Command", run.command])
    rows.append(["Target", _target_text(run.target_block)])
    clients = _clients_text(run)
    if clients:
        rows.append(["Clients", clients])
    host = _host_text(run.host_block)
    if host:
        rows.append(["Host", host])
    eng = run.engine_block
    if eng.name:
        rows.append(["Engine", " ".join(str(x) for x in (eng.name, eng.version) if x)])
    when = run.started_at or "-"
    if run.finished_at:
        when += f" -> {run.finished_at}"
        dur = _duration(run.started_at, run.finished_at)
        if dur is not None:
            when += f" ({format_seconds(dur)})"
    rows.append(["Time", when])
    rows.append(["iobench", str(run.iobench_version)])
    rows.append(["Status", run.status])
    return rows


def _target_text(t: TargetBlock) -> str:
    text = str(t.path_or_url or "-")
    parts = []
    if t.fs_type:
        fs = str(t.fs_type)
        if t.mount_point:
            fs += f" on {t.mount_point}"
        if t.mount_source:
            fs += f" ({t.mount_source})"
        parts.append(fs)
    object_store = t.object_store
    if t.has("direct_io") and not object_store:
        d = t.direct_io
        parts.append("O_DIRECT " + ("yes" if d is True else "no" if d is False else str(d)))
    if _is_num(t.free_bytes) and not object_store:
        parts.append(f"{format_bytes(t.free_bytes)} free")
    layout = t.layout or {}
    if layout:
        shown = ", ".join(
            f"{k} {v}" for k, v in layout.items() if k != "raw" and v not in (None, "")
        )
        if shown:
            parts.append(f"layout: {shown}")
    return text + (f"  [{', '.join(parts)}]" if parts else "")


def _host_text(h: HostBlock) -> str:
    parts = [str(h.hostname)] if h.hostname else []
    if h.cpus:
        parts.append(f"{h.cpus} CPUs")
    if _is_num(h.mem_bytes) and h.mem_bytes > 0:
        parts.append(f"{format_bytes(h.mem_bytes)} RAM")
    for got, label in ((h.os, ""), (h.python, "Python "), (h.torch, "torch "), (h.fio, "fio ")):
        if got:
            value = str(got)  # fio reports itself as "fio-3.33"
            parts.append(value if label and value.startswith(label.strip()) else label + value)
    return ", ".join(parts)


def _duration(a: str | None, b: str | None) -> float | None:
    if a is None or b is None:
        return None
    try:
        return (_dt.datetime.fromisoformat(b) - _dt.datetime.fromisoformat(a)).total_seconds()
    except (TypeError, ValueError):
        return None


def _verdict(run: RunResult) -> tuple[str, list[str]] | None:
    v = run.verdict_block
    if v is None or v.empty:
        return None
    result = str(v.judged or "").upper() or "UNKNOWN"
    return result, [str(r) for r in v.reasons or ()]


def _delta(base: float | None, cur: float | None) -> str:
    if not _is_num(base) or not _is_num(cur) or not base:
        return "-"
    return f"{(cur - base) / base * 100:+.1f}%"


def _headline(p: PhaseResult) -> tuple[str, float | None, Callable[[Any], str]]:
    """(metric, value, format) of a phase's headline figure: bandwidth, or ops/s without bytes."""
    if _value(p, "bandwidth_bps"):
        return "bandwidth_bps", _value(p, "bandwidth_bps"), _rate
    return "iops", _value(p, "iops"), lambda v: _count(v, " ops/s")


_BASELINE_COLUMNS = (
    Column("Phase"), Column("Rate", "r"), Column("Baseline", "r"), delta_column("Δ rate"),
    Column("p99", "r"), Column("Baseline p99", "r"), delta_column("Δ p99"),
)  # fmt: skip


def _baseline_table(run: RunResult, baseline: RunResult) -> Section:
    """The phases both runs measured, side by side: the headline rate and p99, each with its
    change against the baseline (the medians every table shows); what only one run has is
    named in the note."""
    base = {p.name: p for p in baseline.phases}
    rows = []
    for p in run.phases:
        b = base.get(p.name)
        if b is None:
            continue
        metric, cur, fmt = _headline(p)
        bval = _value(b, metric)
        p99, bp99 = _value(p, "latency_s.p99"), _value(b, "latency_s.p99")
        rows.append([p.name, fmt(cur), fmt(bval), _delta(bval, cur), _secs(p99), _secs(bp99),
                     _delta(bp99, p99)])  # fmt: skip
    names = {p.name for p in run.phases}
    only_run = [p.name for p in run.phases if p.name not in base]
    only_base = [n for n in base if n not in names]
    notes = [
        f"Baseline {baseline.run_id}. Δ: the change from the baseline's median; red where worse "
        "(less bandwidth or ops/s, more latency) on a colour terminal."
    ]
    if only_run:
        notes.append(f"Not in the baseline: {', '.join(only_run)}.")
    if only_base:
        notes.append(f"Only in the baseline: {', '.join(only_base)}.")
    title = f"Against baseline {baseline.run_id}"
    return Section(title, Table(_BASELINE_COLUMNS, rows), " ".join(notes))


def _sections(run: RunResult, baseline: RunResult | None = None) -> list[Section]:
    """The tables every rendering shows, in order: phases (and the baseline's deltas), ranks,
    metadata, loader, estimate, the loader during a checkpoint, the checkpoint."""
    sections: list[Section] = [_phase_table(run)] if run.phases else []
    if baseline is not None:
        sections.append(_baseline_table(run, baseline))
    sections += [t for t in (_ranks_table(run), _metadata_table(run), _loader_table(run)) if t]
    sections += _estimate_tables(run)
    return sections + during_tables(run.loader) + _checkpoint_tables(run)


def _checkpoint_tables(run: RunResult) -> list[Section]:
    """The checkpoint's measured figures and its estimate (checkpoint.rows), as label/value
    blocks."""
    return [pairs(t["title"], t["rows"], t["note"]) for t in ckpt_tables(run.checkpoint)]


_CACHE_COLUMNS = (Column("Cache"), Column("What it means"), Column("Phases"))


def _cache_table(run: RunResult) -> Section | None:
    """One row per cache mode met in the run (the Summary has each phase's): what it means
    and which phases ran under it ("all N phases" when every one did)."""
    by_mode: dict[str, list[str]] = {}
    for p in run.phases:
        by_mode.setdefault(p.cache or "-", []).append(p.name)
    ld = run.loader_block
    if ld is not None and ld.cache:
        by_mode.setdefault(str(ld.cache), []).append("data loader")
    if not by_mode:
        return None
    rows = []
    for mode, names in by_mode.items():
        every = len(by_mode) == 1 and len(names) > 1
        phases = f"all {len(names)}" if every else ", ".join(names)
        rows.append([mode, _CACHE_MEANING.get(mode, "-"), phases])
    return Section("Cache handling", Table(_CACHE_COLUMNS, rows))
