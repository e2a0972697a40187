"""External tools' versions, probed once: recorded with every run's host (``results``) and used
by the engine that runs the tool (``engines``)."""

from __future__ import annotations

import functools
import shutil
import subprocess


@functools.lru_cache(maxsize=1)
def fio_version() -> str | None:
    """``fio --version`` (e.g. 'fio-3.33'), or None when fio is not installed."""
    exe = shutil.which("fio")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None
