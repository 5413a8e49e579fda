"""MHA002 mask-convention-flip: a boolean mask passed between MHA (True = ignore) and SDPA (True = attend)."""

from __future__ import annotations

import re

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, Severity
from mhalint.rule import load_rules

CODE = "MHA002"


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, CODE)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def sdpa(setup: str, mask: str, imp: str = "import torch.nn.functional as F",
         call: str = "F.scaled_dot_product_attention(q, k, v, attn_mask={mask})") -> str:
    """A function that builds a mask with `setup` (one statement per line) and passes `mask` to SDPA."""
    body = "".join(f"    {line}\n" for line in setup.splitlines())
    return (f"import torch\n{imp}\ndef f(q, k, v, tokens, pad_id, pad_idx, lengths, L, key_padding_mask,"
            f" padding_mask, pad_mask):\n{body}    return {call.format(mask=mask)}\n")


# ---- MHA-convention masks (True = ignore) reaching SDPA -----------------------------------------------------------
IGNORE_MASKS = [
    pytest.param("m = tokens == pad_id", "m", Severity.ERROR, id="eq-pad_id"),
    pytest.param("m = pad_id == tokens", "m", Severity.ERROR, id="pad_id-eq-mirrored"),
    pytest.param("m = torch.triu(torch.ones(L, L), diagonal=1).bool()", "m", Severity.ERROR, id="triu-diag1-bool"),
    pytest.param("m = torch.triu(torch.ones(L, L), 1).bool()", "m", Severity.ERROR, id="triu-positional-diag"),
    pytest.param("m = torch.ones(L, L).triu(diagonal=1).bool()", "m", Severity.ERROR, id="triu-method"),
    pytest.param("m = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)", "m", Severity.ERROR,
                 id="triu-bool-ones"),
    pytest.param("m = torch.arange(L)[None] >= lengths[:, None]", "m", Severity.ERROR, id="arange-ge-lengths"),
    pytest.param("valid = torch.arange(L)[None] < lengths[:, None]\nm = ~valid", "m", Severity.ERROR,
                 id="inverted-lengths-mask"),
    pytest.param("m = torch.nn.Transformer.generate_square_subsequent_mask(L).bool()", "m", Severity.ERROR,
                 id="gssm-bool"),
    pytest.param("", "key_padding_mask", Severity.WARNING, id="param-key_padding_mask"),
    pytest.param("", "padding_mask", Severity.WARNING, id="param-padding_mask"),
    pytest.param("", "pad_mask", Severity.WARNING, id="param-pad_mask"),
    pytest.param("m = tokens == pad_id\nm = m.unsqueeze(1).unsqueeze(2)", "m", Severity.ERROR, id="reshaped"),
    pytest.param("m = tokens == pad_id", "m[:, None, None, :]", Severity.ERROR, id="indexed"),
    pytest.param("m = tokens == pad_id", "m.to(q.device)", Severity.ERROR, id="to-device"),
    pytest.param("c = torch.triu(torch.ones(L, L), diagonal=1).bool()\np = tokens == pad_id", "c | p",
                 Severity.ERROR, id="union-of-ignore-masks"),
]


@pytest.mark.parametrize(("setup", "mask", "severity"), IGNORE_MASKS)
def test_ignore_mask_into_sdpa_is_flagged(check, setup, mask, severity):
    found = check(sdpa(setup, mask))
    assert len(found) == 1
    line = 4 + len(setup.splitlines())
    assert (found[0].line, found[0].column, found[0].severity) == (line, 12, severity)
    assert "True = ignore" in found[0].message and found[0].message.endswith(", but it reads True as attend")


INVERSIONS = [
    pytest.param("~{m}", id="tilde"),
    pytest.param("{m}.logical_not()", id="logical_not-method"),
    pytest.param("torch.logical_not({m})", id="torch.logical_not"),
    pytest.param("{m} == 0", id="eq-0"),
    pytest.param("{m} == False", id="eq-False"),
    pytest.param("({m} == 0)", id="eq-0-parenthesised"),
]
INVERTIBLE = [p for p in IGNORE_MASKS if p.values[1] != "c | p"]


@pytest.mark.parametrize("inversion", INVERSIONS)
@pytest.mark.parametrize(("setup", "mask", "severity"), INVERTIBLE)
def test_inverted_ignore_mask_into_sdpa_is_clean(check, setup, mask, severity, inversion):
    assert check(sdpa(setup, inversion.format(m=mask))) == []


