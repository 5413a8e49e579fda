"""The same block with the heads split as `reshape(B, T, n_head, head_size).transpose(1, 2)`: the reshape cuts each
token's features into heads, and the transpose moves the heads before the positions (MHA016's fix)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int = 64, n_head: int = 4):
        super().__init__()
        self.n_head = n_head
        self.n_embd = n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.reshape(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


if __name__ == "__main__":
    torch.manual_seed(0)
    block = CausalSelfAttention().eval()
    x = torch.randn(1, 16, 64)
    changed = x.clone()
    changed[:, -1] += 1.0  # change only the last token
    with torch.no_grad():
        moved = (block(x) - block(changed))[0, :-1].abs().amax(dim=-1)
    print(f"changing the last token moved the output at {int((moved > 1e-6).sum())} earlier positions (should be 0: "
          f"causal attention never reads the future)")
