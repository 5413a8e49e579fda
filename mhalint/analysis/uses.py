"""Layout from use: the axes a tensor's later uses show, when where it came from does not.

The shape reader follows a value back to where it was made. When that trace ends (a parameter no caller fills, a
call into another package), what the code does with the value can still show its axes: `bs = x.shape[1]` names
axis 1 the batch, `rearrange(x, 'n b d -> b n d')` names all three, an `nn.LSTM(..., batch_first=True)` reads
(N, L, H), `x + y` needs `y`'s axes. Through the operations between (a transpose, a norm, a pooling `x.mean(dim=1)`
or a pick `x[:, 0]`, an assignment) the roles are carried back to the value asked about; an axis an operation
removes is unknown. Only established evidence counts, and uses that show different layouts give unknown.
"""

from __future__ import annotations

from dataclasses import replace

from mhalint.analysis import axes, dataflow, tensors
from mhalint.analysis.axes import OPEN, Axis, Role, Shape, Strength
from mhalint.analysis.calls import arguments_for, imported_class, instance, project_forward, project_function, returned
from mhalint.analysis.names import role_of_size_name
from mhalint.analysis.vocabulary import KEEPS_AXES, KEEPS_AXES_MODULES, REORDER
from mhalint.context import Binding, Scope
from mhalint.parse.lazy import cst

_MAX_DEPTH = 10
# Reductions over one axis that give a tensor (`max`, `min`, `median` with a dim give a (values, indices) tuple).
_REDUCTIONS = frozenset({"mean", "sum", "amax", "amin", "logsumexp", "prod", "std", "var", "nanmean", "nansum",
                         "argmax", "argmin"})


