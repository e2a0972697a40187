"""Renderings of a RunResult: a terminal summary, markdown, and one self-contained HTML page.

Every figure shown was measured in the run, except the estimate block, which is labelled as a
model output beside its basis. The three renderings share one set of formatted tables, so the
terminal, the markdown and the page never disagree. Nothing here prints, and the HTML page
carries its CSS and its SVG plots inline: it opens offline and can be mailed as one file.
"""

from __future__ import annotations

import datetime as _dt
import html
import io
import math
import re
import textwrap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .ckpt_report import tables as ckpt_tables
from .results import PhaseResult, RunResult, atomic_write_bytes, metric_summary, metric_value
from .stats import DEFAULT_STEADY, MIN_PHASE_S, is_indicative
from .units import format_bytes, format_count, format_rate, format_seconds, format_spread

METADATA_OPS = ("create", "stat", "open_read", "delete")
TERMINAL_WIDTH = 120
PLOT_HINT = "plots need matplotlib (pip install iobench[plot])"
# Keys under PhaseResult.extra that may hold {operation: ops/s} for a combined metadata phase.
_EXTRA_RATE_KEYS = ("metadata_rates", "rates", "ops_per_s")
_CACHE_MEANING = {
    "direct": "O_DIRECT: the page cache was bypassed",
    "dropped": "page cache dropped before the phase",
    "buffered": "buffered I/O: figures may include page-cache hits",
    "client-cache": "page cache dropped, but the FUSE client's own cache could not be: "
    "figures may include client-memory hits",
    "none": "object store: no local page cache involved",
}
_STATUS_MARK = {"ok": "ok", "partial": "PARTIAL", "failed": "FAILED"}


# -- the shared, formatted content -------------------------------------------------------------


@dataclass
class _Table:
    """Formatted cells and how each column aligns ("l" or "r")."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    align: str
    kv: bool = False  # a two-column "label: value" block rather than a grid
    note: str = ""
    row_classes: list[str] = field(default_factory=list)


def _pct(x: Any) -> str:
    return "-" if not _is_num(x) else f"{float(x) * 100:.1f}%"


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _rate(x: Any) -> str:
    return format_rate(float(x)) if _is_num(x) and x > 0 else "-"


def _secs(x: Any) -> str:
    return format_seconds(float(x)) if _is_num(x) else "-"


def _count(x: Any, unit: str = "") -> str:
    return format_count(float(x), unit) if _is_num(x) and x > 0 else "-"


def _rate_range(lo: float, hi: float) -> str:
    """A min-max bandwidth range in one unit: ``140-200 MiB/s``."""
    if hi >= 10 * (1 << 30):
        return f"{lo / (1 << 30):.2f}-{hi / (1 << 30):.2f} GiB/s"
    return f"{lo / (1 << 20):.0f}-{hi / (1 << 20):.0f} MiB/s"


def _gpus(n: Any) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _block(n: Any) -> str:
    """Block sizes as people write them: 4 KiB, 128 KiB, 1 MiB (exact when whole)."""
    if not _is_num(n) or n <= 0:
        return "-"
    n = int(n)
    for shift, label in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {label}"
    return format_bytes(n)


def _block_short(n: float) -> str:
    """Axis label for a block size: 4k, 128k, 1M."""
    n = int(n)
    for shift, label in ((30, "G"), (20, "M"), (10, "k")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{label}"
    return str(n)


def _phase_warnings(run: RunResult) -> list[str]:
    out = list(run.warnings)
    for p in run.phases:
        out.extend(f"{p.name}: {w}" for w in p.warnings or [])
    return out


def _errors(run: RunResult) -> list[str]:
    out = [f"run: {run.error}"] if run.error else []
    out.extend(f"{p.name}: {p.error}" for p in run.phases if p.error)
    return out


def metadata_rates(phase: PhaseResult) -> dict[str, float]:
    """{operation: ops/s} a phase measured for metadata operations (create, stat, ...)."""
    rates: dict[str, float] = {}
    if phase.op in METADATA_OPS and _is_num(phase.iops) and phase.iops > 0:
        rates[phase.op] = float(phase.iops)
    for key in _EXTRA_RATE_KEYS:
        value = (phase.extra or {}).get(key)
        if isinstance(value, dict):
            for op, r in value.items():
                if _is_num(r):
                    rates[str(op)] = float(r)
    return rates


def _value(p: PhaseResult, key: str) -> float | None:
    """A phase figure as every rendering shows it: the median over the repeats."""
    return metric_value(p, key)


def _has_repeats(run: RunResult) -> bool:
    return any(len(p.repeats or []) > 1 for p in run.phases)


def _repeat_spread(p: PhaseResult) -> str:
    """n, min-max and CV over the repeats of the phase's headline figure (bandwidth, or
    ops/s where it moved no bytes)."""
    if _value(p, "bandwidth_bps"):
        s = metric_summary(p, "bandwidth_bps")
        return format_spread(s.n, s.min, s.max, s.cv, format_rate, span=_rate_range)
    s = metric_summary(p, "iops")
    return "-" if s is None else format_spread(s.n, s.min, s.max, s.cv, format_count)


_SPREAD_HEADER = "Over repeats"
_SPREAD_NOTE = (
    "Figures are medians over the repeats; 'Over repeats' gives n, min-max and the coefficient "
    "of variation of the bandwidth (ops/s where no bytes moved). Volume, time, worker spread and "
    "the plots come from one repeat: the one whose bandwidth is the median."
)


def _has_cpu(run: RunResult) -> bool:
    return any(isinstance((p.extra or {}).get("client_cpu"), dict) for p in run.phases)


def _cpu_cell(p: PhaseResult) -> str:
    """The client's CPU over the phase as a share of its usable CPUs, "!" at saturation."""
    from .cpu import saturated

    c = (p.extra or {}).get("client_cpu")
    if not isinstance(c, dict) or not _is_num(c.get("share")):
        return "-"
    return f"{c['share'] * 100:.0f}%" + (" !" if saturated(c) else "")


def _cpu_note(run: RunResult) -> str:
    """The phases table's note on the client CPU column (empty without the column)."""
    if not _has_cpu(run):
        return ""
    from .cpu import SATURATED_SHARE, saturated

    cpus = {
        c.get("cpus")
        for p in run.phases
        if isinstance(c := (p.extra or {}).get("client_cpu"), dict)
    }
    of = f"{cpus.pop()} CPUs" if len(cpus) == 1 else "its CPUs"
    note = (
        f"Client CPU: user + system time of iobench and the processes it started, over the "
        f"phase's wall time and the {of} it could use."
    )
    if _many_client_phases(run):
        note += " In a many-client phase it is rank 0's (its own process and children)."
    hot = [p.name for p in run.phases if saturated((p.extra or {}).get("client_cpu"))]
    if hot:
        note += (
            f" {', '.join(hot)}: the client used {SATURATED_SHARE:.0%} or more (!): the client, "
            "not the storage, may have been the limit."
        )
    return note


def _status_cell(p: PhaseResult) -> str:
    """A phase's status; "indicative" for a complete phase whose figures are (stats)."""
    if p.status == "ok" and is_indicative(p):
        return "indicative"
    return _STATUS_MARK.get(p.status, p.status.upper())


def _indicative_note(run: RunResult) -> str:
    """The phases table's note on "indicative" (empty when no phase is)."""
    if not any(p.status == "ok" and is_indicative(p) for p in run.phases):
        return ""
    return (
        f"indicative: the phase did not reach steady state ({DEFAULT_STEADY.describe()}, "
        f"fio's steadystate manner) or ran under {MIN_PHASE_S:g} s, or its ranks started too far "
        "apart: its figures show the order of magnitude, not a figure to rely on."
    )


def _phase_table(run: RunResult) -> _Table:
    headers = [
        "Phase",
        "Op",
        "Jobs",
        "Block",
        "Bandwidth",
        "Ops/s",
        "p50",
        "p99",
        "Cache",
        "Status",
    ]
    spread = _has_repeats(run)
    cpu = _has_cpu(run)
    if cpu:
        headers.insert(-2, "CPU")  # the client's; the note says so (the table fits 120 columns)
    if spread:
        headers.insert(6, _SPREAD_HEADER)
    rows, classes = [], []
    for p in run.phases:
        ops = _count(_value(p, "iops"))
        if p.op in METADATA_OPS and ops != "-":
            ops += " ops/s"
        row = [
            p.name,
            p.op,
            str(p.concurrency),
            _block(p.block_size),
            _rate(_value(p, "bandwidth_bps")),
            ops,
            _secs(_value(p, "latency_s.p50")),
            _secs(_value(p, "latency_s.p99")),
            p.cache or "-",
            _status_cell(p),
        ]
        if cpu:
            row.insert(-2, _cpu_cell(p))
        if spread:
            row.insert(6, _repeat_spread(p))
        rows.append(row)
        classes.append("" if p.status == "ok" else "bad")
    align = ("llrrrrrrr" if spread else "llrrrrrr") + ("r" if cpu else "") + "ll"
    notes = (_SPREAD_NOTE if spread else "", _cpu_note(run), _indicative_note(run))
    note = " ".join(n for n in notes if n)
    return _Table("Phases", headers, rows, align, note=note, row_classes=classes)


