"""The storage a cluster needs (``iobench plan``): the data loader's read bandwidth and sample
rate (``model.inverse``), the checkpoint's write/read bandwidth and file rates
(``checkpoint.inverse``), and capacity, each figure with its basis; the plan file's shape.

Pure: profiles and layouts in, a frozen ``ClusterPlan`` out; ``to_dict`` is the plan file
(``kind`` ``iobench-plan``, ``version`` 1) that ``qualify --require PLAN.json`` reads: its
``requirements`` are the figures qualify checks, each keyed by the ``qualify --require`` key
that names the measured figure. No I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..core.errors import UsageError
from ..core.units import format_bytes, format_count, format_rate
from ..model.inverse import ReadPlan, min_read_bandwidth
from ..model.starvation_inputs import LoaderParams, dataset_size
from . import model as cm
from .inverse import CheckpointPlan, plan_checkpoint

PLAN_KIND = "iobench-plan"
PLAN_VERSION = 1
PLAN_LABEL = "planned (no I/O: the models inverted, nothing measured)"

#: What ``qualify --require PLAN.json`` checks: key → (what it is, unit).
PLAN_KEYS: dict[str, tuple[str, str]] = {
    "dataset_read": ("dataset read bandwidth", "B/s"),
    "samples": ("dataset samples per second", "ops/s"),
    "ckpt_save": ("checkpoint write bandwidth", "B/s"),
    "creates": ("checkpoint file creates per second", "ops/s"),
    "ckpt_load": ("checkpoint read bandwidth", "B/s"),
    "reads": ("checkpoint file opens per second", "ops/s"),
    "free": ("capacity (free space)", "B"),
}
#: Accelerators assumed per client host for the dataset's memory term when --hosts is not given.
GPUS_PER_HOST = 8


@dataclass(frozen=True)
class Figure:
    """One planned figure: what, how much, its unit, the qualify key that checks it, why."""

    what: str
    value: float
    unit: str
    key: str | None
    basis: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ClusterPlan:
    inputs: dict[str, Any]
    loader: ReadPlan | None
    checkpoint: CheckpointPlan | None
    dataset_bytes: int
    capacity_bytes: int
    figures: tuple[Figure, ...]

    def to_dict(self) -> dict[str, Any]:
        """The plan file: what qualify reads (``requirements``) and everything behind it."""
        return {
            "kind": PLAN_KIND,
            "version": PLAN_VERSION,
            "label": PLAN_LABEL,
            "inputs": self.inputs,
            "requirements": [
                {"key": f.key, "value": f.value, "unit": f.unit, "what": f.what, "basis": f.basis}
                for f in self.figures
                if f.key
            ],  # fmt: skip
            "figures": [f.to_dict() for f in self.figures],
            "loader": self.loader.to_dict() if self.loader else None,
            "checkpoint": self.checkpoint.to_dict() if self.checkpoint else None,
            "dataset_bytes": self.dataset_bytes,
            "capacity_bytes": self.capacity_bytes,
        }


def relayout(spec: cm.ModelSpec, gpus: int) -> tuple[cm.ModelSpec, str]:
    """The model laid out on ``gpus`` ranks: its architecture with DP = gpus ÷ (TP × PP) when
    that divides, else its own layout (the files then are its rank count's)."""
    a = spec.arch
    if a is None:
        return (
            spec,
            f"{spec.name}'s own layout over {spec.ranks:,} ranks (sizes given, no architecture)",
        )
    if gpus % a.mp or gpus == a.ranks:
        why = "" if gpus == a.ranks else f" ({gpus:,} is not a multiple of TP×PP {a.mp})"
        return spec, f"{spec.name}'s layout over {a.ranks:,} ranks{why}"
    arch = replace(a, dp=gpus // a.mp)
    return cm.from_architecture(spec.name, arch, spec.basis), (
        f"{spec.name} on {gpus:,} ranks: TP {a.tp} × PP {a.pp} × DP {arch.dp} (the model's DP "
        f"{a.dp} raised to fill the cluster; the same bytes, more optimizer files)"
    )


@dataclass(frozen=True)
class LoaderInput:
    """The data loader side of a plan: the profile's loop, its sample spread, the threshold."""

    profile: str
    params: LoaderParams
    sample_sd: float
    threshold: float


@dataclass(frozen=True)
class CheckpointInput:
    """The checkpoint side of a plan."""

    spec: cm.ModelSpec
    target: float
    mtbf_s: float
    mtbf_basis: str
    interval_s: float | None = None
    restart_s: float = 0.0
    load_s: float | None = None
    metadata_share: float = 0.1
    retention: int = 1
    host_copy_bps: float | None = None  # asynchronous saves: the snapshot's rate per GPU
    host_copy_basis: str = ""


def _dataset(
    ld: LoaderInput, gpus: int, dataset_bytes: int | None, hosts: int | None, host_mem: int
) -> tuple[int, str]:
    if dataset_bytes is not None:
        return dataset_bytes, f"the dataset as given (--dataset {format_bytes(dataset_bytes)})"
    p = ld.params
    n_hosts = hosts or math.ceil(gpus / GPUS_PER_HOST)
    ds = dataset_size(p.batch_size, gpus, n_hosts, host_mem, int(p.sample_bytes),
                      p.samples_per_file)  # fmt: skip
    mem = (
        f"5 × {n_hosts} hosts × {format_bytes(host_mem)}"
        if host_mem
        else "the 5× host memory term left out (no --host-mem)"
    )
    return ds.total_bytes, (
        f"the MLPerf Storage minimum dataset for {gpus:,} accelerators: {ds.min_samples:,} "
        f"samples (500 steps × batch {p.batch_size} × {gpus:,}; {mem}; the {ds.winner} term "
        f"wins) in {ds.files:,} files"
    )


def plan_cluster(
    gpus: int, accelerator: str, loader: LoaderInput | None, ckpt: CheckpointInput | None, *,
    dataset_bytes: int | None = None, hosts: int | None = None, host_mem: int = 0,
    inputs: dict[str, Any] | None = None,
) -> ClusterPlan:  # fmt: skip
    """Every figure of the plan, in the order it prints."""
    if loader is None and ckpt is None:
        raise UsageError("a plan needs --profile (the data loader) or --model (checkpoints)",
                         hint="e.g. --profile unet3d-h100 --model llama3-70b")  # fmt: skip
    figs: list[Figure] = []
    rp = cp = None
    data = 0
    data_basis = ""
    if loader is not None:
        rp = min_read_bandwidth(loader.params, gpus, loader.threshold, sample_sd=loader.sample_sd)
        figs += _loader_figures(rp, loader, accelerator)
        data, data_basis = _dataset(loader, gpus, dataset_bytes, hosts, host_mem)
    elif dataset_bytes is not None:
        data, data_basis = dataset_bytes, f"the dataset as given ({format_bytes(dataset_bytes)})"
    if ckpt is not None:
        spec, layout_note = relayout(ckpt.spec, gpus)
        lay = cm.layout(spec)
        cp = plan_checkpoint(
            spec.name, lay, ckpt.target, ckpt.mtbf_s, ckpt.mtbf_basis,
            interval_s=ckpt.interval_s, restart_s=ckpt.restart_s, load_s=ckpt.load_s,
            metadata_share=ckpt.metadata_share, retention=ckpt.retention,
            host_copy_bps=ckpt.host_copy_bps, host_copy_basis=ckpt.host_copy_basis,
        )  # fmt: skip
        figs += _checkpoint_figures(cp, layout_note)
        if rp is not None and cp.mode == "async":
            figs.append(_combined(rp, cp))
    cap = data + (cp.capacity_bytes if cp else 0)
    parts = [f"{cp.retention} checkpoints kept + the next one written before the oldest "
             f"goes: {cp.retention + 1} × {format_bytes(cp.checkpoint_bytes)}"] if cp else []  # fmt: skip
    parts += [f"{format_bytes(data)} of dataset ({data_basis})"] if data_basis else []
    figs.append(Figure("capacity (free space)", float(cap), "B", "free", "; ".join(parts)))
    return ClusterPlan(dict(inputs or {}), rp, cp, data, cap, tuple(figs))


def _loader_figures(rp: ReadPlan, ld: LoaderInput, accelerator: str) -> list[Figure]:
    who = f"{rp.gpus:,} × {accelerator} on {ld.profile} at AU ≥ {rp.threshold:.1%}"
    per = format_bytes(ld.params.sample_bytes)
    spf = ld.params.samples_per_file
    return [
        Figure("dataset read bandwidth", rp.bandwidth_bps, "B/s", "dataset_read",
               f"{who}: {rp.basis}"),
        Figure("dataset samples per second", rp.samples_per_s, "ops/s", "samples",
               f"the read bandwidth ÷ {per} per sample"),
        Figure("dataset files per second", rp.files_per_s, "ops/s", None,
               f"the read bandwidth ÷ {spf:,} sample(s) of {per} per file (qualify's dataset "
               "sweep reads one sample per file: checked as samples per second)"),
    ]  # fmt: skip


def _combined(rp: ReadPlan, cp: CheckpointPlan) -> Figure:
    """Asynchronous saves write while the loader reads: the two bandwidths together."""
    share = cp.write_s / cp.interval_s
    return Figure(
        "dataset read + checkpoint write bandwidth", rp.bandwidth_bps + cp.write_bps, "B/s",
        None,
        f"the asynchronous write runs beside the loader for {share:.0%} of each interval "
        f"({cp.write_s:.4g} s of {cp.interval_s:.4g} s): where reads and writes share one "
        "bandwidth, the share rule of checkpoint/contention.py keeps both planned rates only "
        "when the storage's combined bandwidth is at least their sum (else the loader's AU "
        "falls during the write, not counted here); with independent read and write limits "
        "(separate throttles, a full-duplex link) the two figures alone suffice. Not checked "
        "by qualify: `iobench loader --during-checkpoint` measures the overlap",
    )  # fmt: skip


def _checkpoint_figures(cp: CheckpointPlan, layout_note: str) -> list[Figure]:
    basis = "; ".join(cp.basis[:2])
    meta = f"{cp.files:,} files per checkpoint in {cp.metadata_share:.0%} of the "
    save = (
        f"{cp.stall_s:.4g} s stall" if cp.mode == "sync" else f"{cp.write_s:.4g} s background write"
    )
    out = [
        Figure("checkpoint write bandwidth", cp.write_bps, "B/s", "ckpt_save",
               f"{layout_note}; {basis}"),
    ]  # fmt: skip
    if cp.create_per_s is not None:
        out.append(Figure("checkpoint file creates per second", cp.create_per_s, "ops/s",
                          "creates", meta + save))  # fmt: skip
    load = "the stated recovery" if cp.load_given else "the load, as long as a save"
    out.append(Figure("checkpoint read bandwidth", cp.read_bps, "B/s", "ckpt_load",
                      f"{format_bytes(cp.checkpoint_bytes)} within {cp.load_s:.4g} s ({load}),"
                      f" {1 - cp.metadata_share:.0%} of it on the bytes"))  # fmt: skip
    if cp.open_per_s is not None:
        out.append(Figure("checkpoint file opens per second", cp.open_per_s, "ops/s", "reads",
                          meta + f"{cp.load_s:.4g} s load"))  # fmt: skip
    return out


def _value(f: Figure) -> str:
    if f.unit == "B/s":
        return format_rate(f.value)
    if f.unit == "ops/s":
        return format_count(f.value, "/s")
    return format_bytes(f.value)


PLAN_TITLE = "Storage plan (planned: the models inverted, nothing measured)"


def plan_text(plan: ClusterPlan) -> str:
    """The plan as a person reads it: the figures, their basis, the round trips."""
    rows = [(f.what, _value(f), f.key or "-") for f in plan.figures]
    w0 = max(len("Requirement"), *(len(r[0]) for r in rows))
    w1 = max(len("Value"), *(len(r[1]) for r in rows))
    lines = [PLAN_TITLE, _heading(plan), ""]
    lines.append(f"  {'Requirement':<{w0}}  {'Value':>{w1}}  qualify --require key")
    lines += [f"  {a:<{w0}}  {b:>{w1}}  {c}" for a, b, c in rows]
    lines += ["", "Round trip (the forward models at the planned figures)"]
    if plan.loader is not None:
        rp = plan.loader
        lines.append(f"  AU at the planned read bandwidth: {rp.au:.2%}; at 1 % less: "
                     f"{rp.au_below:.2%} (threshold {rp.threshold:.1%})")  # fmt: skip
    if plan.checkpoint is not None:
        cp = plan.checkpoint
        at = "your interval" if cp.interval_given else "the best interval"
        how = (
            f"stall {cp.stall_s:.4g} s"
            if cp.mode == "sync"
            else f"asynchronous: snapshot stall {cp.stall_s:.4g} s at "
            f"{format_rate(cp.host_copy_bps or 0)} per GPU, background write {cp.write_s:.4g} s"
        )
        lines.append(
            f"  goodput at the planned rates: {cp.goodput:.3%} at {at} ({cp.interval_s:,.0f} s,"
            f" {how}, MTBF {cp.mtbf_s:,.0f} s); at 1 % less write "
            f"bandwidth: {cp.goodput_below:.3%} (target {cp.target:.2%}; first order "
            f"{cp.goodput_first_order:.3%})"
        )
        lines.append(f"  MTBF: {cp.mtbf_basis}")
    lines += ["", "Basis"]
    lines += [f"  {f.what}: {f.basis}" for f in plan.figures]
    if plan.checkpoint is not None:
        lines += [f"  checkpoint: {b}" for b in plan.checkpoint.basis[2:]]
    return "\n".join(lines)


def _heading(plan: ClusterPlan) -> str:
    i = plan.inputs
    parts = [f"{i.get('gpus', 0):,} × {i.get('accelerator') or 'accelerator'}"]
    if plan.loader is not None:
        parts.append(f"{i.get('profile')} at AU ≥ {plan.loader.threshold:.1%}")
    if plan.checkpoint is not None:
        mode = ", asynchronous saves" if plan.checkpoint.mode == "async" else ""
        parts.append(f"{plan.checkpoint.model} at goodput ≥ {plan.checkpoint.target:.2%}{mode}")
    return "For " + ", ".join(parts)
