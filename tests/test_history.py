"""history: long-form rows, one immutable Parquet file per run, queries, files it must skip."""

from __future__ import annotations

import multiprocessing
import posixpath
import uuid
from pathlib import Path

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from factories import GiB, MiB, make_phase, make_run, noisy
from fsspec.implementations.memory import MemoryFileSystem

from iobench import history
from iobench.core.errors import StoreError, UsageError
from iobench.result.file import SCHEMA_VERSION, PhaseResult

DAY = [f"2025-01-0{i}T00:00:00.000+00:00" for i in range(1, 10)]


def _runs() -> list:
    """Three seq-read runs and one rand-read run, on four days, with repeats."""
    out = []
    for i, bw in enumerate([1000, 900, 1100]):
        out.append(
            make_run(
                f"2025010{i + 1}T000000Z-a{i}{i}{i}{i}{i}",
                started_at=DAY[i],
                phases=[
                    make_phase(
                        "seq-read", "read", bandwidth=noisy(bw * MiB, 3), latency_p99=[0.01]
                    ),
                    make_phase("seq-write", "write", bandwidth=[bw * MiB / 2]),
                ],
            )
        )
    out.append(
        make_run(
            "20250104T000000Z-bbbbbb",
            started_at=DAY[3],
            workload="rand-read",
            spec_hash="spec-r",
            phases=[make_phase("rand-read", "randread", iops=noisy(20000.0, 6))],
        )
    )
    return out


@pytest.fixture(params=["local", "memory"])
def url(request, tmp_path):
    if request.param == "local":
        yield str(tmp_path / "history")
        return
    root = f"memory://iobench-test-{uuid.uuid4().hex}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


# --- paths and fingerprints ----------------------------------------------------------------------


def test_default_history_url(monkeypatch, tmp_path):
    monkeypatch.setenv("IOBENCH_HISTORY", "s3://bucket/iobench")
    assert history.default_history_url() == "s3://bucket/iobench"
    monkeypatch.delenv("IOBENCH_HISTORY")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert history.default_history_url() == str(tmp_path / ".local/share/iobench/history")


def test_env_fingerprint_ignores_hostname_but_not_hardware_or_storage():
    base = make_run()
    same = make_run("x", host={**base.host, "hostname": "node-77", "mem_bytes": 512 * GiB - 99})
    assert history.env_fingerprint(base) == history.env_fingerprint(same)
    assert (
        history.host_class(base) == "AMD EPYC 9654 96-Core Processor/64cpu/510GiB/Linux 6.1/x86_64"
    )
    assert history.fs_identity(base) == "lustre 10.0.0.1@o2ib:/scratch"
    more_mem = make_run("y", host={**base.host, "mem_bytes": 1024 * GiB})
    other_fs = make_run("z", target={**base.target, "mount_source": "10.0.0.2@o2ib:/scratch"})
    prints = {history.env_fingerprint(r) for r in (base, more_mem, other_fs)}
    assert len(prints) == 3


def test_many_client_runs_are_another_setup():
    base = make_run()
    many = make_run("m", phases=[make_phase("seq-read", "read", bandwidth=[1e9])])
    for p in many.phases:
        p.params = {**p.params, "ranks": 16}
        p.extra = {**p.extra, "world": 16, "hosts": 2}
    assert (
        history.host_class(many)
        == "AMD EPYC 9654 96-Core Processor/64cpu/510GiB/Linux 6.1/x86_64 x16 ranks/2 hosts"
    )
    assert history.env_fingerprint(many) != history.env_fingerprint(base)


def test_host_class_is_cpu_model_cores_memory_and_kernel_series_not_the_build():
    base = make_run(host={**make_run().host, "os": "Linux 6.18.44-fc-v1045"})
    update = make_run("u", host={**base.host, "os": "Linux 6.18.51-fc-v1102"})
    assert history.host_class(base) == history.host_class(update)
    assert (
        history.host_class(base) == "AMD EPYC 9654 96-Core Processor/64cpu/510GiB/Linux 6.18/x86_64"
    )
    assert history.env_fingerprint(base) == history.env_fingerprint(update)
    assert history.same_setup(base, update)
    for changed in ({"cpus": 32}, {"os": "Linux 6.19.2-fc-v1200"}, {"cpu_model": "Intel Xeon"}):
        other = make_run("o", host={**base.host, **changed})
        assert history.host_class(other) != history.host_class(base), changed
        assert not history.same_setup(base, other), changed