def _phase_detail_table(run: RunResult) -> _Table:
    """The wider HTML table: adds volume, time, first-done bandwidth, spread and tail latency."""
    headers = [
        "Phase",
        "Op",
        "Jobs",
        "Block",
        "Moved",
        "Elapsed",
        "Bandwidth",
        "First done",
        "Worker spread",
        "Ops/s",
        "p50",
        "p99",
        "p99.9",
        "Cache",
        "Status",
    ]
    repeated = _has_repeats(run)
    cpu = _has_cpu(run)
    if cpu:
        headers.insert(-2, "Client CPU")
    if repeated:
        headers.insert(7, _SPREAD_HEADER)
    rows, classes = [], []
    for p in run.phases:
        pw = p.per_worker or {}
        spread = "-"
        if _is_num(pw.get("min")) and _is_num(pw.get("max")) and pw["max"] > 0:
            spread = _rate_range(pw["min"], pw["max"])
        moved = format_bytes(p.bytes) if p.bytes else (f"{p.ops:,} ops" if p.ops else "-")
        ops = _count(_value(p, "iops"))
        row = [
            p.name,
            p.op,
            str(p.concurrency),
            _block(p.block_size),
            moved,
            _secs(p.elapsed_s) if p.elapsed_s else "-",
            _rate(_value(p, "bandwidth_bps")),
            _rate(_value(p, "bandwidth_stonewall_bps")),
            spread,
            ops,
            _secs(_value(p, "latency_s.p50")),
            _secs(_value(p, "latency_s.p99")),
            _secs(_value(p, "latency_s.p999")),
            p.cache or "-",
            _status_cell(p),
        ]
        if cpu:
            row.insert(-2, _cpu_cell(p))
        if repeated:
            row.insert(7, _repeat_spread(p))
        rows.append(row)
        classes.append("" if p.status == "ok" else "bad")
    align = ("llrrrrrrrrrrrr" if repeated else "llrrrrrrrrrrr") + ("r" if cpu else "") + "ll"
    # the indicative note follows the table in HTML
    note = " ".join(n for n in (_SPREAD_NOTE if repeated else "", _cpu_note(run)) if n)
    return _Table("Phases", headers, rows, align, note=note, row_classes=classes)


def _metadata_table(run: RunResult) -> _Table | None:
    rows = []
    for p in run.phases:
        rates = metadata_rates(p)
        for op, r in rates.items():
            lat = (p.latency_s or {}) if op == p.op else {}
            rows.append([p.name, op, f"{format_count(r)} ops/s", _secs(lat.get("p99"))])
    if not rows:
        return None
    return _Table("Metadata operations", ["Phase", "Operation", "Rate", "p99"], rows, "llrr")


def _loader_table(run: RunResult) -> _Table | None:
    ld = run.loader
    if not ld:
        return None
    config = []
    if ld.get("profile"):
        config.append(f"profile {ld['profile']}")
    for key, label in (("gpus", "GPUs"), ("workers", "workers"), ("steps", "steps")):
        if ld.get(key) is not None:
            config.append(f"{ld[key]} {label}")
    if ld.get("batch_size") is not None:
        config.append(f"batch {ld['batch_size']}")
    if ld.get("hosts"):
        config.append(f"one rank per GPU on {ld['hosts']} host{'s' if ld['hosts'] != 1 else ''}")
    au = _pct(ld.get("au"))
    if _is_num(ld.get("predicted_au")):
        au += f"   (model predicted {_pct(ld['predicted_au'])})"
    rows = [["Configuration", ", ".join(config) or "-"], ["AU measured", au]]
    if ld.get("samples_per_s") is not None:
        rows.append(["Samples/s", _count(ld.get("samples_per_s"))])
    if ld.get("bytes_per_s") is not None:
        rows.append(["Throughput", _rate(ld.get("bytes_per_s"))])
    wait = ld.get("load_wait_s") or {}
    if wait:
        rows.append(["Load wait", f"mean {_secs(wait.get('mean'))}, p99 {_secs(wait.get('p99'))}"])
    if ld.get("compute_s") is not None:
        rows.append(["Compute per step", _secs(ld.get("compute_s"))])
    if ld.get("bound"):
        rows.append(["Bound by", str(ld["bound"])])
    epochs = ld.get("au_per_epoch") or []
    if epochs:
        rows.append(["AU per epoch", ", ".join(_pct(a) for a in epochs)])
    per_rank = _loader_rank_au(ld)
    if len(per_rank) > 1:
        (lo, lo_who), (hi, hi_who) = min(per_rank), max(per_rank)
        rows.append(["AU per rank", f"min {_pct(lo)} ({lo_who}), max {_pct(hi)} ({hi_who})"])
    points = _loader_points(run)
    if len(points) > 1:
        rows.append(["Measured points", ", ".join(f"{_gpus(g)}: {_pct(a)}" for g, a in points)])
    if ld.get("cache"):
        rows.append(["Cache", str(ld["cache"])])
    c = ld.get("client_cpu")
    if isinstance(c, dict) and _is_num(c.get("share")):
        from .cpu import saturated

        text = f"{c['share'] * 100:.0f}% of {c.get('cpus', '?')} CPUs over the loop"
        if saturated(c):
            text += ": the client, not the storage, may have been the limit"
        rows.append(["Client CPU", text])
    return _Table("Data loader (measured)", ["", ""], rows, "ll", kv=True)


def _loader_rank_au(ld: dict[str, Any]) -> list[tuple[float, str]]:
    """(mean AU over the epochs, "rank k on host") of every rank of a loader run."""
    out = []
    for r in ld.get("ranks") or []:
        aus = [e["au"] for e in r.get("epochs") or [] if _is_num(e.get("au"))]
        if aus:
            who = f"rank {r.get('rank')}" + (f" on {r['host']}" if r.get("host") else "")
            out.append((sum(aus) / len(aus), who))
    return out


def _loader_points(run: RunResult) -> list[tuple[float, float]]:
    """Measured (GPUs, AU) pairs: the loader's own run plus any extra measured points."""
    ld = run.loader or {}
    pts: dict[float, float] = {}
    for pt in ld.get("points") or []:
        if isinstance(pt, dict) and _is_num(pt.get("gpus")) and _is_num(pt.get("au")):
            pts[float(pt["gpus"])] = float(pt["au"])
    if _is_num(ld.get("gpus")) and _is_num(ld.get("au")):
        pts.setdefault(float(ld["gpus"]), float(ld["au"]))
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


def _estimate_tables(run: RunResult) -> list[_Table]:
    est = run.estimate
    if not est:
        return []
    thr = est.get("threshold")
    rows = []
    if est.get("profile"):
        rows.append(["Profile", str(est["profile"])])
    if _is_num(est.get("demand_bps_per_gpu")):
        rows.append(["Demand per GPU", _rate(est["demand_bps_per_gpu"])])
    if thr is not None:
        rows.append(["Threshold", f"AU >= {_pct(thr)}"])
    if est.get("max_gpus") is not None:
        rows.append([f"Max GPUs at AU >= {_pct(thr)}", _max_gpus_text(est)])
    interval = est.get("interval") or {}
    if interval.get("basis"):
        rows.append(["Interval", str(interval["basis"])])
    for w in est.get("warnings") or []:
        rows.append(["Warning", str(w)])
    rows.append(["Basis", _basis_text(est.get("basis"))])
    out = [
        _Table(
            "Estimate (model output, not measured)",
            ["", ""],
            rows,
            "ll",
            kv=True,
            note="Predicted from the measured figures by the starvation model; see basis.",
        )
    ]
    au_at = [a for a in est.get("au_at") or [] if isinstance(a, dict)]
    if au_at:
        banded = any(_is_num(a.get("low")) for a in au_at)
        grid = []
        for a in au_at:
            ok = "-"
            # the conservative end decides, as in the verdict
            judged = a.get("low") if _is_num(a.get("low")) else a.get("au")
            if _is_num(thr) and _is_num(judged):
                ok = "yes" if judged >= thr else "no"
            row = [str(a.get("gpus", "-")), _pct(a.get("au"))]
            if banded:
                row.append(
                    f"{_pct(a.get('low'))}–{_pct(a.get('high'))}" if _is_num(a.get("low")) else "-"
                )
            grid.append([*row, ok])
        level = (est.get("interval") or {}).get("level")
        headers = ["GPUs", "Estimated AU"]
        if banded:
            headers.append(f"{level:.0%} interval" if _is_num(level) else "Interval")
        out.append(
            _Table(
                "Estimated AU at N GPUs (model output)",
                [*headers, "Meets threshold"],
                grid,
                "rrrl" if banded else "rrl",
                note="meets the threshold when the interval's low end does" if banded else "",
            )
        )
    return out


def _max_gpus_text(est: dict[str, Any]) -> str:
    """ "7 (5–9), 90% interval; the verdict uses 5" or the point alone (older results)."""
    point = est.get("max_gpus")
    if not _is_num(est.get("max_gpus_low")):
        return f"{point} (estimate)"
    lo, hi = est["max_gpus_low"], est.get("max_gpus_high", point)
    level = (est.get("interval") or {}).get("level")
    share = f"{level:.0%} interval" if _is_num(level) else "interval"
    return f"{point} ({lo}–{hi}) estimate, {share}; the verdict uses {lo}"


def _many_client_phases(run: RunResult) -> list[PhaseResult]:
    return [p for p in run.phases if int((p.extra or {}).get("world") or 1) > 1]


def _clients_text(run: RunResult) -> str | None:
    """``3 ranks on 1 host (torchrun)`` for a many-client run, else None."""
    world, hosts = run.clients()
    if world <= 1:
        return None
    return (
        f"{world} ranks on {hosts} host{'s' if hosts != 1 else ''} (torchrun): every phase "
        "is the aggregate, all bytes ÷ (last end − first start), clocks aligned to rank 0"
    )


