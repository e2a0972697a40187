"""Large sequential writes and read-back, with block-size and writer-count sweeps.

Phases: ``seq-write`` and ``seq-read`` at the workload's block size and jobs; then, for each
block size in ``block_sizes`` and each writer count in ``jobs_sweep``, a write and a read
named ``seq-write-bs<size>`` / ``seq-read-j<n>``. ``randread`` adds ``rand-read`` over the
same files at ``rand_block_size`` (the IOPS figure). File-per-worker or one shared file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...core.plan import Plan
from ...distributed import peer_files, read_source
from ...engines.base import FileSpec, PhaseSpec
from ...target import check_direct_alignment

if TYPE_CHECKING:  # an annotation: the runner sits above
    from ..runner import PhaseRunner


def _label(n: int) -> str:
    for unit, div in (("m", 1 << 20), ("k", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def _files(
    params: dict[str, Any], jobs: int, world: int = 1, rank: int = 0
) -> tuple[FileSpec, ...]:
    size = params["size"]
    if params["mode"] == "shared":
        return (FileSpec("seq/shared.dat", size * jobs * world),)
    return tuple(FileSpec(f"seq/r{rank}-w{w}.dat", size) for w in range(jobs))


def _variants(params: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(suffix, block_size, jobs) for the main phase and every sweep point."""
    out = [("", params["block_size"], params["jobs"])]
    for bs in params["block_sizes"]:
        out.append((f"-bs{_label(bs)}", bs, params["jobs"]))
    for j in params["jobs_sweep"]:
        out.append((f"-j{j}", params["block_size"], j))
    return out


def direct_sizes(params: dict[str, Any]) -> dict[str, int]:
    """The sizes that reach O_DIRECT I/O as lengths or offsets (none when buffered): every
    block size, and the bytes per worker, which fix the files' sizes (their last block) and
    the workers' regions of a shared file."""
    if not params["direct"]:
        return {}
    out = {"block_size": params["block_size"], "size": params["size"]}
    out.update({f"block_sizes[{i}]": bs for i, bs in enumerate(params["block_sizes"])})
    if params["randread"]:
        out["rand_block_size"] = params["rand_block_size"]
    return out


def plan(params: dict[str, Any]) -> Plan:
    p = Plan()
    biggest = 0
    for suffix, bs, jobs in _variants(params):
        total = params["size"] * jobs
        biggest = max(biggest, total)
        t = params["time"]
        p.add(f"seq-write{suffix}", "write", total, f"{jobs} x {_label(bs)} blocks", t)
        if params["read_back"]:
            p.add(f"seq-read{suffix}", "read", total, f"{jobs} x {_label(bs)} blocks", t)
    if params["randread"]:
        rand = params["size"] * (params["rand_jobs"] or params["jobs"])
        p.add("rand-read", "randread", rand, "", params["time"])
    p.space_bytes = biggest
    p.inodes = 2 + max(1 if params["mode"] == "shared" else j for _, _, j in _variants(params))
    p.direct_sizes = direct_sizes(params)
    return p


def run(params: dict[str, Any], runner: PhaseRunner) -> None:
    direct = runner.direct(params["direct"])
    if direct:  # refused at planning already; here for callers that plan on their own
        check_direct_alignment(direct_sizes(params), runner.target)
    runner.mkdirs(["seq"])
    src, prefix = read_source(runner)  # many ranks: read back another rank's files (IOR -C)
    last_files: tuple[FileSpec, ...] = ()
    for suffix, bs, jobs in _variants(params):
        files = _files(params, jobs, runner.world, runner.rank)
        common = dict(
            jobs=jobs,
            block_size=bs,
            size=params["size"],
            time_s=params["time"],
            direct=direct,
            rate_bps=params["rate"],
            seed=params["seed"],
            mode=params["mode"],
            verify=params["verify"],
            params={
                "sweep": "block_size" if "-bs" in suffix else "jobs" if "-j" in suffix else "base"
            },
        )
        runner.execute(
            PhaseSpec(f"seq-write{suffix}", "write", files, fsync=params["fsync"], **common)
        )
        read_files = peer_files(_files(params, jobs, runner.world, src), prefix)
        if params["read_back"]:
            runner.execute(PhaseSpec(f"seq-read{suffix}", "read", read_files, **common))
        last_files = read_files
    if (
        params["randread"]
        and params["verify"]
        and params["rand_block_size"] != params["block_size"]
    ):
        runner.warn(
            "verify: random reads of one block size inside blocks written at another cannot be "
            "checked; only the sequential read-back phases were verified"
        )
    if params["randread"]:
        jobs = params["rand_jobs"] or params["jobs"]
        runner.execute(
            PhaseSpec(
                "rand-read",
                "randread",
                last_files,
                jobs=jobs,
                block_size=params["rand_block_size"],
                size=params["size"] if not params["time"] else 0,
                time_s=params["time"],
                direct=direct,
                rate_bps=params["rate"],
                seed=params["seed"],
                mode="shared",  # every worker reads anywhere in every file
                iodepth=params["iodepth"],
                params={"sweep": ""},
            )
        )
