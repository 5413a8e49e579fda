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

from mhalint.rule import load_rules
from mhalint.run.cache import CACHE_DIR_NAME, Cache
from mhalint.run.engine import Checker

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
BAD = "mha001_batch_first_default_bad.py"
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
    for name in (BAD, "mha003_is_causal_without_mask_bad.py"):
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


# ---- item 1: no link is followed out of the cache folder --------------------------------------------------------

def test_a_cache_folder_committed_as_a_symlink_is_refused_and_nothing_is_written_where_it_leads(project: Path,
                                                                                                  tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / CACHE_DIR_NAME).symlink_to(outside)
    uncached = check(project, "--no-cache")
    assert uncached.exit_code == 1 and uncached.stderr == ""
    for _ in range(2):
        result = check(project)
        assert (result.exit_code, result.stdout) == (uncached.exit_code, uncached.stdout)
        assert list(outside.iterdir()) == []
        one_line(result.stderr, CACHE_DIR_NAME, "symbolic link")


@pytest.mark.parametrize("name", ["index", ".gitignore"])
def test_a_symlink_in_the_cache_folder_is_refused_neither_read_nor_written_through(name: str, project: Path,
                                                                                   tmp_path: Path):
    uncached = check(project)
    folder = project / CACHE_DIR_NAME
    [index] = folder.glob("findings-*.json")
    link = index if name == "index" else folder / ".gitignore"
    victim = tmp_path / "victim"
    planted = json.loads(index.read_bytes())  # a valid index whose findings would show if it were read
    for entry in planted["entries"].values():
        for finding in entry[3]:
            finding["message"] = "PLANTED"
    victim.write_bytes(json.dumps(planted).encode() if name == "index" else b"*\n")
    link.unlink()
    link.symlink_to(victim)
    before = victim.read_bytes()
    os.utime(project / "plain.py", ns=(1, 1))  # the run has something to write
    result = check(project)
    assert (result.exit_code, result.stdout) == (uncached.exit_code, uncached.stdout)
    assert link.is_symlink() and victim.read_bytes() == before
    one_line(result.stderr, link.name, "symbolic link")


def test_a_cache_folder_swapped_for_a_symlink_during_the_run_is_not_written_through(project: Path, tmp_path: Path,
                                                                                    capsys):
    rules = list(load_rules().values())
    folder = project / CACHE_DIR_NAME
    Checker(rules).check_paths([project], cache=Cache(folder, rules))
    os.utime(project / "plain.py", ns=(1, 1))  # the run has something to write
    outside = tmp_path / "outside"
    outside.mkdir()

    def swap(path, findings):
        if not folder.is_symlink():
            folder.rename(tmp_path / "moved")
            folder.symlink_to(outside)

    capsys.readouterr()
    Checker(rules).check_paths([project], cache=Cache(folder, rules), on_file=swap)
    assert list(outside.iterdir()) == []
    one_line(capsys.readouterr().err, CACHE_DIR_NAME, "symbolic link")


def test_clean_removes_nothing_through_a_symlinked_cache_folder(project: Path, tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    for name, content in OWN_NAMES.items():
        (outside / name).write_bytes(content)
    (project / CACHE_DIR_NAME).symlink_to(outside)
    result = invoke("clean", cwd=project)
    assert files(outside) == OWN_NAMES and (project / CACHE_DIR_NAME).is_symlink()
    assert result.exit_code == 0 and "Removed" not in result.stdout
    one_line(result.stderr, CACHE_DIR_NAME, "symbolic link")


@pytest.mark.parametrize("where", ["MHALINT_CACHE_DIR", CACHE_DIR_NAME])
def test_clean_removes_nothing_from_a_folder_mhalint_did_not_make(where: str, project: Path, tmp_path: Path,
                                                                 monkeypatch):
    """A folder without mhalint's .gitignore (a user's folder named by mistake, or one a repository commits)."""
    folder = tmp_path / "mine" if where == "MHALINT_CACHE_DIR" else project / CACHE_DIR_NAME
    folder.mkdir()
    planted = {**OWN_NAMES, ".gitignore": b"*.log\n"}
    for name, content in planted.items():
        (folder / name).write_bytes(content)
    if where == "MHALINT_CACHE_DIR":
        monkeypatch.setenv("MHALINT_CACHE_DIR", str(folder))
    result = invoke("clean", cwd=project)
    assert files(folder) == planted
    assert result.exit_code == 0 and "Removed" not in result.stdout
    one_line(result.stderr, folder.name, ".gitignore")


def test_mhalint_cache_dir_may_be_a_symlink_the_user_chose(project: Path, tmp_path: Path, monkeypatch):
    """The user's own environment is trusted as ruff trusts RUFF_CACHE_DIR: a link there is followed."""
    target = tmp_path / "volume"
    target.mkdir()
    (tmp_path / "link").symlink_to(target)
    monkeypatch.setenv("MHALINT_CACHE_DIR", str(tmp_path / "link"))
    cold = check(project)
    [index] = target.glob("findings-*.json")
    written = index.stat().st_mtime_ns
    warm = check(project)
    assert (warm.stdout, warm.stderr, cold.stderr) == (cold.stdout, "", "")
    assert index.stat().st_mtime_ns == written  # every entry was used: nothing to rewrite
    cleaned = invoke("clean", cwd=project)
    assert "Removed" in cleaned.stdout and list(target.iterdir()) == [] and (tmp_path / "link").is_symlink()


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
