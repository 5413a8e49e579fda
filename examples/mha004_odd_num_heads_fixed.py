"""MHA004 (fixed): an odd head count silently turns off torch's fused inference fast path for attention layers.

`N_HEADS` is now 4, an even count that divides D_MODEL = 320 (80 per head), so every nn.TransformerEncoderLayer
in `SentenceEncoder` takes the fused kernel under inference_mode.
"""

import torch
from torch import nn

VOCAB_SIZE = 1000
D_MODEL = 320
N_HEADS = 4  # even, and divides D_MODEL
N_LAYERS = 2


class SentenceEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB_SIZE, D_MODEL)
        layer = nn.TransformerEncoderLayer(d_model=D_MODEL, nhead=N_HEADS, dim_feedforward=4 * D_MODEL,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=N_LAYERS)

    @torch.inference_mode()
    def embed_sentences(self, tokens):  # tokens: (batch, seq)
        return self.encoder(self.embed(tokens)).mean(dim=1)  # (batch, d_model)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SentenceEncoder().eval()
    fused_calls = []  # count calls to torch's fused encoder-layer kernel
    fused_kernel = torch._transformer_encoder_layer_fwd
    torch._transformer_encoder_layer_fwd = lambda *args: fused_calls.append(1) or fused_kernel(*args)
    vectors = model.embed_sentences(torch.randint(0, VOCAB_SIZE, (3, 12)))
    print(f"embeddings {tuple(vectors.shape)}; fused encoder-layer kernel ran {len(fused_calls)}/{N_LAYERS} times")
