"""MHA014 padding-mask-as-attn-mask: an (N, S) padding mask given where an (L, S) attention mask is read."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.axes import Role, Strength
from mhalint.analysis.calls import call_target, callers, is_none, project_function, returned
from mhalint.analysis.mask_axes import MaskAxesReader
from mhalint.analysis.masks import ADDITIVE, MaskReader
from mhalint.analysis.tensors import ShapeReader
from mhalint.analysis.values import resolve
from mhalint.analysis.vocabulary import ATTENTION_MASK_NAME, IGNORE_MASK_NAME, KEEPS_AXES, PAD_TOKEN
from mhalint.context import Scope
from mhalint.finding import NOT_CONFIRMED, UNSAFE, Severity, shorten
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

_SDPA_WHY = """
    F.scaled_dot_product_attention's attn_mask must broadcast to the attention weights, (N, ..., h, L, S) (torch
    2.13 `nn/functional.py:6463-6464`), so a 2-D mask broadcasts as (1, 1, L, S): row i is applied to query
    position i of every sample, not to sample i. With N != L the call raises; with N == L nothing raises and the
    wrong queries are masked: 3.835 off the intended result at N = L = 4 and 4.144 at N = L = 10 in the torch
    2.13 experiment (docs/torch-facts.md#sdpa-padding-broadcast). The per-sample form is `mask[:, None, None, :]`,
    (N, 1, 1, S), which gave the result of running each sample alone (docs/torch-facts.md#padding-mask-shape).
"""
_MHA_WHY = """
    nn.MultiheadAttention reads a 2-D attn_mask as (L, S), one mask for every sample, and a 3-D one as
    (N*num_heads, L, S) (torch 2.13 `nn/modules/activation.py:1293-1296`); an (N, S) padding mask belongs in
    key_padding_mask. Given as attn_mask it raises `The shape of the 2D attn_mask is torch.Size([N, S]), but should
    be (L, S).` when N != L (`nn/functional.py:6905-6910`), and when N == L nothing raises: row i, the padding of
    sample i, hides those keys from query position i of every sample. In the torch 2.13 experiment the output was
    1.05 off the key_padding_mask= result at N = L = 6 (0.40 to 1.36 over 21 draws), on the slow and the fast path
    alike (docs/torch-facts.md#padding-mask-shape).
"""
_NAMED = """

    Here only {basis} says that the mask is (N, S); its construction was not found, so it may already be an
    (L, S) mask after all, and the finding is a warning.
"""
# Fields: `mask` (the attn_mask argument as written, quoted); `why` (the decisive evidence that it is (N, S), short);
# `fixed` (the per-sample form, or the keyword to use); `basis` (what alone says it, for the warnings).
SDPA_PADDING = Message(
    "{mask} is an (N, S) padding mask ({why}), but F.scaled_dot_product_attention reads a 2-D attn_mask as (L, S)",
    help="{fixed}",
    explanation=_SDPA_WHY)
SDPA_MAYBE_PADDING = Message(
    "{mask} looks like an (N, S) padding mask ({why}); F.scaled_dot_product_attention reads a 2-D attn_mask as "
    "(L, S)",
    help="if it is (N, S), {fixed}",
    explanation=_SDPA_WHY.rstrip() + _NAMED)
MHA_PADDING = Message(
    "{mask} is an (N, S) padding mask ({why}), given as attn_mask, which nn.MultiheadAttention reads as (L, S)",
    help="{fixed}",
    explanation=_MHA_WHY)
MHA_MAYBE_PADDING = Message(
    "{mask} looks like an (N, S) padding mask ({why}), given as attn_mask, which nn.MultiheadAttention reads as "
    "(L, S)",
    help="if it is (N, S), {fixed}",
    explanation=_MHA_WHY.rstrip() + _NAMED)

_MAX_DEPTH = 10
# Methods that change neither the axes nor which sample a row belongs to (a dtype, a device, an element-wise op).
_KEEPS = KEEPS_AXES - {"eq", "ne", "lt", "gt", "le", "ge", "logical_and", "logical_or", "masked_fill",
                       "masked_fill_", "add", "mul", "sub", "div", "add_", "mul_", "expand_as", "view_as",
                       "reshape_as", "type_as"}
_COMPARE_METHODS = {"eq", "ne", "lt", "le", "gt", "ge"}  # `x.eq(pad_id)`: a comparison, as `x == pad_id`
_SCALAR_METHODS = {"masked_fill", "masked_fill_", "add", "mul", "sub", "div", "add_", "mul_"}
# What a new trailing axis looks like on a 1-D tensor of lengths: `lengths[:, None]`, `lengths.unsqueeze(1)`.
_COLUMN_METHODS = ("unsqueeze", "view", "reshape")


@dataclass(frozen=True)
class _Reading:
    """What shows a mask is (N, S): its strength, the decisive evidence in a few words, and the chain of code."""

    strength: Strength
    why: str
    evidence: tuple[str, ...]
    basis: str = ""  # for a name-only reading: "the name `pad_mask`"

    def step(self, sentence: str) -> _Reading:
        return _Reading(self.strength, self.why, (sentence, *self.evidence), self.basis)


def _weakest(readings: list[_Reading]) -> _Reading:
    return min(readings, key=lambda r: r.strength)


class PaddingMaskAsAttnMask(Rule):
    """
    ## What it does
    Flags an `(N, S)` padding mask (one row per sample, one column per key) given as the `attn_mask` of
    `F.scaled_dot_product_attention` (any alias; positionally the 4th argument) or of `nn.MultiheadAttention`
    (by keyword, or 6th positionally), where an `(L, S)` mask (one row per query) is read. The mask counts as
    `(N, S)` when the code shows it: built from lengths (`torch.arange(S)[None, :] >= lengths[:, None]`), token
    ids of a known `(N, S)` shape compared with a pad id, a shape unpacking (`B, S = mask.shape`), a documented
    shape (an annotation, a docstring such as Hugging Face's `(batch_size, sequence_length)`), or the same tensor
    also given to torch as a `key_padding_mask`. It is followed through names, `self.` attributes, the module's
    callers and its own helper functions, and through conversions that keep its axes (`~m`, `m.float()`,
    `(1.0 - m) * -1e9`, `m == 0`). When only a name says so (`padding_mask`, `pad_mask`, `key_padding_mask`, or
    token ids compared with a pad id), the finding is a warning. A mask already broadcast per sample
    (`m[:, None, None, :]`, `m.unsqueeze(1).unsqueeze(2)`, `m.view(N, 1, 1, S)`, a 3-D `(N*num_heads, L, S)` mask
    for MultiheadAttention) and a causal or square mask (`tril`, `triu`, `generate_square_subsequent_mask`) are
    not flagged.

    ## Why is this bad?
    SDPA broadcasts a 2-D mask as `(1, 1, L, S)`: row i is applied to query position i of every sample. With
    N != L the call raises; with N == L nothing raises and the wrong queries are masked: 3.835 off the intended
    result at N = L = 4 and 4.144 at N = L = 10 in a torch 2.13 experiment
    (docs/torch-facts.md#sdpa-padding-broadcast). MultiheadAttention reads a 2-D `attn_mask` as `(L, S)` for
    every sample: an `(N, S)` mask raises `The shape of the 2D attn_mask is torch.Size([2, 6]), but should be
    (6, 6).` when N != L, and when N == L row i (sample i's padding) hides keys from query i of every sample. In a
    torch 2.13 experiment (docs/torch-facts.md#padding-mask-shape) the output was 1.05 off the
    `key_padding_mask=` result at N = L = 6 (0.40 to 1.36 over 21 draws).

    ## Known problems
    The rule cannot see the batch size: with N == 1 (a single sequence at inference) an `(N, S)` mask given to
    SDPA broadcasts correctly, and it is still flagged. A padding mask built by a helper in another module, or
    by an unrecognised construction, is not followed. Only torch's MultiheadAttention and SDPA are checked, not
    the Transformer classes' `src_mask`/`tgt_mask` nor copies of MultiheadAttention. There is no runtime check
    of its own: for SDPA the guard's MHA102 reports an `(N, S)` mask at run time, and for MultiheadAttention a
    2-D `(N, S)` mask with N == L cannot be told from a genuine `(L, S)` one by its values, while torch raises
    by itself when N != L.

    ## Example
    ```python
    keep = torch.arange(S, device=q.device)[None, :] < lengths[:, None]      # (N, S)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    pad = tokens == pad_id                                                # tokens: (N, S)
    y, _ = self.attn(x, x, x, attn_mask=pad)
    ```

    ## Use instead
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
    y, _ = self.attn(x, x, x, key_padding_mask=pad)
    ```

    ## Fix safety
    Unsafe, and only when the code establishes the mask is `(N, S)`: for SDPA the mask becomes
    `mask[:, None, None, :]` (`mask[:, None, :]` for a query known to be 3-D); for MultiheadAttention the keyword
    `attn_mask=` becomes `key_padding_mask=`, when the call gives no `key_padding_mask`, no `is_causal` and no
    `**kwargs`. Which queries see which keys changes, as it should, so outputs change and `--fix` applies it only
    with `--unsafe-fixes`. A warning (a name only) has no fix.

    ## References
    - torch 2.13 `nn/functional.py:6463-6464` (SDPA's mask must broadcast to `(N, ..., Hq, L, S)`), `6905-6910`
      (MultiheadAttention's 2-D mask must be `(L, S)`), `nn/modules/activation.py:1293-1296`
    - docs/torch-facts.md#padding-mask-shape and docs/torch-facts.md#sdpa-padding-broadcast; guard MHA102
    """

    code = "MHA014"
    name = "padding-mask-as-attn-mask"
    summary = "An (N, S) padding mask given as attn_mask, which SDPA and MultiheadAttention read as (L, S)"
    triggers = (torchapi.SDPA_TRIGGER, torchapi.MHA_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, lengths):
                keep = torch.arange(k.size(-2))[None, :] < lengths[:, None]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, lengths):
                keep = torch.arange(k.size(-2))[None, :] < lengths[:, None]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep.unsqueeze(1).unsqueeze(2))
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, tokens, pad_id=0):
                pad = tokens == pad_id
                return attn(x, x, x, key_padding_mask=pad)[0]
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, L):
                causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
                return attn(x, x, x, attn_mask=causal)[0]
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, mask):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, lengths):
                keep = torch.arange(k.size(-2))[None, :] < lengths[:, None]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)  # noqa: MHA014
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, lengths):
                keep = torch.arange(k.size(-2))[None, :] < lengths[:, None]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "`keep` is an (N, S) padding mask (built from `lengths` at line 4), but F.scaled_dot_product_attention "
                "reads a 2-D attn_mask as (L, S)"
            ),
            fixed="""
            import torch
            import torch.nn.functional as F
            def f(q, k, v, lengths):
                keep = torch.arange(k.size(-2))[None, :] < lengths[:, None]
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
                def forward(self, x, tokens, pad_id=0):
                    B, S = tokens.shape
                    pad = tokens == pad_id
                    return self.attn(x, x, x, attn_mask=pad, need_weights=False)[0]
            """,
            line=10,
            severity=Severity.ERROR,
            headline=(
                "`pad` is an (N, S) padding mask (`B, S = tokens.shape` at line 8), given as attn_mask, which "
                "nn.MultiheadAttention reads as (L, S)"
            ),
            fixed="""
            import torch
            from torch import nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
                def forward(self, x, tokens, pad_id=0):
                    B, S = tokens.shape
                    pad = tokens == pad_id
                    return self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]
            """,
        ),
        Invalid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(16, 4)
            def f(x, key_padding_mask):
                return attn(x, x, x, attn_mask=key_padding_mask)[0]
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "`key_padding_mask` looks like an (N, S) padding mask (by its name), given as attn_mask, which "
                "nn.MultiheadAttention reads as (L, S)"
            ),
        ),
    )
    example_inputs = (  # N == L == S: the shapes under which the unfixed examples run at all
        "import torch\nq = k = v = torch.randn(4, 2, 4, 8)\nx = torch.randn(4, 4, 16)\n"
        "lengths = torch.tensor([4, 1, 3, 2])\ntokens = (torch.arange(4)[None, :] < lengths[:, None]).long()\n"
        "key_padding_mask = tokens == 0\n")

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.shapes = ShapeReader(context)
        self.mask_axes = MaskAxesReader(context, self.shapes)
        self.masks = MaskReader(context)
        self._active: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is None or target.api not in (torchapi.SDPA, torchapi.MHA):
            return
        arg = target.arguments.by_name.get("attn_mask")
        if arg is None or is_none(arg.value):
            return
        scope, expr = self.scope, arg.value
        reading = self.read(expr, scope, node)
        if reading is None:
            return
        axes = self.mask_axes.read(expr, scope, node)
        if axes.pair is not None:
            return  # a causal or square construction: an (L, S) mask after all, conflicting evidence
        if target.api == torchapi.MHA and self._swapped(target, scope, node):
            return  # an attention mask 4th positionally as well: MHA010 reports the swap
        self._report(node, arg, target, reading)

    def _swapped(self, target, scope: Scope, node: cst.Call) -> bool:
        padding = target.arguments.by_name.get("key_padding_mask")
        if padding is None or padding.keyword is not None or is_none(padding.value):
            return False
        name = _name_of(padding.value)
        return self.mask_axes.read(padding.value, scope, node).pair is not None or bool(
            name and ATTENTION_MASK_NAME.search(name))

    # ---- the finding ----
    def _report(self, node: cst.Call, arg: cst.Arg, target, reading: _Reading) -> None:
        ctx = self.context
        written = ctx.code(arg.value)
        established = reading.strength is Strength.ESTABLISHED
        mask = self.masks.read(arg.value, self.scope, node)
        kind = mask.kind if mask is not None else None
        fix = None
        common = dict(severity=Severity.ERROR if established else Severity.WARNING, evidence=reading.evidence,
                      arguments={"api": target.api, "mask_kind": kind, "established": established},
                      mask=f"`{written}`", why=reading.why, basis=reading.basis or "a name")
        if target.api == torchapi.SDPA:
            rank = self._query_rank(target, node)
            suffix = "[:, None, :]" if rank == 3 else "[:, None, None, :]"
            shape = "(N, 1, S) for the 3-D query" if rank == 3 else "(N, 1, 1, S)"
            fixed = f"broadcast it per sample: `attn_mask={_atom(written, arg.value)}{suffix}`, {shape}"
            if established and rank in (None, 3, 4):
                fix = self.replacement(arg.value, _broadcast(arg.value, rank == 3), applicability=UNSAFE,
                                       title=f"broadcast the mask per sample: {shape}")
            self.report(node, SDPA_PADDING if established else SDPA_MAYBE_PADDING, fix=fix, fixed=fixed, **common)
            return
        fixed = f"pass it as `key_padding_mask={written}`"
        by_name = target.arguments.by_name
        causal = by_name.get("is_causal")
        padding = by_name.get("key_padding_mask")
        if established and arg.keyword is not None and padding is None \
                and not target.arguments.opaque and (causal is None or _is_false(causal.value)):
            fix = self.replacement(arg.keyword, cst.Name("key_padding_mask"),  # not the Arg: its code has the comma
                                   applicability=UNSAFE, title="pass the mask as key_padding_mask=")
        elif padding is not None and not is_none(padding.value):
            fixed = "merge it into the key_padding_mask the call also gives (`|` for bool masks)"
        self.report(node, MHA_PADDING if established else MHA_MAYBE_PADDING, fix=fix, fixed=fixed, **common)

    def _query_rank(self, target, node: cst.Call) -> int | None:
        """3 or 4 when the shape reader knows the query's rank; -1 for a 3-D query whose first axis is not shown
        to be the batch (no fix then); None when unknown (4-D, SDPA's usual layout, is assumed)."""
        query = target.arguments.get("query")
        traced = self.shapes.of(query, self.scope, node) if query is not None else None
        if traced is None or not traced.shape or traced.shape[-1].size == "...":
            return None
        rank = len(traced.shape)
        if rank == 3:
            first = traced.shape[0]
            return 3 if first.known and first.role is Role.BATCH else -1
        return rank

    # ---- is it (N, S)? ----
    def read(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode, depth: int = 0,
             tokens: bool = False) -> _Reading | None:
        """What shows `expr` is a 2-D (N, S) mask: a construction, a shape the shape reader establishes, or a
        name; None when nothing does, or when the evidence conflicts. `tokens`: `expr` is compared with a pad
        id, so a name saying it holds token ids counts (as a name)."""
        if depth > _MAX_DEPTH:
            return None
        found = self._construction(expr, scope, use, depth, tokens)
        shaped = self._shaped(expr, scope, use)
        if shaped is False:
            return None  # the shape reader knows another shape
        if found is None or (shaped is not None and shaped.strength > found.strength):
            found = shaped or found
        if found is None:
            found = self._named(expr, tokens)
        return found

    def _construction(self, expr, scope: Scope, use, depth: int, tokens: bool) -> _Reading | None:
        ctx = self.context
        if isinstance(expr, cst.UnaryOperation):
            return self.read(expr.expression, scope, use, depth + 1, tokens)
        if isinstance(expr, cst.Subscript):
            if all(isinstance(e.slice, cst.Slice) for e in expr.slice):
                return self.read(expr.value, scope, use, depth + 1, tokens)
            return None  # an index or a new axis changes the shape
        if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
            return self._compare(expr.left, expr.comparisons[0].comparator, expr, scope, use, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self._binary(expr, scope, use, depth)
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, use, depth, tokens)
        if isinstance(expr, cst.Name):
            return self._name(expr.value, scope, use, depth, tokens)
        bindings = ctx.attribute_bindings(expr, scope)
        if bindings is not None and len(bindings) == 1 and bindings[0].value is not None \
                and id(bindings[0]) not in self._active:
            b = bindings[0]
            self._active.add(id(b))
            try:
                found = self.read(b.value, b.scope, b.node, depth + 1, tokens)
            finally:
                self._active.discard(id(b))
            if found is not None:
                return found.step(f"`{ctx.code(expr)}` is set at line {ctx.line(b.node)}")
        return None

    def _call(self, call: cst.Call, scope: Scope, use, depth: int, tokens: bool) -> _Reading | None:
        ctx = self.context
        func = call.func
        name = ctx.qualified_name(func, scope)
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _COMPARE_METHODS and len(positional) == 1:
                return self._compare(func.value, positional[0], call, scope, use, depth)
            if method in _KEEPS:
                return self.read(func.value, scope, use, depth + 1, tokens)
            if method in _SCALAR_METHODS and positional and all(self._scalar(p, scope) for p in positional[-1:]):
                return self.read(func.value, scope, use, depth + 1, tokens)
        if name in ("torch.logical_not",) and len(positional) == 1:
            return self.read(positional[0], scope, use, depth + 1, tokens)
        if name == "torch.where" and len(positional) == 3 and all(self._scalar(p, scope) for p in positional[1:]):
            return self.read(positional[0], scope, use, depth + 1)
        function = project_function(ctx, call, scope)
        if function is not None and id(function) not in self._active:
            values = returned(function)
            if len(values) == 1:
                self._active.add(id(function))
                try:
                    found = self.read(values[0], function, values[0], depth + 1, tokens)
                finally:
                    self._active.discard(id(function))
                if found is not None:
                    return found.step(f"`{shorten(ctx.code(call))}` returns `{shorten(ctx.code(values[0]))}` "
                                      f"(line {ctx.line(values[0])})")
        return None

    def _binary(self, expr: cst.BinaryOperation, scope: Scope, use, depth: int) -> _Reading | None:
        """`(1.0 - m) * -1e9`, `m * float("-inf")`: the tensor side's axes; `a | b` of two (N, S) masks."""
        left, right = expr.left, expr.right
        if self._scalar(left, scope) and not self._scalar(right, scope):
            return self.read(right, scope, use, depth + 1)
        if self._scalar(right, scope) and not self._scalar(left, scope):
            return self.read(left, scope, use, depth + 1)
        if isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
            parts = [self.read(p, scope, use, depth + 1) for p in (left, right)]
            if all(p is not None for p in parts):
                return _weakest(parts)
        return None

    def _compare(self, left, right, node, scope: Scope, use, depth: int) -> _Reading | None:
        """`arange(S)[None, :] < lengths[:, None]` is (N, S) by construction; `tokens == pad_id` and `m == 0` have
        the axes of the tensor side."""
        ctx = self.context
        for ramp, column in ((left, right), (right, left)):
            if self._arange(ramp, scope) and not self._arange(column, scope):
                base = _column_base(self.context, column, scope)
                if base is None or self._arange(base, scope):
                    return None  # positions against positions: a causal or banded (L, S) pattern
                line = ctx.line(node)
                return _Reading(Strength.ESTABLISHED, f"built from `{shorten(ctx.code(base), 40)}` at line {line}",
                                (f"`{shorten(ctx.code(node))}` at line {line} compares key positions with one "
                                 f"length per row of `{shorten(ctx.code(base), 60)}`: an (N, S) mask",))
        for tensor, other in ((left, right), (right, left)):
            if self._scalar(other, scope) or _pad_like(ctx, other):
                if self._scalar(tensor, scope) or _pad_like(ctx, tensor):
                    continue
                return self.read(tensor, scope, use, depth + 1, tokens=_pad_like(ctx, other))
        return None

    def _name(self, name: str, scope: Scope, use, depth: int, tokens: bool) -> _Reading | None:
        ctx = self.context
        binding = dataflow.reaching_one(ctx, ctx.bindings(name, scope), use)
        if binding is None or id(binding) in self._active:
            return None
        self._active.add(id(binding))
        try:
            if binding.kind == "assign" and binding.value is not None:
                found = self.read(binding.value, binding.scope, binding.node, depth + 1, tokens)
                if found is not None:
                    return found.step(f"`{name} = {shorten(ctx.code(binding.value))}` at line "
                                      f"{ctx.line(binding.node)}")
            elif binding.kind == "param":
                return self._parameter(name, binding, depth, tokens)
        finally:
            self._active.discard(id(binding))
        return None

    def _parameter(self, name: str, binding, depth: int, tokens: bool) -> _Reading | None:
        """What the module's callers pass: all of them must pass an (N, S) mask."""
        ctx = self.context
        found = []
        for site in callers(ctx, binding.scope):
            argument = site.arguments.get(name)
            if argument is None or is_none(argument):
                if site.arguments.absent(name):
                    continue
                return None
            reading = self.read(argument, site.scope, site.call, depth + 1, tokens)
            if reading is None or reading.basis:  # a caller's name says nothing more than this one's
                return None
            found.append(reading.step(f"`{name}` receives `{shorten(ctx.code(argument))}` from the call at line "
                                      f"{ctx.line(site.call)}"))
        return _weakest(found) if found else None

    def _shaped(self, expr, scope: Scope, use) -> _Reading | None | bool:
        """The shape reader's roles: (batch, sequence) gives a reading; another known shape gives False."""
        traced = self.shapes.of(expr, scope, use)
        if traced is None or not traced.shape or any(a.size == "..." for a in traced.shape):
            return None
        shape = traced.shape
        if len(shape) != 2:
            return False if any(a.known for a in shape) else None
        first, second = shape
        if (first.known and first.role is not Role.BATCH) or (second.known and second.role is not Role.SEQUENCE):
            return False
        if not (first.known and second.known):
            return None
        strength = min(first.evidence.strength, second.evidence.strength)
        decisive = first.evidence if first.evidence.strength <= second.evidence.strength else second.evidence
        why = _decisive(decisive)
        sentences = [first.evidence.sentence()] + ([second.evidence.sentence()] if second.evidence != first.evidence
                                                   else [])
        return _Reading(strength, why, (*(shorten(s, 150) for s in sentences), *traced.sentences()))

    def _named(self, expr, tokens: bool) -> _Reading | None:
        name = _name_of(expr)
        if name is None:
            return None
        if IGNORE_MASK_NAME.search(name) and not ATTENTION_MASK_NAME.search(name):
            return _Reading(Strength.NAMED, "by its name", (f"the name `{name}` says it is a key padding mask, "
                                                            f"one row per sample; its construction was not found",),
                            basis=f"the name `{name}`")
        if tokens and _TOKEN_NAME.search(name):
            return _Reading(Strength.NAMED, f"`{shorten(name, 24)}` vs a pad id",
                            (f"`{name}` holds token ids by its name, one row per sample, and is compared with a pad "
                             f"id; its shape was not found",), basis=f"the name `{name}`")
        return None

    def _scalar(self, expr, scope: Scope) -> bool:
        """A number, a constant the file shows, or a large negative fill (`float("-inf")`, `torch.finfo(t).min`)."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, (cst.Integer, cst.Float)):
            return True
        text = self.context.code(expr).replace(" ", "")
        if "finfo(" in text or text.replace("'", '"') in ('float("-inf")', 'float("inf")', "-float(\"inf\")",
                                                              "-math.inf", "math.inf", "-torch.inf", "torch.inf"):
            return True
        value = resolve(self.context, expr, scope)
        return value is not None and isinstance(value.value, (int, float)) and not isinstance(value.value, bool) \
            or value is not None and isinstance(value.value, bool)

    def _arange(self, expr, scope: Scope, depth: int = 0) -> bool:
        """`torch.arange(S)`, with a new leading axis, expanded, moved to a device or converted."""
        while depth < 8:
            depth += 1
            if isinstance(expr, cst.Subscript):
                expr = expr.value
            elif isinstance(expr, cst.Call) and self.context.qualified_name(expr.func, scope) == "torch.arange":
                return True
            elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in (
                    "unsqueeze", "expand", "repeat", "to", "view", "reshape", "long", "int", "float", "cuda",
                    "type_as", "expand_as"):
                expr = expr.func.value
            elif isinstance(expr, cst.Name):
                binding = dataflow.reaching_one(self.context, self.context.bindings(expr.value, scope), expr)
                if binding is None or binding.kind != "assign" or binding.value is None:
                    return False
                expr, scope = binding.value, binding.scope
            else:
                return False
        return False

    # ---- the runtime experiment ----
    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """An (N, S) padding mask given as the site gives it (attn_mask of SDPA or of MultiheadAttention): with
        N == L it is compared with the per-sample form (`mask[:, None, None, :]`, `key_padding_mask=`), and with
        N != L the call is tried again (docs/torch-facts.md#padding-mask-shape,
        docs/torch-facts.md#sdpa-padding-broadcast). Confirmed when the analysis established (N, S); reproduced
        when only a name said so."""
        from mhalint.probe import support

        F = torch.nn.functional
        additive = arguments.get("mask_kind") == ADDITIVE

        def as_given(blocked):  # True = leave out
            return torch.zeros(blocked.shape).masked_fill(blocked, float("-inf")) if additive else blocked

        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            if arguments.get("api") == torchapi.SDPA:
                n, heads, length, d = 4, 8, 4, 8
                q = torch.randn(n, heads, length, d, generator=generator)
                blocked = torch.arange(length)[None, :] >= torch.tensor([4, 1, 3, 2])[:, None]
                mask = as_given(blocked) if additive else ~blocked  # SDPA's bool convention: True = attend
                written = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
                intended = F.scaled_dot_product_attention(q, q, q, attn_mask=mask[:, None, None, :])
                wide = torch.randn(n, heads, 10, d, generator=generator)
                wide_mask = torch.ones(n, 10, dtype=torch.bool)
                error = _outcome(lambda: F.scaled_dot_product_attention(wide, wide, wide, attn_mask=wide_mask))
                what, fix, other = "F.scaled_dot_product_attention", "mask[:, None, None, :]", f"N={n}, L=10"
                sizes = f"N = L = {n}, h={heads}, head size {d}"
            else:
                n, embed, heads = 6, 16, 4
                torch.manual_seed(0)
                mha = torch.nn.MultiheadAttention(embed, heads, batch_first=True).train()
                x = torch.randn(n, n, embed, generator=generator)
                lengths = torch.tensor([6, 2, 5, 1, 4, 3])
                mask = as_given(torch.arange(n)[None, :] >= lengths[:, None])
                written = mha(x, x, x, attn_mask=mask, need_weights=False)[0]
                intended = mha(x, x, x, key_padding_mask=mask, need_weights=False)[0]
                y = torch.randn(2, n, embed, generator=generator)
                error = _outcome(lambda: mha(y, y, y, attn_mask=mask[:2], need_weights=False))
                what, fix, other = "nn.MultiheadAttention", "key_padding_mask=", f"N=2, L={n}"
                sizes = f"N = L = {n}, E={embed}, h={heads}"
        difference = float((written - intended).abs().max())
        kind = "an additive (N, S) padding mask" if additive else "a bool (N, S) padding mask"
        setup = f"CPU, {sizes}, {kind}; CUDA not tested"
        rebuilt = support.Rebuilt()  # the lengths are the batch's data, the experiment's choice
        if not arguments.get("established", True):
            rebuilt.assume("(N, S) padding mask")
        if difference > 1e-4:
            found = (f"with N == L the {what} call runs silently and differs from {fix} by {difference:.2f}; "
                     f"with {other} it raised {error} ({setup})")
            return rebuilt.verdict(found)
        return NOT_CONFIRMED, (f"the call gives the {fix} result (diff {difference:.1e}); with {other}: {error} "
                               f"({setup})")


# Token ids by their name (`src_tokens`, `input_ids`, fairseq's `src`): counts only when compared with a pad id.
_TOKEN_NAME = re.compile(r"(?:^|_)(ids|tokens?|src|tgt|seq)$", re.IGNORECASE)


def _decisive(evidence) -> str:
    """The few words of a headline that say what shows an axis: an unpacking, a documented shape, a kpm use."""
    reason = evidence.reason
    if "checks that its" in reason:
        return f"also given as `{shorten(evidence.code, 40)}` at {evidence.place}"
    if any(word in reason for word in ("docstring", "annotation", "comment")):
        return f"its shape is documented at {evidence.place}"
    return f"`{shorten(evidence.code, 50)}` at {evidence.place}"


def _outcome(action) -> str:
    try:
        action()
    except (RuntimeError, AssertionError) as error:
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return "no error"


def _is_false(expr) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _pad_like(ctx, expr) -> bool:
    """A pad id by its name: `pad_id`, `self.padding_idx`, `tokenizer.pad_token_id`."""
    return isinstance(expr, (cst.Name, cst.Attribute)) and bool(PAD_TOKEN.search(ctx.code(expr)))


def _column_base(ctx, expr, scope: Scope) -> cst.BaseExpression | None:
    """`lengths` of `lengths[:, None]`, `lengths.unsqueeze(1)`, `lengths.unsqueeze(-1)`, `lengths.view(-1, 1)`:
    a 1-D tensor given a new trailing axis (through conversions); None for anything else."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in (
            "to", "long", "int", "float", "cuda", "type_as"):
        expr = expr.func.value
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 2:
        first, last = expr.slice[0].slice, expr.slice[1].slice
        if (isinstance(first, cst.Slice) or isinstance(first, cst.Index) and isinstance(first.value, cst.Ellipsis)) \
                and isinstance(last, cst.Index) and is_none(last.value):
            return expr.value
        return None
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _COLUMN_METHODS:
        values = [resolve(ctx, a.value, scope) for a in expr.args]
        numbers = [v.value if v is not None else None for v in values]
        if expr.func.attr.value == "unsqueeze" and numbers in ([1], [-1]):
            return expr.func.value
        if expr.func.attr.value in ("view", "reshape") and len(numbers) == 2 and numbers[1] == 1:
            return expr.func.value
    return None


def _atom(code: str, expr) -> str:
    """The mask's code, in parentheses where a subscript would bind tighter than its operators."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) or expr.lpar:
        return code
    return f"({code})"


def _broadcast(expr, three_d: bool) -> cst.Subscript:
    """`expr[:, None, None, :]` (or `[:, None, :]`), parenthesising an operator expression."""
    template = cst.parse_expression("_m[:, None, :]" if three_d else "_m[:, None, None, :]")
    if not isinstance(expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)) and not expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return template.with_changes(value=expr)


def _name_of(expr) -> str | None:
    """The variable an argument passes: `pad`, `self.pad_mask`, `pad[:, :S]`, `pad.to(x.device)`."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Attribute):
            return expr.attr.value
        if isinstance(expr, cst.Subscript) and all(isinstance(e.slice, cst.Slice) for e in expr.slice):
            expr = expr.value
        elif isinstance(expr, cst.UnaryOperation):
            expr = expr.expression
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _KEEPS:
            expr = expr.func.value
        else:
            return None
