"""The loader block of a run over an existing dataset: the measured split of each sample's
time (storage read, decode CPU, collation), the bound it gives, the failed samples, the
page-cache handling as measured, the dataset's plan, and the terms a diagnosis takes.

``table_rows`` renders the block's own rows for the report's loader table, from the same
values the JSON holds (formatted once, here, for text, markdown and HTML alike).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.units import format_bytes, format_rate, format_seconds
from ..result.stats import Histogram
from .calibration import COMPUTE_BOUND_AU
from .existing_data import NAMES_KEPT, SUMMED, PipelineTerms, cpu_cores
from .existing_diagnosis import diagnosis_of, diagnosis_rows
from .loop import wait_summary

#: More than this share of failed samples fails the run (exit 4).
FAIL_SHARE = 0.01
#: The bootstrap of the terms' intervals: resamples, and batches drawn from at most.
BOOT_RESAMPLES = 1000
BOOT_BATCHES = 2000
_SUMS = (*SUMMED, "batches")


def _totals(workers: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {k: sum(w.get(k, 0) for w in workers) for k in _SUMS}
    for k in ("failed_names", "warned_names"):
        out[k] = [n for w in workers for n in w.get(k, ())][:NAMES_KEPT]
    return out


def failed_of(t: dict[str, Any]) -> dict[str, Any]:
    """The failed samples: those counted one by one or from a failed file's footer, plus an
    estimate for the failed files whose count is unknown: their bytes at the samples per
    byte of the files decoded whole (at least one sample each), the basis said."""
    est, basis = 0, "every failed sample counted"
    if t["lost_files"]:
        if t["whole_bytes"] and t["whole_samples"]:
            per_byte = t["whole_samples"] / t["whole_bytes"]
            est = max(round(t["lost_bytes"] * per_byte) - t["lost_seen"], t["lost_files"])
            basis = (
                f"{t['lost_files']:,} unreadable file(s) of {format_bytes(t['lost_bytes'])} "
                f"estimated at {est:,} samples: their bytes at the "
                f"{t['whole_samples'] / t['whole_files']:.1f} samples per "
                f"{format_bytes(t['whole_bytes'] / t['whole_files'])} of the "
                f"{t['whole_files']:,} file(s) read whole"
            )
        else:
            est = t["lost_files"]
            basis = (
                f"{t['lost_files']:,} unreadable file(s) counted as one sample each: no file "
                "was read whole to estimate their samples from (a lower bound)"
            )
    count = t["failed"] + est
    ok = t["samples"]
    return {
        "count": count, "ok": ok, "share": _per(count, count + ok),
        "examples": t["failed_names"], "files": t["failed_files"], "estimated": est,
        "basis": basis, "transform": t["failed_transform"],
    }  # fmt: skip


def _per(a: float, b: float) -> float:
    return a / b if b else 0.0


def split_of(t: dict[str, Any]) -> dict[str, float]:
    """Per-sample / per-file / per-batch seconds from a set of summed worker figures."""
    return {
        "read_s_per_sample": _per(t["read_s"], t["samples"]),
        "open_s_per_file": _per(t["open_s"], t["files"]),
        "decode_s_per_sample": _per(t["decode_s"], t["samples"]),
        "decode_cpu_s_per_sample": _per(t["decode_cpu_s"], t["samples"]),
        "transform_s_per_sample": _per(t["transform_s"], t["samples"]),
        "collate_s_per_batch": _per(t["collate_s"], t["batches"]),
        "collate_cpu_s_per_batch": _per(t["collate_cpu_s"], t["batches"]),
        # iobench's own CRC checks (TFRecord), left out of decode: a training job's are C++
        "check_s_per_sample": _per(t["check_s"], t["samples"]),
    }


def cache_of(mode: str, t: dict[str, Any], fs_note: str = "") -> tuple[str, str]:
    """(the cache state recorded, its basis): whether the drop held is what was measured."""
    if mode == "none":
        return "none", "objects read through fsspec with one GET each: no page cache"
    if mode == "cached":
        return "cached", "--buffered: the page cache left alone (warm reads count as storage)"
    n, kept = t["cache_checked"], t["cache_resident"]
    if not n:
        return "dropped", "posix_fadvise DONTNEED per file; not verified (no RWF_NOWAIT here)"
    if kept:
        return "cached", (
            f"posix_fadvise DONTNEED left the first page cached in {kept} of {n} files checked "
            f"(RWF_NOWAIT read){fs_note}: reads were served from memory"
        )
    return "dropped", (
        f"posix_fadvise DONTNEED per file, on a read-only descriptor; verified on {n} files "
        "(an RWF_NOWAIT read of each found its first page out of the cache)"
    )


def bound_of(job: Any, split: dict[str, float], au: float, compute_s: float) -> tuple[str, str]:
    """What limited the loop, from the measured terms: storage, decode CPU, or compute.

    Per step, the storage's share is the batch's read time over the workers reading at once;
    the CPU's is the batch's decode CPU time plus its collation over the cores they can use."""
    b, w = job.batch_size, job.workers
    cores = cpu_cores()
    lanes = max(min(w, cores), 1)
    storage = b * split["read_s_per_sample"] / max(w, 1)
    cpu = (b * split["decode_cpu_s_per_sample"] + split["collate_cpu_s_per_batch"]) / lanes
    basis = (
        f"per step of {b} samples: storage {format_seconds(storage)} "
        f"({format_seconds(split['read_s_per_sample'])}/sample over {max(w, 1)} reader(s)), "
        f"decode+collate CPU {format_seconds(cpu)} "
        f"({format_seconds(split['decode_cpu_s_per_sample'])} CPU/sample, "
        f"{format_seconds(split['collate_cpu_s_per_batch'])} CPU/batch over {lanes} core(s) of "
        f"{cores}), compute {format_seconds(compute_s)}; AU {au:.3f}"
    )
    if compute_s > 0 and au >= COMPUTE_BOUND_AU:
        return "compute", basis + f" (compute bound at >= {COMPUTE_BOUND_AU:.2f})"
    return ("storage" if storage >= cpu else "decode CPU"), basis


def ranges(per_batch: list[tuple[int, float, float, float]], seed: int = 1) -> dict[str, Any]:
    """95 % bootstrap intervals (over batches, at most BOOT_BATCHES of them) of the read and
    decode CPU seconds per sample and the collate seconds per batch."""
    if len(per_batch) < 2:
        return {"read_range": None, "decode_range": None, "collate_range": None}
    rng = np.random.default_rng(seed)
    a = np.asarray(per_batch, dtype=np.float64)
    if len(a) > BOOT_BATCHES:
        a = a[rng.choice(len(a), BOOT_BATCHES, replace=False)]
    idx = rng.integers(0, len(a), size=(BOOT_RESAMPLES, len(a)))
    n = a[idx, 0].sum(axis=1)

    def ci(values: np.ndarray) -> tuple[float, float]:
        lo, hi = np.percentile(values, [2.5, 97.5])
        return float(lo), float(hi)

    return {
        "read_range": ci(a[idx, 1].sum(axis=1) / n),
        "decode_range": ci(a[idx, 2].sum(axis=1) / n),
        "collate_range": ci(a[idx, 3].mean(axis=1)),
    }


def summarise(job: Any, plan: Any, measured: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the result's loader block, warnings worth a line)."""
    eps = measured["epochs"]
    workers = measured["workers"]
    t = _totals(workers)
    split = split_of(t)
    timed_steps = sum(e["timed_steps"] for e in eps)
    timed_s = sum(e["timed_s"] for e in eps)
    au_per_epoch = [e["au"] for e in eps]
    au = sum(au_per_epoch) / len(eps) if eps else 0.0
    compute_measured = _per(sum(e["compute_s"] for e in eps), timed_steps)
    bound, bound_basis = bound_of(job, split, au, compute_measured)
    cache, cache_basis = cache_of(job.mode, t)
    ok = t["samples"]
    failed = failed_of(t)
    wall = sum(e["wall_s"] for e in eps)
    terms = PipelineTerms(
        read_s_per_sample=split["read_s_per_sample"], open_s_per_file=split["open_s_per_file"],
        decode_s_per_sample=split["decode_cpu_s_per_sample"],
        collate_s_per_batch=split["collate_cpu_s_per_batch"], compute_s_per_step=compute_measured,
        batch_size=job.batch_size, workers=job.workers, cpu_cores=cpu_cores(),
        files=plan.n_files, bytes=plan.total_bytes, samples_per_file=_per(ok, t["files"]),
        mean_file_bytes=_per(plan.total_bytes, plan.n_files),
        read_bps=_per(t["bytes"], t["read_s"]), read_bps_aggregate=_per(t["bytes"], wall),
        file_open_per_s=_per(t["files"], t["open_s"]), au=au, cache=cache,
    )  # fmt: skip
    loader = {
        "profile": job.profile, "gpus": 1, "workers": job.workers, "batch_size": job.batch_size,
        "prefetch": job.prefetch, "steps": eps[0]["steps"] if eps else 0, "epochs": len(eps),
        "au": au, "au_per_epoch": au_per_epoch,
        "samples_per_s": _per(sum(e["samples"] for e in eps), timed_s),
        "bytes_per_s": _per(sum(e["bytes"] for e in eps), timed_s),
        "load_wait_s": wait_summary(Histogram.merged(e["wait"] for e in eps)),
        "compute_s": job.compute_s, "compute_measured_s": compute_measured,
        "step_s": _per(timed_s, timed_steps), "bound": bound, "bound_basis": bound_basis,
        "cache": cache, "points": [{"gpus": 1, "au": au}],
        "existing": {
            "dataset": {**plan.to_dict(), "samples_read": ok, "files_read": t["files"],
                        "samples_per_file": terms.samples_per_file},
            "split": split, "cache_basis": cache_basis, "failed": failed,
            "transform": job.transform,
            "terms": {**terms.to_dict(), **ranges(measured["per_batch"], job.seed),
                      **_extra_terms(job, measured, terms.samples_per_file, eps),
                      **overhead_of(eps, job.seed),
                      "decode_wall_s_per_sample": split["decode_s_per_sample"],
                      "collate_wall_s_per_batch": split["collate_s_per_batch"]},
            "workers": [_worker_row(w) for w in workers],
            "epochs": [{k: v for k, v in e.items() if k not in ("wait", "overhead_s", "handoff_s")}
                       for e in eps],
        },
    }  # fmt: skip
    ex = loader["existing"]
    ex["diagnosis"], why_not = diagnosis_of(job, ex["terms"]) if ok else (None, [])
    biggest = max((b[0] for b in measured["per_batch"]), default=0)
    notes = _notes(job, t, failed, cache, cache_basis, timed_steps, biggest)
    return loader, notes + _contention(split) + why_not


