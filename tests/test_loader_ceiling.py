"""The loader's ceiling (issue 28): the readers copy a file's bytes once, as a plain
DataLoader's ``np.load`` / ``np.fromfile`` do, and the figures the measurement needs (the
read/decode split, the cache handling) are still recorded on a small real run."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from iobench.formats import arrays, webdataset
from iobench.formats import reader as freader
from iobench.formats.registry import get_format
from iobench.loader.existing_data import BatchStats, ExistingDataset
from iobench.loader.existing_read import read_file

KIB = 1 << 10


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


# ---- the readers: one copy, by the read ---------------------------------------------------


@pytest.mark.parametrize(
    "arr",
    [np.arange(12, dtype=np.float32).reshape(3, 4), np.asfortranarray(np.arange(6).reshape(2, 3)),
     np.array(5.0), np.zeros((0, 3)), np.arange(300, dtype=np.uint8)],
)  # fmt: skip
def test_an_npy_file_comes_back_as_a_writable_view_of_the_read(arr):
    data = np.frombuffer(bytearray(_npy(arr)), np.uint8)
    ((key, got),) = arrays.samples(data, "a.npy")
    assert key == "a.npy" and got.dtype == arr.dtype and got.shape == arr.shape
    assert (got == arr).all() and got.flags.writeable
    assert got.size == 0 or np.shares_memory(got, data)  # not copied after the read


def test_an_npy_that_does_not_fit_goes_through_np_load_and_its_error_stands():
    short = np.frombuffer(bytearray(_npy(np.arange(10))[:-3]), np.uint8)
    with pytest.raises(ValueError, match="EOF"):
        list(arrays.samples(short, "a.npy"))
    objects = np.frombuffer(bytearray(_npy(np.array([{}], dtype=object))), np.uint8)
    with pytest.raises(ValueError, match="pickle"):
        list(arrays.samples(objects, "b.npy"))
    # bytes (a URL's GET) still decode, through np.load
    ((_, got),) = arrays.samples(_npy(np.arange(4)), "c.npy")
    assert got.tolist() == [0, 1, 2, 3]


def _npz(compress: bool = False, **arrs: np.ndarray) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrs)
    return buf.getvalue()


_NPZ_ARRAYS = {"x": np.arange(4096, dtype=np.uint8), "f": np.arange(12, dtype=np.float32)[1:],
               "fort": np.asfortranarray(np.arange(6, dtype=np.int64).reshape(2, 3)),
               "scalar": np.array(2.5), "empty": np.zeros((0, 3))}  # fmt: skip


def test_a_stored_npz_is_read_in_place_as_np_load_gives_it():
    data = np.frombuffer(bytearray(_npz(**_NPZ_ARRAYS)), np.uint8)
    got = arrays.npz_arrays(data)
    assert got is not None
    with np.load(io.BytesIO(data.tobytes())) as z:
        assert [k for k, _ in got] == z.files  # np.load's keys, in the archive's order
        for k, a in got:
            want = z[k]
            assert a.dtype == want.dtype and a.shape == want.shape and (a == want).all()
            assert a.flags.writeable and a.flags.aligned  # copied out, as np.load copies
            assert a.size == 0 or not np.shares_memory(a, data)
    ((key, sample),) = arrays.samples(data, "a.npz")
    assert key == "a.npz" and sorted(sample) == sorted(_NPZ_ARRAYS)
    # a comment after the directory, as zipfile finds the end record
    import zipfile

    buf = io.BytesIO(_npz(x=np.arange(5, dtype=np.uint8)))
    with zipfile.ZipFile(buf, "a") as z:
        z.comment = b"made by hand"
    got = arrays.npz_arrays(buf.getvalue())
    assert got is not None and got[0][1].tolist() == [0, 1, 2, 3, 4]


def _bad_crc(raw: bytes, inside: bytes) -> bytes:
    at = raw.index(inside) + len(inside) // 2  # a byte of that array's data flipped
    return raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1 :]


@pytest.mark.parametrize(
    "raw",
    [_npz(compress=True, x=np.arange(100)),  # deflated: zipfile inflates
     b"junk" + _npz(x=np.arange(5)),  # data before the archive: zipfile's offsets
     _npz(x=np.arange(5))[:-30],  # truncated
     _bad_crc(_npz(x=np.arange(250, dtype=np.uint8)), bytes(range(250))),
     _npz(o=np.array([{}], dtype=object)),  # needs pickle
     b"", b"PK\x05\x06" + bytes(18)],  # no members
)  # fmt: skip
def test_an_npz_not_read_in_place_goes_to_np_load_and_its_error_stands(raw):
    assert arrays.npz_arrays(raw) is None
    data = np.frombuffer(bytearray(raw), np.uint8)
    try:
        want = np.load(io.BytesIO(raw), allow_pickle=False)
        want = {k: want[k] for k in want.files}
    except Exception as e:  # noqa: BLE001 - the same error, from the same place
        with pytest.raises(type(e)):
            list(arrays.samples(data, "a.npz"))
        return
    ((_, got),) = arrays.samples(data, "a.npz")
    assert sorted(got) == sorted(want) and all((got[k] == want[k]).all() for k in want)


def test_an_npz_member_that_is_not_an_npy_or_repeats_goes_to_np_load():
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.npy", _npy(np.arange(3)))
        z.writestr("notes.txt", b"hello")
    assert arrays.npz_arrays(buf.getvalue()) is None
    ((_, got),) = arrays.samples(np.frombuffer(bytearray(buf.getvalue()), np.uint8), "n.npz")
    assert got["a"].tolist() == [0, 1, 2] and got["notes.txt"] == b"hello"  # np.load's way
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("a.npy", _npy(np.arange(3)))
        z.writestr("a", _npy(np.arange(4)))
    assert arrays.npz_arrays(buf.getvalue()) is None  # "a" twice: np.load's lookup decides


def test_the_synthetic_npz_decodes_in_place_as_np_load_did(tmp_path):
    mod = get_format("npz")
    rng = np.random.default_rng(3)
    samples = [rng.integers(0, 255, n, dtype=np.uint8) for n in (10, 4000, 0, 777)]
    buf = io.BytesIO()
    mod.write(buf, samples, ["a", "b", "c", "d"])
    raw = buf.getvalue()
    assert arrays.npz_arrays(raw) is not None  # the writer's archive is read in place
    with np.load(io.BytesIO(raw)) as z:
        want = [z[k].tobytes() for k in sorted(z.files)]
    for data in (np.frombuffer(bytearray(raw), np.uint8), memoryview(bytearray(raw))):
        got = mod.decode(data, None)
        assert [g.tobytes() for g in got] == want == [s.tobytes() for s in samples]
    with pytest.raises(Exception, match="CRC"):  # a corrupt sample fails as np.load fails
        mod.decode(_bad_crc(raw, samples[1].tobytes()), None)


def test_a_whole_file_read_is_primed_by_its_first_page(tmp_path, monkeypatch):
    import iobench.loader.existing_read as er

    primed: list[int] = []
    real = freader.prime_readahead
    monkeypatch.setattr(er, "prime_readahead", lambda fd: primed.append(fd) or real(fd))
    monkeypatch.setattr(freader, "prime_readahead", lambda fd: primed.append(fd) or real(fd))
    body = np.random.default_rng(2).integers(0, 255, 3 * freader.PRIME_BYTES + 5, np.uint8)
    p = tmp_path / "a.bin"
    p.write_bytes(body.tobytes())
    (tmp_path / "empty").write_bytes(b"")
    st = BatchStats()
    for as_array in (False, True):
        got = read_file(str(p), "dropped", st, None, as_array=as_array)
        assert bytes(got) == body.tobytes()  # the primed page read again, whole and in order
    assert read_file(str(tmp_path / "empty"), "dropped", st, None) == b""
    assert freader.FileReader().read_bytes(str(p)).tobytes() == body.tobytes()
    assert len(primed) == 3  # the empty file is not primed; the direct path never is
    freader.prime_readahead(-1)  # a bad descriptor: the read after it reports


def _shard(parts: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, raw in parts.items():
            info = tarfile.TarInfo(name)
            info.size = len(raw)
            t.addfile(info, io.BytesIO(raw))
    return buf.getvalue()


def test_a_webdataset_shards_parts_are_views_of_the_read_decoded_as_before():
    raw = bytes(range(256)) * 4
    shard = _shard({"k1.bin": raw, "k1.npy": _npy(np.arange(5)), "k1.cls": b"7",
                    "k1.json": b'{"a": 1}', "k2.bin": raw[:10]})  # fmt: skip
    data = np.frombuffer(bytearray(shard), np.uint8)
    got = dict(webdataset.samples(data, "s.tar"))
    one, two = got["s.tar#k1"], got["s.tar#k2"]
    assert one["bin"].tobytes() == raw and np.shares_memory(one["bin"], data)
    assert one["bin"].flags.writeable
    assert one["npy"].tolist() == list(range(5)) and np.shares_memory(one["npy"], data)
    assert one["cls"] == 7 and one["json"] == {"a": 1}
    assert two["bin"].tobytes() == raw[:10]
    # bytes in (the old path): the same samples, copies
    old = dict(webdataset.samples(shard, "s.tar"))
    assert old["s.tar#k1"]["bin"].tobytes() == raw and old["s.tar#k1"]["cls"] == 7


def test_a_truncated_shard_still_fails():
    shard = _shard({"k1.bin": b"x" * 2000})
    data = np.frombuffer(bytearray(shard[:1200]), np.uint8)
    with pytest.raises((tarfile.TarError, ValueError)):
        list(webdataset.samples(data, "s.tar"))


def test_read_file_gives_an_array_reader_one_fresh_array(tmp_path):
    p = tmp_path / "a.npy"
    p.write_bytes(_npy(np.arange(1000, dtype=np.int32)))
    st = BatchStats()
    a = read_file(str(p), "dropped", st, None, as_array=True)
    b = read_file(str(p), "dropped", st, None, as_array=True)
    assert isinstance(a, np.ndarray) and a.dtype == np.uint8 and a.tobytes() == p.read_bytes()
    assert not np.shares_memory(a, b) and a.flags.writeable  # a new one per file
    assert isinstance(read_file(str(p), "dropped", st, None), bytes)  # other readers: bytes
    assert st.read_s > 0 and st.open_s > 0 and st.cache_checked == 3  # still measured


@pytest.mark.parametrize("fmt", ["raw", "tar", "npz", "parquet"])
def test_a_buffered_read_is_decoded_without_a_copy_a_direct_one_with(tmp_path, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    mod = get_format(fmt)
    sizes = [3000, 5000]
    rng = np.random.default_rng(1)
    samples = [rng.integers(0, 255, n, dtype=np.uint8) for n in sizes]
    p = tmp_path / f"f.{fmt}"
    with open(p, "wb") as f:
        mod.write(f, samples, ["a", "b"])
    r = freader.FileReader(direct=False)
    out = r.read(str(p), fmt, sizes)
    assert [o.tobytes() for o in out] == [s.tobytes() for s in samples]
    assert r.last_read_s > 0 and r.last_decode_s > 0 and r.last_decode_cpu_s >= 0  # the split
    data = r.read_bytes(str(p))
    if fmt in ("raw", "tar"):  # views of the one array the read filled
        assert all(np.shares_memory(o, data) for o in freader.decode(data, fmt, sizes))
    # a reused buffer (O_DIRECT's, here a memoryview) is copied from: a later read changes
    # the buffer, never the samples already decoded
    buf = bytearray(p.read_bytes())
    first = freader.decode(memoryview(buf), fmt, sizes)
    buf[:] = bytes(len(buf))
    assert [o.tobytes() for o in first] == [s.tobytes() for s in samples]


def test_the_reader_looks_its_format_up_once(tmp_path, monkeypatch):
    p = tmp_path / "f.bin"
    p.write_bytes(b"x" * 100)
    calls = []
    real = freader.get_format
    monkeypatch.setattr(freader, "get_format", lambda f: calls.append(f) or real(f))
    r = freader.FileReader()
    for _ in range(5):
        assert r.read(str(p), "raw", [100])[0].tobytes() == b"x" * 100
    assert calls == ["raw"]


# ---- the recorded figures, on a small real run --------------------------------------------


def test_existing_npy_run_keeps_the_split_and_the_cache_record(cli, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(2)
    for i in range(24):
        np.save(data / f"s{i:03d}.npy", rng.integers(0, 255, 24 * KIB, dtype=np.uint8))
    r = cli("loader", data, "--existing", "--set", "batch_size=4", "--set", "compute_s=0",
            "--workers", "1", "--epochs", "2", "--no-history", "--json", "-q",
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code == 0, r.err
    ex = json.loads(r.out)["loader"]["existing"]
    assert ex["failed"]["count"] == 0 and ex["dataset"]["samples_read"] == 48
    sp = ex["split"]
    assert sp["read_s_per_sample"] > 0 and sp["decode_s_per_sample"] > 0
    assert sp["open_s_per_file"] > 0 and sp["collate_s_per_batch"] > 0
    assert "RWF_NOWAIT" in ex["cache_basis"] and "files checked" in ex["cache_basis"]
    assert ex["workers"][0]["bytes"] == 2 * sum(p.stat().st_size for p in data.iterdir())
    ep = ex["epochs"][1]
    assert ep["bytes"] > 0 and ep["timed_s"] > 0
    # to the last batch: the workers' ending in the loader's last ``next`` is no step
    assert ep["timed_s"] <= ep["wall_s"] - ep["first_step_s"]
    assert ep["loader_cpu_s"] > 0  # main process and workers, the ended workers' included


def test_the_existing_dataset_yields_what_np_load_gives(tmp_path):
    root = tmp_path / "d"
    root.mkdir()
    arrs = [np.arange(i, i + 6, dtype=np.int16).reshape(2, 3) for i in range(8)]
    for i, a in enumerate(arrs):
        np.save(root / f"{i}.npy", a)
    names = tuple(f"{i}.npy" for i in range(8))
    ds = ExistingDataset(str(root), names, "npz", 4, "cached")
    got = []
    for batch, st in ds:
        assert st.read_s > 0 and st.decode_s > 0 and st.samples == len(batch)
        got.extend(batch.numpy())
    order = np.random.default_rng([1, 0]).permutation(8)
    assert [g.tolist() for g in got] == [arrs[k].tolist() for k in order]


def test_synthetic_run_keeps_the_split(cli, tmp_path):
    prof = Path(tmp_path / "p.toml")
    prof.write_text('description = "t"\nformat = "tar"\nsample_size = "32KiB"\nfiles = 24\n'
                    "batch_size = 4\ncompute_s = 0\nworkers = 1\nprefetch = 2\nau_min = 0\n"
                    "epochs = 2\n")  # fmt: skip
    target = tmp_path / "t"
    target.mkdir()
    r = cli("loader", target, "--profile", prof, "--buffered", "--no-history", "--json", "-q",
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code in (0, 1), r.err
    ld = json.loads(r.out)["loader"]
    assert ld["worker_read_s_per_sample"] > 0 and ld["worker_decode_s_per_sample"] > 0
    assert ld["decode"]["cpu_s_per_sample"] > 0 and ld["cache"] == "dropped"
    ep = ld["ranks"][0]["epochs"][1]
    assert ep["bytes"] == ep["samples"] * 32 * KIB and ep["read_s"] > 0 and ep["decode_s"] > 0
    assert ep["loader_cpu_s"] > 0


def test_a_batchs_figures_travel_as_values_and_sum_as_before():
    import pickle

    from iobench.loader.existing import _add

    a = BatchStats(worker=1, samples=4, files=4, bytes=400, read_s=0.5, decode_s=0.25,
                   cache_checked=2, cache_resident=1, failed=1, failed_names=["x.npy: bad"])  # fmt: skip
    wire = pickle.dumps(a)
    assert b"read_s" not in wire and pickle.loads(wire) == a  # values only, the same figures
    acc: dict = {}
    for st in (a, pickle.loads(wire), BatchStats(worker=1)):
        _add(acc, st)
    w = acc[1]
    assert w["batches"] == 3 and w["samples"] == 8 and w["bytes"] == 800
    assert w["read_s"] == 1.0 and w["cache_checked"] == 4 and w["cache_resident"] == 2
    assert w["failed"] == 2 and w["failed_names"] == ["x.npy: bad"] * 2 and w["lost_files"] == 0
    assert acc[-1]["per_batch"] == [(4, 0.5, 0.0, 0.0)] * 2  # empty batches keep no spread


def test_a_file_directly_in_the_dataset_opens_beneath_it_a_link_the_checked_way(
    tmp_path, monkeypatch
):
    import os

    from iobench.loader import existing_read

    root = tmp_path / "d"
    root.mkdir()
    (root / "a.npy").write_bytes(_npy(np.arange(3)))
    (tmp_path / "outside.npy").write_bytes(_npy(np.arange(4)))
    (root / "in.npy").symlink_to(root / "a.npy")
    (root / "out.npy").symlink_to(tmp_path / "outside.npy")
    os.mkfifo(root / "f.npy")
    ds = ExistingDataset(str(root), ("a.npy", "in.npy", "out.npy", "f.npy"), "npz", 8, "cached")
    checked = []
    real_under = existing_read._under
    monkeypatch.setattr(
        existing_read, "_under", lambda fd, r: checked.append(fd) or real_under(fd, r)
    )
    st = BatchStats()
    path = str(root / "a.npy")
    assert read_file(path, "cached", st, None, root=ds.real_root, beneath=ds._beneath("a.npy"))
    assert checked == []  # opened relative to the directory: no /proc lookup
    got = read_file(str(root / "in.npy"), "cached", st, None, root=ds.real_root,
                    beneath=ds._beneath("in.npy"))  # fmt: skip
    assert got == (root / "a.npy").read_bytes() and len(checked) == 1  # a link: checked
    with pytest.raises(OSError, match="out of the dataset"):
        read_file(str(root / "out.npy"), "cached", st, None, root=ds.real_root,
                  beneath=ds._beneath("out.npy"))  # fmt: skip
    with pytest.raises(OSError, match="a FIFO, not a regular file"):
        read_file(str(root / "f.npy"), "cached", st, None, root=ds.real_root,
                  beneath=ds._beneath("f.npy"))  # fmt: skip
    assert ds._beneath("sub/x.npy") is None  # in a subdirectory: its path is checked
    fd = ds._dir[1]
    ds.close()
    with pytest.raises(OSError):
        os.fstat(fd)


# ---- the CPU of a loader's processes, and the bench's arithmetic ----------------------------


def _burn(seconds: float) -> None:
    import time

    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_processes_cpu_counts_a_live_process_and_a_reaped_child():
    import multiprocessing as mp
    import os

    from iobench.core.cpu import processes_cpu_s

    me = [os.getpid()]
    a = processes_cpu_s(me)
    _burn(0.1)
    b = processes_cpu_s(me)
    assert 0.09 <= b - a < 1.0
    child = mp.get_context("fork").Process(target=_burn, args=(0.2,))
    child.start()
    child.join()  # reaped: its time is the children's now
    c = processes_cpu_s([*me, child.pid])
    assert c - b >= 0.19


def _bench():
    import importlib.util

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("blc", root / "scripts/bench_loader_ceiling.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_bench_times_every_epoch_but_the_first_and_enough_steps():
    b = _bench()
    eps = [{"samples": 99, "timed_s": 9.0, "loader_cpu_s": 9.0},
           {"samples": 10, "timed_s": 1.0, "loader_cpu_s": 0.5},
           {"samples": 30, "timed_s": 2.0, "loader_cpu_s": 1.5}]  # fmt: skip
    assert b._fig(eps) == (40 / 3.0, 2.0 / 40)
    assert b._fig([*eps[:2], {**eps[2], "loader_cpu_s": None}])[1] is None
    for files, batch, size in ((64, 8, 4 << 20), (512, 64, 4 << 20), (2340, 8, 112 << 10)):
        e = b.epochs_for(files, batch, size)
        enough = min(b.MIN_STEPS, -(-b.MIN_BYTES // (batch * size)))
        assert b.epochs_steps(files, batch, e) >= enough
        assert e == 2 or b.epochs_steps(files, batch, e - 1) < enough
    assert b.epochs_for(64, 8, 4 << 20) == 5 and b.epochs_for(512, 64, 4 << 20) == 3
    row = b.summary_row({"plain": [(10.0, 2e-3), (20.0, 1e-3), (30.0, 3e-3)],
                         "synthetic-new": [(15.0, 4e-3), (15.0, 2e-3), (45.0, 1e-3)]}, 1 << 20)  # fmt: skip
    assert row["synthetic-new_ratio"] == 15.0 / 20.0
    assert row["synthetic-new_paired_ratio"] == 1.5  # rounds: 1.5, 0.75, 1.5
    assert row["synthetic-new_cpu_ratio"] == 2e-3 / 2e-3
    assert row["rounds"]["plain"] == [10.0, 20.0, 30.0]


# ---- a worker keeps the memory a batch frees ------------------------------------------------

_REUSE = """
import resource, sys
import numpy as np
from iobench.loader.torchdata import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
pin = []
def batch():
    out = [np.ones(4 << 20, np.uint8) for _ in range(32)]  # a batch of 32 samples of 4 MiB
    pin.append(bytearray(64))  # a small allocation after them: the heap's top moves
    return out
