"""MHA103 nan-output: NaN in an attention output that no fully masked row explains."""

from __future__ import annotations

from mhalint.rule import Invalid, Rule, Valid


class NanOutput(Rule):
    """
    ## What it does
    Reports, at run time, an attention call whose output has NaN when no fully masked row (MHA101) or flipped
    causal mask (MHA002) explains it. The report says which samples, whether the inputs already had NaN, and
    whether the float masks or the module's parameters hold NaN or +inf.

    ## Why is this bad?
    NaN spreads through every later layer and the loss; where it first appears is what matters, and an attention
    call is a common place for it to appear (overflow in float16 scores, +inf in an additive mask, NaN weights)
    (docs/torch-facts.md#nan-output).

    ## Known problems
    Only calls the guard sees are checked. The report says where to look, not why: overflow in low precision,
    for one, is named as a possibility, not shown.

    ## Example
    ```python
    bias = torch.full((L, L), float("inf"))               # +inf, not -inf
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    ```

    ## Use instead
    ```python
    bias = torch.full((L, L), float("-inf")).triu(1)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    ```

    ## Fix safety
    No automatic fix: the report says where to look.

    ## References
    - docs/torch-facts.md#nan-output
    """

    code = "MHA103"
    name = "nan-output"
    summary = "At run time: NaN in an attention output that no fully masked row explains"
    runtime_valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(2, 2, 4, 8)
            F.scaled_dot_product_attention(q, q, q)
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(2, 2, 4, 8)
            q[0, 0, 0, 0] = float('nan')
            F.scaled_dot_product_attention(q, q, q)
            """,
            line=5,
            message="its inputs query, key, value already contain NaN",
        ),
    )

    @staticmethod
    def guard(call) -> list:
        """MHA103: NaN in the attention output that no fully masked row explains (evaluated after the call)."""
        from mhalint.guard import support as s
        out = call.output
        if call.error is not None or not s.plain(out) or not out.is_floating_point() or out.numel() == 0:
            return []
        # The sum is NaN when an element is NaN (or when +inf meets -inf: the message confirms with isnan); it is
        # ten times faster than isnan(out).any() on CPU.
        return [s.Pending(out.sum().isnan(), lambda: _nan_message(call))]


def _nan_message(call) -> str | None:
    import torch

    from mhalint.guard import support as s
    if not call.output_nan or call.reported & {"MHA101", "MHA002"}:
        return None  # explained by the masks, and said in that report
    samples = s.nan_samples(call)
    where = f"in samples {s.ints(samples)}" if samples else "in its output"
    upstream = [name for name, tensor in call.inputs
                if s.plain(tensor) and tensor.is_floating_point() and bool(torch.isnan(tensor).any())]
    if upstream:
        headline = f"its inputs {', '.join(upstream)} already contain NaN"
        cause = (f"The inputs {', '.join(upstream)} already contain NaN, so it comes from upstream: find where it "
                 "first appears (torch.autograd.set_detect_anomaly(True) helps for NaN gradients).")
    else:
        bad_masks = [name for name, mask, _ in s.masks(call) if s.plain(mask) and mask.is_floating_point()
                     and bool((torch.isnan(mask) | torch.isposinf(mask)).any())]
        module = call.module
        bad_weights = module is not None and any(bool(torch.isnan(p).any()) for p in module.parameters()
                                                 if s.plain(p) and p.is_floating_point())
        found = []
        if bad_masks:
            found.append(f"the float masks {', '.join(bad_masks)} contain NaN or +inf")
        if bad_weights:
            found.append("the module's parameters contain NaN")
        headline = " and ".join(found) if found else "no NaN in its inputs, and no mask row leaves a query without keys"
        cause = ("The inputs have no NaN and no mask row leaves a query without keys; "
                 + ("but " + " and ".join(found) + "." if found else
                    "look for overflow in low precision (float16 scores) or NaN in the weights."))
    return s.message(f"{call.api} returned NaN {where}: {headline}",
                    "find where the NaN first appears and remove its source.",
                    f"This call: {call.mode_text()}. {cause} See docs/torch-facts.md#nan-output.")
