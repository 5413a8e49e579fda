"""Tensor layout inference: is the tensor that reaches an attention module batch-first or sequence-first?

The reader follows the module's query argument back through the function that calls it (assignments, shape
unpacking, permutes, rearranges), into the callers of that function within the module (`self.block(x)`,
`layer(x)` for a class's `forward`), and through containers built from the layer (`nn.TransformerEncoder(layer,
n)`, a project encoder holding clones of it). Evidence is concrete syntax; anything else stays unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mhalint.calls import Construction, callers, instance
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.lazy import cst
from mhalint.values import resolve

BATCH_FIRST, SEQ_FIRST = "batch-first", "sequence-first"
_MAX_DEPTH = 14

_BATCH_NAME = re.compile(r"^_?(b|bs|bsz|batch|batch_size|batchsize|n_batch|nbatch|num_batch)$", re.IGNORECASE)
_SEQ_NAME = re.compile(r"^_?(l|t|s|seq|seq_len|seqlen|sequence_length|len|length|tgt_len|src_len|q_len|k_len|hw|"
                       r"num_queries|n_queries|nq|q|time|n_tokens|num_tokens)$", re.IGNORECASE)
# Methods that keep the layout of the tensor they are called on.
_KEEPS_LAYOUT = {
    "contiguous", "to", "float", "half", "bfloat16", "double", "type_as", "clone", "detach", "cuda", "cpu",
    "masked_fill", "masked_fill_", "add", "mul", "sub", "div", "add_", "mul_", "relu", "gelu", "sigmoid", "tanh",
    "softmax", "clamp", "view_as", "reshape_as", "expand_as", "requires_grad_",
}
_FIRST_ARG_KEEPS_LAYOUT = {"torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.randn_like",
                           "torch.nn.functional.dropout", "torch.nn.functional.layer_norm", "torch.relu",
                           "torch.nn.functional.relu", "torch.nn.functional.gelu", "torch.tanh", "torch.sigmoid"}
_CONCAT = {"torch.cat", "torch.concat", "torch.concatenate", "torch.stack"}
_EMBEDDING = "torch.nn.Embedding"
_REARRANGE = {"einops.rearrange", "einops.repeat"}


@dataclass(frozen=True)
class Layout:
    kind: str  # BATCH_FIRST or SEQ_FIRST
    evidence: str  # one sentence with the line it rests on
    # What a headline quotes: the decisive code ("`B, T, C = x.shape`") and its line.
    code: str = ""
    line: int = 0


class LayoutReader:
    def __init__(self, ctx: ModuleContext):
        self.ctx = ctx

    # ---- what layout a tensor has ----
    def of(self, expr: cst.BaseExpression | None, scope: Scope, use: cst.CSTNode, depth: int = 0) -> Layout | None:
        if expr is None or depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, use, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self.of(expr.left, scope, use, depth + 1) or self.of(expr.right, scope, use, depth + 1)
        if isinstance(expr, cst.Subscript):
            return self.of(expr.value, scope, use, depth + 1) if _keeps_dims(expr) else None
        if isinstance(expr, cst.Name):
            return self._name(expr.value, scope, use, depth)
        bindings = self.ctx.attribute_bindings(expr, scope)
        if bindings is not None:
            if len(bindings) == 1 and bindings[0].value is not None:
                return self.of(bindings[0].value, bindings[0].scope, bindings[0].node, depth + 1)
        return None

    def _name(self, name: str, scope: Scope, use: cst.CSTNode, depth: int) -> Layout | None:
        bindings = self.ctx.bindings(name, scope)
        binding = self.ctx.reaching(bindings, use)
        if binding is None:
            return None
        unpacked = self._unpacking(name, scope, binding, use)
        if unpacked is not None:
            return unpacked
        if binding.kind == "param":
            return self._parameter(name, binding, depth) or self._documented(name, binding)
        if binding.kind != "assign" or binding.value is None:
            return None
        return self.of(binding.value, binding.scope, binding.node, depth + 1) or self._commented(name, binding)

    def _commented(self, name: str, binding: Binding) -> Layout | None:
        """A shape comment on the assignment's line or the comment line just above it: `# [B, HxW, C]`."""
        line = self.ctx.line(binding.node)
        for at in (line, line - 1):
            text = self.ctx.comment(at)
            kind = shape_in_text(text) if text else None
            if kind is not None and (at == line or self.ctx.source_lines()[at - 1].strip().startswith("#")):
                return Layout(kind, f"`{name}` is {kind}: the comment `{text.strip()}` at line {at}",
                              f"`{text.strip()}`", at)
        return None

    def _documented(self, name: str, binding: Binding) -> Layout | None:
        """A docstring line that names the parameter with a shape: `x: (B, L, E) input tokens`."""
        function = binding.scope.node
        docstring = function.get_docstring() if isinstance(function, cst.FunctionDef) else None
        for text in (docstring or "").splitlines():
            if re.search(rf"\b{re.escape(name)}\b", text):
                kind = shape_in_text(text.replace(name, ""))
                if kind is not None:
                    return Layout(kind, f"`{name}` is {kind}: the docstring of `{binding.scope.name}()` says "
                                        f"`{text.strip()}`", f"`{text.strip()}` in its docstring",
                                  self.ctx.line(function.body.body[0]))
        return None

    def _parameter(self, name: str, binding: Binding, depth: int) -> Layout | None:
        """What the callers pass: batch-first evidence from any caller wins (it is the one that corrupts)."""
        found = []
        for site in callers(self.ctx, binding.scope):
            argument = site.arguments.get(name)
            layout = self.of(argument, site.scope, site.call, depth + 1) if argument is not None else None
            if layout is not None:
                found.append(layout)
        return _merge(found)

    def _unpacking(self, name: str, scope: Scope, reaching: Binding, use: cst.CSTNode) -> Layout | None:
        """`B, T, C = x.shape` / `x.size()` names the three dimensions of `x`, as long as `x` is not reassigned
        between that line and the use."""
        since = 0 if reaching.kind == "param" else self.ctx.line(reaching.node)
        for bindings in scope.bindings.values():
            for binding in bindings:
                if binding.kind != "unpack" or binding.index != 0 or not isinstance(binding.node, cst.Assign):
                    continue
                if _shape_of(binding.value) != name:
                    continue
                target = binding.node.targets[0].target
                names = [e.value.value if isinstance(e.value, cst.Name) else "" for e in target.elements]
                if len(names) != 3 or not since <= self.ctx.line(binding.node) <= self.ctx.line(use):
                    continue
                code, line = f"`{self.ctx.code(target)} = {self.ctx.code(binding.value)}`", self.ctx.line(binding.node)
                if _BATCH_NAME.match(names[0]):
                    return Layout(BATCH_FIRST, f"`{name}` is batch-first: {code} at line {line}", code, line)
                if _SEQ_NAME.match(names[0]) and _BATCH_NAME.match(names[1]):
                    return Layout(SEQ_FIRST, f"`{name}` is sequence-first: {code} at line {line}", code, line)
        return None

    def _call(self, call: cst.Call, scope: Scope, use, depth: int) -> Layout | None:
        func = call.func
        name = self.ctx.qualified_name(func, scope)
        if name in _REARRANGE or (isinstance(func, cst.Name) and func.value == "rearrange"):
            return self._rearrange(call)
        if name in _CONCAT and call.args:
            return self._concatenation(call, scope, use, depth)
        if name in _FIRST_ARG_KEEPS_LAYOUT and call.args:
            return self.of(call.args[0].value, scope, use, depth + 1)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in ("permute", "transpose", "movedim", "swapaxes"):
                return self._reorder(method, call, scope)
            if method in ("repeat", "expand") and _is_call(func.value, "unsqueeze"):
                return self._query_embedding(call, scope)
            if method in ("view", "reshape"):
                return self._view(call, scope, use, depth)
            if method in _KEEPS_LAYOUT:
                return self.of(func.value, scope, use, depth + 1)
        built = instance(self.ctx, func, scope)
        if built is not None and self._constructs(built, _EMBEDDING):
            code, line = f"`{self.ctx.code(call)}`", self.ctx.line(call)
            return Layout(BATCH_FIRST, f"{code} at line {line} is an nn.Embedding output: (N, L, E) for (N, L) "
                                       f"token ids", f"{code}, an nn.Embedding output", line)
        if call.args and not call.args[0].keyword and not call.args[0].star:
            # a module or helper applied to the tensor (norm, dropout, linear, with_pos_embed) keeps its layout
            return self.of(call.args[0].value, scope, use, depth + 1)
        return None

    def _constructs(self, built: Construction, api: str) -> bool:
        return self.ctx.qualified_name(built.call.func, built.scope) == api

    def _reorder(self, method: str, call: cst.Call, scope: Scope) -> Layout | None:
        dims = [resolve(self.ctx, a.value, scope) for a in call.args]
        if any(d is None or not isinstance(d.value, int) for d in dims):
            return None
        order = [d.value for d in dims]
        written, code, line = self._written(call)
        if method == "permute":
            if order[:3] in ([1, 0, 2], [2, 0, 1]) and len(order) == 3:
                return Layout(SEQ_FIRST, f"{written} puts the sequence axis first", code, line)
            if order == [0, 2, 1]:
                return Layout(BATCH_FIRST, f"{written} keeps the batch axis first", code, line)
            return None
        pair = {order[0], order[1]} if len(order) == 2 else set()
        if pair == {0, 1}:
            return Layout(SEQ_FIRST, f"{written} swaps batch and sequence, putting the sequence first", code, line)
        if pair in ({1, 2}, {1, -1}, {-1, -2}):
            return Layout(BATCH_FIRST, f"{written} keeps the batch axis first", code, line)
        return None

    def _query_embedding(self, call: cst.Call, scope: Scope) -> Layout | None:
        """`embed.unsqueeze(1).repeat(1, bs, 1)` (DETR's queries) puts the batch second."""
        inner = call.func.value
        axis = resolve(self.ctx, inner.args[0].value, scope) if inner.args else None
        if axis is not None and axis.value == 1 and len(call.args) == 3:
            first = resolve(self.ctx, call.args[0].value, scope)
            if first is not None and first.value in (1, -1):
                written, code, line = self._written(call)
                return Layout(SEQ_FIRST, f"{written} repeats over a new batch axis in position 1", code, line)
        return None

    def _view(self, call: cst.Call, scope: Scope, use, depth: int) -> Layout | None:
        """`x.view(B, -1, C)` with a batch-named first size puts the batch first; `x.view(-1, ...)` or
        `x.view([-1] + shape[-2:])` folds the leading axes into the first, so batch-first input stays batch-first."""
        if not call.args:
            return None
        first = call.args[0].value
        if len(call.args) >= 3 and isinstance(first, cst.Name) and _BATCH_NAME.match(first.value):
            written, code, line = self._written(call)
            return Layout(BATCH_FIRST, f"{written} puts the batch first", code, line)
        if isinstance(first, cst.BinaryOperation) and isinstance(first.left, cst.List):
            first = first.left.elements[0].value if first.left.elements else first
        leading = resolve(self.ctx, first, scope)
        if leading is not None and leading.value == -1:
            inner = self.of(call.func.value, scope, use, depth + 1)
            if inner is not None and inner.kind == BATCH_FIRST:
                return Layout(BATCH_FIRST, f"{inner.evidence}, and `{self.ctx.code(call)}` at line "
                                           f"{self.ctx.line(call)} folds the leading axes into the batch",
                              inner.code, inner.line)
        return None

    def _rearrange(self, call: cst.Call) -> Layout | None:
        if len(call.args) < 2 or not isinstance(call.args[1].value, cst.SimpleString):
            return None
        pattern = call.args[1].value.evaluated_value
        if not isinstance(pattern, str) or "->" not in pattern:
            return None
        axes = _axes(pattern.split("->", 1)[1])
        written, code, line = self._written(call)
        if len(axes) == 3 and "b" in axes[0]:
            return Layout(BATCH_FIRST, f"{written} puts the batch axis first", code, line)
        if len(axes) == 3 and "b" in axes[1] and "b" not in axes[0]:
            return Layout(SEQ_FIRST, f"{written} puts the batch axis second", code, line)
        return None

    def _written(self, call: cst.Call) -> tuple[str, str, int]:
        """How evidence quotes a call ("`x.permute(1, 0, 2)` at line 14"), and the code and line a headline quotes."""
        code, line = f"`{self.ctx.code(call)}`", self.ctx.line(call)
        return f"{code} at line {line}", code, line

    def _concatenation(self, call: cst.Call, scope, use, depth) -> Layout | None:
        parts = call.args[0].value
        if isinstance(parts, cst.List | cst.Tuple):
            for part in parts.elements:
                layout = self.of(part.value, scope, use, depth + 1)
                if layout is not None:
                    return layout
        return None


