"""benchmarks/lazy_bodies.py and benchmarks/whole_and_parts.py run and say what they measure, on a small tree: a
benchmark that stopped working would only be found when its figures are wanted."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def _run(script: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *arguments], capture_output=True,
                          text=True, timeout=300)


def test_lazy_bodies_finds_the_same_trees_on_the_examples(tmp_path: Path):
    shutil.copytree(ROOT / "examples", tmp_path / "tree")
    done = _run("lazy_bodies.py", str(tmp_path / "tree"))
    assert done.returncode == 0, done.stdout + done.stderr
    files = len(list((tmp_path / "tree").glob("*.py")))
    summary = re.search(r"^([\d,]+) files, ([\d,]+) bodies left out of the shells; trees that differ: 0$", done.stdout,
                        re.M)
    assert summary is not None and int(summary[1].replace(",", "")) == files and int(summary[2]) > 0, done.stdout


def test_whole_and_parts_compares_a_tree_with_its_folders(tmp_path: Path):
    for folder in ("models", "scripts"):
        shutil.copytree(ROOT / "examples", tmp_path / folder)
    done = _run("whole_and_parts.py", str(tmp_path), "--rounds", "1")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()[:-1]]
    assert names == ["(whole)", "models", "scripts"], done.stdout
    assert re.search(r"^whole / sum of parts: \d+\.\d\d \(target <= 1.5\): (met|NOT met)$", done.stdout, re.M)
