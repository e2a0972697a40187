"""The shipped metadata phases by default: ``stat`` and ``open_read`` go over their files pass
after pass until steady (or their ``time``), ``create`` makes its files once and is judged by
its series (``--set files=N`` when too short), ``delete`` is one pass by nature and says so
(``extra.one_pass``), never called steady nor indicative."""

from __future__ import annotations

import json

from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.posix import PosixEngine
from iobench.engines.worker import meta_passes
from iobench.result.stats import WorkerStats
from iobench.result.steady import DEFAULT_STEADY, indicative_reason, one_pass_reason
from iobench.result.steady_advice import steady_advice
from iobench.run.phases import get_generator
from iobench.spec.workload import load_workload
from iobench.target import StopFlag


def _segments(n):
    from iobench.engines.base import Segment

    return [Segment(i, f"f{i}", 0, 10) for i in range(n)]


def test_a_time_based_stat_goes_over_its_files_until_its_deadline_a_delete_once():
    st = WorkerStats(origin=0.0)
    st.start = 0.0
    segs = _segments(3)
    seen = []
    for k, seg in enumerate(meta_passes(PhaseSpec("s", "stat", (), time_s=1.0), segs, st)):
        seen.append(seg.path)
        st.end = 0.1 * (k + 1)  # each stat 0.1 s: the deadline after the 10th
    assert len(seen) == 10 and seen[:4] == ["f0", "f1", "f2", "f0"]
    assert [s.path for s in meta_passes(PhaseSpec("d", "delete", (), time_s=1.0), segs, st)] == [
        "f0", "f1", "f2",
    ]  # fmt: skip
    assert len(list(meta_passes(PhaseSpec("s", "stat", ()), segs, st))) == 3  # size-based: once


def test_the_engine_stats_its_files_again_until_steady(tmp_path):
    files = tuple(FileSpec(f"f{i}", 4096) for i in range(8))
    for f in files:
        (tmp_path / f.path).write_bytes(b"x" * 4096)
    spec = PhaseSpec("ckpt-stat", "stat", files, jobs=2, block_size=0, time_s=20.0,
                     steady=DEFAULT_STEADY, latency_per="file")  # fmt: skip
    res = PosixEngine("threads").run(spec, EngineContext(str(tmp_path), StopFlag()))
    assert res.status == "ok" and res.extra["ended"] == "steady"
    assert res.ops > 10 * len(files)  # pass after pass
    assert res.elapsed_s < 20


def test_the_plan_bounds_stat_and_open_read_by_their_time_and_says_delete_is_one_pass():
    params = load_workload("checkpoint-smallfile").params
    phases = {p.name: p for p in get_generator("checkpoint").plan(params).phases}
    assert phases["ckpt-stat"].time_s == phases["ckpt-open_read"].time_s == params["time"]
    assert "passes until steady" in phases["ckpt-stat"].note
    assert phases["ckpt-delete"].time_s is None and "one pass" in phases["ckpt-delete"].note


def test_shipped_metadata_phases_are_steady_or_one_pass_by_default(cli, tmp_path):
    """checkpoint-smallfile at a small size, its shipped ``time``/``steady`` kept: stat and
    open_read end steady (they ran one pass of 0.01 s and were indicative before), delete is
    one pass with its reason; create, 32 files once, is too short and is told ``files=N``."""
    out = tmp_path / "out"
    r = cli("run", "checkpoint-smallfile", tmp_path, "--set", "files=8", "--set", "jobs=4",
            "--set", "file_sizes=[4KiB]", "--set", "checkpoint_size=0", "--json", "-q",
            "--no-history", "--output", out)  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads(r.out)
    ph = {p["name"]: p for p in res["phases"]}
    for name in ("ckpt-stat", "ckpt-open_read"):
        assert indicative_reason(ph[name]) is None, (name, indicative_reason(ph[name]))
        assert ph[name]["steady"] is True and ph[name]["extra"]["ended"] == "steady"
        assert ph[name]["ops"] > 32
    delete = ph["ckpt-delete"]
    assert delete["ops"] == 32 and delete["steady"] is None
    assert indicative_reason(delete) is None
    assert "one pass" in one_pass_reason(delete) and "removes each file" in one_pass_reason(delete)
    if indicative_reason(ph["ckpt-create"]):  # 32 creates: a fraction of a second
        assert "(ckpt-create: " in r.err and "--set files=" in r.err
    assert "ckpt-delete" not in r.err.split("plan: ")[-1]  # never among the indicative


def test_advice_for_a_short_create_is_more_files_and_a_short_stat_more_time():
    wl = {"generator": "checkpoint", "params": {"files": 256, "time": 20.0, "steady": True}}
    create = {"name": "ckpt-create", "op": "create", "elapsed_s": 0.5, "steady": False}
    assert steady_advice([create], wl).endswith("add --set files=2560")
    unsteady = {**create, "elapsed_s": 10.7}  # long, but its fsyncs' rate drifted: twice the files
    assert steady_advice([unsteady], wl).endswith("add --set files=512")
    stat = {"name": "ckpt-stat", "op": "stat", "elapsed_s": 20.0, "steady": False}
    assert steady_advice([stat], wl).endswith("add --set time=40s")
    delete = {"name": "ckpt-delete", "op": "delete", "elapsed_s": 0.05, "steady": None,
              "extra": {"one_pass": "one pass: ..."}}  # fmt: skip
    assert steady_advice([delete], wl) is None


def test_a_buffered_open_read_drops_each_file_after_reading_it_pass_after_pass(tmp_path):
    """Time-based passes over buffered files would read the page cache from the second pass
    on: each file is dropped after its read (outside the timed call), as a dataset's reads."""
    from unittest import mock

    files = tuple(FileSpec(f"f{i}", 4096) for i in range(4))
    for f in files:
        (tmp_path / f.path).write_bytes(b"x" * 4096)
    spec = PhaseSpec("ckpt-open_read", "open_read", files, jobs=1, block_size=0, time_s=0.3,
                     drop_cache_after=True, latency_per="file")  # fmt: skip
    with mock.patch("iobench.engines.posix.drop_file_cache") as drop:
        res = PosixEngine("threads").run(spec, EngineContext(str(tmp_path), StopFlag()))
    assert res.ops > len(files) and drop.call_count == res.ops
    assert res.cache == "dropped"


def test_the_table_calls_a_delete_one_pass(cli, tmp_path):
    r = cli("run", "checkpoint-smallfile", tmp_path, "--set", "files=4", "--set", "jobs=1",
            "--set", "checkpoint_size=0", "--set", "time=none", "-q", "--no-history",
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 0, r.err
    row = next(ln for ln in r.out.splitlines() if "ckpt-delete" in ln)
    assert "one-pass" in row
    assert "one-pass: ckpt-delete went over its files once" in " ".join(r.out.split())
