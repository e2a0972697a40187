"""Bad input, catalogued: every parser and the TOML loaders under random input (they return a
value or raise the one error that names the problem, never anything else), every option of
every command given an out-of-range, wrong-type or empty value, and TARGETs that are files,
links, missing or URLs of unknown protocols. Each: exit 2, one line, nothing written.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from conftest import SMALL, debris, one_line
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from iobench.core import units
from iobench.core.errors import SpecError, UsageError
from iobench.spec.workload import COMMON_PARAMS, PROFILE_PARAMS, load_profile, load_workload

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- the unit parsers ---------------------------------------------------------------------------

texts = st.one_of(
    st.text(max_size=20),
    st.from_regex(r"\s*-?[0-9]{0,4}(\.[0-9]{0,3})?([eE][+-]?[0-9]{1,4})?\s*[a-zA-Z%/]{0,5}\s*"),
)
numbers = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True))


def _value_or_usage_error(fn, value):
    try:
        return fn(value)
    except UsageError as e:
        assert e.message and "\n" not in e.one_line()
        return None


@FAST
@given(value=st.one_of(texts, numbers, st.booleans()))
@example("1e400")
@example("nan")
@example("-0")
@example("1.5 KiB")
@example("4iB")
def test_parse_size_returns_bytes_or_usage_error(value):
    got = _value_or_usage_error(units.parse_size, value)
    assert got is None or (isinstance(got, int) and got >= 0)


@FAST
@given(value=st.one_of(texts, numbers, st.booleans()))
@example("inf")
@example("500ms")
def test_parse_duration_returns_seconds_or_usage_error(value):
    got = _value_or_usage_error(units.parse_duration, value)
    assert got is None or (isinstance(got, float) and got >= 0)


@pytest.mark.parametrize("text", ["1e400", "1e400ms", "1e309s"])
def test_parse_duration_refuses_infinite(text):
    with pytest.raises(UsageError):
        units.parse_duration(text)


@FAST
@given(value=st.one_of(texts, numbers, st.booleans()))
@example("inf%")
@example("nan")
@example("-5%")
def test_parse_percent_returns_a_fraction_or_usage_error(value):
    got = _value_or_usage_error(units.parse_percent, value)
    assert got is None or (isinstance(got, float) and math.isfinite(got) and got >= 0)


@FAST
@given(value=st.one_of(texts, numbers, st.booleans()), minimum=st.integers(0, 2))
@example("1e400", 1)
@example("10k", 1)
def test_parse_count_returns_a_whole_number_or_usage_error(value, minimum):
    got = _value_or_usage_error(lambda v: units.parse_count(v, minimum=minimum), value)
    assert got is None or (isinstance(got, int) and got >= minimum)


@FAST
@given(value=texts)
@example("5GiB/s")
@example("ops/s")
@example("/s")
def test_parse_rate_returns_a_rate_or_usage_error(value):
    got = _value_or_usage_error(units.parse_rate, value)
    assert got is None or (got[1] in ("B/s", "ops/s") and got[0] >= 0)


@FAST
@given(n=st.integers(0, 2**50), unit=st.sampled_from(["", "k", "KiB", "m", "MiB", "g", "GiB"]))
def test_sizes_written_like_fio_round_trip(n, unit):
    mult = {"": 1, "k": 1 << 10, "KiB": 1 << 10, "m": 1 << 20, "MiB": 1 << 20}.get(unit, 1 << 30)
    assert units.parse_size(f"{n}{unit}") == n * mult


# -- the TOML loaders -----------------------------------------------------------------------------


def _toml_value(v) -> str:
    """A TOML literal for ``v`` (the few kinds the strategies make)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return (
            "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
        )
    if isinstance(v, str):
        return json.dumps(v)  # JSON string escapes are TOML basic-string escapes
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(v)


scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["4k", "1MiB", "0", "-1", "30s", "90%", "[]", "true", "fixed", "shared"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=2)
    ),
    max_leaves=4,
)
workload_keys = st.one_of(
    st.sampled_from(
        sorted(COMMON_PARAMS) + ["mode", "block_sizes", "jobs_sweep", "randread", "rand_jobs"]
    ),
    st.text(min_size=1, max_size=10),
)