def overhead_of(eps: list[dict[str, Any]], seed: int = 1) -> dict[str, Any]:
    """The main loop's own time per step (``existing.step_overhead``: neither compute nor
    waiting for a worker), its mean over the timed steps with a 95 % bootstrap interval of the
    mean; and the workers' hand-off per batch (moving it to shared memory after it was made),
    the mean over the steps whose batch was finished after the loop asked for it."""
    per_step = np.asarray([o for e in eps for o in e.get("overhead_s", ())], dtype=np.float64)
    handoff = [h for e in eps for h in e.get("handoff_s", ())]
    out: dict[str, Any] = {
        "step_overhead_s": float(per_step.mean()) if len(per_step) else 0.0,
        "step_overhead_range": None,
        "handoff_s_per_batch": float(np.mean(handoff)) if handoff else 0.0,
        "handoff_batches": len(handoff),
    }
    rng = np.random.default_rng([seed, 7])
    if len(per_step) > BOOT_BATCHES:
        per_step = per_step[rng.choice(len(per_step), BOOT_BATCHES, replace=False)]
    if len(per_step) >= 2:
        means = per_step[rng.integers(0, len(per_step), (BOOT_RESAMPLES, len(per_step)))]
        lo, hi = np.percentile(means.mean(axis=1), [2.5, 97.5])
        out["step_overhead_range"] = (float(lo), float(hi))
    return out


