"""Masks and values built in plain code (issue 14): a 0/1 keep mask turned into a float bias, a tokenizer's
`attention_mask` compared with 0, and `is_causal` given by a parameter whose caller passes True. Each is found
where the construction (or the caller) shows it, and left alone where only a name would."""

from __future__ import annotations

import textwrap

from mhalint.finding import Severity

BIAS_FROM_KEEP = """\
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8, batch_first=True)

        def forward(self, x, keep):
            bias = 1.0 - keep.float()
            return self.attn(x, x, x, attn_mask=bias)[0]
"""


def test_a_float_bias_from_a_keep_mask_masks_nothing(lint):
    source = textwrap.dedent(BIAS_FROM_KEEP) + textwrap.dedent("""
        def run(x, tokens, pad_id):
            return Block()(x, tokens != pad_id)
    """)
    [finding] = lint(source, "MHA008")
    assert finding.severity == Severity.ERROR and finding.line == 10
    assert "a 0/1 float mask (1 = ignore) built at line 9" in finding.message
    evidence = " | ".join(finding.evidence)
    assert "`tokens != pad_id` is True at real tokens" in evidence and "swaps the 0s and 1s" in evidence


def test_a_float_bias_of_a_mask_known_only_by_its_name_is_a_warning(lint):
    [finding] = lint(BIAS_FROM_KEEP, "MHA008")
    assert finding.severity == Severity.WARNING and finding.fix is None
    assert "only its name says `keep` is a boolean mask" in " | ".join(finding.evidence)


def test_a_float_bias_of_a_tensor_with_no_mask_name_is_not_flagged(lint):
    assert lint(BIAS_FROM_KEEP.replace("keep", "scale"), "MHA008") == []


def test_a_float_bias_from_an_additive_mask_is_not_flagged(lint):
    source = textwrap.dedent(BIAS_FROM_KEEP) + textwrap.dedent("""
        def run(x, L):
            return Block()(x, torch.full((L, L), float("-inf")).triu(1))
    """)
    assert lint("import torch\n" + source, "MHA008") == []


TOKENIZER_MASK = """\
    import torch.nn.functional as F

    def attend(q, k, v, {mask}):
        pad = {mask} {op} {value}
        return F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])
"""


def test_a_tokenizer_mask_compared_with_zero_is_inverted_for_sdpa(lint):
    [finding] = lint(TOKENIZER_MASK.format(mask="attention_mask", op="==", value="0"), "MHA002")
    assert finding.severity == Severity.ERROR
    assert "built at line 4 as True = ignore, but it reads True as attend" in finding.message
    assert any("tokenizer's mask by its name, 1 at real tokens" in e for e in finding.evidence)


def test_a_tokenizer_mask_compared_with_one_is_right_for_sdpa(lint):
    assert lint(TOKENIZER_MASK.format(mask="attention_mask", op="==", value="1"), "MHA002") == []


def test_another_name_compared_with_zero_says_nothing_about_the_convention(lint):
    assert lint(TOKENIZER_MASK.format(mask="scores", op="==", value="0"), "MHA002") == []


def test_is_causal_from_a_parameter_whose_caller_passes_true_with_a_mask(lint):
    source = """\
        import torch.nn.functional as F

        def attend(q, k, v, mask, causal=False):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)

        def model(q, k, v, mask):
            return attend(q, k, v, mask, causal=True)
    """
    [finding] = lint(source, "MHA009")
    assert "is_causal=`causal` (True)" in finding.message
    assert "`attend(...)` at line 7 passes causal=True" in finding.evidence


def test_is_causal_from_a_parameter_whose_callers_disagree_is_reported_with_both(lint):
    """The call path that passes True sets the flag; the others are named, not averaged away."""
    source = """\
        import torch.nn.functional as F

        def attend(q, k, v, mask, causal=False):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)

        def model(q, k, v, mask):
            return attend(q, k, v, mask, causal=True), attend(q, k, v, mask)
    """
    [finding] = lint(source, "MHA009")
    assert "`attend(...)` at line 7 passes causal=True" in finding.evidence
    assert "other calls pass False (line 7)" in finding.evidence
    assert lint(source.replace("causal=True)", "causal=False)"), "MHA009") == []  # no path passes True


OPTIONAL_MASK = """\
    import torch.nn.functional as F

    def attend(q, tokens, pad_id, c):
        mask = None
        if c:
            mask = tokens == pad_id
        {more}
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
"""


def test_a_mask_set_on_one_branch_and_none_on_the_other_is_read(lint):
    [finding] = lint(OPTIONAL_MASK.format(more=""), "MHA002")
    assert finding.severity == Severity.ERROR and "built at line 6 as True = ignore" in finding.message


def test_masks_of_opposite_conventions_on_two_branches_are_not_guessed(lint):
    source = OPTIONAL_MASK.format(more="else:\n            mask = tokens != pad_id")
    assert lint(source, "MHA002") == []


def test_a_mask_built_under_a_none_test_of_the_parameter_it_replaces_is_the_one_that_reaches(lint):
    """`if mask is not None: mask = ...`: on the other path the parameter is None, no mask at all, so the built
    mask alone decides (here a boolean turned into 0/1 floats, which masks nothing when added)."""
    source = """\
        import torch.nn.functional as F

        def attend(q, k, v, attention_mask=None):
            if attention_mask is not None:
                pair = attention_mask[:, :, None] * attention_mask[:, None, :]
                attention_mask = (pair > 0).unsqueeze(1).to(q.dtype)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
    """
    [finding] = lint(source, "MHA008")
    assert finding.severity == Severity.ERROR and finding.line == 7
    kept = source.replace(".to(q.dtype)", "")  # a boolean mask is right
    assert lint(kept, "MHA008") == []
