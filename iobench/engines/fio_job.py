"""fio's job file for one phase: every worker one job section with its own files, offset and
size, dealt as every engine deals them (``base.assign``), each value checked against what fio's
job-file parser leaves alone (see ``iobench.engines.fio`` for why), and ``why_not`` for the
phases fio cannot express faithfully."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import EngineError, UsageError
from .base import PhaseSpec, assign

PAGE = os.sysconf("SC_PAGE_SIZE")  # fio's mem_align: buffers on a page boundary
FIO_OPS = {"write": "write", "read": "read", "randread": "randread", "randwrite": "randwrite"}


# fio reads a job file with fgets(8192): a longer line is split, its tail parsed as a new line
FIO_LINE_MAX = 8191
# what a value in a job file may hold: nothing fio cuts, splits, strips, separates or expands
_SAFE_VALUE = re.compile(r"[A-Za-z0-9_.+/-]+")
_SAFE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,200}")


def check_value(key: str, value: Any) -> str:
    """``value`` as it goes into the job file, or UsageError when fio cannot take it as is."""
    text = str(value)
    if not _SAFE_VALUE.fullmatch(text) or text.startswith("-"):
        raise UsageError(
            f"fio cannot be given {key}={text!r} safely: its job-file parser cuts, splits or "
            "expands values holding other characters than letters, digits and _ . + / -",
            hint="use --engine posix",
        )
    return text


def check_path(path: str) -> str:
    """A file name relative to the run directory, as ``filename=`` lists it."""
    if os.path.isabs(path):
        raise UsageError(
            f"fio job files name files relative to the run directory, not {path!r}",
            hint="use --engine posix",
        )
    return check_value("filename", path)


def _job_name(phase: str, w: int) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", phase) + f".w{w}"
    if name.startswith("global"):  # fio takes any section named global* for [global]
        name = "job." + name
    if not _SAFE_NAME.fullmatch(name):
        raise UsageError(
            f"fio cannot take the job name {name!r} (at most 200 letters, digits, _ . -)",
            hint="use --engine posix",
        )
    return name


def _direction(op: str) -> str:
    return "write" if op in ("write", "randwrite") else "read"


@dataclass(frozen=True)
class FioJobPlan:
    """One fio job section: a worker's files, its region of each, and how much it moves."""

    worker: int
    name: str
    paths: list[str]
    offset: int
    length: int  # bytes of each file this job covers, from ``offset``
    io_bytes: int  # bytes the job moves (fio's io_size); 0 with time_based


@dataclass  # mutable: planning appends each worker's job to ``jobs``
class FioPlan:
    """fio's jobs for one phase; fio runs in ``cwd`` (the run directory), where every job's
    ``paths`` are."""

    global_opts: dict[str, Any]
    seed: int = 0
    jobs: list[FioJobPlan] = field(default_factory=list)
    cwd: str = "."

    def abspath(self, path: str) -> str:
        return os.path.join(self.cwd, path)

    def text(self) -> str:
        """The job file; every value checked (``check_value``), every line within fio's limit."""
        lines = ["[global]"]
        lines += [f"{k}={check_value(k, v)}" for k, v in self.global_opts.items()]
        for j in self.jobs:
            lines += ["", f"[{j.name}]", filename_line(j.paths)]
            if j.offset:
                lines.append(f"offset={check_value('offset', j.offset)}")
            lines.append(f"size={check_value('size', j.length * len(j.paths))}")
            if j.io_bytes:
                lines.append(f"io_size={check_value('io_size', j.io_bytes)}")
            if len(j.paths) > 1:
                svc = "random" if self.global_opts["rw"].startswith("rand") else "sequential"
                lines.append(f"file_service_type={svc}")
            lines.append(f"randseed={check_value('randseed', self.seed * 7919 + j.worker + 1)}")
        for line in lines:
            if len(line) > FIO_LINE_MAX:
                raise UsageError(
                    f"a line of {len(line)} characters in the fio job file ({line[:40]}...) is "
                    f"longer than fio reads ({FIO_LINE_MAX})",
                    hint="use --engine posix or fewer files",
                )
        return "\n".join(lines) + "\n"


def filename_line(paths: list[str]) -> str:
    """``filename=a:b``: fio separates file names with ':'; none of ours holds one."""
    return "filename=" + ":".join(check_path(p) for p in paths)


