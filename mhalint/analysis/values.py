"""Static values of expressions: literals, module constants, simple arithmetic, parameter defaults, `self.x`,
configuration fields (analysis/configs.py), and parameters from every call site of the project.

Unknown stays unknown: `resolve` returns None rather than guess. A resolved value carries the chain of source
lines it came from, so a message can say where the number was found. Where several values can reach (callers
that disagree, a command-line flag), `reaches` lists each with the call or setting that chooses it.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import configs
from mhalint.analysis.calls import Construction
from mhalint.analysis.sites import each_project_caller, place, project_callers
from mhalint.analysis.tuples import unpacked
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

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
_BUILTINS = {"int": int, "float": float, "max": max, "min": min, "abs": abs}


@dataclass(frozen=True)
class Value:
    value: object
    # How the value was found, outermost first, e.g. ("`heads` = NUM_HEADS at line 9", "`NUM_HEADS` = 5 at line 3").
    trail: tuple[str, ...] = ()

    def describe(self) -> str:
        return "; ".join(self.trail)


@dataclass(frozen=True)
class Reach:
    """One value that may reach an expression, and what chooses it: `place`, the call or setting (`line 12`,
    `train.py:12`), and `where`, the same in words (`the instance at line 12`, `a run with --batch-first`). Both
    are None for the value that reaches whatever the callers do."""

    value: Value
    place: str | None = None
    where: str | None = None

    def within(self, step: str, place: str | None = None) -> Reach:
        """This reach seen one step further out: `step` first in its trail; chosen at `place` unless it already
        names where it is chosen."""
        if self.place is None and place is not None:
            return Reach(Value(self.value.value, (step,) + self.value.trail), place, f"the instance at {place}")
        return Reach(Value(self.value.value, (step,) + self.value.trail), self.place, self.where)


def resolve(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> Value | None:
    """The value of `expr` evaluated in `scope`, or None when it cannot be known statically."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    ctx.limits.check()
    if isinstance(expr, cst.Integer | cst.Float):
        return Value(literal(expr))
    if isinstance(expr, cst.SimpleString):
        return Value(literal(expr))
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
    if isinstance(expr, cst.Subscript) or isinstance(expr, cst.Call) and _is_getter(expr.func):
        return _agreed_reaches(configs.read(ctx, expr, scope, depth + 1))
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
    """`self.x` reads what the class assigns to `x` (in any method, or in the class body); `cfg.x` the field of
    what `cfg` holds (analysis/configs.py)."""
    bindings = ctx.attribute_bindings(expr, scope)
    if bindings is not None:
        return _resolve_bindings(ctx, f"self.{expr.attr.value}", bindings, depth)
    return _agreed_reaches(configs.read(ctx, expr, scope, depth + 1))


def _is_getter(func: cst.BaseExpression) -> bool:
    """`getattr(...)` or `<x>.get(...)`: a field read with a default (configs.read checks the rest)."""
    return isinstance(func, cst.Name) and func.value == "getattr" or (
        isinstance(func, cst.Attribute) and func.attr.value == "get")


def _agreed_reaches(found: list[Reach] | None) -> Value | None:
    return _agreed([reach.value for reach in found]) if found else None


