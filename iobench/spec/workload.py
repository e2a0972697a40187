"""Workload and profile files (TOML) loaded into frozen dataclasses, validated at load time.

A workload file names a generator and sets its parameters; every parameter has a declared
type, so an unknown key, a wrong type or a bad unit is an error that names the file, the key
and the expected form. ``--set key=value`` overrides go through the same coercion.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from ..core.errors import SpecError, UsageError
from ..core.inputs import NotRegularFile, check_toml_shape, kind_of, open_regular
from ..core.units import check_stall_timeout, parse_count, parse_duration, parse_percent, parse_size
from ..formats.registry import FORMATS
from .params import GENERATOR_PARAMS, Param, generator_names

# Bounds for values no run can use: a duration beyond a week, a count beyond a billion (a file
# list or a thread pool that size exhausts memory before the run starts), an integer beyond
# what C's long and fio take. A parameter may set a tighter ``maximum``.
KIND_MAXIMUM: dict[str, float] = {
    "duration": 7 * 86400.0,
    "count": 10**9,
    "int": 2**63 - 1,
    "float": 1e15,
}


_EXPECT = {
    "size": "a size like 4k, 1MiB or 2GB",
    "duration": "a duration like 500ms, 30s or 5m",
    "count": "a whole number >= {min}",
    "int": "a whole number >= {min}",
    "float": "a number >= {min}",
    "bool": "true or false",
    "choice": "one of {choices}",
    "str": "a string",
    "sizes": 'a list of sizes like ["128KiB", "1MiB"]',
    "counts": "a list of whole numbers like [1, 2, 4]",
    "rate": "a rate like 100MiB (bytes/s per worker)",
    "percent": "a percentage like 90% or 0.9",
}


def _expected(p: Param) -> str:
    text = _EXPECT[p.kind].format(
        min=int(p.minimum) if p.minimum is not None else 0, choices=", ".join(p.choices)
    )
    return text + (" (or empty to unset)" if p.optional else "")


def _rate(value: Any, name: str) -> int:
    return parse_size(
        value[:-2] if isinstance(value, str) and value.endswith("/s") else value, what=name
    )


#: The kinds a units parser reads (it raises UsageError naming what it expected).
_PARSERS: dict[str, Callable[[Any, str, Param], Any]] = {
    "size": lambda v, name, p: parse_size(v, what=name),
    "rate": lambda v, name, p: _rate(v, name),
    "duration": lambda v, name, p: parse_duration(v, what=name),
    "count": lambda v, name, p: parse_count(v, what=name, minimum=int(p.minimum or 0)),
    "int": lambda v, name, p: parse_count(v, what=name, minimum=int(p.minimum or 0)),
    "percent": lambda v, name, p: parse_percent(v, what=name),
}
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def _parse_other(name: str, p: Param, value: Any, where: str) -> Any:
    """The other kinds; ValueError where the value is not one (``coerce`` says what was
    expected)."""
    if p.kind == "float":
        if isinstance(value, bool):
            raise ValueError(value)
        return float(value)  # "inf" and "nan" parse: refused by coerce, with the bound
    if p.kind == "bool":
        if isinstance(value, bool):
            return value
        if str(value).lower() in _TRUE + _FALSE:
            return str(value).lower() in _TRUE
        raise ValueError(value)
    if p.kind == "choice":
        if str(value) not in p.choices:
            raise ValueError(value)
        return str(value)
    if p.kind == "str":
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ValueError(value)
        return str(value)
    if p.kind in ("sizes", "counts"):
        items = value
        if isinstance(value, str):  # one list: "[a, b]" or "a, b"; a nested one is refused
            text = value.strip()
            if text.startswith("[") and text.endswith("]"):
                text = text[1:-1]
            if "[" in text or "]" in text:
                raise ValueError(value)
            items = [s for s in text.split(",") if s.strip()]
        if not isinstance(items, list):
            raise ValueError(value)
        one = Param("size" if p.kind == "sizes" else "count", None, "", minimum=1)
        return [coerce(name, one, str(i).strip().strip("'\""), where) for i in items]
    raise AssertionError(p.kind)  # pragma: no cover - a programming error in a PARAMS table


def coerce(name: str, p: Param, value: Any, where: str) -> Any:
    """Turn a TOML value or a --set string into the parameter's type, or raise SpecError."""

    def bad(detail: str | None = None) -> SpecError:
        msg = f"{where}: {name} = {value!r} is not valid"
        if detail and "expected" in detail:  # the parser already said what it expected
            return SpecError(f"{msg} ({detail.split(': ', 1)[-1]})")
        return SpecError(msg + (f" ({detail})" if detail else ""), hint=f"expected {_expected(p)}")

    if p.optional and (value is None or value == "" or value == "none"):
        return None
    try:
        simple = _PARSERS.get(p.kind)
        v = simple(value, name, p) if simple else _parse_other(name, p, value, where)
    except SpecError:
        raise
    except (UsageError, ValueError, TypeError) as e:
        raise bad(getattr(e, "message", None)) from None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if isinstance(v, float) and not math.isfinite(v):
            raise bad("must be a finite number")
        if p.minimum is not None and v < p.minimum:
            raise bad(f"must be at least {p.minimum:g}")
        top = p.maximum if p.maximum is not None else KIND_MAXIMUM.get(p.kind)
        if top is not None and v > top:
            raise bad(f"must be at most {_bound(p.kind, top)}")
    return v


