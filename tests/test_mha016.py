"""MHA016 head-split-order: the cases its examples do not cover (the examples run in tests/test_rule_examples.py)."""

from __future__ import annotations

import re
import textwrap

import pytest

from mhalint.finding import CONFIRMED, HEADLINE_LIMIT, UNSAFE, Severity
from mhalint.fixes import apply_fixes
from mhalint.rules.head_split_order import HeadSplitOrder

CODE = "MHA016"
HEAD = "import torch.nn.functional as F\n"


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(HEAD + textwrap.dedent(source), None)
        assert all(f.code in (CODE, "MHA013") for f in found), found  # no engine diagnostics
        return [f for f in found if f.code == CODE]
    return run


def _in_attention(body: str) -> str:
    return "def f(x, n_head):\n    B, T, C = x.shape\n" + textwrap.indent(textwrap.dedent(body), "    ") + \
        "    return F.scaled_dot_product_attention(q, q, q, is_causal=True)\n"


@pytest.mark.parametrize("split", [
    "q = x.view(B, n_head, T, C // n_head)",
    "q = x.reshape(B, n_head, T, C // n_head)",
    "q = x.reshape(B, n_head, T, -1)",
    "q = x.view(B * n_head, T, C // n_head)",
    "q = x.contiguous().view(B, n_head, T, C // n_head)",
    "q = x.view((B, n_head, T, C // n_head))",
])
def test_a_split_in_one_step_is_an_error_when_the_shape_is_unpacked(check, split):
    found = check(_in_attention(split + "\n"))
    assert [(f.code, f.severity, f.line) for f in found] == [(CODE, Severity.ERROR, 4)]
    assert any("`B, T, C = x.shape` at line 3" in line for line in found[0].evidence)


@pytest.mark.parametrize("split", [
    "q = x.view(B, T, n_head, C // n_head).transpose(1, 2)",
    "q = x.reshape(B, T, n_head, -1).permute(0, 2, 1, 3)",
    "q = x.view(B, 1, T, C)",  # a size-one axis moves nothing
    "q = x.view(B, T, n_head, C // n_head)",  # MHA013's (N, L, H, E), not a reorder
    "q = x.view(B, n_head, -1, C // n_head)",  # the sequence inferred: what the axes hold is not shown
    "q = x.view(x.size(0), n_head, x.size(1), 8)",  # measured sizes: the same roles as the unpacking
])
def test_correct_splits_and_undecided_ones_are_left_alone(check, split):
    found = check(_in_attention(split + "\n"))
    if "x.size(1)" in split:  # `x.size(1)` is the sequence of `x` as much as `T` is: the same bug
        assert [f.severity for f in found] == [Severity.ERROR]
    else:
        assert found == []


def test_a_tensor_whose_axes_no_code_shows_stays_unknown(check):
    assert check("""
        def f(x, B, T, n_head, head_dim):
            q = x.view(B, n_head, T, head_dim)
            return F.scaled_dot_product_attention(q, q, q)
    """) == []


def test_conv_features_viewed_as_heads_and_sequence_first_splits_keep_the_order(check):
    assert check("""
        def f(x, num_heads):
            B, C, H, W = x.shape
            q = x.view(B, num_heads, C // num_heads, H * W).transpose(-1, -2)
            return F.scaled_dot_product_attention(q, q, q)

        def g(x, num_heads, head_dim):
            tgt_len, bsz, embed_dim = x.shape
            q = x.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
            return F.scaled_dot_product_attention(q, q, q)
    """) == []


def test_a_sequence_first_split_without_the_transpose_is_an_error(check):
    found = check("""
        def g(x, num_heads, head_dim):
            tgt_len, bsz, embed_dim = x.shape
            q = x.contiguous().view(bsz * num_heads, tgt_len, head_dim)
            return F.scaled_dot_product_attention(q, q, q)
    """)
    assert [(f.severity, f.fix) for f in found] == [(Severity.ERROR, None)]  # no fix for this form
    assert "against their order in (L, N, E)" in found[0].message


def test_the_merge_of_sdpa_output_is_mha013s_alone(lint):
    found = lint(HEAD + textwrap.dedent("""
        def f(x, n_head):
            B, T, C = x.shape
            q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, q, q)
            return y.contiguous().view(B, T, C)
    """))
    assert [f.code for f in found] == ["MHA013"]


def test_the_merge_of_a_hand_written_product_is_flagged_and_its_fix_transposes_first(check):
    source = """
        def f(x, n_head):
            B, T, C = x.shape
            q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
            att = (q @ q.transpose(-2, -1)).softmax(dim=-1)
            y = att @ q
            return y.contiguous().view(B, T, C)

        def fused(q, k, v):  # the file is read for its SDPA call (the rule's trigger)
            return F.scaled_dot_product_attention(q, k, v)
    """
    found = check(source)
    assert [(f.line, f.message.startswith("`y.contiguous().view(B, T, C)` puts `T` before `C`")) for f in found] \
        == [(8, True)]
    if found[0].severity is Severity.ERROR:
        fixed, count = apply_fixes(HEAD + textwrap.dedent(source), found, unsafe=True)
        assert count == 1 and "return y.transpose(1, 2).contiguous().view(B, T, C)" in fixed


def test_the_fix_reorders_the_sizes_and_transposes_and_the_fixed_code_is_clean(check):
    source = _in_attention("q = x.view(B, n_head, T, C // n_head)\n")
    found = check(source)
    assert found[0].fix.applicability == UNSAFE
    fixed, count = apply_fixes(HEAD + source, found, unsafe=True)
    assert count == 1 and "q = x.view(B, T, n_head, C // n_head).transpose(1, 2)" in fixed
    assert check(fixed[len(HEAD):]) == []


def test_the_headline_stays_within_the_limit_for_long_sizes(check):
    found = check("""
        def f(hidden_states_of_the_whole_encoder, num_attention_heads):
            bsz, seq_len, embed_dim = hidden_states_of_the_whole_encoder.shape
            q = hidden_states_of_the_whole_encoder.view(bsz, num_attention_heads, seq_len,
                                                        embed_dim // num_attention_heads)
            return F.scaled_dot_product_attention(q, q, q)
    """)
    assert len(found) == 1 and len(found[0].message) <= HEADLINE_LIMIT


# ---- the probe -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("form", "positions"), [("split", "[2, 3, 4, 5]"), ("merge", "[1, 2, 4, 5]")])
def test_probe_shows_earlier_positions_moved_by_the_last_token(torch, form, positions):
    status, evidence = HeadSplitOrder.probe({"form": form}, torch)
    assert status == CONFIRMED, evidence
    assert re.search(r"moved output positions \[[0-9, ]+\] under is_causal=True", evidence), evidence
    assert positions in evidence and "moves only [5]" in evidence