def _check_spec_error(e: SpecError, path: Path, keys: list[str]) -> None:
    text = e.one_line()
    assert "\n" not in text
    assert str(path) in text or path.name in text, text
    named = any(k in text or repr(k) in text for k in keys)
    assert named or "malformed TOML" in text or "[params]" in text, text


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    params=st.dictionaries(workload_keys, values, max_size=4),
    generator=st.sampled_from(["sequential", "sequential", "nope", 3]),
    extra=st.dictionaries(st.sampled_from(["description", "oops", "params2"]), scalars, max_size=1),
)
def test_workload_toml_loads_or_names_file_and_key(tmp_path, params, generator, extra):
    path = tmp_path / "w.toml"
    lines = [f"generator = {_toml_value(generator)}"]
    lines += [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in extra.items()]
    lines += ["[params]"] + [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in params.items()]
    path.write_text("\n".join(lines) + "\n")
    try:
        wl = load_workload(str(path))
    except SpecError as e:
        _check_spec_error(e, path, [*params, *extra, "generator"])
    else:
        assert wl.generator == "sequential" and set(params) <= set(wl.params)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    table=st.dictionaries(
        st.one_of(st.sampled_from(sorted(PROFILE_PARAMS)), st.text(min_size=1, max_size=10)),
        values,
        max_size=4,
    )
)
def test_profile_toml_loads_or_names_file_and_key(tmp_path, table):
    path = tmp_path / "p.toml"
    path.write_text("".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in table.items()))
    try:
        load_profile(str(path))
    except SpecError as e:
        _check_spec_error(e, path, list(table))


@pytest.mark.parametrize(
    "text",
    [
        "generator = \n",
        "[params\n",
        'generator = "sequential"\nparams = 3\n',
        "\x00",
        "a = 1\na = 2\n",
    ],
    ids=["no-value", "bad-table", "params-not-a-table", "nul", "duplicate-key"],
)
def test_malformed_workload_files(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SpecError) as ei:
        load_workload(str(path))
    assert str(path) in ei.value.one_line()


# -- every option of every command ----------------------------------------------------------------


def _fixtures(tmp_path: Path) -> dict[str, str]:
    f = tmp_path / "afile"
    f.write_text("x")
    notres = tmp_path / "notresult.json"
    notres.write_text('{"a": 1}')
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"run_id": "x", "schema_version": 99}))
    prof = tmp_path / "tiny.toml"
    prof.write_text(
        'format = "raw"\nsample_size = "64KiB"\nfiles = 24\nbatch_size = 4\n'
        "compute_s = 0.01\nworkers = 2\n"
    )
    return {"F": str(f), "NR": str(notres), "NEW": str(newer), "P": str(prof),
            "N": str(tmp_path / "nope")}  # fmt: skip


