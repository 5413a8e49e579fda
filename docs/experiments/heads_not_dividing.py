"""MHA005: what building a MultiheadAttention (or a Transformer class) with sizes that do not fit raises, also
under `python -O`.

docs/torch-facts.md#heads-dividing. Deterministic, about 4 s (it starts one `python -O` subprocess).
"""

import subprocess
import sys

from _helpers import fact, outcome

from torch import nn

A = "heads-dividing"

for embed, heads in ((10, 3), (512, 7), (300, 8), (100, 8)):
    fact(A, f"MultiheadAttention-{embed}-{heads}", outcome(lambda: nn.MultiheadAttention(embed, heads)))
for embed, heads in ((0, 1), (8, 0), (8, -2)):
    fact(A, f"MultiheadAttention-{embed}-{heads}", outcome(lambda: nn.MultiheadAttention(embed, heads)))
# the Transformer classes build a MultiheadAttention from d_model and nhead, so they raise the same
fact(A, "TransformerEncoderLayer-300-8", outcome(lambda: nn.TransformerEncoderLayer(300, 8, 16, 0.0)))
fact(A, "TransformerDecoderLayer-300-8", outcome(lambda: nn.TransformerDecoderLayer(300, 8, 16, 0.0)))
fact(A, "Transformer-d_model100-default-nhead", outcome(lambda: nn.Transformer(d_model=100, num_encoder_layers=1,
                                                                               num_decoder_layers=1,
                                                                               dim_feedforward=16)))
fact(A, "Transformer-default-d_model-nhead", f"{nn.Transformer.__init__.__defaults__[0]}, "
                                             f"{nn.Transformer.__init__.__defaults__[1]}")
fact(A, "TransformerEncoderLayer-300-6", outcome(lambda: nn.TransformerEncoderLayer(300, 6, 16, 0.0)))

# An `assert` statement vanishes under python -O; torch's check is an explicit raise, so it stays.
code = ("import warnings; warnings.filterwarnings('ignore'); import torch\n"
        "try:\n    torch.nn.MultiheadAttention(10, 3)\nexcept AssertionError as e:\n    print('AssertionError:', e)\n"
        "else:\n    print('built')\n")
optimized = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, check=True)
fact(A, "MultiheadAttention-10-3-under-python-O", optimized.stdout.strip())
