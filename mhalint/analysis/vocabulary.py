"""The torch methods and the tensor names the analyses recognise, each list once.

Before this module the rules carried their own copies of these lists, each with small differences; a method
added to one was missing from the others. Axis-size names (`bsz`, `seq_len`) are in mhalint.analysis.names.
"""

from __future__ import annotations

import re

# Methods that change a tensor's shape or device but not its values.
SHAPE_ONLY = frozenset({
    "unsqueeze", "view", "reshape", "expand", "expand_as", "repeat", "repeat_interleave", "contiguous", "detach",
    "clone", "transpose", "permute", "flatten", "squeeze", "unflatten", "cuda", "cpu", "narrow", "view_as",
    "reshape_as", "unsqueeze_", "squeeze_", "t", "movedim", "index_select", "tile",
})
# Methods whose result has the axes (shape and roles) of the tensor they are called on: dtype and device
# conversions, copies, and element-wise operations.
KEEPS_AXES = frozenset({
    "contiguous", "to", "float", "half", "bfloat16", "double", "type_as", "clone", "detach", "cuda", "cpu",
    "masked_fill", "masked_fill_", "add", "mul", "sub", "div", "add_", "mul_", "relu", "gelu", "sigmoid", "tanh",
    "softmax", "clamp", "view_as", "reshape_as", "expand_as", "requires_grad_", "type", "long", "int", "bool",
    "logical_not", "logical_not_", "logical_or", "logical_and", "eq", "ne", "lt", "gt", "le", "ge", "__invert__",
})
# Module methods that return the module itself (`nn.MultiheadAttention(64, 8).eval()` is that module), and the
# torch functions and classes that wrap a module and pass every call on to it (`DDP(model)(x)` runs model.forward).
RETURNS_MODULE = frozenset({"eval", "train", "to", "cuda", "cpu", "half", "float", "double", "bfloat16",
                            "requires_grad_", "to_empty", "share_memory", "type", "xpu", "ipu", "mtia"})
FORWARDS_TO_MODULE = frozenset({
    "torch.compile", "torch.jit.script", "torch.jit.trace", "torch.nn.DataParallel",
    "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
})
# Modules whose output has the axes of their input (the last one may change size, not role).
KEEPS_AXES_MODULES = frozenset(f"torch.nn.{name}" for name in (
    "Linear", "LayerNorm", "RMSNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "Dropout", "Dropout1d", "Dropout2d",
    "Identity", "GELU", "ReLU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LeakyReLU", "Mish", "Hardswish", "ELU"))
# Methods that move axes, and those that regroup them.
REORDER = frozenset({"permute", "transpose", "movedim", "swapaxes", "swapdims", "t"})
REGROUP = frozenset({"view", "reshape", "flatten", "unflatten"})
# Methods that give a boolean tensor.
BOOLEAN_METHODS = frozenset({"bool", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and",
                             "logical_or", "isinf", "isnan", "isfinite"})
# Methods that give a floating tensor whatever they get.
TO_FLOAT = frozenset({"float", "half", "bfloat16", "double", "type_as"})
FLOAT_DTYPES = re.compile(r"\b(float|float16|float32|float64|half|bfloat16|double)\b|\.dtype\b")
INT_DTYPES = re.compile(r"\btorch\.(long|int|int8|int16|int32|int64|uint8|short)\b")
# Factories whose positional arguments are all sizes, and `torch.full`, whose first argument is the size.
SIZE_FACTORIES = frozenset(f"torch.{name}" for name in ("zeros", "ones", "empty", "randn", "rand"))
FULL = "torch.full"
# The legacy constructors: sizes when given several numbers (`torch.Tensor(n, 1, d)`), data when given a sequence.
LEGACY_CONSTRUCTORS = frozenset(f"torch.{name}" for name in ("Tensor", "FloatTensor", "DoubleTensor", "HalfTensor"))
NEW_FACTORIES = frozenset({"new_zeros", "new_ones", "new_full", "new_empty"})
MATMUL = frozenset({"torch.matmul", "torch.bmm", "torch.einsum", "torch.baddbmm"})

# Names of masks and of the data masks are built from. A name is a hint, never an error's evidence alone.
PADDING_NAME = re.compile(r"pad|key_?mask|kpm|lengths?$|lens$", re.IGNORECASE)
# Per-sample data: padding and lengths, and token or segment ids (one row per sample).
PER_SAMPLE_NAME = re.compile(PADDING_NAME.pattern + r"|(?:^|_)ids?$|tokens?$|segment", re.IGNORECASE)
# An (L, S) attention mask rather than a padding mask.
ATTENTION_MASK_NAME = re.compile(r"attn|causal|subsequent|look_?ahead|future", re.IGNORECASE)
# Names that by torch's convention hold a True-at-padding mask (the kpm of nn.MultiheadAttention).
IGNORE_MASK_NAME = re.compile(r"(key_padding_mask|padding_mask|pad_mask)$", re.IGNORECASE)
# A tokenizer's mask, 1 at real tokens and 0 at padding (Hugging Face's `attention_mask`, BERT's `input_mask`).
# The name counts only where the code also treats the tensor as 0/1 values.
TOKENIZER_MASK_NAME = re.compile(r"^(attention_mask|input_mask)$")
# True/1 = take part: a selection rather than scores (`mask` alone may be additive already).
KEEP_NAME = re.compile(r"^(keep|valid|keep_\w+|\w+_keep|valid_\w+|\w+_valid|is_valid\w*)$")
# A pad token id in a comparison (`ids == pad_id`, `tokens != self.padding_idx`).
PAD_TOKEN = re.compile(r"pad", re.IGNORECASE)
