"""MHA001 (fixed): nn.MultiheadAttention defaults to batch_first=False and reads inputs as (seq, batch, embed).

nn.Embedding gives (batch, seq, embed), so `self.attn` is now built with batch_first=True: each review attends
only over its own tokens, and one review's prediction no longer depends on the rest of the batch.
"""

import torch
from torch import nn

VOCAB_SIZE = 1000
EMBED_DIM = 64
NUM_HEADS = 8
NUM_CLASSES = 3


class ReviewClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, EMBED_DIM)
        self.attn = nn.MultiheadAttention(EMBED_DIM, NUM_HEADS, batch_first=True)
        self.norm = nn.LayerNorm(EMBED_DIM)
        self.head = nn.Linear(EMBED_DIM, NUM_CLASSES)

    def forward(self, tokens):
        x = self.embed(tokens)  # (batch, seq, embed)
        attended, _ = self.attn(x, x, x, need_weights=False)
        x = self.norm(x + attended)
        return self.head(x.mean(dim=1))  # (batch, num_classes)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ReviewClassifier().eval()
    tokens = torch.randint(0, VOCAB_SIZE, (4, 10))
    changed = tokens.clone()
    changed[1] = torch.randint(0, VOCAB_SIZE, (10,))  # edit review 1 only
    with torch.no_grad():
        moved = (model(tokens)[0] - model(changed)[0]).abs().max().item()
    print(f"review 0's logits moved by {moved:.3f} when only review 1 changed (should be 0)")
