"""The fio engine: job files, parsing real fio 3.33 json+ output (golden files), the error
cases (no fio, fio failing, junk or truncation in its output), the engine contract with the
real fio, and a run through the CLI next to the posix engine.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path

import pytest
from engine_contract import EngineContract, MiB
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.core.errors import EngineError, EngineUnavailable, UsageError
from iobench.engines import fio as fio_mod
from iobench.engines import fio_job
from iobench.engines.base import EngineContext, FileSpec, PhaseSpec
from iobench.engines.fio import FioEngine, normalise, parse_output, to_phase_result
from iobench.engines.fio_job import build_plan, job_file, why_not
from iobench.engines.registry import get_engine
from iobench.result.stats import Histogram, bucket_bounds, bucket_index
from iobench.target import StopFlag

GOLDEN = Path(__file__).parent / "golden"
HAVE_FIO = shutil.which("fio") is not None
needs_fio = pytest.mark.skipif(not HAVE_FIO, reason="fio is not installed (apt-get install fio)")

RUN = "/data/.iobench-x"


def golden(name: str) -> dict:
    return parse_output((GOLDEN / f"fio-3.33-{name}.json").read_text())


def sections(text: str) -> dict[str, dict[str, str]]:
    """A job file as {section: {key: value}} (keys in order)."""
    out: dict[str, dict[str, str]] = {}
    cur = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("["):
            cur = out.setdefault(line[1:-1], {})
            continue
        k, _, v = line.partition("=")
        assert cur is not None
        cur[k] = v
    return out


# -- job files --------------------------------------------------------------------------------
def test_job_file_file_per_worker_matches_posix_layout():
    files = tuple(FileSpec(f"seq/r0-w{w}.dat", 8 * MiB) for w in range(3))
    spec = PhaseSpec("seq-write", "write", files, jobs=3, block_size=MiB, size=8 * MiB,
                     direct=True, fsync="end", seed=2)  # fmt: skip
    s = sections(job_file(spec, RUN))
    g = s.pop("global")
    assert g == {
        "rw": "write", "bs": "1048576", "ioengine": "psync", "iodepth": "1", "direct": "1",
        "group_reporting": "0", "randrepeat": "1", "fallocate": "none", "exitall_on_error": "1",
        "fadvise_hint": "1", "refill_buffers": "1", "end_fsync": "1",
    }  # fmt: skip
    assert list(s) == ["seq-write.w0", "seq-write.w1", "seq-write.w2"]
    for w, job in enumerate(s.values()):
        assert job["filename"] == f"seq/r0-w{w}.dat"  # relative to the run dir, fio's cwd
        assert job["size"] == str(8 * MiB)
        assert "offset" not in job and "io_size" not in job  # the whole file, once
        assert job["randseed"] == str(2 * 7919 + w + 1)


def test_job_file_fsync_and_direct_choices():
    files = (FileSpec("a.dat", MiB),)
    g = sections(job_file(PhaseSpec("w", "write", files, fsync="file"), RUN))["global"]
    assert g["fsync_on_close"] == "1" and "end_fsync" not in g and g["direct"] == "0"
    g = sections(job_file(PhaseSpec("w", "write", files, fsync="never"), RUN))["global"]
    assert "fsync_on_close" not in g and "end_fsync" not in g


def test_job_file_buffers_on_a_page_and_readahead_as_the_posix_engine():
    """fio aligns its buffers only for O_DIRECT; a buffered job's sat 16 bytes past a page,
    and the copies out of the page cache into it ran at a fifth of the speed on this
    project's AMD EPYC VM: buffered jobs ask for page-aligned memory, as the posix engine
    reads into. Readahead advice is fio's default, stated (posix.advise gives the same)."""
    files = (FileSpec("a.dat", 4 * MiB),)
    g = sections(job_file(PhaseSpec("r", "read", files), RUN))["global"]
    assert g["mem_align"] == str(os.sysconf("SC_PAGE_SIZE")) and g["fadvise_hint"] == "1"
    g = sections(job_file(PhaseSpec("r", "randread", files, block_size=4096), RUN))["global"]
    assert g["mem_align"] == str(os.sysconf("SC_PAGE_SIZE"))
    g = sections(job_file(PhaseSpec("r", "read", files, direct=True), RUN))["global"]
    assert "mem_align" not in g and g["fadvise_hint"] == "1"  # fio aligns O_DIRECT buffers


