"""What each wrapped entry point's arguments mean: one `describe_*` per entry point turns a call's real arguments
into a `CallInfo` (its attention blocks, mode and inputs) that the rules' runtime checks read.

Parameter orders are torch 2.13's (docs/torch-facts.md#positional-order). Nothing here changes or copies an argument.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from .reports import Site


@dataclass
class Block:
    """One multi-head attention inside a call, in MultiheadAttention's mask convention (True = ignore)."""

    attn_mask: Any
    attn_name: str
    kpm: Any
    kpm_name: str
    batch: int  # N; 1 for unbatched input
    length: int | None  # L, the query length
    heads: int | None
    batched: bool
    causal: bool  # the is_causal flag is True
    causal_name: str
    label: str = ""  # "self-attention", "cross-attention", or "" when the call has one block


@dataclass
class CallInfo:
    api: str  # what the user called, e.g. "nn.MultiheadAttention"
    kind: str  # "mha", "mha_fn", "sdpa", "flex", "encoder_layer", "encoder", "decoder_layer", "decoder", "transformer"
    site: Site
    blocks: list[Block] = field(default_factory=list)
    mode: dict[str, Any] = field(default_factory=dict)  # training, grad enabled, need_weights, ...
    inputs: list[tuple[str, Any]] = field(default_factory=list)
    output_index: int | None = None  # the output tensor is result[output_index] (None: the result itself)
    batch_dim: int | None = None  # the output's batch dimension, None when unbatched
    sdpa: dict[str, Any] | None = None  # query, key, attn_mask, is_causal for F.scaled_dot_product_attention
    flex: dict[str, Any] | None = None  # query, key, value, block_mask, score_mod, scale, enable_gqa for flex_attention
    module: Any = None  # the module called, for modules
    # Filled in after the call:
    error: BaseException | None = None
    output: Any = None
    reported: set[str] = field(default_factory=set)  # the codes reported for this call so far, in code order
    _output_nan: bool | None = field(default=None, repr=False)
    frame: Any = field(default=None, repr=False)  # the user's frame that made the call, alive during the checks

    @property
    def caller_module(self):
        """The nn.Module whose method made the call (`self` in the user's frame), or None: whose mode it runs in."""
        owner = self.frame.f_locals.get("self") if self.frame is not None else None
        return owner if isinstance(owner, torch.nn.Module) else None

    @property
    def output_nan(self) -> bool:
        """Whether the output has NaN (read once, after the call)."""
        if self._output_nan is None:
            out = self.output
            self._output_nan = plain(out) and out.is_floating_point() and bool(torch.isnan(out).any())
        return self._output_nan

    def mode_text(self) -> str:
        parts = []
        if "training" in self.mode:
            parts.append("training mode" if self.mode["training"] else "eval mode")
        parts.append("grad enabled" if self.mode.get("grad", True) else "grad disabled")
        if "need_weights" in self.mode:
            parts.append(f"need_weights={self.mode['need_weights']}")
        return ", ".join(parts)


def plain(value) -> bool:
    """A tensor the checks may read: a real, non-nested tensor with data (no subclass, fake or meta tensor)."""
    return (type(value) is torch.Tensor or type(value) is torch.nn.Parameter) and not value.is_nested \
        and value.device.type != "meta"


def _first_layer(module):
    layers = getattr(module, "layers", None)
    try:
        return layers[0] if layers is not None and len(layers) else None
    except (TypeError, IndexError, KeyError):
        return None


def _attn_settings(attention) -> tuple[bool, int | None]:
    """(batch_first, num_heads) of a MultiheadAttention-like module, with safe defaults."""
    return bool(getattr(attention, "batch_first", False)), getattr(attention, "num_heads", None)


def _geometry(x, batch_first: bool) -> tuple[int, int | None, bool, int | None]:
    """(N, L, batched, batch_dim) of a (N, L, E) / (L, N, E) / (L, E) input."""
    if not plain(x) or x.dim() not in (2, 3):
        return 1, None, False, None
    if x.dim() == 2:
        return 1, x.shape[0], False, None
    return (x.shape[0], x.shape[1], True, 0) if batch_first else (x.shape[1], x.shape[0], True, 1)


def _grad() -> bool:
    return torch.is_grad_enabled()


def describe_mha(site: Site, b: dict) -> CallInfo:
    module = b["self"]
    batch_first, heads = _attn_settings(module)
    n, length, batched, batch_dim = _geometry(b["query"], batch_first)
    block = Block(b["attn_mask"], "attn_mask", b["key_padding_mask"], "key_padding_mask", n, length, heads, batched,
                  b["is_causal"] is True, "is_causal")
    return CallInfo("nn.MultiheadAttention", "mha", site, [block],
                    {"training": module.training, "grad": _grad(), "need_weights": bool(b["need_weights"]),
                     "batch_first": batch_first, "num_heads": heads},
                    [("query", b["query"]), ("key", b["key"]), ("value", b["value"])], 0, batch_dim,
                    module=module)


def describe_mha_fn(site: Site, b: dict) -> CallInfo:
    n, length, batched, batch_dim = _geometry(b["query"], False)  # always (L, N, E)
    block = Block(b["attn_mask"], "attn_mask", b["key_padding_mask"], "key_padding_mask", n, length,
                  b["num_heads"], batched, b["is_causal"] is True, "is_causal")
    return CallInfo("F.multi_head_attention_forward", "mha_fn", site, [block],
                    {"training": bool(b["training"]), "grad": _grad(), "need_weights": bool(b["need_weights"]),
                     "dropout_p": b["dropout_p"]},
                    [("query", b["query"]), ("key", b["key"]), ("value", b["value"])], 0, batch_dim)


