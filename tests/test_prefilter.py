"""The prefilter: literal anchors read from trigger patterns, and matches in code only (not in prose)."""

from __future__ import annotations

import ast
import io
import re
import tokenize

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mhalint import torchapi
from mhalint.run.prefilter import Prefilter, anchors_of

ALL_TRIGGERS = (torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER, torchapi.SDPA_TRIGGER,
                torchapi.MHA_FORWARD_FN_TRIGGER)


@pytest.mark.parametrize("pattern, anchors", [
    (torchapi.MHA_TRIGGER, ["MultiheadAttention"]),
    (torchapi.TRANSFORMER_TRIGGER, ["Transformer"] * 5),
    ("softmax", ["softmax"]),
    (r"a{2,3}bc", ["bc"]),  # the digits of a repeat count are not literal text
    (r"ab?c", ["a"]),  # the character before a quantifier may be absent
    (r"[abc]xyz", ["xyz"]),
    (r"(?:foo)", ["foo"]),
    (r"(?:a|b)cd", ["cd"]),
    (r"(?i)foo", None),  # case-insensitive: a literal search would miss FOO
    (r"foo|\d+", None),  # the second alternative has no literal
    (r"\x41bc", None),  # an escape the reader does not decode
])
def test_anchors_are_literals_every_match_contains(pattern, anchors):
    assert anchors_of(pattern) == anchors


@pytest.mark.parametrize("source, expected", [
    ("attn = nn.MultiheadAttention(8, 2)\n", True),
    ("# nn.MultiheadAttention(8, 2)\n", False),
    ('"""A DETR model (an encoder-decoder Transformer)."""\n', False),
    ("def f():\n    '''Calls\n    F.scaled_dot_product_attention(q, k, v).\n    '''\n", False),
    ("name = 'nn.MultiheadAttention'\n", False),
    ('text = f"{nn.MultiheadAttention(8, 2)}"\n', True),  # a replacement field is code
    ('raise ValueError(f"{name} needs F.scaled_dot_product_attention")\n', False),  # the text around it is not
    ('text = f"""{x}\n{nn.MultiheadAttention(8, 2)}"""\n', True),
    ('text = f"{{{nn.MultiheadAttention(8, 2)}}}"\n', True),  # a field between literal braces
    ('text = f"{{nn.MultiheadAttention}}"\n', False),  # literal braces
    ("text = f\"{d['}']} nn.MultiheadAttention\"\n", True),  # a quote in a field: braces unknown, parsed
    ('text = rb"{x} nn.MultiheadAttention"\n', False),  # bytes, not an f-string
    ('text = f"} {nn.MultiheadAttention(8, 2)"\n', True),  # a lone `}`: not Python, parsed to say so
    ("x = 1  # MultiheadAttention\ny = nn.MultiheadAttention(8, 2)\n", True),
    ("x = 'it''s'  # a comment\rmha = nn.MultiheadAttention(8, 2)\r", True),  # CR-only line breaks
    ('s = "unterminated\nmha = nn.MultiheadAttention(8, 2)\n', True),  # a string the lexer cannot close
    ("a = '#'; mha = nn.MultiheadAttention(8, 2)\n", True),  # a `#` inside a string starts no comment
    ("nothing to see here\n", False),
])
def test_a_trigger_counts_only_in_code(source, expected):
    assert Prefilter(ALL_TRIGGERS).matches(source.encode()) is expected


def test_a_pattern_without_anchor_searches_every_line():
    prefilter = Prefilter([r"[0-9]{3}[a-z]+"])
    assert prefilter.anchors is None
    assert prefilter.matches(b"x = 1\ny = f(123attention)\n")
    assert not prefilter.matches(b"x = 1\n# 123attention\n")


@pytest.mark.parametrize("source, expected", [
    (b"y = call(x, 5)\n", True),
    (b"y = call(\n    x,\n    5)\n", True),  # the call continues on the next lines
    (b"y = call(\r\n    x, 5)\r\n", True),
    (b"y = call(\n\n\n\n\n    x, 5)\n", False),  # past the four lines searched after the call's line
    (b"y = call(x)\nz = (\n    1, 5)\n", False),  # the call's bracket closes on its line: no continuation
    (b"y = [call(\n    x, 5)]\n", True),
])
def test_a_match_may_continue_over_the_lines_of_a_bracket_its_line_opens(source, expected):
    assert Prefilter([r"\bcall\((?:[^()])*,\s*5\b"]).matches(source) is expected


def test_continued_stretches_that_overlap_are_searched_once():
    prefilter = Prefilter([r"\bcall\("])
    source = b"a = call(\n    call(\n        1))\n"
    assert [match.start() for match in prefilter.code_matches(source)] == [4, 14]


