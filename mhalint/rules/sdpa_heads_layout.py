"""MHA013 sdpa-heads-layout: scaled_dot_product_attention given (N, L, H, E) instead of (N, H, L, E)."""

from __future__ import annotations

from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.axes import OPEN, Axis, Role, Strength
from mhalint.analysis.calls import call_target
from mhalint.analysis.names import names_head_count
from mhalint.analysis.tensors import ShapeReader, Traced, literal_int, size_arguments
from mhalint.analysis.values import resolve
from mhalint.analysis.vocabulary import KEEPS_AXES
from mhalint.context import Scope
from mhalint.finding import UNSAFE, Severity
from mhalint.parse.lazy import cst
from mhalint.parse.rewrite import merged_transposed, transposed
from mhalint.rule import Invalid, Message, Rule, Valid

_WHY = """
    F.scaled_dot_product_attention reads its inputs as (N, ..., L, E): it attends over the second-to-last axis and
    treats every axis before it as batch. A head split `view(B, T, H, D)` gives (N, L, H, E), so without the
    `.transpose(1, 2)` to (N, H, L, E) each position's heads attend to one another, and the sequence is never
    mixed. Nothing raises in self-attention, whatever L and H are, and the output has the input's shape. In a torch
    2.13 experiment (N=2, L=6, H=4, E=8) the output was 2.39 off the transposed call's, and 2.02 to 3.73 over 30
    draws; with L != S (cross-attention) the same mistake raises `The size of tensor a (6) must match the size of
    tensor b (10)` (docs/torch-facts.md#sdpa-heads-layout)."""
# Fields: `tensors` ("`q`, `k` and `v`"), `seq` (the size at axis 1, as written), `line` (where its role is shown),
# `replacement` (the call with the transposes).
SPLIT_NOT_TRANSPOSED = Message(
    "F.scaled_dot_product_attention gets {tensors} as (N, L, H, E): `{seq}` (line {line}) is axis 1 and the heads "
    "axis 2, so it attends across heads",
    help="transpose the heads before the sequence: `{replacement}`",
    explanation=_WHY)
# Fields: `merge` (the reshape, as written), `line` (the SDPA call), `replacement` (the merge with the transpose).
MERGED_WITHOUT_TRANSPOSE = Message(
    "`{merge}` merges SDPA's (N, H, L, E) output (line {line}) without `.transpose(1, 2)`: heads and positions "
    "interleave",
    help="transpose the output back to (N, L, H, E) first: `{replacement}`",
    explanation="""
        F.scaled_dot_product_attention returns (N, H, L, E) for (N, H, L, E) inputs. Reshaping that to
        (N, L, H * E) without `.transpose(1, 2)` reads it in memory order, so each new "position" holds pieces of
        several heads at several positions: nothing raises, the shape is what the next layer expects. In a torch
        2.13 experiment (N=2, L=6, H=4, E=8) the merged output was 1.98 off `out.transpose(1, 2).reshape(N, L,
        H * E)` (docs/torch-facts.md#sdpa-heads-layout).""")

_QKV = ("query", "key", "value")
_SPLIT, _HEADS_FIRST = "split", "heads-first"


@dataclass(frozen=True)
class _Reading:
    """One of q, k, v at the call: its layout (_SPLIT: (N, L, H, E); _HEADS_FIRST: (N, H, L, E)) and its shape."""

    layout: str
    traced: Traced
    sequence: Axis  # the axis that holds the sequence
    heads: str  # why the other axis is the heads, a sentence
    heads_strength: Strength

    @property
    def strength(self) -> Strength:
        return min(self.sequence.evidence.strength, self.heads_strength)


