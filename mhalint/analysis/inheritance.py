"""Project classes that are torch attention modules by inheritance.

`class MyAttn(nn.MultiheadAttention)` is that API: its instances are built with torch's constructor (through the
class's own `__init__` when it has one) and run torch's forward unless a class on the way overrides it. Bases are
followed in this file and, through the project index, in the other files of the run, several levels deep.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalint import torchapi
from mhalint.context import ModuleContext, Scope
from mhalint.parse.lazy import cst

_MAX_LEVELS = 8
_HARMLESS = frozenset({"object", "torch.nn.Module", "abc.ABC", "typing.Generic"})


@dataclass(frozen=True)
class TorchClass:
    """What a project class inherits from torch. `inits` are the project `__init__`s on the way that take
    parameters of their own (nearest first; a pure `*args, **kwargs` pass-through is not one), each with its
    file's context; `overrides` the class whose `forward` replaces torch's, with its file's; `bound` the attributes the
    project classes set (they hide torch's); `unread` the code of a base beside torch's that cannot be read."""

    api: str
    inits: tuple[tuple[ModuleContext, Scope], ...] = ()
    overrides: tuple[ModuleContext, Scope] | None = None
    bound: frozenset[str] = frozenset()
    unread: str = ""


def torch_class(ctx: ModuleContext, klass: Scope | None, level: int = 0) -> TorchClass | None:
    """The torch attention class `klass` derives from, exactly one, or None. Memoised per module."""
    if klass is None or level > _MAX_LEVELS:
        return None
    memo = ctx.memo.setdefault("torch_class", {})
    if klass not in memo:
        memo[klass] = None  # a class that derives from itself finds nothing
        memo[klass] = _torch_class(ctx, klass, level)
    return memo[klass]


def _torch_class(ctx: ModuleContext, klass: Scope, level: int) -> TorchClass | None:
    reached: list[TorchClass] = []
    unread: list[str] = []
    for base in klass.bases:
        name = ctx.qualified_name(base, klass.parent)
        if name in torchapi.CONSTRUCTORS:
            reached.append(TorchClass(name))
            continue
        parent = project_class(ctx, base, klass.parent)
        if parent is not None:
            found = torch_class(*parent, level + 1)
            if found is not None:
                reached.append(found)
            elif any(method in parent[1].methods for method in ("__init__", "forward")):
                return None  # a project base of another kind takes part in building or calling it
        elif name not in _HARMLESS:
            unread.append(ctx.module.code_for_node(base))
    if len(reached) != 1:
        return None
    inherited = reached[0]
    init = klass.methods.get("__init__")
    own = ((ctx, init),) if init is not None and not _passes_through(init) else ()
    return TorchClass(inherited.api, own + inherited.inits,
                      (ctx, klass) if "forward" in klass.methods else inherited.overrides,
                      inherited.bound | frozenset(klass.attributes),
                      ", ".join(unread) or inherited.unread)


def project_class(ctx: ModuleContext, expr: cst.BaseExpression,
                  scope: Scope | None) -> tuple[ModuleContext, Scope] | None:
    """The class a name refers to when the project defines it: in this file, or imported from another file of
    the run (`from .layers import Base`)."""
    name = ctx.qualified_name(expr, scope)
    if name is not None and name.startswith("<module>.") and name[len("<module>."):] in ctx.classes:
        return ctx, ctx.classes[name[len("<module>."):]]
    if not isinstance(expr, cst.Name) or ctx.names is None:
        return None
    memo = ctx.memo.setdefault("project_class", {})
    if expr.value not in memo:
        found = ctx.names.imported_class(ctx.path, expr.value)
        if found is not None and not (ctx.names.may_name_attention(found[0])
                                      and ctx.names.may_derive_attention(*found)):
            found = None  # a file that never names torch's attention classes, or a class whose bases reach none
        other = ctx.names.context(found[0], ctx.limits) if found is not None else None
        klass = other.classes.get(found[1]) if other is not None else None
        memo[expr.value] = (other, klass) if klass is not None else None
    if memo[expr.value] is not None:
        ctx.read_project = True  # the answer depends on that file (the cache records it)
    return memo[expr.value]


def _passes_through(init: Scope) -> bool:
    """`def __init__(self, *args, **kwargs): super().__init__(*args, **kwargs)`: the caller's arguments reach
    the base's constructor as written."""
    params = init.node.params
    if params.posonly_params or len(params.params) != 1 or params.kwonly_params:
        return False
    stars = {star.name.value: "*" if star is params.star_arg else "**"
             for star in (params.star_arg, params.star_kwarg) if isinstance(star, cst.Param)}
    for statement in init.node.body.body:
        for small in getattr(statement, "body", ()):
            call = small.value if isinstance(small, cst.Expr) else None
            if isinstance(call, cst.Call) and is_super_init(call):
                return bool(call.args) and all(
                    isinstance(arg.value, cst.Name) and stars.get(arg.value.value) == arg.star for arg in call.args)
    return False


def is_super_init(call: cst.Call) -> bool:
    """`super().__init__(...)`."""
    func = call.func
    return isinstance(func, cst.Attribute) and func.attr.value == "__init__" and is_super(func.value)


def is_super(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "super"
