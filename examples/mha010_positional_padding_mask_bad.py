"""MHA010 (bad): a causal mask passed as the 4th positional argument of nn.MultiheadAttention.

The 4th positional parameter of MultiheadAttention.forward is key_padding_mask, not attn_mask. With a batch of
8 sequences of length 8 the (L, L) causal mask fits the (N, S) padding-mask shape, so nothing raises: row n of
the causal mask hides keys of sample n, and every token still sees the future.
"""

import torch
from torch import nn

D_MODEL = 32
N_HEADS = 4


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True)

    def forward(self, x):  # x: (batch, seq, d_model)
        seq = x.size(1)
        causal_mask = torch.triu(torch.ones(seq, seq, dtype=torch.bool, device=x.device), diagonal=1)
        out, _ = self.attn(x, x, x, causal_mask, need_weights=False)  # MHA010
        return out


if __name__ == "__main__":
    torch.manual_seed(0)
    model = CausalSelfAttention().eval()
    x = torch.randn(8, 8, D_MODEL)  # batch size == sequence length: no error
    future = x.clone()
    future[:, -1] += 1.0  # change only the last token
    with torch.no_grad():
        leak = (model(x)[:, :-1] - model(future)[:, :-1]).abs().max().item()
    print(f"changing the last token moved the earlier outputs by {leak:.3f} (should be 0 with a causal mask)")