def _bound(kind: str, top: float) -> str:
    """A bound as the user would write it: 7d, 1h, 100%, 4096."""
    if kind == "duration":
        for unit, sec in (("d", 86400), ("h", 3600), ("m", 60)):
            if top >= sec and top % sec == 0:
                return f"{top / sec:g}{unit}"
        return f"{top:g}s"
    if kind == "percent":
        return f"{top:.0%}"
    return f"{top:,}" if isinstance(top, int) and top >= 10**6 else f"{top:g}"


# A time-based phase (and qualify's whole budget) is at most this: longer is a typo, not a
# soak test (1e300s overflowed the engines' nanosecond clocks and passed with 0 bytes).
MAX_PHASE_TIME_S = KIND_MAXIMUM["duration"]


# Parameters every generator understands, with the same meaning everywhere (fio's names).
COMMON_PARAMS: dict[str, Param] = {
    "size": Param("size", 128 << 20, "bytes each worker moves (fio's per-job size)", minimum=1),
    "block_size": Param("size", 1 << 20, "bytes per I/O", minimum=1),
    "jobs": Param("count", 4, "concurrent workers", minimum=1, maximum=4096),
    "direct": Param("bool", True, "O_DIRECT (falls back to buffered + fadvise when refused)"),
    "fsync": Param("choice", "end", "when to fsync written files", ("never", "file", "end")),
    "time": Param(
        "duration", None, "run each phase for this long (time-based)", optional=True
    ),  # at most KIND_MAXIMUM["duration"] (a week) per phase
    # fio's steadystate: with time, a time-based phase ends once its bandwidth (or IOPS) is
    # steady by stats.DEFAULT_STEADY, and time is its limit; false: every phase runs its time
    "steady": Param("bool", False, "end a time-based phase once steady (time: its limit)"),
    "rate": Param("rate", None, "per-worker bandwidth limit in bytes/s", optional=True, minimum=1),
    "seed": Param("int", 1, "seed for data, shuffles and offsets", minimum=0),
    "verify": Param("bool", False, "checksum every block written and check it on read"),
    # Lustre: `lfs setstripe -c/-S` on the run dir before any file is created (ignored elsewhere)
    "stripe_count": Param(
        "int", None, "Lustre stripe count of the run dir (-1: all OSTs)", optional=True, minimum=-1
    ),
    "stripe_size": Param(
        "size", None, "Lustre stripe size of the run dir (64KiB multiple)", optional=True, minimum=1
    ),
}


# I/O buffers and file lists may take at most this share of the host's memory: a run that
# needs more would fail mid-run on ENOMEM (or be OOM-killed) after writing to the target.
MEMORY_SHARE = 0.5
FILE_ENTRY_BYTES = 512  # one planned file (its path and size) in memory, generously


