"""MHA008 (fixed): the causal mask is boolean, so SDPA uses it to select positions instead of adding it.

`torch.tril(torch.ones(L, L, dtype=torch.bool))` is True where a token may attend, which is what a boolean
attn_mask means to SDPA: no position sees the tokens after it.
"""

import torch
import torch.nn.functional as F
from torch import nn

BLOCK_SIZE = 16
EMBED_DIM = 64
NUM_HEADS = 4


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(EMBED_DIM, 3 * EMBED_DIM)
        self.proj = nn.Linear(EMBED_DIM, EMBED_DIM)
        self.register_buffer("causal", torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE, dtype=torch.bool)))

    def forward(self, x):
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, NUM_HEADS, -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal[:seq, :seq])
        return self.proj(out.transpose(1, 2).reshape(batch, seq, EMBED_DIM))


if __name__ == "__main__":
    torch.manual_seed(0)
    layer = CausalSelfAttention().eval()
    x = torch.randn(1, 8, EMBED_DIM)
    changed = x.clone()
    changed[:, -1] += 1.0  # change only the last token
    with torch.no_grad():
        leak = (layer(x)[:, 0] - layer(changed)[:, 0]).abs().max().item()
    print(f"changing the last token moved the first token's output by {leak:.3f} (should be 0)")
