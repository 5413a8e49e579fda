"""What mhalint knows about torch's attention API surface: canonical names, aliases and signatures.

Everything here is transcribed from docs/torch-facts.md#entry-points (the names and aliases) and
docs/torch-facts.md#positional-order (the signatures), so rules can map a call's positional arguments to parameter
names without importing torch.
"""

from __future__ import annotations

from dataclasses import dataclass

MHA = "torch.nn.MultiheadAttention"
TRANSFORMER = "torch.nn.Transformer"
ENCODER = "torch.nn.TransformerEncoder"
DECODER = "torch.nn.TransformerDecoder"
ENCODER_LAYER = "torch.nn.TransformerEncoderLayer"
DECODER_LAYER = "torch.nn.TransformerDecoderLayer"
SDPA = "torch.nn.functional.scaled_dot_product_attention"
MHA_FORWARD_FN = "torch.nn.functional.multi_head_attention_forward"
GENERATE_SQUARE_SUBSEQUENT_MASK = "torch.nn.Transformer.generate_square_subsequent_mask"
FLEX_MODULE = "torch.nn.attention.flex_attention."
FLEX_ATTENTION = FLEX_MODULE + "flex_attention"
# The flex_attention functions that take a mask_mod, with the name of the parameter (their first) that takes it.
FLEX_MASK_TAKERS = {"create_block_mask": "mask_mod", "create_mask": "mod_fn"}

# Every spelling that names the same object as a canonical name (docs/torch-facts.md#entry-points). The quantizable
# and quantized MHA are subclasses with the same constructor and forward signatures, so rules treat them as MHA.
_ALIASES = {
    "torch.nn.modules.MultiheadAttention": MHA,
    "torch.nn.modules.activation.MultiheadAttention": MHA,
    "torch.nn.modules.transformer.MultiheadAttention": MHA,  # transformer.py imports it from activation.py
    "torch.ao.nn.quantizable.MultiheadAttention": MHA,
    "torch.nn.quantizable.MultiheadAttention": MHA,
    "torch.ao.nn.quantizable.modules.activation.MultiheadAttention": MHA,
    "torch.nn.quantizable.modules.activation.MultiheadAttention": MHA,
    "torch.ao.nn.quantized.MultiheadAttention": MHA,
    "torch.nn.quantized.MultiheadAttention": MHA,
    "torch._C._nn.scaled_dot_product_attention": SDPA,
    "torch.ops.aten.scaled_dot_product_attention": SDPA,
}
for _cls in ("Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
             "TransformerDecoderLayer"):
    _ALIASES[f"torch.nn.modules.{_cls}"] = f"torch.nn.{_cls}"
    _ALIASES[f"torch.nn.modules.transformer.{_cls}"] = f"torch.nn.{_cls}"
for _fn in ("scaled_dot_product_attention", "multi_head_attention_forward"):
    _ALIASES[f"torch.nn.modules.functional.{_fn}"] = f"torch.nn.functional.{_fn}"
for _prefix in ("torch.nn.modules.transformer.Transformer", "torch.nn.modules.Transformer"):
    _ALIASES[f"{_prefix}.generate_square_subsequent_mask"] = GENERATE_SQUARE_SUBSEQUENT_MASK
_ALIASES["torch.nn.modules.transformer._generate_square_subsequent_mask"] = GENERATE_SQUARE_SUBSEQUENT_MASK


def canonical(qualified_name: str | None) -> str | None:
    """The canonical torch name for any alias of it; other names come back unchanged."""
    if qualified_name is None:
        return None
    return _ALIASES.get(qualified_name, qualified_name)


@dataclass(frozen=True)
class Signature:
    """Parameter names in positional order; those after `keyword_only_from` cannot be given positionally."""

    params: tuple[str, ...]
    keyword_only_from: int | None = None

    def index(self, name: str) -> int | None:
        try:
            position = self.params.index(name)
        except ValueError:
            return None
        if self.keyword_only_from is not None and position >= self.keyword_only_from:
            return None
        return position


def _sig(text: str, keyword_only: str | None = None) -> Signature:
    params = tuple(p.strip() for p in text.split(","))
    return Signature(params, params.index(keyword_only) if keyword_only else None)


_LAYER_INIT = _sig("d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, "
                   "bias, device, dtype")
