"""torch.distributed coordination for multi-client runs (filled in by the distributed work)."""

from __future__ import annotations

from typing import Any


def hooks_from_env() -> Any:
    """Coordination hooks when launched by torchrun with WORLD_SIZE > 1, else None."""
    return None
