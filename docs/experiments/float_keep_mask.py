"""MHA008: floating-point masks are added to the attention scores in every torch attention API, so a mask of 0s and
1s masks nothing; and MultiheadAttention warns when a bool and a float mask are mixed.

docs/torch-facts.md#float-masks-are-additive. Deterministic (fixed seed), about 3 s.
"""

import warnings

from _helpers import PaddedBatch, diff, fact, warnings_of

import torch

A = "float-masks-are-additive"

batch = PaddedBatch()
padding = batch.padding  # (N, S), True = padding
reference = batch.slow(key_padding_mask=padding)
additive = torch.zeros(batch.N, batch.L).masked_fill(padding, float("-inf"))  # 0 where attended, -inf at padding
fact(A, "mha-float-minus-inf-kpm-vs-bool-kpm", diff(batch.slow(key_padding_mask=additive), reference))
fact(A, "sdpa-float-mask-vs-mha-bool-kpm", diff(batch.sdpa(attn_mask=additive[:, None, None, :]), reference))
bias = torch.randn(batch.N, batch.L)  # any finite float mask: a bias added to the scores, in both APIs
fact(A, "mha-finite-float-kpm-vs-sdpa-same-float", diff(batch.slow(key_padding_mask=bias),
                                                        batch.sdpa(attn_mask=bias[:, None, None, :])))

keep = (~padding).float()  # the mistake: 1 = attend, 0 = padding, as floats
as_padding_mask = batch.slow(key_padding_mask=keep)
fact(A, "zero-one-keep-mask-as-kpm-off-correct", diff(as_padding_mask, reference))
fact(A, "zero-one-keep-mask-as-kpm-off-no-mask", diff(as_padding_mask, batch.slow()))
fact(A, "zero-one-keep-mask-equals-adding-it-in-sdpa", diff(as_padding_mask, batch.sdpa(attn_mask=keep[:, None, None, :])))
fact(A, "zero-one-keep-mask-has-nan", bool(as_padding_mask.isnan().any()))
lower = torch.tril(torch.ones(batch.L, batch.L))  # a 0/1 float "causal" mask for SDPA
fact(A, "zero-one-tril-in-sdpa-off-bool-tril", diff(batch.sdpa(attn_mask=lower), batch.sdpa(attn_mask=lower.bool())))
fact(A, "zero-one-tril-in-sdpa-off-no-mask", diff(batch.sdpa(attn_mask=lower), batch.sdpa()))

# Mixing a bool and a float mask in one MultiheadAttention call: a deprecation warning, and the result is the same.
blocked = torch.ones(batch.L, batch.L, dtype=torch.bool).triu(1)
float_causal = torch.zeros(batch.L, batch.L).masked_fill(blocked, float("-inf"))
fact(A, "mha-bool-kpm-float-attn_mask-warning", warnings_of(lambda: batch.slow(key_padding_mask=padding,
                                                                             attn_mask=float_causal)))
fact(A, "mha-float-kpm-bool-attn_mask-warning", warnings_of(lambda: batch.slow(key_padding_mask=additive,
                                                                             attn_mask=blocked)))
fact(A, "mha-bool-bool-warnings", len(warnings_of(lambda: batch.slow(key_padding_mask=padding, attn_mask=blocked))))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the warning above, shown once already
    mixed = batch.slow(key_padding_mask=padding, attn_mask=float_causal)
fact(A, "mha-mixed-masks-vs-both-bool", diff(mixed, batch.slow(key_padding_mask=padding, attn_mask=blocked)))
