"""The report's shared pieces: a titled table (:class:`Section`, over ``core.table``), cell
formatters, the cells' terminal styles and HTML classes, and the small facts about a run that
every rendering reads.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..core.table import Column, Table
from ..core.units import format_bytes, format_count, format_rate, format_seconds, format_spread
from ..result.blocks import CpuBlock
from ..result.file import PhaseResult, RunResult, metric_summary, metric_value
from ..result.steady import DEFAULT_STEADY, MIN_PHASE_S, is_indicative, one_pass_reason

METADATA_OPS = ("create", "stat", "open_read", "delete")


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


@dataclass(frozen=True)
class Section:
    """A report table (``core.table``) under its title, with its note; ``headers`` and
    ``rows`` are its shown cells, as every rendering reads them."""

    title: str
    table: Table
    note: str = ""

    @property
    def headers(self) -> list[str]:
        return self.table.header()

    @property
    def rows(self) -> list[list[str]]:
        return self.table.cells()


#: A label/value block's columns (markdown's header reads "Item | Value").
PAIRS = (Column("Item"), Column("Value"))


def pairs(title: str, rows: Sequence[Sequence[str]], note: str = "") -> Section:
    """A label/value block: the terminal's labels column, the page's row headers."""
    return Section(title, Table(PAIRS, rows, pairs=True), note)


#: The coloured terminal's styles of statuses and verdicts (rich style names).
STATUS_STYLE = {
    "ok": "green",
    "indicative": "yellow",
    "one-pass": "cyan",
    "PARTIAL": "bold red",
    "FAILED": "bold red",
    "PASS": "bold green",
    "PASS (INDICATIVE)": "bold yellow",  # never the colour of a pass on steady phases
    "FAIL": "bold red",
}


def status_style(cell: str) -> str:
    return STATUS_STYLE.get(cell.strip(), "")


def status_class(cell: str) -> str:
    """The page's class of a status cell (``status-PARTIAL`` is red)."""
    return f"status-{cell}"


def cpu_style(cell: str) -> str:
    """The client's CPU at saturation ("93% !") in bold red."""
    return "bold red" if cell.endswith(" !") else ""


def cpu_class(cell: str) -> str:
    return "worse" if cell.endswith(" !") else ""


def _pct(x: Any) -> str:
    return "-" if not _is_num(x) else f"{float(x) * 100:.1f}%"


def au_cell(ld: Any) -> str:
    """The loader's measured AU, the model's prediction, and the AU against the profile's
    pass line (``au_min``, in results that have it)."""
    au = _pct(ld.au)
    if _is_num(ld.predicted_au):
        au += f"   (model predicted {_pct(ld.predicted_au)})"
    if _is_num(ld.au) and _is_num(getattr(ld, "au_min", None)):
        what = "BELOW" if float(ld.au) < float(ld.au_min) else "meets"
        au += f"   {what} the profile's {_pct(ld.au_min)} pass line (au_min)"
    return au


def _is_num(x: object) -> TypeGuard[float]:
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
        if s is None:
            return "-"
        return format_spread(s.n, s.min, s.max, s.cv, format_rate, span=_rate_range)
    s = metric_summary(p, "iops")
    return "-" if s is None else format_spread(s.n, s.min, s.max, s.cv, format_count)


_SPREAD_HEADER = "Over repeats"


_SPREAD_NOTE = (
    "Figures are medians over the repeats; 'Over repeats' gives n, min-max and the coefficient "
    "of variation of the bandwidth (ops/s where no bytes moved). Volume, time, worker spread and "
    "the plots come from one repeat: the one whose bandwidth is the median."
)


def _client_cpu(p: PhaseResult) -> CpuBlock | None:
    """The client's CPU over the phase (None when not recorded)."""
    c = p.extra_block.client_cpu
    return c if isinstance(c, CpuBlock) else None


def _has_cpu(run: RunResult) -> bool:
    return any(_client_cpu(p) is not None for p in run.phases)


def _cpu_cell(p: PhaseResult) -> str:
    """The client's CPU over the phase as a share of its usable CPUs, "!" at saturation."""
    from ..core.cpu import saturated

    c = _client_cpu(p)
    if c is None or not _is_num(c.share):
        return "-"
    return f"{c.share * 100:.0f}%" + (" !" if saturated(c.to_dict()) else "")


def _cpu_note(run: RunResult) -> str:
    """The phases table's note on the client CPU column (empty without the column)."""
    if not _has_cpu(run):
        return ""
    from ..core.cpu import SATURATED_SHARE, saturated

    cpus = {c.cpus for p in run.phases if (c := _client_cpu(p)) is not None}
    of = f"{cpus.pop()} CPUs" if len(cpus) == 1 else "its CPUs"
    note = (
        f"Client CPU: user + system time of iobench and the processes it started, over the "
        f"phase's wall time and the {of} it could use."
    )
    if _many_client_phases(run):
        note += " In a many-client phase it is rank 0's (its own process and children)."
    hot = [p.name for p in run.phases if saturated(c.to_dict() if (c := _client_cpu(p)) else None)]
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
    if p.status == "ok" and one_pass_reason(p):
        return "one-pass"
    return _STATUS_MARK.get(p.status, p.status.upper())


def _indicative_note(run: RunResult) -> str:
    """The phases table's note on "indicative" and "one-pass" (empty when no phase is)."""
    note = ""
    once = [p.name for p in run.phases if p.status == "ok" and one_pass_reason(p)]
    if once:
        note = (
            f"one-pass: {', '.join(once)} went over its files once by nature (a delete removes "
            "each file once): the rate of that pass, not judged for steady state. "
        )
    if not any(p.status == "ok" and is_indicative(p) for p in run.phases):
        return note.rstrip()
    return note + (
        f"indicative: the phase did not reach steady state ({DEFAULT_STEADY.describe()}, "
        f"fio's steadystate manner) or ran under {MIN_PHASE_S:g} s, or its ranks started too far "
        "apart: its figures show the order of magnitude, not a figure to rely on."
    )


def _many_client_phases(run: RunResult) -> list[PhaseResult]:
    return [p for p in run.phases if int(p.extra_block.world or 1) > 1]


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


def delta_column(name: str, get: Callable[[Any], Any] | None = None) -> Column:
    """A change against the baseline (``+12.0%``): red or green on a colour terminal, class
    ``worse`` or ``better`` on the page, by whether a rise of ``name``'s figure is better."""

    def style(cell: str) -> str:
        return _delta_style(name, cell.strip()) if _is_delta(cell) else ""

    def cls(cell: str) -> str:
        if not _is_delta(cell):
            return ""
        return "worse" if _delta_style(name, cell) == "red" else "better"

    return Column(name, "r", get=get, style=style, cls=cls)
