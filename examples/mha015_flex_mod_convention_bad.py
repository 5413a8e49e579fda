"""A small causal decoder block on flex_attention, with a mask_mod written in the "True = hide the future" habit."""

import torch
from torch import nn
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def causal(b, h, q_idx, kv_idx):
    return q_idx < kv_idx  # meant: hide the keys after the query


class DecoderBlock(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        block_mask = create_block_mask(causal, None, None, T, T, device=str(x.device))
        y = flex_attention(q, k, v, block_mask=block_mask)
        return self.out(y.transpose(1, 2).reshape(B, T, C))


if __name__ == "__main__":
    torch.manual_seed(0)
    block = DecoderBlock().eval()
    x = torch.randn(1, 16, 64)
    changed = x.clone()
    changed[:, -1] += 1.0  # change only the last token
    with torch.no_grad():  # FlexAttention has no backward on CPU
        leak = (block(x)[:, 0] - block(changed)[:, 0]).abs().max().item()
    print(f"changing the last token moved the first token's output by {leak:.3f} (should be 0)")
