"""The lint and type-check configuration says what it seems to: ruff enforces BLE (blind
excepts) and RUF100 (dead noqa), and every blind except that is allowed says why."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
TREES = ("iobench", "tests", "scripts")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _sources():
    for tree in TREES:
        yield from sorted((ROOT / tree).rglob("*.py"))


def test_ruff_enforces_blind_excepts_and_dead_noqa():
    select = _pyproject()["tool"]["ruff"]["lint"]["select"]
    assert "BLE" in select and "RUF100" in select


def test_every_blind_except_marker_says_why():
    bare = []
    for path in _sources():
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = re.search(r"#\s*noqa:\s*([A-Z0-9, ]+)(.*)$", line)
            if m and "BLE001" in m.group(1) and not re.match(r"\s*-\s*\S", m.group(2)):
                bare.append(f"{path.relative_to(ROOT)}:{n}")
    assert not bare, f"noqa: BLE001 without '- <the reason>': {bare}"


def test_mypy_runs_in_the_test_script_on_a_pinned_version():
    """scripts/test.sh runs mypy with pyproject's [tool.mypy] (0 errors); the test extras pin it."""
    project = _pyproject()
    conf = project["tool"]["mypy"]
    assert conf["files"] == ["iobench"] and conf["warn_unused_ignores"] is True
    assert conf["check_untyped_defs"] is True
    assert any(
        re.fullmatch(r"mypy==[\d.]+", d)
        for d in project["project"]["optional-dependencies"]["test"]
    )
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert '"$VENV/bin/python" -m mypy\n' in script
    assert script.index("== ruff") < script.index("== mypy") < script.index("== pytest")
