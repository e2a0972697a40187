"""``iobench loader --during-checkpoint MODEL`` (issue 27): the loader measured while a
checkpoint is written in the background, windowed before, during and after each save."""

from __future__ import annotations

import json
import os
from array import array

import numpy as np
import pytest
from test_loader import no_run_dirs, tiny_profile

from iobench.loader.ckpt_writer import SUBDIR, make_pools, plan_checkpoint, write_checkpoint
from iobench.loader.during import during_block, model_block, window_stats, windows
from iobench.result.file import RunResult
from iobench.target import RUN_DIR_PREFIX

# llama3-8b at this scale: 16 files, ~2.1 MiB, 8 writers
TINY_CKPT = ("--during-checkpoint", "llama3-8b", "--checkpoint-scale", "0.00002")


def test_the_loader_is_windowed_around_a_background_checkpoint(cli, planted, tmp_path):
    prof = tiny_profile(tmp_path, files=96, compute_s=0.02)  # 24 steps of 20 ms
    # paced (2 MiB at 16 MiB/s: ~6 steps), so every save spans steps: unpaced on a quiet host it
    # can end between two steps' midpoints and leave its during-window empty
    r = cli("loader", planted.path, "--profile", prof, *TINY_CKPT, "--checkpoint-at", "3steps",
            "--checkpoint-every", "10steps", "--checkpoint-rate", "16MiB/s",
            "--output", tmp_path / "out", "--json", "-q")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads(r.out)
    d = res["loader"]["during_checkpoint"]
    assert d["model_au"] is None or 0 <= d["model_au"]["au_share_rule"] <= 1
    # the read probe: the loader's reads alone, then beside the save written twice more
    p = d["read_probe"]
    assert d["probe_saves"] == 2 and len(p["saves"]) == 2 and p["streams"] == 2
    assert p["idle"]["reads"] > 0 and p["idle"]["read_bps"] > 0 and p["save_bps"] > 0
    assert p["mode"] == res["loader"]["cache"] or p["mode"] in ("direct", "dropped", "buffered")
    if d["model_au"] is not None and p["during"]:
        rule = d["model_au"]["probe_rule"]
        assert rule["basis_kind"] == "probe" and 0 <= rule["au_during"] <= 1
        lo, hi = rule["au_during_range"]
        assert lo <= rule["au_during"] <= hi
    plan = plan_checkpoint("llama3-8b", 0.00002, (3, "steps"), (10, "steps"), None)
    assert (d["bytes"], d["files"], d["writers"]) == (plan.total_bytes, 16, 8)
    assert (d["at"], d["at_unit"], d["every"], d["every_unit"]) == (3, "steps", 10, "steps")
    # the same save alone, before the loop: every byte written
    assert d["alone"]["bytes"] == plan.total_bytes and d["alone"]["write_bps"] > 0
    saves = d["checkpoints"]
    assert saves and saves[0]["checkpoint"] == 1 and saves[0]["bytes"] > 0
    assert all(s["complete"] for s in saves[:-1])  # only the last can be cut off by the end
    kinds = [w["kind"] for w in d["windows"]]
    assert kinds[0] == "before" and "during" in kinds
    during = [w for w in d["windows"] if w["kind"] == "during"]
    assert sum(w["steps"] for w in during) > 0
    assert d["summary"]["during"]["steps"] > 0 and d["summary"]["without"]["steps"] > 0
    # every timed step falls in exactly one window
    assert sum(w["steps"] for w in d["windows"]) == res["loader"]["load_wait_s"]["steps"]
    for w in d["windows"]:
        assert w["end_s"] >= w["start_s"] >= 0
        if w["steps"]:
            assert 0 <= w["au"] <= 1 and w["read_bps"] > 0
    # the step timeline stays out of result.json; the text report has the table
    assert "timeline" not in json.dumps(res["loader"]["ranks"])
    from iobench.report.text import render_terminal

    text = render_terminal(RunResult.from_dict(res), width=160)
    assert "during a checkpoint write" in text and "pooled: a save running" in text
    assert "Read probe (2 reader(s), the loader's reads of its files)" in " ".join(text.split())
    assert no_run_dirs(planted.path) and planted.unchanged()


