"""MHA009 sdpa-causal-and-mask: F.scaled_dot_product_attention given an attn_mask and is_causal=True together."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mhalint import torchapi
from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, NOT_CONFIRMED, REPRODUCED, Severity
from mhalint.rule import load_rules
from mhalint.rules.sdpa_causal_and_mask import SdpaCausalAndMask

CODE = "MHA009"
ROOT = Path(__file__).resolve().parents[1]

# (import line, callee expression) for every spelling of SDPA (docs/torch-facts.md#entry-points).
ALIASES = [
    ("import torch.nn.functional as F", "F.scaled_dot_product_attention"),
    ("import torch", "torch.nn.functional.scaled_dot_product_attention"),
    ("from torch.nn import functional as F", "F.scaled_dot_product_attention"),
    ("from torch.nn.functional import scaled_dot_product_attention", "scaled_dot_product_attention"),
    ("from torch.nn.functional import scaled_dot_product_attention as sdpa", "sdpa"),
    ("import torch", "torch._C._nn.scaled_dot_product_attention"),
    ("from torch._C._nn import scaled_dot_product_attention as sdpa", "sdpa"),
    ("import torch", "torch.ops.aten.scaled_dot_product_attention"),
]


@pytest.fixture
def check(lint):
    def run(source: str, min_severity=None):
        found = lint(source, CODE, min_severity=min_severity)
        assert all(f.code == CODE for f in found), found  # no engine diagnostics (crash, parse error)
        return found
    return run


def call(args: str, imp: str = "import torch.nn.functional as F", callee: str = "F.scaled_dot_product_attention",
         prelude: str = "") -> str:
    return f"import torch\n{imp}\n{prelude}def f(q, k, v, m, flag):\n    return {callee}({args})\n"


# ---- aliases -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("imp", "callee"), ALIASES, ids=[c for _, c in ALIASES])
def test_every_alias_with_only_one_of_them_is_clean(check, imp, callee):
    assert check(call("q, k, v, attn_mask=m", imp, callee)) == []
    assert check(call("q, k, v, is_causal=True", imp, callee)) == []


# ---- keyword and positional arguments (attn_mask is 4th, is_causal 6th: docs/torch-facts.md#positional-order) ---
@pytest.mark.parametrize(("args", "flagged"), [
    ("q, k, v, m, 0.0, True", True),
    ("q, k, v, m, 0.1, True, scale=0.5", True),
    ("q, k, v, m, is_causal=True", True),
    ("q, k, v, attn_mask=m, dropout_p=0.0, is_causal=True", True),
    ("query=q, key=k, value=v, is_causal=True, attn_mask=m", True),
    ("q, k, v, m[:, None, None, :], 0.0, True", True),
    ("q, k, v, ~m, 0.0, True", True),
    ("q, k, v, m, 0.0, False", False),
    ("q, k, v, m, 0.0", False),
    ("q, k, v, m", False),
    ("q, k, v, None, 0.0, True", False),
    ("q, k, v, attn_mask=None, is_causal=True", False),
    ("q, k, v, is_causal=True", False),
    ("q, k, v, m, True", False),  # the 5th positional is dropout_p, not is_causal
    ("q, k, v, None, 0.0, True, m", False),  # a 7th positional is a TypeError (scale is keyword-only)
    ("q, k, v, m, 0.0, flag", False),  # unknown flag
    ("q, k, v, m, is_causal=m is None", False),
    ("q, k, v, is_causal=True, **kw", False),  # **kw may or may not carry a mask: not shown
    ("*args, is_causal=True", False),
])
def test_keyword_and_positional(check, args, flagged):
    assert len(check(call(args))) == (1 if flagged else 0)


# ---- values through constants, defaults and attributes ------------------------------------------------------
@pytest.mark.parametrize(("prelude", "flag", "flagged"), [
    ("CAUSAL = True\n", "CAUSAL", True),
    ("CAUSAL = False\n", "CAUSAL", False),
    ("CAUSAL = not False\n", "CAUSAL", True),
    ("A = True\nB = A\n", "B", True),
    ("CAUSAL = True\nif big:\n    CAUSAL = False\n", "CAUSAL", False),  # conditionally reassigned: unknown
    ("", "1 == 1", False),  # comparisons are not resolved: unknown
])
def test_is_causal_through_constants(check, prelude, flag, flagged):
    assert len(check(call(f"q, k, v, attn_mask=m, is_causal={flag}", prelude=prelude))) == (1 if flagged else 0)


def test_evidence_shows_the_chain_of_values(check):
    found = check(call("q, k, v, attn_mask=m, is_causal=CAUSAL", prelude="CAUSAL = True\n"))
    assert "attn_mask=`m` and is_causal=`CAUSAL` (True): " in found[0].message
    assert found[0].evidence == ("attn_mask=m", "is_causal=CAUSAL resolves to True", "`CAUSAL` = True at line 3")


@pytest.mark.parametrize(("signature", "instantiation", "flagged"), [
    ("causal=True", "", True),
    ("causal=False", "", False),
    ("causal=False", "Attn(causal=True)", True),
    ("causal=True", "Attn(causal=False)", False),
    # callers disagree: the instance that passes True has both (values.taking through `self.causal = causal`)
    ("causal=True", "Attn(causal=True)\nAttn(causal=False)", True),
    ("causal", "", False),
])
def test_is_causal_through_self_attribute_and_defaults(check, signature, instantiation, flagged):
    source = (f"import torch\nimport torch.nn.functional as F\nclass Attn(torch.nn.Module):\n"
              f"    def __init__(self, {signature}):\n        super().__init__()\n        self.causal = causal\n"
              f"    def forward(self, q, k, v, mask):\n"
              f"        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)\n"
              f"{instantiation}\n")
    assert [f.line for f in check(source)] == ([8] if flagged else [])


@pytest.mark.parametrize(("signature", "calls", "flagged"), [
    ("mask=None", "", False),  # a mask that defaults to None and that nobody in the module passes
    ("mask=None", "f(q, k, v)", False),
    ("mask=None", "f(q, k, v, mask=None)", False),
    ("mask=None", "f(q, k, v, mask=keep)", True),
    ("mask", "", True),  # a required mask argument: a tensor
])
def test_mask_that_resolves_to_none_is_not_flagged(check, signature, calls, flagged):
    source = (f"import torch.nn.functional as F\ndef f(q, k, v, {signature}):\n"
              f"    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)\n"
              f"def g(q, k, v, keep):\n    {calls or 'pass'}\n")
    assert [f.line for f in check(source)] == ([3] if flagged else [])


def test_none_constant_mask_is_not_flagged(check):
    assert check(call("q, k, v, attn_mask=NO_MASK, is_causal=True", prelude="NO_MASK = None\n")) == []


# ---- the headline, evidence, help and explanation ----------------------------------------------------------------
def test_headline_evidence_help_and_explanation(check):
    (finding,) = check(call("q, k, v, attn_mask=m, is_causal=True"))
    assert finding.message == ("F.scaled_dot_product_attention gets attn_mask=`m` and is_causal=True: CPU's default "
                               "kernel applies both, the MATH kernel raises")
    assert finding.evidence == ("attn_mask=m", "is_causal=True")
    assert finding.help.startswith("decide which was meant: fold the causal pattern into the mask, "
                                   "`attn_mask=m & torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, "
                                   "device=q.device).tril()`")
    assert finding.help.endswith(", and drop is_causal, or drop attn_mask and keep is_causal=True")
    explanation = " ".join(finding.explanation.split())  # the prose is wrapped
    assert "`nn/functional.py:6471`" in explanation
    assert "torch 2.13 experiment on CPU" in explanation and "measured" not in explanation
    assert 2.9 < float(re.search(r"([0-9.]+) away from the mask-only result", explanation).group(1)) < 2.95
    assert 1.9 < float(re.search(r"([0-9.]+) from the causal-only one", explanation).group(1)) < 1.95
    assert "Explicit attn_mask should not be set when is_causal=True" in explanation
    assert "CUDA was not tried" in explanation
    assert "docs/torch-facts.md#sdpa-causal-and-mask" in explanation


RULE = load_rules()[CODE]


def test_a_long_mask_is_shortened_in_the_headline_but_not_in_the_help(check):
    mask = "keep_the_tokens_of_this_batch" + "[:, None]" * 12
    (finding,) = check(call(f"q, k, v, attn_mask={mask}, is_causal=True"))
    assert len(finding.message) <= HEADLINE_LIMIT, finding.message
    assert finding.message.startswith("F.scaled_dot_product_attention gets attn_mask=`keep_the_tokens_of_this_batch")
    assert finding.message.endswith("... and is_causal=True: CPU's default kernel applies both, the MATH kernel "
                                    "raises")
    assert f"`attn_mask={mask} & torch.ones(" in finding.help


def test_the_documentation_cites_anchors_and_says_where_numbers_come_from():
    documentation = " ".join(RULE.documentation().split())
    assert "docs/torch-facts.md#sdpa-causal-and-mask" in documentation
    assert "In a torch 2.13 experiment on CPU" in documentation
    for stale in ("facts" + " sheet", "shared" + "/", "Measured", "measured"):
        assert stale not in documentation


def test_every_user_visible_text_is_a_named_message():
    assert set(RULE.messages()) == {"MASK_AND_CAUSAL"}


@pytest.mark.parametrize(("body", "mask_arg", "fold"), [
    ("    keep = tokens != 0\n", "keep[:, None, None, :]",
     "fold the causal pattern into the mask, `attn_mask=keep[:, None, None, :] & torch.ones(q.size(-2), "
     "k.size(-2), dtype=torch.bool, device=q.device).tril()`,"),
    ("    bias = torch.zeros(8, 8).masked_fill(pad, float('-inf'))\n", "bias",
     "fold the causal pattern into the float mask, `attn_mask=bias.masked_fill(~torch.ones(q.size(-2), "
     "k.size(-2), dtype=torch.bool, device=q.device).tril(), float(\"-inf\"))`,"),
    ("", "m",
     "(for a float mask `attn_mask=m.masked_fill(~torch.ones("),  # unknown kind: both forms
    ("    keep = tokens != 0\n", "~keep",
     "`attn_mask=(~keep) & torch.ones("),  # an operator expression is parenthesised
])
def test_fold_text_follows_the_mask_kind(check, body, mask_arg, fold):
    source = (f"import torch\nimport torch.nn.functional as F\ndef f(q, k, v, m, tokens, pad):\n{body}"
              f"    return F.scaled_dot_product_attention(q, k, v, attn_mask={mask_arg}, is_causal=True)\n")
    found = check(source)
    assert fold in found[0].help, found[0].help


def test_fold_text_without_simple_query_and_key_uses_l_and_s(check):
    found = check(call("q.transpose(1, 2), k, v, attn_mask=m, is_causal=True"))
    assert "torch.ones(L, S, dtype=torch.bool).tril()" in found[0].help


def test_mask_origin_line_is_named(check):
    source = ("import torch.nn.functional as F\ndef f(q, k, v, tokens):\n    keep = tokens != PAD\n"
              "    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=True)\n")
    assert check(source)[0].evidence[0] == "attn_mask=keep (built at line 3)"


# ---- decoys ----------------------------------------------------------------------------------------------------
# project functions named like torch's in the rule's own examples: test_every_rule.py
@pytest.mark.parametrize("source", [
    "import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"
    "def f(x, m):\n    return attn(x, x, x, attn_mask=m, is_causal=True)\n",  # MHA's hint: not this rule
    "import torch.nn.functional as F\ndef f(q, w, b, ow, ob, m):\n"
    "    return F.multi_head_attention_forward(q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob,\n"
    "                                          attn_mask=m, is_causal=True)\n",
])
def test_other_functions_are_not_sdpa(check, source):
    assert check(source) == []


# ---- positions, noqa, severity threshold ------------------------------------------------------------------------
def test_multi_line_call_is_reported_at_its_first_line(check):
    source = """\
        import torch.nn.functional as F
        def f(q, k, v, mask):
            return F.scaled_dot_product_attention(  # comment
                q, k, v,
                attn_mask=mask,
                is_causal=True,
            )
    """
    assert [(f.line, f.column, f.end_line) for f in check(source)] == [(3, 12, 7)]


def test_severity_is_warning(check):
    source = call("q, k, v, attn_mask=m, is_causal=True")
    assert [f.severity for f in check(source)] == [Severity.WARNING]
    assert check(source, min_severity=Severity.ERROR) == []


def test_arguments_carry_what_the_probe_needs(check):
    source = ("import torch\nimport torch.nn.functional as F\ndef f(q, k, v, pad):\n"
              "    bias = torch.zeros(8, 8).masked_fill(pad, float('-inf'))\n"
              "    return F.scaled_dot_product_attention(q, k, v, bias, 0.0, True)\n")
    assert dict(check(source)[0].arguments) == {"api": torchapi.SDPA, "attn_mask": True, "is_causal": True,
                                                "mask_kind": "additive"}


# ---- the probe -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["bool", "additive", None])
def test_probe_confirms_a_bad_site(torch, kind):
    status, evidence = SdpaCausalAndMask.probe({"api": torchapi.SDPA, "attn_mask": True, "is_causal": True,
                                                "mask_kind": kind}, torch)
    assumed = "" if kind else "reproduced with assumed a bool mask (the site's mask kind is not known): "
    assert status == (CONFIRMED if kind else REPRODUCED), evidence
    assert evidence.startswith(f"{assumed}the default kernel applied neither the mask alone nor causal alone (")
    # it applied both: the mask AND causal result, up to float noise (printed with 2 decimals)
    assert float(re.search(r"\(([0-9.]+) from mask AND causal, ", evidence).group(1)) < 1e-2, evidence
    assert float(re.search(r", ([0-9.]+) from mask-only, ", evidence).group(1)) > 1e-2, evidence
    assert float(re.search(r", ([0-9.]+) from causal-only", evidence).group(1)) > 1e-2, evidence
    assert ("under sdpa_kernel(MATH) it raised RuntimeError: _scaled_dot_product_attention: Explicit attn_mask "
            "should not be set when is_causal=True") in evidence
    assert f"a {'float' if kind == 'additive' else 'bool'} mask hiding key 0" in evidence
    # the site's evidence is the call itself (both arguments given); a mask kind it does not show is said to be unknown
    assert ("(the site's mask kind is not known)" in evidence) == (kind is None), evidence
    assert "CUDA not tested" in evidence


@pytest.mark.parametrize("site", [{"attn_mask": True, "is_causal": False}, {"attn_mask": False, "is_causal": True}])
def test_probe_does_not_confirm_a_fixed_site(torch, site):
    status, evidence = SdpaCausalAndMask.probe({"api": torchapi.SDPA, "mask_kind": "bool", **site}, torch)
    assert status == NOT_CONFIRMED, evidence
    assert "under sdpa_kernel(MATH) it ran without raising" in evidence


def test_probe_runs_through_the_cli_on_the_example(torch, probed_examples):
    result = probed_examples.of("mha009_sdpa_causal_and_mask_bad.py")  # `check --probe` over the examples, once
    assert "probe confirmed" in result.output and "Explicit attn_mask should not be set" in result.output, \
        result.output


# ---- no automatic fix ----------------------------------------------------------------------------------------------
def test_fix_mode_leaves_the_source_unchanged(check):
    from mhalint.fixes import apply_fixes
    source = call("q, k, v, attn_mask=m, is_causal=True")
    found = check(source)
    assert found and all(f.fix is None for f in found)
    assert apply_fixes(source, found, unsafe=True) == (source, 0)

