"""``iobench history``: list stored runs, show one, or follow a metric over time."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import typer

from ...core.errors import UsageError
from .common import app, err, out, out_report, out_text


@app.command()
def history(
    action: str = typer.Argument(
        "list", metavar="ACTION", help="list | show RUN | trend METRIC | export"
    ),
    arg: str = typer.Argument(
        None,
        metavar="RUN|METRIC|FILE",
        help="show: RUN (run id, prefix, latest or latest~N); trend: METRIC (e.g. "
        "seq-read.bandwidth); export: FILE to write (default: stdout).",
    ),
    url: str = typer.Option(
        None,
        "--history",
        metavar="URL",
        help="History URL (default ~/.local/share/iobench/history).",
    ),
    workload: str = typer.Option(
        None, "--workload", metavar="NAME", help="Only runs of this workload."
    ),
    svg: str = typer.Option(
        None, "--svg", metavar="FILE", help="trend: also write the plot to this SVG file."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="list: the runs as JSON; show: the result JSON; trend: the series."
    ),
    fmt: str = typer.Option(
        None,
        "--format",
        metavar="FORMAT",
        help="export: csv | parquet | json (default: FILE's extension, else csv).",
    ),
) -> int:
    """Runs kept in the Parquet history, one immutable file per run."""
    if action == "list":
        return _list(url, workload, as_json)
    if action == "export":
        return _export(arg, url, workload, fmt)
    if action == "show":
        return _show(arg, url, workload, as_json)
    if action == "trend":
        return _trend(arg, url, workload, svg, as_json)
    raise UsageError(
        f"unknown history action {action!r}", hint="use list, show RUN, trend METRIC or export"
    )


def _warn(text: str) -> None:
    err(f"iobench: warning: {text}")


def _list(url: str | None, workload: str | None, as_json: bool) -> int:
    """``history list``: the stored runs, as a table or JSON."""
    from ... import history as hist

    runs = hist.list_runs(url, on_warning=_warn)
    if workload:
        runs = [r for r in runs if r.workload == workload or r.spec_hash == workload]
    if as_json:
        out(json.dumps([list_entry(r) for r in runs], indent=1))
        return 0
    if not runs:
        out_text(f"no runs in {url or hist.default_history_url()}")
        return 0
    out_text(list_table(runs))
    return 0


def _protect_history(url: str | None) -> None:
    """The history read is an input: nothing this command writes may land inside it (a file
    there would be read back as a stored run)."""
    from ...core.safeio import protect_input
    from ...history import default_history_url

    protect_input(os.path.expanduser(url or default_history_url()), "the history")


def _export(output: str | None, url: str | None, workload: str | None, fmt: str | None) -> int:
    """``history export [FILE]``: every row as CSV, Parquet or JSON, to FILE or stdout."""
    from ...history import export

    if fmt is None:
        ext = Path(output).suffix.lstrip(".").lower() if output else ""
        fmt = ext if ext in export.HISTORY_FORMATS else "csv"
    if fmt not in export.HISTORY_FORMATS:
        raise UsageError(f"--format: expected csv, parquet or json, got {fmt!r}")
    if fmt == "parquet" and not output:
        raise UsageError("parquet is binary: give a FILE (history export FILE)")
    _protect_history(url)
    if output:
        export.check_output(output, "export")
    table, warnings = export.history_rows(url, workload)
    for w in warnings:
        _warn(w)
    data = export.encode_history(table, fmt)
    if output:
        export.write_output(output, data, "export")
        err(f"history: {table.num_rows} rows written to {output}")
    else:
        sys.stdout.write(data.decode())
    return 0


def _show(arg: str | None, url: str | None, workload: str | None, as_json: bool) -> int:
    """``history show RUN``: one stored run's report, or its result JSON."""
    from ... import history as hist
    from ...result import file as results

    if not arg:
        raise UsageError("history show needs a RUN id", hint="see iobench history list")
    if arg.strip().startswith("latest"):  # as compare takes it; run ids are timestamps
        from ...compare import resolve

        run = resolve(arg, url, workload, what="run", on_warning=_warn)
    else:
        run = hist.get_run(arg, url, on_warning=_warn)
    out(results.dumps(run)) if as_json else out_report(run)
    return 0


