"""MHA002 mask-convention-flip: a boolean mask means "ignore" to MultiheadAttention and "attend" to SDPA."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis.calls import mask_arguments
from mhalint.analysis.masks import BOOL, Mask, MaskReader, describe
from mhalint.finding import NOT_CONFIRMED, UNSAFE, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid
from mhalint.torchapi import IGNORE, KEEP

_SILENTLY_INVERTED = """
    nn.MultiheadAttention and the Transformer classes read a boolean mask as True = ignore (torch 2.13
    `nn/modules/activation.py:1284-1299`); F.scaled_dot_product_attention reads it as True = attend
    (`nn/functional.py:6465`), and its docstring says to invert the mask when migrating from MultiheadAttention.
    Nothing raises: the mask is silently inverted, so padding is attended and real tokens are ignored.
    torch 2.13 experiment: with the mask not inverted, the output was 1.87 off the correct one for a padding mask,
    1.97 for a causal mask (docs/torch-facts.md#mask-convention).
"""

# Fields: `api` (the target, e.g. F.scaled_dot_product_attention); `parameter` and `mask` (the argument as written,
# quoted); `line` (where the mask was built); `polarity` ("True = ignore"), what the mask holds; `reads` ("True as
# attend"), what the target expects; `inverted`, the argument the fix writes.
FLIPPED_MASK = Message(
    "{api} gets {parameter}={mask}, built at line {line} as {polarity}, but it reads {reads}",
    help="invert the mask where it is passed: {inverted}",
    explanation=_SILENTLY_INVERTED)
FLIPPED_AFTER_INVERSION = Message(
    "{api} gets {parameter}={mask}, built at line {line} and inverted to {polarity}, but it reads {reads}",
    help="invert the mask where it is passed: {inverted} (or drop the earlier inversion)",
    explanation=_SILENTLY_INVERTED)
DOCUMENTED_FLIPPED = Message(
    "{api} gets {parameter}={mask}, documented at line {line} as {polarity}, but it reads {reads}",
    help="invert the mask where it is passed: {inverted}",
    explanation=_SILENTLY_INVERTED.rstrip() + """
    Here the mask's convention is what the function's docstring states about its values.
""")
LOOKS_FLIPPED = Message(
    "{api} gets {parameter}={mask}, which looks like a {polarity} mask, but it reads {reads}",
    help="if the mask is {polarity}, invert it where it is passed: {inverted}",
    explanation=_SILENTLY_INVERTED.rstrip() + """
    Here the mask's convention comes from its name or another use, not from its construction, so check it.
""")

_READS = {IGNORE: "True as ignore", KEEP: "True as attend"}


class MaskConventionFlip(Rule):
    """
    ## What it does
    Flags a boolean mask built in one convention and passed to an API that reads the other, without `~`,
    `.logical_not()` or `== 0` in between: a mask in `nn.MultiheadAttention`'s convention (True = ignore; e.g.
    `tokens == pad_id`, `torch.triu(ones, diagonal=1).bool()`, a variable named `key_padding_mask`) given to
    `F.scaled_dot_product_attention`'s `attn_mask`, or a keep-mask (True = attend; e.g. `tokens != pad_id`,
    `torch.tril(ones).bool()`, `arange(L) < lengths`) given to a MultiheadAttention or Transformer mask argument.
    The mask is followed from its construction to the call within the function (and `self.x` within the class,
    and a parameter to what the callers pass); the message names the line where it was built. A parameter whose
    docstring states what its values mean ("1 for tokens that are not masked, 0 for masked", "a True value
    indicates ... ignored") is in that convention.

    ## Why is this bad?
    The two APIs read a boolean mask in opposite directions (torch `nn/functional.py:6465` vs
    `nn/modules/activation.py:1287-1299`); SDPA's own docstring says to invert the mask when migrating from
    MultiheadAttention. Nothing raises: the mask is silently inverted, so padding is attended and real tokens are
    ignored: in a torch 2.13 experiment the output was 1.87 off for a padding mask, 1.97 for a causal mask
    (docs/torch-facts.md#mask-convention). Float masks are additive in both APIs and need no inversion
    (docs/torch-facts.md#float-masks-are-additive); they are not flagged: a float construction (`torch.ones`,
    `torch.zeros` or a triangle of them without `dtype=torch.bool`) is never this rule's, a 0/1 one is MHA008's.

    ## Known problems
    Only constructions the mask reader knows give an error: comparisons with a padding id, triangles, `arange <
    lengths`, a tokenizer mask compared with 0 or 1, a docstring that states the values. A mask built by a
    function mhalint cannot read (another package, a helper with several returns) is judged by its name at most,
    which gives a warning.

    ## Example
    ```python
    pad = tokens == PAD_ID                                  # True at padding
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])
    ```

    ## Use instead
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
    ```

    ## Fix safety
    Unsafe: `~` is added where the mask is passed (or a `~` already there is removed); where the mask's dtype is
    not known (a parameter, a name), `== 0` is added instead, which inverts a boolean or a 0/1 mask and runs for
    any dtype, where `~` raises for a float one. It changes behaviour, as it should, so `--fix` applies it only
    with `--unsafe-fixes`; check that no other use of the same mask relied on the old direction.

    ## References
    - torch 2.13 `nn/functional.py:6400-6412` and `6465`; `nn/modules/activation.py:1284-1299`;
      `nn/modules/transformer.py:195-200`
    - docs/torch-facts.md#mask-convention, docs/torch-facts.md#float-masks-are-additive
    """

    code = "MHA002"
    name = "mask-convention-flip"
    summary = "A boolean mask passed between MultiheadAttention and SDPA without inverting it"
    triggers = (torchapi.SDPA_TRIGGER, torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER,
                torchapi.MHA_FORWARD_FN_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, tokens):
                pad = tokens == 0
                return F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, L):
                keep = torch.tril(torch.ones(L, L, dtype=torch.bool))
                return F.scaled_dot_product_attention(q, k, v, keep)
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(8, 2, batch_first=True)
            def f(x, L):
                causal = nn.Transformer.generate_square_subsequent_mask(L)
                return torch.nn.functional.scaled_dot_product_attention(x, x, x, attn_mask=causal)
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, key_padding_mask):
                m = torch.zeros(key_padding_mask.shape).masked_fill(key_padding_mask, float('-inf'))
                return F.scaled_dot_product_attention(q, k, v, attn_mask=m[:, None, None, :])
            """,
        ),
        Valid(
            """
            from torch import nn
            attn = nn.MultiheadAttention(8, 2, batch_first=True)
            def f(x, tokens):
                return attn(x, x, x, key_padding_mask=tokens == 0)
            """,
        ),
        Valid(
            '''
            import torch.nn.functional as F
            def attend(q, k, v, keep):
                """keep: (N, S) bool, True for tokens to attend to."""
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
            ''',
        ),
        Valid(
            """
            def scaled_dot_product_attention(q, k, v, attn_mask): ...
            def f(q, tokens):
                return scaled_dot_product_attention(q, q, q, attn_mask=tokens == 0)
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(8, 2, batch_first=True)
            mask = torch.ones(5, 5); mask = torch.tril(mask)
            x = torch.randn(1, 5, 8)
            out = attn(x, x, x, attn_mask=mask)
            """,
        ),  # a float mask: MHA008's (0/1), never `~`'d (TypeError)
    )
    invalid = (
        Invalid(
            """
            import torch.nn.functional as F
            PAD = 0
            def f(q, k, v, tokens):
                pad = tokens == PAD
                return F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`pad[:, None, None, :]`, built at line 4 as True = "
                "ignore, but it reads True as attend"
            ),
            fixed="""
            import torch.nn.functional as F
            PAD = 0
            def f(q, k, v, tokens):
                pad = tokens == PAD
                return F.scaled_dot_product_attention(q, k, v, attn_mask=~pad[:, None, None, :])
            """,
        ),
        Invalid(
            """
            import torch
            from torch.nn.functional import scaled_dot_product_attention as sdpa
            def f(q, L):
                future = torch.triu(torch.ones(L, L), diagonal=1).bool()
                return sdpa(q, q, q, future)
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`future`, built at line 4 as True = ignore, but it "
                "reads True as attend"
            ),
            fixed="""
            import torch
            from torch.nn.functional import scaled_dot_product_attention as sdpa
            def f(q, L):
                future = torch.triu(torch.ones(L, L), diagonal=1).bool()
                return sdpa(q, q, q, ~future)
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
                def forward(self, x, lengths):
                    valid = torch.arange(x.size(1))[None, :] < lengths[:, None]
                    return self.attn(x, x, x, key_padding_mask=valid)[0]
            """,
            line=9,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets key_padding_mask=`valid`, built at line 8 as True = attend, but it reads "
                "True as ignore"
            ),
            fixed="""
            import torch
            from torch import nn
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
                def forward(self, x, lengths):
                    valid = torch.arange(x.size(1))[None, :] < lengths[:, None]
                    return self.attn(x, x, x, key_padding_mask=~valid)[0]
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F
            def f(q, k, v, key_padding_mask):
                return F.scaled_dot_product_attention(
                    q, k, v,
                    attn_mask=key_padding_mask[:, None, None, :],
                )
            """,
            line=3,
            severity=Severity.WARNING,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`key_padding_mask[:, None, None, :]`, which looks like "
                "a True = ignore mask, but it reads True as attend"
            ),
            fixed="""
            import torch.nn.functional as F
            def f(q, k, v, key_padding_mask):
                return F.scaled_dot_product_attention(
                    q, k, v,
                    attn_mask=key_padding_mask[:, None, None, :] == 0,
                )
            """,
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, tokens, pad_id):
                keep = tokens != pad_id
                pad = ~keep
                return F.scaled_dot_product_attention(q, q, q, attn_mask=pad.unsqueeze(1).unsqueeze(2))
            """,
            line=6,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`pad.unsqueeze(1).unsqueeze(2)`, built at line 4 and "
                "inverted to True = ignore, but it reads True as attend"
            ),
            fixed="""
            import torch
            import torch.nn.functional as F
            def f(q, tokens, pad_id):
                keep = tokens != pad_id
                pad = ~keep
                return F.scaled_dot_product_attention(q, q, q, attn_mask=~pad.unsqueeze(1).unsqueeze(2))
            """,
        ),
        Invalid(
            '''
            import torch.nn.functional as F
            def attend(q, k, v, padding):
                """padding: (N, S) bool, True at padding positions."""
                return F.scaled_dot_product_attention(q, k, v, attn_mask=padding[:, None, None, :])
            ''',
            line=4,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`padding[:, None, None, :]`, documented at line 3 as "
                "True = ignore, but it reads True as attend"
            ),
            fixed='''
            import torch.nn.functional as F
            def attend(q, k, v, padding):
                """padding: (N, S) bool, True at padding positions."""
                return F.scaled_dot_product_attention(q, k, v, attn_mask=~padding[:, None, None, :])
            ''',
        ),
    )
    example_inputs = (
        "import torch\nN, H, L, E = 2, 2, 6, 4\nq = k = v = torch.randn(N, H, L, E)\nx = torch.randn(N, L, 8)\n"
        "pad_id = 0\ntokens = torch.tensor([[5, 3, 2, 7, 0, 0], [4, 1, 0, 0, 0, 0]])\nlengths = torch.tensor([4, 2])\n"
        "key_padding_mask = padding = tokens == pad_id\n")
    runtime_valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(1, 2, 4, 8)
            future = torch.ones(4, 4, dtype=torch.bool).triu(1)
            F.scaled_dot_product_attention(q, q, q, attn_mask=~future)
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(1, 2, 4, 8)
            future = torch.ones(4, 4, dtype=torch.bool).triu(1)
            F.scaled_dot_product_attention(q, q, q, attn_mask=future)
            """,
            line=5,
            message="True only above the diagonal",
        ),
    )

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.masks = MaskReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        for target, parameter, convention, expr in mask_arguments(self.context, node, self.scope):
            mask = self.masks.read(expr, self.scope, node)
            if mask is None or mask.polarity is None or mask.polarity == convention:
                continue
            if mask.kind not in (BOOL, None):
                continue  # float masks (additive, 0/1 or unknown values) have no direction to flip; `~` raises
            self._report(node, target.api, parameter, convention, expr, mask)

    def _report(self, node, api, parameter, convention, expr, mask: Mask) -> None:
        inverted_after = mask.built_polarity is not None and mask.built_polarity != mask.polarity
        evidence = mask.evidence
        if mask.kind is None:  # `~` raises for a float mask; `== 0` inverts a boolean and a 0/1 one alike
            inverted, title = _compared_with_zero(expr), "invert the mask with == 0"
            evidence += ("nothing shows the mask is boolean (dtype=torch.bool, `.bool()`, a comparison): the fix "
                         "inverts it with `== 0`, which runs for any dtype (`~` raises on floats)",)
        else:
            inverted, title = _inverted(expr), "invert the mask with ~"
        found = dict(
            evidence=evidence, fix=self.replacement(expr, inverted, applicability=UNSAFE, title=title),
            arguments={"api": api, "parameter": parameter, "convention": convention, "polarity": mask.polarity,
                       "mask_expression": mask.built_from, "inverted_after": inverted_after},
            api=torchapi.short_name(api), parameter=parameter, mask=f"`{self.context.code(expr)}`",
            line=mask.origin_line, polarity=describe(mask.polarity), reads=_READS[convention],
            inverted=f"`{self.context.code(inverted)}`")
        if mask.documented:
            self.report(node, DOCUMENTED_FLIPPED, severity=Severity.ERROR, **found)
        elif mask.weak or mask.origin_line is None:  # a name or another use says the convention, or no line is known
            self.report(node, LOOKS_FLIPPED, severity=Severity.WARNING if mask.weak else Severity.ERROR, **found)
        else:
            self.report(node, FLIPPED_AFTER_INVERSION if inverted_after else FLIPPED_MASK, severity=Severity.ERROR,
                        **found)

    @staticmethod
    def guard(call) -> list:
        """MHA002: a bool causal mask in the other API's convention (only this unambiguous case is checked)."""
        from mhalint.guard import support as s
        pending = []
        if call.sdpa is not None:
            mask = call.sdpa["attn_mask"]
            if _square_bool(mask, (2, 3, 4)):
                flag = ~mask.diagonal(dim1=-2, dim2=-1).any()  # SDPA's causal keep-mask has a True diagonal
                pending.append(s.Pending(flag, lambda: _flip_message(call, "attn_mask", mask, upper=True)))
        for block in call.blocks:
            mask = block.attn_mask
            if _square_bool(mask, (2, 3)):
                flag = mask.diagonal(dim1=-2, dim2=-1).all()  # MultiheadAttention's causal mask has a False diagonal
                pending.append(s.Pending(flag,
                                       lambda mask=mask, block=block: _flip_message(call, block.attn_name, mask,
                                                                                    upper=False)))
        return pending

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Run the attention with the mask as written and inverted, as its target's convention requires; they
        differ whenever the mask is not all-True or all-False (docs/torch-facts.md#mask-convention). The mask is
        rebuilt from its construction when that uses only known torch factories, else a padding mask in the
        convention the construction gives stands in. Confirmed only when the site's construction (the finding's
        "mask_expression") was rebuilt; a stand-in, or a mask whose convention was only inferred (from a name or
        another use), makes the result reproduced, naming what stood in."""
        import ast

        from mhalint.probe import evaluator, support

        n, length = 4, 6
        mask, how = None, ""
        rebuilt = support.Rebuilt()
        expression = arguments.get("mask_expression")
        if expression:
            try:
                names = {node.id for node in ast.walk(ast.parse(expression, mode="eval"))
                         if isinstance(node, ast.Name) and node.id not in ("torch", "float", "True", "False", "None")}
                built = evaluator.evaluate_mask(expression, torch, {name: length for name in names})
            except (evaluator.Refused, SyntaxError, ValueError) as refusal:
                how = f"`{expression}` could not be rebuilt ({refusal}), so a padding mask stood in"
            else:
                if isinstance(built, torch.Tensor) and built.dim() == 2 and built.shape[0] == built.shape[1]:
                    mask = built.bool()
                    mask = ~mask if arguments.get("inverted_after") else mask
                    how = f"mask rebuilt from `{expression}` with {', '.join(sorted(names)) or 'no sizes'}={length}"
                else:
                    how = f"`{expression}` did not rebuild to an (L, L) mask, so a padding mask stood in"
        if mask is None:
            lengths = torch.tensor([length, 4, 3, 2])
            padding = torch.arange(length)[None, :] >= lengths[:, None]  # True at padding
            mask = padding if arguments.get("polarity") == IGNORE else ~padding
            how += " (lengths 6, 4, 3, 2)"
            stood = f"{describe(arguments.get('polarity'))} padding mask (lengths 6, 4, 3, 2)"
            rebuilt.assume(f"{stood} in place of `{expression}`" if expression else stood)
        required = mask if arguments.get("polarity") == arguments.get("convention") else ~mask
        written, intended = _attend(torch, arguments, mask, n, length), _attend(torch, arguments, required, n, length)
        difference = float((written - intended).abs().max())
        target = torchapi.short_name(arguments["api"])
        if arguments["api"] not in (torchapi.SDPA, torchapi.MHA):
            target += " (run as nn.MultiheadAttention, which reads masks the same way)"
        if not expression:  # the convention was inferred, not read from a construction: the premise is assumed
            assumed = f"with an assumed {describe(arguments.get('polarity'))} padding mask{how}"
            if difference > 1e-4:
                return rebuilt.verdict(f"{target} with the mask as written differs from the mask its convention "
                                       f"needs (the inverse) by {difference:.2f}")
            return NOT_CONFIRMED, f"{assumed}, the mask as written is already in {target}'s convention"
        if difference > 1e-4:
            return rebuilt.verdict(f"{target} with the mask as written differs from the mask its convention needs "
                                   f"(the inverse) by {difference:.2f}; {how}")
        return NOT_CONFIRMED, f"the mask as written is already in {target}'s convention; {how}"


def _inverted(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`~mask` for the mask as passed (`~~m` simplifies to `m`)."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return expr.expression
    if isinstance(expr, cst.Name | cst.Attribute | cst.Subscript | cst.Call):
        return cst.UnaryOperation(cst.BitInvert(), expr)
    return cst.UnaryOperation(cst.BitInvert(), expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]))


def _compared_with_zero(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`mask == 0`: the inverse of a boolean or 0/1 mask of any dtype, True where it was False or 0."""
    if not isinstance(expr, cst.Name | cst.Attribute | cst.Subscript | cst.Call):
        expr = expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return cst.Comparison(expr, [cst.ComparisonTarget(cst.Equal(), cst.Integer("0"))])


def _attend(torch, arguments: dict, mask, n: int, length: int):
    """The attention output for a boolean mask: (L, S) masks as attn_mask, (N, S) masks as padding masks."""
    torch.manual_seed(1)
    embed, heads = 16, 2
    if arguments["api"] == torchapi.SDPA:
        q, k, v = (torch.randn(n, heads, length, embed // heads) for _ in range(3))
        shaped = mask if mask.shape == (length, length) else mask[:, None, None, :]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=shaped)
    mha = torch.nn.MultiheadAttention(embed, heads, batch_first=True).train()  # slow path: no NaN shortcuts
    x = torch.randn(n, length, embed)
    keyword = "key_padding_mask" if mask.shape == (n, length) and n != length else "attn_mask"
    with torch.no_grad():
        return mha(x, x, x, need_weights=False, **{keyword: mask})[0]


# ---- the runtime check (mhalint.guard) ----
_TRIANGLES: dict[tuple, object] = {}


def _triangle(size: int, device, upper: bool):
    """A cached (size, size) bool triangle: strictly upper (triu(1)) or lower with the diagonal (tril(0))."""
    import torch
    key = (size, str(device), upper)
    ref = _TRIANGLES.get(key)
    if ref is None:
        if len(_TRIANGLES) > 16:
            _TRIANGLES.clear()
        ones = torch.ones(size, size, dtype=torch.bool, device=device)
        ref = _TRIANGLES[key] = ones.triu(1) if upper else ones.tril(0)
    return ref


def _square_bool(mask, dims) -> bool:
    import torch

    from mhalint.guard import support as s
    return s.plain(mask) and mask.dtype == torch.bool and mask.dim() in dims and mask.shape[-1] == mask.shape[-2] > 1


def _flip_message(call, name: str, mask, upper: bool) -> str | None:
    import torch

    from mhalint.guard import support as s
    ref = _triangle(mask.shape[-1], mask.device, upper)
    if not torch.equal(mask, ref.expand(mask.shape)):
        return None
    if upper:
        return s.message(
            f"F.scaled_dot_product_attention got a bool {name} {s.shape_of(mask)} True only above the diagonal: a "
            "True = ignore causal mask, but SDPA reads True as attend",
            "pass ~mask, or drop the mask and pass is_causal=True.",
            "In nn.MultiheadAttention's convention True means 'ignore', but SDPA reads True as 'attend': every query "
            "attends only to later keys, and the last query to none (its output row comes out as zeros). torch 2.13 "
            "experiment: the output was 1.97 from the causal result (docs/torch-facts.md#mask-convention).")
    return s.message(
        f"{call.api} got a bool {name} {s.shape_of(mask)} True on and below the diagonal: a True = attend causal mask, "
        "but it reads True as ignore",
        "pass ~mask, or nn.Transformer.generate_square_subsequent_mask(L).",
        f"In F.scaled_dot_product_attention's convention True means 'attend', but {call.api} reads True as "
        "'ignore': every position attends only to later positions and the last one to none, which is NaN on the "
        "inference fast path and with need_weights=True (docs/torch-facts.md#fully-masked-rows). torch 2.13 "
        "experiment: the same mix-up in the other direction was 1.97 from the causal result "
        "(docs/torch-facts.md#mask-convention).")
