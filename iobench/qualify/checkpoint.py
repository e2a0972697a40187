"""``qualify --model``: the LLM checkpoint step, its estimate, and its requirements and verdict.

With ``--model`` qualify's checkpoint step is the ``llm-checkpoint`` workload for that model
(its shards scaled to the budget, torch.save beside a plain write of the same files, the
small-file rates), the result gets the ``checkpoint`` block (``ckpt_estimate.build``) and the
verdict gets checkpoint lines. Requirements (``--require``):

- ``ckpt-goodput=97%``: goodput of synchronous saves, at ``--interval`` when given, else at the
  best interval (the exact model's optimum), at least this;
- ``ckpt-stall=5m``: the stall of one synchronous save at most this;
- ``ckpt-recovery=15m``: load of the last checkpoint plus ``--restart`` at most this;
- ``ckpt-fit=3``: at least this many full checkpoints fit in the target's free space.

Each is a labelled estimate: the verdict line shows the figure as the report shows it
(``ckpt_report``), with its interval and MTBF basis. No I/O outside ``attach``'s arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..checkpoint.rows import dur, goodput_text, pct, recovery_text, stall_text
from ..core.errors import UsageError
from ..core.units import format_bytes, parse_duration, parse_percent
from ..result.file import RunResult

WORKLOAD = "llm-checkpoint"

# key -> (what it is compared with, unit, higher is better)
CKPT_KEYS: dict[str, tuple[str, str, bool]] = {
    "ckpt-goodput": ("checkpoint goodput, synchronous saves", "fraction", True),
    "ckpt-stall": ("checkpoint stall per synchronous save", "s", False),
    "ckpt-recovery": ("recovery from a failure", "s", False),
    "ckpt-fit": ("full checkpoints that fit in the target's free space", "checkpoints", True),
}


def normal_key(key: str) -> str | None:
    """``ckpt-goodput`` (or ``ckpt_goodput``) when it names a checkpoint requirement."""
    k = key.strip().replace("_", "-")
    return k if k in CKPT_KEYS else None


def _fmt(value: float, unit: str) -> str:
    if unit == "fraction":
        return pct(value)
    if unit == "s":
        return dur(value)
    return f"{value:g}"


@dataclass(frozen=True)
class CkptRequirement:
    """A checkpoint requirement (the fields of ``qualify.Requirement``, and its direction)."""

    key: str
    value: float
    unit: str

    @property
    def higher_is_better(self) -> bool:
        return CKPT_KEYS[self.key][2]

    def describe(self) -> str:
        return f"{self.key} {'>=' if self.higher_is_better else '<='} {_fmt(self.value, self.unit)}"


def parse_item(key: str, value: str) -> CkptRequirement:
    """One ``--require`` item whose key is a checkpoint key (UsageError on a bad value)."""
    k = normal_key(key)
    if k is None:
        raise UsageError(f"--require {key!r}: not a checkpoint requirement")
    unit = CKPT_KEYS[k][1]
    what = f"--require {k}"
    value = value.strip()
    if unit == "fraction":
        v = parse_percent(value, what=what)
        if not 0 < v <= 1:
            raise UsageError(f"{what}: expected a percentage in (0, 100 %], got {value!r}",
                             hint="e.g. ckpt-goodput=97%")  # fmt: skip
    elif unit == "s":
        v = parse_duration(value, what=what)
        if v <= 0:
            raise UsageError(f"{what}: expected a positive duration, got {value!r}",
                             hint=f"e.g. {k}=10m")  # fmt: skip
    else:
        try:
            v = int(value)
        except ValueError:
            v = 0
        if v < 1:
            raise UsageError(f"{what}: expected a whole number >= 1, got {value!r}",
                             hint="e.g. ckpt-fit=3")  # fmt: skip
    return CkptRequirement(k, float(v), unit)


def check_model_options(model: str | None, checkpoint: str | None, opts: Any,
                        requirements: list[Any]) -> int | None:  # fmt: skip
    """Without ``--model`` no checkpoint option or requirement means anything: exit 2. With it,
    the full checkpoint's size (``--checkpoint`` would give a second one: exit 2)."""
    keys = [r.key for r in requirements if normal_key(r.key)]
    if model is None:
        given = [n for n, v in (("--mtbf", opts and opts.mtbf_s),
                                ("--failure-rate", opts and opts.failure_rate_per_s),
                                ("--interval", opts and opts.interval_s),
                                ("--restart", opts and opts.restart_s)) if v]  # fmt: skip
        if keys or given:
            what = f"--require {keys[0]}" if keys else given[0]
            raise UsageError(f"{what} needs --model", hint="e.g. --model llama3-70b")
        return None
    from ..checkpoint.spec import load_checkpoint_profile

    prof = load_checkpoint_profile(model)
    if checkpoint is not None:
        raise UsageError(
            "--checkpoint and --model both give the checkpoint's size",
            hint=f"give one of them (--model {prof.name} is {format_bytes(prof.spec.total_bytes)})",
        )
    return prof.spec.total_bytes