def test_kernel_series_and_memory_rounding():
    assert history.kernel_series("Linux 6.18.44-fc-v1045") == "Linux 6.18"
    assert history.kernel_series("Darwin 23.4.0") == "Darwin 23.4"
    assert history.kernel_series("  Plan9  ") == "Plan9" and history.kernel_series(None) is None
    # MemTotal moves by MiBs between kernels: two significant figures of GiB hold still
    assert history.memory_gib(503.4 * GiB) == history.memory_gib(503.6 * GiB) == 500
    assert history.memory_gib(62.8 * GiB) == 63 and history.memory_gib(1007 * GiB) == 1000
    assert history.memory_gib(0.3 * GiB) == 1
    assert history.memory_gib(0) is None and history.memory_gib("lots") is None


def test_a_run_stored_before_the_cpu_model_was_recorded_keeps_its_setup():
    """Old history files have no ``cpu_model`` and the exact kernel build in ``os``: the class
    is computed from those fields on read, and matches a new run on the fields it has."""
    old_host = {k: v for k, v in make_run().host.items() if k != "cpu_model"}
    old = make_run("old", host={**old_host, "os": "Linux 6.1.0-fc-v1045"})
    new = make_run("new", host={**old_host, "cpu_model": "AMD EPYC", "os": "Linux 6.1.9-fc-v1"})
    assert history.host_class(old) == "?/64cpu/510GiB/Linux 6.1/x86_64"
    assert history.same_setup(old, new) and history.same_setup(new, old)
    assert not history.same_setup(old, make_run("n8", host={**new.host, "cpus": 8}))


def test_cpu_model_is_read_from_cpuinfo(tmp_path):
    from iobench.core.cpu import cpu_model

    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel\t\t: 17\nmodel name\t: AMD  EPYC 9654 96-Core Processor\n"
    )
    assert cpu_model(str(info)) == "AMD EPYC 9654 96-Core Processor"
    info.write_text("processor\t: 0\nHardware\t: BCM2835\n")  # an ARM board's name
    assert cpu_model(str(info)) == "BCM2835"


# --- metric rows ---------------------------------------------------------------------------------


def test_metric_rows_long_format_with_repeats():
    run = make_run(
        phases=[make_phase("seq-read", "read", bandwidth=[100.0, 110.0, 120.0], iops=[1, 2, 3])]
    )
    rows = history.metric_rows(run)
    assert {tuple(sorted(r)) for r in rows} == {tuple(sorted(history.COLUMNS))}
    bw = [(r["repeat"], r["aggregate"], r["value"]) for r in rows if r["metric"] == "bandwidth"]
    assert bw == [(-1, True, 110.0), (0, False, 100.0), (1, False, 110.0), (2, False, 120.0)]
    first = rows[0]
    assert first["run_id"] == run.run_id
    assert first["workload"] == "seq-read" and first["spec_hash"] == "spec-1"
    assert first["phase"] == "seq-read" and first["op"] == "read"
    assert first["unit"] == "B/s" and first["direction"] == "higher"
    assert first["engine"] == "posix" and first["status"] == "complete"
    assert first["fs_type"] == "lustre" and first["schema_version"] == SCHEMA_VERSION
    assert first["env_fingerprint"] == history.env_fingerprint(run)
    assert {r["metric"] for r in rows} == {"bandwidth", "iops"}


def test_aggregate_row_is_marked_and_holds_the_median_over_repeats():
    # six repeats: the median is the mean of the middle two (845), not any one repeat
    bws = [559.0, 780.0, 800.0, 890.0, 903.0, 1320.0]
    run = make_run(phases=[make_phase("seq-read", "read", bandwidth=bws)])
    rows = [r for r in history.metric_rows(run) if r["metric"] == "bandwidth"]
    aggregate = [r for r in rows if r["aggregate"]]
    measured = [r["value"] for r in rows if not r["aggregate"]]
    assert [(r["repeat"], r["value"]) for r in aggregate] == [(-1, 845.0)]
    assert measured == bws  # count and median over the measurements: n = 6, not 7
    assert len(measured) == 6


