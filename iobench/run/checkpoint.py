"""``iobench checkpoint``: run the llm-checkpoint workload for a model, then add the model.

The run goes through the same machinery as ``iobench run`` (run directory, free-space check,
signals, torchrun ranks, result.json); the ``checkpoint`` block of the result holds what was
measured and the checkpoint model's estimates for the full-size checkpoint, each labelled.
"""

from __future__ import annotations

from typing import Any

from ..checkpoint.estimate import Options, build
from ..checkpoint.spec import load_checkpoint_profile
from ..core.coordinator import Coordinator, SingleProcess
from ..core.errors import UsageError
from ..core.units import check_repeat
from ..result import file as results_mod
from ..spec.workload import load_workload, parse_overrides
from .guard import UNARMED, StallSetting
from .runner import dry_run_workload, run_workload
from .session import RunOutcome

WORKLOAD = "llm-checkpoint"


def run_checkpoint(
    target: str,
    model: str,
    *,
    ranks: int | None = None,
    subset: int | None = None,
    sets: list[str] | None = None,
    scale: float | None = None,
    api: str | None = None,
    baseline: bool | None = None,
    crc32: bool | None = None,
    opts: Options | None = None,
    output: str | None = None,
    keep: bool = False,
    repeat: int = 1,
    progress_factory: Any = None,
    coord: Coordinator | None = None,
    announce: Any = None,
    dry_run: bool = False,
    stall: StallSetting = UNARMED,
) -> RunOutcome | str:
    """Save and load ``model``'s checkpoint on ``target`` and estimate the full-size figures.
    ``sets``: ``--set KEY=VALUE`` overrides of the llm-checkpoint workload's parameters (the
    named options and ``--model`` win over them); ``announce``: the plan line before the first
    byte; ``dry_run``: the plan's text only."""
    coord = coord or SingleProcess()
    prof = load_checkpoint_profile(model)  # bad model: exit 2 before anything is written
    if scale is not None and not (0 < scale <= 1):
        raise UsageError(
            f"--scale must be in (0, 1], got {scale:g}",
            hint="the fraction of every rank's shard written, e.g. 0.01",
        )
    if ranks is not None and ranks < 1:
        raise UsageError(f"--ranks must be at least 1, got {ranks}", hint="e.g. --ranks 8")
    if subset is not None and subset < 1:
        raise UsageError(f"--subset must be at least 1, got {subset}", hint="MLPerf: --subset 8")
    overrides: dict[str, Any] = {**parse_overrides(sets), "model": prof.path}
    for key, value in (("ranks", ranks), ("subset", subset), ("scale", scale), ("api", api), ("baseline", baseline),
                       ("crc32", crc32)):  # fmt: skip
        if value is not None:
            overrides[key] = value
    wl = load_workload(WORKLOAD, overrides)
    kwargs: dict[str, Any] = {}
    if progress_factory is not None:
        kwargs["progress_factory"] = progress_factory
    check_repeat(repeat)  # 1 to units.MAX_REPEAT, before anything runs
    label = f"checkpoint --model {model}"
    if dry_run:
        return dry_run_workload(wl, target, repeat=repeat, output=output, label=label)
    outcome = run_workload(wl, target, engine_name="posix", output=output, keep=keep,
                           repeat=repeat, coord=coord, announce=announce, label=label,
                           stall=stall, **kwargs)  # fmt: skip
    if coord.rank == 0:
        _attach(outcome, wl, prof, opts)
    return outcome


def _attach(outcome: RunOutcome, wl: Any, prof: Any, opts: Options | None) -> None:
    """Rank 0: the checkpoint block (the model's full-size estimates), saved with the result."""
    from .phases.llm_checkpoint import model_spec

    spec, dcp_files = model_spec(wl.params)
    outcome.run.checkpoint = build(
        outcome.run, spec, scale=wl.params["scale"], dcp_files_per_rank=dcp_files, opts=opts,
        source=prof.source, subset=wl.params.get("subset"),
    )  # fmt: skip
    if outcome.result_path is not None:
        try:
            results_mod.save(outcome.run, outcome.result_path.parent)
        except OSError as e:  # the first save stands; the figures are still printed
            outcome.run.warnings.append(f"checkpoint block not saved: {e.strerror or e}")
