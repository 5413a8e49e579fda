"""benchmarks/busy_suite.py runs pytest beside busy processes, gives pytest's exit code, and leaves no process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def _spinners(parent: int) -> set[int]:
    """Live processes running the busy loop of the script run with process id `parent`."""
    found = set()
    for entry in os.listdir("/proc"):
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if f"while True: pass  # busy_suite {parent}".encode() in command and state != "Z":
            found.add(int(entry))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(("body", "code"), [("assert True", 0), ("assert False", 1)])
def test_the_suite_runs_beside_busy_processes_and_its_exit_code_is_pytests(tmp_path: Path, body: str, code: int):
    (tmp_path / "test_one.py").write_text(f"def test_one():\n    {body}\n")
    process = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "busy_suite.py"), "--burners", "2",
                                "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path / "test_one.py")],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == code, output
    assert f"busy_suite: pytest exited {code} after" in output
    assert "with 2 busy processes" in output
    assert _spinners(process.pid) == set()