def test_aggregate_row_uses_the_repeats_even_when_the_phase_holds_another_figure():
    # a result written before the median rule: the phase held the median-bandwidth repeat
    phase = make_phase("w", "write", bandwidth=[100.0, 200.0, 300.0, 400.0])
    phase.bandwidth_bps = 300.0
    rows = history.metric_rows(make_run(phases=[phase]))
    assert [r["value"] for r in rows if r["aggregate"]] == [250.0]


def test_metric_rows_single_measurement_is_repeat_zero_and_all_phase_metrics():
    phase = PhaseResult(
        name="ckpt",
        op="ckpt_save",
        bytes=GiB,
        ops=100,
        bandwidth_bps=2e9,
        iops=100.0,
        bandwidth_stonewall_bps=2.2e9,
        latency_s={"mean": 0.01, "p50": 0.009, "p90": 0.02, "p99": 0.03, "p999": 0.05},
    )
    rows = history.metric_rows(make_run(phases=[phase]))
    got = {(r["metric"], r["repeat"]): (r["value"], r["unit"], r["direction"]) for r in rows}
    assert got == {
        **{
            (m, rep): v
            for rep in (-1, 0)
            for m, v in {
                "bandwidth": (2e9, "B/s", "higher"),
                "iops": (100.0, "ops/s", "higher"),
                "bandwidth_stonewall": (2.2e9, "B/s", "higher"),
                "latency_mean": (0.01, "s", "lower"),
                "latency_p50": (0.009, "s", "lower"),
                "latency_p99": (0.03, "s", "lower"),
                "latency_p999": (0.05, "s", "lower"),
            }.items()
        }
    }


def test_metric_rows_skip_unmeasured_throughput_but_keep_real_zero():
    stat = PhaseResult(name="stat", op="stat", ops=500, iops=5000.0, latency_s={"p99": 1e-4})
    stalled = PhaseResult(name="w", op="write", bytes=MiB, bandwidth_bps=0.0)
    rows = history.metric_rows(make_run(phases=[stat, stalled]))
    metrics = {(r["phase"], r["metric"]) for r in rows}
    assert ("stat", "bandwidth") not in metrics  # a stat phase moves no bytes
    assert ("stat", "iops") in metrics and ("stat", "latency_p99") in metrics
    assert ("w", "bandwidth") in metrics  # it moved bytes at zero speed: a real figure
    assert ("w", "bandwidth_stonewall") not in metrics


def test_metric_rows_loader_estimate_and_duplicate_phase_names():
    loader = {
        "au": 0.9,
        "samples_per_s": 1000.0,
        "bytes_per_s": 100 * MiB,
        "load_wait_s": {"mean": 0.001, "p99": 0.004},
        "au_per_epoch": [0.8, 0.95],
    }
    run = make_run(
        phases=[make_phase("r", bandwidth=[1.0]), make_phase("r", bandwidth=[2.0])],
        loader=loader,
        estimate={"max_gpus": 48, "demand_bps_per_gpu": 1e9},
    )
    rows = [r for r in history.metric_rows(run) if r["repeat"] == 0]
    got = {(r["phase"], r["metric"]): (r["value"], r["direction"]) for r in rows}
    assert got == {
        ("r", "bandwidth"): (1.0, "higher"),
        ("r#2", "bandwidth"): (2.0, "higher"),
        ("loader", "au"): (0.9, "higher"),
        ("loader", "samples_per_s"): (1000.0, "higher"),
        ("loader", "bytes_per_s"): (100 * MiB, "higher"),
        ("loader", "load_wait_mean"): (0.001, "lower"),
        ("loader", "load_wait_p99"): (0.004, "lower"),
        ("estimate", "max_gpus"): (48.0, "higher"),
    }


# --- append and queries --------------------------------------------------------------------------


def _fs_and_root(url: str):
    fs, root = fsspec.core.url_to_fs(url)
    return fs, root