def test_no_patterns_match_nothing():
    assert not Prefilter([]).matches(b"nn.MultiheadAttention(8, 2)\n")


# Statements mixing code, comments, strings and docstrings that name the APIs; any sequence of them is valid Python.
_STATEMENTS = [
    "mha = nn.MultiheadAttention(8, 2)",
    "out = F.scaled_dot_product_attention(q, k, v)",
    "layer = nn.TransformerEncoderLayer(8, 2)",
    "x = 1  # nn.MultiheadAttention is seq-first",
    "# F.scaled_dot_product_attention flips the mask",
    '"""A Transformer (encoder-decoder) model.\n\nUses nn.MultiheadAttention.\n"""',
    "'''it's a scaled_dot_product_attention wrapper'''",
    "name = 'MultiheadAttention'",
    'doc = "an \\"escaped\\" TransformerDecoder"',
    "r = rb'\\'MultiheadAttention'",
    'msg = f"{nn.MultiheadAttention(8, 2)}"',
    'raise ValueError(f"{name} needs F.scaled_dot_product_attention")',
    'msg = f"{{nn.MultiheadAttention}} {x:>{width}}"',
    'msg = f"{x} {{ {nn.MultiheadAttention(8, 2)} }}"',
    "total = a + b",
    "s = '#' + \"'\"",
]