_DECODER_FORWARD = _sig("tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, "
                        "tgt_is_causal, memory_is_causal")

# Constructor signatures (docs/torch-facts.md#positional-order).
CONSTRUCTORS: dict[str, Signature] = {
    MHA: _sig("embed_dim, num_heads, dropout, bias, add_bias_kv, add_zero_attn, kdim, vdim, batch_first, device, "
              "dtype"),
    TRANSFORMER: _sig("d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout, activation, "
                      "custom_encoder, custom_decoder, layer_norm_eps, batch_first, norm_first, bias, device, dtype"),
    ENCODER_LAYER: _LAYER_INIT,
    DECODER_LAYER: _LAYER_INIT,
    ENCODER: _sig("encoder_layer, num_layers, norm, enable_nested_tensor, mask_check"),
    DECODER: _sig("decoder_layer, num_layers, norm"),
}

# Default values of constructor parameters that rules reason about.
CONSTRUCTOR_DEFAULTS: dict[str, dict[str, object]] = {
    MHA: {"batch_first": False, "bias": True, "kdim": None, "vdim": None},
    TRANSFORMER: {"batch_first": False, "d_model": 512, "nhead": 8},
    ENCODER_LAYER: {"batch_first": False},
    DECODER_LAYER: {"batch_first": False},
}

# The attention modules torch's layers build in __init__ (`self.self_attn = MultiheadAttention(d_model, nhead,
# dropout=dropout, bias=bias, batch_first=batch_first, **factory_kwargs)`, torch 2.13 `nn/modules/transformer.py`),
# and the stacks nn.Transformer builds (`self.encoder = TransformerEncoder(encoder_layer, ...)`, its layers built
# with its batch_first; `custom_encoder`/`custom_decoder` replace them), which a subclass's methods reach as
# `self.self_attn` or `self.encoder` and an instance's user as `layer.self_attn` or `model.transformer.encoder`:
# the attribute, the API of the module it holds.
SUBMODULES: dict[str, dict[str, str]] = {
    ENCODER_LAYER: {"self_attn": MHA},
    DECODER_LAYER: {"self_attn": MHA, "multihead_attn": MHA},
    TRANSFORMER: {"encoder": ENCODER, "decoder": DECODER},
}
CUSTOM_SUBMODULES = {"encoder": "custom_encoder", "decoder": "custom_decoder"}
# The layers' own methods that call that attention with their first argument as the query (transformer.py: `_sa_block(x,
# attn_mask, key_padding_mask, is_causal)` calls `self.self_attn(x, x, x, ...)`; `_mha_block(x, mem, ...)` calls
# `self.multihead_attn(x, mem, mem, ...)`).
INHERITED_BLOCKS: dict[str, dict[str, str]] = {
    ENCODER_LAYER: {"_sa_block": "self_attn"},
    DECODER_LAYER: {"_sa_block": "self_attn", "_mha_block": "multihead_attn"},
}
LAYER_ATTENTION_PARAMETERS = {"embed_dim": "d_model", "num_heads": "nhead", "dropout": "dropout", "bias": "bias",
                              "batch_first": "batch_first", "device": "device", "dtype": "dtype"}
# What a submodule gets of its owner's constructor arguments (its own name: the owner's).
SUBMODULE_PARAMETERS = {MHA: LAYER_ATTENTION_PARAMETERS, ENCODER: {"batch_first": "batch_first"},
                        DECODER: {"batch_first": "batch_first"}}

# forward() signatures of module instances, and plain functions (docs/torch-facts.md#positional-order).
CALLS: dict[str, Signature] = {
    MHA: _sig("query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal"),
    TRANSFORMER: _sig("src, tgt, src_mask, tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask, "
                      "memory_key_padding_mask, src_is_causal, tgt_is_causal, memory_is_causal"),
    ENCODER_LAYER: _sig("src, src_mask, src_key_padding_mask, is_causal"),
    ENCODER: _sig("src, mask, src_key_padding_mask, is_causal"),
    DECODER_LAYER: _DECODER_FORWARD,
    DECODER: _DECODER_FORWARD,
    SDPA: _sig("query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa", keyword_only="scale"),
    MHA_FORWARD_FN: _sig("query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k, "
                         "bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training, "
                         "key_padding_mask, need_weights, attn_mask, use_separate_proj_weight, q_proj_weight, "
                         "k_proj_weight, v_proj_weight, static_k, static_v, average_attn_weights, is_causal"),
}

