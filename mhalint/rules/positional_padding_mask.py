"""MHA010 positional-padding-mask: the 4th positional argument of MultiheadAttention.forward is key_padding_mask."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis.calls import call_target
from mhalint.analysis.mask_axes import LIKELY, PER_SAMPLE, MaskAxesReader
from mhalint.analysis.masks import MaskReader
from mhalint.analysis.vocabulary import ATTENTION_MASK_NAME, KEEPS_AXES, PADDING_NAME
from mhalint.finding import NOT_CONFIRMED, UNSAFE, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

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

    ## Known problems
    Only calls that resolve to torch's `nn.MultiheadAttention` are checked. A project or foreign attention class
    with its own parameter order is not.

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
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, L):
                causal = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
                return attn(x, x, x, attn_mask=causal, need_weights=False)[0]
            """,
        ),
        Valid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, tokens):
                pad = tokens == 0
                return attn(x, x, x, pad, need_weights=False)[0]
            """,
        ),
        Valid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, key_padding_mask):
                return attn(x, x, x, key_padding_mask)[0]
            """,
        ),
        Valid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(16, 4, batch_first=True)
            def f(x, attention_mask):
                return attn(x, x, x, attention_mask == 0)[0]
            """,
        ),
        Valid(
            """
            import torch
            class MultiheadAttention:
                def __call__(self, q, k, v, attn_mask=None): ...
            attn = MultiheadAttention()
            def f(x, causal_mask):
                return attn(x, x, x, causal_mask)
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
                def forward(self, x):
                    L = x.size(1)
                    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
                    return self.attn(x, x, x, causal, need_weights=False)[0]
            """,
            line=10,
            severity=Severity.ERROR,
            headline=(
                "`causal` is passed 4th positionally to nn.MultiheadAttention, where key_padding_mask goes, but it is "
                "an (L, L) causal mask built at line 9"
            ),
            fixed="""
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
                def forward(self, x):
                    L = x.size(1)
                    causal = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)
                    return self.attn(x, x, x, attn_mask=causal, need_weights=False)[0]
            """,
        ),
        Invalid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(16, 4)
            def f(x):
                m = nn.Transformer.generate_square_subsequent_mask(x.size(0))
                return attn(x, x, x, m)[0]
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "`m` is passed 4th positionally to nn.MultiheadAttention, where key_padding_mask goes, but it is an "
                "(L, L) causal mask built at line 4"
            ),
            fixed="""
            from torch import nn
            attn = nn.MultiheadAttention(16, 4)
            def f(x):
                m = nn.Transformer.generate_square_subsequent_mask(x.size(0))
                return attn(x, x, x, attn_mask=m)[0]
            """,
        ),
        Invalid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(16, 4)
            def f(x, causal_mask):
                return attn(x, x, x, causal_mask)[0]
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "`causal_mask` is passed 4th positionally to nn.MultiheadAttention, where key_padding_mask goes, but "
                "its name says it is an attention mask"
            ),
            fixed="""
            from torch import nn
            attn = nn.MultiheadAttention(16, 4)
            def f(x, causal_mask):
                return attn(x, x, x, attn_mask=causal_mask)[0]
            """,
        ),
    )
    example_inputs = (  # N == L, so that x fits the batch-first and the sequence-first examples alike
        "import torch\nx = torch.randn(4, 4, 16)\ncausal_mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), 1)\n")

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.mask_axes = MaskAxesReader(context)
        self.masks = MaskReader(context)

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
        axes = self.mask_axes.read(expr, self.scope, node)
        if axes.pair is None and axes.samples in (PER_SAMPLE, LIKELY):
            return  # a per-sample (N, S) mask is what goes there
        evidence = list(axes.evidence)
        if axes.pair is None:
            name = _name_of(expr)
            if name is None or not ATTENTION_MASK_NAME.search(name) or PADDING_NAME.search(name):
                return
            evidence = [f"the name `{name}` says it is an attention mask; its construction was not found, so it "
                        "may be a padding mask after all"]
        mask = self.masks.read(expr, self.scope, node)
        self._report(node, arg, target, evidence, axes.pair, mask.kind if mask is not None else None)

    def _report(self, node: cst.Call, arg: cst.Arg, target, evidence: list[str], pair: tuple[str, int] | None,
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
            # the call, not the argument: an argument's code has its comma, which its span has not, and that
            # mismatch would render the whole module for each fix (quadratic in a file of many)
            fix = self.replacement(node, node.with_changes(args=[keyword if a is arg else a for a in node.args]),
                                   applicability=UNSAFE, title="pass the mask as attn_mask=")
        if fixable:
            how = PASS_BY_KEYWORD.format(mask=written)
        elif "attn_mask" in target.arguments.by_name:
            how = MERGE_WITH_ATTN_MASK
        else:
            how = KEYWORDS_FOR_LATER_ARGUMENTS
        built = pair is not None  # the construction shows query and key axes
        what, line = pair or ("an attention mask", ctx.line(arg.value))
        self.report(
            node, BUILT_AS_ATTENTION_MASK if built else NAMED_AS_ATTENTION_MASK,
            severity=Severity.ERROR if built else Severity.WARNING,
            evidence=evidence, fix=fix,
            arguments={"api": torchapi.MHA, "mask_kind": kind, "by_construction": built,
                       "passed_as": "key_padding_mask"},
            mask=f"`{written}`", api=torchapi.short_name(torchapi.MHA), how=how, what=what, line=line,
            name=_name_of(arg.value) or written)

    # ---- the runtime experiment ----
    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """A causal (L, L) mask passed as the site passes it (4th positionally, i.e. as key_padding_mask; or as
        attn_mask= at a fixed site): with N == L == 6 it is compared with the mask passed as attn_mask=, and with
        N=2, L=6 the positional form raises (docs/torch-facts.md#positional-order). The site's mask is not
        rebuilt: a causal mask of its kind stands in (for an attention mask its construction shows, or, when only
        its name says so, for the premise that it is one), so the result is reproduced, and says which."""
        from mhalint.probe import support

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
        rebuilt = support.Rebuilt()
        if arguments.get("by_construction", True):  # an (L, L) attention mask: its contents are not rebuilt
            stand_in = "; the site's attention mask is not rebuilt, so a causal mask of its kind stood in"
            rebuilt.assume(f"{length} x {length} causal mask contents")
        else:  # that it is an (L, L) attention mask at all is the pitfall's premise
            stand_in = "; the site's mask was known by its name only, so a causal mask stood in"
            rebuilt.assume("(L, L) causal mask")
        sizes = f"E={embed}, h={heads}, L={length}, {what}{stand_in}"
        if difference > 1e-4:
            found = (f"with N == L == {length} the call runs silently and differs from attn_mask= by {difference:.2f}; "
                     f"with N=2 it raises {error} ({sizes})")
            return rebuilt.verdict(found)
        return NOT_CONFIRMED, (f"with N == L == {length} the mask as passed ({keyword}) gives the attn_mask= result "
                               f"(diff {difference:.1e}); with N=2: {error} ({sizes})")


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
