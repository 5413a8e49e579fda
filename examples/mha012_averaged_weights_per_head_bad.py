"""MHA012 (bad): a probe that plots one attention map per head, from weights that are averaged over the heads.

nn.MultiheadAttention returns its weights averaged over heads, (N, L, S), unless average_attn_weights=False.
`weights[:, head]` is then query row `head` of the average, shape (N, S): every "head map" is a query's row,
and nothing raises while the head index is below the sequence length.
"""

import torch
from torch import nn

EMBED_DIM = 64
NUM_HEADS = 4


class AttentionProbe(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)

    def forward(self, x):
        out, weights = self.attn(x, x, x)  # MHA012: the weights are (N, L, S), averaged over the heads
        head_maps = [weights[:, head] for head in range(self.attn.num_heads)]
        return out, head_maps


if __name__ == "__main__":
    torch.manual_seed(0)
    probe = AttentionProbe()
    out, head_maps = probe(torch.randn(2, 10, EMBED_DIM))
    print("one map per head, shape:", tuple(head_maps[0].shape), "(a query's row, not an (L, S) map)")
