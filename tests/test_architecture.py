"""The shape docs/ARCHITECTURE.md describes: the tree is the layer diagram. Every package is a
layer or a domain (``core``, ``spec``, ``model``, ``result``, ``checkpoint``, ``target``, …,
``cli``), no module sits at the top beside them but ``api``; each package's modules are
layered with no import from a later one; no import reaches a later package; no module over 600
lines, no function over 60 lines unless it says why (a noqa naming the measured loop); engines
built only through the registry, with ``why_not`` on the Engine interface. Imports under
``if TYPE_CHECKING:`` are annotations, not dependencies, and are not counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "iobench"

# Each package's modules, in layer order: a module imports only those before it.
ORDERS = {
    "core": [
        "errors", "registry", "units", "redact", "cpu", "tools", "datagen", "plan", "coordinator",
        "inputs", "safeio", "textfit", "table",
    ],
    "spec": ["params", "workload"],
    "model": [
        "starvation_inputs", "starvation", "interval", "diagnosis_terms", "diagnosis", "inverse",
    ],
    "result": ["blocks", "timeseries", "steady", "stats", "check", "file", "measured", "verify", "steady_advice"],
    "checkpoint": [
        "layout", "daly", "model", "spec", "estimate", "rows", "inverse", "cluster", "contention",
    ],
    "loader": [
        "dataset", "torchdata", "loop", "ranks", "calibration", "beside", "ckpt_writer", "readprobe",
        "during",
        "run", "existing_read", "existing_data", "existing_diagnosis", "existing_summary",
        "existing", "decode_cost",
        "profile",
    ],
    "formats": [
        "registry", "thrift", "crc32", "npzview", "raw", "npz", "parquet", "tar", "jpeg",
        "image", "arrays", "columnar", "hdf5", "webdataset", "tfrecord", "detect",
        "ahead", "samples", "writer", "reader",
    ],
    "target": [
        "mounts", "model", "direct", "space", "signals", "rundir", "url", "layout", "__init__",
        "storage",
    ],
    "engines": [
        "base", "registry", "worker", "forked", "ceiling", "posix_random", "posix", "fsspec", "fio_job",
        "fio",
    ],
    "run": ["supervisor", "stall", "guard", "outdir", "session", "phases", "runner", "sweep", "checkpoint"],
    "qualify": ["checkpoint", "during", "verdict", "plan_file", "bound", "plan_text", "suite"],
    "cli": ["progress", "livecsv", "commands", "app"],
}  # fmt: skip
LOADER, FORMATS, TARGET, ENGINES = (ORDERS[k] for k in ("loader", "formats", "target", "engines"))
SPLIT = [
    PKG / pkg / f"{m}.py"
    for pkg in ("loader", "formats", "target", "engines", "model", "result", "core", "spec")
    for m in ORDERS[pkg]
    if (PKG / pkg / f"{m}.py").exists()
]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: annotations, not dependencies."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for n in ast.walk(node))
    return out


def _sibling_imports(path: Path) -> set[str]:
    """Names of this package's modules that ``path`` imports (``from .x import``, ``from . import x``)."""
    out = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("pkg,order", list(ORDERS.items()))
def test_each_module_imports_only_those_before_it(pkg, order):
    for i, mod in enumerate(order):
        path = PKG / pkg / f"{mod}.py"
        path = path if path.exists() else PKG / pkg / mod / "__init__.py"
        later = _sibling_imports(path) & set(order[i:])
        assert not later, f"{pkg}/{mod}.py imports {sorted(later)} (a later layer)"


def test_every_module_of_the_split_packages_is_listed():
    for pkg, order in ORDERS.items():
        have = {p.stem for p in (PKG / pkg).glob("*.py")} - {"__init__"}
        have |= {p.parent.name for p in (PKG / pkg).glob("*/__init__.py")}
        assert have <= set(order), f"{pkg}/: add {sorted(have - set(order))} to the layer list"


def test_the_tree_is_the_layer_diagram():
    """Only the package marker, ``__main__`` and ``api`` (the library surface) sit at the top;
    everything else lives in a package named for its layer or domain."""
    top = {p.stem for p in PKG.glob("*.py")}
    assert top <= {"__init__", "__main__", "api"}, f"move into a package: {sorted(top)}"
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert packages <= {t for names in TIERS for t in names.split()}, "place it in TIERS"


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


ENGINE_CLASSES = ("PosixEngine", "FsspecEngine", "FioEngine")


