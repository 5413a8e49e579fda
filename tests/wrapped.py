"""A model whose attention layer sits inside a wrapper class, fed batch-first data (imported like aliases.py by
test_mha001_layout.py, where the wrapper is in the same file, and test_project.py, where it is in another)."""

MODEL_AROUND = """\
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = {wrapper}(nn.TransformerEncoderLayer(64, 8))

    def forward(self, x):
        B, T, C = x.shape
        return self.block(x)
"""

# A project split in two files: the class in one, the caller that shows the layout in the other (test_project.py,
# test_flake8_plugin.py and test_server_parts.py check one file of it alone).
ENCODER = """\
import torch.nn as nn

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(64, 8)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]
"""
CALLER = """\
from {module} import Encoder

def step(x):
    {unpack} = x.shape
    return Encoder()(x)
"""
