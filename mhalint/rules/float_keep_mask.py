"""MHA008 float-keep-mask: a 0/1 float mask is added to the attention scores, so it masks nothing."""

from __future__ import annotations

from dataclasses import replace

from mhalint import torchapi
from mhalint.analysis.calls import mask_arguments
from mhalint.analysis.masks import ZERO_ONE, Mask, MaskReader
from mhalint.context import Scope
from mhalint.finding import NOT_CONFIRMED, UNSAFE, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid
from mhalint.torchapi import IGNORE, KEEP

_ADDED = """
    {api} adds a floating-point mask to the attention scores, as all of torch's attention APIs do (torch 2.13
    `nn/modules/activation.py:1288, 1298-1299`, `nn/functional.py:6466`): a float mask is not a selection, so a
    mask of 0s and 1s masks nothing, it only adds +1 to some scores, and nothing raises or warns.
    torch 2.13 experiment: with a 0/1 keep-mask given as a padding mask, the output was 0.676 away from the
    correctly masked result and 0.325 from the result with no mask at all
    (docs/torch-facts.md#float-masks-are-additive).
    A boolean mask selects: F.scaled_dot_product_attention reads True as attend, nn.MultiheadAttention and the
    Transformer classes read True as ignore (docs/torch-facts.md#mask-convention).
"""
# Fields: `api` (the target, e.g. F.scaled_dot_product_attention); `parameter` and `mask` (the argument as written,
# quoted); `line` (where the mask was built); `meaning` ("1 = attend"), what the 1s of the mask mean; `reads`
# ("True = ignore"), the target's boolean convention; `suggestion`, the boolean mask the fix writes.
ZERO_ONE_MASK = Message(
    "{api} gets {parameter}={mask}, a 0/1 float mask ({meaning}) built at line {line}: added to the scores, it "
    "masks nothing",
    help="pass a boolean mask in {api}'s convention ({reads}): {suggestion}",
    explanation=_ADDED)
ZERO_ONE_MASK_MEANING_GUESSED = Message(
    "{api} gets {parameter}={mask}, a 0/1 float mask (likely {meaning}) built at line {line}: added to the "
    "scores, it masks nothing",
    help="pass a boolean mask in {api}'s convention ({reads}), or an additive one (0 where attended, -inf where "
         "masked)",
    explanation=_ADDED.rstrip() + """
    Here what the 1s mean comes from a name or another use of the mask, not from its construction, so no
    automatic fix is offered.
""")
ZERO_ONE_MASK_MEANING_UNKNOWN = Message(
    "{api} gets {parameter}={mask}, a 0/1 float mask built at line {line}: added to the scores, it masks nothing",
    help="pass a boolean mask in {api}'s convention ({reads}), or an additive one (0 where attended, -inf where "
         "masked)",
    explanation=_ADDED)

_MEANING = {KEEP: "1 = attend", IGNORE: "1 = ignore"}
_READS = {IGNORE: "True = ignore", KEEP: "True = attend"}


