"""MHA006: MultiheadAttention reads a 3-D attn_mask of shape (N*num_heads, L, S) batch-major (row n*num_heads + head
belongs to sample n). `.repeat(h, 1, 1)` tiles a per-sample mask head-major, so heads get other samples' masks;
`.repeat_interleave(h, dim=0)` tiles it batch-major.

docs/torch-facts.md#mask-repeat-layout. Deterministic (fixed seeds), about 2 s.
"""

from _helpers import diff, fact

import torch
from torch import nn

A = "mask-repeat-layout"
N, L, E, h = 2, 5, 16, 4
torch.manual_seed(0)
x = torch.randn(N, L, E)
torch.manual_seed(1)
mha = nn.MultiheadAttention(E, h, batch_first=True).train()  # dropout 0: training mode only picks the slow path

per_sample = torch.zeros(N, L, L, dtype=torch.bool)
per_sample[1, :, 0] = True  # only sample 1 hides key 0
padding = torch.zeros(N, L, dtype=torch.bool)
padding[1, 0] = True  # the same thing, said as a key padding mask
with torch.no_grad():
    for need_weights in (False, True):
        reference = mha(x, x, x, key_padding_mask=padding, need_weights=need_weights)[0]
        interleaved = mha(x, x, x, attn_mask=per_sample.repeat_interleave(h, dim=0), need_weights=need_weights)[0]
        repeated = mha(x, x, x, attn_mask=per_sample.repeat(h, 1, 1), need_weights=need_weights)[0]
        fact(A, f"repeat_interleave-off-per-sample-need_weights-{need_weights}", diff(interleaved, reference))
        fact(A, f"repeat-off-per-sample-need_weights-{need_weights}", diff(repeated, reference))
    mha.eval()
    fast = mha(x, x, x, attn_mask=per_sample.repeat(h, 1, 1), need_weights=False)[0]
    fact(A, "repeat-off-per-sample-fast-path", diff(fast, reference))
    mha.train()

    # the layout itself: hiding key 0 in row 1*h + 0 alone changes sample 1 only
    one_row = torch.zeros(N * h, L, L, dtype=torch.bool)
    one_row[1 * h + 0, :, 0] = True
    plain = mha(x, x, x, need_weights=False)[0]
    changed = mha(x, x, x, attn_mask=one_row, need_weights=False)[0]
    fact(A, "row-n*h+head-changes-sample-0", diff(changed[0], plain[0]))
    fact(A, "row-n*h+head-changes-sample-1", diff(changed[1], plain[1]) > 1e-3)
# which (sample, head) pairs read another sample's mask after .repeat(h, 1, 1): row r = n*h + head holds sample r % N
wrong = [(n, head) for n in range(N) for head in range(h) if (n * h + head) % N != n]
fact(A, "repeat-pairs-with-another-samples-mask-N2-h4", f"{len(wrong)} of {N * h}")
