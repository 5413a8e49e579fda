"""MHA008 (bad): a 0/1 float causal mask is added to the attention scores, so it masks nothing.

`torch.tril(torch.ones(L, L))` is 1 where a token may attend and 0 at the future, but as a float mask SDPA adds
it to the scores: the past gets +1 and the future stays visible, so every position sees the tokens after it.
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
        self.register_buffer("causal", torch.tril(torch.ones(BLOCK_SIZE, BLOCK_SIZE)))  # 1 = may attend

    def forward(self, x):
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, NUM_HEADS, -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal[:seq, :seq])  # MHA008
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
