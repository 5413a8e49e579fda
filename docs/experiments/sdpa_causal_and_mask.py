"""MHA009: F.scaled_dot_product_attention given both attn_mask and is_causal=True. The docstring says it raises; on
CPU the default kernel applies the mask AND the causal pattern, and only the MATH kernel raises.

The setup is the one MHA009's probe uses (N=2, 4 heads, L=S=6, head size 4, a generator seeded 0, a bool mask
that hides key 0 from every query but the first). docs/torch-facts.md#sdpa-causal-and-mask. Deterministic, 2 s.
"""

from _helpers import diff, fact, outcome

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right, causal_upper_left

A = "sdpa-causal-and-mask"
generator = torch.Generator().manual_seed(0)
n, h, length, d = 2, 4, 6, 4
q, k, v = (torch.randn(n, h, length, d, generator=generator) for _ in range(3))
keep = torch.ones(length, length, dtype=torch.bool)
keep[1:, 0] = False  # hide key 0 from every query but the first (whose row would be empty under causal)
tril = torch.ones(length, length, dtype=torch.bool).tril()


def sdpa(**kwargs):
    return F.scaled_dot_product_attention(q, k, v, **kwargs)


fact(A, "cpu-default-backend", torch._fused_sdp_choice(q, k, v, keep, 0.0, True))
fact(A, "SDPBackend-FLASH_ATTENTION", int(SDPBackend.FLASH_ATTENTION.value))
both = sdpa(attn_mask=keep, is_causal=True)
fact(A, "default-off-mask-and-causal", diff(both, sdpa(attn_mask=keep & tril)))
fact(A, "default-off-mask-only", diff(both, sdpa(attn_mask=keep)))
fact(A, "default-off-causal-only", diff(both, sdpa(is_causal=True)))
off_mask, off_causal = [], []
for seed in range(1, 11):  # the same experiment with other draws: how much the two numbers depend on the data
    draw = torch.Generator().manual_seed(seed)
    q2, k2, v2 = (torch.randn(n, h, length, d, generator=draw) for _ in range(3))
    out = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=keep, is_causal=True)
    off_mask.append(diff(out, F.scaled_dot_product_attention(q2, k2, v2, attn_mask=keep)))
    off_causal.append(diff(out, F.scaled_dot_product_attention(q2, k2, v2, is_causal=True)))
fact(A, "default-off-mask-only-min-10-seeds", min(off_mask))
fact(A, "default-off-mask-only-max-10-seeds", max(off_mask))
fact(A, "default-off-causal-only-min-10-seeds", min(off_causal))
fact(A, "default-off-causal-only-max-10-seeds", max(off_causal))
additive = torch.zeros(length, length).masked_fill(~keep, float("-inf"))
fact(A, "default-float-mask-off-mask-and-causal",
     diff(sdpa(attn_mask=additive, is_causal=True), sdpa(attn_mask=additive.masked_fill(~tril, float("-inf")))))
with torch.enable_grad():
    q_grad = q.clone().requires_grad_()
    with_grad = F.scaled_dot_product_attention(q_grad, k, v, attn_mask=keep, is_causal=True).detach()
fact(A, "default-requires_grad-off-mask-and-causal", diff(with_grad, sdpa(attn_mask=keep & tril)))

for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION):
    with sdpa_kernel(backend):
        fact(A, f"sdpa_kernel-{backend.name}", outcome(lambda: sdpa(attn_mask=keep, is_causal=True)))
with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
    fact(A, "sdpa_kernel-FLASH_ATTENTION-off-mask-and-causal",
         diff(sdpa(attn_mask=keep, is_causal=True), sdpa(attn_mask=keep & tril)))
with sdpa_kernel(SDPBackend.MATH):
    fact(A, "sdpa_kernel-MATH-causal-only", outcome(lambda: sdpa(is_causal=True)))
fact(A, "docstring", next(line.strip() for line in F.scaled_dot_product_attention.__doc__.splitlines()
                          if "An error is thrown" in line))

# is_causal alone when L != S: the triangle is aligned to the upper left.
generator = torch.Generator().manual_seed(1)
qs, ks = torch.randn(1, 1, 3, 4, generator=generator), torch.randn(1, 1, 5, 4, generator=generator)
flagged = F.scaled_dot_product_attention(qs, ks, ks, is_causal=True)
upper_left = torch.ones(3, 5, dtype=torch.bool).tril(0)
lower_right = torch.ones(3, 5, dtype=torch.bool).tril(5 - 3)
fact(A, "is_causal-L3-S5-off-upper-left", diff(flagged, F.scaled_dot_product_attention(qs, ks, ks, attn_mask=upper_left)))
fact(A, "is_causal-L3-S5-off-lower-right",
     diff(flagged, F.scaled_dot_product_attention(qs, ks, ks, attn_mask=lower_right)))
fact(A, "causal_upper_left-off-is_causal",
     diff(F.scaled_dot_product_attention(qs, ks, ks, attn_mask=causal_upper_left(3, 5)), flagged))
fact(A, "causal_lower_right-off-tril-2",
     diff(F.scaled_dot_product_attention(qs, ks, ks, attn_mask=causal_lower_right(3, 5)),
          F.scaled_dot_product_attention(qs, ks, ks, attn_mask=lower_right)))
