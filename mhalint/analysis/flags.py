"""Branches a call cannot take: a test of a parameter whose value is fixed where the function runs.

`if return_attn_weights: return out, weights` in a layer that the stack calls without that argument (default
False), or `if transpose_swap: src = src.flatten(2).permute(2, 0, 1)` in an encoder whose every caller in the
project leaves it out, never runs there: what it binds or returns reaches nothing. The value is what the call being
followed passes (a literal, or a parameter of its caller fixed in turn), the default where it passes nothing (and
no `*args`/`**kwargs` could), or else what every caller in the project passes (analysis/values.py); anything
else is unknown and every branch stays possible. The tests read are those `branches.guards` gives.
"""

from __future__ import annotations

from mhalint.analysis import branches
from mhalint.analysis.values import resolve
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst

# A call being followed into a project function: (the function, the call's arguments bound to its parameters,
# the scope the arguments are read in).
Frame = "tuple[Scope, Arguments, Scope]"


class Frames(list):
    """The calls being followed (a Frame each, innermost last). While `asked` is a set, it collects the functions
    whose frame a reading looked for, found or not: what its answer depends on (tensors.ShapeReader memoises
    answers by it)."""

    asked: set | None = None


_UNKNOWN = object()
_MAX_DEPTH = 8


def live(ctx: ModuleContext, node: cst.CSTNode, scope: Scope, frames: Frames) -> bool:
    """Can `node` (in function `scope`) run, given the values its tests of the function's parameters have?"""
    for fact in branches.guards(ctx, node, scope):
        binding = fact.subject[1] if fact.subject[0] == "param" else None
        if binding is None or binding.scope is not scope:
            continue
        value = _parameter(ctx, binding, frames, 0)
        if value is not _UNKNOWN and branches.excludes(
                frozenset({fact}), frozenset({branches.Fact(fact.subject, branches.VALUE, frozenset({value}))})):
            return False
    return True


def _parameter(ctx: ModuleContext, binding: Binding, frames: Frames, depth: int):
    if frames.asked is not None:
        frames.asked.add(binding.scope)
    for function, arguments, caller in reversed(frames):
        if function is binding.scope:
            argument = arguments.get(binding.name)
            if argument is not None:
                return _value(ctx, argument, caller, frames, depth + 1)
            default = binding.node.default if isinstance(binding.node, cst.Param) else None
            around = function.parent or function  # where the default is evaluated
            return _UNKNOWN if arguments.opaque or default is None else _value(ctx, default, around, frames, depth + 1)
    memo = ctx.memo.setdefault("flag_values", {})
    if binding not in memo:
        found = resolve(ctx, binding.node.name, binding.scope) if isinstance(binding.node, cst.Param) else None
        memo[binding] = found.value if found is not None and _literal(found.value) else _UNKNOWN
    return memo[binding]


def _value(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, frames: Frames, depth: int):
    """A literal argument, or a parameter of the caller fixed in turn."""
    if depth > _MAX_DEPTH:
        return _UNKNOWN
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
        if len(bindings) == 1 and bindings[0].kind == "param":
            return _parameter(ctx, bindings[0], frames, depth)
    found = resolve(ctx, expr, scope)
    return found.value if found is not None and _literal(found.value) else _UNKNOWN


def _literal(value) -> bool:
    return value is None or isinstance(value, bool | int | float | str)

