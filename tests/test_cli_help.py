"""The help texts against the behaviour: no Python types, every default a help text names is the
one the command uses, one meaning per option across commands, old spellings still work."""

from __future__ import annotations

import json
import re

import pytest
import typer

from iobench import __version__
from iobench.cli import app as cli
from iobench.cli.commands import register_all
from iobench.core.units import parse_duration, parse_size
from iobench.qualify import suite as qualify

PY_TYPE = re.compile(r"<(?:str|int|float|bool|list\[[^\]]*\]|path|text)>", re.I)


def _commands() -> dict:
    register_all()
    root = typer.main.get_command(cli.app)
    cli.teach(root)
    return dict(root.commands)


COMMANDS = sorted(_commands())


def test_version(cli):
    r = cli("--version")
    assert (r.code, r.out, r.err) == (0, f"iobench {__version__}\n", "")


@pytest.mark.parametrize("command", ["", *COMMANDS])
def test_help_lists_every_option_and_no_python_type(cli, command):
    r = cli(*([command] if command else []), "--help")
    assert r.code == 0, r.err
    assert not PY_TYPE.search(r.out), PY_TYPE.search(r.out).group(0)
    if not command:
        return
    cmd = _commands()[command]
    for p in cmd.params:
        if p.param_type_name == "option" and not p.hidden:
            assert p.opts[0] in r.out, (command, p.opts[0])
        if p.param_type_name == "option" and p.hidden:
            assert f"{p.opts[0]} " not in r.out  # an old spelling: works, not advertised


def test_set_reads_key_value_wherever_it_is_taken():
    with_set = {
        name: p for name, cmd in _commands().items() for p in cmd.params if "--set" in p.opts
    }
    assert set(with_set) == {"run", "loader", "estimate", "datasize", "qualify", "profile", "plan",
                             "checkpoint"}  # fmt: skip
    assert {p.metavar for p in with_set.values()} == {"KEY=VALUE"}


def test_each_option_has_one_meaning_across_commands():
    """An option spelled the same in two commands takes the same kind of value."""
    seen: dict[str, set[str]] = {}
    for cmd in _commands().values():
        for p in cmd.params:
            if p.param_type_name == "option" and not p.hidden:
                for opt in p.opts:
                    seen.setdefault(opt, set()).add(p.metavar or "")
    mixed = {opt: kinds for opt, kinds in seen.items() if len(kinds) > 1}
    assert mixed == {}
    # the pairs issue 17 named: a per-phase duration and the suite budget, an AU line and a
    # regression percentage, a result directory and an export file
    opts = {name: {o for p in cmd.params if not p.hidden for o in p.opts} for name, cmd in _commands().items()}  # fmt: skip
    assert "--time" not in opts["qualify"] and "--budget" in opts["qualify"]
    assert "--threshold" not in opts["estimate"] and "--min-au" in opts["estimate"]
    assert "--threshold" in opts["compare"]
    assert "--output" not in opts["history"]


