"""The shape reader: the axis roles of the tensor an expression evaluates to, with the chain of code behind them.

It follows a value back through assignments, shape unpacking, `self.x`, parameters (what this module's callers
pass, what the docstring or annotation documents) and shape operations, applying mhalint.analysis.axes' transfer
functions on the way out. Sources of roles: a shape unpacking of the tensor (`B, T, C = x.shape`), producers with
a known layout (`pad_sequence`, `nn.Embedding` of known ids, einops patterns), sizes passed to `view`/`reshape`/
`expand` (their roles come from where they were bound), documented shapes. Anything else is unknown.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import agreement, axes, containers, dataflow, documented, flags, loaders, singletons, uses
from mhalint.analysis.axes import OPEN, Axis, Evidence, Role, Shape, Strength
from mhalint.analysis.calls import (
    arguments_for,
    call_target,
    callers,
    factories,
    instance,
    possible_callers,
    project_forward,
    project_function,
    returned,
    running_calls,
)
from mhalint.analysis.names import role_of_size_name, roles_of_names
from mhalint.analysis.sites import handed_calls
from mhalint.analysis.stops import Shown, Stop
from mhalint.analysis.values import resolve
from mhalint.analysis.vocabulary import (
    KEEPS_AXES,
    KEEPS_AXES_MODULES,
    LEGACY_CONSTRUCTORS,
    NEW_FACTORIES,
    REORDER,
    SIZE_FACTORIES,
)
from mhalint.context import Binding, ModuleContext, Scope
from mhalint.finding import shorten
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal

# Answers kept per question met inside others, each for what it read of the calls being followed (a helper's
# body asked about once per call that reaches it)
_KEPT_PER_QUESTION = 4
_MAX_DEPTH = 14  # operations and calls followed; a name's binding and an argument bound to a parameter are free

FIRST_ARG_KEEPS_AXES = {
    "torch.zeros_like", "torch.ones_like", "torch.empty_like", "torch.randn_like", "torch.relu", "torch.tanh",
    "torch.sigmoid", "torch.nn.functional.dropout", "torch.nn.functional.layer_norm", "torch.nn.functional.relu",
    "torch.nn.functional.gelu", "torch.nn.functional.silu", "torch.nn.functional.normalize", "torch.isnan",
    "torch.isinf", "torch.isfinite", "torch.logical_not", "torch.abs", "torch.exp", "torch.nn.Parameter",
    "torch.nn.parameter.Parameter",
}
# torch's function forms of the shape methods: `torch.transpose(x, 0, 1)` is `x.transpose(0, 1)`.
FUNCTION_FORMS = {f"torch.{method}": method for method in (
    "transpose", "permute", "movedim", "swapaxes", "swapdims", "t", "flatten", "unsqueeze", "squeeze", "reshape")}
# Convolutions give (N, C, *spatial), the number of spatial axes their name says.
_CONVOLUTIONS = {f"torch.nn.{kind}{n}d": n for kind in ("Conv", "ConvTranspose") for n in (1, 2, 3)}
_ATTENTION_MODULES = {torchapi.MHA, torchapi.ENCODER_LAYER, torchapi.DECODER_LAYER, torchapi.ENCODER,
                      torchapi.DECODER, torchapi.TRANSFORMER}
# The (N, S) key padding masks torch checks against the batch and the keys.
_PADDING_MASK_PARAMETERS = {
    torchapi.MHA: ("key_padding_mask",), torchapi.MHA_FORWARD_FN: ("key_padding_mask",),
    torchapi.ENCODER_LAYER: ("src_key_padding_mask",), torchapi.ENCODER: ("src_key_padding_mask",),
    torchapi.DECODER_LAYER: ("tgt_key_padding_mask", "memory_key_padding_mask"),
    torchapi.DECODER: ("tgt_key_padding_mask", "memory_key_padding_mask"),
    torchapi.TRANSFORMER: ("src_key_padding_mask", "tgt_key_padding_mask", "memory_key_padding_mask"),
}
_PASS_THROUGH_ITERATORS = {"tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "iter"}  # yield what they get
_CONCAT = {"torch.cat", "torch.concat", "torch.concatenate"}
_PAD_SEQUENCE = "torch.nn.utils.rnn.pad_sequence"
_EMBEDDING = "torch.nn.Embedding"
_REARRANGE = {"einops.rearrange", "einops.repeat"}
_SPLITS = ("split", "chunk", "tensor_split")
RECURRENT = {"torch.nn.LSTM", "torch.nn.GRU", "torch.nn.RNN"}


@dataclass(frozen=True)
class Traced:
    """A shape and the operations (code, line) it went through after its roles were known, outermost last."""

    shape: Shape
    steps: tuple[tuple[str, str, str], ...] = ()  # (code, where: `line 12` or `train.py:12`, what it does or "")

    def then(self, shape: Shape | None, node: cst.CSTNode, reader: ShapeReader, does: str = "") -> Traced | None:
        if shape is None:
            return None
        return Traced(shape, self.steps + ((reader.ctx.code(node), axes.place(reader.ctx.line(node), reader.file),
                                            does),))

    def sentences(self) -> tuple[str, ...]:
        return tuple(f"then `{code}` at {where}" + (f": {does}" if does else "") for code, where, does in self.steps)


def size_arguments(call: cst.Call) -> list[cst.BaseExpression] | None:
    """The sizes a `view`/`reshape`/`repeat`/`expand`/`tile` call gives, as separate arguments or one tuple or list;
    None where a star hides some of them."""
    if len(call.args) == 1 and not call.args[0].star and isinstance(call.args[0].value, cst.Tuple | cst.List):
        elements = call.args[0].value.elements
        return None if any(isinstance(e, cst.StarredElement) for e in elements) else [e.value for e in elements]
    if any(arg.star or arg.keyword for arg in call.args):
        return None
    return [arg.value for arg in call.args]


class ShapeReader:
    def __init__(self, ctx: ModuleContext, file: str = ""):
        """`file`: how evidence names the file, when it is not the one being checked."""
        self.ctx = ctx
        self.file = file
        # (function, parameter, argument, caller scope) for the calls being followed into their returns
        self._env: list[tuple[Scope, str, cst.BaseExpression, Scope]] = []
        self._frames = flags.Frames()  # the same calls: (function, its arguments, caller scope)
        self._loops = dataflow.Loops()  # the bindings being followed, against cycles through loops
        self._stops: list[Stop] | None = None  # where the question being answered has stopped so far
        self._known: dict[int, Traced] = {}  # bindings (by id) whose roles their uses show, for a second trace
        self._failed: list[Binding] | None = None  # the bindings whose trace failed in the question being answered
        self._cuts = 0  # traces cut short at _MAX_DEPTH so far
        self._deepest = 0  # the deepest step the trace being answered has reached
        self._elsewhere = 0  # questions handed to a reader of another file so far (its steps are its own)
        self.uses = uses.UseReader(self)  # the module, not the name: uses.py reads this one's at call time

    def of(self, expr: cst.BaseExpression | None, scope: Scope, use: cst.CSTNode, depth: int = 0) -> Traced | None:
        """The roles of `expr`'s axes at `use`. A question asked from outside (depth 0, nothing being followed)
        is answered once per module: several rules ask it of the same arguments."""
        self.ctx.limits.check()
        if depth or self._env or self._loops.active or expr is None or self._known:  # (a second trace: not memoised)
            return self._tracked(expr, scope, use, depth)
        memo = self.ctx.memo.setdefault("shapes", {})
        key = (id(expr), id(scope), id(use), self.file)
        if key not in memo:
            outer, self._stops = self._stops, []
            try:
                traced = self._question(expr, scope, use)
            finally:
                stops, self._stops = self._stops, outer
            memo[key] = (traced, tuple(stops), expr, use)  # the nodes kept: their ids stay theirs
        traced, stops = memo[key][:2]
        if self._stops is not None:
            self._stops.extend(stops)
        return traced

    def _question(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> Traced | None:
        """The trace; where it failed at values whose uses show their roles (`bs = x.shape[1]` after the call),
        the trace again with those roles. Uses are read only for the bindings of a failed trace, once each."""
        outer, self._failed = self._failed, []
        try:
            traced = self._tracked(expr, scope, use, 0)
            failed = self._failed
        finally:
            self._failed = outer
        if outer is not None:
            outer.extend(failed)  # a question asked inside another: its failures are the outer one's too
        if traced is not None:
            return traced
        memo = self.ctx.memo.setdefault("used", {})
        known = {}
        for binding in failed:
            if (binding, self.file) not in memo:
                memo[binding, self.file] = self.uses.of_binding(binding)
            if memo[binding, self.file] is not None:
                known[id(binding)] = memo[binding, self.file]
        if not known:
            return None
        saved, self._known = self._known, {**self._known, **known}
        try:
            del self._stops[:]
            return self._tracked(expr, scope, use, 0)
        finally:
            self._known = saved

    def stopped(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> tuple[Stop, ...]:
        """Where the trace of `expr` at `use` ended, when its roles are unknown: the places a warning names."""
        self.of(expr, scope, use)
        found = self.ctx.memo.get("shapes", {}).get((id(expr), id(scope), id(use), self.file))
        return found[1] if found is not None else ()

    def _tracked(self, expr, scope: Scope, use: cst.CSTNode, depth: int) -> Traced | None:
        """`_of`, keeping the stops recorded on the way only when it fails; a failure that recorded none stops at
        `expr` itself (not at a name: its bindings say where they stop, and one being followed already, a loop's
        `x = f(x)`, is no stop). Memoised where the answer is the reader's own (`_inner_key`), together with what
        it read of the calls being followed (`_followed`) and the bindings it read: reused where the calls read
        the same and none of those bindings is being read (reading it again would meet it)."""
        key = self._inner_key(expr, scope, use)
        if key is not None and self._failed is None:  # nothing records where it stops: record it, to keep it
            self._failed, stops = [], self._stops
            self._stops = [] if stops is None else stops
            try:
                return self._tracked(expr, scope, use, depth)
            finally:
                self._failed, self._stops = None, stops
        if key is not None:
            loops = self._loops
            for kept in self.ctx.memo.get("inner shapes", {}).get(key, ()):
                if depth + kept[3] <= _MAX_DEPTH and self._followed(kept[4]) == kept[5] \
                        and loops.active.keys().isdisjoint(kept[6]):
                    self._stops.extend(kept[1])
                    self._failed.extend(kept[2])
                    self._deepest = max(self._deepest, depth + kept[3])
                    if self._frames.asked is not None:
                        self._frames.asked.update(kept[4])
                    if loops.read is not None:
                        loops.read.update(kept[6])
                    return kept[0]
        before = len(self._stops) if self._stops is not None else 0
        failed, marks, outer = len(self._failed or ()), self._marks(), self._deepest
        asked, read = self._frames.asked, self._loops.read
        self._deepest, self._frames.asked, self._loops.read = depth, set(), set()
        try:
            traced = self._of(expr, scope, use, depth)
            if self._stops is not None:
                if traced is not None:
                    del self._stops[before:]
                elif len(self._stops) == before and expr is not None and not isinstance(expr, cst.Name):
                    detail = f"mhalint follows a value through {_MAX_DEPTH} steps" if depth > _MAX_DEPTH else ""
                    self._stops.append(Stop("opaque", self, expr, detail=detail))
            if key is not None and self._marks() == marks:
                looked_up = tuple(self._frames.asked)
                kept = self.ctx.memo.setdefault("inner shapes", {}).setdefault(key, [])
                kept[:0] = [(traced, tuple(self._stops[before:]), tuple(self._failed[failed:]),
                             self._deepest - depth, looked_up, self._followed(looked_up), frozenset(self._loops.read),
                             expr, use)]
                del kept[_KEPT_PER_QUESTION:]
        finally:
            self._deepest = max(outer, self._deepest)
            if asked is not None:
                asked.update(self._frames.asked)
            if read is not None:
                read.update(self._loops.read)
            self._frames.asked, self._loops.read = asked, read
        return traced

    def _inner_key(self, expr, scope: Scope, use: cst.CSTNode) -> tuple | None:
        """The memo key of a question met inside another whose answer depends on nothing but the calls being
        followed (which `_followed` tells apart): no roles assumed from uses (`_known`), its stops and failed
        bindings recordable (to be replayed; `_tracked` records them where nothing does). Whether it met a
        binding being read in a loop, an analysis's answer still being computed, or the step limit, is known
        only afterwards (`_marks`, which also count the questions handed to a reader of another file, whose
        steps and cycles this reader does not see); the step limit also needs the steps it took (`_deepest`)."""
        if self._known or (self._stops is None and self._failed is not None):
            return None
        return id(expr), id(scope), id(use), self.file

    def _followed(self, functions: tuple[Scope, ...]) -> tuple:
        """What the calls being followed say of `functions` (the ones an answer looked up): the arguments each
        call into them binds, innermost last; nothing for a function no followed call enters. The nodes and scopes
        themselves, which compare by identity and stay alive with the answer kept."""
        return tuple((tuple((parameter, argument, caller) for entered, parameter, argument, caller in self._env
                            if entered is function),
                      tuple((tuple(arguments.by_name.items()), arguments.opaque, caller)
                            for entered, arguments, caller in self._frames if entered is function))
                     for function in functions)

    def _marks(self) -> tuple[int, int, int, int]:
        return self._cuts, self._loops.met_active, self.ctx.pending_reads, self._elsewhere

    def _too_deep(self, depth: int) -> bool:
        """Past the steps a trace follows (counted: an answer cut short is not memoised)."""
        self._deepest = max(self._deepest, depth)
        if depth > _MAX_DEPTH:
            self._cuts += 1
            return True
        return False

    def _stop(self, kind: str, node=None, **details) -> None:
        if self._stops is not None:
            self._stops.append(Stop(kind, self, node, **details))

    def conflict(self, first: Traced, second: Traced) -> None:
        """Two pieces of evidence about one value that show different layouts."""
        self._stop("conflict", shown=(_shown(first), _shown(second)))

    def _agreed(self, found: list[Traced | None]) -> Traced | None:
        """One of several possible values, if they all have the same roles; else unknown (a conflict, when two
        of them show different layouts)."""
        agreed = _agreed(found)
        if agreed is None:
            kinds = {}
            for traced in found:
                if traced is not None and _kind(traced) is not None:
                    kinds.setdefault(_kind(traced), traced)
            if len(kinds) > 1:
                self.conflict(*list(kinds.values())[:2])
        return agreed

    def _reconciled(self, shown: Traced | None, documented: Traced | None) -> Traced | None:
        """What the code shows and what a comment or docstring documents about one value: either, if the other
        says nothing or agrees; unknown when they show different layouts."""
        if shown is not None and documented is not None and len({_kind(shown), _kind(documented)} - {None}) > 1:
            self.conflict(documented, shown)
            return None
        return shown or documented

    def _of(self, expr: cst.BaseExpression | None, scope: Scope, use: cst.CSTNode, depth: int) -> Traced | None:
        if expr is None or self._too_deep(depth):
            return None
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, use, depth)
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.MatrixMultiply):
            return self._matmul(expr, scope, use, depth)
        if isinstance(expr, cst.BinaryOperation):  # broadcasting keeps the axes of the larger operand
            spread = singletons.spread(self, expr, scope, use, depth)
            if spread is not None:
                return spread
            return self.of(expr.left, scope, use, depth + 1) or self.of(expr.right, scope, use, depth + 1)
        if isinstance(expr, cst.IfExp):  # both branches must agree
            return self._agreed([self.of(expr.body, scope, use, depth + 1),
                                 self.of(expr.orelse, scope, use, depth + 1)])
        if isinstance(expr, cst.Subscript):
            index = _literal_index(expr)
            if index is not None and isinstance(expr.value, cst.Call):
                return self._element(expr.value, index, scope, use, depth)
            if isinstance(expr.value, cst.Name) and _literal_key(expr):
                batch = dataflow.reaching_one(self.ctx, self.ctx.bindings(expr.value.value, scope), use)
                collated = self._collated(batch, index, depth)
                if collated is not None:  # batch["input_ids"], batch[0]: a leaf of the collated batch
                    return collated
            if index is not None and isinstance(expr.value, cst.Name):
                return self._picked(expr, scope, use, depth) or self._stored(expr, scope, use, depth)
            if isinstance(expr.value, cst.Name) and _literal_key(expr):
                return self._stored(expr, scope, use, depth)
            if _picks(expr) is not None:
                return self._indexed(expr, _picks(expr), scope, use, depth)
            return self.of(expr.value, scope, use, depth + 1) if _keeps_axes(expr) else None
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("mT", "T"):
            inner = self.of(expr.value, scope, use, depth + 1)
            return inner.then(axes.transpose(inner.shape, -2, -1), expr, self) if inner else None
        if isinstance(expr, cst.Attribute) and expr.attr.value == "weight":
            return self._embedding_table(expr, scope)
        if isinstance(expr, cst.Name):
            return self._name(expr.value, scope, use, depth)
        bindings = self.ctx.attribute_bindings(expr, scope)
        if bindings is not None and len(bindings) == 1 and bindings[0].value is not None:
            return self.of(bindings[0].value, bindings[0].scope, bindings[0].node, depth + 1)
        return None

    def _matmul(self, expr: cst.BinaryOperation, scope: Scope, use: cst.CSTNode, depth: int) -> Traced | None:
        """`scores @ v`: the left operand's rows, the right one's columns (`q @ k.transpose(-2, -1)` is (..., L, S));
        columns of unknown roles where the right operand's are unknown (`x @ self.weight`)."""
        left = self.of(expr.left, scope, use, depth + 1)
        if left is None:
            return None
        right = self.of(expr.right, scope, use, depth + 1) or Traced(axes.unknown(2))
        return Traced(left.shape, left.steps + right.steps).then(axes.matmul(left.shape, right.shape), expr, self)

    def _picked(self, expr: cst.Subscript, scope: Scope, use: cst.CSTNode, depth: int) -> Traced | None:
        """`qkv[0]` of a tensor a shape operation made (`qkv = x.reshape(...).permute(2, 0, 3, 1, 4)`): its first
        axis dropped. Other values indexed this way may be tuples (a module's `(output, weights)`): unknown."""
        binding = dataflow.reaching_one(self.ctx, self.ctx.bindings(expr.value.value, scope), use)
        value = binding.value if binding is not None and binding.kind == "assign" else None
        if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
                and value.func.attr.value in REORDER | {"view", "reshape"}):
            return None
        inner = self.of(expr.value, scope, use, depth + 1)
        if inner is None or not inner.shape or OPEN in inner.shape:
            return None
        return inner.then(axes.squeeze(inner.shape, 0), expr, self)

    def _indexed(self, expr: cst.Subscript, picks: list[int], scope: Scope, use: cst.CSTNode, depth: int
                 ) -> Traced | None:
        """`x[:, :, 0, :2]`: a tensor indexed at several axes at once keeps its sliced axes and loses those an
        integer picks."""
        inner = self.of(expr.value, scope, use, depth + 1)
        if inner is None:
            return None
        body = inner.shape[:-1] if inner.shape and inner.shape[-1] is OPEN else inner.shape
        if len(expr.slice) > len(body) and OPEN not in inner.shape:
            return None
        if any(position >= len(body) for position in picks):
            return None
        shape = inner.shape
        for position in sorted(picks, reverse=True):
            shape = axes.squeeze(shape, position)
        return inner.then(shape, expr, self)

    def _stored(self, expr: cst.Subscript, scope: Scope, use: cst.CSTNode, depth: int) -> Traced | None:
        """`outs[-1]` of a list the code appends tensors to, `feats["x"]` of a dict it stores them in: the roles
        every element it may be agrees on (a list's positions are not followed; a dict's string keys are)."""
        key = containers.subscript_key(expr)[1]
        parts = self._parts(expr.value, scope, use, depth, key if isinstance(key, str) else None)
        return self._agreed(parts) if parts else None

    def _parts(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode, depth: int,
               key: str | None = None) -> list[Traced | None] | None:
        """The roles of each tensor a list, tuple or dict holds (only those under `key`, when given): a literal,
        or a name bound to one and then appended to, extended, `+=`'d or stored into (`outs.append(layer(x))`,
        `feats["x"] = x`); None when a binding is not such a container, or an addition cannot be read."""
        if isinstance(expr, cst.List | cst.Tuple | cst.Dict):
            entries = _entries(expr, key)
            return [self.of(value, scope, use, depth + 1) for value in entries] if entries is not None else None
        if not isinstance(expr, cst.Name) or self._too_deep(depth):
            return None
        found: list[Traced | None] = []
        for binding in _built(self.ctx, self.ctx.bindings(expr.value, scope), use) or [None]:
            entries = _entries(binding.value, key) if binding is not None and binding.kind == "assign" else None
            if entries is None:
                return None
            found += [self.of(value, binding.scope, binding.node, depth + 1) for value in entries]
        for added in containers.additions(self.ctx, expr, scope):
            if key is not None and added.key != key:
                if added.key is None:
                    return None  # `d.update(other)`: what it adds under `key` is not known
                continue
            if added.many:
                more = self._parts(added.value, added.scope, added.value, depth + 1)
                if more is None:
                    return None
                found += more
            else:
                found.append(self.of(added.value, added.scope, added.value, depth + 1))
        return found

    def evidence(self, code: str, line: int, reason: str, strength: Strength) -> Evidence:
        return Evidence(code, line, reason, strength, self.file)

    # ---- names ----
    def _name(self, name: str, scope: Scope, use: cst.CSTNode, depth: int) -> Traced | None:
        """Every binding that may reach the read must give the same roles. A binding already being followed (a
        loop's `x = layer(x)` reaching itself) adds nothing for now: the other bindings decide, and the loop's
        binding is checked against them (`dataflow.Loops`)."""
        reached = [binding for binding in dataflow.reaching(self.ctx, self.ctx.bindings(name, scope), use)
                   if binding.kind == "param" or flags.live(self.ctx, binding.node, binding.scope, self._frames)]
        # a parameter the call being followed binds is a new question, not a cycle, even where the same parameter
        # is being asked about for all its callers (a block's input, met again through `x = block(x)` in a stack)
        bound = [binding for binding in reached if self._passed(name, binding) is not None]
        rest = [binding for binding in reached if binding not in bound]
        return self._agreed([self._stopped_binding(name, scope, binding, use, depth) for binding in bound]
                            + self._loops.follow(rest, lambda binding: self._stopped_binding(name, scope, binding,
                                                                                             use, depth),
                                                 self._same_round, self._mark))

    def _same_round(self, first: Traced, again: Traced) -> bool:
        """Does a loop's value read again, with the first reading's value assumed where it met itself, have the
        same roles? Two layouts are a conflict the warning names (a body that transposes each round)."""
        if axes.roles(first.shape) == axes.roles(again.shape):
            return True
        if None not in (_kind(first), _kind(again)) and _kind(first) != _kind(again):
            self.conflict(first, again)
        return False

    def _mark(self):
        """What takes back the stops and failed bindings recorded from now on."""
        notes = [(kept, len(kept)) for kept in (self._stops, self._failed) if kept is not None]

        def undo() -> None:
            for kept, before in notes:
                del kept[before:]
        return undo

    def _passed(self, name: str, binding: Binding) -> tuple[cst.BaseExpression, Scope] | None:
        """The argument the call being followed into a project function passes for this parameter."""
        if binding.kind != "param":
            return None
        if self._frames.asked is not None:
            self._frames.asked.add(binding.scope)
        for function, parameter, argument, caller in reversed(self._env):
            if function is binding.scope and parameter == name:
                return argument, caller
        return None

    def _stopped_binding(self, name: str, scope: Scope, binding: Binding, use: cst.CSTNode, depth: int
                         ) -> Traced | None:
        """`_binding`, or what the uses of the value showed (`_question`); a failed binding is noted for those
        uses, and a stop recorded at its value when its trace recorded none."""
        if id(binding) in self._known:
            return self._known[id(binding)]
        before = len(self._stops) if self._stops is not None else 0
        traced = self._binding(name, scope, binding, use, depth)
        conflict = self._stops is not None and any(stop.kind == "conflict" for stop in self._stops[before:])
        if traced is None and self._failed is not None and not conflict:  # uses cannot settle a conflict
            self._failed.append(binding)
        if traced is None and self._stops is not None and len(self._stops) == before and binding.value is not None:
            self._stop("opaque", binding.value)
        return traced

    def entering(self, query: cst.BaseExpression, call: cst.Call, scope: Scope, output: bool,
                 element: int | None = None) -> tuple[Traced | None, tuple[Stop, ...]]:
        """The roles of the `query` a module call takes, and where their trace stopped when unknown. With `output`
        (the module gives back its query's axes: element `element` of its tuple, or all of it), the uses of what
        the call gives back count too; when they show another layout than the query's trace, it is unknown."""
        memo = self.ctx.memo.setdefault("entering", {})
        key = (id(query), id(call), output, element, self.file)
        if key not in memo:
            traced, stops = self.of(query, scope, call), self.stopped(query, scope, call)
            if traced is None:
                agreed = agreement.batch_axis(self, query, call, scope)
                traced = Traced(agreed) if agreed is not None else None
            self._stops = []
            try:
                back = self.uses.of_output(call, scope, element) if output else None
                if traced is not None and back is not None and len({_kind(traced), _kind(back)} - {None}) > 1:
                    self.conflict(traced, back)
                    traced = back = None
                elif (traced is None or _kind(traced) is None) and back is None and output \
                        and all(stop.kind != "conflict" for stop in stops):
                    shared = self._sharing_batch(query, call, scope)
                    traced = shared if shared is not None and _fits(traced, shared) else traced
                if traced is not None and _kind(traced) is None and back is not None and _kind(back) is not None:
                    traced = None  # the output's uses show what the query's roles leave open
                found = (traced or back, tuple(self._stops) or (() if traced or back else stops))
            finally:
                self._stops = None
            memo[key] = (*found, query, call)
        return memo[key][:2]

    def _sharing_batch(self, query: cst.BaseExpression, call: cst.Call, scope: Scope) -> Traced | None:
        """The layout of an argument that must have the batch where the query has it (the key and value of
        MultiheadAttention, a decoder's memory): torch raises when they differ. All that show one must agree."""
        target = call_target(self.ctx, call, scope)
        names = torchapi.SHARES_BATCH.get(target.api, ()) if target is not None else ()
        code = self.ctx.code(query)
        found, undo = [], self._mark()
        for name in names:
            partner = target.arguments.get(name)
            traced = self.of(partner, scope, call) if partner is not None and self.ctx.code(partner) != code \
                else None
            if traced is not None and _kind(traced) is not None:
                does = f"the {name}, whose batch axis the query `{shorten(code, 40)}` shares (torch raises otherwise)"
                found.append(Traced(traced.shape, traced.steps + ((self.ctx.code(partner), axes.place(
                    self.ctx.line(call), self.file), does),)))
        if found and len({_kind(one) for one in found}) == 1:
            return found[0]
        undo()  # where the partners stopped is not what the query misses
        if target is not None and target.api == torchapi.MHA and not found:
            return singletons.length_one(self, query, target.arguments.get("key"), call, scope)
        return None

    def _binding(self, name: str, scope: Scope, binding: Binding, use: cst.CSTNode, depth: int) -> Traced | None:
        unpacked = self._unpacking(name, scope, binding, use)
        if unpacked is not None and binding.kind != "param":
            return unpacked
        collated = self._collated(binding, None, depth)
        if collated is None and binding.kind == "unpack" and binding.index is not None \
                and isinstance(binding.value, cst.Name):  # `for batch in loader: x, y = batch`
            batch = dataflow.reaching_one(self.ctx, self.ctx.bindings(binding.value.value, binding.scope),
                                          binding.node)
            collated = self._collated(batch, binding.index, depth)
        if collated is not None:
            return collated
        if binding.kind == "param":
            passed = self._passed(name, binding)
            if passed is not None:
                return self._reconciled(unpacked or self.of(passed[0], passed[1], passed[0], depth),
                                        self._documented(name, binding))
            documented = self._documented(name, binding)
            if unpacked is not None:
                return self._reconciled(unpacked, documented)
            passed, called = self._parameter(name, binding, depth)
            if passed is not None or documented is not None:
                return self._reconciled(passed, documented)
            return self._consumed(name, binding) or (None if called else self._parameter_stop(name, binding))
        if binding.kind == "unpack" and binding.index is not None and isinstance(binding.value, cst.Tuple):
            element = _tuple_element(binding.value, binding.index)  # `q, k, v = qkv[0], qkv[1], qkv[2]`
            return self.of(element, binding.scope, binding.node, depth + 1) if element is not None else None
        if binding.kind == "unpack" and binding.index is not None and _unbind_dim(binding.value) is not None:
            inner = self.of(binding.value.func.value, binding.scope, binding.node, depth + 1)
            dim = _unbind_dim(binding.value)
            return inner.then(axes.squeeze(inner.shape, dim), binding.value, self) \
                if inner is not None and OPEN not in inner.shape else None
        if binding.kind == "unpack" and binding.index is not None and isinstance(binding.value, cst.Call) \
                and isinstance(binding.node, cst.Assign):  # `out, weights = attn(q, k, v)`, `x, mask = f(...)`
            return self._with_comment(self._element(binding.value, binding.index, binding.scope, binding.node,
                                                    depth), self._commented(binding, named=True))
        if binding.kind in ("for", "unpack") and isinstance(binding.node, cst.For):
            return self._item_stop(name, binding)
        if binding.kind == "augmented" and isinstance(binding.node, cst.AugAssign) \
                and isinstance(binding.node.target, cst.Name):  # `x *= s`, `x += pos`: broadcast into x's axes
            return self._name(name, binding.scope, binding.node, depth + 1)
        if binding.kind != "assign" or binding.value is None:
            return None
        traced = self._with_comment(self.of(binding.value, binding.scope, binding.node, depth),
                                    self._commented(binding))
        return traced or self._consumed(name, binding)

    def _with_comment(self, traced: Traced | None, commented: Traced | None) -> Traced | None:
        """The code's roles, else its comment's; unknown where the two disagree (a conflict)."""
        if traced is not None and commented is not None and len({_kind(traced), _kind(commented)} - {None}) > 1:
            self.conflict(commented, traced)  # the code and its comment disagree
            return None
        return traced or commented

    def _parameter_stop(self, name: str, binding: Binding) -> None:
        """A parameter that nothing documents and no caller passes: a stop."""
        klass = binding.scope.enclosing_class
        owner = f"{klass.name}.{binding.scope.name}" if klass is not None else binding.scope.name
        self._stop("parameter", binding.node, name=name, owner=owner)
        return None

    def _item_stop(self, name: str, binding: Binding) -> None:
        """`for batch in loader:` whose items the reader cannot read (not a DataLoader built here with the default
        collate): a stop that says what the iterable is."""
        iterable = binding.node.iter
        detail = ""
        if isinstance(iterable, cst.Name):
            source = dataflow.reaching_one(self.ctx, self.ctx.bindings(iterable.value, binding.scope), binding.node)
            if source is not None and source.kind == "param":
                detail = f"a parameter of `{source.scope.name}`"
            elif source is not None and source.value is not None:
                detail = f"built by `{self.ctx.code(source.value)}` at line {self.ctx.line(source.node)}"
        self._stop("item", iterable, name=name, detail=detail)
        return None

    def padding_mask(self, arg: cst.Arg, call: cst.CSTNode, scope: Scope) -> Traced | None:
        """(N, S), when `arg` gives a torch attention call its key padding mask by keyword: torch checks both sizes
        against the batch and the keys (docs/torch-facts.md, `mha-kpm-transposed-N-not-L`). By position it may be
        an (L, L) mask misplaced there (MHA010's pitfall): unknown."""
        target = call_target(self.ctx, call, scope) if isinstance(call, cst.Call) and arg.keyword is not None \
            else None
        parameter = next((p for p, a in target.arguments.by_name.items() if a is arg), None) if target else None
        if parameter is None or parameter not in _PADDING_MASK_PARAMETERS.get(target.api, ()):
            return None
        reason = f"{torchapi.short_name(target.api)} checks that its {parameter} is (N, S)"
        evidence = self.evidence(self.ctx.code(arg), self.ctx.line(call), reason, Strength.ESTABLISHED)
        return Traced((Axis(Role.BATCH, evidence), Axis(Role.SEQUENCE, evidence)))

    def _consumed(self, name: str, binding: Binding) -> Traced | None:
        """A tensor this binding also gives torch by keyword as a key padding mask (itself, a slice that keeps its
        axes or a conversion) is (N, S): torch checks both sizes against the batch and the keys (docs/torch-facts.md,
        `mha-kpm-transposed-N-not-L`). Read once per binding: each use of a tensor handed to N calls asks it."""
        memo = self.ctx.memo.setdefault("consumed", {})
        if (binding, self.file) not in memo:
            memo[binding, self.file] = self._consumed_as_padding(binding)
        return memo[binding, self.file]

    def _consumed_as_padding(self, binding: Binding) -> Traced | None:
        for use in dataflow.uses(self.ctx, binding):
            carrier = _axes_carrier(self.ctx, use)
            arg = self.ctx.parent(carrier)
            found = self.padding_mask(arg, self.ctx.parent(arg), binding.scope) \
                if isinstance(arg, cst.Arg) and arg.value is carrier else None
            if found is not None:
                return found
        return None

    def _unpacking(self, name: str, scope: Scope, reaching: Binding, use: cst.CSTNode) -> Traced | None:
        """`B, T, C = x.shape` (or `x.size()`) names the axes of `x`, as long as `x` is not reassigned between the
        value that reaches the use and the unpacking, and the unpacking runs on the way to the use."""
        groups = _shape_unpackings(self.ctx, scope).get(name, [])
        if not groups:
            return None  # most names: no line asked, so no statement generated for its position
        since = 0 if reaching.kind == "param" else self.ctx.line(reaching.node)
        until = self.ctx.line(use)
        for lines, bindings in groups:
            for index in range(bisect.bisect_left(lines, since), len(lines)):
                if lines[index] > until:
                    break
                binding = bindings[index]
                target = binding.node.targets[0].target
                if any(isinstance(e, cst.StarredElement) for e in target.elements) \
                        or dataflow.apart(self.ctx, binding.node, use) \
                        or not flags.live(self.ctx, binding.node, binding.scope, self._frames) \
                        or (reaching.kind != "param" and dataflow.apart(self.ctx, binding.node, reaching.node)) \
                        or not self._reaches(binding, target, use):
                    continue  # a starred target, an unpacking in another branch of an `if` than the use or value,
                    # in a branch that cannot run here, or on a path that ends before the use (`return` in its block)
                shape = self.named_axes(_target_names(target), self._unpacked(binding), lines[index],
                                         f"unpacks the shape of `{name}`", Strength.ESTABLISHED)
                if shape is not None:
                    return Traced(shape)
        return None

    def _reaches(self, binding: Binding, target: cst.BaseExpression, use: cst.CSTNode) -> bool:
        """Does some name the unpacking binds still hold its value at `use` (`if ...: B, H, T, D = x.shape; return
        ...` reaches no read after the `if`)?"""
        state = dataflow.flow(self.ctx, binding.scope).at(self.ctx, use)
        return any(found.node is binding.node for name in _target_names(target) for found in state.get(name, ()))

    def _unpacked(self, binding: Binding) -> str:
        """The code of a shape unpacking, `B, T, C = x.shape`."""
        return f"{self.ctx.code(binding.node.targets[0].target)} = {self.ctx.code(binding.value)}"

    def named_axes(self, names: list[str], code: str, line: int, how: str, strength: Strength) -> Shape | None:
        roles = roles_of_names(names)
        if all(role is Role.UNKNOWN for role in roles):
            return None
        result = []
        for name, role in zip(names, roles):
            reason = f"{how}: axis `{name}` is the {role.value}"
            result.append(Axis(role, self.evidence(code, line, reason, strength), name) if role is not Role.UNKNOWN
                          else Axis(size=name or None))
        return tuple(result)

    def _commented(self, binding: Binding, named: bool = False) -> Traced | None:
        """A shape comment on the assignment's line, on the comment line just above it (`# [B, HxW, C]`), or on a
        comment line just below it that names the variable (`# x is batch, seq_len, channels`); one target of
        an unpacking (`named`) takes only a comment that names it (`# query_embed: batch x channel x npoint`)."""
        line, lines = self.ctx.line(binding.node), self.ctx.source_lines()
        below = [at for at in (line + 1, line + 2) if at <= len(lines) and lines[at - 1].strip().startswith("#")]
        below = below if below[:1] == [line + 1] else []
        for at in (line, line - 1, *below):
            comment = self.ctx.comment(at)
            if not comment or (at != line and not lines[at - 1].strip().startswith("#")):
                continue
            text = _about(binding.name, comment) if at > line or named else comment
            if text is None or (text is comment and self._about_another(comment, binding)):
                continue
            names = documented.shape_in_text(text)
            shape = self.named_axes(names, "# " + comment.strip().lstrip("# "), at, "the shape comment says so",
                                     Strength.ESTABLISHED) if names else None
            if shape is not None:
                return Traced(shape)
        return None

    def _about_another(self, comment: str, binding: Binding) -> bool:
        """Does the comment start by naming another variable of the scope (`# sizes: (B, N)` above `x = ...`)?"""
        named = re.match(r"^[#\s]*`?([A-Za-z_]\w*)`?\s*(?:is\b|:|=)", comment)
        return named is not None and named[1] != binding.name and bool(self.ctx.bindings(named[1], binding.scope))

    def _reorder_comment(self, call: cst.Call) -> Traced | None:
        """An arrow comment on the line of the only reorder there documents its result: `attn(x.permute(1, 0, 2),
        ...)  # (B, T, C) -> (T, B, C)`."""
        line = self.ctx.line(call)
        comment = self.ctx.comment(line)
        if not comment or not re.search(r"->|→", comment) or len(re.findall(
                r"\.(?:permute|transpose|movedim|swapaxes|swapdims)\(|\.mT\b", self.ctx.source_lines()[line - 1])) != 1:
            return None
        names = documented.shape_in_text(comment)
        shape = self.named_axes(names, "# " + comment.strip().lstrip("# "), line, "the shape comment says so",
                                Strength.ESTABLISHED) if names else None
        return Traced(shape) if shape is not None else None

    def _documented(self, name: str, binding: Binding) -> Traced | None:
        """The parameter's documented shape: its annotation (jaxtyping) or its entry in the docstring."""
        param = binding.node
        if isinstance(param, cst.Param) and param.annotation is not None:
            written = self.ctx.code(param.annotation.annotation)
            names = documented.in_annotation(written)
            shape = self.named_axes(names, f"{name}: {written}", self.ctx.line(param), "the annotation says so",
                                     Strength.ESTABLISHED) if names else None
            if shape is not None:
                return Traced(shape)
        function = binding.scope.node
        docstring = function.get_docstring() if isinstance(function, cst.FunctionDef) else None
        found = documented.in_docstring(docstring or "", name)
        if found is None:
            signature_comment = self._signature_comment(name, binding)
            if signature_comment is not None:
                return signature_comment
        if found is None and docstring and len(docstring.strip().splitlines()) == 1 and name in docstring:
            names = documented.shape_in_text(docstring)  # a one-line docstring about the tensor
            found = (names, docstring.strip()) if names else None
        where, owner = function, f"`{binding.scope.name}()`"
        if found is None:
            klass = binding.scope.enclosing_class
            if klass is None or binding.scope.name != "forward":
                return None
            where, owner = klass.node, f"class `{klass.name}`"
            class_doc = klass.node.get_docstring() or ""
            found = documented.in_docstring(class_doc, name)
            if found is None and len(_tensor_parameters(function)) == 1:
                found = documented.sole_input(class_doc)
            if found is None:
                return None
        shape = self.named_axes(found[0], found[1], self.ctx.line(where.body.body[0]),
                                 f"the docstring of {owner} documents `{name}`", Strength.ESTABLISHED)
        return Traced(shape) if shape is not None else None

    def _signature_comment(self, name: str, binding: Binding) -> Traced | None:
        """A comment that documents the parameter: on its line when it names it (`def forward(self, x):  # x: (B,
        L, E)`) or when it is the only parameter there (`tgt: Tensor,  # nq, bs, d_model`), or a comment line that
        names it inside the signature or in the body before the parameter is rebound (`# x is batch, seq, dim`).
        Read once per parameter."""
        memo = self.ctx.memo.setdefault("parameter_comments", {})
        if (binding, self.file) not in memo:
            memo[binding, self.file] = self._parameter_comment(name, binding)
        return memo[binding, self.file]

    def _parameter_comment(self, name: str, binding: Binding) -> Traced | None:
        line = self.ctx.line(binding.node)
        text = self.ctx.comment(line) or ""
        about = _about(name, text)
        if about is None and text and _alone_on_line(self.ctx, binding, line):
            about = text.lstrip("# ")
        found = (about, line) if about is not None else self._comment_line_about(name, binding)
        names = documented.shape_in_text(found[0], least=2) if found is not None else None
        if names is None:
            return None
        shape = self.named_axes(names, "# " + self.ctx.comment(found[1]).strip().lstrip("# "), found[1],
                                 f"the comment documents `{name}`", Strength.ESTABLISHED)
        return Traced(shape) if shape is not None else None

    def _comment_line_about(self, name: str, binding: Binding) -> tuple[str, int] | None:
        """What a comment names `name` to be, from the signature to the parameter's first rebinding in the body (a
        comment there describes the value the caller passed): a comment line, or a comment after code before the
        rebinding's line (`if x.dim() == 3:  # x [bs, n, c]`)."""
        function = binding.scope.node
        if not isinstance(function, cst.FunctionDef):
            return None
        # the scope's bindings are in source order: the first other one is the first rebinding
        rebound = next((other for other in binding.scope.bindings.get(name, ()) if other is not binding), None)
        lines = self.ctx.source_lines()
        last = self.ctx.line(rebound.node) if rebound is not None else self.ctx.end_line(function)
        for at in range(self.ctx.line(function), min(last, len(lines)) + 1):
            if "#" in lines[at - 1] and name in lines[at - 1] and (lines[at - 1].lstrip().startswith("#") or at < last):
                about = _about(name, self.ctx.comment(at) or "")
                if about is not None:
                    return about, at
        return None

    def _parameter(self, name: str, binding: Binding, depth: int) -> tuple[Traced | None, bool]:
        """What the callers pass, in this file and, for a module's `forward`, in the project's other files that
        import the class: the first caller's roles, except that batch-first evidence from any caller wins (that
        is the call that corrupts); and whether any caller passes the parameter."""
        found, called = [], False
        for site in callers(self.ctx, binding.scope):
            argument = site.arguments.get(name)
            called = called or argument is not None
            traced = self.of(argument, site.scope, site.call, depth + 1) if argument is not None else None
            if traced is not None:
                found.append(traced)
        elsewhere, called_elsewhere = self._callers_elsewhere(name, binding.scope, depth)
        found += elsewhere
        if not (called or called_elsewhere):
            found, called = self._possible_callers(name, binding.scope, depth)
        for traced in found:
            seen = axes.layout(traced.shape)
            if seen is not None and seen.kind == axes.BATCH_FIRST:
                return traced, True
        return (found[0] if found else None), called or called_elsewhere

    def _possible_callers(self, name: str, function: Scope, depth: int) -> tuple[list[Traced], bool]:
        """A `forward` that only calls which may run another class reach (`layer = A(...) if c else B(...)` in a
        stack): what they pass is what it gets when it runs, an assumption (at most a warning); and whether any
        passes the parameter."""
        found, called = [], False
        for site, may in possible_callers(self.ctx, function):
            argument = site.arguments.get(name)
            called = called or argument is not None
            traced = self.of(argument, site.scope, site.call, depth + 1) if argument is not None else None
            if traced is not None:
                note = f"assuming `{shorten(self.ctx.code(site.call.func), 40)}` at line {self.ctx.line(site.call)} " \
                       f"runs `{function.enclosing_class.name}`, not {shorten(may, 40)}"
                found.append(Traced(axes.weakened(traced.shape, note), traced.steps))
        return found, called

    def _callers_elsewhere(self, name: str, function: Scope, depth: int) -> tuple[list[Traced], bool]:
        """`Encoder(...)` imported into another file and called there: what that call passes for `name`."""
        klass = function.enclosing_class
        project = self.ctx.project
        if project is None or function.name != "forward" or klass is None or klass.parent is not self.ctx.root:
            return [], False
        self.ctx.read_project = True  # these findings depend on other files (the cache records it)
        found, called = [], False
        importers = [importer for imported in (klass.name, *factories(self.ctx, klass))
                     for importer in project.importers(self.ctx.path, imported)]
        for importer in importers:
            other = project.context(importer.path, self.ctx.limits) \
                if project.may_call(importer.path, importer.local) else None
            if other is None:
                continue
            reader = self._reader_in(other)
            named = tuple(call for call, _ in other.calls_named(importer.local) if isinstance(call.func, cst.Name))
            for call, scope, chain in running_calls(other, named):
                if not any(isinstance(built.call.func, cst.Name) and built.call.func.value == importer.local
                           for built in chain):
                    continue
                argument = arguments_for(call, function).get(name)
                called = called or argument is not None
                traced = reader.of(argument, scope, call, depth + 1) if argument is not None else None
                if traced is not None:
                    found.append(traced)
            for home, call, scope, handing in handed_calls(other, importer.local):  # `train(model, ...)`
                argument = arguments_for(call, function).get(name)
                called = called or argument is not None
                there = reader if home is other else self._reader_in(home)
                traced = there.of(argument, scope, call, depth + 1) if argument is not None else None
                if traced is not None:
                    does = f"runs the `{importer.local}` that {reader.file}:{other.line(handing)} hands to " \
                           f"`{shorten(other.code(handing.func), 30)}`"
                    found.append(traced.then(traced.shape, call, there, does))
        return found, called

    # ---- calls ----
    def _call(self, call: cst.Call, scope: Scope, use, depth: int) -> Traced | None:
        func = call.func
        name = self.ctx.qualified_name(func, scope)
        if name in _REARRANGE or (isinstance(func, cst.Name) and func.value == "rearrange"):
            return self.rearranged(call)
        if name == _PAD_SEQUENCE:
            return self._pad_sequence(call, scope)
        if name in _CONCAT and call.args:
            return self._concatenate(call, scope, use, depth)
        if name == "torch.stack" and call.args:
            return self._stack(call, scope, use, depth)
        if name == "torch.einsum" and len(call.args) >= 2:
            return self._einsum(call, scope, use, depth)
        if name in SIZE_FACTORIES or (isinstance(func, cst.Attribute) and func.attr.value in NEW_FACTORIES) \
                or name in LEGACY_CONSTRUCTORS and _given_sizes(call):
            return self._factory(call, scope, use, depth)
        if name in FIRST_ARG_KEEPS_AXES and call.args:
            return self.of(call.args[0].value, scope, use, depth + 1)
        if name in FUNCTION_FORMS and call.args and not call.args[0].keyword and not call.args[0].star:
            return self._shape_method(FUNCTION_FORMS[name], call, call.args[0].value,
                                      call.with_changes(args=call.args[1:]), scope, use, depth)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method == "repeat_interleave":
                return self._repeat_interleave(call, scope, use, depth)
            if method in REORDER or method in ("view", "reshape", "flatten", "unsqueeze", "squeeze", "expand",
                                                "repeat"):
                return self._shape_method(method, call, func.value, call, scope, use, depth)
            if method in KEEPS_AXES:
                return self.of(func.value, scope, use, depth + 1)
        return self._callee(call, scope, use, depth)

    def _shape_method(self, method: str, call: cst.Call, tensor: cst.BaseExpression, sized: cst.Call, scope: Scope,
                      use, depth: int) -> Traced | None:
        """`tensor.method(...)` written as `call`; `sized` holds the method's own arguments (the call itself, or
        the call without its tensor for the function form)."""
        inner = self.of(tensor, scope, use, depth + 1)
        if inner is None and method in ("view", "reshape"):
            inner = Traced((OPEN,))  # the new axes take the roles of their sizes, whatever the input's
        moved = inner.then(self._method(method, sized, inner.shape, scope, use), call, self) \
            if inner is not None else None
        return self._reconciled(moved, self._reorder_comment(call)) if method in REORDER else moved

    def _callee(self, call: cst.Call, scope: Scope, use, depth: int) -> Traced | None:
        """A module or function applied to a tensor: torch modules with a known output (embeddings, convolutions,
        norms, linear layers, attention), a project function or module followed into its returns; any other
        callee is assumed to keep the axes of its first argument, which makes the result at most a warning."""
        first = call.args[0].value if call.args and not call.args[0].keyword and not call.args[0].star else None
        function = project_function(self.ctx, call, scope)
        built = instance(self.ctx, call.func, scope) if function is None else None
        api = built.api if built is not None else None
        if api == _EMBEDDING:
            return self._embedding(call, scope, use, depth)
        if api in _CONVOLUTIONS:
            return self._convolution(call, _CONVOLUTIONS[api])
        if first is None or api in RECURRENT:  # a recurrent layer gives a tuple: its `[0]` is read by _element
            return None
        if api in KEEPS_AXES_MODULES or (built is not None and built.api in _ATTENTION_MODULES
                                         and not built.overrides):
            return self.of(first, scope, use, depth + 1)
        function = function or project_forward(self.ctx, built)
        if function is not None:
            return self._returns(call, scope, function, depth)
        traced = self.of(first, scope, use, depth + 1)
        if traced is None:
            return None
        note = f"`{self.ctx.code(call.func)}` at line {self.ctx.line(call)} is assumed to keep its axes"
        return Traced(axes.weakened(traced.shape, note), traced.steps)

    def _returns(self, call: cst.Call, scope: Scope, function: Scope, depth: int, index: int | None = None
                 ) -> Traced | None:
        """What a project function returns for this call's arguments (element `index` of a returned tuple):
        every `return` that can run for them (`flags.live`) must give the same roles."""
        arguments = arguments_for(call, function)
        self._frames.append((function, arguments, scope))
        try:
            values = [value for value in returned(function) if flags.live(self.ctx, value, function, self._frames)]
        finally:
            self._frames.pop()
        if index is not None:
            values = [_tuple_element(value, index) for value in values]
        if not values or any(value is None for value in values):
            return None
        bound = [(function, name, argument.value, scope) for name, argument in arguments.by_name.items()]
        self._env.extend(bound)
        self._frames.append((function, arguments, scope))
        try:
            found = [self.of(value, function, value, depth + 1) for value in values]
        finally:
            del self._env[len(self._env) - len(bound):]
            self._frames.pop()
        return self._agreed(found)

    def _element(self, call: cst.Call, index: int, scope: Scope, use, depth: int) -> Traced | None:
        """`attn(q, k, v)[0]`: the output of a torch attention module has the query's axes; a piece of a split
        has the axes of what was split; a project function's returned tuple gives its element."""
        split = self._split(call, scope)
        if split is not None:
            inner = self.of(split, scope, use, depth + 1)
            return inner.then(inner.shape, call, self, "each piece of a split keeps every axis and its role") \
                if inner is not None else None
        built = instance(self.ctx, call.func, scope)
        if built is not None and built.api == torchapi.MHA and not built.overrides and index == 0 and call.args \
                and not call.args[0].keyword and not call.args[0].star:
            return self.of(call.args[0].value, scope, use, depth + 1)
        if built is not None and built.api in RECURRENT and index == 0:
            return self.recurrent_output(built)
        function = project_function(self.ctx, call, scope) or project_forward(self.ctx, built)
        return self._returns(call, scope, function, depth, index) if function is not None else None

    def _split(self, call: cst.Call, scope: Scope) -> cst.BaseExpression | None:
        """The tensor `torch.split(x, n, dim)`, `x.chunk(k, dim)` or `torch.tensor_split(x, ...)` cuts into pieces
        along one axis: each piece has the same axes, the cut one shorter but holding what it held."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in _SPLITS and self.ctx.qualified_name(func, scope) \
                is None:
            return func.value
        if self.ctx.qualified_name(func, scope) in {f"torch.{name}" for name in _SPLITS} and call.args \
                and not call.args[0].keyword and not call.args[0].star:
            return call.args[0].value
        return None

    def recurrent_output(self, built, reads: bool = False) -> Traced | None:
        """The output of an nn.LSTM, nn.GRU or nn.RNN (or, `reads`, the input it takes): (N, L, H) with
        batch_first=True, else (L, N, H); unknown when batch_first cannot be read."""
        batch_first = recurrent_batch_first(self.ctx, built)
        if batch_first is None:
            return None
        code = self.ctx.code(built.call)
        reason = f"an nn.{built.api.rpartition('.')[2]} " + ("reads " if reads else "output is ") + (
            "(N, L, H) with batch_first=True" if batch_first else "(L, N, H): batch_first is False")
        evidence = self.evidence(code, self.ctx.line(built.call), reason, Strength.ESTABLISHED)
        batch, sequence, hidden = (Axis(role, evidence) for role in (Role.BATCH, Role.SEQUENCE, Role.EMBEDDING))
        return Traced((batch, sequence, hidden) if batch_first else (sequence, batch, hidden))

    def _method(self, method: str, call: cst.Call, shape: Shape, scope: Scope, use) -> Shape | None:
        dims = self.integers(call, scope)
        open_ended = bool(shape) and shape[-1] is OPEN
        if open_ended and (dims is None or any(d < 0 for d in dims)) and method not in ("view", "reshape"):
            return None  # a negative dim of a tensor whose rank is unknown
        if open_ended and dims and method in _MOVES_NAMED_AXES:  # `(B, ...)`.transpose(0, 1): (?, B, ...)
            shape = axes.padded(shape, max(dims) + (method != "unsqueeze"))
        if method == "t":
            return axes.transpose(shape, 0, 1) if len(shape) <= 2 else None
        if method in ("transpose", "swapaxes", "swapdims"):
            return axes.transpose(shape, *dims) if dims is not None and len(dims) == 2 else None
        if method == "permute":
            order = dims if dims is not None and len(call.args) > 1 else self.integer_list(call, scope)
            return axes.permute(shape, order) if order is not None else None  # the order gives the rank
        if method == "movedim":
            return axes.movedim(shape, *dims) if dims is not None and len(dims) == 2 else None
        if method == "flatten":
            start, end = (list(dims or []) + [0, -1][len(dims or []):])[:2]
            return axes.flatten(shape, start, end) if dims is not None and not open_ended else None
        if method == "unsqueeze":
            return axes.unsqueeze(shape, dims[0], Axis(size="1")) if dims is not None and len(dims) == 1 else None
        if method == "squeeze":
            return axes.squeeze(shape, dims[0]) if dims is not None and len(dims) == 1 else None
        if method in ("view", "reshape"):
            return self._view(call, shape, scope, use)
        return self._expand(method, call, shape, scope, use)

    def integers(self, call: cst.Call, scope: Scope) -> list[int] | None:
        values = [resolve(self.ctx, arg.value, scope) for arg in call.args if not arg.keyword]
        if any(v is None or not isinstance(v.value, int) or isinstance(v.value, bool) for v in values):
            return None
        return [v.value for v in values]

    def integer_list(self, call: cst.Call, scope: Scope) -> list[int] | None:
        if len(call.args) != 1 or not isinstance(call.args[0].value, cst.List | cst.Tuple):
            return None
        values = [resolve(self.ctx, e.value, scope) for e in call.args[0].value.elements]
        if any(v is None or not isinstance(v.value, int) for v in values):
            return None
        return [v.value for v in values]

    def _view(self, call: cst.Call, shape: Shape, scope: Scope, use) -> Shape | None:
        """Each new axis takes the role of its size expression (`B * T` holds the batch); a `-1` folds the input
        axes the other sizes leave over (`view(-1, L, E)` of (B, N, L, E) folds B and N: it holds the batch)."""
        if len(call.args) == 1 and not call.args[0].keyword and not call.args[0].star:
            items = self._size_items(call.args[0].value, scope, use)
        else:
            sizes = size_arguments(call)
            items = [self._size_item(size, scope, use) for size in sizes] if sizes else None
        if not items or sum(item is None for item in items) > 1:
            return None
        if None not in items:
            return tuple(items)
        position = items.index(None)
        if shape and shape[-1] is OPEN:
            folded = shape[0] if position == 0 and shape[0].known and shape[0].role is Role.BATCH else axes.UNKNOWN_AXIS
        elif len(shape) >= len(items):
            folded = axes.merged(shape[position:position + len(shape) - len(items) + 1])
        else:
            folded = axes.UNKNOWN_AXIS
        return tuple(folded if item is None else item for item in items)

    def _size_item(self, size: cst.BaseExpression, scope: Scope, use) -> Axis | None:
        """The axis a size gives, or None for -1 (inferred)."""
        value = resolve(self.ctx, size, scope)
        return None if value is not None and value.value == -1 else self.size_axis(size, scope, use)

    def _size_items(self, expr: cst.BaseExpression, scope: Scope, use, depth: int = 0) -> list[Axis | None] | None:
        """A shape written as a list: `[-1, L, E]`, `[-1] + shape[-2:]` where `shape = list(x.size())`,
        `x.shape[:2] + (-1,)`."""
        if self._too_deep(depth):
            return None
        if isinstance(expr, cst.List | cst.Tuple):
            if any(isinstance(element, cst.StarredElement) for element in expr.elements):
                return None
            return [self._size_item(element.value, scope, use) for element in expr.elements]
        if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add):
            left, right = self._size_items(expr.left, scope, use, depth + 1), \
                self._size_items(expr.right, scope, use, depth + 1)
            return left + right if left is not None and right is not None else None
        if isinstance(expr, cst.Subscript) and len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Slice):
            whole = self._size_items(expr.value, scope, use, depth + 1)
            bounds = expr.slice[0].slice
            lower, upper = (literal_int(b) if b is not None else None for b in (bounds.lower, bounds.upper))
            if whole is None or bounds.step is not None or (bounds.lower is not None and lower is None) \
                    or (bounds.upper is not None and upper is None):
                return None
            return whole[lower:upper]
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("list", "tuple") \
                and len(expr.args) == 1:
            return self._size_items(expr.args[0].value, scope, use, depth + 1)
        if isinstance(expr, cst.Name):
            binding = dataflow.reaching_one(self.ctx, self.ctx.bindings(expr.value, scope), use)
            if binding is None or binding.kind != "assign" or binding.value is None:
                return None
            return self._size_items(binding.value, binding.scope, binding.node, depth + 1)
        tensor = _shape_of_expr(expr)
        if tensor is None:
            return None
        traced = self.of(tensor, scope, use, depth + 1)
        if traced is None or (traced.shape and traced.shape[-1] is OPEN):
            return None
        return list(traced.shape)

    def _expand(self, method: str, call: cst.Call, shape: Shape, scope: Scope, use) -> Shape | None:
        """`expand(-1, n, -1)` / `repeat(1, bs, 1)`: an axis kept (-1, or a repeat of 1) keeps its role; a new or
        size-1 axis grown to a size takes that size's role; any other repeat leaves the axis unknown."""
        sizes = size_arguments(call)
        if sizes is None or len(sizes) != len(shape) or (shape and shape[-1] is OPEN):
            return None
        result = []
        for axis, size in zip(shape, sizes):
            value = resolve(self.ctx, size, scope)
            keep = -1 if method == "expand" else 1
            if value is not None and value.value == keep:
                result.append(axis)
            elif axis.size == "1":
                result.append(self.size_axis(size, scope, use))
            else:
                result.append(axes.UNKNOWN_AXIS)
        return tuple(result)

    def size_axis(self, size: cst.BaseExpression, scope: Scope, use, depth: int = 0) -> Axis:
        """The axis a size expression describes: from the unpacking or `x.size(i)` that bound it (established),
        or from its name alone (named); `B * H` holds the batch."""
        if self._too_deep(depth):
            return axes.UNKNOWN_AXIS
        code = self.ctx.code(size)
        if isinstance(size, cst.BinaryOperation) and isinstance(size.operator, cst.Multiply):
            return axes.merged((self.size_axis(size.left, scope, use, depth + 1),
                                self.size_axis(size.right, scope, use, depth + 1)))
        measured = self._measured(size, scope, use, depth)
        if measured is not None:
            return measured
        if not isinstance(size, cst.Name):
            return Axis(size=code)
        binding = dataflow.reaching_one(self.ctx, self.ctx.bindings(size.value, scope), use)
        if binding is not None and binding.kind == "unpack" and isinstance(binding.node, cst.Assign) \
                and _shape_of(binding.value) is not None:
            roles = roles_of_names(_target_names(binding.node.targets[0].target))
            if binding.index is not None and binding.index < len(roles) and roles[binding.index] is not Role.UNKNOWN:
                reason = f"`{size.value}` is the {roles[binding.index].value} axis of `{_shape_of(binding.value)}`"
                return Axis(roles[binding.index], self.evidence(self._unpacked(binding), self.ctx.line(binding.node),
                                                                 reason, Strength.ESTABLISHED), code)
        if binding is not None and binding.kind == "assign" and binding.value is not None:
            measured = self._measured(binding.value, binding.scope, binding.node, depth + 1)
            role = role_of_size_name(size.value)
            if measured is not None and (measured.known or role is Role.UNKNOWN):
                return measured
            if measured is not None:  # `bs = memory.shape[1]` names that axis, as an unpacking does
                written = f"{size.value} = {self.ctx.code(binding.value)}"
                reason = f"`{size.value}` names that axis the {role.value}"
                evidence = self.evidence(written, self.ctx.line(binding.node), reason, Strength.ESTABLISHED)
                return Axis(role, evidence, code)
        role = role_of_size_name(size.value)
        if role is Role.UNKNOWN:
            return Axis(size=code)
        line = self.ctx.line(use)
        return Axis(role, self.evidence(code, line, f"the size is named `{code}`, which reads as the {role.value}",
                                         Strength.NAMED), code)

    def _measured(self, size: cst.BaseExpression, scope: Scope, use, depth: int) -> Axis | None:
        """`x.size(1)` / `x.shape[1]`: the role of that axis of `x`, if known."""
        tensor, index = measured_axis(size)
        if tensor is None:
            return None
        traced = self.of(tensor, scope, use, depth + 1)
        if traced is None or (index < 0 and traced.shape and traced.shape[-1] is OPEN):
            return axes.UNKNOWN_AXIS
        position = index + len(traced.shape) if index < 0 else index
        if not 0 <= position < len(traced.shape) or traced.shape[position] is OPEN:
            return axes.UNKNOWN_AXIS
        return traced.shape[position]

    # ---- producers ----
    def _pad_sequence(self, call: cst.Call, scope: Scope) -> Traced | None:
        """`pad_sequence(seqs)` stacks sequence-first, (L, N, *), unless batch_first=True."""
        flag = next((arg.value for arg in call.args[1:2] if not arg.keyword), None)
        flag = next((arg.value for arg in call.args if arg.keyword and arg.keyword.value == "batch_first"), flag)
        value = resolve(self.ctx, flag, scope) if flag is not None else None
        if flag is not None and (value is None or not isinstance(value.value, bool)):
            return None
        batch_first = bool(value.value) if value is not None else False
        code, line = self.ctx.code(call), self.ctx.line(call)
        reason = "pad_sequence stacks batch-first" if batch_first else \
            "pad_sequence stacks sequence-first by default, (L, N, *)"
        evidence = self.evidence(code, line, reason, Strength.ESTABLISHED)
        batch, sequence = Axis(Role.BATCH, evidence), Axis(Role.SEQUENCE, evidence)
        return Traced((batch, sequence, OPEN) if batch_first else (sequence, batch, OPEN))

    def _convolution(self, call: cst.Call, spatial: int) -> Traced:
        """nn.Conv{1,2,3}d: (N, C, *spatial) whatever the input holds; a 1-d convolution's last axis is a sequence."""
        layout = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}[spatial]
        evidence = self.evidence(self.ctx.code(call), self.ctx.line(call), f"a convolution's output is {layout}",
                                  Strength.ESTABLISHED)
        rest = (Axis(Role.SEQUENCE, evidence),) if spatial == 1 else (Axis(Role.SPATIAL, evidence),) * spatial
        return Traced((Axis(Role.BATCH, evidence), Axis(Role.EMBEDDING, evidence), *rest))

    def _factory(self, call: cst.Call, scope: Scope, use, depth: int) -> Traced | None:
        """`torch.zeros(n, bs, d)`, `x.new_zeros(n, bs, d)`: each axis takes the role of its size expression;
        `torch.zeros(*y.shape)`, `x.new_full(y.shape, v)`: y's axes."""
        positional = [arg for arg in call.args if arg.keyword is None]
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "new_full":
            positional = positional[:1]  # then the fill value
        shaped = _shape_of_expr(positional[0].value) if len(positional) == 1 else None
        if shaped is not None:
            traced = self.of(shaped, scope, use, depth + 1)
            return traced.then(traced.shape, call, self, "a new tensor of that shape") \
                if traced is not None and OPEN not in traced.shape else None
        sizes = size_arguments(call.with_changes(args=positional))
        if not sizes:
            return None
        shape = tuple(self.size_axis(size, scope, use) for size in sizes)
        if any(axis.known for axis in shape):
            return Traced(shape)
        if all(literal_int(size) is not None for size in sizes):
            self._stop("opaque", call, detail="its sizes are numbers, which do not say which axis is the batch")
        return None

    def _embedding_table(self, expr: cst.Attribute, scope: Scope) -> Traced | None:
        """`self.query_embed.weight` of an nn.Embedding: (num_embeddings, embedding_dim)."""
        built = instance(self.ctx, expr.value, scope)
        if built is None or built.api != _EMBEDDING:
            return None
        evidence = self.evidence(self.ctx.code(expr), self.ctx.line(expr),
                                  "an nn.Embedding table is (num_embeddings, embedding_dim)", Strength.ESTABLISHED)
        return Traced((axes.UNKNOWN_AXIS, Axis(Role.EMBEDDING, evidence)))

    def _embedding(self, call: cst.Call, scope: Scope, use, depth: int) -> Traced | None:
        """nn.Embedding: the ids' axes, then the embedding."""
        if not call.args or call.args[0].keyword:
            return None
        ids = self.of(call.args[0].value, scope, use, depth + 1)
        if ids is None:
            return None
        embedding = Axis(Role.EMBEDDING, self.evidence(self.ctx.code(call), self.ctx.line(call),
                                                        "nn.Embedding output", Strength.ESTABLISHED))
        shape = ids.shape if ids.shape and ids.shape[-1] is OPEN else ids.shape + (embedding,)
        return ids.then(shape, call, self, "an nn.Embedding output, the ids' axes and then the embedding")

    def rearranged(self, call: cst.Call, side: int = 1) -> Traced | None:
        """An einops pattern names the axes it produces (`side` 1: `'b c h w -> b (h w) c'`), and those of the
        tensor it is given (`side` 0)."""
        if len(call.args) < 2 or not isinstance(call.args[1].value, cst.SimpleString):
            return None
        pattern = literal(call.args[1].value)
        if not isinstance(pattern, str) or "->" not in pattern:
            return None
        source, result = pattern.split("->", 1)
        atoms = list(dict.fromkeys(re.findall(r"\w+", source) + re.findall(r"\w+", result)))
        named = self.named_axes(atoms, self.ctx.code(call), self.ctx.line(call), "the einops pattern names the "
                                 "axes", Strength.ESTABLISHED)
        if named is None:
            return None
        by_name = dict(zip(atoms, named))
        groups = [re.findall(r"\w+", group) for group in _einops_axes((source, result)[side])]
        if any(not group for group in groups):
            return None  # `1` or `...` in the result: the rank is not the pattern's
        shape = tuple(axes.merged(tuple(by_name[atom] for atom in group)) for group in groups)
        return Traced(shape) if any(axis.known for axis in shape) else None

    def _concatenate(self, call: cst.Call, scope, use, depth) -> Traced | None:
        """`torch.cat(parts, dim)`, the parts written out or a list of them (`torch.cat(outs, dim=1)`)."""
        dim = self.dim(call, scope, 0)
        traced = self._parts(call.args[0].value, scope, use, depth) if dim is not None else None
        if traced is None:
            return None
        known = [t for t in traced if t is not None]
        if not known or dim is None:
            return None
        ranks = {len(t.shape) for t in known}
        if len(ranks) != 1 or any(t.shape and t.shape[-1] is OPEN for t in known):
            return None
        filled = [t.shape if t is not None else axes.unknown(len(known[0].shape)) for t in traced]
        return known[0].then(axes.concatenate(filled, dim), call, self)

    def _stack(self, call: cst.Call, scope, use, depth) -> Traced | None:
        """`torch.stack(parts, dim)`: the parts' agreed axes with a new one at `dim` whose role is unknown (the
        stacked things may be samples, or q, k and v, or the outputs of layers), the parts written out or a list of
        them (`torch.stack(outs)`)."""
        dim = self.dim(call, scope, 0)
        traced = self._parts(call.args[0].value, scope, use, depth) if dim is not None else None
        if not traced or any(t is None for t in traced) or len({axes.roles(t.shape) for t in traced}) != 1 \
                or any(t.shape and t.shape[-1] is OPEN for t in traced):
            return None
        return traced[0].then(axes.unsqueeze(traced[0].shape, dim), call, self)

    def _einsum(self, call: cst.Call, scope, use, depth) -> Traced | None:
        """`torch.einsum("bld,bsd->bls", q, k)`: each output letter takes the role its operands give it; letters
        whose operands disagree, or that no operand shows, are unknown. An implicit output or `...` says nothing."""
        spec = call.args[0].value
        if not isinstance(spec, cst.SimpleString) or any(a.keyword or a.star for a in call.args):
            return None
        text = literal(spec).replace(" ", "") if isinstance(literal(spec), str) else ""
        inputs, arrow, output = text.partition("->")
        operands = inputs.split(",")
        if not arrow or "." in text or len(operands) != len(call.args) - 1:
            return None
        found: dict[str, set[Axis]] = {}
        first = None
        for letters, arg in zip(operands, call.args[1:]):
            traced = self.of(arg.value, scope, use, depth + 1)
            if traced is None:
                continue
            first = first or traced
            if len(traced.shape) != len(letters) or OPEN in traced.shape:
                return None
            for letter, axis in zip(letters, traced.shape):
                if axis.known:
                    found.setdefault(letter, set()).add(axis)
        if first is None:
            return None
        result = tuple(next(iter(found[letter])) if len({a.role for a in found.get(letter, ())}) == 1
                       else axes.UNKNOWN_AXIS for letter in output)
        return first.then(result, call, self)

    def _repeat_interleave(self, call: cst.Call, scope, use, depth) -> Traced | None:
        """`x.repeat_interleave(h, dim=d)`: axis d holds each of its entries h times in a row, so it keeps its
        role (`(N*h, L, S)` from `(N, L, S)` is batch-major); without `dim` the result is flattened: unknown."""
        inner = self.of(call.func.value, scope, use, depth + 1)
        dim = self.dim(call, scope, None)
        if inner is None or dim is None or OPEN in inner.shape:
            return None
        position = dim + len(inner.shape) if dim < 0 else dim
        if not 0 <= position < len(inner.shape):
            return None
        return inner.then(inner.shape, call, self)

    def dim(self, call: cst.Call, scope: Scope, default: int | None) -> int | None:
        """The call's `dim` (its second positional argument, or by keyword) as an int: `default` when it is not
        given, None when it does not resolve to one."""
        positional = [arg.value for arg in call.args if arg.keyword is None and not arg.star]
        expr = positional[1] if len(positional) > 1 else next(
            (arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "dim"), None)
        if expr is None:
            return default
        value = resolve(self.ctx, expr, scope)
        return value.value if value is not None and type(value.value) is int else None

    # ---- batches from a DataLoader ----
    def _collated(self, binding: Binding, item: int | None = None, depth: int = 0) -> Traced | None:
        """A loop over a `DataLoader` (analysis/loaders.py finds it). With torch's default collate each leaf of
        what it yields (the batch, its tuple elements, its dict values) is the samples stacked on a new first axis,
        the batch; with a project `collate_fn`, the loop target's element (or `item`, `x, y = batch`) of what that
        function returns."""
        if binding is None or not isinstance(binding.node, cst.For) or binding.kind not in ("for", "unpack"):
            return None
        loader, index = binding.value, binding.index
        while isinstance(loader, cst.Call) and loader.args and not loader.args[0].keyword:
            called = self.ctx.qualified_name(loader.func, binding.scope) or _builtin(self.ctx, loader.func,
                                                                                       binding.scope)
            if called == "enumerate" and index == 1:
                loader, index = loader.args[0].value, None
            elif called in _PASS_THROUGH_ITERATORS:
                loader = loader.args[0].value
            else:
                break
        found = loaders.loader(self.ctx, loader, binding.scope)
        if found is None:
            return None
        reader = self._reader_in(found.ctx)
        if found.collate is None:
            reason = "a DataLoader's default collate stacks the samples on a new first axis"
            evidence = reader.evidence(found.ctx.code(found.call), found.ctx.line(found.call), reason,
                                       Strength.ESTABLISHED)
            return Traced((Axis(Role.BATCH, evidence), OPEN))
        return reader._collate_output(found, item if index is None else index, depth)

    def _collate_output(self, found: loaders.Loader, index: int | None, depth: int) -> Traced | None:
        """Element `index` (or the whole) of what a DataLoader's project `collate_fn` returns: every `return` must
        give the same roles."""
        values = returned(found.collate)
        if index is not None:
            values = [_tuple_element(value, index) for value in values]
        if not values or any(value is None for value in values):
            return None
        traced = self._agreed([self.of(value, found.collate, value, depth + 1) for value in values])
        does = f"the DataLoader's batches are what `{found.collate.name}` returns"
        return traced.then(traced.shape, found.call, self, does) if traced is not None else None

    def _reader_in(self, ctx: ModuleContext) -> ShapeReader:
        """A reader of another file of the run, whose stops are this question's."""
        if ctx is self.ctx:
            return self
        project = self.ctx.names  # the project, also in another file of it that an analysis reads
        reader = ShapeReader(ctx, project.display(ctx.path, self.ctx.path))
        reader._stops = self._stops
        self._elsewhere += 1
        return reader


