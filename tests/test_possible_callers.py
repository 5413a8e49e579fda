"""A project layer whose only calls may run another class (`layer = A(...) if norm == "ln" else MyLayer(...)`,
then `nn.TransformerEncoder(layer, n)` called): what those calls pass is what its forward gets when it runs
(analysis/calls.py `possible_callers`), an assumption the evidence names. Sequence-first data is info; batch-first
data is at most a warning (the call may run the other class); no call passing the data stays unknown."""

from __future__ import annotations

import pytest

from mhalint.finding import Severity
from test_layout import assert_unknown_warning

CODE = "MHA001"

SOURCE = """\
    import torch.nn as nn

    class BatchNormLayer(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(d, h)
            self.norm = nn.BatchNorm1d(d)

        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            src = src + self.self_attn(src, src, src, attn_mask=src_mask)[0]
            return self.norm(src.permute(1, 2, 0)).permute(2, 0, 1)

    class Model(nn.Module):
        def __init__(self, d, h, norm):
            super().__init__()
            if norm == "LayerNorm":
                layer = nn.TransformerEncoderLayer(d, h)
            else:
                layer = BatchNormLayer(d, h)
            self.encoder = nn.TransformerEncoder(layer, 2)

        def forward(self, x):
            B, T, C = x.shape
            return self.encoder({data})
"""


@pytest.fixture
def at_line_6(lint):
    """The finding on the project layer's attention (line 6)."""
    def run(source: str):
        found = [f for f in lint(source, CODE, min_severity="info") if f.line == 6]
        assert len(found) == 1, found
        return found[0]
    return run


NOTE = "assuming `self.encoder` at line 24 runs `BatchNormLayer`, not nn.TransformerEncoderLayer"


def test_sequence_first_data_through_a_call_that_may_run_the_layer_is_info(at_line_6):
    finding = at_line_6(SOURCE.format(data="x.permute(1, 0, 2)"))
    assert finding.severity == Severity.INFO and "implicitly right for sequence-first data" in finding.message
    assert NOTE in " | ".join(finding.evidence) and "B, T, C = x.shape" in " | ".join(finding.evidence)


def test_batch_first_data_through_a_call_that_may_run_the_layer_is_at_most_a_warning(at_line_6):
    finding = at_line_6(SOURCE.format(data="x"))
    assert finding.severity == Severity.WARNING and "gets batch-first data" in finding.message
    assert finding.fix is None and NOTE in " | ".join(finding.evidence)


def test_a_layer_no_call_may_run_stays_unknown(at_line_6):
    source = SOURCE.format(data="x").replace("self.encoder = nn.TransformerEncoder(layer, 2)", "self.encoder = layer")
    source = source.replace("return self.encoder(x)", "return x")
    assert_unknown_warning(at_line_6(source))
