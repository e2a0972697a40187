"""The typed result blocks (iobench.result.blocks): read back exactly what was written, tolerate older
and newer files, and are frozen."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import test_report
import test_report_estimate
from factories import HOST, TARGET, make_phase, make_run, noisy
from hypothesis import given, settings
from hypothesis import strategies as st

from iobench.model.starvation_inputs import Estimate, EstimateInterval
from iobench.result import blocks as b
from iobench.result.file import RunResult, dumps

BLOCKS = {
    "host": b.HostBlock,
    "target": b.TargetBlock,
    "workload": b.WorkloadBlock,
    "engine": b.EngineBlock,
    "loader": b.LoaderBlock,
    "estimate": b.EstimateBlock,
    "verdict": b.VerdictBlock,
    "checkpoint": b.CheckpointBlock,
}

LOADER = {  # the keys loader.run._summarise writes, in its order, plus the later additions
    "profile": "unet3d-h100",
    "gpus": 2,
    "workers": 4,
    "batch_size": 7,
    "prefetch": 2,
    "steps": 40,
    "epochs": 2,
    "au": 0.91,
    "au_per_epoch": [0.9, 0.92],
    "samples_per_s": 50.5,
    "bytes_per_s": 7.0e9,
    "load_wait_s": {"mean": 0.01, "min": 0.0, "p50": 0.009, "p99": 0.05, "max": 0.06, "steps": 78},
    "compute_s": 0.323,
    "compute_measured_s": 0.324,
    "step_s": 0.35,
    "bound": "compute",
    "bound_basis": "AU 0.910 ...",
    "predicted_au": 0.9,
    "prediction_basis": "model",
    "cache": "dropped",
    "calibration": {"step_s": 0.01, "overhead_s": 0.001},
    "worker_read_s_per_sample": 0.002,
    "worker_decode_s_per_sample": 0.003,
    "main_cpu_s_per_step": 0.004,
    "dataset": {"format": "npz", "files": 10, "samples": 10, "samples_per_file": 1, "bytes": 99},
    "points": [{"gpus": 2, "au": 0.91}],
    "ranks": [
        {
            "rank": 0,
            "host": "n1",
            "epochs": [
                {"epoch": 0, "steps": 20, "au": 0.9, "wall_s": 1.0, "load_wait_s": {"steps": 0}}
            ],
        },
        {"rank": 1, "epochs": []},
    ],  # fmt: skip
    "client_cpu": {
        "cpu_s": 1.0,
        "self_s": 0.5,
        "children_s": 0.5,
        "wall_s": 2.0,
        "cpus": 2,
        "share": 0.25,
    },  # fmt: skip
    "hosts": 1,
}


def _estimate_dict() -> dict:
    interval = EstimateInterval(
        level=0.9, resamples=100, seed=0, max_gpus_low=3, max_gpus_high=5,
        au_band=((1, 0.95, 0.99), (4, 0.8, 0.9)), blocks=((1, 30, 4),), fixed_levels=(8,),
        spread=0.05, level_bounds=((1, 1e9, 2e9),),
    )  # fmt: skip
    est = Estimate(1e8, [(1, 0.97), (4, 0.85)], 4, 0.9, "simulated", "unet3d-h100", interval,
                   ("unstable: x",))  # fmt: skip
    return est.to_dict()


def _runs() -> list[RunResult]:
    rich = test_report.rich_run()
    rich.checkpoint = {
        "model": {"name": "llama3-8b", "ranks": 8, "total_bytes": 1 << 30, "source": "builtin"},
        "scale": 1e-4,
        "measured": {"save": {"bytes": 5, "ranks": 8}, "copy_bps": 1e9},
        "estimate": None,
        "estimate_missing": "no complete save and load was measured",
    }
    full = make_run(loader=copy.deepcopy(LOADER), estimate=_estimate_dict())
    full.verdict = {"result": "pass", "reasons": ["PASS: x"], "items": [
        {"key": "read", "required": 1.0, "measured": 2.0, "unit": "B/s", "result": "pass",
         "indicative": "seq-read too short"}], "indicative": True, "smoke_test": True}  # fmt: skip
    return [
        rich,
        test_report.minimal_run(),
        test_report_estimate._run(),
        make_run(phases=[make_phase("seq-read", bandwidth=noisy(1e9))]),
        full,
    ]


@pytest.mark.parametrize("run", _runs(), ids=lambda r: r.run_id)
@pytest.mark.parametrize("key", list(BLOCKS))
def test_every_block_reads_back_exactly_what_was_written(run, key):
    d = getattr(run, key)
    if d is None:
        assert getattr(run, f"{key}_block") is None
        return
    block = BLOCKS[key].from_dict(d)
    again = block.to_dict()
    assert again == d
    assert json.dumps(again) == json.dumps(d)  # the same keys in the same order
    assert BLOCKS[key].from_dict(again) == block


@pytest.mark.parametrize("run", _runs(), ids=lambda r: r.run_id)
def test_result_json_is_unchanged_by_reading_its_blocks(run):
    text = dumps(run)
    d = json.loads(text)
    for key, cls in BLOCKS.items():
        if isinstance(d.get(key), dict):
            d[key] = cls.from_dict(d[key]).to_dict()
    assert json.dumps(d, indent=2) + "\n" == text


def test_accessors_give_typed_blocks_that_renderings_read():
    run = _runs()[-1]
    ld = run.loader_block
    assert isinstance(ld, b.LoaderBlock) and ld.au == 0.91 and ld.au_per_epoch == (0.9, 0.92)
    assert ld.load_wait_s.p99 == 0.05 and ld.dataset.format == "npz" and ld.client_cpu.share == 0.25
    assert ld.ranks[0].host == "n1" and ld.ranks[0].epochs[0].au == 0.9 and ld.ranks[1].host is None
    assert ld.ranks[0].epochs[0].extra == {"wall_s": 1.0}
    est = run.estimate_block
    assert est.max_gpus == 4 and est.max_gpus_low == 3 and est.level == 0.9
    assert [(p.gpus, p.au, p.low) for p in est.points] == [(1, 0.97, 0.95), (4, 0.85, 0.8)]
    assert est.warnings == ("unstable: x",)
    v = run.verdict_block
    assert v.result == "pass" and v.items[0].indicative == "seq-read too short" and v.smoke_test
    assert run.host_block.cpus == HOST["cpus"] and run.target_block.fs_type == TARGET["fs_type"]
    assert run.workload_block.name == "seq-read" and run.engine_block.name == "posix"
    assert make_run().loader_block is None and make_run().checkpoint_block is None


def test_an_older_file_reads_with_defaults_and_writes_back_only_its_own_keys():
    old = {"au": 0.5, "gpus": 1}  # a loader block from before most keys existed
    ld = b.LoaderBlock.from_dict(old)
    assert ld.profile is None and ld.ranks == () and ld.load_wait_s is None and ld.dataset is None
    assert ld.to_dict() == old
    est = b.EstimateBlock.from_dict({"threshold": 0.85, "max_gpus": 6})
    assert est.interval is None and est.level is None and est.max_gpus_low is None
    assert est.points == () and est.warnings == ()
    for cls in BLOCKS.values():  # nothing, or not an object: an empty block
        assert cls.from_dict(None).to_dict() == cls.from_dict([1, 2]).to_dict() == cls().to_dict()


def test_unknown_keys_are_kept_in_place_and_odd_values_as_they_are():
    d = {"profile": "p", "later": {"path": "/data", "files": 3}, "au": "n/a",
         "points": [1, {"gpus": 2, "au": 0.5, "later": True}], "ranks": "x", "extra": 7}  # fmt: skip
    ld = b.LoaderBlock.from_dict(d)
    assert ld.extra == {"later": {"path": "/data", "files": 3}, "extra": 7}
    assert ld.points[0] == 1 and ld.points[1].extra == {"later": True} and ld.ranks == "x"
    assert json.dumps(ld.to_dict()) == json.dumps(d)


def test_blocks_are_frozen_and_built_in_code_write_every_field():
    v = b.VerdictBlock(result="fail", reasons=("FAIL: x",), extra={"note": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.result = "pass"  # type: ignore[misc]
    d = v.to_dict()
    assert list(d) == ["status", "result", "reasons", "items", "indicative", "smoke_test", "note"]
    assert d["reasons"] == ["FAIL: x"] and d["items"] == []
    assert b.VerdictBlock.from_dict(d) == v


def test_to_dict_is_a_copy():
    d = copy.deepcopy(LOADER)
    out = b.LoaderBlock.from_dict(d).to_dict()
    out["calibration"]["step_s"] = 99
    out["ranks"][0]["epochs"].clear()
    assert d == LOADER


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_json = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    [f.name for cls in BLOCKS.values() for f in dataclasses.fields(cls)] + ["zz", "existing"]
)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(BLOCKS.values())), st.dictionaries(_keys | st.text(max_size=6), _json))
def test_any_json_object_round_trips(cls, d):
    got = cls.from_dict(d).to_dict()
    assert json.dumps(got) == json.dumps(d)


@pytest.mark.parametrize("run", _runs(), ids=lambda r: r.run_id)
def test_the_phase_views_read_back_exactly_what_was_written(run):
    for p in run.phases:
        for d, view in ((p.latency_s, p.latency), (p.per_worker, p.worker_spread),
                        (p.extra, p.extra_block)):  # fmt: skip
            assert json.dumps(view.to_dict()) == json.dumps(d)


def test_the_phase_extra_types_the_many_client_figures_and_keeps_the_rest():
    p = make_phase("seq-read", bandwidth=[1e9])
    p.extra = {"world": 4, "rank_spread": {"unit": "iops", "min": 1.0, "slowest": 2},
               "client_cpu": {"share": 0.5}, "fio_json": "x"}  # fmt: skip
    e = p.extra_block
    assert e.world == 4 and e.hosts is None and e.rank_spread.unit == "iops"
    assert e.rank_spread.slowest == 2 and e.client_cpu.share == 0.5 and e.host_spread is None
    assert e.extra == {"fio_json": "x"} and e.has("world") and not e.has("hosts")
    assert p.latency.p99 is None and p.worker_spread.empty


def test_the_checkpoint_block_types_its_model_and_measured_figures():
    ck = _runs()[0].checkpoint_block
    assert ck.model.name == "llama3-8b" and ck.model.total_bytes == 1 << 30 and ck.scale == 1e-4
    assert [k for k, _ in ck.measured.io()] == ["save"] and ck.measured.save.ranks == 8
    assert ck.measured.copy_bps == 1e9 and ck.measured.load is None and ck.estimate is None
    assert ck.has("estimate") and ck.estimate_missing.startswith("no complete")
