"""A generator's plan: the phases it will run, what they write, and how long they may take."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PlannedPhase:
    name: str
    op: str
    bytes_moved: int  # bytes read or written by the phase
    note: str = ""


@dataclass  # mutable: generators add phases and raise space_bytes/inodes as they plan
class Plan:
    """What a run will do. ``space_bytes`` is the peak it occupies on the target."""

    phases: list[PlannedPhase] = field(default_factory=list)
    space_bytes: int = 0
    inodes: int = 0  # the most files and directories it holds on the target at once
    # sizes (bytes) that reach O_DIRECT reads or writes as lengths or offsets, by parameter
    # name: each must be a multiple of the target's O_DIRECT alignment (checked at planning)
    direct_sizes: dict[str, int] = field(default_factory=dict)

    def add(self, name: str, op: str, bytes_moved: int, note: str = "") -> None:
        self.phases.append(PlannedPhase(name, op, bytes_moved, note))

    @property
    def bytes_moved(self) -> int:
        return sum(p.bytes_moved for p in self.phases)
