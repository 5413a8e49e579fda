"""Which torch attention API a call reaches, and which argument is which.

Calls are recognised through the imports and through instances: `mha = nn.MultiheadAttention(...)` then
`mha(...)`; `self.attn = ...` in `__init__` then `self.attn(...)` in another method; `nn.ModuleList([...])` of
layers iterated or indexed; `super().__init__(...)` in a subclass of a torch class.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Iterator

from mhalint import torchapi
from mhalint.analysis import branches, containers, dataflow
from mhalint.analysis.inheritance import is_super, project_class, torch_class
from mhalint.analysis.vocabulary import FORWARDS_TO_MODULE, KEEPS_AXES_MODULES, REGROUP, REORDER, RETURNS_MODULE
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.walk import own_nodes

PROJECT_PREFIX = "<module>."
UNKNOWN_CALLABLE = "<unknown>"  # an object built by a call mhalint cannot name (e.g. a class from another file)
_MAX_DEPTH = 12
_MAX_WRAPPING = 4


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
    return _bind(call.args, signature, skip)


def _bind(args, signature: torchapi.Signature, skip: int) -> Arguments:
    """`bind` over an argument list: a later keyword overrides an earlier one, as in a call of a partial."""
    by_name: dict[str, cst.Arg] = {}
    opaque = False
    position = -skip
    for arg in args:
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
    partial: cst.Call | None = None  # `Attn = functools.partial(nn.MultiheadAttention, ...)` that `call` calls
    # the other modules the same expression may be: the layers of a stack, each of which the loop calls
    peers: tuple[Construction, ...] = field(default=(), compare=False, repr=False)

    @property
    def alternatives(self) -> tuple[Construction, ...]:
        return (self, *self.peers)
    # An instance of a project class that derives from `api` (mhalint.analysis.inheritance): the class as this
    # file names it, whether a class on the way overrides torch's forward (its calls run project code), and the
    # code of a base beside torch's that cannot be read (the calls then rest on an assumption).
    subclass: str = ""
    overrides: str = ""  # the class (of this file) whose forward replaces torch's
    assumed: str = ""
    hidden: bool = False  # built through a project __init__ in another file: its arguments are not these
    owner: str = ""  # `self.self_attn` of a layer subclass: the layer's api, whose constructor `call` is
    # Where the called name may hold several classes (`cls(...)` after `cls = A if c else B`): the facts under
    # which it is this one, and certain=False (an edit of the call would change the other classes' too).
    condition: branches.Condition = frozenset()
    certain: bool = True
    # A submodule its owner builds only where the keyword (`custom_encoder`) that may hand it another one in its
    # place is None: a call of it may run that other module.
    replaceable: str = ""
    # Built in another file of the run (a layer handed to this file's stack there): `call` is a node of that file,
    # read in no context of this one.
    foreign: bool = False

    @property
    def arguments(self) -> Arguments:
        """The call's arguments, after those the partial it calls fixes (read in the call's scope)."""
        if self.hidden or self.foreign:
            return Arguments({}, True)
        args = (*self.partial.args[1:], *self.call.args) if self.partial is not None else self.call.args
        skip = 1 if self._explicit_init else 0
        if not self.owner:
            return _bind(args, torchapi.CONSTRUCTORS[self.api], skip)
        owner = _bind(args, torchapi.CONSTRUCTORS[self.owner], skip)  # the owner passes these on to its submodule
        return Arguments({mine: owner.by_name[its] for mine, its in torchapi.SUBMODULE_PARAMETERS[self.api].items()
                          if its in owner.by_name}, owner.opaque)

    @property
    def _explicit_init(self) -> bool:
        """`nn.MultiheadAttention.__init__(self, ...)` passes self positionally."""
        return self.via_super and isinstance(self.call.func, cst.Attribute) and not is_super(self.call.func.value)


def construction(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Construction | None:
    """The module a call constructs: a torch attention module (also an instance of a project subclass of one
    whose arguments reach torch's constructor as written, and `super().__init__(...)` in a subclass that takes
    its own), or a class defined in this module (api `<module>.Name`), so that its instances can be followed.
    None when the called name may hold several classes (`constructions` gives each). Memoised: rules ask it of
    every call."""
    return ctx.settled("construction", (call, scope), lambda: _construction(ctx, call, scope))


def _construction(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Construction | None:
    if class_choices(ctx, call.func, scope):
        return None
    name = ctx.qualified_name(call.func, scope)
    if name in torchapi.CONSTRUCTORS:
        return Construction(name, call, scope)
    if name is not None and name.startswith(PROJECT_PREFIX) and name[len(PROJECT_PREFIX):] in ctx.classes:
        return _subclass_construction(ctx, call, scope, name) or Construction(name, call, scope)
    if type(call.func) is cst.Name and ctx.names is not None and not (name or "").startswith("torch."):
        subclass = _subclass_construction(ctx, call, scope, name)  # a class imported from another file
        if subclass is not None:
            return subclass
    partial = _partial(ctx, call.func, scope)
    if partial is not None:
        return Construction(ctx.qualified_name(partial.args[0].value, scope), call, scope, partial=partial)
    func = call.func
    if not (type(func) is cst.Attribute and func.attr.value == "__init__"):
        return None
    klass = ctx.class_of(scope)
    if klass is None:
        return None
    if is_super(func.value):
        found = torch_class(ctx, klass)
        init = klass.methods.get("__init__")
        if found is not None and not found.unread and found.inits[:1] == ((ctx, init),) and len(found.inits) == 1:
            return Construction(found.api, call, scope, via_super=True, subclass=PROJECT_PREFIX + klass.name,
                                overrides=_overriding(found))
        return None
    base = ctx.qualified_name(func.value, scope)
    if base in torchapi.CONSTRUCTORS:
        return Construction(base, call, scope, via_super=True)
    return None


def _subclass_construction(ctx: ModuleContext, call: cst.Call, scope: Scope, name: str | None) -> Construction | None:
    """`MyAttn(64, 8)` where `class MyAttn(nn.MultiheadAttention)` takes no parameters of its own on the way
    (no `__init__`, or one that passes `*args, **kwargs` on): torch's constructor gets these arguments."""
    klass = project_class(ctx, call.func, scope)
    found = torch_class(*klass) if klass is not None else None
    if found is None or found.inits or not _runs_torch(ctx, found):
        return None
    label = PROJECT_PREFIX + klass[1].name if klass[0] is ctx else name or UNKNOWN_CALLABLE
    return Construction(found.api, call, scope, subclass=label, overrides=_overriding(found), assumed=found.unread)


def _overriding(found) -> str:
    return found.overrides[1].name if found.overrides is not None else ""


def project_forward(ctx: ModuleContext, built: Construction | None) -> Scope | None:
    """The `forward` of this file's class that calling the instance `built` runs: the class's own, or the one a
    project subclass of a torch module overrides torch's with."""
    name = built.overrides or (built.api[len(PROJECT_PREFIX):] if built.api.startswith(PROJECT_PREFIX) else "") \
        if built is not None else ""
    klass = ctx.classes.get(name) if name else None
    return klass.methods.get("forward") if klass is not None else None


def _runs_torch(ctx: ModuleContext, found) -> bool:
    """Whether calling an instance runs what the class inherits from torch: its forward is torch's, or the
    overriding one (in this file) calls `super().forward(...)` or `self.self_attn(...)`. A class whose own forward
    does neither uses none of it, and its constructor's settings reach no attention."""
    if found.overrides is None:
        return True
    home, klass = found.overrides
    return home is ctx and bool(_inherited_in(ctx, klass))


def _through_init(ctx: ModuleContext, built: Construction) -> Construction | None:
    """An instance of a project subclass of a torch attention module built through its own `__init__`: that
    `__init__`'s `super().__init__(...)` in this file, whose arguments reach torch (read in the `__init__`, its
    parameters from the instances' calls); in another file, the torch module with arguments not known here."""
    klass = project_class(ctx, built.call.func, built.scope)
    found = torch_class(*klass) if klass is not None else None
    if found is None or not found.inits:
        return None
    label = PROJECT_PREFIX + klass[1].name if klass[0] is ctx else built.api
    home, init = found.inits[0]
    if home is ctx and len(found.inits) == 1:
        for call, scope in ctx.calls_in(init):
            inner = construction(ctx, call, scope)
            if inner is not None and inner.via_super:
                return replace(inner, subclass=label, assumed=found.unread)
    return Construction(found.api, built.call, built.scope, subclass=label, overrides=_overriding(found),
                        assumed=found.unread, hidden=True) if _runs_torch(ctx, found) else None


def constructions(ctx: ModuleContext, call: cst.Call, scope: Scope) -> list[Construction]:
    """Every module a constructor call may build: its one construction, or one per class the called expression
    may hold, each under the facts that choose it and not certain."""
    choices = class_choices(ctx, call.func, scope)
    if choices:
        return [Construction(api, call, scope, condition=condition, certain=False) for api, condition in choices]
    built = construction(ctx, call, scope)
    return [built] if built is not None else []


