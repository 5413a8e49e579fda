"""MHA003 (bad): for nn.MultiheadAttention, is_causal=True is only a hint about attn_mask; it builds no mask.

`DecoderBlock.forward` passes is_causal=True without attn_mask: training raises, but inference (eval + no_grad)
takes the fused fast path, which drops the flag, so every position silently attends to future tokens.
"""

import torch
from torch import nn

D_MODEL = 64
N_HEADS = 8


class DecoderBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(D_MODEL)
        self.attn = nn.MultiheadAttention(D_MODEL, N_HEADS, batch_first=True)
        self.norm2 = nn.LayerNorm(D_MODEL)
        self.mlp = nn.Sequential(nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(), nn.Linear(4 * D_MODEL, D_MODEL))

    def forward(self, x):  # x: (batch, seq, d_model)
        h = self.norm1(x)
        attended, _ = self.attn(h, h, h, is_causal=True, need_weights=False)  # MHA003: no attn_mask
        x = x + attended
        return x + self.mlp(self.norm2(x))


if __name__ == "__main__":
    torch.manual_seed(0)
    block = DecoderBlock().eval()
    x = torch.randn(2, 6, D_MODEL)
    future = x.clone()
    future[:, -1] = torch.randn(2, D_MODEL)  # change only the last token
    with torch.no_grad():
        leak = (block(x)[:, 0] - block(future)[:, 0]).abs().max().item()
    print(f"token 0's output moved by {leak:.3f} when the last token changed (should be 0)")
    try:
        block.train()(x)
    except RuntimeError as err:
        print(f"training raises instead: {str(err).split('.')[0]}")
