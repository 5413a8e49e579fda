"""MHA102 (runtime guard): an (N, S) padding mask given to F.scaled_dot_product_attention as it is. SDPA broadcasts
a 2-D mask as (1, 1, L, S): row i is applied to query position i of every sample. That is silent exactly when
N == L (and harmless when N == 1); otherwise the shapes do not broadcast and it raises.

docs/torch-facts.md#sdpa-padding-broadcast. Deterministic (fixed seeds), about 2 s.
"""

from _helpers import diff, fact, first_line

import torch
import torch.nn.functional as F

A = "sdpa-padding-broadcast"
heads, head_dim = 8, 8


def case(n: int, length: int, seed: int):
    """(the (N, S) keep-mask passed as it is, minus the correct (N, 1, 1, S) form), or the error text."""
    torch.manual_seed(seed)
    q = torch.randn(n, heads, length, head_dim)
    lengths = torch.randint(1, length + 1, (n,))
    keep = torch.arange(length)[None, :] < lengths[:, None]  # (N, S), True = attend (SDPA's convention)
    intended = F.scaled_dot_product_attention(q, q, q, attn_mask=keep[:, None, None, :])
    try:
        as_given = F.scaled_dot_product_attention(q, q, q, attn_mask=keep)
    except RuntimeError as error:
        return f"RuntimeError: {first_line(error)}"
    return diff(as_given, intended)


for n, length in ((4, 4), (10, 10), (1, 10), (4, 10), (4, 1)):
    fact(A, f"N{n}-L{length}", case(n, length, n * 100 + length))
spread = [case(n, n, seed) for n in (4, 10) for seed in range(1, 11)]
fact(A, "N-equals-L-min-20-draws", min(spread))
fact(A, "N-equals-L-max-20-draws", max(spread))

# the reading, shown directly: a 2-D (L, S) mask is the same as that mask at (1, 1, L, S)
torch.manual_seed(0)
q = torch.randn(3, heads, 3, head_dim)
mask = torch.rand(3, 3) > 0.3
mask[:, 0] = True
fact(A, "2d-mask-equals-1-1-L-S", diff(F.scaled_dot_product_attention(q, q, q, attn_mask=mask),
                                       F.scaled_dot_product_attention(q, q, q, attn_mask=mask[None, None])))
