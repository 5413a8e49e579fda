"""Softmax temperatures: whether an expression is 1/sqrt(d) (or sqrt(d)) of a size d, and whether a tensor was
multiplied by one on its way to an attention call.

A temperature is read from how it is written (`d ** -0.5`, `1 / math.sqrt(d)`, `torch.rsqrt(d)`; `math.sqrt(d)` and
`d ** 0.5` are the inverse), through a name or `self.x` whose one binding writes it: that is provenance. A name
that only says so (`self.scale` with no binding in sight) is not read here. The tensor is followed back through
names with one reaching binding, `*=` and `/=`, and the methods that keep its values (`view`, `transpose`,
`contiguous`, ...); any other call (a projection) ends the search.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mhalint.analysis import dataflow
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

_MAX_DEPTH = 8
_SQRT = frozenset(("math.sqrt", "numpy.sqrt", "torch.sqrt", "sqrt"))
_RSQRT = frozenset(("torch.rsqrt",))
# methods that move or convert a tensor's values without changing them
_KEEPS_VALUES = frozenset(("view", "reshape", "transpose", "permute", "contiguous", "to", "float", "half",
                           "bfloat16", "type_as", "flatten", "unflatten", "squeeze", "unsqueeze", "expand", "chunk",
                           "split", "unbind", "movedim", "swapaxes", "swapdims", "clone", "detach"))


@dataclass(frozen=True)
class Temperature:
    """`1/sqrt(root)` (or `sqrt(root)` when `inverted`) as the code writes it: `written` at `line`."""

    root: cst.BaseExpression
    written: str
    line: int
    inverted: bool


@dataclass(frozen=True)
class Scaling:
    """A tensor multiplied by a temperature on its way: the statement or expression that did it, the factor as
    written there, the temperature in it, and the test of the `if` it sits in when other values may reach too."""

    node: cst.CSTNode
    line: int
    factor: str
    temperature: Temperature
    condition: str = ""


def temperature(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope,
                depth: int = 0) -> Temperature | None:
    """The temperature `expr` is, as the code writes it; None for anything else (a number, a name nothing
    defines)."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    found = _written(ctx, expr, scope)
    if found is not None:
        root, inverted = found
        return Temperature(root, ctx.code(expr), ctx.line(expr), inverted)
    binding = _one_binding(ctx, expr, scope)
    if binding is not None and binding.kind == "assign" and binding.value is not None:
        return temperature(ctx, binding.value, binding.scope, depth + 1)
    return None