_MOVES_NAMED_AXES = {"transpose", "swapaxes", "swapdims", "movedim", "squeeze", "unsqueeze"}


def recurrent_batch_first(ctx: ModuleContext, built) -> bool | None:
    """The batch_first of an nn.LSTM/GRU/RNN construction: its keyword's value, False when neither it nor the
    positional arguments that could reach it are given; None when it cannot be read."""
    args = built.call.args
    if any(arg.star for arg in args) or sum(1 for arg in args if arg.keyword is None) > 3:
        return None
    flag = next((arg.value for arg in args if arg.keyword is not None and arg.keyword.value == "batch_first"), None)
    if flag is None:
        return False
    value = resolve(ctx, flag, built.scope)
    return value.value if value is not None and isinstance(value.value, bool) else None


def _about(name: str, comment: str) -> str | None:
    """What a comment says about `name` in a clause that starts by naming it: `# x is batch, seq_len, channels`,
    `# x: (B, L, E); mask: (B, L)`, `# x [B, L, E]`."""
    for clause in comment.split(";"):
        named = re.match(rf"^[#\s]*`?{re.escape(name)}`?\s*(?:is|:|=|has shape|shape:?|(?=[\[(]))\s*(.*)$", clause)
        if named:
            return named[1]
    return None


def _axes_carrier(ctx: ModuleContext, expr: cst.BaseExpression) -> cst.BaseExpression:
    """The outermost expression around `expr` with its axes: `m[:, 1:]`, `m.bool()`, `m.to(device)`."""
    current = expr
    while True:
        parent = ctx.parent(current)
        if isinstance(parent, cst.Subscript) and parent.value is current and _keeps_axes(parent):
            current = parent
            continue
        call = ctx.parent(parent) if isinstance(parent, cst.Attribute) and parent.value is current else None
        if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in KEEPS_AXES:
            current = call
            continue
        return current


