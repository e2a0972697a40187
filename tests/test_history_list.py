"""history list (issue 25): target, workload, verdict (qualify's; blank otherwise) and a headline
figure per run, so that a baseline can be picked from it; within 80 columns; the same fields in
--json."""

from __future__ import annotations

import json

import pytest
from factories import MiB, make_phase, make_run

from iobench import history


def _qualify(run_id: str, status: str, au: float):
    run = make_run(
        run_id,
        workload="qualify",
        phases=[make_phase("seq-write", "write", bandwidth=[500 * MiB])],
        loader={"au": au, "samples_per_s": 900.0},
        target={**make_run().target, "path_or_url": "/mnt/lustre/scratch/a-long-project-dir"},
    )
    run.verdict = {"status": status, "reasons": []}
    return run


@pytest.fixture
def url(tmp_path):
    url = str(tmp_path / "h")
    seq = make_run(
        "20250101T000000Z-seq001",
        workload="sequential-write",
        phases=[
            make_phase("seq-write", "write", bandwidth=[176.1 * MiB]),
            make_phase("seq-read", "read", bandwidth=[900 * MiB]),
        ],
    )
    rand = make_run(
        "20250102T000000Z-rnd002",
        workload="random-read",
        phases=[make_phase("rand-read", "randread", iops=[20000.0])],
    )
    rand.target = {**rand.target, "path_or_url": "t", "run_dir": "/srv/t/.iobench-x"}
    for run in (
        seq, rand,
        _qualify("20250103T000000Z-qua003", "pass (indicative)", 0.961),
        _qualify("20250104T000000Z-qua004", "fail", 0.42),
    ):  # fmt: skip
        history.append(run, url)
    return url


def test_list_runs_carries_target_verdict_and_headline(url):
    runs = {r.run_id[-6:]: r for r in history.list_runs(url)}
    assert runs["seq001"].target == "/mnt/lustre/scratch" and runs["seq001"].verdict is None
    assert runs["seq001"].headline == history.Headline("seq-write", "bandwidth", 176.1 * MiB, "B/s")
    assert runs["rnd002"].target == "/srv/t"  # a relative target: where its run directory was
    assert runs["rnd002"].headline.metric == "iops"
    assert runs["qua003"].verdict == "pass (indicative)" and runs["qua004"].verdict == "fail"
    assert runs["qua003"].headline == history.Headline("loader", "au", 0.961, "fraction")


def test_a_run_that_measured_nothing_has_no_headline():
    assert history.headline(make_run(phases=[])) is None


def test_history_list_fits_80_columns_and_shows_the_new_columns(cli, url, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = cli("history", "list", "--history", url)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    assert lines[0].split() == ["run", "id", "workload", "verdict", "headline"]
    qualify = next(i for i, ln in enumerate(lines) if ln.startswith("20250103T000000Z-qua003"))
    assert lines[qualify].split()[1:] == ["qualify", "pass", "(ind.)", "AU", "96.1", "%"]
    assert lines[qualify + 1].split() == [
        "2025-01-01",
        "00:00:00Z",
        "complete",
        "posix",
        "/mnt/lustre/scratch/a-long-project-dir",
    ]
    seq = next(ln for ln in lines if ln.startswith("20250101T000000Z-seq001"))
    assert seq.split()[1:] == ["sequential-write", "seq-write", "176.1", "MiB/s"]  # no verdict
    assert any(ln.split()[-3:] == ["rand-read", "20.0k", "ops/s"] for ln in lines)


def test_history_list_one_line_per_run_when_it_fits(cli, url, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    r = cli("history", "list", "--history", url)
    lines = r.out.splitlines()
    head = ["run", "id", "started", "(UTC)", "workload", "target", "status", "verdict",
            "headline", "engine", "phases"]  # fmt: skip
    assert lines[0].split() == head and len(lines) == 5
    assert lines[4].split()[3:] == [
        "qualify", "/mnt/lustre/scratch/a-long-project-dir", "complete", "fail", "AU", "42.0",
        "%", "posix", "1",
    ]  # fmt: skip


def test_a_target_too_long_for_the_line_gets_a_line_of_its_own(cli, tmp_path, monkeypatch):
    url = str(tmp_path / "h")
    deep = "/mnt/" + "/".join(f"level-{i:02d}" for i in range(8))
    history.append(
        make_run(
            phases=[make_phase("r", bandwidth=[MiB])],
            target={**make_run().target, "path_or_url": deep},
        ),
        url,
    )
    monkeypatch.setenv("COLUMNS", "80")
    lines = cli("history", "list", "--history", url).out.splitlines()
    assert all(len(line) <= 80 for line in lines) and lines[-1] == f"  {deep}"
    assert lines[-2].split() == ["2025-01-01", "00:00:00Z", "complete", "posix"]


def test_history_list_json_has_the_same_fields(cli, url):
    r = cli("history", "list", "--history", url, "--json")
    entries = {e["run_id"][-6:]: e for e in json.loads(r.out)}
    assert entries["qua003"]["verdict"] == "pass (indicative)"
    assert entries["qua003"]["target"] == "/mnt/lustre/scratch/a-long-project-dir"
    assert entries["qua003"]["headline"] == {
        "phase": "loader", "metric": "au", "value": 0.961, "unit": "fraction",
        "text": "AU 96.1 %",
    }  # fmt: skip
    assert (
        entries["seq001"]["verdict"] is None and entries["seq001"]["workload"] == "sequential-write"
    )
    assert entries["seq001"]["headline"]["text"] == "seq-write 176.1 MiB/s"