def test_eq_method_padding_mask_into_sdpa(check):
    found = check(sdpa("m = tokens.eq(pad_idx)", "m"))
    assert [(f.line, f.severity) for f in found] == [(5, Severity.ERROR)]


@pytest.mark.parametrize("mask", ["~m", "m.logical_not()", "m == 0"])
def test_inverted_eq_method_padding_mask_into_sdpa_is_clean(check, mask):
    assert check(sdpa("m = tokens.eq(pad_idx)", mask)) == []


def test_inverted_then_inverted_again_is_flagged(check):
    found = check(sdpa("keep = tokens != pad_id\npad = ~keep", "pad.unsqueeze(1).unsqueeze(2)"))
    assert len(found) == 1 and "built at line 4 and inverted to True = ignore" in found[0].message
    assert "inverted with `~keep` at line 5" in found[0].evidence


def test_inversion_where_the_mask_is_built_is_clean(check):
    assert check(sdpa("m = ~(tokens == pad_id)", "m")) == []
    assert check(sdpa("m = torch.triu(torch.ones(L, L), diagonal=1).bool().logical_not()", "m")) == []


@pytest.mark.parametrize(("setup", "mask"), [
    ("m = torch.tril(torch.ones(L, L)).bool()", "m"),
    ("m = torch.tril(torch.ones(L, L, dtype=torch.bool))", "m"),
    ("m = tokens != pad_id", "m[:, None, None, :]"),
    ("m = torch.arange(L)[None] < lengths[:, None]", "m[:, None, None, :]"),
    ("m = pad_mask == 0", "m"),
    ("m = pad_mask.logical_not()", "m"),
    ("", "None"),
])
def test_keep_mask_into_sdpa_is_clean(check, setup, mask):
    assert check(sdpa(setup, mask)) == []


@pytest.mark.parametrize(("setup", "mask"), [
    ("m = torch.zeros(L, L).masked_fill(key_padding_mask, float('-inf'))", "m"),
    ('m = torch.zeros(key_padding_mask.shape, dtype=q.dtype).masked_fill(key_padding_mask, float("-inf"))', "m"),
    ("m = tokens == pad_id\nm = m.float().masked_fill(m, float('-inf'))", "m"),
    ("m = torch.nn.Transformer.generate_square_subsequent_mask(L)", "m"),
    ("", "torch.nn.Transformer.generate_square_subsequent_mask(L)"),
    ("m = torch.triu(torch.full((L, L), float('-inf')), diagonal=1)", "m"),
    ("m = torch.where(key_padding_mask, float('-inf'), 0.0)", "m"),
])
def test_float_masks_are_not_flagged(check, setup, mask):
    assert check(sdpa(setup, mask)) == []


@pytest.mark.parametrize("setup", [
    "mask = torch.ones(L, L); mask = torch.tril(mask)",  # issue 34: the call's own use had hidden the float dtype
    "mask = torch.ones(L, L)\n    mask = torch.tril(mask)",
    "mask = torch.zeros(L, L)\n    mask = torch.tril(mask)",
    "mask = torch.ones(L, L, dtype=torch.float16).tril()",
])
def test_a_float_triangle_is_never_a_flipped_boolean_mask(check, setup):
    """`~` of a float mask raises TypeError: a float construction is MHA008's (0/1) or nobody's, never MHA002's."""
    source = (f"import torch\nfrom torch import nn\nattn = nn.MultiheadAttention(8, 2, batch_first=True)\n"
              f"def f(x, L):\n    {setup}\n    return attn(x, x, x, attn_mask=mask)[0]\n")
    assert check(source) == []


@pytest.mark.parametrize("mask", ["key_padding_mask", "padding_mask"])
def test_a_float_factory_named_as_a_padding_mask_is_not_flagged(check, mask):
    assert check(sdpa(f"{mask} = torch.zeros(4, L)", f"{mask}[:, None, None, :]")) == []


def test_a_mask_of_unknown_dtype_is_inverted_with_eq_0_and_the_evidence_says_why(check):
    """`torch.triu(m, 1)` of a parameter: boolean or float is not known. `m == 0` inverts a boolean mask and a 0/1
    one alike and runs for any dtype, where `~` raises for a float one."""
    [finding] = check("import torch\nimport torch.nn.functional as F\ndef f(q, m):\n"
                      "    return F.scaled_dot_product_attention(q, q, q, attn_mask=torch.triu(m, 1))\n")
    assert finding.help == "invert the mask where it is passed: `torch.triu(m, 1) == 0`"
    assert finding.fix.edits[0].content == " == 0"
    assert any("nothing shows the mask is boolean" in sentence for sentence in finding.evidence), finding.evidence