def test_append_list_get_round_trip(url):
    runs = _runs()
    for run in reversed(runs):  # stored order must not matter
        history.append(run, url)
    fs, root = _fs_and_root(url)
    names = sorted(posixpath.basename(p) for p in fs.ls(root, detail=False))
    assert names == sorted(f"{r.run_id}.parquet" for r in runs)  # no temp files left behind
    listed = history.list_runs(url)
    assert [s.run_id for s in listed] == [r.run_id for r in runs]  # oldest first
    assert listed[0].workload == "seq-read" and listed[0].phases == ("seq-read", "seq-write")
    assert listed[-1].spec_hash == "spec-r"
    got = history.get_run(runs[1].run_id, url)
    assert got.to_dict() == runs[1].to_dict()
    assert history.get_run("20250104", url).run_id == "20250104T000000Z-bbbbbb"


def test_read_history_table(url):
    runs = _runs()
    for run in runs:
        history.append(run, url)
    table, warnings = history.read_history(url)
    assert warnings == []
    assert table.column_names == list(history.COLUMNS)
    expected = sum(len(history.metric_rows(r)) for r in runs)
    assert table.num_rows == expected
    assert table.schema.field("value").type == pa.float64()
    assert table.schema.field("repeat").type == pa.int64()


class _Bucketed(MemoryFileSystem):
    """A memory filesystem that answers like an object store: buckets, no directories."""

    protocol = "bucketed"
    made: list[str] = []

    @staticmethod
    def split_path(path: str) -> tuple[str, str, None]:
        bucket, _, key = path.strip("/").partition("/")
        return bucket, key, None

    def makedirs(self, path, exist_ok=False):  # creating a bucket, on a real store
        type(self).made.append(path)
        return super().makedirs(path, exist_ok=exist_ok)


def test_append_to_an_object_store_never_creates_the_bucket(monkeypatch):
    fs = _Bucketed(skip_instance_cache=True)
    _Bucketed.made = []
    monkeypatch.setattr(history, "_fs", lambda url: (fs, "/nobucket-x/h", False, url))
    with pytest.raises(StoreError, match="history bucket 'nobucket-x' does not exist") as e:
        history.append(_runs()[0], "bucketed://nobucket-x/h")
    assert "never creates buckets" in (e.value.hint or "")
    assert _Bucketed.made == [] and not fs.exists("/nobucket-x")
    fs.mkdir("/bucket-y")  # a bucket someone made
    monkeypatch.setattr(history, "_fs", lambda url: (fs, "/bucket-y/h", False, url))
    history.append(_runs()[0], "bucketed://bucket-y/h")
    assert _Bucketed.made == [] and fs.ls("/bucket-y/h", detail=False)


def test_append_turns_any_backend_exception_into_one_store_error(monkeypatch, tmp_path):
    def boom(*a, **k):
        raise RuntimeError("first line\nsecond line")

    monkeypatch.setattr(history, "_append_local", boom)
    with pytest.raises(StoreError) as e:
        history.append(_runs()[0], str(tmp_path / "h"))
    assert e.value.one_line().endswith(": RuntimeError: first line second line")


def test_append_stores_no_credentials_and_any_path():
    """The stored result and the rows are masked like result.json; a path that is not UTF-8
    (an undecodable byte, ``\\udcff``) is stored as ``\\xff`` instead of failing."""
    url = f"memory://hist-{uuid.uuid4().hex[:8]}/h"
    secret_url = "memory://KEY:Zq7/Vb:3@Xk%9@bucket/x"
    run = make_run(phases=[make_phase("seq-read", bandwidth=[1.0])])
    run.command = f"iobench run x {secret_url} /data/t\udcff"
    run.target = {"path_or_url": secret_url, "run_dir": secret_url + "/.iobench-1"}
    history.append(run, url)
    fs, root = _fs_and_root(url)
    (path,) = fs.ls(root, detail=False)
    table = pq.read_table(fs.open(path, "rb"))
    blob = fs.cat_file(path).decode("latin-1")
    assert "Zq7" not in blob and "Xk%9" not in blob
    assert set(table.column("command").to_pylist()) == {
        "iobench run x memory://***@bucket/x /data/t\\xff"
    }
    assert history.get_run(run.run_id, url).target["path_or_url"] == "memory://***@bucket/x"


