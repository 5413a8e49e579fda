"""A comment that names one target of an unpacking documents that target's shape: `feats, sizes =
self.backbone(x)` then `# feats: batch x channel x npoint` (the code gives no roles where the callee is unseen)."""

from __future__ import annotations

import pytest

from mhalint.finding import Severity

MODEL = """\
    import torch.nn as nn
    from backbones import PointBackbone

    class Detector(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.backbone = PointBackbone(width)
            self.attn = nn.MultiheadAttention(width, 8)

        def forward(self, points):
            feats, sizes = self.backbone(points)
            # {comment}
            tokens = feats.permute({order})
            return self.attn(tokens, tokens, tokens)[0]
"""


@pytest.mark.parametrize(("comment", "order", "severity"), [
    ("feats: batch x channel x npoint", "2, 0, 1", Severity.INFO),
    ("feats: batch x channel x npoint", "0, 2, 1", Severity.ERROR),
    ("sizes: batch x channel x npoint", "0, 2, 1", Severity.WARNING),  # about the other target
])
def test_a_comment_naming_a_target_of_an_unpacking_gives_its_shape(lint, comment, order, severity):
    [finding] = lint(MODEL.format(comment=comment, order=order), select="MHA001")
    assert finding.severity == severity
    if severity != Severity.WARNING:
        assert "the shape comment says so" in " | ".join(finding.evidence)
