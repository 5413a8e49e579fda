"""mhalint/analysis/masks.py: the mask reader on small programs, one construction per test, both ways: it finds
the kind and convention where the construction shows them, and gives unknown (or a weak guess) where only a
name would. Each snippet passes the mask under test to `sink(...)`."""

from __future__ import annotations

import textwrap

import pytest

from mhalint.analysis.documented import stated_convention
from mhalint.analysis.mask_axes import CAUSAL, LIKELY, PER_SAMPLE, SHARED, SQUARE, UNKNOWN, MaskAxesReader
from mhalint.analysis.masks import ADDITIVE, BOOL, FLOAT, INTEGER, ZERO_ONE, MaskReader
from mhalint.context import ModuleContext
from mhalint.parse.lazy import cst
from mhalint.torchapi import IGNORE, KEEP

IMPORTS = "import torch\nimport torch.nn as nn\n"


def read(source: str):
    """What the reader finds for the argument of the last `sink(...)` call, with torch imported."""
    source = IMPORTS + textwrap.dedent(source)
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    call, scope = [(c, s) for c, s in ctx.calls() if isinstance(c.func, cst.Name) and c.func.value == "sink"][-1]
    return MaskReader(ctx).read(call.args[0].value, scope, call)


def meaning(source: str) -> tuple[str | None, str | None, bool] | None:
    found = read(source)
    return None if found is None else (found.kind, found.polarity, found.weak)


# ---- kinds ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("construction", ["(x > 0).float()", "x.gt(0).float()", "x.isnan().to(q.dtype)",
                                          "((x > 0) & (y > 0)).type_as(q)", "torch.logical_not(x).half()"])
def test_a_boolean_turned_into_floats_is_a_zero_one_mask_of_unknown_convention(construction):
    found = read(f"def f(q, x, y):\n    sink({construction})\n")
    assert (found.kind, found.polarity) == (ZERO_ONE, None)
    assert "into 0/1 floats" in found.evidence[-1]


def test_floats_of_an_unknown_tensor_are_not_a_mask():
    assert read("def f(q, x):\n    sink(x.float())\n") is None
    assert read("def f(q, x):\n    sink((~x).float())\n") is None  # `~` of an integer tensor is no boolean


def test_the_convention_of_the_boolean_carries_into_its_floats():
    assert meaning("def f(ids, pad_id):\n    m = ids != pad_id\n    sink(m.float())\n") == (ZERO_ONE, KEEP, False)
    assert meaning("def f(ids, pad_id):\n    sink(1 - (ids != pad_id).float())\n") == (ZERO_ONE, IGNORE, False)


def test_one_minus_a_zero_one_mask_of_unknown_convention_stays_zero_one():
    found = read("def f(x):\n    sink(1 - (x > 0).float())\n")
    assert (found.kind, found.polarity) == (ZERO_ONE, None) and "swaps the 0s and 1s" in found.evidence[-1]


def test_a_selection_name_turned_into_floats_is_a_weak_zero_one_mask():
    assert meaning("def f(keep):\n    sink(keep.float())\n") == (ZERO_ONE, None, True)
    assert read("def f(scale):\n    sink(scale.float())\n") is None


@pytest.mark.parametrize("writes, kind", [
    ("m[:, n:] = 0", ZERO_ONE), ("m.masked_fill_(pad, 0)", ZERO_ONE), ("m[i].fill_(1)", ZERO_ONE),
    ("m[:, n:] = float('-inf')", ADDITIVE), ("m.masked_fill_(pad, -1e9)", ADDITIVE),
])
def test_a_factory_written_in_place_takes_the_kind_of_what_is_written(writes, kind):
    found = read(f"def f(x, n, i, pad):\n    m = torch.ones(4, 6)\n    {writes}\n    sink(m)\n")
    assert found.kind == kind and found.evidence[0] == "`m = torch.ones(4, 6)` at line 4 is filled with 1"


def test_a_factory_written_in_place_at_module_level_takes_the_kind_of_what_is_written():
    found = read("m = torch.ones(4, 6)\nm.masked_fill_(pad, -1e9)\nsink(m)\n")
    assert found.kind == ADDITIVE


def test_writes_inside_a_nested_function_or_class_are_not_the_scopes_own():
    nested = ("def f(x):\n    m = torch.zeros(4, 6)\n    m[:, 2:] = 1\n    def g():\n        m.add_(x)\n"
              "    class C:\n        m.add_(x)\n    sink(m)\n")
    assert read(nested).kind == ZERO_ONE
    assert read(nested.replace("    def g():\n        m.add_(x)\n", "    m.add_(x)\n")) is None


@pytest.mark.parametrize("writes", ["m[:, n:] = x", "m += x", "m.add_(x)", "m[:, n:] = 0.5"])
def test_a_factory_written_with_computed_values_is_unknown(writes):
    assert read(f"def f(x, n):\n    m = torch.zeros(4, 6)\n    {writes}\n    sink(m)\n") is None


def test_a_factory_with_an_integer_or_boolean_dtype_keeps_that_kind():
    assert read("def f(L):\n    sink(torch.ones(L, L, dtype=torch.long).triu(1))\n").kind == INTEGER
    assert meaning("def f(L):\n    sink(torch.ones(L, L, dtype=torch.bool).triu(1))\n") == (BOOL, IGNORE, False)
    assert read("def f(n):\n    m = torch.zeros(4, 6, dtype=torch.bool)\n    m[:, n:] = 1\n    sink(m)\n").kind == BOOL


