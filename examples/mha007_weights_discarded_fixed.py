"""MHA007 (fixed): the block asks nn.MultiheadAttention for the output only, with need_weights=False.

`self.attn(...)[0]` still keeps only the output, and need_weights=False lets the slow path (training) call the
fused scaled_dot_product_attention kernel instead of an explicit bmm + softmax; the output is the same.
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
        x = self.norm(x + self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0])
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
