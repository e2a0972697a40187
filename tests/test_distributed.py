"""Many clients: cross-rank aggregation (pure), the hooks' failure paths, and real launches.

The slow tests launch 3 ranks on this host: ``torchrun --standalone`` twice (a normal run, and
one rank SIGKILLed mid-phase) and once by hand with torchrun's environment and no agent (one
rank frozen with SIGSTOP, so only its silence can end the run); and 2 ranks by hand, one
throttled, finishing each phase long after the other without the run timing out.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from iobench.core.coordinator import SingleProcess
from iobench.core.errors import DistributedError, Interrupted, UsageError
from iobench.distributed import (
    Comm,
    PeerWatch,
    TorchCoordinator,
    aggregate_ranks,
    coordinator_from_env,
    peer_files,
    read_source,
)
from iobench.engines.base import FileSpec
from iobench.result.file import PhaseResult
from iobench.result.stats import Histogram
from iobench.target import RUN_DIR_PREFIX, create_run_dir, resolve

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[1]


# -- aggregation across ranks (exact inputs, exact outputs) --------------------------------------


def _rank_result(nbytes: int, ops: int, start: float, end: float, lat_ms: list[int]) -> dict:
    h = Histogram()
    for v in lat_ms:
        h.record(v * 1_000_000)
    return PhaseResult(
        name="seq-write",
        op="write",
        bytes=nbytes,
        ops=ops,
        files=1,
        concurrency=2,
        block_size=MiB,
        histogram=h.to_dict(),
        series=[nbytes / (end - start)],
        series_interval_s=1.0,
        per_worker={"min": 1.0, "median": 2.0, "max": 3.0},
        cache="direct",
        extra={"start_epoch": start, "end_epoch": end, "first_end_epoch": end, "engine": "posix"},
    ).to_dict()


RECORDS = [
    # rank 1's clock runs 2 s ahead of rank 0's, rank 2's 1 s behind
    {"rank": 1, "host": "a", "clock_offset_s": 2.0, "read_from": None,
     "result": _rank_result(100 * MiB, 100, 1002.0, 1007.0, [2] * 100)},
    {"rank": 0, "host": "a", "clock_offset_s": 0.0, "read_from": None,
     "result": _rank_result(100 * MiB, 100, 1000.0, 1010.0, [1] * 100)},
    {"rank": 2, "host": "b", "clock_offset_s": -1.0, "read_from": None,
     "result": _rank_result(50 * MiB, 50, 999.0, 1019.0, [40] * 50)},
]  # fmt: skip


def test_aggregate_is_all_bytes_over_last_end_minus_first_start():
    agg = aggregate_ranks(RECORDS)
    assert (agg.bytes, agg.ops, agg.files, agg.concurrency) == (250 * MiB, 250, 3, 6)
    # corrected spans: r0 1000-1010, r1 1000-1005, r2 1000-1020
    assert agg.elapsed_s == pytest.approx(20.0)
    assert agg.bandwidth_bps == pytest.approx(250 * MiB / 20.0)
    assert agg.iops == pytest.approx(250 / 20.0)
    # stonewall: rank 1 done at 1005; by then r0 moved 50 MiB, r1 100, r2 12.5 (constant rates)
    assert agg.stonewall_s == pytest.approx(5.0)
    assert agg.bandwidth_stonewall_bps == pytest.approx(162.5 * MiB / 5.0)
    assert [r["rank"] for r in agg.ranks] == [0, 1, 2]
    assert [(r["start"], r["end"]) for r in agg.ranks] == [
        (1000.0, 1010.0),
        (1000.0, 1005.0),
        (1000.0, 1020.0),
    ]
    assert [r["bandwidth_bps"] for r in agg.ranks] == pytest.approx([10 * MiB, 20 * MiB, 2.5 * MiB])
    assert agg.extra["start_epoch"] == 1000.0 and agg.extra["end_epoch"] == 1020.0
    assert agg.extra["world"] == 3 and agg.extra["hosts"] == 2
    assert agg.params["ranks"] == 3


def test_aggregate_merges_histograms_exactly():
    agg = aggregate_ranks(RECORDS)
    expect = Histogram()
    for r in RECORDS:
        expect.merge(Histogram.from_dict(r["result"]["histogram"]))
    assert agg.histogram == expect.to_dict()
    assert agg.histogram["count"] == 250
    assert agg.latency_s["max"] == pytest.approx(0.040)
    # 100 x 1 ms, 100 x 2 ms, 50 x 40 ms: the median is 2 ms (within one bucket)
    assert agg.latency_s["p50"] == pytest.approx(0.002, rel=0.02)


def test_aggregate_spread_and_straggler_named():
    agg = aggregate_ranks(RECORDS)
    rs = agg.extra["rank_spread"]
    assert (rs["min"], rs["median"], rs["max"]) == pytest.approx((2.5 * MiB, 10 * MiB, 20 * MiB))
    assert rs["slowest"] == 2 and rs["max_over_min"] == pytest.approx(8.0)
    hs = agg.extra["host_spread"]
    assert hs["slowest"] == "b"
    assert (hs["min"], hs["max"]) == pytest.approx((2.5 * MiB, 20 * MiB))  # a: 200 MiB in 10 s
    text = " ".join(agg.warnings)
    assert "straggler: rank 2 (b)" in text and "straggler: host b" in text
    assert agg.per_worker == {"min": 1.0, "median": 2.0, "max": 3.0}


def test_aggregate_marks_a_partial_rank():
    recs = [dict(r) for r in RECORDS]
    bad = dict(recs[0]["result"], status="partial", error="interrupted")
    recs[0] = dict(recs[0], result=bad)
    agg = aggregate_ranks(recs)
    assert agg.status == "partial" and agg.error == "rank 1: interrupted"


def test_even_ranks_raise_no_straggler_warning():
    recs = [
        {"rank": k, "host": "a", "clock_offset_s": 0.0,
         "result": _rank_result(10 * MiB, 10, 0.0, 1.0 + k * 0.1, [1])}
        for k in range(3)
    ]  # fmt: skip
    agg = aggregate_ranks(recs)
    assert not any("straggler" in w for w in agg.warnings)


# -- the hooks over a stand-in communicator -----------------------------------------------------


class FakeComm(Comm):
    """Collectives answered from a script: peers' objects, or an error like gloo's."""

    def __init__(self, rank: int, world: int, peers: dict | None = None, error: str | None = None):
        super().__init__(rank, world)
        self.peers = peers or {}
        self.error = error
        self.calls: list[str] = []

    def _maybe_fail(self, what: str) -> None:
        self.calls.append(what)
        if self.error:
            raise RuntimeError(self.error)

    def barrier(self) -> None:
        self._maybe_fail("barrier")

    def all_gather(self, obj):
        self._maybe_fail("gather")
        return [obj if k == self.rank else self.peers.get(k, obj) for k in range(self.world)]

    def broadcast(self, obj, src):
        self._maybe_fail("broadcast")
        return self.peers.get(src, obj)


class FakeStore:
    """The job's key-value store, in memory: ``add`` as TCPStore's (thread-safe)."""

    def __init__(self):
        self.values: dict[str, int] = {}
        self.lock = threading.Lock()

    def add(self, key: str, n: int) -> int:
        with self.lock:
            self.values[key] = self.values.get(key, 0) + n
            return self.values[key]


def test_watch_waits_for_a_slow_rank_that_still_beats(monkeypatch):
    monkeypatch.setattr("iobench.distributed.comm.HEARTBEAT_S", 0.05)
    store = FakeStore()
    watches = [PeerWatch.start(lambda: store, k, 2, timeout_s=0.3) for k in range(2)]
    try:
        late = threading.Timer(1.0, watches[1].wait_all)  # arrives after three timeouts
        late.start()
        t0 = time.monotonic()
        watches[0].wait_all()
        assert time.monotonic() - t0 >= 0.9
        late.join()
    finally:
        for w in watches:
            w.stop()


def test_watch_names_a_silent_rank_within_the_timeout(monkeypatch):
    monkeypatch.setattr("iobench.distributed.comm.HEARTBEAT_S", 0.05)
    store = FakeStore()
    alive = PeerWatch.start(lambda: store, 0, 3, timeout_s=0.3)
    beating = PeerWatch.start(lambda: store, 1, 3, timeout_s=0.3)  # beats, never arrives
    store.add("iobench/hb/2", 1)  # rank 2 beat once, then froze
    try:
        t0 = time.monotonic()
        with pytest.raises(DistributedError, match=r"rank 2 stopped answering \(no heartbeat"):
            alive.wait_all()
        assert time.monotonic() - t0 < 2.0
        alive.hosts = ["h1", "h1", "h2"]  # once the hosts are known, the silent one's is named
        with pytest.raises(DistributedError, match=r"^rank 2 on host h2 stopped answering"):
            alive.wait_all()
    finally:
        alive.stop()
        beating.stop()


def test_watch_gives_up_at_once_on_a_dead_rank_of_this_host():
    store = FakeStore()
    watch = PeerWatch(lambda: store, 0, 2, timeout_s=60)
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match="rank 1 \\(pid 99\\) exited"):
        watch.wait_all(dead=lambda: "rank 1 (pid 99) exited")
    assert time.monotonic() - t0 < 5


def test_watch_without_a_store_is_none():
    def no_store():
        raise RuntimeError("connection refused")

    assert PeerWatch.start(no_store, 0, 2, 5.0) is None


def test_read_shift_goes_to_the_next_host():
    hooks = TorchCoordinator(FakeComm(1, 4), hostname="a")
    hooks.hosts = ["a", "a", "b", "b"]
    hooks.shared_target = True
    assert hooks.ranks_per_host == 2
    assert hooks.read_shift() == 3  # (1 + 2) % 4: a rank on the other host
    one_host = TorchCoordinator(FakeComm(2, 3), hostname="a")
    one_host.hosts = ["a", "a", "a"]
    one_host.shared_target = True
    assert one_host.read_shift() == 0  # one host: still another rank's files
    one_host.shared_target = False
    assert one_host.read_shift() == 2  # not shared: its own files


def test_read_source_prefix_points_at_the_other_run_dir():
    hooks = TorchCoordinator(FakeComm(0, 3), hostname="a")
    hooks.hosts = ["a"] * 3
    hooks.run_id = "20260101T000000Z-abcdef"
    hooks.shared_target = True

    class Runner:
        rank = 0
        warnings: list[str] = []

        def warn(self, text):
            self.warnings.append(text)

    runner = Runner()
    runner.coord = hooks
    src, prefix = read_source(runner)
    assert (src, prefix) == (1, f"../{RUN_DIR_PREFIX}20260101T000000Z-abcdef-r1/")
    files = peer_files((FileSpec("seq/r1-w0.dat", 5),), prefix)
    assert files == (FileSpec(f"{prefix}seq/r1-w0.dat", 5),)
    hooks.shared_target = False
    assert read_source(runner) == (0, "")
    assert "not shared" in runner.warnings[0]


def test_shared_run_id_and_per_rank_run_dirs():
    hooks = TorchCoordinator(FakeComm(2, 3, peers={0: "RUN0"}), hostname="a")
    assert hooks.shared_run_id("RUN2") == "RUN0"
    assert hooks.run_dir_id("RUN0") == "RUN0-r2"


def test_attach_learns_whether_ranks_see_each_other(tmp_path):
    hooks = TorchCoordinator(FakeComm(0, 2, peers={1: True}), hostname="a")
    hooks.hosts = ["a", "a"]
    t = resolve(str(tmp_path))
    create_run_dir(t, hooks.run_dir_id("RUN"))
    hooks.attach(t)
    assert hooks.shared_target is False  # rank 1's run dir is not here
    (tmp_path / f"{RUN_DIR_PREFIX}RUN-r1").mkdir()
    hooks.attach(t)
    assert hooks.shared_target is True


def test_failed_collective_is_distributed_error_and_cleans_peer_dirs(tmp_path):
    gloo = "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.2]:4242"
    comm = FakeComm(0, 3)
    hooks = TorchCoordinator(comm, hostname="a", timeout_s=15)
    hooks.hosts = ["a"] * 3
    t = resolve(str(tmp_path))
    create_run_dir(t, hooks.run_dir_id("RUN"))
    for k in (1, 2):  # the other ranks' run dirs of this run, on a shared filesystem
        (tmp_path / f"{RUN_DIR_PREFIX}RUN-r{k}" / "seq").mkdir(parents=True)
        (tmp_path / f"{RUN_DIR_PREFIX}RUN-r{k}" / "seq" / "f").write_bytes(b"x")
    other = tmp_path / f"{RUN_DIR_PREFIX}OTHER-r1"  # another run's: not ours to touch
    other.mkdir()
    hooks.attach(t)
    comm.error = gloo
    res = PhaseResult(name="seq-write", op="write", bytes=5, ops=1)
    with pytest.raises(DistributedError) as e:
        hooks.after_phase(None, res)
    line = e.value.one_line()
    assert "rank 0: gather across 3 ranks failed: another rank exited" in line
    assert "pair.cc" not in line and e.value.exit_status == 4
    assert res.status == "partial" and "only rank 0's figures" in res.error
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"{RUN_DIR_PREFIX}RUN-r0", f"{RUN_DIR_PREFIX}OTHER-r1"]
    )
    calls = len(comm.calls)
    with pytest.raises(DistributedError):  # the group is broken: no further collectives
        hooks.barrier()
    assert len(comm.calls) == calls


def test_timeout_is_named_with_its_setting():
    hooks = TorchCoordinator(
        FakeComm(1, 2, error="Timed out waiting 15000ms for recv"), timeout_s=15
    )
    with pytest.raises(DistributedError, match="did not answer within 15 s"):
        hooks.before_phase(None)


def test_sigterm_outside_the_run_is_deferred_to_the_next_barrier():
    hooks = TorchCoordinator(FakeComm(0, 2), hostname="a")
    hooks.install_signal_handler()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert hooks.terminated == signal.SIGTERM  # still alive: cleanup may finish
        with pytest.raises(Interrupted, match="SIGTERM"):
            hooks.barrier()
    finally:
        hooks.close()
    assert signal.getsignal(signal.SIGTERM) is not hooks._on_sigterm


def test_coordinator_from_env():
    assert isinstance(coordinator_from_env({}), SingleProcess)
    assert isinstance(coordinator_from_env({"WORLD_SIZE": "1", "RANK": "0"}), SingleProcess)
    with pytest.raises(UsageError, match="MASTER_ADDR"):
        coordinator_from_env({"WORLD_SIZE": "3", "RANK": "0", "MASTER_PORT": "1"})
    with pytest.raises(UsageError, match="IOBENCH_DIST_TIMEOUT"):
        coordinator_from_env(
            {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "1",
             "IOBENCH_DIST_TIMEOUT": "soon"}
        )  # fmt: skip


# -- real launches (slow) ----------------------------------------------------------------------

SEQ = ["--set", "jobs=1", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--set", "time=none", "--quiet",
       "--no-history"]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    """This environment without a launcher's variables, iobench importable, plus ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env.update(extra)
    return env


