"""The checkpoint section of every report: the ``checkpoint`` block of result.json as tables.

``tables(block)`` gives two label/value tables (what was measured; the checkpoint model's
estimates for the full-size checkpoint, labelled), as plain dicts (``title``, ``rows`` of
label and value, ``note``) that the report renders as label/value blocks, so the terminal,
markdown and HTML renderings show the very same strings.
The figure helpers (``pct``, ``dur``, ``gib``, ``goodput_text``, ...) are the only formatting of
checkpoint figures: ``ckpt_qualify``'s verdict lines use them too. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.units import format_bytes, format_rate, format_seconds
from ..result.blocks import (
    CheckpointBlock,
    CkptIoBlock,
    CkptMeasuredBlock,
    CkptModelBlock,
    SpreadBlock,
)

DAY_S = 86_400.0
HOUR_S = 3_600.0

MEASURED_TITLE = "Checkpoint (measured)"
ESTIMATE_TITLE = "Checkpoint estimates (model output, not measured)"
ESTIMATE_NOTE = (
    "The checkpoint model applied to the rates measured above, for the full-size checkpoint "
    "at its rank count; see Basis."
)

_IO = {
    "save": "Save (torch.save + fsync)",
    "load": "Load (torch.load)",
    "dcp_save": "Save (DCP)",
    "dcp_load": "Load (DCP)",
}


def pct(x: float | None) -> str:
    """A fraction as a percentage with one decimal: ``97.1 %``."""
    return "-" if x is None else f"{x * 100:.1f} %"


def dur(s: float | None) -> str:
    """Seconds as the report writes durations: days and hours past two of them."""
    if s is None:
        return "-"
    if s >= 2 * DAY_S:
        return f"{s / DAY_S:.1f} d"
    if s >= 2 * HOUR_S:
        return f"{s / HOUR_S:.1f} h"
    return format_seconds(s)


def gib(bps: float | None) -> str:
    """GiB/s, as MLPerf Storage reports checkpoints (three significant digits); ``-`` for none."""
    if bps is None:
        return "-"
    return f"{bps / (1 << 30):.3g} GiB/s"


def _io_text(io: CkptIoBlock) -> str:
    sp = io.rank_seconds
    scope = io.rank_seconds_scope if io.has("rank_seconds_scope") else "all ranks"
    text = (
        f"{gib(io.bandwidth_bps)}: {format_bytes(io.bytes)} in {io.files} files by "
        f"{io.ranks} ranks in {format_seconds(io.seconds)} (size ÷ slowest rank); "
        f"cache {io.cache}"
    )
    if isinstance(sp, SpreadBlock) and not sp.empty:
        text += (
            f"; per rank {format_seconds(sp.min)} / {format_seconds(sp.median)} / "
            f"{format_seconds(sp.max)} (min/median/max"
            + ("" if scope == "all ranks" else f", {scope}")
            + ")"
        )
    return text


def _measured_rows(block: CheckpointBlock) -> list[list[str]]:
    m = block.model if isinstance(block.model, CkptModelBlock) else CkptModelBlock()
    got = block.measured if isinstance(block.measured, CkptMeasuredBlock) else CkptMeasuredBlock()
    rows = [
        [
            "Model",
            f"{m.name}: {format_bytes(m.total_bytes)} over {m.ranks} ranks "
            f"({format_bytes(m.model_bytes)} weights + "
            f"{format_bytes(m.optimizer_bytes)} optimizer state)"
            + (f"; {m.source}" if m.source else ""),
        ],
        ["Scale", f"{block.scale:.3g} of every rank's shard written"],
    ]
    rows += [[_IO[key], _io_text(io)] for key, io in got.io()]
    base = got.baseline
    if base:
        ratio = base.get("save_ratio")
        rows.append(
            [
                "Plain write, same files",
                gib(base["bandwidth_bps"])
                + (f"; torch.save reached {ratio * 100:.0f} % of it" if ratio else ""),
            ]
        )
    if got.copy_bps:
        rows.append(["Snapshot copy", f"{format_rate(got.copy_bps)} ({got.copy_basis})"])
    if got.create_per_s:
        rows.append(
            [
                "Small files",
                f"{got.create_per_s:,.0f} creates/s, {got.open_per_s or 0:,.0f} opens/s",
            ]
        )
    return rows


def interval_text(pl: dict[str, Any]) -> str:
    """``1.2 h (exact optimum; Daly 1.2 h; Young 1.3 h)``; an asynchronous plan's interval
    raised to the write it must wait for says so."""
    if pl["min_interval_s"] and pl["best_interval_s"] <= pl["min_interval_s"]:
        how = f"raised to the write, {dur(pl['min_interval_s'])}"
    else:
        how = "exact optimum"
    return f"{dur(pl['best_interval_s'])} ({how}; Daly {dur(pl['daly_s'])}; Young {dur(pl['young_s'])})"


def goodput_text(pl: dict[str, Any]) -> str:
    """Goodput at the best interval, and at the user's when given."""
    text = f"{pct(pl['best_goodput'])} at the best interval {dur(pl['best_interval_s'])}"
    if pl["best_goodput"] <= 0:
        text += " (no interval makes progress: stall and recovery too long for this MTBF)"
    if pl.get("user_interval_s"):
        text += f"; {pct(pl['user_goodput'])} at your interval {dur(pl['user_interval_s'])}"
    return text


