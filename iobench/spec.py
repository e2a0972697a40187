"""Workload and profile files (TOML) loaded into frozen dataclasses, validated at load time.

A workload file names a generator and sets its parameters; every parameter has a declared
type, so an unknown key, a wrong type or a bad unit is an error that names the file, the key
and the expected form. ``--set key=value`` overrides go through the same coercion.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from .errors import SpecError, UsageError
from .units import parse_count, parse_duration, parse_percent, parse_size


@dataclass(frozen=True)
class Param:
    """A declared parameter: its kind, default and one line of help."""

    kind: str  # size | duration | count | int | float | bool | choice | str | sizes | counts | rate | percent
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    optional: bool = False  # None allowed (e.g. time = unset)
    maximum: float | None = None  # refused above this (a bound on absurd input)


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
        if p.kind == "size":
            v: Any = parse_size(value, what=name)
        elif p.kind == "rate":
            text = value[:-2] if isinstance(value, str) and value.endswith("/s") else value
            v = parse_size(text, what=name)
        elif p.kind == "duration":
            v = parse_duration(value, what=name)
        elif p.kind in ("count", "int"):
            v = parse_count(
                value, what=name, minimum=int(p.minimum if p.minimum is not None else 0)
            )
        elif p.kind == "float":
            if isinstance(value, bool):
                raise bad()
            v = float(value)
        elif p.kind == "percent":
            v = parse_percent(value, what=name)
        elif p.kind == "bool":
            if isinstance(value, bool):
                v = value
            elif str(value).lower() in ("true", "1", "yes", "on"):
                v = True
            elif str(value).lower() in ("false", "0", "no", "off"):
                v = False
            else:
                raise bad()
        elif p.kind == "choice":
            if str(value) not in p.choices:
                raise bad()
            v = str(value)
        elif p.kind == "str":
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise bad()
            v = str(value)
        elif p.kind in ("sizes", "counts"):
            items = value
            if isinstance(value, str):
                items = [s for s in value.strip("[] ").split(",") if s.strip()]
            if not isinstance(items, list):
                raise bad()
            one = Param("size" if p.kind == "sizes" else "count", None, "", minimum=1)
            v = [coerce(name, one, str(i).strip().strip("'\""), where) for i in items]
        else:  # pragma: no cover - a programming error in a PARAMS table
            raise AssertionError(p.kind)
    except SpecError:
        raise
    except (UsageError, ValueError, TypeError) as e:
        raise bad(getattr(e, "message", None)) from None
    if p.minimum is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
        if v < p.minimum:
            raise bad(f"must be at least {p.minimum:g}")
    if p.maximum is not None and isinstance(v, (int, float)) and not isinstance(v, bool):
        if v > p.maximum:
            most = (
                f"{p.maximum:.0f}s ({p.maximum / 86400:g} days)"
                if p.kind == "duration"
                else f"{p.maximum:g}"
            )
            raise bad(f"must be at most {most}")
    return v


# A time-based phase longer than this is a typo, not a soak test (1e300s would overflow the
# engines' nanosecond clocks); a longer soak is a loop of runs with --repeat or a scheduler.
MAX_PHASE_TIME_S = 30 * 86400.0


# Parameters every generator understands, with the same meaning everywhere (fio's names).
COMMON_PARAMS: dict[str, Param] = {
    "size": Param("size", 128 << 20, "bytes each worker moves (fio's per-job size)", minimum=1),
    "block_size": Param("size", 1 << 20, "bytes per I/O", minimum=1),
    "jobs": Param("count", 4, "concurrent workers", minimum=1),
    "direct": Param("bool", True, "O_DIRECT (falls back to buffered + fadvise when refused)"),
    "fsync": Param("choice", "end", "when to fsync written files", ("never", "file", "end")),
    "time": Param(
        "duration",
        None,
        "run each phase for this long (time-based)",
        optional=True,
        maximum=MAX_PHASE_TIME_S,
    ),
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


@dataclass(frozen=True)
class Workload:
    """A workload file, its generator and its fully resolved parameters."""

    name: str
    path: str
    generator: str
    description: str
    params: dict[str, Any] = field(hash=False)

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
    """Where named workloads live: $IOBENCH_WORKLOADS, else the project's workloads/."""
    env = os.environ.get("IOBENCH_WORKLOADS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "workloads"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: malformed TOML ({e})", hint="fix the file's syntax") from None
    except OSError as e:
        raise SpecError(f"cannot read {path}: {e.strerror}") from None