def why_not(phase: PhaseSpec) -> str | None:
    """Why fio cannot run this phase faithfully (None when it can)."""
    if phase.op not in FIO_OPS:
        return f"fio has no faithful equivalent of {phase.op!r} phases"
    if phase.verify:
        return "--verify uses iobench's own block headers, which fio does not write or check"
    if not phase.block_size:
        return "fio cannot read or write whole files of different sizes in one transfer each"
    if phase.latency_per != "op":
        return "fio measures latency per I/O, not per whole file"
    for segs in assign(phase, ""):
        if len({(s.offset, s.length) for s in segs}) > 1:
            return "fio splits a job's size evenly over its files: files differ in size here"
        longest = len(filename_line([s.path for s in segs]))
        if longest > FIO_LINE_MAX:
            return (
                f"a job's file list ({len(segs)} files, {longest} characters) is longer than "
                f"the {FIO_LINE_MAX} characters fio reads in one job-file line"
            )
    return None


def ioengine_for(phase: PhaseSpec) -> str:
    """psync at queue depth 1 (what the posix engine does); libaio for deeper queues."""
    return "libaio" if phase.iodepth > 1 else "psync"


def buffers_and_readahead(phase: PhaseSpec) -> dict[str, Any]:
    """How fio's jobs meet memory and the page cache, as the posix engine does: readahead
    advice per job (``fadvise_hint``, fio's default, stated: ``posix.advise`` gives the same)
    and, for buffered jobs, page-aligned buffers. fio aligns its buffers only for O_DIRECT:
    buffered, they sit 16 bytes past a page (malloc's header), and copies out of the page
    cache into such a buffer ran at a fifth of the speed on this project's AMD EPYC VM
    (docs/validation/posix-vs-fio.md); the posix engine reads into page-aligned memory."""
    opts: dict[str, Any] = {"fadvise_hint": 1}
    if not phase.direct:
        opts["mem_align"] = PAGE  # fio: the buffer on a page boundary, plus this
    return opts


def build_plan(phase: PhaseSpec, run_dir: str) -> FioPlan:
    """Turn a phase into fio jobs: one section per worker, files as ``base.assign`` deals them,
    named relative to ``run_dir`` (where fio runs)."""
    why = why_not(phase)
    if why:
        raise EngineError(f"phase {phase.name}: {why}")
    g: dict[str, Any] = {
        "rw": FIO_OPS[phase.op],
        "bs": phase.block_size,
        "ioengine": ioengine_for(phase),
        "iodepth": max(phase.iodepth, 1),
        "direct": 1 if phase.direct else 0,
        "group_reporting": 0,
        "randrepeat": 1,  # offsets follow each job's randseed: reproducible per seed
        "fallocate": "none",  # the posix engine extends files as it writes; so does fio now
        "exitall_on_error": 1,  # one failed worker stops the phase, as in the posix engine
        **buffers_and_readahead(phase),
    }
    write = phase.op in ("write", "randwrite")
    if write:
        g["refill_buffers"] = 1  # fresh random data in every block: incompressible
        if phase.fsync == "end" or (phase.op == "randwrite" and phase.fsync == "file"):
            g["end_fsync"] = 1
        elif phase.fsync == "file":
            g["fsync_on_close"] = 1
    else:
        g["allow_file_create"] = 0  # a missing file is an error, never a freshly laid-out one
    if phase.op.startswith("rand"):
        g["norandommap"] = 1  # offsets drawn with replacement, as the posix engine draws them
    if phase.time_s:
        g["runtime"] = f"{max(int(round(phase.time_s * 1000)), 1)}ms"
        g["time_based"] = 1
    if phase.rate_bps:
        g["rate"] = int(phase.rate_bps)
    plan = FioPlan(g, seed=phase.seed, cwd=run_dir)
    for w, segs in enumerate(assign(phase, "")):
        if not segs:
            continue
        length = segs[0].length
        if phase.op in ("randread", "randwrite"):
            if length < phase.block_size:
                continue  # the posix engine skips regions smaller than one block
            moves = (phase.size // phase.block_size) * phase.block_size if phase.size else 0
        else:
            moves = phase.size
        if phase.time_s:
            moves = 0
        plan.jobs.append(
            FioJobPlan(
                worker=w,
                name=_job_name(phase.name, w),
                paths=[s.path for s in segs],
                offset=segs[0].offset,
                length=length,
                io_bytes=moves if moves and moves != length * len(segs) else 0,
            )
        )
    return plan


def job_file(phase: PhaseSpec, run_dir: str = ".") -> str:
    """The fio job file for ``phase`` (what ``iobench`` hands to fio, run in ``run_dir``)."""
    return build_plan(phase, run_dir).text()