def test_job_file_read_never_creates_files():
    files = (FileSpec("a.dat", 4 * MiB),)
    g = sections(job_file(PhaseSpec("r", "read", files, direct=True), RUN))["global"]
    assert g["rw"] == "read" and g["allow_file_create"] == "0"
    assert "refill_buffers" not in g and "end_fsync" not in g


def test_job_file_shared_file_regions():
    files = (FileSpec("seq/shared.dat", 12 * MiB),)
    spec = PhaseSpec("seq-read", "read", files, jobs=3, block_size=MiB, size=4 * MiB,
                     mode="shared")  # fmt: skip
    jobs = [v for k, v in sections(job_file(spec, RUN)).items() if k != "global"]
    assert [j.get("offset", "0") for j in jobs] == ["0", str(4 * MiB), str(8 * MiB)]
    assert all(j["size"] == str(4 * MiB) and j["filename"] == "seq/shared.dat" for j in jobs)


def test_job_file_random_reads_with_queue_depth_and_time():
    files = (FileSpec("a.dat", 8 * MiB), FileSpec("b.dat", 8 * MiB))
    spec = PhaseSpec("rand-read", "randread", files, jobs=2, block_size=4096, size=MiB + 100,
                     direct=True, mode="shared", iodepth=8, seed=1)  # fmt: skip
    s = sections(job_file(spec, RUN))
    g = s["global"]
    assert (g["rw"], g["ioengine"], g["iodepth"], g["norandommap"]) == (
        "randread",
        "libaio",
        "8",
        "1",
    )
    w1 = s["rand-read.w1"]
    assert w1["filename"] == "a.dat:b.dat"
    assert w1["offset"] == str(4 * MiB) and w1["size"] == str(8 * MiB)  # 4 MiB of each file
    assert w1["io_size"] == str(MiB)  # whole blocks only, as the posix engine counts them
    assert w1["file_service_type"] == "random"
    timed = PhaseSpec("t", "randread", files, block_size=4096, time_s=1.5, rate_bps=5e6)
    g = sections(job_file(timed, RUN))["global"]
    assert (g["runtime"], g["time_based"], g["rate"]) == ("1500ms", "1", "5000000")
    assert "io_size" not in sections(job_file(timed, RUN))["t.w0"]


def test_job_file_more_files_than_workers_and_the_run_dir_kept_out():
    files = tuple(FileSpec(f"f{i}", MiB) for i in range(4))
    plan = build_plan(PhaseSpec("r", "read", files, jobs=2), "/mnt/a:b\n#c")
    s = sections(plan.text())
    assert s["r.w0"]["filename"] == "f0:f2"  # the run dir is fio's cwd, never in the file
    assert plan.cwd == "/mnt/a:b\n#c" and plan.abspath("f0") == "/mnt/a:b\n#c/f0"
    assert s["r.w0"]["size"] == str(2 * MiB)
    assert s["r.w0"]["file_service_type"] == "sequential"  # one file after the other


def test_why_not_refuses_what_fio_cannot_express():
    one = (FileSpec("a", MiB),)
    assert why_not(PhaseSpec("r", "read", one)) is None
    assert "whole files" in why_not(PhaseSpec("r", "read", one, block_size=0))
    assert "per whole file" in why_not(PhaseSpec("r", "read", one, latency_per="file"))
    assert "stat" in why_not(PhaseSpec("s", "stat", one))
    mixed = (FileSpec("a", MiB), FileSpec("b", 2 * MiB))
    assert "differ in size" in why_not(PhaseSpec("r", "read", mixed, jobs=1))
    assert why_not(PhaseSpec("r", "read", mixed, jobs=2)) is None  # one file each
    eng = FioEngine()
    assert eng.supports("randread") and not eng.supports("create")
    with pytest.raises(EngineError):
        build_plan(PhaseSpec("d", "delete", one), RUN)


