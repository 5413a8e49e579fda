"""A model whose attention layer sits inside a wrapper class, fed batch-first data (imported like aliases.py by
test_layout.py, where the wrapper is in the same file, and test_project.py, where it is in another)."""

MODEL_AROUND = """\
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = {wrapper}(nn.TransformerEncoderLayer(64, 8))

    def forward(self, x):
        B, T, C = x.shape
        return self.block(x)
"""
