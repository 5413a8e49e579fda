"""MHA006 mask-repeat-layout: a per-sample mask tiled head-major with `.repeat(num_heads, 1, 1)` for MHA."""

from __future__ import annotations

from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis.calls import PROJECT_PREFIX, UNKNOWN_CALLABLE, bind, call_target, instance, wrapping_chain
from mhalint.analysis.forward import Arrival, Follower
from mhalint.analysis.mask_axes import LIKELY, NEUTRAL, PER_SAMPLE, SHARED, MaskAxesReader
from mhalint.analysis.names import is_head_count
from mhalint.analysis.tensors import size_arguments
from mhalint.analysis.values import constructor_values, resolve
from mhalint.context import Scope
from mhalint.finding import NOT_CONFIRMED, UNSAFE, Severity, shorten
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

_WHY = """
    MultiheadAttention (and the Transformer classes, which hand their masks to it) reads a 3-D mask of shape
    (N*num_heads, L, S) batch-major: row n*num_heads + head belongs to sample n (torch 2.13 nn/functional.py:7068,
    merged at 7005-7013). `.repeat(h, 1, 1)` lays the copies out head-major (row head*N + n), so most heads of each
    sample silently use another sample's mask; nothing raises, because the shape is right. In a torch 2.13
    experiment, a per-sample mask tiled with `.repeat` gave an output 1.517e-01 off the per-sample result, and
    with `.repeat_interleave` 0.0 (docs/torch-facts.md#mask-repeat-layout)."""
PER_SAMPLE_TILED = Message(
    "`{tiling}` tiles a per-sample mask head-major, but {api} reads {parameter} (line {line}) batch-major",
    help="tile it batch-major: `{replacement}`",
    explanation=_WHY)
MAYBE_PER_SAMPLE_TILED = Message(
    "`{tiling}` tiles a mask that may differ per sample head-major, but {api} reads {parameter} (line {line}) "
    "batch-major",
    help="if the mask differs between samples, tile it batch-major: `{replacement}`",
    explanation=_WHY + """

    A mask that is the same for every sample (a 2-D (L, S) causal mask, tiled) is not affected; whether this one
    differs between samples could not be told from the code, so the finding is a warning.""")
# A MultiheadAttention class from another module (often a copy of torch's): its mask is taken to follow torch's.
FOREIGN_PER_SAMPLE_TILED = Message(
    "`{tiling}` tiles a per-sample mask head-major; {api} is assumed to read {parameter} (line {line}) batch-major "
    "like torch",
    help="if {api} keeps torch's layout, tile it batch-major: `{replacement}`",
    explanation=_WHY + """

    {api} is not torch's class; it is taken to keep torch's (N*num_heads, L, S) layout, so the finding is a
    warning.""")
FOREIGN_MAYBE_PER_SAMPLE_TILED = Message(
    "`{tiling}` tiles a mask that may differ per sample head-major; {api} is assumed to read {parameter} "
    "(line {line}) batch-major like torch",
    help="if the mask differs between samples and {api} keeps torch's layout, tile it batch-major: `{replacement}`",
    explanation=_WHY + """

    {api} is not torch's class; it is taken to keep torch's (N*num_heads, L, S) layout. Whether the mask differs
    between samples could not be told from the code either, so the finding is a warning.""")

# The arguments that take a 3-D (N*num_heads, L, S) mask, per entry point (docs/torch-facts.md#mha-reference and
# docs/torch-facts.md#positional-order).
_MASK_PARAMETERS = {
    torchapi.MHA: ("attn_mask",),
    torchapi.MHA_FORWARD_FN: ("attn_mask",),
    torchapi.TRANSFORMER: ("src_mask", "tgt_mask", "memory_mask"),
    torchapi.ENCODER: ("mask",),
    torchapi.ENCODER_LAYER: ("src_mask",),
    torchapi.DECODER: ("tgt_mask", "memory_mask"),
    torchapi.DECODER_LAYER: ("tgt_mask", "memory_mask"),
}
_HEADS_PARAMETER = {torchapi.MHA: "num_heads", torchapi.TRANSFORMER: "nhead", torchapi.ENCODER_LAYER: "nhead",
                    torchapi.DECODER_LAYER: "nhead"}


