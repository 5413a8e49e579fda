"""MHA001 from the sizes torch requires two inputs of one call to share: the batch of query and key (src and tgt,
tgt and memory) must agree, their sequence lengths may not. Literal sizes that agree at exactly one of the first
two axes show which axis is the batch; anything else stays unknown."""

from __future__ import annotations

import pytest
from conftest import lint

from mhalint.finding import HEADLINE_LIMIT, Severity

HEAD = "import torch\nimport torch.nn as nn\n"


def one(source: str):
    found = lint(HEAD + source, "MHA001", min_severity="info")
    assert len(found) == 1, [(f.line, f.message) for f in found]
    assert len(found[0].message) <= HEADLINE_LIMIT and all(len(line) <= 160 for line in found[0].evidence)
    return found[0]


@pytest.mark.parametrize("source", [
    "layer = nn.TransformerDecoderLayer(d_model=512, nhead=8)\n"
    "memory = torch.rand(10, 32, 512)\ntgt = torch.rand(20, 32, 512)\nout = layer(tgt, memory)\n",
    "model = nn.Transformer(nhead=16)\nsrc = torch.rand((10, 32, 512))\ntgt = torch.rand((20, 32, 512))\n"
    "out = model(src, tgt)\n",
    "S = 10\nattn = nn.MultiheadAttention(64, 8)\nq = torch.randn(size=(4, 2, 64)).float()\n"
    "kv = torch.zeros(S, 2, 64)\nout, _ = attn(q, kv, kv)\n",
])
def test_sizes_that_agree_only_at_axis_1_show_sequence_first_data(source):
    finding = one(source)
    assert finding.severity == Severity.INFO, finding.message
    assert "implicitly right for sequence-first data" in finding.message
    assert "match, and only axis 1 does" in " | ".join(finding.evidence)


def test_sizes_that_agree_only_at_axis_0_show_batch_first_data():
    finding = one("attn = nn.MultiheadAttention(64, 8)\nq = torch.randn(2, 5, 64)\nkv = torch.randn(2, 7, 64)\n"
                  "out, _ = attn(q, kv, kv)\n")
    assert finding.severity == Severity.ERROR and "gets batch-first data (`torch.randn(2, 5, 64)`" in finding.message
    assert "`key` at line 5 is (2, 7, 64): torch needs the batch to match, and only axis 0 does" \
        in " | ".join(finding.evidence)
    assert finding.fix is not None
    reverse = one("attn = nn.MultiheadAttention(64, 8, batch_first=True)\nq = torch.randn(5, 2, 64)\n"
                  "kv = torch.randn(7, 2, 64)\nout, _ = attn(q, kv, kv)\n")
    assert reverse.severity == Severity.ERROR and "gets sequence-first data" in reverse.message


@pytest.mark.parametrize("source", [
    # one tensor alone: its sizes do not say which axis is which
    "layer = nn.TransformerEncoderLayer(d_model=512, nhead=8)\nsrc = torch.rand(10, 32, 512)\nout = layer(src)\n",
    # the same sizes at both axes: either layout runs
    "attn = nn.MultiheadAttention(64, 8)\nq = torch.randn(4, 4, 64)\nkv = torch.randn(4, 4, 64)\nattn(q, kv, kv)\n",
    # different at both: torch would raise in either layout; nothing to read
    "attn = nn.MultiheadAttention(64, 8)\nq = torch.randn(3, 4, 64)\nkv = torch.randn(5, 6, 64)\nattn(q, kv, kv)\n",
    # a size that is not a literal
    "def f(n):\n    attn = nn.MultiheadAttention(64, 8)\n    q = torch.randn(n, 4, 64)\n"
    "    kv = torch.randn(5, 4, 64)\n    attn(q, kv, kv)\n",
    # a partner rebound on one path only: which tensor it is is not known
    "def f(c):\n    attn = nn.MultiheadAttention(64, 8)\n    q = torch.randn(3, 4, 64)\n"
    "    kv = torch.randn(5, 4, 64)\n    if c:\n        kv = torch.randn(3, 6, 64)\n    attn(q, kv, kv)\n",
])
def test_sizes_that_do_not_single_out_the_batch_stay_unknown(source):
    finding = one(source)
    assert finding.severity == Severity.WARNING, finding.message
    assert "match, and only axis" not in " | ".join(finding.evidence)


def test_a_lone_literal_shape_says_that_its_sizes_are_numbers():
    finding = one("layer = nn.TransformerEncoderLayer(d_model=512, nhead=8)\nsrc = torch.rand(10, 32, 512)\n"
                  "out = layer(src)\n")
    assert finding.severity == Severity.WARNING
    assert "`torch.rand(10, 32, 512)` at line 4: its sizes are numbers, which do not say which axis is the batch" \
        in " | ".join(finding.evidence)


# ---- a query whose trace shows only its features: the key and value that share its batch ------------------------
FEATURES_ONLY = """\
import torch
import torch.nn as nn


class Decoder(nn.Module):
    def __init__(self, d_model=64):
        super().__init__()
        self.attn = nn.MultiheadAttention(d_model, 8)

    def forward(self, src, rows, cols, d_model=64):
        bz, c, h, w = src.shape
        tgt = torch.zeros(rows, cols, d_model)
        memory = {memory}
        return self.attn(tgt, memory, memory)[0]
"""


def test_a_query_of_features_only_takes_the_layout_of_a_sequence_first_key(lint):
    found = lint(FEATURES_ONLY.format(memory="src.flatten(2).permute(2, 0, 1)"), "MHA001", min_severity="info")
    assert [(f.severity, "implicitly right for sequence-first data" in f.message) for f in found] == [
        (Severity.INFO, True)], [f.message for f in found]
    assert "whose batch axis the query `tgt` shares" in " | ".join(found[0].evidence)


def test_a_query_of_features_only_takes_the_layout_of_a_batch_first_key(lint):
    found = lint(FEATURES_ONLY.format(memory="src.flatten(2).transpose(1, 2)"), "MHA001", min_severity="info")
    assert [(f.severity, "gets batch-first data" in f.message) for f in found] == [(Severity.ERROR, True)], \
        [f.message for f in found]


def test_a_query_of_features_only_beside_an_unknown_key_stays_unknown(lint):
    found = lint(FEATURES_ONLY.format(memory="src"), "MHA001", min_severity="info")
    assert [f.severity for f in found] == [Severity.WARNING], [f.message for f in found]


def test_a_query_whose_batch_axis_the_key_confirms_takes_the_keys_layout(lint):
    """`c` reads as channels, so the query (c, bz, d_model) shows no layout by itself; its batch axis is the key's."""
    source = FEATURES_ONLY.format(memory="src.flatten(2).permute(2, 0, 1)").replace(
        "torch.zeros(rows, cols, d_model)", "torch.zeros(c, bz, d_model)")
    found = lint(source, "MHA001", min_severity="info")
    assert [f.severity for f in found] == [Severity.INFO], [f.message for f in found]


def test_a_key_that_would_move_the_querys_batch_axis_decides_nothing(lint):
    source = FEATURES_ONLY.format(memory="src.flatten(2).transpose(1, 2)").replace(
        "torch.zeros(rows, cols, d_model)", "torch.zeros(c, bz, d_model)")
    found = lint(source, "MHA001", min_severity="info")
    assert [f.severity for f in found] == [Severity.WARNING], [f.message for f in found]
