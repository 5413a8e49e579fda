"""Why no call of a module is found, in the project's terms: where its construction goes.

A module whose calls the analyses cannot find is either never called (built and stored, then only inspected:
`print(attn)`, `attn.parameters()`, `if self.attn is not None`), handed to code they do not follow
(`Model(custom_encoder=layer)`), or called in a way they cannot pair with it (`model.block.attn(x)`). A warning
says which, instead of "no call is found". A module is followed through the containers and clone helpers that
only hold it (`self.blocks = _get_clones(layer, n)`), and where the proof that nothing runs it is complete (no read
runs it or hands it on, no other file and no name built at run time can reach it) the finding may say so for
sure: `never_run`. `unreached` asks the same of every instance of the class whose methods call a module.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import containers, dataflow
from mhalint.analysis.calls import returned
from mhalint.analysis.vocabulary import RETURNS_MODULE
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.finding import shorten
from mhalint.parse.lazy import cst
from mhalint.parse.walk import nothing, own_nodes, walk

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
    never_run: bool = False  # proven: nothing in the project runs it (so it mixes no samples)
    stored: str = ""  # where it is stored when never run (`self.blocks`)


_MAX_DEPTH = 4  # containers and clone helpers followed from a construction to where it is stored


def why_uncalled(ctx: ModuleContext, call: cst.Call) -> Unpaired | None:
    """Where the module built by `call` goes when no call of it is found; None when that cannot be said."""
    return _goes(ctx, call, call, 0)


def unreached(ctx: ModuleContext, scope: Scope, calls: list[Scope]) -> Unpaired | None:
    """Why no run of the project reaches the methods of the class around `scope` that make `calls` (their scopes):
    every instance of it the project builds goes where nothing runs it. A class the project never builds is no
    proof (a library or a trainer may build it and call it); nor is one that another file, a decorator (a
    registry) or a string (a config's `"type": "Layer"`) names, or that is read other than to be built."""
    klass = ctx.class_of(scope)
    if klass is None or klass.parent is not ctx.root or klass.node.decorators \
            or any(ctx.class_of(call) is not klass for call in calls):
        return None
    reads = dataflow.loads(ctx, ctx.root).get(klass.name, [])
    if not reads or _in_strings(ctx, klass.name) is not None:  # `{"type": "Level"}` may build it by name
        return None
    fates = []
    for read in reads:
        built = ctx.parent(read)
        fate = _goes(ctx, built, built, 0) if isinstance(built, cst.Call) and built.func is read else None
        if fate is None or not fate.never_run:
            return None
        fates.append((ctx.line(built), fate))
    if _alone(ctx) or ctx.project.mentions(klass.name, ctx.path):  # the other files last: they are read
        return None
    lines = ", ".join(str(line) for line, _ in fates)
    fate = fates[0][1]
    return Unpaired(f"`{fate.stored}` is never called",
                    shorten(f"every `{klass.name}` the project builds (line {lines}) ends in `{fate.stored}`, which "
                            f"nothing in the project calls", 160), True, fate.stored)


def _goes(ctx: ModuleContext, node: cst.CSTNode, built: cst.Call, depth: int) -> Unpaired | None:
    """Where the value of `node` (the module built by `built`, or a container holding it) goes."""
    node, parent = _outermost(ctx, node)
    if isinstance(parent, cst.Arg):
        holder = ctx.parent(parent)
        if depth < _MAX_DEPTH and _holds(ctx, holder, parent):
            return _goes(ctx, holder, built, depth + 1)
        return _handed(ctx, holder, parent)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 or isinstance(parent, cst.AnnAssign):
        target = parent.targets[0].target if isinstance(parent, cst.Assign) else parent.target
        if isinstance(target, cst.Name):
            binding = _binding(ctx, target.value, node)
            loads = list(dataflow.uses(ctx, binding)) if binding is not None else None
            return _stored(ctx, built, target.value, loads, depth, module_level=binding is not None
                           and binding.scope is ctx.root, exported=binding is not None
                           and binding.scope is ctx.root and not _under_main(ctx, parent))
        if isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name):
            name = target.attr.value
            return _stored(ctx, built, f"{target.value.value}.{name}", _attribute_loads(ctx, name), depth,
                           word=name)
    return None


