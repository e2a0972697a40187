"""Checkpoint profiles: MLPerf's figures load exactly; malformed files name file and key."""

from __future__ import annotations

import pytest

from iobench.checkpoint import model as cm
from iobench.checkpoint.spec import list_checkpoint_profiles, load_checkpoint_profile
from iobench.core.errors import SpecError

GiB = 1 << 30


@pytest.mark.parametrize(
    "name, ranks, published",
    [
        ("llama3-8b", 8, "15 + 90 GB"),
        ("llama3-70b", 64, "130 + 781 GB"),
        ("llama3-405b", 512, "755 + 4533 GB"),
        ("llama3-1t", 1024, "2571 + 15426 GB"),
    ],
)
def test_mlperf_profiles_are_architectures(name, ranks, published):
    # the sizes themselves are held to DLIO's arithmetic in test_ckpt_layout
    p = load_checkpoint_profile(name)
    assert p.spec.arch is not None and p.spec.ranks == ranks
    assert published in p.spec.basis and "DLIO's arithmetic" in p.spec.basis
    assert p.spec.total_bytes == cm.layout(p.spec).total_bytes
    assert "mlcommons/storage" in p.source


def test_architecture_form_errors_name_file_and_key(tmp_path):
    base = (
        "layers = 4\nhidden_size = 64\nffn_hidden_size = 128\nattention_heads = 8\n"
        "kv_heads = 2\nvocab_size = 1000\n"
    )
    with pytest.raises(SpecError, match="vocab_size is missing"):
        load_checkpoint_profile(_write(tmp_path, base.replace("vocab_size = 1000\n", "")))
    with pytest.raises(SpecError, match="params cannot be used with the architecture"):
        load_checkpoint_profile(_write(tmp_path, base + "params = 1e9\n"))
    with pytest.raises(SpecError, match="m.toml: .*pp 8 exceeds the 4 layers"):
        load_checkpoint_profile(_write(tmp_path, base + "pp = 8\n"))
    with pytest.raises(SpecError, match="zero_stage"):
        load_checkpoint_profile(_write(tmp_path, base + "zero_stage = 4\n"))
    ok = load_checkpoint_profile(_write(tmp_path, base + "tp = 2\npp = 2\ndp = 3\n"))
    assert ok.spec.ranks == 12 and ok.spec.sharding == "optimizer"


def test_parameter_form_profile(tmp_path):
    p = load_checkpoint_profile(_write(tmp_path, (
        "params = 405e9\nweight_bytes_per_param = 2\noptimizer_bytes_per_param = 12\n"
        "tp = 8\npp = 16\ndp = 128\nsharding = \"optimizer\"\n"
    )))  # fmt: skip
    s = p.spec
    assert (s.dp, s.tp, s.pp, s.ranks, s.sharding) == (128, 8, 16, 16384, "optimizer")
    assert s.total_bytes == 405e9 * 14
    lay = cm.layout(s)
    # 128 slices: 405e9×2/128 = 6.328e9 B of weights on dp-rank 0 of each; 405e9×12/128/128
    # = 296.6e6 B of optimizer state on every rank
    assert lay.writers == 16384 and lay.files == 16384 + 128
    assert lay.max_rank_bytes == pytest.approx(405e9 * 2 / 128 + 405e9 * 12 / 16384, abs=2)


def test_llama3_405b_16k_fits_metas_per_gpu_state():
    # Meta reports 1 MB to 4 GB of model state per GPU for the 16K-GPU run; ZeRO-3 over DP 128
    s = load_checkpoint_profile("llama3-405b-16k").spec
    lay = cm.layout(s)
    assert s.ranks == 16384 and s.sharding == "full" and lay.files == 2 * 16384
    assert 1e6 <= lay.min_rank_bytes <= lay.max_rank_bytes <= 4e9


def test_all_listed_profiles_load():
    names = [n for n, _ in list_checkpoint_profiles()]
    assert {"llama3-8b", "llama3-70b", "llama3-405b", "llama3-1t"} <= set(names)
    for n in names:
        load_checkpoint_profile(n)


def _write(tmp_path, text):
    f = tmp_path / "m.toml"
    f.write_text(text)
    return str(f)


def test_unknown_key_names_file_and_key(tmp_path):
    path = _write(tmp_path, 'ranks = 8\nmodel_size = "1GiB"\noptimizer_size = "1GiB"\nrank = 3\n')
    with pytest.raises(SpecError) as e:
        load_checkpoint_profile(path)
    assert path in e.value.message and "'rank'" in e.value.message


def test_bad_unit_names_the_key(tmp_path):
    path = _write(tmp_path, 'ranks = 8\nmodel_size = "lots"\noptimizer_size = "1GiB"\n')
    with pytest.raises(SpecError, match="model_size = 'lots' is not valid"):
        load_checkpoint_profile(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ('ranks = 8\nparams = 1e9\nmodel_size = "1GiB"\noptimizer_size = "1GiB"', "together"),
        ('ranks = 8\nmodel_size = "1GiB"', "optimizer_size is missing"),
        ('ranks = 8\nmodel_size = "1G"\noptimizer_size = "1G"\nsharding = "none"', "parameters"),
        ('description = "x"', "neither"),
        ('params = 1e9\nsharding = "zero3"', "sharding = 'zero3' is not valid"),
    ],
)
def test_malformed_profiles(tmp_path, text, message):
    with pytest.raises(SpecError, match=message):
        load_checkpoint_profile(_write(tmp_path, text))


def test_unknown_name_lists_the_known():
    with pytest.raises(SpecError, match="unknown model 'llama9'") as e:
        load_checkpoint_profile("llama9")
    assert "llama3-70b" in (e.value.hint or "")


def test_workloads_lists_checkpoint_models(cli):
    r = cli("workloads")
    assert r.code == 0
    assert "Checkpoint models" in r.out and "llama3-70b" in r.out and "llama3-405b-16k" in r.out