def test_the_writer_writes_real_data_inside_the_run_dir_and_removes_it(tmp_path):
    plan = plan_checkpoint("llama3-8b", 0.00002, (0, "s"), None, None)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    seen: dict[str, bytes] = {}

    def stopped() -> bool:  # called before every block: look at what is on disk by then
        for name in os.listdir(tmp_path / "1"):
            data = (tmp_path / "1" / name).read_bytes()
            if data:
                seen[name] = data
        return False

    try:
        rec = write_checkpoint(plan, fd, 1, stopped, make_pools(plan, 5))
    finally:
        os.close(fd)
    assert rec["complete"] and rec["error"] is None
    assert (rec["bytes"], rec["files"]) == (plan.total_bytes, len(plan.files))
    assert rec["end"] > rec["start"]
    assert seen and all(name.startswith("r") for name in seen)
    for data in seen.values():  # incompressible, page-stamped: never zeros, no page repeated
        pages = [data[i : i + 4096] for i in range(0, len(data) - 4095, 4096)]
        assert any(data) and len(set(pages)) == len(pages)
    assert os.listdir(tmp_path) == []  # the checkpoint's folder and files are gone


def test_a_stopped_save_is_marked_incomplete_and_removed(tmp_path):
    plan = plan_checkpoint("llama3-8b", 0.00002, (0, "s"), None, None)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        rec = write_checkpoint(plan, fd, 2, lambda: True, make_pools(plan, 1))
    finally:
        os.close(fd)
    assert not rec["complete"] and rec["bytes"] < plan.total_bytes
    assert os.listdir(tmp_path) == []


def _timeline(steps: list[tuple[float, float, float, float, float]], span: tuple[float, float]):
    return {"steps": array("d", [x for s in steps for x in s]), "spans": [span]}


def test_windows_cut_the_span_at_each_save():
    recs = [{"start": 2.0, "end": 3.0}, {"start": 5.0, "end": 12.0}]
    got = [(w["kind"], w["checkpoint"], w["start"], w["end"]) for w in windows(recs, 1.0, 10.0)]
    assert got == [
        ("before", 1, 1.0, 2.0), ("during", 1, 2.0, 3.0), ("after", 1, 3.0, 5.0),
        ("during", 2, 5.0, 10.0),
    ]  # fmt: skip
    assert [w["kind"] for w in windows([], 0.0, 4.0)] == ["before"]


def test_window_stats_are_the_au_and_waits_of_the_steps_inside():
    # four steps of 1 s: wait 0.5 s then compute 0.5 s; bytes 100 each
    steps = [(k, k + 0.5, k + 1.0, k + 1.0, 100.0) for k in range(4)]
    tl = _timeline(steps, (0.0, 4.0))
    whole = window_stats([tl], [(0.0, 4.0)])
    assert whole["au"] == pytest.approx(0.5) and whole["steps"] == 4
    assert whole["read_bps"] == pytest.approx(100.0)
    assert whole["load_wait_s"]["p50"] == pytest.approx(0.5, rel=0.05)
    first_two = window_stats([tl], [(0.0, 2.0)])
    assert first_two["steps"] == 2 and first_two["au"] == pytest.approx(0.5)
    # a window inside one step's compute: AU 1; inside its wait: AU 0
    assert window_stats([tl], [(1.6, 1.9)])["au"] == pytest.approx(1.0)
    assert window_stats([tl], [(1.1, 1.4)])["au"] == pytest.approx(0.0)


