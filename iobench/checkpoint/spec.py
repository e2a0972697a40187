"""Checkpoint profiles (``workloads/checkpoints/*.toml``) loaded into ``ckpt_model.ModelSpec``.

Three forms, validated at load time the way workload and profile files are (an unknown key, a
wrong type or a bad unit is an error naming the file and the key):

- **sizes** (MLPerf Storage's figures): ``model_size`` and ``optimizer_size`` of one checkpoint
  and the ``ranks`` that share it, every rank saving 1/ranks of each;
- **parameters**: ``params`` with bytes per parameter for the weights and the optimizer state,
  and ``dp`` × ``tp`` × ``pp`` ranks with a ``sharding`` (none | optimizer | full);
- **architecture** (what MLPerf Storage v2.0 runs): ``layers``, ``hidden_size``,
  ``ffn_hidden_size``, ``attention_heads``, ``kv_heads``, ``vocab_size``, ``tp``/``pp``/``dp`` and
  ``zero_stage``, sized and laid out per rank as DLIO does it (``ckpt_layout``); ``published``
  names the rounded figure the MLPerf sources print, kept beside it in the basis.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import SpecError, UsageError
from ..spec.workload import Param, _read_toml, coerce_table, find_file, list_files, workloads_dir
from .layout import DATATYPE_BYTES, Architecture
from .model import SHARDINGS, ModelSpec, from_architecture, from_params

CKPT_PARAMS: dict[str, Param] = {
    "description": Param("str", "", "one line"),
    "source": Param("str", "", "where the figures come from"),
    # sizes form
    "model_size": Param("size", None, "bytes of model weights in one checkpoint", optional=True),
    "optimizer_size": Param(
        "size", None, "bytes of optimizer state in one checkpoint", optional=True
    ),
    "ranks": Param("count", None, "ranks sharing the checkpoint equally", optional=True, minimum=1),
    # parameters form
    "params": Param("float", None, "parameter count", optional=True, minimum=1),
    "weight_bytes_per_param": Param("float", 2.0, "bytes per parameter of saved weights"),
    "optimizer_bytes_per_param": Param(
        "float", 12.0, "bytes per parameter of optimizer state (fp32 master + 2 Adam moments)"
    ),
    "dp": Param("count", 1, "data-parallel size", minimum=1),
    "tp": Param("count", 1, "tensor-parallel size", minimum=1),
    "pp": Param("count", 1, "pipeline-parallel size", minimum=1),
    "sharding": Param("choice", "full", "ZeRO/FSDP sharding over data parallel", SHARDINGS),
    # architecture form (DLIO's workload YAML)
    "layers": Param("count", None, "transformer layers", optional=True, minimum=1),
    "hidden_size": Param("count", None, "hidden size", optional=True, minimum=1),
    "ffn_hidden_size": Param("count", None, "FFN hidden size", optional=True, minimum=1),
    "attention_heads": Param("count", None, "attention heads", optional=True, minimum=1),
    "kv_heads": Param("count", None, "key/value heads", optional=True, minimum=1),
    "vocab_size": Param("count", None, "vocabulary size", optional=True, minimum=1),
    "zero_stage": Param("count", 1, "ZeRO stage (0..3)", minimum=0, maximum=3),
    "model_datatype": Param("choice", "fp16", "weights datatype", tuple(DATATYPE_BYTES)),
    "optimizer_datatype": Param("choice", "fp32", "optimizer datatype", tuple(DATATYPE_BYTES)),
    "published": Param("str", "", "the rounded size the MLPerf sources print"),
    # all
    "dcp_files_per_rank": Param(
        "count", 1, "files torch.distributed.checkpoint writes per rank", minimum=1
    ),
}

_SIZE_KEYS = ("model_size", "optimizer_size", "ranks")
_ARCH_KEYS = ("layers", "hidden_size", "ffn_hidden_size", "attention_heads", "kv_heads",
              "vocab_size")  # fmt: skip
_ARCH_ONLY = ("zero_stage", "model_datatype", "optimizer_datatype", "published")
_PARAM_KEYS = ("params", "weight_bytes_per_param", "optimizer_bytes_per_param", "dp", "tp", "pp")


@dataclass(frozen=True)
class CheckpointProfile:
    """A named checkpoint profile: the model spec and where its figures come from."""

    name: str
    path: str
    description: str
    source: str
    spec: ModelSpec
    dcp_files_per_rank: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "description": self.description,
            "source": self.source,
            "spec": self.spec.to_dict(),
            "dcp_files_per_rank": self.dcp_files_per_rank,
        }


def checkpoints_dir() -> Path:
    return workloads_dir() / "checkpoints"


def find_checkpoint(name: str) -> Path:
    """A checkpoint profile by name (``workloads/checkpoints/NAME.toml``) or by path."""
    return find_file(name, "model", checkpoints_dir())


def load_checkpoint_profile(name: str) -> CheckpointProfile:
    """Load and validate a checkpoint profile."""
    path = find_checkpoint(name)
    data = _read_toml(path)
    where = str(path)
    values = coerce_table(data, CKPT_PARAMS, where, "checkpoint profile")
    arch = [k for k in _ARCH_KEYS if values.get(k) is not None]
    if arch or any(k in values for k in _ARCH_ONLY):
        return _architecture_profile(path, values, arch)
    sizes = [k for k in _SIZE_KEYS if values.get(k) is not None]
    by_params = [k for k in _PARAM_KEYS if k in values]
    if sizes and by_params:
        raise SpecError(
            f"{where}: {sizes[0]} and {by_params[0]} cannot be used together",
            hint="give either model_size, optimizer_size and ranks, or params with dp/tp/pp",
        )
    if sizes:
        missing = [k for k in _SIZE_KEYS if values.get(k) is None]
        if missing:
            raise SpecError(f"{where}: {missing[0]} is missing", hint="the sizes form needs all of "
                            "model_size, optimizer_size and ranks")  # fmt: skip
        if "sharding" in values and values["sharding"] != "full":
            raise SpecError(
                f"{where}: sharding = {values['sharding']!r} needs the parameters form",
                hint="with model_size/optimizer_size every rank saves 1/ranks (sharding full)",
            )
        spec = ModelSpec(
            path.stem, values["model_size"], values["optimizer_size"], dp=values["ranks"],
            basis=values.get("source") or f"sizes from {path.name}",
        )  # fmt: skip
    elif values.get("params") is not None:
        d = {k: p.default for k, p in CKPT_PARAMS.items()} | values
        spec = from_params(
            path.stem, d["params"], weight_bytes_per_param=d["weight_bytes_per_param"],
            optimizer_bytes_per_param=d["optimizer_bytes_per_param"], dp=d["dp"], tp=d["tp"],
            pp=d["pp"], sharding=d["sharding"],
        )  # fmt: skip
    else:
        raise SpecError(
            f"{where}: says neither how big the checkpoint is nor how many parameters",
            hint="give model_size, optimizer_size and ranks, or params",
        )
    return CheckpointProfile(
        path.stem, where, str(values.get("description", "")), str(values.get("source", "")),
        spec, values.get("dcp_files_per_rank", 1),
    )  # fmt: skip


def _architecture_profile(
    path: Path, values: dict[str, Any], given: list[str]
) -> CheckpointProfile:
    where = str(path)
    missing = [k for k in _ARCH_KEYS if k not in given]
    if missing:
        raise SpecError(f"{where}: {missing[0]} is missing",
                        hint="the architecture form needs all of " + ", ".join(_ARCH_KEYS))  # fmt: skip
    other = [k for k in (*_SIZE_KEYS, "params", "weight_bytes_per_param",
                         "optimizer_bytes_per_param", "sharding") if k in values]  # fmt: skip
    if other:
        raise SpecError(
            f"{where}: {other[0]} cannot be used with the architecture form",
            hint="the architecture gives the sizes; zero_stage gives the sharding",
        )
    d = {k: p.default for k, p in CKPT_PARAMS.items()} | values
    try:
        a = Architecture(
            d["layers"], d["hidden_size"], d["ffn_hidden_size"], d["attention_heads"],
            d["kv_heads"], d["vocab_size"], tp=d["tp"], pp=d["pp"], dp=d["dp"],
            zero=d["zero_stage"], model_datatype=d["model_datatype"],
            optimizer_datatype=d["optimizer_datatype"],
        )  # fmt: skip
    except UsageError as e:  # the architecture's own checks, with the file named
        raise SpecError(f"{where}: {e}", hint="fix the architecture in the file") from e
    basis = "; ".join(x for x in (str(d.get("source") or ""),
                                  f"published: {d['published']}" if d["published"] else "") if x)  # fmt: skip
    spec = from_architecture(path.stem, a, basis)
    return CheckpointProfile(
        path.stem, where, str(values.get("description", "")), str(values.get("source", "")),
        spec, values.get("dcp_files_per_rank", 1),
    )  # fmt: skip


def list_checkpoint_profiles() -> list[tuple[str, str]]:
    """(name, description) of every checkpoint profile."""
    return list_files("model", checkpoints_dir())
