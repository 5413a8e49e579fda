"""MHA007 (bad): nn.MultiheadAttention computes attention weights by default, and this block throws them away.

`self.attn(...)[0]` keeps only the output, but need_weights is left at True, so in training (the slow path) torch
runs an explicit bmm + softmax and averages the weights over heads instead of calling the fused SDPA kernel.
"""

import torch
from torch import nn

VOCAB_SIZE = 1000
EMBED_DIM = 64
NUM_HEADS = 8
PAD_ID = 0


class EncoderBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, EMBED_DIM, padding_idx=PAD_ID)
        self.attn = nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)
        self.norm = nn.LayerNorm(EMBED_DIM)

    def forward(self, tokens):
        x = self.embed(tokens)
        pad = tokens == PAD_ID  # True at padding: MultiheadAttention's convention
        x = self.norm(x + self.attn(x, x, x, key_padding_mask=pad)[0])  # MHA007: the weights are discarded
        return x


if __name__ == "__main__":
    torch.manual_seed(0)
    model = EncoderBlock().train()
    tokens = torch.randint(1, VOCAB_SIZE, (2, 16))
    with torch.profiler.profile() as profile:
        model(tokens).sum().backward()
    ops = {event.key for event in profile.key_averages()}
    print("fused scaled_dot_product_attention used:", "aten::scaled_dot_product_attention" in ops)
    print("explicit bmm + softmax for weights nobody reads:", "aten::bmm" in ops and "aten::softmax" in ops)
