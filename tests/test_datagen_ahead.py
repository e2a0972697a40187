"""Building the next file while this one is written (``formats.ahead.Ahead``): items come in
order, never more built than slots, a build's exception is raised in order, a halt or a
close stops the builder; and the dataset writer built on it keeps its failures and stops."""

from __future__ import annotations

import os
import threading
import time

import pytest

from iobench import formats
from iobench.core.errors import EngineError, Interrupted
from iobench.engines.base import FileSpec
from iobench.formats import ahead
from iobench.formats import writer as writer_mod


def test_items_in_order_and_never_more_built_than_slots():
    held, most, lock = set(), [0], threading.Lock()

    def build(i, slot):
        with lock:
            assert slot not in held  # a slot is not reused while the consumer holds it
            held.add(slot)
            most[0] = max(most[0], len(held))
        time.sleep(0.002)
        return (i, slot)

    got = []
    a = ahead.Ahead(build, range(20), ["s0", "s1"], lambda: False)
    try:
        for i, (j, slot) in a:
            got.append(i)
            assert i == j
            time.sleep(0.003)  # the consumer is the slower: the builder waits for a slot
            with lock:
                held.discard(slot)
    finally:
        a.close()
    assert got == list(range(20)) and most[0] == 2


def test_a_build_error_is_raised_in_order():
    def build(i, slot):
        if i == 3:
            raise OSError("no space left")
        return i

    a = ahead.Ahead(build, range(10), [0, 1], lambda: False)
    got = []
    with pytest.raises(OSError, match="no space"):
        for i, _ in a:
            got.append(i)
    a.close()
    assert got == [0, 1, 2]


def test_halt_and_close_stop_the_builder():
    halted = threading.Event()
    built = []
    a = ahead.Ahead(lambda i, s: built.append(i), range(1000), [0, 1], halted.is_set)
    it = iter(a)
    next(it)
    halted.set()
    assert len(list(it)) <= 1  # halted: it ends after what was already built
    a.close()
    assert not a._thread.is_alive() and len(built) <= 2  # nothing built after the halt
    # close while the consumer has stopped taking items: the builder is not left waiting
    b = ahead.Ahead(lambda i, s: i, range(1000), [0], lambda: False)
    next(iter(b))
    b.close()
    assert not b._thread.is_alive()


def test_two_slots_only_while_memory_allows(monkeypatch):
    monkeypatch.setattr(ahead, "memory_available", lambda: 8 << 30)
    assert ahead.slots_per_writer(256 << 20, 2) == 2  # 1 GiB of 8: within a quarter
    assert ahead.slots_per_writer(1 << 30, 2) == 1  # 4 GiB of 8: one at a time
    monkeypatch.setattr(ahead, "memory_available", lambda: None)
    assert ahead.slots_per_writer(1, 1) == 1
    assert (ahead.memory_available() or 0) >= 0


def test_a_failing_build_fails_the_phase(runner, monkeypatch):
    real = writer_mod._Writers._image

    def flaky(self, i, buf, img):
        if i == 3:
            raise MemoryError("cannot map the buffer")
        return real(self, i, buf, img)

    monkeypatch.setattr(writer_mod._Writers, "_image", flaky)
    files = [FileSpec(f"data/s{i}.npz", 5000) for i in range(8)]
    with pytest.raises(EngineError, match="MemoryError: cannot map the buffer"):
        formats.write_files({"format": "npz", "jobs": 2}, runner, files)
    res = runner.results[-1]
    assert res.status == "partial" and "writer 1 failed" in res.error
    assert 0 < res.ops < 8
    assert not [t for t in threading.enumerate() if t.name.startswith("iobench-dataset")]


def test_a_stop_mid_phase_leaves_no_builder_running(runner, monkeypatch):
    real = writer_mod._Writers._write_one

    def slow(self, rel, path, image):
        if path.endswith("s2.tar"):
            runner.stop.set()
        return real(self, rel, path, image)

    monkeypatch.setattr(writer_mod._Writers, "_write_one", slow)
    files = [FileSpec(f"data/s{i}.tar", 5000) for i in range(40)]
    with pytest.raises(Interrupted):
        formats.write_files({"format": "tar", "jobs": 2}, runner, files)
    res = runner.results[-1]
    assert res.status == "partial" and res.error == "interrupted" and res.ops < 40
    assert not [t for t in threading.enumerate() if t.name.startswith("iobench-dataset")]
    written = os.listdir(os.path.join(runner.run_dir, "data"))
    assert len(written) == res.ops