_SHAPE_GROUP = re.compile(r"[\[(]([^\[\]()]*)[\])]")
_COMPACT = re.compile(r"\b([A-Z]{3})\b")
_TIMES = re.compile(r"\b([A-Z][A-Za-z]*)\s*x\s*([A-Z][A-Za-z]*)\s*x\s*([A-Z][A-Za-z]*)\b")


def shape_in_text(text: str) -> str | None:
    """The layout a comment or docstring states: `(B, L, E)`, `[bs, HxW, C]`, `QxNxC`, `NLD -> LND` (the part
    after an arrow or "to" wins), `batch, seq_len, channels`."""
    text = re.split(r"->|\bto\b", text)[-1]
    candidates = [[d for d in group.split(",")] for group in _SHAPE_GROUP.findall(text) if group.count(",") == 2]
    candidates += [list(dims) for dims in _TIMES.findall(text)]
    candidates += [list(word) for word in _COMPACT.findall(text)]
    if not candidates and text.count(",") == 2:
        candidates.append(text.split(","))
    for dims in candidates:
        words = [d.strip(" #:.*").split()[-1] if d.strip(" #:.*") else "" for d in dims]
        first, second = words[0], words[1]
        if _BATCH_NAME.match(first) or (first.upper() == "N" and _SEQ_NAME.match(second)):
            return BATCH_FIRST
        if _SEQ_NAME.match(first) and (_BATCH_NAME.match(second) or second.upper() == "N"):
            return SEQ_FIRST
    return None


def _merge(layouts: list[Layout]) -> Layout | None:
    for layout in layouts:
        if layout.kind == BATCH_FIRST:
            return layout
    return layouts[0] if layouts else None


def _keeps_dims(expr: cst.Subscript) -> bool:
    """`x[:, :n]` keeps every axis; `x[0]` drops one."""
    return all(isinstance(e.slice, cst.Slice) for e in expr.slice)


def _shape_of(value) -> str | None:
    """The name whose shape `x.shape`, `x.size()` or `x.shape[:3]` reads."""
    if isinstance(value, cst.Subscript):
        value = value.value
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "size" \
            and not value.args:
        value = value.func
    elif isinstance(value, cst.Attribute) and value.attr.value != "shape":
        return None
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name) and \
            value.attr.value in ("shape", "size"):
        return value.value.value
    return None


def _is_call(expr, method: str) -> bool:
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == method


def _axes(side: str) -> list[str]:
    """einops axes of one side of a pattern: 'b (h w) c' -> ['b', 'h w', 'c']."""
    return [group.strip("()").strip() for group in re.findall(r"\([^)]*\)|\S+", side.strip())]
