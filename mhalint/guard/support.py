"""What the rules' runtime checks share: the `Pending` item a check returns, and helpers that read masks and write
report texts.

A rule's `guard(call)` hook (mhalint.rule.Rule) reads a `CallInfo` (mhalint.guard.apis) after the call and returns
`Pending` items: a flag (a 0-dim bool tensor, or a Python bool) and a function that writes the report's message
once the flag is known to be true. The guard reads the flags of one call together (one device synchronisation)
and writes the messages, which may look at the data in more detail, only for the rare flags that are set.

Checks only read masks, flags, modes and the output: nothing is written, moved to another device or kept.
A message's first line is its headline (at most HEADLINE_LIMIT characters): the problem and the decisive evidence
seen at the call. The fix follows on the next line, then the why. Every number in a message that the call itself
did not produce is from a torch 2.13.0 experiment on CPU and says so, citing its section of docs/torch-facts.md.

Importing this module imports torch: rule files import it inside their `guard` hook, never at the top.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ..finding import HEADLINE_LIMIT, shorten
from .apis import CallInfo, plain

__all__ = ["NEG_INF", "Pending", "blocked_word", "dtype_of", "ignored", "ints", "masks", "message", "nan_samples",
           "outcome", "plain", "shape_of"]

NEG_INF = float("-inf")


@dataclass
class Pending:
    flag: Any  # a 0-dim bool tensor or a bool
    message: Callable[[], str | None]  # called only when the flag is true; None: no report after all


def message(headline: str, fix: str, why: str) -> str:
    """A report's text: the headline (cut to HEADLINE_LIMIT if it must be), the fix, then the why, a line each."""
    return f"{shorten(headline, HEADLINE_LIMIT)}\nFix: {fix}\n{why}"


def ints(values, limit: int = 8) -> str:
    values = list(values)
    if len(values) <= limit:
        return "[" + ", ".join(str(v) for v in values) + "]"
    return "[" + ", ".join(str(v) for v in values[:limit]) + f", ... ({len(values)} in all)]"


def shape_of(tensor) -> str:
    return "(" + ", ".join(str(s) for s in tensor.shape) + ")"


def dtype_of(tensor) -> str:
    return str(tensor.dtype).replace("torch.", "")


def ignored(mask):
    """Where a MultiheadAttention-convention mask blocks a key: bool True, float -inf (None: not a mask we read)."""
    if not plain(mask):
        return None
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        return torch.isneginf(mask)
    return None


def blocked_word(mask, sdpa: bool = False) -> str:
    if mask.dtype == torch.bool:
        return "False" if sdpa else "True"
    return "-inf"


def masks(call: CallInfo):
    """(name, mask, block) for every mask argument of the call."""
    for block in call.blocks:
        yield block.attn_name, block.attn_mask, block
        yield block.kpm_name, block.kpm, block
    if call.sdpa is not None:
        yield "attn_mask", call.sdpa["attn_mask"], None


def nan_samples(call: CallInfo) -> list[int] | None:
    """Indices of the samples whose output has NaN (None when the output is unbatched)."""
    cached = getattr(call, "_nan_samples", False)
    if cached is not False:
        return cached
    out, dim = call.output, call.batch_dim
    result = None
    if plain(out) and dim is not None and out.dim() > dim:
        flags = torch.isnan(out).transpose(0, dim).reshape(out.shape[dim], -1).any(1)
        result = flags.nonzero().flatten().tolist()
    call._nan_samples = result
    return result


def outcome(call: CallInfo) -> str:
    if call.error is not None:
        return f"This call ({call.mode_text()}) raised {type(call.error).__name__}."
    if call.output_nan:
        samples = nan_samples(call)
        where = f" in samples {ints(samples)}" if samples else ""
        return f"This call ({call.mode_text()}) returned NaN{where}."
    return f"This call ({call.mode_text()}) returned a finite output, but the same masks give NaN on other paths."