b = batch(); del b
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    b = batch(); del b
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_a_worker_that_keeps_freed_memory_faults_no_page_in_anew():
    """Three more batches of 32 × 4 MiB after the first: with the worker's allocator set
    (``keep_freed_memory``) the samples reuse the first batch's pages; glibc left to itself
    hands part of them back whenever the heap's free top passes its trim threshold, and the
    next batch faults them in again (about half the pages here, 1,512 faults a 4 MiB sample
    in the loader's worker at batch 64 where 1,024 were its shared memory alone)."""

    def faults(mode: str) -> int:
        proc = subprocess.run([sys.executable, "-c", _REUSE, mode], capture_output=True,
                              text=True, check=True)  # fmt: skip
        return int(proc.stdout.split()[-1])

    pages = 3 * 32 * (4 << 20) // 4096
    kept = faults("keep")
    assert kept < pages // 20, (kept, pages)
    assert faults("default") > pages // 4  # the case the setting is for, still here


def test_an_existing_parquet_binary_column_gives_arrays_a_batch_stacks():
    """A binary column's values are writable uint8 arrays (not ``bytes``, which torch's
    collate leaves as they are and a worker then pickles through its pipe), nulls stay None,
    and the other columns come through numpy as before."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from iobench.formats import columnar
    from iobench.loader.existing_data import collate

    buf = io.BytesIO()
    t = pa.table({"label": pa.array([1, 2, 3]), "data": pa.array([b"ab", None, b"xyz"])})
    pq.write_table(t, buf, row_group_size=2)
    rows = [v for _, v in columnar.samples(buf.getvalue(), "f.parquet")]
    assert [r["label"] for r in rows] == [1, 2, 3]
    assert rows[1]["data"] is None
    assert rows[0]["data"].dtype == np.uint8 and rows[0]["data"].flags.writeable
    assert rows[2]["data"].tobytes() == b"xyz"
    same = pa.table({"data": pa.array([bytes(range(8))] * 4)})
    buf = io.BytesIO()
    pq.write_table(same, buf)
    batch = collate(
        [v for _, v in columnar.samples(np.frombuffer(buf.getvalue(), np.uint8).copy(), "g")]
    )
    assert isinstance(batch["data"], torch.Tensor) and tuple(batch["data"].shape) == (4, 8)


# ---- a stored .npz read in one pass: each array read straight into itself -----------------


def _zip_descriptor() -> bytes:
    """An npz written to a stream zipfile cannot seek: sizes and CRCs after each member."""
    import zipfile

    class Stream(io.RawIOBase):
        def __init__(self) -> None:
            self.out = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, b):  # type: ignore[override]
            self.out += b
            return len(b)

    s = Stream()
    with zipfile.ZipFile(s, "w") as z:
        z.writestr("a.npy", _npy(np.arange(3)))
    return bytes(s.out)


def _wide_npz() -> bytes:
    """An npz whose one member's .npy header is about 90 kB (5,000 fields): past numpy's
    limit on a header and iobench's one-pass bound."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "format 2.0": the header's length
        return _npz(wide=np.zeros(1, dtype=[(f"f{i:04d}", "u1") for i in range(5000)]))


