"""One name, several classes (issue 35 item 6): a call is paired only with the classes that can reach it.

`self.attn = A(...) if kind == "a" else nn.MultiheadAttention(...)` and its spellings (if/else statements, a class
chosen into a variable, a dict of classes) paired with calls under tests of the same flag, `isinstance` guards and
early returns. No error comes from a call that runs only for another class, a call that may run either gives at
most a warning, and a fix is offered only where the constructor's class is certain.
"""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from mhalint.analysis import branches
from mhalint.cli.main import main
from mhalint.context import ModuleContext
from mhalint.finding import Severity
from mhalint.fixes import applicable, fix_source
from mhalint.parse.lazy import cst
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

CLASS_A = """\
import torch.nn as nn

class A(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)

"""

# How the block chooses its attention (the MHA is built at the last line of each).
CHOICES = {
    "conditional-expression": """\
    self.attn = A(dim, heads) if kind == "a" else nn.MultiheadAttention(dim, heads)""",
    "if-else-statement": """\
    if kind == "a":
        self.attn = A(dim, heads)
    else:
        self.attn = nn.MultiheadAttention(dim, heads)""",
    "class-in-a-variable": """\
    if kind == "a":
        cls = A
    else:
        cls = nn.MultiheadAttention
    self.attn = cls(dim, heads)""",
    "dict-of-classes": """\
    self.attn = {"a": A, "mha": nn.MultiheadAttention}[kind](dim, heads)""",
    "named-dict-of-classes": """\
    classes = {"a": A, "mha": nn.MultiheadAttention}
    self.attn = classes[kind](dim, heads)""",
}
CERTAIN = {"conditional-expression": True, "if-else-statement": True, "class-in-a-variable": False,
           "dict-of-classes": False, "named-dict-of-classes": False}

# The forward: `{a}` is what A gets, `{mha}` what the MultiheadAttention gets, each under its own test.
GUARDS = {
    "same-flag": """\
    if self.kind == "a":
        return self.attn({a})
    else:
        return self.attn({mha}, {mha}, {mha}, need_weights=False)[0]""",
    "negated-flag-and-early-return": """\
    if self.kind != "a":
        return self.attn({mha}, {mha}, {mha}, need_weights=False)[0]
    return self.attn({a})""",
    "isinstance": """\
    if isinstance(self.attn, A):
        return self.attn({a})
    return self.attn({mha}, {mha}, {mha}, need_weights=False)[0]""",
}
BATCH_FIRST, SEQ_FIRST = "x", "x.transpose(0, 1)"


def block(choice: str, forward: str) -> str:
    init = textwrap.indent(textwrap.dedent(CHOICES[choice]), " " * 8)
    body = textwrap.indent(textwrap.dedent(forward), " " * 8)
    return (CLASS_A + "class Block(nn.Module):\n    def __init__(self, dim, heads, kind=\"a\"):\n"
            "        super().__init__()\n        self.kind = kind\n" + init + "\n\n    def forward(self, x):\n"
            "        B, N, C = x.shape\n" + body + "\n")


def mha001(source: str, min_severity=Severity.INFO):
    found = Checker([load_rules()["MHA001"]]).check_source(source.encode(), "snippet.py")
    return [f for f in found if f.severity >= min_severity]


def mha_line(source: str) -> int:
    """The last constructor call of the choice: the MHA's, or the one whose class is chosen."""
    return [i for i, line in enumerate(source.splitlines(), 1) if "(dim, heads)" in line][-1]


@pytest.mark.parametrize("guard", GUARDS)
@pytest.mark.parametrize("choice", CHOICES)
def test_batch_first_data_for_the_mha_is_an_error_fixed_only_where_the_class_is_certain(choice, guard):
    source = block(choice, GUARDS[guard].format(a=SEQ_FIRST, mha=BATCH_FIRST))
    found = mha001(source)
    assert [(f.line, f.severity) for f in found] == [(mha_line(source), Severity.ERROR)]
    assert "gets batch-first data (`B, N, C = x.shape`" in found[0].message
    assert (found[0].fix is not None) == CERTAIN[choice]
    if not CERTAIN[choice]:
        assert any("may also build another class: no fix" in sentence for sentence in found[0].evidence)


@pytest.mark.parametrize("guard", GUARDS)
@pytest.mark.parametrize("choice", CHOICES)
def test_a_call_that_runs_only_for_the_other_class_is_no_evidence(choice, guard):
    """The twin: A gets the batch-first data, the MHA the sequence-first data it reads: an info, no error."""
    found = mha001(block(choice, GUARDS[guard].format(a=BATCH_FIRST, mha=SEQ_FIRST)))
    assert [(f.severity, f.fix) for f in found] == [(Severity.INFO, None)]
    assert "implicitly right for sequence-first data" in found[0].message


@pytest.mark.parametrize("choice", CHOICES)
def test_a_call_that_may_run_either_class_gives_at_most_a_warning_and_no_fix(choice):
    source = block(choice, "return self.attn(x, x, x, need_weights=False)[0]")
    found = mha001(source)
    assert [(f.severity, f.fix) for f in found] == [(Severity.WARNING, None)]
    assert any("`self.attn` may hold A at this call" in sentence for sentence in found[0].evidence)


def test_tests_that_cannot_be_compared_keep_every_class_possible():
    """`if self.other:` says nothing about `kind`: the call may run either class."""
    source = block("conditional-expression", "if self.training:\n    return self.attn(x, x, x)[0]\nreturn x")
    assert [f.severity for f in mha001(source)] == [Severity.WARNING]


