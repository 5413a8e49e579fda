"""MHA010 positional-padding-mask: an attention mask given as MultiheadAttention's 4th positional argument, which is
key_padding_mask."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from mhalint import torchapi
from mhalint.finding import HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rule import load_rules
from mhalint.rules.positional_padding_mask import PositionalPaddingMask

CODE = "MHA010"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CAUSAL = "torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)"


@pytest.fixture
def check(lint):
    def run(source: str, min_severity=None):
        found = lint(textwrap.dedent(source), CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def site(call: str, mask: str = CAUSAL, name: str = "causal", imp: str = "from torch import nn",
         ctor: str = "nn.MultiheadAttention(16, 4, batch_first=True)") -> str:
    return (f"import torch\n{imp}\nattn = {ctor}\n"
            f"def f(x, L, pad, attn_mask_in, causal_mask, mask, *args, **kwargs):\n"
            f"    {name} = {mask}\n"
            f"    return {call}\n")


# ---- aliases and positions -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "flagged"), [
    ("attn(x, x, x, causal)[0]", True),
    ("attn(x, x, x, causal, False)[0]", True),
    ("attn(x, x, x, causal, need_weights=False)[0]", True),
    ("attn(query=x, key=x, value=x, key_padding_mask=causal)[0]", False),  # by keyword: deliberate
    ("attn(x, x, x, attn_mask=causal)[0]", False),
    ("attn(x, x, x, None, False, causal)[0]", False),  # 6th positional is attn_mask: right
    ("attn(x, x, x, None)[0]", False),
    ("attn(*args, causal)[0]", False),  # the position is unknown after *args
    ("attn(x, x, causal)[0]", False),  # 3rd is value
])
def test_only_the_fourth_positional_argument(check, call, flagged):
    assert len(check(site(call))) == (1 if flagged else 0)


def test_other_entry_points_are_not_this_rule(check):
    # TransformerEncoderLayer's 2nd positional is src_mask (docs/torch-facts.md#positional-order): correct there
    assert check(site("layer(x, causal)", ctor="nn.TransformerEncoderLayer(16, 4)").replace(
        "attn = ", "layer = ")) == []
    assert check(site("torch.nn.functional.scaled_dot_product_attention(x, x, x, causal)")) == []


# ---- what makes it an attention mask ---------------------------------------------------------------------------
@pytest.mark.parametrize("mask", [
    CAUSAL,
    "torch.tril(torch.ones(L, L)) == 0",
    "torch.ones(L, L, dtype=torch.bool).triu(1)",
    "nn.Transformer.generate_square_subsequent_mask(L)",
    "nn.Transformer.generate_square_subsequent_mask(L).to(x.device)",
    "torch.full((L, L), float('-inf')).triu(1)",
    "torch.zeros(L, L).masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), float('-inf'))",
    "torch.zeros(x.size(1), x.size(1), dtype=torch.bool)",
])
def test_construction_shows_an_attention_mask(check, mask):
    found = check(site("attn(x, x, x, m)[0]", mask=mask, name="m"))
    assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR)]
    assert found[0].message.endswith(" mask built at line 5"), found[0].message
    assert found[0].evidence[0].startswith("`m") and "at line 5" in found[0].evidence[0], found[0].evidence


@pytest.mark.parametrize("mask", [
    "pad",
    "x.new_zeros(x.size(0), L, dtype=torch.bool)",  # (N, S): a padding mask
    "torch.zeros(2, L, dtype=torch.bool)",
    "torch.arange(L)[None, :] >= pad[:, None]",
])
def test_a_padding_mask_is_clean(check, mask):
    assert check(site("attn(x, x, x, m)[0]", mask=mask, name="m"), min_severity="info") == []


@pytest.mark.parametrize(("name", "flagged"), [
    ("attn_mask", True), ("causal_mask", True), ("self_attn_mask", True), ("subsequent_mask", True),
    ("look_ahead_mask", True), ("future_mask", True),
    ("mask", False), ("attention_mask", False),  # Hugging Face's attention_mask is an (N, S) padding mask
    ("attn_padding_mask", False), ("key_padding_mask", False),
])
def test_names_alone_give_a_warning(check, name, flagged):
    source = f"from torch import nn\nattn = nn.MultiheadAttention(16, 4)\ndef f(x, {name}):\n" \
             f"    return attn(x, x, x, {name})[0]\n"
    found = check(source)
    assert [(f.line, f.severity) for f in found] == ([(4, Severity.WARNING)] if flagged else [])
    if flagged:
        assert found[0].message == (f"`{name}` is passed 4th positionally to nn.MultiheadAttention, where "
                                    "key_padding_mask goes, but its name says it is an attention mask")
        assert found[0].evidence[0].startswith(f"the name `{name}` says it is an attention mask")


def test_a_name_is_overruled_by_a_padding_construction(check):
    source = "from torch import nn\nattn = nn.MultiheadAttention(16, 4)\ndef f(x, tokens):\n" \
             "    attn_mask = tokens == 0  # pad\n    return attn(x, x, x, attn_mask.to(x.device))[0]\n"
    assert check(source) == []
    assert check(source.replace("tokens == 0", "x.sum(-1) == PAD_ID")) == []


def test_through_self_attribute_buffer_and_parameter(check):
    found = check("""\
        import torch
        from torch import nn
        class Decoder(nn.Module):
            def __init__(self, L=8):
                super().__init__()
                self.attn = nn.MultiheadAttention(16, 4)
                self.register_buffer("future", torch.ones(L, L, dtype=torch.bool).triu(1))
            def block(self, x, m):
                return self.attn(x, x, x, m)[0]
            def forward(self, x):
                y = self.attn(x, x, x, self.future[:x.size(0), :x.size(0)])[0]
                return self.block(y, self.future)
        """)
    assert [(f.line, f.severity) for f in found] == [(9, Severity.ERROR), (11, Severity.ERROR)]
    assert found[0].message.endswith("but it is an (L, L) causal mask built at line 7"), found[0].message
    assert "`m` receives `self.future` from the call at line 12" in found[0].evidence


def test_a_helper_function_that_builds_the_mask(check):
    found = check("""\
        import torch
        from torch import nn
        attn = nn.MultiheadAttention(16, 4)
        def make_mask(size):
            return torch.tril(torch.ones(size, size)) == 0
        def f(x):
            return attn(x, x, x, make_mask(x.size(0)))[0]
        """)
    assert [(f.line, f.severity) for f in found] == [(7, Severity.ERROR)]


# ---- the fix ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("call", "fixed"), [
    ("attn(x, x, x, causal)[0]", "attn(x, x, x, attn_mask=causal)[0]"),
    ("attn(x, x, x, causal, need_weights=False)[0]", "attn(x, x, x, attn_mask=causal, need_weights=False)[0]"),
    ("attn(x, x, x, causal[:4, :4].to(x.device))[0]", "attn(x, x, x, attn_mask=causal[:4, :4].to(x.device))[0]"),
    ("attn(x, x, x,\n                causal,\n                need_weights=False)[0]",
     "attn(x, x, x,\n                attn_mask=causal,\n                need_weights=False)[0]"),
])
def test_fix_text_applicability_and_idempotence(check, call, fixed):
    source = site(call)
    found = check(source)
    assert len(found) == 1 and found[0].fix is not None and found[0].fix.applicability == UNSAFE
    after, applied = apply_fixes(source, found, unsafe=True)
    assert applied == 1 and after == source.replace(call, fixed)
    assert check(after, min_severity="info") == []
    assert apply_fixes(source, found, unsafe=False) == (source, 0)


@pytest.mark.parametrize("call", [
    "attn(x, x, x, causal, False, None)[0]",  # a later positional argument
    "attn(x, x, x, causal, attn_mask=None)[0]",  # attn_mask already given
    "attn(x, x, x, causal, **kwargs)[0]",  # **kwargs may hold attn_mask
])
def test_no_fix_where_a_keyword_would_clash(check, call):
    found = check(site(call))
    assert len(found) == 1 and found[0].fix is None
    assert found[0].help.startswith("pass it by keyword as `attn_mask=`"), found[0].help


def test_bad_example_fixed_equals_the_fixed_example(lint):
    bad = (EXAMPLES / "mha010_positional_padding_mask_bad.py").read_text()
    after, applied = apply_fixes(bad, lint(bad, CODE), unsafe=True)
    assert applied == 1 and "self.attn(x, x, x, attn_mask=causal_mask, need_weights=False)" in after
    assert [f for f in lint(after) if f.code == CODE] == []


def test_arguments_carry_what_the_probe_needs(check):
    found = check(site("attn(x, x, x, m)[0]", mask="nn.Transformer.generate_square_subsequent_mask(L)", name="m"))
    assert dict(found[0].arguments) == {"api": torchapi.MHA, "mask_kind": "additive", "by_construction": True,
                                        "passed_as": "key_padding_mask"}


# ---- headline, evidence, help, explanation -------------------------------------------------------------------------
RULE = load_rules()[CODE]
_PASSED_4TH = "is passed 4th positionally to nn.MultiheadAttention, where key_padding_mask goes, but "


def test_built_mask_help_and_explanation(check):
    (finding,) = check(site("attn(x, x, x, causal, need_weights=False)[0]"))
    assert finding.message == f"`causal` {_PASSED_4TH}it is an (L, L) causal mask built at line 5"
    assert finding.evidence == (f"`causal` = `{CAUSAL}` at line 5 is an (L, L) causal mask",)
    assert finding.help == "pass it by keyword: `attn_mask=causal`"
    assert finding.fix.title == "pass the mask as attn_mask="
    explanation = " ".join(finding.explanation.split())  # the prose is wrapped
    assert "`MultiheadAttention.forward(query, key, value, key_padding_mask, need_weights, attn_mask, ...)`" \
        in explanation
    assert "`Expected key_padded_mask.shape[0] to be N, but got L`" in explanation
    assert "torch 2.13 experiment" in explanation and "measured" not in explanation
    assert 1.0 < float(re.search(r"the output was ([0-9.]+) away from the intended", explanation).group(1)) < 1.1
    assert "Here only the name" not in explanation


def test_a_name_only_warning_hedges_its_help_and_explanation(check):
    source = "from torch import nn\nattn = nn.MultiheadAttention(16, 4)\ndef f(x, attn_mask):\n" \
             "    return attn(x, x, x, attn_mask)[0]\n"
    (finding,) = check(source)
    assert finding.severity == Severity.WARNING
    assert finding.help == "if `attn_mask` is an (L, S) attention mask, pass it by keyword: `attn_mask=attn_mask`"
    assert "Here only the name `attn_mask` says it is an attention mask" in " ".join(finding.explanation.split())


@pytest.mark.parametrize(("call", "help"), [
    ("attn(x, x, x, causal, False)[0]",
     "pass it by keyword as `attn_mask=`, and the later positional arguments by keyword too"),
    ("attn(x, x, x, causal, attn_mask=None)[0]",
     "pass it by keyword as `attn_mask=` in place of the attn_mask the call also gives (merge the two)"),
])
def test_help_without_a_fix_says_what_to_do(check, call, help):
    (finding,) = check(site(call))
    assert finding.fix is None and finding.help == help


def test_a_long_mask_expression_is_shortened_in_the_headline_but_not_in_the_help(check):
    mask = "causal[:L + " + " + ".join(["0"] * 40) + ", :L]"
    (finding,) = check(site(f"attn(x, x, x, {mask})[0]"))
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    assert finding.message.startswith("`causal[:L + 0 + 0") and finding.message.endswith(
        f"... {_PASSED_4TH}it is an (L, L) causal mask built at line 5")
    assert finding.help == f"pass it by keyword: `attn_mask={mask}`"


def test_the_documentation_cites_anchors_and_says_where_numbers_come_from():
    documentation = " ".join(RULE.documentation().split())
    assert "docs/torch-facts.md#positional-order" in documentation
    assert "In a torch 2.13 experiment (docs/torch-facts.md#positional-order), the output was 1.04" in documentation
    for stale in ("facts" + " sheet", "shared" + "/", "Measured", "measured", "exp_11"):
        assert stale not in documentation


def test_every_user_visible_text_is_named():
    assert set(RULE.messages()) == {"BUILT_AS_ATTENTION_MASK", "NAMED_AS_ATTENTION_MASK"}


# ---- the probe -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["bool", "additive", None])
def test_probe_reproduces_a_bad_site_with_a_causal_mask_in_place_of_the_one_built(torch, kind):
    status, evidence = PositionalPaddingMask.probe({"api": torchapi.MHA, "mask_kind": kind,
                                                    "passed_as": "key_padding_mask"}, torch)
    assert status == REPRODUCED, evidence  # the construction says (L, L); its contents are not rebuilt
    assert evidence.startswith("reproduced with assumed 6 x 6 causal mask contents: "), evidence
    assert "runs silently" in evidence and "Expected key_padded_mask.shape[0] to be 2, but got 6" in evidence
    assert float(re.search(r"differs from attn_mask= by ([0-9.]+);", evidence).group(1)) > 1e-2, evidence


def test_probe_only_reproduces_a_mask_known_by_its_name():
    torch = pytest.importorskip("torch")
    status, evidence = PositionalPaddingMask.probe({"api": torchapi.MHA, "mask_kind": None, "by_construction": False,
                                                    "passed_as": "key_padding_mask"}, torch)
    assert status == REPRODUCED, evidence  # that it is an (L, L) mask is the premise, assumed: nothing about the site
    assert evidence.startswith("reproduced with assumed (L, L) causal mask: with N == L == 6 the call runs silently")
    assert float(re.search(r"differs from attn_mask= by ([0-9.]+);", evidence).group(1)) > 1e-2, evidence
    assert "the site's mask was known by its name only, so a causal mask stood in" in evidence


def test_probe_does_not_confirm_a_fixed_site(torch):
    status, evidence = PositionalPaddingMask.probe({"api": torchapi.MHA, "mask_kind": "bool",
                                                    "passed_as": "attn_mask"}, torch)
    assert status == NOT_CONFIRMED, evidence
    # the same result as attn_mask= up to float noise (which depends on threads and kernels)
    assert float(re.search(r"\(diff ([0-9.]+e[+-][0-9]+)\)", evidence).group(1)) < 1e-5, evidence


def test_probe_runs_through_the_cli_on_the_example(torch, probed_examples):
    result = probed_examples.of("mha010_positional_padding_mask_bad.py")  # `check --probe` over the examples, once
    assert "probe reproduced" in result.output and "runs silently and differs" in result.output, result.output


def test_the_positional_pass_under_check_is_no_evidence_of_a_padding_mask(lint):
    """Passing a tensor by keyword as key_padding_mask says it is (N, S); passing it 4th by position is the very
    thing in question, so a named attention mask there still gets its warning."""
    source = ("from torch import nn\nattn = nn.MultiheadAttention(16, 4)\ndef f(x, causal_mask):\n"
              "    return attn(x, x, x, {})[0]\n")
    [finding] = lint(source.format("causal_mask"), "MHA010")
    assert finding.severity == Severity.WARNING
    assert lint(source.format("key_padding_mask=causal_mask"), "MHA010") == []
