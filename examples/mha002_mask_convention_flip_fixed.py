"""MHA002 (fixed): a bool mask means "ignore" to nn.MultiheadAttention but "attend" to F.scaled_dot_product_attention.

`pad = tokens == PAD_ID` (True at padding) still goes to the MultiheadAttention key_padding_mask unchanged, but
`sdpa_block` now passes `~pad[:, None, None, :]` to SDPA, so both blocks ignore the padding.
"""

import torch
import torch.nn.functional as F
from torch import nn

PAD_ID = 0
VOCAB_SIZE = 1000
EMBED_DIM = 64
NUM_HEADS = 8


class PaddedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, EMBED_DIM, padding_idx=PAD_ID)
        self.mha = nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)
        self.qkv = nn.Linear(EMBED_DIM, 3 * EMBED_DIM)
        self.proj = nn.Linear(EMBED_DIM, EMBED_DIM)

    def sdpa_block(self, x, pad):
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).view(batch, seq, 3, NUM_HEADS, -1).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
        return self.proj(out.transpose(1, 2).reshape(batch, seq, EMBED_DIM))

    def forward(self, tokens):
        pad = tokens == PAD_ID  # True at padding: MultiheadAttention's convention
        x = self.embed(tokens)
        x = x + self.mha(x, x, x, key_padding_mask=pad, need_weights=False)[0]
        return x + self.sdpa_block(x, pad)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = PaddedEncoder().eval()
    sentence = torch.randint(1, VOCAB_SIZE, (1, 6))
    padded = torch.cat([sentence, torch.full((1, 4), PAD_ID)], dim=1)  # same sentence, 4 pad tokens
    with torch.no_grad():
        diff = (model(sentence) - model(padded)[:, :6]).abs().max().item()
    print(f"padding changed the real tokens' outputs by {diff:.3f} (should be 0)")
