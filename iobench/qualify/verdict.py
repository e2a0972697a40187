"""``iobench qualify``'s requirements (``--require write=2GB/s,iops=50k,...``) and its verdict:
pass only when every requirement was measured and met and the run completed; each line names
the figure, what was required, and whether it rests on an indicative phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from ..core.errors import UsageError
from ..core.units import format_bytes, format_count, format_rate, parse_rate, parse_size
from ..result.blocks import (
    FAIL,
    PASS,
    PASS_INDICATIVE,
    Block,
    EstimateBlock,
    LoaderBlock,
    TargetBlock,
)
from ..result.file import RunResult
from ..spec.workload import Param, Profile, coerce
from .checkpoint import CKPT_KEYS, CkptRequirement, normal_key, parse_item
from .checkpoint import verdict_lines as ckpt_verdict_lines
from .during import KEY as DURING_KEY
from .during import verdict_item as during_item

_B = TypeVar("_B", bound=Block)

# -- requirements and verdict -------------------------------------------------------------------

_PERCENT = Param("percent", 0.9, "a fraction")

# name -> (what it is compared with, unit, higher is better)
REQUIREMENT_KEYS: dict[str, tuple[str, str]] = {
    "write": ("best sequential write bandwidth", "B/s"),
    "read": ("best sequential read bandwidth", "B/s"),
    "iops": ("random-read IOPS", "ops/s"),
    "creates": ("small-file creates per second", "ops/s"),
    "stats": ("stats per second", "ops/s"),
    "reads": ("small-file open+reads per second", "ops/s"),
    "deletes": ("deletes per second", "ops/s"),
    "ckpt_save": ("checkpoint save bandwidth", "B/s"),
    "ckpt_load": ("checkpoint load bandwidth", "B/s"),
    "samples": ("dataset samples per second (best reader count)", "ops/s"),
    "dataset_read": ("dataset read bandwidth (best reader count)", "B/s"),
    "free": ("free space on the target (at the start)", "B"),
    "au": ("measured loader accelerator utilisation", "fraction"),
    "gpus": ("accelerators the storage keeps above the AU threshold (estimate)", "GPUs"),
}


@dataclass(frozen=True)
class Requirement:
    key: str
    value: float
    unit: str
    source: str = ""  # the plan file it comes from (qualify --require PLAN.json)

    def describe(self) -> str:
        return f"{self.key} >= {_fmt(self.value, self.unit)}"


def parse_requirements(text: str | None) -> list[Requirement | CkptRequirement]:
    """``read=5GiB/s,creates=20k/s,au=0.9`` -> requirements (UsageError on anything else)."""
    out: list[Requirement | CkptRequirement] = []
    for item in [s.strip() for s in (text or "").split(",") if s.strip()]:
        key, eq, value = item.partition("=")
        key = key.strip()
        if eq and normal_key(key):  # ckpt-goodput, ckpt-stall, ... (qualify --model)
            out.append(parse_item(key, value))
            continue
        if not eq or key not in REQUIREMENT_KEYS:
            raise UsageError(
                f"--require {item!r}: expected KEY=VALUE",
                hint=f"keys: {', '.join([*REQUIREMENT_KEYS, *CKPT_KEYS])}",
            )
        unit = REQUIREMENT_KEYS[key][1]
        value = value.strip()
        if unit == "B/s":
            v, got = parse_rate(value if value.endswith("/s") else value + "/s")
            if got != "B/s":
                raise UsageError(
                    f"--require {key}: expected a bandwidth like 5GiB/s, got {value!r}"
                )
        elif unit == "ops/s":
            v, got = parse_rate(value)
            if got != "ops/s":
                raise UsageError(f"--require {key}: expected a rate like 20k/s, got {value!r}")
        elif unit == "fraction":
            v = coerce(key, _PERCENT, value, "--require")
        elif unit == "B":
            v = parse_size(value, what=f"--require {key}")
        else:
            try:
                v = int(value)
            except ValueError:
                raise UsageError(
                    f"--require {key}: expected a whole number, got {value!r}"
                ) from None
        if v < 0:
            raise UsageError(f"--require {key}: must not be negative")
        out.append(Requirement(key, float(v), unit))
    return out


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "B/s":
        return format_rate(value)
    if unit == "ops/s":
        return format_count(value, "/s")
    if unit == "fraction":
        return f"{value * 100:.1f} %"
    if unit == "B":
        return format_bytes(value)
    return f"{value:g}"


_PHASE_OF: dict[str, tuple[str, str, bool]] = {
    # key -> (phase name or prefix, attribute, best over phases with that prefix)
    "write": ("seq-write", "bandwidth_bps", True),
    "read": ("seq-read", "bandwidth_bps", True),
    "iops": ("rand-read", "iops", False),
    "creates": ("ckpt-create", "iops", False),
    "stats": ("ckpt-stat", "iops", False),
    "reads": ("ckpt-open_read", "iops", False),
    "deletes": ("ckpt-delete", "iops", False),
    "ckpt_save": ("ckpt-save", "bandwidth_bps", False),
    "ckpt_load": ("ckpt-load", "bandwidth_bps", False),
}


def figure_phase(run: RunResult, key: str) -> Any:
    """The phase a requirement key's figure comes from (None for au/gpus or when missing)."""
    if key in ("samples", "dataset_read"):
        attr = "iops" if key == "samples" else "bandwidth_bps"
        cands = [p for p in run.phases if p.name.startswith(("dataset-read", "dataset-shuffled"))]
        return max(cands, key=lambda p: getattr(p, attr) or 0.0, default=None)
    if key not in _PHASE_OF:
        return None
    name, attr, best = _PHASE_OF[key]
    if best:
        cands = [p for p in run.phases if p.name.startswith(name) and p.ops]
        return max(cands, key=lambda p: getattr(p, attr), default=None)
    return next((p for p in run.phases if p.name == name and p.ops), None)


