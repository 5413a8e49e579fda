"""Following a value forward: the calls it reaches as an argument, and the route it takes there.

A rule that asks where a value ends up (MHA006: does this tiled mask reach an attention's `attn_mask`?) gives a
`stop` callback, asked at each call that takes the value; the follower goes on through wrappers that keep the
value's layout (`.to(device)`, `~m`, `m | other`), assignments to names and `self.` attributes (read in any
method of the class), a function's return to its callers, and into the project functions and modules a call
runs. Each step adds a sentence to the route, ready to be a finding's evidence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.calls import PROJECT_PREFIX, UNKNOWN_CALLABLE, bind, callers, instance, project_forward
from mhalint.analysis.vocabulary import KEEPS_AXES
from mhalint.context import ModuleContext, Scope
from mhalint.finding import shorten
from mhalint.parse.lazy import cst

_MAX_DEPTH = 12


@dataclass(frozen=True)
class Arrival:
    """A call that takes the followed value as the argument `arg`."""

    call: cst.Call
    arg: cst.Arg
    scope: Scope
    route: tuple[str, ...]


class Follower:
    """`stop(arrival)` gives the results at a call (a list, perhaps empty, that ends the path there), or None to
    go on into the project code the call runs."""

    def __init__(self, ctx: ModuleContext, stop: Callable[[Arrival], list | None]):
        self.ctx = ctx
        self.stop = stop

    def follow(self, expr: cst.BaseExpression, scope: Scope) -> list:
        """What `stop` gives at every call the value of `expr` (evaluated in `scope`) reaches."""
        return self._follow(expr, scope, (), 0, set())

    def _follow(self, expr: cst.BaseExpression, scope: Scope, route: tuple[str, ...], depth: int,
                seen: set) -> list:
        if depth > _MAX_DEPTH:
            return []
        top = self._carrier(expr)
        parent = self.ctx.parent(top)
        ctx = self.ctx
        if isinstance(parent, cst.Arg) and parent.value is top:
            call = self.ctx.parent(parent)
            if isinstance(call, cst.Call) and any(a is parent for a in call.args):
                return self._into_call(call, parent, scope, route, depth, seen)
            return []
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is top:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            found: list = []
            for target in targets:
                step = route + (f"assigned to `{ctx.code(target)}` at line {ctx.line(parent)}" if not route else
                                f"`{ctx.code(target)} = {shorten(ctx.code(top))}` at line {ctx.line(parent)}",)
                if isinstance(target, cst.Name):
                    found += self._follow_name(target.value, parent, scope, step, depth, seen)
                elif (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                      and target.value.value == scope.self_name):
                    found += self._follow_attribute(target.attr.value, scope, step, depth, seen)
            return found
        if isinstance(parent, cst.Return) and isinstance(scope.node, cst.FunctionDef):
            found = []
            for site in callers(ctx, scope):
                step = route + (f"returned by `{scope.name}()` to the call at line {ctx.line(site.call)}",)
                found += self._follow(site.call, site.scope, step, depth + 1, seen)
            return found
        return []

    def _carrier(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """The outermost expression around `expr` that still holds its layout: `.to(device)`, `.bool()`, `~m`,
        `m < 0.5`, `m | other`, `a if c else m`."""
        current = expr
        while True:
            parent = self.ctx.parent(current)
            if isinstance(parent, cst.Attribute) and parent.value is current and parent.attr.value in KEEPS_AXES:
                call = self.ctx.parent(parent)
                if isinstance(call, cst.Call) and call.func is parent:
                    current = call
                    continue
                return current
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.BitInvert):
                current = parent
            elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
                current = parent if isinstance(parent, cst.Comparison) else self.ctx.parent(parent)
            elif isinstance(parent, cst.BinaryOperation) and not isinstance(parent.operator, cst.MatrixMultiply):
                current = parent
            elif isinstance(parent, cst.IfExp) and parent.test is not current:
                current = parent
            else:
                return current

    def _follow_name(self, name: str, binder: cst.CSTNode, scope: Scope, route, depth, seen) -> list:
        key = (id(binder), name)
        if key in seen:
            return []
        seen.add(key)
        found: list = []
        bindings = self.ctx.bindings(name, scope)
        mine = next((b for b in bindings if b.node is binder), None)
        for use in dataflow.loads(self.ctx, scope).get(name, []):
            if mine is not None and mine not in dataflow.reaching(self.ctx, bindings, use):
                continue
            found += self._follow(use, scope, route, depth + 1, seen)
        return found

    def _follow_attribute(self, attribute: str, scope: Scope, route, depth, seen) -> list:
        klass = self.ctx.class_of(scope)
        if klass is None or (id(klass), attribute) in seen:
            return []
        seen.add((id(klass), attribute))
        found: list = []
        for read, method in dataflow.attribute_reads(self.ctx, klass, attribute):
            found += self._follow(read, method, route, depth + 1, seen)
        return found

    def _into_call(self, call: cst.Call, arg: cst.Arg, scope: Scope, route, depth, seen) -> list:
        ctx = self.ctx
        stopped = self.stop(Arrival(call, arg, scope, route))
        if stopped is not None:
            return stopped
        how = "as " + (f"{arg.keyword.value}=" if arg.keyword is not None else "a positional argument")
        found: list = []
        for callee, label, guessed in self._callees(call, arg, scope):
            params = callee.node.params
            names = [p.name.value for p in (*params.posonly_params, *params.params)]
            if callee.enclosing_class is not None and names:
                names = names[1:]
            bound = bind(call, torchapi.Signature(tuple(names)))
            parameter = next((p for p, a in bound.by_name.items() if a is arg), None)
            if parameter is None or parameter not in callee.params:
                continue
            note = " (the only class in this file whose forward takes it there)" if guessed else ""
            step = route + (f"passed {how} to `{shorten(ctx.code(call.func))}(...)` at line {ctx.line(call)}, "
                            f"parameter `{parameter}` of `{label}`{note}",)
            found += self._follow_name(parameter, callee.params[parameter], callee, step, depth + 1, seen)
        return found

    def _callees(self, call: cst.Call, arg: cst.Arg, scope: Scope) -> list[tuple[Scope, str, bool]]:
        """The project functions a call runs: a module function, `self.method`, or the forward of a module
        instance; failing those, the one class in this file whose forward takes this argument by its name."""
        ctx = self.ctx
        func = call.func
        name = ctx.qualified_name(func, scope)
        if isinstance(func, cst.Name) and name == PROJECT_PREFIX + func.value and func.value in ctx.functions:
            return [(ctx.functions[func.value], f"{func.value}()", False)]
        klass = ctx.class_of(scope)
        if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and klass is not None
                and func.value.value == scope.self_name and func.attr.value in klass.methods
                and func.attr.value not in klass.attributes):
            return [(klass.methods[func.attr.value], f"{klass.name}.{func.attr.value}()", False)]
        if name is not None and not name.startswith(PROJECT_PREFIX) and "." in name:
            return []  # a library call (torch.cat, F.pad, ...)
        built = instance(ctx, func, scope)
        forward = project_forward(ctx, built)
        if forward is not None:
            return [(forward, f"{forward.parent.name}.forward()", False)]
        if built is not None and built.api.startswith(PROJECT_PREFIX):
            return []
        if built is not None and built.api != UNKNOWN_CALLABLE:
            return []
        # An instance mhalint cannot trace (built by a helper from another file): match by parameter name.
        wanted = arg.keyword.value if arg.keyword is not None else (
            arg.value.value if isinstance(arg.value, cst.Name) else None)
        if wanted is None or not isinstance(func, (cst.Name, cst.Attribute)):
            return []
        candidates = []
        for cls, names in _forwards_taking(ctx, wanted):
            forward = cls.methods["forward"]
            if forward is ctx.scope_of(function_of(self.ctx, call)):
                continue
            bound = bind(call, torchapi.Signature(tuple(names)))
            if any(a is arg for p, a in bound.by_name.items() if p == wanted):
                candidates.append((forward, f"{cls.name}.forward()", True))
        return candidates if len(candidates) == 1 else []


def _forwards_taking(ctx: ModuleContext, name: str) -> list[tuple[Scope, list[str]]]:
    """(class, its forward's positional parameter names after self) of the classes whose forward has a parameter
    `name`, in the order of `ctx.classes`; indexed once per module, so that each call of an untraceable instance
    does not pass over every class of a file of many."""
    index = ctx.memo.get("forwards_by_parameter")
    if index is None:
        index = ctx.memo["forwards_by_parameter"] = {}
        for cls in ctx.classes.values():
            forward = cls.methods.get("forward")
            if forward is not None:
                params = forward.node.params
                names = [p.name.value for p in (*params.posonly_params, *params.params)][1:]
                for parameter in dict.fromkeys(names):
                    index.setdefault(parameter, []).append((cls, names))
    return index.get(name, [])


def function_of(ctx: ModuleContext, node: cst.CSTNode) -> cst.CSTNode:
    """The innermost function holding `node`, or the module outside any."""
    current = node
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        current = ctx.parent(current)
    return current if current is not None else ctx.module
