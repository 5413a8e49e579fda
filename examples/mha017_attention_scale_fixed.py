"""The same block with `scale=1.0`: the query's own scaling by head_dim ** -0.5 is the only one (MHA017's fix)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q = q * self.scale
        y = F.scaled_dot_product_attention(q, k, v, scale=1.0)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


if __name__ == "__main__":
    torch.manual_seed(0)
    block = Attention().eval()
    x = torch.randn(1, 8, 64) * 4
    with torch.no_grad():
        B, T, C = x.shape
        q, k, v = block.qkv(x).view(B, T, 3, block.heads, C // block.heads).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(q @ k.transpose(-2, -1) * (C // block.heads) ** -0.5, dim=-1)
        reference = block.proj((weights @ v).transpose(1, 2).reshape(B, T, C))
        off = (block(x) - reference).abs().max().item()
    print(f"the block matches attention scaled once by 1/sqrt(head_dim): {off < 1e-4}")
