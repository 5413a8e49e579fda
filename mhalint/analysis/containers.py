"""What goes into a container, and which container a loop variable comes from: the syntax of lists, tuples,
dicts, `nn.ModuleList`/`nn.Sequential`/`nn.ModuleDict` and the loops over them, shared by the readers of modules
(mhalint.analysis.calls: which layers a stack holds) and of tensors (mhalint.analysis.tensors: what a list of
outputs holds). It reads no value: each reader turns the expressions it is given into its own answer.

Real code builds its stacks in many ways (`nn.ModuleList([Layer() for _ in range(n)])`, `layers.append(...)` in a
loop, `[layer] * n`, `self.blocks[name] = Block()`) and iterates them in as many (`enumerate`, `zip`, `.items()`,
`reversed`, slices); each way is written here once.
"""

from __future__ import annotations

from dataclasses import dataclass

from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

# Calls whose result holds what their one argument holds (an iterable of elements, or the container itself).
HOLDERS = frozenset({"torch.nn.ModuleList", "torch.nn.ModuleDict", "torch.nn.ParameterList", "copy.deepcopy",
                     "list", "tuple", "dict", "reversed", "iter", "sorted", "collections.OrderedDict"})
SEQUENTIAL = "torch.nn.Sequential"
# Calls whose result maps the keys of their one argument (a dict, or its entries) to the same values.
DICTS = frozenset({"torch.nn.ModuleDict", "dict", "collections.OrderedDict"})
# Methods whose result holds the elements of the container they are called on.
_SAME_ELEMENTS = frozenset({"values", "copy", "children"})
_ADD_ONE = {"append": 0, "insert": 1, "add": 0}  # the position of the added element among the arguments
_ADD_MANY = frozenset({"extend", "update"})
_ITERATORS = frozenset({"reversed", "iter", "list", "tuple", "sorted", "tqdm.tqdm", "tqdm.auto.tqdm"})


@dataclass(frozen=True)
class Added:
    """One way something enters a container: `value` (evaluated in `scope`) is an element, or, when `many`, a
    container whose elements all enter. `key` is a literal key (`feats["x"] = ...`), when one is written."""

    value: cst.BaseExpression
    scope: Scope
    many: bool
    key: str | int | None = None


def called_name(ctx: ModuleContext, func: cst.BaseExpression, scope: Scope) -> str | None:
    """What a call calls: its qualified name, or a builtin's (`list`, `zip`) when nothing in the module rebinds it."""
    name = ctx.qualified_name(func, scope)
    if name is None and isinstance(func, cst.Name) and not ctx.bindings(func.value, scope):
        return func.value
    return name


def key_of(expr: cst.BaseExpression) -> str | int | None:
    """A literal key: `"x"`, `0`, `-1`."""
    if isinstance(expr, cst.SimpleString) and isinstance(literal(expr), str):
        return literal(expr)
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) \
            and isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.value)
    return None


