"""Following a value forward: where it goes, and the route it takes there.

A rule that asks where a value ends up (MHA006: does this tiled mask reach an attention's `attn_mask`? MHA012: how
are these averaged weights read?) follows it with a `Follower`. The follower goes on through the wrappers that
keep the value (`carrier`: `.to(device)`, `~m`, `m | other`), assignments to names and `self.` attributes (read in
any method of the class), a function's return to its callers, and into the project functions and modules a call
runs; an element of a tuple (`out, weights = attn(...)`, `return x, mask`) is followed as such until it is taken
out. Each step adds a sentence to the route, ready to be a finding's evidence. A rule says what it wants where the
value arrives: `stop` at a call that takes it, `used` at any other use, `bound` where a name is given to it and
`returned` where a function gives it back; each gives a list of results, which the follower gathers.
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
from mhalint.parse.literals import literal


@dataclass(frozen=True)
class Arrival:
    """A call that takes the followed value as the argument `arg`."""

    call: cst.Call
    arg: cst.Arg
    scope: Scope
    route: tuple[str, ...]


@dataclass(frozen=True)
class Reached:
    """Where the followed value (`value`: the outermost expression that still holds it) is used by `parent`,
    neither a call's argument, an assignment nor a `return`."""

    value: cst.BaseExpression
    parent: cst.CSTNode
    scope: Scope
    route: tuple[str, ...]
    depth: int


