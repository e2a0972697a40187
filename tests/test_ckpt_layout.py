"""MLPerf Storage v2.0's checkpoint models, held to DLIO's arithmetic computed here by hand.

The architectures are mlcommons/storage ``configs/dlio/workload/llama3_*.yaml``; the sizing is
``dlio_benchmark/checkpointing/base_checkpointing.py``: fp16 weights (2 B), three fp32 optimizer
groups of ``P // (dp·mp) + 5h`` elements per rank, weights saved by data-parallel rank 0 of each
TP × PP slice under ZeRO-1 (one file per layer with PP > 1), sharded over dp under ZeRO-3.
Each figure below is written out from the architecture, not taken from the code.
"""

from __future__ import annotations

import pytest

from iobench.checkpoint import layout as cl
from iobench.checkpoint import model as cm
from iobench.checkpoint.spec import load_checkpoint_profile
from iobench.core.errors import UsageError

GiB = 1 << 30
V = 128256


def _params(L, h, f, heads, kv):
    dkv = h // heads * kv
    return 2 * V * h + L * (2 * h + h * (h + 2 * dkv) + h * h + 3 * h * f) + h


def _layer(h, f, heads, kv, tp, sf=1):
    """Elements of one transformer layer on one rank (DLIO floors every tensor)."""
    dkv = h // heads * kv
    return (
        2 * (h // sf) + h * (h + 2 * dkv) // tp // sf + h * h // tp // sf
        + 2 * h * f // tp // sf + h * f // tp // sf
    )  # fmt: skip


def test_llama3_8b_zero3_every_rank_an_eighth():
    L, h, f, heads, kv, dp = 32, 4096, 14336, 32, 8, 8
    P = _params(L, h, f, heads, kv)
    assert P == 8_030_261_248
    weights = 2 * (2 * (h * V // dp) + h // dp + L * _layer(h, f, heads, kv, 1, dp))
    optim = 4 * (3 * (P // dp) + 15 * h)
    s = cl.summarize(load_checkpoint_profile("llama3-8b").spec.arch)
    assert (s.ranks, s.writers, s.files, s.max_rank_files) == (8, 8, 16, 2)
    assert s.model_bytes == 8 * weights and s.optimizer_bytes == 8 * optim
    assert s.max_rank_bytes == s.min_rank_bytes == weights + optim
    assert 104.7 < s.total_bytes / GiB < 104.71  # mlpstorage's table: 15 + 90 GB


def test_llama3_70b_tp8_zero3():
    L, h, f, heads, kv, tp, dp = 80, 8192, 28672, 128, 8, 8, 8
    P = _params(L, h, f, heads, kv)
    assert P == 69_882_617_856
    weights = 2 * (2 * (h * V // tp // dp) + h // dp + L * _layer(h, f, heads, kv, tp, dp))
    optim = 4 * (3 * (P // 64) + 15 * h)
    s = cl.summarize(load_checkpoint_profile("llama3-70b").spec.arch)
    assert (s.ranks, s.writers, s.files) == (64, 64, 128)
    assert s.total_bytes == 64 * (weights + optim)
    assert s.max_rank_bytes == s.min_rank_bytes == weights + optim


def test_llama3_405b_zero1_pp32_is_uneven():
    L, h, f, heads, kv, tp, pp, dp = 126, 16384, 53248, 128, 8, 8, 32, 2
    P = _params(L, h, f, heads, kv)
    assert P == 405_853_388_800
    layer, emb = 2 * _layer(h, f, heads, kv, tp), 2 * (h * V // tp)
    optim = 4 * (3 * (P // (dp * tp * pp)) + 15 * h)  # 512 ranks
    # 126 layers over 32 stages: the first 30 hold 4, the last 2 hold 3; stage 0 adds the
    # embedding, the last stage the head and the final norm (h, not split over tp)
    stage0, middle4, last = emb + 4 * layer, 4 * layer, 3 * layer + emb + 2 * h
    weights = tp * (stage0 + 29 * middle4 + 3 * layer + last)
    a = load_checkpoint_profile("llama3-405b").spec.arch
    s = cl.summarize(a)
    assert (
        s.model_bytes
        == weights
        == tp * 2 * (L * _layer(h, f, heads, kv, tp) + 2 * (h * V // tp) + h)
    )
    assert s.optimizer_bytes == 512 * optim
    # only data-parallel rank 0 (ranks 0..255) saves weights, one file per layer (129 × tp 8)
    assert s.files == 512 + 8 * 129 and s.writers == 512
    assert s.max_rank_bytes == stage0 + optim and s.min_rank_bytes == optim
    assert s.max_rank_files == 5 + 1  # layers 0..4 and the optimizer file
    assert 5292.2 < s.total_bytes / GiB < 5292.3  # published: 755 + 4533 GB ("5.29 TB")
    names = [x.name for x in cl.rank_files(a, 0)]
    assert names[0] == "layer_0-model_0_model_states.pt"
    assert names[-1] == "zero_pp_rank_0_mp_rank_0_optim_states.pt"
    assert [x.name for x in cl.rank_files(a, 256 + 9)] == [
        "zero_pp_rank_1_mp_rank_9_optim_states.pt"
    ]
    last_rank = cl.rank_files(a, 255)  # tp 7 of stage 31
    assert [x.name for x in last_rank][-3:-1] == [
        "layer_127-model_255_model_states.pt", "layer_128-model_255_model_states.pt",
    ]  # fmt: skip


def test_llama3_1t_is_14_percent_below_the_18_tb():
    L, h, f, heads, kv, tp = 128, 25872, 98304, 192, 32, 8
    P = _params(L, h, f, heads, kv)
    assert P == 1_183_035_102_480
    layer, emb = 2 * _layer(h, f, heads, kv, tp), 2 * (h * V // tp)
    optim = 4 * (3 * (P // 1024) + 15 * h)
    s = cl.summarize(load_checkpoint_profile("llama3-1t").spec.arch)
    assert s.model_bytes == tp * (L * layer + 2 * emb + 2 * h)
    assert s.optimizer_bytes == 1024 * optim
    assert s.files == 1024 + 8 * 131  # 2 layers per stage, + embedding, head, norm
    # 128 layers over 64 stages, 2 each: the last stage (head + final norm) outweighs stage 0
    # (embedding) by the norm's 2h bytes
    assert s.max_rank_bytes == 2 * layer + emb + 2 * h + optim
    assert s.min_rank_bytes == optim
    published = (2571 + 15426) * GiB
    assert 0.85 < s.total_bytes / published < 0.86  # the "about 14 % smaller"


def test_subset_runs_the_first_ranks_of_the_full_layout():
    a = load_checkpoint_profile("llama3-405b").spec.arch
    s8 = cl.summarize(a, 8)
    # ranks 0..7: tensor-parallel ranks of stage 0, data-parallel rank 0: layers 0..4 each
    assert s8.files == 8 * 6 and s8.writers == 8
    assert s8.total_bytes == 8 * cl.summarize(a).max_rank_bytes
    with pytest.raises(UsageError, match="does not fit"):
        cl.summarize(a, 513)


def test_zero0_only_the_first_slice_saves():
    a = cl.Architecture(4, 64, 128, 8, 2, 1000, tp=2, pp=1, dp=3, zero=0)
    s = cl.summarize(a)
    P = _params(4, 64, 128, 8, 2) - 2 * V * 64 + 2 * 1000 * 64
    assert s.writers == 2 and s.files == 4
    assert s.optimizer_bytes == 2 * 4 * (3 * (P // 2) + 15 * 64)
    assert cl.rank_files(a, 2) == ()


def test_model_spec_uses_the_layout_and_scales_every_file():
    spec = load_checkpoint_profile("llama3-405b").spec
    sh = cm.rank_shard(spec, 0)
    assert sh.files == 6 and sh.total_bytes == cm.layout(spec).max_rank_bytes
    small = sh.scaled(1e-9)
    assert small.files == 6 and all(f.nbytes >= 1 for f in small.parts)
    assert cm.rank_shard(spec, 300).files == 1  # dp 1: its optimizer shard only
    even = spec.resharded(8)
    assert even.arch is None and cm.layout(even).files == 16


def test_bad_architectures_are_usage_errors():
    with pytest.raises(UsageError, match="KV heads"):
        cl.Architecture(4, 64, 128, 8, 16, 1000)
    with pytest.raises(UsageError, match="zero stage"):
        cl.Architecture(4, 64, 128, 8, 2, 1000, zero=5)
    with pytest.raises(UsageError, match="layer 7"):
        cl.layer_elements(cl.Architecture(4, 64, 128, 8, 2, 1000), 7)


def test_many_ranks_start_a_bounded_pool_and_small_buffers():
    # llama3-1t at 1e-6: 1,024 ranks; the small-file phases deal their files to at most
    # MAX_META_WORKERS workers (not 1,024 processes), the plain write's blocks fit the files
    from iobench.run.phases import llm_checkpoint as lc

    assert lc.meta_workers(64, 1024) == (lc.MAX_META_WORKERS, 64 * 1024 // lc.MAX_META_WORKERS)
    assert lc.meta_workers(64, 8) == (8, 64)
    assert lc.meta_workers(5, 33)[0] * lc.meta_workers(5, 33)[1] >= 5 * 33
    spec = load_checkpoint_profile("llama3-1t").spec
    shards = [cm.rank_shard(spec, r).scaled(1e-6) for r in range(spec.ranks)]
    # the largest file at 1e-6: the optimizer shard, 13,865,244,924 B × 1e-6 = 13,865 B
    assert max(f.nbytes for s in shards for f in s.parts) == 13_865
    assert lc.baseline_block(shards, 64 << 20) == 4 * 4096
    params = {"baseline": True, "metadata": True, "files": 64, "tensor_size": 64 << 20}
    # 32 plain writers and 32 small-file workers, each an 8 MiB data pool (datagen.POOL_MIN):
    # 512 MiB, counted by the memory check, not 1,024 writers' 8 GiB
    assert lc.run_buffers(params, shards) == (32 + 32) * (8 << 20)