def check_memory(params: dict[str, Any], mem_bytes: int) -> None:
    """Refuse (SpecError, at planning) parameters whose buffers or file lists cannot fit.

    Each worker holds one buffer of its block (a whole file where phases read whole files), times
    the queue depth: the largest block x the most workers x iodepth must fit in MEMORY_SHARE
    of ``mem_bytes``; so must the list of planned files. The line names the keys and the bound.
    """
    if mem_bytes <= 0:
        return
    budget = int(mem_bytes * MEMORY_SHARE)
    blocks = [("block_size", params.get("block_size") or 0)]
    blocks += [("block_sizes", b) for b in params.get("block_sizes") or []]
    blocks += [("rand_block_size", params.get("rand_block_size") or 0)]
    blocks += [("file_sizes", b) for b in params.get("file_sizes") or []]
    if params.get("file_size"):  # whole-file reads: the largest file in one buffer
        blocks.append(("file_size", params["file_size"] + 6 * (params.get("size_sd") or 0)))
    workers = [("jobs", params.get("jobs") or 1)]
    workers += [("jobs_sweep", j) for j in params.get("jobs_sweep") or []]
    workers += [("rand_jobs", params.get("rand_jobs") or 0)]
    workers += [("readers", r) for r in params.get("readers") or []]
    bkey, block = max(blocks, key=lambda kv: kv[1])
    wkey, nworkers = max(workers, key=lambda kv: kv[1])
    depth = params.get("iodepth") or 1
    need = block * nworkers * depth
    from ..core.units import format_bytes

    if need > budget:
        how = f"{bkey} {format_bytes(block)} x {wkey} {nworkers}" + (
            f" x iodepth {depth}" if depth > 1 else ""
        )
        raise SpecError(
            f"{how} needs {format_bytes(need)} of I/O buffers, more than "
            f"{MEMORY_SHARE:.0%} of this host's memory ({format_bytes(mem_bytes)})",
            hint=f"lower {bkey} or {wkey} with --set",
        )
    files = params.get("files") or 0
    if "file_sizes" in params:  # small files: that many per worker
        files *= params.get("jobs") or 1
    if files * FILE_ENTRY_BYTES > budget:
        raise SpecError(
            f"files = {files:,} needs about {format_bytes(files * FILE_ENTRY_BYTES)} of memory "
            f"to plan, more than {MEMORY_SHARE:.0%} of this host's ({format_bytes(mem_bytes)})",
            hint="lower files with --set",
        )


def check_duration(params: dict[str, Any]) -> None:
    """Refuse (SpecError, at planning) a rate limit that makes a phase outlast the duration
    bound (a week): ``size=128MiB rate=1`` would take four years. Time-based phases too: their
    writes put every byte of their files down once before the time may end them."""
    rate, size = params.get("rate"), params.get("size")
    if not rate or not size:
        return
    top = KIND_MAXIMUM["duration"]
    if size / rate > top:
        from ..core.units import format_bytes

        raise SpecError(
            f"size {format_bytes(size)} at rate {format_bytes(rate)}/s takes "
            f"{size / rate / 86400:,.0f} days per phase, more than {_bound('duration', top)}",
            hint="raise rate or lower size (a time-based write still writes its files once)",
        )


@dataclass(frozen=True)
class Workload:
    """A workload file, its generator and its fully resolved parameters."""

    name: str
    path: str
    generator: str
    description: str
    params: dict[str, Any] = field(hash=False)
    # run control, not a workload parameter: it changes no figure, so not the spec hash
    stall_timeout: float | None = field(default=None, compare=False)

    @property
    def spec_hash(self) -> str:
        """Hash of the normalised spec: generator + resolved params (not the file's text)."""
        blob = json.dumps({"generator": self.generator, "params": self.params}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "generator": self.generator,
            "spec_hash": self.spec_hash,
            "params": dict(self.params),
        }


def _shown(key: str) -> str:
    """A key as typed when it prints plainly; quoted (repr) when it holds odd characters."""
    return key if key and key.isprintable() and key.strip() == key else repr(key)


