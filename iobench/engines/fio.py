"""The fio engine: a PhaseSpec becomes a fio job file, fio runs it with ``--output-format=json+``,
and its JSON becomes a PhaseResult with the same fields the posix engine fills.

Each worker is one job section with its own files, offset and size, so the files fio touches
are exactly the ones the posix engine would (``base.assign`` deals them; ``fio_job`` writes the
job file).

No path the user chose reaches the job file: fio runs in the run directory and the job file
names files relative to it, with names iobench made. fio's job-file parser cuts values at
``;`` and ``#``, splits lines at newlines and at 8,191 characters, strips blanks at both ends,
treats ``:`` in ``filename=`` as a separator and expands ``${VAR}`` and ``$mb_memory``-like
keywords, so a target path such as ``DIR/A\nfilename=DIR/victim`` written there would name
another file. Every value iobench writes is checked against a plain character set
(``check_value``); anything else is refused (UsageError, exit 2) rather than escaped.

Latency is fio's completion latency (clat); the json+ ``bins`` of every job are merged into
one iobench histogram (fio uses the same log-linear layout, 64 sub-buckets per power of two),
never averaged percentiles. fio's raw JSON is kept beside result.json.

Phases fio cannot express faithfully (whole-file transfers, metadata operations, files of
different sizes in one worker) are refused through ``why_not``; the runner then runs them with
the posix engine and says so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from ..core.errors import EngineError
from ..core.safeio import held_path
from ..result.file import PhaseResult
from ..result.stats import Histogram, spread
from ..target import drop_file_cache
from .base import Engine, EngineContext, PhaseSpec, cache_label
from .fio_job import (
    FIO_OPS,
    FioPlan,
    _direction,
    build_plan,
    why_not,
)

POLL_S = 0.2
STOP_GRACE_S = 10.0  # after SIGINT fio writes its JSON for what it did; then it is killed


# -- output -----------------------------------------------------------------------------------
def parse_output(text: str) -> dict[str, Any]:
    """fio's JSON from its output, ignoring anything fio printed before or after it."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON in fio's output")
    obj, _ = json.JSONDecoder().raw_decode(text, start)
    if not isinstance(obj, dict) or not isinstance(obj.get("jobs"), list):
        raise ValueError("fio's JSON has no 'jobs' list")
    return obj


@dataclass(frozen=True)
class FioJobStats:
    """One job's figures for one direction, in iobench's units (bytes, seconds, ns)."""

    name: str
    error: int
    io_bytes: int
    bw_bytes: float
    iops: float
    runtime_s: float
    total_ios: int
    clat: dict[str, Any]
    lat_mean_ns: float
    slat_mean_ns: float
    hist: Histogram


def job_histogram(clat: dict[str, Any]) -> Histogram:
    """An iobench histogram from fio's json+ clat ``bins`` (exact min/max/mean kept)."""
    h = Histogram()
    for value, n in (clat.get("bins") or {}).items():
        h.record_bucketed(int(float(value)), int(n))
    if h.count:
        # the bins give each value's bucket; fio's own min, max and mean are exact
        h.min_ns = int(clat.get("min", h.min_ns))
        h.max_ns = int(clat.get("max", h.max_ns))
        h.sum_ns = int(round(float(clat.get("mean", h.mean_ns)) * h.count))
    return h


def normalise(data: dict[str, Any], ddir: str) -> list[FioJobStats]:
    """Per-job figures for direction ``ddir`` ("read" or "write")."""
    out = []
    for job in data.get("jobs", []):
        d = job.get(ddir) or {}
        clat = d.get("clat_ns") or {}
        out.append(
            FioJobStats(
                name=str(job.get("jobname", "?")),
                error=int(job.get("error", 0) or 0),
                io_bytes=int(d.get("io_bytes", 0)),
                bw_bytes=float(d.get("bw_bytes", 0)),
                iops=float(d.get("iops", 0)),
                runtime_s=int(d.get("runtime", 0)) / 1000.0,
                total_ios=int(d.get("total_ios", 0)),
                clat=clat,
                lat_mean_ns=float((d.get("lat_ns") or {}).get("mean", 0.0)),
                slat_mean_ns=float((d.get("slat_ns") or {}).get("mean", 0.0)),
                hist=job_histogram(clat),
            )
        )
    return out