def _reference(source: str, regex: re.Pattern[str]) -> bool:
    """What Python's own tokenizer and parser say: a match that starts outside comments and strings, or in an
    expression of an f-string's replacement field."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    prose, fields = [], []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            prose.append((offsets[token.start[0] - 1] + token.start[1], offsets[token.end[0] - 1] + token.end[1]))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FormattedValue):
            fields.append((offsets[node.value.lineno - 1] + node.value.col_offset,
                           offsets[node.value.end_lineno - 1] + node.value.end_col_offset))
    return any(any(start <= match.start() < end for start, end in fields)
               or not any(start <= match.start() < end for start, end in prose) for match in regex.finditer(source))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_STATEMENTS), max_size=8))
def test_agrees_with_pythons_tokenizer(statements):
    source = "\n".join(statements) + "\n"
    prefilter = Prefilter(ALL_TRIGGERS)
    regex = re.compile(prefilter.regex.pattern.decode())
    assert prefilter.matches(source.encode()) is _reference(source, regex)


@pytest.mark.parametrize("source, passed_only", [
    ("out = wrapper_set_seed(torch.nn.functional.scaled_dot_product_attention, q, k)\n", True),
    ("ok = isinstance(m, nn.MultiheadAttention)\n", True),
    ("table = {F.scaled_dot_product_attention: 1, 'x': [nn.TransformerEncoderLayer]}\n", True),
    ("same = fn is F.scaled_dot_product_attention\n", True),
    ("f(*[nn.MultiheadAttention], key=nn.MultiheadAttention.forward)\n", True),
    ("out = F.scaled_dot_product_attention(q, k, v)\n", False),  # a call
    ("layers = [nn.TransformerEncoderLayer(8, 2)]\n", False),  # a construction inside a list is still a call
    ("from torch.nn import MultiheadAttention\n", False),
    ("MHA = nn.MultiheadAttention\n", False),  # an alias
    ("class A(nn.MultiheadAttention):\n    pass\n", False),  # a base class
    ("def f(attn_cls=nn.MultiheadAttention):\n    return attn_cls(8, 2)\n", False),  # a default
    ("def f(m: nn.MultiheadAttention):\n    pass\n", False),  # an annotation
    ("isinstance(m, nn.MultiheadAttention)\nmha = nn.MultiheadAttention(8, 2)\n", False),  # one use is enough
    ('x = "é"; ok = isinstance(m, nn.MultiheadAttention)\r\n', True),  # ast columns count UTF-8 bytes
    ("Attn = partial(nn.MultiheadAttention, batch_first=True)\n", False),  # a constructor, followed
    ("Attn = functools.partial(nn.TransformerEncoderLayer, 64)\n", False),
    ("f = partial(run, nn.MultiheadAttention)\n", True),  # not the partial's callable: a value
    # a table of classes indexed or named: mhalint reads its values (issue 35 item 6), not its keys
    ('attn = {"a": A, "mha": nn.MultiheadAttention}[kind](8, 2)\n', False),
    ('ATTENTION = {"a": A, "mha": nn.MultiheadAttention}\n', False),
    ("use({nn.MultiheadAttention: 1})\n", True),
])
def test_names_only_passed_as_values(source, passed_only):
    prefilter = Prefilter(ALL_TRIGGERS)
    assert prefilter.only_passed_as_values(source.encode(), ast.parse(source)) is passed_only


def test_the_engine_skips_passed_values_only_when_no_enabled_rule_acts_on_them():
    from mhalint.parse.lazy import cst
    from mhalint.rule import Rule
    from mhalint.run.engine import Checker

    class PassedSdpa(Rule):
        code, name, summary, triggers = "XYZ201", "passed-sdpa", "sdpa passed as a value", (torchapi.SDPA_TRIGGER,)

        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value == "scaled_dot_product_attention":
                self.report(node, "sdpa passed as a value")

    source = b"import torch.nn.functional as F\napply(F.scaled_dot_product_attention, q)\n"
    assert [f.code for f in Checker([PassedSdpa]).check_source(source, "x.py")] == ["XYZ201"]
    PassedSdpa.acts_on_passed_values = False
    assert Checker([PassedSdpa]).check_source(source, "x.py") == []


@pytest.mark.parametrize("source, expected", [
    # the project's own names: what it defines, or reads off self
    ("def scaled_dot_product_attention(q, k, v):\n    return q\n", False),
    ("class MultiheadAttention(nn.Module):\n    pass\n", False),
    ("class Transformer(nn.Module):\n    pass\n", False),
    ("class TransformerEncoderLayer(Module):\n    pass\n", False),
    ("class A:\n    def create_mask(self, n):\n        return n\n"
     "    def f(self):\n        return self.create_mask(3)\n", False),
    # torch.fx's graph Transformer, and flex_attention as the module on the way to another name
    ("class Graph(torch.fx.Transformer):\n    pass\n", False),
    ("from torch.nn.attention.flex_attention import BlockMask\n", False),
    ("mask_mod = torch.nn.attention.flex_attention.noop_mask\n", False),
    # torch's names, however they are reached
    ("class Mine(nn.MultiheadAttention):\n    pass\n", True),
    ("nn.MultiheadAttention.__init__(self, 8, 2)\n", True),
    ("self.sdpa = F.scaled_dot_product_attention\n", True),
    ("layer = nn.Transformer(d_model=8)\n", True),
    ("from torch.nn.attention.flex_attention import and_masks\n", True),
    ("from torch.nn.attention.flex_attention import (\n    BlockMask,\n    create_block_mask,\n)\n", True),
    ("from torch.nn.attention import flex_attention\n", True),
    ("import torch.nn.attention.flex_attention as fa\n", True),
    ("out = fa.flex_attention(q, k, v, score_mod=mod)\n", True),
    ("def  scaled_dot_product_attention(q):\n    return q\n", True),  # an unusual spacing: parsed, to be safe
])
def test_a_name_the_project_defines_is_not_torchs(source, expected):
    from mhalint.rule import load_rules
    from mhalint.run.engine import Checker

    assert Checker(list(load_rules().values())).prefilter.matches(source.encode()) is expected


_FIELD_PARTS = st.sampled_from([
    "x", "d['}']", 'd["{"]', "f(a, b)", "x!r", "x:>{width}", "x:{w}.{p}f", "{1: 2}[1]", "'{'", "y if z else w",
    "nn.MultiheadAttention(8, 2)", "F.scaled_dot_product_attention(q, k, v)",
    "d['}'] or nn.MultiheadAttention(8, 2)", "(g('{') or F.scaled_dot_product_attention)(q)",
])
_TEXT_PARTS = st.sampled_from([
    "text ", "{{", "}}", "{{x}}", " nn.MultiheadAttention ", "F.scaled_dot_product_attention", " 'quoted' ", "#",
])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_TEXT_PARTS, _FIELD_PARTS.map(lambda field: "{" + field + "}")), max_size=6),
       st.sampled_from(['f"', "f'''", 'rf"', "F'"]))
def test_a_trigger_in_a_replacement_field_is_never_taken_for_prose(parts, opening):
    """Whatever the f-string, a trigger that Python reads as code (in a field's expression) makes the file worth
    parsing; the prefilter may also count text around the fields as code where a quote in a field hides the
    braces, never the other way round."""
    closing = opening.lstrip("rfF")
    body = "".join(parts)
    if closing[0] in body and len(closing) == 1 or "\\" in body:
        return  # the quote would end the string: not this test's subject
    source = f"msg = {opening}{body}{closing}\n"
    try:
        ast.parse(source)
    except SyntaxError:
        return
    prefilter = Prefilter(ALL_TRIGGERS)
    regex = re.compile(prefilter.regex.pattern.decode())
    if _reference(source, regex):
        assert prefilter.matches(source.encode()), source
