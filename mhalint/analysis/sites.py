"""The call sites of a project function in the whole run: this file's, and for a class's `__init__` or `forward`,
the calls in the project's other files that import the class. A parameter's values come from all of them.

Each site carries the context it must be read in and how a message names its place (`line 12`, `train.py:12`).
The other files are found through the project index (analysis/project.py) and parsed at most once per process
while they stay among its kept trees; the sites of a function are computed once per module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

from mhalint.analysis import dataflow
from mhalint.analysis.calls import (
    PROJECT_PREFIX,
    Arguments,
    CallSite,
    arguments_for,
    callers,
    project_function,
    running_calls,
)
from mhalint.analysis.vocabulary import RETURNS_MODULE
from mhalint.context import ModuleContext, Scope
from mhalint.parse.lazy import cst


@dataclass(frozen=True)
class Site:
    ctx: ModuleContext  # the file the call is in
    site: CallSite

    @property
    def place(self) -> str:
        """`line 12` in this file, `train.py:12` in another: worked out only where evidence names the call, since
        the first position asked of a file costs a pass over all of it."""
        return place(self.ctx, self.site.call)


def place(ctx: ModuleContext, node: cst.CSTNode) -> str:
    """How evidence names where a node is: `line 12` in the file being checked, `train.py:12` in another file of
    the run (relative to the current directory when inside it)."""
    if not ctx.other_file:
        return f"line {ctx.line(node)}"
    return f"{place_file(ctx)}:{ctx.line(node)}"


def place_file(ctx: ModuleContext) -> str:
    """How evidence names another file of the run: its path relative to the current directory when inside it,
    else its name."""
    relative = os.path.relpath(ctx.path)
    return os.path.basename(ctx.path) if relative.startswith('..') else relative


def project_callers(ctx: ModuleContext, function: Scope) -> list[Site]:
    """Where the run calls `function`: this module's callers, then the other files' (in the project's order)."""
    memo = ctx.memo.setdefault("project_callers", {})
    if function not in memo:
        memo[function] = list(each_project_caller(ctx, function))
    return memo[function]


def each_project_caller(ctx: ModuleContext, function: Scope) -> Iterator[Site]:
    """project_callers' sites one at a time: a reader that is done at a caller it cannot read parses no further
    file."""
    known = ctx.memo.get("project_callers", {}).get(function)
    if known is not None:
        yield from known
        return
    yield from (Site(ctx, site) for site in callers(ctx, function))
    yield from _through_partials(ctx, function)
    yield from each_elsewhere(ctx, function)


def function_callers(ctx: ModuleContext, function: Scope) -> list[Site]:
    """Where the run calls a module function: this module's callers, then those of the files that import it by
    name or with `from module import *` (`train(model, loader)` in main.py). Asked only where a parameter's
    value is a loader: a module function's other callers are not read for every parameter."""
    memo = ctx.memo.setdefault("function_callers", {})
    if function in memo:
        return memo[function]
    found = [Site(ctx, site) for site in callers(ctx, function)]
    project = ctx.names  # the project, also in another file of it that an analysis reads
    if project is not None and function.parent is ctx.root and function.kind == "function":
        ctx.read_project = True
        for importer in (*project.importers(ctx.path, function.name), *project.importers(ctx.path, "*")):
            other = project.context(importer.path, ctx.limits)
            name = function.name if importer.local == "*" else importer.local
            found += [Site(other, CallSite(call, scope, arguments_for(call, function)))
                      for call, scope in (_calls_of(other, name, False) if other is not None else ())]
    memo[function] = found
    return found


def _through_partials(ctx: ModuleContext, function: Scope) -> list[Site]:
    """`Small = functools.partial(Block, heads=4)` then `Small(64)`: a construction of Block with the partial's
    arguments before the call's (read in the call's scope)."""
    klass = function.enclosing_class
    if klass is None or function.name != "__init__":
        return []
    found = []
    for made, scope in ctx.calls_named("partial"):
        first = made.args[0] if made.args else None
        target = ctx.parent(ctx.parent(made)) if isinstance(ctx.parent(made), cst.Assign) else None
        if first is None or first.keyword or first.star or ctx.qualified_name(first.value, scope) != (
                PROJECT_PREFIX + klass.name) or ctx.qualified_name(made.func, scope) != "functools.partial":
            continue
        assign = ctx.parent(made)
        names = [t.target.value for t in assign.targets if isinstance(t.target, cst.Name)] if target is not None \
            else []
        for name in names:
            for call, where in ctx.calls_named(name):
                bindings = ctx.bindings(name, where)
                if isinstance(call.func, cst.Name) and len(bindings) == 1 and bindings[0].value is made:
                    arguments = arguments_for(call, function, tuple(made.args[1:]))
                    found.append(Site(ctx, CallSite(call, where, arguments)))
    return found


def each_elsewhere(ctx: ModuleContext, function: Scope) -> Iterator[Site]:
    """`Block(...)` (its `__init__`) or a call of a `Block` instance (its `forward`) in a file that imports it,
    one importing file at a time (each file's memoised): a reader whose answer the first files decide parses no
    more of them."""
    klass = function.enclosing_class
    project = ctx.project
    if project is None or klass is None or klass.parent is not ctx.root or function.name not in ("__init__",
                                                                                                  "forward"):
        return
    ctx.read_project = True  # the values found depend on other files (the cache records it)
    memo = ctx.memo.setdefault("elsewhere", {})  # asked for each parameter of the class, and by each analysis
    for importer in project.importers(ctx.path, klass.name):
        key = (function, importer.path, importer.local)
        if key not in memo:
            other = project.context(importer.path, ctx.limits) if project.may_call(importer.path, importer.local) \
                else None
            memo[key] = [] if other is None else [
                Site(other, CallSite(call, scope, arguments_for(call, function)))
                for call, scope in _calls_of(other, importer.local, function.name == "forward")]
        yield from memo[key]


def _calls_of(other: ModuleContext, local: str, forward: bool) -> list[tuple[cst.Call, object]]:
    """The calls in `other` that construct the class it imports as `local`, or (`forward`) that run an instance."""
    named = [(call, scope) for call, scope in other.calls_named(local)
             if isinstance(call.func, cst.Name) and all(b.kind == "import" for b in other.bindings(local, scope))]
    if not forward:
        return named
    built = tuple(call for call, _ in named)
    return [(call, scope) for call, scope, chain in running_calls(other, built)
            if chain and isinstance(chain[0].call.func, cst.Name) and chain[0].call.func.value == local]


def function_called(ctx: ModuleContext, call: cst.Call, scope: Scope) -> tuple[ModuleContext, Scope] | None:
    """(its file, the function) for a call of a project function: this file's (`project_function`), or a module
    function imported from another file of the run, by name (`from utils.data import load_dataset`) or with a
    star import (`from utils import *`) of exactly one module that defines it."""
    function = project_function(ctx, call, scope)
    if function is not None:
        return ctx, function
    project = ctx.names  # the project, also in another file of it that an analysis reads
    func = call.func
    if project is None or not isinstance(func, cst.Name):
        return None
    bindings = ctx.bindings(func.value, scope)
    if bindings and (len(bindings) != 1 or bindings[0].kind != "import"):
        return None
    found = [project.imported_function(ctx.path, func.value)] if bindings else [
        (path, func.value) for path in (project.module_file(ctx.path, star) for star in ctx.project_stars) if path]
    homes = [(project.context(path, ctx.limits), name) for path, name in filter(None, found)]
    functions = [(other, other.functions[name]) for other, name in homes if other is not None and name in
                 other.functions]
    if len(functions) != 1:  # a star import's name must be defined by exactly one of the modules
        return None
    ctx.read_project = True  # the answer depends on another file (the cache records it)
    return functions[0]


def handed_calls(ctx: ModuleContext, local: str) -> list[tuple[ModuleContext, cst.Call, Scope, cst.Call]]:
    """`model = Model(...).to(device)` then `train(model, loader)`, where `train` is a project function of this
    file or one it imports: the calls of that parameter in `train` (`model(x)`), which run the instance's
    `forward`, each with the file it is in and the call that hands the instance over."""
    found = []
    for built, scope in ctx.calls_named(local):
        if not isinstance(built.func, cst.Name):
            continue
        node, parent = built, ctx.parent(built)
        while isinstance(parent, cst.Attribute) and parent.attr.value in RETURNS_MODULE \
                and isinstance(ctx.parent(parent), cst.Call):  # `.to(device)`, `.cuda()`: the module itself
            node = ctx.parent(parent)
            parent = ctx.parent(node)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1
                and isinstance(parent.targets[0].target, cst.Name)):
            continue
        name = parent.targets[0].target.value
        for read in dataflow.loads(ctx, scope).get(name, []):
            found += _runs_of_parameter(ctx, read, scope)
    return found


