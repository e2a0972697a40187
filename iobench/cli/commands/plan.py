"""``iobench plan``: from a cluster (accelerators, a training profile, a checkpoint model, a
failure rate, a goodput target, retention) to the storage it needs, each figure with its basis
(``checkpoint.cluster``); ``--output FILE`` writes the plan file ``qualify --require`` reads."""

from __future__ import annotations

import json
from typing import Any

import typer

from .common import app, out, out_text

_GPUS = typer.Option(..., "--gpus", metavar="N", help="Accelerators in the cluster.")
_ACCEL = typer.Option(
    None,
    "--accelerator",
    metavar="KIND",
    help="Accelerator kind, e.g. h100 (default: the profile's).",
)
_PROFILE = typer.Option(
    None,
    "--profile",
    metavar="NAME",
    help="Training profile, e.g. unet3d-h100 (or unet3d with --accelerator).",
)
_SET = typer.Option(None, "--set", metavar="KEY=VALUE", help="Override a profile key.")
_AU = typer.Option(None, "--au", help="AU threshold, e.g. 90% (default: the profile's).")
_MODEL = typer.Option(
    None, "--model", help="Checkpoint model, e.g. llama3-405b (see `iobench workloads`)."
)
_GOODPUT = typer.Option(None, "--goodput", help="Goodput target with --model, e.g. 95%.")
_MTBF = typer.Option(None, "--mtbf", help="Mean time between failures of the job, e.g. 3h.")
_RATE = typer.Option(
    None, "--failure-rate", help="Failures per accelerator-day (default: Llama 3's rate)."
)
_INTERVAL = typer.Option(None, "--interval", help="Checkpoint interval (default: the optimum).")
_RESTART = typer.Option("0s", "--restart", help="Restart cost per failure, e.g. 10m.")
_RECOVERY = typer.Option(
    None, "--recovery", help="Time to load the last checkpoint (default: as long as a save)."
)
_SHARE = typer.Option(
    "10%", "--metadata-share", help="Share of the stall and load spent on file creates/opens."
)
_ASYNC = typer.Option(
    False, "--async", help="Asynchronous saves: the stall is the host copy, the write runs behind."
)
_HOST_COPY = typer.Option(
    None, "--host-copy", metavar="RATE", help="With --async: device-to-host copy per GPU "
    "(default 63 GB/s, PCIe 5.0 x16).",
)  # fmt: skip
_RETENTION = typer.Option(1, "--retention", metavar="N", help="Checkpoints kept.")
_DATASET = typer.Option(
    None, "--dataset", metavar="SIZE", help="Dataset size (default: MLPerf Storage's minimum)."
)
_HOSTS = typer.Option(None, "--hosts", help="Client hosts (default: GPUs ÷ 8), for the dataset.")
_HOST_MEM = typer.Option(None, "--host-mem", help="Memory per host, for the dataset's 5× term.")
_FORMAT = typer.Option("text", "--format", help="text | json.")
_OUTPUT = typer.Option(None, "--output", "-o", help="Write the plan file (JSON) here.")


@app.command()
def plan(
    gpus: int = _GPUS,
    accelerator: str | None = _ACCEL,
    profile: str | None = _PROFILE,
    set_: list[str] | None = _SET,
    au: str | None = _AU,
    model: str | None = _MODEL,
    goodput: str | None = _GOODPUT,
    mtbf: str | None = _MTBF,
    failure_rate: str | None = _RATE,
    interval: str | None = _INTERVAL,
    restart: str = _RESTART,
    recovery: str | None = _RECOVERY,
    metadata_share: str = _SHARE,
    asynchronous: bool = _ASYNC,
    host_copy: str | None = _HOST_COPY,
    retention: int = _RETENTION,
    dataset: str | None = _DATASET,
    hosts: int | None = _HOSTS,
    host_mem: str | None = _HOST_MEM,
    fmt: str = _FORMAT,
    as_json: bool = typer.Option(False, "--json", help="The same as --format json."),
    output: str | None = _OUTPUT,
    force: bool = typer.Option(False, "--force", help="Replace an existing --output file."),
) -> int:
    """The storage a cluster needs: read bandwidth, checkpoint bandwidth, file rates, capacity."""
    from ...checkpoint.cluster import plan_cluster, plan_text
    from ...core.errors import StoreError, UsageError
    from ...core.safeio import check_output_file, write_atomic

    if fmt not in ("text", "json"):
        raise UsageError(f"--format {fmt!r}: expected text or json", hint="--format json")
    if output is not None:
        check_output_file(output, replace=force, option="--output")
    g = dict(locals())
    args = _settled(g)
    result = plan_cluster(gpus, args["accelerator"], args["loader"], args["ckpt"], **args["kw"])
    data = result.to_dict()
    text = json.dumps(data, indent=2)
    if output is not None:
        try:
            write_atomic(output, (text + "\n").encode(), replace=force)
        except OSError as e:  # something put at the path since the check: refused
            raise StoreError(f"cannot write --output {output}: {e.strerror or e}") from None
    if as_json or fmt == "json":
        out(text)
    else:
        out_text(plan_text(result))
        if output is not None:
            out_text(f"plan written to {output} (qualify --require {output} checks it)")
    return 0


