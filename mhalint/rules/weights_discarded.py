"""MHA007 weights-discarded: attention weights computed (need_weights defaults to True) and thrown away."""

from __future__ import annotations

from typing import Callable

from mhalint import torchapi
from mhalint.analysis import dataflow
from mhalint.analysis.calls import call_target, with_argument
from mhalint.analysis.fastpath import off_reason
from mhalint.analysis.values import constructor_values, resolve
from mhalint.context import Scope
from mhalint.finding import NOT_CONFIRMED, SAFE, Severity
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal
from mhalint.rule import Invalid, Message, Rule, Valid

WEIGHTS_DISCARDED = Message(
    "{api} computes attention weights nobody reads ({setting}): {why}",
    help="pass need_weights=False (the output is unchanged)",
    explanation="""
    By default MultiheadAttention.forward also computes and returns the attention weights, averaged over heads. On the
    slow path (training, odd head counts, batch_first=False, float masks, cross-attention) that means an explicit bmm +
    softmax instead of the fused scaled_dot_product_attention kernel (torch 2.13 nn/functional.py:7023-7093). In a torch
    2.13 experiment on CPU with one thread at L=1024, that was 1.93-2.10x slower in eval with odd heads and 1.89-2.12x
    in a training forward; on the CPU inference fast path the cost was the same either way (1.02-1.11x), and at L=128
    the eval slow path 1.10-1.12x (docs/torch-facts.md#need-weights). need_weights=True also gives NaN for a fully
    padded sample where need_weights=False stays finite (docs/torch-facts.md#fully-masked-rows). The output itself is
    the same, so nothing shows the wasted work.""")
# How the headline says need_weights is True.
DEFAULT_TRUE = "default need_weights=True"
PASSED_TRUE = "need_weights=True"
RESOLVES_TRUE = "need_weights={written} = True"

_APIS = (torchapi.MHA, torchapi.MHA_FORWARD_FN)
_MAX_DEPTH = 8


