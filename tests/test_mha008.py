"""MHA008 float-keep-mask: a 0/1 float mask is added to the attention scores, so it masks nothing."""

from __future__ import annotations

import re
import textwrap

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rule import load_rules

CODE = "MHA008"
RULE = load_rules()[CODE]
SDPA_IMPORT = "import torch.nn.functional as F"
SDPA_CALL = "F.scaled_dot_product_attention(q, k, v, attn_mask={mask})"
MHA_CALL = "attn(q, q, q, {keyword}={mask})[0]"


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, CODE, min_severity="info")
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def function(setup: str, mask: str, call: str = SDPA_CALL, keyword: str = "attn_mask") -> str:
    """A function that builds a mask with `setup` (one statement per line) and passes `mask` to `call`."""
    body = "".join(f"    {line}\n" for line in setup.splitlines())
    return (f"import torch\n{SDPA_IMPORT}\nfrom torch import nn\n"
            f"attn = nn.MultiheadAttention(16, 2, batch_first=True)\n"
            f"def f(q, k, v, tokens, pad_id, lengths, L, key_padding_mask):\n{body}"
            f"    return {call.format(mask=mask, keyword=keyword)}\n")


def call_line(setup: str) -> int:
    return 6 + len(setup.splitlines())


# ---- constructions of a 0/1 float mask -----------------------------------------------------------------------------
ZERO_ONE = [
    pytest.param("m = torch.tril(torch.ones(L, L))", "m", "1 = attend", id="tril-ones"),
    pytest.param("m = torch.ones(L, L).tril()", "m", "1 = attend", id="tril-method"),
    pytest.param("m = torch.ones(L, L, dtype=torch.float32).tril()", "m", "1 = attend", id="tril-float-dtype"),
    pytest.param("m = torch.triu(torch.ones(L, L), diagonal=1)", "m", "1 = ignore", id="triu-diagonal-1"),
    pytest.param("", "torch.tril(torch.ones(L, L))", "1 = attend", id="inline"),
    pytest.param("m = torch.tril(torch.ones(L, L))\nm = m.unsqueeze(0).to(q.device)", "m", "1 = attend",
                 id="reshaped-and-moved"),
    pytest.param("m = torch.tril(torch.ones(L, L))", "m[:L, :L]", "1 = attend", id="sliced"),
    pytest.param("keep = (tokens != pad_id).float()", "keep[:, None, None, :]", "1 = attend", id="float-of-keep"),
    pytest.param("keep = tokens != pad_id\nm = keep.to(q.dtype)", "m[:, None, None, :]", "1 = attend",
                 id="to-query-dtype"),
    pytest.param("m = (tokens == pad_id).type_as(q)", "m[:, None, None, :]", "1 = ignore", id="type_as"),
    pytest.param("m = 1 - (tokens == pad_id).float()", "m[:, None, None, :]", "1 = attend", id="one-minus"),
    pytest.param("m = (tokens != 0).float()", "m[:, None, None, :]", "into 0/1 floats", id="unknown-polarity"),
    pytest.param("m = torch.ones(L, L)\nm[0, 1:] = 0", "m", "set to 0", id="ones-then-zeros"),
    pytest.param("m = torch.zeros(q.size(0), L)\nfor i, n in enumerate(lengths):\n    m[i, n:] = 1",
                 "m[:, None, None, :]", "set to 1", id="zeros-then-ones-in-a-loop"),
    pytest.param("m = torch.ones(L, L)\nm.masked_fill_(torch.eye(L, dtype=torch.bool), 0)", "m", "set to 0",
                 id="masked_fill_-0"),
]