class FloatKeepMask(Rule):
    """
    ## What it does
    Flags a mask of 0s and 1s in a floating dtype given as a mask argument of `F.scaled_dot_product_attention`
    (`attn_mask`), `nn.MultiheadAttention` (`attn_mask`, `key_padding_mask`), `F.multi_head_attention_forward`
    or the Transformer classes (`src_mask`, `tgt_key_padding_mask`, ...): `torch.tril(torch.ones(L, L))`, a
    `torch.ones`/`torch.zeros` tensor whose entries are then set to 0 or 1, a boolean mask turned into floats
    with `.float()`/`.to(q.dtype)`/`.type_as(q)`, or `1 - mask.float()`. The mask is followed through local
    names, `self.x` attributes (also `register_buffer`) and shape-only operations. A 0/1 mask that is turned into
    an additive one (`masked_fill(m == 0, float('-inf'))`, `(1 - m) * -1e9`) is correct and is not flagged.
    It is an error when the code shows the mask is boolean or 0/1 (its construction, or what the callers in the
    file pass); `keep.float()` of a tensor only its name (`keep`, `valid`) says is a selection is a warning.

    ## Why is this bad?
    A floating-point mask is not a selection: all these APIs add it to the attention scores (torch 2.13
    `nn/modules/activation.py:1288, 1298-1299`, `nn/functional.py:6466`). A 0/1 mask therefore masks nothing; it
    only adds +1 to some scores. Nothing raises or warns. In a torch 2.13 experiment
    (docs/torch-facts.md#float-masks-are-additive), a 0/1 keep-mask given as a padding mask left the output 0.676
    away from the correctly masked result and 0.325 from the result with no mask at all.

    ## Known problems
    A mask built by a function mhalint cannot read, or loaded from disk, is not seen. A `torch.ones`/`zeros`
    tensor whose entries are set in another function is unknown.

    ## Example
    ```python
    causal = torch.tril(torch.ones(L, L))                    # 1 = may attend
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
    ```

    ## Use instead
    ```python
    causal = torch.tril(torch.ones(L, L, dtype=torch.bool))  # True = may attend (SDPA's convention)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
    ```
    For `nn.MultiheadAttention` and the Transformer classes a boolean mask means True = ignore, so a 0/1 keep-mask
    `m` becomes `m == 0`; or build an additive mask (0 where attended, `-inf` where masked).

    ## Fix safety
    Unsafe, and offered only when the mask's meaning is known from its construction: for SDPA a keep-mask `m`
    becomes `m.bool()` and an ignore-mask `m == 0`; for MultiheadAttention and the Transformer classes a
    keep-mask becomes `m == 0` and an ignore-mask `m.bool()`. It changes the output (the mask starts masking),
    as it should, and `--fix` applies it only with `--unsafe-fixes`.

    ## References
    - torch 2.13 `nn/modules/activation.py:1284-1299`, `nn/functional.py:6463-6466`,
      `nn/modules/transformer.py:195-200`
    - docs/torch-facts.md#mask-convention and docs/torch-facts.md#float-masks-are-additive
    """

    code = "MHA008"
    name = "float-keep-mask"
    summary = "A 0/1 float mask given where float masks are added to the scores: it masks nothing"
    triggers = (torchapi.SDPA_TRIGGER, torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER,
                torchapi.MHA_FORWARD_FN_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, L):
                keep = torch.tril(torch.ones(L, L, dtype=torch.bool))
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, L):
                keep = torch.tril(torch.ones(L, L))
                bias = keep.masked_fill(keep == 0, float('-inf'))
                return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            class SelfAttention(nn.Module):
                def __init__(self, block_size):
                    super().__init__()
                    self.register_buffer('bias', torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))
                def forward(self, att, T):
                    return att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))
            """,  # noqa: E501 -- a line of the example's code
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 2, batch_first=True)
            def f(x, tokens):
                keep = (tokens != 0).float()
                return attn(x, x, x, key_padding_mask=(1.0 - keep) * -1e9)[0]
            """,
        ),
        Valid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 2, batch_first=True)
            def f(x, L):
                m = torch.zeros(L, L)
                m[0, 1:] = float('-inf')
                return attn(x, x, x, attn_mask=m)[0]
            """,
        ),
        Valid(
            """
            def scaled_dot_product_attention(q, k, v, attn_mask): ...
            import torch
            out = scaled_dot_product_attention(1, 2, 3, attn_mask=torch.tril(torch.ones(4, 4)))
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, L):
                causal = torch.tril(torch.ones(L, L))
                return F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`causal`, a 0/1 float mask (1 = attend) built at line "
                "4: added to the scores, it masks nothing"
            ),
            fixed="""
            import torch
            import torch.nn.functional as F
            def f(q, k, v, L):
                causal = torch.tril(torch.ones(L, L))
                return F.scaled_dot_product_attention(q, k, v, attn_mask=causal.bool())
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
                    self.register_buffer('mask', torch.tril(torch.ones(n, n)))
                def forward(self, x):
                    return self.attn(x, x, x, attn_mask=self.mask)[0]
            """,
            line=9,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets attn_mask=`self.mask`, a 0/1 float mask (1 = attend) built at line 7: "
                "added to the scores, it masks nothing"
            ),
            fixed="""
            import torch
            from torch import nn
            class Block(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
                    self.register_buffer('mask', torch.tril(torch.ones(n, n)))
                def forward(self, x):
                    return self.attn(x, x, x, attn_mask=self.mask == 0)[0]
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 2, batch_first=True)
            def f(x, tokens, pad_id):
                keep = (tokens != pad_id).float()
                return attn(x, x, x, key_padding_mask=keep)[0]
            """,
            line=6,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets key_padding_mask=`keep`, a 0/1 float mask (1 = attend) built at line 5: "
                "added to the scores, it masks nothing"
            ),
            fixed="""
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(16, 2, batch_first=True)
            def f(x, tokens, pad_id):
                keep = (tokens != pad_id).float()
                return attn(x, x, x, key_padding_mask=keep == 0)[0]
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn
            layer = nn.TransformerEncoderLayer(16, 2, batch_first=True)
            def f(x, lengths):
                valid = torch.ones(x.size(0), x.size(1))
                for i, n in enumerate(lengths):
                    valid[i, n:] = 0
                return layer(x, src_key_padding_mask=valid)
            """,
            line=8,
            severity=Severity.ERROR,
            headline=(
                "nn.TransformerEncoderLayer gets src_key_padding_mask=`valid`, a 0/1 float mask built at line 5: added "
                "to the scores, it masks nothing"
            ),
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            def f(q, k, v, tokens):
                m = (tokens == 0).to(q.dtype)
                return F.scaled_dot_product_attention(q, k, v, m[:, None, None, :])
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`m[:, None, None, :]`, a 0/1 float mask built at line "
                "4: added to the scores, it masks nothing"
            ),
        ),
        Invalid(
            """
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(8, 2, batch_first=True)
            mask = torch.ones(5, 5); mask = torch.tril(mask)
            x = torch.randn(1, 5, 8)
            out = attn(x, x, x, attn_mask=mask)
            """,
            line=6,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets attn_mask=`mask`, a 0/1 float mask (1 = attend) built at line 4: added to "
                "the scores, it masks nothing"
            ),
            fixed="""
            import torch
            from torch import nn
            attn = nn.MultiheadAttention(8, 2, batch_first=True)
            mask = torch.ones(5, 5); mask = torch.tril(mask)
            x = torch.randn(1, 5, 8)
            out = attn(x, x, x, attn_mask=mask == 0)
            """,
        ),
    )
    example_inputs = (
        "import torch\nN, H, L, E = 2, 2, 6, 4\nn = L\nq = k = v = torch.randn(N, H, L, E)\nx = torch.randn(N, L, 16)\n"
        "pad_id = 0\ntokens = torch.tensor([[5, 3, 2, 7, 0, 0], [4, 1, 0, 0, 0, 0]])\n")
    runtime_valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(1, 2, 4, 8)
            F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4).tril().bool())
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(1, 2, 4, 8)
            F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4).tril())
            """,
            line=4,
            message="a float attn_mask of only 0s and 1s",
        ),
    )

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.masks = MaskReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        for target, parameter, convention, expr in mask_arguments(self.context, node, self.scope):
            mask = self._zero_one(expr, self.scope, node)
            if mask is not None:
                self._report(node, target.api, parameter, convention, expr, mask)

    def _zero_one(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> Mask | None:
        """The argument as a 0/1 float mask, with the construction that shows it; None for any other mask."""
        mask = self.masks.read(expr, scope, use)
        if mask is None or mask.kind != ZERO_ONE or not mask.evidence:
            return None  # `torch.ones(L, L)` alone adds 1 everywhere: it shifts nothing
        if mask.built_from and not any("0/1 float" in e for e in mask.evidence):
            mask = replace(mask, evidence=mask.evidence + (
                f"`{mask.built_from}` has no dtype=torch.bool, so it holds 0/1 floats",))
        return mask

    # ---- the finding ----
    def _report(self, node, api, parameter, convention, expr, mask: Mask) -> None:
        name = torchapi.short_name(api)
        fix, suggestion = None, None
        if mask.polarity in _MEANING and not mask.weak:
            fix_expr, suggestion = self._corrected(expr, mask.polarity, convention)
            fix = self.replacement(expr, fix_expr, applicability=UNSAFE,
                                   title=f"pass a boolean mask in {name}'s convention")
        named_only = mask.weak and mask.polarity is None  # even the 0/1 values rest on a name
        found = dict(
            severity=Severity.WARNING if named_only else Severity.ERROR, evidence=mask.evidence, fix=fix, arguments={
                "api": api, "parameter": parameter, "convention": convention, "kind": ZERO_ONE,
                "polarity": mask.polarity,
                "mask_expression": mask.built_from,
                "inverted_after": mask.built_polarity is not None and mask.polarity is not None
                and mask.built_polarity != mask.polarity},
            api=name, parameter=parameter, mask=f"`{self.context.code(expr)}`",
            line=mask.origin_line or self.context.line(expr), meaning=_MEANING.get(mask.polarity, ""),
            reads=_READS[convention], suggestion=f"`{suggestion}`" if suggestion else "")
        if fix is not None:
            self.report(node, ZERO_ONE_MASK, **found)
        elif mask.polarity in _MEANING:  # the 1s' meaning rests on a name or another use: no fix
            self.report(node, ZERO_ONE_MASK_MEANING_GUESSED, **found)
        else:
            self.report(node, ZERO_ONE_MASK_MEANING_UNKNOWN, **found)

    def _corrected(self, expr: cst.BaseExpression, polarity: str, convention: str):
        """The boolean mask in the target's convention: `m.bool()` when 1 already means what True must mean,
        else `m == 0`."""
        atom = expr if isinstance(expr, cst.Name | cst.Attribute | cst.Subscript | cst.Call) else \
            expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        if polarity == convention:
            new = cst.Call(func=cst.Attribute(value=atom, attr=cst.Name("bool")))
        else:
            new = cst.Comparison(left=atom, comparisons=[cst.ComparisonTarget(
                operator=cst.Equal(), comparator=cst.Integer("0"))])
        return new, self.context.module.code_for_node(new)

    @staticmethod
    def guard(call) -> list:
        """MHA008: a floating-point mask whose values are only 0 and 1 (at least one 1)."""
        import torch

        from mhalint.guard import support as s
        pending = []
        seen: set[int] = set()
        for name, mask, _ in s.masks(call):
            if not s.plain(mask) or not mask.is_floating_point() or mask.numel() == 0 or id(mask) in seen:
                continue
            seen.add(id(mask))
            low, high = torch.aminmax(mask)  # one pass; the exact test runs only when this range fits
            flag = (low >= 0) & (high == 1)
            pending.append(s.Pending(flag, lambda name=name, mask=mask: _float_keep_message(call, name, mask)))
        return pending

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Run the attention with the 0/1 float mask as written (added to the scores), with the boolean mask it
        stands for in the target's convention, and with no mask (docs/torch-facts.md#float-masks-are-additive).
        The mask is rebuilt from its construction when that uses only known torch factories; otherwise a causal
        (tril) mask, or a padding mask for a padding-mask argument, stands in. Confirmed only when the site's
        mask was rebuilt and what its 1s mean is known from its construction; with a stand-in mask or an assumed
        meaning (1 = attend) the result is only reproduced, which says so."""
        from mhalint.probe import support

        n, length = 4, 6
        parameter = str(arguments.get("parameter", "attn_mask"))
        padding = "key_padding_mask" in parameter
        polarity = arguments.get("polarity")
        rebuilt = support.Rebuilt()  # what the experiment assumed in place of the site's evidence
        ones, how = _rebuild(torch, arguments.get("mask_expression"), length, padding)
        if ones is not None:
            ones = ~ones if arguments.get("inverted_after") else ones
        else:
            if padding:
                lengths = torch.tensor([length, 4, 3, 2])
                valid = torch.arange(length)[None, :] < lengths[:, None]
                ones = valid if polarity != IGNORE else ~valid
                rebuilt.assume("mask contents (a padding mask with lengths 6, 4, 3, 2 stood in)")
            else:
                causal = torch.tril(torch.ones(length, length, dtype=torch.bool))
                ones = causal if polarity != IGNORE else ~causal
                rebuilt.assume("mask contents (a causal tril mask stood in)")
        if polarity not in (KEEP, IGNORE):
            rebuilt.assume("meaning 1 = attend")
        keep = ones if polarity != IGNORE else ~ones
        correct = keep if arguments.get("convention") == KEEP else ~keep
        floats = arguments.get("kind", ZERO_ONE) == ZERO_ONE  # a fixed site passes the boolean mask instead
        as_written = ones.float() if floats else ones
        api = arguments.get("api")
        written = _attend(torch, api, as_written, n, length)
        intended = _attend(torch, api, correct, n, length)
        unmasked = _attend(torch, api, None, n, length)
        from_correct = float((written - intended).abs().max())
        from_none = float((written - unmasked).abs().max())
        target = torchapi.short_name(api)
        if api not in (torchapi.SDPA, torchapi.MHA):
            target += " (run as nn.MultiheadAttention, which adds float masks the same way)"
        assumed = f"assumed {' and '.join(rebuilt.assumed)}" if rebuilt.assumed else ""
        detail = "; ".join(part for part in (how, assumed) if part)
        if floats and from_correct > 1e-4 and from_none < from_correct:
            found = (f"{target} with the 0/1 float mask as written is {from_correct:.3f} from the result with the "
                     f"boolean mask it stands for and only {from_none:.3f} from no mask at all")
            return rebuilt.verdict(f"{found}; {how}" if how else found)
        written_as = "the 0/1 float mask" if floats else "the boolean mask"
        return NOT_CONFIRMED, (f"{target} with {written_as} as written is {from_correct:.3f} from the result with "
                               f"the boolean mask in its convention and {from_none:.3f} from no mask; {detail}")