class SdpaHeadsLayout(Rule):
    """
    ## What it does
    Flags `F.scaled_dot_product_attention` (any alias: `torch._C._nn`, `torch.ops.aten`, imported names) whose
    `query`, `key` or `value` is 4-D with the sequence at axis 1 and the heads at axis 2, (N, L, H, E): the head
    split `x.view(B, T, n_head, C // n_head)` (or `reshape`, an einops pattern `'b n (h d) -> b n h d'`) reaching
    the call without the `.transpose(1, 2)` to (N, H, L, E). The axes' roles come from mhalint's shape reader:
    the sizes' provenance (`B, T, C = x.size()`), producers with a known layout, documented shapes; the heads
    axis is a size that names the head count (`self.n_head`, `num_heads`) or an einops `h`. The tensors are
    followed through names, `self.` attributes, helpers and transposes, so a correct split (`.transpose(1, 2)`,
    `.permute(0, 2, 1, 3)`, `'b n (h d) -> b h n d'`) is not flagged.

    Also flags the merge back: a correct (N, H, L, E) call whose output goes straight into
    `.view(B, T, C)` / `.reshape(B, T, C)` (the batch, then the sequence) without `.transpose(1, 2)`.

    The finding is an error when the sequence axis is established (a shape unpacking, a documented shape, a
    producer); a warning when only the sizes' names say so. Nothing is reported when the roles are unknown, when
    q, k and v disagree (one split, another transposed), for 3-D inputs, or for a single head.

    ## Why is this bad?
    SDPA reads its inputs as (N, ..., L, E): it attends over the second-to-last axis and treats every axis
    before it as batch. Given (N, L, H, E), the heads of each position attend to one another and the sequence is
    never mixed. Nothing raises in self-attention, whatever L and H are, and the output has the input's shape, so
    the following `reshape(B, T, C)` works. In a torch 2.13 experiment (docs/torch-facts.md#sdpa-heads-layout)
    with N=2, L=6, H=4, E=8 the output was 2.39 off the transposed call's (2.02 to 3.73 over 30 draws); with
    L != S (cross-attention) the same mistake raises `RuntimeError: The size of tensor a (6) must match the size
    of tensor b (10) at non-singleton dimension 1`. Merging a correct (N, H, L, E) output with
    `reshape(N, L, H * E)` without the inverse transpose interleaves heads and positions: 1.98 off in the same
    experiment.

    ## Known problems
    A split whose sequence size is inferred (`view(B, -1, H, D)`) or whose head count has a name that does not
    say so (`self.h`) has unknown roles and is not flagged; nor is a fused `qkv` tensor indexed after a
    permute. Only 4-D inputs are checked. There is no runtime check: a wrong and a right call have the same
    shapes, (N, a, b, E), so the guard cannot tell them apart.

    ## Example
    ```python
    B, T, C = x.size()
    q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
    q = q.view(B, T, self.n_head, C // self.n_head)
    k = k.view(B, T, self.n_head, C // self.n_head)
    v = v.view(B, T, self.n_head, C // self.n_head)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.contiguous().view(B, T, C)
    ```

    ## Use instead
    ```python
    q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
    k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
    v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    ```

    ## Fix safety
    Unsafe, and offered only for errors: the call's query, key and value get `.transpose(1, 2)`, and so does its
    output (`F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1,
    2)`), so that the code after it still gets (N, L, H, E); when that code already transposes the output back,
    only the inputs are transposed. For the merge, `.transpose(1, 2)` (and `.contiguous()` before a `.view`) is
    inserted before the reshape. The outputs change, as they should, so `--fix` applies it only with
    `--unsafe-fixes`.

    ## References
    - torch 2.13 `nn/functional.py`, the `scaled_dot_product_attention` docstring: query (N, ..., L, E), key
      (N, ..., S, E), value (N, ..., S, Ev)
    - docs/torch-facts.md#sdpa-heads-layout
    """

    code = "MHA013"
    name = "sdpa-heads-layout"
    summary = "scaled_dot_product_attention given (N, L, H, E) instead of (N, H, L, E): it attends across heads"
    triggers = (torchapi.SDPA_TRIGGER,)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, q, q)
                return y.transpose(1, 2).reshape(B, T, C)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head).permute(0, 2, 1, 3)
                return F.scaled_dot_product_attention(q, q, q)
            """,
        ),
        Valid(
            """
            from einops import rearrange
            import torch.nn.functional as F
            def f(x):
                q = rearrange(x, 'b n (h d) -> b h n d', h=8)
                return F.scaled_dot_product_attention(q, q, q)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(x):
                B, T, C = x.shape
                return F.scaled_dot_product_attention(x, x, x)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head)
                return F.scaled_dot_product_attention(q, q, q)  # noqa: MHA013
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head)
                y = F.scaled_dot_product_attention(q, q, q)
                return y.reshape(B, T, C)
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets `q` as (N, L, H, E): `T` (line 3) is axis 1 and the heads axis 2, "
                "so it attends across heads"
            ),
            fixed="""
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head)
                y = F.scaled_dot_product_attention(q.transpose(1, 2), q.transpose(1, 2), q.transpose(1, 2)).transpose(1, 2)
                return y.reshape(B, T, C)
            """,  # noqa: E501 -- a line of the example's code
        ),
        Invalid(
            """
            from torch.nn.functional import scaled_dot_product_attention as sdpa
            def f(x, bsz, seq_len, num_heads, head_dim):
                q = x.view(bsz, seq_len, num_heads, head_dim)
                return sdpa(q, q, q)
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "F.scaled_dot_product_attention gets `q` as (N, L, H, E): `seq_len` (line 3) is axis 1 and the heads "
                "axis 2, so it attends across heads"
            ),
        ),
        Invalid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, q, q)
                return y.reshape(B, T, C)
            """,
            line=6,
            severity=Severity.ERROR,
            headline=(
                "`y.reshape(B, T, C)` merges SDPA's (N, H, L, E) output (line 5) without `.transpose(1, 2)`: heads and "
                "positions interleave"
            ),
            fixed="""
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, q, q)
                return y.transpose(1, 2).reshape(B, T, C)
            """,
        ),
    )
    example_inputs = "import torch\nx = torch.randn(2, 6, 16)\nn_head = 4\n"

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.shapes = ShapeReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is None or target.api != torchapi.SDPA:
            return
        scope = self.scope
        exprs = [target.arguments.get(name) for name in _QKV]
        readings = [self._read(expr, scope, node) if expr is not None else None for expr in exprs]
        layouts = {reading.layout for reading in readings if reading is not None}
        if layouts == {_SPLIT}:
            self._report_split(node, target, exprs, readings)
        elif layouts == {_HEADS_FIRST} and readings[0] is not None:
            self._check_merges(node, exprs[0], readings[0])

    # ---- what q, k and v are ----
    def _read(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> _Reading | None:
        traced = self.shapes.of(expr, scope, use)
        if traced is None or len(traced.shape) != 4 or OPEN in traced.shape:
            return None
        first, second, third, last = traced.shape
        if _is(first, Role.SEQUENCE, Role.HEADS, Role.EMBEDDING) or _is(last, Role.SEQUENCE, Role.HEADS, Role.BATCH):
            return None
        if _is(second, Role.SEQUENCE):
            heads = self._heads(third)
            if heads is None:
                return None  # (B, T, N, D): attention over some other axis, per position (axial, agents)
            return _Reading(_SPLIT, traced, second, *heads)
        if _is(third, Role.SEQUENCE):
            heads = self._heads(second)
            if heads is None:
                return None
            return _Reading(_HEADS_FIRST, traced, third, *heads)
        return None

    def _heads(self, axis: Axis) -> tuple[str, Strength] | None:
        """Why `axis` holds the heads: its role's evidence, or a size that names the head count (`self.n_head`)."""
        if _is(axis, Role.HEADS):
            return axis.evidence.sentence(), axis.evidence.strength
        if axis.known or not axis.size:
            return None
        if names_head_count(axis.size):
            return f"the size `{axis.size}` names the head count", Strength.NAMED
        return None

    # ---- the split reaching the call untransposed ----
    def _report_split(self, node: cst.Call, target, exprs, readings: list[_Reading | None]) -> None:
        ctx = self.context
        found = [(name, expr, reading) for name, expr, reading in zip(_QKV, exprs, readings) if reading is not None]
        strongest = max((reading for _, _, reading in found), key=lambda r: r.sequence.evidence.strength)
        severity = Severity.ERROR if strongest.sequence.evidence.strength is Strength.ESTABLISHED else Severity.WARNING
        evidence, said = [], set()
        for name, expr, reading in found:
            why = (reading.sequence.evidence.sentence(), reading.heads)
            evidence.append(f"{name}=`{ctx.code(expr)}` is (N, L, H, E)")
            if why not in said:
                evidence.extend(why)
            said.add(why)
            evidence.extend(reading.traced.sentences())
        names = list(dict.fromkeys(f"`{ctx.code(expr)}`" for _, expr, _ in found))
        tensors = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        back = self._transposed_back(node)
        new = _transposed_call(node, target, with_output=not back)
        fix = None
        if severity is Severity.ERROR and len(found) == 3 and back is not None:
            fix = self.replacement(node, new, applicability=UNSAFE,
                                   title="transpose query, key and value to (N, H, L, E)" +
                                   ("" if back else " and the output back to (N, L, H, E)"))
        seq = strongest.sequence
        self.report(node, SPLIT_NOT_TRANSPOSED, severity=severity, evidence=evidence, fix=fix,
                    arguments={"api": torchapi.SDPA, "form": _SPLIT,
                               "is_causal": _flag(ctx, target.arguments.get("is_causal"), self.scope)},
                    tensors=tensors, seq=seq.size or seq.evidence.code, line=seq.evidence.line,
                    replacement=ctx.module.code_for_node(new))

    def _transposed_back(self, node: cst.Call) -> bool | None:
        """Whether the code after the call transposes its output back (True), uses it otherwise (False), or both
        (None: no fix)."""
        kinds = {_reorders(consumer) for _, _, consumer in self._consumers(node)}
        if kinds == {True}:
            return True
        return False if True not in kinds else None

    # ---- a correct call's output merged without the inverse transpose ----
    def _check_merges(self, node: cst.Call, query_expr: cst.BaseExpression, query: _Reading) -> None:
        ctx, scope = self.context, self.scope
        for inner, carrier, consumer in self._consumers(node):
            if not (isinstance(consumer, cst.Call) and isinstance(consumer.func, cst.Attribute)
                    and consumer.func.attr.value in ("view", "reshape")):
                continue
            sizes = size_arguments(consumer)
            if sizes is None or len(sizes) != 3 or isinstance(sizes[0], cst.BinaryOperation):
                continue
            batch = self.shapes.size_axis(sizes[0], scope, consumer)
            sequence = self.shapes.size_axis(sizes[1], scope, consumer)
            inferred = _is_minus_one(ctx, sizes[1], scope)
            if not _is(batch, Role.BATCH):
                continue
            if not (_is(sequence, Role.SEQUENCE) or (inferred and _is(self.shapes.size_axis(sizes[2], scope, consumer),
                                                                     Role.EMBEDDING))):
                continue
            established = (query.strength is Strength.ESTABLISHED or query.sequence.evidence.strength
                           is Strength.ESTABLISHED) and _is(sequence, Role.SEQUENCE) \
                and sequence.evidence.strength is Strength.ESTABLISHED
            severity = Severity.ERROR if established else Severity.WARNING
            evidence = [f"query=`{ctx.code(query_expr)}` is (N, H, L, E)", query.sequence.evidence.sentence(),
                        query.heads, *query.traced.sentences(),
                        f"`{ctx.code(consumer)}` at line {ctx.line(consumer)} reshapes the output to (N, L, ...)",
                        sequence.evidence.sentence() if _is(sequence, Role.SEQUENCE)
                        else "the sequence is the inferred `-1`"]
            new = merged_transposed(consumer, inner, carrier, ctx.code(carrier))
            fix = self.replacement(consumer, new, applicability=UNSAFE, title="transpose the output back first") \
                if severity is Severity.ERROR else None
            self.report(consumer, MERGED_WITHOUT_TRANSPOSE, severity=severity, evidence=evidence, fix=fix,
                        arguments={"api": torchapi.SDPA, "form": "merge"},
                        merge=ctx.code(consumer), line=ctx.line(node), replacement=ctx.module.code_for_node(new))

    def _consumers(self, node: cst.Call) -> list[tuple[cst.BaseExpression, cst.BaseExpression, cst.CSTNode]]:
        """What the call's output goes into: (the output as read there, that read past conversions, the node
        around it), directly
        (`sdpa(...).transpose(1, 2)`) or through one name (`y = sdpa(...)`, then each read of `y`), past
        conversions that keep the axes (`.contiguous()`)."""
        ctx = self.context
        carrier = _carrier(ctx, node)
        parent = ctx.parent(carrier)
        if isinstance(parent, cst.Assign) and parent.value is carrier and len(parent.targets) == 1 \
                and isinstance(parent.targets[0].target, cst.Name):
            name = parent.targets[0].target.value
            binding = next((b for b in ctx.bindings(name, self.scope) if b.node is parent), None)
            if binding is None:
                return []
            found = []
            for load in dataflow.uses(ctx, binding):
                around = _carrier(ctx, load)
                found.append((load, around, _around(ctx, around)))
            return found
        return [(node, carrier, _around(ctx, carrier))]

    # ---- the runtime experiment ----
    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Re-create the site with q, k, v of shape (N, L, H, E) = (2, 6, 4, 8) and compare SDPA on them with the
        transposed call transposed back; for a merge, compare the reshaped (N, H, L, E) output with the
        transposed one (docs/torch-facts.md#sdpa-heads-layout)."""
        from mhalint.probe import support

        F = torch.nn.functional
        n, length, heads, head_dim = 2, 6, 4, 8
        generator = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(n, length, heads * head_dim, generator=generator).view(n, length, heads, head_dim)
                   for _ in range(3))
        sizes = f"CPU, N={n}, L=S={length}, H={heads}, E={head_dim}"
        if arguments.get("form") == "merge":
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
            wrong = float((out.reshape(n, length, heads * head_dim)
                           - out.transpose(1, 2).reshape(n, length, heads * head_dim)).abs().max())
            text = (f"reshape(N, L, H*E) of the (N, H, L, E) output is {wrong:.2f} off "
                    f"transpose(1, 2).reshape(N, L, H*E) ({sizes})")
            return support.Rebuilt().outcome(wrong > 1e-3, text)
        causal = arguments.get("is_causal") is True
        as_written = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        intended = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                  is_causal=causal).transpose(1, 2)
        wrong = float((as_written - intended).abs().max())
        try:
            keys = torch.randn(n, length + 4, heads, head_dim, generator=generator)
            F.scaled_dot_product_attention(q, keys, keys)
            cross = "with S=10 keys it ran too"
        except RuntimeError as error:
            cross = f"with S={length + 4} keys it raised RuntimeError: {str(error).splitlines()[0]}"
        text = (f"SDPA on (N, L, H, E) inputs{' with is_causal=True' if causal else ''} is {wrong:.2f} off the "
                f"transposed call, same output shape; {cross} ({sizes})")
        return support.Rebuilt().outcome(wrong > 1e-3, text)


