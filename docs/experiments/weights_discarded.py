"""MHA007: what need_weights (default True) changes: which kernel runs on each path, what the weights are, and
that the attention output is the same either way. The cost is measured in timing_heads_and_weights.py.

docs/torch-facts.md#need-weights. Deterministic (fixed seed), about 4 s.
"""

import os
import sys

from _helpers import count_calls, diff, fact

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

A = "need-weights"
E, N, L = 448, 2, 16
torch.manual_seed(0)
x = torch.randn(N, L, E)
WATCHED = ("_native_multi_head_attention", "scaled_dot_product_attention",
           "_scaled_dot_product_flash_attention_for_cpu", "bmm", "baddbmm", "softmax", "_softmax",
           "_transform_bias_rescale_qkv")


def attention_ops(module, need_weights: bool) -> str:
    """The attention-related aten ops one forward runs, as the profiler names them."""
    sys.stdout.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)  # the profiler writes two start/stop lines to stderr
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            module(x, x, x, need_weights=need_weights)
    finally:
        os.dup2(saved, 2)
        os.close(devnull)
        os.close(saved)
    seen = {event.key.replace("aten::", "") for event in prof.key_averages()}
    return ", ".join(op for op in WATCHED if op in seen)


for heads in (7, 8):
    module = nn.MultiheadAttention(E, heads, batch_first=True)
    for mode in ("train", "eval-no_grad"):
        module.train(mode == "train")
        for need_weights in (False, True):
            with torch.no_grad() if mode != "train" else torch.enable_grad():
                fact(A, f"heads-{heads}-{mode}-need_weights-{need_weights}-ops", attention_ops(module, need_weights))

# What MHA007's probe counts: the slow path looks F.scaled_dot_product_attention and F.softmax up at call time.
module = nn.MultiheadAttention(E, 8, batch_first=True).train()
for need_weights in (False, True):
    for name in ("scaled_dot_product_attention", "softmax"):
        fact(A, f"slow-path-need_weights-{need_weights}-F.{name}-calls",
             count_calls(F, name, lambda: module(x, x, x, need_weights=need_weights)))

# The output does not depend on need_weights; the default weights are the per-head weights averaged over heads.
torch.manual_seed(1)
module = nn.MultiheadAttention(64, 8, batch_first=True)
y = torch.randn(2, 10, 64)
for mode in ("train", "eval-no_grad"):
    module.train(mode == "train")
    with torch.no_grad():
        with_weights, averaged = module(y, y, y)
        without, none = module(y, y, y, need_weights=False)
        _, per_head = module(y, y, y, average_attn_weights=False)
    fact(A, f"{mode}-output-need_weights-True-vs-False", diff(with_weights, without))
    fact(A, f"{mode}-need_weights-False-weights", none)
    fact(A, f"{mode}-averaged-weights-shape", tuple(averaged.shape))
    fact(A, f"{mode}-per-head-weights-shape", tuple(per_head.shape))
    fact(A, f"{mode}-averaged-equals-per-head-mean", diff(averaged, per_head.mean(1)))
    fact(A, f"{mode}-weights-rows-sum-to-1", diff(averaged.sum(-1), torch.ones(2, 10)))
    if mode == "train":
        slow_weights = averaged
fact(A, "fast-vs-slow-path-averaged-weights", diff(averaged, slow_weights))
doc = " ".join(F.multi_head_attention_forward.__doc__.split())
fact(A, "multi_head_attention_forward-docstring", doc[doc.index("*Setting needs_weights"):].split("*")[1])
