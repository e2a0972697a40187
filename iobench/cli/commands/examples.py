"""One or two real examples per command, shown at the end of its ``--help`` and in the
documentation's command reference (both from this table): what it does, then the line to paste.
Every command has an entry and no line is longer than a terminal's 78 columns
(tests/test_cli_help.py), so no example is wrapped or cut."""

from __future__ import annotations

EXAMPLES: dict[str, tuple[tuple[str, str], ...]] = {
    "run": (
        ("1 GiB per worker, written then read back", "iobench run sequential-write /mnt/scratch/me --set size=1GiB"),
        ("random 4 KiB reads driven by fio, 30 s", "iobench run random-read /mnt/scratch/me --engine fio --time 30s"),
    ),
    "workloads": (("every workload, profile and checkpoint model by name", "iobench workloads"),),
    "loader": (
        ("the profile's dataset, two emulated H100s", "iobench loader /mnt/scratch/me --profile resnet50-h100 --gpus 2"),
        ("your own dataset, read-only", "iobench loader /data/imagenet --existing --set batch_size=256"),
    ),
    "estimate": (
        ("AU at 1 to 64 GPUs from a run's sweep", "iobench estimate ./iobench-results/RUN_ID --profile unet3d-h100 --gpus 64"),
    ),
    "datasize": (
        ("MLPerf Storage's minimum dataset", "iobench datasize --profile unet3d-h100 --gpus 8 --host-mem 512GiB"),
    ),
    "qualify": (
        ("the plan (phases, bytes, time); writes nothing", "iobench qualify /mnt/scratch/me --dry-run"),
        ("a verdict for 64 H100s (the default 3-minute budget)", "iobench qualify /mnt/scratch/me --profile resnet50-h100 --gpus 64"),
    ),
    "compare": (
        ("the last run against the one before; exit 1 on a regression", "iobench compare latest --baseline latest~1"),
        ("two result files, as markdown", "iobench compare base/result.json cur/result.json --format markdown"),
    ),
    "history": (
        ("every run kept", "iobench history list"),
        ("one metric over time, with a plot", "iobench history trend seq-read.bandwidth --svg trend.svg"),
    ),
    "report": (
        ("the HTML report with its plots", "iobench report ./iobench-results/RUN_ID --html report.html"),
        ("markdown, with the latest run of the history overlaid", "iobench report ./iobench-results/RUN_ID --markdown --baseline latest"),
    ),
    "checkpoint": (
        ("stall, goodput and recovery of llama3-70b", "iobench checkpoint /mnt/scratch/me --model llama3-70b --mtbf 3h"),
    ),
    "plan": (
        ("the storage 1,024 H100s need for unet3d", "iobench plan --gpus 1024 --profile unet3d-h100"),
        ("checkpoints of llama3-405b at 95 % goodput, as a plan file", "iobench plan --gpus 16384 --model llama3-405b --goodput 95% -o plan.json"),
    ),
    "profile": (
        ("a profile of your dataset (statistics only)", "iobench profile /data/imagenet --output imagenet.toml"),
    ),
}  # fmt: skip


def epilog(command: str) -> str:
    """The examples as a help epilog (``\\b``: click and rich keep the lines as they are)."""
    pairs = EXAMPLES.get(command, ())
    if not pairs:
        return ""
    lines = [f"  # {what}\n  {cmd}" for what, cmd in pairs]
    return "Examples:\n\n\b\n" + "\n".join(lines)