def _read_stored(tmp_path: Path, raw: bytes, clock: list[float] | None = None):
    from iobench.formats import npzview

    p = tmp_path / "one.npz"
    p.write_bytes(raw)
    with open(p, "rb") as f:
        return npzview.read_stored(f.fileno(), len(raw), clock)


def test_a_stored_npz_read_in_one_pass_is_what_np_load_gives(tmp_path):
    import zipfile

    from iobench.formats import npzview

    big = np.random.default_rng(4).integers(0, 255, 3 * npzview.PART + 17, np.uint8)
    commented = io.BytesIO(_npz(x=np.arange(5, dtype=np.uint8)))
    with zipfile.ZipFile(commented, "a") as z:
        z.comment = b"made by hand"
    own = io.BytesIO()
    get_format("npz").write(own, [big[:10], big, big[:0]], [])
    odd = {"be": np.arange(5, dtype=">i4"), "dt": np.array(["2020-01-01"], dtype="M8[s]"),
           "rec": np.array([(1, 2.0)], dtype=[("a", "i2"), ("b", "f8")]),
           "c": np.arange(4) * 1j, "u": np.array(["ab", "c"]),
           "f3": np.asfortranarray(np.arange(24.0).reshape(2, 3, 4))}  # fmt: skip
    cases = [_npz(**_NPZ_ARRAYS), _npz(big=big, **_NPZ_ARRAYS), _npz(**odd),
             commented.getvalue(), own.getvalue()]  # fmt: skip
    for raw in cases:  # np.savez's members carry zip64 extras; the writer's plain headers
        clock = [0.0]
        got = _read_stored(tmp_path, raw, clock)
        assert got is not None and clock[0] > 0
        with np.load(io.BytesIO(raw)) as z:
            assert [k for k, _ in got] == z.files
            for k, a in got:
                want = z[k]
                assert a.dtype == want.dtype and a.shape == want.shape and (a == want).all()
                assert a.flags.f_contiguous == want.flags.f_contiguous and a.flags.writeable


