"""The findings cache and parallel checking change how fast results come, never what they are."""

from __future__ import annotations

import concurrent.futures
import gc
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint import engine
from mhalint.cache import Cache
from mhalint.cli import main
from mhalint.engine import Checker
from mhalint.rule import load_rules

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A small tree with every example, a notebook-free copy of each under a subfolder, and plain files."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root / "examples")
    shutil.copytree(EXAMPLES, root / "more")
    for index in range(5):
        (root / f"plain{index}.py").write_text(f"x = {index}\n")
    (root / "broken.py").write_text("import torch.nn as nn\nnn.MultiheadAttention(\n")
    return root


def dicts(result) -> list[dict]:
    return [f.to_dict() for f in result.findings]


def test_cold_warm_serial_and_parallel_give_identical_findings(tree: Path, tmp_path: Path):
    rules = list(load_rules().values())
    checker = Checker(rules)
    serial = checker.check_paths([tree], jobs=1)
    parallel = checker.check_paths([tree], jobs=2)
    cache = Cache(tmp_path / "cache", rules)
    cold = checker.check_paths([tree], cache=cache)
    warm = checker.check_paths([tree], cache=Cache(tmp_path / "cache", rules))
    assert serial.findings, "the tree should produce findings"
    assert dicts(serial) == dicts(parallel) == dicts(cold) == dicts(warm)
    assert serial.files_checked == parallel.files_checked == cold.files_checked == warm.files_checked


def test_checking_leaves_the_garbage_collector_as_it_found_it(tree: Path):
    """The engine pauses the collector during each file and freezes the heap before forking workers; a long-lived
    caller (an editor, flake8) must get both back."""
    checker = Checker(list(load_rules().values()))
    assert checker.check_paths([tree], jobs=2).findings
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert checker.check_paths([tree], jobs=1).findings
    assert gc.isenabled() and gc.get_freeze_count() == 0


def _count_engine_reads(monkeypatch) -> list[str]:
    """The files the engine opens (Path.read_bytes included, which the cache used to read with)."""
    read: list[str] = []
    original = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(str(self)) or original(self))
    monkeypatch.setattr(engine, "open", lambda file, *a, **k: read.append(str(file)) or open(file, *a, **k),
                        raising=False)
    return read


def test_warm_run_reads_no_unchanged_file(tree: Path, tmp_path: Path, monkeypatch):
    rules = list(load_rules().values())
    assert Checker(rules).check_paths([tree], cache=Cache(tmp_path / "cache", rules)).files_checked
    read = _count_engine_reads(monkeypatch)
    Checker(rules).check_paths([tree], cache=Cache(tmp_path / "cache", rules))
    assert [p for p in read if str(tree) in p] == []  # (mhalint reads its own source for the cache key)


def test_a_changed_file_is_checked_again(tree: Path, tmp_path: Path, monkeypatch):
    rules = list(load_rules().values())
    target = tree / "examples" / "mha001_batch_first_bad.py"
    Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    target.write_text(target.read_text().replace("nn.MultiheadAttention(EMBED_DIM, NUM_HEADS)",
                                                 "nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)"))
    read = _count_engine_reads(monkeypatch)
    again = Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    assert [f.code for f in again.findings] == []
    assert [p for p in read if str(tree) in p] == [str(target)]  # once: the same bytes serve the cache and the check


def test_same_content_with_a_new_modification_time_is_a_hit(tree: Path, tmp_path: Path, monkeypatch):
    rules = list(load_rules().values())
    target = tree / "examples" / "mha003_is_causal_bad.py"
    first = Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    os.utime(target, ns=(1, 1))
    read = _count_engine_reads(monkeypatch)
    second = Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    assert dicts(first) == dicts(second)
    assert [p for p in read if str(tree) in p] == [str(target)]  # read once, to compare its bytes
    read.clear()
    third = Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    assert dicts(third) == dicts(first) and [p for p in read if str(tree) in p] == []  # the new time was kept


def test_other_rules_use_another_index(tmp_path: Path):
    rules = load_rules()
    assert Cache(tmp_path, [rules["MHA001"]]).index_path != Cache(tmp_path, list(rules.values())).index_path


def test_a_damaged_index_is_ignored(tree: Path, tmp_path: Path):
    rules = list(load_rules().values())
    cache = Cache(tmp_path / "cache", rules)
    cache.index_path.parent.mkdir(parents=True)
    cache.index_path.write_bytes(b"not a pickle")
    result = Checker(rules).check_paths([tree], cache=Cache(tmp_path / "cache", rules))
    assert result.findings


def test_cli_cache_dir_no_cache_and_clean(tree: Path, tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tree)
    monkeypatch.setenv("MHALINT_CACHE_DIR", str(tmp_path / "elsewhere"))
    runner = CliRunner()
    first = runner.invoke(main, ["check", "."])
    assert any(p.name.startswith("findings-") for p in (tmp_path / "elsewhere").iterdir())
    assert runner.invoke(main, ["check", "."]).output == first.output
    assert runner.invoke(main, ["check", "--no-cache", "."]).output == first.output
    cleaned = runner.invoke(main, ["clean"])
    assert cleaned.exit_code == 0 and "Removed" in cleaned.output
    assert not (tmp_path / "elsewhere").exists()
    assert not (tree / ".mhalint_cache").exists()


def test_the_largest_files_are_checked_one_at_a_time_beside_the_others(monkeypatch):
    """The pool's schedule: outcomes for every file, largest first, and never two of the heavy files (the largest
    ones, half of the bytes with two workers) at once while light ones wait; that pair would set the memory peak."""
    import threading
    import time

    from mhalint import engine

    sizes = [500, 200, 300, 150, 100, 50, 400, 100]
    items = [(f"f{index}.py", b"x" * size) for index, size in enumerate(sizes)]
    heavy = {"f0.py", "f6.py"}  # 500 + 400: half of the 1,800 bytes; the light files take as long
    lock = threading.Lock()
    running: list[str] = []
    overlaps: list[set[str]] = []
    started: list[str] = []

    def fake_check(item):
        with lock:
            running.append(item[0])
            started.append(item[0])
            overlaps.append(set(running))
        time.sleep(len(item[1]) / 5_000)
        with lock:
            running.remove(item[0])
        return [], [item[0]]

    monkeypatch.setattr(engine, "_check_in_worker", fake_check)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        outcomes = engine._dispatch_by_size(pool, items, jobs=2)
    assert {index: outcome[1] for index, outcome in outcomes.items()} == {i: [f"f{i}.py"] for i in range(8)}
    assert started[:2] == ["f0.py", "f2.py"]  # the largest heavy file beside the largest light one
    assert all(len(group & heavy) <= 1 for group in overlaps)
