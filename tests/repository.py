"""The repository's own files, for the tests that read all of them (imported like aliases.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def repository_files() -> list[str]:
    """Every file git tracks, and every untracked file it does not ignore, relative to the root."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode("utf-8", "surrogateescape")
    return sorted({name for name in listed.split("\0") if name and (ROOT / name).is_file()})
