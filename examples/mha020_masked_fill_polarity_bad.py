"""Hand-written scaled dot-product attention that masks padded keys with `masked_fill(mask == 0, -e)`, where `e`
defaults to 1e-12 (an epsilon's negation, not a large negative number): the padded keys keep the weight of a key
that scored 0, so every query attends to the padding (MHA020)."""

import math

import torch
import torch.nn as nn


class ScaleDotProductAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, q, k, v, mask=None, e=1e-12):
        score = (q @ k.transpose(2, 3)) / math.sqrt(k.size(-1))
        if mask is not None:
            score = score.masked_fill(mask == 0, -e)
        score = self.softmax(score)
        return score @ v, score


if __name__ == "__main__":
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 6, 16) for _ in range(3))
    keep = torch.ones(2, 1, 1, 6)
    keep[1, ..., -2:] = 0  # the second sample's last two keys are padding
    _, weights = ScaleDotProductAttention()(q, k, v, keep)
    padded = weights[1, ..., -2:].sum(-1).max().item()
    print(f"the padded keys get no attention: {padded < 1e-6}")
