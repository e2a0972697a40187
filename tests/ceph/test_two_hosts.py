"""Two hosts on one machine (``scripts/two_hosts.sh``: network, UTS and mount namespaces, a
veth link) running iobench under ``torchrun --nnodes=2`` with c10d rendezvous over the link,
each through its own ceph-fuse client of the one CephFS: the aggregate and the per-host
figures, IOR -C read-back across the hosts, and a host killed or cut off mid-phase."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ceph, pytest.mark.root, pytest.mark.slow]

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "two_hosts.sh"
HOSTS = ("iob-h1", "iob-h2")
SHARED = Path("/var/tmp/iob-shared")  # where each host sees the CephFS, through its own client
LOST_PHASE_S = 6  # the lost-host tests' write phase: the fault comes 1 to 2 s into it
TIMEOUT_S = 6  # IOBENCH_DIST_TIMEOUT for these runs: a lost host is noticed within 2x that
# every process of a host: iobench's result code lands in RC_DIR/rc.<hostname>
RANK = """#!/bin/sh
"{python}" -m iobench "$@"; rc=$?
echo $rc > "{rc_dir}/rc.$(hostname)"; exit $rc
"""


def _hosts(*args: str, env=None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env
    )


@pytest.fixture(scope="module")
def two_hosts(ceph_cluster):
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.skip("needs ip (iproute2) and unshare (util-linux) for the namespaces")
    up = _hosts("up")
    if up.returncode != 0:
        _hosts("down")
        pytest.skip(f"two hosts cannot be made here: {up.stderr.strip()}")
    try:
        yield ceph_cluster
    finally:
        down = _hosts("down")
        assert down.returncode == 0, down.stderr
        assert not any(h in _hosts_list() for h in HOSTS)


def _hosts_list() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


class Job:
    """One torchrun agent per host, started together, with a result directory and a result
    code file per host."""

    def __init__(self, cluster, tmp_path: Path, args: list[str]):
        self.tmp = tmp_path
        self.rc_dir = tmp_path / "rc"
        self.rc_dir.mkdir()
        rank = tmp_path / "rank.sh"
        rank.write_text(RANK.format(python=sys.executable, rc_dir=self.rc_dir))
        rank.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        env["PYTHONPATH"] = str(REPO)
        env["IOBENCH_DIST_TIMEOUT"] = str(TIMEOUT_S)
        env["IOBENCH_HOST_MOUNT_1"] = str(cluster.mount_a)
        env["IOBENCH_HOST_MOUNT_2"] = str(cluster.mount_b)
        port = 29500 + uuid.uuid4().int % 400
        self.procs = []
        self.logs = []
        for n, host in enumerate(HOSTS):
            dev = f"iobv{n + 1}"
            log = open(tmp_path / f"{host}.log", "w")  # closed in finish()
            self.logs.append(log)
            cmd = ["env", f"GLOO_SOCKET_IFNAME={dev}",
                   sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                   "--nproc_per_node=1", "--rdzv-backend=c10d",
                   "--rdzv-endpoint=10.213.7.1:" + str(port), f"--rdzv-id=t{port}",
                   "--max-restarts=0", "--no-python", str(rank), *args,
                   "--output", str(tmp_path / f"out-{host}"), "--no-history", "-q"]  # fmt: skip
            self.procs.append(
                subprocess.Popen(
                    ["bash", str(SCRIPT), "exec", host, *cmd],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=REPO,
                )  # fmt: skip
            )

    def rc(self, host: str) -> int | None:
        f = self.rc_dir / f"rc.{host}"
        return int(f.read_text()) if f.exists() and f.read_text().strip() else None

    def wait_rc(self, hosts, limit_s: float) -> float:
        """Seconds until iobench on every one of HOSTS has exited."""
        t0 = time.monotonic()
        while any(self.rc(h) is None for h in hosts):
            if time.monotonic() - t0 > limit_s:
                raise AssertionError(f"no exit in {limit_s} s: {self.log_tails()}")
            time.sleep(0.2)
        return time.monotonic() - t0

    def finish(self, limit_s: float = 300) -> None:
        """Wait for both agents (after a fault, a cut-off agent may never end: kill it)."""
        t0 = time.monotonic()
        for p in self.procs:
            try:
                p.wait(max(1.0, limit_s - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                pass
        for h in HOSTS:
            _hosts("kill", h)
        for p in self.procs:
            p.wait(30)
        for log in self.logs:
            log.close()

    def log(self, host: str) -> str:
        return (self.tmp / f"{host}.log").read_text(errors="replace")

    def log_tails(self) -> str:
        return "\n".join(f"--- {h}\n{self.log(h)[-2500:]}" for h in HOSTS)

    def result(self) -> dict:
        return json.loads((self.tmp / f"out-{HOSTS[0]}" / "result.json").read_text())


@pytest.fixture
def shared(two_hosts):
    """A fresh directory on the CephFS: (its path inside the hosts, its path through client a)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    here = two_hosts.mount_a / name
    here.mkdir()
    yield SHARED / name, here
    shutil.rmtree(here, ignore_errors=True)


