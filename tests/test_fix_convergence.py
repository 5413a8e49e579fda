"""Fixes converge (issue 35 item 12): every fix reaches its fixed point in one application.

For every rule's invalid examples and every examples/*_bad.py, each fix mhalint offers (safe and unsafe) is applied
alone, and the re-lint of the result must offer no fix that would change the text the fix wrote (a fix that flips
batch_first=True/False, or inserts an argument another rule then rewrites, fails here). The whole fixer, run again
on what it produced, changes nothing, and it stops before its round limit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mhalint.finding import Finding
from mhalint.fixes import MAX_ROUNDS, applicable, apply_fixes, fix_source
from mhalint.parse.source import line_starts
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

ROOT = Path(__file__).resolve().parents[1]
RULES = load_rules()
CHECKER = Checker(list(RULES.values()))
# Programs where fixes used to go round: a module called with both layouts (each round flipped batch_first), and
# one name holding A or a MultiheadAttention whose calls each run one of them.
BOTH_LAYOUTS = """\
import torch.nn as nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 8)

    def forward(self, x, y):
        B, T, C = x.shape
        out = self.attn(x, x, x)[0]
        L, N, E = y.shape
        return out, self.attn(y, y, y)[0]
"""
ONE_NAME_TWO_CLASSES = """\
import torch.nn as nn

class A(nn.Module):
    def forward(self, x):
        return x

class Block(nn.Module):
    def __init__(self, kind="a"):
        super().__init__()
        self.kind = kind
        if kind == "a":
            cls = A
        else:
            cls = nn.MultiheadAttention
        self.attn = cls(64, 8) if kind != "a" else cls()

    def forward(self, x):
        B, N, C = x.shape
        if self.kind == "a":
            return self.attn(x)
        x = x.permute(1, 0, 2)
        return self.attn(x, x, x)[0]
"""
PROGRAMS = [pytest.param(BOTH_LAYOUTS, id="both-layouts"), pytest.param(ONE_NAME_TWO_CLASSES, id="two-classes")]
SOURCES = [pytest.param(example.code, id=f"{code}-invalid-{index}") for code, rule in sorted(RULES.items())
           for index, example in enumerate(rule.invalid)] + \
          [pytest.param(path.read_text(), id=path.name) for path in sorted((ROOT / "examples").glob("*_bad.py"))] + \
          PROGRAMS


def lint(source: str) -> list[Finding]:
    return CHECKER.check_source(source.encode(), "snippet.py")


def spans(source: str, finding: Finding) -> list[tuple[int, int, str]]:
    starts = line_starts(source)
    return [(starts[e.line - 1] + e.column - 1, starts[e.end_line - 1] + e.end_column - 1, e.content)
            for e in finding.fix.edits]


def written(source: str, finding: Finding) -> list[tuple[int, int]]:
    """Where the fix's edits lie in the fixed text: each edit's content, after the edits before it moved it."""
    found, shift = [], 0
    for start, end, content in sorted(spans(source, finding)):
        found.append((start + shift, start + shift + len(content)))
        shift += len(content) - (end - start)
    return found


def overlapping(regions: list[tuple[int, int]], edits: list[tuple[int, int, str]]) -> bool:
    return any(start < high and end > low or low <= start <= high and start == end
               for start, end, _ in edits for low, high in regions)


@pytest.mark.parametrize("source", SOURCES)
def test_no_fix_rewrites_what_a_fix_wrote(source):
    """Each fix alone: the re-lint offers no fix whose edits reach into the text it wrote, except another rule's
    fix that was waiting for the same place (two findings at one argument are fixed one round after the other)."""
    before = [f for f in lint(source) if applicable(f, unsafe=True)]
    for finding in before:
        fixed, applied = apply_fixes(source, [finding], unsafe=True)
        assert applied == 1
        regions = written(source, finding)
        waiting = {other.code for other in before if other is not finding and other.code != finding.code
                   and overlapping([(start, end) for start, end, _ in spans(source, finding)], spans(source, other))}
        again = [(other.code, other.message) for other in lint(fixed) if applicable(other, unsafe=True)
                 and other.code not in waiting and overlapping(regions, spans(fixed, other))]
        assert not again, f"{finding.code}'s fix ({finding.fix.title}) is rewritten by {again}"


@pytest.mark.parametrize("source", SOURCES)
def test_the_fixer_reaches_its_fixed_point_before_its_round_limit(source):
    rounds = []

    def counted(text: str) -> list[Finding]:
        rounds.append(text)
        return lint(text)

    fixed, _ = fix_source(source, counted, unsafe=True)
    assert len(rounds) <= MAX_ROUNDS  # the last round's lint found nothing to apply
    assert not any(applicable(f, unsafe=True) for f in lint(fixed))
    assert fix_source(fixed, lint, unsafe=True) == (fixed, 0)


def test_a_module_called_with_both_layouts_is_an_error_without_a_fix():
    """Either batch_first corrupts one of the calls: the fix only moved the error, and the next round moved it
    back (ten rounds, and the file left as it was)."""
    found = [f for f in lint(BOTH_LAYOUTS) if f.code == "MHA001"]
    assert [(f.line, f.severity.name, f.fix) for f in found] == [(6, "ERROR", None)]
    assert any("another call gives it sequence-first data (`L, N, E = y.shape`, line 11): no fix" in sentence
               for sentence in found[0].evidence)
