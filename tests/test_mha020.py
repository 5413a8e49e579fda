"""MHA020 masked-fill-polarity: the cases its examples do not cover (the examples run in tests/test_rule_examples.py)."""

from __future__ import annotations

import re

import pytest
from conftest import rule_checker

from mhalint.finding import CONFIRMED, NOT_CONFIRMED, Severity
from mhalint.fixes import apply_fixes
from mhalint.rules.masked_fill_polarity import MaskedFillPolarity
from mhalint.run.prefilter import Prefilter

CODE = "MHA020"
HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


@pytest.fixture
def check():
    return rule_checker(CODE, HEAD)


def test_a_tensor_filled_in_place_then_given_to_a_softmax_is_an_error(check):
    found = check("""
        def attend(scores, mask):
            scores.masked_fill_(mask, -1e-9)
            return scores.softmax(dim=-1)
    """)
    assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR)]
    assert "before the softmax at line 7" in found[0].message


def test_a_tensor_filled_in_place_and_read_only_before_stays_silent(check):
    assert check("""
        def attend(scores, mask):
            weights = scores.softmax(dim=-1)
            scores.masked_fill_(mask, -1e-9)
            return weights, scores
    """) == []


def test_the_fill_value_is_what_every_caller_passes(check):
    body = """
        def attend(scores, mask, eps):
            return F.log_softmax(scores.masked_fill(mask, -eps), dim=-1)

        def run(scores, mask):
            return attend(scores, mask, {value})
    """
    found = check(body.format(value="1e-9"))
    assert [f.severity for f in found] == [Severity.ERROR]
    assert "`-eps` = -1e-09" in found[0].message and "`attend(...)` at line 9 passes eps=1e-9" in found[0].evidence[0]
    assert check(body.format(value="1e9")) == []


def test_a_softmax_module_held_by_the_model_takes_the_scores(check):
    found = check("""
        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.normalize = nn.LogSoftmax(dim=-1)

            def forward(self, scores, mask):
                scores = scores.masked_fill(mask, value=-1e-7)
                return self.normalize(scores)
    """)
    assert [(f.line, f.severity) for f in found] == [(11, Severity.ERROR)]


@pytest.mark.parametrize("value", ["-1e9", "float('-inf')", "-torch.inf", "torch.finfo(scores.dtype).min", "-1e4",
                                   "-10.0", "self.fill"])
def test_fills_that_mask_or_that_the_code_does_not_show_stay_silent(check, value):
    assert check(f"""
        class Attention(nn.Module):
            def forward(self, scores, mask):
                return F.softmax(scores.masked_fill(mask, {value}), dim=-1)
    """) == []


def test_a_zero_fill_is_not_reported_in_a_file_parsed_for_another_rule(check):
    assert check("""
        def attend(q, k, v, scores, mask):
            scores = scores.masked_fill(scores.isnan(), 0.0)
            weights = F.softmax(scores, dim=-1)
            return weights, F.scaled_dot_product_attention(q, k, v), scores.masked_fill(mask, -1e-9)
    """) == []


def test_the_fix_fills_with_the_dtypes_minimum_and_the_fixed_code_is_clean(check):
    source = "def attend(scores, mask):\n    scores = scores.masked_fill(mask == 0, -1e-9)\n" \
             "    return F.softmax(scores, dim=-1)\n"
    found = check(source)
    fixed, count = apply_fixes(HEAD + source, found, unsafe=True)
    assert count == 1 and "scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)" in fixed
    assert check(fixed[len(HEAD):]) == []


def test_without_torch_imported_there_is_no_fix(lint):
    found = lint("import torch.nn.functional as F\ndef attend(scores, mask):\n"
                 "    return F.softmax(scores.masked_fill(mask, -1e-9), dim=-1)\n", CODE)
    assert [f.severity for f in found] == [Severity.ERROR] and found[0].fix is None


# ---- which files are read --------------------------------------------------------------------------------------
@pytest.mark.parametrize("line, read", [
    ("s = s.masked_fill(m == 0, -1e-9)", True),
    ("s.masked_fill_(m, float('-1e-9'))", True),
    ("s = s.masked_fill(mask.unsqueeze(1), -e)", True),
    ("s = s.masked_fill(m, value=-1e-12)", True),
    ("s = s.masked_fill(m, -1e9)", False),
    ("s = s.masked_fill(m, float('-inf'))", False),
    ("s = s.masked_fill(~m, -torch.inf)", False),
    ("s = s.masked_fill(m, 0.0)", False),
    ("s = s.masked_fill(\n    m, -1e-9)", True),  # a call over several lines
    ("s = s.masked_fill(\n    m,\n\n\n\n    -1e-9)", False),  # its fill past the lines searched after the call's line
    ("# s.masked_fill(m, -1e-9)", False),
])
def test_the_trigger_reads_a_file_with_a_fill_about_zero_on_the_masked_fill_line(line, read):
    assert Prefilter(MaskedFillPolarity.triggers).matches(f"{line}\n".encode()) is read


# ---- the probe -----------------------------------------------------------------------------------------------------
def test_probe_measures_the_weight_the_masked_keys_keep(torch):
    status, evidence = MaskedFillPolarity.probe({"fill": -1e-9}, torch)
    assert status == CONFIRMED, evidence
    assert float(re.search(r"keep ([0-9.]+) of each row", evidence)[1]) > 0.1


def test_probe_of_a_fill_that_masks_finds_nothing(torch):
    status, evidence = MaskedFillPolarity.probe({"fill": -1e9}, torch)
    assert status == NOT_CONFIRMED and "keep 0.00" in evidence, (status, evidence)
