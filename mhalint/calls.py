"""Which torch attention API a call reaches, and which argument is which.

Calls are recognised through the imports and through instances: `mha = nn.MultiheadAttention(...)` then
`mha(...)`; `self.attn = ...` in `__init__` then `self.attn(...)` in another method; `nn.ModuleList([...])` of
layers iterated or indexed; `super().__init__(...)` in a subclass of a torch class.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mhalint import torchapi
from mhalint.context import Binding, ModuleContext, Scope

PROJECT_PREFIX = "<module>."
_CONTAINERS = {"torch.nn.ModuleList", "torch.nn.Sequential", "copy.deepcopy", "list", "tuple"}
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Arguments:
    """A call's arguments mapped to parameter names. `opaque` means *args/**kwargs may supply any parameter."""

    by_name: dict[str, cst.Arg]
    opaque: bool

    def get(self, name: str) -> cst.BaseExpression | None:
        arg = self.by_name.get(name)
        return arg.value if arg is not None else None

    def absent(self, name: str) -> bool:
        """True only when the parameter is certainly not passed."""
        return name not in self.by_name and not self.opaque


def bind(call: cst.Call, signature: torchapi.Signature, skip: int = 0) -> Arguments:
    """Map positional and keyword arguments to the signature's names; `skip` drops leading positionals (self)."""
    by_name: dict[str, cst.Arg] = {}
    opaque = False
    position = -skip
    for arg in call.args:
        if arg.star:
            opaque = True
            if arg.star == "*":
                position = len(signature.params)  # positions after a *args are unknowable
            continue
        if arg.keyword is not None:
            by_name[arg.keyword.value] = arg
            continue
        if 0 <= position < len(signature.params) and signature.index(signature.params[position]) is not None:
            by_name[signature.params[position]] = arg
        position += 1
    return Arguments(by_name, opaque)


@dataclass(frozen=True)
class Construction:
    """Where a torch module is built: the constructor call and the scope its arguments are evaluated in."""

    api: str
    call: cst.Call
    scope: Scope
    via_super: bool = False

    @property
    def arguments(self) -> Arguments:
        return bind(self.call, torchapi.CONSTRUCTORS[self.api], skip=1 if self._explicit_init else 0)

    @property
    def _explicit_init(self) -> bool:
        """`nn.MultiheadAttention.__init__(self, ...)` passes self positionally."""
        return self.via_super and isinstance(self.call.func, cst.Attribute) and not _is_super_call(self.call.func.value)


def construction(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Construction | None:
    """The module a call constructs: a torch attention module (also `super().__init__(...)` in a subclass of
    one), or a class defined in this module (api `<module>.Name`), so that its instances can be followed too."""
    name = ctx.qualified_name(call.func, scope)
    if name in torchapi.CONSTRUCTORS:
        return Construction(name, call, scope)
    if name is not None and name.startswith(PROJECT_PREFIX) and name[len(PROJECT_PREFIX):] in ctx.classes:
        return Construction(name, call, scope)
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "__init__"):
        return None
    klass = ctx.class_of(scope)
    if klass is None:
        return None
    if _is_super_call(func.value):
        bases = [ctx.qualified_name(base, klass.parent) for base in klass.bases]
        torch_bases = [base for base in bases if base in torchapi.CONSTRUCTORS]
        if len(torch_bases) == 1 and len(bases) == 1:
            return Construction(torch_bases[0], call, scope, via_super=True)
        return None
    base = ctx.qualified_name(func.value, scope)
    if base in torchapi.CONSTRUCTORS:
        return Construction(base, call, scope, via_super=True)
    return None


