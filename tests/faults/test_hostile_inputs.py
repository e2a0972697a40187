"""Hostile input (issue 23): files that hang or crash a reader, hand-edited or damaged result
files, workload files built to exhaust the parser, targets and environment values that used to
end in exit 4, a hang or a silent default. Each is exit 2 with one line naming the file, the
field or the variable and the value; nothing is written; nothing hangs (every case runs under a
timeout). One mechanism per family: ``inputs.open_regular`` (every input opened by name),
``inputs.loads_json`` and ``result_check`` (result files), ``inputs.check_toml_shape``
(workload files), ``target.resolve_source`` (a dataset read), ``units`` (bounds)."""

from __future__ import annotations

import copy
import json
import os
import shlex
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import SEQ, debris, iobench_cmd, one_line, sub_env

from iobench.core import inputs
from iobench.core.inputs import NotRegularFile, check_toml_shape, loads_json, open_regular
from iobench.history.schema import ESTIMATE_METRICS, LOADER_METRICS, PHASE_METRICS
from iobench.result.check import ESTIMATE_FIGURES, LOADER_FIGURES, PHASE_RATES, REPEAT_FIGURES
from iobench.result.check import REPEAT_FIGURES as RESULTS_REPEAT_FIGURES
from iobench.result.file import PhaseResult, RunResult, save

TIMEOUT_S = 60  # a hang fails the test instead of the suite


def _run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        iobench_cmd(*args), capture_output=True, text=True, timeout=TIMEOUT_S,
        env={**sub_env(tmp_path), **(env or {})}, cwd=tmp_path,
    )  # fmt: skip


# -- one open for every input: O_NONBLOCK + fstat ------------------------------------------------


def test_open_regular_never_blocks_on_a_fifo_and_names_what_it_is(tmp_path):
    fifo = tmp_path / "x.parquet"
    os.mkfifo(fifo)
    done = threading.Event()

    def opener():
        with pytest.raises(NotRegularFile) as e:
            open_regular(fifo)
        assert e.value.kind == "a FIFO" and e.value.strerror == "it is a FIFO"
        done.set()

    t = threading.Thread(target=opener, daemon=True)
    t.start()
    t.join(5)
    assert done.is_set(), "open_regular blocked on a FIFO"
    with pytest.raises(NotRegularFile, match="character device"):
        open_regular("/dev/zero")
    with pytest.raises(NotRegularFile, match="directory"):
        open_regular(tmp_path)
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    link = tmp_path / "link"
    link.symlink_to(f)
    with open_regular(link) as fh:  # links to a regular file are followed; blocking again
        assert fh.read() == b"abc"
        assert os.get_blocking(fh.fileno())


def _history_with_a_fifo(tmp_path: Path) -> Path:
    from iobench import history

    hist = tmp_path / "hist"
    run = RunResult("20260101T000000Z-aaaaaa", "iobench run x", "2026-01-01T00:00:00+00:00")
    run.phases = [PhaseResult("seq-read", "read", bytes=1 << 20, ops=1, bandwidth_bps=1e8, iops=1)]
    history.append(run, str(hist))
    os.mkfifo(hist / "zz-fifo.parquet")
    return hist


@pytest.mark.parametrize(
    "command", ["history list", "compare latest latest", "history trend seq-read.bandwidth"]
)
def test_a_fifo_named_parquet_in_the_history_never_hangs(tmp_path, command):
    """Used to hang `history list` and `compare` (the open of the FIFO blocked for ever)."""
    hist = _history_with_a_fifo(tmp_path)
    r = _run(tmp_path, *shlex.split(command), "--history", str(hist))  # returns: no hang
    assert "Traceback" not in r.stderr
    assert r.returncode == 0, r.stderr
    if command.startswith("history"):  # compare keeps its own counsel on skipped files
        assert "zz-fifo.parquet: it is a FIFO, not a history file (never opened)" in r.stderr


@pytest.mark.parametrize("kind", ["fifo", "device", "file"])
def test_a_history_that_is_not_a_directory_is_named(tmp_path, kind):
    """`history list --history FIFO|/dev/zero` used to say "no runs" (exit 0)."""
    path = {"device": "/dev/zero", "file": str(tmp_path / "f"), "fifo": str(tmp_path / "p")}[kind]
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "file":
        Path(path).write_text("x")
    r = _run(tmp_path, "history", "list", "--history", path)
    assert r.returncode == 2, r.stderr
    assert "not a directory" in one_line(r.stderr) and path in r.stderr