class UseReader:
    """Roles from the uses of a value, for a `ShapeReader` (`shapes`) whose trace of it ended."""

    def __init__(self, shapes):
        self.shapes = shapes
        self.ctx = shapes.ctx
        self.busy = False  # a use's own operands are traced forward only: no use-reading inside use-reading

    def of_binding(self, binding: Binding):
        """The roles the uses of `binding`'s value show, or None (also when uses disagree: a conflict)."""
        if self.busy:
            return None
        self.busy = True
        try:
            return self._agreed([self._of_expr(use, binding.scope, 0) for use in dataflow.uses(self.ctx, binding)])
        finally:
            self.busy = False

    def of_output(self, call: cst.Call, scope: Scope, element: int | None):
        """The roles the uses of a module call's output show (element `element` of the tuple it returns): the
        output of an attention module has its query's axes."""
        if self.busy:
            return None
        self.busy = True
        try:
            return self._of_output(call, scope, element)
        finally:
            self.busy = False

    def _of_output(self, call: cst.Call, scope: Scope, element: int | None):
        if element is None:
            return self._of_expr(call, scope, 0)
        parent = self.ctx.parent(call)
        if isinstance(parent, cst.Subscript) and parent.value is call and len(parent.slice) == 1 \
                and isinstance(parent.slice[0].slice, cst.Index) \
                and tensors.literal_int(parent.slice[0].slice.value) == element:
            return self._of_expr(parent, scope, 0)
        if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
            target = parent.targets[0].target
            if isinstance(target, cst.Tuple | cst.List) and len(target.elements) > element \
                    and isinstance(target.elements[element].value, cst.Name):
                binding = _bound_at(scope, target.elements[element].value.value, parent)
                return self._binding(binding, 0) if binding is not None else None
        return None

    def _agreed(self, found: list):
        """What the uses show: the uses that show a layout must all show the same one (else a conflict); one that
        shows some roles but no layout (a pooled (B, E)) counts where no use shows a layout."""
        decided, partial = {}, None
        for traced in found:
            if traced is None or not any(axis.known for axis in traced.shape):
                continue
            kind = axes.layout(traced.shape)
            if kind is None:
                partial = partial or traced
            else:
                decided.setdefault(kind.kind, traced)
        if len(decided) > 1:
            self.shapes.conflict(*list(decided.values())[:2])
            return None
        return next(iter(decided.values()), partial)

    def _binding(self, binding: Binding, depth: int):
        return self._agreed([self._of_expr(use, binding.scope, depth + 1)
                             for use in dataflow.uses(self.ctx, binding)])

    def _of_expr(self, expr: cst.BaseExpression, scope: Scope, depth: int):
        """The roles of `expr`'s value from what its context does with it."""
        if depth > _MAX_DEPTH:
            return None
        parent = self.ctx.parent(expr)
        if isinstance(parent, cst.Arg) and parent.value is expr and not parent.star:
            call = self.ctx.parent(parent)
            if not isinstance(call, cst.Call):
                return None
            if parent.keyword is None:
                found = self._argument(call, scope, depth) if call.args[0] is parent else None
            else:
                found = self.shapes.padding_mask(parent, call, scope)
            return found if found is not None else self._passed(call, parent, scope, depth)
        if isinstance(parent, cst.Attribute) and parent.value is expr:
            return self._attribute(parent, scope, depth)
        if isinstance(parent, cst.Subscript) and parent.value is expr:
            return self._subscript(parent, scope, depth)
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add | cst.Subtract):
            other = parent.right if parent.left is expr else parent.left
            traced = self.shapes.of(other, scope, other)
            if traced is not None and OPEN not in traced.shape and _established(traced.shape):
                return traced
            return self._of_expr(parent, scope, depth + 1)
        if isinstance(parent, cst.Assign) and parent.value is expr and len(parent.targets) == 1 \
                and isinstance(parent.targets[0].target, cst.Name):
            binding = _bound_at(scope, parent.targets[0].target.value, parent)
            return self._binding(binding, depth) if binding is not None else None
        return None

    def _argument(self, call: cst.Call, scope: Scope, depth: int):
        """The first argument of a call: of `rearrange` (its pattern's left side names the axes), of a recurrent
        layer (it reads its batch_first layout), of a module that keeps the axes (a norm, a linear layer)."""
        name = self.ctx.qualified_name(call.func, scope)
        if name in ("einops.rearrange",) or (isinstance(call.func, cst.Name) and call.func.value == "rearrange"):
            return self.shapes.rearranged(call, side=0)
        if name in tensors.FIRST_ARG_KEEPS_AXES:
            return self._of_expr(call, scope, depth + 1)
        if tensors.FUNCTION_FORMS.get(name) in REORDER:
            after = self._of_expr(call, scope, depth + 1)
            return self._back(after, call, scope, tensors.FUNCTION_FORMS[name], call.with_changes(args=call.args[1:])) \
                if after is not None else None
        built = instance(self.ctx, call.func, scope)
        if built is not None and built.api in tensors.RECURRENT:
            return self.shapes.recurrent_output(built, reads=True)
        if built is not None and built.api in KEEPS_AXES_MODULES:
            return self._of_expr(call, scope, depth + 1)
        return None

    def _passed(self, call: cst.Call, arg: cst.Arg, scope: Scope, depth: int):
        """An argument of a project function or module (in this file or another of the run): what the callee does
        with its parameter (`N, Len_q, _ = query.shape` documents what callers pass), and, where the callee gives
        the parameter back (`return x if pos is None else x + pos`), what the caller does with the result."""
        callee = self._callee(call, scope)
        if callee is None:
            return None
        reader, function = callee
        name = next((p for p, a in arguments_for(call, function).by_name.items() if a is arg), None)
        binding = next((b for b in function.bindings.get(name, ()) if b.kind == "param"), None) if name else None
        if binding is None:
            return None
        if reader is self:  # the callee's other parameters are what this call passes
            bound = [(function, parameter, argument.value, scope)
                     for parameter, argument in arguments_for(call, function).by_name.items()]
            self.shapes._env.extend(bound)
            try:
                inside = self._binding(binding, depth)
            finally:
                del self.shapes._env[len(self.shapes._env) - len(bound):]
        else:
            reader.busy = True
            try:
                inside = reader._binding(binding, depth)
            finally:
                reader.busy = False
        if inside is not None:
            owner = f"{function.enclosing_class.name}.{function.name}" if function.enclosing_class else function.name
            inside = _noted(inside, f"`{self.ctx.code(call.func)}` at line {self.ctx.line(call)} passes it as "
                                    f"`{name}` to `{owner}`")
        back = self._of_expr(call, scope, depth + 1) if _gives_back(function, name) else None
        return self._agreed([inside, back])

    def _callee(self, call: cst.Call, scope: Scope) -> tuple[UseReader, Scope] | None:
        """The reader of the file that defines what a call runs, and that function: a project function or method,
        or the `forward` of a project module (its class here or imported from another file of the run)."""
        function = project_function(self.ctx, call, scope)
        if function is not None:
            return self, function
        built = instance(self.ctx, call.func, scope)
        function = project_forward(self.ctx, built)
        if function is not None:
            return self, function
        imported = imported_class(self.ctx, built) if built is not None else None
        if imported is None or imported[1] is None or "forward" not in imported[1].methods:
            return None
        home = imported[0]
        file = self.ctx.project.display(home.path, self.ctx.path)
        return tensors.ShapeReader(home, file).uses, imported[1].methods["forward"]

    def _attribute(self, attribute: cst.Attribute, scope: Scope, depth: int):
        """`x.shape` read into names, `x.size(1)`, and methods: those that keep the axes, reorder them or reduce
        one of them."""
        method = attribute.attr.value
        holder = self.ctx.parent(attribute)
        if method == "shape":
            return self._sizes_read(attribute, holder)
        if not (isinstance(holder, cst.Call) and holder.func is attribute):
            return None
        if method == "size":
            return self._sizes_read(holder, self.ctx.parent(holder))
        if method in KEEPS_AXES:
            return self._of_expr(holder, scope, depth + 1)
        if method in REORDER or method in _REDUCTIONS:
            after = self._of_expr(holder, scope, depth + 1)
            return self._back(after, holder, scope, method) if after is not None else None
        return None

    def _subscript(self, subscript: cst.Subscript, scope: Scope, depth: int):
        """`x[:, 0]`, `x[-1]`, `x[:, :n]`: the picked axes are gone from what the use shows; put them back unknown."""
        picked = []
        for position, element in enumerate(subscript.slice):
            if isinstance(element.slice, cst.Index):
                if tensors.literal_int(element.slice.value) is None:
                    return None
                picked.append(position)
            elif not isinstance(element.slice, cst.Slice):
                return None
        after = self._of_expr(subscript, scope, depth + 1)
        if after is None:
            return None
        shape = after.shape
        for position in picked:
            shape = _inserted(shape, position)
            if shape is None:
                return None
        return self._through(after, shape, subscript)

    def _sizes_read(self, read: cst.BaseExpression, holder) -> object:
        """`B, T, C = x.shape` / `x.size()`: the names; `bs = x.shape[1]` / `x.size(1)`, also in a tuple
        (`b, c = x.shape[1], x.shape[2]`): the role that name gives that axis."""
        if isinstance(holder, cst.Assign) and holder.value is read and len(holder.targets) == 1 \
                and isinstance(holder.targets[0].target, cst.Tuple | cst.List):
            target = holder.targets[0].target
            names = [e.value.value if isinstance(e.value, cst.Name) else "" for e in target.elements]
            shape = self.shapes.named_axes(names, self.ctx.code(holder), self.ctx.line(holder),
                                           "the shape is unpacked into these names", Strength.ESTABLISHED)
            return tensors.Traced(shape) if shape is not None else None
        index, size = None, read
        if isinstance(read, cst.Attribute) and isinstance(holder, cst.Subscript) and len(holder.slice) == 1 \
                and isinstance(holder.slice[0].slice, cst.Index):
            index, size = tensors.literal_int(holder.slice[0].slice.value), holder
        elif isinstance(read, cst.Call) and len(read.args) == 1 and read.args[0].keyword is None:
            index = tensors.literal_int(read.args[0].value)
        if index is None or index < 0:
            return None
        name, statement = _named_size(self.ctx, size)
        role = role_of_size_name(name) if name else Role.UNKNOWN
        if role is Role.UNKNOWN:
            return None
        reason = f"`{name}` names axis {index} the {role.value}"
        evidence = self.shapes.evidence(self.ctx.code(statement), self.ctx.line(statement), reason,
                                        Strength.ESTABLISHED)
        return tensors.Traced(axes.unknown(index) + (Axis(role, evidence, name), OPEN))

    def _back(self, after, call: cst.Call, scope: Scope, method: str, sized: cst.Call | None = None):
        """The roles before a reorder or a reduction, from those after it; `sized`: the call's arguments without
        the tensor, for a function form (`torch.transpose(x, 0, 1)`)."""
        sized = sized or call
        dims = self.shapes.integers(sized, scope)
        shape = after.shape
        if method in ("transpose", "swapaxes", "swapdims") and dims is not None and len(dims) == 2:
            shape = axes.padded(shape, max(dims) + 1) if min(dims) >= 0 else None
            shape = axes.transpose(shape, *dims) if shape is not None else None
        elif method == "permute":
            order = dims if dims is not None and len(sized.args) > 1 else self.shapes.integer_list(sized, scope)
            shape = _unpermuted(shape, order) if order is not None else None
        elif method in _REDUCTIONS:
            shape = self._unreduced(call, scope, shape)
        else:
            shape = None
        return self._through(after, shape, call) if shape is not None else None

    def _unreduced(self, call: cst.Call, scope: Scope, shape: Shape) -> Shape | None:
        """`x.mean(dim=1)`: the reduced axis back in place, unknown; `keepdim=True` kept it (its role is gone)."""
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        keep = keywords.get("keepdim")
        dim = self.shapes.dim(call, scope, None)
        if dim is None or dim < 0 or (keep is not None and not isinstance(keep, cst.Name)):
            return None
        if keep is not None and keep.value == "True":
            padded = axes.padded(shape, dim + 1)
            return padded[:dim] + (axes.UNKNOWN_AXIS,) + padded[dim + 1:]
        return _inserted(shape, dim)

    def _through(self, after, shape: Shape | None, node: cst.CSTNode):
        """`after`'s evidence, now read back through `node` onto the value before it."""
        if shape is None:
            return None
        return _noted(tensors.Traced(shape), f"read back through `{self.ctx.code(node)}` at line {self.ctx.line(node)}")