def test_the_block_compares_the_save_with_the_same_save_alone():
    plan = plan_checkpoint("llama3-8b", 0.00002, (1, "s"), None, None)
    n = plan.total_bytes
    alone = {"start": 0.0, "end": 1.0, "bytes": n, "files": 16, "complete": True}
    save = {"index": 1, "start": 11.0, "end": 13.0, "bytes": n, "files": 16, "complete": True,
            "error": None}  # fmt: skip
    steps = [(10 + k, 10.5 + k, 11 + k, 11 + k, 10.0) for k in range(5)]
    d = during_block(plan, alone, [save], [_timeline(steps, (10.0, 15.0))])
    assert [w["kind"] for w in d["windows"]] == ["before", "during", "after"]
    assert d["checkpoints"][0]["vs_alone"] == pytest.approx(0.5)
    assert d["summary"]["write_vs_alone"] == pytest.approx(0.5)
    assert d["checkpoints"][0]["start_s"] == pytest.approx(1.0)
    assert np.isclose(d["summary"]["during"]["au"], 0.5)
    # the contention model over the span: from the windows, and from the separate figures
    m = model_block(d, demand_bps=20.0, span_au=0.5)
    assert m["au_from_windows"] == pytest.approx(0.5) and m["au_share_rule"] == pytest.approx(0.5)
    assert m["from_windows"]["basis_kind"] == "measured"
    assert m["share_rule"]["basis_kind"] == "independent"
    assert m["write_s_measured"] == pytest.approx(2.0)
    assert model_block(d, demand_bps=None, span_au=0.5) is None  # compute 0: no demand


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--during-checkpoint", "no-such-model"], "no-such-model"),
        ([*TINY_CKPT[:2], "--checkpoint-scale", "1e-15"], "leaves nothing"),
        ([*TINY_CKPT[:2], "--checkpoint-scale", "2"], "--checkpoint-scale must be in (0, 1]"),
        (["--during-checkpoint", "llama3-405b", "--checkpoint-scale", "1"], "free"),
        (["--checkpoint-at", "5s"], "needs --during-checkpoint"),
        ([*TINY_CKPT, "--checkpoint-rate", "20k"], "not a byte rate"),
        ([*TINY_CKPT, "--checkpoint-at", "soon"], "--checkpoint-at"),
        ([*TINY_CKPT, "--checkpoint-at", "²steps"], "--checkpoint-at"),  # "²".isdigit()
        (["--read-probe", "2"], "needs --during-checkpoint"),
        ([*TINY_CKPT, "--read-probe", "many"], "--read-probe"),
        ([*TINY_CKPT, "--read-probe", "-1"], "--read-probe"),
        ([*TINY_CKPT, "--read-probe", "11"], "at most 10"),
        ([*TINY_CKPT, "--read-probe", "²"], "--read-probe"),
    ],
)
def test_bad_during_checkpoint_input_is_one_line_exit_2_nothing_written(
    cli, planted, tmp_path, args, message
):
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), "--output",
            tmp_path / "o", *args)  # fmt: skip
    assert r.code == 2, r.err
    assert r.err.startswith("iobench: error: ") and message in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()
    assert not [p for p in os.listdir(planted.path) if p.startswith(RUN_DIR_PREFIX)
                and p != ".iobench-20200101T000000Z-abcdef"]  # fmt: skip
    assert planted.unchanged()


def test_the_plan_says_what_the_checkpoint_writes(cli, planted, tmp_path):
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), *TINY_CKPT,
            "--checkpoint-every", "30s", "--dry-run")  # fmt: skip
    assert r.code == 0, r.err
    assert "ckpt-alone" in r.out and "ckpt-during" in r.out and "llama3-8b" in r.out
    assert "ckpt-probed" in r.out and "2 time(s) more beside the read probe" in " ".join(
        r.out.split()
    )
    off = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), *TINY_CKPT,
              "--read-probe", "0", "--dry-run")  # fmt: skip
    assert off.code == 0, off.err
    assert "ckpt-probed" not in off.out
    assert SUBDIR not in os.listdir(planted.path) and planted.unchanged()


def test_read_probe_0_measures_no_probe_and_no_probe_rule(cli, planted, tmp_path):
    prof = tiny_profile(tmp_path, files=48, compute_s=0.02)
    r = cli("loader", planted.path, "--profile", prof, *TINY_CKPT, "--checkpoint-at", "2steps",
            "--checkpoint-rate", "16MiB/s", "--read-probe", "0", "--output", tmp_path / "out",
            "--json", "-q", "--no-history")  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(r.out)["loader"]["during_checkpoint"]
    assert d["probe_saves"] == 0 and "read_probe" not in d
    assert d["model_au"] is None or "probe_rule" not in d["model_au"]
    assert no_run_dirs(planted.path) and planted.unchanged()


def test_the_read_probe_reads_the_loaders_files_and_counts_by_littles_law(tmp_path):
    from iobench.loader.dataset import DatasetIndex
    from iobench.loader.readprobe import ProbeSpec, ReadProbe, probe_block, read_stats

    # by hand: 2 streams; in [0, 1) reads of 1 MiB taking 0.1 s each -> 2 x 1 MiB / 0.1 s
    reads = [(0.1 * k, 0.1 * k + 0.1, 1 << 20) for k in range(10)]
    st = read_stats(reads, [(0.0, 1.0)], 2)
    assert st["reads"] == 10 and st["read_bps"] == pytest.approx(20 * (1 << 20))
    assert st["read_s"]["p50"] == pytest.approx(0.1, rel=0.05) and len(st["quantiles_s"]) == 21
    assert read_stats(reads, [(5.0, 6.0)], 2) is None  # no read started there
    two = read_stats(reads, [(0.0, 0.25), (0.5, 0.75)], 2)  # a union of windows
    assert two["reads"] == 6 and two["seconds"] == pytest.approx(0.5)
    saves = [{"start": 0.0, "end": 0.5, "bytes": 10 << 20, "complete": True},
             {"start": 0.5, "end": 1.0, "bytes": 5 << 20, "complete": True}]  # fmt: skip
    b = probe_block(ProbeSpec(None, "buffered", 2), reads, (0.0, 1.0), saves)  # type: ignore[arg-type]
    assert [s["save_bps"] for s in b["saves"]] == pytest.approx([20 << 20, 10 << 20])
    assert b["save_bps"] == pytest.approx(15 << 20) and b["during_range_bps"][0] > 0
    # the real thing: a process of 2 threads reading a small dataset's files whole
    data = tmp_path / "ds"
    data.mkdir()
    for i in range(4):
        (data / f"f{i}.raw").write_bytes(os.urandom(64 << 10))
    index = DatasetIndex(str(data), "raw", tuple(f"f{i}.raw" for i in range(4)),
                         ((64 << 10,),) * 4, (64 << 10,) * 4, 1)  # fmt: skip
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    probe = ReadProbe(ProbeSpec(index, "buffered", 2))
    try:
        probe.start()
        import time

        time.sleep(0.3)
        got = probe.finish()
    finally:
        probe.close()
    assert got and all(n == 64 << 10 and t1 >= t0 for t0, t1, n in got)
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before  # read, never written


