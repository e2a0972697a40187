"""Faults of ``iobench loader --existing`` (the user's own dataset): corrupt shards count the
samples they held, inputs that would block (FIFOs, a transform that never returns) end the
run within the stall timeout naming what blocked, the first signal ends it, a file too large
to read whole and absurd ``--workers`` are refused, links out of the dataset are skipped.

Every run that could hang runs in its own session with a timeout; whatever is left of that
session is killed afterwards (``_session_run``)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import iobench_cmd, one_line, snapshot, sub_env

pytest.importorskip("PIL", reason="Pillow is the images extra")
pytest.importorskip("pyarrow", reason="pyarrow is the parquet extra")

from existing_datasets import images, npz

BASE = ["--set", "compute_s=1ms", "--no-history", "--json", "-q"]


def _cli(cli, data, out, *args):
    return cli("loader", data, "--existing", *BASE, "--output", out, *args)


def _session_procs(sid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append(int(d))
    return out


def _session_run(tmp_path, args, *, timeout=60.0, mods=None, signal_when=None):
    """Run iobench in a new session; (code, stderr, seconds); ``signal_when``: (a path whose
    appearance sends SIGINT, once). Asserts that nothing of the session outlives it."""
    env = sub_env(tmp_path)
    if mods:
        env["PYTHONPATH"] = os.pathsep.join((str(mods), env["PYTHONPATH"]))
    proc = subprocess.Popen(
        iobench_cmd(*args), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, text=True,
    )  # fmt: skip
    t0 = time.monotonic()
    try:
        if signal_when is not None:
            deadline = time.monotonic() + timeout
            while not signal_when.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.3)  # inside the transform's sleep
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=timeout)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    deadline = time.monotonic() + 10
    while _session_procs(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _session_procs(proc.pid)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind: {left}"
    return proc.returncode, err, took


def _mods(tmp_path: Path) -> Path:
    mods = tmp_path / "mods"
    mods.mkdir(exist_ok=True)
    (mods / "lx_tf.py").write_text(
        "import os, pathlib, time\n"
        "def block(x):\n"
        "    pathlib.Path(os.environ['LX_MARK']).touch()\n"
        "    time.sleep(3600)\n"
        "def slow(x):\n"
        "    time.sleep(0.4)\n"
        "    return x\n"
        "def boom(x):\n"
        "    raise RuntimeError('augment failed')\n"
        "def to_fifos(x):\n"
        "    # the first sample's transform swaps every file of the dataset for a FIFO\n"
        "    root = pathlib.Path(os.environ['LX_DATA'])\n"
        "    if not (root.parent / 'swapped').exists():\n"
        "        (root.parent / 'swapped').touch()\n"
        "        for p in sorted(root.rglob('*.jpg')):\n"
        "            p.unlink()\n"
        "            os.mkfifo(p)\n"
        "    return x\n"
        "def to_links(x):\n"
        "    # the first sample's transform swaps every file for a link out of the dataset\n"
        "    root = pathlib.Path(os.environ['LX_DATA'])\n"
        "    if not (root.parent / 'swapped').exists():\n"
        "        (root.parent / 'swapped').touch()\n"
        "        for p in sorted(root.rglob('*.jpg')):\n"
        "            p.unlink()\n"
        "            p.symlink_to(root.parent / 'secret.jpg')\n"
        "    return x\n"
    )
    return mods


# -- a corrupt shard counts its samples -------------------------------------------------------


def _parquet(path: Path, rows: int = 1000) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(3)
    t = pa.table({"x": pa.array(rng.random(rows).astype(np.float32)),
                  "label": pa.array(np.arange(rows) % 5)})  # fmt: skip
    buf = io.BytesIO()
    pq.write_table(t, buf, row_group_size=250)
    path.write_bytes(buf.getvalue())
    return buf.getvalue()


def test_a_corrupt_parquet_shard_counts_the_samples_it_held(cli, tmp_path):
    import pyarrow.parquet as pq

    data = tmp_path / "data"
    data.mkdir()
    for i in range(4):
        body = _parquet(data / f"part-{i}.parquet")
    # part-1: its footer readable, its second row group's page header overwritten: the footer
    # says 1,000 rows, 250 were read, so 750 failed
    b = bytearray(body)
    col = pq.ParquetFile(io.BytesIO(body)).metadata.row_group(1).column(0)
    off = col.dictionary_page_offset or col.data_page_offset
    b[off : off + 40] = b"\xff" * 40
    (data / "part-1.parquet").write_bytes(bytes(b))
    # part-3: unreadable throughout (no footer): its bytes' share of samples, estimated
    (data / "part-3.parquet").write_bytes(b"PAR1" + bytes(len(body) - 4))
    r = _cli(cli, data, tmp_path / "out", "--workers", "0", "--set", "batch_size=100")
    assert r.code == 4, r.err
    line = one_line(r.err)
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    failed = res["loader"]["existing"]["failed"]
    assert failed["ok"] == 2250 and failed["files"] == 2
    assert failed["estimated"] == 1000  # same bytes as a 1,000-row file
    assert failed["count"] == 750 + 1000 and failed["share"] == pytest.approx(1750 / 4000)
    assert "1,750 of 4,000 samples failed (43.8%, 1,000 of them estimated" in line
    assert "samples per" in failed["basis"] and "read whole" in failed["basis"]


# -- inputs that would block: FIFOs, a blocking transform, the first Ctrl-C ------------------


def test_files_swapped_for_fifos_mid_run_are_failed_files_not_a_hang(tmp_path):
    data = tmp_path / "data"
    images(data, per_class=10)
    mods = _mods(tmp_path)
    os.environ["LX_DATA"] = str(data)
    try:
        code, err, took = _session_run(
            tmp_path,
            ["loader", data, "--existing", *BASE, "--output", tmp_path / "out", "--workers",
             "0", "--set", "batch_size=2", "--transform", "lx_tf:to_fifos",
             "--stall-timeout", "5s"],
            mods=mods,
        )  # fmt: skip
    finally:
        del os.environ["LX_DATA"]
    assert code == 4, err
    line = one_line(err)
    assert "a FIFO, not a regular file: not read" in line and ".jpg" in line
    assert took < 30


@pytest.mark.parametrize("workers", [0, 2])
def test_a_blocking_transform_gives_up_within_the_stall_timeout_naming_it(tmp_path, workers):
    data = tmp_path / "data"
    images(data, per_class=4)
    before = snapshot(data)
    os.environ["LX_MARK"] = str(tmp_path / "mark")
    try:
        code, err, took = _session_run(
            tmp_path,
            ["loader", data, "--existing", *BASE, "--output", tmp_path / "out", "--workers",
             str(workers), "--set", "batch_size=2", "--transform", "lx_tf:block",
             "--stall-timeout", "2s"],
            mods=_mods(tmp_path),
        )  # fmt: skip
    finally:
        del os.environ["LX_MARK"]
    assert code == 4, err
    line = one_line(err)
    assert "phase loader made no progress for 2 s" in line
    assert "worker 0 in the transform lx_tf:block on " in line and "--stall-timeout 2s" in line
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["status"] == "failed" and "lx_tf:block" in res["error"]
    assert snapshot(data) == before


def test_a_slow_transform_that_moves_is_no_stall(tmp_path):
    """Each batch takes 1.6 s, over the 1 s stall timeout: every sample transformed is
    progress (the workers' steps in shared memory), so the run completes."""
    data = tmp_path / "data"
    images(data, per_class=4)
    code, err, _took = _session_run(
        tmp_path,
        ["loader", data, "--existing", *BASE, "--output", tmp_path / "out", "--workers", "1",
         "--set", "batch_size=4", "--transform", "lx_tf:slow", "--stall-timeout", "1s"],
        mods=_mods(tmp_path),
    )  # fmt: skip
    assert code == 0, err


@pytest.mark.parametrize("workers", [0, 2])
def test_the_first_sigint_ends_a_loader_stuck_in_the_transform(tmp_path, workers):
    data = tmp_path / "data"
    images(data, per_class=4)
    mark = tmp_path / "mark"
    os.environ["LX_MARK"] = str(mark)
    try:
        code, err, took = _session_run(
            tmp_path,
            ["loader", data, "--existing", *BASE, "--output", tmp_path / "out", "--workers",
             str(workers), "--set", "batch_size=2", "--transform", "lx_tf:block"],
            mods=_mods(tmp_path), signal_when=mark,
        )  # fmt: skip
    finally:
        del os.environ["LX_MARK"]
    assert code == 130, err
    assert "interrupted by SIGINT" in one_line(err)
    # documented: within 5 s (docs/RELIABILITY.md); 20 here for a loaded two-core host
    assert took < 20
    assert json.loads((tmp_path / "out" / "result.json").read_text())["status"] == "interrupted"


def test_a_transform_that_raises_is_named_in_the_hint(cli, tmp_path, monkeypatch):
    data = tmp_path / "data"
    npz(data)
    monkeypatch.syspath_prepend(str(_mods(tmp_path)))
    r = _cli(cli, data, tmp_path / "out", "--workers", "0", "--set", "batch_size=2",
             "--transform", "lx_tf:boom")  # fmt: skip
    assert r.code == 4
    line = one_line(r.err)
    assert "check the transform lx_tf:boom: 8 of the samples failed in it" in line
    assert "check the dataset's files" not in line


# -- too large, too many ------------------------------------------------------------------------


def test_a_sparse_64_gib_file_is_a_failed_sample_not_a_traceback(tmp_path):
    data = tmp_path / "data"
    images(data, per_class=60)
    big = data / "cat" / "huge.jpg"
    try:
        with open(big, "wb") as f:
            f.truncate(max(64 << 30, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
        code, err, _took = _session_run(
            tmp_path,
            ["loader", data, "--existing", *BASE, "--output", tmp_path / "out", "--workers",
             "0", "--set", "batch_size=8"],
        )  # fmt: skip
        assert code == 0, err
        assert "Traceback" not in err
        res = json.loads((tmp_path / "out" / "result.json").read_text())
        failed = res["loader"]["existing"]["failed"]
        assert failed["count"] == 1 and failed["ok"] == 120
        assert "one reader may hold in memory" in failed["examples"][0]
        assert any("larger than" in w and "cat/huge.jpg" in w for w in res["warnings"])
        # the only file too large: nothing could be read, refused before anything is written
        alone = tmp_path / "alone"
        alone.mkdir()
        os.rename(big, alone / "huge.jpg")
        code, err, _took = _session_run(
            tmp_path,
            ["loader", alone, "--existing", *BASE, "--output", tmp_path / "out2"],
        )
        assert code == 2 and "nothing could be read" in one_line(err)
        assert not (tmp_path / "out2").exists()
    finally:
        for p in (big, tmp_path / "alone" / "huge.jpg"):
            p.unlink(missing_ok=True)


def test_a_file_over_the_limit_at_read_time_is_refused_unread(tmp_path):
    from iobench.loader.existing_data import BatchStats
    from iobench.loader.existing_read import FileTooLarge, read_file

    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 4096)
    with pytest.raises(FileTooLarge, match="one reader may hold in memory"):
        read_file(str(p), "cached", BatchStats(), None, limit=4095)
    assert read_file(str(p), "cached", BatchStats(), None, limit=4096) == b"x" * 4096


def test_workers_beyond_the_host_are_bad_input(cli, tmp_path):
    from iobench.loader.torchdata import worker_bound

    bound, _why = worker_bound()
    data = tmp_path / "data"
    npz(data)
    for args in (
        ["loader", data, "--existing", "--workers", "9999"],
        ["loader", tmp_path / "t", "--profile", "resnet50-a100", "--workers", "9999"],
        ["loader", data, "--existing", "--workers", str(bound + 1)],
    ):
        r = cli(*args, "--output", tmp_path / "out", "--no-history")
        assert r.code == 2, (args, r.err)
        assert f"is more than this host can run: at most {bound:,}" in one_line(r.err)
    assert not (tmp_path / "out").exists() and not (tmp_path / "t").exists()


# -- minor ----------------------------------------------------------------------------------


def test_links_out_of_the_dataset_are_skipped_and_counted(cli, tmp_path):
    data = tmp_path / "data"
    images(data, per_class=4)
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(b"not for the loader")
    (data / "cat" / "shadow.jpg").symlink_to(secret)
    (data / "dog" / "twin.jpg").symlink_to(data / "dog" / "001.jpg")  # inside: kept
    r = _cli(cli, data, tmp_path / "out", "--workers", "0", "--set", "batch_size=2")
    assert r.code == 0, r.err
    res = json.loads(r.out)
    ex = res["loader"]["existing"]
    assert ex["dataset"]["links_outside_skipped"] == 1 and ex["dataset"]["files"] == 9
    assert ex["failed"]["count"] == 0
    assert any("1 link(s) to files outside the dataset" in w for w in res["warnings"])


def test_a_link_out_swapped_in_after_the_listing_is_not_read(cli, tmp_path, monkeypatch):
    data = tmp_path / "data"
    images(data, per_class=10)
    (tmp_path / "secret.jpg").write_bytes((data / "cat" / "001.jpg").read_bytes())  # decodable
    monkeypatch.syspath_prepend(str(_mods(tmp_path)))
    monkeypatch.setenv("LX_DATA", str(data))
    r = _cli(cli, data, tmp_path / "out", "--workers", "0", "--set", "batch_size=2",
             "--transform", "lx_tf:to_links")  # fmt: skip
    assert r.code == 4
    assert "a link out of the dataset: not read" in one_line(r.err)
    failed = json.loads((tmp_path / "out" / "result.json").read_text())["loader"]["existing"]
    assert failed["failed"]["files"] >= 10  # every .jpg after the swap (the PNGs stay)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_decompression_bomb_warning_is_counted_not_printed(cli, tmp_path, monkeypatch, workers):
    from PIL import Image

    data = tmp_path / "data"
    images(data, per_class=4)  # 24 x 32 = 768 pixels each
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 500)  # warns above 500, fails above 1,000
    r = _cli(cli, data, tmp_path / "out", "--workers", workers, "--set", "batch_size=2")
    assert r.code == 0, r.err
    assert "DecompressionBombWarning" not in r.err
    res = json.loads(r.out)
    assert any("8 sample(s) raised a warning while decoding" in w
               and "DecompressionBombWarning" in w for w in res["warnings"])  # fmt: skip


def test_steps_are_honoured_when_every_sample_fails(cli, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    for i in range(200):
        (data / f"{i:04d}.npz").write_bytes(b"PK\x03\x04 not a zip")
    r = _cli(cli, data, tmp_path / "out", "--workers", "0", "--set", "batch_size=4",
             "--steps", "3")  # fmt: skip
    assert r.code == 4
    failed = json.loads((tmp_path / "out" / "result.json").read_text())["loader"]["existing"]
    assert failed["failed"]["count"] == 12 and failed["dataset"]["files_read"] == 12


def test_a_batch_larger_than_the_dataset_is_refused(cli, tmp_path):
    data = tmp_path / "data"
    npz(data, files=60)
    r = _cli(cli, data, tmp_path / "out", "--set", "batch_size=100000", "--workers", "2")
    assert r.code == 2
    line = one_line(r.err)
    assert "batch_size 100,000 over 60 sample(s) (one per file) and 2 reader(s) gives 0" in line
    assert "give --set batch_size=30 or less" in line  # 30 per reader: one full batch each
    assert not (tmp_path / "out").exists()
    r = _cli(cli, data, tmp_path / "out", "--set", "batch_size=31", "--workers", "2")
    assert r.code == 2 and "gives 0 full batch(es)" in r.err
    r = _cli(cli, data, tmp_path / "out", "--set", "batch_size=30", "--workers", "2")
    assert r.code == 0, r.err


def test_the_worker_bound_takes_cores_memory_and_the_process_limit(monkeypatch):
    import resource

    from iobench.loader import torchdata

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    monkeypatch.setattr(torchdata, "physical_memory", lambda: 64 << 30)
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (resource.RLIM_INFINITY,) * 2)
    assert torchdata.worker_bound() == (32, "16 per CPU core: 2 core(s)")
    assert torchdata.worker_bound(4)[0] == 8  # four loader processes share the host
    monkeypatch.setattr(torchdata, "physical_memory", lambda: 1 << 30)
    assert torchdata.worker_bound() == (8, "the memory: 1.0 GiB at 128 MiB per worker")
    monkeypatch.setattr(torchdata, "physical_memory", lambda: 64 << 30)
    monkeypatch.setattr(resource, "getrlimit", lambda _r: (100, 200))
    monkeypatch.setattr(torchdata, "_user_processes", lambda: 95)
    assert torchdata.worker_bound() == (5, "the process limit: 5 more of 100 (ulimit -u)")
    with pytest.raises(Exception, match="--workers 6 is more than this host can run: at most 5"):
        torchdata.check_workers(6)
    torchdata.check_workers(5)


def test_stages_name_what_each_busy_worker_is_on():
    from iobench.loader.existing_data import DECODING, READING, TRANSFORM, Stages

    st = Stages(3)
    paths = ("a/x.jpg", "a/y.jpg", "b/z.jpg")
    assert st.describe(paths, None) == "no batch from the DataLoader's workers"
    moved = st.moved()
    st.set(0, 2, READING)
    st.set(2, 0, TRANSFORM)
    assert st.moved() == moved + 2
    assert st.describe(paths, "m:f") == (
        "no batch: worker 0 reading b/z.jpg; worker 2 in the transform m:f on a/x.jpg"
    )
    st.set(1, 1, DECODING)
    st.bump(1)
    assert st.moved() == moved + 4 and "worker 1 decoding a/y.jpg" in st.describe(paths, None)
