"""Positional parameter order of the attention entry points (what a call's args[i] is), which mask each causal flag
describes, and MHA010's trap: the 4th positional argument of MultiheadAttention.forward is key_padding_mask.

docs/torch-facts.md#positional-order. Deterministic (fixed seed), about 3 s.
"""

import inspect
import os
import re

from _helpers import diff, fact, outcome

import torch
import torch.ao.nn.quantizable as quantizable
import torch.nn.functional as F
from torch import nn

A = "positional-order"


def order(function) -> str:
    """Parameter names in order, `self` left out, with `*` where keyword-only parameters start."""
    names, starred = [], False
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name == "self":
            continue
        if parameter.kind is parameter.KEYWORD_ONLY and not starred:
            names.append("*")
            starred = True
        names.append(parameter.name)
    return ", ".join(names)


entry_points = {
    "MultiheadAttention.__init__": nn.MultiheadAttention.__init__,
    "MultiheadAttention.forward": nn.MultiheadAttention.forward,
    "multi_head_attention_forward": F.multi_head_attention_forward,
    "Transformer.__init__": nn.Transformer.__init__,
    "Transformer.forward": nn.Transformer.forward,
    "Transformer.generate_square_subsequent_mask": nn.Transformer.generate_square_subsequent_mask,
    "TransformerEncoderLayer.__init__": nn.TransformerEncoderLayer.__init__,
    "TransformerEncoderLayer.forward": nn.TransformerEncoderLayer.forward,
    "TransformerDecoderLayer.__init__": nn.TransformerDecoderLayer.__init__,
    "TransformerDecoderLayer.forward": nn.TransformerDecoderLayer.forward,
    "TransformerEncoder.__init__": nn.TransformerEncoder.__init__,
    "TransformerEncoder.forward": nn.TransformerEncoder.forward,
    "TransformerDecoder.__init__": nn.TransformerDecoder.__init__,
    "TransformerDecoder.forward": nn.TransformerDecoder.forward,
}
for name, function in entry_points.items():
    fact(A, name, order(function))
required = [p.name for p in inspect.signature(F.multi_head_attention_forward).parameters.values()
            if p.default is inspect.Parameter.empty]
fact(A, "multi_head_attention_forward-required", len(required))
fact(A, "multi_head_attention_forward-training-default",
     inspect.signature(F.multi_head_attention_forward).parameters["training"].default)

fact(A, "quantizable-MultiheadAttention.forward", order(quantizable.MultiheadAttention.forward))

# SDPA is a builtin: no inspect.signature; its schema is the truth, and it has keyword-only scale/enable_gqa.
fact(A, "sdpa-inspect-signature", outcome(lambda: inspect.signature(F.scaled_dot_product_attention)))
fact(A, "sdpa-schema", torch.ops.aten.scaled_dot_product_attention.default._schema)
q = torch.ones(1, 2, 3, 4)
fact(A, "sdpa-7th-positional", outcome(lambda: F.scaled_dot_product_attention(q, q, q, None, 0.0, False, 0.5)))
keep = torch.ones(3, 3, dtype=torch.bool).tril()
fact(A, "sdpa-positional-equals-keywords",
     torch.equal(F.scaled_dot_product_attention(q, q, q, keep, 0.0, False),
                 F.scaled_dot_product_attention(q, q, q, attn_mask=keep, dropout_p=0.0, is_causal=False)))
# The type stub has no `*` before scale, so a tool that reads it accepts a positional scale that torch refuses.
stub_text = open(os.path.join(os.path.dirname(torch.__file__), "_C", "_nn.pyi")).read()
stub_sdpa = re.search(r"def scaled_dot_product_attention\((.*?)\) ->", stub_text, re.S).group(1)
fact(A, "sdpa-stub-has-keyword-only-star", "*" in [p.strip() for p in stub_sdpa.split(",")])

# Which mask each causal flag describes, as the forward docstrings say it.
fact(A, "MultiheadAttention-is_causal-describes",
     re.search(r"``is_causal`` provides a hint that ``(\w+)``", inspect.getsource(nn.MultiheadAttention.forward))[1])
for cls in (nn.TransformerEncoderLayer, nn.TransformerEncoder, nn.TransformerDecoderLayer, nn.TransformerDecoder,
            nn.Transformer):
    for flag, mask in re.findall(r"(\w+): If specified, applies a causal mask as\s+``([^`]+)``",
                                 inspect.getsource(cls.forward)):
        fact(A, f"{cls.__name__}-{flag}-describes", mask)

# Positional masks of the layers go where the keywords go.
torch.manual_seed(0)
blocked = torch.ones(6, 6, dtype=torch.bool).triu(1)  # (L, L) causal mask, True = may not attend
layer = nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True).train()
x = torch.randn(2, 6, 16)
with torch.no_grad():
    fact(A, "TransformerEncoderLayer-2nd-positional-is-src_mask", torch.equal(layer(x, blocked),
                                                                             layer(x, src_mask=blocked)))

# MHA010: mha(x, x, x, causal) passes the causal mask as key_padding_mask.
torch.manual_seed(0)
mha = nn.MultiheadAttention(16, 4, batch_first=True).train()  # dropout 0: training mode only picks the slow path
x2, x6 = torch.randn(2, 6, 16), torch.randn(6, 6, 16)
with torch.no_grad():
    fact(A, "mha-4th-positional-causal-N2-L6", outcome(lambda: mha(x2, x2, x2, blocked, False)))
    as_padding = mha(x6, x6, x6, blocked, False)[0]  # (query, key, value, key_padding_mask, need_weights)
    intended = mha(x6, x6, x6, attn_mask=blocked, need_weights=False)[0]
    fact(A, "mha-4th-positional-causal-N6-L6-runs", "ok")
    fact(A, "mha-4th-positional-causal-N6-L6-off-intended", diff(as_padding, intended))
    keyword = mha(x6, x6, x6, key_padding_mask=blocked, need_weights=False)[0]
    fact(A, "mha-4th-positional-is-key_padding_mask", torch.equal(as_padding, keyword))
