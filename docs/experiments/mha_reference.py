"""nn.MultiheadAttention reference: constructor defaults, parameters and their count, shapes of outputs and weights.

docs/torch-facts.md#mha-reference. Deterministic (fixed seed), about 2 s.
"""

from _helpers import fact

import torch
from torch import nn

A = "mha-reference"
torch.manual_seed(0)

m = nn.MultiheadAttention(8, 2)
fact(A, "default-batch_first", m.batch_first)
fact(A, "default-dropout", m.dropout)
fact(A, "default-kdim-vdim", f"{m.kdim}, {m.vdim}")
fact(A, "default-bias_k", m.bias_k)
fact(A, "head_dim-of-8-2", m.head_dim)
fact(A, "parameters", [f"{name} {tuple(p.shape)}" for name, p in m.named_parameters()])
fact(A, "biases-start-at-zero", bool((m.in_proj_bias == 0).all() and (m.out_proj.bias == 0).all()))
fact(A, "out_proj-type", type(m.out_proj).__name__)

E = 512
counts = {sum(p.numel() for p in nn.MultiheadAttention(E, h).parameters()) for h in (1, 2, 4, 8, 16)}
fact(A, "param-count-E512-any-heads", ", ".join(str(c) for c in sorted(counts)))
fact(A, "param-count-formula-4E2+4E", 4 * E * E + 4 * E)
for label, kwargs in (("bias-False", dict(bias=False)), ("add_bias_kv", dict(add_bias_kv=True)),
                      ("kdim256-vdim128", dict(kdim=256, vdim=128))):
    module = nn.MultiheadAttention(E, 8, **kwargs)
    fact(A, f"param-count-E512-{label}", sum(p.numel() for p in module.parameters()))
separate = nn.MultiheadAttention(E, 8, kdim=256, vdim=128)
fact(A, "kdim-vdim-parameters", [name for name, _ in separate.named_parameters()])
fact(A, "kdim-vdim-in_proj_weight", separate.in_proj_weight)

N, L, E, h = 4, 10, 64, 8
for batch_first in (False, True):
    module = nn.MultiheadAttention(E, h, batch_first=batch_first)
    x = torch.randn(N, L, E) if batch_first else torch.randn(L, N, E)
    out, weights = module(x, x, x)
    _, per_head = module(x, x, x, average_attn_weights=False)
    _, none = module(x, x, x, need_weights=False)
    tag = f"batch_first-{batch_first}"
    fact(A, f"{tag}-input", tuple(x.shape))
    fact(A, f"{tag}-output", tuple(out.shape))
    fact(A, f"{tag}-weights", tuple(weights.shape))
    fact(A, f"{tag}-weights-per-head", tuple(per_head.shape))
    fact(A, f"{tag}-weights-need_weights-False", none)
module = nn.MultiheadAttention(E, h, batch_first=True)
x = torch.randn(L, E)
out, weights = module(x, x, x)
fact(A, "unbatched-output", tuple(out.shape))
fact(A, "unbatched-weights", tuple(weights.shape))
module = nn.MultiheadAttention(E, h, batch_first=True, kdim=32, vdim=16)
out, weights = module(torch.randn(N, L, E), torch.randn(N, 7, 32), torch.randn(N, 7, 16))
fact(A, "cross-kdim32-vdim16-S7-output", tuple(out.shape))
fact(A, "cross-kdim32-vdim16-S7-weights", tuple(weights.shape))
