"""The fsspec engine: object stores (S3 through s3fs) and any fsspec URL, over worker threads.

Each operation is one kind of object-store request, timed on the client:

- ``write``: a large object streamed through ``fs.open(path, "wb")`` in ``block_size`` pieces;
  on S3 each piece is one multipart part (part size ``max(block_size, 5 MiB)``) and closing the
  file completes the upload, inside the timed region. A stopped or failed upload is aborted.
- ``read``: whole objects (``block_size`` 0: one GET each) or one ranged GET per block.
- ``randread``: ranged GETs at random block-aligned offsets (``fs.cat_file(path, start, end)``).
- ``create`` one PUT of a small object; ``stat`` one HEAD (``fs.info``, listing cache cleared
  first); ``open_read`` one GET of a whole object; ``delete`` one DELETE.

There is no page cache between iobench and a store: phases record cache ``"none"``. O_DIRECT
and fsync have no object-store meaning; when a phase asks for them it says so in its warnings
and does nothing it could not honestly do. One filesystem instance serves every thread: s3fs
runs its requests on one event-loop thread behind thread-safe synchronous wrappers.
"""

from __future__ import annotations

import functools
import posixpath
from typing import Any

from ..core.datagen import DataPool
from ..core.errors import EngineError, RequestError, quoted
from ..core.safeio import held_path
from ..result.file import PhaseResult
from ..result.measured import phase_result
from ..result.stats import WorkerStats
from ..target import scrub
from ..target.storage import open_fs
from .base import Engine, EngineContext, PhaseSpec, Segment
from .base import assign as assign_work
from .worker import (
    CHUNK,
    PhaseState,
    RandomDraws,
    Stop,
    block_len,
    data_pool,
    finish,
    meta_passes,
    pace,
    perf_ns,
    run_phase,
    run_threads,
    run_worker,
    seq_passes,
)

S3_MIN_PART = 5 << 20  # S3 refuses multipart parts below 5 MiB (except the last)
OPS = ("write", "read", "randread", "create", "stat", "open_read", "delete")
_perf_ns = perf_ns


def join(root: str, rel: str) -> str:
    """``root/rel`` for fsspec paths; ``..`` (another rank's run dir) is resolved here because
    object stores do not resolve it."""
    path = posixpath.join(root.rstrip("/"), rel)
    return posixpath.normpath(path) if ".." in rel.split("/") else path


def assign(phase: PhaseSpec, root: str) -> list[list[Segment]]:
    """Deal objects (or regions of them, in shared mode) to the phase's workers."""
    return assign_work(phase, root, join)


def describe_error(e: BaseException, path: str) -> str:
    """One line for a failed request, without credentials."""
    if isinstance(e, FileNotFoundError):
        text = f"not found: {path}"
    elif isinstance(e, PermissionError):
        text = f"access denied: {path}"
    else:
        detail = quoted(e, 200)
        text = f"{type(e).__name__}: {detail} ({path})"
    return scrub(text)


def _is_local(fs: Any) -> bool:
    protos = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
    return bool({"file", "local"} & set(protos))


