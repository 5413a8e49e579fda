"""Layout from the sizes torch requires two inputs of one call to share.

nn.MultiheadAttention's query and key, nn.Transformer's src and tgt, a decoder's tgt and memory must have the same
batch size, while their sequence lengths may differ. Where both are made with literal sizes (torch's own example,
`src = torch.rand((10, 32, 512)); tgt = torch.rand((20, 32, 512))`), sizes that agree at one of the first two axes
and differ at the other show which is the batch: the one they agree on (either layout would raise otherwise). Sizes
that agree at both, or a tensor whose sizes are not literal, show nothing.
"""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.axes import UNKNOWN_AXIS, Axis, Role, Shape, Strength
from mhalint.analysis.calls import call_target
from mhalint.analysis.values import resolve
from mhalint.analysis.vocabulary import KEEPS_AXES, SIZE_FACTORIES
from mhalint.context import Scope
from mhalint.finding import shorten
from mhalint.parse.lazy import cst

_MAX_DEPTH = 6


def batch_axis(reader, query: cst.BaseExpression, call: cst.Call, scope: Scope) -> Shape | None:
    """The query's roles from the literal sizes of the query and its partner in `call`, or None; `reader` is the
    shape reader that words the evidence."""
    target = call_target(reader.ctx, call, scope)
    partners = torchapi.SHARES_BATCH.get(target.api, ()) if target is not None else ()
    if not partners or target.arguments.get(torchapi.CALLS[target.api].params[0]) is not query:
        return None
    other = partners[0]  # the key (the value has its shape), the memory, nn.Transformer's tgt
    second = target.arguments.get(other)
    if second is None:
        return None
    mine, theirs = _literal_sizes(reader.ctx, query, scope, call), _literal_sizes(reader.ctx, second, scope, call)
    if mine is None or theirs is None or len(mine[0]) != 3 or len(theirs[0]) != 3:
        return None
    agree = [mine[0][axis] == theirs[0][axis] for axis in (0, 1)]
    if agree.count(True) != 1:
        return None
    batch = agree.index(True)
    reason = (f"`{other}` at line {reader.ctx.line(theirs[1])} is {_written(theirs[0])}: torch needs the batch to "
              f"match, and only axis {batch} does")
    evidence = reader.evidence(shorten(reader.ctx.code(mine[1]), 36), reader.ctx.line(mine[1]), reason,
                               Strength.ESTABLISHED)
    roles = (Role.BATCH, Role.SEQUENCE) if batch == 0 else (Role.SEQUENCE, Role.BATCH)
    return (*(Axis(role, evidence) for role in roles), UNKNOWN_AXIS)


def _written(sizes: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, sizes)) + ")"


def _literal_sizes(ctx, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode, depth: int = 0
                   ) -> tuple[tuple[int, ...], cst.Call] | None:
    """The integer sizes of a tensor made by `torch.rand(10, 32, 512)` (or zeros, ones, ...; a tuple of sizes or
    `size=`), directly, through names, or through conversions (`.to(device)`), and the factory call."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        binding = dataflow.reaching_one(ctx, ctx.bindings(expr.value, scope), use)
        if binding is None or binding.kind != "assign" or binding.value is None:
            return None
        return _literal_sizes(ctx, binding.value, binding.scope, binding.node, depth + 1)
    if not isinstance(expr, cst.Call):
        return None
    if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in KEEPS_AXES:
        return _literal_sizes(ctx, expr.func.value, scope, use, depth + 1)
    if ctx.qualified_name(expr.func, scope) not in SIZE_FACTORIES or any(arg.star for arg in expr.args):
        return None
    sizes = [arg.value for arg in expr.args if arg.keyword is None] or \
        [arg.value for arg in expr.args if arg.keyword is not None and arg.keyword.value == "size"]
    if len(sizes) == 1 and isinstance(sizes[0], cst.Tuple | cst.List):
        sizes = [element.value for element in sizes[0].elements]
    values = [resolve(ctx, size, scope) for size in sizes]
    if not values or any(value is None or type(value.value) is not int for value in values):
        return None
    return tuple(value.value for value in values), expr