def _outermost(ctx: ModuleContext, node: cst.CSTNode) -> tuple[cst.CSTNode, cst.CSTNode | None]:
    """The expression whose value holds `node`'s: through `a if c else b`, a list's, tuple's or dict's element, a
    comprehension's element (`[Layer() for _ in range(n)]`) and a list repeated or joined (`[Layer()] * n`)."""
    parent = ctx.parent(node)
    while True:
        if isinstance(parent, cst.IfExp):
            node, parent = parent, ctx.parent(parent)
        elif isinstance(parent, cst.Element) and isinstance(ctx.parent(parent), cst.List | cst.Tuple) \
                or isinstance(parent, cst.DictElement) and parent.value is node:
            node = ctx.parent(parent)
            parent = ctx.parent(node)
        elif isinstance(parent, cst.ListComp | cst.GeneratorExp) and parent.elt is node \
                or isinstance(parent, cst.BinaryOperation) and isinstance(node, cst.List | cst.Tuple | cst.ListComp):
            node, parent = parent, ctx.parent(parent)  # `[layer] * n` holds the layers of the list
        else:
            return node, parent


def _holds(ctx: ModuleContext, call: cst.CSTNode, arg: cst.Arg) -> bool:
    """Whether `call` only holds what `arg` gives it: torch's containers, `copy.deepcopy`, `list(...)`, or a project
    function that puts its parameter only into such holders on the way to its one `return` (`_get_clones`)."""
    if not isinstance(call, cst.Call) or arg.star == "**" or arg.keyword is not None:
        return False
    if _holder(ctx, call):
        return True  # `nn.Sequential(*layers)` too
    uses = _parameter_uses(ctx, call, arg)
    return uses is not None and len(returned(ctx.functions[call.func.value])) == 1 \
        and all(_into_return(ctx, use) for use in uses)


def _holder(ctx: ModuleContext, call: cst.Call) -> bool:
    """A call of torch's containers, `copy.deepcopy`, `list(...)` or `nn.Sequential`: it holds what it is given."""
    called = containers.called_name(ctx, call.func, ctx.root)
    return called in containers.HOLDERS or called == containers.SEQUENTIAL


def _parameter_uses(ctx: ModuleContext, call: cst.Call, arg: cst.Arg) -> list[cst.Name] | None:
    """The reads of the parameter of a function of this module that `arg` of `call` fills; None when that
    parameter cannot be named (`*args`, a keyword not in its signature, a parameter bound again)."""
    function = ctx.functions.get(call.func.value) if isinstance(call.func, cst.Name) and not arg.star else None
    if function is None:
        return None
    params = function.node.params
    names = [param.name.value for param in (*params.posonly_params, *params.params)]
    position = next(index for index, given in enumerate(call.args) if given is arg)
    if arg.keyword is not None or any(given.keyword is not None or given.star for given in call.args[:position]):
        return None
    bindings = function.bindings.get(names[position], ()) if position < len(names) else ()
    return list(dataflow.uses(ctx, bindings[0])) if len(bindings) == 1 else None


def _inspected(ctx: ModuleContext, call: cst.CSTNode, arg: cst.Arg, built: cst.Call) -> bool:
    """Whether `call` runs a function of this module that only inspects the parameter `arg` fills (every read of
    it only inspects it, as `print` or `.parameters()` do)."""
    uses = _parameter_uses(ctx, call, arg) if isinstance(call, cst.Call) else None
    return uses is not None and all(_use(ctx, use, built) is None for use in uses)


def _into_return(ctx: ModuleContext, node: cst.CSTNode) -> bool:
    """Whether a read of a parameter reaches its function's `return` through holders and literals only."""
    parent = ctx.parent(node)
    while not isinstance(parent, cst.Return):
        if isinstance(parent, cst.Call):
            if node is parent.func or not _holder(ctx, parent):
                return False
        elif not isinstance(parent, cst.Arg | cst.List | cst.Tuple | cst.Element | cst.ListComp | cst.GeneratorExp
                            | cst.CompFor | cst.BinaryOperation):
            return False
        node, parent = parent, ctx.parent(parent)
    return True


