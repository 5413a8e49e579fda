"""MHA020: `scores.masked_fill(mask, value)` before a softmax masks only when `value` is far below the scores:
softmax gives each key exp(score), so a key filled with -1e-9 (a typo of -1e9, or an epsilon's negation) keeps
the weight of a key scored 0. The masked keys then take a share of every row, and nothing raises.

docs/torch-facts.md#masked-fill-polarity. Deterministic (fixed seed), under a second.
"""

from _helpers import diff, fact

import torch

A = "masked-fill-polarity"
N, L, S, E = 2, 6, 6, 16  # the probe's sizes: the second sample's last two keys are padding


def attend(scores, keys_masked, value, v):
    """softmax(scores with the masked keys filled by `value`) @ v, and the mean weight the masked keys keep."""
    weights = torch.softmax(scores.masked_fill(keys_masked, value), dim=-1)
    return weights @ v, float(weights[1, :, -2:].sum(-1).mean())


generator = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(N, L, E, generator=generator) for _ in range(3))
scores = q @ k.transpose(-2, -1) / E ** 0.5
padding = torch.zeros(N, 1, S, dtype=torch.bool)
padding[1, :, -2:] = True  # True where a key is padding: the convention masked_fill(mask, -inf) needs
masked, left_inf = attend(scores, padding, float("-inf"), v)
fact(A, "weight-left-fill-minus-inf", left_inf)
fact(A, "weight-left-fill-minus-1e9", attend(scores, padding, -1e9, v)[1])
fact(A, "weight-left-fill-finfo-min", attend(scores, padding, torch.finfo(scores.dtype).min, v)[1])
fact(A, "weight-left-fill-minus-10", attend(scores, padding, -10.0, v)[1])
for name, value in (("minus-1e-9", -1e-9), ("minus-1e-12", -1e-12), ("minus-1e-7", -1e-7), ("zero", 0.0)):
    output, left = attend(scores, padding, value, v)
    fact(A, f"weight-left-fill-{name}", left)
    fact(A, f"output-difference-fill-{name}", diff(output, masked))
fact(A, "weight-left-unmasked", attend(scores, torch.zeros_like(padding), 0.0, v)[1])