def _torchrun(args: list[str], env: dict[str, str], n: int = 3) -> subprocess.Popen:
    """``torchrun --standalone`` of ``n`` iobench ranks, output (both streams) piped."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={n}",
           "-m", "iobench", *args]  # fmt: skip
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _user_target(tmp_path: Path) -> tuple[Path, set[str]]:
    target = tmp_path / "target"
    target.mkdir()
    (target / "user.dat").write_bytes(b"user data")
    (target / f"{RUN_DIR_PREFIX}20200101T000000Z-abcdef").mkdir()  # a look-alike, not ours
    return target, set(os.listdir(target))


def _wait_for_rank_file(target: Path, rank: int, proc, timeout: float = 60.0) -> None:
    """Until rank ``rank`` has started writing its first file (its write phase is running)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list(target.glob(f"{RUN_DIR_PREFIX}*-r{rank}/seq/r{rank}-w0.dat")):
            return
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the run ended before rank {rank} wrote: {proc.stdout.read()[-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"rank {rank} never started writing")


def _child_with_rank(parent: int, rank: int) -> int:
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and f"RANK={rank}".encode() in env:
            return pid
    raise AssertionError(f"no child of {parent} with RANK={rank}")


def _kill_rank(
    proc: subprocess.Popen, ready: Callable[[], None], after_s: float, rank: int = 1
) -> tuple[str, float]:
    """SIGKILL torchrun's rank ``rank`` ``after_s`` seconds after ``ready()`` returns; the
    launch's output and the seconds from the kill to torchrun's exit."""
    try:
        ready()
        time.sleep(after_s)
        os.kill(_child_with_rank(proc.pid, rank), signal.SIGKILL)
        killed_at = time.monotonic()
        log, _ = proc.communicate(timeout=120)
        return log, time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            proc.kill()


def _exit_codes(log: str) -> dict[int, int]:
    """Every rank's exit code from torchrun's failure report."""
    return {
        int(rank): int(code)
        for rank, code in re.findall(r"rank\s*:\s*(\d+).*?\n\s*exitcode\s*:\s*(-?\d+)", log)
    }


@pytest.mark.slow
def test_torchrun_three_ranks_one_result(tmp_path):
    target, before = _user_target(tmp_path)
    out = tmp_path / "out"
    proc = _torchrun(
        ["run", "sequential-write", str(target), "--set", "size=8MiB", *SEQ, "--output", str(out)],
        _env(),
    )
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, log[-3000:]
    assert sorted(os.listdir(out)) == ["result.json"]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "complete"
    assert [p["name"] for p in res["phases"]] == ["seq-write", "seq-read"]
    for p in res["phases"]:
        ranks = p["ranks"]
        assert [r["rank"] for r in ranks] == [0, 1, 2]
        assert [r["bytes"] for r in ranks] == [8 * MiB] * 3
        assert p["bytes"] == sum(r["bytes"] for r in ranks) == 24 * MiB
        assert p["ops"] == p["histogram"]["count"] == 24
        span = max(r["end"] for r in ranks) - min(r["start"] for r in ranks)
        assert p["bandwidth_bps"] == pytest.approx(p["bytes"] / span, rel=1e-9)
        assert p["concurrency"] == 3
        spread = p["extra"]["rank_spread"]
        assert spread["min"] <= spread["median"] <= spread["max"]
        assert p["extra"]["host_spread"]["unit"] == "bandwidth_bps"
    reads = res["phases"][1]["ranks"]
    assert [r["read_from"] for r in reads] == [1, 2, 0]  # each rank read another rank's file
    assert set(os.listdir(target)) == before


@pytest.mark.slow
def test_torchrun_rank_killed_mid_phase(tmp_path):
    target, before = _user_target(tmp_path)
    out = tmp_path / "out"
    args = ["run", "sequential-write", str(target), "--set", "size=16MiB", "--set", "rate=4MiB",
            *SEQ, "--output", str(out)]  # fmt: skip
    proc = _torchrun(args, _env(IOBENCH_DIST_TIMEOUT="15"))
    # mid-phase: each rank's write lasts 4 s at 4 MiB/s
    log, took = _kill_rank(proc, lambda: _wait_for_rank_file(target, 1, proc), 0.5)
    assert took <= 60, log[-3000:]
    assert proc.returncode != 0
    assert _exit_codes(log) == {0: 4, 1: -9, 2: 4}, log[-3000:]
    assert set(os.listdir(target)) == before  # every rank's run dir is gone, nothing else
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "partial"
    assert res["phases"][0]["status"] == "partial"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_hung_rank_times_out_survivors_exit_4(tmp_path):
    """torchrun's environment without its agent: a frozen rank is noticed only by the gloo
    timeout; the survivors exit 4 and remove the frozen rank's run dir as well as their own."""
    target, before = _user_target(tmp_path)
    out = tmp_path / "out"
    port = str(_free_port())
    argv = [sys.executable, "-m", "iobench", "run", "sequential-write", str(target),
            "--set", "size=8MiB", "--set", "rate=4MiB", *SEQ, "--output", str(out)]  # fmt: skip
    procs = []
    for rank in range(3):
        env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE="3", RANK=str(rank),
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="3", IOBENCH_DIST_TIMEOUT="5")  # fmt: skip
        procs.append(
            subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    try:
        _wait_for_rank_file(target, 1, procs[1])
        time.sleep(0.5)
        os.kill(procs[1].pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        outputs = {k: procs[k].communicate(timeout=120) for k in (0, 2)}
        took = time.monotonic() - stopped_at
        debris_while_frozen = set(os.listdir(target)) - before
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert took <= 60
    for k in (0, 2):
        assert procs[k].returncode == 4, outputs[k][1][-2000:]
        err = outputs[k][1].strip().splitlines()[-1]
        assert err.startswith(f"iobench: error: rank {k}: ")
        # the frozen rank and its host named; rank 2 may instead find the store gone, when
        # rank 0 (which holds it) saw the frozen rank first and has exited
        named = f"rank 1 on host {socket.gethostname()} stopped answering (no heartbeat for 5 s"
        assert named in err or (k == 2 and "the job's store on host" in err), err
    assert debris_while_frozen == set()
    assert set(os.listdir(target)) == before
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "partial"


@pytest.mark.slow
def test_a_slow_rank_is_waited_for_beyond_the_timeout(tmp_path):
    """Ranks may end a phase far apart (a straggler): the others wait for it as long as its
    heartbeat goes on, not just IOBENCH_DIST_TIMEOUT (2 s here; rank 1 needs 4 s a phase)."""
    target, before = _user_target(tmp_path)
    out = tmp_path / "out"
    port = str(_free_port())
    procs = []
    for rank in range(2):
        throttle = ["--set", "rate=2MiB"] if rank == 1 else []
        argv = [sys.executable, "-m", "iobench", "run", "sequential-write", str(target),
                "--set", "size=8MiB", *throttle, *SEQ, "--output", str(out)]  # fmt: skip
        env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, WORLD_SIZE="2", RANK=str(rank),
                   LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE="2", IOBENCH_DIST_TIMEOUT="2")  # fmt: skip
        procs.append(
            subprocess.Popen(
                argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-1500:] for o in outputs]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "complete"
    for p in res["phases"]:
        fast, slow = (r["end"] - r["start"] for r in p["ranks"])
        assert slow > 2 + fast  # rank 1 finished more than the timeout after rank 0
        assert any("straggler: rank 1" in w for w in p["warnings"])
    assert set(os.listdir(target)) == before


def test_watch_gives_up_on_a_store_that_stops_answering(monkeypatch):
    """A cut link: the store client's call blocks without end; the wait gives up after the
    timeout, naming the store's host."""
    monkeypatch.setenv("MASTER_ADDR", "iob-h1")
    release = threading.Event()

    class CutStore:
        def add(self, key, n):
            release.wait(30)
            return 0

    watch = PeerWatch(CutStore, 1, 2, timeout_s=0.3)
    t0 = time.monotonic()
    try:
        with pytest.raises(
            DistributedError, match=r"^the job's store on host iob-h1 did not answer for 0.3 s"
        ):
            watch.wait_all()
        assert time.monotonic() - t0 < 5
    finally:
        release.set()