@pytest.mark.parametrize(
    "raw",
    [_npz(compress=True, x=np.arange(100)), b"junk" + _npz(x=np.arange(5)),
     _npz(x=np.arange(5))[:-30], _npz(x=np.arange(5))[:60],  # the directory, a member cut
     _bad_crc(_npz(x=np.arange(250, dtype=np.uint8)), bytes(range(250))),
     _npz(o=np.array([{}], dtype=object)), _npy(np.arange(7)), b"PK\x05\x06" + bytes(18),
     _zip_descriptor(),
     _wide_npz()],
)  # fmt: skip
def test_what_one_pass_does_not_read_is_read_whole_and_np_loads_error_stands(tmp_path, raw):
    assert _read_stored(tmp_path, raw) is None
    p = tmp_path / "a.npz"
    p.write_bytes(raw)
    try:
        want = np.load(io.BytesIO(raw), allow_pickle=False)
        want = want if isinstance(want, np.ndarray) else {k: want[k] for k in want.files}
    except Exception as e:  # noqa: BLE001 - the loader's read gives the same error
        with pytest.raises(type(e)):
            list(arrays.samples(read_file(str(p), "cached", BatchStats(), None,
                                          as_array=True, one_pass=arrays.read_fd), "a.npz"))  # fmt: skip
        return
    got = read_file(str(p), "cached", BatchStats(), None, as_array=True, one_pass=arrays.read_fd)
    assert isinstance(got, np.ndarray) and got.tobytes() == raw  # read whole, as before
    ((_, sample),) = arrays.samples(got, "a.npz")
    if isinstance(want, np.ndarray):
        assert (sample == want).all()
    else:
        assert sorted(sample) == sorted(want)


