"""MHA001 batch-first-default: MHA / Transformer layers built without batch_first, or with one resolving to False."""

from __future__ import annotations

import re

import pytest
from aliases import spellings

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, Severity
from mhalint.rule import load_rules

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
    assert found[0].message.endswith(" is built without batch_first: it reads (L, N, E), and `attn` is never called "
                                     "in this file")


@pytest.mark.parametrize(("imp", "callee"), ALIASES)
def test_every_alias_with_batch_first_true_is_clean(check, imp, callee):
    assert check(f"{imp}\nattn = {callee}(64, 8, batch_first=True)\n") == []


@pytest.mark.parametrize(("imp", "callee"), ALIASES)
def test_every_alias_with_batch_first_from_a_false_constant_is_flagged(check, imp, callee):
    found = check(f"{imp}\nBF = False\nattn = {callee}(64, 8, batch_first=BF)\n")
    assert [f.line for f in found] == [3] and " gets batch_first=BF (`BF` = False at line 2): " in found[0].message
    assert found[0].evidence == ("batch_first=BF at line 3 resolves to False", "`BF` = False at line 2",
                                 "`attn` is only built: nothing in this file calls it")


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


# ---- positional batch_first (docs/torch-facts.md#positional-order) ---------------------------------------------------
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
    assert found[0].message == ("nn.Transformer gets batch_first=BATCH_FIRST (`BATCH_FIRST` = False at line 2): it "
                                "reads (L, N, E), and `t` is never called in this file")
    assert "`BATCH_FIRST` = False at line 2" in found[0].evidence


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


# ---- positions and noqa (noqa itself, decoys and every spelling: test_every_rule.py) ------------------------
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


def test_noqa_inside_a_string_is_not_a_directive(check):
    source = "import torch.nn as nn\nattn, s = nn.MultiheadAttention(64, 8), '# noqa'\n"
    assert [f.line for f in check(source)] == [2]


# ---- headline, evidence, help, explanation -----------------------------------------------------------------------
RULE = load_rules()[CODE]


BATCH_FIRST_DATA = """\
    import torch.nn as nn
    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8{batch_first})
        def forward(self, x):
            {prepare}
            return self.attn(x, x, x)[0]
"""


UNPACKED_THEN_PERMUTED = "B, T, C = x.shape\n            x = x.permute(1, 0, 2)"


def test_batch_first_data_headline_help_and_explanation(lint):
    [finding] = lint(BATCH_FIRST_DATA.format(batch_first="", prepare="B, T, C = x.shape"), CODE)
    assert finding.message == ("nn.MultiheadAttention gets batch-first data (`B, T, C = x.shape`, line 7) but "
                               "batch_first is False")
    assert finding.evidence == ("the constructor at line 5 has no batch_first argument (default False)",
                                "the data is batch-first: `B, T, C = x.shape` at line 7: unpacks the shape of `x`: "
                                "axis `B` is the batch")
    assert finding.help == "pass batch_first=True" and finding.fix.title == "pass batch_first=True"
    assert "torch 2.13 experiment" in finding.explanation and "measured" not in finding.explanation
    assert 0.4 < float(re.search(r"sample 0's output by ([0-9.]+)", finding.explanation).group(1)) < 0.5
    assert "docs/torch-facts.md#batch-first" in finding.explanation


def test_sequence_first_data_into_batch_first_module_headline_and_help(lint):
    source = BATCH_FIRST_DATA.format(batch_first=", batch_first=True", prepare=UNPACKED_THEN_PERMUTED)
    [finding] = lint(source, CODE)
    assert finding.severity == Severity.ERROR
    assert finding.message == ("nn.MultiheadAttention gets sequence-first data (`x.permute(1, 0, 2)`, line 8) but "
                               "batch_first=True")
    assert finding.evidence == ("batch_first=True at line 5",
                                "the data is sequence-first: `B, T, C = x.shape` at line 7: unpacks the shape of "
                                "`x`: axis `B` is the batch", "then `x.permute(1, 0, 2)` at line 8")
    assert "set batch_first=False" in finding.help and finding.fix.title == "pass batch_first=False"
    assert "docs/torch-facts.md#batch-first" in finding.explanation


