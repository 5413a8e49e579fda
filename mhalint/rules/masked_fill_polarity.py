"""MHA020 masked-fill-polarity: a masked_fill before a softmax whose fill value does not mask (-1e-9, about zero)."""

from __future__ import annotations

import math

from mhalint.analysis import dataflow
from mhalint.analysis.calls import instance
from mhalint.analysis.values import resolve
from mhalint.finding import UNSAFE, Severity, shorten
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

_WHY = """
    A softmax gives each key exp(score): a key filled by masked_fill is out of it only when the fill is far below
    every score (-inf, -1e9, torch.finfo(dtype).min). A fill near zero (-1e-9, a typo of -1e9; the negation of an
    epsilon) leaves the masked key the weight of a key that scored 0. In a torch 2.13 experiment (N=2, L=S=6, E=16;
    two padded keys) the padded keys kept 0.28 of each row's weight with -1e-9, -1e-12, -1e-7 or 0, and the output
    was 1.03 off the masked one (docs/torch-facts.md#masked-fill-polarity)."""
# Fields: `call` (the masked_fill as written, shortened), `value` (the fill as written), `number` (what it is),
# `softmax` (the softmax as written, shortened), `line` (the softmax's line).
NOT_MASKED = Message(
    "`{call}` fills with `{value}` = {number}, about zero, before the softmax at line {line}: the masked scores "
    "keep their weight",
    help="fill with a value far below the scores: `torch.finfo(scores.dtype).min` (or float('-inf'))",
    explanation=_WHY)

_FILLS = frozenset({"masked_fill", "masked_fill_"})
# A fill this close to zero leaves the masked keys among the others (exp(-1) is still a third of exp(0)).
_ABOUT_ZERO = 1.0
_SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax",
                                "torch.log_softmax", "torch.nn.functional.log_softmax",
                                "torch.special.log_softmax"})
_SOFTMAX_MODULES = frozenset({"torch.nn.Softmax", "torch.nn.LogSoftmax"})
_SOFTMAX_METHODS = frozenset({"softmax", "log_softmax"})