class FsspecEngine(Engine):
    name = "fsspec"
    direct_io = False  # fsspec's local files go through the page cache whatever is asked

    @classmethod
    def available(cls) -> tuple[bool, str | None]:
        try:
            import fsspec  # noqa: F401
        except ImportError:  # pragma: no cover - fsspec is a dependency
            return False, "fsspec is not installed"
        return True, None

    def version(self) -> str | None:
        import fsspec

        return fsspec.__version__

    def supports(self, op: str) -> bool:
        return op in OPS

    def why_not(self, phase: PhaseSpec) -> str | None:
        """Phases an object store cannot express faithfully."""
        if phase.op == "write" and phase.mode == "shared":
            return "objects cannot be written in regions by several workers (mode=shared)"
        return None

    # -- running a phase ---------------------------------------------------------------------
    def run(self, phase: PhaseSpec, ctx: EngineContext) -> PhaseResult:
        if phase.op not in OPS:
            raise EngineError(f"the fsspec engine cannot run op {phase.op!r}")
        why = self.why_not(phase)
        if why:
            raise EngineError(f"phase {phase.name}: {why}")
        # a local run directory (--engine fsspec on a directory): through the descriptor held
        where = ctx.run_dir if ctx.run_fd is None else held_path(ctx.run_fd)
        try:
            fs, root = open_fs(where, ctx.storage_options)
        except Exception as e:  # noqa: BLE001 - fsspec backends raise what they like
            raise EngineError(
                f"cannot open {scrub(ctx.run_dir)}: {describe_error(e, '')}"
            ) from None
        if phase.op == "stat":
            fs.invalidate_cache()  # HEAD every object: no answers from a listing cache
        work = assign(phase, root)
        part = self._part_size(fs, phase)

        def coordinate(state: PhaseState, origin: float, box: list) -> list[WorkerStats]:
            one = functools.partial(self._worker, fs, phase, work, state, part)
            return run_threads(phase, state, origin, box, one)

        result = functools.partial(self._result, fs, phase, part)
        return run_phase(phase, ctx, work, coordinate, result, steady=False)

    def _part_size(self, fs: Any, phase: PhaseSpec) -> int | None:
        if phase.op != "write":
            return None
        bs = phase.block_size or max((f.size for f in phase.files), default=S3_MIN_PART)
        if getattr(type(fs), "__module__", "").startswith("s3fs"):
            return max(bs, S3_MIN_PART)
        return bs

    def _result(
        self, fs: Any, phase: PhaseSpec, part: int | None, stats: list[WorkerStats], state
    ) -> PhaseResult:
        local = _is_local(fs)
        params = phase.result_params
        if part is not None:
            params["part_size"] = part
        res = phase_result(
            phase.name,
            phase.op,
            stats,
            concurrency=phase.jobs,
            block_size=phase.io_block_size(),
            cache="buffered" if local else "none",
            params=params,
        )
        proto = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        res.extra["backend"] = f"{proto} ({type(fs).__module__.split('.')[0]})"
        res.warnings.extend(phase.block_size_warnings())
        if phase.op in ("write", "create") and phase.fsync != "never" and not local:
            res.warnings.append(
                f"fsync={phase.fsync} is unsupported on {proto}:// (nothing to fsync): an object "
                "is durable when its PUT or multipart upload completes, inside the timed region"
            )
        if phase.direct:
            res.warnings.append(
                f"direct=true is unsupported on {proto}:// (no O_DIRECT through fsspec): "
                "requests went through the client as usual"
            )
        return finish(res, phase, state)

    # -- workers -----------------------------------------------------------------------------
    def _worker(self, fs, phase, work, state, part, w, st, ready) -> None:
        segments = work[w]

        def setup() -> list[Any]:
            return [data_pool(phase, w, segments)] if phase.op in ("write", "create") else []

        def loop(bufs: list[Any]) -> None:
            pool = bufs[0] if bufs else None
            if phase.op in ("create", "stat", "open_read", "delete"):
                self._meta_loop(fs, phase, w, segments, st, state, pool)
            elif phase.op == "randread":
                self._random_loop(fs, phase, w, segments, st, state)
            else:
                self._seq_loop(fs, phase, w, segments, st, state, pool, part)

        def on_error(e: Exception) -> str:  # any backend error ends the phase, recorded
            if isinstance(e, RequestError):  # the backend's error, on that object
                return describe_error(e.cause, e.path)
            return describe_error(e, "")

        run_worker(state, w, st, ready, setup, loop, on_error=on_error)

    def _seq_loop(self, fs, phase, w, segments, st, state, pool, part) -> None:
        deadline = (st.start + phase.time_s) if phase.time_s else None

        def one_file(seg: Segment, moved: int, first_pass: bool) -> tuple[int, bool, int, int]:
            t_file = _perf_ns()
            try:
                if phase.op == "write":
                    done, reached = self._write_object(
                        fs, phase, w, seg, st, state, pool, part, moved, deadline
                    )
                else:
                    done, reached = self._read_object(fs, phase, w, seg, st, state, moved, deadline)
            except Stop:
                raise
            except Exception as e:
                raise RequestError(seg.path, e) from e
            return done, reached, t_file, _perf_ns()

        seq_passes(phase, w, segments, st, state, one_file)

    def _block_done(self, phase, st, state, w, n, t0, t1, total, deadline) -> bool:
        """Count a block of a sequential object (as an op with its latency, unless the whole
        object is the op), publish the worker's progress and pace it; True at the deadline."""
        if phase.latency_per != "file":
            st.add(n, t1 / 1e9, t1 - t0)
            state.done_ops[w] = st.ops  # published as the bytes are
        state.done_bytes[w] = total
        if deadline and t1 / 1e9 >= deadline:
            return True
        if phase.rate_bps:
            pace(phase, st, total, state.should_stop)
        return False

    def _write_object(self, fs, phase, w, seg, st, state, pool, part, moved, deadline):
        """Stream one object; returns (bytes, budget or deadline reached)."""
        f = fs.open(seg.path, "wb", block_size=part)
        pos, end, done, ok, reached = seg.offset, seg.offset + seg.length, 0, False, False
        try:
            while pos < end:
                if state.should_stop():
                    raise Stop
                n = min(block_len(phase, pos, end, moved + done), pool.block_size)
                if n <= 0:
                    reached = True
                    break
                data = pool.next_block(seg.file_id, pos, n)
                t0 = _perf_ns()
                f.write(data)
                t1 = _perf_ns()
                pos += n
                done += n
                if self._block_done(phase, st, state, w, n, t0, t1, moved + done, deadline):
                    reached = True
                    break
            f.close()  # the last part and the multipart completion: timed with the object
            ok = True
            st.end = _perf_ns() / 1e9
        finally:
            if not ok:
                _abort(f)
        return done, reached

    def _read_object(self, fs, phase, w, seg, st, state, moved, deadline):
        """Read one object whole (block_size 0) or in ranged GETs; (bytes, limit reached)."""
        pos, end, done = seg.offset, seg.offset + seg.length, 0
        while pos < end:
            if state.should_stop():
                raise Stop
            n = block_len(phase, pos, end, moved + done)
            if n <= 0:
                return done, True
            t0 = _perf_ns()
            if not phase.block_size and pos == 0 and n == seg.length:
                data = fs.cat_file(seg.path)  # one GET of the whole object
            else:
                data = fs.cat_file(seg.path, start=pos, end=pos + n)
            t1 = _perf_ns()
            got = len(data)
            del data
            if got <= 0:
                break  # past the end of a shorter object
            pos += got
            done += got
            if self._block_done(phase, st, state, w, got, t0, t1, moved + done, deadline):
                return done, True
        return done, False

    def _random_loop(self, fs, phase, w, segments, st, state) -> None:
        draws = RandomDraws(phase, w, segments, phase.block_size or 4096)
        if not draws.segs:
            return
        bs = draws.bs
        deadline = (st.start + phase.time_s) if phase.time_s else None
        done_ops = 0
        while deadline or done_ops < draws.n_ops:
            chunk = CHUNK if deadline else min(CHUNK, draws.n_ops - done_ops)
            which, offs = draws.draw(chunk)
            for k, i in enumerate(which):
                if state.should_stop():
                    raise Stop
                seg = draws.segs[i]
                t0 = _perf_ns()
                try:
                    got = len(fs.cat_file(seg.path, start=offs[k], end=offs[k] + bs))
                except Exception as e:
                    raise RequestError(seg.path, e) from e
                t1 = _perf_ns()
                st.add(got, t1 / 1e9, t1 - t0)
                st.end = t1 / 1e9
                if phase.rate_bps:
                    pace(phase, st, st.bytes, state.should_stop)
                if deadline and st.end >= deadline:
                    return
            done_ops += chunk
            state.publish(w, st)

    def _meta_loop(self, fs, phase, w, segments, st, state, pool) -> None:
        op = phase.op
        for seg in meta_passes(phase, segments, st):
            if state.should_stop():
                raise Stop
            data = _object_bytes(pool, seg) if op == "create" else None
            n = 0
            try:
                t0 = _perf_ns()
                if op == "create":
                    fs.pipe_file(seg.path, data)
                    n = seg.length
                elif op == "stat":
                    fs.info(seg.path)
                elif op == "open_read":
                    n = len(fs.cat_file(seg.path))
                else:
                    fs.rm_file(seg.path)
                t1 = _perf_ns()
            except Exception as e:
                raise RequestError(seg.path, e) from e
            st.add(n, t1 / 1e9, t1 - t0)
            st.files += 1
            st.end = t1 / 1e9
            state.publish(w, st)


def _object_bytes(pool: DataPool, seg: Segment) -> bytes:
    """A small object's random content, built before its PUT is timed."""
    parts, pos = [], 0
    while pos < seg.length:
        n = min(pool.block_size, seg.length - pos)
        parts.append(bytes(pool.next_block(seg.file_id, pos, n)))
        pos += n
    return b"".join(parts)


def _abort(f: Any) -> None:
    """Never complete a partial upload: abort it (S3 multipart) and drop the buffer."""
    try:
        discard = getattr(f, "discard", None)
        if discard is not None:
            discard()
        f.closed = True
    except Exception:  # noqa: BLE001 - best effort; the run prefix is removed afterwards
        pass
