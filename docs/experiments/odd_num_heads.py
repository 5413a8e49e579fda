"""MHA004: an odd head count (1 included) keeps nn.MultiheadAttention off its inference fast path, and
nn.TransformerEncoderLayer off its fused kernel, without a word. Counted by wrapping the kernels.

The timing side (is the slow path slower?) is in timing_heads_and_weights.py.
docs/torch-facts.md#odd-heads-fast-path. Deterministic, about 3 s.
"""

import warnings

from _helpers import count_calls, fact, warnings_of

import torch
import torch.nn.functional as F
from torch import nn

A = "odd-heads-fast-path"
E, N, L = 448, 2, 16  # 448 = 7 x 64 = 8 x 56: every head count below divides it
torch.manual_seed(0)
x = torch.randn(N, L, E)


def runs(module, name, owner=torch, **kwargs) -> int:
    def call():
        with torch.no_grad():
            module(x, x, x, **kwargs)
    return count_calls(owner, name, call)


for heads in (1, 2, 4, 7, 8, 14, 16):
    mha = nn.MultiheadAttention(E, heads, batch_first=True).eval()
    fact(A, f"mha-heads-{heads}-native-calls", runs(mha, "_native_multi_head_attention", need_weights=False))
    fact(A, f"mha-heads-{heads}-native-calls-need_weights-True", runs(mha, "_native_multi_head_attention"))
# where the odd-head call goes instead: the slow path, which calls SDPA when need_weights=False
mha7 = nn.MultiheadAttention(E, 7, batch_first=True).eval()
fact(A, "mha-heads-7-sdpa-calls-need_weights-False", runs(mha7, "scaled_dot_product_attention", F, need_weights=False))
fact(A, "mha-heads-7-warnings", len(warnings_of(lambda: runs(mha7, "_native_multi_head_attention"))))

for heads in (7, 8):
    layer = nn.TransformerEncoderLayer(E, heads, 64, 0.0, batch_first=True).eval()

    def forward():
        with torch.no_grad():
            layer(x)

    fact(A, f"encoder-layer-nhead-{heads}-fused-calls", count_calls(torch, "_transformer_encoder_layer_fwd", forward))
    fact(A, f"encoder-layer-nhead-{heads}-native-mha-calls", count_calls(torch, "_native_multi_head_attention",
                                                                        forward))
decoder_layer = nn.TransformerDecoderLayer(E, 8, 64, 0.0, batch_first=True).eval()
with torch.no_grad():
    fact(A, "decoder-layer-nhead-8-native-mha-calls",
         count_calls(torch, "_native_multi_head_attention", lambda: decoder_layer(x, x)))
    decoder_layer7 = nn.TransformerDecoderLayer(E, 7, 64, 0.0, batch_first=True).eval()
    fact(A, "decoder-layer-nhead-7-native-mha-calls",
         count_calls(torch, "_native_multi_head_attention", lambda: decoder_layer7(x, x)))
fact(A, "encoder-odd-nhead-construction-warning",
     warnings_of(lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, 7, 64, 0.0, batch_first=True), 1)))
for heads in (7, 8):  # nn.Transformer: its encoder layers take the fused kernel (MHA004's probe counts these)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the nested-tensor notice for odd heads, shown above
        transformer = nn.Transformer(E, heads, 2, 1, 64, 0.0, batch_first=True).eval()
    with torch.no_grad():
        fact(A, f"transformer-2-encoder-layers-nhead-{heads}-fused-calls",
             count_calls(torch, "_transformer_encoder_layer_fwd", lambda: transformer(x, x)))
