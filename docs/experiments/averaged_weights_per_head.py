"""Head-averaged attention weights read as per-head weights: nn.MultiheadAttention returns its weights averaged
over the heads, (N, L, S), unless average_attn_weights=False gives (N, h, L, S); `w[:, head]` on the averaged
weights is query row `head` of the average, not head `head`.

docs/torch-facts.md#averaged-weights. Deterministic (fixed seeds), about 3 s.
"""

import importlib.util
import inspect
import os

from _helpers import diff, fact, outcome

import torch
from torch import nn

A = "averaged-weights"
N, L, E, H = 2, 5, 16, 4


def weights(seed: int, batch_first: bool = True, length: int = L):
    """(averaged, per-head) weights of one batched self-attention call, the module's slow path (training mode,
    dropout 0) with random non-zero biases."""
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(E, H, batch_first=batch_first)
    with torch.no_grad():
        mha.in_proj_bias.normal_()
        x = torch.randn(N, length, E) if batch_first else torch.randn(length, N, E)
        _, averaged = mha(x, x, x)
        _, per_head = mha(x, x, x, average_attn_weights=False)
    return averaged, per_head


averaged, per_head = weights(0)
fact(A, "N2-L5-h4-averaged-shape", tuple(averaged.shape))
fact(A, "N2-L5-h4-per-head-shape", tuple(per_head.shape))
fact(A, "batch_first-False-averaged-shape", tuple(weights(0, batch_first=False)[0].shape))
fact(A, "averaged-equals-per-head-mean-dim1", diff(averaged, per_head.mean(dim=1)))
# w[:, head] on the averaged weights: query row `head` of the average, shape (N, S), a probability row like a head's
rows = torch.stack([averaged[:, head] for head in range(H)], dim=1)  # what a loop over range(num_heads) reads
fact(A, "index-head-shape", tuple(averaged[:, 0].shape))
fact(A, "index-head-equals-query-row-head-of-average", diff(rows, per_head.mean(dim=1)[:, :H]))
fact(A, "index-head-rows-sum-to-1", bool(torch.allclose(rows.sum(-1), torch.ones(N, H))))
# against the true weights of head `head` at the same query row `head`: (N, S) each


def off(a, p) -> float:
    return max(diff(a[:, head], p[:, head, head]) for head in range(H))


fact(A, "index-head-vs-true-head-weights-max-diff", off(averaged, per_head))
spread = [off(*weights(seed)) for seed in range(1, 11)]
fact(A, "index-head-vs-true-head-weights-min-10-seeds", min(spread))
fact(A, "index-head-vs-true-head-weights-max-10-seeds", max(spread))

# Reading the averaged weights with the head count: raises, or (L a multiple of h) silently regroups
fact(A, "view-N-h-L-S", outcome(lambda: averaged.view(N, H, L, L)))


def unpack():
    batch, heads, length, source = averaged.shape  # noqa: F841  (what code that expects per-head weights writes)


fact(A, "unpack-B-H-L-S", outcome(unpack))
averaged8, per_head8 = weights(0, length=8)
fact(A, "L8-view-N-h-minus1-S-shape", tuple(averaged8.view(N, H, -1, 8).shape))
fact(A, "L8-view-N-h-minus1-S-vs-per-head-row0-max-diff", diff(averaged8.view(N, H, -1, 8)[:, :, 0], per_head8[:, :, 0]))

# Unbatched (L, E) input: (L, S) averaged, (h, L, S) per head
torch.manual_seed(0)
mha = nn.MultiheadAttention(E, H, batch_first=True)
x = torch.randn(L, E)
with torch.no_grad():
    fact(A, "unbatched-averaged-shape", tuple(mha(x, x, x)[1].shape))
    fact(A, "unbatched-per-head-shape", tuple(mha(x, x, x, average_attn_weights=False)[1].shape))
# The inference fast path (eval, no grad, batch_first, even heads) averages the same way
mha.eval()
x = torch.randn(N, L, E)
with torch.no_grad():
    fast_avg, fast_heads = mha(x, x, x)[1], mha(x, x, x, average_attn_weights=False)[1]
mha.train()
with torch.no_grad():
    slow_avg = mha(x, x, x)[1]
fact(A, "fast-path-averaged-shape", tuple(fast_avg.shape))
fact(A, "fast-path-vs-slow-path-averaged", diff(fast_avg, slow_avg))
fact(A, "fast-path-per-head-shape", tuple(fast_heads.shape))

# The slow path's averaging, as torch 2.13 writes it
root = os.path.dirname(importlib.util.find_spec("torch").origin)
with open(os.path.join(root, "nn", "functional.py"), encoding="utf-8") as source:
    lines = source.read().splitlines()
for number in (7051, 7052, 7053):
    fact(A, f"nn/functional.py:{number}", lines[number - 1].strip())
fact(A, "average_attn_weights-default",
     inspect.signature(nn.MultiheadAttention.forward).parameters["average_attn_weights"].default)
