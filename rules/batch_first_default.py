"""MHA001 batch-first-default: MultiheadAttention and the Transformer layers read (L, N, E) unless told otherwise."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.calls import construction, module_calls, with_argument
from mhalint.finding import CONFIRMED, NOT_CONFIRMED, UNSAFE, Severity
from mhalint.layout import BATCH_FIRST, SEQ_FIRST, LayoutReader
from mhalint.lazy import cst
from mhalint.rule import Invalid, Rule, Valid
from mhalint.values import constructor_values, resolve

_MODULES = (torchapi.MHA, torchapi.ENCODER_LAYER, torchapi.DECODER_LAYER, torchapi.TRANSFORMER)


class BatchFirstDefault(Rule):
    """
    ## What it does
    Flags `nn.MultiheadAttention`, `nn.TransformerEncoderLayer`, `nn.TransformerDecoderLayer` and
    `nn.Transformer` (and the quantizable MultiheadAttention, and `super().__init__(...)` in subclasses of these)
    built without `batch_first`, or with a `batch_first` name that resolves to `False`, for example a parameter
    whose default is `False`. A literal `batch_first=False` states the layout and is not flagged.

    ## Why is this bad?
    These modules default to `batch_first=False` and read every 3-D tensor as `(L, N, E)`. Every 3-D tensor is a
    valid `(L, N, E)` tensor, so batch-first `(N, L, E)` data never raises: attention runs across the batch axis
    and mixes samples. Measured with N=4, L=10, E=64, 8 heads: changing only sample 1 moved sample 0's output by
    0.466 (0.0 with `batch_first=True`); `TransformerEncoderLayer` behaves the same (0.364). The telltale sign is
    attention weights of shape `(L, N, N)`.

    ## Example
    ```python
    attn = nn.MultiheadAttention(embed_dim=64, num_heads=8)
    out, _ = attn(x, x, x)  # x is (batch, seq, embed)
    ```

    ## Use instead
    ```python
    attn = nn.MultiheadAttention(embed_dim=64, num_heads=8, batch_first=True)
    ```
    or, when the data really is sequence-first, say so: `batch_first=False`.

    ## Fix safety
    Unsafe, and offered only for `error` findings, where the code shows the layout: `batch_first=True` for
    batch-first data (`batch_first=False` for the reverse bug). It changes behaviour (that is the point), and
    attention across the batch is occasionally deliberate, so `--fix` applies it only with `--unsafe-fixes`.
    Warnings and infos get no fix.

    ## References
    - torch 2.13 `nn/modules/activation.py:1172` (`batch_first=False`), `transformer.py:112, 749, 1034`
    - mhalint facts sheet section 2
    """

    code = "MHA001"
    name = "batch-first-default"
    summary = "MultiheadAttention/Transformer built without batch_first=True reads inputs as (L, N, E)"
    triggers = (torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.calls and mhalint.context

    valid = (
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=True)\n"),
        Valid("import torch\nlayer = torch.nn.TransformerEncoderLayer(64, 8, 256, 0.1, 'relu', 1e-5, True)\n"),
        Valid("from torch import nn\nclass Block(nn.Module):\n    def __init__(self, batch_first=True):\n"
              "        super().__init__()\n        self.attn = nn.MultiheadAttention(64, 8, batch_first=batch_first)\n"),
        Valid("class MultiheadAttention:\n    def __init__(self, d, h): ...\nattn = MultiheadAttention(64, 8)\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)  # noqa\n"),
        Valid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8, batch_first=False)\n"),
        Valid("import torch.nn as nn\ndef make(**kw):\n    return nn.MultiheadAttention(64, 8, **kw)\n"),
    )
    invalid = (
        Invalid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)\n", line=2, message="without batch_first"),
        Invalid("import torch\nlayer = torch.nn.modules.transformer.TransformerEncoderLayer(\n    d_model=64,\n"
                "    nhead=8,\n)\n", line=2),
        Invalid("from torch.nn.modules.activation import MultiheadAttention\nattn = MultiheadAttention(64, 8)\n",
                line=2),
        Invalid("from torch import nn\nclass Block(nn.Module):\n    def __init__(self, batch_first=False):\n"
                "        super().__init__()\n        self.attn = nn.MultiheadAttention(64, 8, batch_first=batch_first)\n",
                line=5, message="defaults to False"),
        Invalid("import torch.nn as nn\nBATCH_FIRST = False\nt = nn.Transformer(batch_first=BATCH_FIRST)\n", line=3),
        Invalid("import torch.nn as nn\nclass Attn(nn.MultiheadAttention):\n    def __init__(self):\n"
                "        super().__init__(64, 8)\n", line=4),
        Invalid("import torch.nn as nn\nattn = nn.MultiheadAttention(64, 8)  # noqa: MHA004\n", line=2),
        Invalid("import torch.nn as nn\nclass Encoder(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                "        self.attn = nn.MultiheadAttention(64, 8)\n    def forward(self, x):\n"
                "        B, T, C = x.shape\n        return self.attn(x, x, x)[0]\n", line=5,
                message="the data it gets is batch-first", severity=Severity.ERROR),
    )

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.layouts = LayoutReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        built = construction(self.context, node, self.scope)
        if built is None or built.api not in _MODULES:
            return
        setting = self._setting(built)
        if setting is None:
            return
        batch_first, stated, described, evidence = setting
        layouts = [self.layouts.of(use.query, use.scope, use.call) for use in module_calls(self.context, built)]
        batch = next((l for l in layouts if l is not None and l.kind == BATCH_FIRST), None)
        seq = next((l for l in layouts if l is not None and l.kind == SEQ_FIRST), None)
        api = torchapi.short_name(built.api)
        if batch_first:
            if seq is not None:  # any sequence-first call is corrupted, whatever the other calls pass
                self._reverse(node, built, seq, evidence)
            return
        if batch is not None:
            self.report(
                node,
                f"{api} {described}, so it reads inputs as (L, N, E), but the data it gets is batch-first: "
                f"{batch.evidence}. Attention then runs across the batch and mixes samples without any error "
                f"(measured: changing sample 1 moved sample 0's output by 0.47). Evidence: {'; '.join(evidence)}. "
                f"Fix: pass batch_first=True.",
                severity=Severity.ERROR, evidence=[*evidence, batch.evidence], fix=self._fix(built, "True"),
                arguments={**constructor_values(self.context, built), "batch_first": False, "layout": BATCH_FIRST})
        elif stated:
            return
        elif seq is not None:
            self.report(
                node,
                f"{api} {described}; the data it gets is sequence-first ({seq.evidence}), so this is correct, but "
                f"it rests on an implicit default. Evidence: {'; '.join(evidence)}. Fix: write batch_first=False "
                f"to make the layout explicit.",
                severity=Severity.INFO, evidence=[*evidence, seq.evidence],
                arguments={**constructor_values(self.context, built), "batch_first": False, "layout": SEQ_FIRST})
        else:
            self.report(
                node,
                f"{api} {described}: it reads every 3-D input as (L, N, E), so batch-first (N, L, E) data raises "
                f"no error but attends across the batch and mixes samples (measured: changing sample 1 moved sample "
                f"0's output by 0.47); mhalint found no evidence of the layout of its inputs. Evidence: "
                f"{'; '.join(evidence)}. Fix: pass batch_first=True for (N, L, E) data, or write batch_first=False "
                f"to state that the inputs are sequence-first.",
                severity=Severity.WARNING, evidence=evidence,
                arguments={**constructor_values(self.context, built), "batch_first": False})

    def _setting(self, built) -> tuple[bool, bool, str, list[str]] | None:
        """(batch_first, stated as a literal, how it is set, evidence), or None when it cannot be known."""
        arguments = built.arguments
        expr = arguments.get("batch_first")
        if expr is None:
            if arguments.opaque:
                return None  # **kwargs may carry batch_first
            line = self.context.line(built.call)
            return False, False, "is built without batch_first (default False)", \
                [f"the constructor at line {line} has no batch_first argument"]
        written = self.context.code(expr)
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return expr.value == "True", True, f"is built with batch_first={written}", [f"batch_first={written}"]
        value = resolve(self.context, expr, built.scope)
        if value is None or not isinstance(value.value, bool):
            return None
        return value.value, False, f"gets batch_first={written}, which resolves to {value.value}", \
            [f"batch_first={written}", *value.trail]

    def _reverse(self, node, built, seq, evidence) -> None:
        self.report(
            node,
            f"{torchapi.short_name(built.api)} reads inputs as (N, L, E) because of batch_first=True, but the data "
            f"it gets is sequence-first: {seq.evidence}. Attention then runs across the batch and mixes samples "
            f"without any error. Evidence: {'; '.join(evidence)}. Fix: feed (N, L, E) data (drop the "
            f"permute/transpose to (L, N, E)), or set batch_first=False.",
            severity=Severity.ERROR, evidence=[*evidence, seq.evidence], fix=self._fix(built, "False"),
            arguments={**constructor_values(self.context, built), "batch_first": True, "layout": SEQ_FIRST})

    def _fix(self, built, value: str):
        """Only offered with layout evidence (an error): attention across the batch can be deliberate."""
        changed = with_argument(built.call, built.arguments.by_name.get("batch_first"), "batch_first", value)
        return self.replacement(built.call, changed, applicability=UNSAFE, title=f"pass batch_first={value}")

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Feed the module data in the layout the code gives it, change only sample 1, and see whether sample 0
        moves (facts section 2). With no layout evidence, the pitfall's layout is assumed and said."""
        from mhalint.probe import support

        batch_first = bool(arguments.get("batch_first", False))
        module, embed, heads, notes = support.build(torch, arguments, batch_first=batch_first)
        layout = arguments.get("layout")
        if layout not in (BATCH_FIRST, SEQ_FIRST):
            layout = SEQ_FIRST if batch_first else BATCH_FIRST
            notes.append(f"assumed {layout} data")
        n, length = support.N, support.L
        data = torch.randn(n, length, embed) if layout == BATCH_FIRST else torch.randn(length, n, embed)
        sample = (lambda t, i: t[i]) if layout == BATCH_FIRST else (lambda t, i: t[:, i])
        changed = data.clone()
        sample(changed, 1).add_(torch.randn(length, embed))
        with torch.no_grad():
            moved = support.max_diff(sample(support.run(module, arguments["api"], data), 0),
                                     sample(support.run(module, arguments["api"], changed), 0))
            tell = ""
            if arguments["api"] == torchapi.MHA and moved > 1e-6:
                shape = tuple(module(data, data, data)[1].shape)
                tell = f"; the attention weights came out {shape}, a softmax over the batch axis"
        fed = f"fed {layout} data to a module with batch_first={batch_first}"
        if moved > 1e-6:
            return CONFIRMED, (f"{fed}, changing sample 1 moved sample 0's output by {moved:.3f} "
                               f"({support.sizes(embed, heads, notes)}){tell}")
        return NOT_CONFIRMED, (f"{fed}, sample 0's output stayed put when sample 1 changed (max change "
                               f"{moved:.1e}; {support.sizes(embed, heads, notes)})")