def test_append_refuses_to_overwrite(url):
    run = _runs()[0]
    path = history.append(run, url)
    fs, root = _fs_and_root(url)
    target = posixpath.join(root, f"{run.run_id}.parquet")
    before = fs.cat_file(target)
    changed = make_run(run.run_id, phases=[make_phase("other", bandwidth=[1.0])])
    with pytest.raises(StoreError, match="already holds run"):
        history.append(changed, url)
    assert fs.cat_file(target) == before
    assert len(fs.ls(root, detail=False)) == 1
    assert path.endswith(f"{run.run_id}.parquet")


def test_get_run_unknown_and_ambiguous(url):
    for run in _runs():
        history.append(run, url)
    with pytest.raises(UsageError, match="no run 'zzz' in history"):
        history.get_run("zzz", url)
    with pytest.raises(UsageError, match="ambiguous"):
        history.get_run("2025010", url)


def test_latest_run_with_workload_and_before(url):
    assert history.latest_run(url) is None  # empty (and missing) history
    for run in _runs():
        history.append(run, url)
    assert history.latest_run(url).run_id == "20250104T000000Z-bbbbbb"
    assert history.latest_run(url, workload="seq-read").run_id == "20250103T000000Z-a22222"
    assert history.latest_run(url, workload="spec-r").run_id == "20250104T000000Z-bbbbbb"
    before = history.latest_run(url, workload="seq-read", before=DAY[2])
    assert before.run_id == "20250102T000000Z-a11111"
    assert history.latest_run(url, before=DAY[0]) is None
    with pytest.raises(UsageError, match="--before"):
        history.latest_run(url, before="yesterday")


def test_trend(url):
    for run in _runs():
        history.append(run, url)
    points = history.trend("seq-read.bandwidth", url)
    assert [(p.started_at, p.value) for p in points] == [
        (DAY[0], pytest.approx(1000 * MiB)),
        (DAY[1], pytest.approx(900 * MiB)),
        (DAY[2], pytest.approx(1100 * MiB)),
    ]
    assert points == history.trend("bandwidth", url, phase="seq-read", workload="seq-read")
    assert [p.value for p in history.trend("iops", url)] == [pytest.approx(20000.0)]
    assert history.trend("iops", url, workload="seq-read") == []
    with pytest.raises(UsageError, match="occurs in phases seq-read, seq-write"):
        history.trend("bandwidth", url)
    with pytest.raises(UsageError, match="unknown metric 'speed'"):
        history.trend("speed", url)


def test_trend_value_is_the_median_over_repeats_with_its_spread(url):
    bws = [559.0, 780.0, 800.0, 890.0, 903.0, 1320.0]
    run = make_run(phases=[make_phase("seq-read", "read", bandwidth=[b * MiB for b in bws])])
    history.append(run, url)
    (point,) = history.trend("seq-read.bandwidth", url)
    assert point.value == pytest.approx(845 * MiB)
    assert point.spread.n == 6
    assert (point.spread.min, point.spread.max) == (559 * MiB, 1320 * MiB)
    assert point.spread.cv == pytest.approx(0.28608, abs=1e-5)  # sample sd / mean


def test_a_file_written_before_the_aggregate_column_still_reads(tmp_path):
    url = str(tmp_path / "h")
    run = make_run(phases=[make_phase("seq-read", "read", bandwidth=[100.0, 200.0, 600.0])])
    history.append(run, url)
    path = Path(url) / f"{run.run_id}.parquet"
    old = pq.read_table(path)
    old = old.drop_columns(["aggregate"]).replace_schema_metadata(old.schema.metadata)
    path.unlink()
    pq.write_table(old, path)
    table, warnings = history.read_history(url)
    assert warnings == []
    got = sorted(zip(table["repeat"].to_pylist(), table["aggregate"].to_pylist(), strict=True))
    assert got == [(-1, True), (0, False), (1, False), (2, False)]
    (point,) = history.trend("bandwidth", url)
    assert point.value == 200.0 and point.spread.n == 3