def test_a_directory_that_disagrees_with_the_local_headers_is_read_whole(tmp_path):
    raw = bytearray(_npz(a=np.arange(3), b=np.arange(4)))
    at = raw.rindex(b"PK\x01\x02")  # the last directory entry's CRC changed
    raw[at + 16] ^= 1
    assert _read_stored(tmp_path, bytes(raw)) is None
    raw = bytearray(_npz(a=np.arange(3), b=np.arange(4)))
    at = raw.rindex(b"b.npy")  # the second member's name in the directory: "c.npy"
    raw[at] = ord("c")
    assert _read_stored(tmp_path, bytes(raw)) is None


def test_the_loaders_read_a_stored_npz_in_one_pass_and_time_its_checks_as_decode(tmp_path):
    rng = np.random.default_rng(5)
    samples = [rng.integers(0, 255, n, dtype=np.uint8) for n in (300_000, 5)]
    mod = get_format("npz")
    p = tmp_path / "s.npz"
    with open(p, "wb") as f:
        mod.write(f, samples, ["a", "b"])
    r = freader.FileReader(drop_cache=True)
    out = r.read(str(p), "npz")
    assert [o.tobytes() for o in out] == [s.tobytes() for s in samples]
    assert r.last_bytes == p.stat().st_size and r.last_read_s > 0 and r.last_decode_s > 0
    raw = p.read_bytes()
    p.write_bytes(_bad_crc(raw, samples[0].tobytes()))
    with pytest.raises(Exception, match="CRC"):  # read whole then, and np.load's error stands
        r.read(str(p), "npz")
    p.write_bytes(raw)
    st = BatchStats()
    got = read_file(str(p), "dropped", st, None, as_array=True, one_pass=arrays.read_fd)
    assert isinstance(got, arrays.ReadArrays) and len(got) == len(raw)
    ((_, sample),) = arrays.samples(got, "s.npz")
    assert sample["s00000"].tobytes() == samples[0].tobytes()
    assert st.read_s > 0 and st.decode_s > 0 and st.decode_cpu_s == st.decode_s
    assert st.cache_checked == 1  # the drop still checked


