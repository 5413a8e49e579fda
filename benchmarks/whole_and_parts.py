"""A tree checked whole against its parts checked apart (issue 37): reading a project as a whole must not cost much
more than its folders one at a time (litgpt once took 29 to 64 s whole against 4 s for its parts, each other file
parsing the model file again).

For TREE: `mhalint check --no-cache --exit-zero --jobs J --output-format concise` on the tree, and on each of its
top-level entries that holds Python files (a folder, a .py file), interleaved over `--rounds` rounds. A run's CPU
is the user and system time of the child and its descendants (`getrusage(RUSAGE_CHILDREN)`), the median over the
rounds; CPU, not wall time, because the machines are shared. The script prints each run, then the whole's CPU
against the sum of the parts' (target <= 1.5). Each part is still analysed with the whole project around it (the
files that import its classes), as a run on one folder is.

Usage:
    python benchmarks/whole_and_parts.py TREE [--rounds 3] [--jobs 1]

Exit status: 1 when the ratio passes 1.5 or a run fails, else 0.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
from pathlib import Path

TARGET = 1.5


def cpu_of(command: list[str]) -> tuple[float, str]:
    """The CPU seconds of one run of `command` and its last line of output (the summary)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    lines = done.stdout.strip().splitlines()
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, lines[-1] if lines else ""


def parts_of(tree: Path) -> list[Path]:
    """The top-level entries of `tree` that hold Python files, in name order."""
    return [entry for entry in sorted(tree.iterdir()) if not entry.name.startswith(".") and (
        entry.suffix == ".py" if entry.is_file() else next(entry.rglob("*.py"), None) is not None)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tree", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes of each run [1: the CPU is the work]")
    options = parser.parse_args()
    tree = options.tree.resolve()
    targets = [tree, *parts_of(tree)]
    seconds: dict[Path, list[float]] = {target: [] for target in targets}
    summaries: dict[Path, str] = {}
    for round_number in range(options.rounds):
        shift = round_number % len(targets)
        for target in targets[shift:] + targets[:shift]:  # the order rotates: no run always goes first
            command = [sys.executable, "-m", "mhalint", "check", "--no-cache", "--exit-zero", "--jobs",
                       str(options.jobs), "--output-format", "concise", str(target)]
            spent, summaries[target] = cpu_of(command)
            seconds[target].append(spent)
    cpu = {target: statistics.median(found) for target, found in seconds.items()}
    for target in targets:
        name = "(whole)" if target == tree else target.name
        print(f"{name:<24} cpu {cpu[target]:7.2f} s   {summaries[target]}")
    parts = sum(cpu[target] for target in targets[1:])
    ratio = cpu[tree] / parts if parts else float("inf")
    print(f"whole / sum of parts: {ratio:.2f} (target <= {TARGET}): {'met' if ratio <= TARGET else 'NOT met'}")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