def _extra_terms(
    job: Any, measured: dict[str, Any], spf: float, eps: list[dict[str, Any]]
) -> dict[str, Any]:
    """The terms beside the dataclass: the loader's shape, and the page-cache read per sample
    (``cached_read``: files read twice after the loop, the second read timed; None: a URL)."""
    probe = measured.get("cached_read")
    per_sample = probe["read_s_per_file"] / spf if probe and spf > 0 else None
    return {
        "gpus": 1,
        "prefetch": job.prefetch,
        "steps_per_epoch": eps[0]["steps"] if eps else 0,
        "cache_read_s_per_sample": per_sample,
        "cache_read_basis": (
            f"{probe['files']} files read twice after the loop, the second read (from the page "
            "cache) timed, over the measured samples per file"
            if probe and per_sample is not None
            else "not measured (an object store: no page cache)"
        ),
    }


def _worker_row(w: dict[str, Any]) -> dict[str, Any]:
    """One worker's totals and its own split (the per-worker view)."""
    row = {k: w.get(k, 0) for k in _SUMS if not k.startswith("cache")}
    return {"worker": w["worker"], **row, **split_of(row)}


def _notes(
    job: Any,
    t: dict[str, Any],
    failed: dict[str, Any],
    cache: str,
    basis: str,
    timed: int,
    biggest: int = 0,
) -> list[str]:
    """The run's warnings; ``biggest``: the samples of the largest batch made."""
    notes = []
    if failed["count"] and failed["share"] <= FAIL_SHARE:  # above it the run's error says it
        notes.append(
            f"{failed['count']:,} sample(s) failed to read, decode or transform and were "
            f"skipped ({failed['share']:.2%}; {failed['basis']}); first: "
            + "; ".join(failed["examples"][:3])
        )
    if t["warned"]:
        notes.append(
            f"{t['warned']:,} sample(s) raised a warning while decoding (decoded all the "
            f"same); first: {'; '.join(t['warned_names'][:3])}"
        )
    if t["samples"] and biggest < job.batch_size:
        notes.append(
            f"no batch of {job.batch_size} samples was full (the dataset gave "
            f"{t['samples']:,} samples over {max(job.workers, 1)} reader(s)): the AU is over "
            "short batches"
        )
    if job.mode == "dropped" and cache == "cached":
        notes.append(f"page cache: {basis}")
    if timed < 10:
        notes.append(
            f"only {timed} timed step(s): too few for a steady AU (give a larger dataset, more "
            "--epochs or more --steps)"
        )
    if job.compute_s <= 0:
        notes.append(
            "compute_s is 0: AU is 0 by definition; this run measures the loader's own ceiling"
        )
    return notes