def class_choices(ctx: ModuleContext, func: cst.BaseExpression, scope: Scope) -> list[tuple[str, branches.Condition]]:
    """The classes a called expression may name, each with the facts under which it does: `(A if c else B)`, a
    name bound to different classes (on different branches, or chosen into a variable), `{"a": A, "b": B}[key]`.
    Empty when it names one class (or nothing readable); a class that cannot be named is UNKNOWN_CALLABLE."""
    kind = type(func)  # compared by type: libcst's isinstance is a Python call when it fails
    if kind is not cst.Name and kind is not cst.IfExp and kind is not cst.Subscript:
        return []
    if kind is cst.Name:  # most names are bound once, to no choice: answered without a lookup
        bindings = ctx.bindings(func.value, scope)
        if len(bindings) < 2 and not (bindings and isinstance(bindings[0].value, cst.IfExp | cst.Subscript)):
            return []
    memo = ctx.memo.setdefault("class_choices", {})
    if func not in memo:
        leaves = _class_leaves(ctx, func, scope, 0)
        names = [(ctx.qualified_name(expr, where) or UNKNOWN_CALLABLE, expr, where, extra)
                 for expr, where, extra in leaves or ()]
        memo[func] = [(name, branches.guards(ctx, expr, where) | extra) for name, expr, where, extra in names] \
            if len({name for name, *_ in names}) > 1 else []
    return memo[func]


def _class_leaves(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int):
    """(class expression, its scope, facts of a dict key) for each class `expr` may name; None when unreadable."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.IfExp):
        body, orelse = (_class_leaves(ctx, e, scope, depth + 1) for e in (expr.body, expr.orelse))
        return body + orelse if body is not None and orelse is not None else None
    if isinstance(expr, cst.Subscript):
        return _dict_leaves(ctx, expr, scope)
    if isinstance(expr, cst.Name):
        bindings = dataflow.reaching(ctx, ctx.bindings(expr.value, scope), expr)
        if bindings and all(b.kind == "assign" and b.value is not None for b in bindings) \
                and (len(bindings) > 1 or isinstance(bindings[0].value, cst.IfExp | cst.Subscript)):
            found = []
            for binding in bindings:
                leaves = _class_leaves(ctx, binding.value, binding.scope, depth + 1)
                if leaves is None:
                    return None
                found += leaves
            return found
    return [(expr, scope, frozenset())] if isinstance(expr, cst.Name | cst.Attribute) else None


def _dict_leaves(ctx: ModuleContext, expr: cst.Subscript, scope: Scope):
    """`{"a": A, "mha": nn.MultiheadAttention}[kind]`, or a name bound once to such a dict: each class with the
    fact `kind == <its key>`."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    key, table, where = expr.slice[0].slice.value, expr.value, scope
    if isinstance(table, cst.Name):
        bindings = ctx.bindings(table.value, scope)
        if len(bindings) != 1 or bindings[0].kind != "assign":
            return None
        table, where = bindings[0].value, bindings[0].scope
    if not isinstance(table, cst.Dict) or not all(isinstance(e, cst.DictElement) for e in table.elements):
        return None
    found = []
    for element in table.elements:
        fact = branches.key_fact(ctx, key, element.key, scope)
        found.append((element.value, where, frozenset({fact}) if fact is not None else frozenset()))
    return found


def _partial(ctx: ModuleContext, func: cst.BaseExpression, scope: Scope) -> cst.Call | None:
    """The `functools.partial(<torch attention module>, ...)` a name is bound to, once, where it is called."""
    if type(func) is not cst.Name:
        return None
    bindings = ctx.bindings(func.value, scope)
    value = bindings[0].value if len(bindings) == 1 and bindings[0].kind == "assign" else None
    if not (type(value) is cst.Call and ctx.qualified_name(value.func, bindings[0].scope) == "functools.partial"
            and value.args and value.args[0].keyword is None and not value.args[0].star):
        return None
    return value if ctx.qualified_name(value.args[0].value, bindings[0].scope) in torchapi.CONSTRUCTORS else None


@dataclass(frozen=True)
class Target:
    """What a call reaches: a torch API, and the module construction behind it when it is a module's forward."""

    api: str
    arguments: Arguments
    construction: Construction | None = None


