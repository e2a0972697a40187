"""Workload generators: each turns resolved parameters into phases and runs them.

A generator's parameters (beyond spec.COMMON_PARAMS) are declared in ``iobench.spec.params``,
below ``spec``, so loading a workload imports no generator. A generator module exposes
``plan(params) -> Plan`` (what it will do, with bytes and space; writes nothing) and
``run(params, runner) -> None`` (executes its phases through the runner).
"""

from __future__ import annotations

from typing import Any, Protocol, cast, runtime_checkable

from ...core.plan import Plan
from ...core.registry import Registry, entry
from ...spec.params import GENERATOR_PARAMS


@runtime_checkable
class Generator(Protocol):
    """What a generator module provides: ``plan`` (what it will do; writes nothing) and
    ``run`` (its phases, executed through the runner it is handed)."""

    def plan(self, params: dict[str, Any]) -> Plan: ...

    def run(self, params: dict[str, Any], runner: Any) -> None: ...


GENERATORS = Registry(
    "generator",
    {
        "sequential": entry("iobench.run.phases.sequential"),
        "checkpoint": entry("iobench.run.phases.checkpoint"),
        "dataset": entry("iobench.run.phases.dataset"),
        "llm-checkpoint": entry("iobench.run.phases.llm_checkpoint"),
    },
)


def generator_names() -> list[str]:
    return sorted(GENERATORS)  # the same names as params.GENERATOR_PARAMS (tests check)


def get_generator(name: str) -> Generator:
    return cast(Generator, GENERATORS.load(name))


def generator_params(name: str) -> dict[str, Any]:
    return GENERATOR_PARAMS[name]
