"""Parse and format sizes, durations, rates and percentages (fio conventions).

Sizes: ``4KiB`` (IEC) and the bare ``4k`` are binary (4096), ``4KB`` (SI) is decimal
(4000). This is not fio's default reading: fio 3.33 with ``kb_base=1024`` takes ``1MB`` as
1,048,576 and ``1MiB`` as 1,000,000, so iobench hands fio byte counts only. Durations:
``500ms``, ``30s``, ``5m``, ``1h``; a bare number is seconds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from .errors import UsageError

_BINARY = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kmgtpKMGTP]?)(i?)([bB]?)\s*$")
_DURATION_UNITS = {
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(us|ms|s|min|m|h|d)?\s*$")
_COUNT_RE = re.compile(r"^\s*(-?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kmgKMG]?)\s*$")


def parse_size(text: str | float, *, what: str = "size") -> int:
    """Parse a size such as ``4k``, ``4KiB``, ``1MB``, ``1.5GiB`` into bytes."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: expected a size like 4k, 1MiB or 2GB, got {text!r}")
    if isinstance(text, (int, float)):
        if not math.isfinite(text) or text < 0:
            raise UsageError(f"{what}: expected a non-negative size, got {text!r}")
        return int(text)
    m = _SIZE_RE.match(str(text))
    if not m:
        raise UsageError(f"{what}: expected a size like 4k, 1MiB or 2GB, got {text!r}")
    number, prefix, i, b = m.groups()
    prefix = prefix.lower()
    # "KB"/"MB" (upper-case B, no i) are decimal (SI); "k", "KiB", "kb" are binary.
    decimal = bool(prefix) and not i and b == "B"
    if i and not prefix:
        raise UsageError(f"{what}: expected a size like 4k, 1MiB or 2GB, got {text!r}")
    mult = (_DECIMAL if decimal else _BINARY)[prefix]
    value = float(number) * mult
    if not math.isfinite(value):
        raise UsageError(f"{what}: size {text!r} is too large")
    return int(round(value))


def parse_duration(text: str | float, *, what: str = "duration") -> float:
    """Parse ``500ms``, ``30s``, ``5m``, ``1h`` (bare numbers are seconds) into seconds."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: expected a duration like 500ms, 30s or 5m, got {text!r}")
    if isinstance(text, (int, float)):
        if not math.isfinite(text) or text < 0:
            raise UsageError(f"{what}: expected a non-negative duration, got {text!r}")
        return float(text)
    m = _DURATION_RE.match(str(text))
    if not m:
        raise UsageError(f"{what}: expected a duration like 500ms, 30s or 5m, got {text!r}")
    number, unit = m.groups()
    value = float(number) * _DURATION_UNITS[unit or "s"]
    if not math.isfinite(value):
        raise UsageError(f"{what}: duration {text!r} is too large")
    return value


# -- bounds on what the command line may ask (the workload keys have theirs in spec.KIND_MAXIMUM)

#: The longest duration iobench takes anywhere (a phase, a budget, an interval, a timeout).
MAX_DURATION_S = 7 * 86400.0
#: The most repeats of a workload or a checkpoint save and load (statistics need 10 to 30).
MAX_REPEAT = 1000
#: The I/O watchdog's own period (iobench.run.stall looks at the totals once a second, fio
#: reports once a second): a stall timeout below it would fire on healthy storage.
WATCHDOG_PERIOD_S = 1.0


def bounded_duration(seconds: float, what: str, text: str | float | None = None) -> float:
    """``seconds`` when at most MAX_DURATION_S, else a UsageError naming ``what``."""
    if seconds > MAX_DURATION_S:
        shown = text if text is not None else f"{seconds:g}s"
        raise UsageError(
            f"{what} {shown} is longer than 7 days", hint=f"give {what} a duration of 7d or less"
        )
    return seconds


def check_repeat(n: int, what: str = "--repeat") -> int:
    """A repeat count: 1 to MAX_REPEAT (UsageError otherwise)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UsageError(f"{what} must be at least 1, got {n}", hint=f"give {what} 1 or more")
    if n > MAX_REPEAT:
        raise UsageError(
            f"{what} {n:,} is more than {MAX_REPEAT:,} repeats",
            hint=f"give {what} {MAX_REPEAT} or fewer (10 to 30 give a median and a spread)",
        )
    return n


def check_stall_timeout(
    seconds: float, what: str = "--stall-timeout", text: str | float | None = None
) -> float:
    """A stall timeout: 0 (off), or from the watchdog's period (1 s) to 7 days."""
    if 0 < seconds < WATCHDOG_PERIOD_S:
        raise UsageError(
            f"{what} {text if text is not None else f'{seconds:g}s'} is shorter than the watchdog's period "
            f"({WATCHDOG_PERIOD_S:g} s): healthy storage would be taken for a stall",
            hint=f"give {what} 1s or more (0 turns the watchdog off)",
        )
    return bounded_duration(seconds, what, text)


