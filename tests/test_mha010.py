"""MHA010 positional-padding-mask: an attention mask given as MultiheadAttention's 4th positional argument, which is
key_padding_mask."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from mhalint import torchapi
from mhalint.cli import main
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, UNSAFE, Severity
from mhalint.fixes import apply_fixes
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
@pytest.mark.parametrize(("imp", "ctor"), [
    ("import torch.nn as nn", "nn.MultiheadAttention(16, 4)"),
    ("from torch import nn", "nn.MultiheadAttention(16, 4)"),
    ("import torch", "torch.nn.MultiheadAttention(16, 4)"),
    ("from torch.nn import MultiheadAttention", "MultiheadAttention(16, 4)"),
    ("from torch.nn import MultiheadAttention as MHA", "MHA(16, 4)"),
    ("import torch", "torch.nn.modules.activation.MultiheadAttention(16, 4)"),
    ("import torch", "torch.ao.nn.quantizable.MultiheadAttention(16, 4)"),
])
def test_every_alias(check, imp, ctor):
    found = check(site("attn(x, x, x, causal)[0]", imp=imp, ctor=ctor))
    assert [(f.line, f.column, f.severity) for f in found] == [(6, 12, Severity.ERROR)]


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
    # TransformerEncoderLayer's 2nd positional is src_mask (facts 9.2): correct there
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
    assert "line 5" in found[0].message


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
        assert f"the name `{name}`" in found[0].message


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
    assert "from the call at line 12" in found[0].message


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


def test_decoy_project_class(check):
    assert check("""\
        import torch
        class MultiheadAttention:
            def __call__(self, q, k, v, attn_mask=None): ...
        attn = MultiheadAttention()
        def f(x, L):
            return attn(x, x, x, torch.triu(torch.ones(L, L), 1))
        """) == []


def test_noqa(check):
    assert check(site("attn(x, x, x, causal)[0]  # noqa: MHA010")) == []
    assert check(site("attn(x, x, x, causal)[0]  # noqa")) == []
    assert len(check(site("attn(x, x, x, causal)[0]  # noqa: MHA006"))) == 1


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
    assert "Fix: pass it by keyword as `attn_mask=`" in found[0].message


def test_bad_example_fixed_equals_the_fixed_example(lint):
    bad = (EXAMPLES / "mha010_positional_mask_bad.py").read_text()
    after, applied = apply_fixes(bad, lint(bad, CODE), unsafe=True)
    assert applied == 1 and "self.attn(x, x, x, attn_mask=causal_mask, need_weights=False)" in after
    assert [f for f in lint(after) if f.code == CODE] == []


def test_arguments_carry_what_the_probe_needs(check):
    found = check(site("attn(x, x, x, m)[0]", mask="nn.Transformer.generate_square_subsequent_mask(L)", name="m"))
    assert dict(found[0].arguments) == {"api": torchapi.MHA, "mask_kind": "additive", "by_construction": True,
                                        "passed_as": "key_padding_mask"}


# ---- the probe -------------------------------------------------------------------------------------------------------
@pytest.fixture(name="torch", scope="module")
def torch_fixture():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("kind", ["bool", "additive", None])
def test_probe_confirms_a_bad_site(torch, kind):
    status, evidence = PositionalPaddingMask.probe({"api": torchapi.MHA, "mask_kind": kind,
                                                    "passed_as": "key_padding_mask"}, torch)
    assert status == CONFIRMED, evidence
    assert "runs silently" in evidence and "Expected key_padded_mask.shape[0] to be 2, but got 6" in evidence


def test_probe_does_not_confirm_a_fixed_site(torch):
    status, evidence = PositionalPaddingMask.probe({"api": torchapi.MHA, "mask_kind": "bool",
                                                    "passed_as": "attn_mask"}, torch)
    assert status == NOT_CONFIRMED and "diff 0.0e+00" in evidence, evidence


def test_probe_runs_through_the_cli_on_the_example(torch):
    result = CliRunner().invoke(main, ["check", "--probe", str(EXAMPLES / "mha010_positional_mask_bad.py")])
    assert "probe confirmed" in result.output and "runs silently and differs" in result.output, result.output