# The forward arguments that must have the batch where the first one has it: MultiheadAttention views the key and
# value with the query's batch size (`k.view(k.shape[0], bsz * num_heads, head_dim)`, functional.py), the decoder
# attends from tgt to memory that way, and nn.Transformer raises "the batch number of src and tgt must be equal".
# Where the query's layout is unknown, theirs is the layout the module reads.
SHARES_BATCH: dict[str, tuple[str, ...]] = {
    MHA: ("key", "value"), DECODER_LAYER: ("memory",), DECODER: ("memory",), TRANSFORMER: ("tgt",),
}

# Which convention a boolean mask argument follows: True means "ignore" for MHA and the Transformer classes,
# "attend" for SDPA (docs/torch-facts.md#mask-convention).
IGNORE = "ignore"
KEEP = "keep"
MASK_ARGUMENTS: dict[str, dict[str, str]] = {
    MHA: {"key_padding_mask": IGNORE, "attn_mask": IGNORE},
    MHA_FORWARD_FN: {"key_padding_mask": IGNORE, "attn_mask": IGNORE},
    TRANSFORMER: {name: IGNORE for name in ("src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask",
                                            "tgt_key_padding_mask", "memory_key_padding_mask")},
    ENCODER_LAYER: {"src_mask": IGNORE, "src_key_padding_mask": IGNORE},
    ENCODER: {"mask": IGNORE, "src_key_padding_mask": IGNORE},
    DECODER_LAYER: {name: IGNORE for name in ("tgt_mask", "memory_mask", "tgt_key_padding_mask",
                                              "memory_key_padding_mask")},
    SDPA: {"attn_mask": KEEP},
}
MASK_ARGUMENTS[DECODER] = MASK_ARGUMENTS[DECODER_LAYER]

# Short names users know these APIs by, for messages.
SHORT_NAMES = {
    MHA: "nn.MultiheadAttention",
    TRANSFORMER: "nn.Transformer",
    ENCODER: "nn.TransformerEncoder",
    DECODER: "nn.TransformerDecoder",
    ENCODER_LAYER: "nn.TransformerEncoderLayer",
    DECODER_LAYER: "nn.TransformerDecoderLayer",
    SDPA: "F.scaled_dot_product_attention",
    MHA_FORWARD_FN: "F.multi_head_attention_forward",
}


def short_name(api: str) -> str:
    return SHORT_NAMES.get(api, api)


# What a file must contain for a rule about these APIs to find anything in it: regular expressions over the file's
# bytes, checked before parsing. A bare "Transformer" is in hundreds of docstrings of the transformers library,
# so the class is only a trigger where code names it (an attribute, a call, an import, a list of names); and
# torch.fx's graph `Transformer` is another class.
#
# A word a statement defines (`def scaled_dot_product_attention(`, `class Transformer(`) or reads off `self`
# (`self.create_mask(`) names the project's own function, class or method, never torch's: the analyses resolve a
# name to torch's only through an import or an assignment, and each of those names the API again (a match). Such
# words alone do not make a file worth parsing (on the speed corpus: 16 files, 22,000 lines, none with a finding).
def trigger(word: str) -> str:
    """A trigger for `word` (a regular expression that starts with a word character) where code names it, not
    where a statement defines it or reads it off `self`. The look-behinds come after `\\b`, which fails fast at
    most positions: before it, they cost a quarter of the prefilter's time."""
    return r"\b(?<!def )(?<!class )(?<!self\.)" + word


MHA_TRIGGER = trigger(r"MultiheadAttention\b")
TRANSFORMER_TRIGGER = "|".join((trigger(r"Transformer(?:Encoder|Decoder)(?:Layer)?\b"), r"\.(?<!\bfx\.)Transformer\b",
                                trigger(r"(?<!\bfx\.)Transformer\s*[(,)]"), r"\bimport\s+Transformer\b",
                                r"\bTransformer\s+as\b"))
SDPA_TRIGGER = trigger(r"scaled_dot_product_attention\b")
MHA_FORWARD_FN_TRIGGER = trigger(r"multi_head_attention_forward\b")
MODULE_TRIGGERS = (MHA_TRIGGER, TRANSFORMER_TRIGGER)
