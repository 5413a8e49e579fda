"""MHA003: for nn.MultiheadAttention and the Transformer classes, is_causal=True is only a hint about the mask you
pass. Without the mask, the slow path raises; the inference fast path never receives the flag and silently
attends to the future.

Each entry point is run with its causal flag and no mask in training, in eval with grad, and in eval + no_grad,
and the silent outputs are compared with the same module's unmasked and causally masked outputs.
docs/torch-facts.md#is-causal-hint. Deterministic (one seed per entry point), about 5 s.
"""

import warnings

from _helpers import CallCounter, diff, fact, first_line

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.transformer import _detect_is_causal_mask

A = "is-causal-hint"
N, L, E, h = 2, 6, 16, 4
blocked = torch.ones(L, L, dtype=torch.bool).triu(1)  # True = may not attend (MultiheadAttention's convention)
float_causal = nn.Transformer.generate_square_subsequent_mask(L)
warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
warnings.filterwarnings("ignore", message="The PyTorch API of nested tensors")


def attempt(action):
    """("raises", first line of the RuntimeError) or ("silent", output tensor)."""
    try:
        out = action()
    except RuntimeError as error:
        return "raises", first_line(error)
    return "silent", out[0] if isinstance(out, tuple) else out


def matrix(name, module, call, causal_call, plain_call):
    """Run `call` (flag, no mask) in the three modes; in eval + no_grad compare it with the causal and plain runs."""
    module.train()
    fact(A, f"{name}-train", attempt(call)[0])
    module.eval()
    fact(A, f"{name}-eval-grad", attempt(call)[0])
    with torch.no_grad():
        kind, out = attempt(call)
        fact(A, f"{name}-eval-no_grad", kind)
        if kind == "silent":
            module.train()  # the references on the slow path, which honours masks (dropout is 0)
            causal, plain = causal_call(), plain_call()
            module.eval()
            fact(A, f"{name}-eval-no_grad-off-unmasked", diff(out, plain))
            fact(A, f"{name}-eval-no_grad-off-causal", diff(out, causal))
    return kind


# nn.MultiheadAttention
for batch_first in (True, False):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(E, h, batch_first=batch_first)
    x = torch.randn(N, L, E) if batch_first else torch.randn(L, N, E)
    for need_weights in (False, True):
        matrix(f"mha-batch_first-{batch_first}-need_weights-{need_weights}", mha,
               lambda: mha(x, x, x, is_causal=True, need_weights=need_weights),
               lambda: mha(x, x, x, attn_mask=blocked, need_weights=False)[0],
               lambda: mha(x, x, x, need_weights=False)[0])
    if batch_first:
        mha.eval()
        with torch.inference_mode():
            fact(A, "mha-inference_mode", attempt(lambda: mha(x, x, x, is_causal=True, need_weights=False))[0])
        with torch.no_grad():
            error = attempt(lambda: mha.train()(x, x, x, is_causal=True))[1]
            fact(A, "error-text", error)
            torch.backends.mha.set_fastpath_enabled(False)
            try:
                fact(A, "mha-eval-no_grad-fastpath-disabled", attempt(lambda: mha.eval()(x, x, x, is_causal=True))[0])
            finally:
                torch.backends.mha.set_fastpath_enabled(True)
            padding = torch.zeros(N, L, dtype=torch.bool)
            padding[1, -2:] = True
            mha.eval()
            kind, out = attempt(lambda: mha(x, x, x, key_padding_mask=padding, is_causal=True, need_weights=False))
            fact(A, "mha-with-kpm-eval-no_grad", kind)
            mha.train()
            fact(A, "mha-with-kpm-eval-no_grad-off-kpm-only",
                 diff(out, mha(x, x, x, key_padding_mask=padding, need_weights=False)[0]))
torch.manual_seed(0)
odd = nn.MultiheadAttention(E + 4, 5, batch_first=True)
xo = torch.randn(N, L, E + 4)
fact(A, "mha-odd-heads-train", attempt(lambda: odd.train()(xo, xo, xo, is_causal=True))[0])
with torch.no_grad():
    fact(A, "mha-odd-heads-eval-no_grad", attempt(lambda: odd.eval()(xo, xo, xo, is_causal=True))[0])

# F.multi_head_attention_forward checks the hint first: it always raises.
torch.manual_seed(0)
mha = nn.MultiheadAttention(E, h)
xs = torch.randn(L, N, E)
arguments = (xs, xs, xs, E, h, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.0, mha.out_proj.weight,
             mha.out_proj.bias)
for training in (True, False):
    for need_weights in (False, True):
        fact(A, f"multi_head_attention_forward-training-{training}-need_weights-{need_weights}",
             attempt(lambda: F.multi_head_attention_forward(*arguments, training=training, is_causal=True,
                                                            need_weights=need_weights))[0])

# The Transformer classes
for batch_first in (True, False):
    torch.manual_seed(1)
    layer = nn.TransformerEncoderLayer(E, h, dim_feedforward=32, dropout=0.0, batch_first=batch_first)
    x = torch.randn(N, L, E) if batch_first else torch.randn(L, N, E)
    matrix(f"encoder-layer-batch_first-{batch_first}", layer, lambda: layer(x, is_causal=True),
           lambda: layer(x, src_mask=float_causal), lambda: layer(x))

