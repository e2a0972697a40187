"""A generator's plan: the phases it will run, what they write, and how long they may take."""

from __future__ import annotations

from dataclasses import dataclass, field

from .units import format_bytes, format_rate, format_seconds


@dataclass(frozen=True)
class PlannedPhase:
    name: str
    op: str
    bytes_moved: int  # bytes read or written by the phase (a time-based one's first pass)
    note: str = ""
    time_s: float | None = None  # a time-based phase's limit (its files moved at least once)
    ops: int = 0  # metadata operations (create, stat, open, delete), for the time bound


@dataclass  # mutable: generators add phases and raise space_bytes/inodes as they plan
class Plan:
    """What a run will do. ``space_bytes`` is the peak it occupies on the target."""

    phases: list[PlannedPhase] = field(default_factory=list)
    space_bytes: int = 0
    inodes: int = 0  # the most files and directories it holds on the target at once
    # sizes (bytes) that reach O_DIRECT reads or writes as lengths or offsets, by parameter
    # name: each must be a multiple of the target's O_DIRECT alignment (checked at planning)
    direct_sizes: dict[str, int] = field(default_factory=dict)
    # what no phase times, for the wall-time bound (``untimed_s``): bytes of data built before
    # the phases that write them (samples, state dicts) and files whose cache is dropped
    built_bytes: int = 0
    drops: int = 0
    # modules the run imports (torch): imported before the plan line, whose bound starts there
    imports: tuple[str, ...] = ()

    def add(
        self,
        name: str,
        op: str,
        bytes_moved: int,
        note: str = "",
        time_s: float | None = None,
        ops: int = 0,
    ) -> None:
        self.phases.append(PlannedPhase(name, op, bytes_moved, note, time_s, ops))

    @property
    def bytes_moved(self) -> int:
        return sum(p.bytes_moved for p in self.phases)


# -- what a command will write, said before it writes ------------------------------------------

#: Operations that put bytes on the target.
WRITE_OPS = ("write", "create", "ckpt_save")
# The time bound of size-based work assumes an ordinary disk's floor (said in the line as
# such): slower storage takes longer than the bound, in proportion.
FLOOR_WRITE_BPS = 100 << 20
FLOOR_READ_BPS = 200 << 20
FLOOR_META_OPS = 1000.0  # creates, stats, opens, deletes per second
# The wall-time bound adds what no phase times (``untimed_s``), measured on the project VM (2
# shared cores, docs/validation/defaults.md): a process's start-up (imports, torch's, the run
# directory, the report: 2-7 s), each phase's set-up (forked workers, buffers, the result's
# figures: up to 1.8 s), data built before it is written (numpy's random bytes, encoded
# samples), the page-cache drops before buffered reads (an fdatasync each: up to 13 ms) and
# the clean-up of every file it made (its inodes), both at the floor metadata rate.
START_S = 20.0
PHASE_GAP_S = 2.0
FLOOR_BUILD_BPS = 20 << 20


@dataclass(frozen=True)
class WritePlan:
    """What a command will write and how long it may take, for its plan line (``plan_line``).

    ``write_bytes``: the bytes its writes put down (a time-based write's files once; it may
    rewrite them until its limit, ``rewrites``); ``upper_s``: the time bound, reckoned as
    ``basis`` says; ``space_bytes``: the most it holds on the target at once."""

    command: str
    write_bytes: int
    upper_s: float
    basis: str
    space_bytes: int = 0
    rewrites: bool = False
    phases: tuple[PlannedPhase, ...] = ()
    bound: bool = True  # False: upper_s is an estimate of the time, not a bound (qualify's)
    wall_s: float | None = None  # the bound of the command's wall time (``untimed_s`` added)
    wall_basis: str = ""


def untimed_s(plan: Plan) -> float:
    """Seconds a run of ``plan`` may spend outside its phases, at most: START_S, PHASE_GAP_S
    per phase, its built bytes at FLOOR_BUILD_BPS, its cache drops and the removal of the
    files it holds (``inodes``) at FLOOR_META_OPS."""
    return (START_S + PHASE_GAP_S * len(plan.phases) + plan.built_bytes / FLOOR_BUILD_BPS
            + (plan.drops + plan.inodes) / FLOOR_META_OPS)  # fmt: skip


