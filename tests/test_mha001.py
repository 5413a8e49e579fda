"""MHA001 batch-first-default: MHA / Transformer layers built without batch_first, or with one resolving to False."""

from __future__ import annotations

import pytest

from mhalint.finding import Severity
from aliases import spellings

CODE = "MHA001"
MODULES = ("MultiheadAttention", "TransformerEncoderLayer", "TransformerDecoderLayer", "Transformer")


ALIASES = [pytest.param(imp, callee, id=callee if "Alias" not in callee else f"{cls}-as-Alias")
           for cls in MODULES for imp, callee in spellings(cls)]
HEAD_ARGS = {"Transformer": "64, 8"}  # every module takes (d_model/embed_dim, heads) first


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, CODE)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


# ---- aliases -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee"), ALIASES)
def test_every_alias_without_batch_first_is_flagged(check, imp, callee):
    found = check(f"{imp}\nattn = {callee}(64, 8)\n")
    assert [(f.line, f.column) for f in found] == [(2, 8)]
    assert found[0].severity == Severity.WARNING
    assert "without batch_first" in found[0].message


@pytest.mark.parametrize(("imp", "callee"), ALIASES)
def test_every_alias_with_batch_first_true_is_clean(check, imp, callee):
    assert check(f"{imp}\nattn = {callee}(64, 8, batch_first=True)\n") == []


@pytest.mark.parametrize(("imp", "callee"), ALIASES)
def test_every_alias_with_batch_first_from_a_false_constant_is_flagged(check, imp, callee):
    found = check(f"{imp}\nBF = False\nattn = {callee}(64, 8, batch_first=BF)\n")
    assert [f.line for f in found] == [3] and "resolves to False" in found[0].message


@pytest.mark.parametrize(("imp", "callee"), ALIASES)
def test_literal_batch_first_false_states_the_layout(check, imp, callee):
    assert check(f"{imp}\nattn = {callee}(64, 8, batch_first=False)\n") == []


def test_module_level_alias_of_the_class(check):
    found = check("import torch.nn as nn\nMHA = nn.MultiheadAttention\nattn = MHA(64, 8)\n")
    assert [f.line for f in found] == [3]


@pytest.mark.parametrize("cls", ["TransformerEncoder", "TransformerDecoder"])
def test_stacks_have_no_batch_first_of_their_own(check, cls):
    layer = cls + "Layer"
    assert check(f"import torch.nn as nn\nm = nn.{cls}(nn.{layer}(64, 8, batch_first=True), 2)\n") == []


# ---- positional batch_first (facts 9.2) ------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "flagged"), [
    # MHA: embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim, batch_first (9th)
    ("nn.MultiheadAttention(64, 8, 0.0, True, False, False, None, None, True)", False),
    ("nn.MultiheadAttention(64, 8, 0.0, True, False, False, None, None, False)", False),  # literal: stated
    ("nn.MultiheadAttention(64, 8, 0.0, True, False, False, None, None, BF)", True),
    ("nn.MultiheadAttention(64, 8, 0.0, True, False, False, None, None)", True),  # 8 positionals: no batch_first
    # layers: d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first (7th)
    ("nn.TransformerEncoderLayer(64, 8, 256, 0.1, 'relu', 1e-5, True)", False),
    ("nn.TransformerEncoderLayer(64, 8, 256, 0.1, 'relu', 1e-5, BF)", True),
    ("nn.TransformerDecoderLayer(64, 8, 256, 0.1, 'relu', 1e-5, True)", False),
    ("nn.TransformerDecoderLayer(64, 8, 256, 0.1, 'relu', 1e-5)", True),
    # Transformer: ..., custom_encoder, custom_decoder, layer_norm_eps, batch_first (11th)
    ("nn.Transformer(64, 8, 6, 6, 2048, 0.1, 'relu', None, None, 1e-5, True)", False),
    ("nn.Transformer(64, 8, 6, 6, 2048, 0.1, 'relu', None, None, 1e-5, BF)", True),
    ("nn.Transformer(64, 8, 6, 6, 2048, 0.1, 'relu', None, None, BF)", True),  # BF is layer_norm_eps here
    ("nn.Transformer(64, 8, 6, 6, 2048, 0.1, 'relu', None, None, 1e-5)", True),
])
def test_positional_batch_first(check, call, flagged):
    assert len(check(f"import torch.nn as nn\nBF = False\nm = {call}\n")) == (1 if flagged else 0)


def test_star_kwargs_may_carry_batch_first(check):
    assert check("import torch.nn as nn\ndef make(**kw):\n    return nn.MultiheadAttention(64, 8, **kw)\n") == []


