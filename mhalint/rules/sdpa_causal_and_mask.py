"""MHA009 sdpa-causal-and-mask: F.scaled_dot_product_attention given both attn_mask and is_causal=True."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis.calls import call_target
from mhalint.analysis.masks import ADDITIVE, BOOL, MaskReader
from mhalint.analysis.values import resolve, taking
from mhalint.finding import NOT_CONFIRMED, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

# Fields: `mask` (the attn_mask argument as written, quoted); `causal` ("is_causal=True", or
# "is_causal=`self.causal` (True)" when it resolves to True); `fold`, the call's mask with the causal pattern folded in.
MASK_AND_CAUSAL = Message(
    "F.scaled_dot_product_attention gets attn_mask={mask} and {causal}: CPU's default kernel applies both, the MATH "
    "kernel raises",
    help="decide which was meant: {fold} and drop is_causal, or drop attn_mask and keep is_causal=True",
    explanation="""
        F.scaled_dot_product_attention's docstring says "An error is thrown if both attn_mask and is_causal are set"
        (torch 2.13 `nn/functional.py:6471`), but what happens depends on the backend. torch 2.13 experiment on CPU:
        the default (flash) kernel was silent and applied the mask AND the causal pattern; with a boolean mask
        hiding key 0 the output was 2.92 away from the mask-only result and 1.93 from the causal-only one, while
        under `sdpa_kernel(SDPBackend.MATH)` the same call raised `RuntimeError: _scaled_dot_product_attention:
        Explicit attn_mask should not be set when is_causal=True`; CUDA was not tried
        (docs/torch-facts.md#sdpa-causal-and-mask). So the same line silently combines both on one backend and
        crashes on another, and a reader cannot tell whether the mask or the causal flag was meant.
    """)


class SdpaCausalAndMask(Rule):
    """
    ## What it does
    Flags `F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=True)` (any alias: `torch._C._nn`,
    `torch.ops.aten`; positionally `attn_mask` is the 4th argument and `is_causal` the 6th): a call that passes an
    `attn_mask` that is not `None` together with an `is_causal` that resolves to `True` (a literal, a constant,
    `self.causal` set from a default, a parameter default). An `is_causal` whose value is unknown (for example
    `is_causal=mask is None`) and `attn_mask=None` are not flagged.

    ## Why is this bad?
    SDPA's docstring says "An error is thrown if both attn_mask and is_causal are set" (torch 2.13
    `nn/functional.py:6471`), but what happens depends on the backend. In a torch 2.13 experiment on CPU
    (docs/torch-facts.md#sdpa-causal-and-mask), the default flash kernel was silent and applied the mask AND the
    causal pattern: with a boolean mask hiding key 0, the output was 2.92 away from the mask-only result and 1.93
    from the causal-only one (and equal to `mask & tril`). Under `sdpa_kernel(SDPBackend.MATH)` the same call
    raised `RuntimeError: _scaled_dot_product_attention: Explicit attn_mask should not be set when
    is_causal=True`. So the same line silently combines both on one backend and crashes on another (CUDA was not
    tried), and a reader cannot tell whether the mask or the causal flag was meant.

    ## Known problems
    A flag read from a config object at run time is not resolved. What happens depends on the backend, so the
    finding is a warning and does not say which one the user's device uses.

    ## Example
    ```python
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :], is_causal=True)
    ```

    ## Use instead
    Fold the causal pattern into the mask and drop `is_causal`:
    ```python
    causal = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :] & causal)
    ```
    or, if the mask was not meant (it is already causal, or unused), drop it and keep `is_causal=True`.

    ## Fix safety
    No automatic fix: only the author knows whether the mask or the causal flag was meant.

    ## References
    - torch 2.13 `nn/functional.py:6471` (the docstring) and `6358-6359` (the reference code asserts
      `attn_mask is None`); the MATH kernel's check is in C++
    - docs/torch-facts.md#sdpa-causal-and-mask
    """

    code = "MHA009"
    name = "sdpa-causal-and-mask"
    summary = "scaled_dot_product_attention given both attn_mask and is_causal=True: the backend decides what happens"
    triggers = (torchapi.SDPA_TRIGGER,)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, m):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=m)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, m, causal):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, m):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=m is None)
            """,
        ),
        Valid(
            """
            def scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=False): ...
            def f(q, m):
                return scaled_dot_product_attention(q, q, q, attn_mask=m, is_causal=True)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, m):
                return F.scaled_dot_product_attention(q, k, v, m, is_causal=True)  # noqa: MHA009
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn.functional as F
            def f(q, k, v, keep):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=True)
            """,
            line=3,
            severity=Severity.WARNING,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`keep` and is_causal=True: CPU's default kernel applies "
                "both, the MATH kernel raises"
            ),
        ),
        Invalid(
            """
            from torch.nn.functional import scaled_dot_product_attention as sdpa
            def f(q, m):
                return sdpa(q, q, q, m, 0.0, True)
            """,
            line=3,
            severity=Severity.WARNING,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`m` and is_causal=True: CPU's default kernel applies "
                "both, the MATH kernel raises"
            ),
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            class Attn(torch.nn.Module):
                def __init__(self, causal=True):
                    super().__init__()
                    self.causal = causal
                def forward(self, q, k, v, mask):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)
            """,
            line=8,
            severity=Severity.WARNING,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`mask` and is_causal=`self.causal` (True): CPU's "
                "default kernel applies both, the MATH kernel raises"
            ),
        ),
        Invalid(
            """
            import torch
            CAUSAL = True
            def f(q, k, v, m):
                return torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=CAUSAL)
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "F.scaled_dot_product_attention gets attn_mask=`m` and is_causal=`CAUSAL` (True): CPU's default kernel "
                "applies both, the MATH kernel raises"
            ),
        ),
    )

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.masks = MaskReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is None or target.api != torchapi.SDPA:
            return
        causal_expr = target.arguments.get("is_causal")
        causal = taking(self.context, causal_expr, self.scope, True)
        if causal is None:
            return
        mask_expr = target.arguments.get("attn_mask")
        if mask_expr is None:
            return
        mask_value = resolve(self.context, mask_expr, self.scope)
        if mask_value is not None and mask_value.value is None:
            return
        self._report(node, target, mask_expr, causal_expr, causal.trail)

    def _report(self, node, target, mask_expr, causal_expr, trail) -> None:
        code = self.context.code
        mask = self.masks.read(mask_expr, self.scope, node)
        kind = mask.kind if mask is not None else None
        written = code(causal_expr)
        mask_text = f"attn_mask={code(mask_expr)}"
        if mask is not None and mask.origin_line is not None:
            mask_text += f" (built at line {mask.origin_line})"
        evidence = [mask_text, f"is_causal={written}" + (" resolves to True" if written != "True" else ""), *trail]
        self.report(
            node, MASK_AND_CAUSAL, severity=Severity.WARNING, evidence=evidence,
            arguments={"api": torchapi.SDPA, "attn_mask": True, "is_causal": True, "mask_kind": kind},
            mask=f"`{code(mask_expr)}`",
            causal="is_causal=True" if written == "True" else f"is_causal=`{written}` (True)",
            fold=_fold(code, target, mask_expr, kind))

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Run the call on CPU with a mask hiding key 0 and the site's is_causal: compare with mask-only,
        causal-only and mask AND causal, then run it under sdpa_kernel(MATH)
        (docs/torch-facts.md#sdpa-causal-and-mask)."""
        from mhalint.probe import support

        F = torch.nn.functional
        generator = torch.Generator().manual_seed(0)
        n, h, length, d = 2, 4, 6, 4
        q, k, v = (torch.randn(n, h, length, d, generator=generator) for _ in range(3))
        keep = torch.ones(length, length, dtype=torch.bool)
        keep[1:, 0] = False  # hide key 0 from every row but the first (which would be empty under causal)
        tril = torch.ones(length, length, dtype=torch.bool).tril()
        additive = arguments.get("mask_kind") == ADDITIVE

        def as_given(m):
            return torch.zeros(m.shape).masked_fill(~m, float("-inf")) if additive else m

        site = {"is_causal": arguments.get("is_causal") is True}
        if arguments.get("attn_mask", True):
            site["attn_mask"] = as_given(keep)
        output = F.scaled_dot_product_attention(q, k, v, **site)
        to_mask = _diff(output, F.scaled_dot_product_attention(q, k, v, attn_mask=as_given(keep)))
        to_causal = _diff(output, F.scaled_dot_product_attention(q, k, v, is_causal=True))
        to_both = _diff(output, F.scaled_dot_product_attention(q, k, v, attn_mask=as_given(keep & tril)))
        math = _under_math(torch, lambda: F.scaled_dot_product_attention(q, k, v, **site))
        given = ", ".join(f"{key}={'mask' if key == 'attn_mask' else value}" for key, value in site.items())
        rebuilt = support.Rebuilt()  # what the mask hides is the experiment's choice; its kind is the site's
        if arguments.get("attn_mask", True) and arguments.get("mask_kind") not in (ADDITIVE, BOOL):
            rebuilt.assume("a bool mask (the site's mask kind is not known)")
        setup = (f"CPU, N={n}, h={h}, L=S={length}, head size {d}, a {'float' if additive else 'bool'} mask hiding "
                 f"key 0, called with {given}; CUDA not tested")
        numbers = f"{to_both:.2f} from mask AND causal, {to_mask:.2f} from mask-only, {to_causal:.2f} from causal-only"
        if to_mask > 1e-4 and to_causal > 1e-4:
            return rebuilt.verdict(f"the default kernel applied neither the mask alone nor causal alone ({numbers}); "
                                   f"under sdpa_kernel(MATH) {math} ({setup})")
        return NOT_CONFIRMED, f"the output is {numbers}; under sdpa_kernel(MATH) {math} ({setup})"


def _diff(a, b) -> float:
    return float((a - b).abs().max())


def _under_math(torch, action) -> str:
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return "could not be tried (no torch.nn.attention.sdpa_kernel)"
    try:
        with sdpa_kernel(SDPBackend.MATH):
            action()
    except RuntimeError as error:
        return f"it raised RuntimeError: {str(error).splitlines()[0]}"
    return "it ran without raising"


def _fold(code, target, mask_expr: cst.BaseExpression, kind: str | None) -> str:
    """The call's mask with the causal pattern folded in, written with the call's own query and key."""
    query, key = target.arguments.get("query"), target.arguments.get("key")
    if isinstance(query, cst.Name | cst.Attribute) and isinstance(key, cst.Name | cst.Attribute):
        sizes = f"{code(query)}.size(-2), {code(key)}.size(-2), dtype=torch.bool, device={code(query)}.device"
    else:
        sizes = "L, S, dtype=torch.bool"
    causal = f"torch.ones({sizes}).tril()"
    mask = code(mask_expr)
    if not isinstance(mask_expr, (cst.Name, cst.Attribute, cst.Subscript, cst.Call)):  # `&` binds tighter
        mask = f"({mask})"
    bool_form = f"`attn_mask={mask} & {causal}`"
    float_form = f"`attn_mask={mask}.masked_fill(~{causal}, float(\"-inf\"))`"
    if kind == ADDITIVE:
        return f"fold the causal pattern into the float mask, {float_form},"
    if kind == BOOL:
        return f"fold the causal pattern into the mask, {bool_form},"
    return f"fold the causal pattern into the mask, {bool_form} (for a float mask {float_form}),"