# -- the step ------------------------------------------------------------------------------------


def step_fields(model: str, ckpt_bytes: int, files: int, quick: bool,
                write_bps: float) -> dict[str, Any]:  # fmt: skip
    """The fields of qualify's ``Step`` for the model's checkpoint: every rank's shard scaled
    so that the whole checkpoint written is about ``ckpt_bytes``; as many small files in all as
    the plain checkpoint step (``files`` × 4 writers)."""
    from ..checkpoint.spec import load_checkpoint_profile
    from ..run.phases import get_generator
    from ..spec.workload import load_workload

    prof = load_checkpoint_profile(model)
    spec = prof.spec
    scale = min(1.0, ckpt_bytes / spec.total_bytes)
    per_writer = max(4, math.ceil(files * 4 / spec.ranks))
    wl = load_workload(
        WORKLOAD,
        {"model": prof.path, "scale": scale, "api": "torch" if quick else "both",
         "baseline": True, "metadata": True, "files": per_writer},
    )  # fmt: skip
    plan = get_generator(wl.generator).plan(wl.params)  # refuses what cannot run (memory, ranks)
    meta_s = per_writer * spec.ranks * 4 / 2000
    writes = 2 if quick else 3  # the plain write, torch.save (and DCP)
    return {
        "name": "checkpoint",
        "workload": WORKLOAD,
        "generator": wl.generator,
        "params": dict(wl.params),
        "expected_s": meta_s + writes * plan.space_bytes / write_bps,
        "space_bytes": int(plan.space_bytes * 1.1) + per_writer * spec.ranks * 4096,
        "note": (
            f"{prof.name}: {format_bytes(plan.space_bytes)} ({scale:.3g} of the full "
            f"{format_bytes(spec.total_bytes)}) over {spec.ranks} ranks; "
            f"{per_writer * spec.ranks} small files"
        ),
    }


def attach(run: RunResult, params: dict[str, Any], opts: Any, gpus: int | None) -> None:
    """The ``checkpoint`` block of a qualify run from its checkpoint step's phases."""
    from ..checkpoint.estimate import Options, build
    from ..checkpoint.spec import load_checkpoint_profile
    from ..run.phases.llm_checkpoint import model_spec

    opts = opts or Options()
    if opts.accelerators is None and gpus is not None:
        opts = replace(opts, accelerators=gpus)
    spec, dcp_files = model_spec(params)
    source = load_checkpoint_profile(params["model"]).source
    run.checkpoint = build(run, spec, scale=params["scale"], dcp_files_per_rank=dcp_files,
                           opts=opts, source=source)  # fmt: skip


# -- the verdict ---------------------------------------------------------------------------------


def _figure(est: dict[str, Any], key: str) -> tuple[float | None, str]:
    """(the judged figure, the text the report shows for it)."""
    if key == "ckpt-goodput":
        pl = est["sync"]
        user = pl.get("user_interval_s")
        value = pl["user_goodput"] if user else pl["best_goodput"]
        at = f"judged at your interval {dur(user)}" if user else "judged at the best interval"
        return value, f"{goodput_text(pl)}; {at}"
    if key == "ckpt-stall":
        return est["stall"]["sync_s"], stall_text(est["stall"])
    if key == "ckpt-recovery":
        return est["recovery"]["total_s"], recovery_text(est["recovery"])
    fit = est["capacity"].get("fit_free")
    free = est["capacity"].get("free_bytes")
    return fit, (
        "-"
        if fit is None
        else f"{fit} of {format_bytes(est['capacity']['checkpoint_bytes'])} in "
        f"{format_bytes(free)} free"
    )


