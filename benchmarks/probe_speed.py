"""Cost of the runtime probe, measured against its floor in the same run.

Baseline: `python -c "import torch"` plus the static `mhalint check examples/`: the probe cannot be faster than
importing torch once and linting. Target (issue 3): `mhalint check --probe examples/` under 2x that baseline.
Rounds are interleaved so that load on the (shared, noisy) machine hits every command alike; medians are printed.

Usage: python benchmarks/probe_speed.py [--rounds 5] [PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", nargs="?", default="examples")
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    commands = {
        "import torch": [sys.executable, "-c", "import torch"],
        "static check": [sys.executable, "-m", "mhalint", "check", options.path],
        "check --probe": [sys.executable, "-m", "mhalint", "check", "--probe", options.path],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(options.rounds):
        for name, command in commands.items():
            times[name].append(timed(command))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:<14} median {value:6.2f} s  (runs: {', '.join(f'{v:.2f}' for v in times[name])})")
    baseline = medians["import torch"] + medians["static check"]
    ratio = medians["check --probe"] / baseline
    print(f"check --probe / (import torch + static check) = {ratio:.2f}x  (target < 2.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
