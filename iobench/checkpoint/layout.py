"""A transformer checkpoint's per-rank layout, sized as MLPerf Storage v2.0's DLIO sizes it.

Pure arithmetic from the architecture (layers, hidden size, FFN size, heads, KV heads,
vocabulary), the parallelism (TP × PP × DP) and the ZeRO stage; no I/O. This reproduces what
``dlio_benchmark/checkpointing/base_checkpointing.py`` allocates and saves (argonne-lcf/
dlio_benchmark e1919d7, the code ``mlpstorage checkpointing`` runs with
``configs/dlio/workload/llama3_*.yaml`` of mlcommons/storage caa90c9):

- **Rank numbering**: tensor-parallel fastest: ``tp_i = r % tp``, ``pp_i = (r // tp) % pp``,
  ``dp_i = r // (tp·pp)``, the model-parallel index ``mp_i = r % (tp·pp)``.
- **Layers**: index 0 is the embedding, 1..L the transformer layers, L+1 the output head,
  L+2 the final norm. The L transformer layers are dealt to the PP stages (L // pp each, the
  first L % pp stages one more); stage 0 also holds layer 0, the last stage L+1 and L+2.
- **Elements of a layer** (``sf`` = dp under ZeRO-3, else 1; every ``//`` an integer division
  as DLIO does it): embedding and head ``h·V // tp // sf``; final norm ``h // sf``; a
  transformer layer ``h//sf`` (input norm), ``h·(h + 2·d_kv) // tp // sf`` (QKV, ``d_kv =
  (h // heads)·kv_heads``), ``h·h // tp // sf`` (output projection), ``h//sf`` (norm),
  ``2·h·f // tp // sf`` (gated FFN in), ``h·f // tp // sf`` (FFN out); times the model
  datatype's bytes.
- **Parameters** P: ``2·V·h + L·(2h + h(h + 2 d_kv) + h² + 3 h f) + h``.
- **Optimizer state** of a saving rank: ``n = P // (dp·mp)`` under ZeRO ≥ 1 (``P // mp``
  without ZeRO), three groups of ``n + 5h`` elements of the optimizer datatype.
- **Who saves what**: without ZeRO only ranks 0..mp−1 save (weights and optimizer state, one
  file each); ZeRO-1/2: data-parallel rank 0 of every slice saves the weights — one file per
  layer when PP > 1, one file otherwise — and every rank its optimizer file; ZeRO-3: every rank
  saves one weights file (its 1/dp) and one optimizer file.
- **MLPerf subset mode** (``mlpstorage … --num-processes 8`` below the closed count): DP is
  held at its closed value and only ranks 0..k−1 run, so they write exactly those ranks' files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..core.errors import UsageError
from ..model.starvation_inputs import MAX_MODEL_GPUS

#: Most transformer layers a model file may give (the largest MLPerf model has 128; a
#: layout of this many is summed in about 3 s here).
MAX_LAYERS = 100_000

DATATYPE_BYTES: dict[str, int] = {"int8": 1, "uint8": 1, "fp16": 2, "bf16": 2, "fp32": 4, "fp64": 8}
Kind = Literal["model", "optimizer"]


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer and how it is parallelised, as DLIO's workload YAML gives it."""

    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    kv_heads: int
    vocab: int
    tp: int = 1
    pp: int = 1
    dp: int = 1
    zero: int = 1
    model_datatype: str = "fp16"
    optimizer_datatype: str = "fp32"

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "tp", "pp",
                    "dp"):  # fmt: skip
            v = getattr(self, key)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise UsageError(f"architecture: {key} must be a whole number >= 1, got {v!r}")
        if self.zero not in (0, 1, 2, 3):
            raise UsageError(f"architecture: zero stage must be 0, 1, 2 or 3, got {self.zero!r}")
        if self.heads > self.hidden or self.kv_heads > self.heads:
            raise UsageError(
                f"architecture: {self.heads} heads / {self.kv_heads} KV heads do not fit a "
                f"hidden size of {self.hidden}",
                hint="heads <= hidden size and kv_heads <= heads",
            )
        if self.pp > self.layers:
            raise UsageError(f"architecture: pp {self.pp} exceeds the {self.layers} layers")
        # the layout is summed per rank and per layer: bounded, so that no model file can
        # make planning run for hours (dp = 10^9: 30 s and more; layers = 10^9: hours)
        if self.ranks > MAX_MODEL_GPUS:
            raise UsageError(
                f"architecture: dp × tp × pp = {self.ranks:,} ranks, more than the "
                f"{MAX_MODEL_GPUS:,} accelerators iobench models",
                hint="give dp, tp and pp of a real job",
            )
        if self.layers > MAX_LAYERS:
            raise UsageError(
                f"architecture: {self.layers:,} layers, more than {MAX_LAYERS:,}",
                hint="give the model's transformer layers (MLPerf's largest has 128)",
            )
        for key in ("model_datatype", "optimizer_datatype"):
            if getattr(self, key) not in DATATYPE_BYTES:
                raise UsageError(
                    f"architecture: {key} {getattr(self, key)!r} is not known",
                    hint=f"expected one of: {', '.join(DATATYPE_BYTES)}",
                )

    @property
    def mp(self) -> int:
        return self.tp * self.pp

    @property
    def ranks(self) -> int:
        return self.dp * self.mp

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class RankFile:
    """One file a rank saves: its name (DLIO's, without the step folder), bytes and kind."""

    name: str
    nbytes: int
    kind: Kind


