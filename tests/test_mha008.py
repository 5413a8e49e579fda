"""MHA008 float-keep-mask: a 0/1 float mask is added to the attention scores, so it masks nothing."""

from __future__ import annotations

import textwrap

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, UNSAFE, Severity
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
    assert meaning in finding.message
    assert "0.676" in finding.message and "0.325" in finding.message and "added" in finding.message


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


def test_noqa_applies_on_the_line_of_the_call(check):
    assert check(function("m = torch.tril(torch.ones(L, L))", "m", call=SDPA_CALL + "  # noqa: MHA008")) == []
    assert check(function("m = torch.tril(torch.ones(L, L))", "m", call=SDPA_CALL + "  # noqa")) == []
    assert len(check(function("m = torch.tril(torch.ones(L, L))", "m", call=SDPA_CALL + "  # noqa: MHA002"))) == 1
    # a directive on the line that builds the mask does not silence the call
    assert len(check(function("m = torch.tril(torch.ones(L, L))  # noqa: MHA008", "m"))) == 1


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


DECOYS = [
    pytest.param("def scaled_dot_product_attention(q, k, v, attn_mask): ...\n"
                 "def f(q, L):\n    return scaled_dot_product_attention(q, q, q, torch.tril(torch.ones(L, L)))\n",
                 id="project-function"),
    pytest.param("class MultiheadAttention:\n    def __init__(self, *a): ...\n    def __call__(self, *a, **k): ...\n"
                 "attn = MultiheadAttention(16, 2)\n"
                 "def f(x, L):\n    return attn(x, x, x, attn_mask=torch.tril(torch.ones(L, L)))\n",
                 id="project-class"),
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
    assert f"`{replacement}`" in finding.message
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
    assert "or an additive one (0 where attended, -inf where masked)" in finding.message


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


def test_probe_confirms_a_keep_mask_into_mha_with_a_padding_stand_in(check):
    (finding,) = check(function("keep = (tokens != pad_id).float()", "keep", MHA_CALL, "key_padding_mask"))
    status, evidence = probe(dict(finding.arguments))
    assert status == CONFIRMED, evidence
    assert evidence.startswith("nn.MultiheadAttention with the 0/1 float mask as written")
    assert "a padding mask (lengths 6, 4, 3, 2) stood in" in evidence


def test_probe_with_unknown_polarity_says_what_it_assumed(check):
    (finding,) = check(function("m = torch.ones(L, L)\nm[0, 1:] = 0", "m", MHA_CALL, "attn_mask"))
    status, evidence = probe(dict(finding.arguments))
    assert status == CONFIRMED and "a causal tril mask stood in; assumed 1 = attend" in evidence


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
    assert "with the boolean mask as written is 0.000 from the result with the boolean mask" in evidence
