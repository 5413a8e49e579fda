"""MHA014 (fixed): the padding mask is broadcast per sample for SDPA and given to MultiheadAttention as
key_padding_mask.

`keep[:, None, None, :]` is (N, 1, 1, S): sample n's keys are masked for every head and query of sample n. For
MultiheadAttention the same mask goes in key_padding_mask (True = padding), which torch checks is (N, S).
"""

import torch
import torch.nn.functional as F
from torch import nn

D_MODEL = 32
N_HEADS = 4


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)
        self.cross = nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True)

    def forward(self, x, lengths):  # x: (batch, seq, d_model); lengths: (batch,)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, N_HEADS, D_MODEL // N_HEADS).permute(2, 0, 3, 1, 4)
        keep = torch.arange(t, device=x.device)[None, :] < lengths[:, None]  # (batch, seq), True at real tokens
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
        y = self.proj(y.transpose(1, 2).reshape(b, t, D_MODEL))
        out, _ = self.cross(y, x, x, key_padding_mask=~keep, need_weights=False)
        return out


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder = Encoder().eval()
    with torch.no_grad():
        for n in (4, 2):
            x = torch.randn(n, 4, D_MODEL)
            print(f"N={n}, L=4: output", tuple(encoder(x, torch.tensor([4, 1, 3, 2])[:n]).shape))