# ---- the batch pool: a worker's batches in shared memory it reuses --------------------------


class _Samples:
    """Map-style: sample ``i`` is ``size`` bytes of value ``i % 251`` (a SampleDataset's tuple)."""

    def __init__(self, n: int, size: int):
        self.n, self.size = n, size

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return np.full(self.size + (i % 3), i % 251, np.uint8), 0.0, 0.0, 0.0, self.size


def _pooled_loader(pool, n=48, size=5000, workers=2, batch=4):
    from functools import partial

    from torch.utils.data import DataLoader

    from iobench.loader.torchdata import collate_samples

    return DataLoader(_Samples(n, size), batch_size=batch, num_workers=workers, prefetch_factor=2,
                      collate_fn=partial(collate_samples, pool=pool), multiprocessing_context="fork")  # fmt: skip


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers")
def test_pooled_batches_hold_their_samples_in_slots_the_workers_reuse():
    from iobench.loader.torchdata import BatchPool, PoolBatch

    pool = BatchPool(workers=2, slots=4, slot_bytes=4 * 5002)
    slots = []
    for k, (data, sizes, times) in enumerate(_pooled_loader(pool)):
        assert isinstance(data, PoolBatch) and data.nbytes == sum(sizes)
        got = pool.tensor(data).numpy()
        want = np.concatenate([np.full(5000 + (i % 3), i % 251, np.uint8)
                               for i in range(4 * k, 4 * k + 4)])  # fmt: skip
        assert (got == want).all() and times[3] == 4 * 5000
        slots.append(data.slot)
        pool.give_back(data)
    # 12 batches through 8 slots, each worker's own in turn: worker 0 has the even batches
    assert slots == [0, 4, 1, 5, 2, 6, 3, 7, 0, 4, 1, 5]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers")