def _alone_on_line(ctx: ModuleContext, binding: Binding, line: int) -> bool:
    """Whether the parameter is the only one (besides `self`/`cls`) written on its line."""
    function = binding.scope.node
    if not isinstance(function, cst.FunctionDef):
        return False
    params = [*function.params.posonly_params, *function.params.params, *function.params.kwonly_params]
    return sum(1 for param in params if param.name.value not in ("self", "cls") and ctx.line(param) == line) == 1


def _tensor_parameters(function: cst.FunctionDef) -> list[cst.Param]:
    """The parameters after `self` that have no default: the inputs a module's forward requires."""
    params = [*function.params.posonly_params, *function.params.params][1:]
    return [param for param in params if param.default is None]


def _kind(traced: Traced) -> str | None:
    found = axes.layout(traced.shape)
    return found.kind if found is not None else None


def _shown(traced: Traced) -> Shown:
    """The code a conflict quotes for one side: the last step that moved the axes, else what gave the roles."""
    found = axes.layout(traced.shape)
    code, place = traced.steps[-1][:2] if traced.steps else (found.evidence.code, found.evidence.place)
    return Shown(code, place, found.kind)


def _agreed(found: list[Traced | None]) -> Traced | None:
    """What several possible values (the branches of an `if`, the returns of a function) all show: the roles
    every one of them gives an axis (`(?, B, E)` from `(?, B, E)` and `(S, B, E)`); unknown when one of them is
    unknown (a path not read may carry any layout), their ranks differ, or two give one axis different roles."""
    if not found or any(traced is None for traced in found):
        return None
    if len({axes.roles(traced.shape) for traced in found}) == 1:
        return found[0]
    first = found[0].shape
    if len({len(traced.shape) for traced in found}) != 1 or any(
            (axis is OPEN) != (traced.shape[position] is OPEN) for traced in found for position, axis in
            enumerate(first)):
        return None
    if any(len({traced.shape[position].role for traced in found if traced.shape[position].known}) > 1
           for position in range(len(first))):
        return None
    met = tuple(axis if axis is OPEN or all(traced.shape[position].known and traced.shape[position].role is axis.role
                                            for traced in found) else axes.UNKNOWN_AXIS
                for position, axis in enumerate(first))
    return Traced(met, found[0].steps) if any(axis.known for axis in met) else None