@dataclass(frozen=True)
class _Tiling:
    """A mask tiled head-major: `base.repeat(h, 1, 1)`, or `base.unsqueeze(0).expand(h, ...).reshape(...)`."""

    node: cst.Call  # what the finding points at and the fix replaces
    heads: cst.BaseExpression
    base: cst.BaseExpression  # the (N, L, S) mask before tiling
    form: str  # "repeat" or "expand"


@dataclass(frozen=True)
class _Destination:
    call: cst.Call
    scope: Scope
    api: str
    parameter: str
    heads: int | None  # the module's head count, when it resolves
    route: tuple[str, ...]
    foreign: bool = False  # not torch's class: a MultiheadAttention from another module


class MaskRepeatLayout(Rule):
    """
    ## What it does
    Flags a per-sample mask of shape `(N, L, S)` tiled for `nn.MultiheadAttention`'s 3-D `attn_mask` with
    `.repeat(num_heads, 1, 1)` (or `.unsqueeze(0).expand(num_heads, ...).reshape(-1, L, S)`), when the tiled mask
    reaches a MultiheadAttention or Transformer mask argument (`attn_mask`, `src_mask`, `tgt_mask`,
    `memory_mask`, `mask`). The mask is followed through names, `self.` attributes, method parameters, and into
    the project's own modules (`self.decoder(..., attn_mask=m)` then `layer(..., attn_mask)`); the repeat count
    must be the head count (by name, or equal to the module's `num_heads`).

    ## Why is this bad?
    MultiheadAttention reads a 3-D mask of shape `(N*num_heads, L, S)` batch-major: row `n*num_heads + head`
    belongs to sample `n` (torch 2.13 `nn/functional.py:7068`, merged at 7005-7013). `.repeat(h, 1, 1)` lays the
    copies out head-major (row `head*N + n`), so most heads of sample `n` get the mask of another sample.
    Nothing raises: the shape is right. In a torch 2.13 experiment (docs/torch-facts.md#mask-repeat-layout) the
    output was 1.517e-01 off the per-sample result with `.repeat`, 0.0 with `.repeat_interleave`. A mask that is
    the same for every sample (a 2-D `(L, S)` causal mask) is not affected and is not flagged.

    The finding is an error when the code establishes that the mask's first axis is the batch: a size bound by a
    shape unpacking (`B, T, C = x.shape`), a documented shape (an annotation, a docstring, a comment naming the
    tensor), or the same tensor given to torch as a `key_padding_mask`, which torch checks is `(N, S)`. When only
    a name (`pad`, `lengths`, `bs`) or an idiom (`x.size(0)`, a batched `matmul`) says so, or nothing does, it is
    a warning.

    ## Known problems
    Only `.repeat(h, 1, 1)` and `unsqueeze(0).expand(h, ...).reshape(...)` tilings are recognised; a tiling
    written with `torch.cat([m] * h)` or einops is not. A MultiheadAttention copied into another module is
    assumed to read torch's layout, so that finding is a warning.

    ## Example
    ```python
    qmask, kmask = pad[:, :Lq].unsqueeze(2), pad[:, Lq:].unsqueeze(1)
    pair = torch.matmul(qmask.float(), kmask.float()).bool()        # (N, Lq, Lk), one mask per sample
    out = self.attn(q, k, v, attn_mask=pair.repeat(self.nhead, 1, 1), key_padding_mask=pad[:, Lq:])[0]
    ```

    ## Use instead
    ```python
    out = self.attn(q, k, v, attn_mask=pair.repeat_interleave(self.nhead, dim=0), key_padding_mask=pad[:, Lq:])[0]
    ```

    ## Fix safety
    Unsafe: the tiling is replaced by `.repeat_interleave(num_heads, dim=0)` on the same mask (for the
    `unsqueeze(0).expand(...).reshape(...)` form, the whole chain is). It changes which mask each head uses, as it
    should, so outputs change and `--fix` applies it only with `--unsafe-fixes`.

    ## References
    - torch 2.13 `nn/functional.py:7005-7013` and `7068` (the 3-D mask is viewed as `(N, num_heads, L, S)`);
      `nn/modules/activation.py:1293-1296`
    - docs/torch-facts.md#mask-repeat-layout; line/lighthouse#77 (the same fix upstream)
    """

    code = "MHA006"
    name = "mask-repeat-layout"
    summary = "A per-sample mask tiled with .repeat(num_heads, 1, 1): heads get another sample's mask"
    triggers = (torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER, torchapi.MHA_FORWARD_FN_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch
            from torch import nn
            class A(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.nhead = 4
                    self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
                def forward(self, x, pad):
                    m = pad.unsqueeze(1).expand(-1, x.size(1), -1)
                    return self.attn(x, x, x, attn_mask=m.repeat_interleave(self.nhead, 0))[0]
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 4)
            def f(x, L, num_heads=4):
                causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
                return attn(x, x, x, attn_mask=causal.repeat(num_heads, 1, 1))[0]
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 4)
            def f(x, scores, num_heads=4):
                m = scores.sigmoid().flatten(2).unsqueeze(1).repeat(1, num_heads, 1, 1).flatten(0, 1) < 0.5
                return attn(x, x, x, attn_mask=m)[0]
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            def f(x, pad, num_heads=4):
                m = pad.unsqueeze(1).repeat(num_heads, 1, 1)
                return m.sum()
            """,
        ),
        Valid(
            """
            import torch
            class MultiheadAttention:
                def __call__(self, q, k, v, attn_mask=None): ...
            attn = MultiheadAttention()
            def f(x, pad, num_heads=4):
                return attn(x, x, x, attn_mask=pad.unsqueeze(1).repeat(num_heads, 1, 1))
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch
            from torch import nn
            class Layer(nn.Module):
                def __init__(self, d_model, nhead):
                    super().__init__()
                    self.nhead = nhead
                    self.cross_attn = nn.MultiheadAttention(d_model, nhead)
                def forward(self, q, k, v, pad):
                    qmask, kmask = pad[:, :q.size(0)].unsqueeze(2), pad[:, q.size(0):].unsqueeze(1)
                    attn_mask = torch.matmul(qmask.float(), kmask.float()).bool().repeat(self.nhead, 1, 1)
                    return self.cross_attn(q, k, v, attn_mask=attn_mask, key_padding_mask=pad[:, q.size(0):])[0]
            """,
            line=10,
            severity=Severity.ERROR,
            headline=(
                "`torch.matmul(qmask.float(), kmask.float()).bool().repea...` tiles a per-sample mask head-major, but "
                "nn.MultiheadAttention reads attn_mask (line 11) batch-major"
            ),
            fixed="""
            import torch
            from torch import nn
            class Layer(nn.Module):
                def __init__(self, d_model, nhead):
                    super().__init__()
                    self.nhead = nhead
                    self.cross_attn = nn.MultiheadAttention(d_model, nhead)
                def forward(self, q, k, v, pad):
                    qmask, kmask = pad[:, :q.size(0)].unsqueeze(2), pad[:, q.size(0):].unsqueeze(1)
                    attn_mask = torch.matmul(qmask.float(), kmask.float()).bool().repeat_interleave(self.nhead, dim=0)
                    return self.cross_attn(q, k, v, attn_mask=attn_mask, key_padding_mask=pad[:, q.size(0):])[0]
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, key_padding_mask: Bool[Tensor, 'batch keys'], num_heads=4):
                m = key_padding_mask[:, None, :].expand(-1, x.size(1), -1)
                m = m.unsqueeze(0).expand(num_heads, -1, -1, -1).reshape(-1, x.size(1), x.size(1))
                return attn(x, x, x, attn_mask=m)[0]
            """,
            line=6,
            severity=Severity.ERROR,
            headline=(
                "`m.unsqueeze(0).expand(num_heads, -1, -1, -1).reshape(-1,...` tiles a per-sample mask head-major, but "
                "nn.MultiheadAttention reads attn_mask (line 7) batch-major"
            ),
            fixed="""
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, key_padding_mask: Bool[Tensor, 'batch keys'], num_heads=4):
                m = key_padding_mask[:, None, :].expand(-1, x.size(1), -1)
                m = m.repeat_interleave(num_heads, dim=0)
                return attn(x, x, x, attn_mask=m)[0]
            """,
        ),
        Invalid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, mask, num_heads=4):
                return attn(x, x, x, None, False, mask.repeat(num_heads, 1, 1))
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "`mask.repeat(num_heads, 1, 1)` tiles a mask that may differ per sample head-major, but "
                "nn.MultiheadAttention reads attn_mask (line 4) batch-major"
            ),
            fixed="""
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, mask, num_heads=4):
                return attn(x, x, x, None, False, mask.repeat_interleave(num_heads, dim=0))
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            HEADS = 4
            layer = nn.TransformerEncoderLayer(16, HEADS)
            def f(x, L):
                bs = x.size(1)
                m = torch.zeros(bs, L, L, dtype=torch.bool)
                return layer(x, m.repeat(4, 1, 1))
            """,
            line=8,
            severity=Severity.ERROR,
            headline=(
                "`m.repeat(4, 1, 1)` tiles a per-sample mask head-major, but nn.TransformerEncoderLayer reads src_mask "
                "(line 8) batch-major"
            ),
            fixed="""
            import torch
            from torch import nn
            HEADS = 4
            layer = nn.TransformerEncoderLayer(16, HEADS)
            def f(x, L):
                bs = x.size(1)
                m = torch.zeros(bs, L, L, dtype=torch.bool)
                return layer(x, m.repeat_interleave(4, dim=0))
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            HEADS = 4
            layer = nn.TransformerEncoderLayer(16, HEADS)
            def f(x, bs, L):
                m = torch.zeros(bs, L, L, dtype=torch.bool)
                return layer(x, m.repeat(4, 1, 1))
            """,
            line=7,
            severity=Severity.WARNING,
            headline=(
                "`m.repeat(4, 1, 1)` tiles a mask that may differ per sample head-major, but "
                "nn.TransformerEncoderLayer reads src_mask (line 7) batch-major"
            ),
            fixed="""
            import torch
            from torch import nn
            HEADS = 4
            layer = nn.TransformerEncoderLayer(16, HEADS)
            def f(x, bs, L):
                m = torch.zeros(bs, L, L, dtype=torch.bool)
                return layer(x, m.repeat_interleave(4, dim=0))
            """,
        ),
    )
    example_inputs = (  # N == L, so that x fits the batch-first and the sequence-first examples alike
        "import torch\nN = L = bs = 4\nd_model, nhead = 16, 4\nx = q = k = v = torch.randn(4, 4, 16)\n"
        "pad = torch.zeros(4, 8, dtype=torch.bool)\npad[1, 6:] = True\nkey_padding_mask = pad[:, 4:]\n"
        "mask = torch.zeros(4, 4, 4, dtype=torch.bool)\nmask[1, :, 2:] = True\n"  # it differs per sample
        "class Bool:  # jaxtyping's annotation, as one example writes it\n"
        "    def __class_getitem__(cls, item):\n        return cls\nTensor = torch.Tensor\n")
    runtime_valid = (
        Valid(
            """
            import torch
            mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
            x = torch.randn(2, 3, 8)
            pad = torch.tensor([[False, False, True], [False, True, True]])
            mha(x, x, x, attn_mask=pad[:, None, :].expand(2, 3, 3).repeat_interleave(2, dim=0))
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
            x = torch.randn(2, 3, 8)
            pad = torch.tensor([[False, False, True], [False, True, True]])
            mha(x, x, x, attn_mask=pad[:, None, :].expand(2, 3, 3).repeat(2, 1, 1))
            """,
            line=5,
            message="head-major 3-D attn_mask",
        ),
    )

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.mask_axes = MaskAxesReader(context)
        self.forward = Follower(context, self._destination)

    # ---- the finding ----
    def visit_Call(self, node: cst.Call) -> None:
        tiling = self._tiling(node)
        if tiling is None:
            return
        scope = self.scope
        destinations = self.forward.follow(tiling.node, scope)
        heads_text = self.context.code(tiling.heads)
        head_value = resolve(self.context, tiling.heads, scope)
        heads = head_value.value if head_value is not None and isinstance(head_value.value, int) \
            and not isinstance(head_value.value, bool) else None
        named = self._head_named(tiling.heads, scope)
        chosen, why_heads = None, ""
        for destination in destinations:
            if heads is not None and destination.heads is not None and heads != destination.heads:
                continue  # a count that is not this module's head count
            if heads == 1 or (heads is None and destination.heads == 1 and named):
                continue  # one head: both layouts are the same
            if named:
                why_heads = f"`{heads_text}` is the head count (by its name)"
            elif heads is not None and heads == destination.heads:
                why_heads = f"`{heads_text}` = {heads}, the module's num_heads"
            else:
                continue
            chosen = destination
            break
        if chosen is None:
            return
        content = self.mask_axes.read(tiling.base, scope, tiling.node)
        if content.samples in (SHARED, NEUTRAL):
            return
        self._report(tiling, chosen, content.samples, list(content.evidence), why_heads, heads if heads is not None
                     else chosen.heads)

    def _report(self, tiling: _Tiling, destination: _Destination, verdict: str, content: list[str],
                why_heads: str, heads: int | None) -> None:
        ctx = self.context
        base, heads_text = ctx.code(tiling.base), ctx.code(tiling.heads)
        api = torchapi.short_name(destination.api)
        line = ctx.line(destination.call)
        evidence = [why_heads, *destination.route, f"it reaches {api} {destination.parameter} at line {line}"]
        if verdict == PER_SAMPLE:
            severity = Severity.WARNING if destination.foreign else Severity.ERROR
            evidence += content
        elif verdict == LIKELY:
            severity = Severity.WARNING
            evidence += content
        else:
            severity = Severity.WARNING
            evidence.append(f"whether `{shorten(base)}` differs between samples could not be told from the code; "
                            "a mask that is the same for every sample is not affected")
        details = dict(
            severity=severity, evidence=[e for e in evidence if e],
            arguments={"api": destination.api, "parameter": destination.parameter, "form": tiling.form,
                       "num_heads": heads, "per_sample": verdict == PER_SAMPLE},
            fix=self.replacement(tiling.node, self._fixed(tiling), applicability=UNSAFE,
                                 title="tile the mask with repeat_interleave(num_heads, dim=0)"),
            tiling=" ".join(ctx.code(tiling.node).split()), parameter=destination.parameter, line=line, api=api,
            replacement=shorten(f"{base}.repeat_interleave({heads_text}, dim=0)"))
        if destination.foreign:
            self.report(tiling.node, FOREIGN_PER_SAMPLE_TILED if verdict == PER_SAMPLE
                        else FOREIGN_MAYBE_PER_SAMPLE_TILED, **details)
        else:
            self.report(tiling.node, PER_SAMPLE_TILED if verdict == PER_SAMPLE else MAYBE_PER_SAMPLE_TILED,
                        **details)

    def _fixed(self, tiling: _Tiling) -> cst.Call:
        """`base.repeat_interleave(heads, dim=0)`, keeping the user's spelling of both (and the spacing inside
        `.repeat(...)` when the sizes were separate arguments)."""
        node = tiling.node
        dim = cst.Arg(cst.Integer("0"), keyword=cst.Name("dim"),
                      equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                            whitespace_after=cst.SimpleWhitespace("")))
        if tiling.form == "repeat" and len(node.args) == 3 and node.args[0].comma is not cst.MaybeSentinel.DEFAULT:
            dim = dim.with_changes(whitespace_after_arg=node.args[-1].whitespace_after_arg)
            return node.with_changes(func=node.func.with_changes(attr=cst.Name("repeat_interleave")),
                                     args=[node.args[0], dim])
        return cst.Call(
            func=cst.Attribute(value=tiling.base, attr=cst.Name("repeat_interleave")),
            args=[cst.Arg(tiling.heads, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))),
                  cst.Arg(cst.Integer("0"), keyword=cst.Name("dim"),
                          equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                whitespace_after=cst.SimpleWhitespace("")))])

    # ---- the tiling ----
    def _tiling(self, node: cst.Call) -> _Tiling | None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return None
        method = func.attr.value
        if method in ("repeat", "tile"):
            factors = size_arguments(node)
            if factors is None or len(factors) != 3 or not all(self._is_one(f) for f in factors[1:]):
                return None
            return _Tiling(node, factors[0], func.value, "repeat")
        if method in ("reshape", "view", "flatten"):
            inner = func.value
            if not (isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute)
                    and inner.func.attr.value in ("expand", "repeat", "tile")):
                return None
            if _leading_unsqueeze(inner.func.value) is None:
                return None
            if method == "flatten" and not self._flattens_first_two(node):
                return None
            if inner.func.attr.value == "expand":
                # `.expand(h, -1, -1, -1)` or `.expand(h, *m.shape)`: only the leading size matters
                first = inner.args[0] if inner.args else None
                if first is None or first.star or first.keyword is not None:
                    return None
                factors = [first.value]
                if not any(a.star for a in inner.args) and len(size_arguments(inner) or ()) != 4:
                    return None
            else:
                factors = size_arguments(inner)
                if not factors or len(factors) != 4 or not all(self._is_one(f) for f in factors[1:]):
                    return None
            base = _leading_unsqueeze(inner.func.value)
            if base is None:
                return None
            return _Tiling(node, factors[0], base, "expand")
        return None

    def _is_one(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Integer):
            return expr.value == "1"
        if isinstance(expr, (cst.Float, cst.SimpleString, cst.Call, cst.Subscript, cst.Tuple, cst.List)):
            return False
        value = resolve(self.context, expr, self.scope)
        return value is not None and value.value == 1 and not isinstance(value.value, bool)

    def _flattens_first_two(self, node: cst.Call) -> bool:
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: a.value for a in node.args if a.keyword is not None}
        start = positional[0] if positional else keywords.get("start_dim")
        end = positional[1] if len(positional) > 1 else keywords.get("end_dim")
        values = [resolve(self.context, e, self.scope) if e is not None else None for e in (start, end)]
        return all(v is not None for v in values) and (values[0].value, values[1].value) == (0, 1)

    def _head_named(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """Is the repeat count spelled like a head count: `self.nhead`, `num_heads`, or a local bound to one?"""
        if depth > 4:
            return False
        if isinstance(expr, cst.Attribute):
            return is_head_count(expr.attr.value)
        if isinstance(expr, cst.Name):
            bindings = self.context.bindings(expr.value, scope)
            assigned = [b for b in bindings if b.kind == "assign" and b.value is not None]
            if len(bindings) == 1 and assigned:
                return self._head_named(assigned[0].value, assigned[0].scope, depth + 1)
            return is_head_count(expr.value)
        return False

    # ---- where the tiled mask goes ----
    def _destination(self, arrival: Arrival) -> list[_Destination] | None:
        """At a torch attention call, the mask argument the tiled mask is given as (or none); at a
        MultiheadAttention from another module, its attn_mask; else None: follow into the project's code."""
        call, arg, scope, route = arrival.call, arrival.arg, arrival.scope, arrival.route
        target = call_target(self.context, call, scope)
        if target is not None:
            parameter = next((p for p, a in target.arguments.by_name.items() if a is arg), None)
            if parameter not in _MASK_PARAMETERS.get(target.api, ()):
                return []
            return [_Destination(call, scope, target.api, parameter, self._module_heads(call, scope, target),
                                 route)]
        foreign = self._foreign_attention(call, arg, scope, route)
        return [foreign] if foreign is not None else None

    def _foreign_attention(self, call: cst.Call, arg: cst.Arg, scope: Scope, route) -> _Destination | None:
        """A `MultiheadAttention` class imported from another module (often a copy of torch's, e.g. DETR's):
        its `attn_mask` is taken to follow torch's (N*num_heads, L, S) layout."""
        ctx = self.context
        built = instance(ctx, call.func, scope)
        if built is None or built.api in torchapi.CONSTRUCTORS or built.api.startswith(PROJECT_PREFIX):
            return None
        spelled = ctx.code(built.call.func)
        if not (built.api.rsplit(".", 1)[-1] == "MultiheadAttention" or spelled.rsplit(".", 1)[-1]
                == "MultiheadAttention"):
            return None
        parameter = next((p for p, a in bind(call, torchapi.CALLS[torchapi.MHA]).by_name.items() if a is arg), None)
        if parameter != "attn_mask":
            return None
        name = spelled if built.api == UNKNOWN_CALLABLE else built.api
        heads = resolve(ctx, bind(built.call, torchapi.CONSTRUCTORS[torchapi.MHA]).get("num_heads"), built.scope)
        step = route + (f"`{shorten(ctx.code(call.func))}` is `{name}` (built at line {ctx.line(built.call)}), a "
                        f"MultiheadAttention from another module, taken to keep torch's (N*num_heads, L, S) layout",)
        return _Destination(call, scope, name, parameter,
                            heads.value if heads is not None and isinstance(heads.value, int) else None, step,
                            foreign=True)

    def _module_heads(self, call: cst.Call, scope: Scope, target) -> int | None:
        ctx = self.context
        if target.api == torchapi.MHA_FORWARD_FN:
            value = resolve(ctx, target.arguments.get("num_heads"), scope)
            return value.value if value is not None and isinstance(value.value, int) else None
        for built in wrapping_chain(ctx, call.func, scope):
            parameter = _HEADS_PARAMETER.get(built.api)
            if parameter is None:
                continue
            values = constructor_values(ctx, built)
            value = values.get(parameter, torchapi.CONSTRUCTOR_DEFAULTS.get(built.api, {}).get(parameter))
            return value if isinstance(value, int) and not isinstance(value, bool) else None
        return None

    # ---- the runtime experiment ----
    @staticmethod
    def guard(call) -> list:
        """MHA006: a 3-D (N*h, L, S) attn_mask constant over h when viewed (h, N, L, S), whose samples differ."""
        from mhalint.guard import support as s
        pending = []
        for block in call.blocks:
            mask, n, heads = block.attn_mask, block.batch, block.heads
            if not (s.plain(mask) and mask.dim() == 3 and block.batched and n > 1 and heads and heads > 1
                    and mask.shape[0] == n * heads and mask.numel()):
                continue
            rows = mask.reshape(n * heads, -1)
            # Head-major, rows 0..N-1 are head 0 of every sample: if they are all equal, the samples share one mask
            # (or the layout is batch-major with equal heads), and both readings agree.
            flag = (rows[1:n] != rows[:1]).any()
            pending.append(s.Pending(flag,
                                   lambda rows=rows, block=block, mask=mask: _repeat_message(call, block, mask, rows)))
        return pending

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """A per-sample mask (N=2, h=4, L=S=5; sample 0 pads its last key, sample 1 its last three) tiled as the
        site does and with repeat_interleave, each run through MultiheadAttention and compared with a loop that
        runs each sample alone with its own 2-D mask (docs/torch-facts.md#mask-repeat-layout). Confirmed when the
        analysis showed the site's mask is per sample; reproduced when a per-sample mask stood in for one it could
        not tell about."""
        from mhalint.probe import support

        n, heads, length, embed = 2, 4, 5, 16
        torch.manual_seed(0)
        mha = torch.nn.MultiheadAttention(embed, heads, dropout=0.0, batch_first=True).train()  # slow path
        x = torch.randn(n, length, embed)
        padding = torch.zeros(n, length, dtype=torch.bool)
        padding[0, -1:] = True
        padding[1, -3:] = True
        mask = padding[:, None, :].expand(n, length, length)  # (N, L, S): each sample masks its own padding
        if arguments.get("form") == "expand":
            written = mask.unsqueeze(0).expand(heads, -1, -1, -1).reshape(-1, length, length)
            how = "unsqueeze(0).expand(h, ...).reshape(-1, L, S)"
        elif arguments.get("form") == "repeat_interleave":  # a fixed site
            written = mask.repeat_interleave(heads, dim=0)
            how = "repeat_interleave(h, 0)"
        else:
            written = mask.repeat(heads, 1, 1)
            how = "repeat(h, 1, 1)"
        interleaved = mask.repeat_interleave(heads, dim=0)
        with torch.no_grad():
            reference = torch.cat([mha(x[i:i + 1], x[i:i + 1], x[i:i + 1], attn_mask=mask[i],
                                       need_weights=False)[0] for i in range(n)])
            as_written = mha(x, x, x, attn_mask=written, need_weights=False)[0]
            fixed = mha(x, x, x, attn_mask=interleaved, need_weights=False)[0]
        wrong = float((as_written - reference).abs().max())
        right = float((fixed - reference).abs().max())
        site = arguments.get("num_heads")
        note = f" (the site has num_heads={site})" if isinstance(site, int) and site != heads else ""
        rebuilt = support.Rebuilt()  # which keys pad is the batch's data, the experiment's choice
        if not arguments.get("per_sample") and arguments.get("form") != "repeat_interleave":
            rebuilt.assume("per-sample mask (the site's mask was not shown to differ between samples)")
        sizes = f"N={n}, h={heads}, L=S={length}, E={embed}{note}"
        if wrong > 1e-4 and right < 1e-5:
            outcome = (f"{how} differs from the per-sample result by {wrong:.3e}; repeat_interleave(h, 0) by "
                       f"{right:.1e} ({sizes})")
            return rebuilt.verdict(outcome)
        return NOT_CONFIRMED, (f"{how} is {wrong:.1e} and repeat_interleave {right:.1e} from the per-sample "
                               f"result ({sizes})")


