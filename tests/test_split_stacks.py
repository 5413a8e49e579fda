"""A stack of layers whose parts live in different files (the DETR family split up): the layer class and the
stack that clones it in one file, the clone helper in a utilities file, and the stack assembled (the layer built
and handed to the stack) and run in a third. The layer's data comes from the stack's caller there."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_loaders import write

from mhalint.analysis.calls import instance
from mhalint.analysis.project import Project
from mhalint.finding import Severity
from mhalint.rule import load_rules
from mhalint.run.budget import Limits
from mhalint.run.engine import Checker

HELPERS = """\
    import copy
    import torch.nn as nn

    def clone_layers(block, count):
        return nn.ModuleList([copy.deepcopy(block) for _ in range(count)])
"""

LAYERS = """\
    import torch.nn as nn
    from {helpers} import clone_layers

    class Stack(nn.Module):
        def __init__(self, settings, block, depth):
            super().__init__()
            self.settings = settings
            self.blocks = clone_layers(block, depth)

        def forward(self, tokens):
            out = tokens
            for block in self.blocks:
                out = block(out)
            return out

    class Block(nn.Module):
        def __init__(self, width, heads):
            super().__init__()
            self.attn = nn.MultiheadAttention(width, heads)
            self.norm = nn.LayerNorm(width)

        def forward(self, x):
            return self.norm(x + self.attn(x, x, x)[0])
