"""MHA006 (bad): a per-sample (N, L, L) mask tiled for nn.MultiheadAttention with .repeat(num_heads, 1, 1).

Each row packs several documents; a token may only attend within its own document, so every sample has its own
mask. MultiheadAttention reads a 3-D attn_mask as row n * num_heads + head, but `.repeat` lays the copies out
head-major: most heads of sample 0 use sample 1's mask, and the reverse.
"""

import torch
from torch import nn

EMBED_DIM = 32
NUM_HEADS = 4


class PackedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.num_heads = NUM_HEADS
        self.attn = nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)

    def forward(self, x, segment_ids):  # x: (batch, seq, dim); segment_ids: (batch, seq), one id per document
        other_document = segment_ids[:, :, None] != segment_ids[:, None, :]  # (batch, seq, seq), True = blocked
        attn_mask = other_document.repeat(self.num_heads, 1, 1)  # MHA006
        out, _ = self.attn(x, x, x, attn_mask=attn_mask, need_weights=False)
        return out


if __name__ == "__main__":
    torch.manual_seed(0)
    model = PackedAttention().eval()
    x = torch.randn(2, 6, EMBED_DIM)
    segment_ids = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 1]])  # documents of different lengths
    with torch.no_grad():
        batched = model(x, segment_ids)
        one_by_one = torch.cat([model(x[i:i + 1], segment_ids[i:i + 1]) for i in range(2)])
    print(f"batched output differs from running each sample alone by {(batched - one_by_one).abs().max():.3f} "
          f"(should be 0)")