def measured_figures(run: RunResult) -> dict[str, float | None]:
    """The figure each requirement key is compared with, from a qualify result (for ``gpus``
    the estimate's point; the verdict uses its conservative end)."""
    out: dict[str, float | None] = {}
    for key in REQUIREMENT_KEYS:
        if key in ("au", "gpus", "free"):
            continue
        p = figure_phase(run, key)
        attr = {"samples": "iops", "dataset_read": "bandwidth_bps"}.get(key) or _PHASE_OF[key][1]
        out[key] = getattr(p, attr) if p is not None else None
    out["free"] = _typed(TargetBlock, getattr(run, "target", None)).free_bytes  # may be absent
    out["au"] = _typed(LoaderBlock, run.loader).au
    out["gpus"] = _estimate(run).max_gpus
    return out


def _typed(block: type[_B], d: Any) -> _B:
    """``d`` (a result block as read) typed; an absent block reads as an empty one."""
    return block.from_dict(d if isinstance(d, dict) else {})


def _estimate(run: RunResult) -> EstimateBlock:
    return _typed(EstimateBlock, run.estimate)


def _gpus_item(est: EstimateBlock, r: Requirement, what: str) -> tuple[bool, str, dict[str, Any]]:
    """The verdict line of the estimate: judged at the interval's conservative (low) end."""
    point = est.max_gpus
    low = est.max_gpus_low if est.has("max_gpus_low") else point
    high = est.max_gpus_high if est.has("max_gpus_high") else point
    if point is None:
        line = f"FAIL: {what}: not estimated (required >= {r.value:g})"
        return False, line, {"key": r.key, "required": r.value, "estimate": None,
                             "unit": r.unit, "result": "fail"}  # fmt: skip
    passed = (low if low is not None else point) >= r.value  # a null low: the point
    interval = est.interval if est.interval is not None and not est.interval.empty else None
    span = f"{point} ({low}–{high})" if est.has("max_gpus_low") else f"{point}"
    line = (
        f"{'PASS' if passed else 'FAIL'}: {what}: estimate {span}, judged at the conservative "
        f"end {low} (required >= {r.value:g})"
        + (f" [{interval.level:.0%} interval; see the estimate's basis]" if interval else "")
    )
    for w in est.warnings:
        line += f"; {w}"
    item = {"key": r.key, "required": r.value, "estimate": point, "low": low, "high": high,
            "judged": low, "unit": r.unit, "result": "pass" if passed else "fail"}  # fmt: skip
    if est.warnings:
        item["notes"] = list(est.warnings)
    return passed, line, item


