"""Rebuild a mask from its source text without executing it: a tree walk over a small, closed subset of Python.

The probe must never import, exec or eval the user's code, yet it needs the mask a call site built. This module
parses the expression with `ast` and walks the tree itself, evaluating only constants, the given sizes, a short
list of torch factories and dtypes, a short list of tensor methods, comparisons, arithmetic and bitwise operators,
and basic indexing. Everything else is refused with a one-line reason naming the offending piece.

Every value the walk produces is an int, float, bool, None, dtype, tuple of those (or a slice, inside an index),
or a tensor of at most MAX_ELEMENTS elements: the sizes of factories, `expand`, `repeat`, `repeat_interleave` and
broadcasting results are checked before torch allocates. Refused is about what is allowed; torch's own errors
(mismatched shapes, say) propagate unchanged, since they are facts about the expression.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import TYPE_CHECKING

from mhalint.finding import shorten

if TYPE_CHECKING:
    import torch

MAX_NODES = 200
MAX_DEPTH = 30
MAX_ELEMENTS = 1_000_000

_FACTORIES = {"ones", "zeros", "full", "arange", "eye"}
_FUNCTIONS = _FACTORIES | {"triu", "tril", "ones_like", "zeros_like", "logical_not", "logical_and", "logical_or",
                           "where"}
_DTYPES = {"bool", "float", "float32", "long", "int64"}
_METHODS = {
    "bool", "float", "long", "int", "to", "triu", "tril", "unsqueeze", "squeeze", "logical_not", "masked_fill",
    "eq", "ne", "lt", "le", "gt", "ge", "expand", "repeat", "repeat_interleave", "view", "reshape", "transpose",
    "t", "flatten", "contiguous", "clone", "detach",
}
_KEYWORDS = {"dtype", "diagonal", "dim", "fill_value", "value"}
_IGNORED = {"device"}  # everything runs on the CPU
_IGNORED_BY_TO = _IGNORED | {"non_blocking", "copy"}
_INFINITIES = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan"}

# The operators evaluated, by node type; a comparison takes exactly one of the last six.
_OPERATORS = {
    ast.Invert: operator.invert, ast.USub: operator.neg, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Eq: operator.eq, ast.NotEq: operator.ne,
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_REFUSED_OPERATORS = {ast.Pow: "**", ast.Mod: "%", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@",
                      ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Not: "not",
                      ast.UAdd: "unary +"}
_KINDS = {ast.Lambda: "a lambda", ast.ListComp: "a comprehension", ast.SetComp: "a comprehension",
          ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator expression", ast.JoinedStr: "an f-string",
          ast.Starred: "`*` unpacking", ast.NamedExpr: "an assignment expression", ast.IfExp: "a conditional",
          ast.BoolOp: "`and`/`or`", ast.Dict: "a dict", ast.Set: "a set", ast.Await: "`await`"}


class Refused(Exception):
    """The expression is outside what the evaluator accepts; the message says which piece and why."""


def evaluate_mask(expression: str, torch_module, sizes: dict[str, int]) -> torch.Tensor:
    """The tensor `expression` builds, with the names in `sizes` bound to their ints and `torch` to torch_module."""
    if any(type(v) is not int or not k.isidentifier() or k in ("torch", "float") for k, v in sizes.items()):
        raise ValueError(f"sizes must map plain names to ints: {sizes!r}")
    source = expression.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError) as error:
        raise Refused(f"the expression does not parse: {error.msg if isinstance(error, SyntaxError) else error}")
    except (MemoryError, RecursionError):  # the parser's own limit on nesting, e.g. 100,000 unary minuses
        raise Refused("the expression nests too deeply to parse")
    nodes = sum(1 for _ in ast.walk(tree))
    if nodes > MAX_NODES:
        raise Refused(f"the expression has {nodes} AST nodes (limit {MAX_NODES})")
    depth = _depth(tree.body)
    if depth > MAX_DEPTH:
        raise Refused(f"the expression nests {depth} levels deep (limit {MAX_DEPTH})")
    result = _Evaluator(source, torch_module, sizes).visit(tree.body)
    if not isinstance(result, torch_module.Tensor):
        raise Refused(f"the expression gives {type(result).__name__}, not a tensor")
    return result


def _depth(node: ast.AST) -> int:
    return 1 + max((_depth(child) for child in ast.iter_child_nodes(node)), default=0)


class _Evaluator:
    """One walk: `visit` dispatches to the method for the node's type; a type without one is refused."""

    def __init__(self, source: str, torch_module, sizes: dict[str, int]):
        self.source, self.torch, self.sizes = source, torch_module, sizes

    def visit(self, node: ast.AST):
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            kind = _KINDS.get(type(node), f"`{type(node).__name__}` syntax")
            raise Refused(f"{kind} (`{self.text(node)}`) is not allowed")
        return method(node)

    def text(self, node: ast.AST) -> str:
        """The node's source on one line, shortened, for messages."""
        text = " ".join((ast.get_source_segment(self.source, node) or type(node).__name__).split())
        return shorten(text, 60)

    # ---- leaves -------------------------------------------------------------------------------------------------

    def visit_Constant(self, node: ast.Constant):
        if node.value is None or node.value is Ellipsis or type(node.value) in (int, float, bool):
            return node.value
        raise Refused(f"the {type(node.value).__name__} constant `{self.text(node)}` is not allowed "
                      "(only numbers, True, False, None and ...)")

    def visit_Name(self, node: ast.Name):
        if node.id in self.sizes:
            return self.sizes[node.id]
        if node.id == "torch":
            raise Refused("`torch` may only be used as `torch.<function or dtype>`")
        if node.id == "float":
            raise Refused("`float` may only be called as float('inf') or float('-inf')")
        bound = ", ".join(self.sizes)
        raise Refused(f"name `{node.id}` is unknown (only {f'sizes {bound} and ' if bound else ''}torch are bound)")

    def visit_Attribute(self, node: ast.Attribute):
        """Only dtypes are attribute values; torch functions and tensor methods are reached through visit_Call."""
        self.no_dunder(node)
        if _is_torch(node.value) and node.attr in _DTYPES:
            return getattr(self.torch, node.attr)
        if _is_torch(node.value) and node.attr in _FUNCTIONS:
            raise Refused(f"`torch.{node.attr}` may only be called")
        raise Refused(f"attribute `{self.text(node)}` is not allowed")

    def visit_Tuple(self, node: ast.Tuple | ast.List):
        return tuple(self.visit(element) for element in node.elts)

    visit_List = visit_Tuple

    def visit_Slice(self, node: ast.Slice):
        bounds = [None if part is None else self.visit(part) for part in (node.lower, node.upper, node.step)]
        if any(bound is not None and type(bound) is not int for bound in bounds):
            raise Refused(f"slice `{self.text(node)}` must have int bounds")
        return slice(*bounds)

    # ---- operators ----------------------------------------------------------------------------------------------

    def visit_UnaryOp(self, node: ast.UnaryOp):
        apply = self.operator(node.op, node)
        return apply(self.operand(node.operand))

    def visit_BinOp(self, node: ast.BinOp):
        apply = self.operator(node.op, node)
        left, right = self.operand(node.left), self.operand(node.right)
        self.check_broadcast(node, left, right)
        return apply(left, right)

    def visit_Compare(self, node: ast.Compare):
        if len(node.ops) != 1:
            raise Refused(f"chained comparison `{self.text(node)}` is not allowed")
        apply = self.operator(node.ops[0], node)
        left, right = self.operand(node.left), self.operand(node.comparators[0])
        self.check_broadcast(node, left, right)
        return apply(left, right)

    def visit_Subscript(self, node: ast.Subscript):
        value = self.visit(node.value)
        if not isinstance(value, self.torch.Tensor):
            raise Refused(f"only tensors may be indexed (in `{self.text(node)}`)")
        index = self.visit(node.slice)
        for part in index if isinstance(index, tuple) else (index,):
            if not (part is None or part is Ellipsis or type(part) in (int, slice)):
                raise Refused(f"index `{self.text(node.slice)}` may hold only ints, slices, None and ...")
        return value[index]

    # ---- calls --------------------------------------------------------------------------------------------------

    def visit_Call(self, node: ast.Call):
        """A whitelisted torch function, a whitelisted method of a tensor, or float('inf')."""
        func = node.func
        if isinstance(func, ast.Name):
            if func.id == "float":
                return self.call_float(node)
            raise Refused(f"`{func.id}` is not an allowed function")
        if not isinstance(func, ast.Attribute):
            self.visit(func)  # refuses a lambda or other non-callable syntax by name
            raise Refused(f"`{self.text(func)}` cannot be called")
        self.no_dunder(func)
        if _is_torch(func.value):
            if func.attr not in _FUNCTIONS:
                raise Refused(f"`torch.{func.attr}` is not an allowed function")
            receiver, target = None, getattr(self.torch, func.attr)
        else:
            receiver = self.visit(func.value)
            if not isinstance(receiver, self.torch.Tensor):
                raise Refused(f"`.{func.attr}()` needs a tensor; `{self.text(func.value)}` is a "
                              f"{type(receiver).__name__}")
            if func.attr not in _METHODS:
                raise Refused(f"`.{func.attr}()` is not an allowed tensor method")
            target = getattr(receiver, func.attr)
        args, kwargs = self.arguments(node, _IGNORED_BY_TO if func.attr == "to" else _IGNORED)
        self.check_call(node, func.attr, receiver, args, kwargs)
        return target(*args, **kwargs)

    def call_float(self, node: ast.Call) -> float:
        """float('inf') and its kin are how additive masks spell -inf; no other string is ever read."""
        arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            if arg.value.strip().lower() in _INFINITIES:
                return float(arg.value)
        elif arg is not None:
            value = self.operand(arg)
            if not isinstance(value, self.torch.Tensor):
                return float(value)
        raise Refused(f"`{self.text(node)}`: float() takes only 'inf', '-inf', 'nan' or a number")

    def arguments(self, node: ast.Call, ignored: set[str]) -> tuple[list, dict]:
        """Positional and keyword values; ignored keywords (device=...) are skipped without being evaluated."""
        kwargs = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                raise Refused(f"`**` unpacking (`**{self.text(keyword.value)}`) is not allowed")
            if keyword.arg in ignored:
                continue
            if keyword.arg not in _KEYWORDS:
                raise Refused(f"keyword `{keyword.arg}=` is not allowed (in `{self.text(node)}`)")
            kwargs[keyword.arg] = self.visit(keyword.value)
        return [self.visit(arg) for arg in node.args], kwargs

    def check_call(self, node: ast.Call, name: str, receiver, args: list, kwargs: dict) -> None:
        """Refuse, before torch runs, a call whose result would exceed MAX_ELEMENTS or a `.to()` that is no cast."""
        if receiver is None and name in _FACTORIES:
            self.check_elements(node, math.prod(self.factory_shape(node, name, args)))
        elif name == "expand":
            sizes = self.ints(node, _shape(args), minimum=-1)
            lead = len(sizes) - receiver.dim()
            self.check_elements(node, math.prod(
                receiver.shape[i - lead] if size == -1 and i >= lead else size for i, size in enumerate(sizes)))
        elif name in ("view", "reshape"):  # sizes only: a dtype view could multiply the element count
            self.ints(node, _shape(args), minimum=-1)
        elif name == "repeat":
            self.check_elements(node, receiver.numel() * math.prod(self.ints(node, _shape(args))))
        elif name == "repeat_interleave":
            self.check_elements(node, receiver.numel() * math.prod(self.ints(node, args[:1])))
        elif name == "to" and not all(isinstance(v, self.torch.dtype) for v in [*args, *kwargs.values()]):
            raise Refused(f"`{self.text(node)}`: .to() may only take a dtype here")
        self.check_broadcast(node, receiver, *args, *kwargs.values())

    def factory_shape(self, node: ast.Call, name: str, args: list) -> list[int]:
        """The shape a factory call asks for, from its checked int arguments."""
        if name == "arange":
            bounds = self.ints(node, args, minimum=None)
            if not 1 <= len(bounds) <= 3 or (len(bounds) == 3 and bounds[2] == 0):
                raise Refused(f"`{self.text(node)}`: torch.arange needs 1 to 3 ints and a non-zero step")
            start, end, step = {1: (0, *bounds, 1), 2: (*bounds, 1), 3: tuple(bounds)}[len(bounds)]
            return [max(0, -((start - end) // step))]  # ceil((end - start) / step)
        if name == "full":
            shape = args[0] if args and isinstance(args[0], tuple) else args[:1]
        else:
            shape = _shape(args)
        shape = self.ints(node, shape)
        return shape * 2 if name == "eye" and len(shape) == 1 else shape

    def ints(self, node: ast.Call, values, minimum: int | None = 0) -> list[int]:
        for value in values:
            if type(value) is not int:
                raise Refused(f"`{self.text(node)}`: a size is a {type(value).__name__}, not an int")
            if minimum is not None and value < minimum:
                raise Refused(f"`{self.text(node)}`: size {value} is {'negative' if minimum == 0 else 'below -1'}")
        return list(values)

    def check_elements(self, node: ast.AST, count: int) -> None:
        if count > MAX_ELEMENTS:
            raise Refused(f"`{self.text(node)}` would make {count:,} elements (limit {MAX_ELEMENTS:,})")

    def check_broadcast(self, node: ast.AST, *values) -> None:
        """Broadcasting can multiply sizes (a column against a row), so its result is checked before it is made."""
        shapes = [value.shape for value in values if isinstance(value, self.torch.Tensor)]
        if len(shapes) > 1:
            self.check_elements(node, math.prod(self.torch.broadcast_shapes(*shapes)))

    # ---- guards -------------------------------------------------------------------------------------------------

    def operand(self, node: ast.expr):
        """An operator's operand: a tensor or a number, never a tuple (`(0,) * 10**9` would allocate) or a dtype."""
        value = self.visit(node)
        if isinstance(value, self.torch.Tensor) or type(value) in (int, float, bool):
            return value
        raise Refused(f"`{self.text(node)}` is not a tensor or a number but a {type(value).__name__}")

    def operator(self, op: ast.AST, node: ast.expr):
        if type(op) not in _OPERATORS:
            raise Refused(f"operator `{_REFUSED_OPERATORS[type(op)]}` is not allowed (in `{self.text(node)}`)")
        return _OPERATORS[type(op)]

    def no_dunder(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            raise Refused(f"private or dunder attribute `{node.attr}` is not allowed (in `{self.text(node)}`)")


def _is_torch(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "torch"


def _shape(args: list) -> list:
    """Sizes given as varargs (ones(L, S)) or as one tuple (ones((L, S)))."""
    return list(args[0]) if len(args) == 1 and isinstance(args[0], tuple) else list(args)
