"""MHA004 odd-num-heads: an odd head count silently turns off the MultiheadAttention inference fast path."""

from __future__ import annotations

import math

from mhalint import torchapi
from mhalint.analysis.calls import construction, module_calls
from mhalint.analysis.fastpath import off_reason
from mhalint.analysis.values import constructor_values, resolve
from mhalint.finding import NOT_CONFIRMED, SKIPPED, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

_WHY = """
    {api} takes torch's fused inference kernel only when the head count is even (torch 2.13 {source}); the
    condition is missing from the documented list of fast-path conditions and nothing warns, so the module
    silently runs the slow path (docs/torch-facts.md#odd-heads-fast-path). In a torch 2.13 experiment on CPU at
    L=1024 with the default need_weights=True, 7 heads ran 1.23-1.25x slower than 8; with need_weights=False the
    slow path's SDPA kernel was faster, so whether it matters depends on how the module is called."""
ODD_HEADS = Message(
    "{api} gets {heads}, an odd head count: torch silently skips its fused inference fast path",
    help="{suggestion}, or add `# noqa: MHA004` if the fast path does not matter here",
    explanation=_WHY)
ODD_HEADS_FAST_PATH_OFF = Message(
    "{api} gets {heads}, an odd head count, which does not matter here: the fast path is off, as {reason}",
    help="nothing while that holds; if the module ever qualifies for the fast path, {suggestion}",
    explanation=_WHY + """

    Here {reason}, which keeps the module off the fast path whatever its head count
    (docs/torch-facts.md#fast-path-conditions).""")
# The fix (help) in words: an even head count that divides the embedding size, or, where none does (an odd size),
# the nearest shape that has one.
EVEN_DIVISORS = "use an even head count that divides {embed_key}={embed} ({counts})"
NEAREST_EVEN_SHAPE = ("use {embed_key}={new_embed} with {new_heads} heads (no even head count divides "
                      "{embed_key}={embed})")
ANY_EVEN_DIVISOR = "use an even head count that divides {embed_key}"

_HEADS_PARAMETER = {
    torchapi.MHA: "num_heads",
    torchapi.ENCODER_LAYER: "nhead",
    torchapi.DECODER_LAYER: "nhead",
    torchapi.TRANSFORMER: "nhead",
}
# Where torch skips the fused kernel for odd heads: MHA's own fast path, or the encoder layer's fused kernel.
_SOURCE_LINE = {torchapi.MHA: "nn/modules/activation.py:1375-1376",
                torchapi.ENCODER_LAYER: "nn/modules/transformer.py:863-864"}


