"""mhalint/analysis/dataflow.py: which assignments of a name reach a read, with branches, loops, `try`, `with`,
`match`, early exits and closures. Each snippet reads `x` in `sink(x)`; the test lists the values that may reach
it (`param` for the parameter)."""

from __future__ import annotations

import textwrap

import pytest

from mhalint.analysis.dataflow import reaching, reaching_one
from mhalint.context import ModuleContext
from mhalint.parse.lazy import cst


def reached(body: str, name: str = "x") -> list[str]:
    source = "def f(x, c, d, items):\n" + textwrap.indent(textwrap.dedent(body), "    ")
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    call, scope = [(c, s) for c, s in ctx.calls() if isinstance(c.func, cst.Name) and c.func.value == "sink"][-1]
    found = reaching(ctx, ctx.bindings(name, scope), call)
    return ["param" if b.kind == "param" else ctx.code(b.value) if b.value is not None else b.kind for b in found]


@pytest.mark.parametrize(("body", "expected"), [
    pytest.param("sink(x)", ["param"], id="parameter"),
    pytest.param("x = 1\nx = 2\nsink(x)", ["2"], id="straight-line"),
    pytest.param("if c:\n    x = 1\nelse:\n    x = 2\nsink(x)", ["1", "2"], id="if-else"),
    pytest.param("if c:\n    x = 1\nsink(x)", ["param", "1"], id="if-without-else"),
    pytest.param("if c:\n    x = 1\nelif d:\n    x = 2\nsink(x)", ["param", "1", "2"], id="elif"),
    pytest.param("if c:\n    x = 1\nelif d:\n    x = 2\nelse:\n    x = 3\nsink(x)", ["1", "2", "3"], id="elif-else"),
    pytest.param("if c:\n    x = 1\n    sink(x)\nx = 2", ["1"], id="inside-the-branch"),
    pytest.param("if c:\n    x = 1\nelse:\n    return\nsink(x)", ["1"], id="early-return"),
    pytest.param("if c:\n    raise ValueError\nx = 2\nsink(x)", ["2"], id="raise"),
    pytest.param("x = 0\nfor i in items:\n    x = i\nsink(x)", ["0", "i"], id="loop-may-not-run"),
    pytest.param("x = 0\nfor i in items:\n    sink(x)\n    x = i", ["0", "i"], id="back-edge"),
    pytest.param("for x in items:\n    pass\nsink(x)", ["param", "items"], id="for-target"),
    pytest.param("while c:\n    x = 1\n    break\nsink(x)", ["param", "1"], id="break"),
    pytest.param("x = 0\nwhile c:\n    if d:\n        x = 1\n        continue\n    sink(x)", ["0", "1"],
                 id="continue"),
    pytest.param("for i in items:\n    x = i\nelse:\n    x = 5\nsink(x)", ["5"], id="for-else"),
    pytest.param("try:\n    x = 1\nexcept ValueError:\n    pass\nsink(x)", ["param", "1"], id="try-except"),
    pytest.param("try:\n    x = 1\nexcept ValueError:\n    x = 2\nsink(x)", ["1", "2"], id="try-both"),
    pytest.param("try:\n    x = 1\nfinally:\n    x = 3\nsink(x)", ["3"], id="finally"),
    pytest.param("with open(c) as x:\n    pass\nsink(x)", ["open(c)"], id="with"),
    pytest.param("match c:\n    case 1:\n        x = 1\n    case _:\n        x = 2\nsink(x)", ["param", "1", "2"],
                 id="match"),
    pytest.param("x = 1\nx += 2\nsink(x)", ["augmented"], id="augmented"),
    pytest.param("x, y = c\nsink(x)", ["c"], id="unpacking"),
    pytest.param("x = 1\ndef g():\n    sink(x)\nx = 2", ["2"], id="closure-sees-the-end"),
    pytest.param("x = 1\nreturn\nsink(x)", [], id="unreachable"),
    # a None test: on the path where x is None, no binding of x holds a value
    pytest.param("if x is not None:\n    x = x.float()\nsink(x)", ["x.float()"], id="is-not-None-rebinds"),
    pytest.param("if x is None:\n    pass\nelse:\n    x = 1\nsink(x)", ["1"], id="is-None-else-rebinds"),
    pytest.param("if x is None:\n    x = 0\nsink(x)", ["param", "0"], id="is-None-default"),
    pytest.param("if x is not None and c:\n    x = 1\nsink(x)", ["param", "1"], id="a-compound-test-says-nothing"),
    pytest.param("if x is not None:\n    x = 1\nelif c:\n    x = 2\nsink(x)", ["1", "2"], id="elif-on-the-None-path"),
])
def test_what_reaches_the_read(body, expected):
    assert reached(body) == expected


def test_reaching_one_refuses_to_pick_between_branches():
    source = "def f(c):\n    if c:\n        x = 1\n    else:\n        x = 2\n    sink(x)\n    x = 3\n    sink(x)\n"
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    first, second = [(c, s) for c, s in ctx.calls() if ctx.code(c.func) == "sink"]
    bindings = ctx.bindings("x", first[1])
    assert reaching_one(ctx, bindings, first[0]) is None
    assert ctx.code(reaching_one(ctx, bindings, second[0]).value) == "3"


def test_a_module_constant_read_in_a_function_is_its_last_value():
    source = "LIMIT = 1\ndef f():\n    sink(LIMIT)\nLIMIT = 2\n"
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    [(call, scope)] = [(c, s) for c, s in ctx.calls() if ctx.code(c.func) == "sink"]
    assert [ctx.code(b.value) for b in reaching(ctx, ctx.bindings("LIMIT", scope), call)] == ["2"]


# ---- following a value forward (analysis/forward.py) -----------------------------------------------------------
def test_a_value_is_followed_forward_through_names_attributes_returns_and_project_calls():
    from mhalint.analysis.forward import Follower

    source = textwrap.dedent("""\
        import torch.nn as nn

        def build(x):
            m = x.repeat(4, 1, 1)
            return m.to(x.device)

        class Block(nn.Module):
            def __init__(self, x):
                super().__init__()
                self.mask = build(x)

            def forward(self, y):
                return self.run(y, self.mask)

            def run(self, y, mask):
                return sink(y, attn_mask=~mask)
    """)
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    repeat, scope = next((c, s) for c, s in ctx.calls()
                         if isinstance(c.func, cst.Attribute) and c.func.attr.value == "repeat")
    found = Follower(ctx, lambda arrival: [arrival] if ctx.code(arrival.call.func) == "sink" else None).follow(
        repeat, scope)
    [arrival] = found
    assert arrival.arg.keyword.value == "attn_mask" and ctx.line(arrival.call) == 16
    assert arrival.route[0] == "assigned to `m` at line 4"
    assert any("returned by `build()`" in step for step in arrival.route)
    assert any("parameter `mask` of `Block.run()`" in step for step in arrival.route)
    # `self.run(...)` takes it first: the path ends there
    assert Follower(ctx, lambda arrival: []).follow(repeat, scope) == []