def _settled(g: dict[str, Any]) -> dict[str, Any]:
    """The options checked (UsageError: exit 2, one line) and turned into the model's inputs."""
    from ... import __version__
    from ...core.errors import UsageError
    from ...core.units import parse_percent, parse_size
    from ...model.starvation_inputs import MAX_MODEL_GPUS

    gpus = g["gpus"]
    if not 1 <= gpus <= MAX_MODEL_GPUS:
        raise UsageError(
            f"--gpus must be 1..{MAX_MODEL_GPUS:,}, got {gpus}", hint="e.g. --gpus 1024"
        )
    if g["hosts"] is not None and not 1 <= g["hosts"] <= gpus:
        raise UsageError(f"--hosts must be 1..--gpus, got {g['hosts']}", hint="e.g. --hosts 128")
    for flag, need, given in (("--au", "--profile", g["au"]), ("--goodput", "--model", g["goodput"]),
                              ("--set", "--profile", g["set_"])):  # fmt: skip
        if given and not g[need.lstrip("-")]:
            raise UsageError(f"{flag} needs {need}", hint=f"add {need}")
    prof, loader = _loader(g)
    accelerator = g["accelerator"] or (prof.accelerator if prof else None)
    ckpt = _checkpoint(g)
    data = parse_size(g["dataset"], what="--dataset") if g["dataset"] is not None else None
    mem = parse_size(g["host_mem"], what="--host-mem") if g["host_mem"] is not None else 0
    if (data is not None and data <= 0) or (g["host_mem"] is not None and mem <= 0):
        raise UsageError("--dataset and --host-mem must be more than 0", hint="e.g. 10TiB")
    inputs = {
        "iobench": __version__, "gpus": gpus, "accelerator": accelerator,
        "profile": prof.name if prof else None, "au": loader.threshold if loader else None,
        "model": ckpt.spec.name if ckpt else None, "goodput": ckpt.target if ckpt else None,
        "mtbf_s": ckpt.mtbf_s if ckpt else None, "interval_s": ckpt.interval_s if ckpt else None,
        "restart_s": ckpt.restart_s if ckpt else None, "recovery_s": ckpt.load_s if ckpt else None,
        "metadata_share": parse_percent(g["metadata_share"], what="--metadata-share"),
        "retention": g["retention"], "dataset_bytes": data, "hosts": g["hosts"],
        "host_mem_bytes": mem or None, "async": bool(ckpt and ckpt.host_copy_bps),
        "host_copy_bps": ckpt.host_copy_bps if ckpt else None,
    }  # fmt: skip
    kw = {"dataset_bytes": data, "hosts": g["hosts"], "host_mem": mem, "inputs": inputs}
    return {"accelerator": accelerator, "loader": loader, "ckpt": ckpt, "kw": kw}


