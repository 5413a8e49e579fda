"""The findings cache and parallel checking change how fast results come, never what they are."""

from __future__ import annotations

import concurrent.futures
import errno
import gc
import hashlib
import io
import json
import multiprocessing
import operator
import os
import pickle
import re
import shutil
import signal
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint.cli.main import main
from mhalint.rule import load_rules
from mhalint.run import parallel, scan
from mhalint.run.cache import FORMAT_VERSION, Cache, clean
from mhalint.run.engine import Checker

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


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """Four files, two of them with a finding: enough for the many variants of a damaged index."""
    root = tmp_path / "small"
    root.mkdir()
    for name in ("mha001_batch_first_default_bad.py", "mha003_is_causal_without_mask_bad.py", "mha001_batch_first_default_fixed.py"):
        shutil.copy(EXAMPLES / name, root / name)
    (root / "plain.py").write_text("x = 1\n")
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
    monkeypatch.setattr(scan, "open", lambda file, *a, **k: read.append(str(file)) or open(file, *a, **k),
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
    target = tree / "examples" / "mha001_batch_first_default_bad.py"
    Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    target.write_text(target.read_text().replace("nn.MultiheadAttention(EMBED_DIM, NUM_HEADS)",
                                                 "nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)"))
    read = _count_engine_reads(monkeypatch)
    again = Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    assert [f.code for f in again.findings] == []
    assert [p for p in read if str(tree) in p] == [str(target)]  # once: the same bytes serve the cache and the check


def test_same_content_with_a_new_modification_time_is_a_hit(tree: Path, tmp_path: Path, monkeypatch):
    rules = list(load_rules().values())
    target = tree / "examples" / "mha003_is_causal_without_mask_bad.py"
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


class _ThreadLanes:
    """The worker pool's interface (mhalint.run.workers.Workers) over threads: the schedule alone, no processes."""

    def __init__(self, threads: concurrent.futures.ThreadPoolExecutor, work):
        self.threads, self.work = threads, work
        self.running: dict[concurrent.futures.Future, int] = {}

    def submit(self, key: int, item) -> None:
        self.running[self.threads.submit(self.work, item)] = key

    def finished(self) -> list:
        done, _ = concurrent.futures.wait(self.running, return_when=concurrent.futures.FIRST_COMPLETED)
        return [(self.running.pop(future), future.result()) for future in done]


def test_the_largest_files_are_checked_one_at_a_time_beside_the_others():
    """The pool's schedule: outcomes for every file, largest first, and never two of the heavy files (the largest
    ones, half of the bytes with two workers) at once while light ones wait; that pair would set the memory peak."""
    import threading
    import time

    from mhalint.run import parallel
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

    outcomes = {}
    with concurrent.futures.ThreadPoolExecutor(2) as threads:
        parallel._dispatch_by_size(_ThreadLanes(threads, fake_check), items, 2, outcomes.__setitem__)
    assert {index: outcome[1] for index, outcome in outcomes.items()} == {i: [f"f{i}.py"] for i in range(8)}
    assert started[:2] == ["f0.py", "f2.py"]  # the largest heavy file beside the largest light one
    assert all(len(group & heavy) <= 1 for group in overlaps)


def test_on_file_hands_on_each_files_findings_in_the_results_order(tree: Path, tmp_path: Path):
    """Once per file (and per path that could not be read), sorted by path however the files finish (parsed in
    two workers, largest first; or from the cache), and the very findings of the result."""
    rules = list(load_rules().values())
    missing = str(tree / "missing.py")
    for cache in (Cache(tmp_path / "cache", rules), Cache(tmp_path / "cache", rules), None):  # cold, warm, none
        calls: list[tuple[str, list]] = []
        result = Checker(rules).check_paths([tree, missing], cache=cache, jobs=2,
                                            on_file=lambda path, findings: calls.append((path, findings)))
        paths = [path for path, _ in calls]
        assert paths == sorted({*map(str, tree.rglob("*.py")), *map(str, tree.rglob("*.ipynb")), missing})
        streamed = [finding for _, findings in calls for finding in findings]
        assert len(streamed) == len(result.findings) and all(map(operator.is_, streamed, result.findings))
        assert all(f.path == path for path, findings in calls for f in findings)
        assert {f.code for f in streamed} >= {"MHA001", "MHA900", "MHA901"}


def test_on_file_comes_as_soon_as_the_files_before_it_are_done(tmp_path: Path, monkeypatch):
    """A file's findings are handed on before the next file is checked: a caller can print them while a slow
    file further on is still being checked."""
    for name in ("a.py", "b.py", "c.py"):
        shutil.copy(EXAMPLES / "mha001_batch_first_default_bad.py", tmp_path / name)
    checker = Checker(list(load_rules().values()))
    events: list[str] = []
    check_one = checker._check_one
    monkeypatch.setattr(checker, "_check_one", lambda path, raw: events.append(f"check {Path(path).name}")
                        or check_one(path, raw))
    checker.check_paths([tmp_path], jobs=1, on_file=lambda path, findings: events.append(
        f"{Path(path).name}: {[f.code for f in findings]}"))
    assert events == ["check a.py", "a.py: ['MHA001']", "check b.py", "b.py: ['MHA001']", "check c.py",
                      "c.py: ['MHA001']"]


def test_a_worker_that_dies_is_an_internal_error_on_its_file_and_the_run_goes_on(tree: Path, monkeypatch):
    """A worker process killed while checking a file (the system's out-of-memory killer, a crash in native code):
    that file is MHA902, another worker takes its place, every other file is checked."""
    rules = list(load_rules().values())
    expected = Checker(rules).check_paths([tree], jobs=1)
    victim = str(tree / "examples" / "mha003_is_causal_without_mask_bad.py")
    real = parallel._check_in_worker

    def dies_on_the_victim(item):
        if item[0] == victim:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(item)

    monkeypatch.setattr(parallel, "_check_in_worker", dies_on_the_victim)
    result = Checker(rules).check_paths([tree], jobs=2)
    assert [f.code for f in result.findings if f.path == victim] == ["MHA902"]
    assert "killed by signal 9" in next(f.message for f in result.findings if f.path == victim)
    assert result.internal_errors == 1
    assert [f.to_dict() for f in result.findings if f.path != victim] == \
        [f.to_dict() for f in expected.findings if f.path != victim]
    assert multiprocessing.active_children() == []


def test_the_workers_are_stopped_when_the_run_stops_half_way(tree: Path):
    """Whatever ends a run early (here the caller's on_file raises; in the command line, Ctrl-C or SIGTERM), no
    worker process outlives it."""
    class Stop(Exception):
        pass

    def stop_at_the_fifth(path, findings, seen=[]):
        seen.append(path)
        if len(seen) == 5:
            raise Stop

    with pytest.raises(Stop):
        Checker(list(load_rules().values())).check_paths([tree], jobs=2, on_file=stop_at_the_fifth)
    assert multiprocessing.active_children() == []


def test_a_file_rewritten_while_it_is_read_is_not_cached(tmp_path: Path, monkeypatch):
    """The file changes between the read and the status taken after it (an editor saving in place): the
    findings of the bytes read must not be cached under the new size and time, or every warm run would serve
    them for bytes that are not in the file."""
    rules = list(load_rules().values())
    target = tmp_path / "model.py"
    shutil.copy(EXAMPLES / "mha001_batch_first_default_bad.py", target)
    rewritten = (EXAMPLES / "mha001_batch_first_default_fixed.py").read_bytes()

    class RewrittenOnRead:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exception):
            self.handle.close()

        def fileno(self):
            return self.handle.fileno()

        def read(self, *size):
            raw = self.handle.read(*size)
            target.write_bytes(rewritten)  # the same file, in place: the open handle sees its new status
            os.utime(target, ns=(10**18, 10**18))
            return raw

    monkeypatch.setattr(scan, "open", lambda *args, **kwargs: RewrittenOnRead(open(*args, **kwargs)),
                        raising=False)
    during = Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    assert [f.code for f in during.findings] == ["MHA001"]  # the bytes that were read
    monkeypatch.undo()
    after = Checker(rules).check_paths([target], cache=Cache(tmp_path / "cache", rules))
    assert dicts(after) == dicts(Checker(rules).check_paths([target])) == []