@pytest.mark.parametrize(("imp", "call"), [
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention(q, k, v, attn_mask={mask})"),
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention(q, k, v, {mask})"),  # 4th positional
    ("from torch.nn.functional import scaled_dot_product_attention",
     "scaled_dot_product_attention(q, k, v, attn_mask={mask})"),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa", "sdpa(q, k, v, {mask})"),
    ("import torch.nn.functional", "torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask={mask})"),
    ("from torch.nn import functional as F", "F.scaled_dot_product_attention(q, k, v, {mask}, 0.0, False)"),
])
def test_sdpa_aliases_and_positional_attn_mask(check, imp, call):
    found = check(sdpa("m = tokens == pad_id", "m", imp=imp, call=call))
    assert [(f.line, f.column) for f in found] == [(5, 12)]
    assert check(sdpa("m = tokens == pad_id", "~m", imp=imp, call=call)) == []


def test_mask_in_another_sdpa_argument_is_not_attn_mask(check):
    # dropout_p and is_causal positions: nothing there is read as a mask
    assert check(sdpa("m = tokens == pad_id", "m", call="F.scaled_dot_product_attention(q, k, v, None, 0.0, {mask})"))\
        == []


@pytest.mark.parametrize("use", ["key_padding_mask=m", "attn_mask=m", "None, True, m", "m"])
def test_convention_known_from_use_with_mha_in_the_same_function(check, use):
    source = """\
        import torch.nn as nn
        import torch.nn.functional as F
        mha = nn.MultiheadAttention(64, 8, batch_first=True)
        def f(x, q, k, v, m):
            a, _ = mha(x, x, x, {use})
            return F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    """.replace("{use}", use)
    assert [f.line for f in check(source)] == [6]


def test_use_with_mha_then_inverted_for_sdpa_is_clean(check):
    source = """\
        import torch.nn as nn
        import torch.nn.functional as F
        mha = nn.MultiheadAttention(64, 8, batch_first=True)
        def f(x, q, k, v, m):
            a, _ = mha(x, x, x, key_padding_mask=m)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=~m)
    """
    assert check(source) == []


# ---- names and attributes --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("source", "flagged"), [
    ("def f(q, k, v, x):\n    pad_mask = compute(x)\n    return F.scaled_dot_product_attention(q, k, v, pad_mask)\n",
     True),
    ("def f(q, k, v, x):\n    m = compute(x)\n    return F.scaled_dot_product_attention(q, k, v, m)\n", False),
    ("def f(q, k, v, mask):\n    return F.scaled_dot_product_attention(q, k, v, mask)\n", False),
    ("def f(q, k, v, padding_mask=None):\n    return F.scaled_dot_product_attention(q, k, v, padding_mask)\n", True),
    ("class M:\n    def forward(self, q, k, v):\n"
     "        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.key_padding_mask)\n", True),
    ("class M:\n    def __init__(self, L):\n"
     "        self.register_buffer('causal', torch.triu(torch.ones(L, L), diagonal=1).bool())\n"
     "    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal)\n",
     True),
    ("class M:\n    def __init__(self, L):\n        self.causal = torch.tril(torch.ones(L, L)).bool()\n"
     "    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal)\n",
     False),
])
def test_names_and_attributes(check, source, flagged):
    found = check("import torch\nimport torch.nn.functional as F\n" + source)
    assert len(found) == (1 if flagged else 0)


# ---- helpers that build the mask -------------------------------------------------------------------------------
HELPER_METHOD = """\
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    class M(nn.Module):
        def make_mask(self, tokens):
            return tokens == self.pad_id
        def forward(self, q, k, v, tokens):
            m = self.make_mask(tokens)
            return F.scaled_dot_product_attention(q, k, v, attn_mask={mask})
"""


def test_mask_built_in_a_helper_method(check):
    found = check(HELPER_METHOD.replace("{mask}", "m"))
    assert [(f.line, f.column) for f in found] == [(9, 16)]
    assert "line 6" in found[0].message  # where the mask was really built
    assert check(HELPER_METHOD.replace("{mask}", "~m")) == []


