"""The manual against the code (issue 29): the README short and its commands real, the
generated reference complete, the shown output the shape a run prints, the site building."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gen = _gen()


def _blocks(text: str) -> list[str]:
    return re.findall(r"```[a-z]*\n(.*?)```", text, re.S)


def _readme_commands() -> list[str]:
    """Every iobench command line the README shows: in code blocks and in `backticks`."""
    text = README.read_text()
    cmds = []
    for block in _blocks(text):
        for line in block.splitlines():
            line = line.split("#")[0].strip()
            m = re.match(r"^(?:\S*/)?iobench (.*)$", line)
            if m:
                cmds.append("iobench " + m.group(1).strip())
    cmds += re.findall(r"`(iobench [^`]+)`", text)
    table = text[text.index("## Commands") : text.index("## Exit status")]
    cmds += ["iobench " + c for c in re.findall(r"^\| `([^`]+)` \|", table, re.M)]
    return cmds


# ---- the README ----------------------------------------------------------------------------


def test_readme_is_short_and_keeps_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= 250
    text = "\n".join(lines)
    assert "./scripts/run.sh" in text and "./scripts/test.sh" in text
    for step in ("qualify DIR --dry-run", "iobench qualify DIR`", "report RESULT --html"):
        assert step in text


def test_readme_exit_table_is_the_code():
    from iobench.core.errors import ExitStatus

    rows = re.findall(r"^\| (\d+) \| ", README.read_text(), re.M)
    assert [int(r) for r in rows] == [int(s) for s in ExitStatus]


def test_readme_links_point_at_pages_that_exist():
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)", README.read_text()):
        assert (ROOT / target).is_file(), target


def _parse(line: str, **subst: str) -> None:
    """The command line parses: every option exists and takes what it is given."""
    import shlex

    root = gen.app_command()
    words = [subst.get(w, w) for w in shlex.split(line)][1:]
    root.make_context("iobench", words, resilient_parsing=False)


def test_every_readme_command_parses():
    # completion options act while parsing (install into ~/.bashrc): tested apart, by subprocess
    cmds = [c for c in _readme_commands()
            if not c.startswith("iobench COMMAND") and "-completion" not in c]  # fmt: skip
    assert len(cmds) >= 10
    placeholders = {"DIR": "/tmp", "RESULT": "/tmp/r", "WORKLOAD": "sequential-write",
                    "PATH": "/tmp", "P": "retinanet-b200", "N": "2", "M": "llama3-8b",
                    "BASE": "a", "CUR": "b", "F": "x.html"}  # fmt: skip
    for line in cmds:
        line = re.sub(r"list\\\|show\\\|trend\\\|export", "list", line)
        line = line.replace("...", "")
        _parse(line, **placeholders)


def test_every_help_example_parses():
    from iobench.cli.commands.examples import EXAMPLES

    for pairs in EXAMPLES.values():
        for _what, line in pairs:
            _parse(line)


def test_the_readme_quick_start_runs_as_shown(cli, tmp_path, monkeypatch):
    """Step 1 writes nothing and prints the plan; step 3 renders a run's report."""
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "dir"
    target.mkdir()
    r = cli("qualify", target, "--dry-run")
    assert r.code == 0, r.err
    assert "nothing was written (dry run)" in r.out and "free space needed: 1.0 GiB" in r.out
    assert list(target.iterdir()) == []
    r = cli("qualify", target, "--dry-run", "--quick")
    assert "free space needed: 168.0 MiB" in r.out  # the README's --quick figure
    small = ["--set", "size=1MiB", "--set", "jobs=1", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]",
             "--set", "time=none"]  # fmt: skip
    r = cli("run", "sequential-write", target, *small, "--output", tmp_path / "res", "--quiet")
    assert r.code == 0, r.err
    r = cli("report", tmp_path / "res", "--html", tmp_path / "report.html")
    assert r.code == 0, r.err
    assert (tmp_path / "report.html").read_text().startswith("<!DOCTYPE html")


# ---- the generated reference ---------------------------------------------------------------


def test_the_parameter_reference_lists_every_key_of_every_generator():
    from iobench.spec.params import GENERATOR_PARAMS
    from iobench.spec.workload import COMMON_PARAMS, PROFILE_PARAMS

    page = gen.gen_params()
    sections = dict(re.findall(r"## (.*?)\n(.*?)(?=\n## |\Z)", page, re.S))
    for name, table in GENERATOR_PARAMS.items():
        body = sections[f"Generator `{name}`"]
        assert re.findall(r"^\| `(\w+)` \|", body, re.M) == list(table), name
    assert re.findall(r"^\| `(\w+)` \|", sections["Keys every workload takes"], re.M) == list(COMMON_PARAMS)  # fmt: skip
    profile = next(v for k, v in sections.items() if k.startswith("Profile keys"))
    assert re.findall(r"^\| `(\w+)` \|", profile, re.M) == list(PROFILE_PARAMS)
    assert "`iodepth` | N | 1 |" in page


