"""The coordinator interface: one client's trivial collectives, and two real gloo ranks.

The two-rank test spawns two processes that join a gloo group on localhost the way torchrun's
environment makes them (``coordinator_from_env``), and checks every call of the interface
against the single-process answers.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import traceback

import pytest

from iobench.core.coordinator import Coordinator, SingleProcess
from iobench.core.errors import UsageError
from iobench.distributed import TorchCoordinator, coordinator_from_env
from iobench.result.file import PhaseResult


def test_single_process_is_rank_0_of_1():
    c = SingleProcess(hostname="h1")
    assert isinstance(c, Coordinator)
    assert (c.rank, c.world, c.local_rank, c.ranks_per_host) == (0, 1, 0, 1)
    assert c.hosts == ["h1"] and c.clock_offset() == 0.0
    assert c.shared_run_id("RID") == "RID"
    assert c.run_dir_id("RID") == "RID"  # TARGET/.iobench-RID: no rank suffix
    assert c.read_shift() == 0 and c.read_prefix(0) == ""
    assert c.peer_failure() is None


def test_single_process_collectives_are_trivial():
    c = SingleProcess()
    c.barrier()
    assert c.all_gather_object({"a": 1}) == [{"a": 1}]
    box = object()
    assert c.broadcast_object(box) is box
    with pytest.raises(ValueError):
        c.broadcast_object(box, src=1)
    assert c.any_stopping(False) is False and c.any_stopping(True) is True
    res = PhaseResult(name="p", op="read", bytes=1, ops=1)
    c.before_phase(None)
    assert c.after_phase(None, res) is res  # one client's result is the result
    c.attach(None)
    c.abandon("why")
    c.remove_peer_run_dirs()
    c.close()


def test_single_process_agreed_runs_the_check_and_keeps_its_error():
    c = SingleProcess()
    assert c.agreed(lambda: 7) == 7
    with pytest.raises(UsageError, match="^mine$"):
        c.agreed(lambda: (_ for _ in ()).throw(UsageError("mine")))


def test_both_coordinators_have_every_method_of_the_interface():
    import inspect

    methods = [n for n, v in vars(Coordinator).items() if inspect.isfunction(v) and n[0] != "_"]
    assert "all_gather_object" in methods and "agreed" in methods
    for cls in (SingleProcess, TorchCoordinator):
        for name in [*methods, "ranks_per_host"]:
            assert callable(getattr(cls, name, None)) or name == "ranks_per_host", (cls, name)
            assert hasattr(cls, name), (cls, name)


# -- two real ranks over gloo -----------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, port: int, out: mp.Queue) -> None:
    env = {
        "WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank),
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "IOBENCH_DIST_TIMEOUT": "30s",
    }  # fmt: skip
    import os

    os.environ.update(env)
    try:
        c = coordinator_from_env()
        got: dict = {"rank": c.rank, "world": c.world, "local_rank": c.local_rank}
        got["hosts"] = list(c.hosts)
        got["per_host"] = c.ranks_per_host
        got["offset"] = c.clock_offset()
        got["run_id"] = c.shared_run_id(f"RID{rank}")
        got["run_dir_id"] = c.run_dir_id(got["run_id"])
        c.barrier()
        got["gather"] = c.all_gather_object({"r": rank})
        got["bcast"] = c.broadcast_object(f"from{rank}", src=1)
        got["stopping"] = c.any_stopping(rank == 1)
        got["agreed"] = c.agreed(lambda: rank * 10)
        try:
            c.agreed(lambda: (_ for _ in ()).throw(UsageError("no room")) if rank == 1 else 1)
        except UsageError as e:
            got["refused"] = e.message
        c.close()
        out.put((rank, got))
    except BaseException:  # noqa: BLE001 - handed to the test
        out.put((rank, traceback.format_exc()))


@pytest.mark.slow  # two spawned processes import torch (about 10 s on a loaded host)
def test_two_gloo_ranks_answer_as_one_job():
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    try:
        answers = dict(out.get(timeout=120) for _ in procs)
    finally:
        for p in procs:
            p.join(30)
            if p.is_alive():
                p.kill()
    for r in range(2):
        assert isinstance(answers[r], dict), answers[r]
    a0, a1 = answers[0], answers[1]
    assert (a0["rank"], a0["world"], a1["rank"], a1["world"]) == (0, 2, 1, 2)
    assert a1["local_rank"] == 1
    assert a0["hosts"] == a1["hosts"] and len(a0["hosts"]) == 2
    assert a0["per_host"] == 2  # both on this host
    assert a0["offset"] == 0.0 and abs(a1["offset"]) < 5.0  # same host: the same clock
    assert a0["run_id"] == a1["run_id"] == "RID0"  # rank 0's
    assert (a0["run_dir_id"], a1["run_dir_id"]) == ("RID0-r0", "RID0-r1")
    assert a0["gather"] == a1["gather"] == [{"r": 0}, {"r": 1}]
    assert a0["bcast"] == a1["bcast"] == "from1"
    assert a0["stopping"] is True and a1["stopping"] is True  # any rank stopping stops all
    assert (a0["agreed"], a1["agreed"]) == (0, 10)
    assert a0["refused"] == "rank 1: no room"  # named on the rank that did not refuse
    assert a1["refused"] == "no room"  # its own refusal, as it was