def reaches(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> list[Reach] | None:
    """Every value that may reach `expr`, each with the call or setting that chooses it (a parameter's callers,
    in this file and others; a config's constructions; a command-line flag); None when one that may reach is
    unknown. One value that reaches whatever happens is a single Reach with no place."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name) and not (expr.value in _CONSTANT_NAMES and not ctx.bindings(expr.value, scope)):
        return _bound_reaches(ctx, expr.value, ctx.bindings(expr.value, scope), depth)
    bindings = ctx.attribute_bindings(expr, scope)
    if bindings is not None:
        return _bound_reaches(ctx, f"self.{expr.attr.value}", bindings, depth)
    if isinstance(expr, cst.Attribute | cst.Subscript) or isinstance(expr, cst.Call) and _is_getter(expr.func):
        found = configs.read(ctx, expr, scope, depth + 1)
        if found is not None:
            return found
    value = resolve(ctx, expr, scope, depth)
    return [Reach(value)] if value is not None else None


def _bound_reaches(ctx: ModuleContext, name: str, bindings: list[Binding], depth: int) -> list[Reach] | None:
    """A name bound once passes on what reaches its value (a parameter: its callers'); bound more often, it has
    a value only when every binding agrees."""
    if len(bindings) == 1 and bindings[0].kind == "param":
        return _parameter_values(ctx, name, bindings[0], depth)
    if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
        found = reaches(ctx, bindings[0].value, bindings[0].scope, depth + 1)
        return [reach.within(_describe(ctx, name, bindings[0])) for reach in found] if found is not None else None
    value = _resolve_bindings(ctx, name, bindings, depth)
    return [Reach(value)] if value is not None else None


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
        elif binding.kind == "unpack":
            source = unpacked(ctx, binding)
            value = resolve(ctx, source[0], source[1], depth + 1) if source is not None else None
            value = Value(value.value, (f"`{ctx.code(binding.node)}` at line {ctx.line(binding.node)} gives `{name}` "
                                        f"{ctx.code(source[0])}",) + value.trail) if value else None
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
    """What the callers in the project pass (`Block(..., heads=5)` for `__init__`), each falling back to the
    default; the default alone when nothing calls the function. Callers that disagree: unknown."""
    return _agreed_reaches(_parameter_values(ctx, name, binding, depth))


def alternatives(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> list[Reach]:
    """The different values that reach `expr` when its callers or settings disagree (`Block(64, 8,
    batch_first=True)` and `Block(64, 8)` with a False default; a dataclass default that one construction
    overrides; a store_true flag): the first Reach of each value; empty when one value reaches, or any caller's
    value is unknown."""
    return _distinct(reaches(ctx, expr, scope) or [])


def _distinct(found: list[Reach]) -> list[Reach]:
    distinct: dict[tuple[type, object], Reach] = {}
    for reach in found:
        if reach.place is not None:
            distinct.setdefault((type(reach.value.value), reach.value.value), reach)
    return list(distinct.values()) if len(distinct) > 1 else []


def forwarded(ctx: ModuleContext, call: cst.Call, scope: Scope, name: str, default: Value) -> list[Reach] | None:
    """The values a keyword that `call` does not write can get through its one `**` argument: `**kw` forwarded
    from the enclosing function's `**kwargs` (what each caller in the project passes under `name`, `default`
    where one leaves it out), or a dict's entry (`**cfg`). Several values: the Reaches that differ (each with
    its call); one: it alone; None when unknown (no caller, a caller's own `**`, an unread dict)."""
    stars = [arg for arg in call.args if arg.star]
    if len(stars) != 1 or stars[0].star != "**":
        return None
    spread = stars[0].value
    bindings = ctx.bindings(spread.value, scope) if isinstance(spread, cst.Name) else []
    function = bindings[0].scope if len(bindings) == 1 and bindings[0].kind == "param" else None
    star = function.node.params.star_kwarg if function is not None else None
    if not isinstance(star, cst.Param) or star.name.value != spread.value:
        return _from_mapping(ctx, spread, scope, name, default)
    sites = project_callers(ctx, function)
    if not sites:
        return None  # `def make(**kw)` that nothing in the project calls: the callers are elsewhere
    found: list[Reach] = []
    for each in sites:
        there, site = each.ctx, each.site
        argument = next((arg.value for arg in site.call.args if arg.keyword is not None
                         and arg.keyword.value == name), None)
        call_text = f"`{there.code(site.call.func)}(...)` at {each.place}"
        if argument is None:
            if any(arg.star for arg in site.call.args):
                return None
            found.append(Reach(default).within(f"{call_text} passes no {name} through **{spread.value}", each.place))
            continue
        values = reaches(there, argument, site.scope)
        if values is None:
            return None
        found.extend(reach.within(f"{call_text} passes {name}={there.code(argument)} through **{spread.value}",
                                  each.place) for reach in values)
    return _distinct(found) or found[:1]


def _from_mapping(ctx: ModuleContext, spread: cst.BaseExpression, scope: Scope, name: str,
                  default: Value) -> list[Reach] | None:
    """`**cfg` where `cfg` holds dicts whose entries are known: their `name` entry, or `default` without one."""
    objects = configs.objects(ctx, spread, scope, 0)
    if not objects or any(obj.mapping is None for obj in objects):
        return None
    found: list[Reach] = []
    for obj in objects:
        got = configs.field(obj, name, 0)
        if got is None:
            return None
        found.extend([Reach(default)] if got is configs.ABSENT else got)
    return _distinct(found) or found[:1]


def taking(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope, wanted: object) -> Value | None:
    """`expr`'s value when it is `wanted`; or, when several values reach it (callers that pass different values)
    and one of them is `wanted`, that value, its trail naming the places that give the others. A flag that one
    call path sets is set on that path, whatever the others do; None when no path gives `wanted`."""
    value = resolve(ctx, expr, scope)
    if value is not None:
        return value if _same(value.value, wanted) else None
    if expr is None:
        return None
    found = alternatives(ctx, expr, scope)
    chosen = next((reach for reach in found if _same(reach.value.value, wanted)), None)
    if chosen is None:
        return None
    rest = [reach for reach in found if reach is not chosen]
    if all(reach.where is None or reach.where.startswith("the instance") for reach in rest):
        others = "other calls pass " + ", ".join(f"{reach.value.value!r} ({reach.place})" for reach in rest)
    else:  # a command-line flag: one value per run
        others = "it is " + ", ".join(f"{reach.value.value!r} in {reach.where}" for reach in rest)
    return Value(chosen.value.value, chosen.value.trail + (others,))


def _same(value: object, wanted: object) -> bool:
    return value == wanted and type(value) is type(wanted)


def _parameter_values(ctx: ModuleContext, name: str, binding: Binding, depth: int) -> list[Reach] | None:
    """One Reach per value each caller in the project gives (the default where a caller leaves it out), chosen at
    that call (or further up); the default alone (no place) when nothing calls the function; None when a
    caller's value is unknown."""
    default = resolve(ctx, binding.value, binding.scope, depth + 1) if binding.value is not None else None
    if default is not None:
        default = Value(default.value, (f"`{name}` defaults to {default.value!r} in `{binding.scope.name}()` at "
                                        f"{place(ctx, binding.node)}",) + default.trail)
    sites = each_project_caller(ctx, binding.scope) if depth < _MAX_DEPTH - 2 else iter(())
    first = next(sites, None)
    if first is None:
        return [Reach(default)] if default is not None else None
    found: list[Reach] = []
    for each in itertools.chain((first,), sites):  # up to the first caller whose value is unknown
        site, there = each.site, each.ctx
        argument = site.arguments.get(name)
        if argument is None and (not site.arguments.absent(name) or default is None):
            return None
        values = [Reach(default)] if argument is None else reaches(there, argument, site.scope, depth + 1)
        if values is None:
            return None
        call = f"`{there.code(site.call.func)}(...)` at {each.place}"
        does = f"leaves `{name}` at its default" if argument is None else f"passes {name}={there.code(argument)}"
        found.extend(reach.within(f"{call} {does}", each.place) for reach in values)
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
