"""MHA017 attention-scale: SDPA's scale applied on top of a pre-scaled query, or given the square root itself."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis.calls import call_target, is_none, with_argument
from mhalint.analysis.scaling import Scaling, scaled_by, temperature
from mhalint.analysis.values import resolve
from mhalint.finding import UNSAFE, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

_WHY = """
    F.scaled_dot_product_attention multiplies q @ k^T by `scale`, 1/sqrt(E) by default (E = q.size(-1)). A query
    already multiplied by E ** -0.5 is scaled twice: the scores are divided by E, the softmax flattens toward an
    average, and nothing raises. In a torch 2.13 experiment (N=2, H=4, L=6, E=16) the output was 2.84 off the
    single-scaled one and the rows' mean entropy rose from 0.59 to 1.50 nats (uniform: 1.79); `scale=sqrt(E)`
    sharpens it instead, 3.52 off (docs/torch-facts.md#attention-scale)."""
# Fields: `tensor` (q or k as passed), `factor` (the temperature as written), `line` (where it multiplies),
# `scale` ("its default 1/sqrt(E)" or "`scale=...`").
SCALED_TWICE = Message(
    "F.scaled_dot_product_attention applies {scale} to `{tensor}`, already multiplied by `{factor}` (line {line}): "
    "the scores are scaled twice",
    help="pass `scale=1.0` to keep the query's scaling, or drop it",
    explanation=_WHY)
# The same, on one path: `condition` is the test of the `if` that scales the tensor.
SCALED_TWICE_WHEN = Message(
    "F.scaled_dot_product_attention applies {scale} to `{tensor}`, multiplied by `{factor}` (line {line}) when "
    "`{condition}`: scaled twice there",
    help="on that path pass `scale=1.0` (or fold the query's scaling into `scale=`)",
    explanation=_WHY)
# Fields: `scale` (the argument as written), `fixed` (its inverse).
SQUARE_ROOT = Message(
    "F.scaled_dot_product_attention gets scale=`{scale}`, the square root itself: the scores are multiplied by "
    "it, not divided",
    help="give the inverse: `scale={fixed}`",
    explanation=_WHY)


class AttentionScale(Rule):
    """
    ## What it does
    Flags `F.scaled_dot_product_attention` (any alias) whose scores are scaled twice: the query (or key) was
    multiplied by a softmax temperature on its way to the call (`q = q * head_dim ** -0.5`, `q *= self.scale`
    where `self.scale = head_dim ** -0.5`, `q / math.sqrt(head_dim)`), and the call applies its default scale,
    1/sqrt(E), or another temperature on top. Also flags `scale=` given the square root itself
    (`math.sqrt(head_dim)`, `head_dim ** 0.5`). The temperature is read from how the code writes it (`d ** -0.5`,
    `1 / math.sqrt(d)`, `torch.rsqrt(d)`), through a name or `self.x` whose one binding writes it, also in a ratio
    (`default_scale / self.scale` holds one, `self.scale / default_scale` undoes one); the tensor is
    followed back through names, `*=`, and the methods that keep its values (`view`, `transpose`, ...), to the
    first other call (its projection). Both are errors: the code writes the temperature.

    ## Why is this bad?
    SDPA multiplies q @ k^T by `scale`, 1/sqrt(E) by default. A query already scaled is scaled again: the scores
    are divided by E, and the softmax flattens toward an average of the values. Nothing raises. In a torch 2.13
    experiment (docs/torch-facts.md#attention-scale; N=2, H=4, L=6, E=16) the output was 2.84 off the single-scaled
    one and the rows' mean entropy rose from 0.59 to 1.50 nats (uniform: 1.79). The square root as `scale`
    sharpens the softmax instead (entropy 0.012, 3.52 off).

    ## Known problems
    A scaling on one branch only (`if self.qk_norm: q = q * (default_scale / self.scale)`) is a warning, without a
    fix. A temperature held in a name whose value the code does not show (`self.scale` set from a config, a
    parameter) is not read: nothing is reported. A scaling applied inside a helper the tensor comes out of
    (`q = self.prescale(q)`) is not followed. A scale built from the model width instead of the head dimension
    is not checked. Only SDPA calls are read; hand-written `softmax(q @ k.transpose(-2, -1) * scale)` is not.

    ## Example
    ```python
    q = self.q_proj(x).view(B, T, H, D).transpose(1, 2) * D ** -0.5
    y = F.scaled_dot_product_attention(q, k, v)
    ```

    ## Use instead
    ```python
    q = self.q_proj(x).view(B, T, H, D).transpose(1, 2) * D ** -0.5
    y = F.scaled_dot_product_attention(q, k, v, scale=1.0)
    ```

    ## Fix safety
    Unsafe: `scale=1.0` is passed (or replaces the second temperature), keeping the query's scaling; the square
    root becomes its inverse. The outputs change, as they should, so `--fix` applies it only with
    `--unsafe-fixes`.

    ## References
    - torch 2.13 `nn/functional.py`, the `scaled_dot_product_attention` docstring: `scale_factor = 1 /
      math.sqrt(query.size(-1)) if scale is None else scale`
    - docs/torch-facts.md#attention-scale
    """

    code = "MHA017"
    name = "attention-scale"
    summary = "SDPA's scale applied on top of a pre-scaled query, or given the square root itself"
    triggers = (torchapi.SDPA_TRIGGER,)
    acts_on_passed_values = False

    valid = (
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, head_dim):
                q = q * head_dim ** -0.5
                return F.scaled_dot_product_attention(q, k, v, scale=1.0)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, head_dim):
                return F.scaled_dot_product_attention(q, k, v, scale=head_dim ** -0.5)
            """,
        ),
        Valid(
            """
            import math
            import torch.nn.functional as F
            def f(embed, ids, q_proj, k, v, d_model):
                x = embed(ids) * math.sqrt(d_model)
                q = q_proj(x)
                return F.scaled_dot_product_attention(q, k, v)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, scale):
                q = q * scale
                return F.scaled_dot_product_attention(q, k, v)
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn.functional as F
            def f(q, k, v, head_dim):
                q = q * head_dim ** -0.5
                return F.scaled_dot_product_attention(q, k, v)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention applies its default 1/sqrt(E) to `q`, already multiplied by "
                "`head_dim ** -0.5` (line 3): the scores are scaled twice"
            ),
            fixed="""
            import torch.nn.functional as F
            def f(q, k, v, head_dim):
                q = q * head_dim ** -0.5
                return F.scaled_dot_product_attention(q, k, v, scale=1.0)
            """,
        ),
        Invalid(
            """
            import math
            import torch
            import torch.nn.functional as F
            class Attention(torch.nn.Module):
                def __init__(self, dim, heads):
                    super().__init__()
                    self.heads = heads
                    self.scale = 1 / math.sqrt(dim // heads)
                    self.qkv = torch.nn.Linear(dim, 3 * dim)

                def forward(self, x):
                    B, T, C = x.shape
                    q, k, v = self.qkv(x).view(B, T, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
                    q *= self.scale
                    return F.scaled_dot_product_attention(q, k, v, scale=self.scale)
            """,
            line=15,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention applies `scale=self.scale` to `q`, already multiplied by "
                "`self.scale` (line 14): the scores are scaled twice"
            ),
            fixed="""
            import math
            import torch
            import torch.nn.functional as F
            class Attention(torch.nn.Module):
                def __init__(self, dim, heads):
                    super().__init__()
                    self.heads = heads
                    self.scale = 1 / math.sqrt(dim // heads)
                    self.qkv = torch.nn.Linear(dim, 3 * dim)

                def forward(self, x):
                    B, T, C = x.shape
                    q, k, v = self.qkv(x).view(B, T, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
                    q *= self.scale
                    return F.scaled_dot_product_attention(q, k, v, scale=1.0)
            """,
        ),
        Invalid(
            """
            import math
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, scale=math.sqrt(q.size(-1)))
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets scale=`math.sqrt(q.size(-1))`, the square root itself: the "
                "scores are multiplied by it, not divided"
            ),
            fixed="""
            import math
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(q.size(-1)))
            """,
        ),
    )
    example_inputs = ("import torch\nq = k = v = torch.randn(2, 4, 6, 16)\nhead_dim = 16\n"
                      "x = torch.randn(2, 6, 64)\n")

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is None or target.api != torchapi.SDPA:
            return
        scale = target.arguments.get("scale")
        if scale is not None and not is_none(scale):
            given = temperature(self.context, scale, self.scope)
            if given is not None and given.inverted:
                self._square_root(node, target, scale)
                return
            if given is None and not _is_one(self.context, scale, self.scope):
                return  # a scale the code does not show: whether it adds to a query's scaling is not known
            if given is None:
                return  # scale=1.0: the query's own scaling is the one
        for name in ("query", "key"):
            expr = target.arguments.get(name)
            scaling = scaled_by(self.context, expr, self.scope, node) if expr is not None else None
            if scaling is not None and not scaling.temperature.inverted:
                self._scaled_twice(node, target, expr, scaling, scale)
                return

    def _scaled_twice(self, node: cst.Call, target, expr: cst.BaseExpression, scaling: Scaling,
                      scale: cst.BaseExpression | None) -> None:
        ctx = self.context
        given = "its default 1/sqrt(E)" if scale is None or is_none(scale) else f"`scale={ctx.code(scale)}`"
        evidence = [f"`{ctx.code(scaling.node)}` at line {scaling.line} multiplies it by `{scaling.factor}`, which "
                    f"holds `{scaling.temperature.written}` (line {scaling.temperature.line}), 1/sqrt of "
                    f"`{ctx.code(scaling.temperature.root)}`",
                    f"the call at line {ctx.line(node)} scales the scores by {given} again"]
        if scaling.condition:  # only where the branch runs: no fix (`scale=1.0` would unscale the other path)
            evidence.insert(1, f"it does so when `{scaling.condition}`; on the other path the tensor is not scaled")
            self.report(node, SCALED_TWICE_WHEN, severity=Severity.WARNING, evidence=evidence,
                        arguments={"form": "twice"}, scale=given, tensor=ctx.code(expr), factor=scaling.factor,
                        line=scaling.line, condition=scaling.condition)
            return
        new = with_argument(node, target.arguments.by_name.get("scale"), "scale", "1.0")
        fix = self.replacement(node, new, applicability=UNSAFE, title="pass scale=1.0")
        self.report(node, SCALED_TWICE, severity=Severity.ERROR, evidence=evidence, fix=fix,
                    arguments={"form": "twice"}, scale=given, tensor=ctx.code(expr),
                    factor=scaling.factor, line=scaling.line)

    def _square_root(self, node: cst.Call, target, scale: cst.BaseExpression) -> None:
        ctx = self.context
        written = ctx.code(scale)
        inverse = f"1 / {written}" if isinstance(scale, cst.Name | cst.Attribute | cst.Call | cst.Subscript) or (
            isinstance(scale, cst.BinaryOperation) and isinstance(scale.operator, cst.Power)) else f"1 / ({written})"
        fix = self.replacement(node, with_argument(node, target.arguments.by_name.get("scale"), "scale", inverse),
                               applicability=UNSAFE, title="give the inverse of the square root")
        self.report(node, SQUARE_ROOT, severity=Severity.ERROR, fix=fix,
                    evidence=[f"`{ctx.code(scale)}` is the square root of a size: the scores are multiplied by it"],
                    arguments={"form": "square-root"}, scale=ctx.code(scale),
                    fixed=inverse)

    # ---- the runtime experiment ----
    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Re-create SDPA on random q, k, v (N=2, H=4, L=6, E=16) with the scaling as written and as intended, and
        compare the outputs and the attention rows' entropy (docs/torch-facts.md#attention-scale)."""
        import math

        from mhalint.probe import support

        F = torch.nn.functional
        n, h, length, e = 2, 4, 6, 16
        generator = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(n, h, length, e, generator=generator) * 2 for _ in range(3))
        right = F.scaled_dot_product_attention(q, k, v)
        if arguments.get("form") == "square-root":
            written, factor = F.scaled_dot_product_attention(q, k, v, scale=math.sqrt(e)), math.sqrt(e)
        else:
            written, factor = F.scaled_dot_product_attention(q * e ** -0.5, k, v), 1 / e
        wrong = float((written - right).abs().max())

        def entropy(scale):
            weights = torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1)
            return float(-(weights * weights.clamp_min(1e-12).log()).sum(-1).mean())

        text = (f"SDPA as written is {wrong:.2f} off the single 1/sqrt(E) scaling; the attention rows' mean entropy "
                f"is {entropy(factor):.2f} nats instead of {entropy(e ** -0.5):.2f} (uniform {math.log(length):.2f}; "
                f"CPU, N={n}, H={h}, L={length}, E={e})")
        return support.Rebuilt().outcome(wrong > 1e-3, text)


def _is_one(ctx, expr: cst.BaseExpression, scope) -> bool:
    value = resolve(ctx, expr, scope)
    return value is not None and value.value == 1