def _rebuild(torch, expression, length: int, padding: bool):
    """(bool tensor True where the mask is 1, how it was made) from the construction's text, or (None, why not)."""
    if not expression:
        return None, ""
    import ast

    from mhalint.probe import evaluator

    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        return None, f"`{expression}` could not be rebuilt (it does not parse)"

    class _Flatten(ast.NodeTransformer):
        """`config.block_size` becomes a size name, as plain names are."""

        def visit_Attribute(self, node):
            parts, inner = [], node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id != "torch":
                return ast.copy_location(ast.Name("_".join([inner.id, *reversed(parts)]), ast.Load()), node)
            return self.generic_visit(node)

    flat = ast.unparse(_Flatten().visit(tree))
    names = {node.id for node in ast.walk(ast.parse(flat, mode="eval"))
             if isinstance(node, ast.Name) and node.id not in ("torch", "float", "True", "False", "None")}
    try:
        built = evaluator.evaluate_mask(flat, torch, {name: length for name in names})
    except (evaluator.Refused, ValueError, RuntimeError, TypeError) as refusal:
        return None, f"`{expression}` could not be rebuilt ({refusal})"
    square = built.dim() == 2 and built.shape[0] == built.shape[1]
    if built.dim() != 2 or (not padding and not square):
        return None, f"`{expression}` did not rebuild to a 2-D mask of the argument's shape"
    sizes = ", ".join(sorted(names)) or "no sizes"
    return built != 0, f"mask rebuilt from `{expression}` with {sizes}={length}"