def _is(axis: Axis, *roles: Role) -> bool:
    return axis.known and axis.role in roles


def _flag(ctx, expr, scope) -> bool | None:
    if expr is None:
        return False
    value = resolve(ctx, expr, scope)
    return value.value if value is not None and isinstance(value.value, bool) else None


def _carrier(ctx, expr: cst.BaseExpression) -> cst.BaseExpression:
    """The outermost expression around `expr` that only converts it (`.contiguous()`, `.to(x)`, `.float()`)."""
    current = expr
    while True:
        attribute = ctx.parent(current)
        call = ctx.parent(attribute) if isinstance(attribute, cst.Attribute) and attribute.value is current else None
        if isinstance(call, cst.Call) and call.func is attribute and attribute.attr.value in KEEPS_AXES:
            current = call
            continue
        return current


def _around(ctx, expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """The method call on `expr` (`expr.transpose(1, 2)`), or the node around it."""
    attribute = ctx.parent(expr)
    if isinstance(attribute, cst.Attribute) and attribute.value is expr:
        call = ctx.parent(attribute)
        return call if isinstance(call, cst.Call) and call.func is attribute else attribute
    return attribute


def _reorders(expr) -> bool:
    """`.transpose(1, 2)`, `.transpose(2, 1)`, `.permute(0, 2, 1, 3)`: the output transposed back."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)):
        return False
    values = []
    for arg in expr.args:
        item = arg.value
        if isinstance(item, cst.Tuple | cst.List):
            values.extend(literal_int(e.value) for e in item.elements)
        else:
            values.append(literal_int(item))
    if expr.func.attr.value in ("transpose", "swapaxes", "swapdims"):
        return sorted(values) == [1, 2] if None not in values else False
    if expr.func.attr.value == "permute":
        return values == [0, 2, 1, 3]
    return False


def _is_minus_one(ctx, expr, scope) -> bool:
    value = resolve(ctx, expr, scope)
    return value is not None and value.value == -1


def _transposed_call(node: cst.Call, target, with_output: bool) -> cst.BaseExpression:
    """The call with query, key and value transposed, and its output transposed back when `with_output`."""
    args = []
    qkv = {id(target.arguments.by_name[name]) for name in _QKV if name in target.arguments.by_name}
    for arg in node.args:
        args.append(arg.with_changes(value=transposed(arg.value)) if id(arg) in qkv else arg)
    new = node.with_changes(args=args)
    return transposed(new) if with_output else new
