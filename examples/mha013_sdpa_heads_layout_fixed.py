"""A GPT block's causal self-attention on F.scaled_dot_product_attention, with the heads split as SDPA reads
them: (B, n_head, T, head_size), and merged back after the inverse transpose (MHA013, fixed)."""

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
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


if __name__ == "__main__":
    torch.manual_seed(0)
    block = CausalSelfAttention().eval()
    x = torch.randn(1, 16, 64)
    changed = x.clone()
    changed[:, 0] += 1.0  # change only the first token
    with torch.no_grad():
        seen = (block(x)[:, -1] - block(changed)[:, -1]).abs().max().item()
    print(f"changing the first token moved the last token's output by {seen:.3f} (should be above 0: it attends "
          f"to the past)")
