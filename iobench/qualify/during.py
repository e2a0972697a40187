"""``qualify --profile P --model M``: the loader measured during that model's checkpoint write.

After the loader step (the profile alone), qualify runs the same loader plan once more with an
asynchronous save of M beside it (``loader.during``, as ``iobench loader --during-checkpoint``
does): its own dataset and run directory, the save once, ``at`` a quarter of an epoch's steps
into the timed steps. The save is sized so the write spans about half the loop at the rate the
checkpoint step just measured (``ckpt-save``), at most the checkpoint step's size (which the
--quick/full budget set): a save much shorter than the loop leaves a during-window of a step
or two, one much longer none after it.

Its windows land in ``loader.during_checkpoint`` (with ``loop``: which loop they come from),
and the verdict gets a line of its own: the AU during the save against the profile's au_min,
saying what it rests on (steps, windows, the save's rate beside its rate alone). Beside it the
contention model (``checkpoint.contention``) over the interval: the full checkpoint of the
checkpoint estimate (its write time alone), slowed as the mixed run's write was, at your
``--interval`` (else the estimate's best), with the AU alone and during from the windows.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..core.errors import UsageError
from ..core.units import format_bytes, format_rate, format_seconds
from ..loader.ckpt_writer import CheckpointPlan, plan_checkpoint

MiB = 1 << 20
MIN_BYTES = 4 * MiB  # the least a save writes: every rank's files more than empty
SPAN = 0.5  # of the loop's emulated compute, the save's target length at the measured rate
KEY = "au_during_checkpoint"
WHAT = "measured loader accelerator utilisation during a checkpoint write"


def at_steps(loader: dict[str, Any]) -> int:
    """The save's start, in timed steps: a quarter of an epoch's (at least 1)."""
    return max(1, int(loader["steps"]) // 4)


def plan_save(model: str, nbytes: float) -> CheckpointPlan:
    """``model``'s checkpoint scaled to about ``nbytes`` (at least ``MIN_BYTES``), written once
    ``at_steps`` into the loop (set by ``sized``), as fast as the storage takes it."""
    from ..checkpoint.spec import load_checkpoint_profile

    total = load_checkpoint_profile(model).spec.total_bytes
    scale = min(1.0, max(nbytes, MIN_BYTES) / total)
    for _ in range(40):  # a scale whose files all round to nothing: raise it until some remain
        try:
            return plan_checkpoint(model, scale, (1, "steps"), None, None)
        except UsageError:
            if scale >= 1:
                raise
            scale = min(1.0, scale * 2)
    return plan_checkpoint(model, 1.0, (1, "steps"), None, None)


def sized(model: str, loader: dict[str, Any], compute_s: float, cap_bytes: int,
          save_bps: float | None) -> CheckpointPlan:  # fmt: skip
    """The save of the during run: ``SPAN`` of the loop's compute at ``save_bps`` (the
    checkpoint step's rate), at most ``cap_bytes``; at ``at_steps``."""
    loop_s = loader["epochs"] * loader["steps"] * max(compute_s, 0.005)
    want = cap_bytes if not save_bps else min(cap_bytes, save_bps * SPAN * loop_s)
    return replace(plan_save(model, want), at=float(at_steps(loader)))


def interval_model(block: dict[str, Any], est: dict[str, Any] | None,
                   demand_bps: float | None) -> dict[str, Any] | None:  # fmt: skip
    """The AU over one checkpoint interval (``checkpoint.contention``): the full checkpoint of
    the estimate (its bytes, its write time alone), its write slowed by the mixed run's
    ``write_vs_alone``, at the user's interval (else the async, else the sync best one), the
    AU alone and during from the windows. None without the figures it needs."""
    from ..checkpoint.contention import ContentionInputs, contention

    s = block.get("summary") or {}
    wo, du = s.get("without") or {}, s.get("during") or {}
    est = est or {}
    lay, stall = est.get("layout") or {}, est.get("stall") or {}
    nbytes, write_s = lay.get("total_bytes"), stall.get("write_s")
    plans = [est.get("async") or {}, est.get("sync") or {}]
    tau = next((p.get("user_interval_s") for p in plans if p.get("user_interval_s")), None)
    which = "your --interval"
    if not tau:
        tau, which = next((p.get("best_interval_s") for p in plans if p.get("best_interval_s")),
                          None), "the estimate's best interval"  # fmt: skip
    slow = s.get("write_vs_alone")
    need = (wo.get("au"), du.get("au"), wo.get("read_bps"), du.get("read_bps"), nbytes, write_s,
            tau, slow, demand_bps)  # fmt: skip
    nums = [float(x) for x in need if isinstance(x, (int, float))]
    if len(nums) < len(need) or min(nums[2:]) <= 0:
        return None
    au_wo, au_du, read_wo, read_du, nbytes, write_s, tau, slow, demand = nums
    write_alone = nbytes / write_s
    inp = ContentionInputs(
        interval_s=tau, checkpoint_bytes=nbytes, write_alone_bps=write_alone,
        read_alone_bps=read_wo, au_alone=au_wo, demand_bps=demand,
        au_during=au_du, read_during_bps=read_du, write_during_bps=write_alone * slow,
    )  # fmt: skip
    c = contention(inp)
    return {
        "au_interval": c.au_interval, "au_alone": c.au_alone, "au_during": c.au_during,
        "interval_s": tau, "interval_from": which, "checkpoint_bytes": nbytes,
        "write_s": c.write_s, "overlap": c.overlap, "label": "estimate",
        "basis": (
            f"estimate: the full {format_bytes(nbytes)} checkpoint of the checkpoint estimate, "
            f"written in {format_seconds(write_s)} alone, {slow:.2f}× as fast beside the loader "
            f"(the mixed run's save vs the same save alone): {format_seconds(c.write_s)} of "
            f"{which} {format_seconds(tau)}; {c.basis}"
        ),
    }  # fmt: skip


