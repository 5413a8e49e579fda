"""Reading boolean expressions made of comparisons, as a mask function or a masking test writes them.

`conjuncts` gives the comparisons that must all hold for an expression to be true (`a & b`, `a and b`,
`torch.logical_and(a, b)`; `~`, `not` and `torch.logical_not` negate, and De Morgan carries a negation through `|`
and `or`), each with its operator as a symbol read left to right; `names_compared` reads one of them as a comparison
of two names (`q_idx >= kv_idx`, `kv_idx <= q_idx`, `q_idx - kv_idx >= 0`); `is_boolean` says whether an expression
gives a bool. A caller that reads local names as their values passes `read` (the identity otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from mhalint.context import ModuleContext, Scope
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

_MAX_DEPTH = 8

# the symbol of each comparison operator of libcst, by class name
OPERATORS = {"LessThan": "<", "GreaterThan": ">", "LessThanEqual": "<=", "GreaterThanEqual": ">=", "Equal": "==",
             "NotEqual": "!="}
MIRROR = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}  # `a OP b` read as `b MIRROR[OP] a`
NEGATE = {"<": ">=", ">": "<=", "<=": ">", ">=": "<", "==": "!=", "!=": "=="}  # `not (a OP b)` is `a NEGATE[OP] b`
BOOLEAN_CALLS = frozenset({"torch.logical_and", "torch.logical_or", "torch.logical_not", "torch.logical_xor",
                           "torch.eq", "torch.ne", "torch.lt", "torch.le", "torch.gt", "torch.ge", "torch.isin"})

if TYPE_CHECKING:  # libcst stays unloaded until a file needs it
    from typing import Callable

    Read = Callable[[cst.BaseExpression], cst.BaseExpression]


def _itself(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr


def conjuncts(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, negated: bool = False,
              read: Read = _itself, depth: int = 0) -> Iterator[tuple[cst.Comparison, str, bool, cst.CSTNode]]:
    """(comparison, its effective operator, whether it is negated, the node to report at) for each comparison that
    must hold for `expr` (negated: for `not expr`) to be true. Anything else is not read. A link of a chained
    comparison (`a <= b < c`) comes as a new node; the node to report at is then the whole chain."""
    expr = read(expr)
    if depth > _MAX_DEPTH:
        return
    if isinstance(expr, cst.Comparison):
        parts = [expr.left] + [c.comparator for c in expr.comparisons]
        if len(expr.comparisons) == 1:
            op = OPERATORS.get(type(expr.comparisons[0].operator).__name__)
            if op is not None:
                yield expr, (NEGATE[op] if negated else op), negated, expr
        elif not negated:  # a <= b < c: each link must hold
            for left, link, right in zip(parts, expr.comparisons, parts[1:]):
                op = OPERATORS.get(type(link.operator).__name__)
                if op is not None:
                    yield cst.Comparison(left, [link.with_changes(comparator=right)]), op, False, expr
        return
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.BitInvert, cst.Not)):
        yield from conjuncts(ctx, expr.expression, scope, not negated, read, depth + 1)
        return
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
        if isinstance(expr.operator, cst.BitAnd) == negated:
            return  # a disjunction: either part may make it true
        yield from conjuncts(ctx, expr.left, scope, negated, read, depth + 1)
        yield from conjuncts(ctx, expr.right, scope, negated, read, depth + 1)
        return
    if isinstance(expr, cst.BooleanOperation):
        if isinstance(expr.operator, cst.And) == negated:
            return
        yield from conjuncts(ctx, expr.left, scope, negated, read, depth + 1)
        yield from conjuncts(ctx, expr.right, scope, negated, read, depth + 1)
        return
    if isinstance(expr, cst.Call) and not any(a.keyword or a.star for a in expr.args):
        name = ctx.qualified_name(expr.func, scope)
        if name == "torch.logical_not" and len(expr.args) == 1:
            yield from conjuncts(ctx, expr.args[0].value, scope, not negated, read, depth + 1)
        elif name == ("torch.logical_or" if negated else "torch.logical_and") and len(expr.args) == 2:
            for arg in expr.args:
                yield from conjuncts(ctx, arg.value, scope, negated, read, depth + 1)


def names_compared(comparison: cst.Comparison, op: str, first: str, second: str) -> str | None:
    """The operator of `first OP second` when the comparison is exactly that, also written `second OP' first` or
    `first - second OP 0`; None for anything else (an offset, a window, a scaled name)."""
    terms: list = []
    if not (_terms(comparison.left, 1, terms) and _terms(comparison.comparisons[0].comparator, -1, terms)):
        return None
    coefficients = {first: 0, second: 0}
    for sign, term in terms:
        if isinstance(term, cst.Name) and term.value in coefficients:
            coefficients[term.value] += sign
        elif isinstance(term, cst.Integer) and literal(term) == 0:
            continue
        else:
            return None
    if (coefficients[first], coefficients[second]) == (1, -1):
        return op
    if (coefficients[first], coefficients[second]) == (-1, 1):
        return MIRROR[op]
    return None


def _terms(expr: cst.BaseExpression, sign: int, out: list) -> bool:
    """Split a sum into signed terms; False when it is not a sum of plain terms."""
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract)):
        return _terms(expr.left, sign, out) and _terms(
            expr.right, sign if isinstance(expr.operator, cst.Add) else -sign, out)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _terms(expr.expression, -sign, out)
    out.append((sign, expr))
    return True


def is_boolean(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope, read: Read = _itself,
               depth: int = 0) -> bool:
    """Does `expr` give a bool: a comparison, a negation or a logical combination of ones that do, or a torch
    comparison function?"""
    expr = read(expr)
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.Comparison):
        return all(OPERATORS.get(type(c.operator).__name__) for c in expr.comparisons)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Not, cst.BitInvert)):
        return is_boolean(ctx, expr.expression, scope, read, depth + 1)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr, cst.BitXor)) \
            or isinstance(expr, cst.BooleanOperation):
        return is_boolean(ctx, expr.left, scope, read, depth + 1) and is_boolean(ctx, expr.right, scope, read,
                                                                                  depth + 1)
    if isinstance(expr, cst.Call):
        return ctx.qualified_name(expr.func, scope) in BOOLEAN_CALLS
    return False
