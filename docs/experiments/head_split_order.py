"""MHA016: a head split or merge written as one `view`/`reshape` that reorders axes. A view keeps the elements'
order in memory, so `x.view(B, H, T, D)` of a (B, T, H * D) projection does not move the heads before the
positions: it cuts the (T, H * D) block of each sample into H rows of T * D values, and "position" t of "head" h
holds pieces of several tokens. Likewise `y.reshape(B, T, H * D)` of a (B, H, T, D) attention output, without the
inverse transpose, makes each merged "position" out of several heads at several positions. Nothing raises: the
shapes are the ones the next line expects. Under a causal mask the scramble reads the future: an output at an early
position changes when only the last token changes.

docs/torch-facts.md#head-split-order. Deterministic (fixed seeds), about 1 s.
"""

from _helpers import diff, fact

import torch
import torch.nn.functional as F

A = "head-split-order"
B, T, H, D = 2, 6, 4, 8  # the probe's sizes


def attention(x: torch.Tensor, split: str, merge: str) -> torch.Tensor:
    """Causal self-attention over (B, T, H * D) with the heads split and merged as written (`split`, `merge`:
    "view" for the one-step reshape, "transpose" for the view then transpose)."""
    if split == "view":
        q = x.view(B, H, T, D)
    else:
        q = x.view(B, T, H, D).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    return y.reshape(B, T, H * D) if merge == "view" else y.transpose(1, 2).reshape(B, T, H * D)


def positions_moved(split: str, merge: str, seed: int) -> list[int]:
    """The output positions that change when only the last token's features change."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, H * D, generator=generator)
    changed = x.clone()
    changed[:, -1] += torch.randn(B, H * D, generator=generator)
    moved = (attention(changed, split, merge) - attention(x, split, merge)).abs().amax(dim=(0, 2))
    return [position for position in range(T) if moved[position] > 1e-6]


# the correct split and merge: only the last position sees the last token
fact(A, "correct-positions-moved-by-last-token", positions_moved("transpose", "transpose", 0))
# `x.view(B, H, T, D)`: earlier positions move too (the future leaks under is_causal=True)
fact(A, "split-view-positions-moved-by-last-token", positions_moved("view", "transpose", 0))
# a correct split, `y.reshape(B, T, H * D)` without the transpose
fact(A, "merge-reshape-positions-moved-by-last-token", positions_moved("transpose", "view", 0))
fact(A, "split-view-leaks-in-10-of-10-draws",
     sum(positions_moved("view", "transpose", seed)[0] < T - 1 for seed in range(1, 11)))

# how far the outputs are from the correct ones, same input
generator = torch.Generator().manual_seed(0)
x = torch.randn(B, T, H * D, generator=generator)
right = attention(x, "transpose", "transpose")
fact(A, "split-view-max-abs-difference", diff(attention(x, "view", "transpose"), right))
fact(A, "merge-reshape-max-abs-difference", diff(attention(x, "transpose", "view"), right))
fact(A, "shapes-same", tuple(attention(x, "view", "view").shape) == tuple(right.shape))
