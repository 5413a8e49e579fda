"""Configuration values: `cfg.x`, `cfg["x"]`, `getattr(cfg, "x", d)` and `args.x`, read from what `cfg` holds.

`objects` finds what an expression may hold: an instance of a project class (a dataclass, NamedTuple, attrs or
pydantic class, a class with class attributes, or one whose `__init__` stores its parameters), that class itself,
a dict literal or `dict(...)`/`SimpleNamespace(...)`, or an argparse namespace. It follows names, `self.cfg`,
parameters (the values every caller in the project passes; failing any, the class its annotation names) and
calls of project classes in this file or another. `values` then reads one field of each: the construction's
argument, else the field's default. Several objects may give several values (`Reach`es, each naming the call or
command-line setting that chooses it); anything unread makes the answer unknown (None), never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis import values as _values
from mhalint.analysis.calls import PROJECT_PREFIX, arguments_for, bind, returned
from mhalint.analysis.options import option_values
from mhalint.analysis.sites import constructions, place, project_callers
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

_MAX_DEPTH = 8
_DATACLASS = {"dataclasses.dataclass", "attr.s", "attr.attrs", "attr.define", "attr.frozen", "attr.mutable",
              "attrs.define", "attrs.frozen", "attrs.mutable", "pydantic.dataclasses.dataclass", "chex.dataclass",
              "flax.struct.dataclass"}
_RECORD_BASES = {"NamedTuple", "BaseModel", "BaseSettings"}  # of typing, typing_extensions, pydantic(_settings)
_RECORD_MODULES = {"typing", "typing_extensions", "pydantic", "pydantic_settings"}
_NAMESPACES = {"dict", "types.SimpleNamespace", "argparse.Namespace", "SimpleNamespace", "easydict.EasyDict",
               "EasyDict", "addict.Dict", "ml_collections.ConfigDict"}
_READ_ONLY = {"get", "keys", "items", "values", "copy", "to_dict", "__getitem__"}


@dataclass(frozen=True)
class Obj:
    """What a configuration expression may hold. `klass` (in `home`, the file that defines it) for an instance
    (`call` is its construction in `ctx`) or for the class itself (`itself`); `mapping` for a dict or namespace
    built in `ctx`; `parser` for an argparse namespace."""

    ctx: ModuleContext
    scope: Scope
    klass: Scope | None = None
    home: ModuleContext | None = None
    call: cst.Call | None = None
    itself: bool = False
    mapping: cst.BaseExpression | None = None
    parser: bool = False
    place: str | None = None  # the call that chooses this object, when several may reach (`line 12`)
    how: str = ""  # that choice in words: "what the call at line 12 passes"


def read(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int) -> list | None:
    """The `Reach`es of `cfg.x`, `cfg["x"]`, `cfg.get("x", d)` or `getattr(cfg, "x", d)`; None when unknown."""
    if depth > _MAX_DEPTH:
        return None
    base, name, default = _access(ctx, expr, scope)
    if base is None:
        return None
    found = objects(ctx, base, scope, depth + 1)
    if not found:
        return None
    reaches: list = []
    for obj in found:
        got = field(obj, name, depth + 1)
        if got is ABSENT:
            if default is None:
                return None
            got = _values.reaches(ctx, default, scope, depth + 1)
            got = [_values.Reach(_values.Value(r.value.value, (f"`{ctx.code(base)}` has no `{name}`: "
                                                              f"{ctx.code(expr)} gives its default",)
                                               + r.value.trail), r.place, r.where) for r in got or ()] or None
        if got is None:
            return None
        reaches.extend(reach.within(f"`{ctx.code(base)}` is {obj.how}", obj.place)
                       if obj.place is not None else reach for reach in got)
    return reaches


def string_key(expr: cst.BaseExpression) -> str | None:
    """`"x"` for `cfg["x"]`; None for any other expression."""
    if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index):
        key = expr.slice[0].slice.value
        if isinstance(key, cst.SimpleString) and isinstance(literal(key), str):
            return literal(key)
    return None


def _access(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope):
    """(the object, the field's name, the default expression or None) of a field access; (None, "", None) else."""
    if isinstance(expr, cst.Attribute):
        return expr.value, expr.attr.value, None
    key = string_key(expr)
    if key is not None:
        return expr.value, key, None
    if isinstance(expr, cst.Call) and not any(arg.keyword or arg.star for arg in expr.args):
        func, args = expr.func, expr.args
        getter = isinstance(func, cst.Name) and func.value == "getattr" and not ctx.bindings("getattr", scope)
        if getter and len(args) in (2, 3):
            base, key, default = args[0].value, args[1].value, args[2].value if len(args) == 3 else None
        elif isinstance(func, cst.Attribute) and func.attr.value == "get" and len(args) in (1, 2):
            base, key, default = func.value, args[0].value, args[1].value if len(args) == 2 else cst.Name("None")
        else:
            return None, "", None
        if isinstance(key, cst.SimpleString) and isinstance(literal(key), str):
            return base, literal(key), default
    return None, "", None


ABSENT = object()  # the object certainly has no such field


def objects(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[Obj] | None:
    """What `expr` may hold, each of them; None when any is unknown."""
    if depth > _MAX_DEPTH:
        return None
    return ctx.settled("config_objects", (expr, scope, depth), lambda: _objects(ctx, expr, scope, depth))


def _objects(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, depth: int) -> list[Obj] | None:
    if isinstance(expr, cst.Dict):
        return [Obj(ctx, scope, mapping=expr)]
    if isinstance(expr, cst.Call):
        return _called(ctx, expr, scope, depth)
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
        if len(bindings) == 1 and bindings[0].kind == "def":
            klass = ctx.classes.get(expr.value)
            return [Obj(ctx, scope, klass=klass, home=ctx, itself=True)] if klass is not None else None
        return _bound(ctx, expr.value, bindings, depth)
    bindings = ctx.attribute_bindings(expr, scope)
    if bindings:
        return _bound(ctx, f"self.{expr.attr.value}", bindings, depth)
    return None


def _bound(ctx: ModuleContext, name: str, bindings: list[Binding], depth: int) -> list[Obj] | None:
    """Every binding's objects; a name written to after it is bound (`cfg.x = 1`, `cfg.update(...)`) is unknown."""
    if not bindings or name in _mutated(ctx, bindings[0].scope):
        return None
    found: list[Obj] = []
    for binding in bindings:
        if binding.kind == "param":
            got = _parameter(ctx, binding, depth)
        elif binding.kind == "assign" and binding.value is not None:
            got = objects(ctx, binding.value, binding.scope, depth + 1)
        else:
            return None
        if got is None:
            return None
        found.extend(got)
    return found


def _mutated(ctx: ModuleContext, scope: Scope) -> set[str]:
    """The names whose object a scope changes: a field assigned (`cfg.x = ...`, `cfg["x"] = ...`, `del`) or a
    method called on it other than a read (`cfg.update(...)`, `cfg.merge_from_file(...)`). `self.cfg` counts
    as `self.cfg` in any method of the class. Computed once per scope."""
    memo = ctx.memo.setdefault("config_mutated", {})
    if scope in memo:
        return memo[scope]
    found: set[str] = set()
    klass = ctx.class_of(scope)
    scopes = list(klass.methods.values()) if klass is not None and scope.kind == "function" else [scope]
    for each in scopes:
        for name, loads in dataflow.loads(ctx, each).items():
            for load in loads:
                holder, written = _holder(ctx, load, each)
                if holder is not None and _writes(ctx, written):
                    found.add(holder)
    memo[scope] = found
    return found


def _holder(ctx: ModuleContext, load: cst.Name, scope: Scope) -> tuple[str | None, cst.CSTNode]:
    """(`cfg` or `self.cfg`, the expression read from it) for a load of a name or of `self.name`."""
    node: cst.CSTNode = load
    name = load.value
    parent = ctx.parent(node)
    if name == scope.self_name and isinstance(parent, cst.Attribute) and parent.value is node:
        name, node = f"self.{parent.attr.value}", parent
        parent = ctx.parent(node)
    if isinstance(parent, cst.Attribute | cst.Subscript) and parent.value is node:
        return name, parent
    return None, node


def _writes(ctx: ModuleContext, access: cst.CSTNode) -> bool:
    parent = ctx.parent(access)
    if isinstance(access, cst.Attribute) and isinstance(parent, cst.Call) and parent.func is access:
        return access.attr.value not in _READ_ONLY
    if isinstance(parent, cst.AssignTarget | cst.AugAssign | cst.Del):
        return True
    while isinstance(parent, cst.Tuple | cst.List | cst.Element):
        parent = ctx.parent(parent)
    return isinstance(parent, cst.AssignTarget | cst.For)


def _parameter(ctx: ModuleContext, binding: Binding, depth: int) -> list[Obj] | None:
    """What every caller in the project passes (the default where one leaves it out); with no caller, an instance
    of the class the annotation names, or the default."""
    function = binding.scope
    sites = project_callers(ctx, function)
    if not sites:
        annotated = _annotated(ctx, function.params.get(binding.name))
        if annotated is not None:
            return _instances(ctx, function, *annotated)
        return objects(ctx, binding.value, function, depth + 1) if binding.value is not None else None
    found: list[Obj] = []
    for site in sites:
        argument = site.site.arguments.get(binding.name)
        if argument is None:
            if not site.site.arguments.absent(binding.name) or binding.value is None:
                return None
            got = objects(ctx, binding.value, function, depth + 1)
        else:
            got = objects(site.ctx, argument, site.site.scope, depth + 1)
        if got is None:
            return None
        found.extend(replace(obj, place=site.place, how=f"what the call at {site.place} passes")
                     if obj.place is None else obj for obj in got)
    return found


def _instances(ctx: ModuleContext, function: Scope, home: ModuleContext, klass: Scope) -> list[Obj] | None:
    """The instances of a class a parameter's annotation names: every construction in the project (each chosen
    where it is built). None when the project builds none: then something outside it does (a framework filling
    the class from a file), and its defaults decide nothing."""
    sites = constructions(home, klass, ctx)
    if not sites:
        return None
    return [Obj(site.ctx, site.site.scope, klass=klass, home=home, call=site.site.call, place=site.place,
                how=f"the `{klass.name}` built at {site.place}") for site in sites]


def _annotated(ctx: ModuleContext, param: cst.Param | None) -> tuple[ModuleContext, Scope] | None:
    """The project class a parameter's annotation names (`cfg: ModelConfig`, `Optional[ModelConfig]`, a string)."""
    annotation = param.annotation.annotation if param is not None and param.annotation is not None else None
    if isinstance(annotation, cst.Subscript) and len(annotation.slice) == 1 and isinstance(
            annotation.slice[0].slice, cst.Index):
        annotation = annotation.slice[0].slice.value  # Optional[X]
    if isinstance(annotation, cst.SimpleString) and isinstance(literal(annotation), str) \
            and literal(annotation).isidentifier():
        annotation = cst.Name(literal(annotation))
    if not isinstance(annotation, cst.Name):
        return None
    return project_class(ctx, annotation.value)


def project_class(ctx: ModuleContext, name: str) -> tuple[ModuleContext, Scope] | None:
    """(the file that defines it, the class) for a class this file defines or imports from another of the run."""
    if name in ctx.classes and ctx.qualified_name(cst.Name(name)) == PROJECT_PREFIX + name:
        return ctx, ctx.classes[name]
    project = ctx.project
    found = project.imported_class(ctx.path, name) if project is not None else None
    if found is None:
        return None
    other = project.context(found[0], ctx.limits)
    klass = other.classes.get(found[1]) if other is not None else None
    if klass is None:
        return None
    ctx.read_project = True
    return other, klass


def _called(ctx: ModuleContext, call: cst.Call, scope: Scope, depth: int) -> list[Obj] | None:
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "parse_args":
        return [Obj(ctx, scope, parser=True)] if _parser(ctx, func.value, scope) else None
    name = ctx.qualified_name(func, scope)
    if name in _NAMESPACES or (isinstance(func, cst.Name) and func.value in _NAMESPACES
                               and not ctx.bindings(func.value, scope)):
        if any(arg.star or arg.keyword is None for arg in call.args):
            return None
        return [Obj(ctx, scope, mapping=call)]
    if isinstance(func, cst.Name):
        found = project_class(ctx, func.value)
        if found is not None:
            return [Obj(ctx, scope, klass=found[1], home=found[0], call=call)]
        function = ctx.functions.get(func.value) if name == PROJECT_PREFIX + func.value else None
        if function is not None:  # a factory: `cfg = get_config()`, `args = parse()`
            found = [objects(ctx, value, function, depth + 1) for value in returned(function)]
            return [obj for objs in found for obj in objs] if found and all(found) else None
    return None


def _parser(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> bool:
    """Whether `expr` is an `argparse.ArgumentParser(...)` (through the name it is bound to)."""
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
        return len(bindings) == 1 and bindings[0].kind == "assign" and isinstance(bindings[0].value, cst.Call) \
            and ctx.qualified_name(bindings[0].value.func, bindings[0].scope) == "argparse.ArgumentParser"
    return False


# ---- one field of an object ----
def field(obj: Obj, name: str, depth: int) -> list | object | None:
    """The `Reach`es of one field; `ABSENT` when the object certainly has none; None when unknown."""
    if obj.parser:
        return option_values(obj.ctx, name, depth)
    if obj.mapping is not None:
        return _item(obj, name, depth)
    home, klass = obj.home, obj.klass
    fields = record_fields(home, klass)
    if obj.itself or fields is None:
        return _attribute(obj, name, depth)
    if name not in fields:
        return _attribute(obj, name, depth) if name in klass.attributes or name in klass.methods else ABSENT
    default = fields[name]
    arguments = bind(obj.call, torchapi.Signature(tuple(fields)))
    argument = arguments.get(name)
    if argument is None:
        if not arguments.absent(name):
            return None
        got = _default(home, klass, name, default, depth)
        said = f"`{obj.ctx.code(obj.call.func)}(...)` at {place(obj.ctx, obj.call)} leaves `{name}` at its default"
        return [reach.within(said) for reach in got] if got is not None else None
    got = _values.reaches(obj.ctx, argument, obj.scope, depth + 1)
    said = (f"`{obj.ctx.code(obj.call.func)}(...)` at {place(obj.ctx, obj.call)} passes "
            f"{name}={obj.ctx.code(argument)}")
    return [_values.Reach(_values.Value(r.value.value, (said,) + r.value.trail), r.place, r.where)
            for r in got] if got is not None else None


def _default(home: ModuleContext, klass: Scope, name: str, default, depth: int) -> list | None:
    if default is None:
        return None
    found = _values.resolve(home, default, klass, depth + 1)
    if found is None:
        return None
    return [_values.Reach(_values.Value(found.value, (
        f"`{klass.name}.{name}` defaults to {found.value!r} at {place(home, default)}",)
        + found.trail))]


def record_fields(ctx: ModuleContext, klass: Scope) -> dict[str, cst.BaseExpression | None] | None:
    """The fields of a dataclass-like class (dataclass, attrs, NamedTuple, pydantic) in order, each with its
    default expression (None: none); inherited fields of such bases in this file first. None for another class."""
    memo = ctx.memo.setdefault("record_fields", {})
    if klass not in memo:
        memo[klass] = _fields(ctx, klass, 0)
    return memo[klass]


def _fields(ctx: ModuleContext, klass: Scope, depth: int) -> dict | None:
    record = any(ctx.qualified_name(_callee(d.decorator), klass.parent) in _DATACLASS for d in klass.node.decorators)
    fields: dict = {}
    for base in klass.bases:
        name = ctx.qualified_name(base, klass.parent) or ""
        if name.split(".")[0] in _RECORD_MODULES and name.rsplit(".", 1)[-1] in _RECORD_BASES:
            record = True
        elif isinstance(base, cst.Name) and base.value in ctx.classes and depth < 4:
            inherited = _fields(ctx, ctx.classes[base.value], depth + 1)
            if inherited is None:
                return None
            fields.update(inherited)
            record = True
        elif not (isinstance(base, cst.Name) and base.value == "object"):
            return None  # a base this reader cannot see may add fields
    if not record or "__init__" in klass.methods:
        return None
    body = klass.node.body.body if isinstance(klass.node.body, cst.IndentedBlock) else ()
    for small in (small for line in body if isinstance(line, cst.SimpleStatementLine) for small in line.body):
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and not _class_var(small):
            fields[small.target.value] = _field_default(ctx, small.value, klass)
        elif (isinstance(small, cst.Assign) and len(small.targets) == 1
              and isinstance(small.targets[0].target, cst.Name) and _field_call(ctx, small.value, klass)):
            fields[small.targets[0].target.value] = _field_default(ctx, small.value, klass)
    return fields


def _callee(decorator: cst.BaseExpression) -> cst.BaseExpression:
    return decorator.func if isinstance(decorator, cst.Call) else decorator


def _class_var(node: cst.AnnAssign) -> bool:
    annotation = node.annotation.annotation
    head = annotation.value if isinstance(annotation, cst.Subscript) else annotation
    return isinstance(head, cst.Name | cst.Attribute) and (
        head.value if isinstance(head, cst.Name) else head.attr.value) == "ClassVar"


def _field_call(ctx: ModuleContext, value: cst.BaseExpression | None, klass: Scope) -> str | None:
    """`field`, `ib`, `attrib` or `Field` for a call of dataclasses', attrs' or pydantic's field helpers."""
    if not isinstance(value, cst.Call):
        return None
    name = (ctx.qualified_name(value.func, klass.parent) or "").rsplit(".", 1)[-1]
    return name if name in ("field", "ib", "attrib", "Field") else None


def _field_default(ctx: ModuleContext, value: cst.BaseExpression | None, klass: Scope):
    """`= 3`, `= field(default=3)`, `= attr.ib(3)`, `= Field(3)`: the default's expression; None for no default
    or a factory (`default_factory=`, `factory=`), which this reader does not evaluate."""
    helper = _field_call(ctx, value, klass)
    if helper is None:
        return value
    for arg in value.args:
        if arg.keyword is not None and arg.keyword.value == "default":
            return arg.value
    first = value.args[0] if value.args else None
    if first is not None and first.keyword is None and not first.star and helper != "field":
        return first.value  # attr.ib(default, ...), pydantic's Field(default, ...)
    return None


def _entries(obj: Obj) -> list[tuple[str, cst.BaseExpression, cst.CSTNode]] | None:
    """(key, value, where it is written) of a dict literal or of `dict(...)`/`SimpleNamespace(...)`'s keywords;
    None when a key is not a plain string or another mapping is spread in."""
    if not isinstance(obj.mapping, cst.Dict):
        return [(arg.keyword.value, arg.value, arg) for arg in obj.mapping.args]
    entries = []
    for element in obj.mapping.elements:
        if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
            return None
        entries.append((literal(element.key), element.value, element.key))
    return entries


def entry(obj: Obj, name: str) -> cst.BaseExpression | None:
    """The expression a mapping holds under `name`, when it has one."""
    found = [value for key, value, _ in _entries(obj) or () if key == name]
    return found[-1] if found else None


def _item(obj: Obj, name: str, depth: int) -> list | object | None:
    """A key of a dict literal, or a keyword of `dict(...)`/`SimpleNamespace(...)`."""
    entries = _entries(obj)
    if entries is None:
        return None
    found = [(value, node) for key, value, node in entries if key == name]
    if not found:
        return ABSENT
    value, node = found[-1]
    got = _values.reaches(obj.ctx, value, obj.scope, depth + 1)
    said = f"`{name}` is {obj.ctx.code(value)} in the {_kind(obj)} " \
           f"at {place(obj.ctx, node)}"
    return [_values.Reach(_values.Value(r.value.value, (said,) + r.value.trail), r.place, r.where)
            for r in got] if got is not None else None


def _kind(obj: Obj) -> str:
    func = obj.mapping.func if isinstance(obj.mapping, cst.Call) else None
    return "dict" if func is None or isinstance(func, cst.Name) and func.value == "dict" else "namespace"


def _attribute(obj: Obj, name: str, depth: int) -> list | object | None:
    """A field of a class that is not a record: a class attribute (`batch_first = True` in its body), or for an
    instance what `__init__` stores (`self.x = x`: the construction's argument, else the parameter's default)."""
    home, klass = obj.home, obj.klass
    bindings = klass.attributes.get(name)
    if name in klass.methods:
        return None  # a property, or a method
    if not bindings:
        return ABSENT if not klass.bases or all(_plain_base(home, b, klass) for b in klass.bases) else None
    in_body = [b for b in bindings if b.scope is klass]
    in_methods = [b for b in bindings if b.scope is not klass]
    if obj.itself or not in_methods:
        chosen = in_body
    elif obj.call is not None and all(b.scope is klass.methods.get("__init__") for b in in_methods):
        chosen = in_methods
    else:
        return None
    found = []
    for binding in chosen:
        got = _stored(obj, binding, depth) if binding.scope is not klass else _values.reaches(
            home, binding.value, klass, depth + 1)
        if got is None or binding.kind != "assign":
            return None
        found.extend(_values.Reach(_values.Value(r.value.value, (
            f"`{klass.name}.{name}` = {home.code(binding.value)} at {place(home, binding.node)}",)
            + r.value.trail), r.place, r.where) for r in got)
    return found or None


def _plain_base(ctx: ModuleContext, base: cst.BaseExpression, klass: Scope) -> bool:
    return isinstance(base, cst.Name) and base.value == "object"


def _stored(obj: Obj, binding: Binding, depth: int) -> list | None:
    """What `self.x = <value>` in `__init__` stores for the construction `obj.call`: a parameter's argument there
    (or its default), or a value that needs no parameter."""
    value, init = binding.value, binding.scope
    if isinstance(value, cst.Name) and value.value in init.params:
        argument = arguments_for(obj.call, init).get(value.value)
        if argument is not None:
            return _values.reaches(obj.ctx, argument, obj.scope, depth + 1)
        if not arguments_for(obj.call, init).absent(value.value):
            return None
        default = init.params[value.value].default
        return _values.reaches(obj.home, default, init, depth + 1) if default is not None else None
    value_found = _values.resolve(obj.home, value, init, depth + 1)
    return [_values.Reach(value_found)] if value_found is not None else None
