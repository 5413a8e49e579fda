"""A mask parameter of a module's forward holds what the callers in the whole project pass, as the layout does:
a caller in this file that leaves it at None does not hide the per-sample mask a caller in another file passes
(analysis/mask_axes.py through analysis/sites.py's `project_callers`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mhalint.finding import Severity
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

LAYERS = """\
    import torch.nn as nn

    class Layer(nn.Module):
        def __init__(self, width, nhead):
            super().__init__()
            self.nhead = nhead
            self.attn = nn.MultiheadAttention(width, nhead)

        def forward(self, x, mask=None):
            if mask is not None:
                mask = mask.repeat(self.nhead, 1, 1)
            return self.attn(x, x, x, attn_mask=mask)[0]

    def plain(x):
        return Layer(64, 8)(x)
"""

MODEL = """\
    import torch
    from layers import Layer

    def run(x):
        L, B, E = x.shape
        mask = torch.zeros({sizes}, dtype=torch.bool)
        return Layer(64, 8)(x, mask)
"""


def mha006(root: Path, files: dict[str, str]):
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    rules = [load_rules()["MHA006"]]
    return [f for f in Checker(rules).check_paths([root / "layers.py"], jobs=1).findings if f.code == "MHA006"]


@pytest.mark.parametrize(("sizes", "found"), [("B, L, L", True), ("L, L", False)])
def test_a_mask_passed_in_another_file_is_read_beside_this_files_none(tmp_path, sizes, found):
    findings = mha006(tmp_path, {"layers.py": LAYERS, "model.py": MODEL.format(sizes=sizes)})
    assert bool(findings) == found
    if found:
        evidence = " | ".join(findings[0].evidence)
        assert findings[0].severity >= Severity.WARNING and "`L, B, E = x.shape` at model.py:5" in evidence
