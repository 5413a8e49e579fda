"""MHA014: an (N, S) padding mask given where an (L, S) attention mask is read. nn.MultiheadAttention's attn_mask
must be (L, S) or (N*num_heads, L, S); an (N, S) padding mask there raises unless N == L, and when N == L row i
(sample i's padding) is applied to query position i of every sample. SDPA does the same with a 2-D mask (its
numbers are in docs/torch-facts.md#sdpa-padding-broadcast, sdpa_padding_mask_broadcast.py); this script checks the
fixes on both sides: `key_padding_mask=` for MHA and `mask[:, None, None, :]` for SDPA equal running each sample
alone.

docs/torch-facts.md#padding-mask-shape. Deterministic (fixed seeds), about 2 s.
"""

from _helpers import diff, fact, outcome

import torch
import torch.nn.functional as F

A = "padding-mask-shape"
embed, heads = 16, 4


def padded(n: int, length: int, seed: int):
    """A MultiheadAttention (E=16, 4 heads, batch_first=True), a batch x (N, L, E) and its (N, S) padding mask
    (True = padding, MHA's convention) from random lengths 1..L."""
    torch.manual_seed(seed)
    mha = torch.nn.MultiheadAttention(embed, heads, batch_first=True)
    with torch.no_grad():  # non-zero biases
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    x = torch.randn(n, length, embed)
    lengths = torch.randint(1, length + 1, (n,))
    lengths[0] = length  # one full row, one short one at least: the rows differ
    lengths[-1] = max(1, length // 2)
    padding = torch.arange(length)[None, :] >= lengths[:, None]
    return mha, x, padding


def mha_case(n: int, length: int, seed: int, fast: bool = False):
    """(the padding mask as attn_mask, minus the key_padding_mask result), or the error text."""
    mha, x, padding = padded(n, length, seed)
    mha.eval() if fast else mha.train()  # dropout is 0: only the path changes
    with torch.no_grad():
        intended = mha(x, x, x, key_padding_mask=padding, need_weights=False)[0]
        try:
            as_attn_mask = mha(x, x, x, attn_mask=padding, need_weights=False)[0]
        except (RuntimeError, AssertionError) as error:
            return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return diff(as_attn_mask, intended)


# ---- MultiheadAttention ----------------------------------------------------------------------------------------
fact(A, "mha-N6-L6-slow", mha_case(6, 6, 0))
fact(A, "mha-N6-L6-fast", mha_case(6, 6, 0, fast=True))
fact(A, "mha-N2-L6", mha_case(2, 6, 0))
spread = [mha_case(n, n, seed) for n in (4, 6, 10) for seed in range(1, 8)]
fact(A, "mha-N-equals-L-min-21-draws", min(spread))
fact(A, "mha-N-equals-L-max-21-draws", max(spread))

# the fix: key_padding_mask= gives what each sample run alone gives (no mask, its padded keys cut off)
mha, x, padding = padded(6, 6, 0)
mha.train()
with torch.no_grad():
    batched = mha(x, x, x, key_padding_mask=padding, need_weights=False)[0]
    alone = []
    for i in range(6):
        keys = x[i:i + 1, ~padding[i]]
        alone.append(mha(x[i:i + 1], keys, keys, need_weights=False)[0])
fact(A, "mha-key_padding_mask-equals-per-sample", diff(batched, torch.cat(alone)))
# an additive float mask (0 / -inf) behaves the same way
additive = torch.zeros(padding.shape).masked_fill(padding, float("-inf"))
with torch.no_grad():
    fact(A, "mha-additive-N6-L6-slow", diff(mha(x, x, x, attn_mask=additive, need_weights=False)[0],
                                            mha(x, x, x, key_padding_mask=additive, need_weights=False)[0]))
# the 3-D form for MHA is (N*num_heads, L, S), batch-major: the padding mask expanded that way is right too
per_sample = padding[:, None, :].expand(6, 6, 6).repeat_interleave(heads, dim=0)
with torch.no_grad():
    fact(A, "mha-3d-Nh-L-S-equals-key_padding_mask", diff(mha(x, x, x, attn_mask=per_sample,
                                                                need_weights=False)[0], batched))

# ---- SDPA: the fix ------------------------------------------------------------------------------------------------
torch.manual_seed(0)
n, length, head_dim = 4, 4, 8
q = torch.randn(n, 8, length, head_dim)
keep = torch.arange(length)[None, :] < torch.tensor([4, 1, 3, 2])[:, None]  # (N, S), True = attend
broadcast = F.scaled_dot_product_attention(q, q, q, attn_mask=keep[:, None, None, :])
alone = torch.cat([F.scaled_dot_product_attention(q[i:i + 1], q[i:i + 1, :, keep[i]], q[i:i + 1, :, keep[i]])
                   for i in range(n)])
fact(A, "sdpa-N-1-1-S-equals-per-sample", diff(broadcast, alone))
fact(A, "sdpa-unsqueeze-1-2-equals-N-1-1-S", diff(F.scaled_dot_product_attention(
    q, q, q, attn_mask=keep.unsqueeze(1).unsqueeze(2)), broadcast))
fact(A, "sdpa-N4-L4-as-given-off", diff(F.scaled_dot_product_attention(q, q, q, attn_mask=keep), broadcast))
# a 3-D query (N, L, E): the per-sample form is mask[:, None, :]; (N, 1, 1, S) broadcasts to a 4-D output
q3 = torch.randn(n, length, head_dim)
fact(A, "sdpa-3d-query-N-1-S-output-shape", tuple(F.scaled_dot_product_attention(
    q3, q3, q3, attn_mask=keep[:, None, :]).shape))
fact(A, "sdpa-3d-query-N-1-1-S", outcome(lambda: F.scaled_dot_product_attention(
    q3, q3, q3, attn_mask=keep[:, None, None, :])))

# ---- the torch source lines the rule cites ------------------------------------------------------------------------
import os  # noqa: E402

root = os.path.dirname(torch.__file__)
for name, number in (("nn/functional.py", 6905), ("nn/functional.py", 6909), ("nn/modules/activation.py", 1296)):
    with open(os.path.join(root, name), encoding="utf-8") as source:
        fact(A, f"{name}:{number}", source.read().splitlines()[number - 1].strip())
