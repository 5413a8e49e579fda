"""The findings cache of a checked repository, which may be hostile (issue 34): a link committed at or in
`.mhalint_cache` is never followed out of it, `mhalint clean` removes only what mhalint wrote in a folder it made,
and a planted entry (a code the run has no rule for, a place the file cannot hold) is never reported."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from invoke import invoke
from mhalint.cache import CACHE_DIR_NAME, Cache
from mhalint.engine import Checker
from mhalint.rule import load_rules

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BAD = "mha001_batch_first_bad.py"
# mhalint's own names in a cache folder, with what a hostile repository or a user's folder might hold under them
OWN_NAMES = {".gitignore": b"*\n", "findings-0123abcd.json": b"{}", "findings-0123abcd.pickle": b"x",
             ".findings-x1y2.tmp": b"x", "tmpab12cd.tmp": b"x"}


@pytest.fixture(autouse=True)
def _no_cache_dir_from_the_environment(monkeypatch):
    monkeypatch.delenv("MHALINT_CACHE_DIR", raising=False)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Findings of rules, of the engine (a syntax error: MHA900; an unused directive: MHA904) and in a notebook."""
    root = tmp_path / "project"
    root.mkdir()
    for name in (BAD, "mha003_is_causal_bad.py"):
        shutil.copy(EXAMPLES / name, root / name)
    (root / "plain.py").write_text("x = 1\n")
    (root / "broken.py").write_text("import torch.nn as nn\nnn.MultiheadAttention(\n")
    (root / "unused.py").write_text("import torch.nn as nn\n"
                                    "nn.MultiheadAttention(4, 2, batch_first=True)  # noqa: MHA001\n")
    (root / "demo.ipynb").write_text(json.dumps({
        "cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                   "source": ["import torch.nn as nn\n", "attn = nn.MultiheadAttention(64, 8)\n"]}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return root


def check(project: Path, *args: str):
    return invoke("check", "--output-format", "json", *args, ".", cwd=project)


def one_line(stderr: str, *words: str) -> None:
    assert len(stderr.splitlines()) == 1 and all(word in stderr for word in words), stderr


def files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir()}


# ---- item 5: an entry is used only with a code the run reports, at a place its file can hold -------------------

def test_a_warm_run_uses_every_entry_it_wrote(project: Path):
    """Rule findings, the engine's (MHA900, MHA904) and a notebook's pass the checks: nothing is dropped."""
    cold = check(project, "--extend-select", "MHA904")
    assert {finding["code"] for finding in json.loads(cold.stdout)} >= {"MHA001", "MHA900", "MHA904"}
    assert any(finding["cell"] == 1 for finding in json.loads(cold.stdout))
    [index] = (project / CACHE_DIR_NAME).glob("findings-*.json")
    written = index.stat()
    assert check(project, "--extend-select", "MHA904").stdout == cold.stdout
    assert (index.stat().st_mtime_ns, index.stat().st_ino) == (written.st_mtime_ns, written.st_ino)


def _plant(project: Path, **changes) -> tuple[Path, list]:
    """The first finding of BAD's entry changed; the index and the entry as it was."""
    [index] = (project / CACHE_DIR_NAME).glob("findings-*.json")
    document = json.loads(index.read_bytes())
    [path] = [path for path in document["entries"] if path.endswith(BAD)]
    entry = document["entries"][path]
    original = json.loads(json.dumps(entry))
    finding = entry[3][0]
    for key, change in changes.items():
        finding[key] = change(finding, os.path.getsize(path))
    index.write_bytes(json.dumps(document).encode())
    return index, original


PLANTED = {
    "code ZZZ999": ((), {"code": lambda f, size: "ZZZ999"}),
    "a rule's code the run does not have": (("--select", "MHA001"), {"code": lambda f, size: "MHA003"}),
    "an engine code that is not one": ((), {"code": lambda f, size: "MHA999"}),
    "line -5": ((), {"line": lambda f, size: -5}),
    "line 0": ((), {"line": lambda f, size: 0}),
    "column 0": ((), {"column": lambda f, size: 0}),
    "end before start": ((), {"end_line": lambda f, size: f["line"] - 1}),
    "end at start": ((), {"end_line": lambda f, size: f["line"], "end_column": lambda f, size: f["column"]}),
    "a line past what the file's size can hold": ((), {"line": lambda f, size: size + 2,
                                                       "end_line": lambda f, size: size + 3}),
    "an end past what the file's size can hold": ((), {"end_line": lambda f, size: size + 2}),
    "cell 0": ((), {"cell": lambda f, size: 0}),
}


@pytest.mark.parametrize("args, changes", PLANTED.values(), ids=PLANTED.keys())
def test_a_planted_entry_is_dropped_and_its_file_checked_again(args, changes, project: Path):
    uncached = check(project, "--no-cache", *args)
    assert check(project, *args).stdout == uncached.stdout
    index, original = _plant(project, **changes)
    result = check(project, *args)
    assert (result.exit_code, result.stdout, result.stderr) == (uncached.exit_code, uncached.stdout, "")
    [entry] = [entry for path, entry in json.loads(index.read_bytes())["entries"].items() if path.endswith(BAD)]
    assert entry == original  # checked again, and stored as the check found it


def test_add_noqa_never_writes_a_planted_code(project: Path, tmp_path: Path):
    fresh = tmp_path / "fresh"
    shutil.copytree(project, fresh)
    assert invoke("check", "--no-cache", "--add-noqa", ".", cwd=fresh).exit_code == 0
    check(project)
    _plant(project, code=lambda f, size: "ZZZ999")
    assert invoke("check", "--add-noqa", ".", cwd=project).exit_code == 0
    assert "ZZZ999" not in (project / BAD).read_text()
    assert (project / BAD).read_text() == (fresh / BAD).read_text()