def workloads_dir() -> Path:
    """Where named workloads live: $IOBENCH_WORKLOADS, else the copy an installed package
    carries (``iobench/workloads/``, pyproject's package-dir), else a source checkout's
    top-level ``workloads/`` (an editable install, PYTHONPATH)."""
    env = os.environ.get("IOBENCH_WORKLOADS")
    if env is not None:
        if not os.path.isdir(env):  # an empty or mistyped variable never means "no workloads"
            what = (
                "is empty"
                if not env
                else ("does not exist" if not os.path.lexists(env) else "is not a directory")
            )
            raise SpecError(
                f"IOBENCH_WORKLOADS={env!r} {what}",
                hint="point it at a directory of workload TOML files, or unset it",
            )
        return Path(env)
    here = Path(__file__).resolve().parent.parent  # the iobench package (this is iobench/spec/)
    shipped = here / "workloads"
    return shipped if shipped.is_dir() else here.parent / "workloads"


# Workload and profile files are a few hundred bytes; a bigger one is not read into memory.
MAX_SPEC_BYTES = 1 << 20


_TOML_HINT = "give a path to a TOML file"


def _read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file: a regular UTF-8 text file of at most MAX_SPEC_BYTES."""
    try:
        with open_regular(path) as f:  # a FIFO or device is never read (nor blocks the open)
            st = os.fstat(f.fileno())
            if st.st_size > MAX_SPEC_BYTES:
                raise SpecError(
                    f"{path} is {st.st_size:,} bytes: not a workload or profile file "
                    f"({MAX_SPEC_BYTES >> 20} MiB at most)",
                    hint="give a path to a TOML file",
                )
            raw = f.read(MAX_SPEC_BYTES + 1)
    except NotRegularFile as e:
        raise SpecError(f"{path} is not a regular file ({e.strerror})", hint=_TOML_HINT) from None
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(
            f"{path}: not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start})",
            hint="TOML files are UTF-8: save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)",
        ) from None
    shape = check_toml_shape(text)  # tomllib recurses without bound, and is quadratic in
    if shape:  # a dotted key's parts: both bounded before it parses
        raise SpecError(f"{path}: {shape}", hint="this is no workload or profile file") from None
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise SpecError(f"{path}: malformed TOML ({e})", hint="fix the file's syntax") from None


def find_file(name: str, kind: str = "workload", base: Path | None = None) -> Path:
    """A workload/profile (or, with its ``base``, a checkpoint model) by name
    (``workloads/NAME.toml``) or by path to a TOML file."""
    p = Path(name)
    if p.suffix == ".toml" or os.sep in name:
        if p.is_file():
            return p
        if p.exists():  # a directory, a FIFO, a device: never opened
            what = "a directory" if p.is_dir() else "not a regular file"
            raise SpecError(f"{kind} file {name} is {what}", hint="give a path to a TOML file")
        raise SpecError(f"{kind} file {name} does not exist", hint="give a path to a TOML file")
    base = base or _kind_dir(kind)
    cand = base / f"{name}.toml"
    if cand.is_file():
        return cand
    if os.path.lexists(cand):  # a FIFO, a device, a dangling link by that name: never opened
        raise SpecError(
            f"{kind} file {cand} is {kind_of(cand)}", hint="make it a TOML file or remove it"
        )
    known = ", ".join(sorted(q.stem for q in base.glob("*.toml") if q.is_file()))
    if not known:  # an install without its workloads/: say where it looked, not an empty list
        raise SpecError(
            f"unknown {kind} {name!r}: no {kind} files in {base}",
            hint="reinstall iobench (its workloads/ ship in the package) or set IOBENCH_WORKLOADS",
        )
    raise SpecError(f"unknown {kind} {name!r}", hint=f"choose one of: {known}")


def _kind_dir(kind: str) -> Path:
    return workloads_dir() / ("profiles" if kind == "profile" else "")


def coerce_table(
    data: dict[str, Any], declared: dict[str, Param], where: str, label: str
) -> dict[str, Any]:
    """Every key of a TOML table coerced to its declared parameter; an unknown key is a
    SpecError naming the file and the keys there are (``{label} keys are ...``)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in declared:
            raise SpecError(
                f"{where}: unknown key {key!r}",
                hint=f"{label} keys are {', '.join(sorted(declared))}",
            )
        out[key] = coerce(key, declared[key], value, where)
    return out


