"""Axes of size one that show where the samples are.

A module's own table (a positional table, a learned embedding, registered as a buffer or built as an nn.Parameter)
is the same for every sample. Where it is added to the data with an axis of size one (the tutorial's `pe` of shape
(max_len, 1, d_model) in `x + self.pe[:x.size(0), :]`), broadcasting spreads it over that axis of the data: the
samples. Where it is sliced to the data's own length at an axis (`[:x.size(0)]`), that axis of the data holds its
positions: the sequence. Both show how the module reads its input, not where the input comes from (the tutorial's
table is also, wrongly, added to batch-first data), so the roles are NAMED: at most a warning, and only where the
data's own trace says nothing about those axes.

A 2-D tensor given to MultiheadAttention as its key with an axis of size one put at axis 1 (`k[:, None]`,
`k.unsqueeze(1)`) is (S, 1, E) read sequence-first, one sample; read batch-first it would be a key of length one,
over which softmax gives weight 1: the attention a fixed projection of the value, whatever the query. Where the
query has the same inserted axis (a set attending to itself), that axis is taken as the batch (NAMED). A query
alone with such an axis is the common "one query token" of batch-first code, and decides nothing.
"""

from __future__ import annotations

from mhalint.analysis import axes, calls, dataflow, tensors
from mhalint.analysis.axes import Axis, Role, Strength
from mhalint.analysis.vocabulary import KEEPS_AXES, REGROUP, REORDER
from mhalint.context import Scope
from mhalint.parse.lazy import cst

_PARAMETERS = {"torch.nn.Parameter", "torch.nn.parameter.Parameter"}
_THROUGH = KEEPS_AXES | REORDER | REGROUP | {"unsqueeze", "squeeze"}  # methods followed back to the table
_MAX_NAMES = 4  # `pos = self.pe[:, :n]` then `x + pos`: names followed to the table


def spread(reader, expr: cst.BinaryOperation, scope: Scope, use: cst.CSTNode, depth: int):
    """`data + table` (either side) where `table` is the module's own parameter or buffer with one axis of size
    one: the data's roles, each axis its own trace leaves unknown filled from the table (its axis of size one: the
    batch; an axis sliced to the data's length there: the sequence). None where no operand is such a table, the
    data's trace already shows the layout, or the two disagree."""
    if not isinstance(expr.operator, cst.Add | cst.Subtract | cst.Multiply):
        return None
    for data, shared in ((expr.left, expr.right), (expr.right, expr.left)):
        found = _table(reader.ctx, shared, scope, use)
        if found is not None:
            return _spread(reader, expr, data, shared, found, scope, use, depth)
    return None


def _spread(reader, expr, data, shared, found, scope, use, depth):
    attribute, bounds = found
    table = reader.of(shared, scope, use, depth + 1)
    traced = reader.of(data, scope, use, depth + 1)
    if table is None or axes.OPEN in table.shape or len(table.shape) < 3:
        return traced
    singletons = [i for i, axis in enumerate(table.shape) if axis.size == "1" and not axis.known]
    if len(singletons) != 1 or singletons[0] == len(table.shape) - 1:
        return traced  # none, or several (a bias over all but the features): no one axis is the samples
    if traced is not None and (axes.layout(traced.shape) is not None or len(traced.shape) != len(table.shape)):
        return traced
    ctx, line, code = reader.ctx, reader.ctx.line(expr), reader.ctx.code(shared)
    name = ctx.code(attribute)
    shape: list[Axis] = []
    for position, axis in enumerate(table.shape):
        own = traced.shape[position] if traced is not None else axes.UNKNOWN_AXIS
        role = Role.BATCH if position == singletons[0] else Role.SEQUENCE if _measures(
            ctx, bounds.get(position), data, position, scope, use) else None
        if own.known and role is not None and own.role is not role:
            return traced  # the data's trace and the table disagree about that axis
        if own.known or role is None:
            shape.append(own if own.known else axis if axis.known and axis.role is Role.EMBEDDING else own)
            continue
        reason = (f"`{name}` is the module's own tensor, the same for every sample: its axis of size 1 broadcasts "
                  f"over the batch") if role is Role.BATCH else \
            f"`{name}` is sliced to the data's length at this axis: its positions, the sequence"
        shape.append(Axis(role, reader.evidence(code, line, reason, Strength.NAMED), own.size))
    steps = traced.steps if traced is not None else ()
    does = f"adds the module's `{name}` (one axis of size 1: the samples)"
    return tensors.Traced(tuple(shape), steps + ((ctx.code(expr), axes.place(line, reader.file), does),))