def _write_read(target: Path, size: str) -> list[str]:
    return ["run", "sequential-write", str(target), "--set", f"size={size}", "--set", "jobs=1",
            "--set", "block_sizes=[]", "--set", "jobs_sweep=[]", "--set", "time=none"]  # fmt: skip


def test_two_hosts_aggregate_spread_and_read_back(two_hosts, shared, tmp_path):
    target, here = shared
    job = Job(two_hosts, tmp_path, _write_read(target, "16MiB"))
    try:
        job.wait_rc(HOSTS, 300)
    finally:
        job.finish()
    assert (job.rc(HOSTS[0]), job.rc(HOSTS[1])) == (0, 0), job.log_tails()
    res = job.result()
    assert res["status"] == "complete" and res["host"]["hostname"] == "iob-h1"
    assert res["target"]["fs_type"] == "fuse.ceph-fuse"
    phases = {p["name"]: p for p in res["phases"]}
    assert set(phases) == {"seq-write", "seq-read"}
    for p in phases.values():
        ranks = p["ranks"]
        assert [(r["rank"], r["host"]) for r in ranks] == [(0, "iob-h1"), (1, "iob-h2")]
        assert p["extra"]["hosts"] == 2 and p["extra"]["world"] == 2
        # the per-host spread: each host's bytes over its own span, the slowest host named
        per_host = {r["host"]: r["bytes"] / (r["end"] - r["start"]) for r in ranks}
        hs = p["extra"]["host_spread"]
        assert hs["min"] == pytest.approx(min(per_host.values()), rel=1e-6)
        assert hs["max"] == pytest.approx(max(per_host.values()), rel=1e-6)
        assert hs["slowest"] == min(per_host, key=per_host.get)
        assert p["bytes"] == sum(r["bytes"] for r in ranks) == 2 * 16 * MiB
        # the aggregate: all bytes over (last end - first start), on rank 0's clock
        span = max(r["end"] for r in ranks) - min(r["start"] for r in ranks)
        assert p["bandwidth_bps"] == pytest.approx(p["bytes"] / span, rel=1e-6)
        assert ranks[0]["clock_offset_s"] == 0.0
        assert abs(ranks[1]["clock_offset_s"]) < 1.0  # one machine: one clock
    # IOR -C: each host read the files the other host wrote, through its own client
    assert [r["read_from"] for r in phases["seq-read"]["ranks"]] == [1, 0]
    assert os.listdir(here) == []


# A small loader step, so the test stays short.
TINY_PROFILE = """description = "tiny two-host profile"
format = "raw"
sample_size = "64KiB"
files = 32
batch_size = 4
compute_s = 0.01
workers = 1
prefetch = 2
au_min = 0.5
epochs = 1
"""


