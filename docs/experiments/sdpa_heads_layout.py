"""MHA013: q, k and v given to F.scaled_dot_product_attention as (N, L, H, E), straight from the head split
`view(B, T, H, D)`, instead of (N, H, L, E). SDPA attends over the second-to-last axis and treats every axis before
it as batch, so the heads attend to one another at each position; nothing raises for self-attention (any L, H). With
L != S (cross-attention) the shapes no longer broadcast and it raises. The same mix happens when a correct
(N, H, L, E) output is merged back with `reshape(N, L, H * E)` without the inverse transpose.

docs/torch-facts.md#sdpa-heads-layout. Deterministic (fixed seeds), about 2 s.
"""

from _helpers import diff, fact, outcome

import torch
import torch.nn.functional as F

A = "sdpa-heads-layout"


def split(n: int, length: int, heads: int, head_dim: int, seed: int):
    """q, k, v as the head split gives them, (N, L, H, E), from one random (N, L, H * E) projection each."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(n, length, heads * head_dim, generator=generator).view(n, length, heads, head_dim)
            for _ in range(3)]


def wrong_minus_right(n: int, length: int, heads: int, head_dim: int, seed: int, causal: bool = False) -> float:
    """SDPA on the (N, L, H, E) split as it is, minus SDPA on its transpose (N, H, L, E) transposed back."""
    q, k, v = split(n, length, heads, head_dim, seed)
    as_written = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    intended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                              is_causal=causal).transpose(1, 2)
    assert as_written.shape == intended.shape == q.shape  # the same shape: nothing downstream notices
    return diff(as_written, intended)


# the probe's shape: N=2, L=6, H=4, E=8
fact(A, "N2-L6-H4-E8", wrong_minus_right(2, 6, 4, 8, 0))
fact(A, "N2-L6-H4-E8-causal", wrong_minus_right(2, 6, 4, 8, 0, causal=True))
fact(A, "N4-L16-H8-E16", wrong_minus_right(4, 16, 8, 16, 1))
fact(A, "N2-L4-H4-E8", wrong_minus_right(2, 4, 4, 8, 2))  # L == H: the shapes are even the same as the input's
spread = [wrong_minus_right(2, length, 4, 8, seed) for length in (3, 6, 12) for seed in range(1, 11)]
fact(A, "self-attention-min-30-draws", min(spread))
fact(A, "self-attention-max-30-draws", max(spread))
fact(A, "output-shape-same", tuple(F.scaled_dot_product_attention(*split(2, 6, 4, 8, 0)).shape))

# one head: (N, L, 1, E) attends within each position over a single key, so it returns v itself
q, k, v = split(2, 6, 1, 8, 3)
fact(A, "one-head-returns-v", diff(F.scaled_dot_product_attention(q, k, v), v))

# cross-attention, L != S: (N, L, H, E) against (N, S, H, E) raises
q = split(2, 6, 4, 8, 4)[0]
k, v = split(2, 10, 4, 8, 5)[:2]
fact(A, "cross-L6-S10", outcome(lambda: F.scaled_dot_product_attention(q, k, v)))
fact(A, "cross-L6-S10-transposed", outcome(lambda: F.scaled_dot_product_attention(
    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))))

# the merge back: a correct (N, H, L, E) output reshaped to (N, L, H * E) without the inverse transpose
q, k, v = (t.transpose(1, 2) for t in split(2, 6, 4, 8, 0))
out = F.scaled_dot_product_attention(q, k, v)
fact(A, "merge-without-transpose", diff(out.reshape(2, 6, 32), out.transpose(1, 2).reshape(2, 6, 32)))
