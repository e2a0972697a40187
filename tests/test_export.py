"""Exports: CSV per phase, the per-interval series, the history table as CSV/Parquet/JSON, and
the history schema (timestamps, setup columns) that older files still read into."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from factories import MiB, make_phase, make_run

from iobench import history
from iobench.history import export
from iobench.result.file import dumps

UTC = dt.timezone.utc
OLD_COLUMNS = history.COLUMNS[: history.COLUMNS.index("iobench_version") + 1]


def _phase(name="seq-read-bs128k", op="read", **kw):
    p = make_phase(name, op, bandwidth=[100 * MiB, 120 * MiB], latency_p99=[0.002])
    p.block_size = 128 * 1024
    p.concurrency = 4
    p.bytes = 64 * MiB
    p.ops = 512
    p.extra = {"engine": "fio"}
    for k, v in kw.items():
        setattr(p, k, v)
    return p


def _write_history_1(url: Path, run) -> Path:
    """A file as iobench wrote it before history-2: started_at a string, no setup columns."""
    rows = [{c: r[c] for c in OLD_COLUMNS} for r in history.metric_rows(run)]
    types = {"repeat": pa.int64(), "schema_version": pa.int64(), "value": pa.float64()}
    types["aggregate"] = pa.bool_()
    schema = pa.schema([pa.field(c, types.get(c, pa.string())) for c in OLD_COLUMNS])
    schema = schema.with_metadata(
        {history.RESULT_KEY: dumps(run).encode(), history.SCHEMA_KEY: b"1"}
    )
    url.mkdir(parents=True, exist_ok=True)
    path = url / f"{run.run_id}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


# --- the history schema --------------------------------------------------------------------


def test_new_files_hold_a_utc_timestamp_and_the_setup_of_each_phase(tmp_path):
    run = make_run(started_at="2025-03-04T05:06:07.890+02:00", phases=[_phase()])
    run.verdict = {"result": "fail", "reasons": ["read"]}
    path = history.append(run, str(tmp_path / "h"))
    table = pq.read_table(path)
    assert table.schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    row = table.to_pylist()[0]
    assert row["started_at"] == dt.datetime(2025, 3, 4, 3, 6, 7, 890000, tzinfo=UTC)
    assert (row["block_size"], row["jobs"], row["cache"]) == (131072, 4, "direct")
    assert (row["phase_engine"], row["engine"], row["verdict"]) == ("fio", "posix", "fail")


def test_older_files_read_beside_new_ones(tmp_path):
    url = tmp_path / "h"
    old = make_run(
        "20250101T000000Z-aaaaaa", started_at="2025-01-01T00:00:00.000+00:00", phases=[_phase()]
    )
    new = make_run(
        "20250102T000000Z-bbbbbb", started_at="2025-01-02T00:00:00.000+00:00", phases=[_phase()]
    )
    _write_history_1(url, old)
    history.append(new, str(url))
    table, warnings = history.read_history(str(url))
    assert warnings == []
    assert table.schema == history._arrow_schema()
    by_run = {r["run_id"]: r for r in table.to_pylist() if r["aggregate"]}
    assert by_run[old.run_id]["started_at"] == dt.datetime(2025, 1, 1, tzinfo=UTC)
    assert by_run[old.run_id]["block_size"] is None and by_run[old.run_id]["jobs"] is None
    assert by_run[new.run_id]["block_size"] == 131072
    points = history.trend("seq-read-bs128k.bandwidth", str(url))
    assert [p.started_at for p in points] == [
        "2025-01-01T00:00:00.000+00:00",
        "2025-01-02T00:00:00.000+00:00",
    ]
    assert [r.run_id for r in history.list_runs(str(url))] == [old.run_id, new.run_id]


# --- per-phase and per-interval CSV ---------------------------------------------------------


def test_phase_rows_one_per_phase_plus_the_loader():
    loader = {"au": 0.91, "bytes_per_s": 5e8, "load_wait_s": {"mean": 0.001, "p99": 0.004}}
    run = make_run(phases=[_phase(), _phase("seq-write", "write", cache="buffered")], loader=loader)
    run.verdict = {"result": "pass", "reasons": []}
    rows = export.phase_rows(run)
    assert {r["verdict"] for r in rows} == {"pass"}
    assert [r["phase"] for r in rows] == ["seq-read-bs128k", "seq-write", "loader"]
    first = rows[0]
    assert list(first) == list(export.PHASE_COLUMNS)
    assert (first["block_size"], first["jobs"], first["cache"], first["engine"]) == (
        131072,
        4,
        "direct",
        "fio",
    )
    assert first["bandwidth_bps"] == 110 * MiB and first["repeats"] == 2
    assert rows[1]["cache"] == "buffered"
    assert (rows[2]["au"], rows[2]["latency_p99_s"], rows[2]["block_size"]) == (0.91, 0.004, None)


def test_csv_round_trips_every_digit_and_leaves_missing_cells_empty():
    run = make_run(phases=[_phase(bandwidth_bps=123456789.123456789)])
    text = export.to_csv(export.phase_rows(run), export.PHASE_COLUMNS)
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 1
    assert float(rows[0]["bandwidth_bps"]) == 123456789.123456789
    assert rows[0]["au"] == "" and rows[0]["verdict"] == ""


def test_series_rows_one_per_interval_with_its_time_span():
    p = _phase(series=[10.0, 20.0, 30.0], ops_series=[1.0, 2.0], series_interval_s=0.5)
    rows = export.series_rows(make_run(phases=[p]))
    got = [
        (r["interval"], r["t_start_s"], r["t_end_s"], r["bandwidth_bps"], r["iops"]) for r in rows
    ]
    assert got == [(0, 0.0, 0.5, 10.0, 1.0), (1, 0.5, 1.0, 20.0, 2.0), (2, 1.0, 1.5, 30.0, None)]


def test_write_output_refuses_a_symlink_and_a_directory(tmp_path):
    from iobench.core.errors import UsageError

    victim = tmp_path / "victim"
    victim.write_text("keep")
    link = tmp_path / "out.csv"
    os.symlink(victim, link)
    with pytest.raises(UsageError, match="is a symbolic link"):
        export.write_output(link, b"x", "--csv")
    with pytest.raises(UsageError, match="is a directory"):
        export.write_output(tmp_path, b"x", "--csv")
    assert victim.read_text() == "keep"
    export.write_output(tmp_path / "ok.csv", b"a,b\n", "--csv")
    assert (tmp_path / "ok.csv").read_bytes() == b"a,b\n"


# --- the history command --------------------------------------------------------------------


@pytest.fixture
def stored(tmp_path):
    url = tmp_path / "history"
    runs = [
        make_run(
            f"2025010{i}T000000Z-abcde{i}",
            started_at=f"2025-01-0{i}T10:20:30.456+00:00",
            workload="sequential-write" if i < 3 else "rand-read",
            phases=[_phase()],
        )
        for i in (1, 2, 3)
    ]
    _write_history_1(url, runs[0])
    for r in runs[1:]:
        history.append(r, str(url))
    return str(url), runs


def test_history_list_prints_whole_timestamps_in_aligned_columns(cli, stored, monkeypatch):
    url, runs = stored
    monkeypatch.setenv("COLUMNS", "200")  # one line per run
    r = cli("history", "list", "--history", url)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == [
        "run", "id", "started", "(UTC)", "workload", "target", "status", "verdict", "headline",
        "engine", "phases",
    ]  # fmt: skip
    first = lines[1].split()
    assert first[:4] == [runs[0].run_id, "2025-01-01", "10:20:30Z", "sequential-write"]
    assert "complete" in first and first[-2:] == ["posix", "1"]
    # every column starts where its header starts
    starts = [lines[0].index(h) for h in ("started", "workload", "status", "engine")]
    for line in lines[1:]:
        assert [line[s - 1] for s in starts] == [" "] * 4
        assert line[starts[1] :].startswith(("sequential-write", "rand-read"))
    assert len({len(line) for line in lines[1:]}) == 1


def test_history_list_json(cli, stored):
    url, runs = stored
    r = cli("history", "list", "--history", url, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [d["run_id"] for d in doc] == [x.run_id for x in runs]
    assert doc[0]["started_at"] == "2025-01-01T10:20:30.456+00:00"
    assert doc[0]["phases"] == ["seq-read-bs128k"]


def test_history_show_latest_as_compare_takes_it(cli, stored):
    url, runs = stored
    r = cli("history", "show", "latest", "--history", url, "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["run_id"] == runs[2].run_id
    r = cli("history", "show", "latest~2", "--history", url, "--json")
    assert json.loads(r.out)["run_id"] == runs[0].run_id
    r = cli("history", "show", "latest~5", "--history", url)
    assert r.code == 2 and "holds 3 runs" in r.err


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_history_export_every_format(cli, stored, tmp_path, fmt):
    url, runs = stored
    out = tmp_path / f"all.{fmt}"
    r = cli("history", "export", out, "--history", url, "--format", fmt)
    assert r.code == 0, r.err
    assert r.err.strip().endswith(f"written to {out}")
    expected = history.read_history(url)[0]
    if fmt == "parquet":
        table = pq.read_table(out)
        assert table.equals(expected)
        return
    if fmt == "csv":
        rows = list(csv.DictReader(out.open()))
        assert list(rows[0]) == list(history.COLUMNS)
    else:
        rows = json.loads(out.read_text())
    assert len(rows) == expected.num_rows
    assert rows[0]["started_at"] == "2025-01-01T10:20:30.456+00:00"
    assert {r["run_id"] for r in rows} == {x.run_id for x in runs}


def test_history_export_format_from_the_file_name(cli, stored, tmp_path):
    url, _runs = stored
    r = cli("history", "export", tmp_path / "h.parquet", "--history", url)
    assert r.code == 0, r.err
    assert pq.read_table(tmp_path / "h.parquet").num_rows == history.read_history(url)[0].num_rows
    r = cli("history", "export", tmp_path / "h.txt", "--history", url)
    assert (tmp_path / "h.txt").read_text().startswith("run_id,started_at,")


def test_history_export_to_stdout_and_by_workload(cli, stored):
    url, runs = stored
    r = cli("history", "export", "--history", url, "--workload", "rand-read")
    assert r.code == 0, r.err
    rows = list(csv.DictReader(io.StringIO(r.out)))
    assert rows and {row["run_id"] for row in rows} == {runs[2].run_id}


def test_history_export_bad_input_writes_nothing(cli, stored, tmp_path):
    url, _runs = stored
    r = cli("history", "export", "--history", url, "--format", "parquet")
    expected = "iobench: error: parquet is binary: give a FILE (history export FILE)\n"
    assert (r.code, r.err) == (2, expected)
    r = cli("history", "export", tmp_path / "x", "--history", url, "--format", "xlsx")
    assert r.code == 2 and "expected csv, parquet or json" in r.err
    assert not (tmp_path / "x").exists()
    assert Path(url).is_dir()


# --- --csv and --series-csv on a real run ----------------------------------------------------


def test_run_csv_one_row_per_phase_and_the_series(cli, planted, tmp_path):
    from conftest import SMALL

    out, pcsv, scsv = tmp_path / "out", tmp_path / "phases.csv", tmp_path / "series.csv"
    args = ["--output", out, "--json", "--quiet", "--csv", pcsv, "--series-csv", scsv]
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"], *args)
    assert r.code == 0, r.err
    res = json.loads(r.out)
    rows = list(csv.DictReader(pcsv.open()))
    assert [(x["phase"], x["op"]) for x in rows] == [(p["name"], p["op"]) for p in res["phases"]]
    for row, p in zip(rows, res["phases"], strict=True):
        assert float(row["bandwidth_bps"]) == p["bandwidth_bps"]
        assert int(row["block_size"]) == p["block_size"] and int(row["bytes"]) == p["bytes"]
        assert row["run_id"] == res["run_id"]
    series = list(csv.DictReader(scsv.open()))
    expected = [(p["name"], v) for p in res["phases"] for v in p["series"]]
    assert [(x["phase"], float(x["bandwidth_bps"])) for x in series] == expected
    assert len(series) > 0


def test_run_csv_bad_path_exit_2_before_the_run(cli, planted, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / "link.csv")
    out = tmp_path / "out"
    for bad, why in ((tmp_path / "link.csv", "is a symbolic link"), (tmp_path, "is a directory")):
        r = cli("run", "sequential-write", planted.path, "--output", out, "--csv", bad)
        assert r.code == 2 and r.err.startswith(f"iobench: error: {bad} ") and why in r.err
        assert r.err.rstrip().endswith("--csv")
    assert victim.read_text() == "keep" and not out.exists()


def test_run_csv_write_failure_exit_4_after_the_result(cli, planted, tmp_path, monkeypatch):
    import errno

    from conftest import SMALL

    def full(path, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    out, pcsv = tmp_path / "out", tmp_path / "phases.csv"
    monkeypatch.setattr(export, "_atomic_write", full)
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"], "--output", out,
            "--quiet", "--csv", pcsv, "--no-history")  # fmt: skip
    assert r.code == 4
    from conftest import without_run_notes

    said = f"iobench: error: cannot write --csv {pcsv}: No space left on device"
    assert without_run_notes(r.err) == [said]
    assert f"result: {out / 'result.json'}" in r.out and not pcsv.exists()


def test_json_has_no_nan_and_an_empty_history_exports(cli, tmp_path):
    when = dt.datetime(2025, 1, 1, tzinfo=UTC)
    text = export.to_json([{"value": float("nan"), "x": float("inf"), "started_at": when}])
    assert json.loads(text) == [{"value": None, "x": None, "started_at": "2025-01-01T00:00:00.000+00:00"}]  # fmt: skip
    for fmt, expected in (("csv", ",".join(history.COLUMNS) + "\n"), ("json", "[]\n")):
        r = cli("history", "export", "--history", tmp_path / "none", "--format", fmt)
        assert (r.code, r.out) == (0, expected)


def test_loader_csv_has_the_loader_row(cli, planted, tmp_path):
    from test_loader import run_loader_cli, tiny_profile

    pcsv = tmp_path / "loader.csv"
    res = run_loader_cli(cli, planted, tmp_path, "--profile", tiny_profile(tmp_path), "--csv", pcsv)
    rows = list(csv.DictReader(pcsv.open()))
    assert [r["phase"] for r in rows] == [p["name"] for p in res["phases"]] + ["loader"]
    assert float(rows[-1]["au"]) == res["loader"]["au"]
    assert float(rows[-1]["bandwidth_bps"]) == res["loader"]["bytes_per_s"]