def _ranks_table(run: RunResult) -> _Table | None:
    """Per-rank spread of every many-client phase: the aggregate, the stonewall figure (when
    the first rank finished) and the ranks' own rates, the slowest named (and the hosts'
    spread when there are several)."""
    phases = _many_client_phases(run)
    if not phases:
        return None
    many_hosts = any(int(p.extra.get("hosts") or 1) > 1 for p in phases)
    rows = []
    for p in phases:
        sp = p.extra.get("rank_spread") or {}
        by_bytes = sp.get("unit", "bandwidth_bps") == "bandwidth_bps"

        def fmt(v: Any, by_bytes: bool = by_bytes) -> str:
            if not _is_num(v) or not v:
                return "-"
            return _rate(v) if by_bytes else f"{format_count(v)} ops/s"

        def slowest(d: dict[str, Any], what: str) -> str:
            if d.get("slowest") is None:
                return "-"
            ratio = d.get("max_over_min")
            return f"{what}{d['slowest']}" + (f" x{ratio:.2f}" if _is_num(ratio) else "")

        row = [
            p.name,
            str(p.extra.get("world", "-")),
            fmt(p.bandwidth_bps if by_bytes else p.iops),
            fmt(p.bandwidth_stonewall_bps if by_bytes else None),
            fmt(sp.get("min")),
            fmt(sp.get("max")),
            slowest(sp, "rank "),
        ]
        if many_hosts:
            row.append(slowest(p.extra.get("host_spread") or {}, ""))
        rows.append(row)
    headers = ["Phase", "Ranks", "Aggregate", "Stonewall", "Rank min", "Rank max", "Slowest"]
    if many_hosts:
        headers.append("Slowest host")
    return _Table(
        "Clients (per-rank spread)",
        headers,
        rows,
        "lrrrrrl" + ("l" if many_hosts else ""),
        note="Aggregate: all ranks' bytes over the last end minus the first start; stonewall: "
        "what all ranks had moved when the first one finished, over that time; slowest: the "
        "rank with the lowest rate, x the fastest's over its.",
    )


def _run_info(run: RunResult) -> list[list[str]]:
    rows = [["Run", run.run_id]]
    wl = run.workload or {}
    if wl.get("name"):
        rows.append(["Workload", str(wl["name"])])
    if run.command:
        rows.append(["Command", run.command])
    rows.append(["Target", _target_text(run.target or {})])
    clients = _clients_text(run)
    if clients:
        rows.append(["Clients", clients])
    host = _host_text(run.host or {})
    if host:
        rows.append(["Host", host])
    eng = run.engine or {}
    if eng.get("name"):
        rows.append(["Engine", " ".join(str(x) for x in (eng["name"], eng.get("version")) if x)])
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


def _target_text(t: dict[str, Any]) -> str:
    text = str(t.get("path_or_url") or "-")
    parts = []
    if t.get("fs_type"):
        fs = str(t["fs_type"])
        if t.get("mount_point"):
            fs += f" on {t['mount_point']}"
        if t.get("mount_source"):
            fs += f" ({t['mount_source']})"
        parts.append(fs)
    object_store = t.get("kind") == "fsspec" or t.get("fs_class") == "object"
    if "direct_io" in t and not object_store:
        d = t["direct_io"]
        parts.append("O_DIRECT " + ("yes" if d is True else "no" if d is False else str(d)))
    if _is_num(t.get("free_bytes")) and not object_store:
        parts.append(f"{format_bytes(t['free_bytes'])} free")
    layout = t.get("layout") or {}
    if layout:
        shown = ", ".join(
            f"{k} {v}" for k, v in layout.items() if k != "raw" and v not in (None, "")
        )
        if shown:
            parts.append(f"layout: {shown}")
    return text + (f"  [{', '.join(parts)}]" if parts else "")


def _host_text(h: dict[str, Any]) -> str:
    parts = [str(h["hostname"])] if h.get("hostname") else []
    if h.get("cpus"):
        parts.append(f"{h['cpus']} CPUs")
    if _is_num(h.get("mem_bytes")) and h["mem_bytes"] > 0:
        parts.append(f"{format_bytes(h['mem_bytes'])} RAM")
    for key, label in (("os", ""), ("python", "Python "), ("torch", "torch "), ("fio", "fio ")):
        if h.get(key):
            value = str(h[key])  # fio reports itself as "fio-3.33"
            parts.append(value if label and value.startswith(label.strip()) else label + value)
    return ", ".join(parts)


def _duration(a: str | None, b: str | None) -> float | None:
    try:
        return (_dt.datetime.fromisoformat(b) - _dt.datetime.fromisoformat(a)).total_seconds()
    except (TypeError, ValueError):
        return None


def _verdict(run: RunResult) -> tuple[str, list[str]] | None:
    v = run.verdict
    if not v:
        return None
    result = str(v.get("result", "")).upper() or "UNKNOWN"
    return result, [str(r) for r in v.get("reasons") or []]


# -- terminal ----------------------------------------------------------------------------------

MIN_TERMINAL_WIDTH = 40  # narrower terminals get 40-column lines (wrapped by the terminal)
# Styles of the coloured terminal (rich style names); plain output carries none of them.
_STATUS_STYLE = {
    "ok": "green",
    "indicative": "yellow",
    "PARTIAL": "bold red",
    "FAILED": "bold red",
    "PASS": "bold green",
    "FAIL": "bold red",
}


def terminal_format(
    isatty: bool, environ: dict[str, str], tty_columns: int | None
) -> tuple[int, bool]:
    """(width, colour) for stdout: ``COLUMNS`` when set, else the terminal's own width when
    stdout is one, else the fixed :data:`TERMINAL_WIDTH` (pipes and files get stable text);
    never under :data:`MIN_TERMINAL_WIDTH`. Colour only on a terminal, never with ``NO_COLOR``
    set (any value, no-color.org) or ``TERM=dumb``."""
    width = TERMINAL_WIDTH
    cols = str(environ.get("COLUMNS", "")).strip()
    if cols.isdigit() and int(cols) > 0:
        width = int(cols)
    elif isatty and tty_columns and tty_columns > 0:
        width = tty_columns
    colour = isatty and not environ.get("NO_COLOR") and environ.get("TERM") != "dumb"
    return max(width, MIN_TERMINAL_WIDTH), colour


def stdout_format() -> tuple[int, bool]:
    """:func:`terminal_format` of this process's stdout."""
    import os
    import sys

    try:
        isatty = sys.stdout is not None and sys.stdout.isatty()
        cols = os.get_terminal_size(sys.stdout.fileno()).columns if isatty else None
    except (OSError, ValueError, AttributeError):
        isatty, cols = False, None
    return terminal_format(isatty, dict(os.environ), cols)


# compare's table: a line's first characters -> its style (the marks of iobench.compare)
_COMPARE_STYLES = (
    ("+  ", "red"),  # MARK_WORSE
    ("-  ", "green"),  # MARK_BETTER
    ("regression:", "bold red"),
    ("not comparable", "yellow"),
    ("warning:", "yellow"),
)


def colour_compare(text: str) -> str:
    """``iobench compare``'s table with regressions red, improvements green and warnings
    yellow (ANSI SGR codes). The text is masked and escaped first (for_terminal), so the only
    escape sequences in the result are the colour codes."""
    out = []
    for line in _clean(text).split("\n"):
        style = next((st for start, st in _COMPARE_STYLES if line.startswith(start)), "")
        out.append(f"\x1b[{_SGR[style]}m{line}\x1b[0m" if style and line else line)
    return "\n".join(out)


_SGR = {"red": "31", "green": "32", "yellow": "33", "bold red": "1;31"}


def _clean(text: Any) -> str:
    """Cell text as the terminal shows it (iobench.redact) before it is measured and cut."""
    from .redact import for_terminal

    return for_terminal(text)


def _cut(c: str, w: int, middle: bool = False) -> str:
    """``c`` in ``w`` characters; ``middle`` cuts there instead of at the end, for names that
    differ at their ends (``loader-dataset-shuffled-r1`` and ``-r8`` stay apart)."""
    if len(c) <= w:
        return c
    keep = max(w - 3, 1)
    if not middle:
        return c[:keep] + "..."
    head = (keep + 1) // 2
    return c[:head] + "..." + (c[-(keep - head) :] if keep > head else "")


def _fit(cells: list[str], widths: list[int]) -> list[str]:
    return [_cut(c, w, middle=True) for c, w in zip(cells, widths, strict=True)]


def _styled(text: str, style: str = "") -> Any:
    from rich.text import Text

    return Text(text, style=style or "", no_wrap=True, end="")


def _cell_style(t: _Table, col: int, cell: str) -> str:
    if cell.endswith(" !"):  # the client CPU at saturation
        return "bold red"
    if col == len(t.headers) - 1 and t.title == "Phases":
        return _STATUS_STYLE.get(cell.strip(), "")
    if t.headers[col].startswith("Δ") and _is_delta(cell):
        return _delta_style(t.headers[col], cell.strip())
    return ""


def _is_delta(cell: str) -> bool:
    return bool(re.fullmatch(r"[+-]\d+(\.\d+)?%", cell.strip())) and cell.strip() not in (
        "+0.0%",
        "-0.0%",
    )


def _delta_style(header: str, cell: str) -> str:
    """A change against the baseline: red when worse (less bandwidth, ops/s; more latency)."""
    lower_is_better = "p50" in header or "p99" in header
    worse = cell.startswith("+") == lower_is_better
    return "red" if worse else "green"