def describe_sdpa(site: Site, b: dict) -> CallInfo:
    query = b["query"]
    batch_dim = 0 if plain(query) and query.dim() >= 3 else None
    return CallInfo("F.scaled_dot_product_attention", "sdpa", site, [],
                    {"grad": _grad(), "dropout_p": b["dropout_p"]},
                    [("query", query), ("key", b["key"]), ("value", b["value"])], None, batch_dim,
                    sdpa={"query": query, "key": b["key"], "attn_mask": b["attn_mask"],
                          "is_causal": b["is_causal"] is True})


def describe_flex(site: Site, b: dict) -> CallInfo:
    """torch.nn.attention.flex_attention.flex_attention(query, key, value, score_mod, block_mask, scale, enable_gqa,
    return_lse, kernel_options, *, return_aux): (B, H, L, E) inputs; the output is the result, or its first item
    when lse or aux outputs are asked for."""
    query = b["query"]
    batch_dim = 0 if plain(query) and query.dim() == 4 else None
    return CallInfo("flex_attention", "flex", site, [], {"grad": _grad()},
                    [("query", query), ("key", b["key"]), ("value", b["value"])], 0, batch_dim,
                    flex={"query": query, "key": b["key"], "value": b["value"], "block_mask": b["block_mask"],
                          "score_mod": b["score_mod"], "scale": b["scale"], "enable_gqa": b["enable_gqa"] is True})


def describe_encoder_layer(site: Site, b: dict) -> CallInfo:
    module = b["self"]
    batch_first, heads = _attn_settings(getattr(module, "self_attn", None))
    n, length, batched, batch_dim = _geometry(b["src"], batch_first)
    block = Block(b["src_mask"], "src_mask", b["src_key_padding_mask"], "src_key_padding_mask", n, length, heads,
                  batched, b["is_causal"] is True, "is_causal")
    return CallInfo("nn.TransformerEncoderLayer", "encoder_layer", site, [block],
                    {"training": module.training, "grad": _grad()}, [("src", b["src"])], None, batch_dim,
                    module=module)


def describe_encoder(site: Site, b: dict) -> CallInfo:
    module = b["self"]
    batch_first, heads = _attn_settings(getattr(_first_layer(module), "self_attn", None))
    n, length, batched, batch_dim = _geometry(b["src"], batch_first)
    block = Block(b["mask"], "mask", b["src_key_padding_mask"], "src_key_padding_mask", n, length, heads, batched,
                  b["is_causal"] is True, "is_causal")
    return CallInfo("nn.TransformerEncoder", "encoder", site, [block],
                    {"training": module.training, "grad": _grad()}, [("src", b["src"])], None, batch_dim,
                    module=module)


def _decoder_blocks(b: dict, self_attn, cross_attn, batch_first: bool) -> tuple[list[Block], int | None]:
    n, length, batched, batch_dim = _geometry(b["tgt"], batch_first)
    _, self_heads = _attn_settings(self_attn)
    _, cross_heads = _attn_settings(cross_attn)
    return [Block(b["tgt_mask"], "tgt_mask", b["tgt_key_padding_mask"], "tgt_key_padding_mask", n, length,
                  self_heads, batched, b["tgt_is_causal"] is True, "tgt_is_causal", "self-attention"),
            Block(b["memory_mask"], "memory_mask", b["memory_key_padding_mask"], "memory_key_padding_mask", n,
                  length, cross_heads, batched, b["memory_is_causal"] is True, "memory_is_causal",
                  "cross-attention")], batch_dim


def describe_decoder_layer(site: Site, b: dict) -> CallInfo:
    module = b["self"]
    self_attn = getattr(module, "self_attn", None)
    blocks, batch_dim = _decoder_blocks(b, self_attn, getattr(module, "multihead_attn", None),
                                        _attn_settings(self_attn)[0])
    return CallInfo("nn.TransformerDecoderLayer", "decoder_layer", site, blocks,
                    {"training": module.training, "grad": _grad()},
                    [("tgt", b["tgt"]), ("memory", b["memory"])], None, batch_dim, module=module)


def describe_decoder(site: Site, b: dict) -> CallInfo:
    module = b["self"]
    layer = _first_layer(module)
    self_attn = getattr(layer, "self_attn", None)
    blocks, batch_dim = _decoder_blocks(b, self_attn, getattr(layer, "multihead_attn", None),
                                        _attn_settings(self_attn)[0])
    return CallInfo("nn.TransformerDecoder", "decoder", site, blocks, {"training": module.training, "grad": _grad()},
                    [("tgt", b["tgt"]), ("memory", b["memory"])], None, batch_dim, module=module)


def describe_transformer(site: Site, b: dict) -> CallInfo:
    module = b["self"]
    batch_first = bool(getattr(module, "batch_first", False))
    heads = getattr(module, "nhead", None)
    n, src_length, batched, _ = _geometry(b["src"], batch_first)
    blocks, batch_dim = _decoder_blocks(b, None, None, batch_first)
    for block in blocks:
        block.heads = heads
    blocks.insert(0, Block(b["src_mask"], "src_mask", b["src_key_padding_mask"], "src_key_padding_mask", n,
                           src_length, heads, batched, b["src_is_causal"] is True, "src_is_causal", "encoder"))
    blocks[1].label, blocks[2].label = "decoder self-attention", "decoder cross-attention"
    return CallInfo("nn.Transformer", "transformer", site, blocks, {"training": module.training, "grad": _grad()},
                    [("src", b["src"]), ("tgt", b["tgt"])], None, batch_dim, module=module)