def test_a_batch_larger_than_its_slot_goes_into_fresh_shared_memory():
    import torch

    from iobench.loader.torchdata import BatchPool

    pool = BatchPool(workers=1, slots=3, slot_bytes=100)
    for data, sizes, _times in _pooled_loader(pool, n=8, size=5000, workers=1):
        assert isinstance(data, torch.Tensor) and len(data) == sum(sizes)
        assert data.is_shared()


def test_a_worker_waits_for_its_slot_and_stops_when_the_pool_closes(monkeypatch):
    from iobench.core.errors import EngineError
    from iobench.loader import torchdata

    pool = torchdata.BatchPool(workers=2, slots=2, slot_bytes=64)
    assert [pool.take(1), pool.take(1)] == [2, 3]
    naps = []
    monkeypatch.setattr(torchdata.time, "sleep", lambda s: (naps.append(s), pool.close()))
    with pytest.raises(EngineError, match="slot 2 was not handed back"):
        pool.take(1)  # both still out: it waits, until the loop closes the pool
    assert naps
    pool._state[:] = 0
    pool.give_back(torchdata.PoolBatch(3, 10))
    assert pool.take(1) == 2 and pool.take(1) == 3  # handed back: taken again, in turn


def test_the_pool_is_left_out_where_it_would_take_too_much_memory(monkeypatch):
    from iobench.loader import torchdata

    monkeypatch.setattr(torchdata, "physical_memory", lambda: 8 << 30)
    # 2 workers × (2 + 2) slots × 64 × 4 MiB = 2 GiB: a quarter of 8 GiB
    assert torchdata.BatchPool.for_loop(2, 2, 64, 4 << 20) is not None
    assert torchdata.BatchPool.for_loop(2, 2, 64, 4 << 20, loaders=2) is None
    assert torchdata.BatchPool.for_loop(0, 2, 64, 4 << 20) is None