#: Decode wall time over its CPU time above which the workers were waiting for a CPU.
CONTENDED = 1.5


def _contention(split: dict[str, float]) -> list[str]:
    """A warning when the workers' decode took much longer than its CPU time."""
    wall, cpu = split["decode_s_per_sample"], split["decode_cpu_s_per_sample"]
    if cpu <= 0 or wall / cpu <= CONTENDED:
        return []
    return [
        f"the loader's workers waited for a CPU: decode took {format_seconds(wall)} per sample "
        f"for {format_seconds(cpu)} of CPU ({wall / cpu:.1f}×): the host's cores were "
        "contended (other processes, or more workers than cores), and the storage read times "
        "include such waits too; the bound uses the CPU times"
    ]


def table_rows(ld: dict[str, Any]) -> list[list[str]]:
    """The existing-dataset rows of the loader table (empty for a synthetic run)."""
    ex = ld.get("existing")
    if not isinstance(ex, dict):
        return []
    ds, sp, fl = ex.get("dataset") or {}, ex.get("split") or {}, ex.get("failed") or {}
    fb = ds.get("file_bytes") or {}
    rows = [
        ["Dataset", f"{ds.get('root')} ({ds.get('format')}, {ds.get('format_source')})"],
        ["Files", f"{ds.get('files', 0):,} files, {format_bytes(ds.get('bytes') or 0)}, "
                  f"{ds.get('samples_per_file', 0):.1f} samples/file (measured); "
                  f"{ds.get('files_stat', 0):,} stat'ed"],
        ["File size", f"p10 {format_bytes(fb.get('p10', 0))}, p50 {format_bytes(fb.get('p50', 0))}"
                      f", p90 {format_bytes(fb.get('p90', 0))}, max {format_bytes(fb.get('p100', 0))}"],
        ["Per sample", f"read {format_seconds(sp.get('read_s_per_sample'))} (open "
                       f"{format_seconds(sp.get('open_s_per_file'))}/file), decode "
                       f"{format_seconds(sp.get('decode_s_per_sample'))} (CPU "
                       f"{format_seconds(sp.get('decode_cpu_s_per_sample'))}); collate "
                       f"{format_seconds(sp.get('collate_s_per_batch'))}/batch (CPU "
                       f"{format_seconds(sp.get('collate_cpu_s_per_batch'))})"],
        ["Storage read", f"{format_rate((ex.get('terms') or {}).get('read_bps'))} per worker stream"],
        ["Failed samples", f"{fl.get('count', 0):,} ({fl.get('share', 0.0):.2%}"
         + (f", {fl['estimated']:,} estimated" if fl.get("estimated") else "") + ")"
         + (f": {fl['examples'][0]}" if fl.get("examples") else "")],
    ]  # fmt: skip
    if ex.get("transform"):
        rows.append(["Transform", str(ex["transform"])])
    return rows + diagnosis_rows(ex.get("diagnosis"))