def _terminal_grid(t: _Table, indent: int = 2, width: int = TERMINAL_WIDTH) -> list[Any]:
    n = len(t.headers)
    headers = [_clean(h) for h in t.headers]
    rows = [[_clean(c) for c in r] for r in t.rows]
    widths = [max([len(headers[i])] + [len(r[i]) for r in rows]) for i in range(n)]
    excess = indent + sum(widths) + 2 * (n - 1) - width
    # Shrink the widest left-aligned columns (names) first, a name to no fewer than 16
    # characters, other text to 8; numbers and the status keep their width.
    floors = [16 if i == 0 else 8 for i in range(n)]
    while excess > 0:
        text_cols = [i for i in range(n - 1) if t.align[i] == "l" and widths[i] > floors[i]]
        if not text_cols:
            break
        i = max(text_cols, key=lambda j: widths[j])
        cut = min(excess, widths[i] - floors[i])
        widths[i] -= cut
        excess -= cut
    if excess > 0:  # a narrow terminal: one block per row rather than columns of "..."
        return _terminal_records(headers, rows, t, indent, width)
    pad = " " * indent
    from rich.text import Text

    def line(cells: list[str], style: bool = True) -> Any:
        cells = _fit(cells, widths)
        out = Text(pad, no_wrap=True, end="")
        for j, (c, w, a) in enumerate(zip(cells, widths, t.align, strict=True)):
            if j:
                out.append("  ")
            text = c.rjust(w) if a == "r" else c.ljust(w)
            out.append(text, style=(_cell_style(t, j, c) or None) if style else "bold")
        out.rstrip()
        out.truncate(width)
        return out

    out = [line(headers, style=False), _styled(pad + "  ".join("-" * w for w in widths))]
    out.extend(line(r) for r in rows)
    return out


def _terminal_records(
    headers: list[str], rows: list[list[str]], t: _Table, indent: int, width: int
) -> list[Any]:
    """A grid too wide for the terminal: each row's first cell, then its "Header value"
    pairs filled under it, a pair never split (a pair wider than the line is cut)."""
    out = []
    for r in rows:
        head = _styled(" " * indent)
        head.append(_cut(r[0], width - indent), style="bold")
        out.append(head)
        pairs = [f"{h} {c}" for h, c in zip(headers[1:], r[1:], strict=True) if c.strip()]
        line = ""
        for pair in pairs:  # a pair is never split across lines
            joined = f"{line}, {pair}" if line else " " * (indent + 2) + pair
            if line and len(joined) + 1 > width:  # room for the comma
                out.append(_styled(line + ","))
                joined = " " * (indent + 2) + pair
            line = joined
        if line:
            out.append(_styled(line))
    return out


def _terminal_kv(t: _Table, indent: int = 2, width: int = TERMINAL_WIDTH) -> list[Any]:
    label_w = min(max(len(_clean(r[0])) for r in t.rows), max(width // 3, 8))
    out = []
    for label, value in t.rows:
        first = " " * indent + _cut(_clean(label), label_w).ljust(label_w) + "  "
        lines = textwrap.wrap(
            _clean(value),  # masked before wrapping: a URL cut in two is no longer one
            width=width,
            initial_indent=first,
            subsequent_indent=" " * len(first),
            break_on_hyphens=False,
        ) or [first.rstrip()]
        out.extend(_styled(ln) for ln in lines)
    return out


def _bullets(items: Iterable[str], width: int = TERMINAL_WIDTH) -> list[Any]:
    out = []
    for item in items:
        out.extend(
            _styled(ln)
            for ln in textwrap.wrap(
                _clean(item), width=width, initial_indent="  - ", subsequent_indent="    "
            )
        )
    return out


def _delta(base: float | None, cur: float | None) -> str:
    if not _is_num(base) or not _is_num(cur) or not base:
        return "-"
    return f"{(cur - base) / base * 100:+.1f}%"


def _headline(p: PhaseResult) -> tuple[str, float | None, Callable[[Any], str]]:
    """(metric, value, format) of a phase's headline figure: bandwidth, or ops/s without bytes."""
    if _value(p, "bandwidth_bps"):
        return "bandwidth_bps", _value(p, "bandwidth_bps"), _rate
    return "iops", _value(p, "iops"), lambda v: _count(v, " ops/s")


def _baseline_table(run: RunResult, baseline: RunResult) -> _Table:
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
        rows.append(
            [
                p.name,
                fmt(cur),
                fmt(bval),
                _delta(bval, cur),
                _secs(p99),
                _secs(bp99),
                _delta(bp99, p99),
            ]
        )
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
    return _Table(
        f"Against baseline {baseline.run_id}",
        ["Phase", "Rate", "Baseline", "Δ rate", "p99", "Baseline p99", "Δ p99"],
        rows,
        "lrrrrrr",
        note=" ".join(notes),
    )


def _sections(run: RunResult, baseline: RunResult | None = None) -> list[_Table]:
    """The tables every rendering shows, in order: phases (and the baseline's deltas),
    metadata, loader, estimate."""
    sections: list[_Table] = [_phase_table(run)] if run.phases else []
    if baseline is not None:
        sections.append(_baseline_table(run, baseline))
    sections += [t for t in (_ranks_table(run), _metadata_table(run), _loader_table(run)) if t]
    return sections + _estimate_tables(run) + [_Table(**t) for t in ckpt_tables(run.checkpoint)]


def render_terminal(
    run: RunResult,
    width: int = TERMINAL_WIDTH,
    colour: bool = False,
    baseline: RunResult | None = None,
) -> str:
    """The summary printed after a run, rendered through rich: lines of at most ``width``
    columns; with ``colour``, statuses, the verdict and changes against a baseline in colour
    (ANSI SGR codes only). Every text from the run is masked and escaped
    (:func:`iobench.redact.for_terminal`) before it is laid out, so the widths hold."""
    width = max(int(width), MIN_TERMINAL_WIDTH)
    lines: list[Any] = [
        _styled(
            _cut(_clean(f"iobench {run.iobench_version} - run {run.run_id} - {run.status}"), width),
            "bold",
        )
    ]
    info = _Table("", ["", ""], _run_info(run)[1:], "ll", kv=True)
    lines += _terminal_kv(info, width=width)
    for t in _sections(run, baseline):
        lines += [_styled(""), _styled(_cut(_clean(t.title), width), "bold")]
        lines += _terminal_kv(t, width=width) if t.kv else _terminal_grid(t, width=width)
        if t.note:
            lines += [
                _styled(ln, "dim")
                for ln in textwrap.wrap(
                    _clean(t.note), width, initial_indent="  ", subsequent_indent="  "
                )
            ]
    verdict = _verdict(run)
    if verdict:
        head = _styled("Verdict: ")
        head.append(_clean(verdict[0]), style=_STATUS_STYLE.get(verdict[0], "bold yellow"))
        lines += [_styled(""), head]
        lines += _bullets(verdict[1], width)
    errors = _errors(run)
    if errors:
        lines += [_styled(""), _styled(f"Errors ({len(errors)})", "bold red")]
        lines += _bullets(errors, width)
    warnings = _phase_warnings(run)
    if warnings:
        lines += [_styled(""), _styled(f"Warnings ({len(warnings)})", "bold yellow")]
        lines += _bullets(warnings, width)
    for ln in lines:
        ln.truncate(width)
    if not colour:
        return "\n".join(ln.plain for ln in lines) + "\n"
    from rich.console import Console

    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        force_terminal=True,
        color_system="standard",
        no_color=False,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
        soft_wrap=True,
    )
    for ln in lines:
        console.print(ln)
    return buf.getvalue()


# -- markdown ----------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _md_table(t: _Table) -> list[str]:
    headers = ["Item", "Value"] if t.kv else t.headers
    align = {"l": "---", "r": "---:"}
    out = [
        "| " + " | ".join(_md_cell(h) for h in headers) + " |",
        "|" + "|".join(align[a] for a in t.align) + "|",
    ]
    out.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows)
    return out


def render_markdown(run: RunResult, baseline: RunResult | None = None) -> str:
    """The same content as markdown tables, for pasting into a qualification report."""
    out = [f"# iobench report: run `{run.run_id}`", ""]
    verdict = _verdict(run)
    if verdict:
        out.append(f"**Verdict: {verdict[0]}**")
        out += [""] + [f"- {_md_cell(r)}" for r in verdict[1]] + [""]
    out += _md_table(_Table("", ["", ""], _run_info(run), "ll", kv=True))
    sections = _sections(run, baseline)
    for t in sections:
        out += ["", f"## {t.title}", ""]
        if t.note:
            out += [f"_{t.note}_", ""]
        out += _md_table(t)
    errors = _errors(run)
    if errors:
        out += ["", "## Errors", ""] + [f"- {_md_cell(e)}" for e in errors]
    warnings = _phase_warnings(run)
    if warnings:
        out += ["", "## Warnings", ""] + [f"- {_md_cell(w)}" for w in warnings]
    return "\n".join(out) + "\n"


# -- plots -------------------------------------------------------------------------------------


@dataclass
class _Plot:
    title: str
    svg: str
    caption: str = ""


_RC = {
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.titleweight": "bold",
    "axes.labelsize": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.color": "#d8dee4",
    "grid.linewidth": 0.6,
    "axes.edgecolor": "#8c959f",
    "axes.prop_cycle": None,  # filled in by _rc()
    "legend.fontsize": 8,
    "legend.frameon": False,
    "svg.fonttype": "path",  # glyphs as paths: no font files needed by the viewer
    "figure.dpi": 100,
}
_COLOURS = [
    "#0969da",
    "#cf222e",
    "#1a7f37",
    "#8250df",
    "#bc4c00",
    "#1b7c83",
    "#bf3989",
    "#4d2d00",
    "#6e7781",
    "#9a6700",
]
# One size for every figure (constrained layout, no tight bbox), so all render at one text scale.
_FIGSIZE = (6.4, 3.4)
_PER_FIGURE = 8  # lines per figure before a group is split, so legends stay readable


def _rc() -> dict[str, Any]:
    from matplotlib import cycler  # matplotlib re-exports its own dependency

    rc = dict(_RC)
    rc["axes.prop_cycle"] = cycler(color=_COLOURS)
    return rc


def _svg(fig: Any, salt: str) -> str:
    """An SVG fragment for inline use: no XML prolog, doctype or metadata block."""
    import matplotlib

    buf = io.StringIO()
    # A distinct salt per figure keeps clip-path and marker ids unique across inline SVGs.
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.find("<svg") :]
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S).strip()