def _noted(traced, note: str):
    """The same roles, each axis's evidence telling how it reached the value asked about."""
    return tensors.Traced(tuple(replace(axis, evidence=replace(axis.evidence, reason=f"{axis.evidence.reason}; {note}"))
                                if axis.known else axis for axis in traced.shape))


def _gives_back(function: Scope, name: str) -> bool:
    """Does every `return` of the function give back the parameter `name` with its axes: itself, in either branch
    of a conditional, or added to something (`x + pos`)?"""
    def back(value) -> bool:
        if isinstance(value, cst.Name):
            return value.value == name
        if isinstance(value, cst.IfExp):
            return back(value.body) and back(value.orelse)
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add | cst.Subtract):
            return back(value.left) or back(value.right)
        return False
    values = returned(function)
    return bool(values) and all(back(value) for value in values)


def _established(shape: Shape) -> bool:
    return any(axis.known and axis.evidence.strength is Strength.ESTABLISHED for axis in shape)


def _bound_at(scope: Scope, name: str, node: cst.CSTNode) -> Binding | None:
    return next((binding for binding in scope.bindings.get(name, ()) if binding.node is node), None)


def _named_size(ctx, size: cst.BaseExpression) -> tuple[str, cst.CSTNode]:
    """The name a size read is assigned to (`bs = x.shape[1]`, `b, c = x.shape[1], x.shape[2]`) and the
    statement, or ("", size)."""
    parent = ctx.parent(size)
    if isinstance(parent, cst.Assign) and parent.value is size and len(parent.targets) == 1 \
            and isinstance(parent.targets[0].target, cst.Name):
        return parent.targets[0].target.value, parent
    element = parent
    if isinstance(element, cst.Element):
        values = ctx.parent(element)
        statement = ctx.parent(values)
        if isinstance(values, cst.Tuple) and isinstance(statement, cst.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0].target, cst.Tuple):
            targets = statement.targets[0].target.elements
            position = list(values.elements).index(element)
            if len(targets) == len(values.elements) and isinstance(targets[position].value, cst.Name):
                return targets[position].value.value, statement
    return "", size


def _inserted(shape: Shape, position: int) -> Shape | None:
    padded = axes.padded(shape, position)
    return padded[:position] + (axes.UNKNOWN_AXIS,) + padded[position:] if padded is not None else None


def _unpermuted(shape: Shape, order: list[int]) -> Shape | None:
    """The shape `x` had, given `x.permute(order)`'s."""
    rank = len(order)
    if shape and shape[-1] is OPEN:
        body = shape[:-1]
        if len(body) > rank:
            return None
        shape = body + axes.unknown(rank - len(body))
    if len(shape) != rank or sorted(d % rank for d in order) != list(range(rank)):
        return None
    before = [axes.UNKNOWN_AXIS] * rank
    for position, source in enumerate(order):
        before[source % rank] = shape[position]
    return tuple(before)