def verdict_item(run: Any, au_min: float) -> tuple[bool, str, dict[str, Any]] | None:
    """The verdict's line of the AU during checkpoints against ``au_min`` (None without the
    during run): what it rests on in brackets, the model over the interval beside it."""
    ld = run.loader if isinstance(run.loader, dict) else {}
    d = ld.get("during_checkpoint")
    if not isinstance(d, dict):
        return None
    du = (d.get("summary") or {}).get("during") or {}
    au = du.get("au")
    passed = isinstance(au, (int, float)) and au >= au_min
    status = "pass" if passed else "fail"
    shown = "not measured (no step ran during the save)" if au is None else f"{au * 100:.1f} %"
    wins = [w for w in d.get("windows") or [] if w.get("kind") == "during"]
    s = d.get("summary") or {}
    rests = (
        f"{du.get('steps', 0)} steps in {len(wins)} during-window(s), "
        f"{format_seconds(du.get('seconds') or 0.0)}, of a separate loader run beside a "
        f"{format_bytes(d.get('bytes') or 0)} {d.get('model')} save"
    )
    if isinstance(s.get("write_bps"), (int, float)):
        rests += f" written at {format_rate(s['write_bps'])}"
        if isinstance(s.get("write_vs_alone"), (int, float)):
            rests += f", {s['write_vs_alone']:.2f}× its rate alone"
    line = (
        f"{status.upper()}: {WHAT}: {shown} (required >= {au_min * 100:.1f} %) [rests on: {rests}]"
    )
    item: dict[str, Any] = {"key": KEY, "required": au_min, "measured": au, "unit": "fraction",
                            "result": status, "rests_on": rests}  # fmt: skip
    m = d.get("model_interval")
    if isinstance(m, dict) and isinstance(m.get("au_interval"), (int, float)):
        line += (
            f"; modelled over {m['interval_from']} ({format_seconds(m['interval_s'])}): AU "
            f"{m['au_interval'] * 100:.1f} % (estimate, see loader.during_checkpoint.model_interval)"
        )
        item["model_au_interval"] = m["au_interval"]
    return passed, line, item


def run_beside(outcome: Any, target_spec: str, plan: Any, keep: bool, progress_factory: Any,
               coord: Any, stall: Any) -> None:  # fmt: skip
    """The during run after the loader step: the loader plan again, the save ``sized`` from
    the checkpoint step's measured rate, into ``loader.during_checkpoint``; its warnings and
    its failure carried as the loader step's are."""
    from ..loader import run_loader

    run, lp, prof = outcome.run, plan.loader, plan.profile
    save = run.phase("ckpt-save")
    rate = save.bandwidth_bps if save is not None and save.bandwidth_bps else None
    ckpt = sized(plan.during.model, lp, prof.compute_s, plan.during.total_bytes, rate)
    lo = run_loader(
        target_spec, replace(prof, files=lp["files"], epochs=lp["epochs"]), gpus=lp["gpus"],
        steps=lp["steps"], save=False, keep=keep, progress_factory=progress_factory,
        command=run.command, coord=coord, stall=stall, during=ckpt,
    )  # fmt: skip
    assert not isinstance(lo, str)
    run.warnings.extend(f"loader during checkpoint: {w}" for w in lo.run.warnings
                        if f"loader during checkpoint: {w}" not in run.warnings)  # fmt: skip
    if lo.error is not None:
        outcome.error = lo.error
        run.status = lo.run.status if lo.run.status != "complete" else "failed"
        run.error = lo.error.one_line()
    block = (lo.run.loader or {}).get("during_checkpoint")
    if not isinstance(block, dict) or not isinstance(run.loader, dict):
        return
    demand = (
        lp["gpus"] * prof.batch_size * prof.sample_size / prof.compute_s
        if prof.compute_s > 0
        else None
    )
    ld = lo.run.loader or {}
    block["loop"] = {
        "steps": ld.get("steps"), "epochs": ld.get("epochs"), "gpus": ld.get("gpus"),
        "au": ld.get("au"),
        "sized_from": f"ckpt-save at {format_rate(rate)}" if rate else "the checkpoint step's size",
        "basis": "a second run of qualify's loader step (its own dataset, the same profile, "
        "steps and epochs) with the save beside it; the loader figures above it are the "
        "first run's, without a save",
    }  # fmt: skip
    est = (run.checkpoint or {}).get("estimate") if isinstance(run.checkpoint, dict) else None
    block["model_interval"] = interval_model(block, est, demand)
    run.loader["during_checkpoint"] = block


def beside_expected_s(plan: Any, nbytes: float, loader_s: float, write_bps: float) -> float:
    """The during step's expected time: the loader's loop again, the save alone, the probed
    saves (the read probe alone first) and the one beside the loop, at ``write_bps``."""
    if plan is None:
        return 0.0
    from ..loader.readprobe import GAP_S, IDLE_S

    n = plan.probe_saves
    probe_s = IDLE_S + GAP_S * (n - 1) if n else 0.0
    return loader_s + (2 + n) * nbytes / write_bps + probe_s
