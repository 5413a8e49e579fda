"""Positions per top-level statement (offsets read off CPython's tree) equal those of generating the whole module."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from mhalint.context import ModuleContext
from mhalint.positions import Positions, first_lines, statement_starts
from mhalint.walk import walk

EXAMPLES = sorted((Path(__file__).parents[1] / "examples").glob("*.py"))

SOURCES = {
    "decorators and comments": (
        "# header comment\n\nimport torch\n\n\n# about f\n@decorate\n# between decorators\n@other(1,\n       2)\n"
        "def f(x):\n    return x  # trailing\n\n\nclass A(\n    Base,\n):\n    y = 1\n"
    ),
    "simple statements on one line": "a = 1; b = (2,\n  3); c = 4\nd = 5\n",
    "parenthesised start": "(\n    print(1)\n)\nx = 2\n",  # ast puts the statement on line 2: a mismatch
    "no trailing newline": "x = 1\ny = nn.MultiheadAttention(8, 2)",
    "windows line endings": "import torch\r\n\r\nclass A:\r\n    def f(self):\r\n        return 1\r\n",
    "compound statements": "if x:\n    a = 1\nelse:\n    a = 2\ntry:\n    b = 1\nexcept E:\n    pass\nfor i in r: pass\n",
    "only comments": "# nothing\n# at all\n",
}


def _all_positions(source: str, per_statement: bool):
    module = cst.parse_module(source)
    context = ModuleContext(module, "x.py", source, first_lines(ast.parse(source)) if per_statement else None)
    nodes: list[cst.CSTNode] = []
    walk(module, lambda node: nodes.append(node) or True, lambda node: None)
    return [(type(node).__name__, context.position(node)) for node in nodes], context


@pytest.mark.parametrize("source", [*SOURCES.values(), *(path.read_text() for path in EXAMPLES)],
                         ids=[*SOURCES, *(path.name for path in EXAMPLES)])
def test_per_statement_positions_equal_whole_module_positions(source):
    per_statement, _ = _all_positions(source, per_statement=True)
    whole, _ = _all_positions(source, per_statement=False)
    assert per_statement == whole


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_a_position_in_one_statement_generates_only_that_statement(path):
    source = path.read_text()
    module = cst.parse_module(source)
    context = ModuleContext(module, str(path), source, first_lines(ast.parse(source)))
    last = module.body[-1]
    context.position(last)
    positions: Positions = context._positions
    assert not positions._whole and set(positions._placed) == {last}


def test_statement_starts_are_the_lines_of_leading_comments_and_decorators():
    source = SOURCES["decorators and comments"]
    module = cst.parse_module(source)
    # `import torch` on line 3 (the module header holds lines 1-2); f from the blank lines after it (4-5, then its
    # comment on 6 and its first decorator on 7); A from the blank lines 13-14 before `class` on 15.
    assert statement_starts(module, first_lines(ast.parse(source))) == [3, 4, 13]


def test_trees_that_do_not_pair_up_give_no_starts():
    module = cst.parse_module("a = 1\nb = 2\n")
    assert statement_starts(module, first_lines(ast.parse("a = 1\n"))) is None
