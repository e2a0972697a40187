"""The documentation's reference, generated from the code so it cannot drift.

Used two ways:

- as an MkDocs hook (``mkdocs.yml``: ``hooks: [scripts/gen_docs.py]``): a page's
  ``<!-- gen: NAME -->`` marker is replaced by ``SECTIONS[NAME]()`` when the site is built, and
  the man page ``iobench.1`` is written into the built site;
- as a script: ``python scripts/gen_docs.py man iobench.1`` writes the man page,
  ``python scripts/gen_docs.py show NAME`` prints one section.

Every table comes from the objects iobench itself runs on: the typer app (commands, options,
examples), ``iobench.spec.params`` and ``spec`` (workload and profile keys), ``workloads/`` (named
workloads, profiles, checkpoint models), ``results``/``blocks`` (result.json), ``history.schema``,
``export``/``livecsv`` (CSV columns), ``errors.ExitStatus`` and the source's environment
variables. A column, exit status or variable without a description here fails the build.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MARKER = re.compile(r"<!--\s*gen:\s*([\w-]+)\s*-->")


class DocsError(Exception):
    """Something the reference must describe has no description."""


def use_checkout() -> None:
    """Document this checkout's iobench, whatever else is installed (MkDocs resets sys.path
    after loading a hook, so this runs before each generation, not at import)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    mod = sys.modules.get("iobench")
    if mod is not None and Path(mod.__file__).resolve().parent != ROOT / "iobench":
        raise DocsError(f"iobench was imported from {mod.__file__}, not from {ROOT}")


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(head: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# ---- commands and options (the typer app, as --help shows it) -------------------------------


def app_command():
    """The root click command with every command registered and the help as shown."""
    import typer

    from iobench.cli import app as cli
    from iobench.cli.commands import register_all

    register_all()
    root = typer.main.get_command(cli.app)
    cli.teach(root)
    return root


def _default(p) -> str:
    if p.is_flag or p.default in (None, "", [], ()):
        return ""
    return str(p.default)


def _param_rows(cmd) -> list[list[object]]:
    rows = []
    for p in cmd.params:
        if getattr(p, "hidden", False):
            continue
        if p.param_type_name == "argument":
            rows.append([f"`{p.metavar or p.name.upper()}`", "", "", getattr(p, "help", "") or ""])
            continue
        opts = ", ".join(f"`{o}`" for o in (*p.opts, *p.secondary_opts))
        rows.append([opts, f"`{p.metavar}`" if p.metavar else "", _default(p), p.help or ""])
    return rows


def _usage(name: str, cmd) -> str:
    import click

    ctx = click.Context(cmd, info_name=name)
    return f"iobench {name} " + " ".join(cmd.collect_usage_pieces(ctx))


def gen_cli() -> str:
    from iobench.cli.commands.examples import EXAMPLES

    root = app_command()
    out = ["Every command and option, from the command line's own definitions (`--help` shows"
           " the same, with these examples at its end).\n"]  # fmt: skip
    out.append("## Global options\n")
    out.append(_table(["Option", "Value", "Default", "Meaning"], _param_rows(root)))
    for name, cmd in root.commands.items():
        out.append(f"## iobench {name}\n")
        out.append(f"```\n{_usage(name, cmd)}\n```\n")
        out.append(inspect.cleandoc(cmd.help or "") + "\n")
        out.append(_table(["Argument / option", "Value", "Default", "Meaning"], _param_rows(cmd)))
        if name not in EXAMPLES:
            raise DocsError(f"command {name} has no examples in iobench/cli/commands/examples.py")
        lines = "\n".join(f"# {what}\n{line}" for what, line in EXAMPLES[name])
        out.append(f"Examples:\n\n```\n{lines}\n```\n")
    return "\n".join(out)


# ---- workload parameters -------------------------------------------------------------------

KIND_UNITS = {
    "size": ("SIZE", "bytes; IEC or SI suffix: 4k = 4KiB = 4096, 4KB = 4000"),
    "sizes": ("list of SIZE", "bytes each, e.g. [4k, 1MiB]"),
    "duration": ("DURATION", "seconds; 500ms, 30s, 5m, 2h"),
    "rate": ("RATE", "bytes/s per worker, e.g. 100MiB/s"),
    "count": ("N", "a whole number (k, m, g: ×1000)"),
    "counts": ("list of N", "e.g. [1, 2, 4]"),
    "int": ("N", "a whole number"),
    "float": ("X", "a number"),
    "percent": ("PERCENT", "a fraction or a percentage: 0.9 or 90%"),
    "bool": ("BOOL", "true or false"),
    "choice": ("CHOICE", "one of the values listed"),
    "str": ("TEXT", "text"),
}


def _show_default(p) -> str:
    from iobench.core.units import format_seconds, format_size

    d = p.default
    if d is None:
        return "unset"
    if p.kind == "size" and isinstance(d, int) and d:
        return f"{format_size(d)} ({d:,} B)" if d >= 1024 else f"{d} B"
    if p.kind == "sizes" and isinstance(d, list):
        return "[" + ", ".join(format_size(x) for x in d) + "]"
    if p.kind == "duration" and isinstance(d, int | float):
        return format_seconds(d)
    if isinstance(d, bool):
        return str(d).lower()
    return str(d)


def param_rows(table: dict) -> list[list[object]]:
    rows = []
    for key, p in table.items():
        if p.kind not in KIND_UNITS:
            raise DocsError(f"parameter {key}: kind {p.kind!r} has no entry in KIND_UNITS")
        typ, unit = KIND_UNITS[p.kind]
        meaning = p.help + (f" (one of: {', '.join(p.choices)})" if p.choices else "")
        bounds = []
        if p.minimum is not None:
            bounds.append(f"≥ {p.minimum:g}")
        if p.maximum is not None:
            bounds.append(f"≤ {p.maximum:g}")
        rows.append([f"`{key}`", typ, _show_default(p), unit, meaning, ", ".join(bounds)])
    return rows


PARAM_HEAD = ["Key", "Type", "Default", "Unit", "Meaning", "Bounds"]


def gen_params() -> str:
    from iobench.spec.params import GENERATOR_PARAMS
    from iobench.spec.workload import COMMON_PARAMS, PROFILE_PARAMS

    out = ["## Keys every workload takes\n", _table(PARAM_HEAD, param_rows(COMMON_PARAMS))]
    for gen, table in sorted(GENERATOR_PARAMS.items()):
        out.append(f"## Generator `{gen}`\n")
        out.append(_table(PARAM_HEAD, param_rows(table)))
    out.append("## Profile keys (`--profile`, `loader`, `qualify`, `estimate`, `datasize`)\n")
    out.append(_table(PARAM_HEAD, param_rows(PROFILE_PARAMS)))
    return "\n".join(out)


# ---- named workloads, profiles and checkpoint models -----------------------------------------


def _toml(path: Path) -> dict:
    import tomllib

    return tomllib.loads(path.read_text())


def gen_workloads() -> str:
    from iobench.checkpoint.spec import list_checkpoint_profiles
    from iobench.spec.workload import find_file, list_files, load_workload

    out = ["## Workloads (`iobench run NAME TARGET`)\n"]
    rows = []
    for name, desc in list_files("workload"):
        w = load_workload(name)
        data = _toml(find_file(name)).get("params", {})
        shown = ", ".join(f"`{k} = {v}`" for k, v in data.items())
        rows.append([f"`{name}`", f"`{w.generator}`", desc, shown])
    out.append(_table(["Name", "Generator", "What it does", "Keys it sets"], rows))
    out.append("## Profiles (`--profile NAME`)\n")
    rows = []
    for name, desc in list_files("profile"):
        data = _toml(find_file(name, "profile"))
        data = data.get("profile", data)
        keys = ", ".join(f"`{k} = {v}`" for k, v in data.items() if not isinstance(v, dict))
        rows.append([f"`{name}`", desc, keys])
    out.append(_table(["Name", "What it emulates", "Keys"], rows))
    out.append("## Checkpoint models (`checkpoint --model`, `qualify --model`)\n")
    rows = [[f"`{n}`", d] for n, d in list_checkpoint_profiles()]
    out.append(_table(["Name", "Model"], rows))
    return "\n".join(out)


# ---- result.json ---------------------------------------------------------------------------


def _field_comments(cls) -> dict[str, str]:
    """The comment on each field's line(s) in the class's source."""
    src = inspect.getsource(cls)
    tree = ast.parse(src)
    lines = src.splitlines()
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            text = " ".join(lines[node.lineno - 1 : node.end_lineno])
            m = re.search(r"#\s*(.*)$", text)
            out[node.target.id] = m.group(1) if m and "fmt:" not in m.group(1) else ""
    return out


def _dataclass_table(cls) -> str:
    comments = _field_comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        rows.append([f"`{f.name}`", f"`{typ}`", comments.get(f.name, "")])
    doc = inspect.cleandoc(cls.__doc__ or "")
    return f"{doc}\n\n" + _table(["Field", "Type", "Meaning"], rows)


def gen_result() -> str:
    from iobench.result import blocks
    from iobench.result import file as results

    out = [f"result.json holds one run (`schema_version` {results.SCHEMA_VERSION}). Top level:\n"]
    out.append(_dataclass_table(results.RunResult))
    out.append("## A phase (`phases[]`)\n")
    out.append(_dataclass_table(results.PhaseResult))
    out.append("## The blocks inside (typed views, `iobench/result/blocks.py`)\n")
    for name, cls in vars(blocks).items():
        if inspect.isclass(cls) and issubclass(cls, blocks.Block) and cls is not blocks.Block:
            if cls.__module__ == blocks.__name__:
                out.append(f"### {name}\n")
                out.append(_dataclass_table(cls))
    out.append(_timeseries_blocks())
    return "\n".join(out)


def _timeseries_blocks() -> str:
    """The time series and per-worker figures (``iobench/result/timeseries.py``): keys of a
    phase's ``extra`` and of the loader block, bounded in size, absent in older results."""
    from iobench.result import blocks, timeseries

    out = ["## Over time and per worker (`iobench/result/timeseries.py`)\n",
           inspect.cleandoc(timeseries.__doc__ or "") + "\n"]  # fmt: skip
    for name, cls in vars(timeseries).items():
        if (
            inspect.isclass(cls)
            and issubclass(cls, blocks.Block)
            and cls.__module__ == timeseries.__name__
        ):
            out.append(f"### {name}\n")
            out.append(_dataclass_table(cls))
    return "\n".join(out)


# ---- history schema ------------------------------------------------------------------------


def gen_history() -> str:
    from iobench.history import schema

    types = {f.name: str(f.type) for f in schema._arrow_schema()}
    rows = [[f"`{c}`", f"`{types.get(c, '')}`"] for c in schema.COLUMNS]
    out = ["Columns of every history file and of `history export`, in order:\n"]
    out.append(_table(["Column", "Arrow type"], rows))
    out.append("Metrics (the `metric` column), where each comes from in result.json, its unit"
               " and which way is better:\n")  # fmt: skip
    rows = [[f"`{m}`", f"`{path}`", unit, better] for m, (path, unit, better) in schema.ALL_METRICS.items()]  # fmt: skip
    out.append(_table(["Metric", "From", "Unit", "Better"], rows))
    return "\n".join(out)


# ---- CSV exports ---------------------------------------------------------------------------

CSV_MEANINGS = {
    "run_id": "the run's id",
    "started_at": "when the run started (UTC, ISO 8601)",
    "workload": "workload name (`qualify` for the suite)",
    "phase": "phase name",
    "op": "operation (write, read, randread, create, stat, ckpt_save, ...)",
    "status": "ok, partial or failed",
    "engine": "engine that ran the phase (posix, fio, fsspec)",
    "block_size": "bytes per I/O (empty for whole-file and metadata phases)",
    "jobs": "workers (readers, writers, ranks × workers)",
    "cache": "direct, dropped, client-cache, buffered or none",
    "bytes": "bytes moved",
    "ops": "operations completed",
    "files": "files touched",
    "elapsed_s": "last-done time: first start to last end, seconds",
    "bandwidth_bps": "bytes per second",
    "iops": "operations per second",
    "latency_mean_s": "mean latency, seconds",
    "latency_p50_s": "median latency, seconds (from the merged histogram)",
    "latency_p99_s": "99th percentile latency, seconds",
    "latency_p999_s": "99.9th percentile latency, seconds",
    "repeats": "repeats the figures are the median over",
    "au": "accelerator utilisation (loader row), 0–1",
    "verdict": "qualify's verdict (pass or fail) on every row of the run",
    "interval": "interval number within the phase",
    "t_start_s": "interval start, seconds from the phase's start",
    "t_end_s": "interval end, seconds from the phase's start",
    "time_s": "seconds since the run started",
    "interval_s": "seconds since the row before (the rates' interval)",
}


def _csv_table(columns: tuple[str, ...], where: str) -> str:
    missing = [c for c in columns if c not in CSV_MEANINGS]
    if missing:
        raise DocsError(f"{where}: no description for CSV column(s) {', '.join(missing)}")
    return _table(["Column", "Meaning"], [[f"`{c}`", CSV_MEANINGS[c]] for c in columns])


def gen_csv() -> str:
    from iobench.cli.livecsv import LIVE_COLUMNS
    from iobench.history.export import PHASE_COLUMNS, SERIES_COLUMNS

    return "\n".join([
        "## `--csv FILE`: one row per phase (and one for the loader)\n",
        _csv_table(PHASE_COLUMNS, "export.PHASE_COLUMNS"),
        "## `--series-csv FILE`: one row per phase × interval\n",
        _csv_table(SERIES_COLUMNS, "export.SERIES_COLUMNS"),
        "## `--live-csv FILE`: a row a second while the run goes (`run`, `qualify`)\n",
        _csv_table(LIVE_COLUMNS, "livecsv.LIVE_COLUMNS"),
    ])  # fmt: skip


# ---- exit codes ----------------------------------------------------------------------------

EXIT_MEANINGS = {
    "OK": ("success: no regression, qualify passed, the command did what it was asked", "the run directory removed; results written"),
    "FAILED": ("a regression (`compare`) or a failed verdict (`qualify`)", "results written; CI should fail"),
    "USAGE": ("bad input: one line on stderr (`iobench: error: …; fix`), no traceback", "nothing written"),
    "NOT_COMPARABLE": ("`compare`: the runs cannot be compared (no metric measured in both; with `--strict` a different workload spec)", "nothing written"),
    "RUN_FAILED": ("the run failed: I/O error, disk full, engine crash, blocked storage (the watchdog), a rank lost", "partial results kept and marked; the run directory removed"),
    "INTERRUPTED": ("interrupted: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1/2, SIGALRM, SIGXCPU", "partial results kept and marked; the run directory removed"),
}  # fmt: skip


def exit_rows() -> list[list[object]]:
    from iobench.core.errors import ExitStatus

    missing = [s.name for s in ExitStatus if s.name not in EXIT_MEANINGS]
    if missing:
        raise DocsError(f"exit status(es) without a description: {', '.join(missing)}")
    return [[int(s), f"`{s.name}`", *EXIT_MEANINGS[s.name]] for s in ExitStatus]


def gen_exit_codes() -> str:
    return _table(["Exit", "Name", "Meaning", "What is left"], exit_rows()) + (
        "\n`--debug` adds the traceback to an error's one line.\n"
    )


# ---- environment variables -----------------------------------------------------------------

ENV_MEANINGS = {
    "IOBENCH_HISTORY": "the history URL when `--history` is not given (default `~/.local/share/iobench/history`; any fsspec URL)",
    "IOBENCH_S3_ENDPOINT": "the S3 endpoint for `s3://` targets and histories (else `AWS_ENDPOINT_URL`; unset: AWS)",
    "IOBENCH_DIST_TIMEOUT": "seconds without a heartbeat before a torchrun rank counts as lost, and the most a rank waits for the others at a loader step (default 60)",
    "IOBENCH_SUPERVISE": "`always` or `never`: override whether the run forks a supervising parent before its first I/O (default: on FUSE, network and parallel file systems)",
    "IOBENCH_WORKLOADS": "a directory of workloads (and `profiles/`, `checkpoints/`) used instead of the shipped ones",
    "COLUMNS": "terminal width for tables and `--help` (as every CLI)",
    "NO_COLOR": "set: no colour in the terminal output",
}  # fmt: skip

_ENV_RE = re.compile(r"\b(IOBENCH_[A-Z0-9_]*[A-Z0-9])\b|[\"'](COLUMNS|NO_COLOR)[\"']")


def env_vars_in_source(where: str = "iobench") -> dict[str, list[str]]:
    """Every IOBENCH_* (and COLUMNS, NO_COLOR) that iobench/ (or scripts/) reads, with where."""
    found: dict[str, list[str]] = {}
    pattern = "*.py" if where == "iobench" else "*.sh"
    for path in sorted((ROOT / where).rglob(pattern)):
        for m in _ENV_RE.finditer(path.read_text()):
            name = m.group(1) or m.group(2)
            rel = path.relative_to(ROOT).as_posix()
            if rel not in found.setdefault(name, []):
                found[name].append(rel)
    return found


def _script_default(name: str, files: list[str]) -> str:
    for rel in files:
        m = re.search(r"\$\{" + name + r":-([^}]*)\}", (ROOT / rel).read_text())
        if m:
            return m.group(1)
    return ""


def gen_environment() -> str:
    found = env_vars_in_source()
    missing = sorted(set(found) - set(ENV_MEANINGS))
    if missing:
        raise DocsError(f"environment variable(s) without a description: {', '.join(missing)}")
    rows = [[f"`{n}`", ENV_MEANINGS[n], ", ".join(f"`{w}`" for w in found.get(n, []))] for n in ENV_MEANINGS]  # fmt: skip
    dev = env_vars_in_source("scripts")
    dev_rows = [[f"`{n}`", f"`{_script_default(n, w)}`" if _script_default(n, w) else "", ", ".join(f"`{x}`" for x in w)] for n, w in sorted(dev.items())]  # fmt: skip
    return (
        _table(["Variable", "Meaning", "Read in"], rows)
        + "\nCredentials for object stores come from the usual chains (`AWS_*`, `~/.aws`, "
        "instance roles) and are masked in every output ([Secrets](../guides/secrets.md)).\n"
        + "\n## Development scripts\n\nRead by the Ceph and two-host scripts "
        "([Development](../development/index.md)), not by iobench:\n\n"
        + _table(["Variable", "Default", "Read in"], dev_rows)
    )


# ---- command output, produced by running the command when the site is built ---------------


def command_output(*args: str, shown_target: str = "/mnt/scratch/me") -> str:
    """``iobench ARGS`` run in-process, its output as a code block. ``TARGET`` in ARGS is a
    fresh empty directory (shown as ``shown_target``), ``OUT`` a result directory beside it
    (shown as ``./result``); nothing is written outside the temporary directory."""
    return session_output([args], shown=1, shown_target=shown_target)


def session_output(steps: list[tuple[str, ...]], shown: int, codes: tuple[int, ...] = (0,),
                   shown_target: str = "/mnt/scratch/me") -> str:  # fmt: skip
    """Each step's ``iobench ARGS`` run in-process, in order, in one temporary directory with
    its own history; the last ``shown`` steps' commands and output as one code block. In ARGS
    ``TARGET`` is an empty directory (shown as ``shown_target``), ``OUT`` a result directory
    (``./result``), a word starting ``@`` a directory beside them (``./NAME``). Every step must
    exit 0, the shown ones with a code in ``codes``."""
    import contextlib
    import io
    import os
    import tempfile

    from iobench.cli.app import main

    blocks = []
    with tempfile.TemporaryDirectory(prefix="iobench-docs-") as tmp:
        target = Path(tmp, "target")
        target.mkdir()
        names = {
            "TARGET": (str(target), shown_target),
            "OUT": (str(Path(tmp, "result")), "./result"),
        }

        def word(a: str, i: int) -> str:
            if a.startswith("@"):
                return (str(Path(tmp, a[1:])), f"./{a[1:]}")[i]
            return names[a][i] if a in names else a

        saved_env = os.environ.get("IOBENCH_HISTORY")
        os.environ["IOBENCH_HISTORY"] = str(Path(tmp, "history"))
        try:
            for n, args in enumerate(steps):
                argv = [word(a, 0) for a in args]
                buf = io.StringIO()
                saved, sys.argv = sys.argv, ["iobench", *argv]  # the command a result records
                try:
                    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(io.StringIO()):
                        code = main(argv)
                finally:
                    sys.argv = saved
                show = n >= len(steps) - shown
                if code not in (codes if show else (0,)):
                    raise DocsError(f"iobench {' '.join(args)} exited {code}")
                if show:
                    text = buf.getvalue()
                    for real, shown_as in sorted(
                        _shown_paths(tmp, names), key=lambda x: -len(x[0])
                    ):
                        text = text.replace(real, shown_as)
                    cmd = " ".join(word(a, 1) for a in args)
                    blocks.append(f"$ iobench {cmd}\n{text.rstrip()}")
        finally:
            if saved_env is None:
                os.environ.pop("IOBENCH_HISTORY", None)
            else:
                os.environ["IOBENCH_HISTORY"] = saved_env
    return "```\n" + "\n".join(blocks) + "\n```\n"


def _shown_paths(tmp: str, names: dict[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """(real path, as shown) for every path a docs session made."""
    out = list(names.values())
    out += [(str(p), f"./{p.name}") for p in Path(tmp).iterdir() if str(p) not in dict(out)]
    return out


_TINY_SEQ = ("--set", "size=4MiB", "--set", "jobs=1", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]",
             "--set", "time=none")  # fmt: skip
_SMALL_SEQ = ("--set", "size=64MiB", "--set", "block_sizes=[]", "--set", "jobs_sweep=[]")


SECTIONS: dict[str, Callable[[], str]] = {
    "out-workloads": lambda: command_output("workloads"),
    "out-dry-run": lambda: command_output("qualify", "TARGET", "--dry-run"),
    "out-dry-run-quick": lambda: command_output("qualify", "TARGET", "--dry-run", "--quick"),
    "out-run": lambda: command_output(
        "run",
        "sequential-write",
        "TARGET",
        *_SMALL_SEQ,
        "--output",
        "OUT",
        "--no-history",
        "--quiet",
    ),
    "out-datasize": lambda: command_output(
        "datasize",
        "--profile",
        "unet3d-h100",
        "--gpus",
        "8",
        "--hosts",
        "1",
        "--host-mem",
        "512GiB",
    ),
    # two like runs of 3 repeats each and compare's verdict on them (the Holm-corrected log t test)
    "out-compare": lambda: session_output(
        [
            (
                "run",
                "sequential-write",
                "TARGET",
                *_TINY_SEQ,
                "--repeat",
                "3",
                "--output",
                "@base",
                "--quiet",
            ),
            (
                "run",
                "sequential-write",
                "TARGET",
                *_TINY_SEQ,
                "--repeat",
                "3",
                "--output",
                "@current",
                "--quiet",
            ),
            ("compare", "@base", "@current"),
        ],
        shown=1,
        codes=(0, 1),
    ),  # fmt: skip
    "cli": gen_cli,
    "params": gen_params,
    "workloads": gen_workloads,
    "result": gen_result,
    "history": gen_history,
    "csv": gen_csv,
    "exit-codes": gen_exit_codes,
    "environment": gen_environment,
}


def expand(markdown: str) -> str:
    """Replace every ``<!-- gen: NAME -->`` marker by its generated section."""
    use_checkout()

    def one(m: re.Match) -> str:
        name = m.group(1)
        if name not in SECTIONS:
            raise DocsError(f"unknown generated section {name!r}; known: {', '.join(SECTIONS)}")
        return SECTIONS[name]()

    return MARKER.sub(one, markdown)


# ---- the man page --------------------------------------------------------------------------


def _roff(text: str) -> str:
    text = text.replace("\\", "\\e").replace("`", "")
    return "\n".join(("\\&" + ln if ln.startswith((".", "'")) else ln) for ln in text.splitlines())


def man_page() -> str:
    """iobench.1: the same commands, options and examples as the reference and --help."""
    use_checkout()
    from iobench import __version__
    from iobench.cli.commands.examples import EXAMPLES

    root = app_command()
    day = datetime.date.today().isoformat()
    out = [f'.TH IOBENCH 1 "{day}" "iobench {__version__}" "User Commands"', ".SH NAME",
           "iobench \\- can this storage feed these GPUs? Storage and data-loader throughput analyzer",
           ".SH SYNOPSIS"]  # fmt: skip
    for name, cmd in root.commands.items():
        out += [".br", _roff(_usage(name, cmd))]
    out += [".SH DESCRIPTION", _roff(inspect.cleandoc(root.help or ""))]
    out += [".SH COMMANDS"]
    for name, cmd in root.commands.items():
        out += [f".SS iobench {name}", _roff(inspect.cleandoc(cmd.help or ""))]
        for p in cmd.params:
            if getattr(p, "hidden", False) or p.param_type_name == "argument":
                continue
            opts = ", ".join((*p.opts, *p.secondary_opts))
            out += [".TP", f"\\fB{_roff(opts)}\\fR" + (f" \\fI{p.metavar}\\fR" if p.metavar else ""),
                    _roff(p.help or "")]  # fmt: skip
        out += [".PP", "Examples:", ".nf"]
        for what, line in EXAMPLES.get(name, ()):
            out += [_roff(f"# {what}"), _roff(line)]
        out += [".fi"]
    out += [".SH EXIT STATUS"]
    for code, _name, meaning, left in exit_rows():
        out += [".TP", f"\\fB{code}\\fR", _roff(f"{meaning}; {left}.")]
    out += [".SH ENVIRONMENT"]
    for name, meaning in ENV_MEANINGS.items():
        out += [".TP", f"\\fB{name}\\fR", _roff(meaning)]
    out += [".SH SEE ALSO", "fio(1), the iobench documentation (mkdocs build: site/index.html)"]
    return "\n".join(out) + "\n"


# ---- MkDocs hook ---------------------------------------------------------------------------


def on_page_markdown(markdown, page=None, config=None, files=None, **_):
    return expand(markdown)


def on_post_build(config=None, **_):
    Path(config["site_dir"], "iobench.1").write_text(man_page())


def main(argv: list[str]) -> int:
    use_checkout()
    if len(argv) == 2 and argv[0] == "man":
        Path(argv[1]).write_text(man_page())
        return 0
    if len(argv) == 2 and argv[0] == "show":
        print(SECTIONS[argv[1]]())
        return 0
    print("usage: gen_docs.py man FILE | show " + "|".join(SECTIONS), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
