"""Bounds on absurd input, worker failures that must fail the phase, targets that are no
storage, and labels that must say what was measured (issue 12, items 8-11).

Each case checks the exit code, the one line on stderr, what was kept, that nothing is left
in the target and that the planted user files are byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    SMALL,
    _mount_tmpfs,
    _umount,
    assert_failed_run,
    debris,
    one_line,
    plant,
    sub_env,
)

from iobench.target import MountInfo


def _nothing_written(tmp_path: Path, planted) -> None:
    assert not (tmp_path / "out").exists()
    assert debris(planted.path) == [] and planted.unchanged()


# -- item 10: --time bounded; a worker thread that raises fails the phase ----------------------


def test_an_absurd_phase_time_is_bad_input(cli, planted, tmp_path):
    """1e300 s overflowed the workers' nanosecond clocks: the thread died, the phase passed."""
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"], "--time",
            "1e300s", "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 2
    assert "time" in one_line(r.err) and "must be at most 7d" in r.err
    _nothing_written(tmp_path, planted)


def test_an_absurd_qualify_budget_is_bad_input(cli, planted, tmp_path):
    r = cli("qualify", planted.path, "--budget", "1e300s", "--output", tmp_path / "out")
    assert r.code == 2
    assert "--budget 1e300s is longer than 7 days" in one_line(r.err)
    _nothing_written(tmp_path, planted)


@pytest.fixture
def threads(monkeypatch):
    """The posix engine runs its workers as threads (as on a host with many CPUs)."""
    import iobench.engines.posix as posix

    monkeypatch.setattr(posix, "_cpus", lambda: 64)


def test_a_worker_thread_that_raises_fails_the_phase(cli, planted, tmp_path, monkeypatch, threads):
    import iobench.engines.posix as posix

    real = posix._Recorder.flush

    def flush(self):
        if self.n:
            raise RuntimeError("injected fault")
        return real(self)

    monkeypatch.setattr(posix._Recorder, "flush", flush)
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"],
            "--output", tmp_path / "out", "-q")  # fmt: skip
    res = assert_failed_run(
        r, tmp_path / "out", planted, 4, "seq-write", "failed: RuntimeError: injected fault"
    )
    assert [p["name"] for p in res["phases"]] == ["seq-write"]
    assert res["phases"][0]["status"] in ("failed", "partial")


def test_a_worker_thread_that_fails_before_the_start_fails_the_phase(
    cli, planted, tmp_path, monkeypatch, threads
):
    """A worker that dies before the start barrier must neither hang the phase nor pass."""
    import iobench.engines.posix as posix

    def broken(self, st, size=0):
        raise MemoryError("injected at set-up")

    monkeypatch.setattr(posix._Recorder, "__init__", broken)
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"],
            "--output", tmp_path / "out", "-q")  # fmt: skip
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "MemoryError: injected at set-up")
    assert res["phases"][0]["status"] == "failed" and res["phases"][0]["bytes"] == 0


@pytest.mark.parametrize("where", ["sample", "write_image"])
def test_a_dataset_writer_that_raises_fails_the_phase(cli, planted, tmp_path, monkeypatch, where):
    """The dataset writer threads: a bug there (outside or inside the write) used to end the
    thread and leave dataset-write "ok" with files missing."""
    from iobench import formats
    from iobench.formats import writer  # noqa: F401 - formats.writer below

    def boom(*a, **k):
        raise ValueError("injected fault")

    if where == "sample":
        monkeypatch.setattr(formats.SampleSource, "file_samples", boom)
    else:
        monkeypatch.setattr(formats.writer, "write_image", boom)  # where the writer calls it
    r = cli(
        "run",
        "dataset-read",
        planted.path,
        *SMALL["dataset-read"],
        "--set",
        "format=npz",
        "--output",
        tmp_path / "out",
        "-q",
    )  # fmt: skip  (raw: engine)
    res = assert_failed_run(
        r, tmp_path / "out", planted, 4, "dataset-write", "ValueError: injected"
    )
    assert [p["name"] for p in res["phases"]] == ["dataset-write"]
    assert res["phases"][0]["status"] == "failed"


# -- item 8: the estimate is bounded --------------------------------------------------------


@pytest.fixture(scope="module")
def dataset_result(tmp_path_factory):
    from iobench.cli.app import main

    base = tmp_path_factory.mktemp("est")
    (base / "t").mkdir()
    code = main(["run", "dataset-read", str(base / "t"), "--output", str(base / "out"), "-q",
                 "--json", *SMALL["dataset-read"]])  # fmt: skip
    assert code == 0
    return base / "out" / "result.json"


