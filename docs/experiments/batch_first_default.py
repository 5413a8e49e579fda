"""MHA001: batch-first (N, L, E) data given to a module left at batch_first=False mixes samples, without an error.

Change only sample 1 of a batch and measure how far sample 0's output moves. docs/torch-facts.md#batch-first.
Deterministic (fixed seeds), about 3 s.
"""

import warnings

from _helpers import diff, fact

import torch
from torch import nn

A = "batch-first"
N, L, E, h = 4, 10, 64, 8


def moved(data_seed: int, module_seed: int, batch_first: bool, layer: bool = False) -> tuple[float, tuple]:
    """(how far sample 0's output moved when only sample 1 changed, the attention weights' shape)."""
    torch.manual_seed(data_seed)
    x = torch.randn(N, L, E)  # the data is (N, L, E)
    changed = x.clone()
    changed[1] += torch.randn(L, E)  # change sample 1 only
    torch.manual_seed(module_seed)
    if layer:
        module = nn.TransformerEncoderLayer(E, h, dim_feedforward=128, dropout=0.0, batch_first=batch_first).eval()
    else:
        module = nn.MultiheadAttention(E, h, batch_first=batch_first).eval()
    with torch.no_grad():
        if layer:
            return diff(module(x)[0], module(changed)[0]), ()
        out, weights = module(x, x, x)
        return diff(out[0], module(changed, changed, changed)[0][0]), tuple(weights.shape)


for batch_first in (False, True):
    distance, shape = moved(0, 1, batch_first)
    fact(A, f"mha-batch_first-{batch_first}-sample0-moved", distance)
    fact(A, f"mha-batch_first-{batch_first}-weights-shape", shape)
distances = [moved(seed, seed + 1, False)[0] for seed in range(0, 20, 2)]
fact(A, "mha-batch_first-False-sample0-moved-min-10-seeds", min(distances))
fact(A, "mha-batch_first-False-sample0-moved-max-10-seeds", max(distances))
for batch_first in (False, True):
    fact(A, f"encoder-layer-batch_first-{batch_first}-sample0-moved", moved(0, 2, batch_first, layer=True)[0])

# The defaults themselves.
fact(A, "default-MultiheadAttention", nn.MultiheadAttention(8, 2).batch_first)
fact(A, "default-TransformerEncoderLayer", nn.TransformerEncoderLayer(8, 2).self_attn.batch_first)
fact(A, "default-TransformerDecoderLayer", nn.TransformerDecoderLayer(8, 2).self_attn.batch_first)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the nested-tensor notice that batch_first=False also triggers
    fact(A, "default-Transformer", nn.Transformer(8, 2, 1, 1, 16).batch_first)