def _runs_of_parameter(ctx: ModuleContext, read: cst.Name, scope: Scope) -> list[tuple[ModuleContext, cst.Call,
                                                                                           Scope, cst.Call]]:
    """The calls of the parameter that `read`, an argument of a project function's call, fills."""
    arg = ctx.parent(read)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) and arg.value is read else None
    callee = function_called(ctx, call, scope) if isinstance(call, cst.Call) else None
    if callee is None:
        return []
    home, function = callee
    names = [name for name, given in arguments_for(call, function).by_name.items() if given is arg]
    return [(home, run, where, call) for name in names for run, where in home.calls_in(function)
            if isinstance(run.func, cst.Name) and run.func.value == name
            and all(binding.kind == "param" for binding in home.bindings(name, where))]


def constructions(ctx: ModuleContext, klass: Scope, asking: ModuleContext) -> list[Site] | None:
    """The calls that build `klass` (defined in `ctx`) in its file and in the files of `asking`'s project that
    import it; None when the class is also handed over as a value there (`OmegaConf.structured(Config)`,
    `parse(Config, data)`): then instances are built where mhalint cannot see."""
    memo = asking.memo.setdefault("constructions", {})
    if klass in memo:
        return memo[klass]
    found: list[Site] | None = []
    homes = [(ctx, klass.name)]
    project = asking.project
    if project is not None and klass.parent is ctx.root:
        asking.read_project = True
        for importer in project.importers(ctx.path, klass.name):
            if importer.path == os.path.abspath(asking.path):
                other = asking
            else:
                other = project.context(importer.path, asking.limits) \
                    if project.may_read(importer.path, importer.local) else None
            if other is not None:
                homes.append((other, importer.local))
    for there, local in homes:
        built = {id(call) for call, _ in there.calls_named(local) if isinstance(call.func, cst.Name)}
        if any(id(there.parent(load)) not in built and not _harmless(there, load)
               for load in dataflow.loads(there, there.root).get(local, [])):
            found = None
            break
        found += [Site(there, CallSite(call, scope, Arguments({}, True)))
                  for call, scope in there.calls_named(local) if id(call) in built]
    memo[klass] = found
    return found


def _harmless(ctx: ModuleContext, load: cst.Name) -> bool:
    """A read of a class name that builds nothing elsewhere: an annotation, a base class, `isinstance`'s second
    argument, or an attribute of the class that is not called (`Config.batch_first`)."""
    parent = ctx.parent(load)
    while isinstance(parent, cst.Subscript | cst.SubscriptElement | cst.Index | cst.BinaryOperation):
        parent = ctx.parent(parent)
    if isinstance(parent, cst.Annotation):
        return True
    if isinstance(parent, cst.Attribute):  # `Config.x` reads; `Config.from_dict(d)` may build one
        called = ctx.parent(parent)
        return not (isinstance(called, cst.Call) and called.func is parent)
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        return isinstance(call, cst.ClassDef) or (isinstance(call, cst.Call) and isinstance(call.func, cst.Name)
                                                   and call.func.value in ("isinstance", "issubclass"))
    return False