def test_the_index_forgets_files_that_no_longer_exist(small: Path, tmp_path: Path):
    rules = list(load_rules().values())
    Checker(rules).check_paths([small], cache=Cache(tmp_path / "cache", rules))
    gone = small / "mha003_is_causal_without_mask_bad.py"
    gone.unlink()
    Checker(rules).check_paths([small / "plain.py"], cache=Cache(tmp_path / "cache", rules))  # another file only
    [index] = (tmp_path / "cache").glob("findings-*.json")
    assert sorted(json.loads(index.read_text())["entries"]) == sorted(str(path) for path in small.iterdir())


# ---- the cache is data from the checked repository: never code, never trusted ------------------------------------

class _CreatesMarker:
    """Unpickling this opens (creates) `marker`: what a crafted pickle in a hostile repository would do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def _plant_pickles(directory: Path, marker: Path) -> list[Path]:
    """Every file of the cache directory replaced by the payload, and `findings-<key>.pickle` beside each index
    (the name mhalint's pickle cache used), also holding it."""
    payload = pickle.dumps(_CreatesMarker(marker))
    planted = []
    for item in sorted(directory.iterdir()):
        item.write_bytes(payload)
        planted.append(item)
        if item.name.startswith("findings-"):
            old_name = directory / (item.name.split(".")[0] + ".pickle")
            old_name.write_bytes(payload)
            planted.append(old_name)
    return planted


def _payload_works(tmp_path: Path) -> None:
    """The payload really does create its marker when unpickled, so the tests below can fail."""
    probe_marker = tmp_path / "payload-works"
    pickle.loads(pickle.dumps(_CreatesMarker(probe_marker)))
    assert probe_marker.exists()
    probe_marker.unlink()


def test_a_planted_pickle_is_never_loaded_by_the_command_line(tree: Path, tmp_path: Path, monkeypatch):
    _payload_works(tmp_path)
    marker = tmp_path / "pwned"
    monkeypatch.chdir(tree)
    monkeypatch.delenv("MHALINT_CACHE_DIR", raising=False)
    runner = CliRunner()
    uncached = runner.invoke(main, ["check", "--no-cache", "--output-format", "json", "."])
    assert uncached.exit_code == 1 and json.loads(uncached.output)
    assert runner.invoke(main, ["check", "--output-format", "json", "."]).output == uncached.output
    directory = tree / ".mhalint_cache"
    planted = _plant_pickles(directory, marker)
    assert any(p.suffix == ".json" for p in planted) and any(p.suffix == ".pickle" for p in planted)
    for _ in range(2):  # the planted index, then the one written in its place
        result = runner.invoke(main, ["check", "--output-format", "json", "."])
        assert not marker.exists()
        assert (result.exit_code, result.output) == (1, uncached.output)
    index = next(directory.glob("findings-*.json"))
    assert json.loads(index.read_bytes())["entries"]  # rewritten, as JSON
    assert all(p.read_bytes() == pickle.dumps(_CreatesMarker(marker)) for p in directory.glob("*.pickle"))
    assert runner.invoke(main, ["clean"]).exit_code == 0  # removes nothing: the .gitignore is not mhalint's now
    assert all(p.exists() for p in planted) and not marker.exists()


def test_a_planted_pickle_is_never_loaded_by_the_checker(tree: Path, tmp_path: Path):
    _payload_works(tmp_path)
    marker = tmp_path / "pwned"
    rules = list(load_rules().values())
    checker = Checker(rules)
    uncached = checker.check_paths([tree])
    directory = tmp_path / "cache"
    assert dicts(checker.check_paths([tree], cache=Cache(directory, rules))) == dicts(uncached)
    _plant_pickles(directory, marker)
    for _ in range(2):
        assert dicts(checker.check_paths([tree], cache=Cache(directory, rules))) == dicts(uncached)
        assert not marker.exists()


# ---- a damaged or foreign index: ignored where bad, rewritten valid, the good entries kept ------------------------

def _fill(small: Path, directory: Path) -> tuple[list, list[dict], dict]:
    """Rules, the uncached findings, and the index document of a cache filled by a real run."""
    rules = list(load_rules().values())
    uncached = Checker(rules).check_paths([small])
    cache = Cache(directory, rules)
    assert dicts(Checker(rules).check_paths([small], cache=cache)) == dicts(uncached)
    return rules, dicts(uncached), json.loads(cache.index_path.read_bytes())


def _with_finding(document: dict) -> str:
    return next(path for path, entry in document["entries"].items() if entry[3])


def _without_finding(document: dict) -> str:
    return next(path for path, entry in document["entries"].items() if not entry[3])


def _edit_entry(pick, edit):
    """A mutation of one entry (the one `pick` chooses); the others stay valid."""
    def mutate(document: dict) -> tuple[bytes, set[str]]:
        path = pick(document)
        edit(document["entries"], path)
        return json.dumps(document).encode(), {path}
    return mutate


def _edit_finding(**changes):
    def edit(entries: dict, path: str) -> None:
        finding = entries[path][3][0]
        for key, value in changes.items():
            if value is _DELETE:
                del finding[key]
            else:
                finding[key] = value
    return _edit_entry(_with_finding, edit)


def _set(index: int, value):
    def edit(entries: dict, path: str) -> None:
        entries[path][index] = value
    return edit


def _whole(change):
    """A mutation that spoils the whole file: every entry is a miss."""
    def mutate(document: dict) -> tuple[bytes, set[str] | None]:
        return change(document), None
    return mutate


def _top(key, value):
    def change(document: dict) -> bytes:
        document[key] = value
        return json.dumps(document).encode()
    return change


def _replace_text(old: str, new: str):
    def change(document: dict) -> tuple[bytes, set[str]]:
        path = _without_finding(document)
        text = json.dumps(document)
        entry = json.dumps(document["entries"][path])
        assert old in entry
        return text.replace(json.dumps(path) + ": " + entry, json.dumps(path) + ": " + entry.replace(old, new, 1)
                            ).encode(), {path}
    return change


_DELETE = object()
_HOLD_ONE_BAD_FINDING = _edit_entry(_with_finding, lambda entries, path: entries[path][3].append({"path": ""}))

MALFORMED = {
    "truncated": _whole(lambda d: json.dumps(d).encode()[:len(json.dumps(d)) // 2]),
    "empty": _whole(lambda d: b""),
    "not json": _whole(lambda d: b"not json at all"),
    "invalid utf-8": _whole(lambda d: json.dumps(d).encode().replace(b'"entries"', b'"entr\xff\xfeies"')),
    "nested too deeply": _whole(lambda d: b"[" * 200_000 + b"]" * 200_000),
    "a number of 5,000 digits": _whole(lambda d: json.dumps(d).encode().replace(
        f'"version": {FORMAT_VERSION}'.encode(), b'"version": ' + b"9" * 5000)),
    "a list at the top": _whole(lambda d: json.dumps([d]).encode()),
    "a string at the top": _whole(lambda d: b'"findings"'),
    "null at the top": _whole(lambda d: b"null"),
    "the pickle format's version": _whole(_top("version", 1)),
    "a future version": _whole(_top("version", FORMAT_VERSION + 1)),
    "version true": _whole(_top("version", True)),
    "version as text": _whole(_top("version", "2")),
    "a foreign format": _whole(_top("format", "ruff")),
    "another configuration's key": _whole(_top("key", "0" * 24)),
    "entries as a list": _whole(lambda d: json.dumps({**d, "entries": list(d["entries"].items())}).encode()),
    "the project index as an object": _whole(lambda d: json.dumps({**d, "imports": json.loads(d["imports"])}).encode()),
    "no entries": _whole(lambda d: json.dumps({k: v for k, v in d.items() if k != "entries"}).encode()),
    "size as text": _edit_entry(_without_finding, lambda e, p: e[p].__setitem__(0, str(e[p][0]))),
    "size negative": _edit_entry(_without_finding, _set(0, -1)),
    "size 10**30": _edit_entry(_without_finding, _set(0, 10**30)),
    "size a float": _edit_entry(_without_finding, lambda e, p: e[p].__setitem__(0, float(e[p][0]))),
    "size true": _edit_entry(_without_finding, _set(0, True)),
    "mtime 1e999": _replace_text(", ", ", 1e999, "),  # size, inf, mtime, ...: one item too many, and infinite
    "mtime Infinity": _edit_entry(_without_finding, _set(1, float("inf"))),
    "mtime -10**40": _edit_entry(_without_finding, _set(1, -10**40)),
    "mtime null": _edit_entry(_without_finding, _set(1, None)),
    "digest not hex": _edit_entry(_without_finding, _set(2, "zz" * 16)),
    "digest upper case": _edit_entry(_without_finding, lambda e, p: e[p].__setitem__(2, e[p][2].upper())),
    "digest too short": _edit_entry(_without_finding, lambda e, p: e[p].__setitem__(2, e[p][2][:-2])),
    "digest non-ascii": _edit_entry(_without_finding, _set(2, "\u0661" * 32)),  # Arabic-Indic digit one
    "digest an int": _edit_entry(_without_finding, _set(2, 12345)),
    "entry an object": _edit_entry(_without_finding, lambda e, p: e.__setitem__(p, dict(enumerate(e[p])))),
    "entry too long": _edit_entry(_without_finding, lambda e, p: e[p].append(0)),
    "entry too short": _edit_entry(_without_finding, lambda e, p: e[p].pop()),
    "entry null": _edit_entry(_without_finding, lambda e, p: e.__setitem__(p, None)),
    "findings an object": _edit_entry(_without_finding, _set(3, {})),
    "findings a string": _edit_entry(_without_finding, _set(3, "MHA001")),
    "a relative path": _edit_entry(_without_finding, lambda e, p: e.__setitem__(os.path.relpath(p), e.pop(p))),
    "a bad finding among good ones": _HOLD_ONE_BAD_FINDING,
    "a finding that is a list": _edit_entry(_with_finding, lambda e, p: e[p][3].__setitem__(0, [1, 2])),
    "a finding without a code": _edit_finding(code=_DELETE),
    "a finding with an extra field": _edit_finding(shell="rm -rf /"),
    "a finding's line as text": _edit_finding(line="3"),
    "a finding's line a float": _edit_finding(line=3.5),
    "a finding's line 1e999": _edit_finding(line=float("inf")),
    "a finding's unknown severity": _edit_finding(severity="fatal"),
    "a finding's message an object": _edit_finding(message={"text": "hi"}),
    "a finding's arguments a string": _edit_finding(arguments="ab"),
    "a finding's fix malformed": _edit_finding(fix={"edits": "x"}),
    "a finding with a path": _edit_finding(path="/elsewhere.py"),
}


@pytest.mark.parametrize("mutate", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_index_gives_correct_findings_and_is_rewritten_valid(mutate, small: Path, tmp_path: Path,
                                                                        monkeypatch):
    directory = tmp_path / "cache"
    rules, uncached, document = _fill(small, directory)
    index = Cache(directory, rules).index_path
    good_entries = document["entries"]
    raw, spoiled = mutate(json.loads(json.dumps(document)))
    index.write_bytes(raw)
    read = _count_engine_reads(monkeypatch)
    assert dicts(Checker(rules).check_paths([small], cache=Cache(directory, rules))) == uncached
    reread = {p for p in read if str(small) in p}
    if spoiled is None:  # the whole file was unreadable: everything was a miss
        assert len(reread) == len(good_entries)
    else:  # only the bad entry was a miss; the good ones were used
        assert reread == spoiled
    rewritten = json.loads(index.read_bytes())
    assert rewritten["entries"].keys() == good_entries.keys()
    reloaded = Cache(directory, rules)
    assert not reloaded._dirty and reloaded._entries.keys() == good_entries.keys()  # every entry valid again
    read.clear()
    assert dicts(Checker(rules).check_paths([small], cache=reloaded)) == uncached
    assert [p for p in read if str(small) in p] == []


def test_a_run_that_asks_nothing_of_the_project_index_keeps_its_text_undecoded(tmp_path: Path):
    """The project index is a JSON text inside the document: a warm run neither decodes nor re-encodes it, and
    a run that does ask gets its valid entries (a bad text is no index, rewritten)."""
    rules = list(load_rules().values())
    (tmp_path / "model.py").write_text("import torch\nfrom layers import Block\n")
    status = (tmp_path / "model.py").stat()
    path = str(tmp_path / "model.py")
    cache = Cache(tmp_path / "cache", rules)
    cache.keep_imports(path, status, "model", (("Block", "layers", "Block"),))
    cache.save()
    warm = Cache(tmp_path / "cache", rules)
    warm.store(path, Cache.digest(b""), status, [])
    warm.save()
    assert warm._imports is None  # never decoded
    asked = Cache(tmp_path / "cache", rules)
    assert asked.recall_imports(path, status, "model") == (("Block", "layers", "Block"),)
    document = json.loads(asked.index_path.read_bytes())
    document["imports"] = "[not json"
    asked.index_path.write_bytes(json.dumps(document).encode())
    spoiled = Cache(tmp_path / "cache", rules)
    assert spoiled.recall_imports(path, status, "model") is None and spoiled._dirty


def test_an_unchanged_run_does_not_rewrite_the_index(small: Path, tmp_path: Path):
    rules, uncached, _ = _fill(small, tmp_path / "cache")
    index = Cache(tmp_path / "cache", rules).index_path
    before = index.stat()
    assert dicts(Checker(rules).check_paths([small], cache=Cache(tmp_path / "cache", rules))) == uncached
    assert (index.stat().st_mtime_ns, index.stat().st_ino) == (before.st_mtime_ns, before.st_ino)


def test_the_index_is_json_data_of_finding_to_dict(small: Path, tmp_path: Path):
    rules, _, document = _fill(small, tmp_path / "cache")
    assert Cache(tmp_path / "cache", rules).index_path.name == f"findings-{document['key']}.json"
    assert (document["format"], document["version"]) == ("mhalint-findings-cache", FORMAT_VERSION)
    by_path = {}
    for finding in Checker(rules).check_paths([small]).findings:
        by_path.setdefault(os.path.abspath(finding.path), []).append({**finding.to_dict(), "path": ""})
    for path, (size, mtime_ns, digest, findings, project, was_parsed) in document["entries"].items():
        assert project == "" or re.fullmatch("[0-9a-f]{32}", project)  # set where the analysis read other files
        assert was_parsed is Checker(rules).prefilter.matches(Path(path).read_bytes())  # parsed: a trigger in its code
        assert (size, mtime_ns) == (os.stat(path).st_size, os.stat(path).st_mtime_ns)
        assert digest == hashlib.blake2b(Path(path).read_bytes(), digest_size=16).hexdigest()
        assert findings == by_path.get(path, [])


# ---- no symlink is followed, no temporary file is left, nothing but the cache's own files is removed --------------

def test_a_symlink_at_the_index_path_is_refused_neither_read_nor_written_through(small: Path, tmp_path: Path,
                                                                                  monkeypatch):
    directory = tmp_path / "cache"
    rules, uncached, document = _fill(small, directory)
    index = Cache(directory, rules).index_path
    victim = tmp_path / "victim.json"
    victim.write_bytes(index.read_bytes())  # a valid index: reading through the link would make every file a hit
    os.utime(small / "plain.py", ns=(1, 1))  # the run has something to write
    index.unlink()
    index.symlink_to(victim)
    read = _count_engine_reads(monkeypatch)
    assert dicts(Checker(rules).check_paths([small], cache=Cache(directory, rules))) == uncached
    assert len({p for p in read if str(small) in p}) == len(document["entries"])  # the link was not read
    assert victim.read_bytes() == json.dumps(document, separators=(",", ":")).encode()  # nor written through
    assert index.is_symlink() and not [p for p in directory.iterdir() if p.suffix == ".tmp"]


def test_a_symlinked_gitignore_is_not_written_through(small: Path, tmp_path: Path):
    directory = tmp_path / "cache"
    directory.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (directory / ".gitignore").symlink_to(victim)
    rules = list(load_rules().values())
    assert Checker(rules).check_paths([small], cache=Cache(directory, rules)).findings
    assert victim.read_text() == "precious\n"
    assert not list(directory.glob("findings-*"))  # refused: nothing written


def _fifo(path: Path) -> None:
    os.mkfifo(path)


@pytest.mark.parametrize("plant", [lambda p: p.mkdir(), lambda p: (p.mkdir(), (p / "x").write_text("x")),
                                   _fifo, lambda p: p.symlink_to("/dev/zero"), lambda p: p.symlink_to(p)],
                         ids=["empty directory", "directory", "fifo", "symlink to a device", "symlink loop"])
def test_no_regular_file_at_the_index_path_is_no_cache(plant, small: Path, tmp_path: Path):
    rules = list(load_rules().values())
    uncached = dicts(Checker(rules).check_paths([small]))
    directory = tmp_path / "cache"
    directory.mkdir()
    plant(Cache(directory, rules).index_path)
    outcome: list = []
    worker = threading.Thread(target=lambda: outcome.append(
        Checker(rules).check_paths([small], cache=Cache(directory, rules))), daemon=True)
    worker.start()
    worker.join(60)
    assert outcome and dicts(outcome[0]) == uncached  # and it did not block on the FIFO
    assert not [p for p in directory.iterdir() if p.suffix == ".tmp"]


class _Interrupted(BaseException):
    pass


def _raise(error: BaseException):
    def fail(*args, **kwargs):
        raise error
    return fail


FAILURES = {
    "json.dumps": ("mhalint.run.cache.json.dumps", TypeError("Object of type set is not JSON serializable")),
    "os.replace": ("mhalint.run.cache.os.replace", OSError(errno.EXDEV, "Invalid cross-device link")),
    "write (disk full)": ("mhalint.run.cache.os.fdopen", None),
    "interrupted": ("mhalint.run.cache.os.replace", _Interrupted()),
}


@pytest.mark.parametrize("target, error", FAILURES.values(), ids=FAILURES.keys())
def test_a_failed_save_leaves_no_temporary_file_and_the_old_index_intact(target, error, small: Path, tmp_path: Path,
                                                                          monkeypatch):
    directory = tmp_path / "cache"
    rules, uncached, _ = _fill(small, directory)
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    os.utime(small / "plain.py", ns=(1, 1))  # the run has something to write
    if error is None:  # a file object whose writes fail, as on a full disk
        real_fdopen = os.fdopen

        class Full(io.BufferedWriter):
            def write(self, data):
                raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(target, lambda handle, mode="r", *a, **k: Full(real_fdopen(handle, "wb").raw)
                            if "w" in mode else real_fdopen(handle, mode, *a, **k))
    else:
        monkeypatch.setattr(target, _raise(error))
    cache = Cache(directory, rules)
    if isinstance(error, _Interrupted):
        with pytest.raises(_Interrupted):
            Checker(rules).check_paths([small], cache=cache)
    else:
        assert dicts(Checker(rules).check_paths([small], cache=cache)) == uncached
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before


def test_an_unwritable_cache_directory_is_only_a_slower_run(small: Path, tmp_path: Path):
    rules = list(load_rules().values())
    (tmp_path / "file").write_text("not a directory")
    result = Checker(rules).check_paths([small], cache=Cache(tmp_path / "file" / "cache", rules))
    assert dicts(result) == dicts(Checker(rules).check_paths([small]))


def test_clean_removes_only_the_caches_own_files(tmp_path: Path):
    directory = tmp_path / "cache"
    directory.mkdir()
    own = ["findings-0123abcd.json", "findings-0123abcd.pickle", ".findings-x1y2.tmp", "tmpab12cd.tmp", ".gitignore"]
    for name in own:
        (directory / name).write_bytes(b"*\n")
    (directory / "notes.txt").write_text("mine")
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    (directory / "findings-fedc.json").symlink_to(victim)
    assert clean(directory) == len(own)
    assert sorted(p.name for p in directory.iterdir()) == ["findings-fedc.json", "notes.txt"]  # a link is not ours
    assert victim.read_text() == "precious"
    (directory / "notes.txt").unlink()
    (directory / "findings-fedc.json").unlink()
    (directory / "findings-0123abcd.json").write_text("{}")
    (directory / ".gitignore").write_text("*.py\n")  # not the one mhalint writes: not a folder mhalint made
    assert clean(directory) == 0 and len(list(directory.iterdir())) == 2
    (directory / ".gitignore").write_text("*\n")
    assert clean(directory) == 2 and not directory.exists()


def test_clean_does_not_empty_the_target_of_a_symlinked_cache_directory(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    for name in (".bashrc", ".profile", "report.pdf"):
        (home / name).write_text("precious")
    (home / ".gitignore").write_text("*.log\n")
    (tmp_path / "project").mkdir()
    link = tmp_path / "project" / ".mhalint_cache"
    link.symlink_to(home)
    (home / "findings-abcd.pickle").write_bytes(b"x")
    assert clean(link) == 0
    assert sorted(p.name for p in home.iterdir()) == [".bashrc", ".gitignore", ".profile", "findings-abcd.pickle",
                                                      "report.pdf"]
    assert link.is_symlink()


# ---- other data a checked repository can supply ------------------------------------------------------------------

@pytest.mark.parametrize("text", ['[1]', '["MHA001"]', '[{"path": "a.py", "line": 1e999, "column": 1, '
                                  '"code": "MHA001", "message": "m"}]'], ids=["a number", "a string", "line 1e999"])
def test_probe_refuses_a_malformed_findings_file_with_a_usage_error(text: str):
    """`mhalint probe FILE.json` reads data only (json, Finding.from_dict) and says what is wrong, no traceback."""
    result = CliRunner().invoke(main, ["probe", "-"], input=text)
    assert result.exit_code == 2 and "is not a JSON list of mhalint findings" in result.output