def _chunks(items: Sequence[Any], n: int = _PER_FIGURE) -> list[Sequence[Any]]:
    return [items[i : i + n] for i in range(0, len(items), n)] or [items]


def sweep_series(phases: Sequence[PhaseResult], axis: str) -> dict[str, list[tuple[float, float]]]:
    """Bandwidth sweeps along ``axis``: label -> [(x, bytes/s)] (see :func:`_sweep_points`)."""
    return {
        label: [(x, sum(v) / len(v)) for x, v in ((x, [b for b, _, _ in bs]) for x, bs in pts)]
        for label, pts in _sweep_points(phases, axis).items()
    }


def sweep_spread(
    phases: Sequence[PhaseResult], axis: str
) -> dict[str, list[tuple[float, float, float]]]:
    """label -> [(x, min, max)] over the repeats of the sweep points measured more than once."""
    out = {}
    for label, pts in _sweep_points(phases, axis).items():
        bars = [(x, min(lo for _, lo, _ in bs), max(hi for _, _, hi in bs)) for x, bs in pts]
        bars = [b for b in bars if b[2] > b[1]]
        if bars:
            out[label] = bars
    return out


def _sweep_points(
    phases: Sequence[PhaseResult], axis: str
) -> dict[str, list[tuple[float, list[tuple[float, float, float]]]]]:
    """Bandwidth sweeps along ``axis`` ("block_size" or "concurrency"): label -> [(x, bytes/s)].

    label -> [(x, [(median bytes/s, repeat min, repeat max) of each phase at x])].
    Phases are grouped by ``params["sweep"]`` and op (phases without a sweep tag are not sweep
    points; "base" joins both the block-size and the jobs sweep); within a group, those that
    share the other parameter and differ along ``axis`` form one series (>= 2 distinct points).
    Points measured twice (the base phase) are averaged; a phase's figure is the median over
    its repeats, as in the tables.
    """
    other = "concurrency" if axis == "block_size" else "block_size"
    groups: dict[tuple[str, str], list[PhaseResult]] = {}
    for p in phases:
        if p.op in METADATA_OPS or p.status == "failed" or not p.bandwidth_bps > 0:
            continue
        sweep_tag = str((p.params or {}).get("sweep") or "")
        if not sweep_tag:
            continue  # not a sweep point (a layout write, a one-off phase)
        # the base configuration is a point of every sweep it anchors
        for tag in ("block_size", "jobs") if sweep_tag == "base" else (sweep_tag,):
            groups.setdefault((tag, p.op), []).append(p)
    out: dict[str, list[tuple[float, list[tuple[float, float, float]]]]] = {}
    for (sweep, op), members in groups.items():
        by_other: dict[Any, dict[float, list[tuple[float, float, float]]]] = {}
        for p in members:
            x = getattr(p, axis)
            if not _is_num(x) or x <= 0:
                continue
            bw = _value(p, "bandwidth_bps") or p.bandwidth_bps
            sm = metric_summary(p, "bandwidth_bps")
            lo, hi = (sm.min, sm.max) if sm is not None and sm.n > 1 else (bw, bw)
            by_other.setdefault(getattr(p, other), {}).setdefault(float(x), []).append((bw, lo, hi))
        lines = {k: v for k, v in by_other.items() if len(v) >= 2}
        name = op if sweep == op else f"{sweep} ({op})"
        for k, xs in sorted(lines.items(), key=lambda kv: str(kv[0])):
            label = name
            if len(lines) > 1:
                label += f", {_block(k)}" if other == "block_size" else f", {k} jobs"
            out[label] = sorted(xs.items())
    return out


def _rate_scale(values: Iterable[float]) -> tuple[float, str]:
    top = max(values, default=0.0)
    return (float(1 << 30), "GiB/s") if top >= 10 * (1 << 30) else (float(1 << 20), "MiB/s")


def _legend(ax: Any) -> None:
    """Few entries sit inside the axes; more go to the right, clear of the data."""
    n = len(ax.get_legend_handles_labels()[1])
    if n == 0:
        return
    if n <= 2:
        ax.legend(loc="best")
    else:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _log_seconds_formatter() -> Any:
    """Log-axis labels in s/ms/us; matplotlib still decides which (minor) ticks get one."""
    from matplotlib.ticker import LogFormatter

    class _Fmt(LogFormatter):
        def __call__(self, x: float, pos: Any = None) -> str:
            return _seconds_tick(x) if super().__call__(x, pos) else ""

    return _Fmt(labelOnlyBase=False)


def _seconds_tick(v: float, _pos: Any = None) -> str:
    if v <= 0:
        return "0"
    for div, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us")):
        if v >= div:
            return f"{v / div:g} {unit}"
    return f"{v * 1e9:g} ns"


BASELINE_SUFFIX = " (baseline)"


def _colours(ax: Any) -> dict[str, str]:
    """label -> colour of the lines drawn so far (the current run's)."""
    return {ln.get_label(): ln.get_color() for ln in ax.get_lines()}


def _overlay(ax: Any, base: dict[str, tuple[list[float], list[float]]] | None, step: bool = False):
    """The baseline run's curve of every label this figure draws, dashed in the same colour."""
    if not base:
        return
    colours = _colours(ax)
    for label, (xs, ys) in base.items():
        if label not in colours or not xs:
            continue
        kw = {"color": colours[label], "linestyle": "--", "linewidth": 1.1, "alpha": 0.75}
        if step:
            ax.step(xs, ys, where="post", label=label + BASELINE_SUFFIX, **kw)
        elif len(xs) < MIN_LINE_POINTS:
            ax.plot(xs, ys, marker="o", fillstyle="none", label=label + BASELINE_SUFFIX,
                    **{**kw, "linestyle": "none"})  # fmt: skip
        else:
            ax.plot(xs, ys, label=label + BASELINE_SUFFIX, **kw)


def _sweep_plot(
    Figure: Callable[..., Any],
    series: dict[str, list[tuple[float, float]]],
    axis: str,
    base: dict[str, list[tuple[float, float]]] | None = None,
    spread: dict[str, list[tuple[float, float, float]]] | None = None,
) -> Any:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    scale, unit = _rate_scale(y for pts in series.values() for _, y in pts)
    xs_all: set[float] = set()
    for label, pts in series.items():
        xs = [x for x, _ in pts]
        xs_all.update(xs)
        ax.plot(xs, [y / scale for _, y in pts], marker="o", markersize=4, label=label)
    colours = _colours(ax)
    for label, bars in (spread or {}).items():
        if label in colours:  # min-max over the repeats
            ax.vlines([x for x, _, _ in bars], [lo / scale for _, lo, _ in bars],
                      [hi / scale for _, _, hi in bars], color=colours[label], linewidth=2.5,
                      alpha=0.35)  # fmt: skip
    common = {k: v for k, v in (base or {}).items() if k in series}
    for pts in common.values():
        xs_all.update(x for x, _ in pts)
    _overlay(ax, {k: ([x for x, _ in v], [y / scale for _, y in v]) for k, v in common.items()})
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(xs_all)))
    ax.xaxis.set_minor_locator(NullLocator())
    fmt = _block_short if axis == "block_size" else (lambda x: f"{x:g}")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: fmt(x)))
    ax.set_xlabel("block size" if axis == "block_size" else "workers (concurrency)")
    ax.set_ylabel(f"bandwidth ({unit})")
    ax.set_ylim(bottom=0)
    title = "Bandwidth vs block size" if axis == "block_size" else "Bandwidth vs workers"
    ax.set_title(title, loc="left")
    _legend(ax)
    return fig, title