@pytest.mark.parametrize(
    "cmd",
    [
        "estimate {R} --profile resnet50-h100 --gpus 1000000000",
        "estimate {R} --profile resnet50-h100 --gpus 1048577",
        "qualify {T} --profile resnet50-h100 --gpus 1000000000 --quick",
    ],
)
def test_gpus_beyond_the_model_are_bad_input(cli, planted, tmp_path, dataset_result, cmd):
    args = cmd.format(R=dataset_result, T=planted.path).split()
    r = cli(*args, "--output", tmp_path / "out") if args[0] == "qualify" else cli(*args)
    assert r.code == 2, r.err
    assert "beyond the model's range (at most 1,048,576 accelerators)" in one_line(r.err)
    _nothing_written(tmp_path, planted)


def test_the_largest_estimate_is_bounded_and_says_how(cli, dataset_result, monkeypatch):
    from iobench.model import starvation

    monkeypatch.setattr(starvation, "SIM_RANKS", 64)  # (the interval reruns the model 100 times)
    r = cli("estimate", dataset_result, "--profile", "resnet50-h100", "--gpus", "1048576",
            "--json")  # fmt: skip
    assert r.code == 0, r.err
    est = json.loads(r.out)
    assert est["au_at"][-1]["gpus"] == 1048576
    assert all(0 <= a["au"] <= 1 for a in est["au_at"])


def _model(bandwidth_bps: float):
    """A loader (batch 8 of 2 MiB, 2 workers, 80 ms compute) and a heavy-tailed sweep level."""
    import math
    from statistics import NormalDist

    from iobench.model.starvation_inputs import LoaderParams, SweepPoint

    params = LoaderParams(batch_size=8, sample_bytes=2 << 20, samples_per_file=1,
                          compute_s=0.08, workers=2, prefetch=2, decode_s_per_sample=0.0,
                          step_overhead_s=0.0017)  # fmt: skip
    shape = [math.exp(NormalDist().inv_cdf(min(max(i / 100, 0.001), 0.999))) for i in range(101)]
    return params, [SweepPoint(2, bandwidth_bps, bandwidth_bps / (2 << 20), shape)]


def test_the_simulation_memory_does_not_grow_with_gpus():
    import tracemalloc

    from iobench.model import starvation as sv

    params, sweep = _model(1e6 * (1 << 20))
    peaks = []
    for gpus in (sv.SIM_RANKS, sv.MAX_MODEL_GPUS):
        tracemalloc.start()
        sv.simulate_au(params, sweep, gpus, steps=200)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] <= peaks[0] * 1.5, peaks  # 256 times the GPUs, about the same memory
    with pytest.raises(sv.UsageError, match="beyond the model's range"):
        sv.simulate_au(params, sweep, sv.MAX_MODEL_GPUS + 1, steps=10)


def test_grouped_ranks_are_conservative(monkeypatch):
    """Beyond SIM_RANKS each simulated rank takes the slowest of its group's batches: the
    AU can only be lower than the rank-by-rank simulation's."""
    from iobench.model import starvation as sv

    params, sweep = _model(3000 * (1 << 20))
    exact = sv.simulate_au(params, sweep, 64, steps=300)
    monkeypatch.setattr(sv, "SIM_RANKS", 8)
    grouped = sv.simulate_au(params, sweep, 64, steps=300)
    assert grouped <= exact
    assert grouped > 0.5 * exact  # a bound, not a collapse
    assert "8 ranks simulated, each standing for 8" in sv.predict_au(params, sweep, 64).basis


# -- item 11: targets that are not storage, inodes, labels ----------------------------------


@pytest.mark.parametrize("where", ["/proc", "/sys", "/dev/pts"])
def test_pseudo_filesystems_are_refused(cli, tmp_path, where, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("run", "sequential-write", where, *SMALL["sequential-write"])
    assert r.code == 2, r.err
    assert "a kernel interface" in one_line(r.err) and "not storage" in r.err
    assert not (tmp_path / "iobench-results").exists()
    assert not [n for n in os.listdir(where) if n.startswith(".iobench-")]


def test_devtmpfs_is_memory_not_direct(cli, planted, tmp_path, monkeypatch):
    import iobench.target

    fake = [MountInfo("/", "ext4", "/dev/vda"), MountInfo(str(planted.path), "devtmpfs", "udev")]
    monkeypatch.setattr(iobench.target, "read_mountinfo", lambda *a: fake)
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"],
            "--output", tmp_path / "out", "-q")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["target"]["fs_type"] == "devtmpfs" and res["target"]["fs_class"] == "memory"
    assert [p["cache"] for p in res["phases"]] == ["buffered", "buffered"]
    assert any("devtmpfs keeps files in memory" in w for w in res["warnings"])
    assert debris(planted.path) == [] and planted.unchanged()


