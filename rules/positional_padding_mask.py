"""MHA010 positional-padding-mask: the 4th positional argument of MultiheadAttention.forward is key_padding_mask."""

from __future__ import annotations

import re

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.calls import call_target, callers, project_function, returned
from mhalint.context import Binding, Scope
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, REPRODUCED, UNSAFE, Severity, shorten
from mhalint.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid
from mhalint.analysis.vocabulary import ATTENTION_MASK_NAME, FULL, KEEPS_AXES, PADDING_NAME, SIZE_FACTORIES

_READ_AS_PADDING = """
    `MultiheadAttention.forward(query, key, value, key_padding_mask, need_weights, attn_mask, ...)` reads its 4th
    positional argument as an (N, S) padding mask (torch 2.13 `nn/modules/activation.py:1255-1265`;
    docs/torch-facts.md#positional-order). An (L, L) attention mask there raises `Expected key_padded_mask.shape[0]
    to be N, but got L` when the batch size N differs from L (`nn/functional.py:6622-6634`), and is silent when they
    are equal: row n of the mask then hides keys of sample n for every query, so what is hidden depends on the
    sample, not on the position, and early positions still see later ones. torch 2.13 experiment: the output was
    1.04 away from the intended causal result (docs/torch-facts.md#positional-order).
"""
# Fields: `mask` (the argument as written, quoted); `api` (nn.MultiheadAttention); `what` ("an (L, L) causal mask",
# "a square (L, L) mask") and `line`, the construction that shows it is an attention mask; `name`, the variable whose
# name says so; `how`, the fix in words (one of the three below).
BUILT_AS_ATTENTION_MASK = Message(
    "{mask} is passed 4th positionally to {api}, where key_padding_mask goes, but it is {what} built at line {line}",
    help="{how}",
    explanation=_READ_AS_PADDING)
NAMED_AS_ATTENTION_MASK = Message(
    "{mask} is passed 4th positionally to {api}, where key_padding_mask goes, but its name says it is an attention "
    "mask",
    help="if `{name}` is an (L, S) attention mask, {how}",
    explanation=_READ_AS_PADDING.rstrip() + """
    Here only the name `{name}` says it is an attention mask; its construction was not found, so it may be a
    padding mask after all.
""")
PASS_BY_KEYWORD = "pass it by keyword: `attn_mask={mask}`"
MERGE_WITH_ATTN_MASK = ("pass it by keyword as `attn_mask=` in place of the attn_mask the call also gives (merge "
                        "the two)")
KEYWORDS_FOR_LATER_ARGUMENTS = "pass it by keyword as `attn_mask=`, and the later positional arguments by keyword too"

# What a construction shows, as its evidence line ends: "`<code>` at line <n> is <what>".
_CAUSAL_MASK, _SQUARE_MASK = "an (L, L) causal mask", "a square (L, L) mask"
_CONSTRUCTION = re.compile(rf" at line ([0-9]+) is ({re.escape(_CAUSAL_MASK)}|{re.escape(_SQUARE_MASK)})$")
_MAX_DEPTH = 12


