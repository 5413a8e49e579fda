"""MHA015: flex_attention's mask_mod returns True where attention is ALLOWED, and its score_mod gets the score
already multiplied by the scale (1/sqrt(E) by default). A mask_mod written in the "True = hide" habit, or a
score_mod that returns a bool, only a bias, or divides by sqrt(E) again, runs without an error and is wrong.

flex_attention and create_block_mask run eagerly on the CPU in torch 2.13.0 (an unfused implementation, with a
"flex_attention called without torch.compile()" warning).

docs/torch-facts.md#flex-mod-convention. Deterministic (fixed seeds), about 10 s.
"""

import math
import os
import warnings

from _helpers import diff, fact, warnings_of

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

A = "flex-mod-convention"
B, H, T, D = 2, 4, 16, 16  # batch, heads, sequence (queries = keys), head size


def inputs(seed: int):
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, T, D, generator=generator) for _ in range(3))


def blocks(mask_mod, batch=None):
    return create_block_mask(mask_mod, batch, None, T, T, device="cpu")


def flex(q, k, v, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the eager-mode warning, shown once below
        return flex_attention(q, k, v, **kwargs)


def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def hide_future(b, h, q_idx, kv_idx):  # the "True = hide" habit: True on the keys after the query
    return q_idx < kv_idx


def at_or_after(b, h, q_idx, kv_idx):
    return q_idx <= kv_idx


q, k, v = inputs(0)
fact(A, "eager-cpu-warning", warnings_of(lambda: flex_attention(q, k, v))[0])
right = flex(q, k, v, block_mask=blocks(causal))
fact(A, "causal-mask_mod-vs-sdpa-is_causal", diff(right, F.scaled_dot_product_attention(q, k, v, is_causal=True)))
fact(A, "causal-mask_mod-vs-create_mask-bool-sdpa", diff(right, F.scaled_dot_product_attention(
    q, k, v, attn_mask=torch.ones(T, T, dtype=torch.bool).tril())))
anti = flex(q, k, v, block_mask=blocks(hide_future))
fact(A, "q-lt-kv-vs-causal", diff(anti, right))
zero_rows = [i for i in range(T) if bool((anti[:, :, i] == 0).all())]
fact(A, "q-lt-kv-all-zero-query-rows", zero_rows)
fact(A, "q-lt-kv-any-nan", bool(anti.isnan().any()))
fact(A, "q-lt-kv-equals-sdpa-triu1", diff(anti[:, :, :-1], F.scaled_dot_product_attention(
    q, k, v, attn_mask=torch.ones(T, T, dtype=torch.bool).triu(1))[:, :, :-1]))
fact(A, "q-le-kv-vs-causal", diff(flex(q, k, v, block_mask=blocks(at_or_after)), right))
spread = [diff(flex(*inputs(s), block_mask=blocks(hide_future)), flex(*inputs(s), block_mask=blocks(causal)))
          for s in range(1, 11)]
fact(A, "q-lt-kv-vs-causal-min-10-draws", min(spread))
fact(A, "q-lt-kv-vs-causal-max-10-draws", max(spread))

# padding: sample 0 has all 16 tokens, sample 1 has 10
lengths = torch.tensor([16, 10])


def keep_real(b, h, q_idx, kv_idx):
    return kv_idx < lengths[b]


def hide_real(b, h, q_idx, kv_idx):  # the "True = padding" habit
    return kv_idx >= lengths[b]


padded = flex(q, k, v, block_mask=blocks(keep_real, B))
keep = torch.arange(T)[None, :] < lengths[:, None]
fact(A, "padding-mask_mod-vs-sdpa-keep-mask", diff(padded, F.scaled_dot_product_attention(
    q, k, v, attn_mask=keep[:, None, None, :])))
inverted = flex(q, k, v, block_mask=blocks(hide_real, B))
fact(A, "padding-inverted-vs-right", diff(inverted, padded))
fact(A, "padding-inverted-full-length-sample-all-zeros", bool((inverted[0] == 0).all()))
fact(A, "padding-inverted-sample1-real-rows-vs-right", diff(inverted[1, :, :10], padded[1, :, :10]))

# score_mod: the score arrives already scaled by 1/sqrt(D)
default = flex(q, k, v)
fact(A, "default-vs-sdpa", diff(default, F.scaled_dot_product_attention(q, k, v)))


def identity(score, b, h, q_idx, kv_idx):
    return score


def scaled_again(score, b, h, q_idx, kv_idx):
    return score / math.sqrt(D)


fact(A, "identity-score_mod-vs-default", diff(flex(q, k, v, score_mod=identity), default))
again = flex(q, k, v, score_mod=scaled_again)
fact(A, "score-div-sqrt-D-vs-default", diff(again, default))
fact(A, "score-div-sqrt-D-vs-sdpa-scale-1-over-D", diff(again, F.scaled_dot_product_attention(q, k, v, scale=1 / D)))
fact(A, "score-div-sqrt-D-with-scale-1-vs-default", diff(flex(q, k, v, score_mod=scaled_again, scale=1.0), default))
fact(A, "score-div-sqrt-D-spread-over-10-draws-max", max(
    diff(flex(*inputs(s), score_mod=scaled_again), flex(*inputs(s))) for s in range(1, 11)))

bias = torch.randn(H, T, T, generator=torch.Generator().manual_seed(1))


def add_bias(score, b, h, q_idx, kv_idx):
    return score + bias[h][q_idx][kv_idx]


def bias_only(score, b, h, q_idx, kv_idx):
    return bias[h][q_idx][kv_idx]


with_bias = flex(q, k, v, score_mod=add_bias)
fact(A, "score-plus-bias-vs-sdpa-float-mask", diff(with_bias, F.scaled_dot_product_attention(q, k, v,
                                                                                               attn_mask=bias)))
only = flex(q, k, v, score_mod=bias_only)
fact(A, "bias-only-vs-score-plus-bias", diff(only, with_bias))
q2, k2, _ = inputs(7)
fact(A, "bias-only-other-q-and-k-same-output", diff(flex(q2, k2, v, score_mod=bias_only), only))
fact(A, "bias-only-equals-softmax-bias-times-v", diff(only, torch.softmax(bias, -1) @ v))


def bool_score(score, b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


as_bool = flex(q, k, v, score_mod=bool_score)
fact(A, "bool-score_mod-output-dtype", str(as_bool.dtype))
fact(A, "bool-score_mod-vs-causal", diff(as_bool, right))
fact(A, "bool-score_mod-equals-softmax-of-0-1-times-v",
     diff(as_bool, torch.softmax(torch.ones(T, T).tril(), -1) @ v))
fact(A, "bool-score_mod-other-q-and-k-same-output", diff(flex(q2, k2, v, score_mod=bool_score), as_bool))

# the torch source lines the rule cites (read from the installed file)
SOURCE = "nn/attention/flex_attention.py"
with open(os.path.join(os.path.dirname(torch.__file__), *SOURCE.split("/")), encoding="utf-8") as handle:
    lines = handle.read().split("\n")  # numbered as editors number them (splitlines also splits at \x0c)
for number in (1857, 1858, 2257, 2392, 2393):
    fact(A, f"{SOURCE}:{number}", lines[number - 1].strip())