@pytest.fixture
def few_inodes(tmp_path):
    """A tmpfs with plenty of space and few inodes (``nr_inodes``), unmounted after."""
    mounted = []

    def mount(n: int, size: str = "128m") -> Path:
        where = tmp_path / f"inodes{n}"
        _mount_tmpfs(where, f"size={size},nr_inodes={n}")
        mounted.append(where)
        return where

    yield mount
    for where in mounted:
        _umount(where)


def test_too_few_free_inodes_is_refused_before_the_run(cli, tmp_path, few_inodes):
    mnt = few_inodes(24)
    planted = plant(mnt / "target")  # (takes 6 inodes)
    r = cli("run", "checkpoint-smallfile", planted.path, *SMALL["checkpoint-smallfile"],
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 2, r.err
    line = one_line(r.err)
    assert "free inodes (df -i)" in line and "files and directories" in line
    _nothing_written(tmp_path, planted)


def test_inode_counts_that_are_no_count_are_not_checked():
    """btrfs reports 0 inodes in total, ceph-fuse -1 free ("unlimited"): neither is 0 free."""
    from iobench.target import inodes_from_statvfs

    assert inodes_from_statvfs(100, 7) == 7
    assert inodes_from_statvfs(100, 0) == 0
    assert inodes_from_statvfs(0, 5) is None
    assert inodes_from_statvfs(100, -1) is None
    assert inodes_from_statvfs(100, 200) is None


def test_qualify_checks_free_inodes_before_the_run(cli, tmp_path, few_inodes):
    """qualify plans every step's files (the dataset's one file per sample among them)."""
    mnt = few_inodes(24, size="1g")
    planted = plant(mnt / "target")
    r = cli("qualify", planted.path, "--quick", "--output", tmp_path / "out", "--no-history")
    assert r.code == 2, r.err
    assert "free inodes (df -i)" in one_line(r.err)
    _nothing_written(tmp_path, planted)


def test_inodes_running_out_mid_run_are_named(cli, tmp_path, few_inodes, trip):
    mnt = few_inodes(200)
    planted = plant(mnt / "target")

    def eat_inodes():
        for k in range(1000):
            try:
                (mnt / f"other-{k}").touch()
            except OSError:
                return

    t = trip("ckpt-create", eat_inodes, on=(os, "pwrite"), after=3)
    r = cli("run", "checkpoint-smallfile", planted.path, *SMALL["checkpoint-smallfile"],
            "--output", tmp_path / "out", "-q")  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, tmp_path / "out", planted, 4, "no free inodes (ENOSPC")
    assert "disk full" not in res["error"]


def test_fsspec_on_a_local_directory_is_never_labelled_direct(cli, planted, tmp_path):
    r = cli("run", "sequential-write", planted.path, "--engine", "fsspec",
            *SMALL["sequential-write"], "--direct", "--output", tmp_path / "out", "-q")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert [p["cache"] for p in res["phases"]] == ["buffered", "dropped"]
    assert any("unsupported by the fsspec engine" in w for w in res["warnings"])
    assert debris(planted.path) == [] and planted.unchanged()


def test_the_recorded_block_size_is_the_io_size(cli, planted, tmp_path):
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"],
            "--set", "block_size=1GiB", "--output", tmp_path / "out", "-q")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert [p["block_size"] for p in res["phases"]] == [4 << 20, 4 << 20]
    assert all(any("the I/Os were 4.0 MiB" in w for w in p["warnings"]) for p in res["phases"])


RUN = ["run", "sequential-write", "{T}", *SMALL["sequential-write"], "--output", "{O}", "-q"]


# -- item 11: torch is imported only where it is used -----------------------------------------


def test_a_run_without_torch_work_does_not_import_torch(planted, tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    code = (
        "import sys\n"
        "from iobench.cli.app import main\n"
        f"rc = main({[a.format(T=planted.path, O=tmp_path / 'out') for a in RUN]!r})\n"
        "print('torch imported' if 'torch' in sys.modules else 'no torch', rc)\n"
    )
    # from a working directory that was deleted (a foreign MKL error and exit 2 before)
    p = subprocess.run(
        ["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$0" -c "$1"', sys.executable, code],
        capture_output=True, text=True, env=sub_env(tmp_path), timeout=120,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "no torch 0"
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["host"]["torch"]  # the version is still recorded (from the installed package)