def parse_overrides(items: list[str] | None) -> dict[str, str]:
    """``["size=1GiB", "jobs=8"]`` -> dict; a malformed item is a SpecError."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(f"--set {item!r} is not KEY=VALUE", hint="write e.g. --set size=1GiB")
        out[key] = value.strip()
    return out


def load_workload(
    name: str,
    overrides: dict[str, Any] | None = None,
    *,
    generators: Callable[[str], dict[str, Param]] | None = None,
) -> Workload:
    """Load and validate a workload file, then apply overrides (each validated the same way)."""
    params_of = generators or GENERATOR_PARAMS.__getitem__
    path = find_file(name, "workload")
    data = _read_toml(path)
    where = str(path)
    allowed_top = {"description", "generator", "params"}
    for key in data:
        if key not in allowed_top:
            raise SpecError(
                f"{where}: unknown key {key!r}",
                hint=f"top-level keys are {', '.join(sorted(allowed_top))}",
            )
    gen = data.get("generator")
    if not isinstance(gen, str) or gen not in generator_names():
        raise SpecError(
            f"{where}: generator = {gen!r} is not valid",
            hint=f"expected one of: {', '.join(generator_names())}",
        )
    declared = {**COMMON_PARAMS, **params_of(gen)}
    raw = data.get("params", {})
    if not isinstance(raw, dict):
        raise SpecError(
            f"{where}: [params] must be a table", hint="write [params] then key = value"
        )
    resolved = {k: p.default for k, p in declared.items()}
    raw, overrides, stall = _stall_timeout(raw, overrides, where)
    for key, value in raw.items():
        if key not in declared:
            raise SpecError(
                f"{where}: unknown key params.{_shown(key)}",
                hint=f"known parameters: {', '.join(sorted(declared))}",
            )
        resolved[key] = coerce(key, declared[key], value, where)
    for key, value in (overrides or {}).items():
        if key not in declared:
            raise SpecError(
                f"--set {_shown(key)}: unknown parameter for workload {path.stem}",
                hint=f"known parameters: {', '.join(sorted(declared))}",
            )
        resolved[key] = coerce(key, declared[key], value, "--set")
    desc = data.get("description", "")
    return Workload(path.stem, str(path), gen, str(desc), resolved, stall)


STALL_PARAM = Param(
    "duration", None, "give up (exit 4) after a phase's I/O made no progress this long (0: never)",
    optional=True,
)  # fmt: skip


def _stall_timeout(
    raw: dict[str, Any], overrides: dict[str, Any] | None, where: str
) -> tuple[dict[str, Any], dict[str, Any], float | None]:
    """``stall_timeout`` (file or --set) taken out of the parameters: the watchdog's
    (iobench.run.stall), kept out of the parameters and the spec hash."""
    raw, overrides = dict(raw), dict(overrides or {})
    value = None
    for table, source in ((raw, where), (overrides, "--set")):
        if "stall_timeout" in table:
            text = table.pop("stall_timeout")
            value = coerce("stall_timeout", STALL_PARAM, text, source)
            try:  # at least the watchdog's own period (or 0: off), at most 7 days
                check_stall_timeout(value, "stall_timeout", text)
            except UsageError as e:
                raise SpecError(f"{source}: {e.message}", hint=e.hint) from None
    return raw, overrides, value


# -- profiles (workload x accelerator) ---------------------------------------------------------

COLLATE_CHOICES = ("stack", "list")  # how a batch is collated: one tensor, or one per sample
PROFILE_PARAMS: dict[str, Param] = {
    "description": Param("str", "", "one line"),
    "model": Param("str", "custom", "the training workload emulated"),
    "accelerator": Param("str", "custom", "the accelerator emulated"),
    "format": Param("choice", "raw", "sample file format", FORMATS),
    "sample_size": Param("size", 1 << 20, "mean bytes per sample", minimum=1),
    "sample_size_sd": Param("size", 0, "standard deviation of the sample size", minimum=0),
    "samples_per_file": Param("count", 1, "samples stored in one file", minimum=1),
    "files": Param("count", 256, "files in the generated dataset", minimum=1),
    "batch_size": Param("count", 8, "samples per step per accelerator", minimum=1),
    "compute_s": Param("duration", 0.05, "emulated compute seconds per step", maximum=3600.0),
    "workers": Param("count", 2, "DataLoader workers per accelerator", minimum=0, maximum=1024),
    "prefetch": Param("count", 2, "DataLoader prefetch factor", minimum=1, maximum=1024),
    "au_min": Param("percent", 0.9, "accelerator utilisation pass line", maximum=1.0),
    "epochs": Param("count", 1, "passes over the dataset", minimum=1),
    # What the real pipeline spent per sample beyond its bytes (``iobench profile`` measures
    # them): the synthetic loader's workers spend decode_s (thread CPU, a burn) per sample and
    # hand each sample on at decoded_size bytes; open_s is the profiled storage's own.
    "decode_s": Param(
        "duration",
        0.0,
        "CPU seconds a worker spends decoding one sample (the replay burns it)",
        maximum=60.0,
    ),
    "decode_wall_s": Param(
        "duration", 0.0, "wall seconds that decode took, one process (for comparison)", maximum=60.0
    ),
    "decoded_size": Param("size", 0, "bytes of a decoded sample (0: as stored)", minimum=0),
    "open_s": Param(
        "duration",
        0.0,
        "the profiled dataset's seconds per file open (for comparison)",
        maximum=60.0,
    ),
    # list: samples of different shapes (images) reach the loop one shared-memory tensor each
    "collate": Param("choice", "stack", "a batch as one tensor or one per sample", COLLATE_CHOICES),
}

#: Profile keys that are part of a run's spec only when set (older runs' hashes stay theirs).
PROFILE_OPTIONAL = ("decode_s", "decode_wall_s", "decoded_size", "open_s", "collate")


@dataclass(frozen=True)
class Profile:
    """A training workload on one accelerator kind (MLPerf Storage style)."""

    name: str
    path: str
    description: str
    model: str
    accelerator: str
    format: str
    sample_size: int
    sample_size_sd: int
    samples_per_file: int
    files: int
    batch_size: int
    compute_s: float
    workers: int
    prefetch: int
    au_min: float
    epochs: int
    decode_s: float = 0.0
    decode_wall_s: float = 0.0
    decoded_size: int = 0
    open_s: float = 0.0
    collate: str = "stack"

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)

    @property
    def demand_bps(self) -> float:
        """Bytes/s one accelerator consumes at full utilisation."""
        return (
            self.batch_size * self.sample_size / self.compute_s if self.compute_s else float("inf")
        )


def load_profile(name: str, overrides: dict[str, Any] | None = None) -> Profile:
    """Load a profile by name or path and apply overrides."""
    path = find_file(name, "profile")
    data = _read_toml(path)
    where = str(path)
    values = {k: p.default for k, p in PROFILE_PARAMS.items()}
    values.update(coerce_table(data, PROFILE_PARAMS, where, "profile"))
    for key, value in (overrides or {}).items():
        if key not in PROFILE_PARAMS:
            raise SpecError(
                f"--set {_shown(key)}: unknown profile key",
                hint=f"profile keys are {', '.join(sorted(PROFILE_PARAMS))}",
            )
        values[key] = coerce(key, PROFILE_PARAMS[key], value, "--set")
    return Profile(name=path.stem, path=str(path), **values)


def list_files(kind: str = "workload", base: Path | None = None) -> list[tuple[str, str]]:
    """(name, description) of every workload or profile file (or TOML file in ``base``)."""
    base = base or _kind_dir(kind)
    out = []
    for p in sorted(base.glob("*.toml")):
        try:
            desc = str(_read_toml(p).get("description", ""))
        except SpecError as e:
            desc = f"(unreadable: {e.message})"
        out.append((p.stem, desc))
    return out