def _cdf_plot(
    Figure: Callable[..., Any],
    curves: list[tuple[str, list[tuple[float, float]]]],
    base: dict[str, list[tuple[float, float]]] | None = None,
):
    from matplotlib.ticker import PercentFormatter

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    for label, pts in curves:
        xs = [x for x, _ in pts]
        ys = [y for _, y in pts]
        # Start each curve at zero so a narrow distribution still reads as a step.
        ax.step([xs[0]] + xs, [0.0] + ys, where="post", label=label, linewidth=1.4)
    _overlay(
        ax,
        {
            k: ([v[0][0]] + [x for x, _ in v], [0.0] + [y for _, y in v])
            for k, v in (base or {}).items()
            if v
        },
        step=True,
    )
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_log_seconds_formatter())
    ax.xaxis.set_minor_formatter(_log_seconds_formatter())
    for q in (0.5, 0.99):
        ax.axhline(q, color="#8c959f", linewidth=0.7, linestyle=":")
    ax.set_ylim(0, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("latency per operation")
    ax.set_ylabel("operations completed")
    _legend(ax)
    return fig, ax


_TAIL_MARKS = ((0.5, "p50"), (0.99, "p99"), (0.999, "p99.9"), (0.9999, "p99.99"))


def _tail_plot(
    Figure: Callable[..., Any],
    curves: list[tuple[str, list[tuple[float, float]]]],
    base: dict[str, list[tuple[float, float]]] | None = None,
):
    """The complementary CDF on log-log axes: the share of operations slower than x, so that
    p99 to p99.99 get as much room as the median (a linear CDF squeezes them into its top)."""
    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    floor = 1.0
    for label, pts in curves:
        xs = [x for x, _ in pts]
        ys = [max(1.0 - y, 0.0) for _, y in pts]
        keep = [(x, y) for x, y in zip(xs, ys, strict=True) if y > 0]
        if not keep:
            continue
        floor = min(floor, keep[-1][1])
        ax.step([xs[0]] + [x for x, _ in keep], [1.0] + [y for _, y in keep], where="post",
                label=label, linewidth=1.4)  # fmt: skip
    tails = {}
    for label, pts in (base or {}).items():
        keep = [(x, 1.0 - y) for x, y in pts if 1.0 - y > 0]
        if keep:
            tails[label] = ([pts[0][0]] + [x for x, _ in keep], [1.0] + [y for _, y in keep])
    _overlay(ax, tails, step=True)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(_log_seconds_formatter())
    ax.xaxis.set_minor_formatter(_log_seconds_formatter())
    bottom = max(min(floor, 1e-4) / 2, 1e-7)
    for q, name in _TAIL_MARKS:
        if 1 - q >= bottom:
            ax.axhline(1 - q, color="#8c959f", linewidth=0.7, linestyle=":")
            ax.annotate(name, (0.0, 1 - q), xycoords=("axes fraction", "data"), xytext=(2, 2),
                        textcoords="offset points", fontsize=7, color="#59636e")  # fmt: skip
    ax.set_ylim(bottom, 1.5)
    ax.set_xlabel("latency per operation")
    ax.set_ylabel("share of operations slower")
    _legend(ax)
    return fig, ax


def latency_series(
    phases: Sequence[PhaseResult],
) -> dict[str, list[tuple[float, dict[str, float]]]]:
    """Latency against concurrency: "op, block" -> [(workers, {"p50": s, "p99": s, "p99.9": s})]
    for every op and block size measured at two or more worker counts (the figures every
    rendering shows: medians over repeats)."""
    groups: dict[tuple[str, Any], dict[float, dict[str, float]]] = {}
    for p in phases:
        if p.status == "failed" or not _is_num(p.concurrency) or p.concurrency <= 0:
            continue
        marks = {}
        for key, name in (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9")):
            v = _value(p, f"latency_s.{key}")
            if _is_num(v) and v > 0:
                marks[name] = float(v)
        if marks:
            groups.setdefault((p.op, p.block_size), {})[float(p.concurrency)] = marks
    out = {}
    for (op, block), pts in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if len(pts) >= 2:
            label = op + (f", {_block(block)}" if _is_num(block) and block > 0 else "")
            out[label] = sorted(pts.items())
    return out


def _latency_concurrency_plot(
    Figure: Callable[..., Any],
    series: dict[str, list[tuple[float, dict[str, float]]]],
    base: dict[str, list[tuple[float, dict[str, float]]]] | None = None,
) -> Any:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    styles = {"p50": "-", "p99": "--", "p99.9": ":"}
    xs_all: set[float] = set()
    for i, (label, pts) in enumerate(series.items()):
        colour = _COLOURS[i % len(_COLOURS)]
        for mark, ls in styles.items():
            got = [(x, m[mark]) for x, m in pts if mark in m]
            if got:
                xs_all.update(x for x, _ in got)
                ax.plot([x for x, _ in got], [y for _, y in got], linestyle=ls, marker="o",
                        markersize=3.5, color=colour, label=f"{label} {mark}")  # fmt: skip
        got = [(x, m["p99"]) for x, m in (base or {}).get(label, []) if "p99" in m]
        if got:  # the baseline's p99 only, so that the figure stays readable
            xs_all.update(x for x, _ in got)
            ax.plot([x for x, _ in got], [y for _, y in got], linestyle="--", marker="x",
                    markersize=4, color=colour, alpha=0.5,
                    label=f"{label} p99{BASELINE_SUFFIX}")  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sorted(xs_all)))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_log_seconds_formatter())
    ax.yaxis.set_minor_formatter(_log_seconds_formatter())
    ax.set_xlabel("workers (concurrency)")
    ax.set_ylabel("latency per operation")
    ax.set_title("Latency vs workers", loc="left")
    _legend(ax)
    return fig


PARTIAL_MIN_SHARE = 0.5  # a last interval covering less of its length than this is not drawn
MIN_LINE_POINTS = 3  # a series of fewer points is drawn as markers, not as a line


def time_points(
    values: Sequence[float], interval_s: float, elapsed_s: float | None, start_s: float = 0.0
) -> list[tuple[float, float]]:
    """(seconds since the phase's start at the interval's end, rate) of a per-interval series.

    The series is on a fixed grid that starts ``start_s`` before the phase (stats.aggregate
    records it as ``extra["series_start_s"]``; 0 for many-client series and older results)
    and divides every interval's bytes (ops) by the full interval; but the phase covered only
    part of its first and last intervals. Those two rates are taken over the time the phase
    really covered (from ``start_s`` and ``elapsed_s``) and drawn at the phase's start and
    end; covering under :data:`PARTIAL_MIN_SHARE` of an interval they are left out (too short
    to be a rate). Without a usable ``elapsed_s``, or when it does not fit the series (an
    older result whose grid offset is unknown), the series is drawn as stored."""
    n = len(values)
    stored = [((i + 1) * interval_s, float(v)) for i, v in enumerate(values)]
    if not n or not _is_num(elapsed_s) or not elapsed_s or interval_s <= 0:
        return stored
    off = float(start_s) if _is_num(start_s) and 0 <= start_s < interval_s else 0.0
    end = off + float(elapsed_s)  # the phase's end, from the grid's start
    if end <= (n - 1) * interval_s or end > n * interval_s + 1e-9:
        return stored
    pts = []
    for i, v in enumerate(values):
        lo, hi = max(i * interval_s, off), min((i + 1) * interval_s, end)
        covered = hi - lo
        if covered >= interval_s * (1 - 1e-9):
            pts.append((hi - off, float(v)))
        elif covered >= PARTIAL_MIN_SHARE * interval_s:
            pts.append((hi - off, float(v) * interval_s / covered))
    return pts


def _time_plot(
    Figure: Callable[..., Any],
    curves: list[tuple[str, list[tuple[float, float]]]],
    ops: bool,
    base: dict[str, list[tuple[float, float]]] | None = None,
) -> Any:
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    if ops:
        scale, unit = 1.0, "ops/s"
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_count(v) if v else "0"))
    else:
        scale, unit = _rate_scale(v for _, pts in curves for _, v in pts)
    for label, pts in curves:
        if not pts:
            continue
        ys = [v / scale for _, v in pts]
        if len(pts) < MIN_LINE_POINTS:  # two points make no trend: markers only
            ax.plot([t for t, _ in pts], ys, linestyle="none", marker="o", label=label)
        else:
            ax.plot([0.0] + [t for t, _ in pts], [ys[0]] + ys, label=label)
    over = {}
    for label, pts in (base or {}).items():
        ys = [v / scale for _, v in pts]
        if len(pts) >= MIN_LINE_POINTS:
            over[label] = ([0.0] + [t for t, _ in pts], [ys[0]] + ys)
        elif pts:
            over[label] = ([t for t, _ in pts], ys)
    _overlay(ax, over)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since phase start (s)")
    ax.set_ylabel(unit if ops else f"bandwidth ({unit})")
    _legend(ax)
    return fig, ax


def _metadata_plot(Figure: Callable[..., Any], bars: list[tuple[str, float]]) -> Any:
    from matplotlib.ticker import FuncFormatter

    fig = Figure(figsize=(_FIGSIZE[0], max(1.6, 0.42 * len(bars) + 0.9)), layout="constrained")
    ax = fig.add_subplot()
    labels = [b[0] for b in bars][::-1]
    values = [b[1] for b in bars][::-1]
    ax.barh(labels, values, color=_COLOURS[0], height=0.6)
    for y, v in enumerate(values):
        ax.text(v, y, f" {format_count(v)}", va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.18 if max(values) > 0 else 1)
    ax.set_axisbelow(True)
    ax.grid(axis="y", visible=False)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: format_count(v) if v else "0"))
    ax.set_xlabel("operations per second")
    ax.set_title("Metadata operation rates", loc="left")
    return fig


def _au_plot(Figure: Callable[..., Any], run: RunResult) -> Any:
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator, PercentFormatter

    est = run.estimate or {}
    curve = sorted(
        (float(a["gpus"]), float(a["au"]))
        for a in est.get("au_at") or []
        if isinstance(a, dict) and _is_num(a.get("gpus")) and _is_num(a.get("au")) and a["gpus"] > 0
    )
    measured = [(float(g), a) for g, a in _loader_points(run) if g > 0]
    if not curve and not measured:
        return None
    fig = Figure(figsize=_FIGSIZE, layout="constrained")
    ax = fig.add_subplot()
    xs_all: set[float] = set()
    band = sorted(
        (float(a["gpus"]), float(a["low"]), float(a["high"]))
        for a in est.get("au_at") or []
        if isinstance(a, dict) and _is_num(a.get("gpus")) and a["gpus"] > 0
        and _is_num(a.get("low")) and _is_num(a.get("high"))
    )  # fmt: skip
    if len(band) > 1:
        level = (est.get("interval") or {}).get("level")
        ax.fill_between(
            [x for x, _, _ in band],
            [lo for _, lo, _ in band],
            [hi for _, _, hi in band],
            color=_COLOURS[0],
            alpha=0.18,
            linewidth=0,
            label=f"{level:.0%} interval" if _is_num(level) else "interval",
        )
    if curve:
        xs_all.update(x for x, _ in curve)
        ax.plot(
            [x for x, _ in curve],
            [y for _, y in curve],
            marker="o",
            markersize=3.5,
            color=_COLOURS[0],
            label="estimate (model)",
        )
    if measured:
        xs_all.update(x for x, _ in measured)
        ax.plot(
            [x for x, _ in measured],
            [y for _, y in measured],
            linestyle="none",
            marker="D",
            markersize=7,
            color=_COLOURS[2],
            label="measured (loader)",
            zorder=5,
        )
    thr = est.get("threshold")
    if _is_num(thr):
        ax.axhline(
            thr, color=_COLOURS[1], linestyle="--", linewidth=1.1, label=f"threshold {_pct(thr)}"
        )
    max_gpus = est.get("max_gpus")
    if _is_num(max_gpus) and max_gpus > 0:
        ax.axvline(max_gpus, color="#8c959f", linestyle=":", linewidth=1.0)
        low, high = est.get("max_gpus_low"), est.get("max_gpus_high")
        span = f" ({low:g}–{high:g})" if _is_num(low) and _is_num(high) else ""
        ax.annotate(
            f"max {max_gpus:g}{span} GPUs (estimate)",
            (max_gpus, 0.04),
            xytext=(4, 0),
            textcoords="offset points",
            fontsize=8,
            color="#59636e",
        )
        xs_all.add(float(max_gpus))
    ax.set_xscale("log", base=2)
    ticks = sorted(xs_all)
    if len(ticks) > 12:  # keep labels legible: powers of two only
        ticks = [t for t in ticks if math.log2(t).is_integer()] or ticks
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:g}"))
    ax.set_ylim(0, 1.05)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("number of GPUs")
    ax.set_ylabel("accelerator utilisation (AU)")
    profile = est.get("profile") or (run.loader or {}).get("profile")
    ax.set_title("AU vs GPUs" + (f" ({profile})" if profile else ""), loc="left")
    ax.legend(loc="lower left")
    return fig