class PositionalPaddingMask(Rule):
    """
    ## What it does
    Flags an attention mask passed as the 4th positional argument of a `nn.MultiheadAttention` call, e.g.
    `self.attn(x, x, x, causal_mask)`: that position is `key_padding_mask`, not `attn_mask`. The argument counts
    as an attention mask when it is built as one (`torch.triu`/`tril`, `generate_square_subsequent_mask`, a
    square factory such as `torch.ones(L, L)`), followed through names, `self.` attributes and parameters; or,
    as a warning, when only its name says so (`attn_mask`, `causal_mask`, `*subsequent*`, `*look_ahead*`).

    ## Why is this bad?
    `MultiheadAttention.forward(query, key, value, key_padding_mask, need_weights, attn_mask, ...)` reads the
    4th positional argument as an `(N, S)` padding mask (docs/torch-facts.md#positional-order). With an `(L, L)`
    causal mask this raises `Expected key_padded_mask.shape[0] to be 2, but got 6` when the batch size differs
    from the sequence length, and is silent when they are equal: row `n` of the causal mask then masks keys of
    sample `n` for every query, so what is hidden depends on the sample, not on the position, and early positions
    still see later ones.
    In a torch 2.13 experiment (docs/torch-facts.md#positional-order), the output was 1.04 away from the intended
    causal result.

    ## Example
    ```python
    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
    out, _ = self.attn(x, x, x, causal, need_weights=False)
    ```

    ## Use instead
    ```python
    out, _ = self.attn(x, x, x, attn_mask=causal, need_weights=False)
    ```

    ## Fix safety
    Unsafe: the argument is passed by keyword, `attn_mask=<mask>`, when the call gives no `attn_mask` (nor
    `**kwargs`) and no positional argument after it. The mask then does what its author meant, so outputs change
    and `--fix` applies it only with `--unsafe-fixes`.

    ## References
    - torch 2.13 `nn/modules/activation.py:1255-1265` (the forward signature), `nn/functional.py:6622-6634` (the
      key_padding_mask shape check)
    - docs/torch-facts.md#positional-order and docs/torch-facts.md#entry-points
    """

    code = "MHA010"
    name = "positional-padding-mask"
    summary = "An attention mask passed 4th positionally to MultiheadAttention, where key_padding_mask goes"
    triggers = (torchapi.MHA_TRIGGER,)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid("import torch\nfrom torch import nn\nattn = nn.MultiheadAttention(16, 4, batch_first=True)\n"
              "def f(x, L):\n    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)\n"
              "    return attn(x, x, x, attn_mask=causal, need_weights=False)[0]\n"),
        Valid("from torch import nn\nattn = nn.MultiheadAttention(16, 4, batch_first=True)\n"
              "def f(x, tokens):\n    pad = tokens == 0\n    return attn(x, x, x, pad, need_weights=False)[0]\n"),
        Valid("from torch import nn\nattn = nn.MultiheadAttention(16, 4, batch_first=True)\n"
              "def f(x, key_padding_mask):\n    return attn(x, x, x, key_padding_mask)[0]\n"),
        Valid("from torch import nn\nattn = nn.MultiheadAttention(16, 4, batch_first=True)\n"
              "def f(x, attention_mask):\n    return attn(x, x, x, attention_mask == 0)[0]\n"),
        Valid("import torch\nclass MultiheadAttention:\n    def __call__(self, q, k, v, attn_mask=None): ...\n"
              "attn = MultiheadAttention()\ndef f(x, causal_mask):\n    return attn(x, x, x, causal_mask)\n"),
    )
    invalid = (
        Invalid("import torch\nfrom torch import nn\nclass Block(nn.Module):\n    def __init__(self):\n"
                "        super().__init__()\n        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)\n"
                "    def forward(self, x):\n        L = x.size(1)\n"
                "        causal = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)\n"
                "        return self.attn(x, x, x, causal, need_weights=False)[0]\n",
                line=10, message="`causal` is passed 4th positionally to nn.MultiheadAttention, where "
                "key_padding_mask goes, but it is an (L, L) causal mask built at line 9", severity=Severity.ERROR),
        Invalid("from torch import nn\nattn = nn.MultiheadAttention(16, 4)\n"
                "def f(x):\n    m = nn.Transformer.generate_square_subsequent_mask(x.size(0))\n"
                "    return attn(x, x, x, m)[0]\n", line=5, message="but it is an (L, L) causal mask built at line 4",
                severity=Severity.ERROR),
        Invalid("from torch import nn\nattn = nn.MultiheadAttention(16, 4)\n"
                "def f(x, causal_mask):\n    return attn(x, x, x, causal_mask)[0]\n", line=4,
                message="`causal_mask` is passed 4th positionally", severity=Severity.WARNING),
    )

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is None or target.api != torchapi.MHA:
            return
        arg = target.arguments.by_name.get("key_padding_mask")
        if arg is None or arg.keyword is not None:
            return
        expr = arg.value
        if isinstance(expr, cst.Name) and expr.value == "None":
            return
        verdict, evidence, kind = self._shape(expr, self.scope, node, 0)
        if verdict == "padding":
            return
        if verdict == "attention":
            severity = Severity.ERROR
        else:
            name = _name_of(expr)
            if name is None or not ATTENTION_MASK_NAME.search(name) or PADDING_NAME.search(name):
                return
            severity = Severity.WARNING
            evidence = [f"the name `{name}` says it is an attention mask; its construction was not found, so it "
                        "may be a padding mask after all"]
        self._report(node, arg, target, evidence, severity, kind)

    def _report(self, node: cst.Call, arg: cst.Arg, target, evidence: list[str], severity: Severity,
                kind: str | None) -> None:
        ctx = self.context
        written = ctx.code(arg.value)
        position = next(i for i, a in enumerate(node.args) if a is arg)
        later_positional = any(a.keyword is None and not a.star for a in node.args[position + 1:])
        fixable = "attn_mask" not in target.arguments.by_name and not later_positional and not target.arguments.opaque
        fix = None
        if fixable:
            keyword = arg.with_changes(keyword=cst.Name("attn_mask"), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
            fix = self.replacement(arg, keyword, applicability=UNSAFE, title="pass the mask as attn_mask=")
        if fixable:
            how = PASS_BY_KEYWORD.format(mask=written)
        elif "attn_mask" in target.arguments.by_name:
            how = MERGE_WITH_ATTN_MASK
        else:
            how = KEYWORDS_FOR_LATER_ARGUMENTS
        built = severity == Severity.ERROR  # the construction shows it: the chain's last line of evidence names it
        what, line = (_construction(evidence[-1]) if built and evidence else None) or ("an attention mask",
                                                                                       ctx.line(arg.value))
        self.report(
            node, BUILT_AS_ATTENTION_MASK if built else NAMED_AS_ATTENTION_MASK, severity=severity,
            evidence=evidence, fix=fix,
            arguments={"api": torchapi.MHA, "mask_kind": kind, "by_construction": built,
                       "passed_as": "key_padding_mask"},
            mask=f"`{written}`", api=torchapi.short_name(torchapi.MHA), how=how, what=what, line=line,
            name=_name_of(arg.value) or written)

    # ---- what the argument is ----
    def _shape(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode,
               depth: int) -> tuple[str | None, list[str], str | None]:
        """("attention" | "padding" | None, evidence, "additive" | "bool" | None) from how `expr` was built."""
        ctx = self.context
        if depth > _MAX_DEPTH:
            return None, [], None
        if isinstance(expr, cst.Name):
            return self._name(expr.value, scope, use, depth)
        if isinstance(expr, cst.Attribute):
            bindings = ctx.attribute_bindings(expr, scope)
            if bindings is not None:
                if len(bindings) == 1 and bindings[0].value is not None:
                    b = bindings[0]
                    verdict, evidence, kind = self._shape(b.value, b.scope, b.node, depth + 1)
                    if verdict is not None:
                        return verdict, [f"`self.{expr.attr.value}` is set at line {ctx.line(b.node)}", *evidence], kind
            return (("padding", [], None) if PADDING_NAME.search(expr.attr.value) else (None, [], None))
        if isinstance(expr, cst.Subscript):
            return self._shape(expr.value, scope, use, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self._shape(expr.expression, scope, use, depth + 1)
        if isinstance(expr, cst.Comparison):
            text = ctx.code(expr)
            if re.search(r"pad|arange|len|token|ids?\b|input", text, re.IGNORECASE):  # per-token data: (N, S)
                return "padding", [], "bool"
            verdict, evidence, _ = self._shape(expr.left, scope, use, depth + 1)
            return verdict, evidence, "bool"
        if isinstance(expr, cst.Call):
            return self._call(expr, scope, use, depth)
        return None, [], None

    def _call(self, call: cst.Call, scope: Scope, use, depth) -> tuple[str | None, list[str], str | None]:
        ctx = self.context
        name = ctx.qualified_name(call.func, scope)
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        text, line = shorten(ctx.code(call)), ctx.line(call)
        if name == torchapi.GENERATE_SQUARE_SUBSEQUENT_MASK or method == "generate_square_subsequent_mask":
            return "attention", [f"`{text}` at line {line} is {_CAUSAL_MASK}"], "additive"
        if name in ("torch.triu", "torch.tril") or method in ("triu", "tril"):
            return "attention", [f"`{text}` at line {line} is {_CAUSAL_MASK}"], "bool"
        positional = [a.value for a in call.args if a.keyword is None and not a.star]
        if (name in SIZE_FACTORIES or name == FULL) and not any(a.star for a in call.args):
            sizes = positional[:1] if name == "torch.full" else positional
            if len(sizes) == 1 and isinstance(sizes[0], (cst.Tuple, cst.List)):
                sizes = [e.value for e in sizes[0].elements]
            if len(sizes) == 2 and ctx.code(sizes[0]) == ctx.code(sizes[1]):
                return "attention", [f"`{text}` at line {line} is {_SQUARE_MASK}"], None
            return None, [], None
        if method in KEEPS_AXES:
            verdict, evidence, kind = self._shape(call.func.value, scope, use, depth + 1)
            if method in ("float", "half", "double", "bfloat16") and kind == "bool":
                kind = "float"
            if method == "bool":
                kind = "bool"
            if method in ("masked_fill", "masked_fill_") and verdict is None:
                positional_mask = positional[:1]
                if positional_mask:
                    verdict, evidence, _ = self._shape(positional_mask[0], scope, use, depth + 1)
                kind = "additive"
            return verdict, evidence, kind
        function = project_function(self.context, call, scope)
        if function is not None:
            values = returned(function)
            if len(values) == 1:
                return self._shape(values[0], function, values[0], depth + 1)
        return None, [], None

    def _name(self, name: str, scope: Scope, use: cst.CSTNode, depth: int):
        ctx = self.context
        bindings = ctx.bindings(name, scope)
        binding = dataflow.reaching_one(self.context, bindings, use)
        verdict, evidence, kind = None, [], None
        if binding is not None and binding.kind == "param":
            verdict, evidence, kind = self._parameter(name, binding, depth)
        elif binding is not None and binding.kind == "assign" and binding.value is not None:
            verdict, evidence, kind = self._shape(binding.value, binding.scope, binding.node, depth + 1)
            if verdict == "attention":
                first = evidence[0] if evidence else ""
                if first.startswith(f"`{shorten(ctx.code(binding.value))}` at line"):
                    evidence = [f"`{name}` = {first}", *evidence[1:]]
                else:
                    evidence = [f"`{name} = {shorten(ctx.code(binding.value))}` at line {ctx.line(binding.node)}",
                                *evidence]
        if verdict is None and PADDING_NAME.search(name):
            return "padding", [], None
        return verdict, evidence, kind

    def _parameter(self, name: str, binding: Binding, depth: int):
        """A parameter holds what the module's callers pass; they must all be attention masks."""
        found = []
        for site in callers(self.context, binding.scope):
            argument = site.arguments.get(name)
            if argument is None:
                argument = binding.value if site.arguments.absent(name) else None
            if argument is None or (isinstance(argument, cst.Name) and argument.value == "None"):
                continue
            verdict, evidence, kind = self._shape(argument, site.scope, site.call, depth + 1)
            if verdict is None:
                return None, [], None
            found.append((verdict, [f"`{name}` receives `{shorten(self.context.code(argument))}` from the call at "
                                    f"line {self.context.line(site.call)}", *evidence], kind))
        if not found or any(f[0] != found[0][0] for f in found):
            return None, [], None
        return found[0]

    # ---- the runtime experiment ----
    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """A causal (L, L) mask passed as the site passes it (4th positionally, i.e. as key_padding_mask; or as
        attn_mask= at a fixed site): with N == L == 6 it is compared with the mask passed as attn_mask=, and with
        N=2, L=6 the positional form raises (docs/torch-facts.md#positional-order). Confirmed when the site's
        construction shows an attention mask; when only its name says so, a causal mask stands in for it and the
        result is only reproduced, which says so."""
        embed, heads, length = 16, 4, 6
        torch.manual_seed(0)
        mha = torch.nn.MultiheadAttention(embed, heads, dropout=0.0, batch_first=True).train()
        blocked = torch.ones(length, length, dtype=torch.bool).triu(1)
        if arguments.get("mask_kind") == "additive":
            mask = torch.zeros(length, length).masked_fill(blocked, float("-inf"))
            what = "an additive causal mask"
        else:
            mask, what = blocked, "a boolean causal mask"
        keyword = arguments.get("passed_as", "key_padding_mask")
        with torch.no_grad():
            x = torch.randn(length, length, embed)
            written = mha(x, x, x, need_weights=False, **{keyword: mask})[0]
            intended = mha(x, x, x, attn_mask=mask, need_weights=False)[0]
            try:
                y = torch.randn(2, length, embed)
                mha(y, y, y, need_weights=False, **{keyword: mask})
                error = "no error"
            except (AssertionError, RuntimeError) as raised:
                error = f"{type(raised).__name__}: {str(raised).splitlines()[0]}"
        difference = float((written - intended).abs().max())
        by_construction = arguments.get("by_construction", True)
        stand_in = "" if by_construction else "; the site's mask was known by its name only, so a causal mask stood in"
        sizes = f"E={embed}, h={heads}, L={length}, {what}{stand_in}"
        if difference > 1e-4:
            found = (f"with N == L == {length} the call runs silently and differs from attn_mask= by {difference:.2f}; "
                     f"with N=2 it raises {error} ({sizes})")
            if not by_construction:  # that it is an (L, L) attention mask is the pitfall's premise, assumed
                return REPRODUCED, f"reproduced with assumed (L, L) causal mask: {found}"
            return CONFIRMED, found
        return NOT_CONFIRMED, (f"with N == L == {length} the mask as passed ({keyword}) gives the attn_mask= result "
                               f"(diff {difference:.1e}); with N=2: {error} ({sizes})")


def _construction(evidence: str) -> tuple[str, int] | None:
    """(what the construction shows, its line), read from the construction's line of evidence."""
    found = _CONSTRUCTION.search(evidence)
    return (found.group(2), int(found.group(1))) if found else None


def _name_of(expr: cst.BaseExpression) -> str | None:
    """The variable an argument passes: `causal_mask`, `self.attn_mask`, `mask[:L, :L]`, `mask.to(x.device)`."""
    while True:
        if isinstance(expr, cst.Name):
            return expr.value
        if isinstance(expr, cst.Attribute):
            return expr.attr.value
        if isinstance(expr, cst.Subscript):
            expr = expr.value
        elif (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
              and expr.func.attr.value in KEEPS_AXES):
            expr = expr.func.value
        else:
            return None