def _handed(ctx: ModuleContext, call: cst.Call, arg: cst.Arg) -> Unpaired:
    written = f"{shorten(ctx.code(call.func), 40)}({arg.keyword.value}=...)" if arg.keyword is not None else \
        f"{shorten(ctx.code(call.func), 40)}(...)"
    return Unpaired(f"it goes to `{written}` (line {ctx.line(call)}), not followed",
                    f"the module is passed to `{written}` at line {ctx.line(call)}: no call of it is found through "
                    f"that")


def _stored(ctx: ModuleContext, built: cst.Call, shown: str, loads: list[cst.CSTNode] | None, depth: int,
            word: str = "", module_level: bool = False, exported: bool = False) -> Unpaired | None:
    """A module stored in a name or attribute: never called when every read only inspects it or puts it into a
    holder stored where nothing calls it; else the first read that hands it on or calls it in a way not paired
    with it. Never run only when code outside the project cannot import it either (`exported`: a module-level
    name outside `if __name__ == "__main__":`)."""
    if loads is None:
        return None
    held = None
    for load in loads:
        parent = ctx.parent(load)
        if isinstance(parent, cst.Arg) and depth < _MAX_DEPTH and _holds(ctx, ctx.parent(parent), parent):
            fate = _goes(ctx, ctx.parent(parent), built, depth + 1)
            if fate is not None and not fate.never_run:
                return fate
            if fate is not None:
                held = held or fate
                continue
        if isinstance(parent, cst.Arg) and _inspected(ctx, ctx.parent(parent), parent, built):
            continue  # `count_parameters(attn)`
        use = _use(ctx, load, built)
        if use is not None:
            return Unpaired(f"`{shown}` {use[0]} (line {ctx.line(use[1])})",
                            f"`{shown}` {use[0]} at line {ctx.line(use[1])}: no call of it is found through that")
    named = _reached_by_name(ctx, word)
    if named is not None:
        return Unpaired(f"`{shown}` may be reached by name (line {named})",
                        f"`{shown}` is never called as such, but line {named} may reach it by name (a string, "
                        f"`getattr`, a loop over the children): no call of it is found through that")
    where = _nowhere_else(ctx, shown.rpartition(".")[2], word, module_level)
    never_run = where == "the project" and not exported
    if held is not None and never_run:
        return held
    outside = ", though code outside it may import it" if where == "the project" and exported else ""
    return Unpaired(f"`{shown}` is never called in {where}",
                    f"`{shown}` is only built" + (" and inspected" if loads else "") + f": nothing in {where} calls it"
                    + outside, never_run, shown)


def _under_main(ctx: ModuleContext, node: cst.CSTNode) -> bool:
    """Whether `node` is in an `if __name__ == "__main__":` block (bound only when the file runs as a script)."""
    while node is not None:
        test = ctx.code(node.test) if isinstance(node, cst.If) and isinstance(node.test, cst.Comparison) else ""
        if "__main__" in test and "__name__" in test:
            return True
        node = ctx.parent(node)
    return False


def _nowhere_else(ctx: ModuleContext, name: str, word: str, module_level: bool) -> str:
    """"the project" when no other file of the project can call it (an attribute's name appears in none; a
    module-level name is imported by none, nor is its module named in one: `mod.attn(x)`), else, or when the
    project is this file alone, "this file"."""
    if _alone(ctx):
        return "this file"
    project = ctx.project
    if word:
        return "this file" if project.mentions(word, ctx.path) else "the project"
    stem = os.path.splitext(os.path.basename(ctx.path))[0]
    named = module_level and project.mentions(stem, ctx.path)
    return "this file" if named or project.importers(ctx.path, name) else "the project"


def _alone(ctx: ModuleContext) -> bool:
    """Whether the project is unknown or this file alone (`mhalint check bad.py` with no project root): what
    other files do cannot be known."""
    project = ctx.project
    if project is None:
        return True
    ctx.read_project = True  # the answer depends on the other files
    return project.paths == [os.path.abspath(ctx.path)]