def test_mask_built_in_a_module_function(check):
    source = ("import torch.nn.functional as F\ndef make_mask(tokens, pad_id):\n    return tokens == pad_id\n"
              "def f(q, k, v, tokens):\n    return F.scaled_dot_product_attention(q, k, v, attn_mask={mask})\n")
    assert [f.line for f in check(source.replace("{mask}", "make_mask(tokens, 0)"))] == [5]
    assert check(source.replace("{mask}", "~make_mask(tokens, 0)")) == []


# ---- SDPA-convention masks (True = attend) reaching MHA / Transformer mask arguments ------------------------------
KEEP_MASKS = [  # (construction, severity: a polarity read only from a name is a warning)
    pytest.param("tokens != pad_id", Severity.ERROR, id="ne-pad_id"),
    pytest.param("torch.arange(L)[None] < lengths[:, None]", Severity.ERROR, id="arange-lt-lengths"),
    pytest.param("lengths[:, None] > torch.arange(L)[None]", Severity.ERROR, id="lengths-gt-arange"),
    pytest.param("torch.tril(torch.ones(L, L)).bool()", Severity.ERROR, id="tril-bool"),
    pytest.param("torch.tril(torch.ones(L, L, dtype=torch.bool))", Severity.ERROR, id="tril-bool-ones"),
    pytest.param("~key_padding_mask", Severity.WARNING, id="inverted-kpm-param"),
    pytest.param("pad_mask == 0", Severity.WARNING, id="pad_mask-eq-0"),
]


def mha_call(ctor: str, call: str, setup: str, imp: str = "import torch.nn as nn") -> str:
    return (f"import torch\n{imp}\ndef f(x, mem, tokens, pad_id, lengths, L, key_padding_mask, pad_mask):\n"
            f"    m = {ctor}\n    keep = {setup}\n    return {call}\n")


@pytest.mark.parametrize(("setup", "severity"), KEEP_MASKS)
@pytest.mark.parametrize("argument", ["key_padding_mask=keep", "keep", "attn_mask=keep", "None, True, keep"])
def test_keep_mask_into_mha_is_flagged(check, setup, severity, argument):
    found = check(mha_call("nn.MultiheadAttention(64, 8, batch_first=True)", f"m(x, x, x, {argument})", setup))
    assert [(f.line, f.column, f.severity) for f in found] == [(6, 12, severity)]
    assert "True = attend" in found[0].message and found[0].message.endswith(", but it reads True as ignore")


@pytest.mark.parametrize(("setup", "severity"), KEEP_MASKS)
@pytest.mark.parametrize("argument", ["key_padding_mask=~keep", "keep.logical_not()", "attn_mask=keep == 0",
                                      "None, True, torch.logical_not(keep)"])
def test_inverted_keep_mask_into_mha_is_clean(check, setup, severity, argument):
    assert check(mha_call("nn.MultiheadAttention(64, 8, batch_first=True)", f"m(x, x, x, {argument})", setup)) == []


@pytest.mark.parametrize(("argument", "flagged"), [("key_padding_mask=keep", True), ("key_padding_mask=~keep", False)])
def test_ne_method_keep_mask_into_mha(check, argument, flagged):
    found = check(mha_call("nn.MultiheadAttention(64, 8, batch_first=True)", f"m(x, x, x, {argument})",
                           "tokens.ne(pad_id)"))
    assert [f.line for f in found] == ([6] if flagged else [])


@pytest.mark.parametrize(("ctor", "call", "parameter"), [
    ("nn.Transformer(batch_first=True)", "m(x, mem, src_key_padding_mask=keep)", "src_key_padding_mask"),
    ("nn.Transformer(batch_first=True)", "m(x, mem, None, None, None, keep)", "src_key_padding_mask"),
    ("nn.Transformer(batch_first=True)", "m(x, mem, tgt_key_padding_mask=keep)", "tgt_key_padding_mask"),
    ("nn.Transformer(batch_first=True)", "m(x, mem, memory_key_padding_mask=keep)", "memory_key_padding_mask"),
    ("nn.Transformer(batch_first=True)", "m(x, mem, tgt_mask=keep)", "tgt_mask"),
    ("nn.TransformerEncoderLayer(64, 8, batch_first=True)", "m(x, src_key_padding_mask=keep)",
     "src_key_padding_mask"),
    ("nn.TransformerEncoderLayer(64, 8, batch_first=True)", "m(x, None, keep)", "src_key_padding_mask"),
    ("nn.TransformerEncoderLayer(64, 8, batch_first=True)", "m(x, keep)", "src_mask"),
    ("nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8, batch_first=True), 2)",
     "m(x, src_key_padding_mask=keep)", "src_key_padding_mask"),
    ("nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8, batch_first=True), 2)", "m(x, mask=keep)", "mask"),
    ("nn.TransformerDecoderLayer(64, 8, batch_first=True)", "m(x, mem, tgt_key_padding_mask=keep)",
     "tgt_key_padding_mask"),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 8, batch_first=True), 2)", "m(x, mem, keep)", "tgt_mask"),
    ("nn.TransformerDecoder(nn.TransformerDecoderLayer(64, 8, batch_first=True), 2)", "m(x, mem, None, keep)",
     "memory_mask"),
])
def test_keep_mask_into_transformer_arguments(check, ctor, call, parameter):
    found = check(mha_call(ctor, call, "tokens != pad_id"))
    assert [(f.line, f.column) for f in found] == [(6, 12)]
    assert f"gets {parameter}=" in found[0].message
    assert check(mha_call(ctor, call, "tokens == pad_id")) == []  # already True = ignore


