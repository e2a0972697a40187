"""Workload generators: each turns resolved parameters into phases and runs them.

A generator module exposes ``PARAMS`` (its own parameters beyond spec.COMMON_PARAMS),
``plan(params) -> Plan`` (what it will do, with bytes and space; writes nothing) and
``run(params, runner) -> None`` (executes its phases through the runner).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

GENERATORS = {
    "sequential": "iobench.phases.sequential",
    "checkpoint": "iobench.phases.checkpoint",
    "dataset": "iobench.phases.dataset",
    "llm-checkpoint": "iobench.phases.llm_checkpoint",
}


def generator_names() -> list[str]:
    return sorted(GENERATORS)


def get_generator(name: str) -> ModuleType:
    return importlib.import_module(GENERATORS[name])


def generator_params(name: str) -> dict[str, Any]:
    return get_generator(name).PARAMS