def test_qualify_help_names_the_defaults_the_dry_run_uses(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    text = " ".join(cli("qualify", "--help").out.split())
    text = re.sub(r"[│╭╮╰╯─]", " ", text)
    text = " ".join(text.split())
    profile = re.search(r"\(default ([\w.-]+)\)", text).group(1)
    budget, quick = re.search(r"\(default (\w+); --quick (\w+)\)", text).groups()
    ckpt = re.search(r"checkpoint size to estimate \(default (\w+)\)", text).group(1)
    assert parse_duration(budget) == qualify.DEFAULT_BUDGET_S
    assert parse_duration(quick) == qualify.QUICK_BUDGET_S
    assert parse_size(ckpt) == qualify.DEFAULT_CHECKPOINT
    r = cli("qualify", planted.path, "--dry-run")
    assert r.code == 0, r.err
    assert profile in r.out and profile == qualify.DEFAULT_PROFILE
    gpus = re.search(r"Accelerators the storage must feed \(default (\d+)\)", text).group(1)
    assert f"for {profile} x {gpus} GPU(s)" in r.out
    assert "budget 3.0 min" in r.out and parse_duration(budget) == 180.0
    r = cli("qualify", planted.path, "--dry-run", "--quick")
    assert "budget 30.00 s" in r.out


def test_qualify_set_overrides_the_profile(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("qualify", planted.path, "--dry-run", "--set", "batch_size=3")
    assert r.code == 0, r.err
    r2 = cli("qualify", planted.path, "--dry-run")
    assert r.out != r2.out
    r = cli("qualify", planted.path, "--dry-run", "--set", "nope=1")
    assert r.code == 2 and "nope" in r.err


def test_old_spellings_work_with_one_deprecation_line(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    new = cli("qualify", planted.path, "--dry-run", "--budget", "40s")
    old = cli("qualify", planted.path, "--dry-run", "--time", "40s")
    assert old.code == 0 and old.out == new.out
    assert old.err == "iobench: warning: --time is deprecated; use --budget\n"
    both = cli("qualify", planted.path, "--dry-run", "--time", "40s", "--budget", "40s")
    assert both.code == 2 and "give --budget once" in both.err


def test_estimate_old_threshold_spelling(cli, tmp_path):
    # the warning comes before the result is read: a missing file still shows it, then exit 2
    r = cli("estimate", tmp_path / "none.json", "--profile", "retinanet-b200", "--threshold", "0.5")
    assert r.err.splitlines()[0] == "iobench: warning: --threshold is deprecated; use --min-au"
    assert r.code == 2 and "no result at" in r.err


def test_history_help_matches_its_actions(cli, tmp_path):
    r = cli("history", "--help")
    for action in ("list", "show", "trend", "export"):
        assert action in r.out
    r = cli("history", "nope", "--history", tmp_path / "h")
    assert r.code == 2 and "list, show RUN, trend METRIC or export" in r.err
    r = cli("history", "list", "--json", "--history", tmp_path / "h")
    assert (r.code, json.loads(r.out)) == (0, [])


# Every default a help text names in words, and how the command's behaviour is checked against
# it (a new "(default ...)" must be added here, with its check).
def _check_history_default(text: str, monkeypatch) -> None:
    from pathlib import Path

    from iobench.history import default_history_url

    monkeypatch.delenv("IOBENCH_HISTORY", raising=False)
    assert default_history_url() == str(Path(text).expanduser())


def _check_output_default(text: str, monkeypatch) -> None:
    from pathlib import Path

    from iobench.run.outdir import output_dir_for

    assert text == "./iobench-results/RUN_ID"
    assert output_dir_for(None, "RUN_ID") == Path(text)


def _check_checkpoint_scale(text: str, monkeypatch) -> None:
    from iobench.spec.workload import load_workload

    assert float(text) == load_workload("llm-checkpoint").params["scale"]


def _during_defaults() -> tuple[float, float]:
    from iobench.loader.ckpt_writer import DEFAULT_AT_S, DEFAULT_SCALE

    return DEFAULT_SCALE, DEFAULT_AT_S


DURING_DEFAULTS = _during_defaults()


def _check_stall_default(text: str, monkeypatch) -> None:
    from iobench.core.units import parse_duration
    from iobench.run.stall import DEFAULT_STALL_S

    first = text.split(",")[0]
    assert parse_duration(first) == DEFAULT_STALL_S, text
    assert "stall_timeout" in text and "0: never" in text


def _check_time_default(text: str, monkeypatch) -> None:
    """The shipped workloads end each phase once steady, within the limit the help names."""
    from iobench.core.units import parse_duration
    from iobench.spec.workload import load_workload

    limit = parse_duration(text.rsplit("within ", 1)[1])
    for name in ("sequential-write", "random-read", "dataset-read"):
        params = load_workload(name).params
        assert params["steady"] is True and params["time"] == limit, name


def _check_plan_hosts(text: str, monkeypatch) -> None:
    from iobench.checkpoint.cluster import GPUS_PER_HOST

    assert text == f"GPUs ÷ {GPUS_PER_HOST}"


def _check_host_copy(text: str, monkeypatch) -> None:
    from iobench.checkpoint.inverse import HOST_COPY_BPS

    assert text == f"{HOST_COPY_BPS / 1e9:.0f} GB/s, PCIe 5.0 x16"


NAMED_DEFAULTS = {
    ("plan", "--host-copy"): _check_host_copy,
    ("checkpoint", "--host-copy"): _check_host_copy,
    ("run", "--engine"): "posix, fsspec for URLs",
    ("run", "--time"): _check_time_default,
    ("run", "--output"): _check_output_default,
    ("loader", "--gpus"): "1",
    ("loader", "--workers"): "the profile's",
    ("loader", "--steps"): "every full batch",
    ("loader", "--epochs"): "the profile's",
    ("loader", "--direct"): "when the target takes them",
    ("loader", "--output"): _check_output_default,
    ("estimate", "--gpus"): "doubling until it falls",
    ("estimate", "--min-au"): "the profile's au_min",
    ("datasize", "--host-mem"): "this host's RAM",
    ("qualify", "--profile"): qualify.DEFAULT_PROFILE,  # the dry run's: see the test above
    ("qualify", "--gpus"): "1",
    ("qualify", "--budget"): "3m; --quick 30s",
    ("qualify", "--checkpoint"): "105GB",
    ("qualify", "--output"): _check_output_default,
    ("qualify", "--history"): _check_history_default,
    ("history", "arg"): "stdout",
    ("history", "--history"): _check_history_default,
    ("history", "--format"): "FILE's extension, else csv",
    ("checkpoint", "--ranks"): "the model's",
    ("checkpoint", "--scale"): _check_checkpoint_scale,
    ("loader", "--checkpoint-scale"): f"{DURING_DEFAULTS[0]:g}",
    ("loader", "--checkpoint-at"): f"{DURING_DEFAULTS[1]:g}s",
    ("loader", "--checkpoint-every"): "once",
    ("checkpoint", "--gpus"): "the ranks",
    ("checkpoint", "--output"): _check_output_default,
    ("plan", "--accelerator"): "the profile's",
    ("plan", "--au"): "the profile's",
    ("plan", "--failure-rate"): "Llama 3's rate",
    ("plan", "--interval"): "the optimum",
    ("plan", "--recovery"): "as long as a save",
    ("plan", "--dataset"): "MLPerf Storage's minimum",
    ("plan", "--hosts"): _check_plan_hosts,
    **{
        (c, "--stall-timeout"): _check_stall_default
        for c in ("run", "qualify", "loader", "checkpoint")
    },
}


def test_every_named_default_is_registered_and_true(monkeypatch):
    found = {}
    for name, cmd in _commands().items():
        for p in cmd.params:
            for m in re.finditer(r"\(default:? ([^)]*)\)", p.help or ""):
                key = (name, p.opts[0] if p.param_type_name == "option" else p.name)
                found[key] = m.group(1)
    assert set(found) == set(NAMED_DEFAULTS)
    for key, text in found.items():
        check = NAMED_DEFAULTS[key]
        if callable(check):
            check(text, monkeypatch)
        else:
            assert text == check, key


# --help that teaches (issue 29): examples at the end, no cut example, units as types.
@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_ends_with_its_examples_uncut(cli, command, monkeypatch):
    from iobench.cli.commands.examples import EXAMPLES

    monkeypatch.setenv("COLUMNS", "80")
    r = cli(command, "--help")
    assert r.code == 0, r.err
    # rich cuts a word too long for its column with an ellipsis: every example an option's
    # help gives ("e.g. X") is shown whole at 80 columns
    shown = {w.rstrip(".") for w in re.sub(r"[│╭╮╰╯─]", " ", r.out).split()}
    for p in _commands()[command].params:
        for example in re.findall(r"e\.g\. ([^\s,)]+(?:,[^\s)]+)?)", p.help or ""):
            assert example.rstrip(".") in shown, (p.opts, example)
    lines = [ln.strip() for ln in r.out.splitlines() if ln.strip()]
    pairs = EXAMPLES[command]
    assert 1 <= len(pairs) <= 2
    tail = lines[-2 * len(pairs) - 1 :]
    assert tail[0] == "Examples:"
    assert tail[1:] == [s for what, cmd in pairs for s in (f"# {what}", cmd)]
    for _what, cmd in pairs:
        argv = cmd.split()
        assert argv[:2] == ["iobench", command]  # the example runs the command it is shown for


def test_examples_name_only_options_the_command_has():
    from iobench.cli.commands.examples import EXAMPLES

    for name, cmd in _commands().items():
        opts = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for _what, line in EXAMPLES[name]:
            used = {w for w in line.split() if w.startswith("--")}
            assert used <= opts, (name, used - opts)


DURATION_HELP = re.compile(r"e\.g\. \d+(?:ms|s|m|h|d)\b|duration|\(default \d+(?:ms|s|m|h)\b", re.I)
SIZE_HELP = re.compile(r"e\.g\. \d+(?:\.\d+)?(?:[KMGTP]i?B|k)\b|size to|\(default \d+[KMGTP]i?B\)")


def test_durations_and_sizes_show_their_type():
    """What takes a duration says DURATION and what takes a size SIZE, never TEXT."""
    seen = {"DURATION": set(), "SIZE": set()}
    for name, cmd in _commands().items():
        for p in cmd.params:
            if p.param_type_name != "option" or p.hidden or p.is_flag:
                continue
            text = p.help or ""
            if DURATION_HELP.search(text) and "--failure-rate" not in p.opts:
                assert p.metavar == "DURATION", (name, p.opts[0], p.metavar)
                seen["DURATION"].add(p.opts[0])
            elif p.opts[0] in ("--write-rate", "--read-rate", "--checkpoint-rate"):  # per second
                assert p.metavar == "BANDWIDTH", (name, p.opts[0], p.metavar)
            elif SIZE_HELP.search(text):
                assert p.metavar == "SIZE", (name, p.opts[0], p.metavar)
                seen["SIZE"].add(p.opts[0])
    assert {"--time", "--budget", "--stall-timeout", "--mtbf", "--interval", "--restart"} <= seen["DURATION"]  # fmt: skip
    assert {"--checkpoint", "--capacity", "--host-mem"} <= seen["SIZE"]


def test_require_help_names_every_requirement_key():
    from iobench.qualify.verdict import REQUIREMENT_KEYS

    p = next(p for p in _commands()["qualify"].params if "--require" in p.opts)
    assert re.findall(r"keys: ([^;]+);", p.help)[0].split(", ") == list(REQUIREMENT_KEYS)


def test_shell_completion_is_offered(cli, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "HOME": str(tmp_path)}
    r = subprocess.run([sys.executable, "-m", "iobench", "--show-completion", "bash"],
                       capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert r.returncode == 0 and "_IOBENCH_COMPLETE=complete_bash" in r.stdout, r.stderr
    env.update(_IOBENCH_COMPLETE="complete_bash", COMP_WORDS="iobench qualify --bu", COMP_CWORD="2")
    r = subprocess.run([sys.executable, "-m", "iobench"], capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert r.stdout.split() == ["--budget"], r.stderr
    assert "--install-completion" in cli("--help").out
