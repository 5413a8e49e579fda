"""MHA003 is-causal-without-mask: `is_causal` is only a hint to MultiheadAttention and the Transformer classes."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis.calls import call_target
from mhalint.analysis.values import constructor_values, resolve, taking
from mhalint.finding import NOT_CONFIRMED, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

# Fields: `flag_set` ("is_causal=True", "is_causal=CAUSAL (True)"), `missing` ("without attn_mask", "with
# attn_mask=None"), `api` (nn.MultiheadAttention, ...), `flag` and `mask` (the names), `distance` (how far the
# silently unmasked output was from the causal one in the torch experiment).
_HINT_HELP = "also pass {mask}=nn.Transformer.generate_square_subsequent_mask(L) (keep {flag}=True as the hint)"
SILENTLY_UNMASKED = Message(
    "{flag_set} {missing}: {api} takes it as a hint, and its fast inference path attends to the future",
    help=_HINT_HELP,
    explanation="""
        For {api}, {flag} is only a hint that the mask you pass is causal; it builds no mask (torch 2.13
        `nn/modules/transformer.py:917-938`). Without the mask, training raises `RuntimeError: Need attn_mask if
        specifying the is_causal hint` (`nn/functional.py:6810-6815`), but inference (eval + no_grad,
        batch_first=True, even heads) takes the fused fast path, which never receives the flag
        (`nn/modules/activation.py:1433-1447`): every position silently attends to the future.
        torch 2.13 experiment: the output equalled the unmasked output and was {distance} away from the causal one
        (docs/torch-facts.md#is-causal-hint).
    """)
ALWAYS_RAISES = Message(
    "{flag_set} {missing}: {api} raises 'Need attn_mask if specifying the is_causal hint'",
    help=_HINT_HELP,
    explanation="""
        For {api}, {flag} is only a hint that the mask you pass is causal; it builds no mask. The function checks
        the hint before anything else, so without {mask} every call raises `RuntimeError: Need attn_mask if
        specifying the is_causal hint` (torch 2.13 `nn/functional.py:6810-6815`), in training and in inference
        (docs/torch-facts.md#is-causal-hint).
    """)
MEMORY_ALWAYS_RAISES = Message(
    "{flag_set} {missing}: {api} raises 'Need attn_mask if specifying the is_causal hint'",
    help="pass the memory_mask it describes, or drop memory_is_causal=True",
    explanation="""
        memory_is_causal is only a hint that memory_mask is causal; it builds no mask. Cross-attention never takes
        the fast path that would drop the flag, so without memory_mask every call of {api} raises
        `RuntimeError: Need attn_mask if specifying the is_causal hint` (torch 2.13 `nn/functional.py:6810-6815`),
        in training and in inference (docs/torch-facts.md#is-causal-hint).
    """)

# The causal flag of each entry point, and the mask argument it describes (docs/torch-facts.md#positional-order).
_FLAG_TO_MASK = {
    torchapi.MHA: {"is_causal": "attn_mask"},
    torchapi.MHA_FORWARD_FN: {"is_causal": "attn_mask"},
    torchapi.ENCODER_LAYER: {"is_causal": "src_mask"},
    torchapi.ENCODER: {"is_causal": "mask"},
    torchapi.DECODER_LAYER: {"tgt_is_causal": "tgt_mask", "memory_is_causal": "memory_mask"},
    torchapi.DECODER: {"tgt_is_causal": "tgt_mask", "memory_is_causal": "memory_mask"},
    torchapi.TRANSFORMER: {"src_is_causal": "src_mask", "tgt_is_causal": "tgt_mask",
                           "memory_is_causal": "memory_mask"},
}
# How far the silently unmasked inference output was from the causal one, in a torch 2.13 experiment
# (docs/torch-facts.md#is-causal-hint).
_DISTANCE_FROM_CAUSAL = {
    torchapi.MHA: 0.69, torchapi.ENCODER_LAYER: 1.35, torchapi.ENCODER: 2.04, torchapi.DECODER_LAYER: 0.94,
    torchapi.DECODER: 0.95, torchapi.TRANSFORMER: 0.88,
}


class IsCausalWithoutMask(Rule):
    """
    ## What it does
    Flags `is_causal=True` (and `src_is_causal`, `tgt_is_causal`, `memory_is_causal`) given to a
    `nn.MultiheadAttention` call, a Transformer layer, `nn.TransformerEncoder`/`Decoder`, `nn.Transformer`, or
    `F.multi_head_attention_forward` without the mask it describes (`attn_mask`, `src_mask`, `mask`, `tgt_mask`,
    `memory_mask`). Module calls are recognised through their instances (`self.attn = nn.MultiheadAttention(...)`
    in `__init__`, called in `forward`). `F.scaled_dot_product_attention(..., is_causal=True)` is correct and is
    never flagged.

    ## Why is this bad?
    For these modules `is_causal` is only a hint that the mask you pass is causal; it does not build one.
    Without the mask, training raises `RuntimeError: Need attn_mask if specifying the is_causal hint`, but
    inference (eval + `no_grad`, `batch_first=True`, even heads) takes the fused fast path, which never receives
    the flag: every position silently attends to the future. In a torch 2.13 experiment the output equalled the
    unmasked output (diff 6e-08) and was 0.69 away from the causal one for MultiheadAttention, 1.35 for
    TransformerEncoderLayer (docs/torch-facts.md#is-causal-hint).

    ## Known problems
    A flag passed through `**kwargs`, or read from a config object at run time, is not resolved, so the site is
    not judged. A project's own attention class that forwards the flag to torch is followed only where its call
    resolves to torch's API.

    ## Example
    ```python
    out, _ = self.attn(x, x, x, is_causal=True, need_weights=False)
    ```

    ## Use instead
    ```python
    mask = nn.Transformer.generate_square_subsequent_mask(x.size(1), device=x.device)
    out, _ = self.attn(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)
    ```
    or call `F.scaled_dot_product_attention(q, k, v, is_causal=True)`, where the flag does build the mask.

    ## Fix safety
    No automatic fix: the mask's size depends on the sequence length at the call.

    ## References
    - torch 2.13 `nn/functional.py:6810-6815` (the RuntimeError), `nn/modules/activation.py:1433-1447` (the fast
      path has no `is_causal`), `nn/modules/transformer.py:917-938`
    - docs/torch-facts.md#is-causal-hint, docs/torch-facts.md#positional-order
    """

    code = "MHA003"
    name = "is-causal-without-mask"
    summary = "is_causal=True without the attn_mask it describes: inference silently attends to the future"
    # The module names, not `is_causal` (SDPA code is full of it): only a module built in this file can be flagged.
    triggers = (torchapi.MHA_TRIGGER, torchapi.TRANSFORMER_TRIGGER, torchapi.MHA_FORWARD_FN_TRIGGER)
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
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x, m):
                return attn(x, x, x, attn_mask=m, is_causal=True)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x, m):
                return attn(x, x, x, None, True, m, True, True)
            """,
        ),
        Valid(
            """
            class Attn:
                def __call__(self, *a, **k): ...
            attn = Attn()
            attn(1, 2, 3, is_causal=True)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 2)
            def f(x):
                return enc(x, is_causal=False)
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn as nn
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
                def forward(self, x):
                    return self.attn(x, x, x, is_causal=True)[0]
            """,
            line=7,
            severity=Severity.ERROR,
            headline=(
                "is_causal=True without attn_mask: nn.MultiheadAttention takes it as a hint, and its fast inference "
                "path attends to the future"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            layer = nn.TransformerEncoderLayer(64, 8, batch_first=True)
            def f(x):
                return layer(x, is_causal=True)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "is_causal=True without src_mask: nn.TransformerEncoderLayer takes it as a hint, and its fast "
                "inference path attends to the future"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            model = nn.Transformer(batch_first=True)
            def f(s, t):
                return model(s, t, tgt_is_causal=True)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "tgt_is_causal=True without tgt_mask: nn.Transformer takes it as a hint, and its fast inference path "
                "attends to the future"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                return attn(x, x, x, None, True, None, True, True)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "is_causal=True with attn_mask=None: nn.MultiheadAttention takes it as a hint, and its fast inference "
                "path attends to the future"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            layers = nn.ModuleList([nn.TransformerDecoderLayer(64, 8) for _ in range(2)])
            def f(x, mem):
                for layer in layers:
                    x = layer(
                        x, mem,
                        tgt_is_causal=True,
                    )
                return x
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "tgt_is_causal=True without tgt_mask: nn.TransformerDecoderLayer takes it as a hint, and its fast "
                "inference path attends to the future"
            ),
        ),
        Invalid(
            """
            import torch.nn.functional as F
            CAUSAL = True
            def f(q, w, b, ow, ob):
                return F.multi_head_attention_forward(q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob,
                                                      is_causal=CAUSAL)
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "is_causal=CAUSAL (True) without attn_mask: F.multi_head_attention_forward raises 'Need attn_mask if "
                "specifying the is_causal hint'"
            ),
        ),
    )
    example_inputs = "import torch\nx = torch.randn(2, 5, 64)\n"
    runtime_valid = (
        Valid(
            """
            import torch
            mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
            x = torch.randn(2, 4, 8)
            mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
            with torch.no_grad():
                mha(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
            x = torch.randn(2, 4, 8)
            with torch.no_grad():
                mha(x, x, x, is_causal=True, need_weights=False)
            """,
            line=5,
            message="got is_causal=True and no attn_mask",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is None or target.api not in _FLAG_TO_MASK:
            return
        for flag, mask in _FLAG_TO_MASK[target.api].items():
            flag_expr = target.arguments.get(flag)
            value = taking(self.context, flag_expr, self.scope, True)
            if value is None:
                continue
            mask_expr = target.arguments.get(mask)
            if mask_expr is None and not target.arguments.absent(mask):
                continue  # *args/**kwargs may carry the mask
            if mask_expr is not None:
                mask_value = resolve(self.context, mask_expr, self.scope)
                if mask_value is None or mask_value.value is not None:
                    continue
            self._report(node, target, flag, mask, flag_expr, value.trail, mask_expr)

    def _report(self, node, target, flag, mask, flag_expr, trail, mask_expr) -> None:
        api = target.api
        written = self.context.code(flag_expr)
        line = self.context.line(flag_expr)
        if mask_expr is None:
            missing, absent = f"without {mask}", f"no {mask} argument in the call at line {self.context.line(node)}"
        else:
            given = self.context.code(mask_expr)
            missing = f"with {mask}={given}" + ("" if given == "None" else " (None)")
            absent = f"{mask}={given} at line {self.context.line(mask_expr)}"
        evidence = [f"{flag}={written} at line {line}" + (" resolves to True" if written != "True" else ""), *trail,
                    absent]
        found = dict(
            evidence=evidence, arguments={
                **(constructor_values(self.context, target.construction) if target.construction else {}),
                "api": api, "flag": flag, "mask": mask},
            flag_set=f"{flag}=True" if written == "True" else f"{flag}={written} (True)",
            missing=missing, api=torchapi.short_name(api), flag=flag, mask=mask,
            distance=_DISTANCE_FROM_CAUSAL.get(api))
        if api == torchapi.MHA_FORWARD_FN:
            self.report(node, ALWAYS_RAISES, severity=Severity.WARNING, **found)
        elif flag == "memory_is_causal":  # cross-attention never takes the fast path that would drop the flag
            self.report(node, MEMORY_ALWAYS_RAISES, severity=Severity.WARNING, **found)
        else:
            self.report(node, SILENTLY_UNMASKED, severity=Severity.ERROR, **found)

    @staticmethod
    def guard(call) -> list:
        """MHA003: is_causal=True (or src_/tgt_/memory_is_causal) without the mask it describes."""
        from mhalint.guard import support as s
        return [s.Pending(True, lambda block=block: _causal_message(call, block))
                for block in call.blocks if block.causal and block.attn_mask is None]

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Run the call with the flag and no mask in training (it raises) and in eval + no_grad (compare with the
        unmasked and the causal output), docs/torch-facts.md#is-causal-hint. The flag and the missing mask always
        come from the site; the silent result also needs the fast path (batch_first=True, even heads): when the
        site's construction does not give those, they are assumed, and the result is only reproduced."""
        from mhalint.probe import support

        api, flag, mask = arguments["api"], arguments["flag"], arguments["mask"]
        if api == torchapi.MHA_FORWARD_FN:
            return _functional(torch, support)
        batch_first = arguments.get("batch_first", True) is not False
        rebuilt = support.Rebuilt()
        if "batch_first" not in arguments:  # the silent result needs the fast path, which needs batch_first=True
            rebuilt.assume("batch_first=True")
        module, embed, heads, notes = support.build(torch, arguments, batch_first, rebuilt)
        data = torch.randn(support.N, support.L, embed) if batch_first else torch.randn(support.L, support.N, embed)
        causal = torch.nn.Transformer.generate_square_subsequent_mask(support.L)
        site = {flag: True, **({mask: causal} if arguments.get("mask_given") else {})}  # what the call passes
        module.train()
        training = _raises(lambda: support.run(module, api, data, **site))
        module.eval()
        with torch.no_grad():
            inference = _raises(lambda: support.run(module, api, data, **site))
            sizes = support.sizes(embed, heads, notes)
            if inference is not None:
                if training is None:
                    return NOT_CONFIRMED, f"only inference raised: {inference} ({sizes})"
                return rebuilt.verdict(f"raises in training and in inference: {inference} ({sizes})")
            output = support.run(module, api, data, **site)
            unmasked = support.max_diff(output, support.run(module, api, data))
            from_causal = support.max_diff(output, support.run(module, api, data, **{mask: causal, flag: True}))
        if unmasked < 1e-5 and from_causal > 1e-4:
            trained = f"; in training it raises: {training}" if training else ""
            found = (f"in eval + no_grad the output equals the unmasked output (diff {unmasked:.1e}) and is "
                     f"{from_causal:.2f} away from the causal one{trained} ({sizes})")
            return rebuilt.verdict(found)
        return NOT_CONFIRMED, (f"in eval + no_grad the output is {unmasked:.1e} from the unmasked output and "
                               f"{from_causal:.1e} from the causal one ({sizes})")


def _functional(torch, support) -> tuple[str, str]:
    """F.multi_head_attention_forward checks the hint before anything else: it raises whatever the mode."""
    embed, heads = 16, 2
    rebuilt = support.Rebuilt()
    rebuilt.assume(f"embed_dim={embed} and num_heads={heads} (the call's sizes are not read)")
    x = torch.randn(support.L, support.N, embed)
    weight, bias = torch.randn(3 * embed, embed), torch.zeros(3 * embed)
    error = _raises(lambda: torch.nn.functional.multi_head_attention_forward(
        x, x, x, embed, heads, weight, bias, None, None, False, 0.0, torch.randn(embed, embed), torch.zeros(embed),
        training=False, is_causal=True))
    if error is not None:
        return rebuilt.verdict(f"the call raises: {error}")
    return NOT_CONFIRMED, "the call ran without raising"


def _raises(action) -> str | None:
    """The first line of the RuntimeError an action raises, or None."""
    try:
        action()
    except RuntimeError as error:
        return str(error).split(". ")[0].splitlines()[0].rstrip(".")
    return None


# ---- the runtime check (mhalint.guard) ----
# In a torch 2.13 experiment (E=16, 4 heads, L=6; docs/torch-facts.md#is-causal-hint): how far the silent output
# was from the causal one.
_CAUSAL_DISTANCE = {
    "mha": "0.69", "encoder_layer": "1.35", "encoder": "2.04", "decoder_layer": "0.94", "decoder": "0.95",
}


def _causal_message(call, block) -> str:
    from mhalint.guard import support as s
    label = f" ({block.label})" if block.label else ""
    called = f"{call.api}{label} got {block.causal_name}=True and no {block.attn_name}"
    hint = ("For nn.MultiheadAttention and the Transformer classes is_causal is only a hint about the mask you pass; "
            "it does not build one.")
    distance = _CAUSAL_DISTANCE.get(call.kind)
    if call.kind == "transformer" and block.causal_name == "tgt_is_causal":
        distance = "0.88"
    equal = "the output equals the unmasked output (" + (
        f"torch 2.13 experiment: {distance} away from the causal one at E=16, 4 heads, L=6; " if distance else "") + \
        "docs/torch-facts.md#is-causal-hint)"
    error = call.error
    if error is None:
        headline = f"{called}: no error, so the fused inference path ignored the flag"
        what = (f"This call ({call.mode_text()}) returned without error, which for this misuse means torch's fused "
                f"inference path dropped the flag: every position attended to later positions, and {equal}. In "
                "training mode the same call raises RuntimeError: Need attn_mask if specifying the is_causal hint.")
    elif isinstance(error, RuntimeError) and "is_causal" in str(error):
        headline = f"{called}: it raised RuntimeError: Need attn_mask if specifying the is_causal hint"
        silent = ("cross-attention never takes the fast path, so this always raises" if block.causal_name ==
                  "memory_is_causal" else "in eval + no_grad (batch_first=True, an even head count) the same call "
                  f"is silently ignored instead: {equal}")
        what = (f"This call ({call.mode_text()}) raised RuntimeError (Need attn_mask if specifying the is_causal "
                f"hint) because it ran on the slow path; {silent}.")
    else:
        headline = f"{called}: the flag is only a hint, and this call raised {type(error).__name__}"
        what = f"This call ({call.mode_text()}) raised {type(error).__name__}."
    if call.kind in ("mha", "mha_fn"):
        fix = ("pass the mask too, attn_mask=nn.Transformer.generate_square_subsequent_mask(L) (is_causal=True "
               "may stay as the hint), or use F.scaled_dot_product_attention(q, k, v, is_causal=True), whose flag "
               "does build the mask.")
    else:
        fix = (f"pass {block.attn_name}=nn.Transformer.generate_square_subsequent_mask(L) together with "
               f"{block.causal_name}=True.")
    return s.message(headline, fix, f"{hint} {what}")
