"""Build the next file while the current one is written: a writer thread's encoder.

A dataset writer's file is built whole in memory (samples generated, headers, CRCs, a
footer), then written in one go. Done in turn, the building adds to the write time; done
``Ahead``, a thread builds file k+1 into a second buffer while the writer writes file k, so
the phase runs at the speed of the slower of the two (the CRC, numpy's copies and the write
all release the GIL). Memory: one whole file per slot.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

S = TypeVar("S")

_POLL_S = 0.1


class Ahead(Generic[S]):
    """Iterate ``(item, built)`` in order, where ``built = build(item, slot)`` was made by a
    background thread into one of ``slots`` (reused: a slot goes back once the consumer asks
    for the next item). ``halted()`` true stops the thread at its next step; an exception in
    ``build`` is raised in the consumer, in order. ``close`` stops and joins the thread."""

    def __init__(
        self,
        build: Callable[[Any, S], Any],
        items: Iterable[Any],
        slots: list[S],
        halted: Callable[[], bool],
        name: str = "iobench-ahead",
    ):
        self._build, self._items, self._halted = build, items, halted
        self._free: queue.Queue[S] = queue.Queue()
        for s in slots:
            self._free.put(s)
        self._ready: queue.Queue[Any] = queue.Queue()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _stopping(self) -> bool:
        return self._closed.is_set() or self._halted()

    def _get(self, q: queue.Queue) -> tuple[bool, Any]:
        while True:
            try:
                return True, q.get(timeout=_POLL_S)
            except queue.Empty:
                if self._stopping():
                    return False, None

    def _run(self) -> None:
        try:
            for item in self._items:
                got, slot = self._get(self._free)
                if not got or self._stopping():
                    return
                self._ready.put(("built", item, slot, self._build(item, slot)))
        except BaseException as e:  # noqa: BLE001 - raised in the consumer, in order
            self._ready.put(("failed", e, None, None))
            return
        self._ready.put(("done", None, None, None))

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        while True:
            got, entry = self._get(self._ready)
            if not got:
                return
            kind, item, slot, built = entry
            if kind == "done":
                return
            if kind == "failed":
                raise item
            yield item, built
            self._free.put(slot)

    def close(self) -> None:
        self._closed.set()
        self._thread.join()


def memory_available() -> int | None:
    """Bytes of memory the kernel says can be had without swapping (MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


def slots_per_writer(image_bytes: int, writers: int, share: float = 0.25) -> int:
    """Two slots (build ahead) while two whole files for each of the host's ``writers`` fit
    in ``share`` of the available memory, else one (build, then write, in turn)."""
    avail = memory_available()
    if avail is None:
        return 1
    return 2 if 2 * max(0, image_bytes) * max(1, writers) <= share * avail else 1