@pytest.mark.parametrize(("setup", "mask", "meaning"), ZERO_ONE)
def test_zero_one_float_masks_into_sdpa_are_errors(check, setup, mask, meaning):
    found = check(function(setup, mask))
    assert len(found) == 1
    finding = found[0]
    assert (finding.line, finding.severity) == (call_line(setup), Severity.ERROR)
    if meaning.startswith("1 = "):  # what the 1s mean is decisive: the headline names it
        assert f"({meaning})" in finding.message, finding.message
    else:  # the construction that makes it 0/1 floats is in the evidence
        assert any(meaning in line for line in finding.evidence), finding.evidence
    assert finding.message.endswith("added to the scores, it masks nothing"), finding.message
    assert len(finding.message) <= HEADLINE_LIMIT
    explanation = " ".join(finding.explanation.split())  # the prose is wrapped
    assert 0.67 < float(re.search(r"([0-9.]+) away from the correctly masked", explanation).group(1)) < 0.68
    assert 0.32 < float(re.search(r"([0-9.]+) from the result with no mask", explanation).group(1)) < 0.33


CORRECT = [
    pytest.param("m = torch.tril(torch.ones(L, L, dtype=torch.bool))", "m", id="bool-dtype"),
    pytest.param("m = torch.tril(torch.ones(L, L)).bool()", "m", id="bool-method"),
    pytest.param("m = torch.tril(torch.ones(L, L))", "m == 1", id="compared"),
    pytest.param("m = torch.tril(torch.ones(L, L))\nb = m.masked_fill(m == 0, float('-inf'))", "b",
                 id="masked_fill-inf"),
    pytest.param("m = torch.tril(torch.ones(L, L))\nb = (1.0 - m) * -1e9", "b", id="one-minus-times-large"),
    pytest.param("m = (tokens != pad_id).float()\nb = (1 - m) * torch.finfo(q.dtype).min", "b[:, None, None, :]",
                 id="finfo-min"),
    pytest.param("m = torch.zeros(L, L)\nm[0, 1:] = float('-inf')", "m", id="zeros-then-inf"),
    pytest.param("m = torch.zeros(L, L)\nm.masked_fill_(torch.eye(L, dtype=torch.bool), -1e4)", "m",
                 id="masked_fill_-large-negative"),
    pytest.param("m = torch.ones(L, L)", "m", id="plain-ones-adds-a-constant"),
    pytest.param("m = torch.ones(L, L)\nm[0] = tokens[0]", "m", id="written-with-data"),
    pytest.param("m = torch.tril(torch.ones(L, L, dtype=torch.long))", "m", id="integer-raises-loudly"),
    pytest.param("", "key_padding_mask.float()[:, None, None, :]", id="float-of-unknown-dtype"),
    pytest.param("", "nn.Transformer.generate_square_subsequent_mask(L)", id="generate-square"),
    pytest.param("m = torch.tril(torch.ones(L, L))", "None", id="none"),
]


@pytest.mark.parametrize(("setup", "mask"), CORRECT)
def test_boolean_and_additive_masks_are_not_flagged(check, setup, mask):
    assert check(function(setup, mask)) == []


def test_manual_attention_with_a_tril_buffer_is_not_flagged(check):
    source = """
        import torch
        from torch import nn
        class CausalSelfAttention(nn.Module):
            def __init__(self, block_size):
                super().__init__()
                self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                     .view(1, 1, block_size, block_size))
            def forward(self, att, T):
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
                return torch.softmax(att, dim=-1)
        """
    assert check(source) == []


def test_tril_buffer_reaching_sdpa_is_flagged_with_its_line(check):
    source = """
        import torch
        import torch.nn.functional as F
        from torch import nn
        class CausalSelfAttention(nn.Module):
            def __init__(self, block_size):
                super().__init__()
                self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                                     .view(1, 1, block_size, block_size))
            def forward(self, q, k, v, T):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias[:, :, :T, :T])
        """
    (finding,) = check(source)
    assert finding.line == 11 and "built at line 8" in finding.message
    assert finding.evidence[-1] == ("`torch.tril(torch.ones(block_size, block_size))` has no dtype=torch.bool, so "
                                    "it holds 0/1 floats")


