"""MHA014 (bad): an (N, S) padding mask given as attn_mask, where SDPA and MultiheadAttention read an (L, S) mask.

`Encoder.forward` builds the per-sample padding mask from the lengths, then hands it as it is to
F.scaled_dot_product_attention and to nn.MultiheadAttention. SDPA broadcasts it as (1, 1, L, S) and MHA reads it
as (L, S): with a batch of 4 sequences of length 4 nothing raises, and query i of every sample is masked with
sample i's padding. With any other batch size both calls raise.
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
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # MHA014: read as (L, S)
        y = self.proj(y.transpose(1, 2).reshape(b, t, D_MODEL))
        out, _ = self.cross(y, x, x, attn_mask=~keep, need_weights=False)  # MHA014: read as (L, S)
        return out


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder = Encoder().eval()
    with torch.no_grad():
        x = torch.randn(4, 4, D_MODEL)
        print("N == L == 4: no error, output", tuple(encoder(x, torch.tensor([4, 1, 3, 2])).shape))
        try:
            encoder(torch.randn(2, 4, D_MODEL), torch.tensor([4, 2]))
        except RuntimeError as err:
            print(f"N=2, L=4 raises: {err}")
