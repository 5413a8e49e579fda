"""Which conditions keep nn.MultiheadAttention off its inference fast path (torch._native_multi_head_attention), and
nn.TransformerEncoderLayer off its fused kernel (torch._transformer_encoder_layer_fwd), counted by wrapping the
kernels (torch looks them up as module attributes at call time).

docs/torch-facts.md#fast-path-conditions. Deterministic, about 3 s.
"""

import warnings

from _helpers import count_calls, fact

import torch
import torch.nn.functional as F
from torch import nn

A = "fast-path-conditions"
E, H, N, L = 448, 8, 2, 16  # 448 = 7 x 64 = 8 x 56, so odd and even head counts fit the same size
torch.manual_seed(0)
x = torch.randn(N, L, E)
other = torch.randn(N, L, E)


def native_calls(module, query, key=None, value=None, grad=False, **kwargs) -> int:
    key = query if key is None else key
    value = key if value is None else value
    context = torch.enable_grad() if grad else torch.no_grad()

    def call():
        with context:
            module(query, key, value, need_weights=False, **kwargs)

    return count_calls(torch, "_native_multi_head_attention", call)


def mha(**kwargs):
    return nn.MultiheadAttention(**{"embed_dim": E, "num_heads": H, "batch_first": True, **kwargs}).eval()


fact(A, "mha-baseline-eval-no_grad", native_calls(mha(), x))
fact(A, "mha-train", native_calls(mha().train(), x))
fact(A, "mha-grad-enabled", native_calls(mha(), x, grad=True))
fact(A, "mha-batch_first-False", native_calls(mha(batch_first=False), x.transpose(0, 1)))
fact(A, "mha-odd-heads-7", native_calls(mha(num_heads=7), x))
fact(A, "mha-bias-False", native_calls(mha(bias=False), x))
fact(A, "mha-add_bias_kv", native_calls(mha(add_bias_kv=True), x))
fact(A, "mha-add_zero_attn", native_calls(mha(add_zero_attn=True), x))
fact(A, "mha-kdim-vdim-equal-embed_dim", native_calls(mha(kdim=E, vdim=E), x))
small = torch.randn(N, L, E // 2)
fact(A, "mha-kdim-vdim-differ", native_calls(mha(kdim=E // 2, vdim=E // 2), x, small, small))
fact(A, "mha-cross-attention", native_calls(mha(), x, other))
fact(A, "mha-equal-values-distinct-tensors", native_calls(mha(), x, x.clone(), x.clone()))
fact(A, "mha-bool-attn_mask", native_calls(mha(), x, attn_mask=torch.zeros(L, L, dtype=torch.bool)))
fact(A, "mha-float-attn_mask", native_calls(mha(), x, attn_mask=torch.zeros(L, L)))
fact(A, "mha-bool-kpm", native_calls(mha(), x, key_padding_mask=torch.zeros(N, L, dtype=torch.bool)))
fact(A, "mha-float-kpm", native_calls(mha(), x, key_padding_mask=torch.zeros(N, L)))
fact(A, "mha-is_causal-no-mask", native_calls(mha(), x, is_causal=True))
fact(A, "mha-unbatched", native_calls(mha(), x[0]))
torch.backends.mha.set_fastpath_enabled(False)
try:
    fact(A, "mha-set_fastpath_enabled-False", native_calls(mha(), x))
finally:
    torch.backends.mha.set_fastpath_enabled(True)
with torch.autocast("cpu"):
    fact(A, "mha-cpu-autocast", native_calls(mha(), x))
    fact(A, "is_autocast_enabled-no-argument-under-cpu-autocast", torch.is_autocast_enabled())
    fact(A, "is_autocast_enabled-cpu-under-cpu-autocast", torch.is_autocast_enabled("cpu"))

# The documented list of conditions in the class docstring: odd heads, bias=False and float masks are not in it.
listed = nn.MultiheadAttention.__doc__.split("fastpath inference with support for Nested Tensors, iff:")[1]
listed = listed.split("If the optimized inference fastpath")[0]
fact(A, "mha-docstring-list-items", listed.count("\n    - "))
fact(A, "mha-docstring-list-mentions-num_heads", "num_heads" in listed)
fact(A, "mha-docstring-list-mentions-bias", "``bias``" in listed)
fact(A, "mha-docstring-list-mentions-float-masks", "float" in listed)


def fused_calls(layer, src, grad=False, **kwargs) -> int:
    context = torch.enable_grad() if grad else torch.no_grad()

    def call():
        with context:
            layer(src, **kwargs)

    return count_calls(torch, "_transformer_encoder_layer_fwd", call)


def layer(**kwargs):
    return nn.TransformerEncoderLayer(**{"d_model": E, "nhead": H, "dim_feedforward": 64, "dropout": 0.0,
                                         "batch_first": True, **kwargs}).eval()


fact(A, "layer-baseline-eval-no_grad", fused_calls(layer(), x))
fact(A, "layer-train", fused_calls(layer().train(), x))
fact(A, "layer-grad-enabled", fused_calls(layer(), x, grad=True))
fact(A, "layer-batch_first-False", fused_calls(layer(batch_first=False), x.transpose(0, 1)))
fact(A, "layer-odd-nhead-7", fused_calls(layer(nhead=7), x))
fact(A, "layer-bias-False", fused_calls(layer(bias=False), x))
fact(A, "layer-norm_first", fused_calls(layer(norm_first=True), x))
fact(A, "layer-activation-gelu-string", fused_calls(layer(activation="gelu"), x))
fact(A, "layer-activation-F.silu", fused_calls(layer(activation=F.silu), x))
fact(A, "layer-bool-src_mask", fused_calls(layer(), x, src_mask=torch.zeros(L, L, dtype=torch.bool)))
fact(A, "layer-bool-src_key_padding_mask", fused_calls(layer(), x,
                                                      src_key_padding_mask=torch.zeros(N, L, dtype=torch.bool)))
hooked = layer()
hooked.self_attn.register_forward_hook(lambda module, args, output: None)
fact(A, "layer-forward-hook-on-self_attn", fused_calls(hooked, x))
fact(A, "layer-forward-hook-on-self_attn-native-mha-calls",
     count_calls(torch, "_native_multi_head_attention", lambda: fused_calls(hooked, x)))
pre_hooked = layer()
pre_hooked.linear1.register_forward_pre_hook(lambda module, args: None)
fact(A, "layer-forward-pre-hook-on-linear1", fused_calls(pre_hooked, x))
torch.backends.mha.set_fastpath_enabled(False)
try:
    fact(A, "layer-set_fastpath_enabled-False", fused_calls(layer(), x))
finally:
    torch.backends.mha.set_fastpath_enabled(True)
listed = nn.TransformerEncoderLayer.__doc__.split("Fast path:")[1].split("If the optimized implementation")[0]
fact(A, "layer-docstring-list-items", listed.count("\n        - "))
fact(A, "layer-docstring-list-mentions-hooks", "hook" in listed)
fact(A, "layer-docstring-list-mentions-nhead", "nhead" in listed or "heads" in listed)
fact(A, "layer-docstring-list-mentions-bias", "bias" in listed)

# TransformerEncoder's nested-tensor path: decided once, at construction.
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    fact(A, "encoder-use_nested_tensor-batch_first", nn.TransformerEncoder(layer(), 1).use_nested_tensor)
    fact(A, "encoder-use_nested_tensor-batch_first-False",
         nn.TransformerEncoder(layer(batch_first=False), 1).use_nested_tensor)
    fact(A, "encoder-use_nested_tensor-odd-nhead", nn.TransformerEncoder(layer(nhead=7), 1).use_nested_tensor)
