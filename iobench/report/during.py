"""The loader during a background checkpoint (``loader.during_checkpoint``) as report tables:
one row per window (before, during, after each save) and the pooled comparison, the one
formatting of its figures that the terminal, markdown and HTML renderings share."""

from __future__ import annotations

from typing import Any

from ..core.table import Column, Table
from ..core.units import format_bytes, format_rate, format_seconds
from ..result.blocks import DuringCheckpointBlock, DuringWindowBlock, LoaderBlock, WaitBlock
from .cells import Section, _is_num, _pct

TITLE = "Data loader during a checkpoint write (measured)"


def _rate(x: Any) -> str:
    return format_rate(float(x)) if _is_num(x) else "-"


def _secs(x: Any) -> str:
    return format_seconds(float(x)) if _is_num(x) else "-"


def _wait(w: WaitBlock | None, key: str) -> str:
    return _secs(getattr(w, key, None)) if w is not None else "-"


def _times(x: Any) -> str:
    return f"{float(x):.2f}×" if _is_num(x) else "-"


def _window_row(w: DuringWindowBlock, saves: dict[Any, Any], other: bool) -> list[str]:
    save = saves.get(w.checkpoint) if w.kind == "during" else None
    row = [
        f"{w.kind} {w.checkpoint}" if w.kind else "-",
        f"{_secs(w.start_s)}–{_secs(w.end_s)}",
        str(w.steps) if _is_num(w.steps) else "-",
        _pct(w.au),
        _wait(w.load_wait_s, "p50"),
        _wait(w.load_wait_s, "p99"),
        _rate(w.read_bps),
        _rate(save.write_bps) if save is not None else "",
        _times(save.vs_alone) if save is not None else "",
    ]
    return row + ([_rate(w.beside_bps)] if other else [])


def _pooled(summary: Any, other: dict[str, Any] | None) -> list[list[str]]:
    """Without a write vs during one, each kind's windows pooled."""
    rows = []
    for kind, label in (("without", "no save running"), ("during", "a save running")):
        s = (summary or {}).get(kind)
        if isinstance(s, dict):
            w = WaitBlock.from_dict(s.get("load_wait_s"))
            rows.append([f"pooled: {label}", _secs(s.get("seconds")), str(s.get("steps", "-")),
                         _pct(s.get("au")), _wait(w, "p50"), _wait(w, "p99"),
                         _rate(s.get("read_bps")), "", "",
                         *([_rate(other.get(f"{kind}_bps"))] if other else [])])  # fmt: skip
    return rows


def _probe_note(p: Any, rule: Any) -> str:
    """The read probe (the loader's reads alone and beside the save) and the probe rule."""
    idle, during = p.get("idle") or {}, p.get("during") or {}
    if not (_is_num(idle.get("read_bps")) and _is_num(during.get("read_bps"))):
        return ""
    spread = p.get("during_range_bps") or []
    span = (f", {_rate(spread[0])}–{_rate(spread[1])} by save"
            if len(spread) == 2 and all(_is_num(x) for x in spread) else "")  # fmt: skip
    out = (f"Read probe ({p.get('streams')} reader(s), the loader's reads of its files): "
           f"{_rate(idle['read_bps'])} alone, {_rate(during['read_bps'])} beside the save "
           f"written {len(p.get('saves') or [])} time(s) more{span}. ")  # fmt: skip
    lo_hi = rule.get("au_during_range") or []
    if _is_num(rule.get("au_during")) and len(lo_hi) == 2:
        out += (f"Probe rule (estimate, from the separate figures and the probe): AU during a "
                f"save {_pct(rule['au_during'])} ({_pct(lo_hi[0])}–{_pct(lo_hi[1])}), the "
                f"loader's read then {_rate(rule.get('read_during_bps'))}. ")  # fmt: skip
    return out


def _config(d: DuringCheckpointBlock) -> str:
    every = f", again every {d.every:g}{d.every_unit}" if _is_num(d.every) else ", once"
    how = f"paced at {_rate(d.rate_bps)}" if _is_num(d.rate_bps) else "as fast as it can"
    alone = d.alone or {}
    size = format_bytes(float(d.bytes)) if _is_num(d.bytes) else "-"
    return (
        f"{d.model} at scale {d.scale:g}: {size} in {d.files} files, {d.writers} writers, "
        f"{how}; first at {d.at:g}{d.at_unit}{every}; alone {_rate(alone.get('write_bps'))}"
    )


# a window's name is never cut; its time span may be, to 8 characters
COLUMNS = (
    Column("Window"), Column("Time", cut=8), Column("Steps", "r"), Column("AU", "r"),
    Column("Wait p50", "r"), Column("Wait p99", "r"), Column("Read", "r"), Column("Write", "r"),
    Column("vs alone", "r"),
)  # fmt: skip


def tables(loader: dict[str, Any] | None) -> list[Section]:
    """The during-checkpoint table, [] without the block."""
    ld = LoaderBlock.from_dict(loader) if isinstance(loader, dict) else None
    d = ld.during_checkpoint if ld is not None else None
    if d is None:
        return []
    saves = {s.checkpoint: s for s in d.checkpoints if hasattr(s, "checkpoint")}
    other = dict(d.beside) if d.beside else None
    rows = [
        _window_row(w, saves, bool(other)) for w in d.windows if isinstance(w, DuringWindowBlock)
    ]
    rows += _pooled(d.summary, other)
    note = f"Checkpoint: {_config(d)}. " if _is_num(d.scale) else ""
    loop = d.loop or {}
    if loop:
        note += (f"From a separate loader run of {loop.get('epochs')} epochs × {loop.get('steps')} "
                 f"steps (AU {_pct(loop.get('au'))} over it), the save sized from "
                 f"{loop.get('sized_from')}: {loop.get('basis')}. ")  # fmt: skip
    mi = d.model_interval or {}
    if _is_num(mi.get("au_interval")):
        note += (f"Contention model over {mi.get('interval_from')} "
                 f"({_secs(mi.get('interval_s'))}, estimate): AU {_pct(mi['au_interval'])}, the "
                 f"full checkpoint's write {_secs(mi.get('write_s'))} of it. ")  # fmt: skip
    if other:
        note += (f"Beside it another job: {other.get('kind')} "
                 f"{_rate(other.get('rate_bps')) if _is_num(other.get('rate_bps')) else 'max'}, "
                 f"alone {_rate(other.get('alone_bps'))}, achieved {_rate(other.get('achieved_bps'))} "
                 f"over the loop ({_times(other.get('vs_alone'))} alone; column Other). ")  # fmt: skip
    tr = d.torchrun or {}
    if tr:
        note += (f"Under torchrun: {tr.get('ranks')} ranks, each writing its shard; their "
                 f"saves' starts within {_secs(tr.get('start_skew_s'))}. ")  # fmt: skip
    m = d.model_au or {}
    if _is_num(m.get("au_share_rule")):
        note += (
            f"Contention model over the loop (estimate): AU {_pct(m.get('au_from_windows'))} from "
            f"the windows, {_pct(m.get('au_share_rule'))} from the separate measurements alone "
            f"(independent reads and writes); measured {_pct(m.get('au_measured'))}. "
        )
    note += _probe_note(d.read_probe or {}, m.get("probe_rule") or {})
    columns = COLUMNS + ((Column("Other", "r"),) if other else ())
    return [Section(TITLE, Table(columns, rows), note + (d.basis or ""))]