# ---- resolved values -------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("source", "flagged"), [
    ("BF = False\nm = nn.MultiheadAttention(64, 8, batch_first=BF)\n", True),
    ("BF = True\nm = nn.MultiheadAttention(64, 8, batch_first=BF)\n", False),
    ("BF = False\nm = nn.MultiheadAttention(64, 8, batch_first=not BF)\n", False),
    ("BF = True\nm = nn.MultiheadAttention(64, 8, batch_first=not BF)\n", True),
    ("def make(bf=False):\n    return nn.TransformerEncoderLayer(64, 8, batch_first=bf)\n", True),
    ("def make(bf=True):\n    return nn.TransformerEncoderLayer(64, 8, batch_first=bf)\n", False),
    ("def make(bf):\n    return nn.TransformerEncoderLayer(64, 8, batch_first=bf)\n", False),  # unknown: silent
    ("class B(nn.Module):\n    BF = False\n    def __init__(self):\n"
     "        self.attn = nn.MultiheadAttention(64, 8, batch_first=self.BF)\n", True),
    ("class B(nn.Module):\n    def __init__(self, batch_first=False):\n        super().__init__()\n"
     "        self.attn = nn.MultiheadAttention(64, 8, batch_first=batch_first)\n", True),
])
def test_batch_first_resolved_through_constants_and_defaults(check, source, flagged):
    assert len(check("import torch.nn as nn\n" + source)) == (1 if flagged else 0)


def test_message_names_where_the_false_came_from(check):
    found = check("import torch.nn as nn\nBATCH_FIRST = False\nt = nn.Transformer(batch_first=BATCH_FIRST)\n")
    assert len(found) == 1
    assert "BATCH_FIRST" in found[0].message and "line 2" in found[0].message


# ---- subclasses ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("base_import", "base", "init", "flagged"), [
    ("import torch.nn as nn", "nn.MultiheadAttention", "super().__init__(64, 8)", True),
    ("import torch.nn as nn", "nn.MultiheadAttention", "super().__init__(64, 8, batch_first=True)", False),
    ("import torch.nn as nn", "nn.TransformerEncoderLayer", "super().__init__(64, 8)", True),
    ("import torch.nn as nn", "nn.TransformerDecoderLayer", "super().__init__(d_model=64, nhead=8)", True),
    ("import torch.nn as nn", "nn.Transformer", "super().__init__()", True),
    ("from torch.ao.nn.quantizable import MultiheadAttention", "MultiheadAttention", "super().__init__(64, 8)",
     True),
    ("import torch.nn as nn", "nn.MultiheadAttention", "nn.MultiheadAttention.__init__(self, 64, 8)", True),
    ("import torch.nn as nn", "nn.MultiheadAttention",
     "nn.MultiheadAttention.__init__(self, 64, 8, 0.0, True, False, False, None, None, True)", False),
    ("import torch.nn as nn", "nn.Module", "super().__init__()", False),
])
def test_super_init_in_subclass(check, base_import, base, init, flagged):
    source = f"{base_import}\nclass Attn({base}):\n    def __init__(self):\n        {init}\n"
    found = check(source)
    assert [(f.line, f.column) for f in found] == ([(4, 9)] if flagged else [])


# ---- decoys ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("source", [
    "class MultiheadAttention:\n    def __init__(self, d, h): ...\nattn = MultiheadAttention(64, 8)\n",
    "import torch\nclass TransformerEncoderLayer(torch.nn.Module):\n    pass\nlayer = TransformerEncoderLayer(64, 8)\n",
    "from .layers import MultiheadAttention\nattn = MultiheadAttention(64, 8)\n",
    "from .layers import TransformerEncoderLayer\nlayer = TransformerEncoderLayer(64, 8)\n",
    "from ..models import Transformer\nmodel = Transformer()\n",
    "from . import nn\nattn = nn.MultiheadAttention(64, 8)\n",
])
def test_project_classes_of_the_same_name_are_not_torch(check, source):
    assert check(source) == []


# ---- positions and noqa ----------------------------------------------------------------------------------------
def test_multi_line_call_is_reported_at_its_first_line_and_column(check):
    source = """\
        import torch.nn as nn
        x = 1
        attn = nn.MultiheadAttention(
            64,
            8,
        )
    """
    found = check(source)
    assert [(f.line, f.column, f.end_line) for f in found] == [(3, 8, 6)]


@pytest.mark.parametrize(("source", "position"), [
    ("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n", (2, 8)),
    ("import torch.nn as nn\ndef f():\n    return    nn.MultiheadAttention(64, 8)\n", (3, 15)),
    ("import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n"
     "        self.attn = nn.MultiheadAttention(64, 8)\n", (4, 21)),
    ("import torch\nm = [torch.nn.TransformerEncoderLayer(64, 8)]\n", (2, 6)),
])
def test_reported_position_is_the_call_start(check, source, position):
    assert [(f.line, f.column) for f in check(source)] == [position]


@pytest.mark.parametrize(("comment", "suppressed"), [
    ("# noqa", True),
    ("# NOQA", True),
    ("# noqa: MHA001", True),
    ("# noqa:MHA001", True),
    ("# noqa: MHA004, MHA001", True),
    ("# noqa: MHA004", False),
    ("# noqa: MHA0011", False),
    ("# a comment, no directive", False),
])
def test_noqa(check, comment, suppressed):
    found = check(f"import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)  {comment}\n")
    assert len(found) == (0 if suppressed else 1)


def test_noqa_must_be_on_the_reported_line(check):
    source = "import torch.nn as nn\nattn = nn.MultiheadAttention(\n    64, 8)  # noqa: MHA001\n"
    assert [f.line for f in check(source)] == [2]


def test_noqa_inside_a_string_is_not_a_directive(check):
    source = "import torch.nn as nn\nattn, s = nn.MultiheadAttention(64, 8), '# noqa'\n"
    assert [f.line for f in check(source)] == [2]
