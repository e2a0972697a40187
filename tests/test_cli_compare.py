"""compare and history through the CLI, on real runs: a slower storage is a regression."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import throttle
from conftest import SMALL

from iobench.core.units import format_rate

SEQ = [
    "--set", "size=16MiB", "--set", "jobs=1", "--set", "block_sizes=[]",
    "--set", "jobs_sweep=[]", "--set", "time=none", "--repeat", "3", "--quiet",
]  # fmt: skip


def _run(args, env, cwd):
    return subprocess.run(
        [sys.executable, "-m", "iobench", *map(str, args)],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=300,
    )  # fmt: skip


def test_slower_storage_is_a_regression(tmp_path, planted):
    why = throttle.why_unavailable(str(planted.path))
    if why:
        pytest.skip(why)
    env = {**os.environ, "IOBENCH_HISTORY": str(tmp_path / "hist")}
    base = tmp_path / "base"
    slow = tmp_path / "slow"
    p = _run(["run", "sequential-write", planted.path, "--output", base, *SEQ], env, tmp_path)
    assert p.returncode == 0, p.stderr
    base_res = json.loads((base / "result.json").read_text())
    if min(ph["bandwidth_bps"] for ph in base_res["phases"]) < 80 << 20:
        pytest.skip("the shared disk runs under 2x the 40 MiB/s throttle now: nothing to slow")
    # The same workload on the same device throttled to 40 MiB/s: a slower storage.
    with throttle.throttled(str(planted.path), 40 << 20, 40 << 20) as group:
        argv = [sys.executable, "-m", "iobench", "run", "sequential-write", str(planted.path),
                "--output", str(slow), *SEQ]  # fmt: skip
        p = subprocess.run(
            throttle.in_group(group, argv), capture_output=True, text=True, env=env, timeout=300
        )
    assert p.returncode == 0, p.stderr
    slow_res = json.loads((slow / "result.json").read_text())
    assert slow_res["phases"][0]["bandwidth_bps"] < 60 << 20

    c = _run(["compare", base, slow], env, tmp_path)
    assert c.returncode == 1, c.stdout + c.stderr
    assert "seq-write" in c.stdout and "seq-read" in c.stdout and "bandwidth" in c.stdout
    assert "regression" in c.stdout
    js = _run(["compare", base, slow, "--format", "json"], env, tmp_path)
    report = json.loads(js.stdout)
    names = {r["phase"] + "." + r["metric"] for r in report["rows"] if r["mark"] == "+"}
    assert "seq-read.bandwidth" in names
    # the writes too moved the wrong way; confirmed, or unconfirmed on a noisy disk
    assert "seq-write.bandwidth" in names | set(report["unconfirmed_worse"])

    same = _run(["compare", base, base], env, tmp_path)
    assert same.returncode == 0, same.stdout
    never = _run(["compare", base, slow, "--fail-on", "never"], env, tmp_path)
    assert never.returncode == 0
    assert planted.unchanged()


def test_compare_self_history_and_not_comparable(cli, planted, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert (
        cli(
            "run", "sequential-write", planted.path, "--output", a, *SMALL["sequential-write"], "-q"
        ).code
        == 0
    )
    assert (
        cli("run", "dataset-read", planted.path, "--output", b, *SMALL["dataset-read"], "-q").code
        == 0
    )
    r = cli("compare", a, a)
    assert r.code == 0 and "no regressions" in r.out
    r = cli("compare", a, b, "--strict")
    assert r.code == 3 and "not comparable" in r.err
    r = cli("compare", a, b)  # no phase in common: nothing compared, a gate must not pass
    assert r.code == 3 and "not comparable" in r.err
    assert "different workloads: sequential-write vs dataset-read" in r.err
    assert "nothing compared" in r.out
    # history: both runs were appended (IOBENCH_HISTORY points into tmp_path)
    r = cli("history", "list")
    assert r.code == 0 and "sequential-write" in r.out and "dataset-read" in r.out
    run_id = json.loads((a / "result.json").read_text())["run_id"]
    r = cli("history", "show", run_id)
    assert r.code == 0 and "seq-write" in r.out
    r = cli("history", "trend", "seq-write.bandwidth", "--svg", tmp_path / "t.svg")
    assert r.code == 0 and "<svg" in (tmp_path / "t.svg").read_text()
    r = cli("compare", b, "--baseline", "latest")
    assert r.code == 2 and "holds 1 run" in r.err  # the only run of its workload is itself
    c = tmp_path / "c"
    assert (
        cli("run", "dataset-read", planted.path, "--output", c, *SMALL["dataset-read"], "-q").code
        == 0
    )
    r = cli("compare", c, "--baseline", "latest")
    b_id = json.loads((b / "result.json").read_text())["run_id"]
    assert r.code in (0, 1) and b_id in r.out  # the latest run of dataset-read before c
    r = cli("compare", c)  # no baseline: the latest earlier run of its spec, host and storage
    assert r.code in (0, 1), r.err
    assert f"baseline chosen: {b_id} (" in r.out and "the latest earlier run of spec" in r.out
    r = cli("compare", b)  # nothing of its spec before b
    assert r.code == 2 and "holds no earlier complete run of spec" in r.err
    assert planted.unchanged()


@pytest.mark.parametrize(
    "args",
    [
        ["compare", "nope.json", "nope2.json"],
        ["compare", "x"],
        ["compare", "a", "b", "--format", "yaml"],
        ["compare", "a", "b", "--threshold", "ten"],
        ["compare", "a", "b", "--fail-on", "sometimes"],
        ["history", "frob"],
        ["history", "show"],
        ["report", "missing-dir"],
    ],
)
def test_compare_history_bad_input(cli, args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = cli(*args)
    assert r.code == 2, r.err
    assert len(r.err.strip().splitlines()) == 1 and "Traceback" not in r.err


def test_repeats_one_value_everywhere_with_its_spread(cli, planted, tmp_path, monkeypatch):
    """--repeat 3: the terminal, result.json, history trend and compare show the same median."""
    monkeypatch.setenv("COLUMNS", "400")  # wide enough for the unfolded table
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["run", "sequential-write", planted.path, *SMALL["sequential-write"], "--repeat", "3"]
    r = cli(*args, "--output", a)
    assert r.code == 0, r.err
    assert "Over repeats" in r.out and "n=3, " in r.out and "CV " in r.out
    res = json.loads((a / "result.json").read_text())
    write = res["phases"][0]
    bws = sorted(rep["bandwidth_bps"] for rep in write["repeats"])
    assert write["bandwidth_bps"] == bws[1]  # the median over three
    assert write["spread"]["bandwidth_bps"]["n"] == 3
    assert write["spread"]["bandwidth_bps"]["min"] == bws[0]
    r = cli("history", "trend", "seq-write.bandwidth")
    assert r.code == 0 and "over repeats" in r.out
    assert f"{format_rate(write['bandwidth_bps'])}  n=3, " in r.out
    assert cli(*args, "--output", b).code == 0
    r = cli("compare", a, b)
    assert r.code in (0, 1), r.err
    lines = r.out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("phase"))
    phase_lines = lines[header + 1 : lines.index("", header)]
    assert [line[3:].split()[:2] for line in phase_lines] == [  # one line per phase
        ["seq-write", "bandwidth"],
        ["seq-read", "bandwidth"],
    ]
    assert "(n=3, " in r.out and "every metric:" not in r.out
    verbose = cli("compare", a, b, "--verbose")
    assert "every metric:" in verbose.out and "latency_p99" in verbose.out


def test_compare_output_fits_columns(cli, planted, tmp_path, monkeypatch):
    """COLUMNS=80: every line of the table fits (it printed 798-column lines before)."""
    a, b = tmp_path / "a", tmp_path / "b"
    args = ["run", "sequential-write", planted.path, *SMALL["sequential-write"], "--repeat", "2"]
    assert cli(*args, "--output", a, "-q").code == 0
    assert cli(*args, "--output", b, "-q").code == 0
    for width in ("80", "50"):
        monkeypatch.setenv("COLUMNS", width)
        r = cli("compare", a, b, "--verbose")
        assert r.code in (0, 1), r.err
        assert max(len(line) for line in r.out.splitlines()) <= int(width), r.out
        assert "seq-read bandwidth" in r.out  # folded: one block per metric


def test_bad_tail_df_is_one_line_exit_2(cli, tmp_path):
    r = cli("compare", tmp_path / "a", tmp_path / "b", "--tail-df", "zero")
    assert r.code == 2 and r.err.count("\n") <= 1 and "--tail-df" in r.err
    assert "Traceback" not in r.err and not any(tmp_path.iterdir())