def _attend(torch, api, mask, n: int, length: int):
    """The attention output with `mask`: (L, S) masks as attn_mask, (N, S) masks as padding masks."""
    torch.manual_seed(1)
    embed, heads = 16, 2
    if mask is not None and mask.shape != (length, length):
        n = mask.shape[0]
    if api == torchapi.SDPA:
        q, k, v = (torch.randn(n, heads, length, embed // heads) for _ in range(3))
        if mask is None:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v)
        shaped = mask if mask.shape == (length, length) else mask[:, None, None, :]
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=shaped)
    mha = torch.nn.MultiheadAttention(embed, heads, batch_first=True).train()  # slow path, no NaN shortcuts
    x = torch.randn(n, length, embed)
    if mask is None:
        keywords = {}
    elif mask.shape == (length, length):
        keywords = {"attn_mask": mask}
    else:
        keywords = {"key_padding_mask": mask}
    with torch.no_grad():
        return mha(x, x, x, need_weights=False, **keywords)[0]


# ---- the runtime check (mhalint.guard) ----
def _float_keep_message(call, name: str, mask) -> str | None:
    from mhalint.guard import support as s
    is_one = mask == 1
    if not bool(((mask == 0) | is_one).all()):
        return None  # values between 0 and 1: a soft (additive) bias, not a 0/1 mask
    ones = int(is_one.sum())
    if call.kind == "sdpa":
        fix = ("if 1 means 'attend', pass mask.bool() (SDPA reads True as attend); or make it additive, "
               "0 where attended and -inf where masked: torch.zeros_like(mask).masked_fill(mask == 0, float('-inf')).")
    else:
        fix = (f"if 1 means 'attend', pass mask == 0 ({call.api} reads a bool True as ignore); if 1 means "
               "'ignore', pass mask.bool(); or make it additive, 0 where attended and -inf where masked.")
    return s.message(
        f"{call.api} got a float {name} of only 0s and 1s ({ones} ones among {mask.numel()} entries): added to the "
        "scores, it masks nothing", fix,
        f"The mask has shape {s.shape_of(mask)} ({s.dtype_of(mask)}). Float masks are added to the attention scores, "
        "so a 0/1 "
        "mask masks nothing: it only adds +1 to some scores. torch 2.13 experiment: a 0/1 keep-mask given as a "
        "padding mask left the output 0.676 from the correctly masked result and 0.325 from no mask at all "
        "(docs/torch-facts.md#float-masks-are-additive).")
