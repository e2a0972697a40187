"""One registry shape (core.registry, fsspec's ``{"class": …, "err": hint}``) for engines,
sample formats, dataset readers and generators; every entry meets its contract."""

from __future__ import annotations

import pytest

from iobench.core.errors import EngineUnavailable, UsageError
from iobench.core.registry import Registry, entry
from iobench.engines.base import Engine
from iobench.engines.registry import ENGINES
from iobench.formats.registry import READERS, REGISTRY, DatasetReader, SampleFormat
from iobench.run.phases import GENERATORS, Generator

ALL = {"engine": ENGINES, "sample format": REGISTRY, "dataset format": READERS,
       "generator": GENERATORS}  # fmt: skip


@pytest.mark.parametrize("kind", ALL)
def test_every_registry_has_the_one_shape(kind):
    reg = ALL[kind]
    assert isinstance(reg, Registry) and reg.kind == kind
    for name in reg:
        assert set(reg[name]) == {"class", "err"} and reg[name]["class"].startswith("iobench.")


@pytest.mark.parametrize("kind", ALL)
def test_an_unknown_name_lists_the_choices(kind):
    reg = ALL[kind]
    with pytest.raises(UsageError) as e:
        reg.load("nope")
    assert f"unknown {kind} 'nope'" in str(e.value)
    assert all(n in e.value.hint for n in reg)


def test_a_missing_module_is_unavailable_with_its_hint():
    reg = Registry("engine", {"x": entry("iobench_no_such_module.X", "pip install x")}, True)
    with pytest.raises(EngineUnavailable) as e:
        reg.load("x")
    assert "engine 'x' cannot be loaded" in str(e.value) and e.value.hint == "pip install x"
    with pytest.raises(EngineUnavailable) as e:
        reg.require_library("x", "iobench_no_such_library")
    assert "needs iobench_no_such_library" in str(e.value)
    reg.require_library("x", None)  # needs nothing: nothing raised


def test_an_entry_of_another_shape_is_refused():
    with pytest.raises(ValueError):
        Registry("engine", {"x": {"class": "a.B"}})  # type: ignore[dict-item]


def test_every_entry_meets_its_contract():
    for name in ENGINES:
        assert issubclass(ENGINES.load(name), Engine)
    for name in REGISTRY:
        assert isinstance(REGISTRY.load(name), SampleFormat), name
    for name in READERS:
        assert isinstance(READERS.load(name), DatasetReader), name
    for name in GENERATORS:
        assert isinstance(GENERATORS.load(name), Generator), name


def test_a_module_missing_part_of_its_contract_fails_the_check():
    import types

    half = types.ModuleType("half")
    half.EXTENSION = "x"  # no write, no decode, no overheads
    assert not isinstance(half, SampleFormat)
