"""MHA012 (fixed): the probe asks for per-head weights, so `weights[:, head]` is head `head`'s (N, L, S) map.

With average_attn_weights=False, nn.MultiheadAttention returns its weights per head, (N, num_heads, L, S),
so the loop over range(num_heads) indexes the heads axis.
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
        out, weights = self.attn(x, x, x, average_attn_weights=False)  # (N, num_heads, L, S)
        head_maps = [weights[:, head] for head in range(self.attn.num_heads)]
        return out, head_maps


if __name__ == "__main__":
    torch.manual_seed(0)
    probe = AttentionProbe()
    out, head_maps = probe(torch.randn(2, 10, EMBED_DIM))
    print("one map per head, shape:", tuple(head_maps[0].shape), "(an (L, S) map)")
