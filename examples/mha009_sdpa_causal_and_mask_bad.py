"""MHA009 (bad): F.scaled_dot_product_attention given both attn_mask and is_causal=True.

`CausalSelfAttention.forward` passes the padding keep-mask together with is_causal=True. SDPA's docstring says this
raises; on CPU the default kernel instead silently applies both, and under sdpa_kernel(MATH) the same call raises.
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
        keep = tokens != PAD_ID  # True at real tokens, SDPA's convention
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :], is_causal=True)  # MHA009
        return self.proj(y.transpose(1, 2).reshape(b, t, D_MODEL))


if __name__ == "__main__":
    torch.manual_seed(0)
    attn = CausalSelfAttention().eval()
    tokens = torch.tensor([[5, 6, 7, 8, 9], [5, 6, 7, PAD_ID, PAD_ID]])
    x = torch.randn(2, 5, D_MODEL)
    with torch.no_grad():
        print(f"default CPU kernel: no error, output {tuple(attn(x, tokens).shape)} (mask and causal both applied)")
        try:
            with sdpa_kernel(SDPBackend.MATH):
                attn(x, tokens)
            print("under sdpa_kernel(MATH): no error")
        except RuntimeError as err:
            print(f"under sdpa_kernel(MATH) the same call raises: {err}")
