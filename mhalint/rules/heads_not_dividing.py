"""MHA005 heads-not-dividing: an embedding size that the head count does not divide cannot be built."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis.calls import construction
from mhalint.analysis.values import Value, constructor_values, resolve
from mhalint.finding import NOT_CONFIRMED, SKIPPED, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

NOT_DIVIDING = Message(
    "{api} gets {embed}, which {heads} does not divide ({embed_value} = {quotient} x {heads_value} + {remainder}): "
    "building it raises AssertionError",
    help="{suggestion}",
    explanation="""
    `MultiheadAttention.__init__` raises `AssertionError: embed_dim must be divisible by num_heads` (torch 2.13
    nn/modules/activation.py:1192-1193), an explicit raise, so also under python -O.{via} The error surfaces only
    when the model is built, often deep in a configuration sweep, and does not say which layer or which
    configuration value was wrong (docs/torch-facts.md#heads-dividing).""")
NOT_POSITIVE = Message(
    "{api} gets {embed} and {heads}, but both must be positive: building it raises ValueError",
    help="give {embed_key} and {heads_key} positive values",
    explanation="""
    `MultiheadAttention.__init__` raises `ValueError: embed_dim and num_heads must be greater than 0` (torch 2.13
    nn/modules/activation.py:1176-1180), before the sizes are checked for divisibility.{via} The error surfaces
    only when the model is built (docs/torch-facts.md#heads-dividing).""")
# The explanation's note for the classes that build a MultiheadAttention from their d_model and nhead.
VIA = " {api} passes {embed_key} and {heads_key} to nn.MultiheadAttention at {where} (torch 2.13)."
# The fix in words: the nearest head counts that divide the size, and the nearest sizes the head count divides.
DIVIDING_COUNTS = "use a head count that divides {embed}: {counts} (head size {head_sizes})"
MULTIPLES = (", or make {embed_key} a multiple of {heads} ({multiples}, for example with an nn.Linear projection in "
             "front)")

# (embedding parameter, heads parameter) of each module that builds a MultiheadAttention from them
# (docs/torch-facts.md#positional-order).
_PARAMETERS = {
    torchapi.MHA: ("embed_dim", "num_heads"),
    torchapi.ENCODER_LAYER: ("d_model", "nhead"),
    torchapi.DECODER_LAYER: ("d_model", "nhead"),
    torchapi.TRANSFORMER: ("d_model", "nhead"),
}
# Where the layer classes build their MultiheadAttention (torch 2.13 nn/modules/transformer.py).
_BUILDS_MHA = {
    torchapi.ENCODER_LAYER: "transformer.py:757",
    torchapi.DECODER_LAYER: "transformer.py:1042",
    torchapi.TRANSFORMER: "transformer.py:757 and 1042, in the layers it builds at 125 and 150",
}
# Largest sizes the probe builds as written; a larger site is scaled down keeping the remainder.
_PROBE_MAX_EMBED = 1024
_PROBE_MAX_HEADS = 64
_PROBE_HEAD_DIM = 8


class HeadsNotDividing(Rule):
    """
    ## What it does
    Flags `nn.MultiheadAttention(embed_dim, num_heads)`, `nn.TransformerEncoderLayer` /
    `nn.TransformerDecoderLayer(d_model, nhead)` and `nn.Transformer(d_model=512, nhead=8)` (its defaults apply
    when an argument is absent) whose embedding size resolves to a number the head count does not divide, or
    whose sizes are zero or negative. Values are followed through literals, module constants, arithmetic,
    parameter defaults and the module's own instantiations of a class (`Block(dim=100)`); an unknown value is
    never flagged.

    ## Why is this bad?
    The module cannot be built: `MultiheadAttention.__init__` raises
    `AssertionError: embed_dim must be divisible by num_heads` (torch 2.13 `nn/modules/activation.py:1192-1193`),
    and the Transformer classes build a MultiheadAttention with their `d_model` and `nhead`. It is an explicit
    `raise`, so it fires under `python -O` too. A head count of 0 or less, or an embedding size of 0 or less,
    raises `ValueError: embed_dim and num_heads must be greater than 0` first (`activation.py:1176-1180`). The
    error surfaces only when the model is built, often deep in a configuration sweep; the message does not say
    which layer or which config value was wrong.

    ## Known problems
    Both sizes must resolve statically (a literal, a constant, a default, or what the file's callers pass).
    Sizes read from a config at run time are not judged; torch raises for them when the module is built.

    ## Example
    ```python
    EMBED_DIM = 300  # GloVe vectors
    attn = nn.MultiheadAttention(EMBED_DIM, num_heads=8, batch_first=True)
    ```

    ## Use instead
    ```python
    attn = nn.MultiheadAttention(EMBED_DIM, num_heads=6, batch_first=True)  # 50 per head
    ```
    or project the embeddings to a size that 8 divides (`nn.Linear(300, 304)`).

    ## Fix safety
    No automatic fix: changing the head count or the embedding size changes the model (the per-head split, or
    the parameter shapes), so the author has to choose.

    ## References
    - torch 2.13 `nn/modules/activation.py:1176-1180` (the ValueError) and `1192-1193` (the AssertionError)
    - torch 2.13 `nn/modules/transformer.py:757` and `1042` (the layers build a MultiheadAttention)
    - docs/torch-facts.md#heads-dividing
    """

    code = "MHA005"
    name = "heads-not-dividing"
    summary = "embed_dim/d_model not divisible by num_heads/nhead: the module raises when it is built"
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
            model = nn.Transformer(batch_first=True)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            layer = nn.TransformerEncoderLayer(d_model=300, nhead=6, batch_first=True)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            def build(dim):
                return nn.MultiheadAttention(dim, 8, batch_first=True)
            """,
        ),
        Valid(
            """
            class MultiheadAttention:
                def __init__(self, d, h): ...
            attn = MultiheadAttention(100, 8)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(100, 8)  # noqa: MHA005
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(100, 8, batch_first=True)
            """,
            line=2,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets embed_dim=100, which num_heads=8 does not divide (100 = 12 x 8 + 4): "
                "building it raises AssertionError"
            ),
        ),
        Invalid(
            """
            from torch import nn
            D_MODEL = 300
            layer = nn.TransformerEncoderLayer(D_MODEL, nhead=8)
            """,
            line=3,
            severity=Severity.ERROR,
            headline=(
                "nn.TransformerEncoderLayer gets d_model=300 (`D_MODEL`), which nhead=8 does not divide (300 = 37 x 8 "
                "+ 4): building it raises AssertionError"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            model = nn.Transformer(d_model=100, batch_first=True)
            """,
            line=2,
            severity=Severity.ERROR,
            headline=(
                "nn.Transformer gets d_model=100, which nhead=8 (the default) does not divide (100 = 12 x 8 + 4): "
                "building it raises AssertionError"
            ),
        ),
        Invalid(
            """
            import torch
            class Block(torch.nn.Module):
                def __init__(self, dim=96, heads=8):
                    super().__init__()
                    self.attn = torch.nn.MultiheadAttention(dim, heads)
            block = Block(dim=100)
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets embed_dim=100 (`dim`), which num_heads=8 (`heads`) does not divide (100 = "
                "12 x 8 + 4): building it raises AssertionError"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 0)
            """,
            line=2,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets embed_dim=64 and num_heads=0, but both must be positive: building it "
                "raises ValueError"
            ),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        built = construction(self.context, node, self.scope)
        if built is None or built.api not in _PARAMETERS:
            return
        if built.api == torchapi.TRANSFORMER and self._custom_stacks(built):
            return
        embed_key, heads_key = _PARAMETERS[built.api]
        embed, embed_evidence = self._size(built, embed_key)
        heads, heads_evidence = self._size(built, heads_key)
        if embed is None or heads is None:
            return
        if embed > 0 and heads > 0 and embed % heads == 0:
            return
        api = torchapi.short_name(built.api)
        evidence = [embed_evidence[0], heads_evidence[0], *embed_evidence[1:], *heads_evidence[1:]]
        via = VIA.format(api=api, embed_key=embed_key, heads_key=heads_key, where=_BUILDS_MHA[built.api]) \
            if built.api in _BUILDS_MHA else ""
        fields = {"api": api, "embed": self._headline_size(built, embed_key, embed),
                  "heads": self._headline_size(built, heads_key, heads), "embed_key": embed_key, "heads_key": heads_key,
                  "via": via}
        positive = embed > 0 and heads > 0
        if positive:
            fields.update(embed_value=embed, heads_value=heads, quotient=embed // heads, remainder=embed % heads,
                          suggestion=_suggestion(embed, heads, embed_key))
        self.report(
            node, NOT_DIVIDING if positive else NOT_POSITIVE, severity=Severity.ERROR, evidence=evidence,
            arguments={**constructor_values(self.context, built), embed_key: embed, heads_key: heads}, **fields)

    def _size(self, built, parameter: str) -> tuple[int | None, list[str]]:
        """The parameter's integer value (the constructor's default when it is certainly absent) and how it was
        found; (None, []) when it is unknown or not an int."""
        arguments = built.arguments
        expr = arguments.get(parameter)
        if expr is None:
            default = torchapi.CONSTRUCTOR_DEFAULTS.get(built.api, {}).get(parameter)
            if default is None or not arguments.absent(parameter):
                return None, []
            value, written = Value(default), None
        else:
            value, written = resolve(self.context, expr, built.scope), self.context.code(expr)
        if value is None or not isinstance(value.value, int) or isinstance(value.value, bool):
            return None, []
        if written is None:
            head = f"{parameter} defaults to {value.value}"
        elif written == str(value.value):
            head = f"{parameter}={written}"
        else:
            head = f"{parameter}=`{written}` = {value.value}"
        return value.value, [head, *value.trail]

    def _headline_size(self, built, parameter: str, value: int) -> str:
        """How the headline shows a size: `embed_dim=100`, ``d_model=300 (`D_MODEL`)``, `nhead=8 (the default)`: the
        value first, so that shortening a long expression keeps it."""
        expr = built.arguments.get(parameter)
        if expr is None:
            return f"{parameter}={value} (the default)"
        written = " ".join(self.context.code(expr).split())
        return f"{parameter}={value}" if written in (str(value), parameter) else f"{parameter}={value} (`{written}`)"

    def _custom_stacks(self, built) -> bool:
        """nn.Transformer builds no attention layer of its own when both custom stacks are given."""
        for parameter in ("custom_encoder", "custom_decoder"):
            expr = built.arguments.get(parameter)
            if expr is None:
                return False
            value = resolve(self.context, expr, built.scope)
            if value is not None and value.value is None:
                return False
        return True

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Build the module with the site's sizes (scaled down, keeping the remainder, when they are large) and
        report what the constructor raises (docs/torch-facts.md#heads-dividing). The experiment builds the site's
        own sizes (or stand-ins with the same remainder), so what it shows is the site's outcome: confirmed."""
        from mhalint.probe import support

        api = arguments["api"]
        embed_key, heads_key = _PARAMETERS[api]
        defaults = torchapi.CONSTRUCTOR_DEFAULTS.get(api, {})
        embed, heads = arguments.get(embed_key, defaults.get(embed_key)), arguments.get(heads_key,
                                                                                        defaults.get(heads_key))
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (embed, heads)):
            return SKIPPED, f"{embed_key} or {heads_key} is not a known integer"
        size, notes = _probe_sizes(embed, heads)
        nn = torch.nn
        try:
            if api == torchapi.MHA:
                nn.MultiheadAttention(size[0], size[1], batch_first=True)
            elif api == torchapi.TRANSFORMER:
                nn.Transformer(size[0], size[1], 1, 1, 16, 0.0, batch_first=True)
            else:
                layer = nn.TransformerEncoderLayer if api == torchapi.ENCODER_LAYER else nn.TransformerDecoderLayer
                layer(size[0], size[1], 16, 0.0, batch_first=True)
        except (AssertionError, ValueError) as error:
            text = str(error).splitlines()[0] if str(error) else ""
            return support.Rebuilt().verdict(  # the site's own sizes, or scaled ones with the same remainder
                f"{torchapi.short_name(api)}({embed_key}={size[0]}, {heads_key}={size[1]}) raised "
                               f"{type(error).__name__}: {text}{_notes(notes)}")
        return NOT_CONFIRMED, (f"{torchapi.short_name(api)}({embed_key}={size[0]}, {heads_key}={size[1]}) was built "
                               f"without error{_notes(notes)}")