def _engine_constructions(path: Path) -> list[str]:
    """Calls that build an engine class by name in ``path`` (``PosixEngine()`` and the like)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            if name in ENGINE_CLASSES:
                out.append(f"{path.name}:{node.lineno} {name}()")
    return out


def test_engines_are_built_only_through_the_registry():
    root = PKG.parent
    paths = sorted(PKG.rglob("*.py")) + sorted((root / "scripts").glob("*.py"))
    built = [c for p in paths for c in _engine_constructions(p)]
    assert not built, f"build engines with engines.registry.get_engine: {built}"


def test_why_not_is_part_of_the_engine_interface():
    from iobench.engines.base import Engine, FileSpec, PhaseSpec
    from iobench.engines.registry import ENGINES, get_engine

    assert "why_not" in vars(Engine)
    phase = PhaseSpec("p", "read", (FileSpec("f", 4096),))
    assert get_engine("posix").why_not(phase) is None
    assert get_engine("posix", workers="threads").workers == "threads"
    for name in ENGINES:
        mod, _, cls = ENGINES[name]["class"].rpartition(".")
        klass = getattr(__import__(mod, fromlist=[cls]), cls)
        assert issubclass(klass, Engine) and callable(klass.why_not)
    text = "".join(p.read_text() for p in PKG.rglob("*.py"))
    assert 'getattr(self.engine, "why_not"' not in text


# -- the outputs (issue 13): report/, compare/ and history/ are layered the same way, every
# module and function short; ckpt_estimate and the history and compare commands have their long
# functions split; none of the outputs imports from the front (cmds/, cli, api).

REPORT = [
    "cells",
    "svgplot",
    "svgbars",
    "checkpoint_plot",
    "during",
    "tables",
    "text",
    "series",
    "figures",
    "barplots",
    "overtime",
    "plots",
    "page",
]
COMPARE = ["noise", "options", "metric", "runs", "render", "trend", "trend_render"]
HISTORY = ["schema", "files", "query", "export"]
OUTPUT_PACKAGES = {"report": REPORT, "compare": COMPARE, "history": HISTORY}
OUTPUTS = [
    PKG / pkg / f"{m}.py" for pkg, order in OUTPUT_PACKAGES.items() for m in ["__init__", *order]
] + [PKG / "checkpoint" / "estimate.py"]
SHORTENED = [PKG / "cli" / "commands" / "history.py", PKG / "cli" / "commands" / "compare.py"]


@pytest.mark.parametrize("pkg,order", list(OUTPUT_PACKAGES.items()))
def test_each_output_module_imports_only_those_before_it(pkg, order):
    test_each_module_imports_only_those_before_it(pkg, order)


def test_every_module_of_the_output_packages_is_listed():
    for pkg, order in OUTPUT_PACKAGES.items():
        have = {p.stem for p in (PKG / pkg).glob("*.py")} - {"__init__"}
        assert have <= set(order), f"{pkg}/: add {sorted(have - set(order))} to its layer list"


@pytest.mark.parametrize("path", OUTPUTS + SHORTENED, ids=lambda p: str(p.relative_to(PKG)))
def test_output_modules_and_functions_stay_short(path):
    test_modules_and_functions_stay_short(path)


def _iobench_imports(path: Path) -> set[str]:
    """The iobench modules ``path`` imports, module-level or inside a function, as dotted names
    relative to the iobench package (``cmds.run``, ``cli``, ``results``)."""
    here = path.relative_to(PKG).with_suffix("").parts
    package = here[:-1]
    out = set()
    tree = ast.parse(path.read_text())
    skip = _type_checking_nodes(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - node.level + 1])
                mods = (
                    [".".join([*base, node.module])]
                    if node.module
                    else [".".join([*base, a.name]) for a in node.names]
                )
            elif (node.module or "").startswith("iobench."):
                mods = [node.module.removeprefix("iobench.")]
            else:
                continue
            out.update(m.strip(".") for m in mods)
        elif isinstance(node, ast.Import):
            out.update(
                a.name.removeprefix("iobench.") for a in node.names if a.name.startswith("iobench.")
            )
    return out


@pytest.mark.parametrize("path", OUTPUTS, ids=lambda p: str(p.relative_to(PKG)))
def test_outputs_import_nothing_from_the_front(path):
    front = {m for m in _iobench_imports(path) if m.split(".")[0] in ("cli", "api")}
    assert not front, f"{path.relative_to(PKG)} imports {sorted(front)} (the front layer)"


# -- the run layer: one run set-up (session.open_run), one coordinator --------------------------

RUN_LAYER = [
    "core/coordinator.py", "run/session.py", "run/outdir.py", "run/runner.py",
    "qualify/suite.py", "qualify/verdict.py", "run/checkpoint.py", "api.py", "cli/app.py",
    "spec/workload.py", "checkpoint/spec.py",
    "distributed/__init__.py", "distributed/comm.py", "distributed/aggregate.py",
    "distributed/group.py", "loader/run.py", "cli/commands/estimate.py",
    "cli/commands/checkpoint.py", "cli/commands/qualify.py", "cli/commands/loader.py",
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
    assert _sibling_imports(PKG / "core" / "coordinator.py") <= {"errors"}
    dist = PKG / "distributed"
    assert not _sibling_imports(dist / "aggregate.py") & {"comm", "group"}
    assert not _sibling_imports(dist / "comm.py") & {"aggregate", "group"}
    comm = (dist / "comm.py").read_text()
    assert "..results" not in comm and "..stats" not in comm  # no phases, no figures
    for mod in ("aggregate", "comm"):
        text = (dist / f"{mod}.py").read_text()
        assert "..runner" not in text and "..session" not in text


def test_every_command_that_runs_io_opens_its_run_through_open_run():
    for name in ("run/runner.py", "qualify/suite.py", "loader/run.py"):
        text = (PKG / name).read_text()
        assert "open_run(" in text, name
        assert "run_session(" not in text, name


# -- the layers: no import, module-level or inside a function, reaches a later tier ------------
# The packages of docs/ARCHITECTURE.md, in order; a module imports only from its own tier or an
# earlier one (within a package, ORDERS above gives the order of its modules).

TIERS = [
    "__init__ __version__ core",  # Base: depends on nothing
    "formats.registry",  # the format names (import-light), for spec
    "spec",
    "model",  # Models: pure
    "result",  # Data
    "checkpoint",
    "target",
    "history",
    "engines",  # I/O
    "formats distributed",
    "run",  # Runs
    "loader",
    "qualify",
    "report compare",  # Outputs
    "api",  # Front
    "cli",
    "__main__",
]
TIER = {name: i for i, names in enumerate(TIERS) for name in names.split()}

# (importer, imported) still to be removed: docs/ARCHITECTURE.md, "Upward imports".
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _tier(mod: str) -> str | None:
    """The TIERS name ``mod`` (dotted, relative to iobench) falls under: ``formats.registry``
    before ``formats``, a package's modules under the package."""
    parts = mod.split(".")
    for n in (2, 1):
        if ".".join(parts[:n]) in TIER:
            return ".".join(parts[:n])
    return None


