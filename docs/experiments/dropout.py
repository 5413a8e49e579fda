"""Dropout: F.scaled_dot_product_attention applies dropout_p whatever the mode (it has no train/eval state);
nn.MultiheadAttention applies its dropout only in training; F.multi_head_attention_forward defaults to
training=True.

docs/torch-facts.md#dropout. Deterministic (fixed seed), about 2 s.
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