def test_sequence_first_data_into_default_module_is_an_info_headline(lint):
    source = BATCH_FIRST_DATA.format(batch_first="", prepare=UNPACKED_THEN_PERMUTED)
    [finding] = lint(source, CODE, min_severity="info")
    assert finding.severity == Severity.INFO
    assert finding.message == ("nn.MultiheadAttention is built without batch_first, implicitly right for "
                               "sequence-first data (`x.permute(1, 0, 2)`, line 8)")
    assert finding.help == "write batch_first=False to make the layout explicit" and finding.fix is None
    assert "docs/torch-facts.md#batch-first" in finding.explanation


def test_no_layout_evidence_headline_and_help(lint):
    [finding] = lint("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n", CODE)
    assert finding.message == ("nn.MultiheadAttention is built without batch_first: it reads (L, N, E), and `attn` "
                               "is never called in this file")
    assert finding.help == ("pass batch_first=True for (N, L, E) data, or write batch_first=False if the data is "
                            "(L, N, E)")
    assert finding.fix is None
    assert "torch 2.13 experiment" in finding.explanation and "docs/torch-facts.md#batch-first" in finding.explanation


def test_a_long_layout_expression_is_shortened_but_keeps_its_line(lint):
    prepare = "x = einops.rearrange(" + "features_from_the_backbone_" * 4 + ", 'b c h w -> b (h w) c')"
    source = "    import einops\n" + BATCH_FIRST_DATA.format(batch_first="", prepare=prepare)
    [finding] = lint(source, CODE)
    assert len(finding.message) <= HEADLINE_LIMIT
    assert "..., line 8) but batch_first is False" in finding.message, finding.message
    assert prepare[4:] in " ".join(finding.evidence)  # the evidence line keeps the whole expression


# ---- probe: confirmed with the site's layout, reproduced with an assumed one ---------------------------------------
def probe(arguments: dict, torch) -> tuple[str, str]:
    torch.manual_seed(0)  # as the probe worker does before every site
    return RULE.probe(dict(arguments), torch)


def moved(evidence: str) -> float:
    return float(re.search(r"moved sample 0's output by ([0-9.]+)", evidence).group(1))


MHA = {"api": torchapi.MHA, "embed_dim": 64, "num_heads": 8, "batch_first": False}


def test_probe_with_the_sites_batch_first_layout_is_confirmed(torch, lint):
    [finding] = lint(BATCH_FIRST_DATA.format(batch_first="", prepare="B, T, C = x.shape"), CODE)
    arguments = dict(finding.arguments)
    assert arguments["layout"] == "batch-first"
    status, evidence = probe(arguments, torch)
    assert status == CONFIRMED, evidence
    assert evidence.startswith("fed batch-first data to a module with batch_first=False, changing sample 1 moved")
    assert 0.05 < moved(evidence) < 10


def test_probe_with_the_sites_sequence_first_layout_is_confirmed(torch):
    status, evidence = probe({**MHA, "batch_first": True, "layout": "sequence-first"}, torch)
    assert status == CONFIRMED, evidence
    assert evidence.startswith("fed sequence-first data to a module with batch_first=True")


def test_probe_without_layout_evidence_is_only_reproduced(torch, lint):
    [finding] = lint("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n", CODE)
    arguments = dict(finding.arguments)
    assert "layout" not in arguments
    status, evidence = probe(arguments, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed batch-first data and batch_first=False: changing sample 1 "
                               "moved sample 0's output by "), evidence
    assert 0.05 < moved(evidence) < 10
    assert "(10, 4, 4)" in evidence  # the attention weights' shape tell


def test_probe_without_layout_evidence_on_a_batch_first_module_assumes_sequence_first_data(torch):
    status, evidence = probe({**MHA, "batch_first": True}, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed sequence-first data and batch_first=True: ")


def test_probe_with_matching_layout_is_not_confirmed(torch):
    status, evidence = probe({**MHA, "batch_first": True, "layout": "batch-first"}, torch)
    assert status == NOT_CONFIRMED, evidence
    assert float(re.search(r"max change ([0-9.e+-]+)", evidence).group(1)) < 1e-6
