"""Mask axes: whether a mask holds one slice per sample (a batch axis), and whether its construction shows the
query × key pair of an (L, S) attention mask.

Two pitfalls turn on these axes: tiling a per-sample mask head-major (MHA006) and passing an (L, L) attention mask
where the (N, S) key padding mask goes (MHA010). The answer is read from how the mask was built, followed through
names, parameters and their callers, `self.` attributes and project helpers. A batch axis is established only by
provenance (the shape reader's, or a factory whose first size is an established batch); a name (`pad`, `lengths`,
`ids`) or a batched product of unseen operands makes it only likely. What holds for the value of a mask (its
dtype and convention) is mhalint.analysis.masks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.axes import Role, Strength
from mhalint.analysis.calls import project_function, returned
from mhalint.analysis.sites import place_file, project_callers
from mhalint.analysis.tensors import ShapeReader
from mhalint.analysis.vocabulary import (
    BOOLEAN_METHODS,
    FULL,
    KEEPS_AXES,
    MATMUL,
    NEW_FACTORIES,
    PER_SAMPLE_NAME,
    SHAPE_ONLY,
    SIZE_FACTORIES,
)
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.finding import shorten
from mhalint.parse.lazy import cst

# PER_SAMPLE: the code establishes a batch axis; LIKELY: only a name or an idiom says so (at most a warning);
# SHARED: one mask for every sample; NEUTRAL: a constant, which says nothing either way.
PER_SAMPLE, LIKELY, SHARED, UNKNOWN, NEUTRAL = "per-sample", "likely per-sample", "shared", "unknown", "neutral"
# What a construction shows about the query × key axes.
CAUSAL, SQUARE = "an (L, L) causal mask", "a square (L, L) mask"

# Methods that change a mask's shape or dtype but not which sample each value belongs to.
_SAME_SAMPLES = SHAPE_ONLY | KEEPS_AXES | BOOLEAN_METHODS | {"triu", "tril", "byte"}
# Of those, the ones whose first argument is a tensor that also takes part.
_BINARY = {"masked_fill", "masked_fill_", "logical_and", "logical_or", "eq", "ne", "lt", "gt", "le", "ge",
           "add", "mul", "sub", "div", "add_", "mul_"}
_ELEMENTWISE = frozenset({"torch.triu", "torch.tril", "torch.logical_not", "torch.where", "torch.logical_and",
                          "torch.logical_or", "torch.zeros_like", "torch.ones_like", "torch.full_like",
                          "torch.empty_like", "torch.eq", "torch.ne"})
_MAX_DEPTH = 12


@dataclass(frozen=True)
class MaskAxes:
    samples: str  # PER_SAMPLE, LIKELY, SHARED, UNKNOWN or NEUTRAL
    evidence: tuple[str, ...] = ()
    pair: tuple[str, int] | None = None  # (CAUSAL or SQUARE, line): a construction with query and key axes

    def step(self, sentence: str) -> MaskAxes:
        return replace(self, evidence=(sentence, *self.evidence))


_UNKNOWN = MaskAxes(UNKNOWN)


class MaskAxesReader:
    """Reads mask axes in one module; one instance per rule run."""

    def __init__(self, ctx: ModuleContext, shapes: ShapeReader | None = None):
        self.ctx = ctx
        self.shapes = shapes or ShapeReader(ctx)
        self._others: dict[str, MaskAxesReader] = {}  # readers of the other files whose callers are read

    def _reader(self, other: ModuleContext) -> MaskAxesReader:
        """The reader of another file of the run (a caller there passes the mask)."""
        if other.path not in self._others:
            self._others[other.path] = MaskAxesReader(other, ShapeReader(other, place_file(other)))
        return self._others[other.path]

    def read(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode, depth: int = 0) -> MaskAxes:
        """What `expr`, evaluated in `scope` at the statement `use`, shows about its axes."""
        ctx = self.ctx
        if depth > _MAX_DEPTH:
            return _UNKNOWN
        ctx.limits.check()
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString)):
            return MaskAxes(NEUTRAL)
        if isinstance(expr, cst.Name):
            if expr.value in ("True", "False", "None") and not ctx.bindings(expr.value, scope):
                return MaskAxes(NEUTRAL)
            return self._name(expr.value, scope, use, depth)
        if isinstance(expr, cst.Attribute):
            bindings = ctx.attribute_bindings(expr, scope)
            if bindings is not None and len(bindings) == 1 and bindings[0].value is not None:
                b = bindings[0]
                found = self.read(b.value, b.scope, b.node, depth + 1)
                if found.samples != UNKNOWN or found.pair is not None:
                    return found.step(f"`self.{expr.attr.value}` is set at line {ctx.line(b.node)}")
            return _by_name(expr.attr.value)
        if isinstance(expr, cst.Subscript):
            return self.read(expr.value, scope, use, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self.read(expr.expression, scope, use, depth + 1)
        if isinstance(expr, cst.Comparison):
            parts = [expr.left, *(c.comparator for c in expr.comparisons)]
            return combine([self.read(p, scope, use, depth + 1) for p in parts])
        if isinstance(expr, cst.BinaryOperation):
            parts = [self.read(p, scope, use, depth + 1) for p in (expr.left, expr.right)]
            if isinstance(expr.operator, cst.MatrixMultiply):
                return self._matmul(ctx.code(expr), expr, parts)
            return combine(parts)
        if isinstance(expr, cst.IfExp):
            return combine([self.read(p, scope, use, depth + 1) for p in (expr.body, expr.orelse)])
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, use, depth)
        return _UNKNOWN

    def _call(self, call: cst.Call, scope: Scope, use, depth) -> MaskAxes:
        ctx = self.ctx
        name = ctx.qualified_name(call.func, scope)
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if name == torchapi.GENERATE_SQUARE_SUBSEQUENT_MASK or method == "generate_square_subsequent_mask":
            return self._pair(MaskAxes(SHARED), CAUSAL, call)
        if name in SIZE_FACTORIES or name == FULL or method in NEW_FACTORIES:
            return self._factory(call, positional, scope)
        if name in MATMUL or method in ("matmul", "bmm"):
            operands = positional if name in MATMUL else [call.func.value, *positional]
            if name == "torch.einsum":
                operands = operands[1:]
            return self._matmul(ctx.code(call), call, [self.read(o, scope, use, depth + 1) for o in operands])
        if name in _ELEMENTWISE:
            found = combine([self.read(p, scope, use, depth + 1) for p in positional])
            return self._pair(found, CAUSAL, call) if name in ("torch.triu", "torch.tril") else found
        if name in ("torch.cat", "torch.stack") and positional and isinstance(positional[0], (cst.List, cst.Tuple)):
            return combine([self.read(e.value, scope, use, depth + 1) for e in positional[0].elements])
        if method in _SAME_SAMPLES:
            parts = [self.read(call.func.value, scope, use, depth + 1)]
            if method in _BINARY and positional:
                parts.append(self.read(positional[0], scope, use, depth + 1))
            found = combine(parts)
            return self._pair(found, CAUSAL, call) if method in ("triu", "tril") else found
        function = project_function(ctx, call, scope)
        if function is not None:
            values = returned(function)
            if len(values) == 1:
                return self.read(values[0], function, values[0], depth + 1)
        return _UNKNOWN

    def _pair(self, found: MaskAxes, what: str, node: cst.CSTNode) -> MaskAxes:
        """The construction at `node` shows query and key axes; it is the evidence, after what shows a batch axis
        (a square factory under `triu` says no more than the `triu`)."""
        line = self.ctx.line(node)
        kept = found.evidence if found.samples in (PER_SAMPLE, LIKELY) else ()
        return replace(found, pair=(what, line),
                       evidence=(*kept, f"`{shorten(self.ctx.code(node))}` at line {line} is {what}"))

    def _matmul(self, text: str, node, parts: list[MaskAxes]) -> MaskAxes:
        """A batched product of per-sample masks is per sample; of masks the code does not show, only likely."""
        found = combine(parts)
        if found.samples in (SHARED, NEUTRAL):
            return found
        step = (f"`{shorten(text)}` multiplies batched (N, L, 1) x (N, 1, S) tensors into one mask per sample "
                f"(line {self.ctx.line(node)})")
        return MaskAxes(PER_SAMPLE if found.samples == PER_SAMPLE else LIKELY, (*found.evidence, step), found.pair)

    def _factory(self, call: cst.Call, positional, scope) -> MaskAxes:
        """`torch.ones(L, L)` is a square pair; any 2-D factory is one (L, S) mask for all samples; a 3-D one
        whose first size is the batch holds one slice per sample."""
        ctx = self.ctx
        if (isinstance(call.func, cst.Attribute) and call.func.attr.value == "new_full") or \
                ctx.qualified_name(call.func, scope) == FULL:
            sizes = positional[:1]
        else:
            sizes = positional
        if len(sizes) == 1 and isinstance(sizes[0], (cst.List, cst.Tuple)):
            sizes = [e.value for e in sizes[0].elements]
        if any(a.star for a in call.args) or not sizes:
            return _UNKNOWN
        text = shorten(ctx.code(call))
        if len(sizes) == 2:
            if ctx.code(sizes[0]) == ctx.code(sizes[1]):
                return self._pair(MaskAxes(SHARED), SQUARE, call)
            return MaskAxes(SHARED, (f"`{text}` is a 2-D (L, S) mask (line {ctx.line(call)})",))
        if len(sizes) >= 3:
            axis = self.shapes.size_axis(sizes[0], scope, call)
            if axis.role is Role.BATCH and axis.evidence is not None:
                samples = PER_SAMPLE if axis.evidence.strength is Strength.ESTABLISHED else LIKELY
                return MaskAxes(samples, (f"`{text}` at line {ctx.line(call)} has one (L, S) slice per sample: its "
                                          f"first dimension is the batch", shorten(axis.evidence.sentence(), 150)))
        return _UNKNOWN

    # ---- names ----
    def _name(self, name: str, scope: Scope, use: cst.CSTNode, depth: int) -> MaskAxes:
        ctx = self.ctx
        binding = dataflow.reaching_one(ctx, ctx.bindings(name, scope), use)
        found = _UNKNOWN
        if binding is not None and binding.kind == "param":
            found = self._parameter(name, binding, depth)
        elif binding is not None and binding.value is not None and binding.kind in ("assign", "unpack"):
            value = _assigned(binding)
            if value is not None:
                found = self.read(value, binding.scope, binding.node, depth + 1)
                if found.samples in (PER_SAMPLE, LIKELY) or found.pair is not None:
                    return _named_step(found, name, shorten(ctx.code(value)), ctx.line(binding.node))
        if found.samples in (UNKNOWN, LIKELY):
            axis = self._batch_axis(name, scope, use)
            if axis.samples == PER_SAMPLE or found.samples == UNKNOWN and axis.samples != UNKNOWN:
                found = _samples_from(axis, found)
        if found.samples == UNKNOWN:
            by_name = _by_name(name)
            if by_name.samples != UNKNOWN:
                return _samples_from(by_name, found)
        return found

    def _batch_axis(self, name: str, scope: Scope, use: cst.CSTNode) -> MaskAxes:
        """Per sample when the tensor's first axis holds the batch, as the shape reader establishes it."""
        traced = self.shapes.of(cst.Name(name), scope, use)
        first = traced.shape[0] if traced is not None and traced.shape else None
        if first is None or first.role is not Role.BATCH or first.evidence is None:
            return _UNKNOWN
        samples = PER_SAMPLE if first.evidence.strength is Strength.ESTABLISHED else LIKELY
        return MaskAxes(samples, (shorten(f"`{name}` has the batch on its first axis: {first.evidence.sentence()}",
                                          150), *traced.sentences()))

    def _parameter(self, name: str, binding: Binding, depth: int) -> MaskAxes:
        """A parameter holds what the module's callers in the project pass: per sample if one passes a per-sample
        mask and none passes a shared one; callers that disagree give unknown."""
        parts = []
        for caller in project_callers(self.ctx, binding.scope):
            site = caller.site
            argument = site.arguments.get(name)
            if argument is None:
                argument = binding.value if site.arguments.absent(name) else None
            if argument is None:
                return _UNKNOWN
            reader = self if caller.ctx is self.ctx else self._reader(caller.ctx)
            found = reader.read(argument, site.scope, site.call, depth + 1)
            parts.append(found.step(f"`{name}` receives `{shorten(caller.ctx.code(argument))}` from the call at "
                                    f"{caller.place}"))
        if not parts:
            return _UNKNOWN
        verdicts = {p.samples for p in parts}
        pairs = {p.pair[0] if p.pair else None for p in parts}
        if len(pairs) > 1:
            parts = [replace(p, pair=None) for p in parts]  # only some callers pass an (L, L) construction
        if verdicts & {PER_SAMPLE, LIKELY} and not verdicts <= {PER_SAMPLE, LIKELY}:
            return _UNKNOWN
        return combine(parts)


