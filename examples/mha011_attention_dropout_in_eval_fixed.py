"""MHA011 (fixed): attention dropout gated on the module's mode.

`SelfAttention.forward` passes `dropout_p=self.dropout if self.training else 0.0`: SDPA has no train/eval state
of its own, so the module gates it, and two identical evaluation calls give the same output.
"""

import torch
import torch.nn.functional as F
from torch import nn

D_MODEL = 64
N_HEADS = 4


class SelfAttention(nn.Module):
    def __init__(self, dropout=0.1):
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.dropout = dropout

    def forward(self, x):  # x: (batch, seq, d_model)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, N_HEADS, D_MODEL // N_HEADS).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, t, D_MODEL))


if __name__ == "__main__":
    torch.manual_seed(0)
    attn = SelfAttention().eval()
    x = torch.randn(2, 5, D_MODEL)
    with torch.no_grad():
        first, second = attn(x), attn(x)
    print(f"two identical eval calls differ by up to {float((first - second).abs().max()):.3f}")