def test_helper_function_returning_the_mask(check):
    source = """
        import torch
        from torch import nn
        def causal_mask(n):
            return torch.tril(torch.ones(n, n))
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
            def forward(self, x):
                return self.attn(x, x, x, attn_mask=causal_mask(x.size(1)), need_weights=False)[0]
        """
    (finding,) = check(source)
    assert finding.line == 11 and "1 = attend" in finding.message


# ---- every mask argument of every API ------------------------------------------------------------------------------
TARGETS = [
    pytest.param("attn = nn.MultiheadAttention(16, 2, batch_first=True)", "attn(x, x, x, attn_mask=m)",
                 "nn.MultiheadAttention gets attn_mask", id="mha-attn_mask"),
    pytest.param("attn = nn.MultiheadAttention(16, 2, batch_first=True)", "attn(x, x, x, m)",
                 "nn.MultiheadAttention gets key_padding_mask", id="mha-positional-kpm"),
    pytest.param("attn = nn.MultiheadAttention(16, 2, batch_first=True)", "attn(x, x, x, None, False, m)",
                 "nn.MultiheadAttention gets attn_mask", id="mha-positional-attn_mask"),
    pytest.param("layer = nn.TransformerEncoderLayer(16, 2, batch_first=True)", "layer(x, m)",
                 "nn.TransformerEncoderLayer gets src_mask", id="encoder-layer-src_mask"),
    pytest.param("layer = nn.TransformerEncoderLayer(16, 2, batch_first=True)",
                 "layer(x, src_key_padding_mask=m)", "src_key_padding_mask", id="encoder-layer-kpm"),
    pytest.param("enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 2, batch_first=True), 2)",
                 "enc(x, mask=m)", "nn.TransformerEncoder gets mask", id="encoder-mask"),
    pytest.param("dec = nn.TransformerDecoderLayer(16, 2, batch_first=True)", "dec(x, x, tgt_mask=m)",
                 "tgt_mask", id="decoder-layer-tgt_mask"),
    pytest.param("model = nn.Transformer(16, 2, batch_first=True)", "model(x, x, tgt_mask=m)",
                 "nn.Transformer gets tgt_mask", id="transformer-tgt_mask"),
    pytest.param("from torch.nn.functional import scaled_dot_product_attention as sdpa", "sdpa(x, x, x, m)",
                 "F.scaled_dot_product_attention gets attn_mask", id="sdpa-alias-positional"),
    pytest.param("import torch.nn.functional as F",
                 "F.multi_head_attention_forward(x, x, x, 16, 2, w, b, None, None, False, 0.0, w, b, "
                 "attn_mask=m)", "F.multi_head_attention_forward gets attn_mask", id="functional-mha"),
]


@pytest.mark.parametrize(("build", "call", "says"), TARGETS)
def test_every_mask_argument(check, build, call, says):
    source = (f"import torch\nfrom torch import nn\n{build}\ndef f(x, w, b, L):\n"
              f"    m = torch.tril(torch.ones(L, L))\n    return {call}\n")
    (finding,) = check(source)
    assert finding.line == 6 and says in finding.message


# project classes and functions named like torch's in the rule's own examples: test_every_rule.py
DECOYS = [
    pytest.param("from torch import nn\nlinear = nn.Linear(4, 4)\n"
                 "def f(x, L):\n    return linear(x * torch.tril(torch.ones(L, L)))\n", id="not-a-mask"),
]


@pytest.mark.parametrize("source", DECOYS)
def test_decoys_are_not_flagged(check, source):
    assert check("import torch\n" + source) == []


