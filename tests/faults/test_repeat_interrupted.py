"""A run of ``--repeat N`` cut short keeps every repeat it completed, in result.json and in the
history, and the repeat in flight as partial, marked ``in_flight``; the run is ``interrupted``
(130) or ``partial``/``failed`` (4) as any other run."""

from __future__ import annotations

import errno
import os
import signal

import pytest
from conftest import SMALL, assert_failed_run

from iobench import history
from iobench.result.file import PhaseResult
from iobench.run.runner import merge_repeats


def _p(name: str, bw: float, status: str = "ok") -> PhaseResult:
    return PhaseResult(name, "write", bytes=100, ops=1, bandwidth_bps=bw, status=status)


def test_merge_repeats_keeps_completed_and_marks_the_one_in_flight():
    done = [[_p("w", 10), _p("r", 100)], [_p("w", 30), _p("r", 300)], [_p("w", 20), _p("r", 200)]]
    flying = [_p("w", 99), _p("r", 5, "partial")]
    merged = merge_repeats(done, in_flight=flying)
    assert [p.name for p in merged] == ["w", "r"]
    w, r = merged
    assert w.bandwidth_bps == 20 and r.bandwidth_bps == 200  # the completed repeats' median
    assert r.status == "ok"
    assert [e["bandwidth_bps"] for e in r.repeats] == [100, 300, 200, 5]
    assert [e.get("in_flight", False) for e in r.repeats] == [False, False, False, True]
    assert r.repeats[3]["status"] == "partial"
    assert [e["repeat"] for e in w.repeats] == [0, 1, 2, 3]


def test_merge_repeats_a_phase_only_the_cut_repeat_reached():
    merged = merge_repeats([[_p("w", 10)]], in_flight=[_p("w", 12), _p("r", 7, "partial")])
    r = merged[1]
    assert r.name == "r" and r.status == "partial" and r.bandwidth_bps == 7
    assert r.repeats == [{**r.repeats[0], "repeat": 0, "in_flight": True, "status": "partial"}]


def test_merge_repeats_cut_in_the_first_repeat():
    merged = merge_repeats([], in_flight=[_p("w", 12), _p("r", 7, "partial")])
    assert [(p.name, p.status, len(p.repeats)) for p in merged] == [
        ("w", "ok", 1),
        ("r", "partial", 1),
    ]


def _check_kept(res: dict) -> None:
    write, read = res["phases"]
    assert (write["name"], read["name"]) == ("seq-write", "seq-read")
    # the first repeat completed; the second was in flight in seq-read
    assert [e.get("in_flight", False) for e in write["repeats"]] == [False, True]
    assert [e.get("in_flight", False) for e in read["repeats"]] == [False, True]
    assert write["repeats"][1]["status"] == "ok"  # it completed, inside the repeat cut short
    assert read["repeats"][1]["status"] in ("partial", "failed")
    assert read["status"] == "ok" and read["bandwidth_bps"] == read["repeats"][0]["bandwidth_bps"]
    assert read["repeats"][0]["bytes"] == 2 * (4 << 20)
    assert any("stopped during repeat 2 of 3" in w for w in res["warnings"]), res["warnings"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupting_repeat_keeps_the_completed_repeats(cli, planted, tmp_path, trip, sig):
    # 8 reads of 1 MiB per seq-read phase: the 11th is the third of the second repeat
    t = trip("seq-read", [sig], on=(os, "preadv"), after=11)
    out = tmp_path / "out"
    hist = tmp_path / "hist"
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"], "--repeat", "3",
            "--output", out, "-q", "--history", hist)  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, out, planted, 130, "interrupted", sig.name)
    _check_kept(res)
    stored = history.get_run(res["run_id"], str(hist))
    assert stored.status == "interrupted"
    assert [len(p.repeats) for p in stored.phases] == [2, 2]
    rows = history.metric_rows(stored)
    assert {r["repeat"] for r in rows if r["phase"] == "seq-read"} >= {0, 1}


def test_a_failure_in_a_later_repeat_keeps_the_earlier_ones(cli, planted, tmp_path, trip):
    def eio():
        raise OSError(errno.EIO, "Input/output error")

    t = trip("seq-read", eio, on=(os, "preadv"), after=11)
    out = tmp_path / "out"
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"], "--repeat", "3",
            "--output", out, "-q", "--no-history")  # fmt: skip
    assert t.fired
    res = assert_failed_run(r, out, planted, 4, "Input/output error")
    _check_kept(res)