class MaskedFillPolarity(Rule):
    """
    ## What it does
    Flags `scores.masked_fill(mask, value)` (and `masked_fill_`) whose filled tensor goes to a softmax (directly,
    through the name it is assigned to, or in place) when `value` is about zero: a literal such as `-1e-9`,
    `float('-1e-9')`, or a name whose value the code shows (`-e` with `e=1e-12` as the parameter's default or what
    every caller passes). It is an error: the code writes both the value and the softmax.

    ## Why is this bad?
    A softmax gives each key exp(score). A masked key is out of it only when its fill is far below every score.
    A fill near zero gives it the weight of a key that scored 0, so padding (or the future) is attended, and
    nothing raises. In a torch 2.13 experiment (docs/torch-facts.md#masked-fill-polarity; N=2, L=S=6, E=16, two
    padded keys) the padded keys kept 0.28 of each row's weight with `-1e-9`, `-1e-12`, `-1e-7` or `0`, and the
    output was 1.03 off the masked one; with `-1e9`, `finfo.min` or `-inf` they kept nothing.

    ## Known problems
    A file is read only when a `masked_fill(` call holds a fill that may be about zero (an exponent such as
    `-1e-7`, `float('-1e-9')`, or a negated name) on its line or on the next four that continue it. A literal `0`
    fill is not looked for (it is the usual way to zero features, and it would bring most files to a parse), and
    a zero fill is not reported: it leaks as much, but it is also how code clears NaN scores before a softmax
    (`scores.masked_fill(scores.isnan(), 0.0)`). A value the code does not show (a config field read at run
    time) is not read. The mask's polarity (`mask == 0` with a mask that is True at padding) is not checked yet.

    ## Example
    ```python
    scores = scores.masked_fill(mask == 0, -1e-9)
    attn = F.softmax(scores, dim=-1)
    ```

    ## Use instead
    ```python
    scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    attn = F.softmax(scores, dim=-1)
    ```

    ## Fix safety
    Unsafe: the fill becomes `torch.finfo(<tensor>.dtype).min` (rows whose keys are all masked stay finite, where
    `-inf` would make them NaN) when the module imports `torch` and the tensor is a name. The outputs change, as
    they should, so `--fix` applies it only with `--unsafe-fixes`.

    ## References
    - torch 2.13 `Tensor.masked_fill`: "Fills elements of self tensor with value where mask is True"
    - docs/torch-facts.md#masked-fill-polarity
    """

    code = "MHA020"
    name = "masked-fill-polarity"
    summary = "A masked_fill before a softmax whose fill value does not mask (-1e-9, about zero)"
    # `masked_fill(` with a fill that may be about zero, on its line or on those that continue the call: an
    # exponent, `float('...e-9')`, or a negated name that is not an infinity (`-e`, not `-torch.inf`). Every
    # `masked_fill` would parse 31 more files of speed.py's corpus, mostly correct code.
    triggers = (r"\bmasked_fill_?\((?:[^()]|\([^()]*\))*,\s*(?:value\s*=\s*)?(?:-\s*[0-9.]+e-\d+"
                r"|float\(\s*['\"]-?[0-9.]*e-\d+|-\s*(?![\w.]*inf\b)[A-Za-z_][\w.]*\s*\))",)
    acts_on_passed_values = False
    matched_functions_only = True  # it reports the `masked_fill` its trigger matches

    valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def attend(scores, mask):
                scores = scores.masked_fill(mask == 0, -1e9)
                return F.softmax(scores, dim=-1)
            """,
        ),
        Valid(
            """
            import torch
            def attend(scores, mask):
                return scores.masked_fill(~mask, torch.finfo(scores.dtype).min).softmax(-1)
            """,
        ),
        Valid(
            """
            import torch
            def attend(scores, mask):
                weights = torch.softmax(scores, dim=-1)
                return weights.masked_fill(mask, -1e-9)
            """,
        ),
        Valid(
            """
            def pool(features, padding):
                features = features.masked_fill(padding.unsqueeze(-1), -1e-9)
                return features.sum(1)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def attend(scores, mask, e=1e9):
                return F.softmax(scores.masked_fill(mask == 0, -e), dim=-1)
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            def attend(scores, mask):
                scores = scores.masked_fill(mask == 0, -1e-9)
                return F.softmax(scores, dim=-1)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "`scores.masked_fill(mask == 0, -1e-9)` fills with `-1e-9` = -1e-09, about zero, before the softmax "
                "at line 5: the masked scores keep their weight"
            ),
            fixed="""
            import torch
            import torch.nn.functional as F
            def attend(scores, mask):
                scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
                return F.softmax(scores, dim=-1)
            """,
        ),
        Invalid(
            """
            import math
            import torch
            from torch import nn
            class ScaleDotProductAttention(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.softmax = nn.Softmax(dim=-1)

                def forward(self, q, k, v, mask=None, e=1e-12):
                    score = (q @ k.transpose(2, 3)) / math.sqrt(k.size(-1))
                    if mask is not None:
                        score = score.masked_fill(mask == 0, -e)
                    score = self.softmax(score)
                    return score @ v
            """,
            line=12,
            severity=Severity.ERROR,
            headline=(
                "`score.masked_fill(mask == 0, -e)` fills with `-e` = -1e-12, about zero, before the softmax at "
                "line 13: the masked scores keep their weight"
            ),
            fixed="""
            import math
            import torch
            from torch import nn
            class ScaleDotProductAttention(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.softmax = nn.Softmax(dim=-1)

                def forward(self, q, k, v, mask=None, e=1e-12):
                    score = (q @ k.transpose(2, 3)) / math.sqrt(k.size(-1))
                    if mask is not None:
                        score = score.masked_fill(mask == 0, torch.finfo(score.dtype).min)
                    score = self.softmax(score)
                    return score @ v
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F
            def attend(attn, attn_mask):
                attn = attn.float().masked_fill(attn_mask == -1, float('-1e-9'))
                return F.softmax(attn, dim=-1)
            """,
            line=3,
            severity=Severity.ERROR,
            headline=(
                "`attn.float().masked_fill(attn_mask == -...` fills with `float('-1e-9')` = -1e-09, about zero, "
                "before the softmax at line 4: the masked scores keep their weight"
            ),
        ),
    )
    example_inputs = ("import torch\nscores = attn = torch.randn(2, 4, 6, 6)\nmask = torch.ones(2, 1, 6, 6)\n"
                      "attn_mask = -mask\nq = k = v = torch.randn(2, 4, 6, 16)\n")

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value not in _FILLS:
            return
        value = _fill_value(node)
        if value is None:
            return
        found = resolve(self.context, value, self.scope)
        number = found.value if found is not None else None
        if type(number) not in (int, float) or not math.isfinite(number) or abs(number) >= _ABOUT_ZERO \
                or number == 0:
            return  # a zero fill leaks too, but is also how code clears NaN scores before a softmax
        softmax = self._softmax_after(node)
        if softmax is None:
            return  # the filled tensor is not seen going to a softmax: features zeroed, or a mask built
        self._report(node, value, number, found.trail, softmax)

    def _report(self, node: cst.Call, value: cst.BaseExpression, number: float, trail: tuple[str, ...],
                softmax: cst.Call) -> None:
        ctx = self.context
        written = ctx.code(value)
        evidence = [f"`{written}` is {number:g}" + (f" ({'; '.join(trail)})" if trail else ""),
                    f"`{shorten(ctx.code(softmax))}` at line {ctx.line(softmax)} takes the filled scores: "
                    f"a masked key keeps exp({number:g}) ~ 1, the weight of a key that scored 0"]
        receiver = node.func.value  # a name: `attn.float().masked_fill(...)` would need the converted dtype
        fix = None
        if type(receiver) is cst.Name and ctx.qualified_name(cst.Name("torch"), self.scope) == "torch":
            new = cst.parse_expression(f"torch.finfo({receiver.value}.dtype).min")
            fix = self.replacement(value, new, applicability=UNSAFE, title="fill with torch.finfo(dtype).min")
        self.report(node, NOT_MASKED, severity=Severity.ERROR, evidence=evidence, fix=fix,
                    arguments={"fill": number}, call=shorten(ctx.code(node), 50), value=written,
                    number=f"{number:g}", softmax=shorten(ctx.code(softmax)), line=ctx.line(softmax))

    # ---- where the filled tensor goes ----
    def _softmax_after(self, node: cst.Call) -> cst.Call | None:
        """The softmax that takes what `node` fills: its argument or receiver, the name the result is assigned
        to, or (`masked_fill_`) the tensor filled in place, read afterwards."""
        ctx = self.context
        direct = self._softmax_taking(node)
        if direct is not None:
            return direct
        parent = ctx.parent(node)
        if type(parent) is cst.Assign and parent.value is node and len(parent.targets) == 1 \
                and type(parent.targets[0].target) is cst.Name:
            name = parent.targets[0].target.value
            assigned = [binding for binding in ctx.bindings(name, self.scope) if binding.node is parent]
            return next((found for binding in assigned for load in dataflow.uses(ctx, binding)
                         for found in [self._softmax_taking(load)] if found is not None), None)
        receiver = node.func.value
        if node.func.attr.value == "masked_fill_" and type(parent) is cst.Expr and type(receiver) is cst.Name:
            after = ctx.line(node)
            for binding in dataflow.reaching(ctx, ctx.bindings(receiver.value, self.scope), node):
                for load in dataflow.uses(ctx, binding):
                    found = self._softmax_taking(load) if load is not receiver and ctx.line(load) > after else None
                    if found is not None:
                        return found
        return None

    def _softmax_taking(self, expr: cst.BaseExpression) -> cst.Call | None:
        """The softmax call whose input `expr` is: `F.softmax(expr, ...)`, `expr.softmax(...)`, or an
        `nn.Softmax` module called on it."""
        ctx = self.context
        parent = ctx.parent(expr)
        kind = type(parent)
        if kind is cst.Attribute and parent.value is expr and parent.attr.value in _SOFTMAX_METHODS:
            call = ctx.parent(parent)
            return call if type(call) is cst.Call and call.func is parent else None
        if kind is not cst.Arg or parent.value is not expr or parent.star:
            return None
        call = ctx.parent(parent)
        if type(call) is not cst.Call:
            return None
        first = call.args[0] is parent and parent.keyword is None
        if not first and not (parent.keyword is not None and parent.keyword.value == "input"):
            return None
        if ctx.qualified_name(call.func, self.scope) in _SOFTMAX_FUNCTIONS:
            return call
        built = instance(ctx, call.func, self.scope)
        return call if built is not None and built.api in _SOFTMAX_MODULES and first else None

    # ---- the runtime experiment ----
    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Re-create the softmax over masked scores (N=2, L=S=6, E=16, the second sample's last two keys padded)
        with the fill as the code gives it and with -inf, and measure the weight the padded keys keep
        (docs/torch-facts.md#masked-fill-polarity)."""
        from mhalint.probe import support

        n, length, e = 2, 6, 16
        fill = float(arguments.get("fill", -1e-9))
        generator = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(n, length, e, generator=generator) for _ in range(3))
        scores = q @ k.transpose(-2, -1) / e ** 0.5
        padding = torch.zeros(n, 1, length, dtype=torch.bool)
        padding[1, :, -2:] = True
        written = torch.softmax(scores.masked_fill(padding, fill), dim=-1)
        masked = torch.softmax(scores.masked_fill(padding, float("-inf")), dim=-1)
        left = float(written[1, :, -2:].sum(-1).mean())
        off = float((written @ v - masked @ v).abs().max())
        text = (f"filled with {fill:g}, the two padded keys keep {left:.2f} of each row's weight (0 with -inf) and "
                f"the output is {off:.2f} off the masked one (CPU, N={n}, L=S={length}, E={e})")
        return support.Rebuilt().outcome(left > 1e-3, text)


def _fill_value(call: cst.Call) -> cst.BaseExpression | None:
    """The `value` argument of `masked_fill(mask, value)`, by position or keyword; None where a star hides it."""
    if any(arg.star for arg in call.args):
        return None
    keyword = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "value"),
                   None)
    positional = [arg.value for arg in call.args if arg.keyword is None]
    return keyword if keyword is not None else positional[1] if len(positional) > 1 else None