def _trend(
    arg: str | None, url: str | None, workload: str | None, svg: str | None, as_json: bool
) -> int:
    """``history trend METRIC``: the metric in every stored run, one series per spec, with its
    noise band and confirmed regressions; ``--svg`` also writes the plot, ``--json`` prints
    the series as JSON."""
    from ... import history as hist
    from ...compare import trend_render
    from ...compare.trend import trend_report
    from ...result import file as results

    if not arg:
        raise UsageError("history trend needs a METRIC", hint="e.g. seq-read.bandwidth")
    hist.split_metric(arg)
    _protect_history(url)
    if svg is not None:  # a path that would be refused is refused before anything else
        results.claim_output_file(svg, option="--svg")
    report = trend_report(arg, url, workload=workload, on_warning=_warn)
    if as_json:
        out(trend_render.render_trend_json(report))
    elif not report.series:
        out_text(f"no values of {arg} in history")
    else:
        out_text(trend_render.render_trend_table(report))
    if svg is not None and report.series:
        path = results.write_output_file(
            svg, trend_render.render_trend_svg(report).encode(), option="--svg"
        )
        (err if as_json else out_text)(f"plot: {path}")
    return 0


def list_entry(r) -> dict:
    """One run of ``history list --json``: every field of the table and more."""
    h = r.headline
    return {
        "run_id": r.run_id,
        "started_at": r.started_at,
        "command": r.command,
        "workload": r.workload,
        "spec_hash": r.spec_hash,
        "target": r.target,
        "status": r.status,
        "verdict": r.verdict,
        "headline": None if h is None else {
            "phase": h.phase, "metric": h.metric, "value": h.value, "unit": h.unit,
            "text": headline_text(h),
        },
        "engine": r.engine,
        "phases": list(r.phases),
        "env_fingerprint": r.env_fingerprint,
        "host_class": r.host_class,
        "fs_identity": r.fs_identity,
        "path": r.path,
    }  # fmt: skip


def headline_text(h) -> str:
    """``seq-write 176.1 MiB/s``, ``AU 96.1 %`` (the loader's), ``12 GPUs`` (the estimate's)."""
    from ...compare import format_value

    if h is None:
        return ""
    value = format_value(h.value, h.unit)
    if h.metric == "au":
        return f"AU {value}"
    if h.phase == "estimate":
        return value
    return f"{h.phase} {value}"


_NARROW_VERDICT = {"pass (indicative)": "pass (ind.)"}


#: history list's columns, one line a run: (name, alignment)
_WIDE = (("run id", "l"), ("started (UTC)", "l"), ("workload", "l"), ("target", "l"),
         ("status", "l"), ("verdict", "l"), ("headline", "l"), ("engine", "l"), ("phases", "r"))  # fmt: skip
#: the first of two lines a run
_FIRST = (("run id", "l"), ("workload", "l"), ("verdict", "l"), ("headline", "l"))


def _columns(spec: tuple[tuple[str, str], ...], rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` under the named, aligned columns of ``spec``, by the one table renderer."""
    from ...core.table import Column, Table

    return Table([Column(name, align) for name, align in spec], rows).text()


def list_table(runs, width: int | None = None) -> str:
    """``history list``: run id, start (UTC, whole seconds), workload, target, status, verdict
    (qualify's; blank otherwise), headline figure, engine and phases, one line per run when
    that fits ``width`` (stdout's: ``COLUMNS``, the terminal's, 120 into a pipe); else two lines
    per run: run id, workload, verdict and headline, then start, status, engine and target
    indented beneath (the target on a line of its own when it would not fit; the phases are in
    ``--json``)."""
    from ...core.textfit import stdout_format
    from ...history import when_text

    width = width or stdout_format()[0]
    rows = [
        (r.run_id, when_text(r.started_at), r.workload or "-", r.target or "-", r.status or "-",
         r.verdict or "", headline_text(r.headline), r.engine or "-", str(len(r.phases)))
        for r in runs
    ]  # fmt: skip
    wide = _columns(_WIDE, rows)
    if max(len(line) for line in wide) <= width:
        return "\n".join(wide)
    firsts = _columns(_FIRST, [(r[0], r[2], _NARROW_VERDICT.get(r[5], r[5]), r[6]) for r in rows])
    lines = [firsts[0], "  started (UTC), status, engine, target"]
    for first, r in zip(firsts[1:], rows, strict=True):
        second = f"  {r[1]}  {r[4]}  {r[7]}"
        if len(second) + 2 + len(r[3]) <= width:
            lines += [first, f"{second}  {r[3]}"]
        else:  # a long target on a line of its own: a path is never cut
            lines += [first, second, f"  {r[3]}"]
    return "\n".join(lines)
