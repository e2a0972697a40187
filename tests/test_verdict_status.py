"""A verdict that rests on indicative phases is its own status (``pass (indicative)``) in
result.json, every rendering, the history and the exit status (docs/concepts/verdict.md)."""

from __future__ import annotations

import json

import pytest

from iobench.core.errors import UsageError
from iobench.qualify.verdict import Requirement, check_fail_on, verdict, verdict_fails
from iobench.result import blocks
from iobench.result.file import PhaseResult, RunResult
from iobench.run.session import RunOutcome


def _result(phases: list[PhaseResult], **kw) -> RunResult:
    run = RunResult(run_id="r1", command="qualify", started_at="2026-12-01T00:00:00+00:00",
                    phases=phases, loader={"au": 0.95}, **kw)  # fmt: skip
    run.verdict = verdict(run, [Requirement("read", 1e8, "B/s")], None, None, quick=True)
    return run


def _quick_run() -> RunResult:
    short = PhaseResult("seq-read", "read", ops=10, bandwidth_bps=5e9, elapsed_s=0.5)
    return _result([short])


def test_a_quick_pass_is_its_own_status_in_result_json():
    run = _quick_run()
    saved = json.loads(json.dumps(run.verdict))
    assert saved["status"] == saved["result"] == "pass (indicative)"
    assert blocks.VerdictBlock.from_dict(saved).judged == blocks.PASS_INDICATIVE
    assert saved["reasons"][0].startswith("NOTE: --quick is a smoke test")


@pytest.mark.parametrize(
    ("older", "judged"),
    [
        ({"result": "pass", "reasons": []}, "pass"),
        ({"result": "fail", "reasons": []}, "fail"),
        # an older file flagged the indicative pass beside its "pass": read as what it was
        ({"result": "pass", "indicative": True, "smoke_test": True}, "pass (indicative)"),
        ({"result": 7}, None),
    ],
)
def test_older_files_pass_and_fail_still_read(older, judged):
    v = blocks.VerdictBlock.from_dict(older)
    assert v.judged == judged
    assert v.to_dict() == older  # nothing added to what was read


def test_every_rendering_gives_an_indicative_pass_its_own_word_and_colour():
    from iobench.report import render_html, render_markdown, render_terminal

    run = _quick_run()
    plain = render_terminal(run, width=80)
    assert "Verdict: PASS (INDICATIVE)" in plain
    coloured = render_terminal(run, width=80, colour=True)
    line = next(ln for ln in coloured.splitlines() if "Verdict" in ln)
    assert "\x1b[1;33m" in line and "\x1b[1;32m" not in line  # bold yellow, never green
    assert "**Verdict: PASS (INDICATIVE)**" in render_markdown(run)
    html = render_html(run)
    assert 'class="banner indicative"' in html and 'class="banner pass"' not in html
    assert ".banner.indicative { background: var(--indicative)" in html
    # a pass on steady phases keeps the green word
    steady = PhaseResult("seq-read", "read", ops=10, bandwidth_bps=5e9, elapsed_s=3,
                         steady=True, steady_at_s=2)  # fmt: skip
    fine = _result([steady])
    fine.verdict = verdict(fine, [Requirement("read", 1e8, "B/s")], None, None)
    assert 'class="banner pass"' in render_html(fine)
    assert "Verdict: PASS\n" in render_terminal(fine, width=80)


def test_history_and_export_rows_carry_the_status():
    from iobench.history.export import phase_rows
    from iobench.history.schema import metric_rows

    run = _quick_run()
    assert {r["verdict"] for r in phase_rows(run)} == {"pass (indicative)"}
    assert {r["verdict"] for r in metric_rows(run)} == {"pass (indicative)"}


def test_exit_status_of_each_verdict_under_each_fail_on():
    assert [verdict_fails(s) for s in ("pass", "pass (indicative)", "fail")] == [False, False, True]
    assert [verdict_fails(s, "indicative") for s in ("pass", "pass (indicative)", "fail")] == [
        False,
        True,
        True,
    ]
    assert verdict_fails(None) and verdict_fails("PASS")  # not a status: never a pass
    with pytest.raises(UsageError):
        check_fail_on("regression")


def test_qualify_exit_code_follows_fail_on(cli, tmp_path, monkeypatch):
    import iobench.cli.commands.qualify as cmd

    run = _quick_run()
    monkeypatch.setattr(cmd, "_run", lambda *a, **k: (RunOutcome(run, None), None))
    args = ("qualify", str(tmp_path), "--quick", "--no-history", "-q")
    r = cli(*args)
    assert r.code == 0, r.err
    assert "Verdict: PASS (INDICATIVE)" in r.out
    assert cli(*args, "--fail-on", "indicative").code == 1
    bad = cli(*args, "--fail-on", "sometimes")
    assert bad.code == 2 and bad.err.count("\n") == 1 and "--fail-on" in bad.err