def test_a_new_parameter_appears_in_the_reference(monkeypatch):
    """The page is generated from params.py: a key added there is listed, with its unit."""
    from iobench.spec import params

    new = {**params.SEQUENTIAL, "queue_wait": params.Param("duration", 2.5, "how long to wait")}
    monkeypatch.setitem(params.GENERATOR_PARAMS, "sequential", new)
    assert "| `queue_wait` | DURATION | 2.50 s | seconds" in gen.gen_params()


def test_every_command_and_option_is_in_the_reference():
    page = gen.gen_cli()
    root = gen.app_command()
    for name, cmd in root.commands.items():
        assert f"## iobench {name}\n" in page
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                assert f"`{p.opts[0]}`" in page, (name, p.opts[0])


def test_every_exit_status_csv_column_and_variable_is_described():
    from iobench.cli.livecsv import LIVE_COLUMNS
    from iobench.core.errors import ExitStatus
    from iobench.history.export import PHASE_COLUMNS, SERIES_COLUMNS

    assert {s.name for s in ExitStatus} == set(gen.EXIT_MEANINGS)
    assert set(PHASE_COLUMNS + SERIES_COLUMNS + LIVE_COLUMNS) <= set(gen.CSV_MEANINGS)
    found = gen.env_vars_in_source()
    assert {"IOBENCH_HISTORY", "IOBENCH_S3_ENDPOINT", "IOBENCH_DIST_TIMEOUT", "IOBENCH_SUPERVISE",
            "IOBENCH_WORKLOADS", "COLUMNS", "NO_COLOR"} <= set(found)  # fmt: skip
    assert set(found) <= set(gen.ENV_MEANINGS)


def test_an_undescribed_exit_status_fails_the_build(monkeypatch):
    monkeypatch.delitem(gen.EXIT_MEANINGS, "NOT_COMPARABLE")
    with pytest.raises(gen.DocsError, match="NOT_COMPARABLE"):
        gen.expand("<!-- gen: exit-codes -->")
    with pytest.raises(gen.DocsError, match="unknown generated section"):
        gen.expand("<!-- gen: nope -->")


def test_every_marker_in_the_docs_generates():
    pages = sorted((ROOT / "docs").rglob("*.md"))
    used = {m for p in pages for m in gen.MARKER.findall(p.read_text())}
    assert used == set(gen.SECTIONS)  # every section shown somewhere, no unknown marker
    assert "`schema_version`" in gen.gen_result() and "`bandwidth_bps`" in gen.gen_result()


def test_the_man_page_has_every_command_and_exit_status():
    page = gen.man_page()
    assert page.startswith(".TH IOBENCH 1")
    for name in gen.app_command().commands:
        assert f".SS iobench {name}\n" in page
    for code in (0, 1, 2, 3, 4, 130):
        assert f".TP\n\\fB{code}\\fR" in page


def _sources_mtime() -> float:
    """The newest modification time of what the site is built from."""
    files = [ROOT / "mkdocs.yml", *(ROOT / "docs").rglob("*"), *(ROOT / "iobench").rglob("*.py"),
             *(ROOT / "scripts").glob("*.py")]  # fmt: skip
    return max(p.stat().st_mtime for p in files if p.is_file())


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path):
    """Built here with --strict; or, under scripts/test.sh, the site it has just built with
    --strict from this checkout (DOCS_SITE_BUILT), checked rather than built a second time: it
    must be newer than every source it is built from."""
    built = os.environ.get("DOCS_SITE_BUILT")
    if built:
        site = Path(built)
        assert (site / "index.html").stat().st_mtime >= _sources_mtime(), (
            "a site older than the docs"
        )
    else:
        pytest.importorskip("mkdocs")
        pytest.importorskip("material")
        site = tmp_path / "site"
        r = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
            cwd=ROOT, capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1"},
        )  # fmt: skip
        assert r.returncode == 0, r.stdout + r.stderr
    assert (site / "reference" / "parameters" / "index.html").is_file()
    assert (site / "iobench.1").read_text().startswith(".TH IOBENCH 1")


# The shown output against a real run: tests/test_doc_outputs.py (`<!-- shape: CMD -->` markers).


def test_test_sh_removes_the_site_it_builds():
    """scripts/test.sh builds the site into a temporary directory and removes it, on success and
    on failure (it used to leave /tmp/iobench-site.* behind)."""
    text = (ROOT / "scripts" / "test.sh").read_text()
    made = re.search(r'^(\w+)="\$\(mktemp -d [^\n]*iobench-site', text, re.M)
    assert made, "the site is built into a mktemp directory named in a variable"
    var = made.group(1)
    assert re.search(rf"^trap 'rm -rf -- \"\${var}\"' EXIT$", text, re.M)
    assert f'--site-dir "${var}"' in text