#: The measured phases each figure rests on (capacity rests on the model and free space alone).
_RESTS_ON = {
    "ckpt-goodput": ("ckpt-save", "ckpt-load", "ckpt-dcp-save", "ckpt-dcp-load"),
    "ckpt-stall": ("ckpt-save", "ckpt-dcp-save"),
    "ckpt-recovery": ("ckpt-load", "ckpt-dcp-load"),
    "ckpt-fit": (),
}


def indicative(run: RunResult, key: str) -> str | None:
    """Why the figure of ``key`` rests on indicative phases (None when it does not)."""
    from ..result.steady import indicative_reason

    for name in _RESTS_ON[key]:
        p = next((q for q in run.phases if q.name == name and q.ops), None)
        why = indicative_reason(p) if p is not None else None
        if why:
            return f"{name} {why}"
    return None


def verdict_item(run: RunResult, r: CkptRequirement) -> tuple[bool, str, dict[str, Any]]:
    """(passed, the verdict line, the verdict item) of one checkpoint requirement."""
    block = run.checkpoint or {}
    est = block.get("estimate")
    model = (block.get("model") or {}).get("name", "no --model")
    what = f"{CKPT_KEYS[r.key][0]} ({model})"
    op = ">=" if r.higher_is_better else "<="
    required = f"required {op} {_fmt(r.value, r.unit)}"
    if not est:
        why = block.get("estimate_missing") or "no checkpoint was measured"
        line = f"FAIL: {what}: not estimated ({why}; {required})"
        return False, line, {"key": r.key, "required": r.value, "estimate": None,
                             "unit": r.unit, "result": "fail"}  # fmt: skip
    value, text = _figure(est, r.key)
    if value is None:
        passed = False
    else:
        passed = value >= r.value if r.higher_is_better else value <= r.value
    basis = (
        f"the model at the rates measured at scale {block['scale']:.3g}"
        if r.key != "ckpt-fit"
        else "the model's size and the target's free space"
    )
    if r.key == "ckpt-goodput":
        basis = f"MTBF {dur(est['mtbf_s'])}: {est['mtbf_basis']}; {basis}"
    line = (
        f"{'PASS' if passed else 'FAIL'}: {what}: estimate {text} ({required}) "
        f"[{basis}; see the checkpoint estimate's basis]"
    )
    item = {"key": r.key, "required": r.value, "estimate": value, "unit": r.unit,
            "result": "pass" if passed else "fail", "label": "estimate"}  # fmt: skip
    why = indicative(run, r.key)
    if why:
        line += f" [indicative: {why}]"
        item["indicative"] = why
    return passed, line, item


def summary_line(run: RunResult) -> str | None:
    """The checkpoint estimate in one verdict line, when ``--model`` was given but no
    checkpoint requirement (the same figures as the report's)."""
    block = run.checkpoint or {}
    est = block.get("estimate")
    if not est:
        return None
    name = block["model"]["name"]
    mode = "asynchronous" if est.get("save_mode") == "async" and est.get("async") else "synchronous"
    plan = est["async"] if mode == "asynchronous" else est["sync"]
    return (
        f"ESTIMATE: checkpoint {name}: stall {stall_text(est['stall'])}; recovery "
        f"{recovery_text(est['recovery'])}; goodput, {mode}: {goodput_text(plan)} "
        f"[MTBF {dur(est['mtbf_s'])}: {est['mtbf_basis']}] (no ckpt-* requirement given)"
    )


def verdict_lines(
    run: RunResult, reqs: list[Any]
) -> tuple[bool, list[str], list[dict[str, Any]], bool]:
    """(all passed, lines, items, rests on indicative phases) of the checkpoint requirements in
    ``reqs``; without one, the estimate's summary line when the run has a checkpoint block."""
    ok, lines, items, rests = True, [], [], False
    mine = [r for r in reqs if normal_key(r.key)]
    for r in mine:
        passed, line, item = verdict_item(run, r)
        ok &= passed
        rests |= "indicative" in item
        lines.append(line)
        items.append(item)
    if not mine:
        summary = summary_line(run)
        lines += [summary] if summary else []
    return ok, lines, items, rests