def _probe_sizes(embed: int, heads: int) -> tuple[tuple[int, int], list[str]]:
    """The sizes to build: the site's when small, else stand-ins with the same outcome (divisible or not). Sizes
    that are zero or negative raise before anything is allocated, so they are kept as written."""
    if embed <= 0 or heads <= 0 or (embed <= _PROBE_MAX_EMBED and heads <= _PROBE_MAX_HEADS):
        return (embed, heads), []
    notes = []
    remainder = embed % heads
    if heads > _PROBE_MAX_HEADS:
        notes.append(f"used 8 heads instead of {heads}")
        heads, remainder = 8, (remainder % 8 or 1) if remainder else 0
    scaled = heads * _PROBE_HEAD_DIM + remainder
    kept = f"keeping a remainder of {remainder}" if remainder else "still divisible"
    notes.append(f"scaled the embedding size from {embed} to {scaled}, {kept}")
    return (scaled, heads), notes


def _notes(notes: list[str]) -> str:
    return f" ({'; '.join(notes)})" if notes else ""


def _suggestion(embed: int, heads: int, embed_key: str) -> str:
    """The nearest head counts below and above that divide the embedding size (even ones when there are any:
    odd counts lose the fast path, MHA004), and the nearest multiples of the head count."""
    limit = min(embed, 4 * heads + 64, 1 << 16)  # a bounded search: sizes can be large
    divisors = [h for h in range(1, limit + 1) if embed % h == 0]
    pool = [h for h in divisors if h % 2 == 0] or divisors
    below = [h for h in pool if h < heads][-1:]
    above = [h for h in pool if h > heads][:1]
    counts = below + above
    text = DIVIDING_COUNTS.format(embed=embed, counts=" or ".join(str(c) for c in counts),
                                  head_sizes=" or ".join(str(embed // c) for c in counts))
    multiples = [m for m in (embed - embed % heads, embed - embed % heads + heads) if m > 0]
    return text + MULTIPLES.format(embed_key=embed_key, heads=heads, multiples=" or ".join(str(m) for m in multiples))
