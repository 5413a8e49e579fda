"""Dropout: F.scaled_dot_product_attention applies dropout_p whatever the mode (it has no train/eval state);
nn.MultiheadAttention applies its dropout only in training; F.multi_head_attention_forward defaults to
training=True; how far apart two eval calls are, and which CPU kernel runs (MHA011's figures).

docs/torch-facts.md#dropout. Deterministic (fixed seeds), about 3 s.
"""

import inspect
import re

from _helpers import diff, fact

import torch
import torch.nn.functional as F
from torch import nn

A = "dropout"
torch.manual_seed(0)
q = torch.randn(1, 2, 8, 4)
with torch.no_grad():
    first = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    second = F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
fact(A, "sdpa-dropout_p-0.5-no_grad-two-calls-differ", diff(first, second))
fact(A, "sdpa-dropout_p-0-two-calls-differ",
     diff(F.scaled_dot_product_attention(q, q, q), F.scaled_dot_product_attention(q, q, q)))

E, h = 16, 4
x = torch.randn(2, 5, E)
mha = nn.MultiheadAttention(E, h, dropout=0.5, batch_first=True)
for mode in ("eval", "train"):
    mha.train(mode == "train")
    with torch.no_grad():
        a, b = (mha(x, x, x, need_weights=False)[0] for _ in range(2))
    fact(A, f"mha-dropout-0.5-{mode}-two-calls-differ", diff(a, b))
xs = x.transpose(0, 1)
arguments = (xs, xs, xs, E, h, mha.in_proj_weight, mha.in_proj_bias, None, None, False, 0.5, mha.out_proj.weight,
             mha.out_proj.bias)
with torch.no_grad():
    a, b = (F.multi_head_attention_forward(*arguments, need_weights=False)[0] for _ in range(2))
    fact(A, "multi_head_attention_forward-dropout_p-0.5-default-training-two-calls-differ", diff(a, b))
    a, b = (F.multi_head_attention_forward(*arguments, training=False, need_weights=False)[0] for _ in range(2))
    fact(A, "multi_head_attention_forward-dropout_p-0.5-training-False-two-calls-differ", diff(a, b))
fact(A, "multi_head_attention_forward-training-default",
     inspect.signature(F.multi_head_attention_forward).parameters["training"].default)
doc = " ".join(F.scaled_dot_product_attention.__doc__.split())
fact(A, "sdpa-docstring-warning", re.search(r"This function always applies dropout.*?training mode\.", doc).group(0))

# MHA011's figures: two identical eval calls at (2, 8, 64, 32), over 10 seeds; what the output is off the result
# without dropout (relative L2); which CPU kernel runs with and without dropout; F.dropout's defaults.
for p in (0.1, 0.5):
    apart, off = [], []
    for seed in range(10):
        torch.manual_seed(seed)
        q, k, v = (torch.randn(2, 8, 64, 32) for _ in range(3))
        with torch.no_grad():
            first, second = (F.scaled_dot_product_attention(q, k, v, dropout_p=p) for _ in range(2))
            clean = F.scaled_dot_product_attention(q, k, v)
        apart.append(diff(first, second))
        off.append(float((first - clean).norm() / clean.norm()))
    fact(A, f"sdpa-eval-p{p}-two-calls-differ-min-10-seeds", min(apart))
    fact(A, f"sdpa-eval-p{p}-two-calls-differ-max-10-seeds", max(apart))
    fact(A, f"sdpa-eval-p{p}-relative-l2-off-min-10-seeds", min(off))
    fact(A, f"sdpa-eval-p{p}-relative-l2-off-max-10-seeds", max(off))
for p in (0.0, 0.1):
    with torch.no_grad(), torch.profiler.profile() as profiled:
        F.scaled_dot_product_attention(q, k, v, dropout_p=p)
    kernels = sorted({e.name for e in profiled.events() if e.name.startswith("aten::_scaled_dot_product")})
    fact(A, f"sdpa-cpu-kernel-dropout_p-{p}", kernels)
dropout_defaults = inspect.signature(F.dropout).parameters
fact(A, "F-dropout-p-default", dropout_defaults["p"].default)
fact(A, "F-dropout-training-default", dropout_defaults["training"].default)