torch.manual_seed(1)
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, h, dim_feedforward=32, dropout=0.0, batch_first=True), 2)
x = torch.randn(N, L, E)
matrix("encoder", encoder, lambda: encoder(x, is_causal=True), lambda: encoder(x, mask=float_causal),
       lambda: encoder(x))

torch.manual_seed(2)
decoder_layer = nn.TransformerDecoderLayer(E, h, dim_feedforward=32, dropout=0.0, batch_first=True)
tgt, memory = torch.randn(N, L, E), torch.randn(N, L + 2, E)
matrix("decoder-layer-tgt_is_causal", decoder_layer, lambda: decoder_layer(tgt, memory, tgt_is_causal=True),
       lambda: decoder_layer(tgt, memory, tgt_mask=float_causal), lambda: decoder_layer(tgt, memory))
matrix("decoder-layer-memory_is_causal", decoder_layer, lambda: decoder_layer(tgt, memory, memory_is_causal=True),
       None, None)

torch.manual_seed(3)
decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(E, h, dim_feedforward=32, dropout=0.0, batch_first=True),
                                2)
tgt, memory = torch.randn(N, L, E), torch.randn(N, L + 2, E)
matrix("decoder", decoder, lambda: decoder(tgt, memory, tgt_is_causal=True),
       lambda: decoder(tgt, memory, tgt_mask=float_causal), lambda: decoder(tgt, memory))

torch.manual_seed(4)
transformer = nn.Transformer(E, h, 1, 1, 32, dropout=0.0, batch_first=True)
src, tgt = torch.randn(N, L + 2, E), torch.randn(N, L, E)
matrix("transformer-tgt_is_causal", transformer, lambda: transformer(src, tgt, tgt_is_causal=True),
       lambda: transformer(src, tgt, tgt_mask=float_causal), lambda: transformer(src, tgt))
src_causal = nn.Transformer.generate_square_subsequent_mask(L + 2)
matrix("transformer-src_is_causal", transformer, lambda: transformer(src, tgt, src_is_causal=True),
       lambda: transformer(src, tgt, src_mask=src_causal), lambda: transformer(src, tgt))

# A hook turns off the encoder layer's fused kernel, but MultiheadAttention's own fast path still drops the flag.
torch.manual_seed(1)
layer = nn.TransformerEncoderLayer(E, h, dim_feedforward=32, dropout=0.0, batch_first=True).eval()
x = torch.randn(N, L, E)
handle = layer.self_attn.register_forward_hook(lambda module, args, output: None)
with torch.no_grad(), CallCounter(torch, "_transformer_encoder_layer_fwd") as fused, \
        CallCounter(torch, "_native_multi_head_attention") as native:
    fact(A, "encoder-layer-hooked-eval-no_grad", attempt(lambda: layer(x, is_causal=True))[0])
handle.remove()
fact(A, "encoder-layer-hooked-fused-kernel-calls", fused.calls)
fact(A, "encoder-layer-hooked-native-mha-calls", native.calls)

# is_causal=True together with a mask that is not causal: which one is applied depends on the path.
torch.manual_seed(5)
mha = nn.MultiheadAttention(E, h, batch_first=True)
x = torch.randn(N, L, E)
first_key = torch.zeros(L, L, dtype=torch.bool)
first_key[:, 0] = True  # hide key 0 from every query: not causal
with torch.no_grad():
    mha.train()
    causal_ref = mha(x, x, x, attn_mask=blocked, need_weights=False)[0]
    given_ref = mha(x, x, x, attn_mask=first_key, need_weights=False)[0]
    cases = {"train-need_weights-False": (True, False), "train-need_weights-True": (True, True),
             "eval-no_grad-need_weights-False": (False, False), "eval-no_grad-need_weights-True": (False, True)}
    for name, (training, need_weights) in cases.items():
        mha.train(training)
        out = mha(x, x, x, attn_mask=first_key, is_causal=True, need_weights=need_weights)[0]
        fact(A, f"hint-with-other-mask-{name}-off-causal", diff(out, causal_ref))
        fact(A, f"hint-with-other-mask-{name}-off-given-mask", diff(out, given_ref))
    mha.train()  # a key padding mask (here one that masks nothing) turns the hint off (functional.py:6832-6836)
    out = mha(x, x, x, attn_mask=first_key, key_padding_mask=torch.zeros(N, L, dtype=torch.bool), is_causal=True,
              need_weights=False)[0]
    fact(A, "hint-with-other-mask-and-kpm-train-need_weights-False-off-causal", diff(out, causal_ref))
    fact(A, "hint-with-other-mask-and-kpm-train-need_weights-False-off-given-mask", diff(out, given_ref))

# How TransformerEncoder/Decoder/Transformer fill in is_causal=None: an exact comparison with a -inf triangle.
fact(A, "detect-none-mask-None", _detect_is_causal_mask(None, None, L))
fact(A, "detect-True-no-mask", _detect_is_causal_mask(None, True, L))
fact(A, "detect-float-causal-None", _detect_is_causal_mask(float_causal, None, L))
fact(A, "detect-bool-triu-None", _detect_is_causal_mask(blocked, None, L))
fact(A, "detect-minus-1e9-causal-None", _detect_is_causal_mask(torch.zeros(L, L).masked_fill(blocked, -1e9), None, L))
fact(A, "detect-zeros-mask-True", _detect_is_causal_mask(torch.zeros(L, L), True, L))
