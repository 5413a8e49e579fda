"""The first pass over a run's files (mhalint.run.scan) gives the same run in worker processes as in one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from mhalint.analysis.project import Project
from mhalint.rule import load_rules
from mhalint.run import scan
from mhalint.run.cache import Cache
from mhalint.run.engine import Checker

EXAMPLES = Path(__file__).parents[1] / "examples"
MODEL = "import torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n" \
        "        self.attn = nn.MultiheadAttention(64, 8, batch_first=True)\n\n    def forward(self, x):\n" \
        "        return self.attn(x, x, x)[0]\n"
TRAIN = "import torch\nfrom pkg.model import Block\n\ndef step(a):\n    B, T, C = a.shape\n    block = Block()\n" \
        "    return block(a.transpose(0, 1))\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """Files of every kind the first pass meets: attention code, plain code, a class used from another file, a
    notebook, a file that cannot be read, and enough of them for several chunks."""
    root = tmp_path / "tree"
    shutil.copytree(EXAMPLES, root / "examples")
    (root / "plain").mkdir()
    for number in range(40):
        (root / "plain" / f"m{number}.py").write_text(f"from pkg.model import Block\nVALUE = {number}\n")
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text(MODEL)
    (root / "pkg" / "train.py").write_text(TRAIN)
    (root / "broken.ipynb").write_text("{not json")
    os.mkfifo(root / "pipe.py")  # not a regular file: reported, never opened
    return root


@pytest.fixture
def in_workers(monkeypatch):
    """The first pass in workers from the first file, four files a task."""
    monkeypatch.setattr(scan, "IN_WORKERS_FROM", 1)
    monkeypatch.setattr(scan, "_CHUNK", 4)


def _run(tree: Path, jobs: int, cache: Cache | None = None):
    result = Checker(list(load_rules().values())).check_paths([tree], jobs=jobs, cache=cache)
    return [f.to_dict() for f in result.findings], result.files_checked


def test_workers_give_the_run_one_process_gives(tree: Path, in_workers):
    serial = _run(tree, jobs=1)
    assert _run(tree, jobs=2) == serial
    codes = {finding["code"] for finding in serial[0]}
    assert {"MHA001", "MHA005", "MHA901"} <= codes  # findings, across files too, and the unreadable files


def test_workers_fill_the_cache_as_one_process_does(tree: Path, tmp_path: Path, in_workers):
    rules = list(load_rules().values())
    indexes = []
    for jobs in (1, 2):
        directory = tmp_path / f"cache{jobs}"
        _run(tree, jobs, Cache(directory, rules))
        [index] = directory.glob("findings-*.json")
        indexes.append(json.loads(index.read_text()))
    assert indexes[0] == indexes[1]
    warm = Checker(rules).check_paths([tree], jobs=2, cache=Cache(tmp_path / "cache2", rules))
    assert [f.to_dict() for f in warm.findings] == _run(tree, jobs=1)[0]


def test_what_workers_collect_for_the_index_is_what_one_process_collects(tree: Path, in_workers):
    paths = sorted(str(path) for path in tree.rglob("*.py") if path.is_file())
    project = Project(paths)
    checker = Checker(list(load_rules().values()))
    scanned = dict(scan.scan(paths, checker.prefilter, project, Cache.digest, jobs=2))
    assert list(scanned) == paths  # in the files' order
    for path in paths:
        raw = Path(path).read_bytes()
        assert scanned[path].imports == project.imports_in(path, raw)
        assert scanned[path].digest == Cache.digest(raw)
        assert (scanned[path].raw is not None) == scanned[path].matched == checker.prefilter.matches(raw)


def test_one_process_collects_imports_from_the_first_file_that_matches_on(tree: Path):
    paths = [str(tree / "plain" / "m0.py"), str(tree / "examples" / "mha001_batch_first_default_bad.py"),
             str(tree / "plain" / "m1.py")]
    checker = Checker(list(load_rules().values()))
    scanned = [found for _, found in scan.scan(paths, checker.prefilter, Project(paths), None, jobs=1)]
    assert [found.imports is not None for found in scanned] == [False, True, True]  # the match read once


def test_a_chunk_whose_worker_died_is_read_by_the_parent(tree: Path, in_workers, monkeypatch):
    victim = str(tree / "pkg" / "train.py")
    original = scan._scan_chunk

    def dies_on_the_victim(paths):
        if victim in paths:
            os._exit(9)
        return original(paths)

    monkeypatch.setattr(scan, "_scan_chunk", dies_on_the_victim)
    assert _run(tree, jobs=2) == _run(tree, jobs=1)


def test_an_interrupt_while_files_are_scanned_stops_the_workers(tree: Path, in_workers):
    """The caller's progress callback raising (Ctrl-C lands there as often as anywhere) leaves no worker behind."""
    import multiprocessing

    seen = []

    def interrupted(done: int, total: int, findings) -> None:
        seen.append(done)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Checker(list(load_rules().values())).check_paths([tree], jobs=2, progress=interrupted)
    assert multiprocessing.active_children() == []