S = " ".join(SMALL["sequential-write"])
# (command line with {T} the target, {F} a plain file, {P} a tiny profile, {N} a missing path,
#  {NR} JSON that is no result, {NEW} a result from a newer iobench) -> words in the line
CATALOGUE: dict[str, tuple[str, str]] = {
    # run
    "run: empty workload": ("run '' {T}", "unknown workload"),
    "run: workload file missing": ("run {N}/w.toml {T}", "does not exist"),
    "run: empty engine": ("run sequential-write {T} --engine ''", "unknown engine"),
    "run: unknown engine": ("run sequential-write {T} --engine nfs", "unknown engine 'nfs'"),
    "run: empty --set": ("run sequential-write {T} --set ''", "is not KEY=VALUE"),
    "run: --set without key": ("run sequential-write {T} --set =1", "is not KEY=VALUE"),
    "run: empty size": ("run sequential-write {T} --set size=", "size"),
    "run: negative size": ("run sequential-write {T} --set size=-1", "size"),
    "run: zero block": ("run sequential-write {T} --set block_size=0", "at least 1"),
    "run: fractional jobs": ("run sequential-write {T} --set jobs=1.5", "whole number"),
    "run: zero rate": ("run sequential-write {T} --set rate=0", "rate"),
    "run: bad fsync": ("run sequential-write {T} --set fsync=sometimes", "never, file, end"),
    "run: bad bool": ("run sequential-write {T} --set direct=maybe", "true or false"),
    "run: bad list": ("run sequential-write {T} --set block_sizes=[abc]", "block_sizes"),
    "run: zero in sweep": ("run sequential-write {T} --set jobs_sweep=[0]", "jobs_sweep"),
    "run: negative seed": ("run sequential-write {T} --set seed=-1", "seed"),
    "run: tiny rand block": ("run sequential-write {T} --set rand_block_size=100", "at least 512"),
    "run: --jobs 0": ("run sequential-write {T} --jobs 0", "jobs"),
    "run: --jobs text": ("run sequential-write {T} --jobs x", "--jobs"),
    "run: --jobs empty": ("run sequential-write {T} --jobs ''", "--jobs"),
    "run: --time negative": ("run sequential-write {T} --time -1s", "time"),
    "run: --time unit": ("run sequential-write {T} --time 1y", "time"),
    "run: --repeat 0": ("run sequential-write {T} --repeat 0", "--repeat"),
    "run: --repeat text": ("run sequential-write {T} --repeat x", "--repeat"),
    "run: --output a file": ("run sequential-write {T} --output {F}", "cannot write results"),
    "run: --output under a file": ("run sequential-write {T} --output {F}/x", "cannot write"),
    "run: --output empty": ("run sequential-write {T} --output ''", "--output is empty"),
    "run: --history protocol": ("run sequential-write {T} --history foo://x", "foo"),
    "run: URL with posix": ("run sequential-write memory://x --engine posix", "posix engine"),
    "run: more than the free space": ("run sequential-write {T} --set size=900TiB", "free"),
    "run: zero shards": ("run checkpoint-smallfile {T} --set shards=0", "shards"),
    "run: bad size_dist": ("run dataset-read {T} --set size_dist=weird", "fixed, normal"),
    "run: zero iodepth": ("run random-read {T} --set iodepth=0", "iodepth"),
    # loader
    "loader: --gpus negative": ("loader {T} --profile {P} --gpus -1", "--gpus"),
    "loader: --gpus text": ("loader {T} --profile {P} --gpus x", "--gpus"),
    "loader: --workers negative": ("loader {T} --profile {P} --workers -1", "--workers"),
    "loader: --steps 0": ("loader {T} --profile {P} --steps 0", "--steps"),
    "loader: --epochs 0": ("loader {T} --profile {P} --epochs 0", "--epochs"),
    "loader: --compute empty": ("loader {T} --profile {P} --compute ''", "--compute"),
    "loader: --profile empty": ("loader {T} --profile ''", "unknown profile"),
    "loader: --set empty": ("loader {T} --profile {P} --set ''", "is not KEY=VALUE"),
    "loader: zero files": ("loader {T} --profile {P} --set files=0", "files"),
    "loader: negative compute": ("loader {T} --profile {P} --set compute_s=-1", "compute_s"),
    "loader: negative au_min": ("loader {T} --profile {P} --set au_min=-1", "au_min"),
    "loader: bad format": ("loader {T} --profile {P} --set format=zip", "format"),
    "loader: --output a file": ("loader {T} --profile {P} --output {F}", "cannot write"),
    "loader: --output empty": ("loader {T} --profile {P} --output ''", "--output is empty"),
    "loader: --history protocol": ("loader {T} --profile {P} --history foo://x", "foo"),
    # estimate
    "estimate: missing result": ("estimate {N} --profile resnet50-h100", "no result"),
    "estimate: not JSON": ("estimate {F} --profile resnet50-h100", "cannot read result"),
    "estimate: not a result": ("estimate {NR} --profile resnet50-h100", "not an iobench result"),
    "estimate: newer result": ("estimate {NEW} --profile resnet50-h100", "newer"),
    "estimate: empty": ("estimate '' --profile resnet50-h100", "no result"),
    # datasize
    "datasize: --gpus 0": ("datasize --profile resnet50-h100 --gpus 0", "--gpus"),
    "datasize: --gpus missing": ("datasize --profile resnet50-h100", "--gpus"),
    "datasize: --hosts 0": ("datasize --profile resnet50-h100 --gpus 1 --hosts 0", "--hosts"),
    "datasize: --host-mem text": ("datasize --profile resnet50-h100 --gpus 1 --host-mem abc", "--host-mem"),
    "datasize: --host-mem negative": ("datasize --profile resnet50-h100 --gpus 1 --host-mem -1", "--host-mem"),
    "datasize: --host-mem empty": ("datasize --profile resnet50-h100 --gpus 1 --host-mem ''", "--host-mem"),
    "datasize: --host-mem 0": ("datasize --profile resnet50-h100 --gpus 1 --host-mem 0", "--host-mem"),
    "datasize: --profile missing": ("datasize --profile nope --gpus 1", "unknown profile"),
    "datasize: bad --set": ("datasize --profile resnet50-h100 --gpus 1 --set batch_size=0", "batch_size"),
    # qualify
    "qualify: --gpus 0": ("qualify {T} --gpus 0", "--gpus"),
    "qualify: --gpus text": ("qualify {T} --gpus x", "--gpus"),
    "qualify: --require value": ("qualify {T} --require read=fast", "fast"),
    "qualify: --require key": ("qualify {T} --require nope=1", "--require"),
    "qualify: --require negative": ("qualify {T} --require read=-1GiB/s", "-1GiB"),
    "qualify: --require gpus": ("qualify {T} --require gpus=1.5", "whole number"),
    "qualify: --budget short": ("qualify {T} --budget 1s", "too short"),
    "qualify: --budget text": ("qualify {T} --budget abc", "--budget"),
    "qualify: --budget infinite": ("qualify {T} --budget 1e400 --dry-run", "--budget"),
    "qualify: --checkpoint text": ("qualify {T} --checkpoint abc", "--checkpoint"),
    "qualify: --checkpoint 0": ("qualify {T} --checkpoint 0 --dry-run", "--checkpoint"),
    "qualify: --engine empty": ("qualify {T} --engine ''", "unknown engine"),
    "qualify: --profile": ("qualify {T} --profile nope", "unknown profile"),
    "qualify: --output a file": ("qualify {T} --output {F}", "cannot write"),
    "qualify: --history protocol": ("qualify {T} --history foo://x", "foo"),
    "qualify: URL": ("qualify memory://x", "mounted directory"),
    # compare
    "compare: three refs": ("compare a b c", "two references at most"),
    "compare: current alone, missing": ("compare {N}", "no such result file or directory"),
    "compare: missing": ("compare {N}/a.json {N}/b.json", "no such result"),
    "compare: not JSON": ("compare {F} {F}", "cannot read result"),
    "compare: not a result": ("compare {NR} {NR}", "not an iobench result"),
    "compare: --threshold": ("compare x --baseline latest --threshold abc", "--threshold"),
    "compare: --threshold negative": ("compare x y --threshold -5%", "--threshold"),
    "compare: --format": ("compare x y --format xml", "--format"),
    "compare: --fail-on": ("compare x y --fail-on sometimes", "--fail-on"),
    "compare: empty refs": ("compare '' ''", "empty reference"),
    "compare: empty history": ("compare latest --baseline latest", "holds 0 runs"),
    # history
    "history: action": ("history frob", "unknown history action"),
    "history: show without id": ("history show", "needs a RUN"),
    "history: trend without metric": ("history trend", "needs a METRIC"),
    "history: unknown metric": ("history trend nope.metric", "unknown metric"),
    "history: protocol": ("history list --history foo://x", "foo"),
    "history: unknown run": ("history show nope", "no run 'nope'"),
    # report
    "report: missing": ("report {N}", "no result"),
    "report: not JSON": ("report {F}", "cannot read result"),
    "report: newer": ("report {NEW}", "newer"),
    "report: empty": ("report ''", "no result"),
    # the command line itself
    "unknown command": ("frobnicate", "No such command"),
    "unknown option": ("run sequential-write {T} --frob", "--frob"),
    "missing argument": ("run sequential-write", "Missing argument"),
}  # fmt: skip


