"""Rank coordination: one loop per emulated accelerator (a process each when ``gpus`` > 1, or
this rank under torchrun), their figures gathered and aggregated into one LoopResult."""

from __future__ import annotations

import multiprocessing as mp
import signal
import sys
from dataclasses import replace
from multiprocessing.connection import wait as mp_wait
from typing import Any

from ..core.coordinator import Coordinator
from ..core.errors import EngineError, Interrupted
from ..result.stats import Histogram
from ..target import StopFlag, worker_signals
from .loop import LoopConfig, LoopResult, _last_line, _rank_loop
from .torchdata import _die_with_parent


def _rank_entry(cfg: LoopConfig, rank: int, barrier: Any, conn: Any) -> None:
    """A rank process: ignore Ctrl-C (the parent stops the run), report to the parent."""
    worker_signals()  # Ctrl-C, a hang-up, ...: the parent's to handle
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _die_with_parent()  # a SIGKILLed loader must not leave its ranks reading on
    try:
        import torch

        torch.set_num_threads(1)
        conn.send(("ok", _rank_loop(cfg, rank, barrier, None)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001 - best effort; the error below is what counts
            pass
        try:
            text = _last_line(e)
            if not text.startswith(type(e).__name__):
                text = f"{type(e).__name__}: {text}"
            conn.send(("error", text))
        except Exception:  # noqa: BLE001 - the parent is gone: nobody to tell
            pass
    finally:
        conn.close()


def _loop_here(
    cfg: LoopConfig, rank: int, barrier: Any, stop: StopFlag, device: int | None = None
) -> dict[str, Any]:
    """One rank's loop in this process; a DataLoader's failure as one EngineError line."""
    try:
        return _rank_loop(cfg, rank, barrier, stop, device)
    except (Interrupted, EngineError):
        raise
    except (OSError, RuntimeError) as e:
        raise EngineError(f"data loader: {_last_line(e)}") from None


def _run_ranks(cfg: LoopConfig, stop: StopFlag) -> list[dict[str, Any]]:
    """Run ``cfg.gpus`` ranks (in this process when one) and collect their figures."""
    if cfg.gpus == 1:
        return [_loop_here(cfg, 0, None, stop)]
    ctx = mp.get_context("spawn") if cfg.compute == "gpu" else mp.get_context("fork")
    barrier = ctx.Barrier(cfg.gpus)
    procs: list[Any] = []
    conns: list[Any] = []
    try:
        for r in range(cfg.gpus):
            parent, child = ctx.Pipe(duplex=False)
            p = ctx.Process(
                target=_rank_entry, args=(cfg, r, barrier, child), name=f"iobench-rank-{r}"
            )
            p.start()
            child.close()
            procs.append(p)
            conns.append(parent)
        results, errors = _collect(procs, conns, barrier, stop)
        if errors:
            # the rank that failed first, not the ones it left at a broken barrier
            first = [e for e in errors if "BrokenBarrierError" not in e] or errors
            raise EngineError(first[0])
        return [results[r] for r in range(cfg.gpus)]
    finally:
        _reap(procs, conns, stop)


def _collect(
    procs: list[Any], conns: list[Any], barrier: Any, stop: StopFlag
) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """Every rank's figures (by rank) and errors, as they come; a failed rank aborts the
    barrier so the others stop at their next step. A stop raises Interrupted."""
    results: dict[int, dict[str, Any]] = {}
    errors: list[str] = []
    pending = dict(enumerate(conns))
    while pending:
        if stop.is_set():
            stop.check()
        ready = mp_wait(list(pending.values()) + [procs[r].sentinel for r in pending], timeout=0.2)
        for r in list(pending):
            c = pending[r]
            if c not in ready and procs[r].sentinel not in ready:
                continue
            try:
                if not c.poll():
                    raise EOFError
                kind, payload = c.recv()
            except EOFError:
                procs[r].join(1)
                kind = "error"
                payload = f"exited (code {procs[r].exitcode}) without a result"
            del pending[r]
            if kind == "ok":
                results[r] = payload
                continue
            errors.append(f"loader rank {r}: {payload}")
            try:
                barrier.abort()  # the others stop at their next step
            except Exception:  # noqa: BLE001 - best effort; the error is already recorded
                pass
    return results, errors


def _reap(procs: list[Any], conns: list[Any], stop: StopFlag) -> None:
    """Every rank process ended (joined, else terminated, else killed) and its pipe closed."""
    for p in procs:
        if p.is_alive():
            p.join(0.5 if stop.is_set() else 5)
        if p.is_alive():
            p.terminate()
            p.join(5)
        if p.is_alive():
            p.kill()
            p.join()
    for c in conns:
        c.close()


def run_loop(cfg: LoopConfig, stop: StopFlag | None = None, first_epoch: int = 0) -> LoopResult:
    """Run the training loop and aggregate it: AU mean over ranks then epochs, rates summed.

    Epochs before ``first_epoch`` run but are left out of the figures (a warm-up).
    """
    return aggregate(cfg, _run_ranks(cfg, stop or StopFlag()), first_epoch)


def aggregate(cfg: LoopConfig, ranks: list[dict[str, Any]], first_epoch: int = 0) -> LoopResult:
    """Combine the ranks' per-epoch figures from ``first_epoch`` on."""
    epochs = range(first_epoch, cfg.epochs)
    n_ep = len(epochs)
    au_per_epoch, sps, bps = [], [], []
    for e in epochs:
        per = [r["epochs"][e] for r in ranks]
        au_per_epoch.append(sum(p["au"] for p in per) / len(per))
        sps.append(sum(p["samples"] / p["timed_s"] for p in per))
        bps.append(sum(p["bytes"] / p["timed_s"] for p in per))
    eps = [r["epochs"][e] for r in ranks for e in epochs]
    steps_t = sum(ep["timed_steps"] for ep in eps)
    samples_t = sum(ep["samples"] for ep in eps)

    def per_step(key: str) -> float:
        return sum(ep[key] for ep in eps) / steps_t if steps_t else 0.0

    def per_sample(key: str) -> float:
        return sum(ep.get(key, 0.0) for ep in eps) / samples_t if samples_t else 0.0

    wait = Histogram.merged(Histogram.from_dict(ep["wait"]) for ep in eps)
    return LoopResult(
        gpus=cfg.gpus,
        workers=cfg.workers,
        batch_size=cfg.batch_size,
        epochs=n_ep,
        steps=eps[0]["steps"] if eps else 0,
        au=sum(au_per_epoch) / n_ep if n_ep else 0.0,
        au_per_epoch=au_per_epoch,
        samples_per_s=sum(sps) / n_ep if n_ep else 0.0,
        bytes_per_s=sum(bps) / n_ep if n_ep else 0.0,
        wait=wait,
        compute_s=per_step("compute_s"),
        step_s=per_step("timed_s"),
        main_cpu_s=per_step("main_cpu_s"),
        read_s_per_sample=per_sample("read_s"),
        decode_s_per_sample=per_sample("decode_s"),
        ranks=ranks,
        decode_cpu_s_per_sample=per_sample("decode_cpu_s"),
    )


def run_on_ranks(cfg: LoopConfig, coord: Coordinator, stop: StopFlag) -> LoopResult:
    """The loop over every emulated accelerator of the run, aggregated (collective).

    One client emulates ``cfg.gpus`` accelerators with as many processes (``run_loop``); under
    torchrun each rank is one accelerator, its loop run here with a step barrier across ranks.
    """
    if coord.world > 1:
        return aggregate(cfg, _run_distributed(cfg, coord, stop))
    return run_loop(cfg, stop)  # patchable: tests/faults


def _run_distributed(cfg: LoopConfig, coord: Coordinator, stop: StopFlag) -> list[dict[str, Any]]:
    """This rank's loop under torchrun, every rank's figures gathered (collective)."""
    from ..distributed import StepBarrier

    cfg = replace(cfg, clock_rank=coord.rank)  # this rank's steps on its own writer's clock
    mine = _loop_here(cfg, coord.rank, StepBarrier(coord, stop), stop, coord.local_rank)
    mine["host"] = coord.hostname
    return coord.all_gather_object(mine)