def test_keep_mask_into_multi_head_attention_forward(check):
    args = "q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob"
    source = (f"import torch.nn.functional as F\ndef f(q, w, b, ow, ob, tokens, pad):\n"
              f"    return F.multi_head_attention_forward({args}, key_padding_mask={{mask}})\n")
    assert [f.line for f in check(source.replace("{mask}", "tokens != pad"))] == [3]
    assert check(source.replace("{mask}", "tokens == pad")) == []


def mha_spellings() -> list[tuple[str, str]]:
    return [
        ("import torch", "torch.nn.MultiheadAttention"),
        ("import torch.nn as nn", "nn.MultiheadAttention"),
        ("from torch import nn", "nn.MultiheadAttention"),
        ("from torch.nn import MultiheadAttention", "MultiheadAttention"),
        ("from torch.nn import MultiheadAttention as Alias", "Alias"),
        ("import torch", "torch.nn.modules.activation.MultiheadAttention"),
        ("import torch", "torch.nn.quantizable.MultiheadAttention"),
        ("import torch", "torch.ao.nn.quantizable.MultiheadAttention"),
        ("from torch.ao.nn.quantizable import MultiheadAttention", "MultiheadAttention"),
    ]


@pytest.mark.parametrize(("imp", "callee"), mha_spellings() + [
    (f"from torch.nn import {cls}", cls) for cls in ("TransformerEncoderLayer",)] + [
    ("import torch", "torch.nn.modules.transformer.TransformerEncoderLayer")])
def test_mha_aliases(check, imp, callee):
    layer = "Layer" in callee
    ctor = f"{callee}(64, 8, batch_first=True)"
    call = "m(x, src_key_padding_mask=keep)" if layer else "m(x, x, x, key_padding_mask=keep)"
    assert [f.line for f in check(mha_call(ctor, call, "tokens != pad_id", imp=imp))] == [6]


def test_self_attribute_module_in_forward(check):
    source = """\
        import torch
        from torch import nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.t = nn.Transformer(batch_first=True)
            def forward(self, s, t, lengths):
                keep = torch.arange(s.size(1))[None] < lengths[:, None]
                return self.t(s, t, src_key_padding_mask=keep)
    """
    found = check(source)
    assert [(f.line, f.column) for f in found] == [(9, 16)]
    assert "built at line 8" in found[0].message


# ---- decoys ----------------------------------------------------------------------------------------------------
# project functions and classes named like torch's in the rule's own examples: test_every_rule.py
@pytest.mark.parametrize("source", [
    "from .blocks import TransformerEncoderLayer\nlayer = TransformerEncoderLayer()\ndef f(x, tokens, pad_id):\n"
    "    return layer(x, src_key_padding_mask=tokens != pad_id)\n",
])
def test_project_functions_and_classes_of_the_same_name_are_not_torch(check, source):
    assert check(source) == []


# ---- positions and noqa ----------------------------------------------------------------------------------------
def test_multi_line_call_is_reported_at_its_first_line_and_column(check):
    source = """\
        import torch.nn.functional as F
        def f(q, k, v, tokens, pad_id):
            pad = tokens == pad_id
            out = F.scaled_dot_product_attention(
                q, k, v,
                attn_mask=pad[:, None, None, :],
            )
            return out
    """
    found = check(source)
    assert [(f.line, f.column, f.end_line) for f in found] == [(4, 11, 7)]
    assert "built at line 3" in found[0].message