def _table(ctx, expr, scope: Scope, use, seen: int = 0):
    """(`self.x`, the upper bounds of the slices taken of it by axis) when `expr` reads the module's own parameter
    or buffer (`self.x` registered with `register_buffer` or built as `nn.Parameter`, an nn.Embedding's `.weight`)
    through slices, shape methods and names; None otherwise. A slice's bound counts only where no shape method or
    other scope lies between it and the sum."""
    bounds: dict[int, cst.BaseExpression] = {}
    outermost = True
    while True:
        if isinstance(expr, cst.Subscript) and all(isinstance(e.slice, cst.Slice) for e in expr.slice):
            for position, element in enumerate(expr.slice):
                if outermost and element.slice.upper is not None and element.slice.lower is None:
                    bounds.setdefault(position, element.slice.upper)
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) \
                and expr.func.attr.value in _THROUGH and ctx.qualified_name(expr.func, scope) is None:
            outermost = outermost and expr.func.attr.value in KEEPS_AXES
            expr = expr.func.value
        elif isinstance(expr, cst.Name) and seen < _MAX_NAMES:
            binding = dataflow.reaching_one(ctx, ctx.bindings(expr.value, scope), use)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return None
            outermost = outermost and binding.scope is scope
            expr, scope, use, seen = binding.value, binding.scope, binding.node, seen + 1
        else:
            break
    if isinstance(expr, cst.Attribute) and expr.attr.value == "weight":
        built = calls.instance(ctx, expr.value, scope)
        return (expr, bounds) if built is not None and built.api == "torch.nn.Embedding" else None
    bindings = ctx.attribute_bindings(expr, scope)
    if not bindings or not all(_registered(ctx, binding) for binding in bindings):
        return None
    return expr, bounds


def _registered(ctx, binding) -> bool:
    """A buffer (`self.register_buffer("pe", pe)`) or a parameter (`self.pe = nn.Parameter(...)`)."""
    node, value = binding.node, binding.value
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
            and node.func.attr.value == "register_buffer":
        return True
    return isinstance(value, cst.Call) and ctx.qualified_name(value.func, binding.scope) in _PARAMETERS


def _measures(ctx, bound, data, position: int, scope: Scope, use) -> bool:
    """Is `bound` the data's own size at `position` (`x.size(0)`, `x.shape[0]`, or a name bound to one)?"""
    if isinstance(bound, cst.Name):
        binding = dataflow.reaching_one(ctx, ctx.bindings(bound.value, scope), use)
        bound = binding.value if binding is not None and binding.kind == "assign" else None
    if bound is None:
        return False
    tensor, index = tensors.measured_axis(bound)
    return tensor is not None and index == position and ctx.code(tensor) == ctx.code(data)


def length_one(reader, query: cst.BaseExpression, key: cst.BaseExpression | None, call: cst.Call, scope: Scope):
    """The query's roles when it and the key of a MultiheadAttention call both put an axis of size one at axis 1
    of a 2-D tensor: that axis is the batch (the key's decides, see the module's docstring); else None."""
    if key is None or _inserted(reader.ctx, key, scope) is None or _inserted(reader.ctx, query, scope) is None:
        return None
    ctx, line = reader.ctx, reader.ctx.line(call)
    reason = ("the key has an axis of size 1 put at axis 1, as has the query: read batch-first, each sample would "
              "attend over one key (the attention a no-op), so that axis is the batch")
    batch = Axis(Role.BATCH, reader.evidence(ctx.code(key), line, reason, Strength.NAMED), "1")
    return tensors.Traced((axes.UNKNOWN_AXIS, batch, axes.UNKNOWN_AXIS))


def _inserted(ctx, expr: cst.BaseExpression, scope: Scope) -> cst.BaseExpression | None:
    """`t` of `t[:, None]`, `t[:, None, :]` or `t.unsqueeze(1)`."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) in (2, 3):
        whole = [e.slice for i, e in enumerate(expr.slice) if i != 1]
        middle = expr.slice[1].slice
        if all(isinstance(s, cst.Slice) and s.lower is None and s.upper is None and s.step is None for s in whole) \
                and isinstance(middle, cst.Index) and isinstance(middle.value, cst.Name) \
                and middle.value.value == "None":
            return expr.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "unsqueeze" \
            and len(expr.args) == 1 and tensors.literal_int(expr.args[0].value) == 1 \
            and ctx.qualified_name(expr.func, scope) is None:
        return expr.func.value
    return None
