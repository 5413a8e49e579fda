"""MHA002: a boolean mask means True = ignore to MultiheadAttention and the Transformer classes, True = attend to
F.scaled_dot_product_attention. Passed from one to the other unchanged, it is silently inverted.

The module's attention is rebuilt with SDPA from its own weights (_helpers.PaddedBatch), so every difference below
is the mask's doing. docs/torch-facts.md#mask-convention. Deterministic (fixed seeds), about 3 s.
"""

import re

from _helpers import PaddedBatch, diff, fact

import torch
import torch.nn.functional as F

A = "mask-convention"

batch = PaddedBatch()
padding = batch.padding  # (N, S), True = padding: MultiheadAttention's convention
reference = batch.slow(key_padding_mask=padding)
fact(A, "sdpa-rebuild-no-mask-vs-mha-no-mask", diff(batch.sdpa(), batch.slow()))
fact(A, "fast-vs-slow-path-same-padding-mask", diff(batch.fast(key_padding_mask=padding), reference))
unchanged = batch.sdpa(attn_mask=padding[:, None, None, :])
fact(A, "padding-mask-unchanged-in-sdpa-off-mha", diff(unchanged, reference))
for i in range(batch.N):
    fact(A, f"padding-mask-unchanged-sample{i}-off", diff(unchanged[i], reference[i]))
fact(A, "padding-mask-unchanged-has-nan", bool(unchanged.isnan().any()))
fact(A, "padding-mask-inverted-in-sdpa-off-mha", diff(batch.sdpa(attn_mask=~padding[:, None, None, :]), reference))
fact(A, "sdpa-no-mask-off-mha-with-padding", diff(batch.sdpa(), reference))

blocked = torch.ones(batch.L, batch.L, dtype=torch.bool).triu(1)  # causal, MultiheadAttention's convention
causal = batch.slow(attn_mask=blocked)
fact(A, "causal-mha-vs-sdpa-inverted-mask", diff(batch.sdpa(attn_mask=~blocked), causal))
fact(A, "causal-mha-vs-sdpa-is_causal", diff(batch.sdpa(is_causal=True), causal))
fact(A, "causal-mask-unchanged-in-sdpa-off-mha", diff(batch.sdpa(attn_mask=blocked), causal))

# The same two mix-ups over ten seeds (module, biases and data all redrawn).
padding_off, causal_off = [], []
for seed in range(1, 11):
    other = PaddedBatch(seed)
    padding_off.append(diff(other.sdpa(attn_mask=other.padding[:, None, None, :]),
                            other.slow(key_padding_mask=other.padding)))
    causal_off.append(diff(other.sdpa(attn_mask=blocked), other.slow(attn_mask=blocked)))
fact(A, "padding-mask-unchanged-min-10-seeds", min(padding_off))
fact(A, "padding-mask-unchanged-max-10-seeds", max(padding_off))
fact(A, "causal-mask-unchanged-min-10-seeds", min(causal_off))
fact(A, "causal-mask-unchanged-max-10-seeds", max(causal_off))

# The docstrings say it in words.
doc = " ".join(F.scaled_dot_product_attention.__doc__.split())
fact(A, "sdpa-docstring-migration", re.search(r"If migrating from MHA.*?\)\.", doc).group(0))
fact(A, "sdpa-docstring-bool-mask", re.search(r"A boolean mask where a value of True.*?attention\.", doc).group(0))
mha_doc = " ".join(torch.nn.MultiheadAttention.forward.__doc__.split())
fact(A, "mha-docstring-key_padding_mask", re.search(r"For a binary mask, a ``True`` value indicates that the "
                                                   r"corresponding ``key`` value will be ignored.*?attention\.",
                                                   mha_doc).group(0))
fact(A, "mha-docstring-attn_mask", re.search(r"For a binary mask, a ``True`` value indicates that the "
                                            r"corresponding position is not allowed to attend\.", mha_doc).group(0))
