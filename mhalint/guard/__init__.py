"""The runtime guard: watch real attention calls for the pitfalls that only the data at a call shows.

    import mhalint
    with mhalint.guard():            # or mhalint.guard("error") to raise instead of warning
        run_my_model()

or, for a whole test suite, the pytest plugin: `pytest --mhalint-guard` (warnings plus a summary at the end of the
run) or `pytest --mhalint-guard=error` (the offending test fails).

While a guard is active, these torch entry points are wrapped (and restored on exit, also after an exception):
`nn.MultiheadAttention.forward`, `F.scaled_dot_product_attention`, `F.multi_head_attention_forward`,
`torch.nn.attention.flex_attention.flex_attention` (where torch has it), and `forward` of
`nn.TransformerEncoderLayer`, `nn.TransformerDecoderLayer`, `nn.TransformerEncoder`, `nn.TransformerDecoder` and
`nn.Transformer`. A wrapper reads the call's masks, flags and mode, runs the original call unchanged, and reads
whether the output has NaN; it never changes an argument or a result. Only calls made from outside torch are
checked: the calls torch makes internally (a Transformer layer calling its MultiheadAttention, which calls
`F.multi_head_attention_forward`, which calls SDPA) are passed straight through, so each problem is reported
once, at the outermost torch call, and the reported site is the user's own file and line (the first frame outside
torch and mhalint).

Each check is its rule's `guard` hook (mhalint.rule.Rule), in the rule's file: the guard runs the hooks of every
rule mhalint loads, plugins included. Codes (`mhalint rule CODE` documents each; MHA101-103 are runtime-only):

- MHA002 mask-convention-flip: a bool causal mask in the other API's convention. SDPA got a mask that is True
  exactly above the diagonal (MultiheadAttention's "True = ignore" causal mask, so every query attends only to
  later keys), or MultiheadAttention / a Transformer class got one that is True on and below the diagonal (SDPA's
  "True = attend" causal mask). Padding masks are not judged: a left-padded keep-mask and an un-inverted
  right-padded ignore-mask hold the same values.
- MHA003 is-causal-without-mask: `is_causal=True` (or `src_/tgt_/memory_is_causal=True`) on MultiheadAttention,
  `F.multi_head_attention_forward` or a Transformer class without the mask it describes. The report says what
  this call did: returned normally (the inference fast path dropped the flag: the output is the unmasked one) or
  raised (training / grad / slow path), and that the other mode behaves the other way.
- MHA006 mask-repeat-layout: a 3-D `attn_mask` of shape (N*num_heads, L, S) laid out head-major, as
  `.repeat(num_heads, 1, 1)` makes it: viewed as (num_heads, N, L, S) it is constant over the heads while the
  (N, num_heads, L, S) view that torch reads is not. Needs N > 1 and samples whose masks differ; a mask shared
  by every sample reads the same in both layouts and is never reported.
- MHA008 float-keep-mask: a floating-point mask whose values are only 0 and 1 (with at least one 1). Float masks
  are added to the scores, so it masks nothing.
- MHA011 attention-dropout-in-eval: SDPA given `dropout_p > 0` (or `F.multi_head_attention_forward` left at its
  default `training=True`) while gradients are off, or called from a method of a module in eval mode.
- MHA015 flex-mod-convention: a flex_attention block mask whose mask_mod leaves query rows of real tokens with no
  key (flex_attention returns zeros there; `q_idx < kv_idx` empties the last row), or a score_mod that returns a
  bool.
- MHA101 fully-masked-rows: query rows with no key left to attend to (bool key_padding_mask row all True, bool
  MultiheadAttention mask row all True, SDPA bool row all False, float row all -inf; for MultiheadAttention and
  the Transformer classes the key_padding_mask and attn_mask are combined). The report names the samples and
  positions, whether this call's output has NaN, and which paths give NaN. For SDPA only rows that leave a whole
  sample (or a whole head of it) without keys are reported: SDPA returns zeros for such rows on CPU, and a
  partially masked query dimension is the normal shape of a mask built from padded queries and keys.
- MHA102 sdpa-padding-mask-broadcast: SDPA got a 2-D bool mask of shape (N, S) with N == L, whose rows look like
  per-sample padding (a run of True and a run of False, rows not all equal, not ordered like a causal mask).
  SDPA broadcasts a 2-D mask as (1, 1, L, S), so row i is applied to query position i of every sample.
- MHA103 nan-output: an attention output with NaN that no fully masked row explains; the report says which
  samples and whether the inputs already had NaN.

Reports are `AttentionGuardWarning`s (attributes `code`, `site`, `message`), issued at the user's call site and
de-duplicated per (code, site) for each guard (for the pytest plugin: for the whole run); every occurrence is
counted. In `error` mode an `AttentionGuardError` is raised after the call instead. When the call itself raised
(e.g. `is_causal` without a mask in training), that exception is re-raised unchanged, with the report added as
a note.

Limits: modules that did `from torch.nn.functional import scaled_dot_product_attention` (or imported
`flex_attention` by name) before the guard started keep the original function, and their calls are not seen (call
it as `F.scaled_dot_product_attention`);
calls under `torch.compile`, `torch.jit` tracing/scripting, FX tracing and tensor subclasses are passed through
unchecked; the wrappers are process-wide while any guard is active, so calls from other threads are checked too.
"""

from __future__ import annotations

import sys
import types

from .reports import AttentionGuardError, AttentionGuardWarning, Report, Site, guard_codes

__all__ = ["AttentionGuardError", "AttentionGuardWarning", "Guard", "Report", "Site", "guard", "guard_codes"]

MODES = ("warn", "error")


def guard(mode: str = "warn"):
    """A context manager (also usable as a decorator) that checks attention calls while it is active.

    `mode`: "warn" issues an AttentionGuardWarning per (code, call site); "error" raises AttentionGuardError.
    The returned object's `reports()` lists what was seen, with counts. torch is imported here, not before.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    from .core import Guard
    return Guard(mode)


def __getattr__(name: str):
    if name == "Guard":
        from .core import Guard
        return Guard
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """`mhalint.guard` is this package, and `mhalint.guard()` calls `guard()`: both spellings work."""

    def __call__(self, mode: str = "warn"):
        return guard(mode)


sys.modules[__name__].__class__ = _CallableModule