def _loader(g: dict[str, Any]) -> tuple[Any, Any]:
    """The profile (``--profile``, or NAME-``--accelerator``) and the loader's input."""
    from ...checkpoint.cluster import LoaderInput
    from ...core.errors import UsageError
    from ...core.units import parse_percent
    from ...model.starvation_inputs import LoaderParams
    from ...spec.workload import load_profile, parse_overrides

    name, accel = g["profile"], g["accelerator"]
    if name is None:
        return None, None
    sets = parse_overrides(g["set_"])
    try:
        prof = load_profile(name, sets)
    except UsageError:
        if not accel:
            raise
        prof = load_profile(f"{name}-{accel}", sets)
    if accel and prof.accelerator != accel:
        raise UsageError(
            f"--profile {prof.name} emulates {prof.accelerator}, not --accelerator {accel}",
            hint=f"give --profile {prof.model}-{accel}, or leave out --accelerator",
        )
    threshold = parse_percent(g["au"], what="--au") if g["au"] is not None else prof.au_min
    if not 0 < threshold <= 1:
        raise UsageError(f"--au must be in (0, 100 %], got {g['au']!r}", hint="e.g. --au 90%")
    params = LoaderParams(
        prof.batch_size, prof.sample_size, prof.samples_per_file, prof.compute_s, prof.workers,
        prof.prefetch, prof.decode_s,
    )  # fmt: skip
    return prof, LoaderInput(prof.name, params, float(prof.sample_size_sd), threshold)


def _checkpoint(g: dict[str, Any]) -> Any:
    """The checkpoint's input: the model, the goodput target, the MTBF and the times."""
    from ...checkpoint.cluster import CheckpointInput
    from ...checkpoint.estimate import _mtbf, parse_options
    from ...checkpoint.spec import load_checkpoint_profile
    from ...core.errors import UsageError
    from ...core.units import parse_duration, parse_percent

    if g["host_copy"] is not None and not g["asynchronous"]:
        raise UsageError("--host-copy needs --async", hint="add --async")
    if g["model"] is None:
        for flag in ("mtbf", "failure_rate", "interval", "recovery", "asynchronous"):
            if g[flag] not in (None, False):
                raise UsageError(f"--{flag.replace('_', '-').replace('asynchronous', 'async')} "
                                 "needs --model", hint="add --model")  # fmt: skip
        return None
    if g["goodput"] is None:
        raise UsageError("--model needs a --goodput target", hint="e.g. --goodput 95%")
    target = parse_percent(g["goodput"], what="--goodput")
    if not 0 < target < 1:
        raise UsageError(f"--goodput must be in (0, 100 %), got {g['goodput']!r}", hint="e.g. 95%")
    share = parse_percent(g["metadata_share"], what="--metadata-share")
    if not 0 <= share < 1:
        raise UsageError(f"--metadata-share must be in [0, 100 %), got {g['metadata_share']!r}",
                         hint="e.g. 10%")  # fmt: skip
    if g["retention"] < 1:
        raise UsageError(f"--retention must be at least 1, got {g['retention']}", hint="e.g. 3")
    opts = parse_options(mtbf=g["mtbf"], failure_rate=g["failure_rate"], gpus=g["gpus"],
                         interval=g["interval"], restart=g["restart"])  # fmt: skip
    load = parse_duration(g["recovery"], what="--recovery") if g["recovery"] is not None else None
    if load is not None and not 0 < load < float("inf"):
        raise UsageError(f"--recovery must be a positive duration, got {g['recovery']!r}",
                         hint="e.g. --recovery 10m")  # fmt: skip
    mtbf_s, mtbf_basis = _mtbf(opts, g["gpus"])
    spec = load_checkpoint_profile(g["model"]).spec
    copy, copy_basis = host_copy(g["asynchronous"], g["host_copy"])
    return CheckpointInput(spec, target, mtbf_s, mtbf_basis, opts.interval_s, opts.restart_s,
                           load, share, g["retention"], copy, copy_basis)  # fmt: skip


def host_copy(asynchronous: bool, text: str | None) -> tuple[float | None, str]:
    """(the host-copy rate per GPU, its basis) of asynchronous saves; (None, "") for sync."""
    from ...checkpoint.estimate import parse_bandwidth
    from ...checkpoint.inverse import HOST_COPY_BASIS, HOST_COPY_BPS

    if not asynchronous:
        return None, ""
    if text is None:
        return HOST_COPY_BPS, f"default: {HOST_COPY_BASIS}"
    return parse_bandwidth(text, "--host-copy"), f"given (--host-copy {text})"
