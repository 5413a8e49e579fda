"""Which import paths name the same attention entry point (the aliases a linter must resolve), and the private
kernels the fast paths call.

docs/torch-facts.md#entry-points. Deterministic, about 2 s.
"""

import importlib

from _helpers import fact, outcome

import torch
import torch.ao.nn.quantizable
import torch.ao.nn.quantized
import torch.nn.functional as F
import torch.nn.quantizable
import torch.nn.quantizable.modules.activation
import torch.nn.quantized
from torch import nn

A = "entry-points"

fact(A, "nn.MultiheadAttention-is-nn.modules.MultiheadAttention",
     nn.MultiheadAttention is torch.nn.modules.MultiheadAttention)
fact(A, "nn.MultiheadAttention-is-nn.modules.activation.MultiheadAttention",
     nn.MultiheadAttention is torch.nn.modules.activation.MultiheadAttention)
for name in ("Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
             "TransformerDecoderLayer"):
    same = getattr(nn, name) is getattr(torch.nn.modules, name) is getattr(torch.nn.modules.transformer, name)
    fact(A, f"nn.{name}-is-nn.modules-and-nn.modules.transformer", same)
fact(A, "F.scaled_dot_product_attention-is-torch._C._nn", F.scaled_dot_product_attention is
     torch._C._nn.scaled_dot_product_attention)
fact(A, "F.scaled_dot_product_attention-type", type(F.scaled_dot_product_attention).__name__)
fact(A, "torch.scaled_dot_product_attention-exists", hasattr(torch, "scaled_dot_product_attention"))
fact(A, "torch.ops.aten.scaled_dot_product_attention-exists", hasattr(torch.ops.aten, "scaled_dot_product_attention"))
fact(A, "F.multi_head_attention_forward-module", F.multi_head_attention_forward.__module__)
fact(A, "generate_square_subsequent_mask-is-staticmethod",
     isinstance(nn.Transformer.__dict__["generate_square_subsequent_mask"], staticmethod))
fact(A, "quantizable-MultiheadAttention-subclasses-nn.MultiheadAttention",
     issubclass(torch.ao.nn.quantizable.MultiheadAttention, nn.MultiheadAttention))
fact(A, "quantized-MultiheadAttention-subclasses-nn.MultiheadAttention",
     issubclass(torch.ao.nn.quantized.MultiheadAttention, nn.MultiheadAttention))
fact(A, "nn.quantizable-is-ao.nn.quantizable",
     torch.nn.quantizable.MultiheadAttention is torch.ao.nn.quantizable.MultiheadAttention)
fact(A, "nn.quantized-is-ao.nn.quantized",
     torch.nn.quantized.MultiheadAttention is torch.ao.nn.quantized.MultiheadAttention)
fact(A, "quantizable.modules.activation-is-quantizable",
     torch.ao.nn.quantizable.modules.activation.MultiheadAttention is torch.ao.nn.quantizable.MultiheadAttention)
fact(A, "nn.quantizable.modules.activation-is-quantizable",
     torch.nn.quantizable.modules.activation.MultiheadAttention is torch.ao.nn.quantizable.MultiheadAttention)
fact(A, "torch.nn.modules.functional-import", outcome(lambda: importlib.import_module("torch.nn.modules.functional")))
fact(A, "_generate_square_subsequent_mask-equals-the-staticmethod",
     torch.equal(torch.nn.modules.transformer._generate_square_subsequent_mask(5),
                 nn.Transformer.generate_square_subsequent_mask(5)))
fact(A, "generate_square_subsequent_mask-3", nn.Transformer.generate_square_subsequent_mask(3).tolist())

# The private kernels of the two fast paths. Neither has an is_causal argument.
native = torch.ops.aten._native_multi_head_attention.default._schema
fused = torch.ops.aten._transformer_encoder_layer_fwd.default._schema
fact(A, "_native_multi_head_attention-schema", native)
fact(A, "_native_multi_head_attention-has-is_causal", "is_causal" in str(native))
fact(A, "_transformer_encoder_layer_fwd-has-is_causal", "is_causal" in str(fused))
fact(A, "torch._native_multi_head_attention-is-a-torch-attribute", hasattr(torch, "_native_multi_head_attention"))
fact(A, "torch._transformer_encoder_layer_fwd-is-a-torch-attribute", hasattr(torch, "_transformer_encoder_layer_fwd"))