class WeightsDiscarded(Rule):
    """
    ## What it does
    Flags a `nn.MultiheadAttention` call (or `F.multi_head_attention_forward`) that leaves `need_weights` at its
    default `True` (or passes `True`, or a constant that resolves to `True`) and then throws the attention weights
    away: `out = attn(...)[0]`, `attn(...)[0]` used in an expression, `out, _ = attn(...)`, `out, w = attn(...)`
    where `w` is never read in the function, or `res = attn(...)` followed only by `res[0]`. A `need_weights`
    forwarded from a parameter is the caller's choice and is not flagged.

    ## Why is this bad?
    By default `MultiheadAttention.forward` also computes and returns the attention weights, averaged over heads. On the
    slow path (training, odd head counts, `batch_first=False`, float masks, cross-attention) that means an explicit
    `bmm` + `softmax` instead of the fused `scaled_dot_product_attention` kernel (torch 2.13
    `nn/functional.py:7023-7093`). In a torch 2.13 experiment on CPU with one thread at L=1024
    (docs/torch-facts.md#need-weights), that was 1.93-2.10x slower in eval with odd heads and 1.89-2.12x slower in a
    training forward; on the CPU inference fast path the cost was the same either way (1.02-1.11x), and at L=128 the
    eval slow path was still 1.10-1.12x slower. `need_weights=True` also gives NaN for a fully padded sample where
    `need_weights=False` stays finite (docs/torch-facts.md#fully-masked-rows). The output itself is the same, so nothing
    ever shows the wasted work; torch's own docstring calls it "a significant performance degradation".

    ## Known problems
    A `need_weights` passed from a parameter is the caller's choice and is not flagged, even when every caller
    discards the weights.

    ## Example
    ```python
    out = self.attn(x, x, x, key_padding_mask=pad)[0]
    ```

    ## Use instead
    ```python
    out = self.attn(x, x, x, key_padding_mask=pad, need_weights=False)[0]
    ```

    ## Fix safety
    Safe: `need_weights=False` is added to the call (or a `True` given for it is replaced). The attention output
    is unchanged; only the weights, which the code does not use, are no longer computed (and the second element
    of the result becomes `None`).

    ## References
    - torch 2.13 `nn/modules/activation.py:1289-1292` (the `need_weights` docstring), `nn/functional.py:6685-6688`
      and `7023-7093`
    - docs/torch-facts.md#need-weights and docs/torch-facts.md#fully-masked-rows
    """

    code = "MHA007"
    name = "weights-discarded"
    summary = "need_weights left True while the attention weights are thrown away: slower on the slow path"
    triggers = (torchapi.MHA_TRIGGER, torchapi.MHA_FORWARD_FN_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                return attn(x, x, x, need_weights=False)[0]
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, weights = attn(x, x, x)
                return out, weights
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x, need_weights=True):
                return attn(x, x, x, need_weights=need_weights)[0]
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                return attn(x, x, x)
            """,
        ),
        Valid(
            """
            class MultiheadAttention:
                def __call__(self, *a): ...
            attn = MultiheadAttention()
            out = attn(1, 2, 3)[0]
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x, **kw):
                return attn(x, x, x, **kw)[0]
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            def f(x):
                return attn(x, x, x)[0]  # noqa: MHA007
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn as nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8)
                def forward(self, x):
                    return x + self.attn(x, x, x)[0]
            """,
            line=7,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention computes attention weights nobody reads (default need_weights=True): `[0]` "
                "keeps only the output (line 7)"
            ),
            fixed="""
            import torch.nn as nn
            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8)
                def forward(self, x):
                    return x + self.attn(x, x, x, need_weights=False)[0]
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            def f(x):
                out, _ = attn(x, x, x)
                return out
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention computes attention weights nobody reads (default need_weights=True): `out, _ =` "
                "discards the weights (line 4)"
            ),
            fixed="""
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            def f(x):
                out, _ = attn(x, x, x, need_weights=False)
                return out
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            def f(x):
                out, weights = attn(x, x, x, None, True)
                return out
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention computes attention weights nobody reads (need_weights=True): `weights` from "
                "`out, weights =` (line 4) is never read in `f`"
            ),
            fixed="""
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            def f(x):
                out, weights = attn(x, x, x, None, False)
                return out
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            def f(x):
                res = attn(x, x, x)
                res = res[0]
                return res
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention computes attention weights nobody reads (default need_weights=True): `res` from "
                "line 4 is only read as `res[0]` (line 5)"
            ),
            fixed="""
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            def f(x):
                res = attn(x, x, x, need_weights=False)
                res = res[0]
                return res
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F
            def f(q, w, b, ow, ob):
                return F.multi_head_attention_forward(q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob)[0]
            """,
            line=3,
            severity=Severity.WARNING,
            headline=(
                "F.multi_head_attention_forward computes attention weights nobody reads (default need_weights=True): "
                "`[0]` keeps only the output (line 3)"
            ),
            fixed="""
            import torch.nn.functional as F
            def f(q, w, b, ow, ob):
                return F.multi_head_attention_forward(q, q, q, 8, 2, w, b, None, None, False, 0.0, ow, ob, need_weights=False)[0]
            """,  # noqa: E501 -- a line of the example's code
        ),
    )
    example_inputs = (  # sequence-first (L, N, E); `f(q, w, b, ow, ob)` is F.multi_head_attention_forward's
        "import torch\nx = torch.randn(5, 2, 64)\nq = torch.randn(5, 2, 8)\n"
        "w, b, ow, ob = torch.randn(24, 8), torch.randn(24), torch.randn(8, 8), torch.randn(8)\n")

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """`attn(...)[0]`, wherever it stands."""
        if isinstance(node.value, cst.Call) and _is_index(node, 0):
            self._check(node.value, lambda: f"`[0]` keeps only the output (line {self.context.line(node)})")

    def visit_Assign(self, node: cst.Assign) -> None:
        """`out, _ = attn(...)`, `out, w = attn(...)` with `w` unread, `res = attn(...)` then only `res[0]`."""
        if not isinstance(node.value, cst.Call) or len(node.targets) != 1:
            return
        target = node.targets[0].target
        if isinstance(target, cst.Tuple | cst.List):
            self._check(node.value, lambda: self._unpacked(node, target))
        elif isinstance(target, cst.Name):
            self._check(node.value, lambda: self._only_first(node, target.value))

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if isinstance(node.value, cst.Call) and isinstance(node.target, cst.Name):
            self._check(node.value, lambda: self._only_first(node, node.target.value))

    # ---- how the weights are thrown away ----
    def _unpacked(self, statement: cst.Assign, target: cst.Tuple | cst.List) -> str | None:
        elements = target.elements
        if len(elements) != 2 or any(isinstance(e, cst.StarredElement) for e in elements):
            return None
        first, second = (e.value for e in elements)
        if not isinstance(second, cst.Name):
            return None  # `out, self.weights = ...` keeps them
        written = f"`{self.context.code(first)}, {second.value} =`"
        line = self.context.line(statement)
        if second.value == "_":
            return f"{written} discards the weights (line {line})"
        reads = self._reads(second.value, statement)
        if reads is not None and not reads:
            return f"`{second.value}` from {written} (line {line}) is never read in `{self._where()}`"
        return None

    def _only_first(self, statement: cst.CSTNode, name: str) -> str | None:
        reads = self._reads(name, statement)
        if not reads or not all(indexed for _, indexed in reads):
            return None
        lines = ", ".join(str(self.context.line(node)) for node, _ in reads)
        return (f"`{name}` from line {self.context.line(statement)} is only read as `{name}[0]` "
                f"(line{'s' if len(reads) > 1 else ''} {lines})")

    def _reads(self, name: str, statement: cst.CSTNode) -> list[tuple[cst.Name, bool]] | None:
        """The reads of `name` that may see the value `statement` assigns (mhalint.analysis.dataflow: branches,
        loops and closures count), each with whether it is `name[0]`. None when a rebinding that reads the whole
        value (`+=`) may see it."""
        bindings = self.context.bindings(name, self.scope)
        mine = next((binding for binding in bindings if binding.node is statement), None)
        if mine is None:
            return None
        if any(binding.kind == "augmented" and mine in dataflow.reaching(self.context, bindings, binding.node)
               for binding in bindings):
            return None
        return [(load, _is_first(self.context, load)) for load in dataflow.uses(self.context, mine)]

    def _where(self) -> str:
        return self.scope.name if self.scope.kind == "function" else "the module"

    # ---- the call ----
    def _check(self, call: cst.Call, discarded: Callable[[], str | None]) -> None:
        """Report `call` when it reaches MultiheadAttention with need_weights True and `discarded()` (asked only
        then: it reads the whole function) says how the weights are thrown away."""
        target = call_target(self.context, call, self.scope)
        if target is None or target.api not in _APIS:
            return
        arguments = target.arguments
        expr = arguments.get("need_weights")
        if expr is None:
            if arguments.opaque:
                return  # *args/**kwargs may carry need_weights
            setting = "need_weights is not passed (default True)"
        else:
            if _forwarded(self.context, expr, self.scope):
                return
            value = resolve(self.context, expr, self.scope)
            if value is None or value.value is not True:
                return
            written = self.context.code(expr)
            setting = f"need_weights={written}" + (" resolves to True" if written != "True" else "")
            if value.trail:
                setting += f" ({'; '.join(value.trail)})"
        why = discarded()
        if not why:
            return
        evidence = [setting, why]
        slow = self._slow_path(target)
        if slow:
            evidence.append(f"this call always takes the slow path: {slow}")
        existing = arguments.by_name.get("need_weights")
        fix = self.replacement(call, with_argument(call, existing, "need_weights", "False"), applicability=SAFE,
                               title="pass need_weights=False")
        details: dict[str, object] = {"api": target.api}
        if target.construction is not None:
            details.update(constructor_values(self.context, target.construction))
        if expr is None:
            shown = DEFAULT_TRUE
        else:
            written = " ".join(self.context.code(expr).split())
            shown = RESOLVES_TRUE.format(written=written) if written != "True" else PASSED_TRUE
        self.report(
            call, WEIGHTS_DISCARDED, severity=Severity.WARNING, evidence=evidence,
            arguments={**details, "need_weights": True}, fix=fix,
            api=torchapi.short_name(target.api), setting=shown, why=why)

    def _slow_path(self, target) -> str | None:
        """Why the call can never take the fused inference kernel (docs/torch-facts.md#fast-path-conditions), when
        the code shows it."""
        if target.api == torchapi.MHA_FORWARD_FN:
            return "F.multi_head_attention_forward is the slow path itself"
        if target.construction is None:
            return None
        reason = off_reason(self.context, target.construction)
        return f"the module's {reason}" if reason else None

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Run the module's slow path (a training-mode forward) with the site's need_weights and with the fix's
        need_weights=False, counting the calls of scaled_dot_product_attention and softmax in torch.nn.functional
        (docs/torch-facts.md#need-weights): confirmed when the outputs match and only need_weights=False reaches
        the fused kernel. The site's own evidence (need_weights True, the weights unused) is what the experiment
        runs; the training-mode forward is the slow path every trained module takes."""
        from mhalint.probe import support

        functional = torch.nn.functional
        site = arguments.get("need_weights", True) is not False
        spec, note = dict(arguments), ""
        if spec.get("api") != torchapi.MHA:  # the layer's sizes, when known, become the module's
            spec = {"api": torchapi.MHA, **{mha: spec[own] for own, mha in (("d_model", "embed_dim"),
                                                                            ("nhead", "num_heads")) if own in spec}}
            note = "; run through nn.MultiheadAttention, whose slow path is F.multi_head_attention_forward"
        batch_first = spec.get("batch_first") is True
        rebuilt = support.Rebuilt()
        module, embed, heads, notes = support.build(torch, spec, batch_first, rebuilt)
        module.train()  # dropout is 0: training mode only selects the slow path
        shape = (support.N, support.L, embed) if batch_first else (support.L, support.N, embed)
        x = torch.randn(*shape)
        originals = {name: getattr(functional, name) for name in ("scaled_dot_product_attention", "softmax")}

        def forward(need_weights: bool):
            counts = dict.fromkeys(originals, 0)

            def counting(name):
                def wrapper(*args, **kwargs):
                    counts[name] += 1
                    return originals[name](*args, **kwargs)
                return wrapper

            for name in originals:
                setattr(functional, name, counting(name))
            try:
                out, weights = module(x, x, x, need_weights=need_weights)
            finally:
                for name, original in originals.items():
                    setattr(functional, name, original)
            return out.detach(), weights, counts

        out_site, weights, ran_site = forward(site)
        out_fixed, none, ran_fixed = forward(False)
        diff = support.max_diff(out_site, out_fixed)
        sizes = support.sizes(embed, heads, notes) + note

        def ran(counts) -> str:
            return f"SDPA {counts['scaled_dot_product_attention']} time(s), softmax {counts['softmax']} time(s)"

        returned = f" and returned weights of shape {tuple(weights.shape)}" if weights is not None else ""
        if site and diff < 1e-5 and ran_site["scaled_dot_product_attention"] == 0 \
                and ran_fixed["scaled_dot_product_attention"] > 0 and none is None:
            return rebuilt.verdict(f"in a training-mode forward (slow path) need_weights=True ran {ran(ran_site)}"
                               f"{returned}; need_weights=False ran {ran(ran_fixed)}; the outputs are equal (max "
                               f"diff {diff:.1e}; {sizes})")
        if not site:
            return NOT_CONFIRMED, (f"the site already passes need_weights=False: a training-mode forward ran "
                                   f"{ran(ran_fixed)} and returned no weights ({sizes})")
        return NOT_CONFIRMED, (f"in a training-mode forward need_weights=True ran {ran(ran_site)}{returned}, "
                               f"need_weights=False ran {ran(ran_fixed)}, and the outputs differ by {diff:.1e} "
                               f"({sizes})")


def _is_index(node: cst.Subscript, index: int) -> bool:
    if len(node.slice) != 1 or node.slice[0].comma != cst.MaybeSentinel.DEFAULT:
        return False
    inner = node.slice[0].slice
    return (isinstance(inner, cst.Index) and isinstance(inner.value, cst.Integer)
            and literal(inner.value) == index)


def _forwarded(ctx, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
    """Does the value come from a parameter (the caller decides), through names and `self.x`?"""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
    else:
        bindings = ctx.attribute_bindings(expr, scope)
        if bindings is None:
            return False
    return any(b.kind == "param" or (b.kind == "assign" and b.value is not None
                                     and _forwarded(ctx, b.value, b.scope, depth + 1)) for b in bindings)


def _is_first(ctx, name: cst.Name) -> bool:
    """Is the read `name[0]`?"""
    parent = ctx.parent(name)
    return isinstance(parent, cst.Subscript) and parent.value is name and _is_index(parent, 0)
