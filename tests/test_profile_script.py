"""benchmarks/profile.py still times every phase: its timers attach to the engine's functions by name, and a
renamed or moved function would leave a phase at zero without an error. Its count of libcst parses per file
matches the parse phase's calls (each example parsed once)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_every_phase_of_a_serial_run_is_timed(tmp_path: Path):
    shutil.copytree(ROOT / "examples", tmp_path / "tree")
    files = len(list((tmp_path / "tree").glob("*.py")))
    completed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile.py"), str(tmp_path / "tree")],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    calls = {line[:14].strip(): line.split()[-1] for line in completed.stdout.splitlines()[2:]
             if line[:14].strip() not in ("start-up", "other", "total")}
    assert calls["read"] == str(files) and calls["discovery"] == "1" and calls["report"] == "1"
    for phase in ("prefilter", "import index", "CPython parse", "libcst parse", "positions", "analysis", "noqa"):
        assert int(calls[phase]) > 0, (phase, completed.stdout)
    counted = re.search(r"^libcst parses  (\d+) of (\d+) files .*more than once: (\d+)$", completed.stdout, re.M)
    bodies = re.search(r"^function bodies left out of those parses ([\d,]+), parsed alone since ([\d,]+)$",
                       completed.stdout, re.M)
    assert counted is not None and bodies is not None, completed.stdout
    assert int(counted[1]) + int(bodies[2].replace(",", "")) == int(calls["libcst parse"])
    assert counted[2] == counted[1] and counted[3] == "0"


def test_calls_counts_the_work_of_a_serial_run(tmp_path: Path):
    """`--calls`: the run counted in Python function calls instead of timed; a tree with files to check costs
    more calls than the same tree without them."""
    def calls(tree: Path) -> int:
        completed = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "profile.py"), "--calls", str(tree)],
                                   capture_output=True, text=True, timeout=120)
        assert completed.returncode == 0, completed.stderr
        found = re.search(r"^Python function calls: ([\d,]+)$", completed.stdout, re.M)
        assert found is not None, completed.stdout
        return int(found[1].replace(",", ""))

    shutil.copytree(ROOT / "examples", tmp_path / "tree")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "plain.py").write_text("x = 1\n")
    assert calls(tmp_path / "tree") > 10 * calls(tmp_path / "empty") > 0
