"""MHA004 odd-num-heads: an odd head count silently turns off the MultiheadAttention inference fast path."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.calls import construction, module_calls
from mhalint.fastpath import off_reason
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, SKIPPED, Severity
from mhalint.lazy import cst
from mhalint.rule import Invalid, Rule, Valid
from mhalint.values import constructor_values, resolve

_HEADS_PARAMETER = {
    torchapi.MHA: "num_heads",
    torchapi.ENCODER_LAYER: "nhead",
    torchapi.DECODER_LAYER: "nhead",
    torchapi.TRANSFORMER: "nhead",
}
# Where torch skips the fused kernel for odd heads: MHA's own fast path, or the encoder layer's fused kernel.
_SOURCE_LINE = {torchapi.MHA: "activation.py:1375", torchapi.ENCODER_LAYER: "transformer.py:863"}


class OddNumHeads(Rule):
    """
    ## What it does
    Flags `nn.MultiheadAttention(embed_dim, num_heads)` and the `nn.Transformer*` classes (`nhead`) built with a
    head count that resolves to an odd number, including 1. The value is followed through literals, module
    constants, simple arithmetic and parameter defaults.

    ## Why is this bad?
    `MultiheadAttention.forward` takes its fused inference kernel (`torch._native_multi_head_attention`) only
    when `self.num_heads` is even (torch 2.13 `nn/modules/activation.py:1375-1376`). This condition is missing
    from the documented list of fast-path conditions, and nothing warns: the module silently runs the slow path.
    `TransformerEncoderLayer` skips its fused kernel for the same reason (`transformer.py:863-864`), and
    `TransformerEncoder` its nested-tensor path. Measured on CPU at L=1024 with the default `need_weights=True`,
    7 heads were 1.12-1.18x slower than 8; with `need_weights=False` the slow path's SDPA kernel was faster, so
    whether it matters depends on how the module is called. Know which path you are on. Where the fast path
    is off anyway (`batch_first=False`, cross-attention, `kdim`/`vdim`, `bias=False`, `add_bias_kv`,
    `add_zero_attn`) the finding is `info` and says why the head count does not matter there.

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
    - mhalint facts sheet sections 1.6 and 6
    """

    code = "MHA004"
    name = "odd-num-heads"
    summary = "An odd num_heads/nhead silently turns off the inference fast path"
    triggers = (torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.calls and mhalint.context

    valid = (
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"),
        Valid("import torch.nn as nn\nlayer = nn.TransformerEncoderLayer(d_model=64, nhead=4)\n"),
        Valid("import torch.nn as nn\nmodel = nn.Transformer()\n"),
        Valid("import torch.nn as nn\ndef build(heads):\n    return nn.MultiheadAttention(64, heads)\n"),
        Valid("class MultiheadAttention:\n    def __init__(self, d, h): ...\nattn = MultiheadAttention(64, 5)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 3)  # noqa: MHA004\n"),
    )
    invalid = (
        Invalid("import torch.nn as nn\nattn = nn.MultiheadAttention(60, 5, batch_first=True)\n", line=2,
                message="num_heads=5"),
        Invalid("from torch import nn\nHEADS = 3\nlayer = nn.TransformerEncoderLayer(d_model=96, nhead=HEADS)\n",
                line=3, message="HEADS"),
        Invalid("from torch.nn import MultiheadAttention as MHA\nattn = MHA(64, num_heads=1)\n", line=2),
        Invalid("import torch\nclass Block(torch.nn.Module):\n    def __init__(self, dim=96, heads=6):\n"
                "        super().__init__()\n        self.attn = torch.nn.MultiheadAttention(\n"
                "            dim,\n            heads // 2,\n        )\n", line=5, message="heads // 2"),
        Invalid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 1)  # noqa: MHA001\n", line=2),
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
        fix = _suggestion(heads.value, embed_parameter, embed.value if embed is not None else None)
        reason_off = self._already_off(built)
        api = torchapi.short_name(built.api)
        if reason_off:
            severity = Severity.INFO
            note = f"; it does not matter here, because {reason_off}, which already keeps the module off it"
            fix = f"nothing while that holds; if the module ever qualifies for the fast path, {fix}"
        else:
            severity, note = Severity.WARNING, ""
            fix = f"{fix}, or add `# noqa: {self.code}` if the fast path does not matter here"
        self.report(
            node,
            f"{api} has {parameter}={heads.value}, an odd head count: torch then silently skips the fused "
            f"inference fast path ({_SOURCE_LINE.get(built.api, 'activation.py:1375')}, not in the documented "
            f"conditions){note}. "
            f"Evidence: {'; '.join(evidence)}. Fix: {fix}.",
            severity=severity, evidence=evidence, arguments=constructor_values(self.context, built))

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Count calls of the fused kernel in eval + no_grad with the odd head count and with the nearest even
        count that divides the same embedding size (facts 1.6)."""
        from mhalint.probe import support

        api = arguments["api"]
        embed, heads, notes = support.dims(arguments)
        embed_key, heads_key = ("embed_dim", "num_heads") if api == torchapi.MHA else ("d_model", "nhead")
        even = _nearest_even_divisors(heads, embed)
        if not even:
            return SKIPPED, f"no even head count divides {embed_key}={embed} to compare with"
        kernel = "_native_multi_head_attention" if api in (torchapi.MHA, torchapi.DECODER_LAYER) \
            else "_transformer_encoder_layer_fwd"

        def fused_calls(count_heads: int) -> int:
            module = support.build(torch, {**arguments, embed_key: embed, heads_key: count_heads},
                                   batch_first=True)[0]
            original, calls = getattr(torch, kernel), []

            def counting(*args, **kwargs):
                calls.append(1)
                return original(*args, **kwargs)

            setattr(torch, kernel, counting)
            try:
                with torch.no_grad():
                    support.run(module, api, torch.randn(support.N, support.L, embed))
            finally:
                setattr(torch, kernel, original)
            return len(calls)

        odd_calls, even_calls = fused_calls(heads), fused_calls(even[0])
        sizes = support.sizes(embed, heads, notes)
        if odd_calls == 0 and even_calls > 0:
            return CONFIRMED, (f"in eval + no_grad with batch_first=True, the fused kernel torch.{kernel} ran 0 "
                               f"times with {heads_key}={heads} and {even_calls} time(s) with {even[0]} heads "
                               f"({sizes})")
        return NOT_CONFIRMED, (f"torch.{kernel} ran {odd_calls} time(s) with {heads} heads and {even_calls} with "
                               f"{even[0]} ({sizes})")

    def _already_off(self, built) -> str | None:
        """Why the fast path is off anyway at this site (facts 1.6), or None when odd heads are the only reason."""
        reason = off_reason(self.context, built, count_heads=False)
        if reason is not None or built.api != torchapi.MHA:
            return reason
        calls = [c for c in module_calls(self.context, built) if c.direct]
        if calls and not any(_self_attention(c.call, self.context.code) for c in calls):
            return "every call passes different query, key and value tensors (cross-attention)"
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
    if isinstance(embed_dim, int) and embed_dim > 0:
        divisors = _nearest_even_divisors(heads, embed_dim)
        if divisors:
            counts = " or ".join(str(h) for h in sorted(divisors))
            return f"use an even head count that divides {embed_parameter}={embed_dim} ({counts})"
    return f"use an even head count that divides {embed_parameter}"


def _nearest_even_divisors(heads: int, embed_dim: int) -> list[int]:
    """The two even head counts nearest to the odd one that divide the embedding size (ties go to more heads)."""
    return sorted((h for h in range(2, embed_dim + 1, 2) if embed_dim % h == 0),
                  key=lambda h: (abs(h - heads), -h))[:2]
