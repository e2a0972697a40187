"""Workload generators: each turns resolved parameters into phases and runs them.

A generator's parameters (beyond spec.COMMON_PARAMS) are declared in ``iobench.spec.params``,
below ``spec``, so loading a workload imports no generator. A generator module exposes
``plan(params) -> Plan`` (what it will do, with bytes and space; writes nothing) and
``run(params, runner) -> None`` (executes its phases through the runner).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ...spec.params import GENERATOR_PARAMS

GENERATORS = {
    "sequential": "iobench.run.phases.sequential",
    "checkpoint": "iobench.run.phases.checkpoint",
    "dataset": "iobench.run.phases.dataset",
    "llm-checkpoint": "iobench.run.phases.llm_checkpoint",
}


def generator_names() -> list[str]:
    return sorted(GENERATORS)  # the same names as params.GENERATOR_PARAMS (tests check)


def get_generator(name: str) -> ModuleType:
    return importlib.import_module(GENERATORS[name])


def generator_params(name: str) -> dict[str, Any]:
    return GENERATOR_PARAMS[name]
