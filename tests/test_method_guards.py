"""A method that only its own class calls runs under the tests of its calls: `if self.fused: return
self.run_fused(x)` makes `self.fused` hold in `run_fused`, so a call there is paired only with the module built
where `fused` holds (analysis/branches.py, `method_guards`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mhalint.finding import Severity
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

MODEL = """\
    import torch.nn as nn

    class Mixer(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.proj = nn.Linear(width, width)

        def forward(self, x):
            return self.proj(x)

    class Encoder(nn.Module):
        def __init__(self, width, fused):
            super().__init__()
            self.fused = fused
            if fused:
                self.mixer = Mixer(width)
            else:
                self.mixer = nn.MultiheadAttention(width, 8)

        def forward(self, x):
            if self.fused:
                return self.run_fused(x)
            return self.run_plain(x)

        def run_fused(self, x):
            b, t, c = x.shape
            return self.mixer(x)

        def run_plain(self, x):
            {plain} = x.shape
            return self.mixer(x, x, x)[0]
"""


def mha001(root: Path, files: dict[str, str]):
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))
    rules = [load_rules()["MHA001"]]
    return [f for f in Checker(rules).check_paths([root / "model.py"], jobs=1).findings if f.code == "MHA001"]


@pytest.mark.parametrize(("plain", "severity", "headline"), [
    ("t, b, c", Severity.INFO, "implicitly right for sequence-first data (`t, b, c = x.shape`, line 30)"),
    ("b, t, c", Severity.ERROR, "gets batch-first data (`b, t, c = x.shape`, line 30)"),
])
def test_a_call_in_a_method_run_only_where_another_class_is_built_is_not_paired_with_the_attention(
        tmp_path, plain, severity, headline):
    [finding] = mha001(tmp_path, {"model.py": MODEL.format(plain=plain)})
    assert finding.severity == severity and headline in finding.message
    assert "line 26" not in " | ".join(finding.evidence)  # run_fused's batch-first data is the Mixer's


def test_a_method_another_file_names_may_run_elsewhere_and_keeps_every_class(tmp_path):
    [finding] = mha001(tmp_path, {"model.py": MODEL.format(plain="t, b, c"),
                                  "train.py": "def step(encoder, x):\n    return encoder.run_fused(x)\n"})
    assert finding.severity == Severity.WARNING and "`b, t, c = x.shape`, line 26" in finding.message
    assert "`self.mixer` may hold Mixer at this call" in " | ".join(finding.evidence)
