"""MHA014 padding-mask-as-attn-mask: an (N, S) padding mask given as the attn_mask of SDPA or MultiheadAttention,
which read an (L, S) mask there."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, REPRODUCED, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rule import load_rules
from mhalint.rules.padding_mask_as_attn_mask import PaddingMaskAsAttnMask

CODE = "MHA014"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HEAD = "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
LENGTHS = "torch.arange(S, device=q.device)[None, :] < lengths[:, None]"
SDPA_TAIL = "F.scaled_dot_product_attention reads a 2-D attn_mask as (L, S)"
MHA_TAIL = "given as attn_mask, which nn.MultiheadAttention reads as (L, S)"


@pytest.fixture
def check(lint):
    def run(source: str, min_severity="info"):
        found = lint(textwrap.dedent(source), CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def sdpa(mask: str, call: str = "F.scaled_dot_product_attention(q, k, v, attn_mask=m)", imp: str = HEAD) -> str:
    return f"{imp}def f(q, k, v, lengths, S, tokens, pad_id, mask, pad_mask):\n    m = {mask}\n    return {call}\n"


def mha(mask: str, call: str = "attn(x, x, x, attn_mask=m)[0]") -> str:
    return (f"{HEAD}attn = nn.MultiheadAttention(16, 4, batch_first=True)\n"
            f"def f(x, lengths, tokens, *args, **kwargs):\n    B, S = tokens.shape\n    m = {mask}\n"
            f"    return {call}\n")


# ---- aliases and positions -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee"), [
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention"),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa", "sdpa"),
    ("import torch", "torch.nn.functional.scaled_dot_product_attention"),
    ("import torch", "torch._C._nn.scaled_dot_product_attention"),
    ("import torch", "torch.ops.aten.scaled_dot_product_attention"),
])
@pytest.mark.parametrize("args", ["q, k, v, attn_mask=m", "q, k, v, m", "q, k, v, m, 0.0, False"])
def test_every_sdpa_spelling_and_position(check, imp, callee, args):
    found = check(sdpa(LENGTHS, f"{callee}({args})", imp=f"import torch\n{imp}\n"))
    assert [(f.line, f.severity) for f in found] == [(5, Severity.ERROR)]
    assert found[0].message == f"`m` is an (N, S) padding mask (built from `lengths` at line 4), but {SDPA_TAIL}"


@pytest.mark.parametrize(("call", "flagged"), [
    ("attn(x, x, x, attn_mask=m)[0]", True),
    ("attn(x, x, x, None, False, m)[0]", True),  # 6th positional is attn_mask
    ("attn(query=x, key=x, value=x, attn_mask=m, need_weights=False)[0]", True),
    ("attn(x, x, x, key_padding_mask=m)[0]", False),
    ("attn(x, x, x, m)[0]", False),  # 4th positional is key_padding_mask: right for an (N, S) mask
    ("attn(*args, m)[0]", False),
])
def test_multihead_attention_positions(check, call, flagged):
    found = check(mha("tokens == 0", call))
    assert [(f.line, f.severity) for f in found] == ([(8, Severity.ERROR)] if flagged else [])


def test_other_apis_and_local_functions_are_not_this_rule(check):
    assert check(sdpa(LENGTHS, "torch.softmax(m, -1)")) == []
    local = "def scaled_dot_product_attention(q, k, v, attn_mask=None): ...\n"
    assert check(sdpa(LENGTHS, "scaled_dot_product_attention(q, k, v, attn_mask=m)", imp=HEAD + local)) == []


# ---- what shows an (N, S) mask ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mask", [
    LENGTHS,
    "torch.arange(S) >= lengths.unsqueeze(1)",
    "torch.arange(S).expand(len(lengths), S) < lengths.unsqueeze(-1)",
    "~(torch.arange(S)[None, :] >= lengths.view(-1, 1))",
    f"({LENGTHS}).float()",
    f"(1.0 - ({LENGTHS}).float()) * torch.finfo(q.dtype).min",
    f"torch.where({LENGTHS}, 0.0, float('-inf'))",
])
def test_built_from_lengths_is_an_error(check, mask):
    found = check(sdpa(mask))
    assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR)], mask
    assert "built from `lengths` at line 5" in found[0].message


@pytest.mark.parametrize(("mask", "why"), [
    ("tokens == 0", "`B, S = tokens.shape` at line 6"),
    ("tokens.eq(0).to(x.device)", "`B, S = tokens.shape` at line 6"),
    ("torch.zeros(B, S, dtype=torch.bool)", "`B, S = tokens.shape` at line 6"),
    ("torch.arange(S)[None, :] >= lengths[:, None]", "built from `lengths` at line 7"),
])
def test_multihead_attention_errors(check, mask, why):
    found = check(mha(mask))
    assert [(f.line, f.severity) for f in found] == [(8, Severity.ERROR)], mask
    assert found[0].message == f"`m` is an (N, S) padding mask ({why}), {MHA_TAIL}"


def test_a_documented_shape_and_a_key_padding_mask_use_are_provenance(check):
    documented = HEAD + textwrap.dedent('''\
        def f(q, k, v, attention_mask):
            """
            Args:
                attention_mask (torch.LongTensor): of shape (batch_size, sequence_length)
            """
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask.bool())
        ''')
    (finding,) = check(documented)
    assert finding.severity == Severity.ERROR and "(its shape is documented at line 5)" in finding.message
    consumed = HEAD + ("attn = nn.MultiheadAttention(16, 4)\nself_attn = nn.MultiheadAttention(16, 4)\n"
                       "def f(x, m):\n    y = attn(x, x, x, key_padding_mask=m)[0]\n"
                       "    return self_attn(y, y, y, attn_mask=m)[0]\n")
    (finding,) = check(consumed)
    assert finding.severity == Severity.ERROR and finding.line == 8
    assert "(also given as `key_padding_mask=m` at line 7)" in finding.message


@pytest.mark.parametrize(("mask", "basis"), [
    ("pad_mask", "by its name"),
    ("pad_mask.float()", "by its name"),
    ("tokens == pad_id", "`tokens` vs a pad id"),
])
def test_a_name_alone_gives_a_warning_without_a_fix(check, mask, basis):
    found = check(sdpa(mask))
    assert [(f.line, f.severity) for f in found] == [(6, Severity.WARNING)], mask
    assert found[0].message.startswith(f"`m` looks like an (N, S) padding mask ({basis}); ")
    assert found[0].fix is None and found[0].help.startswith("if it is (N, S), broadcast it per sample")
    assert "Here only the name" in " ".join(found[0].explanation.split())


@pytest.mark.parametrize("mask", [
    "mask",  # unknown
    "tokens",  # not compared with a pad id
    "torch.arange(S)[None, :] <= torch.arange(S)[:, None]",  # positions against positions: causal
    "torch.ones(S, S, dtype=torch.bool).tril()",
    "torch.triu(torch.ones(S, S, dtype=torch.bool), 1)",
    "nn.Transformer.generate_square_subsequent_mask(S)",
    "torch.zeros(S, S, dtype=torch.bool)",
    "torch.arange(S)[None, :] < lengths",  # lengths not shown to be one per row
    f"({LENGTHS})[:, None, None, :]",
    f"({LENGTHS}).unsqueeze(1).unsqueeze(2)",
    f"({LENGTHS}).view(-1, 1, 1, S)",
    f"({LENGTHS})[:, None, None].expand(-1, 8, S, -1)",
    "pad_mask[:, None, None, :]",
])
def test_correct_or_unknown_masks_stay_clean(check, mask):
    assert check(sdpa(mask)) == []


@pytest.mark.parametrize("mask", [
    "(tokens == 0)[:, None, :].expand(B, S, S).repeat_interleave(4, dim=0)",  # (N*h, L, S): right for MHA
    "torch.triu(torch.ones(S, S, dtype=torch.bool), 1)",
    "torch.zeros(S, S)",
])
def test_correct_multihead_attention_masks_stay_clean(check, mask):
    assert check(mha(mask)) == []


def test_a_reassigned_mask_is_read_where_it_is_used(check):
    source = sdpa(LENGTHS, "F.scaled_dot_product_attention(q, k, v, attn_mask=m)").replace(
        "    return", "    m = m[:, None, None, :]\n    return")
    assert check(source) == []


# ---- across helpers, attributes and callers ----------------------------------------------------------------------
def test_through_a_helper_a_self_attribute_and_a_caller(check):
    found = check("""\
        import torch
        import torch.nn.functional as F
        from torch import nn
        def lengths_to_mask(lengths, max_len):
            return torch.arange(max_len, device=lengths.device)[None, :] < lengths[:, None]
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def attend(self, x, mask):
                return self.attn(x, x, x, attn_mask=mask)[0]
            def forward(self, q, x, lengths):
                self.keep = lengths_to_mask(lengths, x.size(1))
                y = F.scaled_dot_product_attention(q, q, q, attn_mask=self.keep)
                return self.attend(x, ~self.keep)
        """)
    assert [(f.line, f.severity) for f in found] == [(11, Severity.ERROR), (14, Severity.ERROR)]
    assert "`mask` receives `~self.keep` from the call at line 15" in found[0].evidence
    assert any("returns `torch.arange" in e for e in found[1].evidence), found[1].evidence


def test_callers_that_disagree_give_no_finding(check):
    source = HEAD + ("attn = nn.MultiheadAttention(16, 4)\ndef block(x, m):\n    return attn(x, x, x, attn_mask=m)[0]\n"
                     "def f(x, lengths, causal):\n    pad = torch.arange(x.size(0))[None, :] >= lengths[:, None]\n"
                     "    return block(block(x, pad), causal)\n")
    assert check(source) == []


def test_a_swap_with_a_positional_causal_mask_is_left_to_mha010(lint):
    source = HEAD + ("attn = nn.MultiheadAttention(16, 4)\ndef f(x, L, lengths):\n"
                     "    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)\n"
                     "    pad = torch.arange(L)[None, :] >= lengths[:, None]\n    return attn(x, x, x, causal, False, pad)[0]\n")
    assert [f.code for f in lint(source, "MHA01")] == ["MHA010"]


def test_noqa(check):
    assert check(sdpa(LENGTHS, "F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # noqa: MHA014")) == []
    assert len(check(sdpa(LENGTHS, "F.scaled_dot_product_attention(q, k, v, attn_mask=m)  # noqa: MHA009"))) == 1


# ---- the fix ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mask", "call", "fixed"), [
    (LENGTHS, "F.scaled_dot_product_attention(q, k, v, attn_mask=m)",
     "F.scaled_dot_product_attention(q, k, v, attn_mask=m[:, None, None, :])"),
    (LENGTHS, "F.scaled_dot_product_attention(q, k, v, ~m)",
     "F.scaled_dot_product_attention(q, k, v, (~m)[:, None, None, :])"),
    (LENGTHS, "F.scaled_dot_product_attention(q, k, v, attn_mask=m.to(q.dtype))",
     "F.scaled_dot_product_attention(q, k, v, attn_mask=m.to(q.dtype)[:, None, None, :])"),
])
def test_sdpa_fix(check, mask, call, fixed):
    source = sdpa(mask, call)
    (finding,) = check(source)
    assert finding.fix is not None and finding.fix.applicability == UNSAFE
    after, applied = apply_fixes(source, [finding], unsafe=True)
    assert applied == 1 and after == source.replace(call, fixed)
    assert check(after) == []
    assert apply_fixes(source, [finding], unsafe=False) == (source, 0)


def test_sdpa_fix_for_a_three_d_query(check):
    source = HEAD + ("def f(x, lengths):\n    B, L, E = x.shape\n    keep = torch.arange(L)[None, :] < lengths[:, None]\n"
                     "    return F.scaled_dot_product_attention(x, x, x, attn_mask=keep)\n")
    (finding,) = check(source)
    after, applied = apply_fixes(source, [finding], unsafe=True)
    assert "attn_mask=keep[:, None, :])" in after and "(N, 1, S) for the 3-D query" in finding.help


@pytest.mark.parametrize(("call", "fixed"), [
    ("attn(x, x, x, attn_mask=m)[0]", "attn(x, x, x, key_padding_mask=m)[0]"),
    ("attn(x, x, x, attn_mask=m, need_weights=False)[0]", "attn(x, x, x, key_padding_mask=m, need_weights=False)[0]"),
    ("attn(x, x, x, attn_mask=m, is_causal=False)[0]", "attn(x, x, x, key_padding_mask=m, is_causal=False)[0]"),
])
def test_multihead_attention_fix(check, call, fixed):
    source = mha("tokens == 0", call)
    (finding,) = check(source)
    assert finding.fix is not None and finding.fix.applicability == UNSAFE
    after, applied = apply_fixes(source, [finding], unsafe=True)
    assert applied == 1 and after == source.replace(call, fixed)
    assert check(after) == []


@pytest.mark.parametrize(("call", "help"), [
    ("attn(x, x, x, None, False, m)[0]", "pass it as `key_padding_mask=m`"),
    ("attn(x, x, x, attn_mask=m, is_causal=True)[0]", "pass it as `key_padding_mask=m`"),
    ("attn(x, x, x, attn_mask=m, **kwargs)[0]", "pass it as `key_padding_mask=m`"),
    ("attn(x, x, x, attn_mask=m, key_padding_mask=m)[0]", "merge it into the key_padding_mask the call also gives"),
])
def test_no_multihead_attention_fix_where_renaming_would_clash(check, call, help):
    (finding,) = check(mha("tokens == 0", call))
    assert finding.fix is None and finding.help.startswith(help), finding.help


def test_bad_example_fixed_equals_the_fixed_example(lint):
    bad = (EXAMPLES / "mha014_padding_mask_as_attn_mask_bad.py").read_text()
    found = [f for f in lint(bad, CODE)]
    assert len(found) == 2 and all(f.severity == Severity.ERROR for f in found)
    after, applied = apply_fixes(bad, found, unsafe=True)
    assert applied == 2 and "attn_mask=keep[:, None, None, :])" in after and "key_padding_mask=~keep" in after
    assert [f for f in lint(after, min_severity="info") if f.code == CODE] == []


# ---- headline, evidence, help, explanation -------------------------------------------------------------------------
RULE = load_rules()[CODE]


def test_explanations_quote_the_experiments():
    (sdpa_finding,) = [f for f in _lint_invalid(0)]
    text = " ".join(sdpa_finding.explanation.split())
    assert "3.835 off the intended result at N = L = 4 and 4.144 at N = L = 10" in text
    mha_finding = _lint_invalid(1)[0]
    text = " ".join(mha_finding.explanation.split())
    assert "1.05 off the key_padding_mask= result at N = L = 6 (0.40 to 1.36 over 21 draws)" in text


def _lint_invalid(index):
    from conftest import lint
    return [f for f in lint(RULE.invalid[index].code, CODE)]


def test_a_long_mask_is_shortened_in_the_headline_not_in_the_help(check):
    long = " & ".join(["m.to(q.device)"] * 6)
    (finding,) = check(sdpa(LENGTHS, f"F.scaled_dot_product_attention(q, k, v, attn_mask={long})"))
    assert len(finding.message) <= HEADLINE_LIMIT and finding.message.startswith("`m.to(q.device) & "), finding.message
    assert finding.help == f"broadcast it per sample: `attn_mask=({long})[:, None, None, :]`, (N, 1, 1, S)"


def test_every_user_visible_text_is_named():
    assert set(RULE.messages()) == {"SDPA_PADDING", "SDPA_MAYBE_PADDING", "MHA_PADDING", "MHA_MAYBE_PADDING"}


def test_the_documentation_cites_anchors():
    documentation = " ".join(RULE.documentation().split())
    for anchor in ("padding-mask-shape", "sdpa-padding-broadcast"):
        assert f"docs/torch-facts.md#{anchor}" in documentation
    assert "MHA102" in documentation and "measured" not in documentation


# ---- the probe -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("api", [torchapi.SDPA, torchapi.MHA])
@pytest.mark.parametrize("kind", ["bool", "additive", None])
def test_probe_confirms(torch, api, kind):
    status, evidence = PaddingMaskAsAttnMask.probe({"api": api, "mask_kind": kind, "established": True}, torch)
    assert status == CONFIRMED, evidence
    assert float(re.search(r"runs silently and differs from .+? by ([0-9.]+);", evidence).group(1)) > 0.1
    assert "it raised RuntimeError" in evidence


def test_probe_only_reproduces_a_named_mask(torch):
    status, evidence = PaddingMaskAsAttnMask.probe({"api": torchapi.MHA, "mask_kind": None, "established": False}, torch)
    assert status == REPRODUCED and evidence.startswith("reproduced with assumed (N, S) padding mask"), evidence


def test_probe_runs_through_the_cli_on_the_example(torch, probed_examples):
    result = probed_examples.of("mha014_padding_mask_as_attn_mask_bad.py")
    assert result.output.count("probe confirmed") == 2, result.output