def _unbind_dim(value) -> int | None:
    """`d` of `x.unbind(d)` (0 when not given), None for anything else."""
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute)
            and value.func.attr.value == "unbind"):
        return None
    if any(arg.star for arg in value.args) or len(value.args) > 1:
        return None
    return literal_int(value.args[0].value) if value.args else 0


def _tuple_element(value: cst.BaseExpression, index: int) -> cst.BaseExpression | None:
    if isinstance(value, cst.Tuple) and -len(value.elements) <= index < len(value.elements):
        element = value.elements[index]
        return None if isinstance(element, cst.StarredElement) else element.value
    return None


def _literal_index(expr: cst.Subscript) -> int | None:
    """`i` of `x[i]` for a literal integer."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    return literal_int(expr.slice[0].slice.value)


def _builtin(ctx: ModuleContext, func: cst.BaseExpression, scope: Scope) -> str | None:
    """`enumerate`, `iter`: a builtin's name, when nothing in the module rebinds it."""
    if isinstance(func, cst.Name) and not ctx.bindings(func.value, scope):
        return func.value
    return None


def _built(ctx: ModuleContext, bindings: list[Binding], use: cst.CSTNode) -> list[Binding]:
    """The bindings that may have built the container a name holds at `use`: those that reach it, and through an
    `outs += [y]` (among the additions), those that reach that statement."""
    found, seen = [], set()
    todo = dataflow.reaching(ctx, bindings, use)
    while todo:
        binding = todo.pop()
        if id(binding) in seen:
            continue
        seen.add(id(binding))
        if binding.kind == "augmented":
            todo += dataflow.reaching(ctx, bindings, binding.node)
        else:
            found.append(binding)
    return found