def _is_super_call(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "super"


@dataclass(frozen=True)
class Target:
    """What a call reaches: a torch API, and the module construction behind it when it is a module's forward."""

    api: str
    arguments: Arguments
    construction: Construction | None = None


def call_target(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Target | None:
    """The torch attention API a call invokes: a function such as SDPA, or the forward of a known module."""
    name = ctx.qualified_name(call.func, scope)
    if name in torchapi.CALLS and name not in torchapi.CONSTRUCTORS:
        return Target(name, bind(call, torchapi.CALLS[name]))
    built = instance(ctx, call.func, scope)
    if built is None or built.via_super or built.api not in torchapi.CALLS:
        return None
    return Target(built.api, bind(call, torchapi.CALLS[built.api]), built)


@dataclass(frozen=True)
class CallSite:
    """A call of a project function or method, with its arguments bound to the callee's parameter names."""

    call: cst.Call
    scope: Scope
    arguments: Arguments


def callers(ctx: ModuleContext, function: Scope) -> list[CallSite]:
    """Where this module calls `function`: `name(...)` for a module function, `self.name(...)` for a method,
    and calls of the class's instances for `forward` (what `module(x)` runs)."""
    if not isinstance(function.node, cst.FunctionDef):
        return []
    klass = function.enclosing_class
    params = [p.name.value for p in (*function.node.params.posonly_params, *function.node.params.params)]
    signature = torchapi.Signature(tuple(params[1:] if klass is not None else params))
    sites = []
    for call, scope in ctx.calls():
        if _calls(ctx, call, scope, function, klass):
            sites.append(CallSite(call, scope, bind(call, signature)))
    return sites


def _calls(ctx: ModuleContext, call: cst.Call, scope: Scope, function: Scope, klass: Scope | None) -> bool:
    func = call.func
    if klass is None:
        return (isinstance(func, cst.Name) and func.value == function.name
                and ctx.qualified_name(func, scope) == PROJECT_PREFIX + function.name)
    if function.name == "forward":
        built = instance(ctx, func, scope)
        return built is not None and built.api == PROJECT_PREFIX + klass.name
    caller_class = ctx.class_of(scope)
    return (caller_class is klass and isinstance(func, cst.Attribute) and func.attr.value == function.name
            and isinstance(func.value, cst.Name) and func.value.value == _self_name(scope))


def _self_name(scope: Scope) -> str | None:
    """The `self` of the method a (possibly nested) function belongs to."""
    while scope is not None and scope.enclosing_class is None:
        scope = scope.parent
    return scope.self_name if scope is not None else None


def instance(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Construction | None:
    """The construction of the torch module `expr` evaluates to, when the code shows it unambiguously."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        return construction(ctx, expr, scope)
    if isinstance(expr, cst.Name):
        return _from_bindings(ctx, ctx.bindings(expr.value, scope), depth)
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == _self_name(scope):
        klass = ctx.class_of(scope)
        return _from_bindings(ctx, klass.attributes.get(expr.attr.value, []) if klass else [], depth)
    if isinstance(expr, cst.Subscript):
        return element(ctx, expr.value, scope, depth + 1)
    return None


def _from_bindings(ctx: ModuleContext, bindings: list[Binding], depth: int) -> Construction | None:
    """All bindings must agree on the API; the last one is taken as the construction to read arguments from."""
    found: list[Construction] = []
    for binding in bindings:
        if binding.value is None or binding.kind not in ("assign", "for"):
            return None
        if binding.kind == "for":
            built = element(ctx, binding.value, binding.scope, depth + 1)
        else:
            built = instance(ctx, binding.value, binding.scope, depth + 1)
        if built is None:
            return None
        found.append(built)
    if not found or any(f.api != found[0].api for f in found):
        return None
    return found[-1]


def element(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> Construction | None:
    """The module every element of a container holds: `nn.ModuleList([Layer(...) for _ in range(n)])`, a list
    literal of one kind of layer, `[layer] * n`, or a name bound to one of these."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        if ctx.qualified_name(expr.func, scope) not in _CONTAINERS or len(expr.args) != 1 or expr.args[0].star:
            return None
        return element(ctx, expr.args[0].value, scope, depth + 1)
    if isinstance(expr, cst.ListComp | cst.GeneratorExp):
        return instance(ctx, expr.elt, scope, depth + 1)
    if isinstance(expr, cst.List | cst.Tuple):
        built = [instance(ctx, e.value, scope, depth + 1) for e in expr.elements]
        if not built or any(b is None or b.api != built[0].api for b in built):
            return None
        return built[-1]
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):
        return element(ctx, expr.left, scope, depth + 1)
    if isinstance(expr, cst.Name | cst.Attribute):
        # a name bound to a container: resolve what it is bound to, then look inside
        bindings = _container_bindings(ctx, expr, scope)
        if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
            return element(ctx, bindings[0].value, bindings[0].scope, depth + 1)
    return None


def _container_bindings(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> list[Binding]:
    if isinstance(expr, cst.Name):
        return ctx.bindings(expr.value, scope)
    if isinstance(expr.value, cst.Name) and expr.value.value == _self_name(scope):
        klass = ctx.class_of(scope)
        return klass.attributes.get(expr.attr.value, []) if klass else []
    return []