# ---- the fix -------------------------------------------------------------------------------------------------------
FIXES = [
    pytest.param("m = torch.tril(torch.ones(L, L))", "m", SDPA_CALL, "attn_mask", "m.bool()", id="sdpa-keep"),
    pytest.param("m = torch.triu(torch.ones(L, L), diagonal=1)", "m", SDPA_CALL, "attn_mask", "m == 0",
                 id="sdpa-ignore"),
    pytest.param("m = torch.tril(torch.ones(L, L))", "m", MHA_CALL, "attn_mask", "m == 0", id="mha-keep"),
    pytest.param("m = torch.triu(torch.ones(L, L), diagonal=1)", "m", MHA_CALL, "attn_mask", "m.bool()",
                 id="mha-ignore"),
    pytest.param("keep = (tokens != pad_id).float()", "keep", MHA_CALL, "key_padding_mask", "keep == 0",
                 id="mha-kpm-keep"),
    pytest.param("keep = (tokens != pad_id).float()", "keep[:, None, None, :]", SDPA_CALL, "attn_mask",
                 "keep[:, None, None, :].bool()", id="sdpa-indexed"),
    pytest.param("", "1 - (tokens == pad_id).float()", MHA_CALL, "key_padding_mask",
                 "(1 - (tokens == pad_id).float()) == 0", id="parenthesised"),
]


@pytest.mark.parametrize(("setup", "mask", "call", "keyword", "replacement"), FIXES)
def test_fix_builds_the_boolean_mask_in_the_targets_convention(check, setup, mask, call, keyword, replacement):
    source = textwrap.dedent(function(setup, mask, call, keyword))
    (finding,) = check(source)
    fix = finding.fix
    assert fix is not None and fix.applicability == UNSAFE
    assert finding.help.endswith(f"convention ({'True = attend' if call == SDPA_CALL else 'True = ignore'}): "
                                 f"`{replacement}`"), finding.help
    after, applied = apply_fixes(source, [finding], unsafe=True)
    assert applied == 1
    assert after == source.replace(f"{keyword}={mask})", f"{keyword}={replacement})")
    assert apply_fixes(source, [finding], unsafe=False) == (source, 0)


@pytest.mark.parametrize(("setup", "mask", "call", "keyword", "replacement"), [p.values for p in FIXES])
def test_fix_is_idempotent_and_leaves_no_mask_finding(lint, setup, mask, call, keyword, replacement):
    source = textwrap.dedent(function(setup, mask, call, keyword))
    once, _ = apply_fixes(source, lint(source, CODE), unsafe=True)
    after = lint(once, min_severity="info")
    assert [f for f in after if f.code in (CODE, "MHA002")] == []
    assert apply_fixes(once, lint(once, CODE), unsafe=True) == (once, 0)


NO_FIX = [
    pytest.param("m = (tokens != 0).float()", "m", id="polarity-unknown"),
    pytest.param("m = torch.ones(L, L)\nm[0, 1:] = 0", "m", id="written-factory"),
    pytest.param("m = (key_padding_mask == 1).float()", "m", id="polarity-from-a-name-only"),
]


@pytest.mark.parametrize(("setup", "mask"), NO_FIX)
def test_no_fix_when_the_meaning_of_1_is_not_known(check, setup, mask):
    (finding,) = check(function(setup, mask, MHA_CALL, "key_padding_mask"))
    assert finding.fix is None
    assert finding.help == ("pass a boolean mask in nn.MultiheadAttention's convention (True = ignore), or an "
                            "additive one (0 where attended, -inf where masked)")


# ---- headline, evidence, help, explanation -----------------------------------------------------------------------


def test_keep_mask_into_sdpa_headline_evidence_help_and_explanation(check):
    (finding,) = check(function("m = torch.tril(torch.ones(L, L))", "m"))
    assert finding.message == ("F.scaled_dot_product_attention gets attn_mask=`m`, a 0/1 float mask (1 = attend) "
                               "built at line 6: added to the scores, it masks nothing")
    assert finding.evidence == ("`m = torch.tril(torch.ones(L, L))` at line 6",
                                "`torch.tril(torch.ones(L, L))` is True on and below the diagonal (the past) (line 6)",
                                "`torch.tril(torch.ones(L, L))` has no dtype=torch.bool, so it holds 0/1 floats")
    assert finding.help == "pass a boolean mask in F.scaled_dot_product_attention's convention (True = attend): " \
                           "`m.bool()`"
    assert finding.fix.title == "pass a boolean mask in F.scaled_dot_product_attention's convention"
    assert finding.explanation.startswith("F.scaled_dot_product_attention adds a floating-point mask to the "
                                          "attention scores")
    assert "`nn/functional.py:6466`" in finding.explanation
    assert "docs/torch-facts.md#mask-convention" in finding.explanation
    assert "comes from a name" not in finding.explanation