def test_resolved_padding_constant(check):
    source = ("import torch.nn.functional as F\nPAD = 0\ndef f(q, k, v, tokens):\n"
              "    return F.scaled_dot_product_attention(q, k, v, attn_mask=tokens == PAD)\n")
    assert [f.line for f in check(source)] == [4]


@pytest.mark.parametrize(("diagonal", "flagged"), [("1", True), ("SHIFT", True), ("offset + 1", True),
                                                   ("offset", False), ("0", False)])
def test_triu_diagonal_resolved(check, diagonal, flagged):
    source = ("import torch\nimport torch.nn.functional as F\nSHIFT = 1\ndef f(q, k, v, L, offset=0):\n"
              f"    m = torch.triu(torch.ones(L, L), diagonal={diagonal}).bool()\n"
              "    return F.scaled_dot_product_attention(q, k, v, m)\n")
    assert len(check(source)) == (1 if flagged else 0)


def test_zeros_filled_with_ones_then_bool_is_a_keep_mask_not_a_flipped_one(check):
    # diffusers' CogView4: a float zeros matrix whose blocks are set to 1 (attend), made boolean for SDPA
    source = """\
        import torch
        import torch.nn.functional as F
        def attend(q, k, v, lengths, l):
            matrix = torch.zeros((len(lengths), l, l), dtype=q.dtype)
            for index, block in enumerate(matrix):
                block[: lengths[index], : lengths[index]] = 1
            mask = matrix.to(dtype=torch.bool).unsqueeze(1)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    """
    assert check(source) == []


# ---- headline, evidence, help, explanation -----------------------------------------------------------------------
RULE = load_rules()[CODE]


def test_padding_mask_into_sdpa_headline_evidence_help_and_explanation(check):
    [finding] = check(sdpa("m = tokens == pad_id", "m[:, None, None, :]"))
    assert finding.message == ("F.scaled_dot_product_attention gets attn_mask=`m[:, None, None, :]`, built at line 4 "
                               "as True = ignore, but it reads True as attend")
    assert finding.evidence == ("`m = tokens == pad_id` at line 4", "`tokens == pad_id` is True at padding (line 4)")
    assert finding.help == "invert the mask where it is passed: `~m[:, None, None, :]`"
    assert finding.fix.title == "invert the mask with ~" and finding.fix.edits[0].content == "~"
    assert "torch 2.13 experiment" in finding.explanation and "measured" not in finding.explanation
    assert 1.8 < float(re.search(r"([0-9.]+) off the correct one for a padding mask", finding.explanation).group(1)) \
        < 1.9
    assert "Here the mask's convention comes from its name" not in finding.explanation


def test_an_inverted_argument_is_fixed_by_dropping_the_inversion_and_the_help_says_so(check):
    [finding] = check(mha_call("nn.MultiheadAttention(64, 8, batch_first=True)", "m(x, x, x, key_padding_mask=~keep)",
                               "tokens == pad_id"))
    assert "`~keep`, built at line 5 and inverted to True = attend" in finding.message
    assert finding.help == "invert the mask where it is passed: `keep` (or drop the earlier inversion)"


def test_a_convention_read_from_a_name_is_a_warning_that_says_it_only_looks_flipped(check):
    [finding] = check(sdpa("", "key_padding_mask"))
    assert finding.severity == Severity.WARNING
    assert finding.message == ("F.scaled_dot_product_attention gets attn_mask=`key_padding_mask`, which looks like a "
                               "True = ignore mask, but it reads True as attend")
    assert finding.help == "if the mask is True = ignore, invert it where it is passed: `key_padding_mask == 0`"
    assert "Here the mask's convention comes from its name or another use" in finding.explanation
    assert "docs/torch-facts.md#mask-convention" in finding.explanation


def test_a_long_mask_expression_is_shortened_in_the_headline_but_not_in_the_fix(check):
    mask = "(tokens_of_the_very_long_batch_name == pad_id)" + ".unsqueeze(1)" * 8
    [finding] = check(sdpa("", mask))
    assert len(finding.message) <= HEADLINE_LIMIT
    assert finding.message.startswith("F.scaled_dot_product_attention gets attn_mask=`(tokens_of_the_very_long_batch")
    assert finding.message.endswith("..., built at line 4 as True = ignore, but it reads True as attend")
    assert finding.help == f"invert the mask where it is passed: `~{mask}`"  # the help and the fix keep it whole
    assert finding.fix.edits[0].content == "~"


