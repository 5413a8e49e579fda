"""MHA017: F.scaled_dot_product_attention multiplies q @ k^T by `scale`, 1/sqrt(E) by default (E = q.size(-1)). A
query already multiplied by E ** -0.5 (the hand-written attention's habit, kept when the code moves to SDPA) is
scaled twice: the scores are divided by E, the softmax is flatter, and nothing raises. `scale=math.sqrt(E)`, the
square root itself, multiplies the scores by sqrt(E) instead: a sharper softmax.

docs/torch-facts.md#attention-scale. Deterministic (fixed seed), under a second.
"""

from _helpers import diff, fact

import math

import torch
import torch.nn.functional as F

A = "attention-scale"
B, H, L, E = 2, 4, 6, 16  # the probe's sizes


def entropy(q, k, scale):
    """The mean entropy (nats) of the attention rows softmax(q @ k^T * scale)."""
    weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
    return float(-(weights * weights.clamp_min(1e-12).log()).sum(-1).mean())


generator = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(B, H, L, E, generator=generator) * 2 for _ in range(3))
right = F.scaled_dot_product_attention(q, k, v)
twice = F.scaled_dot_product_attention(q * E ** -0.5, k, v)
inverted = F.scaled_dot_product_attention(q, k, v, scale=math.sqrt(E))
fact(A, "default-scale-is-1-over-sqrt-E", diff(right, F.scaled_dot_product_attention(q, k, v, scale=E ** -0.5)))
fact(A, "pre-scaled-q-then-scale-1", diff(right, F.scaled_dot_product_attention(q * E ** -0.5, k, v, scale=1.0)))
fact(A, "scaled-twice-max-abs-difference", diff(twice, right))
fact(A, "scale-sqrt-E-max-abs-difference", diff(inverted, right))
fact(A, "entropy-right", entropy(q, k, E ** -0.5))
fact(A, "entropy-scaled-twice", entropy(q, k, 1 / E))
fact(A, "entropy-scale-sqrt-E", entropy(q, k, math.sqrt(E)))
fact(A, "entropy-uniform", math.log(L))