def find_file(name: str, kind: str = "workload") -> Path:
    """A workload/profile by name (``workloads/NAME.toml``) or by path to a TOML file."""
    p = Path(name)
    if p.suffix == ".toml" or os.sep in name:
        if p.is_file():
            return p
        if p.is_dir():
            raise SpecError(f"{kind} file {name} is a directory", hint="give a path to a TOML file")
        if p.exists():  # a FIFO, a socket, a device: reading it could block for ever
            raise SpecError(
                f"{kind} file {name} is not a regular file", hint="give a path to a TOML file"
            )
        raise SpecError(f"{kind} file {name} does not exist", hint="give a path to a TOML file")
    base = workloads_dir() / ("profiles" if kind == "profile" else "")
    cand = base / f"{name}.toml"
    if cand.is_file():
        return cand
    known = ", ".join(sorted(q.stem for q in base.glob("*.toml")))
    raise SpecError(f"unknown {kind} {name!r}", hint=f"choose one of: {known}")


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
    from .phases import generator_names, generator_params

    params_of = generators or generator_params
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
    return Workload(path.stem, str(path), gen, str(desc), resolved)


# -- profiles (workload x accelerator) ---------------------------------------------------------

PROFILE_PARAMS: dict[str, Param] = {
    "description": Param("str", "", "one line"),
    "model": Param("str", "custom", "the training workload emulated"),
    "accelerator": Param("str", "custom", "the accelerator emulated"),
    "format": Param("choice", "raw", "sample file format", ("raw", "npz", "parquet", "tar")),
    "sample_size": Param("size", 1 << 20, "mean bytes per sample", minimum=1),
    "sample_size_sd": Param("size", 0, "standard deviation of the sample size", minimum=0),
    "samples_per_file": Param("count", 1, "samples stored in one file", minimum=1),
    "files": Param("count", 256, "files in the generated dataset", minimum=1),
    "batch_size": Param("count", 8, "samples per step per accelerator", minimum=1),
    "compute_s": Param("duration", 0.05, "emulated compute seconds per step"),
    "workers": Param("count", 2, "DataLoader workers per accelerator", minimum=0),
    "prefetch": Param("count", 2, "DataLoader prefetch factor", minimum=1),
    "au_min": Param("percent", 0.9, "accelerator utilisation pass line"),
    "epochs": Param("count", 1, "passes over the dataset", minimum=1),
}


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
    for key, value in data.items():
        if key not in PROFILE_PARAMS:
            raise SpecError(
                f"{where}: unknown key {key!r}",
                hint=f"profile keys are {', '.join(sorted(PROFILE_PARAMS))}",
            )
        values[key] = coerce(key, PROFILE_PARAMS[key], value, where)
    for key, value in (overrides or {}).items():
        if key not in PROFILE_PARAMS:
            raise SpecError(
                f"--set {_shown(key)}: unknown profile key",
                hint=f"profile keys are {', '.join(sorted(PROFILE_PARAMS))}",
            )
        values[key] = coerce(key, PROFILE_PARAMS[key], value, "--set")
    return Profile(name=path.stem, path=str(path), **values)


def list_files(kind: str = "workload") -> list[tuple[str, str]]:
    """(name, description) of every workload or profile file."""
    base = workloads_dir() / ("profiles" if kind == "profile" else "")
    out = []
    for p in sorted(base.glob("*.toml")):
        try:
            desc = str(_read_toml(p).get("description", ""))
        except SpecError as e:
            desc = f"(unreadable: {e.message})"
        out.append((p.stem, desc))
    return out