def test_a_run_with_a_history_that_is_a_fifo_keeps_its_result_and_the_fifo(tmp_path):
    """Storing is a side effect of a run (DESIGN): a FIFO given as the history is a warning in
    the result, never opened, never replaced; the run completes."""
    fifo = tmp_path / "hist"
    os.mkfifo(fifo)
    target = tmp_path / "t"
    target.mkdir()
    r = _run(tmp_path, "run", "sequential-write", str(target), "--set", "size=1MiB", *SEQ,
             "--history", str(fifo), "--output", str(tmp_path / "out"), "-q")  # fmt: skip
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert any(w.startswith("history not updated") for w in res["warnings"]), res["warnings"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and debris(target) == []


# -- result files: bounded JSON, every figure validated --------------------------------------


def _result(tmp_path: Path) -> dict:
    run = RunResult("20260101T000000Z-bbbbbb", "iobench run x", "2026-01-01T00:00:00+00:00")
    run.workload = {"name": "w", "spec_hash": "h"}
    for name, op in (("seq-write", "write"), ("seq-read", "read")):
        run.phases.append(
            PhaseResult(
                name,
                op,
                bytes=64 << 20,
                ops=64,
                elapsed_s=0.5,
                bandwidth_bps=128e6,
                iops=128.0,
                bandwidth_stonewall_bps=128e6,
                latency_s={"mean": 1e-3, "p50": 1e-3, "p99": 2e-3},
            )  # fmt: skip
        )
    save(run, tmp_path / "base")
    return json.loads((tmp_path / "base" / "result.json").read_text())


def _bandwidth(value):
    def edit(d):
        d["phases"][1]["bandwidth_bps"] = value

    return edit


BAD_VALUES = {
    "NaN bandwidth": (_bandwidth(float("nan")), "phases[1] (seq-read).bandwidth_bps = nan is not a finite number"),
    "inf bandwidth": (_bandwidth(float("inf")), "bandwidth_bps = inf is not a finite number"),
    "string bandwidth": (_bandwidth("fast"), "bandwidth_bps = 'fast' is not a number"),
    "negative bandwidth": (_bandwidth(-5.0), "bandwidth_bps = -5.0 is negative"),
    "boolean bandwidth": (_bandwidth(True), "bandwidth_bps = True is not a number"),
    "string bytes": (lambda d: d["phases"][0].update(bytes="x"), "phases[0] (seq-write).bytes = 'x' is not a number"),
    "latency NaN": (lambda d: d["phases"][0]["latency_s"].update(p99=float("nan")), "latency_s.p99 = nan"),
    "repeat negative": (lambda d: d["phases"][0].update(repeats=[{"bandwidth_bps": -1}]), "repeats[0].bandwidth_bps = -1 is negative"),
    "loader au string": (lambda d: d.update(loader={"au": "high"}), "loader.au = 'high' is not a number"),
    "estimate inf": (lambda d: d.update(estimate={"max_gpus": float("inf")}), "estimate.max_gpus = inf"),
    "phases not a list": (lambda d: d.update(phases={"a": 1}), "not an iobench result (result.phases"),
    "host a string": (lambda d: d.update(host="h"), "not an iobench result (result.host = 'h' is not an object"),
}  # fmt: skip


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("label", list(BAD_VALUES))
def test_a_bad_value_in_a_result_is_exit_2_naming_file_field_and_value(tmp_path, label, command):
    """compare used to drop NaN/inf/"fast" silently (exit 0) and take -5 as a regression
    (exit 1); report raised TypeError (exit 4)."""
    d = _result(tmp_path)
    edit, words = BAD_VALUES[label]
    edit(d)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    args = (
        ("compare", str(tmp_path / "base"), str(bad))
        if command == "compare"
        else ("report", str(bad))
    )
    r = _run(tmp_path, *args)
    assert r.returncode == 2, (label, r.returncode, r.stderr)
    line = one_line(r.stderr)
    assert "bad.json" in line and words in line, (label, line)
    assert r.stdout == ""


def _hist(**kv):
    def edit(d):
        h = {"sub_buckets": 64, "count": 2, "sum_ns": 2000, "min_ns": 900, "max_ns": 1100,
             "buckets": {"100": 2}}  # fmt: skip
        h.update(kv)
        d["phases"][0]["histogram"] = h

    return edit


# What only the HTML report's plots read: report --html used to be exit 4 "internal error"
# (TypeError, IndexError) on a damaged histogram, and drew a series of strings or NaN.
BAD_PLOTTED = {
    "histogram count a list": (_hist(count=[1]), "histogram.count = [1] is not a number"),
    "histogram count a string": (_hist(count="x"), "histogram.count = 'x' is not a number"),
    "histogram layout 0": (_hist(sub_buckets=0), "histogram.sub_buckets = 0 is not 64"),
    "bucket beyond the layout": (_hist(buckets={"99999": 1}), "'99999' is not a bucket index"),
    "bucket negative index": (_hist(buckets={"-1": 1}), "'-1' is not a bucket index"),
    "bucket a superscript digit": (_hist(buckets={"²": 1}), "'²' is not a bucket index"),
    "bucket count fractional": (_hist(buckets={"5": 1.5}), "buckets[5] = 1.5 is not a whole number"),
    "series of strings": (lambda d: d["phases"][0].update(series=["x"]), "series[0] = 'x' is not a number"),
    "series NaN": (lambda d: d["phases"][0].update(series=[1.0, float("nan")]), "series[1] = nan"),
    "ops series negative": (lambda d: d["phases"][0].update(ops_series=[-1]), "ops_series[0] = -1 is negative"),
}  # fmt: skip


@pytest.mark.parametrize("label", list(BAD_PLOTTED))
def test_a_damaged_histogram_or_series_is_exit_2_naming_it(tmp_path, label):
    d = _result(tmp_path)
    edit, words = BAD_PLOTTED[label]
    edit(d)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(d))
    html = tmp_path / "r.html"
    r = _run(tmp_path, "report", str(bad), "--html", str(html))
    assert r.returncode == 2, (label, r.returncode, r.stderr)
    line = one_line(r.stderr)
    assert "bad.json" in line and words in line, (label, line)
    assert r.stdout == "" and not html.exists()


