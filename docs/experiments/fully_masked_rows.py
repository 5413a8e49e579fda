"""MHA101 (runtime guard): a query row whose keys are all masked. Whether the output is NaN depends on the path:
NaN on the MultiheadAttention fast path and wherever need_weights=True; finite on the slow path with
need_weights=False; exact zeros from F.scaled_dot_product_attention on every CPU backend.

docs/torch-facts.md#fully-masked-rows. Deterministic (fixed seed), about 4 s.
"""

import contextlib
import warnings

from _helpers import fact

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

A = "fully-masked-rows"
N, L, E, h = 3, 5, 16, 4
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")
padding = torch.zeros(N, L, dtype=torch.bool)
padding[1] = True  # sample 1 is all padding
padding[2, -2:] = True
float_padding = torch.zeros(N, L).masked_fill(padding, float("-inf"))


def nan_samples(t) -> str:
    """Which samples (dim 0) have NaN: e.g. `[1]`, or `none`."""
    if t is None:
        return "no weights"
    found = [i for i in range(t.shape[0]) if bool(t[i].isnan().any())]
    return str(found) if found else "none"


torch.manual_seed(0)
mha = nn.MultiheadAttention(E, h, batch_first=True)
with torch.no_grad():
    mha.out_proj.bias.normal_()  # so that "attention output 0" shows as "output = out_proj.bias"
x = torch.randn(N, L, E)
for mode in ("train", "eval-no_grad"):
    mha.train(mode == "train")
    with torch.no_grad():
        for kind, mask in (("bool", padding), ("float", float_padding)):
            for need_weights in (False, True):
                out, weights = mha(x, x, x, key_padding_mask=mask, need_weights=need_weights)
                tag = f"mha-{mode}-{kind}-kpm-need_weights-{need_weights}"
                fact(A, f"{tag}-output-nan-samples", nan_samples(out))
                fact(A, f"{tag}-weights-nan-samples", nan_samples(weights))
mha.train()
with torch.no_grad():
    out = mha(x, x, x, key_padding_mask=padding, need_weights=False)[0]
fact(A, "mha-slow-need_weights-False-padded-sample-equals-out_proj.bias",
     torch.allclose(out[1], mha.out_proj.bias.expand(L, E)))
# training: a loss on the healthy sample 0 only still gives NaN weight gradients when need_weights=True
for need_weights in (False, True):
    mha.zero_grad()
    out = mha(x, x, x, key_padding_mask=padding, need_weights=need_weights)[0]
    out[0].sum().backward()
    fact(A, f"mha-train-need_weights-{need_weights}-loss-on-sample0-grad-nan",
         bool(mha.in_proj_weight.grad.isnan().any()))
functional_args = (x.transpose(0, 1),) * 3 + (E, h, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0,
                                              mha.out_proj.weight, mha.out_proj.bias)
with torch.no_grad():
    for need_weights in (False, True):
        out = F.multi_head_attention_forward(*functional_args, training=False, key_padding_mask=padding,
                                             need_weights=need_weights)[0]
        fact(A, f"multi_head_attention_forward-need_weights-{need_weights}-nan-samples",
             nan_samples(out.transpose(0, 1)))

# F.scaled_dot_product_attention: a row with no key gives exact zeros (the reference softmax would give NaN).
q = torch.randn(N, h, L, E // h)
keep = torch.ones(N, 1, 1, L, dtype=torch.bool)
keep[1] = False
for backend in (None, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
    name = "default" if backend is None else backend.name
    with contextlib.nullcontext() if backend is None else sdpa_kernel(backend):
        for kind, mask in (("bool", keep), ("float", torch.zeros(N, 1, 1, L).masked_fill(~keep, float("-inf")))):
            qq = q.clone().requires_grad_()
            out = F.scaled_dot_product_attention(qq, qq, qq, attn_mask=mask)
            out.sum().backward()
            fact(A, f"sdpa-{name}-{kind}-empty-row-is-zeros", bool((out[1] == 0).all()))
            fact(A, f"sdpa-{name}-{kind}-nan", bool(out.isnan().any()))
            fact(A, f"sdpa-{name}-{kind}-grad-nan", bool(qq.grad.isnan().any()))
fact(A, "softmax-of-all-minus-inf-row", torch.softmax(torch.full((2,), float("-inf")), 0).tolist())

# The Transformer classes
torch.manual_seed(5)
layer = nn.TransformerEncoderLayer(E, h, dim_feedforward=32, dropout=0.0, batch_first=True)
encoder = nn.TransformerEncoder(layer, 1)
x = torch.randn(N, L, E)
with torch.no_grad():
    layer.train()
    fact(A, "encoder-layer-train-nan-samples", nan_samples(layer(x, src_key_padding_mask=padding)))
    layer.eval()
    fact(A, "encoder-layer-eval-no_grad-nan-samples", nan_samples(layer(x, src_key_padding_mask=padding)))
    encoder.eval()
    out = encoder(x, src_key_padding_mask=padding)  # the nested-tensor path
    fact(A, "encoder-eval-no_grad-nested-nan-samples", nan_samples(out))
    fact(A, "encoder-eval-no_grad-nested-padded-sample-is-zeros", bool((out[1] == 0).all()))
torch.manual_seed(6)
decoder_layer = nn.TransformerDecoderLayer(E, h, dim_feedforward=32, dropout=0.0, batch_first=True)
tgt, memory = torch.randn(N, L, E), torch.randn(N, L, E)
with torch.no_grad():
    for mode in ("train", "eval-no_grad"):
        decoder_layer.train(mode == "train")
        fact(A, f"decoder-layer-{mode}-tgt-kpm-nan-samples",
             nan_samples(decoder_layer(tgt, memory, tgt_key_padding_mask=padding)))
        fact(A, f"decoder-layer-{mode}-memory-kpm-nan-samples",
             nan_samples(decoder_layer(tgt, memory, memory_key_padding_mask=padding)))

# The guard's MHA002 remarks: a causal mask in the other API's convention leaves the last query row without keys.
torch.manual_seed(7)
mha = nn.MultiheadAttention(E, h, batch_first=True)
x = torch.randn(N, L, E)
keep_causal = torch.ones(L, L, dtype=torch.bool).tril()  # SDPA's causal mask: True = attend
q = torch.randn(N, h, L, E // h)
out = F.scaled_dot_product_attention(q, q, q, attn_mask=~keep_causal)  # MHA's causal mask given to SDPA
fact(A, "sdpa-given-triu1-last-row-is-zeros", bool((out[:, :, -1] == 0).all()))
fact(A, "sdpa-given-triu1-other-rows-nonzero", bool((out[:, :, :-1] != 0).any(-1).all()))
with torch.no_grad():
    for mode in ("train", "eval-no_grad"):
        mha.train(mode == "train")
        for need_weights in (False, True):
            out = mha(x, x, x, attn_mask=keep_causal, need_weights=need_weights)[0]
            rows = [i for i in range(L) if bool(out[:, i].isnan().any())]
            fact(A, f"mha-{mode}-given-tril-need_weights-{need_weights}-nan-rows", str(rows) if rows else "none")