def combine(parts: list[MaskAxes]) -> MaskAxes:
    """Per-sample if any part is (established before likely); shared if every part is shared or a constant;
    unknown otherwise. The pair of the first part that shows one."""
    pair = next((p.pair for p in parts if p.pair is not None), None)
    for samples in (PER_SAMPLE, LIKELY):
        per = [p for p in parts if p.samples == samples]
        if per:
            return replace(per[0], pair=pair)
    verdicts = {p.samples for p in parts}
    if verdicts <= {SHARED, NEUTRAL}:
        if SHARED in verdicts:
            return MaskAxes(SHARED, tuple(e for p in parts if p.samples == SHARED for e in p.evidence), pair)
        return MaskAxes(NEUTRAL, (), pair)
    return MaskAxes(UNKNOWN, next((p.evidence for p in parts if p.pair is not None), ()), pair)


def _by_name(name: str) -> MaskAxes:
    if PER_SAMPLE_NAME.search(name):
        return MaskAxes(LIKELY, (f"`{name}` holds per-sample data by its name (padding, lengths or ids are one row "
                                 f"per sample)",))
    return _UNKNOWN


def _samples_from(other: MaskAxes, found: MaskAxes) -> MaskAxes:
    """What `other` says of the batch axis, with the pair `found` shows (and the evidence of both)."""
    if found.pair is None:
        return other
    return MaskAxes(other.samples, other.evidence + found.evidence, found.pair)


def _named_step(found: MaskAxes, name: str, code: str, line: int) -> MaskAxes:
    """`m = <value>` at the line, merged with the value's own first sentence when that starts with it."""
    if found.evidence and found.evidence[0].startswith(f"`{code}` at line"):
        return replace(found, evidence=(f"`{name}` = {found.evidence[0]}", *found.evidence[1:]))
    return found.step(f"`{name} = {code}` at line {line}")


def _assigned(binding: Binding) -> cst.BaseExpression | None:
    """The value a name receives: the whole right-hand side, or its element for `a, b = x, y`."""
    if binding.kind != "unpack":
        return binding.value
    value = binding.value
    if not isinstance(value, (cst.Tuple, cst.List)) or binding.index is None or binding.index >= len(value.elements):
        return None
    return value.elements[binding.index].value
