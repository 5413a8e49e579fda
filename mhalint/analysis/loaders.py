"""Which `DataLoader` a loop reads, and what makes its batches: torch's default collate or a project `collate_fn`.

Training code rarely builds its loader beside the loop that reads it: a factory returns it (`load_dataset(...)` in
another file), a setup function returns it in a tuple (`train_dl, valid_dl, vocab = get_data(opts)`), a parameter
receives it (`train(model, train_dl)`). The loader is followed through those, so that the shape reader can say
what the loop's items are: the samples stacked on a new first axis (the default collate), or what the project's
collate function returns (`pad_sequence(batch)`: sequence-first).
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalint.analysis.calls import returned
from mhalint.analysis.sites import function_called, function_callers
from mhalint.context import ModuleContext, Scope
from mhalint.parse.lazy import cst

DATA_LOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
_MAX_DEPTH = 6  # names, parameters and functions followed up to the DataLoader


@dataclass(frozen=True)
class Loader:
    ctx: ModuleContext  # the file the `DataLoader(...)` call is in
    call: cst.Call
    collate: Scope | None  # the project function given as `collate_fn`; None for torch's default collate


def loader(ctx: ModuleContext, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> Loader | None:
    """The `DataLoader(...)` that `expr` holds: the call itself, a name bound to it once, a parameter every caller
    in this file fills with one, or what a project function returns (element `index` of a returned tuple, for a
    target of an unpacking); None when it cannot be named or batches in a way not read (`batch_size=None`, a
    `collate_fn` that is not a project function, `**kwargs`)."""
    if expr is None or depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
        if len(bindings) != 1:
            return None
        binding = bindings[0]
        if binding.kind == "param":
            return _passed(ctx, binding.name, binding.scope, depth)
        if binding.kind == "assign":
            return loader(ctx, binding.value, binding.scope, depth + 1)
        if binding.kind == "unpack" and binding.index is not None and isinstance(binding.value, cst.Call):
            return _returned(ctx, binding.value, binding.scope, binding.index, depth)
        return None
    if not isinstance(expr, cst.Call):
        return None
    if ctx.qualified_name(expr.func, scope) in DATA_LOADERS:
        return _built(ctx, expr, scope)
    return _returned(ctx, expr, scope, None, depth)


def _built(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Loader | None:
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    batch_size = keywords.get("batch_size")
    if any(arg.star for arg in call.args) or (isinstance(batch_size, cst.Name) and batch_size.value == "None"):
        return None
    if "collate_fn" not in keywords:
        return Loader(ctx, call, None)
    collate = keywords["collate_fn"]
    bindings = ctx.bindings(collate.value, scope) if isinstance(collate, cst.Name) else []
    function = ctx.scope_of(bindings[0].node) if len(bindings) == 1 and bindings[0].kind == "def" else None
    return Loader(ctx, call, function) if function is not None else None


def _passed(ctx: ModuleContext, name: str, function: Scope, depth: int) -> Loader | None:
    """`def train(model, loader): for x, y in loader: ...` called as `train(model, DataLoader(...))`, in this file
    or one that imports it: the loader every call of the function passes (the first one's, to cite), or None if
    any caller passes something else or none calls it."""
    found = [loader(site.ctx, site.site.arguments.get(name), site.site.scope, depth + 1)
             for site in function_callers(ctx, function)]
    return _agreed(found)


def _returned(ctx: ModuleContext, call: cst.Call, scope: Scope, index: int | None, depth: int) -> Loader | None:
    """The loader a project function returns (element `index` of the tuple it returns), in this file or in the
    file of the run it is imported from: every `return` must give one that batches the same way."""
    callee = function_called(ctx, call, scope)
    if callee is None:
        return None
    home, function = callee
    values = returned(function)
    if index is not None:
        values = [value.elements[index].value if isinstance(value, cst.Tuple) and index < len(value.elements)
                  and not isinstance(value.elements[index], cst.StarredElement) else None for value in values]
    found = [loader(home, value, function, depth + 1) for value in values]
    return _agreed(found)


def _agreed(found: list[Loader | None]) -> Loader | None:
    """The first loader (to cite) where every path found one and all batch the same way; else None."""
    return found[0] if found and all(found) and len({one.collate for one in found}) == 1 else None
