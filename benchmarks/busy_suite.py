"""Run the test suite while every core is kept busy by other processes (issue 34): a suite that passes here does
not depend on the machine's speed. CI runners are shared, so a test that asserts how long something took, or
waits a fixed time for something to happen, fails there first.

    python benchmarks/busy_suite.py [--burners N] [PYTEST ARGS...]

N processes (default: one per usable CPU) spin at the same priority as the suite for the whole run; the exit code
is pytest's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from mhalint.configuration.schema import usable_cpus

_SPIN = "while True: pass  # busy_suite {parent}"  # the parent's pid tells one run's burners from another's


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burners", type=int, default=usable_cpus(), help="busy processes (default: one per CPU)")
    options, pytest_args = parser.parse_known_args(argv)
    spin = _SPIN.format(parent=os.getpid())
    burners = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(options.burners)]
    started = time.monotonic()
    try:
        completed = subprocess.run([sys.executable, "-m", "pytest", "-q", *pytest_args])
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(f"busy_suite: pytest exited {completed.returncode} after {time.monotonic() - started:.0f} s with "
          f"{options.burners} busy processes on {usable_cpus()} CPUs (load average "
          f"{os.getloadavg()[0]:.1f})")
    return completed.returncode


if __name__ == "__main__":
    sys.exit(main())
