"""Why no call of a module is found, in the project's terms: where its construction goes.

A module whose calls the analyses cannot find is either never called (built and stored, then only inspected:
`print(attn)`, `attn.parameters()`, `if self.attn is not None`), handed to code they do not follow
(`Model(custom_encoder=layer)`), or called in a way they cannot pair with it (`model.block.attn(x)`). A warning
says which, instead of "no call is found".
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.vocabulary import RETURNS_MODULE
from mhalint.context import ModuleContext
from mhalint.finding import shorten
from mhalint.lazy import cst
from mhalint.walk import walk

# Builtins that look at a module without running it.
_INSPECTORS = frozenset({"print", "isinstance", "len", "repr", "str", "type", "id", "hasattr", "getattr", "vars",
                         "dir", "sum"})
# nn.Module methods that do not run forward and give back something other than the module.
_INSPECTING_METHODS = frozenset({
    "parameters", "named_parameters", "buffers", "named_buffers", "children", "named_children", "modules",
    "named_modules", "state_dict", "load_state_dict", "apply", "zero_grad", "register_forward_hook",
    "register_forward_pre_hook", "register_full_backward_hook", "register_backward_hook", "extra_repr",
    "_reset_parameters", "generate_square_subsequent_mask"})

# The attributes of torch's modules that hold modules which run the attention (`model.encoder`, `layer.self_attn`).
_PARTS = frozenset({"layers", *(name for parts in torchapi.SUBMODULES.values() for name in parts)})


@dataclass(frozen=True)
class Unpaired:
    """What a headline says is missing (`phrase`) and the evidence line behind it."""

    phrase: str
    sentence: str


def why_uncalled(ctx: ModuleContext, call: cst.Call) -> Unpaired | None:
    """Where the module built by `call` goes when no call of it is found; None when that cannot be said."""
    node, parent = call, ctx.parent(call)
    while isinstance(parent, cst.IfExp):
        node, parent = parent, ctx.parent(parent)
    if isinstance(parent, cst.Arg):
        return _handed(ctx, ctx.parent(parent), parent)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 or isinstance(parent, cst.AnnAssign):
        target = parent.targets[0].target if isinstance(parent, cst.Assign) else parent.target
        if isinstance(target, cst.Name):
            return _stored(ctx, call, target.value, _name_loads(ctx, target.value, node))
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            name = target.attr.value
            return _stored(ctx, call, f"{target.value.value}.{name}", _attribute_loads(ctx, name), word=name)
    return None


def _handed(ctx: ModuleContext, call: cst.Call, arg: cst.Arg) -> Unpaired:
    written = f"{shorten(ctx.code(call.func), 40)}({arg.keyword.value}=...)" if arg.keyword is not None else \
        f"{shorten(ctx.code(call.func), 40)}(...)"
    return Unpaired(f"it goes to `{written}` (line {ctx.line(call)}), not followed",
                    f"the module is passed to `{written}` at line {ctx.line(call)}: no call of it is found through "
                    f"that")


def _stored(ctx: ModuleContext, built: cst.Call, shown: str, loads: list[cst.CSTNode] | None,
            word: str = "") -> Unpaired | None:
    """A module stored in a name or attribute: never called when every read only inspects it; else the first
    read that hands it on or calls it in a way not paired with it."""
    if loads is None:
        return None
    for load in loads:
        use = _use(ctx, load, built)
        if use is not None:
            return Unpaired(f"`{shown}` {use[0]} (line {ctx.line(use[1])})",
                            f"`{shown}` {use[0]} at line {ctx.line(use[1])}: no call of it is found through that")
    where = _nowhere_else(ctx, shown.rpartition(".")[2], word)
    return Unpaired(f"`{shown}` is never called in {where}",
                    f"`{shown}` is only built" + (" and inspected" if loads else "") + f": nothing in {where} calls it")


def _nowhere_else(ctx: ModuleContext, name: str, word: str) -> str:
    """"the project" when no other file of the project can call it (an attribute's name appears in none; a
    module-level name is imported by none), else, or when the project is this file alone, "this file"."""
    project = ctx.project
    if project is None:
        return "this file"
    ctx.read_project = True  # the answer depends on the other files
    if project.paths == [os.path.abspath(ctx.path)]:
        return "this file"  # a project of this file alone (`mhalint check bad.py` with no project root)
    if word:
        return "this file" if project.mentions(word, ctx.path) else "the project"
    return "this file" if project.importers(ctx.path, name) else "the project"


def _use(ctx: ModuleContext, load: cst.CSTNode, built: cst.Call) -> tuple[str, cst.CSTNode] | None:
    """How a read uses the module, when it may run it or hand it on: (what it does, the node); None for a read
    that only inspects it. A submodule its constructor was handed (`custom_encoder=`) may be another module."""
    parent = ctx.parent(load)
    if isinstance(parent, cst.Attribute) and parent.value is load:
        method = parent.attr.value
        holder = ctx.parent(parent)
        called = isinstance(holder, cst.Call) and holder.func is parent
        if not called:  # `attn.in_proj_weight` inspects it; `model.encoder` hands a part of it on
            return (f"gives its `.{method}` away", parent) if method in _PARTS else None
        if method in _INSPECTING_METHODS:
            return None
        if method in RETURNS_MODULE and isinstance(ctx.parent(holder), cst.Expr):
            return None
        custom = torchapi.CUSTOM_SUBMODULES.get(method)
        if any(arg.keyword is not None and arg.keyword.value == custom for arg in built.args):
            return f"calls an `.{method}` that may be its `{custom}`", holder
        return f"is used as `{shorten(ctx.code(holder), 40)}`", holder
    if isinstance(parent, cst.Call) and parent.func is load:
        return "is called in a way not paired with it", parent
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in _INSPECTORS:
            return None
        return f"is passed to `{shorten(ctx.code(call.func), 40)}`", call
    if isinstance(parent, cst.Comparison | cst.If | cst.Assert | cst.BooleanOperation | cst.UnaryOperation):
        return None  # `if self.attn is not None`, `assert attn`
    return "is handed on", load


def _name_loads(ctx: ModuleContext, name: str, value: cst.BaseExpression) -> list[cst.CSTNode] | None:
    """The reads of the binding of `name` whose value is `value`."""
    for scope in ctx.scopes.values():
        for binding in scope.bindings.get(name, ()):
            if binding.value is value:
                return list(dataflow.uses(ctx, binding))
    return None


def _attribute_loads(ctx: ModuleContext, name: str) -> list[cst.CSTNode]:
    """Every read of an attribute `name` in the module, of any object (`self.attn`, `layer.attn`)."""
    index = ctx.memo.get("attribute_loads")
    if index is None:
        index = ctx.memo["attribute_loads"] = {}

        def enter(node) -> bool:
            if isinstance(node, cst.Attribute):
                index.setdefault(node.attr.value, []).append(node)
            return not isinstance(node, cst.Import | cst.ImportFrom)  # `import a.b` reads no attribute

        walk(ctx.module, enter, lambda node: None)
    return [node for node in index.get(name, ()) if not _stored_to(ctx, node)]


def _stored_to(ctx: ModuleContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    return isinstance(parent, cst.AssignTarget | cst.AugAssign | cst.AnnAssign) and (
        getattr(parent, "target", None) is node)