# -- nothing unsafe in a job file ------------------------------------------------------------
@pytest.mark.parametrize(
    "value", ["a\nb", "a;b", "a#b", "${HOME}", "$mb_memory", "a:b", "a b", " a", "-x", "", "a\rb"]
)
def test_check_value_refuses_what_fio_would_cut_split_or_expand(value):
    with pytest.raises(UsageError) as ei:
        fio_job.check_value("filename", value)
    assert int(ei.value.exit_status) == 2 and "use --engine posix" in ei.value.one_line()


def test_check_value_takes_plain_values_and_paths_relative_to_the_run_dir():
    ok = [
        (1048576, "1048576"),
        ("psync", "psync"),
        ("1500ms", "1500ms"),
        ("a/b-1.dat", "a/b-1.dat"),
    ]
    assert [fio_job.check_value("k", v) for v, _ in ok] == [t for _, t in ok]
    assert fio_job.check_path("../.iobench-x-r1/seq/r1-w0.dat").startswith("../")  # a peer rank
    with pytest.raises(UsageError, match="relative to the run directory"):
        fio_job.check_path("/etc/passwd")


def test_a_job_named_global_is_not_taken_for_the_global_section():
    """fio treats any section whose name starts with "global" as [global]."""
    assert fio_job._job_name("global-read", 0) == "job.global-read.w0"
    s = sections(job_file(PhaseSpec("global-read", "read", (FileSpec("a", MiB),))))
    assert list(s) == ["global", "job.global-read.w0"]
    with pytest.raises(UsageError, match="job name"):
        fio_job._job_name("x" * 300, 0)


def test_a_file_list_longer_than_a_fio_line_runs_with_posix_or_is_refused():
    """fio reads job-file lines with fgets(8192): the rest of a longer line would be parsed as
    a line of its own. Such a phase falls back to the posix engine (why_not); built anyway,
    the job file is refused."""
    files = tuple(FileSpec(f"seq/r0-w{i}.dat", 4 * MiB) for i in range(600))
    spec = PhaseSpec("rand-read", "randread", files, jobs=2, block_size=4096, mode="shared")
    assert "8191 characters" in why_not(spec)
    assert why_not(PhaseSpec("rand-read", "randread", files[:100], jobs=2, block_size=4096,
                             mode="shared")) is None  # fmt: skip
    with pytest.raises(UsageError, match="longer than fio reads"):
        fio_job.FioPlan(
            {"rw": "randread"},
            jobs=[fio_job.FioJobPlan(0, "r.w0", [f.path for f in files], 0, 4 * MiB, 0)],
        ).text()


_LINE = r"(\[[A-Za-z0-9_.-]+\]|[a-z_]+=[A-Za-z0-9_.+/:-]+|)"


@given(
    op=st.sampled_from(["write", "read", "randread", "randwrite"]),
    jobs=st.integers(1, 5),
    nfiles=st.integers(1, 6),
    bs=st.integers(1, 4 << 20),
    size=st.integers(0, 1 << 40),
    time_s=st.one_of(st.none(), st.floats(0.0005, 1e6)),
    rate=st.one_of(st.none(), st.floats(1, 1e12)),
    seed=st.integers(0, 2**31),
    iodepth=st.integers(1, 256),
    mode=st.sampled_from(["file-per-worker", "shared"]),
    fsync=st.sampled_from(["never", "file", "end"]),
    direct=st.booleans(),
)
@settings(max_examples=200, deadline=None)
def test_every_job_file_line_is_a_section_or_a_plain_key_value(
    op, jobs, nfiles, bs, size, time_s, rate, seed, iodepth, mode, fsync, direct
):
    files = tuple(FileSpec(f"seq/r0-w{i}.dat", 8 * MiB) for i in range(nfiles))
    spec = PhaseSpec("p", op, files, jobs=jobs, block_size=bs, size=size, time_s=time_s,
                     rate_bps=rate, seed=seed, iodepth=iodepth, mode=mode, fsync=fsync,
                     direct=direct)  # fmt: skip
    for line in job_file(spec, "/any\n#where;${X}").splitlines():
        assert re.fullmatch(_LINE, line), line