"""

MODEL = """\
    import torch.nn as nn
    from {layers} import Block, Stack

    class Detector(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.backbone = nn.Conv2d(3, width, 3)
            self.encoder = Stack(None, Block(width, 8), 6)

        def forward(self, images):
            feats = self.backbone(images)
            return self.encoder({data})
"""


def mha001(paths: list[Path]):
    rules = [load_rules()["MHA001"]]
    return [f for f in Checker(rules).check_paths(paths, jobs=1).findings if f.code == "MHA001"]


def split(root: Path, data: str) -> None:
    write(root, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS,
                 "pkg/layers.py": LAYERS.format(helpers=".helpers"),
                 "pkg/model.py": MODEL.format(layers=".layers", data=data)})


@pytest.mark.parametrize(("data", "severity", "said"), [
    ("feats.flatten(2).permute(2, 0, 1)", Severity.INFO, "implicitly right for sequence-first data "
                                                         "(`feats.flatten(2).permute(2, 0, 1)`, model.py:12)"),
    ("feats.flatten(2).transpose(1, 2)", Severity.ERROR, "gets batch-first data (`feats.flatten(2).transpose(1, 2)`, "
                                                         "model.py:12)"),
    ("feats", Severity.WARNING, "`self.backbone(images)` (model.py:11) does not show where the batch is"),
])
def test_a_layer_cloned_by_a_helper_of_another_file_and_built_in_a_third_is_judged_by_the_stacks_caller(
        tmp_path, data, severity, said):
    split(tmp_path, data)
    [finding] = mha001([tmp_path / "pkg" / "layers.py"])
    assert finding.severity == severity and said in finding.message
    assert "no caller found" not in finding.message


def test_a_stack_no_file_builds_leaves_its_layers_data_unknown(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS,
                     "pkg/layers.py": LAYERS.format(helpers=".helpers")})
    [finding] = mha001([tmp_path / "pkg" / "layers.py"])
    assert finding.severity == Severity.WARNING
    assert "`x`, is a parameter of `Block.forward` with no caller found in the project" in finding.message


HELPER_OF_TWO_RETURNS = """\
    import copy
    import torch.nn as nn

    def clone_layers(block, count, shared=False):
        if shared:
            return nn.ModuleList([block for _ in range(count)])
        return nn.ModuleList([copy.deepcopy(block) for _ in range(count)])
"""


def test_every_return_of_an_imported_clone_helper_holds_the_layer_it_is_given(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPER_OF_TWO_RETURNS,
                     "pkg/layers.py": LAYERS.format(helpers=".helpers"),
                     "pkg/model.py": MODEL.format(layers=".layers", data="feats.flatten(2).transpose(1, 2)")})
    [finding] = mha001([tmp_path / "pkg" / "layers.py"])
    assert finding.severity == Severity.ERROR


BUILDS_ITS_OWN = """\
    import torch.nn as nn

    def attention_stack(norm, count):
        return nn.ModuleList([nn.MultiheadAttention(64, 8) for _ in range(count)])
"""
USES_IT = """\
    import torch.nn as nn
    from .helpers import attention_stack

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(64)
            self.blocks = attention_stack(self.norm, 2)

        def forward(self, x):
            for block in self.blocks:
                x = block(x, x, x)[0]
            return x
"""


def test_modules_an_imported_helper_builds_itself_are_not_this_files(tmp_path):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": BUILDS_ITS_OWN, "pkg/layers.py": USES_IT})
    project = Project([str(path) for path in (tmp_path / "pkg").glob("*.py")])
    ctx = project.context(str(tmp_path / "pkg" / "layers.py"), Limits(None))
    ctx.project = project
    [(call, scope)] = [(call, scope) for call, scope in ctx.calls() if ctx.code(call) == "block(x, x, x)"]
    assert instance(ctx, call.func, scope) is None  # helpers.py's nn.MultiheadAttention(...): a node of no context here


BUILDER = """\
    import torch.nn as nn
    from .layers import Block, Stack

    class Pooler(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.proj = nn.Linear(width, width)

        def forward(self, tokens):
            return self.proj(tokens)

    def build_encoder(kind, width):
        if kind == "stack":
            encoder = Stack(None, Block(width, 8), 6)
        elif kind == "pool":
            encoder = Pooler(width)
        else:
            raise ValueError(kind)
        return encoder

    class Detector(nn.Module):
        def __init__(self, encoder, width):
            super().__init__()
            self.backbone = nn.Conv2d(3, width, 3)
            self.encoder = encoder

        def forward(self, images):
            feats = self.backbone(images)
            return self.encoder({data})

    def build(kind, width):
        return Detector(build_encoder(kind, width), width)
"""


@pytest.mark.parametrize(("data", "severity"), [
    ("feats.flatten(2).permute(2, 0, 1)", Severity.INFO),
    ("feats.flatten(2).transpose(1, 2)", Severity.ERROR),
    ("feats", Severity.WARNING),
])
def test_a_stack_a_builder_picks_on_a_branch_and_hands_to_a_model_is_judged_by_the_models_call(tmp_path, data,
                                                                                                  severity):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS,
                     "pkg/layers.py": LAYERS.format(helpers=".helpers"),
                     "pkg/model.py": BUILDER.format(data=data)})
    [finding] = mha001([tmp_path / "pkg" / "layers.py"])
    assert finding.severity == severity and "model.py:2" in finding.message  # line 28 or 29 there


CLONING_MODEL = """\
    import torch.nn as nn
    from .helpers import clone_layers
    from .layers import Block

    class Detector(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.backbone = nn.Conv2d(3, width, 3)
            self.blocks = clone_layers(Block(width, 8), 2)

        def forward(self, images):
            feats = self.backbone(images)
            return self.blocks[0]({data})
"""


@pytest.mark.parametrize(("data", "severity"), [("feats.flatten(2).permute(2, 0, 1)", Severity.INFO),
                                                ("feats.flatten(2).transpose(1, 2)", Severity.ERROR)])
def test_a_caller_in_another_file_that_clones_the_layer_with_an_imported_helper_is_found(tmp_path, data, severity):
    write(tmp_path, {"pkg/__init__.py": "", "pkg/helpers.py": HELPERS,
                     "pkg/layers.py": LAYERS.format(helpers=".helpers"),
                     "pkg/model.py": CLONING_MODEL.format(data=data)})
    [finding] = mha001([tmp_path / "pkg" / "layers.py"])
    assert finding.severity == severity and "model.py:13" in finding.message