@pytest.mark.parametrize("label", list(CATALOGUE))
def test_bad_option_is_exit_2_one_line_nothing_written(cli, planted, tmp_path, monkeypatch, label):
    import shlex

    line, words = CATALOGUE[label]
    monkeypatch.chdir(tmp_path)
    subs = {**_fixtures(tmp_path), "T": str(planted.path)}
    args = [a.format(**subs) for a in shlex.split(line)]
    if args[0] == "run" and "--set" not in args and "--jobs" not in args and len(args) > 2:
        args += SMALL["sequential-write"] if args[1] == "sequential-write" else []
    r = cli(*args)
    assert r.code == 2, (label, r.code, r.err)
    text = one_line(r.err)
    assert words in text, (label, text)
    assert r.out == "", label
    assert not (tmp_path / "iobench-results").exists(), label
    assert not (tmp_path / "history").exists(), label  # the cli fixture's history dir
    assert debris(planted.path) == [] and planted.unchanged(), label


def test_checkpoint_bigger_than_memory(cli, planted, tmp_path, monkeypatch):
    """Refused as bad input (exit 2), and the empty results directory the run had made is
    removed again. (The metadata phases before it still run first: see docs/RELIABILITY.md.)"""
    from iobench.run.session import physical_memory
    from iobench.target import free_bytes

    size = int(physical_memory() * 0.6)
    if not size or free_bytes(str(planted.path)) < size * 1.2 + (1 << 30):
        pytest.skip("needs more free space than 60 % of this host's memory")
    monkeypatch.chdir(tmp_path)
    r = cli("run", "checkpoint-smallfile", planted.path, "--set", f"checkpoint_size={size}",
            "--set", "dcp=false", "--set", "files=2", "--set", "jobs=1")  # fmt: skip
    assert r.code == 2, r.err
    assert "checkpoint_size needs about" in one_line(r.err) and "host memory" in r.err
    assert not (tmp_path / "iobench-results").exists()
    assert debris(planted.path) == [] and planted.unchanged()


