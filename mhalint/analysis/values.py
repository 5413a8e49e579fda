"""Static values of expressions: literals, module constants, simple arithmetic, parameter defaults, `self.x`.

Unknown stays unknown: `resolve` returns None rather than guess. A resolved value carries the chain of source
lines it came from, so a message can say where the number was found.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis.calls import Construction, callers
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.lazy import cst

_MAX_DEPTH = 12

_BINARY = {  # by libcst node name, so that importing this module does not load libcst
    "Add": operator.add,
    "Subtract": operator.sub,
    "Multiply": operator.mul,
    "FloorDivide": operator.floordiv,
    "Divide": operator.truediv,
    "Modulo": operator.mod,
}
_CONSTANT_NAMES = {"True": True, "False": False, "None": None}
_BUILTINS = {"int": int, "max": max, "min": min, "abs": abs}


@dataclass(frozen=True)
class Value:
    value: object
    # How the value was found, outermost first, e.g. ("`heads` = NUM_HEADS at line 9", "`NUM_HEADS` = 5 at line 3").
    trail: tuple[str, ...] = ()

    def describe(self) -> str:
        return "; ".join(self.trail)


def resolve(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> Value | None:
    """The value of `expr` evaluated in `scope`, or None when it cannot be known statically."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    ctx.limits.check()
    if isinstance(expr, cst.Integer | cst.Float):
        return Value(expr.evaluated_value)
    if isinstance(expr, cst.SimpleString):
        return Value(expr.evaluated_value)
    if isinstance(expr, cst.Name):
        if expr.value in _CONSTANT_NAMES and not ctx.bindings(expr.value, scope):
            return Value(_CONSTANT_NAMES[expr.value])
        return _resolve_bindings(ctx, expr.value, ctx.bindings(expr.value, scope), depth)
    if isinstance(expr, cst.Attribute):
        return _resolve_attribute(ctx, expr, scope, depth)
    if isinstance(expr, cst.UnaryOperation):
        operand = resolve(ctx, expr.expression, scope, depth + 1)
        return _apply_unary(expr.operator, operand)
    if isinstance(expr, cst.BinaryOperation):
        return _resolve_binary(ctx, expr, scope, depth)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in _BUILTINS:
        if ctx.bindings(expr.func.value, scope) or any(arg.keyword or arg.star for arg in expr.args):
            return None
        arguments = [resolve(ctx, arg.value, scope, depth + 1) for arg in expr.args]
        if not arguments or any(a is None for a in arguments):
            return None
        try:
            result = _BUILTINS[expr.func.value](*(a.value for a in arguments))
        except (TypeError, ValueError):
            return None
        return Value(result, tuple(t for a in arguments for t in a.trail))
    return None


def _resolve_binary(ctx: ModuleContext, expr: cst.BinaryOperation, scope: Scope, depth: int) -> Value | None:
    function = _BINARY.get(type(expr.operator).__name__)
    if function is None:
        return None
    left = resolve(ctx, expr.left, scope, depth + 1)
    right = resolve(ctx, expr.right, scope, depth + 1)
    if left is None or right is None:
        return None
    if not all(isinstance(v.value, int | float) and not isinstance(v.value, bool) for v in (left, right)):
        return None
    try:
        return Value(function(left.value, right.value), left.trail + right.trail)
    except (ZeroDivisionError, OverflowError):
        return None


def _apply_unary(op: cst.BaseUnaryOp, operand: Value | None) -> Value | None:
    if operand is None:
        return None
    if isinstance(op, cst.Not):
        return Value(not operand.value, operand.trail)
    if not isinstance(operand.value, int | float) or isinstance(operand.value, bool):
        return None
    if isinstance(op, cst.Minus):
        return Value(-operand.value, operand.trail)
    if isinstance(op, cst.Plus):
        return operand
    return None


def _resolve_attribute(ctx: ModuleContext, expr: cst.Attribute, scope: Scope, depth: int) -> Value | None:
    """`self.x` reads what the class assigns to `x` (in any method, or in the class body)."""
    bindings = ctx.attribute_bindings(expr, scope)
    return _resolve_bindings(ctx, f"self.{expr.attr.value}", bindings, depth) if bindings is not None else None


def _resolve_bindings(ctx: ModuleContext, name: str, bindings: list[Binding], depth: int) -> Value | None:
    """A name has a value only when every binding of it agrees (a conditional reassignment makes it unknown).
    Answered once per list of bindings (a name bound N times is read N times, each read going through the N)."""
    if not bindings:
        return None
    # the lists are the context's own, alive as long as it is
    return ctx.settled("resolved_bindings", (id(bindings), name, depth),
                       lambda: _agreed_bindings(ctx, name, bindings, depth))


