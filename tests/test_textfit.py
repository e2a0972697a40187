"""Every command's text fits COLUMNS: prose wrapped, table rows folded, nothing cut; phase
names never shortened into ambiguity (iobench.core.textfit, cmds.common.out_text)."""

from __future__ import annotations

import pytest
from conftest import SMALL

from iobench.core.textfit import fold_line, fold_text
from iobench.report import render_terminal
from iobench.result.file import PhaseResult, RunResult

LONG = "LLM checkpoint as MLPerf Storage writes it: every rank torch.saves weights + " * 3


def _words(text: str) -> list[str]:
    return text.split()


def test_a_table_row_folds_under_its_own_cell():
    row = f"  llm-checkpoint           {LONG}"
    lines = fold_line(row, 80)
    assert len(lines) > 1 and all(len(ln) <= 80 for ln in lines)
    assert lines[0].startswith("  llm-checkpoint           LLM checkpoint")
    assert all(ln.startswith(" " * 27) and ln[27] != " " for ln in lines[1:])  # its column
    assert _words("\n".join(lines)) == _words(row)  # nothing dropped, nothing cut


def test_a_labelled_line_hangs_under_its_text_and_a_long_word_is_split_not_cut():
    lines = fold_line("  Basis: " + "x" * 150, 60)
    assert all(len(ln) <= 60 for ln in lines) and lines[1].startswith(" " * 9 + "x")
    assert lines[0].strip() + "".join(ln.strip() for ln in lines[1:]) == "Basis: " + "x" * 150
    assert fold_line("short", 80) == ["short"]
    assert fold_text("a\n\nb\n", 40) == "a\n\nb\n"  # blank lines and the last newline kept


def test_a_hang_that_leaves_no_room_falls_back_to_the_indent():
    row = "    " + "n" * 70 + "   value with words " * 4
    lines = fold_line(row, 80)
    assert all(len(ln) <= 80 for ln in lines) and lines[1].startswith("      v")


def test_phase_names_are_never_shortened_into_ambiguity():
    names = ["loader-dataset-shuffled-r1", "loader-dataset-read-r1", "dataset-shuffled-r1"]
    phases = [PhaseResult(n, "read", ops=10, bytes=10 << 20, bandwidth_bps=1e8, iops=10,
                          elapsed_s=3.0, block_size=1 << 20) for n in names]  # fmt: skip
    run = RunResult(run_id="r", command="run", started_at="2026-12-01T00:00:00+00:00",
                    phases=phases)  # fmt: skip
    for width in (40, 60, 80, 120):
        text = render_terminal(run, width=width)
        assert max(len(ln) for ln in text.splitlines()) <= width
        assert "..." not in text.split("Phases", 1)[1].split("\n\n")[0], text
        for n in names:
            assert n in text, (width, text)


@pytest.fixture(scope="module")
def dataset_result(tmp_path_factory):
    from iobench.cli.app import main

    base = tmp_path_factory.mktemp("fit")
    (base / "t").mkdir()
    code = main(["run", "dataset-read", str(base / "t"), "--output", str(base / "out"), "-q",
                 "--json", *SMALL["dataset-read"]])  # fmt: skip
    assert code == 0
    return base / "out" / "result.json"


@pytest.mark.parametrize(
    "args",
    [
        ["workloads"],
        ["estimate", "{R}", "--profile", "retinanet-b200"],
        ["report", "{R}"],
        ["datasize", "--profile", "unet3d-h100", "--gpus", "8"],
        ["qualify", "{T}", "--quick", "--dry-run"],
        ["history", "list"],
        ["history", "trend", "dataset-read-r1.bandwidth"],
    ],
)
def test_every_command_fits_columns(cli, monkeypatch, tmp_path, dataset_result, args):
    from iobench.cli.app import main

    hist = tmp_path / "history"
    monkeypatch.setenv("IOBENCH_HISTORY", str(hist))
    if args[0] == "history":  # one run in the history to list
        (tmp_path / "t").mkdir()
        assert main(["run", "dataset-read", str(tmp_path / "t"), "--output",
                     str(tmp_path / "o"), "-q", "--json", *SMALL["dataset-read"]]) == 0  # fmt: skip
    (tmp_path / "target").mkdir(exist_ok=True)
    monkeypatch.setenv("COLUMNS", "80")
    argv = [a.format(R=dataset_result, T=tmp_path / "target") for a in args]
    r = cli(*argv)
    assert r.code == 0, r.err
    wide = [ln for ln in r.out.splitlines() if len(ln) > 80]
    assert not wide, wide
    assert len(r.out.splitlines()) > 1


def test_the_cache_warning_is_whole_in_result_json_and_wrapped_not_cut_on_screen():
    import json

    from iobench.result import file as results
    from iobench.run.session import _honesty_warnings

    write = PhaseResult("seq-write", "write", ops=4, bytes=4 << 20, elapsed_s=1.0)
    read = PhaseResult("seq-read", "read", ops=4, bytes=4 << 20, elapsed_s=1.0, cache="buffered")
    run = RunResult(run_id="r", command="run", started_at="2026-12-01T00:00:00+00:00",
                    phases=[write, read])  # fmt: skip
    (w,) = _honesty_warnings(run, None)
    # a sentence that says what the figures may be, not one cut after "may be cache"
    assert w.endswith("read figures may be the page cache's speed, not the storage's "
                      "(read with --direct, or more data than RAM, to measure the storage)")  # fmt: skip
    run.warnings.append(w)
    assert json.loads(results.dumps(run))["warnings"] == [w]
    text = render_terminal(run, width=80)
    shown = text.split("Warnings (1)", 1)[1]
    assert _words(shown) == ["-", *_words(w)] and "..." not in shown


@pytest.mark.parametrize("width", [40, 57, 80])
def test_a_report_at_any_width_cuts_nothing(dataset_result, width):
    from iobench.result import file as results

    run = results.load(dataset_result)
    run.phases[0].warnings.append("w" * 130)  # one word wider than any line: split, kept
    run.phases[1].name = "dataset-read-with-a-name-longer-than-any-terminal-line-" * 2
    text = render_terminal(run, width=width)
    assert max(len(ln) for ln in text.splitlines()) <= width
    assert "..." not in text  # no label, title, name or pair shortened
    flat = "".join(ln.strip() for ln in text.splitlines())
    assert run.phases[1].name in flat and "w" * 130 in flat


def test_a_path_wider_than_the_line_stays_whole():
    path = "/scratch/" + "deep/" * 30 + "result.json"
    lines = fold_line(f"result: {path}", 80)
    assert path in [ln.strip() for ln in lines]  # on a line of its own, whole


def test_a_foreign_message_is_bounded_and_says_so():
    from iobench.core.errors import quoted

    assert quoted("a\n  b ") == "a b"
    long = "x" * 1000
    got = quoted(long, 200)
    assert got == "x" * 200 + "... (800 more characters not kept)"


def test_columns_of_digits_that_are_not_ascii_are_not_a_width():
    from iobench.core.textfit import TERMINAL_WIDTH, terminal_format

    for cols in ("²", "٣٠", "-5", "wide"):  # "²".isdigit() is true, int("²") fails
        assert terminal_format(False, {"COLUMNS": cols}, None)[0] == TERMINAL_WIDTH
    assert terminal_format(False, {"COLUMNS": "90"}, None)[0] == 90
