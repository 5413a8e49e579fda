"""What one target of an unpacking receives: `a, b = x, y`, or `mask, x = self.get_mask(...)` where the helper
returns a tuple literal (`return mask, x`). The element's expression and the scope to read it in, or None."""

from __future__ import annotations

from mhalint.analysis.calls import project_function, returned
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.parse.lazy import cst

_MAX_DEPTH = 4


def unpacked(ctx: ModuleContext, binding: Binding) -> tuple[cst.BaseExpression, Scope] | None:
    """The expression `binding` (an `unpack` binding with its position) takes, and its scope."""
    if binding.kind != "unpack" or binding.index is None or binding.value is None:
        return None
    return element(ctx, binding.value, binding.scope, binding.index, 0)


def element(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, index: int,
            depth: int) -> tuple[cst.BaseExpression, Scope] | None:
    """Element `index` of a tuple literal, or of the tuple a project function or method returns (its one
    `return`)."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(expr, cst.Tuple | cst.List):
        items = expr.elements
        if any(isinstance(item, cst.StarredElement) for item in items) or index >= len(items):
            return None
        return items[index].value, scope
    if isinstance(expr, cst.Call):
        function = project_function(ctx, expr, scope)
        values = returned(function) if function is not None else []
        if len(values) == 1:
            return element(ctx, values[0], function, index, depth + 1)
    return None