def parse_percent(text: str | float, *, what: str = "percentage") -> float:
    """Parse ``10%``, ``10`` (percent) or ``0.1`` (a fraction below 1) into a fraction."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: expected a percentage like 10% or 0.1, got {text!r}")
    if isinstance(text, (int, float)):
        value = float(text)
        frac = value if value <= 1 else value / 100
    else:
        s = str(text).strip()
        try:
            if s.endswith("%"):
                frac = float(s[:-1]) / 100
            else:
                value = float(s)
                frac = value if value <= 1 else value / 100
        except ValueError:
            raise UsageError(
                f"{what}: expected a percentage like 10% or 0.1, got {text!r}"
            ) from None
    if not math.isfinite(frac) or frac < 0:
        raise UsageError(f"{what}: expected a non-negative percentage, got {text!r}")
    return frac


def is_digits(text: str) -> bool:
    """Whether ``text`` is a non-empty run of ASCII digits, which ``int`` reads: ``"²"`` and
    ``"٣"`` pass ``str.isdigit`` but ``int`` refuses them."""
    return text.isascii() and text.isdigit()


def parse_count(text: str | int, *, what: str = "count", minimum: int = 1) -> int:
    """Parse a whole count such as ``64``, ``10k`` (decimal), checking the minimum."""
    if isinstance(text, bool):
        raise UsageError(f"{what}: expected a whole number, got {text!r}")
    if isinstance(text, int):
        value = text
    elif isinstance(text, float) and text.is_integer():
        value = int(text)
    else:
        m = _COUNT_RE.match(str(text))
        if not m:
            raise UsageError(f"{what}: expected a whole number, got {text!r}")
        value_f = float(m.group(1)) * _DECIMAL[m.group(2).lower()]
        if not value_f.is_integer():
            raise UsageError(f"{what}: expected a whole number, got {text!r}")
        value = int(value_f)
    if value < minimum:
        raise UsageError(f"{what}: must be at least {minimum}, got {value}")
    return value


def parse_rate(text: str) -> tuple[float, str]:
    """Parse a rate: ``5GiB/s`` -> (bytes/s, "B/s"); ``20k/s`` or ``20kops`` -> (ops/s, "ops/s")."""
    s = str(text).strip()
    body = s.removesuffix("/s")
    if body.lower().endswith("ops"):
        return float(parse_count(body[:-3] or "1", what="rate", minimum=0)), "ops/s"
    if re.search(r"[bB]$", body):
        return float(parse_size(body, what="rate")), "B/s"
    return float(parse_count(body, what="rate", minimum=0)), "ops/s"


_BIN_LABELS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]


def format_bytes(n: float | None, *, digits: int = 1) -> str:
    """``1536`` -> ``1.5 KiB``; binary units, labelled; ``-`` for none (as format_rate)."""
    if n is None:
        return "-"
    n = float(n)
    i = 0
    while abs(n) >= 1024 and i < len(_BIN_LABELS) - 1:
        n /= 1024
        i += 1
    if i == 0:
        return f"{int(n)} B"
    return f"{n:.{digits}f} {_BIN_LABELS[i]}"


def format_size(n: int) -> str:
    """An exact size as it can be typed back: ``4096`` -> ``4KiB``, ``1536`` -> ``1536``."""
    n = int(n)
    for label in reversed(_BIN_LABELS[1:]):
        unit = 1 << (10 * _BIN_LABELS.index(label))
        if n and n % unit == 0:
            return f"{n // unit}{label}"
    return str(n)


def format_rate(bps: float | None) -> str:
    """Bytes per second as MiB/s or GiB/s with the label."""
    if bps is None:
        return "-"
    if bps >= 10 * (1 << 30):
        return f"{bps / (1 << 30):.2f} GiB/s"
    return f"{bps / (1 << 20):.1f} MiB/s"


def format_count(x: float | None, unit: str = "") -> str:
    """``12345.6`` -> ``12.3k``."""
    if x is None:
        return "-"
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.1f}{suf}{unit}"
    return f"{x:.1f}{unit}" if x < 100 else f"{x:.0f}{unit}"


def format_seconds(s: float | None) -> str:
    """A latency or duration with a fitting unit: ``0.00012`` -> ``120 us``."""
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.0f} us"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    if s < 120:
        return f"{s:.2f} s"
    return f"{s / 60:.1f} min"


def format_spread(
    n: int,
    lo: float,
    hi: float,
    cv: float | None,
    fmt: Callable[[float], str],
    span: Callable[[float, float], str] | None = None,
) -> str:
    """The spread beside a median over repeats: ``n=6, 559.0–1320.0 MiB/s, CV 29 %``.

    ``n=1`` alone for a single measurement (no spread to show). The range shares its unit
    label when both ends have the same one; ``span`` formats it instead where given.
    """
    if n <= 1:
        return "n=1"
    if span is not None:
        text = span(lo, hi)
    else:
        a, b = fmt(lo), fmt(hi)
        a_num, _, a_unit = a.partition(" ")
        text = f"{a_num}–{b}" if a_unit and a_unit == b.partition(" ")[2] else f"{a}–{b}"
    cv_text = f", CV {cv * 100:.0f} %" if cv is not None else ""
    return f"n={n}, {text}{cv_text}"