# -- parsing the golden files -----------------------------------------------------------------
def _fio_rank_value(bins: dict[str, int], q: float) -> int:
    """fio's own percentile rule: the first bin whose running count reaches q * N."""
    items = sorted((int(k), n) for k, n in bins.items())
    total = sum(n for _, n in items)
    seen = 0
    for v, n in items:
        seen += n
        if seen >= q * total:
            return v
    return items[-1][0]


@pytest.mark.parametrize("name", ["seqwrite", "randread", "randread-libaio"])
def test_golden_bins_are_fio_percentiles_and_our_buckets(name):
    data = golden(name)
    ddir = "write" if name == "seqwrite" else "read"
    for job in data["jobs"]:
        clat = job[ddir]["clat_ns"]
        # reading the bins reproduces every percentile fio printed
        for key, value in clat["percentile"].items():
            assert _fio_rank_value(clat["bins"], float(key) / 100) == value, key
        # fio's layout is iobench's: each bin value is the midpoint of one of our buckets
        for v in map(int, clat["bins"]):
            lo, hi = bucket_bounds(bucket_index(v))
            assert v == (lo if hi - lo == 1 else (lo + hi) // 2)


def test_golden_seqwrite_figures():
    files = (FileSpec("w0.dat", 4 * MiB), FileSpec("w1.dat", 4 * MiB))
    spec = PhaseSpec("seq-write", "write", files, jobs=2, direct=True, fsync="end", seed=1)
    res = to_phase_result(spec, golden("seqwrite"), build_plan(spec, "/var/tmp/gold/run"))
    assert (res.bytes, res.ops, res.files, res.concurrency) == (8 * MiB, 8, 2, 2)
    assert res.elapsed_s == 0.013 and res.stonewall_s == 0.010  # runtimes 13 and 10 ms
    assert res.bandwidth_bps == 8 * MiB / 0.013
    assert res.iops == 8 / 0.013
    # at 10 ms the slower job had done 10/13 of its 4 MiB (the stated approximation)
    assert res.bandwidth_stonewall_bps == pytest.approx((4 * MiB + 4 * MiB * 10 / 13) / 0.010)
    assert "stonewall_basis" in res.extra
    # per-job bandwidth is fio's own bw_bytes (an integer there)
    assert res.per_worker["min"] == pytest.approx(322638769, abs=1)
    assert res.per_worker["max"] == pytest.approx(419430400, abs=1)
    lat = res.latency_s
    assert lat["min"] == 1023241e-9 and lat["max"] == 2424496e-9
    assert lat["mean"] == pytest.approx((1711462.0 * 4 + 1376591.25 * 4) / 8 / 1e9, rel=1e-12)
    assert res.histogram["count"] == 8
    assert res.cache == "direct" and res.status == "ok"
    assert res.extra["fio_version"] == "fio-3.33"
    assert res.extra["end_epoch"] == 1796018462.219


def test_golden_randread_figures_and_percentiles():
    spec = PhaseSpec("rand-read", "randread", (FileSpec("w0.dat", 4 * MiB),), block_size=4096,
                     size=2 * MiB, direct=True, mode="shared")  # fmt: skip
    data = golden("randread")
    res = to_phase_result(spec, data)
    assert (res.bytes, res.ops) == (2 * MiB, 512)
    assert res.elapsed_s == 0.059
    assert res.iops == pytest.approx(8677.966102, rel=1e-9)  # fio's own iops
    assert res.bandwidth_bps == pytest.approx(35544949, abs=1)  # fio's bw_bytes
    clat = data["jobs"][0]["read"]["clat_ns"]
    assert res.latency_s["mean"] == pytest.approx(108670.873047e-9, rel=1e-9)
    assert res.latency_s["min"] == 59741e-9 and res.latency_s["max"] == 2609549e-9
    hist = Histogram.from_dict(res.histogram)
    assert hist.count == 512
    values = sorted(v for k, n in clat["bins"].items() for v in [int(k)] * n)
    for q in (0.5, 0.9, 0.99, 0.999):
        ours = hist.percentile_ns(q)
        # the nearest-rank rule (fio's, numpy's "inverted_cdf") on the expanded bins
        assert bucket_index(int(ours)) == bucket_index(values[math.ceil(q * 512) - 1])
    # fio prints the same values (bucket midpoints), up to p99.5; iobench's p99.9 of 512
    # samples is the last one, the exact maximum, where fio prints its bucket's midpoint
    for q, key in ((0.5, "50.000000"), (0.9, "90.000000"), (0.95, "95.000000"),
                   (0.99, "99.000000"), (0.995, "99.500000")):  # fmt: skip
        assert hist.percentile_ns(q) == clat["percentile"][key]
    assert hist.percentile_ns(0.999) == clat["max"] == 2609549
    assert res.latency_s["p50"] == 98816e-9  # the same bucket midpoint fio prints


def test_golden_libaio_keeps_submission_and_total_latency_means():
    files = (FileSpec("w0.dat", 4 * MiB), FileSpec("w1.dat", 4 * MiB))
    spec = PhaseSpec("rand-read-qd4", "randread", files, jobs=2, block_size=4096, size=MiB,
                     direct=True, mode="shared", iodepth=4)  # fmt: skip
    res = to_phase_result(spec, golden("randread-libaio"))
    assert (res.bytes, res.ops) == (2 * MiB, 512)
    assert res.extra["fio_slat_mean_s"] == pytest.approx((11578.191406 + 10816.179688) / 2e9)
    assert res.extra["fio_lat_mean_s"] == pytest.approx((273642.972656 + 270644.722656) / 2e9)
    assert res.latency_s["mean"] < res.extra["fio_lat_mean_s"]  # clat excludes submission
    assert [j.total_ios for j in normalise(golden("randread-libaio"), "read")] == [256, 256]


def test_parse_output_skips_junk_and_rejects_truncation():
    text = (GOLDEN / "fio-3.33-seqwrite.json").read_text()
    assert parse_output("fio: some warning\n" + text + "\nfio: after")["fio version"] == "fio-3.33"
    with pytest.raises(ValueError):
        parse_output(text[: len(text) // 2])
    with pytest.raises(ValueError):
        parse_output("fio: nothing at all")
    with pytest.raises(ValueError):
        parse_output('{"no": "jobs"}')


# -- errors, with a stand-in fio on PATH ------------------------------------------------------


def _write_spec() -> PhaseSpec:
    files = (FileSpec("w0.dat", 4 * MiB), FileSpec("w1.dat", 4 * MiB))
    return PhaseSpec("seq-write", "write", files, jobs=2, direct=True, fsync="end", seed=1)


def _ctx(tmp_path, raw: bool = False) -> EngineContext:
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    raw_dir = tmp_path / "out" if raw else None
    return EngineContext(str(run), StopFlag(), raw_dir=str(raw_dir) if raw_dir else None)


def test_missing_fio_is_exit_2_with_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty directory: no fio
    assert FioEngine.available() == (False, "fio is not on PATH")
    with pytest.raises(EngineUnavailable) as ei:
        get_engine("fio")
    assert int(ei.value.exit_status) == 2
    assert "install fio (apt-get install fio) or use --engine posix" in ei.value.one_line()
    with pytest.raises(EngineError):
        FioEngine().run(_write_spec(), _ctx(tmp_path))


def test_missing_fio_through_the_cli(cli, tmp_path, monkeypatch):
    monkeypatch.setattr(fio_mod.shutil, "which", lambda name, *a, **k: None)
    out = tmp_path / "res"
    r = cli("run", "sequential-write", tmp_path, "--engine", "fio", "--output", out, "-q")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "apt-get install fio" in r.err
    assert "Traceback" not in r.err and not out.exists()


def test_fio_exiting_non_zero_names_its_message(tmp_path, fake_fio):
    fake_fio('echo "fio: first line" >&2; echo "fio: this stand-in always fails" >&2; exit 1')
    with pytest.raises(EngineError) as ei:
        FioEngine().run(_write_spec(), _ctx(tmp_path))
    msg = ei.value.one_line()
    assert int(ei.value.exit_status) == 4
    assert "status 1" in msg and "this stand-in always fails" in msg
    assert ei.value.partial.status == "failed" and ei.value.partial.name == "seq-write"


def test_fio_output_with_junk_around_the_json(tmp_path, fake_fio):
    gold = GOLDEN / "fio-3.33-seqwrite.json"
    fake_fio(f'{{ echo "fio: some warning"; cat "{gold}"; echo "fio: bye"; }} > "$out"')
    res = FioEngine().run(_write_spec(), _ctx(tmp_path, raw=True))
    assert (res.bytes, res.ops, res.status) == (8 * MiB, 8, "ok")
    kept = Path(res.extra["fio_json"])
    assert kept == tmp_path / "out" / "fio-seq-write.json"
    assert kept.read_text().startswith("fio: some warning")  # fio's output, as it was
    assert (tmp_path / "out" / "fio-seq-write.fio").read_text() == job_file(
        _write_spec(), str(tmp_path / "run")
    )


def test_truncated_fio_json_is_an_engine_error(tmp_path, fake_fio):
    gold = GOLDEN / "fio-3.33-seqwrite.json"
    fake_fio(f'head -c 3000 "{gold}" > "$out"; echo "fio: cut short" >&2')
    with pytest.raises(EngineError) as ei:
        FioEngine().run(_write_spec(), _ctx(tmp_path))
    assert int(ei.value.exit_status) == 4
    assert "could not be read" in ei.value.one_line() and "cut short" in ei.value.one_line()


def test_no_output_file_at_all(tmp_path, fake_fio):
    fake_fio("exit 0")
    with pytest.raises(EngineError, match="could not be read"):
        FioEngine().run(_write_spec(), _ctx(tmp_path))


def test_job_error_in_the_json(tmp_path, fake_fio):
    data = json.loads((GOLDEN / "fio-3.33-seqwrite.json").read_text())
    data["jobs"][1]["error"] = 28
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    fake_fio(f'cat "{bad}" > "$out"; echo "fio: io_u error on file w1.dat: No space left on device" >&2; exit 1')  # fmt: skip
    with pytest.raises(EngineError) as ei:
        FioEngine().run(_write_spec(), _ctx(tmp_path))
    msg = ei.value.one_line()
    assert "seq-write.w1" in msg and "No space left on device" in msg
    assert ei.value.partial.status == "partial" and ei.value.partial.bytes == 8 * MiB


def test_reads_refuse_missing_files_instead_of_laying_them_out(tmp_path, fake_fio):
    fake_fio("exit 0")
    spec = PhaseSpec("seq-read", "read", (FileSpec("nope.dat", MiB),))
    with pytest.raises(EngineError, match="nope.dat"):
        FioEngine().run(spec, _ctx(tmp_path))


# -- the engine contract and the CLI, with the real fio -------------------------------------
@needs_fio
class TestFio(EngineContract):
    progress_totals_exact = False  # fio's progress comes from its ETA line, a rate estimate

    @pytest.fixture
    def engine(self):
        return FioEngine()


def _result(path: Path) -> dict:
    return json.loads((path / "result.json").read_text())


@needs_fio
def test_cli_run_with_fio_matches_posix_schema(cli, tmp_path):
    args = ["--set", "size=8MiB", "--set", "jobs=2", "--set", "block_sizes=[]",
            "--set", "jobs_sweep=[]", "--set", "time=none", "-q"]  # fmt: skip
    target = tmp_path / "t"
    target.mkdir()
    got = {}
    for engine in ("fio", "posix"):
        out = tmp_path / engine
        r = cli("run", "sequential-write", target, "--engine", engine, "--output", out, *args)
        assert r.code == 0, r.err
        got[engine] = _result(out)
    fio_run, posix_run = got["fio"], got["posix"]
    assert fio_run["engine"]["name"] == "fio" and fio_run["engine"]["version"].startswith("fio-")
    assert set(fio_run) == set(posix_run)
    assert [p["name"] for p in fio_run["phases"]] == [p["name"] for p in posix_run["phases"]]
    assert [p["name"] for p in fio_run["phases"]] == ["seq-write", "seq-read"]
    for pf, pp in zip(fio_run["phases"], posix_run["phases"], strict=True):
        assert set(pf) == set(pp)
        assert set(pf["latency_s"]) == set(pp["latency_s"])
        assert (pf["bytes"], pf["ops"], pf["cache"]) == (pp["bytes"], pp["ops"], pp["cache"])
        assert pf["extra"]["engine"] == "fio" and pp["extra"]["engine"] == "posix"
        kept = Path(pf["extra"]["fio_json"])
        assert kept.parent == tmp_path / "fio" and kept.name == f"fio-{pf['name']}.json"
        assert parse_output(kept.read_text())["jobs"]
    assert not list(target.iterdir())  # the run directory went away


@needs_fio
def test_cli_phases_fio_cannot_express_fall_back_to_posix(cli, tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    out = tmp_path / "o"
    r = cli("run", "dataset-read", target, "--set", "time=none",
            "--engine", "fio", "--output", out, "-q",
            "--set", "files=16", "--set", "file_size=16KiB", "--set", "readers=[1]",
            "--set", "jobs=2")  # fmt: skip
    assert r.code == 0, r.err
    run = _result(out)
    assert run["engine"]["name"] == "fio"
    assert {p["extra"]["engine"] for p in run["phases"]} == {"posix"}
    assert all("engine_fallback" in p["extra"] for p in run["phases"])
    assert any("ran with the posix engine" in w for w in run["warnings"])


@needs_fio
def test_cli_random_read_with_iodepth_uses_libaio(cli, tmp_path):
    target = tmp_path / "t"
    target.mkdir()
    out = tmp_path / "o"
    r = cli("run", "random-read", target, "--set", "time=none",
            "--engine", "fio", "--output", out, "-q",
            "--set", "size=4MiB", "--set", "jobs=1", "--set", "rand_jobs=2",
            "--set", "iodepth=4")  # fmt: skip
    assert r.code == 0, r.err
    rand = next(p for p in _result(out)["phases"] if p["name"] == "rand-read")
    assert rand["extra"]["fio_ioengine"] == "libaio"
    assert rand["ops"] == 2 * (4 * MiB // 4096)  # each worker moves size=4MiB in 4 KiB reads


@needs_fio
def test_a_phase_named_global_runs_as_a_fio_job(tmp_path):
    spec = PhaseSpec("global-write", "write", (FileSpec("g.dat", 2 * MiB),), block_size=MiB,
                     size=2 * MiB)  # fmt: skip
    res = FioEngine().run(spec, _ctx(tmp_path))
    assert (res.bytes, res.ops, res.status) == (2 * MiB, 2, "ok")
    assert (tmp_path / "run" / "g.dat").stat().st_size == 2 * MiB
    assert res.extra["fio_cwd"] == str(tmp_path / "run")


@needs_fio
def test_block_size_1MB_moves_the_same_bytes_on_both_engines(cli, tmp_path):
    """1MB is 10**6 bytes in iobench; fio's own default (kb_base=1024) would read it as
    2**20, so the job file holds byte counts: both engines move exactly the same bytes."""
    target = tmp_path / "t"
    target.mkdir()
    args = ["--set", "block_size=1MB", "--set", "size=8MB", "--set", "block_sizes=[]",
            "--set", "jobs_sweep=[]", "--set", "time=none", "--jobs", "2", "--buffered",
            "-q"]  # fmt: skip
    got = {}
    for engine in ("posix", "fio"):
        out = tmp_path / engine
        r = cli("run", "sequential-write", target, *args, "--engine", engine, "--output", out)
        assert r.code == 0, r.err
        phases = json.loads((out / "result.json").read_text())["phases"]
        got[engine] = [(p["name"], p["bytes"], p["ops"], p["block_size"]) for p in phases]
        assert {p["extra"]["engine"] for p in phases} == {engine}
    assert (
        got["posix"]
        == got["fio"]
        == [
            ("seq-write", 2 * 8 * 10**6, 16, 10**6),
            ("seq-read", 2 * 8 * 10**6, 16, 10**6),
        ]
    )
    job = sections((tmp_path / "fio" / "fio-seq-write.fio").read_text())
    assert job["global"]["bs"] == "1000000" and job["seq-write.w0"]["size"] == "8000000"