def test_infinite_time_is_bad_input(cli, planted, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli("run", "sequential-write", planted.path, *SMALL["sequential-write"], "--time", "1e400")
    assert r.code == 2 and "time" in one_line(r.err)
    assert not (tmp_path / "iobench-results").exists()


# -- TARGETs that are not plain directories ---------------------------------------------------


def _targets(tmp_path: Path) -> dict[str, tuple[str, str]]:
    f = tmp_path / "afile"
    f.write_text("x")
    (tmp_path / "link-to-file").symlink_to(f)
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    return {
        "a file": (str(f), "not a directory"),
        "a link to a file": (str(tmp_path / "link-to-file"), "not a directory"),
        "a dangling link": (str(tmp_path / "dangling"), "does not exist"),
        "missing": (str(tmp_path / "nope"), "does not exist"),
        "missing file:// URL": (f"file://{tmp_path}/nope", "does not exist"),
        "unknown protocol": ("foo://x", "unknown protocol 'foo'"),
        "unknown protocol with credentials": ("foo://user:hunter2@host/x", "unknown protocol"),
        "empty": ("", "TARGET is empty"),
    }


@pytest.mark.parametrize(
    "label",
    ["a file", "a link to a file", "a dangling link", "missing", "missing file:// URL",
     "unknown protocol", "unknown protocol with credentials", "empty"],
)  # fmt: skip
@pytest.mark.parametrize("command", ["run", "loader", "qualify"])
def test_unusable_target(cli, planted, tmp_path, monkeypatch, label, command):
    monkeypatch.chdir(tmp_path)
    target, words = _targets(tmp_path)[label]
    args = {
        "run": ["run", "sequential-write", target, *SMALL["sequential-write"]],
        "loader": ["loader", target, "--profile", "resnet50-h100"],
        "qualify": ["qualify", target, "--quick"],
    }[command]
    r = cli(*args)
    assert r.code == 2, r.err
    text = one_line(r.err)
    if command == "qualify" and "protocol" in label:
        words = "mounted directory"
    assert words in text, text
    assert "hunter2" not in r.err  # credentials never reach the terminal
    assert r.out == "" and not (tmp_path / "iobench-results").exists()
    assert planted.unchanged()


def test_target_is_a_link_to_a_directory_elsewhere(cli, planted, tmp_path):
    """Following a TARGET link is fine: the run directory is made in the directory it points
    to, only there, and removed; the link and everything else stay as they were."""
    link = tmp_path / "link"
    link.symlink_to(planted.path)
    r = cli("run", "sequential-write", link, *SMALL["sequential-write"], "--output",
            tmp_path / "out", "--json", "-q")  # fmt: skip
    assert r.code == 0, r.err
    res = json.loads(r.out)
    assert Path(res["target"]["run_dir"]).parent == planted.path.resolve()
    assert link.is_symlink() and os.readlink(link) == str(planted.path)
    assert debris(planted.path) == [] and planted.unchanged()