# ---- probe: confirmed from the site's construction, reproduced with an assumed convention --------------------------
def probe(arguments: dict, torch) -> tuple[str, str]:
    torch.manual_seed(0)  # as the probe worker does before every site
    return RULE.probe(dict(arguments), torch)


def inverse_by(evidence: str) -> float:
    return float(re.search(r"\(the inverse\) by ([0-9.]+)", evidence).group(1))


def test_probe_with_the_sites_construction_is_confirmed(torch, check):
    [finding] = check(sdpa("m = torch.triu(torch.ones(L, L), diagonal=1).bool()", "m"))
    arguments = dict(finding.arguments)
    assert arguments["mask_expression"] == "torch.triu(torch.ones(L, L), diagonal=1)"
    status, evidence = probe(arguments, torch)
    assert status == CONFIRMED, evidence
    assert "mask rebuilt from `torch.triu(torch.ones(L, L), diagonal=1)` with L=6" in evidence
    assert 0.1 < inverse_by(evidence) < 20


def test_probe_of_a_data_dependent_construction_is_reproduced_with_a_stand_in_of_its_convention(torch, check):
    [finding] = check(sdpa("m = tokens == pad_id", "m"))
    status, evidence = probe(dict(finding.arguments), torch)
    assert status == REPRODUCED, evidence
    assert "padding mask (lengths 6, 4, 3, 2) in place of `tokens == pad_id`: " in evidence
    assert "`tokens == pad_id` could not be rebuilt" in evidence and "a padding mask stood in" in evidence


def test_probe_of_a_convention_read_from_a_name_is_only_reproduced(torch, check):
    [finding] = check(sdpa("", "key_padding_mask[:, None, None, :]"))
    arguments = dict(finding.arguments)
    assert arguments["mask_expression"] is None
    status, evidence = probe(arguments, torch)
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed True = ignore padding mask (lengths 6, 4, 3, 2): "
                               "F.scaled_dot_product_attention with the mask as written differs"), evidence
    assert 0.1 < inverse_by(evidence) < 20


def test_probe_of_an_assumed_mask_already_in_the_targets_convention_is_not_confirmed(torch):
    arguments = {"api": torchapi.SDPA, "parameter": "attn_mask", "convention": "keep", "polarity": "keep",
                 "mask_expression": None, "inverted_after": False}
    status, evidence = probe(arguments, torch)
    assert status == NOT_CONFIRMED, evidence
    assert evidence.startswith("with an assumed True = attend padding mask (lengths 6, 4, 3, 2), the mask as written "
                               "is already in F.scaled_dot_product_attention's convention")


# ---- a convention stated in the docstring ------------------------------------------------------------------------
HF_STYLE = """
    import torch.nn.functional as F

    def attend(q, k, v, attention_mask):
        \"\"\"
        Args:
            attention_mask (`torch.BoolTensor` of shape `(batch_size, sequence_length)`):
                Mask to avoid performing attention on padding token indices. Mask values selected in `[0, 1]`:
                - 1 for tokens that are **not masked**,
                - 0 for tokens that are **masked**.
        \"\"\"
        return F.scaled_dot_product_attention(q, k, v, attn_mask={mask})
"""


def test_a_docstring_that_states_the_values_gives_the_convention(check):
    assert check(HF_STYLE.format(mask="attention_mask[:, None, None, :]")) == []  # 1 = attend: right for SDPA
    [finding] = check(HF_STYLE.format(mask="~attention_mask[:, None, None, :]"))
    assert finding.severity == Severity.ERROR and "documented at line 5 as True = ignore" in finding.message
    assert "the docstring of `attend()` documents `attention_mask`" in finding.evidence[0]


def test_a_docstring_that_contradicts_itself_or_says_nothing_gives_no_convention(check):
    contradicting = HF_STYLE.replace("- 0 for tokens that are **masked**", "- 1 for padding")
    assert check(contradicting.format(mask="~attention_mask[:, None, None, :]")) == []
    silent = HF_STYLE.replace("- 1 for tokens that are **not masked**,", "").replace(
        "- 0 for tokens that are **masked**.", "")
    assert check(silent.format(mask="~attention_mask[:, None, None, :]")) == []


# ---- rebinding: the convention follows the binding that reaches the use (issue 35 item 10) -----------------------
def rebound(body: str, call: str, params: str = "x, tokens, pad_id, mask, flag") -> str:
    """A function over an MHA built at module level whose body (one statement per line) rebinds `mask`."""
    lines = "".join(f"    {line}\n" for line in body.splitlines())
    return (f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
            f"mha = nn.MultiheadAttention(64, 8, batch_first=True)\ndef f({params}):\n{lines}    return {call}\n")