def _entries(container: cst.BaseExpression | None, key: str | None) -> list[cst.BaseExpression] | None:
    """The values a list, tuple or dict literal holds (a dict's under `key` only, when given); None for anything
    else, or a literal with a `*` or `**` part."""
    if isinstance(container, cst.Call) and isinstance(container.func, cst.Name) \
            and container.func.value in ("list", "dict") and not container.args:
        return []
    if isinstance(container, cst.List | cst.Tuple):
        if any(isinstance(e, cst.StarredElement) for e in container.elements):
            return None
        return [] if key is not None else [e.value for e in container.elements]
    pairs = containers.pairs(container) if isinstance(container, cst.Dict) else None
    if pairs is None or any(k is None for k, _ in pairs):
        return None
    return [value for k, value in pairs if key is None or containers.key_of(k) == key]


def _literal_key(expr: cst.Subscript) -> bool:
    """`x[0]`, `x["ids"]`: one literal key."""
    return (len(expr.slice) == 1 and isinstance(expr.slice[0].slice, cst.Index)
            and isinstance(expr.slice[0].slice.value, cst.Integer | cst.SimpleString))


def _picks(expr: cst.Subscript) -> list[int] | None:
    """The positions a multi-axis index picks with an integer (`x[:, 0]`: [1]), when it has two or more elements,
    each a slice or an integer literal, and picks at least one: only a tensor or an array is indexed so."""
    if len(expr.slice) < 2 or not all(isinstance(e.slice, cst.Slice) or (isinstance(e.slice, cst.Index) and
                                                                          literal_int(e.slice.value) is not None)
                                      for e in expr.slice):
        return None
    picks = [position for position, e in enumerate(expr.slice) if isinstance(e.slice, cst.Index)]
    return picks or None


