"""Parsing a new version of a document with the previous version's untouched statements (mhalint.parse.incremental):
the tree must be the one a full parse gives, edit after edit, and the findings the same; and positions and source
text taken from kept statements' generated code must be what libcst's own code generation gives."""

from __future__ import annotations

import ast
import textwrap
import warnings
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mhalint.context import ModuleContext
from mhalint.parse.incremental import Reparser
from mhalint.parse.positions import first_lines
from mhalint.rule import load_rules
from mhalint.run.engine import Checker, Result

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))

INSERTIONS = ["x = 1", "    y = 2", "# a comment", "    # an indented comment", "", "else:", "    pass",
              "def f():", "class C:", "@decorator", "if x:", "  z = 3", "s = '''", "'''", "\\", "x = (", ")",
              "import torch.nn as nn", "attn = nn.MultiheadAttention(64, 5)"]


def parse(reparser: Reparser, text: str) -> cst.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)  # `1x` after an edit: an invalid literal warns
            warnings.simplefilter("ignore", DeprecationWarning)  # and so does a `\ ` escape
            lines = first_lines(ast.parse(text))
    except (SyntaxError, ValueError):
        return None  # the engine reports it and never parses it with libcst
    try:
        return reparser.parse(text, lines)
    except cst.ParserSyntaxError:
        return None  # CPython accepts it and libcst does not: the engine reports MHA900


@st.composite
def edits(draw):
    """A few line edits: insert a line, delete one, or change a character in one."""
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["insert", "delete", "change", "append"]))
        steps.append((kind, draw(st.integers(0, 10_000)), draw(st.sampled_from(INSERTIONS))))
    return steps


def edited(text: str, kind: str, where: int, line: str) -> str:
    lines = text.split("\n")
    index = where % len(lines)
    if kind == "insert":
        lines.insert(index, line)
    elif kind == "delete" and len(lines) > 1:
        del lines[index]
    elif kind == "change":
        lines[index] = lines[index][:where % (len(lines[index]) + 1)] + "1" + lines[index][where % (
            len(lines[index]) + 1):]
    else:
        lines[index] += "  " + line.strip()
    return "\n".join(lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(example=st.sampled_from(EXAMPLES), steps=edits())
def test_every_version_is_the_tree_a_full_parse_gives(example, steps):
    text = example.read_text()
    reparser = Reparser()
    assert parse(reparser, text).deep_equals(cst.parse_module(text))
    for kind, where, line in steps:
        text = edited(text, kind, where, line)
        module = parse(reparser, text)
        if module is None:
            continue
        full = cst.parse_module(text)
        assert module.deep_equals(full) and module.code == full.code  # (libcst drops a lone `\` line)
        assert set(reparser.generated) == set(module.body)


def test_an_edit_inside_one_statement_keeps_the_others():
    text = (Path(__file__).resolve().parents[1] / "examples" / "mha006_mask_repeat_layout_bad.py").read_text()
    reparser = Reparser()
    module = parse(reparser, text)
    assert reparser.reused == 0
    statements = len(module.body)
    text = text.replace("self.num_heads, 1, 1)", "self.num_heads, 1, 1)  # tiled", 1)
    module = parse(reparser, text)
    assert reparser.reused == statements - 1 and module.deep_equals(cst.parse_module(text))


@pytest.mark.parametrize("text, then", [
    pytest.param("x = 1\ny = 2\nif x:\n    a = 1\nz = 3\n", "x = 1\ny = 2\nif x:\n    a = 1\nelse:\n    b = 2\nz = 3\n",
                 id="an else joins the statement before"),
    pytest.param("x = 1\ny = 2\ndef f():\n    pass\nz = 3\n", "x = 1\ny = 2\ndef f():\n    pass\n    # c\nz = 3\n",
                 id="an indented comment after a block"),
    pytest.param("x = 1\ny = 2\nz = 3\nif x:\n    a = 1\n", "x = 1\ny = 2\nif y:\n  b = 1\nz = 3\nif x:\n    a = 1\n",
                 id="a new first block with another indentation"),
    pytest.param("x = 1\ny = 2\nz = 3\n", "x = 1\ny = 2\nz = 3", id="the final line break removed"),
    pytest.param("x = 1\ny = 2\nif x:\n    a = 1\n", "x = 1\ny = 2\nif x:\n    a = 1\n    # c\n",
                 id="an indented comment at the end joins the last block"),
    pytest.param("x = 1\r\ny = 2\r\nz = 3\r\n", "x = 1\r\ny = 2\r\nw = 0\nz = 3\r\n",
                 id="a line ending of another kind"),
])
def test_seams_a_full_parse_would_see_otherwise_are_parsed_whole(text, then):
    reparser = Reparser()
    parse(reparser, text)
    module = parse(reparser, then)
    assert module.deep_equals(cst.parse_module(then)) and module.code == then


def test_findings_with_and_without_the_kept_tree_are_the_same():
    checker = Checker(list(load_rules().values()))
    reparser = Reparser()
    for example in EXAMPLES:
        text = example.read_text()
        if not checker.prefilter.matches(text.encode()):
            continue  # a fixed example no trigger reads (MHA020's fills with finfo.min): nothing is parsed to reuse
        checker.check_source(text.encode(), str(example), Result(), reuse=reparser)
        changed = text.replace("\n\n\n", "\n\n\n# an edit between two definitions\n", 1)
        with_reuse = checker.check_source(changed.encode(), str(example), Result(), reuse=reparser)
        assert reparser.reused > 0
        without = checker.check_source(changed.encode(), str(example), Result())
        assert [f.to_dict() for f in with_reuse] == [f.to_dict() for f in without]
        reparser = Reparser()


def test_positions_and_source_text_are_libcst_s():
    text = textwrap.dedent("""\
        import torch
        # a comment
        def f(x,  # why
              y):
            return (x  +
                    y)[0]

        @decorator
        class C:
            z = torch.ones(2, dtype=torch.bool)  # (L, S)
    """)
    module = cst.parse_module(text)
    context = ModuleContext(module, "t.py", text, first_lines(ast.parse(text)))
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(cst.metadata.PositionProvider)
    seen = 0
    for node, expected in positions.items():
        got = context.position(node)
        assert (got.start.line, got.start.column, got.end.line, got.end.column) == (
            expected.start.line, expected.start.column, expected.end.line, expected.end.column)
        assert context.code(node) == " ".join(module.code_for_node(node).split())
        seen += 1
    assert seen > 50
    assert context.comment(3) == "# why" and context.comment(10) == "# (L, S)" and context.comment(2) == "# a comment"
    assert context.comment(5) is None
