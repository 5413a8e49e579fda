"""libcst expressions that rules' fixes build around the user's code: a transpose, a merge transposed back."""

from __future__ import annotations

from mhalint.parse.lazy import cst


def transposed(expr: cst.BaseExpression) -> cst.Call:
    """`expr.transpose(1, 2)`, with parentheses where `expr` needs them."""
    template = cst.parse_expression("x.transpose(1, 2)")
    if not isinstance(expr, cst.Name | cst.Attribute | cst.Call | cst.Subscript) or expr.lpar:
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]) if not expr.lpar else expr
    return template.with_changes(func=template.func.with_changes(value=expr))


def merged_transposed(merge: cst.Call, inner: cst.BaseExpression, carrier: cst.BaseExpression,
                      carrier_code: str) -> cst.Call:
    """`merge` (`y.reshape(B, T, C)`, `y.contiguous().view(B, T, C)`) with `inner`, the tensor inside the
    conversions `carrier` puts around it, transposed first: `y.transpose(1, 2).reshape(B, T, C)`; a `.view` gets
    `.contiguous()` too (the transpose is not contiguous) unless `carrier_code` has it already."""
    func = merge.func
    value = func.value.deep_replace(inner, transposed(inner)) if carrier is not inner else transposed(inner)
    if func.attr.value == "view" and "contiguous" not in carrier_code:
        contiguous = cst.parse_expression("x.contiguous()")
        value = contiguous.with_changes(func=contiguous.func.with_changes(value=value))
    return merge.with_changes(func=func.with_changes(value=value))