def _plot_group(p: PhaseResult) -> str:
    """Phases drawn in one figure: one op, or all metadata operations together."""
    return "metadata" if p.op in METADATA_OPS else p.op


def _by_op(phases: Iterable[PhaseResult]) -> dict[str, list[PhaseResult]]:
    groups: dict[str, list[PhaseResult]] = {}
    for p in phases:
        groups.setdefault(_plot_group(p), []).append(p)
    return groups


def _build_plots(run: RunResult, baseline: RunResult | None = None) -> list[_Plot] | None:
    """Every plot the run's data supports, with ``baseline``'s curves of the same phases
    dashed in the same colours; None when matplotlib is not installed."""
    try:
        import matplotlib
        from matplotlib.figure import Figure  # no pyplot: no GUI backend, no global state
    except ImportError:
        return None
    plots: list[_Plot] = []

    def add(fig: Any, title: str, caption: str = "") -> None:
        plots.append(_Plot(title, _svg(fig, f"iobench-{run.run_id}-{len(plots)}"), caption))

    with matplotlib.rc_context(_rc()):
        for axis in ("block_size", "concurrency"):
            series = sweep_series(run.phases, axis)
            if series:
                base = sweep_series(baseline.phases, axis) if baseline else None
                spread = sweep_spread(run.phases, axis)
                fig, title = _sweep_plot(Figure, series, axis, base, spread)
                add(
                    fig,
                    title,
                    "Aggregate bandwidth (last done) of each phase in the sweep"
                    + ("; bars: min-max over the repeats" if spread else "")
                    + (f"; dashed: baseline {baseline.run_id}" if base else "")
                    + ".",
                )

        hist_phases = [p for p in run.phases if (p.histogram or {}).get("count")]
        base_cdf = {
            p.name: c
            for p in (baseline.phases if baseline else [])
            if (p.histogram or {}).get("count") and (c := _cdf(p.histogram))
        }
        dashed = f" Dashed: baseline {baseline.run_id}." if baseline else ""
        for op, members in _by_op(hist_phases).items():
            curves = [(p.name, _cdf(p.histogram)) for p in members]
            curves = [(n, c) for n, c in curves if c]
            for part in _chunks(curves):
                if not part:
                    continue
                fig, ax = _cdf_plot(Figure, list(part), base_cdf)
                ax.set_title(f"Latency CDF: {op}", loc="left")
                cap = "From the merged per-operation latency histogram." + dashed
                add(fig, f"Latency CDF: {op}", cap)
                fig, ax = _tail_plot(Figure, list(part), base_cdf)
                ax.set_title(f"Latency tail: {op}", loc="left")
                add(
                    fig,
                    f"Latency tail: {op}",
                    "Share of operations slower than each latency (log-log): the p99 to p99.99 "
                    "a linear CDF hides; dotted lines at p50, p99, p99.9 and p99.99." + dashed,
                )

        lat = latency_series(run.phases)
        base_lat = latency_series(baseline.phases) if baseline else {}
        if lat:
            for part in _chunks(list(lat.items()), 2):  # three or four lines per series
                add(
                    _latency_concurrency_plot(Figure, dict(part), base_lat),
                    "Latency vs workers",
                    "p50 (solid), p99 (dashed) and p99.9 (dotted) of each op and block size "
                    "measured at several worker counts."
                    + (f" Crosses: baseline {baseline.run_id}'s p99." if base_lat else ""),
                )

        for ops in (False, True):
            timed: dict[str, list[tuple[str, list[tuple[float, float]], float]]] = {}
            base_t: dict[str, list[tuple[float, float]]] = {}
            for p in baseline.phases if baseline else []:
                values = p.ops_series if ops else p.series
                if values and p.series_interval_s > 0:
                    clean = [float(v) if _is_num(v) else math.nan for v in values]
                    off = (p.extra or {}).get("series_start_s", 0.0)
                    dt = float(p.series_interval_s)
                    base_t[p.name] = time_points(clean, dt, p.elapsed_s, off)
            for p in run.phases:
                is_meta = p.op in METADATA_OPS or (not p.bytes and bool(p.ops))
                values = p.ops_series if ops else p.series
                if is_meta == ops and values and p.series_interval_s > 0:
                    dt = float(p.series_interval_s)
                    clean = [float(v) if _is_num(v) else math.nan for v in values]
                    off = (p.extra or {}).get("series_start_s", 0.0)
                    curve = (p.name, time_points(clean, dt, p.elapsed_s, off), dt)
                    if curve[1]:  # one partial interval alone is no rate to draw
                        timed.setdefault(_plot_group(p), []).append(curve)
            what = "Operations over time" if ops else "Bandwidth over time"
            for op, curves in timed.items():
                for part in _chunks(curves):
                    fig, ax = _time_plot(Figure, [(n, pts) for n, pts, _ in part], ops, base_t)
                    ax.set_title(f"{what}: {op}", loc="left")
                    caption = (
                        f"Per-interval rate ({part[0][2]:g} s intervals); the first and last, "
                        "partial intervals over the time the phase covered (left out under "
                        "half an interval)." + dashed
                    )
                    add(fig, f"{what}: {op}", caption)

        bars = [
            (f"{p.name} ({op})" if op != p.name else op, r)
            for p in run.phases
            for op, r in metadata_rates(p).items()
        ]
        if bars:
            add(_metadata_plot(Figure, bars), "Metadata operation rates")

        fig = _au_plot(Figure, run)
        if fig is not None:
            caption = (
                "Line: model estimate; diamonds: measured with the data loader; dashed: threshold."
            )
            add(fig, "AU vs GPUs", caption)

        if run.checkpoint:
            from .ckpt_plot import goodput_figure

            fig = goodput_figure(Figure, run.checkpoint)
            if fig is not None:
                caption = "Estimate (checkpoint model); dots: the best interval (Daly)."
                add(fig, "Checkpoint goodput vs interval", caption)
    return plots


def _cdf(histogram: dict[str, Any]) -> list[tuple[float, float]]:
    """(latency seconds, cumulative fraction) points of a stored histogram; [] if unreadable."""
    from .stats import Histogram

    try:
        pts = Histogram.from_dict(histogram).cdf_points()
    except (ValueError, TypeError, KeyError):
        return []
    return [(max(x, 1e-9), y) for x, y in pts]


# -- HTML --------------------------------------------------------------------------------------

_CSS = """
:root { --fg:#1f2328; --muted:#59636e; --line:#d1d9e0; --alt:#f6f8fa; --pass:#1a7f37;
        --fail:#cf222e; --warn:#9a6700; --model:#8250df; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: var(--fg);
       font: 14px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", "Helvetica Neue", Arial,
             "Liberation Sans", "DejaVu Sans", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 28px 24px 56px; }
header h1 { font-size: 24px; margin: 0; font-weight: 650; letter-spacing: -0.01em; }
header .sub { color: var(--muted); margin: 2px 0 16px; }
h2 { font-size: 17px; font-weight: 650; margin: 34px 0 12px; padding-bottom: 6px;
     border-bottom: 1px solid var(--line); }
h3 { font-size: 14px; margin: 18px 0 8px; }
code { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono",
       monospace; background: var(--alt); padding: 1px 5px; border-radius: 4px;
       word-break: break-all; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 3px 18px; margin: 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
.banner { border-radius: 8px; padding: 14px 20px; margin: 20px 0 8px; color: #fff; }
.banner.pass { background: var(--pass); }
.banner.fail { background: var(--fail); }
.banner.warn { background: var(--warn); }
.banner .word { font-size: 28px; font-weight: 750; letter-spacing: 0.06em; }
.banner .label { font-size: 12px; text-transform: uppercase; letter-spacing: 0.08em;
                 opacity: 0.85; }
.banner ul { margin: 6px 0 0; padding-left: 20px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-variant-numeric: tabular-nums; font-size: 12.5px; }
table.wide { width: 100%; }
th, td { padding: 5px 7px; border-bottom: 1px solid var(--line); text-align: left;
         vertical-align: top; }
table.grid td, table.grid th { white-space: nowrap; }
th { background: var(--alt); font-weight: 600; border-bottom: 1px solid #afb8c1; }
th.r, td.r { text-align: right; }
tr.bad td { background: #fff1f0; }
td.status-PARTIAL, td.status-FAILED { color: var(--fail); font-weight: 650; }
td.status-indicative { color: var(--warn); font-weight: 650; }
td.worse { color: var(--fail); font-weight: 650; }
td.better { color: var(--pass); }
table.kv th { background: none; border-bottom: 1px solid var(--line); color: var(--muted);
              font-weight: 500; width: 240px; }
.estimate { border-left: 4px solid var(--model); background: #fbf9ff; padding: 4px 18px 14px;
            border-radius: 0 6px 6px 0; }
.estimate .tag { display: inline-block; font-size: 11px; font-weight: 650; color: var(--model);
                 border: 1px solid var(--model); border-radius: 10px; padding: 0 8px;
                 text-transform: uppercase; letter-spacing: 0.06em; }
.note { color: var(--muted); font-size: 13px; margin: 6px 0; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 16px; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px 8px;
         background: #fff; break-inside: avoid; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12px; margin-top: 4px; }
ul.warnings { padding-left: 0; list-style: none; margin: 0; }
ul.warnings li { border-left: 3px solid var(--warn); background: #fff8c5; padding: 6px 12px;
                 margin: 0 0 6px; border-radius: 0 4px 4px 0; }
ul.errors li { border-left-color: var(--fail); background: #fff1f0; }
footer { color: var(--muted); font-size: 12px; margin-top: 40px; border-top: 1px solid var(--line);
         padding-top: 10px; }
@media print { main { max-width: none; padding: 0; } .plots { display: block; }
               figure { margin-bottom: 12px; } }
"""