def _fits(query: Traced | None, partner: Traced) -> bool:
    """Does the layout of an argument that shares the query's batch leave the query's own known roles where they
    are (its batch axis at the partner's, a sequence elsewhere)? A query whose trace found only its features (or
    nothing) takes it."""
    batch = 0 if _kind(partner) == axes.BATCH_FIRST else 1
    return query is None or all(not axis.known or (axis.role is not Role.BATCH or position == batch) and (
        axis.role is not Role.SEQUENCE or position != batch) for position, axis in enumerate(query.shape[:2]))


def _keeps_axes(expr: cst.Subscript) -> bool:
    """`x[:, :n]` and `x[..., :n]` keep every axis; `x[0]` drops one."""
    ellipses = [e for e in expr.slice if isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Ellipsis)]
    return len(ellipses) <= 1 and all(isinstance(e.slice, cst.Slice) or e in ellipses for e in expr.slice)


def _shape_unpackings(ctx: ModuleContext, scope: Scope) -> dict[str, list[tuple[list[int], list[Binding]]]]:
    """A scope's shape unpackings (`B, T, C = x.shape`) by the name whose shape they read: one group per name the
    unpacking binds first, in the order of `scope.bindings`, each in source order with its lines, so a question
    bisects to the lines it is about (a scope of N unpackings is asked N questions). Built once per scope."""
    memo = ctx.memo.setdefault("shape_unpackings", {})
    if scope not in memo:
        found: dict[str, list[tuple[list[int], list[Binding]]]] = {}
        for bindings in scope.bindings.values():
            groups: dict[str, tuple[list[int], list[Binding]]] = {}
            for binding in bindings:  # in source order, so their lines ascend
                if binding.kind != "unpack" or binding.index != 0 or not isinstance(binding.node, cst.Assign):
                    continue
                tensor = _shape_of(binding.value)
                if tensor is not None:
                    lines, kept = groups.setdefault(tensor, ([], []))
                    lines.append(ctx.line(binding.node))
                    kept.append(binding)
            for tensor, group in groups.items():
                found.setdefault(tensor, []).append(group)
        memo[scope] = found
    return memo[scope]