def to_phase_result(
    phase: PhaseSpec, data: dict[str, Any], plan: FioPlan | None = None
) -> PhaseResult:
    """Aggregate fio's jobs like the posix engine: all bytes over the slowest job's runtime."""
    jobs = normalise(data, _direction(phase.op))
    active = [j for j in jobs if j.total_ios > 0]
    hist = Histogram.merged(j.hist for j in jobs)
    total_bytes = sum(j.io_bytes for j in jobs)
    total_ops = sum(j.total_ios for j in jobs)
    # fio reports runtime in whole milliseconds: a job that moved data took at least 1 ms
    runtimes = [max(j.runtime_s, 1e-3) for j in active]
    elapsed = max(runtimes, default=0.0)
    first = min(runtimes, default=0.0)
    # fio does not say what each job had done when the first one finished: assume each job
    # moved its bytes evenly over its runtime (exact for steady jobs)
    at_first = sum(
        j.io_bytes * min(1.0, first / rt) for j, rt in zip(active, runtimes, strict=True)
    )
    files_by_name = {j.name: len(j.paths) for j in plan.jobs} if plan else {}
    cache = cache_label(phase)
    end_epoch = float(data.get("timestamp_ms", time.time() * 1000)) / 1000.0
    extra: dict[str, Any] = {
        "fio_version": data.get("fio version"),
        "stonewall_basis": (
            "fio does not report what each job had done when the first finished: "
            "bytes x (first job's runtime / job's runtime), assuming steady jobs"
        ),
        "latency_basis": "fio clat (completion latency)",
    }
    if active:
        extra["start_epoch"] = end_epoch - elapsed
        extra["end_epoch"] = end_epoch
        extra["first_end_epoch"] = end_epoch - elapsed + first
        n = sum(j.total_ios for j in active)
        extra["fio_lat_mean_s"] = sum(j.lat_mean_ns * j.total_ios for j in active) / n / 1e9
        extra["fio_slat_mean_s"] = sum(j.slat_mean_ns * j.total_ios for j in active) / n / 1e9
        extra["fio_runtime_s"] = {j.name: j.runtime_s for j in jobs}
    return PhaseResult(
        name=phase.name,
        op=phase.op,
        bytes=total_bytes,
        ops=total_ops,
        files=sum(files_by_name.get(j.name, 1) for j in active),
        concurrency=phase.jobs,
        block_size=phase.block_size,
        elapsed_s=elapsed,
        stonewall_s=first,
        bandwidth_bps=total_bytes / elapsed if elapsed else 0.0,
        iops=total_ops / elapsed if elapsed else 0.0,
        bandwidth_stonewall_bps=at_first / first if first else 0.0,
        latency_s=hist.summary_s(),
        histogram=hist.to_dict(),
        per_worker=spread([j.io_bytes / rt for j, rt in zip(active, runtimes, strict=True)]),
        cache=cache,
        params=phase.result_params,
        extra=extra,
    )


def _empty(phase: PhaseSpec) -> PhaseResult:
    return PhaseResult(
        name=phase.name, op=phase.op, concurrency=phase.jobs, block_size=phase.block_size,
        cache="direct" if phase.direct else "buffered",
    )  # fmt: skip


def _failed(phase: PhaseSpec, problem: str, res: PhaseResult | None = None) -> EngineError:
    """An EngineError carrying what was measured (``partial``), as every engine raises it."""
    res = res if res is not None else _empty(phase)
    res.status = "partial" if res.ops or res.bytes else "failed"
    if "error 28 (" in problem or "No space left on device" in problem:
        problem = f"disk full (ENOSPC): {problem}"
    res.error = problem
    res.extra.setdefault("engine", "fio")
    return EngineError(f"phase {phase.name}: {problem}", partial=res)