_BUILT_NAMES = re.compile(r"\b(?:eval|exec|globals|locals)\s*\(|\bvars\s*\(\s*\)")
_CHILDREN = frozenset({"children", "named_children", "modules", "named_modules"})


def _reached_by_name(ctx: ModuleContext, word: str) -> int | None:
    """The line where the file may reach a module by a name, not by the attribute or variable followed: an
    attribute's name in a string (`getattr(self, "attn")`, `self._modules["attn"]`), a child taken by a computed
    name or called in a loop over the children, or a variable through `globals()`/`eval`; None when there is
    none."""
    memo = ctx.memo.setdefault("children_reached", {})
    if not word:
        if "built names" not in memo:  # asked for every variable: the source is searched once
            source = ctx.source()
            found = _BUILT_NAMES.search(source)
            memo["built names"] = source.count("\n", 0, found.start()) + 1 if found else None
        return memo["built names"]
    named = _in_strings(ctx, word)
    if named is not None:
        return named
    if "line" not in memo:
        memo["line"] = _calls_children(ctx)
    return memo["line"]


def _calls_children(ctx: ModuleContext) -> int | None:
    """The line of the first `getattr(x, name)` with a computed name, `self._modules`, or loop over `.children()`
    (and the like) that calls its item."""
    found: list[cst.CSTNode] = []

    def enter(node) -> bool:
        if isinstance(node, cst.Attribute) and node.attr.value in ("_modules", "__dict__"):
            found.append(node)
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value == "getattr" \
                and len(node.args) > 1 and not isinstance(node.args[1].value, cst.SimpleString):
            found.append(node)
        elif isinstance(node, cst.For | cst.CompFor) and isinstance(node.iter, cst.Call) \
                and isinstance(node.iter.func, cst.Attribute) and node.iter.func.attr.value in _CHILDREN:
            items = {name.value for name in own_nodes(node.target, (cst.Name,))}
            if any(isinstance(call.func, cst.Name) and call.func.value in items
                   for call in own_nodes(ctx.parent(node) if isinstance(node, cst.CompFor) else node, (cst.Call,))):
                found.append(node.iter)
        return not found

    walk(ctx.module, enter, nothing)
    return ctx.line(found[0]) if found else None


def _in_strings(ctx: ModuleContext, word: str) -> int | None:
    """The line of the first string that holds `word` as a whole word, not counting docstrings and other strings
    that are a statement of their own (they name nothing at run time)."""
    words = ctx.memo.get("named_strings")
    if words is None:  # each word of the strings, with the first string that holds it: one pass for every question
        words = ctx.memo["named_strings"] = {}

        def enter(node) -> bool:
            if isinstance(node, cst.SimpleString | cst.FormattedStringText) \
                    and not isinstance(ctx.parent(node), cst.Expr):
                for each in re.findall(r"\w+", node.value):
                    words.setdefault(each, node)
            return True

        walk(ctx.module, enter, nothing)
    found = words.get(word)
    return ctx.line(found) if found is not None else None


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
    while isinstance(parent, cst.BooleanOperation):  # `a or b` gives a or b on: only a condition inspects it
        load, parent = parent, ctx.parent(parent)
    if isinstance(parent, cst.Comparison | cst.If | cst.While | cst.Assert | cst.UnaryOperation | cst.Del
                  | cst.FormattedStringExpression) or isinstance(parent, cst.IfExp) and parent.test is load:
        return None  # `if self.attn is not None`, `assert attn`, `del self.attn`, f"{attn}"
    return "is handed on", load


def _binding(ctx: ModuleContext, name: str, value: cst.BaseExpression) -> Binding | None:
    """The binding of `name` whose value is `value`."""
    for scope in ctx.scopes.values():
        for binding in scope.bindings.get(name, ()):
            if binding.value is value:
                return binding
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

        walk(ctx.module, enter, nothing)
    return [node for node in index.get(name, ()) if not _stored_to(ctx, node)]


def _stored_to(ctx: ModuleContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    return isinstance(parent, cst.AssignTarget | cst.AugAssign | cst.AnnAssign) and (
        getattr(parent, "target", None) is node)