def _agreed_bindings(ctx: ModuleContext, name: str, bindings: list[Binding], depth: int) -> Value | None:
    values = []
    for binding in bindings:
        if binding.kind == "param":
            value = _parameter(ctx, name, binding, depth)
        elif binding.kind != "assign" or binding.value is None:
            return None
        else:
            value = resolve(ctx, binding.value, binding.scope, depth + 1)
            value = Value(value.value, (_describe(ctx, name, binding),) + value.trail) if value else None
        if value is None:
            return None
        values.append(value)
    return _agreed(values)


def _parameter(ctx: ModuleContext, name: str, binding: Binding, depth: int) -> Value | None:
    """What the callers in this module pass (`Block(..., heads=5)` for `__init__`), each falling back to the
    default; the default alone when the module never calls the function. Callers that disagree: unknown."""
    return _agreed([value for value, _ in _parameter_values(ctx, name, binding, depth) or []])


def alternatives(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> list[tuple[Value, int]]:
    """The different values a parameter receives when its callers disagree (`Block(64, 8, batch_first=True)`
    and `Block(64, 8)` with a False default): one (value, line of the first call that passes it) per value;
    empty when that is not the case or any caller's value is unknown."""
    if not isinstance(expr, cst.Name):
        return []
    bindings = ctx.bindings(expr.value, scope)
    if len(bindings) != 1 or bindings[0].kind != "param":
        return []
    distinct: dict[tuple[type, object], tuple[Value, int]] = {}
    for value, line in _parameter_values(ctx, expr.value, bindings[0], 0) or []:
        if line is not None:
            distinct.setdefault((type(value.value), value.value), (value, line))
    return list(distinct.values()) if len(distinct) > 1 else []


def taking(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope, wanted: object) -> Value | None:
    """`expr`'s value when it is `wanted`; or, when it names a parameter whose callers pass different values and
    one of them is `wanted`, that call's value, its trail naming the calls that pass the others. A flag that one
    call path sets is set on that path, whatever the others do; None when no path gives `wanted`."""
    value = resolve(ctx, expr, scope)
    if value is not None:
        return value if _same(value.value, wanted) else None
    if expr is None:
        return None
    found = alternatives(ctx, expr, scope)
    chosen = next((value for value, _ in found if _same(value.value, wanted)), None)
    if chosen is None:
        return None
    others = ", ".join(f"{value.value!r} (line {line})" for value, line in found if value is not chosen)
    return Value(chosen.value, chosen.trail + (f"other calls pass {others}",))


def _same(value: object, wanted: object) -> bool:
    return value == wanted and type(value) is type(wanted)


def _parameter_values(ctx: ModuleContext, name: str, binding: Binding,
                      depth: int) -> list[tuple[Value, int | None]] | None:
    """(value, the call's line) per caller (the default where a caller leaves it out), or the default alone (no
    line) when nothing in the module calls the function; None when a caller's value is unknown."""
    default = resolve(ctx, binding.value, binding.scope, depth + 1) if binding.value is not None else None
    if default is not None:
        default = Value(default.value, (f"`{name}` defaults to {default.value!r} in `{binding.scope.name}()` at "
                                        f"line {ctx.line(binding.node)}",) + default.trail)
    sites = callers(ctx, binding.scope) if depth < _MAX_DEPTH - 2 else []
    if not sites:
        return [(default, None)] if default is not None else None
    found = []
    for site in sites:
        argument = site.arguments.get(name)
        if argument is None:
            if not site.arguments.absent(name) or default is None:
                return None
            call = f"`{ctx.code(site.call.func)}(...)` at line {ctx.line(site.call)}"
            found.append((Value(default.value, (f"{call} leaves `{name}` at its default",) + default.trail),
                          ctx.line(site.call)))
            continue
        value = resolve(ctx, argument, site.scope, depth + 1)
        if value is None:
            return None
        found.append((Value(value.value, (f"`{ctx.code(site.call.func)}(...)` at line {ctx.line(site.call)} passes "
                                          f"{name}={ctx.code(argument)}",) + value.trail), ctx.line(site.call)))
    return found


def _agreed(values: list[Value]) -> Value | None:
    """The first of several values when they are all equal, and of one type (1 is not True); else unknown."""
    if not values or any(v.value != values[0].value or type(v.value) is not type(values[0].value) for v in values):
        return None
    return values[0]


def _describe(ctx: ModuleContext, name: str, binding: Binding) -> str:
    return f"`{name}` = {ctx.code(binding.value)} at line {ctx.line(binding.node)}"


def constructor_values(ctx: ModuleContext, built: Construction) -> dict[str, object]:
    """The constructor arguments of a torch module that resolve to plain values, keyed by parameter name, with
    the canonical API name under "api": what the runtime probe needs to rebuild the module."""
    values: dict[str, object] = {"api": built.api}
    for parameter in torchapi.CONSTRUCTORS[built.api].params:
        value = resolve(ctx, built.arguments.get(parameter), built.scope)
        if value is not None and isinstance(value.value, int | float | str | bool | type(None)):
            values[parameter] = value.value
    return values