@pytest.mark.parametrize(("data", "severity"), [(BATCH_FIRST, Severity.ERROR), (SEQ_FIRST, Severity.INFO)])
def test_a_module_removed_by_binding_none_leaves_the_calls_to_the_others(data, severity):
    """`self.attn = None` elsewhere (a placeholder, a method that removes the module): calling None raises, so a
    call that runs is a call of a module; the MHA's calls still decide it."""
    source = block("if-else-statement", GUARDS["same-flag"].format(a=SEQ_FIRST, mha=data)) + (
        "\n    def remove_attention(self):\n        self.attn = None\n")
    assert [f.severity for f in mha001(source)] == [severity]


def test_a_name_bound_only_to_none_and_a_class_it_may_hold_is_still_undecided_by_none():
    """None adds no module, but the other binding's class still may reach the call: at most a warning."""
    source = block("conditional-expression", "return self.attn(x, x, x, need_weights=False)[0]") + (
        "\n    def remove_attention(self):\n        self.attn = None\n")
    assert [f.severity for f in mha001(source)] == [Severity.WARNING]


OVERRIDDEN = """\
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, dim, heads, kind="mha"):
        super().__init__()
        self.kind = kind
        self.attn = nn.MultiheadAttention(dim, heads)
        if kind == "a":
            self.attn = A(dim, heads)

    def forward(self, x):
        B, N, C = x.shape
{body}
"""


@pytest.mark.parametrize(("data", "severity"), [(BATCH_FIRST, Severity.ERROR), (SEQ_FIRST, Severity.INFO)])
def test_a_module_replaced_later_under_a_test_is_held_only_where_the_test_fails(data, severity):
    """The MHA built first and replaced by A where kind == "a": a call under kind != "a" runs the MHA only, one
    under kind == "a" runs A only."""
    body = textwrap.indent(textwrap.dedent(GUARDS["same-flag"].format(a=BATCH_FIRST, mha=data)), " " * 8)
    assert [f.severity for f in mha001(CLASS_A + OVERRIDDEN.format(body=body))] == [severity]


def test_a_call_under_no_test_may_run_the_module_or_its_replacement():
    body = "        return self.attn(x, x, x, need_weights=False)[0]"
    assert [f.severity for f in mha001(CLASS_A + OVERRIDDEN.format(body=body))] == [Severity.WARNING]


# ---- the flip-flop program of the issue: the fix converges ---------------------------------------------------------
FLIP_FLOP = block("class-in-a-variable", GUARDS["same-flag"].format(a="x", mha="x.permute(1, 0, 2)")).replace(
    ", need_weights=False", "")


def test_the_flip_flop_program_is_fixed_in_one_round_and_the_count_is_true(tmp_path):
    """It was an MHA001 error whose unsafe fix flipped batch_first=True/False on every round; now the MHA is
    paired only with the permuted call: no MHA001 fix, and MHA007's fix is the one finding fixed."""
    rules = list(load_rules().values())
    rounds = []

    def lint(text):
        rounds.append(text)
        return Checker(rules).check_source(text.encode(), "flip.py")

    fixed, count = fix_source(FLIP_FLOP, lint, unsafe=True)
    assert len(rounds) == 2 and not any(applicable(f, unsafe=True) for f in lint(fixed))
    assert "batch_first" not in fixed and count == 1
    path = tmp_path / "flip.py"
    path.write_text(FLIP_FLOP)
    result = CliRunner().invoke(main, ["check", "--fix", "--unsafe-fixes", "--no-cache", str(path)])
    assert "Fixed 1 finding." in result.output and path.read_text() == fixed


# ---- the conditions themselves ---------------------------------------------------------------------------------------
def conditions(source: str, *markers: str):
    """The guards of the first call whose code contains each marker."""
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    found = []
    for marker in markers:
        call, scope = next((c, s) for c, s in ctx.calls() if marker in ctx.code(c))
        found.append(branches.guards(ctx, call, scope))
    return found


@pytest.mark.parametrize(("first", "second", "excluded"), [
    ('kind == "a"', 'kind == "b"', True),
    ('kind == "a"', 'kind != "a"', True),
    ('kind in ("a", "b")', 'kind == "c"', True),
    ('kind in ("a", "b")', 'kind == "b"', False),
    ("use_mha", "not use_mha", True),
    ("use_mha and deep", "not use_mha", True),
    ("use_mha or deep", "not use_mha", False),
    ('kind == "a"', "deep", False),
    ('kind is None', 'kind == "a"', True),
])
def test_two_tests_of_one_subject_exclude_each_other_only_when_written_both_ways(first, second, excluded):
    source = f"def f(kind, use_mha, deep):\n    if {first}:\n        one()\n    if {second}:\n        two()\n"
    a, b = conditions(source, "one()", "two()")
    assert branches.excludes(a, b) is excluded


def test_else_elif_and_an_early_return_give_the_failed_tests():
    source = ('def f(kind):\n    if kind == "a":\n        return one()\n    elif kind == "b":\n        two()\n'
              '    else:\n        three()\n    four()\n')
    one, two, three, four = conditions(source, "one()", "two()", "three()", "four()")
    assert branches.excludes(one, two) and branches.excludes(one, three) and branches.excludes(two, three)
    assert branches.excludes(one, four) and not branches.excludes(two, four)


def test_an_attribute_that_stores_a_parameter_is_that_parameter():
    source = ('class B:\n    def __init__(self, kind):\n        self.kind = kind\n        if kind == "a":\n'
              '            one()\n    def forward(self):\n        if self.kind != "a":\n            two()\n')
    one, two = conditions(source, "one()", "two()")
    assert branches.excludes(one, two)