def _upward_imports() -> set[tuple[str, str]]:
    out = set()
    for path in sorted(PKG.rglob("*.py")):
        src = _tier(".".join(path.relative_to(PKG).with_suffix("").parts))
        assert src is not None, f"{path.relative_to(PKG)}: place it in TIERS (and the doc)"
        for mod in _iobench_imports(path):
            dst = _tier(mod)
            assert dst is not None, f"{path.relative_to(PKG)} imports {mod}: place it in TIERS"
            if TIER[dst] > TIER[src]:
                out.add((src.split(".")[0], dst.split(".")[0]))
    return out


def test_no_module_imports_from_a_later_tier():
    """Every import, at module level or inside a function, reaches only the importer's own tier
    or an earlier one; the known exceptions are listed, and the list only shrinks."""
    up = _upward_imports()
    assert not up - KNOWN_UPWARD, f"upward imports: {sorted(up - KNOWN_UPWARD)}"
    assert not KNOWN_UPWARD - up, f"gone, drop from KNOWN_UPWARD: {sorted(KNOWN_UPWARD - up)}"


def test_the_generators_are_the_ones_whose_parameters_spec_knows():
    """``spec`` validates against ``params.GENERATOR_PARAMS`` without importing a generator;
    every generator named there exists, with its plan and run."""
    from iobench.run import phases
    from iobench.spec import params

    assert phases.generator_names() == params.generator_names()
    for name in params.generator_names():
        gen = phases.get_generator(name)
        assert callable(gen.plan) and callable(gen.run)
        assert phases.generator_params(name) is params.GENERATOR_PARAMS[name]


def test_the_architecture_page_names_every_package_and_module():
    """docs/ARCHITECTURE.md draws the tree: every package, and every module of ORDERS, is named."""
    page = (PKG.parent / "docs" / "ARCHITECTURE.md").read_text()
    packages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    missing = [f"{p}/" for p in sorted(packages) if f"`{p}/`" not in page]
    missing += [f"{p}/{m}" for p, order in ORDERS.items() for m in order
                if m != "__init__" and f"`{m}`" not in page and f"`{m}/`" not in page]  # fmt: skip
    assert not missing, f"docs/ARCHITECTURE.md does not name: {missing}"