def call_target(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Target | None:
    """The torch attention API a call invokes: a function such as SDPA, or the forward of a known module.
    Memoised per module: most rules ask it of every call."""
    memo = ctx.memo.get("call_target")
    if memo is None:
        memo = ctx.memo["call_target"] = {}
    key = (id(call), id(scope))  # ids: asked 10 times per call, and a node's hash is a Python call
    found = memo.get(key)
    if found is None:
        found = memo[key] = (_call_target(ctx, call, scope), call)  # the call kept: its id stays its own
    return found[0]


def _call_target(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Target | None:
    name = ctx.qualified_name(call.func, scope)
    if name in torchapi.CALLS and name not in torchapi.CONSTRUCTORS:
        return Target(name, bind(call, torchapi.CALLS[name]))
    api = _runs_inherited(ctx, call, scope)
    if api is not None:  # `super().forward(...)` or `self.self_attn(...)` in a subclass of a torch module
        built = instance(ctx, call.func, scope) if isinstance(call.func.value, cst.Name) else None
        return Target(api, bind(call, torchapi.CALLS[api]), built)
    built = instance(ctx, call.func, scope)
    if built is None:  # a name that may hold several modules: the one this call can run, when only one can
        chains = _chains_of(ctx, call, scope)
        built = chains[0][0] if len(chains) == 1 and chains[0] and not chains[0].may else None
    if built is None or (built.via_super and not built.subclass) or built.overrides or built.replaceable \
            or built.api not in torchapi.CALLS:
        return None
    return Target(built.api, bind(call, torchapi.CALLS[built.api]), built)


def _runs_inherited(ctx: ModuleContext, call: cst.Call, scope: Scope) -> str | None:
    """The torch forward a call in a method of a project subclass of a torch module runs without an instance
    to follow: `super().forward(...)` (the base's), `self.self_attn(...)` of a layer (MultiheadAttention's)."""
    func = call.func
    if type(func) is not cst.Attribute:
        return None
    if is_super(func.value) and func.attr.value == "forward":
        found = torch_class(ctx, ctx.class_of(scope))
        return found.api if found is not None and found.api in torchapi.CALLS else None
    found = _inherited_attention(ctx, func, scope)
    return torchapi.SUBMODULES[found[0].api][func.attr.value] if found is not None else None


def _inherited_attention(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope):
    """(the class's torch base, the class) when `expr` is `self.self_attn` (or `multihead_attn`) in a method of a
    project subclass of a torch layer, or `self.encoder` (`decoder`) in one of nn.Transformer, that does not set
    that attribute itself."""
    if not (type(expr) is cst.Attribute and type(expr.value) is cst.Name
            and expr.value.value == scope.self_name):
        return None
    klass = ctx.class_of(scope)
    found = torch_class(ctx, klass)
    if found is None or expr.attr.value not in torchapi.SUBMODULES.get(found.api, {}) \
            or expr.attr.value in found.bound:
        return None
    return found, klass


def inherited(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> Construction | None:
    """`self.self_attn` in a subclass of a torch layer: the MultiheadAttention the layer builds, its arguments
    the layer's (batch_first included), when the layer's construction is one: the class's own
    `super().__init__(...)`, or its one instantiation in this file."""
    found = _inherited_attention(ctx, expr, scope)
    if found is None:
        return None
    klass = found[1]
    owners = [built for call, call_scope in _calls_by_qualified_name(ctx).get(PROJECT_PREFIX + klass.name, [])
              if (built := instance(ctx, call, call_scope)) is not None and built.api == found[0].api]
    calls = {id(built.call) for built in owners}
    if len(calls) != 1:
        return None
    return submodule(ctx, owners[0], expr.attr.value)


_SUBMODULE_NAMES = frozenset(name for held in torchapi.SUBMODULES.values() for name in held)


def submodule(ctx: ModuleContext, owner: Construction, attribute: str) -> Construction | None:
    """The module a torch module holds as `attribute` (`layer.self_attn`, `transformer.encoder`): built by the
    owner from its own arguments (a construction of the submodule's API on the owner's call), or the module its
    constructor was handed in place of it (`custom_encoder=`); None when it holds no such module, or when what it
    was handed cannot be read."""
    api = torchapi.SUBMODULES.get(owner.api, {}).get(attribute)
    if api is None or owner.owner:
        return None
    arguments = owner.arguments
    keyword = torchapi.CUSTOM_SUBMODULES.get(attribute, "")
    custom = arguments.get(keyword)
    if custom is not None and not _may_be_none(ctx, custom, owner.scope):
        return instance(ctx, custom, owner.scope)
    if arguments.opaque and keyword:
        return None  # `**kwargs` may hand it a custom one
    replaceable = keyword if custom is not None and not is_none(custom) else ""
    return replace(owner, api=api, owner=owner.api, overrides="", peers=(), replaceable=replaceable)


def is_none(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "None"


def _may_be_none(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> bool:
    """`None`, or a name one of whose bindings that reach `expr` is `None` (an assignment, a parameter's default)."""
    if is_none(expr) or not isinstance(expr, cst.Name):
        return is_none(expr)
    for binding in dataflow.reaching(ctx, ctx.bindings(expr.value, scope), expr):
        param = binding.scope.params.get(binding.name) if binding.kind == "param" else None
        if is_none(binding.value if binding.kind == "assign" else param.default if param is not None else None):
            return True
    return False


@dataclass(frozen=True)
class CallSite:
    """A call of a project function or method, with its arguments bound to the callee's parameter names."""

    call: cst.Call
    scope: Scope
    arguments: Arguments


def callers(ctx: ModuleContext, function: Scope) -> list[CallSite]:
    """Where this module calls `function`: `name(...)` for a module function, `self.name(...)` for a method,
    calls of the class's instances for `forward` (what `module(x)` runs), and `Class(...)` for `__init__`."""
    if not isinstance(function.node, cst.FunctionDef):
        return []
    memo = ctx.memo.setdefault("callers", {})
    found = memo.get(function)
    if found is _PENDING:  # a re-entrant lookup (recursion through instances) sees no callers
        ctx.pending_reads += 1
        return []
    if found is not None:
        return found
    memo[function] = _PENDING
    klass = function.enclosing_class
    sites = [CallSite(call, scope, arguments_for(call, function)) for call, scope in _calls_of(ctx, function, klass)]
    memo[function] = sites
    return sites


def possible_callers(ctx: ModuleContext, function: Scope) -> list[tuple[CallSite, str]]:
    """The calls that may run a class's `forward`: each with the modules the called name may hold instead
    (`layer = A(...) if kind == "a" else B(...)`, then `nn.TransformerEncoder(layer, n)` called). The data such a
    call passes is what the forward gets whenever it runs, but only as a possibility."""
    klass = function.enclosing_class
    if klass is None or function.name != "forward" or not isinstance(function.node, cst.FunctionDef):
        return []
    api = PROJECT_PREFIX + klass.name
    return [(CallSite(call, scope, arguments_for(call, function)), " or ".join(chain.may))
            for call, scope, chain in _chains(ctx).running(api=api)
            if chain.may and any(api in (other.api, other.subclass) for built in chain for other in built.alternatives)]


def _calls_of(ctx: ModuleContext, function: Scope, klass: Scope | None) -> list[tuple[cst.Call, Scope]]:
    """The calls that run `function`, in source order, looked up among the few that can (by the called name,
    the qualified name of a class, or the modules a call runs), not in a pass over all the module's calls."""
    if klass is not None and function.name == "forward":
        api = PROJECT_PREFIX + klass.name
        return [(call, scope) for call, scope, chain in _chains(ctx).running(api=api)
                if not chain.may and any(api in (other.api, other.subclass) for built in chain
                                         for other in built.alternatives)]
    if klass is not None and function.name == "__init__":
        api = PROJECT_PREFIX + klass.name
        candidates = _calls_by_qualified_name(ctx).get(api, []) if not ctx.partial else [
            (call, scope) for call, scope in ctx.calls_through_aliases(klass.name)
            if _qualified_call(ctx, call, scope) == api]
    else:
        candidates = ctx.calls_named(function.name)
    return [(call, scope) for call, scope in candidates if _calls(ctx, call, scope, function, klass)]


def _calls_by_qualified_name(ctx: ModuleContext) -> dict[str, list[tuple[cst.Call, Scope]]]:
    """The module's calls of its own classes by the qualified name of what they call (`<module>.Encoder` for
    `Encoder(...)` and for an alias of it), computed once. A call through an imported name is left out: it never
    calls a class of this module, and resolving it may parse the file it comes from."""
    memo = ctx.memo.get("calls_by_qualified_name")
    if memo is None:
        memo = ctx.memo["calls_by_qualified_name"] = {}
        for call, scope in ctx.calls():
            name = _qualified_call(ctx, call, scope)
            if name is not None:
                memo.setdefault(name, []).append((call, scope))
    return memo


def _qualified_call(ctx: ModuleContext, call: cst.Call, scope: Scope) -> str | None:
    """The qualified name of what a call calls, unless it calls through an imported name."""
    root = call.func
    while type(root) is cst.Attribute:
        root = root.value
    bindings = ctx.bindings(root.value, scope) if type(root) is cst.Name else []
    if bindings and all(binding.kind == "import" for binding in bindings):
        return None
    return ctx.qualified_name(call.func, scope)


def _signature(function: Scope, skip_self: bool) -> torchapi.Signature:
    params = function.node.params
    names = [p.name.value for p in (*params.posonly_params, *params.params)]
    return torchapi.Signature(tuple(names[1:] if skip_self else names))


def arguments_for(call: cst.Call, function: Scope, before: tuple[cst.Arg, ...] = ()) -> Arguments:
    """A call's arguments bound to the parameter names of the project function or method it runs; `before`:
    the arguments a `functools.partial` the call goes through puts first."""
    return _bind((*before, *call.args), _signature(function, skip_self=function.enclosing_class is not None
                                                   and not _is_static(function.node)), 0)


def _is_static(function: cst.FunctionDef) -> bool:
    return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod" for d in function.decorators)


def _calls(ctx: ModuleContext, call: cst.Call, scope: Scope, function: Scope, klass: Scope | None) -> bool:
    """Does `call` run `function` (not `forward`: `_calls_of` reads that from the wrapping chains)?"""
    func = call.func
    if klass is None:
        return (isinstance(func, cst.Name) and func.value == function.name
                and ctx.qualified_name(func, scope) == PROJECT_PREFIX + function.name)
    if function.name == "__init__":
        return any(built.api == PROJECT_PREFIX + klass.name for built in constructions(ctx, call, scope))
    caller_class = ctx.class_of(scope)
    return (caller_class is klass and isinstance(func, cst.Attribute) and func.attr.value == function.name
            and isinstance(func.value, cst.Name) and func.value.value == scope.self_name)


def wrapping_chain(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> list[Construction]:
    """The module `expr` evaluates to, then the module that one was built around, and so on: calling
    `nn.TransformerEncoder(layer, n)` or `nn.Sequential(*blocks)` runs the inner layer's forward on the same
    input. A class of this file belongs to the chain only when its forward moves no axis (a stack of layers);
    one that transposes or reshapes is read instead, where it calls its inner module. A callable mhalint cannot
    name is assumed to keep the container contract (`ModuleCall.assumed` says so)."""
    return _chain_from(ctx, instance(ctx, expr, scope))


def _chain_from(ctx: ModuleContext, built: Construction | None) -> list[Construction]:
    chain: list[Construction] = []
    while built is not None and len(chain) < _MAX_WRAPPING and all(b.call is not built.call for b in chain):
        chain.append(built)
        built = _inner(ctx, built)
    return chain


def _inner(ctx: ModuleContext, built: Construction) -> Construction | None:
    if built.owner or built.foreign:
        return None  # a torch module's submodule: its owner's call builds it, not around an argument
    called = containers.called_name(ctx, built.call.func, built.scope)
    if called == containers.SEQUENTIAL:
        return _sequence_head(ctx, built)
    if called in containers.HOLDERS:
        return element(ctx, built.call, built.scope)
    if built.api in (torchapi.ENCODER, torchapi.DECODER):
        return _first_module(ctx, built)
    if built.api.startswith("torch."):
        return None
    if built.api.startswith(PROJECT_PREFIX):  # whether its forward moves axes is read first: it is cheaper
        return None if _moves_axes(ctx, ctx.classes.get(built.api[len(PROJECT_PREFIX):])) else \
            _first_module(ctx, built)
    inner = _first_module(ctx, built)
    if inner is None:
        return None
    imported = imported_class(ctx, built)  # read only now: it may parse another file
    if imported is not None:
        return None if _moves_axes(*imported) else inner
    return inner if built.api == UNKNOWN_CALLABLE else None


def _sequence_head(ctx: ModuleContext, built: Construction) -> Construction | None:
    """Calling `nn.Sequential(a, b, c)` calls `a` on its input, then `b` on `a`'s output, and so on: `a`, with
    the later modules its input reaches in the same layout (each before them keeps the axes) as its peers."""
    found = _members(ctx, built.call, built.scope, 1, ())
    if not found:
        return None
    reached = [found[0]]
    for previous, member in zip(found, found[1:]):
        if not _keeps_layout(ctx, previous):
            break
        reached.append(member)
    return replace(found[0], peers=tuple(reached[1:]))


def _keeps_layout(ctx: ModuleContext, built: Construction) -> bool:
    """Does the module give an output with its input's axes (a norm, a linear layer, an encoder layer, a project
    class whose forward moves no axis)?"""
    if built.api in KEEPS_AXES_MODULES or built.api in (torchapi.ENCODER_LAYER, torchapi.ENCODER):
        return True
    return built.api.startswith(PROJECT_PREFIX) and not _moves_axes(
        ctx, ctx.classes.get(built.api[len(PROJECT_PREFIX):]))


def _first_module(ctx: ModuleContext, built: Construction) -> Construction | None:
    """The module a wrapper is built around: its first argument, or a `layer=`-like keyword."""
    first = _first_argument(built)
    return instance(ctx, first, built.scope) if first is not None else None


def _first_argument(built: Construction) -> cst.BaseExpression | None:
    first = next((a for a in built.call.args if not a.star and (a.keyword is None or a.keyword.value in (
        "encoder_layer", "decoder_layer", "layer", "module", "block"))), None)
    if first is None or not isinstance(first.value, cst.Name | cst.Attribute | cst.Call):
        return None
    return first.value


def imported_class(ctx: ModuleContext, built: Construction) -> tuple[ModuleContext, Scope | None] | None:
    """The context of the project file that defines the class `built` is made from, and that class (None when
    the file does not define it where the import says): for `from .blocks import PreNorm` then `PreNorm(...)`.
    None when the class is not imported from a file of the run."""
    project = ctx.project
    func = built.call.func
    if project is None or not isinstance(func, cst.Name):
        return None
    memo = ctx.memo.setdefault("imported_class", {})
    if func.value not in memo:
        found = project.imported_class(ctx.path, func.value)
        other = project.context(found[0], ctx.limits) if found is not None else None
        memo[func.value] = (other, other.classes.get(found[1])) if other is not None else None
    if memo[func.value] is not None:
        ctx.read_project = True  # what the chain holds depends on that file (the cache records it)
    return memo[func.value]


def _moves_axes(ctx: ModuleContext, klass: Scope | None) -> bool:
    """Does the class's forward, or a method it calls on self, transpose, permute or reshape anything? Such a
    wrapper does not pass its input on as it gets it. Unknown (no class, no forward) counts as moving."""
    forward = klass.methods.get("forward") if klass is not None else None
    if forward is None:
        return True
    memo = ctx.memo.setdefault("moves_axes", {})
    if klass not in memo:
        methods = [forward]
        for call in own_nodes(forward.node, (cst.Call,)):
            func = call.func
            if (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
                    and func.value.value == forward.self_name and func.attr.value in klass.methods):
                methods.append(klass.methods[func.attr.value])
        memo[klass] = any(_reorders(ctx, method) for method in methods)
    return memo[klass]


def _reorders(ctx: ModuleContext, method: Scope) -> bool:
    for node in own_nodes(method.node, (cst.Call, cst.Attribute)):
        if isinstance(node, cst.Attribute) and node.attr.value in ("T", "mT"):
            return True
        if isinstance(node, cst.Call):
            name = ctx.qualified_name(node.func, method) or ""
            method_name = node.func.attr.value if isinstance(node.func, cst.Attribute) else name.rsplit(".", 1)[-1]
            if method_name in REORDER or method_name in REGROUP or name.startswith("einops."):
                return True
    return False


@dataclass(frozen=True)
class ModuleCall:
    """A call that runs a module's forward, directly or through a container built around it."""

    call: cst.Call
    scope: Scope
    direct: bool  # the module itself is called (not a container of it): its own signature applies
    assumed: str = ""  # the code of a wrapper mhalint cannot see into, taken to pass the input on unchanged
    may: str = ""  # the other modules the called name may hold here, when the call may run one of them instead

    @property
    def query(self) -> cst.BaseExpression | None:
        """The tensor passed first (query/src/tgt): what the module's layout applies to."""
        for arg in self.call.args:
            if arg.keyword is None and not arg.star:
                return arg.value
            if arg.keyword is not None and arg.keyword.value in ("query", "src", "tgt"):
                return arg.value
        return None


def module_calls(ctx: ModuleContext, built: Construction) -> list[ModuleCall]:
    """Every call in the module that runs `built`'s forward."""
    found = []
    for call, scope, chain in _chains(ctx).running(constructions=(built.call,)):
        matched = next(((i, a) for i, b in enumerate(chain) for a in b.alternatives
                        if a.call is built.call and (built.certain or a.api == built.api)), None)
        if matched is None or (matched[1].overrides and not matched[1].owner):
            continue  # an instance of a subclass whose own forward runs: its calls of torch's are read below
        position = matched[0]
        unseen = next((b for b in chain[:position]
                       if b.api == UNKNOWN_CALLABLE and imported_class(ctx, b) is None), None)
        found.append(ModuleCall(call, scope, direct=position == 0,
                                assumed=ctx.code(unseen.call.func) if unseen is not None else built.assumed,
                                may=f"`{ctx.code(call.func)}` may hold {' or '.join(chain.may)} at this call"
                                if chain.may else ""))
    seen = {id(use.call) for use in found}
    return found + [use for use in _inherited_calls(ctx, built) if id(use.call) not in seen]


def _inherited_calls(ctx: ModuleContext, built: Construction) -> list[ModuleCall]:
    """The calls in a project subclass's own methods that run what it inherits from torch: `super().forward(...)`
    and `self.self_attn(...)` of a layer. Each instance of the class runs them."""
    names = {built.overrides, built.subclass[len(PROJECT_PREFIX):] if built.subclass.startswith(PROJECT_PREFIX)
             else ""} if built.overrides or built.api in torchapi.SUBMODULES else ()
    return [ModuleCall(call, scope, direct=True, assumed=built.assumed)
            for name in names if name in ctx.classes for call, scope in _inherited_in(ctx, ctx.classes[name])
            if _runs_own(built, call)]


def _runs_own(built: Construction, call: cst.Call) -> bool:
    """Does a call of an inherited submodule (`self.encoder(src)`) run the one `built` makes, not a module its
    constructor was handed in place of it (`custom_encoder=`), which may be anything?"""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in torchapi.CUSTOM_SUBMODULES:
        return True
    arguments = built.arguments
    return not arguments.opaque and arguments.get(torchapi.CUSTOM_SUBMODULES[func.attr.value]) is None


def _inherited_in(ctx: ModuleContext, klass: Scope) -> list[tuple[cst.Call, Scope]]:
    """The calls in a class's own methods of what it inherits from torch (`_runs_inherited`), and of the layer's
    methods that call its attention with their first argument as the query (`self._sa_block(x, ...)`)."""
    return ctx.settled("inherited_in", klass, lambda: [
        (call, scope) for method in klass.methods.values() for call, scope in ctx.calls_in(method)
        if _runs_inherited(ctx, call, scope) is not None or _runs_block(ctx, call, scope, klass)])


def _runs_block(ctx: ModuleContext, call: cst.Call, scope: Scope, klass: Scope) -> bool:
    """`self._sa_block(x, ...)` in a subclass of a torch layer that neither defines that method nor sets the
    attention it calls."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)
            and func.value.value == scope.self_name and func.attr.value not in klass.methods):
        return False
    found = torch_class(ctx, klass)
    attention = torchapi.INHERITED_BLOCKS.get(found.api, {}).get(func.attr.value) if found is not None else None
    return attention is not None and attention not in found.bound


class Chain(list):
    """A call's wrapping chain; `may` names the other modules the call may run instead (empty when certain)."""

    may: tuple[str, ...] = ()


def _chains_of(ctx: ModuleContext, call: cst.Call, scope: Scope) -> list[Chain]:
    """The wrapping chains a call may run: one, or, where the called name may hold several modules, one per
    module whose construction's facts the call's own do not exclude (`if self.kind == "a": self.attn(x)` runs
    only the module built where kind == "a"). Several are each only a possibility (`may`). Asked by the index
    of chains and by `call_target`: computed once. None at all for `x.view(...)`, `torch.cat(...)`: an attribute no
    module holds a submodule by, of anything but `self`, names no module (`instance`, `may_hold`)."""
    func = call.func
    if type(func) is cst.Attribute and func.attr.value not in _SUBMODULE_NAMES \
            and ctx.attribute_bindings(func, scope) is None:
        return []
    return ctx.settled("chains_of", call, lambda: _read_chains(ctx, call, scope))


def _read_chains(ctx: ModuleContext, call: cst.Call, scope: Scope) -> list[Chain]:
    chain = Chain(wrapping_chain(ctx, call.func, scope))
    if chain and not _returns_unnamed(ctx, chain[0]):
        chain.may = (f"its {chain[0].replaceable}",) if chain[0].replaceable else ()
        return _forked(ctx, chain)
    reaching = [built for built in may_hold(ctx, call.func, scope) if _reaches(ctx, built, call, scope)]
    chains = []
    for built in reaching:
        chain = Chain(_chain_from(ctx, built))
        chain.may = _others(built, reaching)
        chains += _forked(ctx, chain)
    return chains


def _returns_unnamed(ctx: ModuleContext, built: Construction) -> bool:
    """Is `built` the call of a module function of this file whose returns name no one module (`build_encoder(args)`
    building one class or another): `may_hold` reads the classes it may give back."""
    name = built.api[len(PROJECT_PREFIX):] if built.api.startswith(PROJECT_PREFIX) else ""
    return name in ctx.functions and name not in ctx.classes and ctx.functions[name].enclosing_class is None


def _others(built: Construction, choices: list[Construction]) -> tuple[str, ...]:
    """The classes a name may hold besides `built`'s, for `Chain.may` (none when it holds only `built`)."""
    if len(choices) < 2:
        return ()
    return tuple(sorted({_short(b.api) for b in choices if b is not built} - {_short(built.api)})) or ("another one",)


def _forked(ctx: ModuleContext, chain: Chain) -> list[Chain]:
    """A torch stack built around a layer that may be one of several (`layer = A(...) if norm else B(...)`, then
    `nn.TransformerEncoder(layer, n)`): one chain per layer it may hold, each only a possibility."""
    last = chain[-1]
    first = _first_argument(last) if last.api in (torchapi.ENCODER, torchapi.DECODER) and not last.owner else None
    choices = may_hold(ctx, first, last.scope) if first is not None and _inner(ctx, last) is None else []
    if len(choices) < 2:
        return [chain]
    forks = []
    for built in choices:
        fork = Chain([*chain, *_chain_from(ctx, built)])
        fork.may = tuple(sorted({*chain.may, *_others(built, choices)}))
        forks.append(fork)
    return forks


def _short(api: str) -> str:
    return api[len(PROJECT_PREFIX):] if api.startswith(PROJECT_PREFIX) else torchapi.short_name(api)


def may_hold(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> list[Construction]:
    """The modules `expr` may evaluate to where `instance` finds no one module: `A(...) if c else B(...)`, a name
    or `self.x` bound on different branches, a constructor whose class is chosen. Each comes with the facts under
    which it is built (the tests around its construction). Empty when any of them cannot be read."""
    if depth > _MAX_DEPTH:
        return []
    kind = type(expr)  # compared by type: libcst's isinstance is a Python call when it fails
    if kind is cst.IfExp:
        body, orelse = (may_hold(ctx, e, scope, depth + 1) for e in (expr.body, expr.orelse))
        return body + orelse if body and orelse else []
    if kind is cst.Call:
        found = constructions(ctx, expr, scope) if class_choices(ctx, expr.func, scope) else \
            _may_return(ctx, expr, scope, depth) or \
            [built for built in [instance(ctx, expr, scope, depth + 1)] if built is not None]
        return [replace(b, condition=b.condition | branches.guards(ctx, b.call, b.scope)) for b in found]
    if kind is cst.Name:
        bindings = dataflow.reaching(ctx, ctx.bindings(expr.value, scope), expr)
        if len(bindings) == 1 and isinstance(bindings[0].node, cst.For):
            return _stack_choices(ctx, bindings[0], depth)
    else:
        bindings = ctx.attribute_bindings(expr, scope)
    if not bindings or any((b.kind != "assign" or b.value is None) and b.kind != "param" for b in bindings):
        return []
    found: dict[tuple[int, str], Construction] = {}
    for position, binding in enumerate(bindings):
        if binding.kind == "param":
            each = _may_pass(ctx, binding, depth)
        elif _adds_no_module(ctx, binding):
            continue
        else:
            each = may_hold(ctx, binding.value, binding.scope, depth + 1)
        if not each:
            return []
        overridden = _overridden(ctx, binding, bindings[position + 1:])
        found.update(((id(b.call), b.api), replace(b, condition=b.condition | overridden)) for b in each)
    return list(found.values())


def _may_return(ctx: ModuleContext, call: cst.Call, scope: Scope, depth: int) -> list[Construction]:
    """The modules a call of this module's function may give back (`build_encoder(args)`, whose branches build
    different classes into the name it returns): what each `return` may hold."""
    function = project_function(ctx, call, scope)
    values = returned(function) if function is not None and function.enclosing_class is None else []
    each = [may_hold(ctx, value, function, depth + 1) for value in values]
    return [] if not each or [] in each else [built for one in each for built in one]


def _may_pass(ctx: ModuleContext, binding: Binding, depth: int) -> list[Construction]:
    """The modules a parameter may hold: what every caller passes, in this file or, for an `__init__` this file
    never calls, in the files that build its class (each as this file sees it)."""
    found = []
    for passed in _passed(ctx, binding, ()):
        if passed is None:
            return []
        argument, scope, home, _ = passed
        each = [_here(ctx, home, built) for built in may_hold(home, argument, scope, depth + 1)]
        if not each or None in each:
            return []
        found += each
    return found


def _stack_choices(ctx: ModuleContext, binding: Binding, depth: int) -> list[Construction]:
    """`for block in self.blocks: x = block(x)` where `self.blocks` is a stack of one class on one branch and of
    another on the other (`if kind == "a": self.blocks = nn.ModuleList([A() ...]) else: ... [B() ...]`): each
    stack's layers, under the tests around its binding. Empty where every binding holds one class (`element`
    reads that) or one cannot be read."""
    source = containers.loop_source(ctx, binding)
    if source is None or not source[2]:
        return []
    container, scope = source[0], source[1]
    stacks = ctx.bindings(container.value, scope) if isinstance(container, cst.Name) else \
        ctx.attribute_bindings(container, scope) or []
    if len(stacks) < 2 or any(b.kind != "assign" or b.value is None for b in stacks):
        return []
    found = []
    for stack in stacks:
        built = element(ctx, stack.value, stack.scope, depth + 1)
        if built is None:
            return []
        found.append(replace(built, condition=built.condition | branches.guards(ctx, stack.node, stack.scope)))
    return found if len({built.api for built in found}) > 1 else []


def _overridden(ctx: ModuleContext, binding: Binding, after: list[Binding]) -> branches.Condition:
    """`self.attn = nn.MultiheadAttention(...)` then, later in the same function, `if kind == "ca":
    self.attn = Other(...)`: the first is what the name holds after it only where that one test fails. `after`:
    the name's bindings after this one (a name's bindings are listed in source order)."""
    mine = branches.guards(ctx, binding.node, binding.scope)
    found = set()
    for later in after:
        if later.scope is not binding.scope:
            continue
        extra = branches.guards(ctx, later.node, later.scope) - mine
        if len(extra) == 1:
            found.add(next(iter(extra)).negated())
    return frozenset(found)


def _reaches(ctx: ModuleContext, built: Construction, call: cst.Call, scope: Scope) -> bool:
    """Can `call` run `built`: do the tests around the call leave its construction's facts possible, and its
    class those that an `isinstance` test of the called name allows?"""
    where = branches.guards(ctx, call, scope) | branches.method_guards(ctx, scope)
    if branches.excludes(built.condition, where):
        return False
    tested = branches.class_facts(where, branches.subject(ctx, call.func, scope))
    return not any(_may_be(ctx, built.api, fact.values) is False if fact.holds else _is(built.api, fact.values)
                   for fact in tested)


def _is(api: str, classes: frozenset) -> bool:
    """Is a module of `api` certainly an instance of one of `classes`?"""
    return api in classes


def _may_be(ctx: ModuleContext, api: str, classes: frozenset, depth: int = 0) -> bool:
    """May a module of `api` be an instance of one of `classes` (an isinstance test that holds)? A torch class is
    no project class; a project class is one of its bases when the module shows them all."""
    if api in classes or api == UNKNOWN_CALLABLE or "torch.nn.Module" in classes or depth > _MAX_DEPTH:
        return True
    if not api.startswith(PROJECT_PREFIX):
        return any(c.rsplit(".", 1)[-1] == api.rsplit(".", 1)[-1] for c in classes if not c.startswith(PROJECT_PREFIX))
    klass = ctx.classes.get(api[len(PROJECT_PREFIX):])
    if klass is None:
        return True
    bases = [ctx.qualified_name(base, klass.parent) for base in klass.bases]
    return any(base is None or base != "torch.nn.Module" and (
        not base.startswith(PROJECT_PREFIX) and base not in torchapi.CONSTRUCTORS
        or _may_be(ctx, base, classes, depth + 1)) for base in bases)


# Arguments bound while following a call into a project function: (callee scope, parameter, argument, caller scope,
# the caller's context).
Env = "tuple[tuple[Scope, str, cst.BaseExpression, Scope, ModuleContext], ...]"


def instance(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int = 0,
             env: Env = ()) -> Construction | None:
    """The construction of the module `expr` evaluates to, when the code shows it unambiguously: through local
    names, `self.x`, parameters (what the callers pass), containers, `copy.deepcopy` and factory functions."""
    if depth > _MAX_DEPTH:
        return None
    ctx.limits.check()
    if env:
        return _instance(ctx, expr, scope, depth, env)
    memo = ctx.memo.setdefault("instance", {})
    key = (expr, scope)
    found = memo.get(key, _MISSING)
    if found is _PENDING:  # a cycle through this expression finds nothing
        ctx.pending_reads += 1
        return None
    if found is _MISSING:
        memo[key] = _PENDING
        memo[key] = found = _instance(ctx, expr, scope, depth, env)
    return found


_MISSING = object()
_PENDING = object()  # in a memo: the answer is being computed (a cycle led back to it, see ctx.settled)


def running_calls(ctx: ModuleContext, constructions: tuple[cst.Call, ...]):
    """(call, scope, its wrapping chain) for each call of the module whose chain may hold one of the
    `constructions` (the caller checks the chain), in source order."""
    return _chains(ctx).running(constructions=constructions)


def _chains(ctx: ModuleContext) -> _Chains:
    chains = ctx.memo.get("chains")
    if chains is None:
        chains = ctx.memo["chains"] = _Chains(ctx)
    return chains


class _Chains:
    """The wrapping chain of every call of the module (`wrapping_chain` of what it calls), each computed once in
    source order and indexed by the constructions in it: "which calls run this module" then costs its answer,
    not a pass over all the calls (which made a file of N attention modules quadratic).

    A chain computed while it read an answer still being computed (a cycle through instances and callers) is
    not kept but computed again at each question, as the pass over all calls did; so is the chain of a call
    whose computation led to the question (it is still unfinished)."""

    def __init__(self, ctx: ModuleContext):
        self.ctx = ctx
        self.calls = ctx.calls()
        self.read = 0  # the calls before this index have been read
        self.kept: dict[int, list[Chain]] = {}
        self.unsettled: set[int] = set()  # being computed, or computed through a cycle: computed at each question
        self.by_construction: dict[cst.Call, list[int]] = {}
        self.by_api: dict[str, list[int]] = {}

    def running(self, *, constructions: tuple[cst.Call, ...] = (),
                api: str | None = None) -> list[tuple[cst.Call, Scope, list[Construction]]]:
        """(call, scope, chain) for each call whose chain may hold one of `constructions` (constructor calls) or a
        construction of `api` (the caller checks the chain), in source order."""
        self._read_all()
        found = self.by_api.get(api, []) if api is not None else \
            [index for built in constructions for index in self.by_construction.get(built, [])]
        if self.unsettled or len(constructions) > 1:
            found = sorted({*found, *self.unsettled})
        return [(call, scope, chain) for index in found for call, scope in (self.calls[index],)
                for chain in (self.kept[index] if index in self.kept else _chains_of(self.ctx, call, scope))]

    def _read_all(self) -> None:
        while self.read < len(self.calls):  # a question asked while a chain is computed goes on from there
            self.ctx.limits.check()
            index = self.read
            self.read += 1
            call, scope = self.calls[index]
            self.unsettled.add(index)
            pending_reads = self.ctx.pending_reads
            chains = _chains_of(self.ctx, call, scope)
            if self.ctx.pending_reads != pending_reads:
                continue
            self.unsettled.discard(index)
            self.kept[index] = chains
            for built in (other for chain in chains for level in chain for other in level.alternatives):
                for api in (built.api, built.subclass) if built.subclass else (built.api,):
                    for calls in (self.by_construction.setdefault(built.call, []), self.by_api.setdefault(api, [])):
                        if not calls or calls[-1] != index:  # two wrappers of one class in a chain: the call once
                            calls.append(index)


def _instance(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int,
              env: Env) -> Construction | None:
    kind = type(expr)  # compared by type: libcst's isinstance is a Python call when it fails
    if kind is cst.Call:
        name = ctx.qualified_name(expr.func, scope)
        if name == "copy.deepcopy" and expr.args:
            return instance(ctx, expr.args[0].value, scope, depth + 1, env)
        if class_choices(ctx, expr.func, scope):
            return None  # one of several classes: `may_hold` gives each
        built = (construction(ctx, expr, scope) or _same_module(ctx, expr, scope, depth, env)
                 or _through_function(ctx, expr, scope, depth, env, instance)
                 or Construction(name or UNKNOWN_CALLABLE, expr, scope))
        return (_through_init(ctx, built) if built.call is expr and not built.api.startswith("torch.") else None) \
            or built
    if kind is cst.Name:  # the bindings that reach this read: `layer = A(...); stack(layer); layer = ...`
        return _from_bindings(ctx, dataflow.reaching(ctx, ctx.bindings(expr.value, scope), expr), depth, env)
    attribute = ctx.attribute_bindings(expr, scope)
    if attribute == []:
        return inherited(ctx, expr, scope)
    if attribute is not None:
        return _from_bindings(ctx, attribute, depth, env)
    if kind is cst.Subscript:
        key = containers.subscript_key(expr)[1]
        stored = _keyed(ctx, expr.value, key, scope, depth + 1, env) if isinstance(key, str) else None
        if stored and all(built.api == stored[-1].api for built in stored):
            return replace(stored[-1], peers=tuple(stored[:-1]))
        return element(ctx, expr.value, scope, depth + 1, env)
    if kind is cst.Attribute:  # `self.transformer.encoder`, `layer.self_attn`
        if expr.attr.value not in _SUBMODULE_NAMES:
            return None  # `x.view`: no owner holds a module by that name, whatever `x` is
        owner = instance(ctx, expr.value, scope, depth + 1, env)
        return submodule(ctx, owner, expr.attr.value) if owner is not None else None
    return None


def _same_module(ctx: ModuleContext, call: cst.Call, scope: Scope, depth: int, env: Env) -> Construction | None:
    """`module.eval()`, `.to(device)`, `torch.compile(module)`, `DDP(module)`: the module they return or wrap,
    when that is a module this analysis knows (a torch attention module or a project class), not a tensor."""
    operand = _module_operand(ctx, call, scope)
    built = instance(ctx, operand, scope, depth + 1, env) if operand is not None else None
    known = built is not None and (built.api in torchapi.CONSTRUCTORS or built.api.startswith(PROJECT_PREFIX)
                                   or _imported_construction(ctx, built))
    return built if known else None


def _imported_construction(ctx: ModuleContext, built: Construction) -> bool:
    """`Translator(...)` of a class imported from another file of the run (the import index says so; the file is
    not parsed): `Translator(...).to(device)` is that module."""
    func = built.call.func
    return (isinstance(func, cst.Name) and ctx.names is not None
            and ctx.names.imported_class(ctx.path, func.value) is not None)


def _module_operand(ctx: ModuleContext, value: cst.BaseExpression | None, scope: Scope) -> cst.BaseExpression | None:
    """What a call returns or wraps when it gives back the same module (`m.eval()`, `torch.compile(m)`)."""
    if not isinstance(value, cst.Call):
        return None
    func = value.func
    if isinstance(func, cst.Attribute) and func.attr.value in RETURNS_MODULE:
        return func.value
    if value.args and value.args[0].keyword is None and not value.args[0].star \
            and ctx.qualified_name(func, scope) in FORWARDS_TO_MODULE:
        return value.args[0].value
    return None


def _adds_no_module(ctx: ModuleContext, binding: Binding) -> bool:
    """`model = DDP(model)`, `attn = attn.to(device)`, `self.attn = torch.compile(self.attn)`: the same module
    as the name's other bindings, so it adds nothing to what they agree on; nor does `self.attn = None` (a
    placeholder, or a module removed): a call of it raises, so no call that runs is a call of that binding."""
    if is_none(binding.value):
        return True
    operand = _module_operand(ctx, binding.value, binding.scope)
    while (inner := _module_operand(ctx, operand, binding.scope)) is not None:  # torch.compile(model.eval())
        operand = inner
    if isinstance(operand, cst.Name):
        return operand.value == binding.name
    return (isinstance(operand, cst.Attribute) and operand.attr.value == binding.name
            and isinstance(operand.value, cst.Name) and operand.value.value == binding.scope.self_name)


def _from_bindings(ctx: ModuleContext, bindings: list[Binding], depth: int, env: Env) -> Construction | None:
    """All bindings must agree on the API; the last one is taken as the construction to read arguments from,
    the others are its peers (a call of the name runs whichever was bound: each is paired with it). Memoised per list of
    bindings (a name bound N times is read N times, and each read would go through the N), unless a call is being
    followed (`env`) or an answer still being computed was read (a cycle)."""
    if env or not bindings:
        return _agreed(ctx, bindings, depth, env)
    # the bindings are the context's own, alive as long as it is (the list may be a reaching subset, made anew)
    return ctx.settled("from_bindings", (*map(id, bindings), depth), lambda: _agreed(ctx, bindings, depth, env))


def _agreed(ctx: ModuleContext, bindings: list[Binding], depth: int, env: Env) -> Construction | None:
    found: list[Construction] = []
    kept = [binding for binding in bindings if binding.kind != "assign" or not _adds_no_module(ctx, binding)]
    for binding in kept if len(kept) < len(bindings) and kept else bindings:
        if binding.kind == "param":
            built = _parameter(ctx, binding, depth, env)
        elif isinstance(binding.node, cst.For):
            source = containers.loop_source(ctx, binding)
            built = element(ctx, source[0], source[1], depth + 1, env) if source is not None and source[2] else None
        elif binding.value is None or binding.kind != "assign":
            return None
        else:
            built = instance(ctx, binding.value, binding.scope, depth + 1, env)
        if built is None:
            return None
        found.append(built)
    if not found or any(f.api != found[0].api for f in found):
        return None
    others = tuple({id(b.call): b for f in found[:-1] for b in f.alternatives if b.call is not found[-1].call}.values())
    return replace(found[-1], peers=found[-1].peers + others) if others else found[-1]


def _parameter(ctx: ModuleContext, binding: Binding, depth: int, env: Env) -> Construction | None:
    """A parameter is what the call being followed passes, or else what every caller in the module passes (in
    the files that build the class, where this one does not)."""
    found = None
    for passed in _passed(ctx, binding, env):
        if passed is None:
            return None
        argument, caller_scope, home, followed = passed
        built = _here(ctx, home, instance(home, argument, caller_scope, depth + 1, env), followed)
        if built is None or (found is not None and built.api != found.api):
            return None
        found = built
    return found


def _passed(ctx: ModuleContext, binding: Binding, env: Env) -> Iterator[tuple[cst.BaseExpression, Scope,
                                                                              ModuleContext, bool] | None]:
    """What a parameter gets, each with the context it is read in and whether it is the argument of the call
    being followed (whose modules are the follower's): that argument, or else every caller's in the module, or,
    for an `__init__` this module never calls, in the files that import its class (`Stack(cfg, Block(...), 6)`
    there). None for a caller that passes nothing for it, and then no more. One caller at a time: a reader whose
    answer one caller decides (nothing, or another class) reads no further file."""
    for callee, name, argument, caller_scope, home in reversed(env):
        if callee is binding.scope and name == binding.name:
            yield argument, caller_scope, home, True
            return
    sites = [(site.call, site.scope, site.arguments, ctx) for site in callers(ctx, binding.scope)]
    if not sites and binding.scope.name == "__init__":
        from mhalint.analysis.sites import each_elsewhere  # sites reads this module's callers: imported when asked
        sites = ((site.site.call, site.site.scope, site.site.arguments, site.ctx)
                 for site in each_elsewhere(ctx, binding.scope))
    for _, scope, bound, home in sites:
        argument = bound.get(binding.name)
        yield None if argument is None else (argument, scope, home, False)
        if argument is None:
            return


def _here(ctx: ModuleContext, home: ModuleContext, built: Construction | None,
          followed: bool = False) -> Construction | None:
    """A module built in `home` as this file sees it: an instance of one of this file's classes, which `home`
    imports from it (`foreign`: its call is `home`'s); None for any other module built there. What a call being
    `followed` passes stays as it is: the follower reads it."""
    if home is ctx or built is None or followed:
        return built
    made = [alternative.call.func for alternative in built.alternatives]
    names = [ctx.project.imported_class(home.path, func.value) if isinstance(func, cst.Name) else None
             for func in made]
    here = os.path.abspath(ctx.path)
    if any(name is None or name[0] != here or name[1] not in ctx.classes for name in names):
        return None
    home.read_project = ctx.read_project = True
    foreign = [replace(alternative, api=PROJECT_PREFIX + name[1], peers=(), foreign=True)
               for alternative, name in zip(built.alternatives, names)]
    return replace(foreign[0], peers=tuple(foreign[1:]))


def _through_function(ctx: ModuleContext, call: cst.Call, scope: Scope, depth: int, env: Env, follow):
    """Follow a call of a project function or method (`_get_clones(layer, n)`, `self._get_clones(layer, n)`,
    defined here or imported from another file of the run) into its `return`s, read in its file with the call's
    arguments bound to its parameters: the modules of every return, or the one module they all agree on (the
    others its peers). From another file, only a container's members (a clone helper's), and only what this file
    passes, come back (a module that function builds is not followed; nor is a function that gives one module,
    `norm_layer(dim)`: that file is not parsed)."""
    found = _project_function(ctx, call, scope, depth, env, imported=follow is _members)
    if found is None:
        return None
    home, function = found
    returns = returned(function)
    arguments = arguments_for(call, function)  # a method's `self` is not among its arguments
    bound = tuple((function, param, arg.value, scope, ctx) for param, arg in arguments.by_name.items())
    results = [follow(home, value, function, depth + 1, env + bound) for value in returns]
    if not results or None in results:
        return None
    built = [b for result in results for one in (result if isinstance(result, list) else [result])
             for b in one.alternatives]
    if home is not ctx and not all(b.foreign or ctx.parent(b.call) is not None for b in built):
        return None
    if isinstance(results[0], list):
        return _joined(results)
    unique = list({id(b.call): b for b in built}.values())
    if any(b.api != results[-1].api for b in unique):
        return None
    return replace(results[-1], peers=tuple(b for b in unique if b.call is not results[-1].call))


def _project_function(ctx: ModuleContext, call: cst.Call, scope: Scope, depth: int, env: Env,
                      imported: bool) -> tuple[ModuleContext, Scope] | None:
    """The module function a call runs and the context of its file: this module's, or one imported by name from
    another file of the run, which is parsed only where the call hands it a module this file builds."""
    name = ctx.qualified_name(call.func, scope)
    if name is not None and name.startswith(PROJECT_PREFIX):
        function = ctx.functions.get(name[len(PROJECT_PREFIX):])
        return (ctx, function) if function is not None else None
    method = project_function(ctx, call, scope) if isinstance(call.func, cst.Attribute) else None
    if method is not None:  # `self._get_clones(layer, n)`
        return ctx, method
    func = call.func
    bindings = ctx.bindings(func.value, scope) if isinstance(func, cst.Name) else []
    project = ctx.names  # the run's index, in another file read for this one too
    if not imported or project is None or not bindings or any(b.kind != "import" for b in bindings) or not any(
            instance(ctx, arg.value, scope, depth + 1, env) is not None for arg in call.args if not arg.star):
        return None
    found = project.imported_function(ctx.path, func.value)
    home = project.context(found[0], ctx.limits) if found is not None else None
    function = home.functions.get(found[1]) if home is not None else None
    if function is None or function.enclosing_class is not None:
        return None
    ctx.read_project = True  # what the call gives depends on that file (the cache records it)
    return home, function


def returned(function: Scope) -> list[cst.BaseExpression]:
    """The values a function returns (not counting functions nested in it). Kept on the scope: the analyses ask
    it of the same functions again and again (a walk over the body each time was 4% of a cold run)."""
    if function.returns is None:
        function.returns = [node.value for node in own_nodes(function.node, (cst.Return,)) if node.value is not None]
    return function.returns


def element(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int = 0,
            env: Env = ()) -> Construction | None:
    """The module the elements of a container are (`nn.ModuleList([Layer(...) for _ in range(n)])`, a list
    literal, `[layer] * n`, `_get_clones(layer, n)`, a list appended to, a name bound to one of these), when they
    are all of one API: the last one, with the others as its peers (a loop over the container calls each)."""
    found = _members(ctx, expr, scope, depth, env)
    unique = list({id(built.call): built for built in found or ()}.values())
    if not unique or any(built.api != unique[-1].api for built in unique):
        return None
    return replace(unique[-1], peers=tuple(unique[:-1]))


def _members(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int,
             env: Env) -> list[Construction] | None:
    """Every module a container may hold, in order; None when one of them cannot be named."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):
        return _members_of_call(ctx, expr, scope, depth, env)
    if isinstance(expr, cst.ListComp | cst.GeneratorExp | cst.SetComp):
        return _alternatives(ctx, expr.elt, scope, depth, env)
    if isinstance(expr, cst.DictComp):
        return _alternatives(ctx, expr.value, scope, depth, env)
    if isinstance(expr, cst.Dict):
        return _joined([_members(ctx, value, scope, depth + 1, env) if key is None else
                        _alternatives(ctx, value, scope, depth, env) for key, value in containers.pairs(expr)])
    if isinstance(expr, cst.List | cst.Tuple | cst.Set):
        return _joined([_members(ctx, e.value, scope, depth + 1, env) if isinstance(e, cst.StarredElement) else
                        _alternatives(ctx, e.value, scope, depth, env) for e in expr.elements])
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
        return _joined([_members(ctx, expr.left, scope, depth + 1, env),
                        _members(ctx, expr.right, scope, depth + 1, env)])
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Multiply):  # [layer] * n, n * [layer]
        listed = expr.right if isinstance(expr.right, cst.List | cst.Tuple | cst.ListComp) else expr.left
        return _members(ctx, listed, scope, depth + 1, env)
    if isinstance(expr, cst.IfExp):
        return _joined([_members(ctx, expr.body, scope, depth + 1, env),
                        _members(ctx, expr.orelse, scope, depth + 1, env)])
    if isinstance(expr, cst.Subscript) and containers.is_slice(expr):
        return _members(ctx, expr.value, scope, depth + 1, env)
    if isinstance(expr, cst.Name | cst.Attribute):
        return _named_members(ctx, expr, scope, depth, env)
    return None


def _members_of_call(ctx: ModuleContext, call: cst.Call, scope: Scope, depth: int,
                     env: Env) -> list[Construction] | None:
    """`nn.ModuleList(...)`, `nn.Sequential(a, b)`, `nn.ModuleDict({...})`, `copy.deepcopy(layers)`,
    `list(...)`, `blocks.values()`, or a project function that returns a container (`_get_clones`)."""
    called = containers.called_name(ctx, call.func, scope)
    args = [arg for arg in call.args if arg.keyword is None]
    if called in containers.HOLDERS or called == containers.SEQUENTIAL:
        if any(arg.star == "**" for arg in args) or (called in containers.HOLDERS and len(args) > 1):
            return None
        found = []
        for arg in args:
            holds_modules = called == containers.SEQUENTIAL and not arg.star and not _holder(ctx, arg.value, scope)
            entries = containers.pairs(arg.value) if called != containers.SEQUENTIAL else None
            if holds_modules:
                found.append(_alternatives(ctx, arg.value, scope, depth, env))
            elif entries is not None and not isinstance(arg.value, cst.Dict):  # dict([("a", m), ...])
                found += [_alternatives(ctx, value, scope, depth, env) for _, value in entries]
            else:
                found.append(_members(ctx, arg.value, scope, depth + 1, env))
        return _joined(found)
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value in ("values", "copy", "children") and not call.args:
        return _members(ctx, func.value, scope, depth + 1, env)
    operand = _module_operand(ctx, call, scope)  # `nn.ModuleList(...).to(device)`
    if operand is not None:
        return _members(ctx, operand, scope, depth + 1, env)
    return _through_function(ctx, call, scope, depth, env, _members)


def _keyed(ctx: ModuleContext, expr: cst.BaseExpression, key: str, scope: Scope, depth: int,
           env: Env) -> list[Construction] | None:
    """The modules a dict or `nn.ModuleDict` stores under the literal `key` (`self.layers["enc"]`), through its
    literal, `nn.ModuleDict(d)` and `d[k] = m` stores; None when an entry's key cannot be read (a key computed,
    `**other`, `update`, an append), so that a stack of one API is still read through `element`."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Call):  # `nn.ModuleDict(d)`, `dict(d, enc=m)`
        positional = [arg for arg in expr.args if arg.keyword is None]
        if containers.called_name(ctx, expr.func, scope) not in containers.DICTS or len(positional) > 1 \
                or any(arg.star for arg in expr.args):
            return None
        named = [_alternatives(ctx, arg.value, scope, depth, env) for arg in expr.args
                 if arg.keyword is not None and arg.keyword.value == key]
        return _joined([_keyed(ctx, positional[0].value, key, scope, depth + 1, env) if positional else [], *named])
    entries = containers.pairs(expr) if isinstance(expr, cst.Dict) else None
    if entries is not None:
        keys = [containers.key_of(written) if written is not None else None for written, _ in entries]
        if None in keys:
            return None
        return _joined([_alternatives(ctx, value, scope, depth, env)
                        for found, (_, value) in zip(keys, entries) if found == key])
    bindings = _container_bindings(ctx, expr, scope) if isinstance(expr, cst.Name | cst.Attribute) else []
    if not bindings or any(binding.kind != "assign" or binding.value is None for binding in bindings):
        return None
    parts = [_keyed(ctx, binding.value, key, binding.scope, depth + 1, env) for binding in bindings]
    for added in containers.additions(ctx, expr, scope):
        if added.many or added.key is None:
            return None
        if added.key == key:
            parts.append(_alternatives(ctx, added.value, added.scope, depth, env))
    return _joined(parts)


def _holder(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> bool:
    """`nn.Sequential(OrderedDict([...]))`: the argument is a container of modules, not one."""
    return isinstance(expr, cst.Call) and containers.called_name(ctx, expr.func, scope) in containers.HOLDERS


def _alternatives(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int,
                  env: Env) -> list[Construction] | None:
    """The modules one element may be: `Block(...)`, a layer with its peers, either branch of `a if c else b`."""
    if isinstance(expr, cst.IfExp):
        return _joined([_alternatives(ctx, expr.body, scope, depth + 1, env),
                        _alternatives(ctx, expr.orelse, scope, depth + 1, env)])
    built = instance(ctx, expr, scope, depth + 1, env)
    return list(built.alternatives) if built is not None else None


def _named_members(ctx: ModuleContext, expr: cst.Name | cst.Attribute, scope: Scope, depth: int,
                   env: Env) -> list[Construction] | None:
    """A container held by a name or `self.x`: what each binding gives it, and what is appended, inserted,
    extended or `+=`'d to it, or stored in it. A container built from itself (`layers = nn.ModuleList(layers)`)
    adds nothing the second time."""
    bindings = _container_bindings(ctx, expr, scope)
    if not bindings:
        return None
    active = ctx.memo.setdefault("members_active", set())
    if id(bindings) in active:
        ctx.pending_reads += 1
        return []
    active.add(id(bindings))
    try:
        found = []
        for binding in bindings:
            if binding.kind == "param":
                found += _members_passed(ctx, binding, depth, env)
            elif binding.kind == "assign" and binding.value is not None:
                found.append(_members(ctx, binding.value, binding.scope, depth + 1, env))
            elif not (isinstance(binding.node, cst.AugAssign) and isinstance(binding.node.operator, cst.AddAssign)):
                return None  # `+=` is among the additions
        for added in containers.additions(ctx, expr, scope):
            found.append(_members(ctx, added.value, added.scope, depth + 1, env) if added.many else
                         _alternatives(ctx, added.value, added.scope, depth, env))
        return _joined(found)
    finally:
        active.discard(id(bindings))


def _members_passed(ctx: ModuleContext, binding: Binding, depth: int, env: Env) -> list[list[Construction] | None]:
    """The members of the container each caller passes for a parameter, up to the first that is not known
    (None: then the whole is not); [None] when no caller passes one."""
    parts = []
    for passed in _passed(ctx, binding, env):
        if passed is None:
            return [None]
        argument, caller, home, followed = passed
        parts.append(_all_here(ctx, home, _members(home, argument, caller, depth + 1, env), followed))
        if parts[-1] is None:
            break
    return parts or [None]


def _all_here(ctx: ModuleContext, home: ModuleContext, built: list[Construction] | None,
              followed: bool) -> list[Construction] | None:
    """The modules of a container built in `home` as this file sees them (`_here`); None when one is not."""
    if built is None or home is ctx or followed:
        return built
    here = [_here(ctx, home, one) for one in built]
    return None if None in here else here


def _joined(parts: list[list[Construction] | None]) -> list[Construction] | None:
    """The members of several parts of a container, in order; None when one part is unknown."""
    if any(part is None for part in parts):
        return None
    return [built for part in parts for built in part]


def _container_bindings(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> list[Binding]:
    if isinstance(expr, cst.Name):
        return ctx.bindings(expr.value, scope)
    return ctx.attribute_bindings(expr, scope) or []


def with_argument(call: cst.Call, existing: cst.Arg | None, keyword: str, value: str) -> cst.Call:
    """`call` with an argument set to the expression `value`: the existing argument (keyword or positional)
    gets the new value in place; otherwise (also when it is a partial's) `keyword=value` is appended in the
    call's own layout: on its own line, indented like the last argument, when each argument starts a line; after
    the last one otherwise; with a trailing comma only when the call has one, the closing parenthesis where it was."""
    expression = cst.parse_expression(value)
    if existing is not None and any(arg is existing for arg in call.args):
        return call.with_changes(args=[arg.with_changes(value=expression) if arg is existing else arg
                                       for arg in call.args])
    new = cst.Arg(value=expression, keyword=cst.Name(keyword), equal=cst.AssignEqual(
        whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
    if not call.args:
        return call.with_changes(args=[new])
    *rest, last = call.args
    separators = [arg.comma.whitespace_after for arg in rest] or [call.whitespace_before_args]
    if all(isinstance(s, cst.ParenthesizedWhitespace) for s in separators):  # one per line: a fresh line, no comment
        separator = cst.ParenthesizedWhitespace(indent=separators[-1].indent, last_line=separators[-1].last_line)
    elif isinstance(separators[-1], cst.SimpleWhitespace) and rest:
        separator = separators[-1]  # the call's own spacing (`f(a,b)`)
    else:
        separator = cst.SimpleWhitespace(" ")
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new argument gets one too
        between, closing = _split_closing(last.comma.whitespace_after, separator)
        last = last.with_changes(comma=last.comma.with_changes(whitespace_after=between))
        return call.with_changes(args=[*rest, last, new.with_changes(comma=cst.Comma(whitespace_after=closing))])
    between, closing = _split_closing(last.whitespace_after_arg, separator)
    return call.with_changes(args=[*rest, last.with_changes(comma=cst.Comma(whitespace_after=between),
                                                            whitespace_after_arg=cst.SimpleWhitespace("")),
                                   new.with_changes(whitespace_after_arg=closing)])


def _split_closing(closing: cst.BaseParenthesizableWhitespace, separator: cst.BaseParenthesizableWhitespace):
    """(the whitespace between the last argument and the new one, the whitespace before the closing parenthesis),
    from `closing`, the whitespace that was before that parenthesis: a comment after the last argument stays on
    its line, and the line break (with the parenthesis's indentation) moves after the new argument."""
    if isinstance(closing, cst.ParenthesizedWhitespace) and isinstance(separator, cst.ParenthesizedWhitespace):
        return (closing.with_changes(indent=separator.indent, last_line=separator.last_line),
                cst.ParenthesizedWhitespace(indent=closing.indent, last_line=closing.last_line))
    return separator, closing


def project_function(ctx: ModuleContext, call: cst.Call, scope: Scope) -> Scope | None:
    """The function or method of this module a call runs: `helper(...)` or `self.method(...)`."""
    func = call.func
    if isinstance(func, cst.Name) and func.value in ctx.functions:
        bindings = ctx.bindings(func.value, scope)
        if bindings and bindings[-1].kind == "def":
            return ctx.functions[func.value]
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == scope.self_name:
        klass = ctx.class_of(scope)
        if klass is not None:
            return klass.methods.get(func.attr.value)
    return None


def factories(ctx: ModuleContext, klass: Scope) -> list[str]:
    """The module functions of this file whose every `return` builds `klass` (`build_transformer(args)` returning
    `Transformer(...)`): a call of one, in this file or one that imports it, is a construction of the class.
    Indexed once per module."""
    index = ctx.memo.get("factories")
    if index is None:
        index = ctx.memo["factories"] = {}
        for name, function in ctx.functions.items():
            values = returned(function) if function.enclosing_class is None else []
            built = [instance(ctx, value, function) for value in values]
            apis = {b.api for b in built if b is not None}
            if values and None not in built and len(apis) == 1:
                index.setdefault(apis.pop(), []).append(name)
    return index.get(PROJECT_PREFIX + klass.name, [])


def mask_arguments(ctx: ModuleContext, call: cst.Call, scope: Scope):
    """(target, parameter, convention, expression) for each mask a torch attention call is given (not None)."""
    target = call_target(ctx, call, scope)
    if target is None or target.api not in torchapi.MASK_ARGUMENTS:
        return
    for parameter, convention in torchapi.MASK_ARGUMENTS[target.api].items():
        expr = target.arguments.get(parameter)
        if expr is not None and not (isinstance(expr, cst.Name) and expr.value == "None"):
            yield target, parameter, convention, expr