def test_a_meaning_read_from_a_name_is_hedged_in_the_headline_and_the_explanation(check):
    (finding,) = check(function("m = (key_padding_mask == 1).float()", "m", MHA_CALL, "key_padding_mask"))
    assert finding.severity == Severity.ERROR and finding.fix is None
    assert "gets key_padding_mask=`m`, a 0/1 float mask (likely 1 = ignore) built at line 6" in finding.message
    assert "comes from a name or another use of the mask, not from its construction" in \
        " ".join(finding.explanation.split())


def test_unknown_meaning_headline_names_no_meaning(check):
    (finding,) = check(function("m = torch.ones(L, L)\nm[0, 1:] = 0", "m"))
    assert finding.message == ("F.scaled_dot_product_attention gets attn_mask=`m`, a 0/1 float mask built at line 6: "
                               "added to the scores, it masks nothing")
    assert finding.evidence == ("`m = torch.ones(L, L)` at line 6 is filled with 1",
                                "entries are then set to 0 (line 7)")


def test_a_long_mask_expression_is_shortened_in_the_headline_but_not_in_the_help(check):
    mask = "torch.tril(torch.ones(L, L))" + ".unsqueeze(0)" * 10
    (finding,) = check(function("", mask))
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    assert finding.message.startswith("F.scaled_dot_product_attention gets attn_mask=`torch.tril(torch.ones(")
    # only the quoted code is cut, never the fixed words
    assert finding.message.endswith("..., a 0/1 float mask (1 = attend) built at line 6: added to the scores, it masks "
                                    "nothing")
    assert finding.help.endswith(f"`{mask}.bool()`")


def test_the_documentation_cites_anchors_and_says_where_numbers_come_from():
    documentation = RULE.documentation()
    assert "docs/torch-facts.md#float-masks-are-additive" in documentation
    assert "docs/torch-facts.md#mask-convention" in documentation
    assert "torch 2.13 experiment" in documentation
    for stale in ("facts" + " sheet", "shared" + "/", "Measured", "measured"):
        assert stale not in documentation


def test_every_user_visible_text_is_a_named_message():
    assert set(RULE.messages()) == {"ZERO_ONE_MASK", "ZERO_ONE_MASK_MEANING_GUESSED", "ZERO_ONE_MASK_MEANING_UNKNOWN"}


# ---- the probe -----------------------------------------------------------------------------------------------------
def test_arguments_name_the_construction(check):
    (finding,) = check(function("m = torch.tril(torch.ones(L, L))", "m"))
    assert dict(finding.arguments) == {
        "api": torchapi.SDPA, "parameter": "attn_mask", "convention": "keep", "kind": "0/1 float",
        "polarity": "keep", "mask_expression": "torch.tril(torch.ones(L, L))", "inverted_after": False}


def probe(arguments: dict):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    status, evidence = RULE.probe(dict(arguments), torch)
    assert isinstance(evidence, str) and "\n" not in evidence
    return status, evidence


def test_probe_confirms_the_rebuilt_tril_mask_into_sdpa(check):
    (finding,) = check(function("m = torch.tril(torch.ones(L, L))", "m"))
    status, evidence = probe(dict(finding.arguments))
    assert status == CONFIRMED, evidence
    assert "mask rebuilt from `torch.tril(torch.ones(L, L))` with L=6" in evidence
    assert "from the result with the boolean mask it stands for and only" in evidence


