"""Files read as input, opened and parsed so that no file can hang or crash iobench.

One mechanism per family, used by every reader of a file the user names:

- :func:`open_regular`: a file opened by name is opened ``O_NONBLOCK`` (a FIFO no one writes
  would otherwise block the open for ever), checked with ``fstat`` on the opened descriptor to
  be a regular file (no race between a check and the open), then made blocking again. A FIFO,
  device, socket or directory is an :class:`NotRegularFile` (an OSError whose ``strerror`` says
  what it is), so callers that name ``e.strerror`` need nothing more.
- :func:`loads_json`: JSON with bounded nesting and integers (a JSON integer of 400 digits, or
  100,000 nested brackets, is a ``ValueError`` naming where it is, never a RecursionError or an
  OverflowError further on).
- :func:`check_toml_shape`: a pre-parse scan of TOML text bounding the nesting of arrays and
  inline tables and the parts of a dotted key, before ``tomllib`` (which recurses without bound
  on the first and is quadratic on the second).

Base layer: imports nothing from iobench.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import stat
from typing import IO, Any

#: Deepest nesting of objects and arrays in a JSON file read as input (results nest ~6 deep).
MAX_JSON_DEPTH = 64
#: Largest magnitude of a JSON integer read as input: no count or size iobench writes is near it.
MAX_JSON_INT = 2**64
#: Deepest nesting of arrays and inline tables in a TOML file (workloads nest 2 deep).
MAX_TOML_DEPTH = 32
#: Most parts in one dotted TOML key (``a.b.c = 1`` has 3; workloads use 1 or 2).
MAX_TOML_KEY_PARTS = 32


def file_kind(mode: int) -> str | None:
    """What a non-regular file is, in words (None for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    for test, word in (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def kind_of(path: str | os.PathLike[str]) -> str:
    """What ``path`` is, in words, following links ("a FIFO", "a regular file", "a symbolic
    link to X, which does not exist"), without opening it."""
    try:
        return file_kind(os.stat(path).st_mode) or "a regular file"
    except FileNotFoundError:
        if os.path.islink(path):
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
        return "missing"
    except OSError as e:
        return f"unreadable ({e.strerror})"


class NotRegularFile(OSError):
    """An input that is not a regular file (``kind``: "a FIFO", "a directory", ...)."""

    def __init__(self, path: str | os.PathLike[str], kind: str):
        super().__init__(errno.EINVAL, f"it is {kind}", str(path))
        self.kind = kind


def open_regular_fd(path: str | os.PathLike[str], flags: int = 0) -> int:
    """A read-only descriptor of ``path``, only if it is a regular file.

    Links are followed (an input may be a link to a file). The open never blocks: it is made
    with ``O_NONBLOCK`` and the descriptor is checked with ``fstat`` before anything is read;
    a regular file then gets its blocking mode back. Raises :class:`NotRegularFile` (an
    OSError) for anything else, and the open's own OSError (missing, no permission...).
    ``flags`` are added to the open's (``O_NOATIME``).
    """
    flags |= os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:  # pragma: no cover - O_RDONLY opens directories on Linux
        raise NotRegularFile(path, "a directory") from None
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise NotRegularFile(path, kind)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: str | os.PathLike[str], flags: int = 0) -> IO[bytes]:
    """``path`` opened read-only as a binary file, only if it is a regular file
    (:func:`open_regular_fd`)."""
    return os.fdopen(open_regular_fd(path, flags), "rb")


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path`` (:func:`open_regular`): the
    caller tells a file over ``limit`` by the length."""
    with open_regular(path) as f:
        return f.read(limit + 1)


def is_regular(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a regular file (following links), without opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


# -- JSON --------------------------------------------------------------------------------------


def _where(path: list[str]) -> str:
    return "".join(path).lstrip(".") or "the top level"


def _shown(text: str) -> str:
    return text if len(text) <= 24 else f"{text[:12]}…({len(text):,} digits)"


def _big_int(text: str) -> int:
    if len(text.lstrip("-")) > 30:  # beyond 2**64 whatever the digits (and int()'s own limit)
        return _HugeInt(text)
    value = int(text)
    if abs(value) > MAX_JSON_INT:
        return _HugeInt(text)
    return value


class _HugeInt(int):
    """A JSON integer beyond MAX_JSON_INT, kept as its text until :func:`_check_tree` names it."""

    text: str

    def __new__(cls, text: str) -> _HugeInt:
        obj = super().__new__(cls, 0)
        obj.text = text
        return obj


def loads_json(data: bytes | str) -> Any:
    """Parse JSON read from a file: a ValueError (naming the field) for nesting deeper than
    MAX_JSON_DEPTH or an integer beyond MAX_JSON_INT, as for malformed JSON."""
    try:
        obj = json.loads(data, parse_int=_big_int)
    except RecursionError:
        raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep") from None
    _check_tree(obj)
    return obj


def _check_tree(obj: Any) -> None:
    """Walk the parsed value (no recursion): depth and integer bounds, naming the field."""
    stack: list[tuple[Any, list[str], int]] = [(obj, [], 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, _HugeInt):
            raise ValueError(
                f"{_where(path)} = {_shown(value.text)} (an integer beyond "
                f"{MAX_JSON_INT:,}) is not a value iobench writes"
            )
        if isinstance(value, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise ValueError(f"{_where(path)}: JSON nested more than {MAX_JSON_DEPTH} levels")
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if isinstance(v, dict | list | _HugeInt):
                    part = f".{k}" if isinstance(value, dict) else f"[{k}]"
                    stack.append((v, [*path, part], depth + 1))


# -- TOML --------------------------------------------------------------------------------------

# the pieces of TOML the scan must step over: strings (basic, literal, multi-line) and comments
_TOML_SKIP = re.compile(
    r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*',
    re.DOTALL,
)
_KEY_DOT = re.compile(r"\s*\.\s*")


def check_toml_shape(text: str) -> str | None:
    """Why ``text`` is refused before it is parsed (None when it may be parsed): arrays or
    inline tables nested deeper than MAX_TOML_DEPTH, or a dotted key (also a table header)
    of more than MAX_TOML_KEY_PARTS parts. One linear pass; strings and comments skipped."""
    depth = 0
    line = 1
    pos = 0
    dots = 0  # dots in the key being read (reset at a value or a line break)
    for m in _TOML_SKIP.finditer(text):
        problem, depth, dots, line = _scan(text[pos : m.start()], depth, dots, line)
        if problem:
            return problem
        line += m.group().count("\n")
        pos = m.end()
    problem, _d, _k, _l = _scan(text[pos:], depth, dots, line)
    return problem


def _scan(chunk: str, depth: int, dots: int, line: int) -> tuple[str | None, int, int, int]:
    for ch in chunk:
        if ch in "[{":
            depth += 1
            if depth > MAX_TOML_DEPTH:
                return (
                    f"line {line}: arrays or tables nested more than {MAX_TOML_DEPTH} deep",
                    depth,
                    dots,
                    line,
                )
        elif ch in "]}":
            depth = max(0, depth - 1)
        elif ch == ".":
            dots += 1
            if dots >= MAX_TOML_KEY_PARTS:
                return (
                    f"line {line}: a dotted key of more than {MAX_TOML_KEY_PARTS} parts",
                    depth,
                    dots,
                    line,
                )
        elif ch in "=\n,":
            dots = 0
            line += ch == "\n"
    return None, depth, dots, line
