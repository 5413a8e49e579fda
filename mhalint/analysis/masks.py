"""Mask provenance: what a mask expression means, read from how it was built.

A mask has a dtype class (boolean, additive float, 0/1 float, float of unknown values) and, when boolean or 0/1, a
polarity: IGNORE (True marks positions to leave out, nn.MultiheadAttention's convention) or KEEP (True marks
positions that take part, F.scaled_dot_product_attention's). The analysis follows local names back to their
construction within a function (or a method's `self.x`), through shape-only operations, and flips the polarity at
each `~`, `logical_not()` or `== 0`. Each step adds a sentence of evidence with its line, so a finding can show
where the mask was built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from mhalint import torchapi
from mhalint.analysis import configs, dataflow, documented
from mhalint.analysis.calls import callers, is_none, mask_arguments, project_function, returned
from mhalint.analysis.configs import string_key
from mhalint.analysis.tuples import unpacked
from mhalint.analysis.values import resolve
from mhalint.analysis.vocabulary import (
    BOOLEAN_METHODS,
    FLOAT_DTYPES,
    IGNORE_MASK_NAME,
    INT_DTYPES,
    KEEP_NAME,
    PAD_TOKEN,
    SHAPE_ONLY,
    TO_FLOAT,
    TOKENIZER_MASK_NAME,
)
from mhalint.context import ModuleContext, Scope
from mhalint.finding import shorten
from mhalint.parse.lazy import cst
from mhalint.parse.walk import nothing, walk, walk_parsed
from mhalint.torchapi import IGNORE, KEEP

BOOL, ADDITIVE, ZERO_ONE, INTEGER = "bool", "additive", "0/1 float", "integer"
FLOAT = "float"  # floating-point, values not known (additive or 0/1): its dtype alone rules out a boolean convention
_FILLED = {"torch.ones": "filled with 1", "torch.ones_like": "filled with 1", "torch.zeros": "filled with 0",
           "torch.zeros_like": "filled with 0", "torch.empty": "left uninitialised"}
_MAX_DEPTH = 16

@dataclass(frozen=True)
class Mask:
    kind: str | None  # BOOL, ADDITIVE, ZERO_ONE, INTEGER, FLOAT, or None when the dtype is unknown
    polarity: str | None  # IGNORE, KEEP, or None
    evidence: tuple[str, ...] = ()
    origin_line: int | None = None  # where the mask was built, when that is known
    weak: bool = False  # the polarity rests on a name or another use, not on the mask's construction
    documented: bool = False  # the polarity is what a docstring states, not a construction
    # The expression the mask was built by, and its polarity there (later `~` may flip it): lets the probe
    # rebuild the mask as the call receives it.
    built_from: str | None = None
    built_polarity: str | None = None

    def flipped(self, why: str) -> Mask:
        polarity = {IGNORE: KEEP, KEEP: IGNORE}.get(self.polarity) if self.polarity else None
        kind = self.kind if self.kind in (BOOL, ZERO_ONE) else (BOOL if self.kind is None else None)
        return replace(self, kind=kind, polarity=polarity, evidence=self.evidence + (why,))


def describe(polarity: str | None) -> str:
    return {IGNORE: "True = ignore", KEEP: "True = attend"}.get(polarity, "unknown convention")


class MaskReader:
    """Reads masks in one module; one instance per rule run."""

    def __init__(self, ctx: ModuleContext):
        self.ctx = ctx
        self._active: set[int] = set()  # bindings being followed, against cycles through loops

    def read(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode, depth: int = 0) -> Mask | None:
        """What `expr`, evaluated in `scope` at the statement `use`, holds; None when nothing is known."""
        if depth > _MAX_DEPTH:
            return None
        self.ctx.limits.check()
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
            inner = self.read(expr.expression, scope, use, depth + 1)
            return inner.flipped(self._at(f"inverted with `{self.ctx.code(expr)}`", expr)) if inner else None
        if isinstance(expr, cst.Subscript):
            key = string_key(expr)
            return self._entry(expr, key, scope, use, depth) if key is not None else \
                self.read(expr.value, scope, use, depth + 1)
        if isinstance(expr, cst.Comparison):
            return self._comparison(expr, scope, use, depth)
        if isinstance(expr, cst.BinaryOperation):
            return self._binary(expr, scope, use, depth)
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, use, depth)
        if isinstance(expr, cst.IfExp):
            return self._either(expr.body, expr.orelse, scope, use, depth)
        if isinstance(expr, cst.Name):
            return self._name(expr.value, scope, use, depth)
        bindings = self.ctx.attribute_bindings(expr, scope)
        if bindings is not None:
            if len(bindings) == 1 and bindings[0].value is not None:
                b = bindings[0]
                return self.read(b.value, b.scope, b.node, depth + 1)
            return self._by_name(expr.attr.value)
        return None

    # ---- names ----
    def _name(self, name: str, scope: Scope, use: cst.CSTNode, depth: int) -> Mask | None:
        """What the bindings that may reach the read hold; `mask = None` on one path is no mask there, and the
        others must agree."""
        reached = [b for b in dataflow.reaching(self.ctx, self.ctx.bindings(name, scope), use)
                   if not (b.kind == "assign" and is_none(b.value)) and id(b) not in self._active]
        if len(reached) > 1:
            return _agreed(dataflow.follow(reached, self._active,
                                           lambda binding: self._binding(name, scope, binding, use, depth)))
        return self._binding(name, scope, reached[0] if reached else None, use, depth)

    def _binding(self, name: str, scope: Scope, binding, use: cst.CSTNode, depth: int) -> Mask | None:
        if binding is not None and binding.kind == "param":
            return self._parameter(name, binding, depth) or self._documented(name, binding) \
                or self._guess(name, scope, use, binding)
        source = (binding.value, binding.scope) if binding is not None and binding.kind == "assign" else \
            unpacked(self.ctx, binding) if binding is not None else None
        if source is None or source[0] is None:
            return self._guess(name, scope, use, binding)
        found = self._written(name, binding, self.read(source[0], source[1], source[0] if binding.kind == "unpack"
                                                       else binding.node, depth + 1))
        if found is not None and found.polarity is not None and found.weak:
            here = self._guess(name, scope, use, binding)
            if here is not None and here.polarity != found.polarity:
                return None  # `key_padding_mask = ~key_padding_mask`: the name cannot describe both values
        if found is None or found.polarity is None:
            found = _guessed(found, self._guess(name, scope, use, binding))
            return replace(found, origin_line=self.ctx.line(binding.node)) \
                if found is not None and found.origin_line is None and found.evidence else found
        if found.origin_line is None:
            found = replace(found, origin_line=self.ctx.line(binding.node))
        line = self.ctx.line(binding.node)
        written = f"`{name} = {self.ctx.code(binding.value)}` at line {line}" if binding.kind == "assign" else \
            f"`{self.ctx.code(binding.node)}` at line {line} (`{name}` is `{self.ctx.code(source[0])}` there)"
        return replace(found, evidence=(written,) + found.evidence
                       if not found.evidence or not found.evidence[0].startswith(f"`{name} =") else found.evidence)

    def _parameter(self, name: str, binding, depth: int) -> Mask | None:
        """A parameter holds what its callers in this module pass; they must agree."""
        found = []
        for site in callers(self.ctx, binding.scope):
            argument = site.arguments.get(name)
            if argument is None:
                if not site.arguments.absent(name):
                    return None
                argument = binding.value  # the default
            if argument is None or is_none(argument):
                continue
            mask = self.read(argument, site.scope, site.call, depth + 1)
            if mask is None:
                return None
            found.append(replace(mask, evidence=(f"`{name}` receives `{self.ctx.code(argument)}` from the call at "
                                                 f"line {self.ctx.line(site.call)}",) + mask.evidence))
        return _agreed(found)

    def _documented(self, name: str, binding) -> Mask | None:
        """A parameter whose docstring entry states what its values mean ("1 for tokens that are not masked, 0 for
        masked", "a True value indicates ... ignored"): that is its convention, by the function's own
        documentation. Boolean only when the entry says so."""
        function = binding.scope.node
        docstring = function.get_docstring() if isinstance(function, cst.FunctionDef) else None
        lines = documented.entry(docstring, name) if docstring else []
        stated = documented.stated_convention(lines)
        if stated is None:
            return None
        keeps, sentence = stated
        line = self.ctx.line(function.body.body[0])
        kind = BOOL if re.search(r"\bbool", " ".join(lines), re.IGNORECASE) else None
        return Mask(kind, KEEP if keeps else IGNORE, (f"the docstring of `{function.name.value}()` documents "
                                                      f"`{name}`: \"{shorten(sentence, 100)}\" (line {line})",),
                    origin_line=line, documented=True)

    def _entry(self, expr: cst.Subscript, key: str, scope: Scope, use, depth: int) -> Mask | None:
        """`batch["attention_mask"]`: the entry of a dict this file builds (`{"attention_mask": m}`), else what
        the key's name suggests (weak), as for a variable of that name."""
        found = configs.objects(self.ctx, expr.value, scope, depth + 1)
        if found and all(obj.mapping is not None and obj.ctx is self.ctx for obj in found):
            entries = [configs.entry(obj, key) for obj in found]
            if all(entry is not None for entry in entries):
                read = [self.read(entry, obj.scope, entry, depth + 1) for entry, obj in zip(entries, found)]
                return _agreed([replace(mask, evidence=(f"`{self.ctx.code(expr)}` is `{self.ctx.code(entry)}`, "
                                                        f"set at line {self.ctx.line(entry)}",) + mask.evidence)
                                if mask is not None else None for mask, entry in zip(read, entries)])
        return self._by_name(key)

    def _guess(self, name: str, scope: Scope, use: cst.CSTNode, binding) -> Mask | None:
        """The convention only another use or the name suggests (weak)."""
        return self._by_use(name, scope, use, binding) or self._by_name(name)

    def _by_use(self, name: str, scope: Scope, use: cst.CSTNode, binding) -> Mask | None:
        """A mask passed unchanged to nn.MultiheadAttention or a Transformer mask argument in the same function
        is in their convention (True = ignore). Only that direction counts: it is torch's older, documented one.
        The other use must read the same binding (`binding`, None for none): after `mask = ~mask` it holds the
        inverted value, not the one being read."""
        bindings = self.ctx.bindings(name, scope)
        reads = [binding] if binding is not None else []
        for call, call_scope in self.ctx.calls_in(scope):
            if call is use:
                continue
            for target, parameter, convention, expr in mask_arguments(self.ctx, call, call_scope):
                if convention == IGNORE and _plain_name(expr) == name \
                        and dataflow.reaching(self.ctx, bindings, call) == reads:
                    return Mask(None, IGNORE, (f"`{name}` is also passed unchanged as {parameter} to "
                                               f"{torchapi.short_name(target.api)} at line {self.ctx.line(call)}, "
                                               f"which reads True as ignore",), weak=True)
        return None

    def _by_name(self, name: str) -> Mask | None:
        if IGNORE_MASK_NAME.search(name):
            return Mask(None, IGNORE, (f"the name `{name}` says it is a key padding mask, True at padding by "
                                       f"torch's convention",), weak=True)
        return None

    # ---- operators ----
    def _comparison(self, expr: cst.Comparison, scope, use, depth) -> Mask | None:
        if len(expr.comparisons) != 1:
            return None
        target = expr.comparisons[0]
        return self._compare(expr.left, target.operator, target.comparator, expr, scope, use, depth)

    def _compare(self, left, op, right, node: cst.CSTNode, scope, use, depth) -> Mask | None:
        """`left op right`, written as an operator or as `.eq()`/`.ne()` (`node` is what the source shows)."""
        where = f"`{self.ctx.code(node)}`"
        for side, other, mirrored in ((left, right, False), (right, left, True)):
            constant = resolve(self.ctx, other, scope)
            if constant is None or constant.value not in (0, 1, False, True):
                continue
            inner = self.read(side, scope, use, depth + 1)
            if inner is None or inner.polarity is None:
                inner = self._tokenizer_mask(side, node)
            if inner is None:
                break  # not a mask being converted: perhaps token ids compared with a padding id
            keeps_truth = _keeps_truth(op, constant.value, mirrored)
            if keeps_truth is None:
                return None
            if keeps_truth:
                return replace(inner, kind=BOOL, evidence=inner.evidence + (self._at(f"converted by {where}", node),))
            return replace(inner.flipped(self._at(f"inverted by {where}", node)), kind=BOOL)  # a comparison
        if PAD_TOKEN.search(self.ctx.code(right)) or PAD_TOKEN.search(self.ctx.code(left)):
            if isinstance(op, cst.Equal):
                return self._built(BOOL, IGNORE, f"{where} is True at padding", node)
            if isinstance(op, cst.NotEqual):
                return self._built(BOOL, KEEP, f"{where} is True at real tokens", node)
        if "arange" in self.ctx.code(node):
            polarity = _positions_vs_lengths(op, "arange" in self.ctx.code(left))
            if polarity is not None:
                meaning = "valid positions" if polarity == KEEP else "positions past the length"
                return self._built(BOOL, polarity, f"{where} is True at {meaning}", node)
        return Mask(BOOL, None)

    def _tokenizer_mask(self, side: cst.BaseExpression, node: cst.CSTNode) -> Mask | None:
        """`attention_mask == 0`: a tokenizer's mask by its name, and compared with 0 or 1, so it holds 0/1
        values; two signals together say 1 = real token."""
        name = string_key(side) or _plain_name(side) or (side.attr.value if isinstance(side, cst.Attribute) else None)
        if name is None or not TOKENIZER_MASK_NAME.match(name):
            return None
        return Mask(ZERO_ONE, KEEP, (self._at(f"`{name}` is a tokenizer's mask by its name, 1 at real tokens, and "
                                              f"`{self.ctx.code(node)}` compares it as 0/1 values", node),),
                    origin_line=self.ctx.line(node))

    def _binary(self, expr: cst.BinaryOperation, scope, use, depth) -> Mask | None:
        op = expr.operator
        if isinstance(op, (cst.BitAnd, cst.BitOr)):
            left = self.read(expr.left, scope, use, depth + 1)
            right = self.read(expr.right, scope, use, depth + 1)
            return _combine(left, right, isinstance(op, cst.BitAnd))
        if isinstance(op, cst.Subtract):
            one = resolve(self.ctx, expr.left, scope)
            if one is not None and one.value == 1:
                inner = self.read(expr.right, scope, use, depth + 1)
                if inner is not None and (inner.polarity is not None or inner.kind == ZERO_ONE):
                    flipped = inner.flipped(self._at(f"`{self.ctx.code(expr)}` swaps the 0s and 1s", expr))
                    return replace(flipped, kind=ZERO_ONE)
        if isinstance(op, (cst.Multiply, cst.Add, cst.Subtract)) and _large_negative(self.ctx, expr, scope):
            return self._built(ADDITIVE, None, f"`{self.ctx.code(expr)}` is an additive float mask", expr)
        return None

    def _either(self, first, second, scope, use, depth) -> Mask | None:
        a = None if is_none(first) else self.read(first, scope, use, depth + 1)
        b = None if is_none(second) else self.read(second, scope, use, depth + 1)
        if is_none(first):
            return b
        if is_none(second):
            return a
        if a is not None and b is not None and (a.kind, a.polarity) == (b.kind, b.polarity):
            return a
        return None

    # ---- calls ----
    def _call(self, call: cst.Call, scope: Scope, use, depth) -> Mask | None:
        func = call.func
        name = self.ctx.qualified_name(func, scope)
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if name == torchapi.GENERATE_SQUARE_SUBSEQUENT_MASK or method == "generate_square_subsequent_mask":
            return self._built(ADDITIVE, None, "generate_square_subsequent_mask() gives a float mask, -inf at the "
                                               "future (additive)", call)
        if name in ("torch.triu", "torch.tril") and call.args:
            return self._triangle(name.rsplit(".", 1)[1], call.args[0].value, call, scope, use, depth, skip=1)
        if name in ("torch.ones", "torch.zeros", "torch.full", "torch.ones_like", "torch.zeros_like",
                    "torch.full_like", "torch.empty"):
            return self._factory(name.rsplit(".", 1)[1], call, scope)
        if name == "torch.logical_not" and call.args:
            inner = self.read(call.args[0].value, scope, use, depth + 1)
            return inner.flipped(self._at(f"inverted by `{self.ctx.code(call)}`", call)) if inner else Mask(BOOL, None)
        if name == "torch.where":
            return self._where(call, scope)
        if method is None:
            return self._returned(call, scope, depth)
        base = func.value
        if method in ("triu", "tril"):
            return self._triangle(method, base, call, scope, use, depth, skip=0)
        if method in ("logical_not", "logical_not_"):
            inner = self.read(base, scope, use, depth + 1)
            return inner.flipped(self._at(f"inverted by `.{method}()`", call)) if inner else Mask(BOOL, None)
        if method in SHAPE_ONLY:
            return self.read(base, scope, use, depth + 1)
        if method in ("eq", "ne") and len(call.args) == 1:
            operator = cst.Equal() if method == "eq" else cst.NotEqual()
            return self._compare(base, operator, call.args[0].value, call, scope, use, depth)
        if method in ("bool", "to", "type") or method in TO_FLOAT:
            return self._conversion(method, base, call, scope, use, depth)
        if method in ("masked_fill", "masked_fill_"):
            if len(call.args) == 2 and _large_negative(self.ctx, call.args[1].value, scope):
                return self._built(ADDITIVE, None, f"`.{method}(..., {self.ctx.code(call.args[1].value)})` "
                                                   "makes an additive float mask", call)
            return None
        if method in ("logical_and", "logical_or") and len(call.args) == 1:
            return _combine(self.read(base, scope, use, depth + 1),
                            self.read(call.args[0].value, scope, use, depth + 1), method == "logical_and")
        if method in BOOLEAN_METHODS:
            return Mask(BOOL, None)  # `.gt(0)`, `.isnan()`: boolean whatever they test
        return self._returned(call, scope, depth)

    def _conversion(self, method, base, call: cst.Call, scope, use, depth) -> Mask | None:
        target = self.ctx.code(call.args[0].value) if call.args else ""
        if call.args and call.args[0].keyword is not None and call.args[0].keyword.value != "dtype":
            target = ""
        to_bool = method == "bool" or (method in ("to", "type") and re.search(r"\bbool\b", target))
        to_float = method in TO_FLOAT or (method in ("to", "type") and FLOAT_DTYPES.search(target))
        inner = self.read(base, scope, use, depth + 1)
        if not (to_bool or to_float):
            return inner  # .to(device) and friends keep the mask as it is
        if inner is None:
            return Mask(BOOL, None) if to_bool else self._named_selection(base, call)
        if to_bool:
            if inner.kind == ADDITIVE:
                return Mask(BOOL, IGNORE, inner.evidence + (self._at("`.bool()` is True where the additive mask is "
                                                                     "non-zero (masked)", call),),
                            inner.origin_line)
            return replace(inner, kind=BOOL)
        if inner.kind == BOOL:
            return self._to_zero_one(inner, base, call)
        if inner.kind == ZERO_ONE and inner.polarity is not None:
            return replace(inner, evidence=inner.evidence + (
                self._at(f"`.{method}()` turns it into a 0/1 float mask", call),))
        return inner if inner.kind == ADDITIVE else None

    def _to_zero_one(self, inner: Mask, base, call: cst.Call) -> Mask:
        """A boolean mask turned into floats (`.float()`, `.to(q.dtype)`, `.type_as(q)`) holds 0s and 1s; its
        construction's convention, when known, says what the 1s mean."""
        line, receiver = self.ctx.line(call), self.ctx.code(base)
        conversion = "." + self.ctx.code(call)[len(receiver) + 1:].lstrip()
        turned = f"`{conversion}` turns the boolean `{receiver}` into 0/1 floats (line {line})"
        if inner.polarity is None:
            return Mask(ZERO_ONE, None, (turned,), origin_line=line)
        return replace(inner, kind=ZERO_ONE, evidence=inner.evidence + (turned,), origin_line=line)

    def _named_selection(self, base, call: cst.Call) -> Mask | None:
        """`keep.float()` where nothing shows what `keep` holds but its name says a selection: a 0/1 float mask
        by the name only (weak, and no meaning)."""
        if not (isinstance(base, cst.Name) and KEEP_NAME.match(base.value)):
            return None
        line = self.ctx.line(call)
        return Mask(ZERO_ONE, None, (f"`{self.ctx.code(call)}` turns `{base.value}` into floats (line {line}); only "
                                     f"its name says `{base.value}` is a boolean mask",), origin_line=line, weak=True)

    def _triangle(self, which, base, call, scope, use, depth, skip) -> Mask | None:
        diagonal_expr = None
        positional = [a for a in call.args[skip:] if a.keyword is None]
        keyword = [a for a in call.args if a.keyword is not None and a.keyword.value == "diagonal"]
        if keyword:
            diagonal_expr = keyword[0].value
        elif positional:
            diagonal_expr = positional[0].value
        diagonal = resolve(self.ctx, diagonal_expr, scope) if diagonal_expr is not None else None
        k = 0 if diagonal_expr is None else (diagonal.value if diagonal is not None else None)
        inner = self.read(base, scope, use, depth + 1)
        kind = inner.kind if inner is not None else None
        if kind == ADDITIVE:
            return self._built(ADDITIVE, None, f"`{self.ctx.code(call)}` is an additive float mask", call)
        if not isinstance(k, int):
            return None
        if which == "triu" and k >= 1:
            polarity, where = IGNORE, "True above the diagonal (the future)"
        elif which == "tril" and k >= 0:
            polarity, where = KEEP, "True on and below the diagonal (the past)"
        else:
            return None
        return self._built(kind, polarity, f"`{self.ctx.code(call)}` is {where}", call)

    def _factory(self, which, call: cst.Call, scope) -> Mask | None:
        dtype = next((self.ctx.code(a.value) for a in call.args if a.keyword and a.keyword.value == "dtype"), "")
        if re.search(r"\bbool\b", dtype):
            return Mask(BOOL, None, origin_line=self.ctx.line(call))
        if INT_DTYPES.search(dtype):
            return Mask(INTEGER, None, origin_line=self.ctx.line(call))  # torch raises for it, loudly
        if which in ("full", "full_like"):
            values = [a.value for a in call.args if a.keyword is None][1:2] + \
                     [a.value for a in call.args if a.keyword and a.keyword.value == "fill_value"]
            if values and _large_negative(self.ctx, values[0], scope):
                return self._built(ADDITIVE, None, f"`{self.ctx.code(call)}` is filled with a large negative value",
                                   call)
            return None
        if which.startswith("ones"):
            return Mask(ZERO_ONE, None, origin_line=self.ctx.line(call))
        # zeros: what it becomes depends on what is written into it later (-inf: additive; 1s: a 0/1 mask), but
        # without a dtype (or with a float one) it stays a float
        if which in ("zeros", "empty") and (not dtype or FLOAT_DTYPES.search(dtype)):
            return Mask(FLOAT, None, origin_line=self.ctx.line(call))
        return None

    def _written(self, name: str, binding, found: Mask | None) -> Mask | None:
        """`m = torch.ones(...)` (or zeros) whose entries the function then sets: to 0s and 1s (`m[i, n:] = 0`,
        `m.fill_(1)`, `m.masked_fill_(c, 0)`) it is a 0/1 mask, to -inf an additive one; any other write makes
        it unknown."""
        value = binding.value
        if not isinstance(value, cst.Call) or found is not None and found.kind in (BOOL, INTEGER):
            return found
        factory = self.ctx.qualified_name(value.func, binding.scope)
        if factory not in _FILLED:
            return found
        writes = _writes(binding.scope, name)
        if not writes:
            return found
        values, lines = set(), []
        for node, written in writes:
            if written is not None and _large_negative(self.ctx, written, binding.scope):
                values.add("-inf")
            else:
                resolved = resolve(self.ctx, written, binding.scope) if written is not None else None
                if resolved is None or resolved.value not in (0, 1):
                    return None  # a computed value: nothing is known
                values.add(str(int(resolved.value)))
            lines.append(str(self.ctx.line(node)))
        line = self.ctx.line(binding.node)
        evidence = (f"`{name} = {self.ctx.code(value)}` at line {line} is {_FILLED[factory]}",
                    f"entries are then set to {' and '.join(sorted(values))} "
                    f"(line{'s' if len(lines) > 1 else ''} {', '.join(lines)})")
        if "-inf" in values:
            return Mask(ADDITIVE, None, evidence, origin_line=line) if values <= {"-inf", "0"} else None
        return Mask(ZERO_ONE, None, evidence, origin_line=line)

    def _where(self, call: cst.Call, scope) -> Mask | None:
        values = [a.value for a in call.args[1:3]]
        if any(_large_negative(self.ctx, v, scope) for v in values):
            return self._built(ADDITIVE, None, f"`{self.ctx.code(call)}` is an additive float mask", call)
        return None

    def _returned(self, call: cst.Call, scope: Scope, depth: int) -> Mask | None:
        """A project helper that builds the mask: follow its single `return` (same module only)."""
        function = project_function(self.ctx, call, scope)
        if function is None:
            return None
        values = returned(function)
        if len(values) != 1:
            return None
        return self.read(values[0], function, values[0], depth + 1)

    # ---- helpers ----
    def _built(self, kind, polarity, why: str, node: cst.CSTNode) -> Mask:
        line = self.ctx.line(node)
        return Mask(kind, polarity, (f"{why} (line {line})",), origin_line=line, built_from=self.ctx.code(node),
                    built_polarity=polarity)

    def _at(self, why: str, node: cst.CSTNode) -> str:
        return f"{why} at line {self.ctx.line(node)}"


def _agreed(found: list[Mask | None]) -> Mask | None:
    """The first of several masks, when they all have one kind and polarity; else unknown."""
    if not found or any(m is None or (m.kind, m.polarity) != (found[0].kind, found[0].polarity) for m in found):
        return None
    return found[0]


def _keeps_truth(op, constant, mirrored: bool) -> bool | None:
    """Does `mask OP constant` keep True where the mask is True (None: the comparison says nothing clear)?"""
    truthy = bool(constant)
    if isinstance(op, cst.Equal):
        return truthy
    if isinstance(op, cst.NotEqual):
        return not truthy
    if not truthy and isinstance(op, cst.GreaterThan if not mirrored else cst.LessThan):
        return True  # mask > 0
    return None


def _positions_vs_lengths(op, arange_on_left: bool) -> str | None:
    """`arange(L) < lengths` is True at valid positions; `>=` at padding."""
    less = isinstance(op, (cst.LessThan, cst.LessThanEqual))
    greater = isinstance(op, (cst.GreaterThan, cst.GreaterThanEqual))
    if not (less or greater):
        return None
    return KEEP if less == arange_on_left else IGNORE


def _combine(left: Mask | None, right: Mask | None, is_and: bool) -> Mask | None:
    """`keep & anything` still keeps only where `keep` does; `ignore | anything` still ignores where it did."""
    known = [m for m in (left, right) if m is not None and m.polarity is not None]
    if len(known) == 2 and known[0].polarity == known[1].polarity:
        return replace(known[0], kind=BOOL, evidence=known[0].evidence + known[1].evidence)
    if len(known) == 1 and known[0].polarity == (KEEP if is_and else IGNORE):
        return replace(known[0], kind=BOOL)
    if any(m is not None and m.kind == BOOL for m in (left, right)):
        return Mask(BOOL, None)  # `&` and `|` of a boolean mask give a boolean one
    return None


def _guessed(found: Mask | None, guess: Mask | None) -> Mask | None:
    """A construction's kind with the convention only a name or another use gives (so weak); the guess alone
    when the construction says nothing. Additive, integer and other float masks have no convention to guess, nor
    has a bare `torch.ones(...)`: it is a float whose values are not known yet, which a guess must not make a
    boolean (its `~` raises)."""
    bare_ones = found is not None and found.kind == ZERO_ONE and not found.evidence
    if guess is None or bare_ones or found is not None and found.kind in (ADDITIVE, INTEGER, FLOAT):
        return found
    if found is None or found.kind is None:
        return guess
    return replace(found, polarity=guess.polarity, weak=True, evidence=found.evidence + guess.evidence)


def _large_negative(ctx: ModuleContext, expr: cst.BaseExpression, scope: Scope) -> bool:
    """-inf, float('-inf'), -1e9, torch.finfo(...).min, -torch.finfo(...).max: values that mean "masked out"."""
    text = ctx.code(expr).replace(" ", "")
    if re.search(r"-inf|finfo\(.*\)\.min|-.*finfo\(.*\)\.max|\.min\b", text) or "'-inf'" in text:
        return True
    value = resolve(ctx, expr, scope)
    return value is not None and isinstance(value.value, int | float) and value.value <= -1e3


def _plain_name(expr) -> str | None:
    """The variable an argument passes without changing its values (indexing and reshaping only)."""
    while expr is not None:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SHAPE_ONLY:
            expr = expr.func.value
        else:
            return None
    return None


def _writes(scope: Scope, name: str) -> list[tuple[cst.CSTNode, cst.BaseExpression | None]]:
    """In-place writes to `name` in the scope, with the value written (None when it is not a plain value):
    `name[...] = v`, `name.fill_(v)`, `name[...].fill_(v)`, `name.masked_fill_(c, v)`, `name[...].zero_()`.
    Nested functions and classes are not looked into."""
    found: list[tuple[cst.CSTNode, cst.BaseExpression | None]] = []

    def enter(node: cst.CSTNode) -> bool:
        kind = type(node)  # concrete node classes, compared by type (isinstance goes through libcst's ABCMeta)
        if kind is cst.Assign:
            found.extend((node, node.value) for target in node.targets
                         if type(target.target) is cst.Subscript and _plain_name(target.target.value) == name)
        elif kind is cst.AugAssign:
            if _plain_name(node.target) == name:
                found.append((node, None))
        elif kind is cst.Call:
            _write_call(node, name, found)
        return kind is not cst.ClassDef and (node is scope.node or not isinstance(node, cst.FunctionDef))

    if isinstance(scope.node, cst.FunctionDef):
        walk(scope.node, enter, nothing)  # its body parsed first, if it was left for later (parse.lazy_bodies)
    else:  # the bodies left for later are those of functions, which are not looked into
        walk_parsed(scope.node, enter, nothing, nothing)
    return found


def _write_call(node: cst.Call, name: str, found: list) -> None:
    func = node.func
    if not (type(func) is cst.Attribute and func.attr.value.endswith("_") and _plain_name(func.value) == name):
        return
    method = func.attr.value
    if method == "zero_":
        found.append((node, cst.Integer("0")))
    elif method == "fill_" and len(node.args) == 1:
        found.append((node, node.args[0].value))
    elif method == "masked_fill_" and len(node.args) == 2:
        found.append((node, node.args[1].value))
    elif method not in SHAPE_ONLY:
        found.append((node, None))
