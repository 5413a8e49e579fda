"""Why a MultiheadAttention construction can never take the fused inference kernel, when its constructor shows
it (docs/torch-facts.md#fast-path-conditions: torch 2.13 activation.py:1326-1447). Rules use it to say when a cost
or a pitfall cannot occur."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis.calls import Construction
from mhalint.analysis.values import resolve
from mhalint.context import ModuleContext


def off_reason(ctx: ModuleContext, built: Construction, *, count_heads: bool = True) -> str | None:
    """A short reason the fast path is off for every call of `built`, or None when it may be taken.
    `count_heads=False` leaves the head count out (for the rule that is about the head count)."""
    arguments = built.arguments
    batch_first = arguments.get("batch_first")
    if batch_first is None:
        return None if arguments.opaque else "batch_first is False (the default)"
    value = resolve(ctx, batch_first, built.scope)
    if value is not None and value.value is False:
        return "batch_first resolves to False"
    if built.api != torchapi.MHA:
        return None
    if count_heads:
        heads = resolve(ctx, arguments.get("num_heads"), built.scope)
        if heads is not None and isinstance(heads.value, int) and heads.value % 2 == 1:
            return f"num_heads={heads.value} is odd"
    for parameter, blocks in (("bias", False), ("add_bias_kv", True), ("add_zero_attn", True)):
        value = resolve(ctx, arguments.get(parameter), built.scope)
        if value is not None and value.value is blocks:
            return f"{parameter}={blocks}"
    embed = resolve(ctx, arguments.get("embed_dim"), built.scope)
    for parameter in ("kdim", "vdim"):
        value = resolve(ctx, arguments.get(parameter), built.scope)
        if value is not None and value.value is not None and (embed is None or value.value != embed.value):
            return f"{parameter}={value.value} differs from embed_dim"
    return None