def untimed_basis(plan: Plan, starts: int = 1) -> str:
    """How ``untimed_s`` was reckoned, for the plan line."""
    out = f"{START_S:g} s start-up{' per step' if starts > 1 else ''}, {PHASE_GAP_S:g} s set-up a phase"
    if plan.built_bytes:
        out += f", {format_bytes(plan.built_bytes)} of data built at {format_rate(FLOOR_BUILD_BPS)}"
    if plan.drops or plan.inodes:
        out += f", {plan.drops + plan.inodes} cache drops and removals at {FLOOR_META_OPS:g}/s"
    return out


def phase_time_bound(p: PlannedPhase) -> float:
    """Seconds a planned phase may take: its limit when time-based (a write also fills its
    files once, at the floor write rate), else its bytes and operations at the floor rates."""
    rate = FLOOR_WRITE_BPS if p.op in WRITE_OPS else FLOOR_READ_BPS
    by_bytes = p.bytes_moved / rate + p.ops / FLOOR_META_OPS
    if p.time_s:
        return max(p.time_s, by_bytes) if p.op in WRITE_OPS else p.time_s
    return by_bytes


def write_plan(command: str, plan: Plan, overhead_s: float = 0.0) -> WritePlan:
    """A generator's plan as a WritePlan: every phase at its bound (``phase_time_bound``)."""
    timed = [p for p in plan.phases if p.time_s]
    limits = sorted({p.time_s for p in timed if p.time_s})
    basis = f"every phase {assumed_floors()}"
    if timed:
        each = "/".join(f"{t:g} s" for t in limits)
        basis = f"{len(timed)} time-based phases at their {each} limit"
        if len(timed) < len(plan.phases):
            basis += f", the rest {assumed_floors()}"
    upper = overhead_s + sum(phase_time_bound(p) for p in plan.phases)
    return WritePlan(
        command,
        sum(p.bytes_moved for p in plan.phases if p.op in WRITE_OPS),
        upper,
        basis,
        plan.space_bytes,
        rewrites=any(p.time_s and p.op in WRITE_OPS for p in plan.phases),
        phases=tuple(plan.phases),
        wall_s=upper + untimed_s(plan),
        wall_basis=f"the phases, {untimed_basis(plan)}",
    )


def assumed_floors() -> str:
    return (
        f"at no less than {format_rate(FLOOR_WRITE_BPS)} write, {format_rate(FLOOR_READ_BPS)} "
        f"read, {FLOOR_META_OPS:g} metadata ops/s"
    )


def plan_line(wp: WritePlan, root: str, fs_type: str, free_bytes: int | None) -> str:
    """The one line every writing command prints on stderr before its first byte."""
    what = f"writes {format_bytes(wp.write_bytes)}"
    if wp.rewrites:
        what = f"writes at least {format_bytes(wp.write_bytes)} (its files once; time-based "
        what += "writes rewrite them until steady or their limit)"
    free = format_bytes(free_bytes) if free_bytes is not None else "unknown"
    wall = ""
    if wp.wall_s is not None:
        wall = f"; wall time at most about {format_seconds(wp.wall_s)} ({wp.wall_basis})"
    return (
        f"iobench: plan: {wp.command} {what} to {root} [{fs_type}], {free} free; "
        f"phases {'at most about' if wp.bound else 'expected about'} "
        f"{format_seconds(wp.upper_s)} "
        f"({wp.basis})" + wall
    )


def dry_run_text(wp: WritePlan, line: str) -> str:
    """``--dry-run``'s output: the phases, the plan line, and that nothing was written."""
    rows = [f"  {'phase':<24} {'op':<10} {'bytes':>10} {'at most':>10}  what"]
    for p in wp.phases:
        rows.append(
            f"  {p.name:<24} {p.op:<10} {format_bytes(p.bytes_moved):>10} "
            f"{format_seconds(phase_time_bound(p)):>10}  {p.note}"
        )
    space = f"free space needed: {format_bytes(wp.space_bytes)}"
    return "\n".join([line, "", *rows, "", space, "nothing was written (dry run)"])