def test_a_failing_checkpoint_write_fails_the_run_keeps_the_result_and_cleans_up(
    cli, planted, tmp_path, monkeypatch
):
    from iobench.loader import ckpt_writer

    def full(sub_fd, files, rate, stopped, pool, done, errors):
        errors.append("checkpoint writer: No space left on device writing r0-x")

    monkeypatch.setattr(ckpt_writer, "_write_files", full)
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), *TINY_CKPT,
            "--output", tmp_path / "o", "-q")  # fmt: skip
    assert r.code == 4, r.err
    assert "No space left on device" in r.err
    res = json.loads((tmp_path / "o" / "result.json").read_text())
    assert res["status"] != "complete" and "No space left" in res["error"]
    assert no_run_dirs(planted.path) and planted.unchanged()


# -- --beside: another job on the same storage ------------------------------------------------


@pytest.mark.parametrize("spec", ["writer:max", "reader:40MiB/s"])
def test_another_job_runs_beside_the_loop_and_its_rate_is_windowed(cli, planted, tmp_path, spec):
    from iobench.loader.beside import SUBDIR as JOB_DIR

    prof = tiny_profile(tmp_path, files=96, compute_s=0.02)
    r = cli("loader", planted.path, "--profile", prof, *TINY_CKPT, "--checkpoint-at", "3steps",
            "--beside", spec, "--output", tmp_path / "out", "--json", "-q")  # fmt: skip
    assert r.code == 0, r.err
    d = json.loads(r.out)["loader"]["during_checkpoint"]
    b = d["beside"]
    assert b["kind"] == spec.split(":")[0] and b["alone_bps"] > 0 and b["bytes"] > 0
    assert b["achieved_bps"] > 0 and b["vs_alone"] == pytest.approx(
        b["achieved_bps"] / b["alone_bps"]
    )
    if spec.startswith("reader"):  # paced: never faster than its rate (a block of slack)
        assert b["rate_bps"] == 40 << 20 and b["alone_bps"] <= (40 << 20) * 1.2
    assert any(w["beside_bps"] for w in d["windows"])
    assert b["without_bps"] is not None
    from iobench.report.text import render_terminal

    res = RunResult.from_dict(json.loads(r.out))
    assert "Beside it another job" in " ".join(render_terminal(res, width=160).split())
    assert JOB_DIR not in os.listdir(planted.path)
    assert no_run_dirs(planted.path) and planted.unchanged()