HUGE = {
    "integer 10**400": lambda s: s.replace('"bytes": 67108864', '"bytes": 1' + "0" * 400, 1),
    "integer of 5,000 digits": lambda s: s.replace('"ops": 64', '"ops": ' + "9" * 5000, 1),
    "100,000 nested brackets": lambda s: s[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "100 nested objects": lambda s: s[:-1] + ', "extra": ' + '{"a":' * 100 + "1" + "}" * 100 + "}",
}


@pytest.mark.parametrize("command", ["compare", "report"])
@pytest.mark.parametrize("label", list(HUGE))
def test_huge_numbers_and_deep_nesting_are_exit_2_not_internal_errors(tmp_path, label, command):
    """Used to be exit 4 "internal error" (OverflowError, RecursionError)."""
    text = json.dumps(_result(tmp_path), indent=None)
    bad = tmp_path / "bad.json"
    bad.write_text(HUGE[label](text))
    assert bad.read_text() != text
    args = (
        ("compare", str(tmp_path / "base"), str(bad))
        if command == "compare"
        else ("report", str(bad))
    )
    r = _run(tmp_path, *args)
    assert r.returncode == 2, (label, r.stderr)
    line = one_line(r.stderr)
    assert "bad.json" in line and ("beyond" in line or "nested more than" in line), line
    if "integer" in label:
        assert "phases[0]." in line  # the field is named


def test_loads_json_names_the_field_of_a_huge_integer():
    with pytest.raises(ValueError, match=r"a\[1\]\.b = 100000000000…\(401 digits\)"):
        loads_json('{"a": [0, {"b": ' + str(10**400) + "}]}")
    assert loads_json('{"a": 18446744073709551615}') == {"a": 2**64 - 1}


def test_a_missing_figure_is_not_measured_never_a_zero_regression(tmp_path):
    """A result without seq-read's bandwidth used to compare as a measured 0.0 MiB/s
    (a −100 % regression, exit 1); now it is not measured on that side."""
    d = _result(tmp_path)
    del d["phases"][1]["bandwidth_bps"]
    cur = tmp_path / "cur.json"
    cur.write_text(json.dumps(d))
    r = _run(tmp_path, "compare", str(tmp_path / "base"), str(cur), "-v")
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(ln for ln in r.stdout.splitlines() if "seq-read" in ln and " bandwidth " in ln)
    assert row.startswith("x") and "not measured" in row and "0.0 B/s" not in row
    assert r.stdout.splitlines()[-1].startswith("no regressions: ")
    from iobench.result.file import load

    phase = load(cur).phases[1]
    assert phase.bandwidth_bps is None and phase.iops == 128.0
    rep = _run(tmp_path, "report", str(cur))
    assert rep.returncode == 0, rep.stderr


def test_every_figure_the_history_reads_is_validated():
    """The validator's lists cover every metric compare and the history read."""
    assert set(REPEAT_FIGURES) == set(RESULTS_REPEAT_FIGURES)
    assert {k for k, *_ in PHASE_METRICS.values() if "." not in k} <= set(PHASE_RATES)
    assert {k for k, *_ in LOADER_METRICS.values()} <= set(LOADER_FIGURES)
    assert {k for k, *_ in ESTIMATE_METRICS.values()} <= set(ESTIMATE_FIGURES)


def test_a_bad_value_in_a_history_file_is_named_with_the_file(tmp_path):
    from iobench import history
    from iobench.core.errors import UsageError

    run = RunResult("20260101T000000Z-cccccc", "iobench run x", "2026-01-01T00:00:00+00:00")
    run.phases = [PhaseResult("seq-read", "read", bytes=1, ops=1, bandwidth_bps=-3.0)]
    hist = tmp_path / "h"
    history.append(run, str(hist))  # the writer does not validate: a damaged file stands in
    with pytest.raises(
        UsageError,
        match=r"history file .*cccccc\.parquet: phases\[0\] \(seq-read\)\.bandwidth_bps = -3.0 is negative",
    ):
        history.get_run("20260101T000000Z-cccccc", str(hist))


# -- workload files: bounded before tomllib --------------------------------------------------

TOML = {
    "100,000 nested arrays": ('generator = "sequential"\nx = ' + "[" * 100_000 + "]" * 100_000,
                              "line 2: arrays or tables nested more than 32 deep"),
    "100,000 nested inline tables": ('generator = "sequential"\nx = ' + "{a=" * 100_000 + "1" + "}" * 100_000,
                                     "nested more than 32 deep"),
    "200 KB dotted key": ("a" + ".a" * 100_000 + "b=1\n", "line 1: a dotted key of more than 32 parts"),
    "dotted table header": ("[" + ".".join(["t"] * 40) + "]\n", "a dotted key of more than 32 parts"),
}  # fmt: skip


@pytest.mark.parametrize("label", list(TOML))
def test_workload_files_built_to_exhaust_the_parser_are_exit_2(tmp_path, label):
    """Used to be exit 4 (RecursionError) or a hang (tomllib is quadratic in a key's parts)."""
    text, words = TOML[label]
    wl = tmp_path / "w.toml"
    wl.write_text(text)
    target = tmp_path / "t"
    target.mkdir()
    r = _run(tmp_path, "run", str(wl), str(target))
    assert r.returncode == 2, r.stderr
    line = one_line(r.stderr)
    assert "w.toml" in line and words in line, line
    assert debris(target) == []


def test_the_toml_scan_passes_every_shipped_file_and_skips_strings_and_comments():
    root = Path(__file__).resolve().parents[2] / "workloads"
    for p in root.rglob("*.toml"):
        assert check_toml_shape(p.read_text()) is None, p
    text = 'a."b.c.d".e = 1\ns = """\n' + "[" * 50 + '\n"""\n# ' + "[" * 50 + "\nx = [[1.5, 2.5]]\n"
    assert check_toml_shape(text) is None
    assert check_toml_shape("x = " + "[" * 32 + "]" * 32) is None
    assert check_toml_shape("x = " + "[" * 33 + "]" * 33) is not None
    assert inputs.MAX_TOML_KEY_PARTS == 32


# -- targets, environment, options -----------------------------------------------------------

CASES = {
    # profile: the dataset is checked as a TARGET is (used to be exit 4 "internal error")
    "profile /proc": ("profile /proc --output {D}/p.toml", "dataset /proc is on proc, a kernel interface"),
    "profile ftp refused": ("profile ftp://127.0.0.1:1/x --output {D}/p.toml", "dataset ftp://127.0.0.1:1/x cannot be opened"),
    "profile s3 credentials": ("profile s3://AKIAKEY:S3CRET@bkt/x --output {D}/p.toml", "dataset s3://***@bkt/x has credentials"),
    "profile file:// empty": ("profile file:// --output {D}/p.toml", "dataset 'file://' names no directory"),
    # file:// with an empty path used to run in the working directory
    "run file:// empty": ("run sequential-write file://", "target 'file://' names no directory"),
    "history file:// empty": ("history list --history file://", "history 'file://' names no directory"),
    "run --history file:// empty": ("run sequential-write {T} --history file://", "history 'file://' names no directory"),
    "loader file:// empty": ("loader file:// --profile resnet50-a100", "target 'file://' names no directory"),
    # bounds
    "stall-timeout 1ms": ("run sequential-write {T} --stall-timeout 1ms", "--stall-timeout 1ms is shorter than the watchdog's period (1 s)"),
    "stall-timeout 100000d": ("run sequential-write {T} --stall-timeout 100000d", "--stall-timeout 100000d is longer than 7 days"),
    "stall_timeout key 1ms": ("run sequential-write {T} --set stall_timeout=1ms", "--set: stall_timeout 1ms is shorter"),
    "run --repeat 100000": ("run sequential-write {T} --repeat 100000", "--repeat 100,000 is more than 1,000 repeats"),
    "checkpoint --repeat 100000": ("checkpoint {T} --model llama3-8b --repeat 100000", "--repeat 100,000 is more than 1,000"),
    "checkpoint --interval 1e300s": ("checkpoint {T} --model llama3-8b --interval 1e300s", "--interval 1e300s is longer than 7 days"),
    "--set nested list": ("run sequential-write {T} --set block_sizes=[[[[1]]]]", "block_sizes = '[[[[1]]]]' is not valid"),
    # found by the issue-23 audit: loader --existing checked its dataset apart from profile's
    # ("dataset  does not exist"; /proc scanned as a dataset), profile --scale unbounded
    "loader --existing file:// empty": ("loader file:// --existing", "dataset 'file://' names no directory"),
    "loader --existing /proc": ("loader /proc/sys --existing", "dataset /proc/sys is on proc, a kernel interface"),
    "profile --scale 1e300": ("profile {T} --scale 1e300 --output {D}/p.toml", "--scale must be more than 0 and at most 1,000,000,000, got 1e+300"),
}  # fmt: skip


@pytest.mark.parametrize("label", list(CASES))
def test_bad_targets_and_options_are_exit_2_nothing_written(tmp_path, label):
    line, words = CASES[label]
    target = tmp_path / "t"
    target.mkdir()
    args = [a.format(T=target, D=tmp_path) for a in shlex.split(line)]
    quiet = () if args[0] in ("profile", "history") else ("-q",)
    r = _run(tmp_path, *args, *quiet)
    assert r.returncode == 2, (label, r.returncode, r.stderr)
    assert words in one_line(r.stderr), (label, r.stderr)
    assert "S3CRET" not in r.stderr + r.stdout
    assert debris(target) == [] and debris(tmp_path) == []
    assert not (tmp_path / "iobench-results").exists() and not (tmp_path / "p.toml").exists()


def test_a_profile_scaled_beyond_the_count_bound_is_refused_before_the_write(tmp_path):
    """``profile --scale`` that makes more files than a profile may hold used to fail in the
    check of the written temporary file: a line naming ``.p.toml.<hex>.tmp`` and a number of
    300 digits. Now refused naming --scale and the largest that fits, nothing written."""
    pytest.importorskip("PIL", reason="Pillow is the images extra")
    from existing_datasets import images

    ds = tmp_path / "DS"
    images(ds)  # 12 files
    out = tmp_path / "p.toml"
    r = _run(tmp_path, "profile", str(ds), "--scale", "1e9", "--output", str(out))
    assert r.returncode == 2, r.stderr
    line = one_line(r.stderr)
    assert "--scale 1e+09 makes 12 files 12,000,000,000, more than 1,000,000,000" in line, line
    assert "give --scale 83333333 or less" in line and ".tmp" not in line
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    r = _run(tmp_path, "profile", str(ds), "--scale", "83333333", "--output", str(out))
    assert r.returncode == 0, r.stderr  # the scale the line gives fits


MODELS = {  # a checkpoint model file's key set to a size whose layout takes hours to sum
    "layers 10**9": ("layers", "1000000000", "1,000,000,000 layers, more than 100,000"),
    "dp 10**9": ("dp", "1000000000", "1,000,000,000 ranks, more than the 1,048,576 accelerators"),
    "dp 2**20 as threads": ("dp", "1048576", "1048576 ranks would run as threads of one process"),
}


@pytest.mark.parametrize("label", list(MODELS))
def test_a_checkpoint_model_too_big_to_lay_out_is_refused_at_once(tmp_path, label):
    """``layers = 1000000000`` in a model file made ``checkpoint --dry-run`` and ``plan`` run
    for hours (the layout is summed per layer and rank), ``dp = 1048576`` for minutes before
    the thread-rank bound refused it (found by the issue-23 audit)."""
    key, value, words = MODELS[label]
    shipped = Path(__file__).resolve().parents[2] / "workloads" / "checkpoints" / "llama3-8b.toml"
    lines = [ln for ln in shipped.read_text().splitlines() if not ln.startswith(f"{key} ")]
    model = tmp_path / "m.toml"
    model.write_text("\n".join([*lines, f"{key} = {value}", ""]))
    target = tmp_path / "t"
    target.mkdir()
    argvs = [("checkpoint", str(target), "--model", str(model), "--dry-run")]
    if "threads" not in label:
        argvs.append(("plan", "--gpus", "8", "--model", str(model), "--goodput", "95%",
                      "--mtbf", "10d"))  # fmt: skip
    for argv in argvs:
        r = _run(tmp_path, *argv)  # TIMEOUT_S: the old layout would have hung the test here
        assert r.returncode == 2, (argv[0], r.stderr)
        assert words in one_line(r.stderr), (argv[0], r.stderr)
    assert debris(target) == []


@pytest.mark.parametrize(
    "var,value,words",
    [
        ("IOBENCH_SUPERVISE", "garbage", "IOBENCH_SUPERVISE='garbage' is not a supervision mode"),
        ("IOBENCH_WORKLOADS", "/nonexistent", "IOBENCH_WORKLOADS='/nonexistent' does not exist"),
        ("IOBENCH_WORKLOADS", "/dev/null", "IOBENCH_WORKLOADS='/dev/null' is not a directory"),
    ],
)
def test_environment_values_that_mean_nothing_are_named(tmp_path, var, value, words):
    """IOBENCH_SUPERVISE=garbage used to be ignored; IOBENCH_WORKLOADS=/nonexistent gave an
    empty workload list without naming the variable."""
    target = tmp_path / "t"
    target.mkdir()
    r = _run(tmp_path, "run", "sequential-write", str(target), "--set", "size=1MiB", *SEQ, "-q",
             env={var: value})  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert words in one_line(r.stderr)
    assert debris(target) == [] and not (tmp_path / "iobench-results").exists()


@pytest.mark.parametrize("kind", ["fifo", "device", "dangling"])
def test_a_named_workload_that_is_no_file_is_named_as_what_it_is(tmp_path, kind):
    """A FIFO (a device, a dangling link) named ``NAME.toml`` in IOBENCH_WORKLOADS used to be
    "unknown workload 'NAME'; choose one of: NAME, …" (listed, then refused unnamed)."""
    wl = tmp_path / "wl"
    wl.mkdir()
    node = wl / "evil.toml"
    if kind == "fifo":
        os.mkfifo(node)
    elif kind == "device":
        node.symlink_to("/dev/zero")
    else:
        node.symlink_to(tmp_path / "nowhere")
    target = tmp_path / "t"
    target.mkdir()
    r = _run(tmp_path, "run", "evil", str(target), "-q", env={"IOBENCH_WORKLOADS": str(wl)})
    assert r.returncode == 2, r.stderr
    line = one_line(r.stderr)
    what = {
        "fifo": "is a FIFO",
        "device": "is a character device",
        "dangling": "which does not exist",
    }
    assert f"workload file {node}" in line and what[kind] in line, line
    assert "unknown workload" not in line and debris(target) == []


def test_markdown_escapes_html_from_names(tmp_path):
    """`report --markdown` passed raw <script> from phase, target and workload names."""
    d = _result(tmp_path)
    d["phases"][0]["name"] = "<script>alert(1)</script>"
    d["workload"]["name"] = "<img src=x onerror=alert(1)>"
    d["target"] = {"path_or_url": "/t/<b>x</b>"}
    src = tmp_path / "x.json"
    src.write_text(json.dumps(d))
    r = _run(tmp_path, "report", str(src), "--markdown")
    assert r.returncode == 0, r.stderr
    assert "<" not in r.stdout and ">" not in r.stdout.replace("&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in r.stdout
    assert "&lt;img src=x onerror=alert(1)&gt;" in r.stdout
    # compare's markdown (a CI comment) through the same escape; the same workload name on
    # both sides (different workloads are not comparable: exit 3, nothing rendered)
    d["started_at"] = "<b>2026</b>"
    d["workload"]["name"] = json.loads((tmp_path / "base" / "result.json").read_text())["workload"][
        "name"
    ]
    src.write_text(json.dumps(d))
    c = _run(tmp_path, "compare", str(tmp_path / "base"), str(src), "--format", "markdown", "-v")
    assert c.returncode in (0, 1), c.stderr
    assert "<" not in c.stdout and "&lt;script&gt;" in c.stdout and "&lt;b&gt;2026" in c.stdout


def test_only_a_phase_read_from_a_file_lacks_its_rates():  # built phases keep 0.0
    p = PhaseResult("a", "read")
    assert p.bandwidth_bps == 0.0 and copy.copy(p).iops == 0.0
    assert PhaseResult.from_dict({"name": "a", "op": "read"}).bandwidth_bps is None


# -- torchrun with its agent killed ------------------------------------------------------------


def test_the_store_holder_is_named_never_this_rank():
    from iobench.distributed.comm import store_holder_gone

    agent = store_holder_gone({"TORCHELASTIC_USE_AGENT_STORE": "True", "RANK": "0"})
    assert "torchrun's agent, which holds it, has exited" in agent
    assert "rank 0" in store_holder_gone({"RANK": "1"})
    assert "(rank 0) has exited" not in store_holder_gone({"RANK": "0"})


@pytest.mark.slow
def test_torchrun_with_its_agent_killed_blames_the_agent_in_one_line_per_rank(tmp_path):
    """Used to: rank 0 said the rank that holds the store (rank 0, itself) had exited, and
    66 lines of TCPStore C++ warnings (stack frames) reached stderr."""
    import signal
    import sys
    import time

    target = tmp_path / "t"
    target.mkdir()
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           "-m", "iobench", "run", "sequential-write", str(target), "--set", "size=16MiB",
           "--set", "rate=4MiB", *SEQ, "--output", str(out)]  # fmt: skip
    env = {**sub_env(tmp_path), "IOBENCH_DIST_TIMEOUT": "10"}
    env.pop("TORCH_CPP_LOG_LEVEL", None)
    log = tmp_path / "log"
    with open(log, "w") as f:
        agent = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while not list(target.glob(".iobench-*-r1/seq/r1-w0.dat")):
            assert time.monotonic() < deadline and agent.poll() is None, log.read_text()[-2000:]
            time.sleep(0.05)
        time.sleep(0.5)
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        deadline = time.monotonic() + 90  # the ranks outlive their agent: wait for them
        while "rank 0: " not in log.read_text() or "rank 1: " not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
    text = log.read_text()
    assert "frame #" not in text and "TCPStore.cpp" not in text, text[-3000:]
    errors = [ln for ln in text.splitlines() if ln.startswith("iobench: error: ")]
    assert len(errors) == 2, text[-3000:]
    for ln in errors:
        assert "torchrun's agent, which holds it, has exited" in ln, ln
        assert "(rank 0) has exited" not in ln
    assert json.loads((out / "result.json").read_text())["status"] in ("partial", "failed")
