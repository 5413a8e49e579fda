"""MHA005 (bad): nn.MultiheadAttention needs num_heads to divide embed_dim, or the module cannot be built.

EMBED_DIM = 300 (the width of GloVe vectors) and N_HEADS = 8 reach nn.MultiheadAttention through the defaults of
`GloveAttentionPool`: 300 = 37 x 8 + 4, so building the model raises
`AssertionError: embed_dim must be divisible by num_heads`, without saying which layer or setting is wrong.
"""

import torch
from torch import nn

VOCAB_SIZE = 1000
EMBED_DIM = 300  # GloVe 300-d vectors
N_HEADS = 8  # MHA005: 8 does not divide 300


class GloveAttentionPool(nn.Module):
    """Pools a sentence of word vectors into one vector with a learned attention query."""

    def __init__(self, embed_dim=EMBED_DIM, num_heads=N_HEADS):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, embed_dim)
        self.query = nn.Parameter(torch.randn(1, 1, embed_dim))
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)

    def forward(self, tokens):  # tokens: (batch, seq)
        x = self.embed(tokens)
        pooled, _ = self.attn(self.query.expand(x.size(0), -1, -1), x, x, need_weights=False)
        return pooled.squeeze(1)  # (batch, embed_dim)


if __name__ == "__main__":
    torch.manual_seed(0)
    try:
        model = GloveAttentionPool()
    except AssertionError as err:
        print(f"building the model fails: AssertionError: {err} "
              f"({EMBED_DIM} = {EMBED_DIM // N_HEADS} x {N_HEADS} + {EMBED_DIM % N_HEADS})")
    else:
        print(f"sentence vectors {tuple(model(torch.randint(0, VOCAB_SIZE, (3, 12))).shape)}")