def num_parameters(a: Architecture) -> int:
    """The parameter count DLIO derives from the architecture."""
    h, d_kv = a.hidden, (a.hidden // a.heads) * a.kv_heads
    per_layer = h + h * (h + 2 * d_kv) + h * h + h + 2 * a.ffn_hidden * h + a.ffn_hidden * h
    return 2 * a.vocab * h + per_layer * a.layers + h


def layer_elements(a: Architecture, index: int) -> tuple[int, ...]:
    """Elements of layer ``index`` (0 embedding, 1..L transformer, L+1 head, L+2 norm) one
    model-parallel rank holds."""
    if not 0 <= index <= a.layers + 2:
        raise UsageError(f"layer {index} is outside 0..{a.layers + 2}")
    sf = a.dp if a.zero == 3 else 1
    h, t = a.hidden, a.tp
    if index in (0, a.layers + 1):
        return (h * a.vocab // t // sf,)
    if index == a.layers + 2:
        return (h // sf,)
    d_kv = (h // a.heads) * a.kv_heads
    return (
        h // sf, h * (h + 2 * d_kv) // t // sf, h * h // t // sf, h // sf,
        h * 2 * a.ffn_hidden // t // sf, h * a.ffn_hidden // t // sf,
    )  # fmt: skip


def layer_bytes(a: Architecture, index: int) -> int:
    return sum(layer_elements(a, index)) * DATATYPE_BYTES[a.model_datatype]


def stage_layers(a: Architecture, pp_rank: int) -> range:
    """The layer indices pipeline stage ``pp_rank`` holds."""
    if not 0 <= pp_rank < a.pp:
        raise UsageError(f"pipeline stage {pp_rank} is outside 0..{a.pp - 1}")
    per, rem = divmod(a.layers, a.pp)
    if pp_rank < rem:
        start = pp_rank * (per + 1) + 1
        end = start + per
    else:
        start = rem * (per + 1) + (pp_rank - rem) * per + 1
        end = start + per - 1
    if pp_rank == a.pp - 1:
        end = a.layers + 2
    if pp_rank == 0:
        start = 0
    return range(start, end + 1)


def optimizer_bytes(a: Architecture) -> int:
    """Bytes of one saving rank's optimizer file (0 when the share rounds to nothing)."""
    n = num_parameters(a) // (a.dp * a.mp if a.zero > 0 else a.mp)
    if n <= 0:
        return 0
    return (3 * n + 3 * 5 * a.hidden) * DATATYPE_BYTES[a.optimizer_datatype]


def rank_files(a: Architecture, rank: int) -> tuple[RankFile, ...]:
    """The files ``rank`` saves, in DLIO's order (weights first), with DLIO's names."""
    if not 0 <= rank < a.ranks:
        raise UsageError(f"rank {rank} is outside 0..{a.ranks - 1}")
    mp_i, dp_i = rank % a.mp, rank // a.mp
    pp_i = (rank // a.tp) % a.pp
    if a.zero == 0 and rank >= a.mp:
        return ()  # the other data-parallel replicas hold copies and save nothing
    layers = stage_layers(a, pp_i)
    zname = f"zero_pp_rank_{dp_i}_mp_rank_{mp_i}"
    out: list[RankFile] = []
    if a.zero in (1, 2):
        if dp_i == 0:
            if a.pp > 1:
                for i in layers:
                    out.append(RankFile(f"layer_{i}-model_{mp_i}_model_states.pt",
                                        layer_bytes(a, i), "model"))  # fmt: skip
            else:
                total = sum(layer_bytes(a, i) for i in layers)
                out.append(RankFile(f"model_{mp_i}_model_states.pt", total, "model"))
    else:
        total = sum(layer_bytes(a, i) for i in layers)
        out.append(RankFile(f"{zname}_model_states.pt", total, "model"))
    opt = optimizer_bytes(a)
    if opt > 0:
        out.append(RankFile(f"{zname}_optim_states.pt", opt, "optimizer"))
    return tuple(f for f in out if f.nbytes > 0)


@dataclass(frozen=True)
class LayoutSummary:
    """Totals of a run's ranks: bytes, files, and the per-rank extremes over the savers."""

    ranks: int
    writers: int
    model_bytes: int
    optimizer_bytes: int
    files: int
    max_rank_bytes: int
    min_rank_bytes: int
    max_rank_files: int

    @property
    def total_bytes(self) -> int:
        return self.model_bytes + self.optimizer_bytes

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__) | {"total_bytes": self.total_bytes}


def summarize(a: Architecture, ranks: int | None = None) -> LayoutSummary:
    """The layout of ranks 0..ranks−1 (all of them by default; fewer: MLPerf's subset mode)."""
    n = a.ranks if ranks is None else ranks
    if not 1 <= n <= a.ranks:
        raise UsageError(f"a subset of {n} ranks does not fit the {a.ranks} of the layout",
                         hint=f"give 1..{a.ranks}")  # fmt: skip
    # ranks with the same (pp stage, dp==0, writer) save the same sizes: compute each once
    cache: dict[tuple[int, bool, bool], tuple[int, int, int]] = {}
    writers = files = model = optim = hi = hi_files = 0
    lo: int | None = None
    for r in range(n):
        key = ((r // a.tp) % a.pp, r < a.mp, a.zero == 0 and r >= a.mp)
        if key not in cache:
            fs = rank_files(a, r)
            cache[key] = (
                sum(f.nbytes for f in fs if f.kind == "model"),
                sum(f.nbytes for f in fs if f.kind == "optimizer"),
                len(fs),
            )
        m, o, k = cache[key]
        if k == 0:
            continue
        writers += 1
        files += k
        model += m
        optim += o
        hi, hi_files = max(hi, m + o), max(hi_files, k)
        lo = m + o if lo is None else min(lo, m + o)
    return LayoutSummary(n, writers, model, optim, files, hi, lo or 0, hi_files)