def verdict(
    run: RunResult,
    requirements: list[Requirement | CkptRequirement],
    profile: Profile | None,
    gpus: int | None,
    quick: bool = False,
    notes: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Pass only when every requirement was measured and met, and the run completed.

    The estimate is judged at its interval's conservative end; a figure from a phase that is
    indicative (not steady, too short, ranks' starts skewed) says so in its line. ``notes``
    lead the reasons (a plan file's cluster)."""
    got = measured_figures(run)
    items: list[dict[str, Any]] = []
    reasons: list[str] = []
    ok = True
    reqs = list(requirements)
    if profile is not None and gpus:
        reqs.append(Requirement("gpus", float(gpus), "GPUs"))
        reqs.append(Requirement("au", profile.au_min, "fraction"))
    ckpt_ok, ckpt_reasons, ckpt_items, rests_on_indicative = ckpt_verdict_lines(run, reqs)
    client_bound: list[str] = []  # the requirements the host's cores decided
    for r in [r for r in reqs if isinstance(r, Requirement) and not normal_key(r.key)]:
        what = REQUIREMENT_KEYS[r.key][0]
        if r.key == "gpus":
            if profile is not None:
                what += f" ({profile.name}, AU >= {profile.au_min:.0%})"
            passed, line, item = _gpus_item(_estimate(run), r, what)
            rests_on_indicative |= any(w.startswith("indicative") for w in _estimate(run).warnings)
        else:
            passed, line, item = _figure_item(run, got.get(r.key), r, what)
            rests_on_indicative |= "indicative" in item
        if r.key in ("au", "gpus") and not passed:  # the host's cores, not the storage?
            passed, line, item = _client_bound_item(run, r, line, item)
            client_bound += [r.key] if item["result"] == CLIENT_BOUND else []
        ok &= passed
        reasons.append(line)
        items.append(item)
    if profile is not None and gpus:  # qualify --profile --model: the loader during a save
        ok &= _during_line(run, profile, reasons, items, client_bound)
    ok &= ckpt_ok
    reasons += ckpt_reasons
    items += ckpt_items
    if run.status != "complete":
        ok = False
        reasons.append(f"FAIL: the run did not complete ({run.status}: {run.error})")
    from ..result.steady import indicative_reason

    if not reqs:  # a pass then means every phase completed: it rests on all of them
        rests_on_indicative |= any(indicative_reason(p) for p in run.phases if p.ops)
    indicative = rests_on_indicative or quick or bool(client_bound)
    status = FAIL if not ok else PASS_INDICATIVE if indicative else PASS
    # what an indicative verdict rests on comes first, before the lines it qualifies
    first, last = _verdict_notes(run, bool(reqs), rests_on_indicative, quick, bool(client_bound))
    out: dict[str, Any] = {"status": status, "result": status, "reasons": [*notes, *first, *reasons, *last],
           "items": items}  # fmt: skip
    flags = {"indicative": indicative, "smoke_test": quick, "client_bound": client_bound}
    out.update({k: v for k, v in flags.items() if v})
    return out


def _during_line(run: RunResult, profile: Profile, reasons: list[str], items: list[dict[str, Any]],
                 client_bound: list[str]) -> bool:  # fmt: skip
    """The AU during a checkpoint write against the profile's au_min, its own line (none
    without the during run); client-bound as the AU's is. Whether it passed."""
    got = during_item(run, profile.au_min)
    if got is None:
        return True
    passed, line, item = got
    if not passed:
        passed, line, item = _client_bound_item(
            run, Requirement("au", profile.au_min, "fraction"), line, item
        )
        client_bound += [DURING_KEY] if item["result"] == CLIENT_BOUND else []
    reasons.append(line)
    items.append(item)
    return passed


#: An AU requirement's result when the loader fell short on a host with no CPU to spare.
CLIENT_BOUND = "client-bound"
CLIENT_BOUND_NOTE = (
    "NOTE: the loader is client-CPU-bound on this host: its CPUs cannot run the profile's "
    "loader (workers decoding and collating samples, the main loop) at the pass line, so the "
    "AU and the GPU estimate measured the host's cores, not the storage, and are not judged "
    "here; judge them on a host with the training nodes' cores (the storage's own figures "
    "are the sequential, random, checkpoint and dataset lines)"
)


def client_ceiling(run: Any) -> float | None:
    """The most AU the loader reaches on this host whatever the storage, from its calibration
    on cached data (the terms the estimate's model uses): compute over the longer of its step
    (compute + the loader's overhead: the main loop, collation) and its workers' decode of a
    batch (batch x decode seconds a sample / workers, on this host's CPUs); None without one."""
    ld = run.loader if isinstance(run.loader, dict) else {}
    cal = ld.get("calibration") or {}
    compute, over = ld.get("compute_s"), cal.get("overhead_s")
    if not isinstance(compute, (int, float)) or not isinstance(over, (int, float)) or compute <= 0:
        return None
    step = compute + max(over, 0.0)
    decode, batch, workers = cal.get("decode_s_per_sample"), ld.get("batch_size"), ld.get("workers")
    nums = [x for x in (decode, batch, workers) if isinstance(x, (int, float))]
    if len(nums) == 3 and nums[2] > 0:  # decode, batch, workers
        step = max(step, nums[1] * nums[0] / nums[2])
    return compute / step


def _client_bound_item(
    run: Any, r: Requirement, line: str, item: dict[str, Any]
) -> tuple[bool, str, dict[str, Any]]:
    """A failed AU or GPU-count line when the loader could not reach the pass line on this
    host even from cached data (``client_ceiling``), or (the AU) its own diagnosis names its
    CPU or the host had no CPU to spare (``cpu.client_bound``): ``client-bound``, not a fail
    of the storage (a verdict resting on it is a pass (indicative)), saying why; else as it
    was."""
    from ..core.cpu import client_bound

    ld = run.loader if isinstance(run.loader, dict) else {}
    ceiling = client_ceiling(run)
    line_of = ld.get("au_min") if r.key == "gpus" else r.value
    low = ceiling is not None and isinstance(line_of, (int, float)) and ceiling < line_of
    used = ld.get("client_cpu")
    if not (low or (r.key == "au" and (ld.get("bound") == "cpu" or client_bound(used)))):
        return False, line, item
    why = []
    if ceiling is not None:
        why.append(f"on cached data, storage aside, the loader reached AU {ceiling:.1%} at most")
    if isinstance(used, dict) and isinstance(used.get("host_share"), (int, float)):
        why.append(f"the host's {used.get('cpus')} CPUs were {used['host_share']:.0%} busy over it")
    line = (
        f"CLIENT-BOUND: {line.split(': ', 1)[1]}: {'; '.join(why) or 'bound by its CPU'}; it "
        "measured this host's cores, not the storage"
    )
    item.update(result=CLIENT_BOUND, client_ceiling=ceiling, client_cpu=used)
    return True, line, item


def _figure_item(
    run: RunResult, value: float | None, r: Requirement, what: str
) -> tuple[bool, str, dict[str, Any]]:
    """(passed, the reason's line, the verdict item) for a measured figure's requirement."""
    from ..result.steady import indicative_reason, one_pass_reason

    passed = value is not None and value >= r.value
    status = "pass" if passed else "fail"
    measured = "not measured" if value is None else _fmt(value, r.unit)
    line = f"{status.upper()}: {what}: {measured} (required >= {_fmt(r.value, r.unit)})"
    item = {"key": r.key, "required": r.value, "measured": value, "unit": r.unit,
            "result": status}  # fmt: skip
    if r.source:
        line += f" [the plan {r.source}]"
        item["source"] = r.source
    phase = figure_phase(run, r.key)
    why = indicative_reason(phase) if phase is not None else None
    if why:
        line += f" [indicative: {phase.name} {why}]"
        item["indicative"] = f"{phase.name} {why}"
    elif phase is not None and one_pass_reason(phase):
        line += f" [one pass: {phase.name}, not judged for steady state]"
        item["one_pass"] = f"{phase.name} {one_pass_reason(phase)}"
    return passed, line, item


def _verdict_notes(
    run: RunResult,
    any_reqs: bool,
    rests_on_indicative: bool,
    quick: bool,
    client_bound: bool = False,
) -> tuple[list[str], list[str]]:
    """The verdict's notes: (those on what it rests on, shown first: a client-bound AU,
    --quick, indicative figures; the closing ones: no requirement, instability)."""
    from ..result.steady import indicative_reason

    first: list[str] = [CLIENT_BOUND_NOTE] if client_bound else []
    last: list[str] = []
    if quick:
        first.append(
            "NOTE: --quick is a smoke test: its phases are too short to reach steady state, "
            "so its figures are indicative; qualify without --quick for a verdict to rely on"
        )
    if rests_on_indicative:
        done = [p for p in run.phases if p.ops]
        n = sum(1 for p in done if indicative_reason(p))
        first.append(
            f"NOTE: this verdict rests on indicative figures ({n} of {len(done)} phases did "
            "not reach steady state or ran too short): rerun without --quick, or with a "
            "longer --budget"
        )
    if not any_reqs:
        last.append(
            "no requirement given: pass means every phase completed (use --profile/--gpus or --require)"
        )
    if any("unstable" in w for w in _estimate(run).warnings):
        last.append(
            "NOTE: the storage (or the host) was unstable during the measurement: the "
            "estimate's interval covers this run's variability and may not cover another run"
        )
    return first, last


# -- the exit status ---------------------------------------------------------------------------

# ``qualify --fail-on``: the verdicts that exit 1 (FAILED); the others exit 0
FAIL_ON: dict[str, tuple[str, ...]] = {
    "fail": (FAIL,),
    "indicative": (FAIL, PASS_INDICATIVE),
}


def check_fail_on(fail_on: str) -> str:
    """``fail_on`` when it names a rule of :data:`FAIL_ON` (UsageError otherwise)."""
    if fail_on not in FAIL_ON:
        raise UsageError(
            f"--fail-on: expected one of {', '.join(FAIL_ON)}, got {fail_on!r}",
            hint="--fail-on indicative also fails a pass that rests on indicative phases",
        )
    return fail_on


def verdict_fails(status: str | None, fail_on: str = "fail") -> bool:
    """Whether a verdict of ``status`` exits 1 under ``--fail-on fail_on``: a fail always
    does, a ``pass (indicative)`` with ``--fail-on indicative``, and anything that is not a
    known status (no verdict, a hand-edited file) always does."""
    if status not in (PASS, PASS_INDICATIVE):
        return True
    return status in FAIL_ON[check_fail_on(fail_on)]