def _shape_of(value) -> str | None:
    """The name whose shape `x.shape`, `x.size()` or `x.shape[:3]` reads."""
    tensor = _shape_of_expr(value.value if isinstance(value, cst.Subscript) else value)
    return tensor.value if isinstance(tensor, cst.Name) else None


def _target_names(target: cst.Tuple | cst.List) -> list[str]:
    """The names an unpacking binds, in order ("" where the target is not a plain name, as `x.y`)."""
    return [e.value.value if isinstance(e.value, cst.Name) else "" for e in target.elements]


def _given_sizes(call: cst.Call) -> bool:
    """A legacy constructor given sizes: several positional numbers or expressions, none a sequence of data
    (`torch.Tensor(n, 1, d)`, not `torch.Tensor([1, 2])` or `torch.Tensor(values)`)."""
    positional = [arg for arg in call.args if arg.keyword is None]
    return len(positional) >= 2 and len(positional) == len(call.args) and not any(
        arg.star or isinstance(arg.value, cst.List | cst.Tuple | cst.ListComp) for arg in positional)


def _shape_of_expr(expr: cst.BaseExpression) -> cst.BaseExpression | None:
    """`x` of `x.shape` or `x.size()`."""
    if isinstance(expr, cst.Attribute) and expr.attr.value == "shape":
        return expr.value
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size" \
            and not expr.args:
        return expr.func.value
    return None


