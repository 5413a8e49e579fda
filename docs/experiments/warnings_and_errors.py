"""The exact texts of the warnings and errors torch gives around the attention entry points (the ones mhalint's
messages quote or its checks rely on), with where the mismatched-mask warnings come from.

docs/torch-facts.md#warnings-and-errors. Deterministic, about 3 s.
"""

import warnings

from _helpers import fact, outcome, warning_sites, warnings_of

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

A = "warnings-and-errors"
N, L, E, h = 2, 5, 16, 4
torch.manual_seed(0)
x = torch.randn(N, L, E)
padding = torch.zeros(N, L, dtype=torch.bool)
padding[1, -1] = True
blocked = torch.ones(L, L, dtype=torch.bool).triu(1)
float_blocked = torch.zeros(L, L).masked_fill(blocked, float("-inf"))
warnings.filterwarnings("ignore", message="enable_nested_tensor is True")

# A bool and a float mask in one call
mha = nn.MultiheadAttention(E, h, batch_first=True)
mixed = [
    ("mha", lambda: mha(x, x, x, key_padding_mask=padding, attn_mask=float_blocked)),
    ("multi_head_attention_forward", lambda: F.multi_head_attention_forward(
        x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), E, h, mha.in_proj_weight, mha.in_proj_bias, None,
        None, False, 0.0, mha.out_proj.weight, mha.out_proj.bias, key_padding_mask=padding, attn_mask=float_blocked)),
    ("encoder-layer", lambda: nn.TransformerEncoderLayer(E, h, 32, 0.0, batch_first=True)(
        x, src_mask=float_blocked, src_key_padding_mask=padding)),
    ("encoder", lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(E, h, 32, 0.0, batch_first=True), 1)(
        x, mask=float_blocked, src_key_padding_mask=padding)),
    ("decoder-layer", lambda: nn.TransformerDecoderLayer(E, h, 32, 0.0, batch_first=True)(
        x, x, tgt_mask=float_blocked, tgt_key_padding_mask=padding)),
]
for name, action in mixed:
    fact(A, f"mixed-masks-{name}", warnings_of(action))
    fact(A, f"mixed-masks-{name}-site", warning_sites(action)[0])

# TransformerEncoder(enable_nested_tensor=True), the default: why it cannot use nested tensors
for name, layer in (
        ("batch_first-False", lambda: nn.TransformerEncoderLayer(E, h)),
        ("norm_first", lambda: nn.TransformerEncoderLayer(E, h, batch_first=True, norm_first=True)),
        ("odd-nhead", lambda: nn.TransformerEncoderLayer(15, 5, batch_first=True)),
        ("activation-F.silu", lambda: nn.TransformerEncoderLayer(E, h, batch_first=True, activation=F.silu)),
        ("bias-False", lambda: nn.TransformerEncoderLayer(E, h, batch_first=True, bias=False)),
        ("batch_first-True", lambda: nn.TransformerEncoderLayer(E, h, batch_first=True))):
    built = layer()
    texts = warnings_of(lambda: nn.TransformerEncoder(built, 1))
    fact(A, f"encoder-construction-{name}", texts[0] if texts else "no warning")
fact(A, "transformer-default-construction", warnings_of(lambda: nn.Transformer(E, h, 1, 1, 32))[0])
fact(A, "transformer-default-construction-site", warning_sites(lambda: nn.Transformer(E, h, 1, 1, 32))[0])
fact(A, "encoder-layer-activation-silu-string", outcome(lambda: nn.TransformerEncoderLayer(E, h, activation="silu")))
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(E, h, 32, 0.0, batch_first=True), 1).eval()


def nested():
    with torch.no_grad():
        encoder(x, src_key_padding_mask=padding)


fact(A, "encoder-nested-tensor-path", warnings_of(nested)[0].split(". ")[0] + ".")

# Shapes and dtypes MultiheadAttention refuses
mha = nn.MultiheadAttention(E, h, batch_first=True)
errors = {
    "attn_mask-2d-wrong-shape": lambda: mha(x, x, x, attn_mask=torch.zeros(L, L + 1, dtype=torch.bool)),
    "attn_mask-3d-N-L-L": lambda: mha(x, x, x, attn_mask=torch.zeros(N, L, L, dtype=torch.bool)),
    "attn_mask-4d": lambda: mha(x, x, x, attn_mask=torch.zeros(N, h, L, L, dtype=torch.bool)),
    "kpm-wrong-width": lambda: mha(x, x, x, key_padding_mask=torch.zeros(N, L + 1, dtype=torch.bool)),
    "kpm-transposed-N-not-L": lambda: mha(x, x, x, key_padding_mask=torch.zeros(L, N, dtype=torch.bool)),
    "kpm-transposed-N-equals-L": lambda: mha(torch.randn(L, L, E), torch.randn(L, L, E), torch.randn(L, L, E),
                                             key_padding_mask=torch.zeros(L, L, dtype=torch.bool)),
    "kpm-int64": lambda: mha(x, x, x, key_padding_mask=padding.long()),
    "kpm-uint8": lambda: mha(x, x, x, key_padding_mask=padding.to(torch.uint8)),
    "query-4d": lambda: mha(x[None], x[None], x[None]),
    "embedding-mismatch": lambda: mha(*(torch.randn(N, L, E + 4),) * 3),
    "float64-input-float32-module": lambda: mha(x.double(), x.double(), x.double()),
}
for name, action in errors.items():
    fact(A, f"mha-{name}", outcome(action))
# The inference fast path checks a key padding mask's shape too: no path takes an (L, N) one for (N, S).
fast_mha, fast_layer = nn.MultiheadAttention(E, h, batch_first=True).eval(), nn.TransformerEncoderLayer(
    E, h, batch_first=True).eval()
with torch.no_grad():
    transposed = torch.zeros(L, N, dtype=torch.bool)
    fact(A, "mha-kpm-transposed-N-not-L-fast-path",
         outcome(lambda: fast_mha(x, x, x, key_padding_mask=transposed, need_weights=False)))
    fact(A, "encoder-layer-kpm-transposed-N-not-L-fast-path",
         outcome(lambda: fast_layer(x, src_key_padding_mask=transposed)))

# SDPA
q = torch.randn(N, h, L, E // h)
keep = ~padding[:, None, None, :]
for dtype in (torch.int64, torch.uint8, torch.float64):
    fact(A, f"sdpa-mask-{str(dtype).replace('torch.', '')}-float32-query",
         outcome(lambda: F.scaled_dot_product_attention(q, q, q, attn_mask=keep.to(dtype))))
fact(A, "sdpa-query-float32-key-float64", outcome(lambda: F.scaled_dot_product_attention(q, q.double(), q)))
fact(A, "sdpa-heads-4-vs-2-no-gqa", outcome(lambda: F.scaled_dot_product_attention(q, q[:, :2], q[:, :2])))
fact(A, "sdpa-heads-4-vs-2-enable_gqa", outcome(lambda: F.scaled_dot_product_attention(q, q[:, :2], q[:, :2],
                                                                                         enable_gqa=True)))
for backend in (SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                SDPBackend.MATH):
    def run():
        with sdpa_kernel(backend):
            F.scaled_dot_product_attention(q, q, q)
    fact(A, f"sdpa_kernel-{backend.name}-on-cpu", outcome(run))


def flash_value_dim():
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        F.scaled_dot_product_attention(q, q, q[..., :3])


fact(A, "sdpa_kernel-FLASH-value-head-dim-differs", outcome(flash_value_dim))
fact(A, "sdpa_kernel-FLASH-value-head-dim-differs-warnings", " / ".join(warnings_of(flash_value_dim)))
