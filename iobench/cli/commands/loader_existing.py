"""``iobench loader PATH --existing``: the options checked against the existing-dataset mode,
then ``iobench.loader.existing.run_existing``."""

from __future__ import annotations

import sys
from typing import Any

from ...core.errors import UsageError


def existing_run(
    target: str,
    existing: bool,
    profile: str | None,
    sets: list[str] | None,
    **opts: Any,
) -> Any:
    """Refuse what does not apply to an existing dataset (one line, exit 2), then run."""
    from ...distributed import coordinator_from_env
    from ...loader.existing import run_existing, settle

    if not existing:
        flag = "--format" if opts["fmt"] else "--transform"
        raise UsageError(f"{flag} applies to --existing only", hint="add --existing")
    if coordinator_from_env().world > 1 or (opts["gpus"] or 1) != 1:
        raise UsageError(
            "--existing runs one emulated accelerator in one process",
            hint="leave out --gpus and torchrun",
        )
    if opts["keep"]:
        raise UsageError("--keep does not apply to --existing: no run directory is made")
    if opts["direct"]:
        raise UsageError(
            "--direct does not apply to --existing: the dataset is read buffered, its pages "
            "dropped per file",
            hint="leave it out, or give --buffered to keep the page cache",
        )
    job = settle(
        target, profile, sets, fmt=opts["fmt"], transform=opts["transform"],
        workers=opts["workers"], steps=opts["steps"], epochs=opts["epochs"],
        compute=opts["compute"], cached=opts["direct"] is False,
    )  # fmt: skip
    quiet = opts["quiet"]

    def progress(line: str) -> None:
        if not quiet:
            print(f"iobench: {line}", file=sys.stderr)

    return run_existing(job, output=opts["output"], progress=progress, stall=opts["stall"])
