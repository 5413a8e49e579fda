"""MHA009 (fixed): F.scaled_dot_product_attention given both attn_mask and is_causal=True.

`CausalSelfAttention.forward` now folds the causal pattern into the padding keep-mask and passes only attn_mask,
so every SDPA backend computes the same thing: the default CPU kernel and sdpa_kernel(MATH) agree.
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

D_MODEL = 64
N_HEADS = 4
PAD_ID = 0


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x, tokens):  # x: (batch, seq, d_model); tokens: (batch, seq), right-padded with PAD_ID
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, N_HEADS, D_MODEL // N_HEADS).permute(2, 0, 3, 1, 4)
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()  # True where attending is allowed
        keep = (tokens != PAD_ID)[:, None, None, :] & causal  # padding and causality in one keep-mask
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
        return self.proj(y.transpose(1, 2).reshape(b, t, D_MODEL))


if __name__ == "__main__":
    torch.manual_seed(0)
    attn = CausalSelfAttention().eval()
    tokens = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, PAD_ID, PAD_ID]])
    x = torch.randn(2, 5, D_MODEL)
    with torch.no_grad():
        default = attn(x, tokens)
        with sdpa_kernel(SDPBackend.MATH):
            math = attn(x, tokens)
    print(f"default CPU kernel vs sdpa_kernel(MATH): max difference {(default - math).abs().max().item():.1e}")
