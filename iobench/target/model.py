"""The Target: a resolved target (a directory or an fsspec URL) and the run directory iobench
owns inside it; what a result records of it."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..core.redact import redact_obj
from .mounts import fs_class

RUN_DIR_PREFIX = ".iobench-"


def is_url(target: str) -> bool:
    return "://" in target and not target.startswith("file://")


@dataclass
class Target:
    """A resolved target and the run directory iobench owns inside it."""

    path_or_url: str
    root: str  # the directory path (local) or URL the user gave, normalised
    run_dir: str = ""  # TARGET/.iobench-<run_id>
    fs_type: str = "unknown"
    mount_point: str = ""
    mount_source: str = ""
    free_bytes: int = 0
    direct_io: bool | str = False  # True, False, or "unsupported"
    direct_reason: str | None = None
    direct_align: int | None = None  # bytes O_DIRECT offsets and lengths are multiples of
    kind: str = "posix"  # "posix" or "fsspec"
    layout: dict[str, Any] = field(default_factory=dict)  # Lustre/GPFS striping
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)  # fsspec only
    warnings: list[str] = field(default_factory=list)
    created: bool = False
    handle: Any = field(default=None, repr=False, compare=False)  # the RunDir, held open

    def to_dict(self) -> dict[str, Any]:
        return redact_obj(self._fields())  # a URL's credentials never reach a result

    def _fields(self) -> dict[str, Any]:
        return {
            "path_or_url": self.path_or_url,
            "fs_type": self.fs_type,
            "fs_class": "object" if self.kind == "fsspec" else fs_class(self.fs_type),
            "kind": self.kind,
            "mount_point": self.mount_point,
            "mount_source": self.mount_source,
            "free_bytes": self.free_bytes,
            "direct_io": self.direct_io,
            "direct_reason": self.direct_reason,
            **({"direct_align": self.direct_align} if self.direct_align else {}),
            "run_dir": self.run_dir,
            "layout": self.layout,
        }

    def path(self, *parts: str) -> str:
        return os.path.join(self.run_dir, *parts)