def _leading_unsqueeze(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """`m.unsqueeze(0)`, `m[None]`, `m[None, ...]`: the mask `m` with a new leading axis, else None."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "unsqueeze":
        if len(expr.args) == 1 and isinstance(expr.args[0].value, cst.Integer) and expr.args[0].value.value == "0":
            return expr.func.value
        return None
    if isinstance(expr, cst.Subscript) and expr.slice:
        first = expr.slice[0].slice
        if isinstance(first, cst.Index) and isinstance(first.value, cst.Name) and first.value.value == "None":
            rest = expr.slice[1:]
            if all(isinstance(s.slice, cst.Slice) or (isinstance(s.slice, cst.Index)
                   and isinstance(s.slice.value, cst.Ellipsis)) for s in rest):
                return expr.value
    return None


# ---- the runtime check (mhalint.guard) ----
def _repeat_message(call, block, mask, rows) -> str | None:
    from mhalint.guard import support as s
    n, heads = block.batch, block.heads
    head_major = rows.view(heads, n, -1)
    if not bool((head_major[1:] == head_major[:1]).all()):
        return None  # not constant over the heads in the (h, N, L, S) view: a per-head mask, not .repeat(h, 1, 1)
    wrong = [(s, h, (s * heads + h) % n) for s in range(n) for h in range(heads) if (s * heads + h) % n != s]
    first = [(h, other) for s, h, other in wrong if s == 0]
    example = ""
    if first:
        others = sorted({other for _, other in first})
        example = (f"; for example sample 0's heads {s.ints(h for h, _ in first)} use the mask of "
                   f"sample{'s' if len(others) > 1 else ''} {s.ints(others) if len(others) > 1 else others[0]}")
    return s.message(
        f"{call.api} got a head-major 3-D {block.attn_name} {s.shape_of(mask)}, as .repeat({heads}, 1, 1) builds it: "
        f"{len(wrong)} of {n * heads} (sample, head) pairs get another sample's mask",
        f"tile it with mask.repeat_interleave({heads}, dim=0).",
        f"The mask's first dimension is N={n} samples x num_heads={heads}; viewed as (num_heads, N, L, S) it is the "
        f"same for every head, and the samples' masks differ. {call.api} reads it batch-major (row "
        f"n*num_heads + head belongs to sample n; torch 2.13 functional.py:7068){example}. torch 2.13 experiment: "
        "1.517e-01 off the per-sample result (docs/torch-facts.md#mask-repeat-layout).")
