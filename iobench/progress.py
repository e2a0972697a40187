"""A tqdm progress bar per phase, behind the engines' Progress interface."""

from __future__ import annotations

import sys

from .engines.base import Progress


class TqdmProgress(Progress):
    """One bar per phase on stderr; silent when stderr is not a terminal or --quiet."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled and sys.stderr is not None and sys.stderr.isatty()
        self.bar = None
        self._last = 0

    def start(self, name: str, total_bytes: int | None, total_ops: int | None) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        from .redact import for_terminal

        self.bar = tqdm(
            total=total_bytes, desc=for_terminal(name), unit="B", unit_scale=True, unit_divisor=1024,
            leave=False, file=sys.stderr, dynamic_ncols=True,
        )  # fmt: skip

    def update(self, done_bytes: int, done_ops: int) -> None:
        if self.bar is not None and done_bytes > self._last:
            self.bar.update(done_bytes - self._last)
            self._last = done_bytes

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
