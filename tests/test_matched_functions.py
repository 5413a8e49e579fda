"""A rule that acts only in the functions its triggers match (Rule.matched_functions_only) is handed nothing from
another function's body, in a file parsed whole as in one parsed a function at a time; a file that only such
rules' triggers match is parsed a function at a time: the matched bodies, and those the analyses read."""

from __future__ import annotations

import textwrap

import pytest

from mhalint.parse import lazy_bodies
from mhalint.parse.lazy import cst
from mhalint.rule import Rule
from mhalint.run.engine import Checker

SEEN: list[tuple[str, str, int]] = []


class FlagsInMarked(Rule):
    """Reports every `flag()` call; its trigger is `marked()`, and it acts only where that matches."""

    code, name, summary, triggers = "XYZ401", "flags-in-marked", "flag() where marked() is", (r"\bmarked\(",)
    matched_functions_only = True

    def visit_Call(self, node: cst.Call) -> None:
        if type(node.func) is cst.Name and node.func.value == "flag":
            SEEN.append((self.code, self.scope.name or self.scope.kind, self.context.line(node)))
            self.report(node, "flag() called")


class FlagsEverywhere(FlagsInMarked):
    """The same, but in the whole file, on the trigger `torch`."""

    code, name, triggers = "XYZ402", "flags-everywhere", (r"\btorch\b",)
    matched_functions_only = False


MODULE = '''\
import os

def marked_one(x):
    marked()
    flag()
    x = x + 1
    return x

def unmarked(x):
    flag()
    y = x
    y = y + 1
    return y

def short(): flag()

class Holder:
    def method(self):
        flag()
        marked()
        self.x = 1
        return self

    def other(self):
        flag()
        z = 1
        z = z + 1
        return z

flag()
'''


@pytest.fixture(autouse=True)
def _clear():
    SEEN.clear()


@pytest.fixture(name="parsed_bodies")
def parsed_bodies_fixture(monkeypatch) -> list[str]:
    """The first line of each function body parsed on its own (lazy_bodies.Pending.parse)."""
    parsed: list[str] = []
    original = lazy_bodies.Pending.parse

    def recorded(self):
        parsed.append(self.source.splitlines()[0].strip())
        return original(self)

    monkeypatch.setattr(lazy_bodies.Pending, "parse", recorded)
    return parsed


def _run(tmp_path, source: str, rules) -> list[tuple[str, int]]:
    (tmp_path / "model.py").write_text(textwrap.dedent(source))
    result = Checker(rules).check_paths([tmp_path], jobs=1)
    return [(finding.code, finding.line) for finding in result.findings]


def test_a_file_only_such_rules_match_is_parsed_a_function_at_a_time(tmp_path, parsed_bodies):
    found = _run(tmp_path, MODULE, [FlagsInMarked])
    # the matched bodies, module-level code and the one-line function parsed with the shell
    assert found == [("XYZ401", 5), ("XYZ401", 15), ("XYZ401", 19), ("XYZ401", 30)]
    assert sorted(parsed_bodies) == ["def marked_one(x):", "def method(self):"]


def test_its_findings_are_those_of_a_whole_parse(tmp_path, monkeypatch, parsed_bodies):
    shell = _run(tmp_path, MODULE, [FlagsInMarked])
    monkeypatch.setenv("MHALINT_FULL_PARSE", "1")
    assert _run(tmp_path, MODULE, [FlagsInMarked]) == shell
    assert parsed_bodies == ["def marked_one(x):", "def method(self):"]  # from the first run only


def test_in_a_file_parsed_whole_it_still_sees_only_the_matched_functions(tmp_path, parsed_bodies):
    source = "import torch\n" + MODULE
    found = _run(tmp_path, source, [FlagsInMarked, FlagsEverywhere])
    assert parsed_bodies == []  # another rule's trigger: parsed whole
    assert [line for code, line in found if code == "XYZ401"] == [6, 16, 20, 31]
    assert [line for code, line in found if code == "XYZ402"] == [6, 11, 16, 20, 26, 31]


def test_the_other_rules_do_not_see_a_file_only_such_rules_match(tmp_path, parsed_bodies):
    """As they never see a file no trigger matches: their findings do not depend on which other rules run."""
    found = _run(tmp_path, MODULE, [FlagsInMarked, FlagsEverywhere])
    assert found == [("XYZ401", 5), ("XYZ401", 15), ("XYZ401", 19), ("XYZ401", 30)]
    assert {code for code, _, _ in SEEN} == {"XYZ401"}
    assert sorted(parsed_bodies) == ["def marked_one(x):", "def method(self):"]


def test_one_source_is_checked_as_in_a_run(parsed_bodies):
    """check_source (the editor, flake8) decides alike from the source alone."""
    checker = Checker([FlagsInMarked, FlagsEverywhere])
    found = checker.check_source(MODULE.encode(), "model.py")
    assert [(finding.code, finding.line) for finding in found] == [
        ("XYZ401", 5), ("XYZ401", 15), ("XYZ401", 19), ("XYZ401", 30)]
    assert sorted(parsed_bodies) == ["def marked_one(x):", "def method(self):"]
    found = checker.check_source(("import torch\n" + MODULE).encode(), "model.py")
    assert {finding.code for finding in found} == {"XYZ401", "XYZ402"}


def test_a_file_reaching_attention_through_another_file_is_checked_whole(tmp_path, parsed_bodies):
    """Its triggers are another file's: every rule may act on it (mhalint.run.engine's `_pull_in`)."""
    (tmp_path / "layers.py").write_text("import torch\nclass MyMHA(torch.nn.MultiheadAttention):\n    pass\n")
    found = _run(tmp_path, "from layers import MyMHA\n" + MODULE, [FlagsInMarked, FlagsEverywhere])
    assert [line for code, line in found if code == "XYZ402"] == [6, 11, 16, 20, 26, 31]
    assert [line for code, line in found if code == "XYZ401"] == [6, 16, 20, 31]
    assert parsed_bodies == []


def test_it_is_not_run_on_a_file_its_triggers_do_not_match(tmp_path):
    """Not even on module-level code: it acts only where its triggers match, and they match nowhere."""
    found = _run(tmp_path, "import torch\nflag()\n", [FlagsInMarked, FlagsEverywhere])
    assert found == [("XYZ402", 2)]
    assert {code for code, _, _ in SEEN} == {"XYZ402"}


def test_its_events_come_also_when_a_rule_asked_the_index_first(tmp_path, parsed_bodies):
    """A rule's set-up may read the index of the parsed part (built then); the walk that hands the rules their
    nodes is the same."""

    class AsksFirst(FlagsInMarked):
        code = "XYZ403"

        def __init__(self, context, emit):
            super().__init__(context, emit)
            self.calls = [call for call, _ in context.calls_named("flag")]

    assert _run(tmp_path, MODULE, [AsksFirst]) == [("XYZ403", 5), ("XYZ403", 15), ("XYZ403", 19), ("XYZ403", 30)]
    assert sorted(parsed_bodies) == ["def marked_one(x):", "def method(self):", "def other(self):",
                                     "def unmarked(x):"]
