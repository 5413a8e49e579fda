"""MHA017 attention-scale: the cases its examples do not cover (the examples run in tests/test_rule_examples.py)."""

from __future__ import annotations

import re
import textwrap

import pytest
from conftest import rule_checker

from mhalint.finding import CONFIRMED, Severity
from mhalint.fixes import apply_fixes
from mhalint.rules.attention_scale import AttentionScale

CODE = "MHA017"
HEAD = "import math\nimport torch\nimport torch.nn.functional as F\n"


@pytest.fixture
def check():
    return rule_checker(CODE, HEAD)


def _function(scaling: str, call: str = "F.scaled_dot_product_attention(q, k, v)") -> str:
    return f"def f(q, k, v, head_dim):\n    {scaling}\n    return {call}\n"


@pytest.mark.parametrize("scaling", [
    "q = q * head_dim ** -0.5",
    "q = q * (head_dim ** (-0.5))",
    "q = head_dim ** -0.5 * q",
    "q = q / math.sqrt(head_dim)",
    "q = q / head_dim ** 0.5",
    "q = q * torch.rsqrt(torch.tensor(head_dim))",
    "q = q * (1.0 / math.sqrt(head_dim))",
    "q *= head_dim ** -0.5",
    "q /= math.sqrt(head_dim)",
    "k = k * head_dim ** -0.5",
    "q = (q * head_dim ** -0.5).transpose(1, 2).contiguous()",
])
def test_a_query_or_key_scaled_before_the_default_scale_is_an_error(check, scaling):
    found = check(_function(scaling))
    assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR)]
    assert "the scores are scaled twice" in found[0].message


@pytest.mark.parametrize("scaling", [
    "q = q * head_dim ** -0.5\n    q = q",  # a plain copy on the way
    "scale = head_dim ** -0.5\n    q = q * scale",  # through a local name
])
def test_the_temperature_is_followed_through_names(check, scaling):
    assert [f.severity for f in check(_function(scaling))] == [Severity.ERROR]


@pytest.mark.parametrize(("scaling", "call"), [
    ("q = q * head_dim ** -0.5", "F.scaled_dot_product_attention(q, k, v, scale=1.0)"),
    ("q = q * head_dim ** -0.5", "F.scaled_dot_product_attention(q, k, v, scale=1)"),
    ("pass", "F.scaled_dot_product_attention(q, k, v)"),
    ("pass", "F.scaled_dot_product_attention(q, k, v, scale=head_dim ** -0.5)"),
    ("pass", "F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(head_dim))"),
    ("q = q * math.sqrt(head_dim)", "F.scaled_dot_product_attention(q, k, v)"),  # scaled up: not this bug
    ("q = q * head_dim ** -0.5", "F.scaled_dot_product_attention(q, k, v, scale=self_scale)"),  # unknown scale
    ("q = q * self_scale", "F.scaled_dot_product_attention(q, k, v)"),  # a name nothing defines
    ("q = torch.cat([q * head_dim ** -0.5, k])", "F.scaled_dot_product_attention(q, k, v)"),  # not followed
])
def test_single_scalings_and_unknown_ones_stay_silent(check, scaling, call):
    assert check(_function(scaling, call).replace("head_dim)", "head_dim, self_scale=None)", 1)) == []


def test_a_temperature_set_from_a_config_is_not_read(check):
    assert check("""
        class Attention(torch.nn.Module):
            def __init__(self, config):
                super().__init__()
                self.scale = config.scale
            def forward(self, q, k, v):
                q = q * self.scale
                return F.scaled_dot_product_attention(q, k, v)
    """) == []


@pytest.mark.parametrize("scale", ["math.sqrt(head_dim)", "head_dim ** 0.5", "torch.sqrt(torch.tensor(head_dim))"])
def test_the_square_root_as_scale_is_an_error_whose_fix_inverts_it(check, scale):
    source = _function("pass", f"F.scaled_dot_product_attention(q, k, v, scale={scale})")
    found = check(source)
    assert [(f.severity, f.message.startswith(f"F.scaled_dot_product_attention gets scale=`{scale}`"))
            for f in found] == [(Severity.ERROR, True)]
    fixed, count = apply_fixes(HEAD + textwrap.dedent(source), found, unsafe=True)
    assert count == 1 and f"scale=1 / {scale}" in fixed
    assert check(fixed[len(HEAD):]) == []


def test_the_fix_adds_scale_one_and_the_fixed_code_is_clean(check):
    source = _function("q = q * head_dim ** -0.5")
    found = check(source)
    fixed, count = apply_fixes(HEAD + source, found, unsafe=True)
    assert count == 1 and "F.scaled_dot_product_attention(q, k, v, scale=1.0)" in fixed
    assert check(fixed[len(HEAD):]) == []


# ---- the probe -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["twice", "square-root"])
def test_probe_measures_the_output_and_the_flattened_or_sharpened_rows(torch, form):
    status, evidence = AttentionScale.probe({"form": form}, torch)
    assert status == CONFIRMED, evidence
    entropy, intended = (float(x) for x in re.search(r"entropy is ([0-9.]+) nats instead of ([0-9.]+)",
                                                      evidence).groups())
    assert (entropy > intended) if form == "twice" else (entropy < intended)


def test_a_ratio_holding_a_temperature_on_one_branch_is_a_warning_without_a_fix(check):
    body = """
        class Attend(torch.nn.Module):
            def __init__(self, scale, qk_norm):
                super().__init__()
                self.scale = scale
                self.qk_norm = qk_norm
            def forward(self, q, k, v):
                if self.qk_norm:
                    default_scale = q.shape[-1] ** -0.5
                    q = q * ({ratio})
                return F.scaled_dot_product_attention(q, k, v)
    """
    found = check(body.format(ratio="default_scale / self.scale"))
    assert [(f.severity, f.fix) for f in found] == [(Severity.WARNING, None)]
    assert found[0].message.endswith("when `self.qk_norm`: scaled twice there")
    assert check(body.format(ratio="self.scale / default_scale")) == []  # undoes SDPA's default: x-transformers' fix


def test_the_inverse_of_a_written_quotient_is_parenthesised(check):
    source = _function("pass", "F.scaled_dot_product_attention(q, k, v, scale=1 / head_dim ** -0.5)")
    found = check(source)
    fixed, count = apply_fixes(HEAD + textwrap.dedent(source), found, unsafe=True)
    assert count == 1 and "scale=1 / (1 / head_dim ** -0.5)" in fixed
    assert check(fixed[len(HEAD):]) == []