# ---- conventions guessed from a name ----------------------------------------------------------------------------
def test_a_name_gives_a_weak_convention_and_the_construction_keeps_its_kind():
    found = read("def f(x):\n    key_padding_mask = (x > 0).float()\n    sink(key_padding_mask)\n")
    assert (found.kind, found.polarity, found.weak) == (ZERO_ONE, IGNORE, True)
    assert meaning("def f(x):\n    key_padding_mask = x > 0\n    sink(key_padding_mask)\n") == (BOOL, IGNORE, True)


def test_an_additive_mask_takes_no_convention_from_its_name():
    found = read("def f(x):\n    key_padding_mask = x.masked_fill(x > 0, float('-inf'))\n    sink(key_padding_mask)\n")
    assert (found.kind, found.polarity) == (ADDITIVE, None)


# ---- axes: a batch axis, and the query x key pair ----------------------------------------------------------------
def axes(source: str):
    source = IMPORTS + textwrap.dedent(source)
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    call, scope = [(c, s) for c, s in ctx.calls() if isinstance(c.func, cst.Name) and c.func.value == "sink"][-1]
    return MaskAxesReader(ctx).read(call.args[0].value, scope, call)


@pytest.mark.parametrize("construction", ["torch.triu(x, diagonal=1)", "x.tril()", "torch.ones(L, L).triu(1)",
                                          "nn.Transformer.generate_square_subsequent_mask(L)"])
def test_a_triangle_shows_query_and_key_axes(construction):
    found = axes(f"def f(x, L):\n    sink({construction})\n")
    assert found.pair == (CAUSAL, 4) and found.evidence[-1].endswith(f"at line 4 is {CAUSAL}")


def test_a_square_factory_is_a_pair_and_an_oblong_one_only_shared():
    found = axes("def f(L):\n    sink(torch.zeros(L, L))\n")
    assert (found.samples, found.pair) == (SHARED, (SQUARE, 4))
    found = axes("def f(B, L):\n    sink(torch.zeros(B, L))\n")
    assert (found.samples, found.pair) == (SHARED, None)


def test_a_batch_axis_needs_provenance_and_a_name_makes_it_only_likely():
    established = axes("def f(x):\n    B, L, _ = x.shape\n    sink(torch.zeros(B, L, L, dtype=torch.bool))\n")
    assert established.samples == PER_SAMPLE and "first dimension is the batch" in established.evidence[0]
    assert axes("def f(bsz, L):\n    sink(torch.zeros(bsz, L, L))\n").samples == LIKELY
    assert axes("def f(ids, pad_id):\n    pad = ids == pad_id\n    sink(pad)\n").samples == LIKELY
    assert axes("def f(n, L):\n    sink(torch.zeros(n, L, L))\n").samples == UNKNOWN


def test_a_per_sample_mask_combined_with_a_causal_one_keeps_both():
    found = axes("def f(pad, L):\n    causal = torch.ones(L, L, dtype=torch.bool).triu(1)\n"
                 "    sink(causal[None] | pad[:, None, :])\n")
    assert found.samples == LIKELY and found.pair == (CAUSAL, 4)


def test_callers_that_pass_different_constructions_give_no_pair():
    source = "def g(x, m):\n    sink(m)\n\ndef run(x, L, other):\n    g(x, torch.triu(x, 1))\n    g(x, {})\n"
    assert axes(source.format("torch.triu(x, 1)")).pair == (CAUSAL, 7)
    assert axes(source.format("other")).pair is None


def test_an_attribute_set_once_is_followed_and_says_where():
    found = axes("class M(nn.Module):\n    def __init__(self, L):\n        super().__init__()\n"
                 "        self.future = torch.ones(L, L).triu(1)\n    def forward(self, x):\n"
                 "        sink(self.future)\n")
    assert found.pair == (CAUSAL, 6) and found.evidence[0] == "`self.future` is set at line 6"


# ---- conventions stated in words (analysis/documented.py) --------------------------------------------------------
@pytest.mark.parametrize("text, keeps", [
    ("- 1 for tokens that are **not masked**,\n- 0 for tokens that are **masked**.", True),
    ("For a binary mask, a ``True`` value indicates that the corresponding ``key`` value will be ignored.", False),
    ("(B, S) bool, True = attend", True),
    ("True at padding positions", False),
    ("1 for real tokens, 0 for padding", True),
    ("`False` marks positions that may not be attended", True),
])
def test_a_stated_convention_is_read(text, keeps):
    assert stated_convention(text.splitlines())[0] is keeps


@pytest.mark.parametrize("text", ["shape (N, 1) for padding", "1 for real tokens and 1 for padding",
                                  "Mask values selected in [0, 1]", "the mask, True or False"])
def test_no_convention_is_read_from_a_shape_a_contradiction_or_no_statement(text):
    assert stated_convention(text.splitlines()) is None


@pytest.mark.parametrize(("factory", "kind"), [("torch.ones(N, S)", ZERO_ONE), ("torch.zeros(N, S)", FLOAT),
                                              ("torch.zeros(N, S, dtype=torch.half)", FLOAT)])
def test_a_bare_float_factory_named_as_a_mask_stays_a_float_with_no_convention(factory, kind):
    """`torch.ones(N, S)` adds 1 everywhere: nothing shows it is a 0/1 mask until entries are set, so MHA008
    (which needs a construction) says nothing; and its dtype is float, so a name cannot give it a boolean
    convention either (issue 34: MHA002's `~` of it raised TypeError)."""
    found = read(f"def f(N, S):\n    key_padding_mask = {factory}\n    sink(key_padding_mask)\n")
    assert (found.kind, found.polarity, found.evidence) == (kind, None, ())
    assert read("def f(N, S):\n    key_padding_mask = torch.zeros(N, S, dtype=torch.bool)\n"
                "    sink(key_padding_mask)\n").kind == BOOL
