"""MHA103 (runtime guard): where NaN in an attention output comes from when no fully masked row explains it: NaN in
the inputs (it stays within its sample), NaN or +inf in a float mask, NaN in the parameters; the CPU flash kernel,
which returns zeros for a NaN query row; and the cheap test the guard uses (a sum is NaN when any element is).

docs/torch-facts.md#nan-output. Deterministic (fixed seed), about 2 s.
"""

from _helpers import fact

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

A = "nan-output"
N, L, E, h = 3, 5, 16, 4


def nan_samples(t) -> str:
    found = [i for i in range(t.shape[0]) if bool(t[i].isnan().any())]
    return str(found) if found else "none"


torch.manual_seed(0)
mha = nn.MultiheadAttention(E, h, batch_first=True)
x = torch.randn(N, L, E)
poisoned = x.clone()
poisoned[1, 2, 0] = float("nan")  # one number of sample 1, position 2
for mode in ("train", "eval-no_grad"):
    mha.train(mode == "train")
    with torch.no_grad():
        for need_weights in (False, True):
            out = mha(poisoned, poisoned, poisoned, need_weights=need_weights)[0]
            fact(A, f"mha-{mode}-need_weights-{need_weights}-nan-input-sample1-nan-samples", nan_samples(out))
            rows = [i for i in range(L) if bool(out[1, i].isnan().any())]
            fact(A, f"mha-{mode}-need_weights-{need_weights}-nan-input-sample1-nan-rows", str(rows))
mha.train()
with torch.no_grad():
    for name, value in (("nan", float("nan")), ("plus-inf", float("inf"))):
        mask = torch.zeros(L, L)
        mask[3, 1] = value  # one entry of query row 3
        for need_weights in (False, True):
            out = mha(x, x, x, attn_mask=mask, need_weights=need_weights)[0]
            rows = [i for i in range(L) if bool(out[:, i].isnan().any())]
            fact(A, f"mha-float-mask-{name}-entry-need_weights-{need_weights}-nan-rows", str(rows) if rows else "none")
    q = torch.randn(N, h, L, E // h)
    mask = torch.zeros(L, L)
    mask[3, 1] = float("inf")
    out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
    rows = [i for i in range(L) if bool(out[:, :, i].isnan().any())]
    fact(A, "sdpa-float-mask-plus-inf-entry-nan-rows", str(rows) if rows else "none")
    # NaN in a parameter: in a key projection weight it reaches every output; in a query projection weight the
    # CPU flash kernel (need_weights=False) returns zeros for the NaN query rows instead of NaN
    for name, row in (("key", E), ("query", 0)):
        with_nan = nn.MultiheadAttention(E, h, batch_first=True).train()
        with_nan.in_proj_weight[row, 0] = float("nan")
        for need_weights in (False, True):
            fact(A, f"mha-nan-in-{name}-projection-weight-need_weights-{need_weights}-nan-samples",
                 nan_samples(with_nan(x, x, x, need_weights=need_weights)[0]))
    q = torch.randn(1, 1, 4, 4)
    k, v = torch.randn(1, 1, 4, 4), torch.randn(1, 1, 4, 4)
    q[0, 0, 1, 0] = float("nan")  # query row 1
    out = F.scaled_dot_product_attention(q, k, v)
    fact(A, "sdpa-default-nan-query-row-is-zeros", bool((out[0, 0, 1] == 0).all()))
    fact(A, "sdpa-default-nan-query-other-rows-finite", bool(out[0, 0, [0, 2, 3]].isfinite().all()))
    with sdpa_kernel(SDPBackend.MATH):
        fact(A, "sdpa-MATH-nan-query-row-is-nan", bool(F.scaled_dot_product_attention(q, k, v)[0, 0, 1].isnan().all()))
    k[0, 0, 2, 0] = float("nan")
    q = torch.randn(1, 1, 4, 4)
    fact(A, "sdpa-default-nan-key-all-rows-nan", bool(F.scaled_dot_product_attention(q, k, v).isnan().all()))

values = torch.tensor([1.0, float("inf"), float("-inf")])
fact(A, "sum-of-plus-and-minus-inf-isnan", bool(values.sum().isnan()))
fact(A, "isnan-any-of-plus-and-minus-inf", bool(values.isnan().any()))
fact(A, "sum-with-a-nan-isnan", bool(torch.tensor([1.0, float("nan")]).sum().isnan()))