def stall_text(st: dict[str, Any]) -> str:
    return (
        f"{dur(st['sync_s'])} synchronous (data {dur(st['bandwidth_s'])} + file creates "
        f"{dur(st['metadata_s'])})"
    )


def recovery_text(rec: dict[str, Any]) -> str:
    restart = (
        f"restart {dur(rec['restart_s'])} as given" if rec["restart_s"] else "no restart cost given"
    )
    return f"{dur(rec['total_s'])} (load {dur(rec['load_s'])}; {restart})"


def capacity_text(cap: dict[str, Any]) -> str:
    parts = [f"{format_bytes(cap['checkpoint_bytes'])} per checkpoint"]
    if cap.get("fit_free") is not None:
        parts.append(f"{cap['fit_free']} fit in the target's free space")
    if cap.get("fit_capacity") is not None:
        parts.append(f"{cap['fit_capacity']} in {format_bytes(cap['capacity_bytes'])}")
    if cap.get("keep_last") is not None:
        fits = {True: "fits", False: "does NOT fit", None: "?"}[cap["retention_fits"]]
        parts.append(
            f"keep-last {cap['keep_last']} needs {format_bytes(cap['needed_bytes'])} ({fits})"
        )
    return "; ".join(parts)


def metadata_text(est: Mapping[str, Any]) -> str:
    dcp = est["stall_dcp"]
    verdict = "metadata dominates" if dcp["metadata_dominates"] else "bandwidth dominates"
    cross = est.get("metadata_dominates_from_ranks")
    return (
        f"DCP layout, {dcp['files']} files: creates {dur(dcp['metadata_s'])} vs data "
        f"{dur(dcp['bandwidth_s'])} ({verdict}"
        + (f"; creates would dominate from {cross:,} ranks" if cross else "")
        + ")"
    )


def _estimate_rows(est: Mapping[str, Any]) -> list[list[str]]:
    lay, st, rates = est["layout"], est["stall"], est["rates"]
    rows = [
        ["Ranks", f"{lay['ranks']} ({lay['writers']} save data)"],
        [
            "Bytes per checkpoint",
            f"{format_bytes(lay['total_bytes'])} in {st['files']} files (largest rank "
            f"{format_bytes(lay['max_rank_bytes'])})",
        ],
        ["Save / load rate", f"{gib(rates['write_bps'])} / {gib(rates['read_bps'])} (data only)"],
        ["Stall per checkpoint", stall_text(st)],
    ]
    if st.get("snapshot_s") is not None:
        rows.append(
            [
                "Stall, asynchronous",
                f"{dur(st['snapshot_s'])} snapshot, then {dur(st['write_s'])} of background "
                "write before the next may start",
            ]
        )
    rows.append(["Recovery", recovery_text(est["recovery"])])
    rows.append(["MTBF", f"{dur(est['mtbf_s'])}: {est['mtbf_basis']}"])
    for key, what in (("sync", "synchronous"), ("async", "asynchronous")):
        pl = est.get(key)
        if pl:
            rows.append([f"Interval, {what}", interval_text(pl)])
            rows.append([f"Goodput, {what}", goodput_text(pl)])
    rows.append(["Capacity", capacity_text(est["capacity"])])
    rows.append(["Metadata vs bandwidth", metadata_text(est)])
    rows.append(["Basis", "; ".join(est["basis"])])
    return rows


def tables(block: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The checkpoint tables (title, label/value rows, note), [] without a checkpoint block."""
    if not block:
        return []
    ck = CheckpointBlock.from_dict(block)
    out = [{"title": MEASURED_TITLE, "rows": _measured_rows(ck), "note": ""}]
    if ck.estimate:
        rows, note = _estimate_rows(ck.estimate), ESTIMATE_NOTE
    else:
        missing = ck.estimate_missing if ck.has("estimate_missing") else ""
        rows, note = [["Estimate", f"none: {missing}"]], ""
    out.append({"title": ESTIMATE_TITLE, "rows": rows, "note": note})
    return out


PLAN_TITLE = "Checkpoint plan (planned from the given rates, not measured)"


def plan_text(est: dict[str, Any], width: int = 100) -> str:
    """The estimate rows of a plan (``ckpt_estimate.plan``) as label/value lines."""
    import textwrap

    rows = _estimate_rows(est)
    w = max(len(r[0]) for r in rows)
    lines = [PLAN_TITLE]
    for label, value in rows:
        first = "  " + label.ljust(w) + "  "
        lines += textwrap.wrap(
            value, width=width, initial_indent=first, subsequent_indent=" " * len(first),
            break_on_hyphens=False,
        ) or [first.rstrip()]  # fmt: skip
    return "\n".join(lines)