def _written(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> tuple[cst.BaseExpression, bool] | None:
    """(d, inverted) for `d ** -0.5`, `d ** 0.5`, `1 / sqrt(d)`, `sqrt(d)`, `rsqrt(d)`, `1 / d ** 0.5`."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power):
        exponent = _number(expr.right)
        if exponent in (-0.5, 0.5):
            return expr.left, exponent == 0.5
        return None
    if isinstance(expr, cst.Call) and len(expr.args) == 1 and not expr.args[0].keyword:
        name = ctx.qualified_name(expr.func, scope) or ""
        if name in _SQRT:
            return expr.args[0].value, True
        if name in _RSQRT:
            return expr.args[0].value, False
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide) and _number(expr.left) == 1:
        inner = _written(ctx, expr.right, scope)
        return (inner[0], not inner[1]) if inner is not None else None
    return None


def _number(expr: cst.BaseExpression) -> int | float | None:
    """The value of a number written as a literal, `0.5` or `-0.5`; None for anything else."""
    if isinstance(expr, cst.Integer | cst.Float):
        return literal(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _number(expr.expression)
        return -inner if inner is not None else None
    return None


def _one_binding(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> Binding | None:
    """The one binding of a name that reaches `expr`, or of `self.x` in its class."""
    if isinstance(expr, cst.Name):
        return dataflow.reaching_one(ctx, ctx.bindings(expr.value, scope), expr)
    bindings = ctx.attribute_bindings(expr, scope)
    return bindings[0] if bindings is not None and len(bindings) == 1 else None


def scaled_by(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope, use: cst.CSTNode,
              depth: int = 0) -> Scaling | None:
    """Where the tensor `expr`, read at `use`, was multiplied by a temperature (or divided by its inverse)."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply | cst.Divide):
        operand = expr.right
        factor = _factor(ctx, expr.operator, operand, scope)
        if factor is None and isinstance(expr.operator, cst.Multiply):
            operand = expr.left
            factor = _factor(ctx, expr.operator, operand, scope)
        return Scaling(expr, ctx.line(expr), ctx.code(operand), factor) if factor is not None else None  # `q * mask`
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _KEEPS_VALUES:
        return scaled_by(ctx, expr.func.value, scope, use, depth + 1)
    if isinstance(expr, cst.Subscript):  # `q, k, v = qkv[0], qkv[1], qkv[2]` after a scaling of qkv
        return scaled_by(ctx, expr.value, scope, use, depth + 1)
    if isinstance(expr, cst.Name):
        reaching = dataflow.reaching(ctx, ctx.bindings(expr.value, scope), use)
        found = [_through(ctx, expr, binding, depth) for binding in reaching]
        scaled = [scaling for scaling in found if scaling is not None]
        if len(reaching) == 1 or not scaled:
            return scaled[0] if scaled else None
        if len(scaled) < len(found):  # some paths scale and others do not: on which one
            return replace(scaled[0], condition=_condition(ctx, scaled[0].node))
        return scaled[0]
    return None


def _through(ctx: ModuleContext, name: cst.Name, binding: Binding, depth: int) -> Scaling | None:
    """The scaling a binding of the tensor's name applies or carries."""
    if binding.kind == "augmented":
        statement = binding.node
        factor = _factor(ctx, _plain(statement.operator), statement.value, binding.scope) \
            if isinstance(statement.operator, cst.MultiplyAssign | cst.DivideAssign) else None
        if factor is not None:
            return Scaling(statement, ctx.line(statement), ctx.code(statement.value), factor)
        return scaled_by(ctx, name, binding.scope, statement, depth + 1)
    if binding.kind in ("assign", "unpack") and binding.value is not None:
        return scaled_by(ctx, binding.value, binding.scope, binding.node, depth + 1)
    return None


def _condition(ctx: ModuleContext, node: cst.CSTNode) -> str:
    """The test of the innermost `if` around `node` (`not (...)` in its `else`), or "one path"."""
    child, parent = node, ctx.parent(node)
    while parent is not None and not isinstance(parent, cst.FunctionDef | cst.Module):
        if isinstance(parent, cst.If) and child is not parent.test:
            test = ctx.code(parent.test)
            return test if child is parent.body else f"not ({test})"
        child, parent = parent, ctx.parent(parent)
    return "one path"


def _plain(operator: cst.BaseAugOp) -> cst.BaseBinaryOp:
    return cst.Multiply() if isinstance(operator, cst.MultiplyAssign) else cst.Divide()


def _factor(ctx: ModuleContext, operator: cst.BaseBinaryOp, operand: cst.BaseExpression,
            scope: Scope) -> Temperature | None:
    """The temperature a `*` or `/` by `operand` applies, `inverted` when it scales up: `* d ** -0.5` and
    `/ sqrt(d)` scale down, `* sqrt(d)` and `/ d ** -0.5` up."""
    power, found = _power(ctx, operand, scope)
    if isinstance(operator, cst.Divide):
        power = -power
    if power == 0 or found is None:
        return None
    return Temperature(found.root, found.written, found.line, power < 0)


def _power(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope,
           depth: int = 0) -> tuple[int, Temperature | None]:
    """How many temperatures `expr` multiplies by (1/sqrt(d) counts 1, sqrt(d) -1: `default_scale / self.scale`
    counts 1, `self.scale / default_scale` -1), and the first one written."""
    found = temperature(ctx, expr, scope)
    if found is not None:
        return (-1 if found.inverted else 1), found
    if depth < _MAX_DEPTH and isinstance(expr, cst.BinaryOperation) \
            and isinstance(expr.operator, cst.Multiply | cst.Divide):
        left, right = _power(ctx, expr.left, scope, depth + 1), _power(ctx, expr.right, scope, depth + 1)
        sign = -1 if isinstance(expr.operator, cst.Divide) else 1
        return left[0] + sign * right[0], left[1] or right[1]
    binding = _one_binding(ctx, expr, scope) if depth < _MAX_DEPTH else None
    if binding is not None and binding.kind == "assign" and binding.value is not None:
        return _power(ctx, binding.value, binding.scope, depth + 1)
    return 0, None
