"""What iobench imports is what pyproject.toml declares.

A module that arrived only through the test extras (click, via moto's Flask) once broke
``./scripts/run.sh`` on fresh machines while every test passed. Here every third-party import of
``iobench/`` must come from a runtime dependency, or from a non-test extra and then only lazily
(inside a function or a ``try: … except ImportError``), so the plain install never needs it.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib.metadata import packages_distributions, requires
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> tuple[set[str], set[str]]:
    """(runtime, optional-but-not-test) distribution names, as the installed metadata says."""
    runtime: set[str] = set()
    optional: set[str] = set()
    for req in requires("iobench") or []:
        name = _norm(re.match(r"[A-Za-z0-9_.\-]+", req).group(0))
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", req)
        if extra is None:
            runtime.add(name)
        elif extra.group(1) != "test":
            optional.add(name)
    return runtime, optional


def _imports(tree: ast.AST):
    """(top-level module name, lazy?) for every absolute import in a module."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
            for h in node.handlers
        ):
            guarded |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    lazy: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lazy |= {id(n) for n in ast.walk(node) if n is not node}
        elif isinstance(node, ast.If) and ast.unparse(node.test) in (
            "TYPE_CHECKING",
            "typing.TYPE_CHECKING",
        ):
            lazy |= {id(n) for stmt in node.body for n in ast.walk(stmt)}  # annotations only
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield name.split(".")[0], id(node) in lazy or id(node) in guarded


def _third_party():
    std = set(sys.stdlib_module_names)
    for path in sorted((ROOT / "iobench").rglob("*.py")):
        for top, lazy in _imports(ast.parse(path.read_text(), str(path))):
            if top in std or top == "iobench" or top.startswith("_"):
                continue
            yield path.relative_to(ROOT), top, lazy


def test_every_import_of_iobench_is_declared():
    runtime, optional = _declared()
    dists = packages_distributions()
    problems = []
    for path, top, lazy in _third_party():
        names = {_norm(d) for d in dists.get(top, [top])}
        if names & runtime:
            continue
        if names & optional:
            if not lazy:
                problems.append(f"{path}: {top} is an optional extra but imported eagerly")
            continue
        problems.append(f"{path}: imports {top}, which no runtime dependency or extra declares")
    assert not problems, "\n".join(problems)


def test_the_check_sees_an_undeclared_import(tmp_path):
    """The checker itself: an import of click at module level is found, a lazy one is marked."""
    tree = ast.parse("import click\n\ndef f():\n    import matplotlib\n")
    assert list(_imports(tree)) == [("click", False), ("matplotlib", True)]
    typing_only = ast.parse("if TYPE_CHECKING:\n    from matplotlib.typing import RcKeyType\n")
    assert list(_imports(typing_only)) == [("matplotlib", True)]


def test_ci_runs_the_readme_commands_in_a_new_users_order():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/run.sh" in ci and "scripts/test.sh" in ci
    assert ci.index("scripts/run.sh") < ci.index("scripts/test.sh")


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_package_list_is_every_package_of_iobench_and_the_workloads():
    """pyproject lists its packages (to map workloads/ into iobench.workloads): a new
    subpackage of iobench/ must be listed there, or an installed iobench lacks it."""
    tool = _pyproject()["tool"]["setuptools"]
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "iobench").rglob("__init__.py")
    }
    assert set(tool["packages"]) == on_disk | {"iobench.workloads"}
    assert tool["package-dir"] == {"iobench.workloads": "workloads"}


def test_every_workload_file_is_package_data():
    from fnmatch import fnmatch

    globs = _pyproject()["tool"]["setuptools"]["package-data"]["iobench.workloads"]
    files = [p.relative_to(ROOT / "workloads").as_posix() for p in (ROOT / "workloads").rglob("*")]
    files = [f for f in files if (ROOT / "workloads" / f).is_file()]
    assert files and all(any(fnmatch(f, g) and "/" not in f.replace(g.split("*")[0], "", 1) for g in globs) for f in files), files  # fmt: skip


def test_an_installed_package_finds_its_own_workloads(tmp_path, monkeypatch):
    """Installed, spec/workload.py sits in site-packages/iobench/ beside workloads/ (no checkout
    above)."""
    import shutil

    from iobench.spec import workload as spec

    pkg = tmp_path / "site-packages" / "iobench"
    shutil.copytree(ROOT / "workloads", pkg / "workloads")
    monkeypatch.delenv("IOBENCH_WORKLOADS", raising=False)
    monkeypatch.setattr(spec, "__file__", str(pkg / "spec" / "workload.py"))
    assert spec.workloads_dir() == pkg / "workloads"
    assert spec.find_file("retinanet-b200", "profile").parent == pkg / "workloads" / "profiles"
    shutil.rmtree(pkg / "workloads")  # neither shipped nor beside a checkout: say where it looked
    import pytest

    from iobench.core.errors import SpecError

    with pytest.raises(SpecError, match="no profile files in") as e:
        spec.find_file("retinanet-b200", "profile")
    assert (
        "IOBENCH_WORKLOADS" in e.value.one_line() and "choose one of: ;" not in e.value.one_line()
    )


@pytest.mark.slow
def test_the_wheel_carries_the_workloads(tmp_path):
    """A wheel built from this tree holds every workload, profile and checkpoint model."""
    import shutil
    import subprocess
    import zipfile

    src = tmp_path / "src"  # a clean copy: a build/ left in the checkout would be reused
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("iobench", "workloads"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path), str(src)],
        check=True, capture_output=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("iobench-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {
        "iobench/workloads/" + p.relative_to(ROOT / "workloads").as_posix()
        for p in (ROOT / "workloads").rglob("*.toml")
    }
    assert want and want <= names
    assert "iobench/cli/commands/qualify.py" in names