class Follower:
    """Follows values forward in one module. The hooks below do nothing by default; a rule gives `stop` to the
    constructor or overrides them."""

    max_depth = 12

    def __init__(self, ctx: ModuleContext, stop: Callable[[Arrival], list | None] | None = None):
        self.ctx = ctx
        if stop is not None:
            self.stop = stop

    # ---- the hooks ----
    def stop(self, arrival: Arrival) -> list | None:
        """The results at a call that takes the value (a list, perhaps empty, that ends the path there), or None
        to go on into the project code the call runs."""
        return None

    def used(self, reached: Reached) -> list:
        """The results at a use that is not a call's argument, an assignment or a `return`."""
        return []

    def bound(self, name: str, statement: cst.CSTNode, route: tuple[str, ...]) -> list:
        """The results of the value being named `name` (a local, a parameter, or `self.name`) by `statement`."""
        return []

    def returned(self, value: cst.BaseExpression, function: Scope, element: int | None,
                 route: tuple[str, ...]) -> list:
        """The results of `function`'s `return` naming the value: alone (`element` None) or as item `element` of
        the tuple it returns (a tuple that holds the value and is returned whole is followed into the callers
        without asking)."""
        return []

    def carrier(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """The outermost expression around `expr` that still holds the value: `.to(device)`, `.bool()`, `~m`,
        `m < 0.5`, `m | other`, `a if c else m`."""
        ctx = self.ctx
        current = expr
        while True:
            parent = ctx.parent(current)
            if isinstance(parent, cst.Attribute) and parent.value is current and parent.attr.value in KEEPS_AXES:
                call = ctx.parent(parent)
                if isinstance(call, cst.Call) and call.func is parent:
                    current = call
                    continue
                return current
            if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.BitInvert):
                current = parent
            elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
                current = parent if isinstance(parent, cst.Comparison) else ctx.parent(parent)
            elif isinstance(parent, cst.BinaryOperation) and not isinstance(parent.operator, cst.MatrixMultiply):
                current = parent
            elif isinstance(parent, cst.IfExp) and parent.test is not current:
                current = parent
            else:
                return current

    def assigned_step(self, target: cst.BaseExpression, statement: cst.CSTNode, value: cst.BaseExpression,
                      route: tuple[str, ...]) -> str:
        """The route's sentence for the value assigned to `target`."""
        ctx = self.ctx
        if not route:
            return f"assigned to `{ctx.code(target)}` at line {ctx.line(statement)}"
        return f"`{ctx.code(target)} = {shorten(ctx.code(value))}` at line {ctx.line(statement)}"

    # ---- the walk ----
    def follow(self, expr: cst.BaseExpression, scope: Scope, element: int | None = None) -> list:
        """What the hooks give along every path the value of `expr` (evaluated in `scope`; with `element`, item
        `element` of the tuple `expr` evaluates to) takes."""
        return self._follow(expr, scope, (), 0, set(), element)

    def _follow(self, expr: cst.BaseExpression, scope: Scope, route: tuple[str, ...], depth: int, seen: set,
                element: int | None = None) -> list:
        if depth > self.max_depth or (id(expr), element) in seen:
            return []
        seen.add((id(expr), element))
        ctx = self.ctx
        top = self.carrier(expr) if element is None else expr
        parent = ctx.parent(top)
        if isinstance(parent, cst.Return) and isinstance(scope.node, cst.FunctionDef):
            found = self.returned(top, scope, None, route) if element is None else []
            return found + self._to_callers(scope, element, route, depth, seen)
        if isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is top:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            if element is not None:
                return self._item_assigned(targets, parent, scope, element, route, depth, seen)
            return [found for target in targets
                    for found in self._assigned(target, parent, top, scope, route, depth, seen)]
        if element is not None:
            taken = _item(parent, top, element)
            return self._follow(parent, scope, route, depth + 1, seen) if taken else []
        if isinstance(parent, cst.Arg) and parent.value is top:
            call = ctx.parent(parent)
            if isinstance(call, cst.Call) and any(a is parent for a in call.args):
                return self._into_call(call, parent, scope, route, depth, seen)
            return []
        if isinstance(parent, cst.Element) and isinstance(ctx.parent(parent), cst.Tuple):
            group = ctx.parent(parent)
            holder = ctx.parent(group)
            if isinstance(holder, cst.Return) and isinstance(scope.node, cst.FunctionDef) \
                    and not any(isinstance(e, cst.StarredElement) for e in group.elements):
                position = next(i for i, e in enumerate(group.elements) if e is parent)
                return self.returned(top, scope, position, route) + self._to_callers(scope, position, route, depth,
                                                                                     seen)
        return self.used(Reached(top, parent, scope, route, depth))

    def _to_callers(self, function: Scope, element: int | None, route, depth: int, seen: set) -> list:
        """The value returned by `function` (or the tuple holding it as item `element`), at each of its callers in
        this module."""
        found: list = []
        for site in callers(self.ctx, function):
            step = route + (f"returned by `{function.name}()` to the call at line {self.ctx.line(site.call)}",)
            found += self._follow(site.call, site.scope, step, depth + 1, seen, element)
        return found

    def _item_assigned(self, targets: list[cst.BaseExpression], statement: cst.CSTNode, scope: Scope, element: int,
                  route, depth: int, seen: set) -> list:
        """A tuple assigned: unpacked, its item `element` goes to the matching target; named, it is followed as
        a tuple still."""
        if len(targets) != 1:
            return []
        target = targets[0]
        if isinstance(target, cst.Tuple | cst.List):
            elements = target.elements
            if element < len(elements) and not any(isinstance(e, cst.StarredElement) for e in elements):
                return self._assigned(elements[element].value, statement, None, scope, route, depth, seen)
            return []
        if isinstance(target, cst.Name):
            binding = next((b for b in self.ctx.bindings(target.value, scope) if b.node is statement), None)
            return [found for load in (dataflow.uses(self.ctx, binding) if binding is not None else [])
                    for found in self._follow(load, scope, route, depth + 1, seen, element)]
        return []

    def _assigned(self, target: cst.BaseExpression, statement: cst.CSTNode, value: cst.BaseExpression | None,
                  scope: Scope, route, depth: int, seen: set) -> list:
        """The value bound to `target` (a name or `self.x`; `value` the expression assigned, None when it is an
        item of the tuple assigned): the `bound` hook, then the reads of that binding."""
        if isinstance(target, cst.Name):
            name = target.value
            if name == "_":
                return []
            step = route + (self.assigned_step(target, statement, value if value is not None else target, route),)
            return self.bound(name, statement, step) + self._follow_name(name, statement, scope, step, depth, seen)
        if (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                and target.value.value == scope.self_name):
            step = route + (self.assigned_step(target, statement, value if value is not None else target, route),)
            return self.bound(target.attr.value, statement, step) + self._follow_attribute(
                target.attr.value, scope, step, depth, seen)
        return []

    def _follow_name(self, name: str, binder: cst.CSTNode, scope: Scope, route, depth: int, seen: set) -> list:
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

    def _follow_attribute(self, attribute: str, scope: Scope, route, depth: int, seen: set) -> list:
        klass = self.ctx.class_of(scope)
        if klass is None or (id(klass), attribute) in seen:
            return []
        seen.add((id(klass), attribute))
        found: list = []
        for read, method in dataflow.attribute_reads(self.ctx, klass, attribute):
            found += self._follow(read, method, route, depth + 1, seen)
        return found

    def _into_call(self, call: cst.Call, arg: cst.Arg, scope: Scope, route, depth: int, seen: set) -> list:
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
            found += self.bound(parameter, call, step)
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


def _item(parent: cst.CSTNode, tuple_value: cst.BaseExpression, element: int) -> bool:
    """Is `parent` the subscript `tuple_value[element]`?"""
    if not (isinstance(parent, cst.Subscript) and parent.value is tuple_value and len(parent.slice) == 1
            and parent.slice[0].comma == cst.MaybeSentinel.DEFAULT):
        return False
    inner = parent.slice[0].slice
    return isinstance(inner, cst.Index) and isinstance(inner.value, cst.Integer) and literal(inner.value) == element


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