def test_trend_svg(tmp_path):
    pytest.importorskip("matplotlib")
    from iobench.compare.trend import trend_report
    from iobench.compare.trend_render import render_trend_svg

    url = str(tmp_path / "h")
    for run in _runs():
        history.append(run, url)
    svg = render_trend_svg(trend_report("seq-read.bandwidth", url))
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg and "</svg>" in svg
    assert "MiB/s" in svg
    with pytest.raises(UsageError, match="no stored values"):
        render_trend_svg(trend_report("seq-read.bandwidth", str(tmp_path / "empty")))


def test_trend_svg_without_matplotlib(monkeypatch, tmp_path):
    import builtins

    from iobench.compare.trend import trend_report
    from iobench.compare.trend_render import render_trend_svg

    url = str(tmp_path / "h")
    history.append(make_run(phases=[make_phase("seq-read", "read", bandwidth=[1.0])]), url)
    report = trend_report("seq-read.bandwidth", url)
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(UsageError, match=r"matplotlib is missing; install iobench\[plot\]"):
        render_trend_svg(report)


# --- files it must skip and leave alone ----------------------------------------------------------


def _write(fs, path: str, data: bytes) -> None:
    fs.pipe_file(path, data)


def test_bad_files_are_skipped_with_a_warning_and_left_untouched(url):
    runs = _runs()
    for run in runs[:2]:
        history.append(run, url)
    fs, root = _fs_and_root(url)
    good = fs.cat_file(posixpath.join(root, f"{runs[0].run_id}.parquet"))

    bad = {}
    bad["truncated.parquet"] = good[: len(good) // 2]
    bad["garbage.parquet"] = b"PAR1 this is not parquet PAR1"
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]}), sink)
    bad["foreign.parquet"] = sink.getvalue().to_pybytes()
    for name, data in bad.items():
        _write(fs, posixpath.join(root, name), data)
    newer = make_run("20250109T000000Z-ffffff", started_at=DAY[8])
    newer.schema_version = SCHEMA_VERSION + 1
    history.append(newer, url)
    newer_path = posixpath.join(root, f"{newer.run_id}.parquet")
    bad[posixpath.basename(newer_path)] = fs.cat_file(newer_path)

    table, warnings = history.read_history(url)
    assert set(table.column("run_id").to_pylist()) == {runs[0].run_id, runs[1].run_id}
    assert len(warnings) == 4
    for name in bad:
        assert sum(name in w for w in warnings) == 1, (name, warnings)
    assert any(
        "foreign.parquet: not an iobench history file (missing run_id" in w for w in warnings
    )
    assert any(f"{newer.run_id}.parquet: schema_version 2 is newer" in w for w in warnings)

    seen: list[str] = []
    listed = history.list_runs(url, on_warning=seen.append)
    assert [s.run_id for s in listed] == [runs[0].run_id, runs[1].run_id]
    assert len(seen) == 4
    assert history.latest_run(url).run_id == runs[1].run_id  # the newer-schema run is not "latest"
    assert history.get_run(runs[0].run_id, url).run_id == runs[0].run_id
    with pytest.raises(UsageError):
        history.get_run(newer.run_id, url)
    for name, data in bad.items():
        assert fs.cat_file(posixpath.join(root, name)) == data  # never rewritten or deleted


def test_missing_history_directory_reads_as_empty(tmp_path):
    url = str(tmp_path / "nothing-here")
    table, warnings = history.read_history(url)
    assert table.num_rows == 0 and warnings == []
    assert history.list_runs(url) == []
    assert not Path(url).exists()  # reading never creates the store


# --- concurrency ---------------------------------------------------------------------------------


def _append_in_child(url: str, run_id: str, barrier) -> None:
    run = make_run(run_id, phases=[make_phase("seq-read", bandwidth=noisy(1000.0, 6))])
    barrier.wait()
    history.append(run, url)


def test_concurrent_appends_from_two_processes_both_survive(tmp_path):
    url = str(tmp_path / "history")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    ids = ["20250101T000000Z-proc01", "20250101T000000Z-proc02"]
    procs = [ctx.Process(target=_append_in_child, args=(url, i, barrier)) for i in ids]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert sorted(s.run_id for s in history.list_runs(url)) == ids
    table, warnings = history.read_history(url)
    assert warnings == []
    assert sorted(set(table.column("run_id").to_pylist())) == ids
    assert sorted(p.name for p in Path(url).iterdir()) == [f"{i}.parquet" for i in ids]
