"""Positions per statement (offsets read off CPython's tree: top-level statements, then those in classes' and
functions' bodies) equal those of generating the whole module."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mhalint.context import ModuleContext
from mhalint.parse.positions import Positions, body_lines, first_lines, statement_starts
from mhalint.parse.source import line_starts
from mhalint.parse.walk import walk

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
    "nested classes and functions": (
        "class A(nn.Module):\n    # about x\n\n    x = 1; y = 2\n\n    @property\n    # between\n    @cached\n"
        "    def f(self):\n        def g():\n            return 1\n        return g()\n\n"
        "    class Inner:\n        async def h(self):\n            await z\n    def one(self): return 2\n"
        "    # trailing comment in the class\n\n\ndef top():\n    class Local:\n        w = 3\n    return Local\n"
    ),
    "indentation that varies": "class A:\n  def f(self):\n       if x:\n        return 1\n  def g(self):\n"
                               "      return 2\n",
    "tabs": "class A:\n\tdef f(self):\n\t\t# c\n\t\treturn 1\n",
    "parenthesised start in a method": "class A:\n    def f(self):\n        (\n            print(1)\n        )\n"
                                       "        return 2\n",
    "windows line endings in a method": "class A:\r\n    def f(self):\r\n        # c\r\n        return 1\r\n",
    "under if and with": "if T:\n    class A:\n        def f(self):\n            return 1\nwith m:\n"
                         "    def g():\n        return 2\n",
    "one-line bodies": "class A: pass\ndef f(x): return x\nclass B:\n    def g(self): return 1\n"
                       "    class C: y = 2; z = 3\n",
}


def _all_positions(source: str, per_statement: bool, order: int = 0):
    """The position of every node but the module (whose own position needs the whole module generated), asked
    in walk order, or in reverse, or shuffled: what is generated and kept must not depend on the order."""
    module = cst.parse_module(source)
    syntax = ast.parse(source)
    context = ModuleContext(module, "x.py", source, first_lines(syntax) if per_statement else None,
                            body_lines=body_lines(syntax) if per_statement else None)
    nodes: list[cst.CSTNode] = []
    walk(module, lambda node: nodes.append(node) or True, lambda node: None)
    rest = nodes[1:]
    asked = rest if order == 0 else rest[::-1] if order == 1 else random.Random(order).sample(rest, len(rest))
    positions = {id(node): context.position(node) for node in asked}
    return [(type(node).__name__, positions[id(node)]) for node in nodes[1:]], context


# a last statement without its newline generates one the source lacks, and where ast's line for a parenthesised
# statement is not libcst's (some Python versions) it does not match either: the whole module may be generated
MAY_NEED_THE_WHOLE_MODULE = {"parenthesised start", "no trailing newline"}


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("source", [*SOURCES.values(), *(path.read_text() for path in EXAMPLES)],
                         ids=[*SOURCES, *(path.name for path in EXAMPLES)])
def test_per_statement_positions_equal_whole_module_positions(source, order, request):
    per_statement, context = _all_positions(source, per_statement=True, order=order)
    whole, _ = _all_positions(source, per_statement=False)
    assert per_statement == whole
    name = request.node.callspec.id.rsplit("-", 1)[0]
    if context._positions is not None and name not in MAY_NEED_THE_WHOLE_MODULE:
        assert not context._positions._whole  # the statements did the work


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_a_position_in_one_statement_generates_only_that_statement(path):
    source = path.read_text()
    module = cst.parse_module(source)
    context = ModuleContext(module, str(path), source, first_lines(ast.parse(source)))
    last = module.body[-1]
    context.position(last)
    positions: Positions = context._positions
    assert not positions._whole and set(positions._placed) == {last}


def test_a_position_in_a_method_generates_only_that_method_and_one_in_a_header_only_the_header():
    source = SOURCES["nested classes and functions"]
    module = cst.parse_module(source)
    syntax = ast.parse(source)
    context = ModuleContext(module, "x.py", source, first_lines(syntax), body_lines=body_lines(syntax))
    method = module.body[0].body.body[1]  # A.f, after `x = 1; y = 2` and its comment
    inner_return = method.body.body[0].body.body[0]  # `return 1` in g, inside f
    assert context.position(inner_return).start.line == 11
    positions: Positions = context._positions
    assert not positions._whole and set(positions._placed) == {inner_return}
    assert context.position(method.params.params[0]).start.line == 9  # self: from f's header alone
    assert set(positions._placed) == {inner_return, (method, "header")}
    assert context.position(method).start.line == 9  # f itself: from `def`, as PositionProvider has it
    assert set(positions._placed) == {inner_return, (method, "header"), method}


def test_a_statement_whose_text_does_not_match_gives_way_to_the_one_around_it():
    """Lines that do not fit the tree (here f's body placed one line too low) cost time, never a wrong position."""
    source = SOURCES["nested classes and functions"]
    module = cst.parse_module(source)
    syntax = ast.parse(source)
    wrong = {first: [line + 1 for line in lines] if first == 6 else lines
             for first, lines in body_lines(syntax).items()}
    context = ModuleContext(module, "x.py", source, first_lines(syntax), body_lines=wrong)
    method = module.body[0].body.body[1]
    inner_return = method.body.body[1]  # `return g()`
    assert context.position(inner_return).start.line == 12
    positions: Positions = context._positions
    assert not positions._whole and set(positions._placed) == {inner_return, method}


def test_statement_starts_are_the_lines_of_leading_comments_and_decorators():
    source = SOURCES["decorators and comments"]
    module = cst.parse_module(source)
    # `import torch` on line 3 (the module header holds lines 1-2); f from the blank lines after it (4-5, then its
    # comment on 6 and its first decorator on 7); A from the blank lines 13-14 before `class` on 15.
    assert statement_starts(module.body, first_lines(ast.parse(source))) == [3, 4, 13]


def test_trees_that_do_not_pair_up_give_no_starts():
    module = cst.parse_module("a = 1\nb = 2\n")
    assert statement_starts(module.body, first_lines(ast.parse("a = 1\n"))) is None


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_the_lines_of_every_statement_are_those_of_its_whole_position(name):
    """`line` reads an undecorated definition's first line off the statement starts, `end_line` its end off its
    body's last statement (or its own position where comment lines close the block): the lines of the
    definition's whole generated position."""
    source = SOURCES[name]
    module = cst.parse_module(source)
    syntax = ast.parse(source)
    context = ModuleContext(module, "x.py", source, first_lines(syntax), body_lines=body_lines(syntax))
    statements = []
    walk(module, lambda node: statements.append(node) or True, lambda node: None)
    statements = [node for node in statements if isinstance(node, cst.BaseStatement)]
    lines = [(context.line(node), context.end_line(node)) for node in statements]  # before any whole definition
    whole = ModuleContext(module, "x.py", source)                                    # is generated
    assert lines == [(whole.position(node).start.line, whole.position(node).end.line) for node in statements]


def test_the_lines_of_a_definition_generate_at_most_its_last_statement():
    source = SOURCES["nested classes and functions"]
    module = cst.parse_module(source)
    syntax = ast.parse(source)
    context = ModuleContext(module, "x.py", source, first_lines(syntax), body_lines=body_lines(syntax))
    method = module.body[0].body.body[1]  # A.f, ending with `return g()` on line 12
    assert context.end_line(method) == 12
    assert set(context._positions._placed) == {method.body.body[-1]}
    inner = module.body[0].body.body[2]
    assert context.line(inner) == 14  # `class Inner:`, undecorated: read off the starts, nothing generated
    assert set(context._positions._placed) == {method.body.body[-1]}


@given(st.text(alphabet="ab\r\n\x0c\x85", max_size=40))
def test_line_starts_are_where_python_starts_each_line(text):
    """With or without carriage returns, as str or bytes: a line starts after each \\r\\n, \\r or \\n, and only there
    (\\x0c and \\x85 break no line of Python source)."""
    expected = [0] + [index + 1 for index, char in enumerate(text)
                      if char == "\n" or (char == "\r" and text[index + 1:index + 2] != "\n")]
    assert line_starts(text) == expected
    if text.isascii():
        assert line_starts(text.encode()) == expected