def _e(text: Any) -> str:
    """Every text of the HTML page: credentials masked and control characters escaped as on
    the terminal (iobench.redact), then HTML-escaped."""
    from .redact import for_terminal

    return html.escape(for_terminal(text), quote=True)


def _html_table(t: _Table, status_col: int | None = None, wide: bool = False) -> str:
    if t.kv:
        rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in t.rows)
        return f'<table class="kv"><tbody>{rows}</tbody></table>'
    cls = ["r" if a == "r" else "" for a in t.align]
    head = "".join(f'<th class="{c}">{_e(h)}</th>' for h, c in zip(t.headers, cls, strict=True))
    body = []
    for i, row in enumerate(t.rows):
        rc = t.row_classes[i] if i < len(t.row_classes) else ""
        cells = []
        for j, (cell, c) in enumerate(zip(row, cls, strict=True)):
            extra = f" status-{cell}" if j == status_col else ""
            if cell.endswith(" !"):  # the client CPU at saturation
                extra += " worse"
            elif t.headers[j].startswith("Δ") and _is_delta(cell):
                extra += " worse" if _delta_style(t.headers[j], cell) == "red" else " better"
            cells.append(f'<td class="{(c + extra).strip()}">{_e(cell)}</td>')
        body.append(f'<tr class="{rc}">{"".join(cells)}</tr>')
    return (
        f'<div class="scroll"><table class="grid{" wide" if wide else ""}">'
        f"<thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _html_banner(run: RunResult) -> str:
    verdict = _verdict(run)
    if verdict:
        result, reasons = verdict
        kind = {"PASS": "pass", "FAIL": "fail"}.get(result, "warn")
        items = "".join(f"<li>{_e(r)}</li>" for r in reasons)
        return (
            f'<section class="banner {kind}" id="verdict"><div class="label">Verdict</div>'
            f'<div class="word">{_e(result)}</div>{f"<ul>{items}</ul>" if items else ""}</section>'
        )
    if run.status != "complete":
        msg = f"<ul><li>{_e(run.error)}</li></ul>" if run.error else ""
        return (
            f'<section class="banner warn" id="verdict"><div class="label">Run status</div>'
            f'<div class="word">{_e(run.status.upper())}</div>{msg}</section>'
        )
    return ""


def _cache_table(run: RunResult) -> _Table | None:
    """One row per cache mode met in the run (the Summary has each phase's): what it means
    and which phases ran under it ("all N phases" when every one did)."""
    by_mode: dict[str, list[str]] = {}
    for p in run.phases:
        by_mode.setdefault(p.cache or "-", []).append(p.name)
    ld = run.loader or {}
    if ld.get("cache"):
        by_mode.setdefault(str(ld["cache"]), []).append("data loader")
    if not by_mode:
        return None
    rows = []
    for mode, names in by_mode.items():
        every = len(by_mode) == 1 and len(names) > 1
        rows.append(
            [
                mode,
                _CACHE_MEANING.get(mode, "-"),
                f"all {len(names)}" if every else ", ".join(names),
            ]
        )
    return _Table("Cache handling", ["Cache", "What it means", "Phases"], rows, "lll")


def _plot_id(title: str) -> str:
    """An element id for a plot: ``plot-latency-tail-read`` (not unique when a group is
    split over several figures: a test or a reader looks for the kind)."""
    return "plot-" + re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def render_html(run: RunResult, baseline: RunResult | None = None) -> str:
    """One self-contained HTML page: inline CSS and SVG plots, no network resources; with a
    ``baseline``, its deltas table and its curves dashed in every plot."""
    wl = (run.workload or {}).get("name")
    title = f"iobench report: {wl or run.run_id}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body><main>",
        "<header>",
        f"<h1>{_e(title)}</h1>",
        f'<div class="sub">Storage and data-loader throughput, run {_e(run.run_id)}</div>',
    ]
    meta = []
    for k, v in _run_info(run):
        value = f"<code>{_e(v)}</code>" if k == "Command" else _e(v)
        meta.append(f"<dt>{_e(k)}</dt><dd>{value}</dd>")
    parts.append(f'<dl class="meta">{"".join(meta)}</dl></header>')
    parts.append(_html_banner(run))

    if run.phases:
        parts.append('<section id="phases"><h2>Summary</h2>')
        detail = _phase_detail_table(run)
        parts.append(_html_table(detail, status_col=len(detail.headers) - 1, wide=True))
        parts.append(
            '<p class="note">Bandwidth is all bytes over first start to last end (last done); '
            "first done is the figure when the first worker finished."
            + (f" {_e(detail.note)}" if detail.note else "")
            + "</p>"
        )
        if _indicative_note(run):
            parts.append(f'<p class="note">{_e(_indicative_note(run))}</p>')
        parts.append("</section>")
    if baseline is not None and run.phases:
        bt = _baseline_table(run, baseline)
        parts.append(f'<section id="baseline"><h2>{_e(bt.title)}</h2>')
        parts.append(_html_table(bt) + f'<p class="note">{_e(bt.note)}</p></section>')
    ranks_t = _ranks_table(run)
    if ranks_t is not None:
        parts.append(f'<section id="clients"><h2>{_e(ranks_t.title)}</h2>')
        parts.append(_html_table(ranks_t) + f'<p class="note">{_e(ranks_t.note)}</p></section>')
    meta_t = _metadata_table(run)
    if meta_t:
        parts.append(f'<section id="metadata"><h2>{_e(meta_t.title)}</h2>')
        parts.append(_html_table(meta_t) + "</section>")
    loader = _loader_table(run)
    if loader:
        parts.append(f'<section id="loader"><h2>{_e(loader.title)}</h2>')
        parts.append(_html_table(loader) + "</section>")
    est = _estimate_tables(run)
    if est:
        parts.append('<section id="estimate"><h2>Estimate</h2><div class="estimate">')
        parts.append('<p><span class="tag">estimate</span> ')
        parts.append(f"{_e(est[0].note)}</p>")
        parts.append(_html_table(est[0]))
        for t in est[1:]:
            parts.append(f"<h3>{_e(t.title)}</h3>{_html_table(t)}")
            if t.note:
                parts.append(f'<p class="note">{_e(t.note)}</p>')
        parts.append("</div></section>")
    ckpt = [_Table(**t) for t in ckpt_tables(run.checkpoint)]
    if ckpt:  # the same tables as the terminal and markdown reports
        parts.append('<section id="checkpoint"><h2>Checkpoint</h2><div class="estimate">')
        for t in ckpt:
            note = f'<p class="note">{_e(t.note)}</p>' if t.note else ""
            parts.append(f"<h3>{_e(t.title)}</h3>{_html_table(t)}{note}")
        parts.append("</div></section>")

    plots = _build_plots(run, baseline)
    if plots is None:
        parts.append(f'<section id="plots"><h2>Plots</h2><p class="note">{_e(PLOT_HINT)}</p>')
        parts.append("</section>")
    elif plots:
        parts.append('<section id="plots"><h2>Plots</h2><div class="plots">')
        for p in plots:
            cap = f"<figcaption>{_e(p.caption)}</figcaption>" if p.caption else ""
            parts.append(
                f'<figure id="{_plot_id(p.title)}" aria-label="{_e(p.title)}">{p.svg}{cap}</figure>'
            )
        parts.append("</div></section>")

    errors = _errors(run)
    if errors:
        items = "".join(f"<li>{_e(e)}</li>" for e in errors)
        parts.append(f'<section id="errors"><h2>Errors ({len(errors)})</h2>')
        parts.append(f'<ul class="warnings errors">{items}</ul></section>')
    warnings = _phase_warnings(run)
    if warnings:
        items = "".join(f"<li>{_e(w)}</li>" for w in warnings)
        parts.append(f'<section id="warnings"><h2>Warnings ({len(warnings)})</h2>')
        parts.append(f'<ul class="warnings">{items}</ul></section>')
    cache = _cache_table(run)
    if cache:
        parts.append(
            f'<section id="cache"><h2>{_e(cache.title)}</h2>{_html_table(cache)}</section>'
        )
    parts.append(
        f"<footer>Generated by iobench {_e(run.iobench_version)} from result schema "
        f"{_e(run.schema_version)}. Figures are measured in this run unless labelled estimate."
        "</footer></main></body></html>"
    )
    return "\n".join(p for p in parts if p) + "\n"


def write_report(run: RunResult, directory: str | Path) -> Path:
    """Write ``report.html`` atomically into ``directory`` (beside result.json); return its path."""
    path = Path(directory) / "report.html"
    atomic_write_bytes(path, render_html(run).encode("utf-8"))
    return path