def measured_axis(size: cst.BaseExpression) -> tuple[cst.BaseExpression | None, int]:
    """(`x`, 1) for `x.size(1)`, `x.shape[1]`, `x.size(-1)`."""
    if isinstance(size, cst.Call) and isinstance(size.func, cst.Attribute) and size.func.attr.value == "size" \
            and len(size.args) == 1:
        index = literal_int(size.args[0].value)
        return (size.func.value, index) if index is not None else (None, 0)
    if isinstance(size, cst.Subscript) and isinstance(size.value, cst.Attribute) and size.value.attr.value == "shape" \
            and len(size.slice) == 1 and isinstance(size.slice[0].slice, cst.Index):
        index = literal_int(size.slice[0].slice.value)
        return (size.value.value, index) if index is not None else (None, 0)
    return None, 0


def literal_int(expr: cst.BaseExpression) -> int | None:
    """The value of an integer literal, `3` or `-1`; None for anything else."""
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus) and \
            isinstance(expr.expression, cst.Integer):
        return -int(expr.expression.value)
    return None


def _einops_axes(side: str) -> list[str]:
    """einops axes of one side of a pattern: 'b (h w) c' -> ['b', '(h w)', 'c']."""
    return [group.strip() for group in re.findall(r"\([^)]*\)|\S+", side.strip())]