def test_probe_only_reproduces_a_keep_mask_into_mha_with_a_padding_stand_in(check):
    (finding,) = check(function("keep = (tokens != pad_id).float()", "keep", MHA_CALL, "key_padding_mask"))
    status, evidence = probe(dict(finding.arguments))
    assert status == REPRODUCED, evidence  # the mask's contents are assumed: the site's construction was not run
    assert evidence.startswith("reproduced with assumed mask contents (a padding mask with lengths 6, 4, 3, 2 "
                               "stood in): nn.MultiheadAttention with the 0/1 float mask as written is "), evidence
    assert "meaning 1 = attend" not in evidence  # the polarity is the site's (tokens != pad_id)
    assert "`(tokens != pad_id)` could not be rebuilt" in evidence
    from_correct = float(re.search(r"as written is ([0-9.]+) from the result", evidence).group(1))
    from_none = float(re.search(r"and only ([0-9.]+) from no mask at all", evidence).group(1))
    assert from_none < from_correct and from_correct > 1e-3


def test_probe_with_unknown_polarity_says_what_it_assumed(check):
    (finding,) = check(function("m = torch.ones(L, L)\nm[0, 1:] = 0", "m", MHA_CALL, "attn_mask"))
    status, evidence = probe(dict(finding.arguments))
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed mask contents (a causal tril mask stood in) and meaning "
                               "1 = attend: nn.MultiheadAttention with the 0/1 float mask as written"), evidence


def test_probe_with_a_rebuilt_mask_of_unknown_polarity_is_only_reproduced():
    status, evidence = probe({"api": torchapi.SDPA, "parameter": "attn_mask", "convention": "keep",
                              "kind": "0/1 float", "polarity": None,
                              "mask_expression": "torch.tril(torch.ones(L, L))", "inverted_after": False})
    assert status == REPRODUCED, evidence
    assert evidence.startswith("reproduced with assumed meaning 1 = attend: "), evidence
    assert evidence.endswith("; mask rebuilt from `torch.tril(torch.ones(L, L))` with L=6"), evidence


def test_probe_reads_attribute_sizes_and_transformer_targets():
    status, evidence = probe({"api": torchapi.ENCODER_LAYER, "parameter": "src_mask", "convention": "ignore",
                              "kind": "0/1 float", "polarity": "keep",
                              "mask_expression": "torch.tril(torch.ones(config.block_size, config.block_size))",
                              "inverted_after": False})
    assert status == CONFIRMED and "with config_block_size=6" in evidence
    assert "run as nn.MultiheadAttention" in evidence


def test_probe_does_not_confirm_the_fixed_boolean_mask():
    status, evidence = probe({"api": torchapi.SDPA, "parameter": "attn_mask", "convention": "keep", "kind": "bool",
                              "polarity": "keep",
                              "mask_expression": "torch.tril(torch.ones(L, L, dtype=torch.bool))",
                              "inverted_after": False})
    assert status == NOT_CONFIRMED
    # the mask as written gives the result of the boolean mask up to float noise (printed with 3 decimals)
    assert float(re.search(r"with the boolean mask as written is ([0-9.]+) from the result with the boolean mask",
                           evidence).group(1)) < 1e-3, evidence


def test_a_tril_of_ones_rebound_on_one_line_is_a_keep_mask_fixed_with_eq_0(lint):
    """Issue 34: `mask = torch.ones(5, 5); mask = torch.tril(mask)` given to nn.MultiheadAttention is a 0/1 float
    keep-mask (MHA008), not a boolean one in the wrong convention (MHA002, whose `~` fix raised TypeError)."""
    source = ("import torch\nfrom torch import nn\nattn = nn.MultiheadAttention(8, 2, batch_first=True)\n"
              "mask = torch.ones(5, 5); mask = torch.tril(mask)\nx = torch.randn(1, 5, 8)\n"
              "out = attn(x, x, x, attn_mask=mask)\n")
    [finding] = [f for f in lint(source) if f.code in ("MHA002", "MHA008")]
    assert (finding.code, finding.line, finding.severity) == (CODE, 6, Severity.ERROR)
    assert "a 0/1 float mask (1 = attend) built at line 4" in finding.message
    fixed, _ = apply_fixes(source, [finding], unsafe=True)
    assert "attn_mask=mask == 0)" in fixed
    assert [f for f in lint(fixed) if f.code in ("MHA002", "MHA008")] == []