# fio's status line (--eta=always): "Jobs: 1 (f=1), 0B/s-400MiB/s: [W(1)][42.9%][w=281MiB/s]
# [w=280 IOPS][eta 00m:04s]"; the range before the colon is the rate limit, not a rate.
# Before fio has an estimate the percentage reads "-.-%".
_ETA_RE = re.compile(r"\]\[(?P<pct>\d+(?:\.\d+)?|-\.-)%\]\[(?P<rates>[^\]]*)\]")
_RATE_RE = re.compile(r"[rwt]=(?P<v>\d+(?:\.\d+)?)(?P<u>[KMGTP]?i?)B/s")
_RATE_UNITS = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50}
_RATE_UNITS.update({"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15})


def parse_eta(text: str) -> tuple[float | None, float] | None:
    """The last status line in fio's ``--eta=always`` output: (percent done or None while fio
    has no estimate, bytes/s now, reads and writes together); None when there is none yet."""
    last = None
    for m in _ETA_RE.finditer(text):
        last = m
    if last is None:
        return None
    rate = sum(
        float(r.group("v")) * _RATE_UNITS.get(r.group("u"), 1)
        for r in _RATE_RE.finditer(last.group("rates"))
    )
    pct = last.group("pct")
    return (None if pct == "-.-" else float(pct)), rate


def strip_eta(text: str) -> str:
    """fio's stdout without its status lines (what error messages quote)."""
    parts = re.split(r"[\r\n]", text or "")
    return "\n".join(p for p in parts if p.strip() and not p.lstrip().startswith("Jobs:"))


class EtaProgress:
    """Feeds an engine Progress from fio's status lines: done bytes from the percentage when
    the phase has a size and fio an estimate, else the reported rates summed over time since
    fio started (a display, never a figure of the result). Operations go with the bytes: one
    per ``block_size`` (fio's blocks are that size), so a live row's IOPS is never 0 while
    its bytes grow."""

    def __init__(
        self, progress, total_bytes: int | None, clock=time.monotonic, block_size: int = 0
    ):
        self.progress = progress
        self.total = total_bytes
        self.block_size = block_size
        self.clock = clock
        self.offset = 0
        self.tail = ""
        self.done = 0.0
        self.last_t = clock()

    def feed(self, text: str) -> None:
        """Take fio's newest stdout text (appended since the last call)."""
        self.tail = (self.tail + text)[-4096:]
        eta = parse_eta(self.tail)
        if eta is None:
            return
        pct, rate = eta
        if rate > 0:  # fio moves data (its percentage may not, on a long phase): no stall
            getattr(self.progress, "beat", lambda: None)()
        now = self.clock()
        if self.total and pct is not None:
            done = self.total * min(pct, 100.0) / 100.0
        else:
            done = self.done + rate * max(0.0, now - self.last_t)
            if self.total:
                done = min(done, float(self.total))
        self.last_t = now
        if done > self.done:
            self.done = done
            ops = int(done) // self.block_size if self.block_size else 0
            self.progress.update(int(done), ops)

    def poll(self, fd: int) -> None:
        """Read what fio wrote to ``fd`` since the last poll (pread: fio's offset stays put)."""
        try:
            data = os.pread(fd, 1 << 16, self.offset)
        except OSError:
            return
        if data:
            self.offset += len(data)
            self.feed(data.decode(errors="replace"))


def _last_line(*texts: str) -> str:
    for text in texts:
        lines = [ln.strip() for ln in strip_eta(text).splitlines() if ln.strip()]
        if lines:
            return lines[-1]
    return "no message"


def fio_cwd(plan: FioPlan, ctx: EngineContext) -> str:
    """Where fio runs: the run directory through the descriptor the run holds
    (``/proc/self/fd/N``, resolved by the child's ``chdir`` before it execs fio, which inherits
    the descriptor up to then), so a TARGET swapped for a link before fio starts leads fio's
    working directory nowhere else; fio names every file relative to it (``filename=``),
    and a working directory, once entered, follows no rename of its path."""
    return plan.cwd if ctx.run_fd is None else held_path(ctx.run_fd)


def _unique_path(directory: str, stem: str, ext: str) -> str:
    path = os.path.join(directory, f"{stem}{ext}")
    k = 2
    while os.path.lexists(path):  # a repeat of the same phase keeps every repeat's output
        path = os.path.join(directory, f"{stem}-{k}{ext}")
        k += 1
    return path


def _die_with_parent() -> Any:
    """A preexec_fn that makes Linux SIGKILL fio when this process dies, however it dies
    (SIGKILL, the OOM killer): an orphaned fio would go on writing into the target. libc is
    loaded here, before the fork, never in the child."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return arm


class FioEngine(Engine):
    """Runs phases with fio (``--output-format=json+``)."""

    name = "fio"

    @classmethod
    def available(cls) -> tuple[bool, str | None]:
        if shutil.which("fio") is None:
            return False, "fio is not on PATH"
        return True, None

    def version(self) -> str | None:
        from ..core.tools import fio_version

        return fio_version()

    def supports(self, op: str) -> bool:
        return op in FIO_OPS

    def why_not(self, phase: PhaseSpec) -> str | None:
        """Why this engine cannot run ``phase`` faithfully; None when it can."""
        return why_not(phase)

    def run(self, phase: PhaseSpec, ctx: EngineContext) -> PhaseResult:
        exe = shutil.which("fio")
        if exe is None:
            err = _failed(phase, "fio is not on PATH")
            err.hint = "install fio (apt-get install fio) or use --engine posix"
            raise err
        plan = build_plan(phase, ctx.run_dir)
        job_text = plan.text()  # refused here (exit 2), before fio runs, if a value is unsafe
        if not phase.op.endswith("write"):
            self._check_inputs(phase, plan)
        cwd = fio_cwd(plan, ctx)
        # the job file and fio's output live in the run directory, like everything iobench
        # writes: removed with it on success, error, every signal and a stall's give-up
        # (os._exit, where no finally runs); fio, whose working directory it is, is given
        # them relative to it, "./" first (a name is never read as one of fio's options)
        with tempfile.TemporaryDirectory(prefix=".iobench-fio-", dir=cwd) as tmp:
            name = os.path.basename(tmp)
            jobfile = os.path.join(tmp, "job.fio")
            output = os.path.join(tmp, "out.json")
            with open(jobfile, "w") as f:
                f.write(job_text)
            total = (
                None
                if phase.time_s
                else sum(j.io_bytes or j.length * len(j.paths) for j in plan.jobs)
            )
            ctx.progress.start(phase.name, total, None)
            if phase.time_s:
                ctx.progress.set_duration(phase.time_s)
            try:
                rc, stderr, stdout, stopped, timed_out = self._execute(
                    exe,
                    f"./{name}/job.fio",
                    f"./{name}/out.json",
                    phase,
                    ctx,
                    cwd,
                    EtaProgress(ctx.progress, total, block_size=phase.block_size or 0),
                )
            finally:
                ctx.progress.close()
            text = ""
            if os.path.exists(output):
                with open(output, errors="replace") as f:
                    text = f.read()
            raw_path = self._keep_raw(ctx, phase, text, plan)
        return self._result(
            phase, plan, ctx, rc, text, stderr, stdout, stopped, timed_out, raw_path
        )

    # -- running fio -------------------------------------------------------------------------
    def _check_inputs(self, phase: PhaseSpec, plan: FioPlan) -> None:
        """Reads need files already written: fio would otherwise lay them out itself."""
        for j in plan.jobs:
            for p in map(plan.abspath, j.paths):
                try:
                    size = os.stat(p).st_size
                except OSError as e:
                    raise _failed(phase, f"cannot read {p}: {e.strerror or e}") from None
                if size < j.offset + j.length:
                    raise _failed(
                        phase,
                        f"{p} holds {size} bytes, fewer than the {j.offset + j.length} the "
                        "phase reads (write the files before reading them)",
                    )

    def _execute(
        self,
        exe: str,
        jobfile: str,
        output: str,
        phase: PhaseSpec,
        ctx: EngineContext,
        cwd: str,
        eta: EtaProgress | None = None,
    ) -> tuple[int, str, str, bool, bool]:
        # the status line goes to stdout (the figures to --output): it feeds the progress bar
        status = (
            ["--eta=always", "--eta-newline=1", "--eta-interval=1s"] if eta else ["--eta=never"]
        )
        # --thread: fio's jobs are threads of the one fio process, so that the death signal
        # armed below ends them all (forked job processes would be orphaned and go on writing)
        cmd = [exe, "--thread", "--output-format=json+", f"--output={output}", *status, jobfile]
        limit = phase.time_s + max(60.0, phase.time_s) if phase.time_s else None
        with tempfile.TemporaryFile() as err_f, tempfile.TemporaryFile() as out_f:
            try:
                proc = subprocess.Popen(
                    cmd,
                    stdout=out_f,
                    stderr=err_f,
                    stdin=subprocess.DEVNULL,
                    cwd=cwd,
                    preexec_fn=_die_with_parent(),
                )
            except OSError as e:
                raise _failed(phase, f"cannot start fio ({exe}): {e.strerror or e}") from None
            t0 = time.monotonic()
            stopped = timed_out = False
            try:
                while proc.poll() is None:
                    try:
                        proc.wait(POLL_S)
                    except subprocess.TimeoutExpired:
                        pass
                    if proc.returncode is not None:
                        break
                    if eta is not None:
                        eta.poll(out_f.fileno())
                    if ctx.stop.is_set() and not stopped:
                        stopped = True
                        self._interrupt(proc)
                    elif limit is not None and time.monotonic() - t0 > limit and not timed_out:
                        timed_out = True
                        self._interrupt(proc)
            except BaseException:  # Ctrl-C in this thread: fio must not outlive us
                self._interrupt(proc)
                raise
            if eta is not None:
                eta.poll(out_f.fileno())  # fio's last status line: the bar ends where fio did
            # a terminal's Ctrl-C reaches fio too: it may have ended before we saw the flag
            stopped = stopped or ctx.stop.is_set()
            err_f.seek(0)
            out_f.seek(0)
            stderr = err_f.read().decode(errors="replace")
            stdout = out_f.read().decode(errors="replace")
        return proc.returncode, stderr, stdout, stopped, timed_out

    @staticmethod
    def _interrupt(proc: subprocess.Popen) -> None:
        """SIGINT (fio stops its jobs and writes what they did), then SIGKILL if it lingers,
        or if the wait is cut short (a second Ctrl-C): fio never outlives this call."""
        if proc.poll() is not None:
            return
        try:
            proc.send_signal(signal.SIGINT)
            proc.wait(STOP_GRACE_S)
        except (subprocess.TimeoutExpired, OSError):
            pass
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def _keep_raw(
        self, ctx: EngineContext, phase: PhaseSpec, text: str, plan: FioPlan
    ) -> str | None:
        if not ctx.raw_dir or not text:
            return None
        from ..core.safeio import write_atomic

        try:
            stem = "fio-" + re.sub(r"[^A-Za-z0-9_.-]", "_", phase.name)
            path = _unique_path(ctx.raw_dir, stem, ".json")
            # the one output rule: new files (O_EXCL|O_NOFOLLOW, linked into place, never
            # replacing anything), never through a link planted in the output directory
            write_atomic(path, text.encode(), replace=False)
            write_atomic(path[: -len(".json")] + ".fio", plan.text().encode(), replace=False)
            return path
        except OSError:
            return None  # keeping fio's JSON is a courtesy; the figures are already parsed

    def _result(
        self,
        phase: PhaseSpec,
        plan: FioPlan,
        ctx: EngineContext,
        rc: int,
        text: str,
        stderr: str,
        stdout: str,
        stopped: bool,
        timed_out: bool,
        raw_path: str | None,
    ) -> PhaseResult:
        data: dict[str, Any] | None = None
        parse_error = None
        try:
            data = parse_output(text)
        except ValueError as e:
            parse_error = str(e) or "malformed JSON"
        res = to_phase_result(phase, data, plan) if data is not None else _empty(phase)
        res.extra["engine"] = self.name
        res.extra["fio_ioengine"] = plan.global_opts["ioengine"]
        res.extra["fio_cwd"] = plan.cwd  # the job file's file names are relative to it
        if raw_path:
            res.extra["fio_json"] = raw_path
        if phase.drop_cache_after:
            for j in plan.jobs:
                for p in j.paths:
                    if ctx.run_fd is None:
                        drop_file_cache(plan.abspath(p))
                    else:
                        drop_file_cache(p, ctx.run_fd)
        job_errors = [
            (j.get("jobname", "?"), int(j.get("error", 0) or 0))
            for j in (data or {}).get("jobs", [])
            if int(j.get("error", 0) or 0) and not (stopped and int(j.get("error", 0)) == 4)
        ]  # EINTR is how a job stopped by SIGINT ends
        problem = None
        if timed_out:
            problem = "fio did not finish in time and was stopped"
        elif job_errors:
            name, code = job_errors[0]
            problem = (
                f"fio job {name} failed with error {code} ({os.strerror(code)}): "
                + _last_line(stderr, stdout)
            )
        elif rc != 0 and not stopped:
            problem = f"fio exited with status {rc}: {_last_line(stderr, stdout)}"
        elif data is None:
            problem = (
                f"fio's output could not be read ({parse_error}): {_last_line(stderr, stdout)}"
            )
        if problem:
            raise _failed(phase, problem, res)
        if stopped:
            res.status = "partial"
            res.error = "interrupted"
        return res