def test_the_other_jobs_rate_in_a_window_is_interpolated_between_samples():
    from iobench.loader.beside import rate_between, whole_rate

    samples = [(0.0, 0), (1.0, 100), (2.0, 100), (3.0, 400)]
    assert rate_between(samples, 0.0, 1.0) == pytest.approx(100.0)
    assert rate_between(samples, 1.0, 2.0) == pytest.approx(0.0)
    assert rate_between(samples, 0.5, 2.5) == pytest.approx((250 - 50) / 2.0)
    assert whole_rate(samples) == pytest.approx(400 / 3)
    assert rate_between(samples, 2.0, 2.0) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--beside", "writer:max"], "--beside needs --during-checkpoint"),
        ([*TINY_CKPT, "--beside", "copier:max"], "expected writer:RATE or reader:RATE"),
        ([*TINY_CKPT, "--beside", "writer:fast"], "not a byte rate"),
        ([*TINY_CKPT, "--beside", "reader:0MiB/s"], "not a byte rate above 0"),
        ([*TINY_CKPT, "--beside", "reader:20k"], "not a byte rate"),
    ],
)
def test_bad_beside_input_is_one_line_exit_2_nothing_written(cli, planted, tmp_path, args, message):
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), "--output",
            tmp_path / "o", *args)  # fmt: skip
    assert r.code == 2, r.err
    assert r.err.startswith("iobench: error: ") and message in r.err
    assert len(r.err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists() and planted.unchanged()


# -- under torchrun: every rank its shard, the saves merged -----------------------------------


def test_the_ranks_records_of_a_save_merge_into_one():
    from iobench.loader.during import merge_saves

    r0 = [{"index": 1, "start": 10.0, "end": 12.0, "bytes": 100, "files": 2, "complete": True,
           "error": None}]  # fmt: skip
    r1 = [{"index": 1, "start": 10.1, "end": 13.1, "bytes": 60, "files": 1, "complete": True,
           "error": None}]  # fmt: skip
    (m,) = merge_saves([r0, r1])
    assert (m["start"], m["end"], m["bytes"], m["files"]) == (10.0, 13.1, 160, 3)
    assert m["slowest_s"] == pytest.approx(3.0) and m["skew_s"] == pytest.approx(0.1)
    assert m["complete"] and m["ranks"] == 2
    # a rank whose part never started: the save is incomplete
    (m,) = merge_saves([r0, []])
    assert not m["complete"] and m["ranks"] == 1


def test_every_rank_writes_the_shard_of_its_model_ranks():
    from iobench.loader.ckpt_writer import shard_plan

    plan = plan_checkpoint("llama3-8b", 0.00002, (0, "s"), None, None)  # 8 model ranks
    parts = [shard_plan(plan, k, 3) for k in range(3)]
    assert sorted(f for p in parts for f in p.files) == sorted(plan.files)
    assert {f[0] for f in parts[1].files} == {1, 4, 7}
    assert sum(p.total_bytes for p in parts) == plan.total_bytes


@pytest.mark.slow
def test_torchrun_two_ranks_each_write_their_shard_beside_their_loop(tmp_path):
    from test_distributed import _env, _torchrun, _user_target

    target, before = _user_target(tmp_path)
    prof = tiny_profile(tmp_path, files=96, compute_s=0.02, workers=1)
    out = tmp_path / "out"
    # paced, so the save outlasts a few 20 ms steps: an unpaced 2 MiB save can end between two
    # steps' midpoints on fast storage and leave its during-window empty (a CI run did)
    args = ["loader", str(target), "--profile", str(prof), *TINY_CKPT, "--checkpoint-at",
            "3steps", "--checkpoint-rate", "16MiB/s", "--beside", "writer:max",
            "--output", str(out), "--no-history", "-q"]  # fmt: skip
    proc = _torchrun(args, _env(), 2)
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, log[-3000:]
    res = json.loads((out / "result.json").read_text())
    assert res["status"] == "complete", res.get("error")
    d = res["loader"]["during_checkpoint"]
    plan = plan_checkpoint("llama3-8b", 0.00002, (3, "steps"), None, None)
    # the two ranks' shards together are the whole save, alone and during the loop
    assert d["alone"]["bytes"] == plan.total_bytes
    (save,) = d["checkpoints"]
    assert save["ranks"] == 2 and save["files"] == len(plan.files)
    assert save["bytes"] == plan.total_bytes or not save["complete"]
    # its rate: the bytes over the slowest rank's time; the starts together (the step barrier)
    assert save["write_bps"] == pytest.approx(save["bytes"] / save["slowest_s"])
    assert save["slowest_s"] <= save["seconds"] + 1e-9 and 0 <= save["skew_s"] < 1.0
    assert d["torchrun"]["ranks"] == 2
    from iobench.report.text import render_terminal

    text = " ".join(render_terminal(RunResult.from_dict(res), width=160).split())
    assert "Under torchrun: 2 ranks, each writing its shard" in text
    assert d["beside"]["kind"] == "writer" and d["beside"]["achieved_bps"] > 0  # rank 0's job
    # every rank's timed steps fall in the windows
    assert sum(w["steps"] for w in d["windows"]) == res["loader"]["load_wait_s"]["steps"]
    assert d["summary"]["during"]["steps"] > 0
    assert set(os.listdir(target)) == before


def test_the_plan_says_what_the_other_job_writes(cli, planted, tmp_path):
    r = cli("loader", planted.path, "--profile", tiny_profile(tmp_path), *TINY_CKPT,
            "--beside", "reader:20MiB/s", "--dry-run")  # fmt: skip
    assert r.code == 0, r.err
    flat = " ".join(r.out.split())
    assert "beside-job" in flat and "another job's reader of its own files, 20.0 MiB/s" in flat
    assert "64.0 MiB" in flat and planted.unchanged()