class OddNumHeads(Rule):
    """
    ## What it does
    Flags `nn.MultiheadAttention(embed_dim, num_heads)` and the `nn.Transformer*` classes (`nhead`) built with a
    head count that resolves to an odd number, including 1. The value is followed through literals, module
    constants, simple arithmetic and parameter defaults. The help names the even head counts nearest the odd one
    that divide the embedding size; where none does (an odd size such as `embed_dim=63`), it names the nearest
    shape that has one (`embed_dim=64` with 8 heads).

    ## Why is this bad?
    `MultiheadAttention.forward` takes its fused inference kernel (`torch._native_multi_head_attention`) only
    when `self.num_heads` is even (torch 2.13 `nn/modules/activation.py:1375-1376`). This condition is missing
    from the documented list of fast-path conditions, and nothing warns: the module silently runs the slow path.
    `TransformerEncoderLayer` skips its fused kernel for the same reason (`transformer.py:863-864`), and
    `TransformerEncoder` its nested-tensor path. In a torch 2.13 experiment on CPU at L=1024 with the default
    `need_weights=True` (docs/torch-facts.md#odd-heads-fast-path), 7 heads ran 1.23-1.25x slower than 8; with
    `need_weights=False` the slow path's SDPA kernel was faster, so whether it matters depends on how the module
    is called. Know which path you are on. Where the fast path
    is off anyway (`batch_first=False`, cross-attention, `kdim`/`vdim`, `bias=False`, `add_bias_kv`,
    `add_zero_attn`; docs/torch-facts.md#fast-path-conditions) the finding is `info` and says why the head count
    does not matter there.

    ## Known problems
    The head count must resolve statically (a literal, a constant, a default, or what the file's callers pass).
    A count read from a config at run time is not judged.

    ## Example
    ```python
    attn = nn.MultiheadAttention(embed_dim=320, num_heads=5, batch_first=True)
    ```

    ## Use instead
    ```python
    attn = nn.MultiheadAttention(embed_dim=320, num_heads=4, batch_first=True)
    ```
    or keep the odd count and silence the finding with `# noqa: MHA004` where the fast path does not matter.

    ## Fix safety
    No automatic fix: the head count changes the model (parameter shapes stay, but the per-head split changes).

    ## References
    - torch 2.13 `nn/modules/activation.py:1375-1376` (`self.num_heads is not even`)
    - torch 2.13 `nn/modules/transformer.py:863-864` (`num_head is odd`)
    - docs/torch-facts.md#fast-path-conditions and docs/torch-facts.md#odd-heads-fast-path
    """

    code = "MHA004"
    name = "odd-num-heads"
    summary = "An odd num_heads/nhead silently turns off the inference fast path"
    triggers = (torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            layer = nn.TransformerEncoderLayer(d_model=64, nhead=4)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            model = nn.Transformer()
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            def build(heads):
                return nn.MultiheadAttention(64, heads)
            """,
        ),
        Valid(
            """
            class MultiheadAttention:
                def __init__(self, d, h): ...
            attn = MultiheadAttention(64, 5)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 3)  # noqa: MHA004
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(60, 5, batch_first=True)
            """,
            line=2,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention gets num_heads=5, an odd head count: torch silently skips its fused inference "
                "fast path"
            ),
        ),
        Invalid(
            """
            from torch import nn
            HEADS = 3
            layer = nn.TransformerEncoderLayer(d_model=96, nhead=HEADS)
            """,
            line=3,
            severity=Severity.INFO,
            headline=(
                "nn.TransformerEncoderLayer gets nhead=3 (`HEADS`), an odd head count, which does not matter here: the "
                "fast path is off, as batch_first is False (the default)"
            ),
        ),
        Invalid(
            """
            from torch.nn import MultiheadAttention as MHA
            attn = MHA(64, num_heads=1)
            """,
            line=2,
            severity=Severity.INFO,
            headline=(
                "nn.MultiheadAttention gets num_heads=1, an odd head count, which does not matter here: the fast path "
                "is off, as batch_first is False (the default)"
            ),
        ),
        Invalid(
            """
            import torch
            class Block(torch.nn.Module):
                def __init__(self, dim=96, heads=6):
                    super().__init__()
                    self.attn = torch.nn.MultiheadAttention(
                        dim,
                        heads // 2,
                    )
            """,
            line=5,
            severity=Severity.INFO,
            headline=(
                "nn.MultiheadAttention gets num_heads=3 (`heads // 2`), an odd head count, which does not matter here: "
                "the fast path is off, as batch_first is False (the defa..."
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 1)  # noqa: MHA001
            """,
            line=2,
            severity=Severity.INFO,
            headline=(
                "nn.MultiheadAttention gets num_heads=1, an odd head count, which does not matter here: the fast path "
                "is off, as batch_first is False (the default)"
            ),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        built = construction(self.context, node, self.scope)
        if built is None or built.api not in _HEADS_PARAMETER:
            return
        parameter = _HEADS_PARAMETER[built.api]
        arguments = built.arguments
        heads_expr = arguments.get(parameter)
        heads = resolve(self.context, heads_expr, built.scope)
        if heads is None or not isinstance(heads.value, int) or isinstance(heads.value, bool):
            return
        if heads.value <= 0 or heads.value % 2 == 0:
            return
        written = self.context.code(heads_expr)
        evidence = [f"{parameter}={written}" + (f" = {heads.value}" if written != str(heads.value) else "")]
        evidence += heads.trail
        embed_parameter = "embed_dim" if built.api == torchapi.MHA else "d_model"
        embed = resolve(self.context, arguments.get(embed_parameter), built.scope)
        suggestion = _suggestion(heads.value, embed_parameter, embed.value if embed is not None else None)
        reason_off = self._already_off(built)
        details = constructor_values(self.context, built)
        if reason_off:
            evidence.append(f"the fast path is off anyway: {reason_off}")
            details["fast_path_off"] = reason_off
        self.report(
            node, ODD_HEADS_FAST_PATH_OFF if reason_off else ODD_HEADS,
            severity=Severity.INFO if reason_off else Severity.WARNING, evidence=evidence, arguments=details,
            api=torchapi.short_name(built.api), reason=reason_off or "", suggestion=suggestion,
            heads=f"{parameter}={heads.value}" + (f" (`{' '.join(written.split())}`)"
                                                  if written not in (str(heads.value), parameter) else ""),
            source=_SOURCE_LINE.get(built.api, _SOURCE_LINE[torchapi.MHA]))

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Count calls of the fused kernel in eval + no_grad with the odd head count and with the nearest even
        count that divides the same embedding size, or, where none does (an odd size), with the nearest shape that
        has one (docs/torch-facts.md#odd-heads-fast-path). Confirmed when the site's module is batch-first and
        nothing else keeps it off the fast path; reproduced when the experiment had to assume that."""
        from mhalint.probe import support

        api = arguments["api"]
        rebuilt = support.Rebuilt()
        assumed = arguments.get("fast_path_off") or (
            None if arguments.get("batch_first") is True else "the site does not show batch_first=True")
        if assumed:
            rebuilt.assume(f"fast-path conditions ({assumed})")
        embed, heads, notes = support.dims(arguments, rebuilt)
        embed_key, heads_key = ("embed_dim", "num_heads") if api == torchapi.MHA else ("d_model", "nhead")
        even = _nearest_even_divisors(heads, embed)
        if even:
            other_embed, other_heads, compared = embed, even[0], ""
        else:
            shape = _nearest_even_shape(heads, embed)
            if shape is None:
                return SKIPPED, f"no shape near {embed_key}={embed} has an even head count to compare with"
            other_embed, other_heads = shape
            compared = (f" at {embed_key}={other_embed}, the nearest shape with an even head count (no even count "
                        f"divides {embed_key}={embed})")
        kernel = "_native_multi_head_attention" if api in (torchapi.MHA, torchapi.DECODER_LAYER) \
            else "_transformer_encoder_layer_fwd"

        def fused_calls(count_embed: int, count_heads: int) -> int:
            module = support.build(torch, {**arguments, embed_key: count_embed, heads_key: count_heads},
                                   True, support.Rebuilt())[0]  # the sizes chosen above
            original, calls = getattr(torch, kernel), []

            def counting(*args, **kwargs):
                calls.append(1)
                return original(*args, **kwargs)

            setattr(torch, kernel, counting)
            try:
                with torch.no_grad():
                    support.run(module, api, torch.randn(support.N, support.L, count_embed))
            finally:
                setattr(torch, kernel, original)
            return len(calls)

        odd_calls, even_calls = fused_calls(embed, heads), fused_calls(other_embed, other_heads)
        sizes = support.sizes(embed, heads, notes)
        if odd_calls == 0 and even_calls > 0:
            outcome = (f"in eval + no_grad with batch_first=True, the fused kernel torch.{kernel} ran 0 times with "
                       f"{heads_key}={heads} and {even_calls} time(s) with {other_heads} heads{compared} ({sizes})")
            return rebuilt.verdict(outcome)
        return NOT_CONFIRMED, (f"torch.{kernel} ran {odd_calls} time(s) with {heads} heads and {even_calls} with "
                               f"{other_heads}{compared} ({sizes})")

    def _already_off(self, built) -> str | None:
        """Why the fast path is off anyway at this site (docs/torch-facts.md#fast-path-conditions), or None when odd
        heads are the only reason."""
        reason = off_reason(self.context, built, count_heads=False)
        if reason is not None or built.api != torchapi.MHA:
            return reason
        calls = [c for c in module_calls(self.context, built) if c.direct]
        if calls and not any(_self_attention(c.call, self.context.code) for c in calls):
            return "every call is cross-attention"
        return None


def _self_attention(call: cst.Call, code) -> bool:
    """The fast path needs `query is key is value`; the same name three times is the syntactic form of that."""
    first_three = [arg for arg in call.args if arg.keyword is None and not arg.star][:3]
    named = {arg.keyword.value: arg for arg in call.args if arg.keyword is not None}
    values = [*first_three, *(named[k] for k in ("query", "key", "value")[len(first_three):] if k in named)]
    if len(values) != 3:
        return True  # cannot tell: assume the fast path is possible
    texts = {code(arg.value) for arg in values}
    return len(texts) == 1


def _suggestion(heads: int, embed_parameter: str, embed_dim: object) -> str:
    if isinstance(embed_dim, int) and not isinstance(embed_dim, bool) and embed_dim > 0:
        divisors = _nearest_even_divisors(heads, embed_dim)
        if divisors:
            return EVEN_DIVISORS.format(embed_key=embed_parameter, embed=embed_dim,
                                        counts=" or ".join(str(h) for h in sorted(divisors)))
        shape = _nearest_even_shape(heads, embed_dim)
        if shape is not None:
            return NEAREST_EVEN_SHAPE.format(embed_key=embed_parameter, embed=embed_dim, new_embed=shape[0],
                                             new_heads=shape[1])
    return ANY_EVEN_DIVISOR.format(embed_key=embed_parameter)


_MAX_SEARCHED = 10 ** 12  # divisors are found up to the square root: sizes beyond this get no numbers


def _even_divisors(size: int) -> list[int]:
    """The even numbers that divide `size`, ascending (empty when it is too large to search)."""
    if size <= 0 or size % 2 or size > _MAX_SEARCHED:
        return []
    found = set()
    for d in range(1, math.isqrt(size) + 1):
        if size % d == 0:
            found.update(c for c in (d, size // d) if c % 2 == 0)
    return sorted(found)


def _nearest_even_divisors(heads: int, embed_dim: int) -> list[int]:
    """The two even head counts nearest to the odd one that divide the embedding size (ties go to more heads)."""
    return sorted(_even_divisors(embed_dim), key=lambda h: (abs(h - heads), -h))[:2]


def _nearest_even_shape(heads: int, embed_dim: int) -> tuple[int, int] | None:
    """(embed_dim', heads'): the shape nearest to the site's that has an even head count, minimising
    (|embed_dim' - embed_dim|, |heads' - heads|), ties to more heads then the larger size. For an odd embed_dim
    the sizes one away are even (2 always divides them), so the search ends there; (63, 7) gives (64, 8)."""
    for distance in range(0, 3):
        candidates = [(abs(h - heads), -h, -size, size, h) for size in (embed_dim - distance, embed_dim + distance)
                      if size > 0 for h in _even_divisors(size)]
        if candidates:
            *_, size, h = min(candidates)
            return size, h
    return None