def subscript_key(expr: cst.Subscript) -> tuple[bool, str | int | None]:
    """(is one index, not a slice; its literal key or None) for `c[i]`, `c["x"]`, `c[-1]`."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return False, None
    return True, key_of(expr.slice[0].slice.value)


def is_slice(expr: cst.Subscript) -> bool:
    """`c[:k]`, `c[1:]`: a container of some of the elements."""
    return len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Slice)


def pairs(expr: cst.BaseExpression) -> list[tuple[cst.BaseExpression | None, cst.BaseExpression]] | None:
    """(key, value) of a dict's entries as written: `{"a": m}`, `[("a", m), ...]` (what `dict`, `OrderedDict`
    and `nn.ModuleDict` take); None when an entry is not written out (a `**other` is None's key)."""
    if isinstance(expr, cst.Dict):
        found = []
        for entry in expr.elements:
            if isinstance(entry, cst.StarredDictElement):
                found.append((None, entry.value))
            else:
                found.append((entry.key, entry.value))
        return found
    if isinstance(expr, cst.List | cst.Tuple):
        found = []
        for entry in expr.elements:
            value = entry.value
            if not isinstance(value, cst.Tuple) or len(value.elements) != 2 or isinstance(entry, cst.StarredElement):
                return None
            found.append((value.elements[0].value, value.elements[1].value))
        return found
    return None


def additions(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> list[Added]:
    """What the code adds to the container a name (in `scope`) or `self.x` (in any method of the class) holds:
    `c.append(v)`, `c.insert(i, v)`, `c.extend(vs)`, `c += vs`, `c[k] = v`. Indexed once per module; while
    function bodies are pending, over what is parsed, after the bodies that name the container (every addition
    writes its name), again only when a body has been parsed since."""
    key = _owner(ctx, expr, scope)
    if key is None:
        return []
    if not ctx.partial:
        index = ctx.memo.get("container_additions")
        if index is None:
            index = ctx.memo["container_additions"] = _additions(ctx, ctx.calls_named, _stores(ctx.assignments()))
        return index.get(key, [])
    ctx.parse_holding(key[1].removeprefix("self."))
    parsed = ctx.parsed()
    memo = ctx.memo.setdefault("container_additions_parsed", {})
    if memo.get("pending") != len(parsed.places):  # the index grows only as bodies are parsed
        memo["pending"] = len(parsed.places)
        memo["index"] = _additions(ctx, parsed.calls_named, _stores(parsed.assignments()))
    return memo["index"].get(key, [])


def _owner(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope):
    """What identifies a container across its uses: (the scope that binds the name, name), or (class, attribute)."""
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
        return (id(bindings[0].scope), expr.value) if bindings else None
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == scope.self_name:
        klass = ctx.class_of(scope)
        return (id(klass), "self." + expr.attr.value) if klass is not None else None
    return None


def _additions(ctx: ModuleContext, calls_named, stores: list[tuple[cst.CSTNode, Scope]]) -> dict:
    """The additions to each container, among the calls `calls_named` gives and the `stores`."""
    index: dict = {}
    for method in (*_ADD_ONE, *_ADD_MANY):
        for call, scope in calls_named(method):
            func = call.func
            if not isinstance(func, cst.Attribute) or any(arg.star or arg.keyword for arg in call.args):
                continue
            position = _ADD_ONE.get(method, 0)
            if len(call.args) != position + 1:
                continue
            owner = _owner(ctx, func.value, scope)
            if owner is not None:
                index.setdefault(owner, []).append(Added(call.args[position].value, scope, method in _ADD_MANY))
    for statement, scope in stores:
        if isinstance(statement, cst.AugAssign) and isinstance(statement.operator, cst.AddAssign):
            owner = _owner(ctx, statement.target, scope)
            if owner is not None:
                index.setdefault(owner, []).append(Added(statement.value, scope, True))
        elif isinstance(statement, cst.Assign):
            for target in statement.targets:
                item = target.target
                if isinstance(item, cst.Subscript) and subscript_key(item)[0]:
                    owner = _owner(ctx, item.value, scope)
                    if owner is not None:
                        index.setdefault(owner, []).append(
                            Added(statement.value, scope, False, subscript_key(item)[1]))
    return index


def _stores(assignments: list[tuple[cst.CSTNode, Scope]]) -> list[tuple[cst.CSTNode, Scope]]:
    """The `c += ...` and `c[k] = ...` statements among assignments, with their scopes."""
    return [(statement, scope) for statement, scope in assignments if isinstance(statement, cst.AugAssign)
            or any(isinstance(target.target, cst.Subscript) for target in statement.targets)]


def loop_source(ctx: ModuleContext, binding: Binding) -> tuple[cst.BaseExpression, Scope, bool] | None:
    """For a loop variable, (the container, its scope, True) when the variable is one of its elements, or
    (the dict, its scope, False) when it is one of a dict's keys: `for layer in self.layers`, `for i, layer in
    enumerate(self.layers)`, `for layer, norm in zip(self.layers, self.norms)`, `for name, block in
    self.blocks.items()`, `for layer in reversed(self.layers)`."""
    if not isinstance(binding.node, cst.For) or binding.kind not in ("for", "unpack"):
        return None
    source, index = binding.value, binding.index if binding.kind == "unpack" else None
    while isinstance(source, cst.Call):
        func, args = source.func, [arg for arg in source.args if not arg.keyword and not arg.star]
        called = called_name(ctx, func, binding.scope)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if called == "enumerate" and index == 1 and args:
            source, index = args[0].value, None
        elif called == "zip" and index is not None and index < len(args) == len(source.args):
            source, index = args[index].value, None
        elif method == "items" and not source.args and index in (0, 1):
            return func.value, binding.scope, index == 1
        elif method in _SAME_ELEMENTS and not source.args:
            source = func.value
        elif called in _ITERATORS and len(args) == 1:
            source = args[0].value
        else:
            break
    return (source, binding.scope, True) if index is None else None
