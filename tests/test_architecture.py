"""The shape docs/ARCHITECTURE.md describes, for the packages already split: loader/ and formats/
layered with no import from a later module, no module over 600 lines, no function over 60
lines unless it says why (a noqa naming the measured loop)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "iobench"
LOADER = [
    "dataset", "torchdata", "loop", "ranks", "calibration", "run",
    "existing_data", "existing_summary", "existing",
]  # fmt: skip
FORMATS = [
    "registry", "raw", "npz", "parquet", "tar",
    "image", "arrays", "columnar", "hdf5", "webdataset", "tfrecord", "detect",
    "writer", "reader",
]  # fmt: skip
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
