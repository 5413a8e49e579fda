"""MHA001 batch-first-default: MultiheadAttention and the Transformer layers read (L, N, E) unless told otherwise."""

from __future__ import annotations

import libcst as cst

from mhalint import torchapi
from mhalint.calls import construction
from mhalint.finding import Severity
from mhalint.rule import Invalid, Rule, Valid
from mhalint.values import resolve

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
    No automatic fix: whether the data is batch-first depends on the code that calls the module, and attention
    across the batch is occasionally deliberate.

    ## References
    - torch 2.13 `nn/modules/activation.py:1172` (`batch_first=False`), `transformer.py:112, 749, 1034`
    - mhalint facts sheet section 2
    """

    code = "MHA001"
    name = "batch-first-default"
    summary = "MultiheadAttention/Transformer built without batch_first=True reads inputs as (L, N, E)"
    triggers = ("MultiheadAttention", "Transformer")

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
    )

    def visit_Call(self, node: cst.Call) -> None:
        built = construction(self.context, node, self.scope)
        if built is None or built.api not in _MODULES:
            return
        arguments = built.arguments
        api = torchapi.short_name(built.api)
        expr = arguments.get("batch_first")
        if expr is None:
            if arguments.opaque:
                return  # **kwargs may carry batch_first
            evidence = [f"{api}(...) at line {self.context.line(node)} has no batch_first argument"]
            problem = f"{api} is built without batch_first"
        elif isinstance(expr, cst.Name) and expr.value == "False":
            return  # written out: the author states that the inputs are sequence-first
        else:
            value = resolve(self.context, expr, built.scope)
            if value is None or value.value is not False:
                return
            evidence = [f"batch_first={self.context.code(expr)}", *value.trail]
            problem = f"{api} gets batch_first={self.context.code(expr)}, which resolves to False"
        self.report(
            node,
            f"{problem}: it reads every 3-D input as (L, N, E), so batch-first (N, L, E) data raises no error "
            f"but attends across the batch and mixes samples (measured: changing sample 1 moved sample 0's output "
            f"by 0.47). Evidence: {'; '.join(evidence)}. Fix: pass batch_first=True for (N, L, E) data, or write "
            f"batch_first=False to state that the inputs are sequence-first.",
            severity=Severity.WARNING, evidence=evidence, arguments={"batch_first": False})