def test_loader_across_two_hosts(two_hosts, shared, tmp_path):
    target, here = shared
    profile = tmp_path / "tiny.toml"
    profile.write_text(TINY_PROFILE)
    job = Job(two_hosts, tmp_path, ["loader", str(target), "--profile", str(profile)])
    try:
        job.wait_rc(HOSTS, 300)
    finally:
        job.finish()
    res = job.result()
    assert res["status"] == "complete", (res.get("error"), job.log_tails())
    assert job.rc(HOSTS[0]) == job.rc(HOSTS[1]) in (0, 1), job.log_tails()  # AU decides which
    assert res["loader"]["gpus"] == 2 and res["loader"]["au"] > 0
    hosts = {r["host"] for p in res["phases"] for r in p.get("ranks", [])}
    assert hosts == {"iob-h1", "iob-h2"}
    assert os.listdir(here) == []


def _files_under(d: Path) -> int:
    return sum(len(f) for _, _, f in os.walk(d))


def _lost_host(two_hosts, shared, tmp_path, fault) -> tuple[Job, float]:
    """Start a run long enough to be cut mid-phase, apply FAULT once both hosts are writing,
    and return the job with the seconds from the fault until the survivor(s) exited."""
    target, here = shared
    # a time-based write of LOST_PHASE_S (steady off): the survivor notices the lost host at
    # the phase's end, however fast or slow the CephFS writes (a 32 MiB file a host, written
    # whole once, then rewritten until the time is up)
    timed = ["--set", f"time={LOST_PHASE_S}s", "--set", "steady=false"]
    job = Job(two_hosts, tmp_path, [*_write_read(target, "32MiB"), *timed])
    try:
        t0 = time.monotonic()
        while _files_under(here) < 2:  # both hosts inside the write phase
            assert time.monotonic() - t0 < 240, job.log_tails()
            assert all(job.rc(h) is None for h in HOSTS), job.log_tails()
            time.sleep(0.2)
        time.sleep(1.0)
        t_fault = time.monotonic()
        fault()
        return job, t_fault
    except BaseException:
        job.finish(0)
        raise


def _assert_clean_exit_4(job: Job, here: Path) -> None:
    res = job.result()  # rank 0 on iob-h1 kept its partial result, marked
    assert res["status"] == "partial", res["status"]
    assert res["phases"][0]["status"] == "partial"
    assert "rank 1 on host iob-h2 stopped answering" in res["error"]
    err = [x for x in job.log("iob-h1").splitlines() if x.startswith("iobench: error:")]
    assert len(err) == 1 and "rank 1 on host iob-h2 stopped answering (no heartbeat" in err[0]
    assert os.listdir(here) == []  # no .iobench-* debris of either host


def test_killing_a_host_mid_phase_ends_the_other_with_exit_4(two_hosts, shared, tmp_path):
    job, t_fault = _lost_host(two_hosts, shared, tmp_path, lambda: _hosts("kill", "iob-h2"))
    try:
        job.wait_rc(["iob-h1"], 300)
        print(f"iob-h1 exited {time.monotonic() - t_fault:.1f} s after iob-h2 was killed")
    finally:
        job.finish(60)
    assert job.rc("iob-h1") == 4, job.log_tails()
    assert job.rc("iob-h2") is None  # killed with all of its host's processes
    _assert_clean_exit_4(job, shared[1])


def test_cutting_the_link_mid_phase_ends_both_with_exit_4(two_hosts, shared, tmp_path):
    job, t_fault = _lost_host(two_hosts, shared, tmp_path, lambda: _hosts("link", "iob-h2", "down"))
    try:
        job.wait_rc(HOSTS, 300)
        print(f"both hosts exited {time.monotonic() - t_fault:.1f} s after the link went down")
    finally:
        job.finish(1)  # the cut-off agent itself never ends: killed (the rc files are in)
        _hosts("link", "iob-h2", "up")
    assert (job.rc("iob-h1"), job.rc("iob-h2")) == (4, 4), job.log_tails()
    _assert_clean_exit_4(job, shared[1])
    # the cut-off host names the host it lost (the one holding the job's store)
    err = [x for x in job.log("iob-h2").splitlines() if x.startswith("iobench: error:")]
    assert len(err) == 1 and "the job's store on host" in err[0], job.log("iob-h2")[-2000:]