MHA_USE = "mha(x, x, x, key_padding_mask=mask, need_weights=False)[0]"
SDPA_USE = "F.scaled_dot_product_attention(x, x, x, attn_mask=mask)"
INVERSIONS = ["mask = ~mask", "mask = mask.logical_not()", "mask = ~mask.bool()", "mask = (mask == 0)",
              "if mask is not None:\n    mask = ~mask"]


@pytest.mark.parametrize("inversion", INVERSIONS)
def test_an_inverted_parameter_passed_on_is_not_judged_by_its_own_later_use(check, inversion):
    """`mask = ~mask` then MHA: the MHA call reads the inverted value, so it says nothing about the value the
    parameter held (the use-based guess read its own use and its fix inverted a correct mask)."""
    assert check(rebound(inversion, MHA_USE)) == []


@pytest.mark.parametrize("inversion", INVERSIONS)
def test_a_keep_mask_inverted_by_rebinding_is_right_for_mha_and_wrong_for_sdpa(check, inversion):
    built = f"mask = tokens != pad_id\n{inversion}"
    assert check(rebound(built, MHA_USE)) == []
    found = check(rebound(built, SDPA_USE))
    assert [(f.line, f.severity) for f in found] == [(len(built.splitlines()) + 6, Severity.ERROR)]
    assert "built at line 6 and inverted to True = ignore" in found[0].message
    inverted_at = f"line {len(built.splitlines()) + 5}"  # the inversion is the body's last statement
    assert any("inverted" in sentence and inverted_at in sentence for sentence in found[0].evidence)


def test_one_minus_a_zero_one_mask_rebound_flips_it(check):
    built = "mask = (tokens != pad_id).float()\nmask = 1 - mask"
    assert check(rebound(built, "mha(x, x, x, key_padding_mask=mask.bool(), need_weights=False)[0]")) == []
    found = check(rebound(built, "F.scaled_dot_product_attention(x, x, x, attn_mask=mask.bool())"))
    assert [f.severity for f in found] == [Severity.ERROR] and "swaps the 0s and 1s" in " ".join(found[0].evidence)


def test_an_inversion_on_one_path_only_leaves_the_convention_unknown(check):
    built = "mask = tokens != pad_id\nif flag:\n    mask = ~mask"
    assert check(rebound(built, MHA_USE)) == []
    assert check(rebound(built, SDPA_USE)) == []


@pytest.mark.parametrize(("passed", "flagged"), [("tokens == pad_id", True), ("tokens != pad_id", False)])
def test_an_inversion_under_a_none_check_flips_what_the_callers_pass(check, passed, flagged):
    source = rebound("if mask is not None:\n    mask = ~mask", MHA_USE) + \
        f"def g(x, tokens, pad_id):\n    return f(x, tokens, pad_id, {passed}, True) + f(x, tokens, pad_id, None, 1)\n"
    found = check(source)
    assert [(f.line, f.severity) for f in found] == ([(8, Severity.ERROR)] if flagged else [])


def test_a_use_that_reads_another_binding_is_no_evidence(check):
    """The MHA call reads `mask` after `mask = tokens == 0` rebinds it: not the parameter SDPA gets."""
    source = rebound("out = " + SDPA_USE + "\nmask = tokens == 0", MHA_USE, params="x, tokens, mask")
    assert check(source) == []
    # the same use reading the parameter itself does say it (a warning: only a use says it)
    source = rebound("out = " + SDPA_USE, MHA_USE, params="x, tokens, mask")
    assert [(f.line, f.severity) for f in check(source)] == [(6, Severity.WARNING)]


def test_a_name_rebound_through_an_inversion_cannot_say_the_convention(check):
    """`key_padding_mask = ~key_padding_mask`: the name is the parameter's and the inverted value's alike."""
    source = rebound("key_padding_mask = ~key_padding_mask",
                     "mha(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)[0]", "x, key_padding_mask")
    assert check(source) == []
    # without the inversion the name still says True = ignore, which SDPA reads the other way
    source = rebound("key_padding_mask = key_padding_mask.bool()",
                     "F.scaled_dot_product_attention(x, x, x, attn_mask=key_padding_mask)", "x, key_padding_mask")
    assert [f.severity for f in check(source)] == [Severity.WARNING]
