"""A project layer whose only calls may run another class (`layer = A(...) if norm == "ln" else MyLayer(...)`,
then `nn.TransformerEncoder(layer, n)` called): what those calls pass is what its forward gets when it runs
(analysis/calls.py `possible_callers`), an assumption the evidence names. Sequence-first data is info; batch-first
data is at most a warning (the call may run the other class); no call passing the data stays unknown."""

from __future__ import annotations

import pytest
from test_mha001_layout import assert_unknown_warning

from mhalint.finding import Severity

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


STACKS = """\
    import torch.nn as nn

    class BlockA(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, h)

        def forward(self, x):
            return self.attn(x, x, x)[0]

    class BlockB(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.lin = nn.Linear(d, d)

        def forward(self, x):
            return self.lin(x)

    class Model(nn.Module):
        def __init__(self, d, h, kind):
            super().__init__()
            if kind == "a":
                self.blocks = nn.ModuleList([BlockA(d, h) for _ in range(2)])
            else:
                self.blocks = nn.ModuleList([BlockB(d, h) for _ in range(2)])

        def forward(self, x):
            {unpack}
            x = {data}
            for block in self.blocks:
                x = block(x)
            return x
"""
STACK_NOTE = "assuming `block` at line 31 runs `BlockA`, not BlockB"


@pytest.mark.parametrize(("unpack", "data", "expected"), [
    ("B, T, C = x.shape", "x.transpose(0, 1)", Severity.INFO), ("B, T, C = x.shape", "x", Severity.WARNING),
    ("pass", "x", Severity.WARNING)])
def test_a_loop_over_a_stack_of_one_class_or_another_runs_each_as_a_possibility(lint, unpack, data, expected):
    [finding] = lint(STACKS.format(unpack=unpack, data=data), CODE, min_severity="info")
    assert finding.severity == expected, finding.message
    if unpack == "pass":
        assert_unknown_warning(finding)
    else:
        assert STACK_NOTE in " | ".join(finding.evidence) and finding.fix is None
        assert ("implicitly right for sequence-first" if expected == Severity.INFO else "gets batch-first data") \
            in finding.message
