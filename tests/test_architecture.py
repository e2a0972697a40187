"""The shape docs/ARCHITECTURE.md describes, for the packages already split: loader/ and formats/
layered with no import from a later module, no module over 600 lines, no function over 60
lines unless it says why (a noqa naming the measured loop)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "iobench"
LOADER = ["dataset", "torchdata", "loop", "ranks", "calibration", "run"]
FORMATS = ["registry", "raw", "npz", "parquet", "tar", "writer", "reader"]
SPLIT = [PKG / "loader" / f"{m}.py" for m in LOADER] + [
    PKG / "formats" / f"{m}.py" for m in FORMATS
]


def _sibling_imports(path: Path) -> set[str]:
    """Names of this package's modules that ``path`` imports (``from .x import``, ``from . import x``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("pkg,order", [("loader", LOADER), ("formats", FORMATS)])
def test_each_module_imports_only_those_before_it(pkg, order):
    for i, mod in enumerate(order):
        later = _sibling_imports(PKG / pkg / f"{mod}.py") & set(order[i:])
        assert not later, f"{pkg}/{mod}.py imports {sorted(later)} (a later layer)"


@pytest.mark.parametrize("path", SPLIT, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_modules_and_functions_stay_short(path):
    text = path.read_text()
    assert len(text.splitlines()) <= 600
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            n = node.end_lineno - node.lineno + 1
            if n > 60:
                assert "noqa: PLR0915 - the measured loop" in lines[node.lineno - 1], (
                    f"{path.name}:{node.name} is {n} lines"
                )


# -- the run layer: one run set-up (session.open_run), one coordinator --------------------------

RUN_LAYER = [
    "coordinator.py", "session.py", "outdir.py", "runner.py", "qualify.py", "verdict.py",
    "ckpt_run.py", "api.py", "cli.py", "spec.py", "ckpt_spec.py",
    "distributed/__init__.py", "distributed/comm.py", "distributed/aggregate.py",
    "distributed/group.py", "loader/run.py", "cmds/checkpoint.py", "cmds/qualify.py",
    "cmds/estimate.py", "cmds/loader.py", "cmds/options.py",
]  # fmt: skip


@pytest.mark.parametrize("name", RUN_LAYER)
def test_run_layer_modules_and_functions_stay_short(name):
    test_modules_and_functions_stay_short(PKG / name)


def test_no_code_asks_whether_it_is_distributed():
    """Every run holds a Coordinator (SingleProcess for one client): no ``hooks is None``."""
    for path in PKG.rglob("*.py"):
        text = path.read_text()
        for needle in ("hooks is None", "hooks is not None", "hooks: Any", "hooks=None"):
            assert needle not in text, f"{path.relative_to(PKG)}: {needle}"


def test_the_coordinator_and_the_aggregation_stay_low():
    """``coordinator`` imports only ``errors``; the distributed package's ``aggregate`` is pure
    and ``comm`` knows nothing of phases: neither imports the coordinator built on them."""
    assert _sibling_imports(PKG / "coordinator.py") <= {"errors"}
    dist = PKG / "distributed"
    assert not _sibling_imports(dist / "aggregate.py") & {"comm", "group"}
    assert not _sibling_imports(dist / "comm.py") & {"aggregate", "group"}
    comm = (dist / "comm.py").read_text()
    assert "..results" not in comm and "..stats" not in comm  # no phases, no figures
    for mod in ("aggregate", "comm"):
        text = (dist / f"{mod}.py").read_text()
        assert "..runner" not in text and "..session" not in text


def test_every_command_that_runs_io_opens_its_run_through_open_run():
    for name in ("runner.py", "qualify.py", "loader/run.py"):
        text = (PKG / name).read_text()
        assert "open_run(" in text, name
        assert "run_session(" not in text, name