def _synthetic(cli, tmp_path, fmt, size, epochs, extra=""):
    """The loader block of a small synthetic ``iobench loader`` run (1 worker, batch 4)."""
    prof = Path(tmp_path / "p.toml")
    prof.write_text(f'description = "t"\nformat = "{fmt}"\nsample_size = "{size}"\nfiles = 24\n'
                    "batch_size = 4\ncompute_s = 0\nworkers = 1\nprefetch = 2\nau_min = 0\n"
                    f"epochs = {epochs}\n{extra}")  # fmt: skip
    target = tmp_path / "t"
    target.mkdir()
    r = cli("loader", target, "--profile", prof, "--no-history", "--json", "-q",
            "--output", tmp_path / "out")  # fmt: skip
    assert r.code in (0, 1), r.err
    return json.loads(r.out)["loader"]


def test_the_loop_hands_its_batches_through_the_pool(cli, tmp_path, monkeypatch):
    from iobench.loader import torchdata

    given: list[int] = []
    real = torchdata.BatchPool.give_back

    def give_back(self, batch):
        if isinstance(batch, torchdata.PoolBatch):
            given.append(batch.slot)
        return real(self, batch)

    monkeypatch.setattr(torchdata.BatchPool, "give_back", give_back)
    ld = _synthetic(cli, tmp_path, "npz", "32KiB", 2)
    ep = ld["ranks"][0]["epochs"][1]
    assert ep["bytes"] == ep["samples"] * 32 * KIB
    assert len(given) >= 12 and set(given) <= {0, 1, 2, 3}  # 1 worker, prefetch 2: 4 slots
    h = ld["handoff"]
    assert h["kind"] == "pool" and h["slots"] == 4 and h["slot_bytes"] == 4 * 32 * KIB
    assert h["pooled_batches"] == h["batches"] == sum(e["steps"] for e in ld["ranks"][0]["epochs"])
    assert "reused shared-memory slots" in h["basis"]


def test_a_replayed_pipeline_keeps_its_fresh_shared_memory(cli, tmp_path):
    """A profile with a decode cost replays a measured pipeline: its hand-off (torch's
    default collate, fresh shared memory a batch) is part of what it spent, so no pool."""
    h = _synthetic(cli, tmp_path, "raw", "16KiB", 1, "decode_s = 0.0001\n")["handoff"]
    assert h["kind"] == "shared memory" and h["pooled_batches"] == 0 and h["batches"] > 0


def test_a_jpeg_batch_fits_the_slots_its_decoded_pixels_size(cli, tmp_path):
    """A JPEG sample decodes larger than it is stored: the slots are sized from its pixels
    (the format's ``decoded_size``), so its batches go through the pool too."""
    pytest.importorskip("PIL")
    from iobench.formats import jpeg

    assert jpeg.decoded_size(48 * KIB) == jpeg.side_for(48 * KIB) ** 2 > 48 * KIB
    h = _synthetic(cli, tmp_path, "jpeg", "48KiB", 1)["handoff"]
    assert h["kind"] == "pool" and h["pooled_batches"] == h["batches"] > 0, h


def test_a_pool_no_batch_fitted_is_reported_as_fresh_shared_memory():
    from iobench.loader.loop import handoff_block

    class _Res:
        ranks = [{"handoff": {"kind": "pool", "slots": 4, "slot_bytes": 1024},
                  "epochs": [{"steps": 5, "pooled_batches": 0}]}]  # fmt: skip

    h = handoff_block(_Res())  # type: ignore[arg-type]
    assert h["kind"] == "shared memory" and h["batches"] == 5 and h["pooled_batches"] == 0
    assert "no batch fitted" in h["basis"]
