"""MHA016 head-split-order: a head split or merge written as one view/reshape that reorders axes."""

from __future__ import annotations

from mhalint import torchapi
from mhalint.analysis import axes, dataflow
from mhalint.analysis.axes import OPEN, Axis, Evidence, Role, Strength
from mhalint.analysis.calls import call_target
from mhalint.analysis.names import is_head_count, names_head_count, role_of_size_name
from mhalint.analysis.tensors import ShapeReader, Traced, literal_int, size_arguments
from mhalint.analysis.vocabulary import KEEPS_AXES
from mhalint.context import Scope
from mhalint.finding import UNSAFE, Severity
from mhalint.parse.lazy import cst
from mhalint.parse.rewrite import merged_transposed, transposed
from mhalint.rule import Invalid, Message, Rule, Valid

_WHY = """
    `view` and `reshape` keep the elements' order in memory: they never move an axis past another. `x.view(B, H, T,
    D)` of a (B, T, H * D) projection cuts each sample's (T, H * D) block into H rows of T * D values, so
    "position" t of "head" h holds pieces of several tokens; `y.reshape(B, T, H * D)` of a (B, H, T, D) output makes
    each merged position out of several heads at several positions. Nothing raises. In a torch 2.13 experiment
    (causal SDPA, B=2, T=6, H=4, D=8) a change to the last token alone moved output positions [2, 3, 4, 5] through
    the one-step split and [1, 2, 4, 5] through the one-step merge, against [5] for the transposed ones: under a
    causal mask the earlier positions read the future (docs/torch-facts.md#head-split-order)."""
# Fields: `view` (the call, shortened), `moved` and `over` (two of its sizes, as written), `before` (the viewed
# tensor's axes, `(N, L, E)`).
REORDERED = Message(
    "`{view}` puts `{moved}` before `{over}`, against their order in {before}: a view keeps memory order, so "
    "positions mix",
    help="move the axes with a transpose, then view: `{replacement}`",
    explanation=_WHY)
NO_FIX_HELP = "split with `view(B, T, H, D).transpose(1, 2)`; merge with `transpose(1, 2).reshape(B, T, H * D)`"

_PRODUCTS = frozenset(("torch.matmul", "torch.bmm", "torch.einsum"))
_LETTERS = {Role.BATCH: "N", Role.SEQUENCE: "L", Role.EMBEDDING: "E", Role.HEADS: "H", Role.SPATIAL: "S"}
_SPLIT, _MERGE = "split", "merge"


class HeadSplitOrder(Rule):
    """
    ## What it does
    Flags a `view` or `reshape` that moves an axis past another: a head split written in one step,
    `x.view(B, H, T, D)` or `x.view(B * H, T, D)` of a (B, T, H * D) tensor, and a merge of a (B, H, T, D) tensor
    (a product `attn @ v`) to (B, T, H * D) without
    `.transpose(1, 2)` first. Only views whose sizes count the heads before two more axes, and merges of such
    products, are read: most views in a model are neither. The viewed tensor's axes come from mhalint's shape reader
    (a shape unpacking `B, T, C = x.shape`, a producer with a known layout, a documented shape); the new axes from
    the sizes' provenance (`T` of that unpacking, `x.size(1)`) or names (`self.n_head`, `num_heads`). Each new
    axis must take its contents from the old axes in their order: the heads out of the features, so after the
    sequence; features over a heads axis that no new axis keeps fold the heads in.

    The viewed tensor's axes must be established by the code; the finding is an error when the new batch and
    sequence sizes are too (the head count may be a name), a warning when a name decides one. Nothing is reported
    when the roles are unknown or rest on a name or an assumption (a size inferred as `-1`, a tensor whose axes no
    code shows, one that went through a callee mhalint cannot read).

    ## Why is this bad?
    A view keeps the elements' order in memory. Split in one step, "position" t of "head" h holds pieces of
    several tokens; merged without the transpose, each position holds several heads of several positions. The
    shapes are what the next line expects, so nothing raises. In a torch 2.13 experiment
    (docs/torch-facts.md#head-split-order; causal SDPA, B=2, T=6, H=4, D=8) a change to the last token alone moved
    output positions [2, 3, 4, 5] through the one-step split and [1, 2, 4, 5] through the one-step merge, where the
    correct split and merge move only [5]: in a causal model the earlier positions read the future.

    ## Known problems
    A file is read when it calls `F.scaled_dot_product_attention` (or another rule's trigger makes it read):
    hand-written attention with `softmax(q @ k.transpose(-2, -1))` alone is not, since a trigger for it would
    parse most model files. A `B * H` axis unflattened as `(H, B)` is not seen (the folded axis keeps only its
    batch role). A merge of SDPA's own output is MHA013's. Channel-first features viewed as heads on purpose,
    `x.view(B, heads, C // heads, H * W)` of (B, C, H, W), keep the order and are not flagged.

    ## Example
    ```python
    B, T, C = x.shape
    q = self.q_proj(x).view(B, self.num_heads, T, C // self.num_heads)
    ```

    ## Use instead
    ```python
    B, T, C = x.shape
    q = self.q_proj(x).view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2)
    ```

    ## Fix safety
    Unsafe, and offered only for errors: the one-step split `view(B, H, T, D)` becomes `view(B, T, H, D).transpose(1,
    2)`, and a merge gets `.transpose(1, 2)` first (and `.contiguous()` before a `.view`). The outputs change, as
    they should, so `--fix` applies it only with `--unsafe-fixes`. Other reorders get no fix.

    ## References
    - torch 2.13 `Tensor.view` docs: the new view shares the data and must be compatible with the original's
      strides; `torch.reshape` returns the same values, as a view where it can
    - docs/torch-facts.md#head-split-order
    """

    code = "MHA016"
    name = "head-split-order"
    summary = "A head split or merge by one view/reshape that moves the heads past the positions: tokens mix"
    triggers = (torchapi.SDPA_TRIGGER,)
    acts_on_passed_values = False  # the views are read where the file is parsed for SDPA

    valid = (
        Valid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, q, q)
                return y.transpose(1, 2).reshape(B, T, C)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(x, num_heads):
                B, C, H, W = x.shape
                q = x.view(B, num_heads, C // num_heads, H * W).transpose(-1, -2)
                return F.scaled_dot_product_attention(q, q, q)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(x, bsz, num_heads, head_dim):
                tgt_len, bsz, embed_dim = x.shape
                q = x.contiguous().view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
                return F.scaled_dot_product_attention(q, q, q)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                q = x.view(x.size(0), n_head, -1, 8)
                return F.scaled_dot_product_attention(q, q, q)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, n_head, T, C // n_head)  # noqa: MHA016
                return F.scaled_dot_product_attention(q, q, q)
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, n_head, T, C // n_head)
                y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
                return y.transpose(1, 2).reshape(B, T, C)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "`x.view(B, n_head, T, C // n_head)` puts `n_head` before `T`, against their order in (N, L, E): a "
                "view keeps memory order, so positions mix"
            ),
            fixed="""
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B, T, n_head, C // n_head).transpose(1, 2)
                y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
                return y.transpose(1, 2).reshape(B, T, C)
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F
            def f(x, n_head):
                B, T, C = x.shape
                q = x.view(B * n_head, T, C // n_head)
                return F.scaled_dot_product_attention(q, q, q, is_causal=True)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "`x.view(B * n_head, T, C // n_head)` puts `B * n_head` before `T`, against their order in (N, L, E): "
                "a view keeps memory order, so positions mix"
            ),
        ),
        Invalid(
            """
            import torch.nn.functional as F
            def f(x, bsz, seq_len, num_heads):
                B, T, C = x.shape
                q = x.view(bsz, num_heads, seq_len, -1)
                return F.scaled_dot_product_attention(q, q, q, is_causal=True)
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "`x.view(bsz, num_heads, seq_len, -1)` puts `num_heads` before `seq_len`, against their order in "
                "(N, L, E): a view keeps memory order, so positions mix"
            ),
        ),
    )
    example_inputs = "import torch\nx = torch.randn(2, 6, 16)\nn_head = 4\n"

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.shapes = ShapeReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if type(func) is not cst.Attribute or func.attr.value not in ("view", "reshape"):
            return
        sizes = size_arguments(node)
        if sizes is None or not 2 <= len(sizes) <= 6:
            return
        scope = self.scope
        inner = _inside_conversions(func.value)
        if not any(_names_heads(size) for size in sizes[:-2]) and not self._attention_product(inner, scope, node):
            return  # neither a size counting the heads with two axes after it (a split that may put them before the
            # sequence) nor a merge of `attn @ v`: most views, read no further
        factors = [self._factors(size, scope, node) for size in sizes]
        roles = {factor.role for axis in factors for factor in axis if factor.known}
        if len([axis for axis in factors if any(f.known for f in axis)]) < 2 or not (
                Role.HEADS in roles or {Role.BATCH, Role.SEQUENCE} <= roles):
            return
        traced = self.shapes.of(inner, scope, node)
        if traced is None or OPEN in traced.shape or (
                Role.HEADS not in roles and Role.HEADS not in axes.roles(traced.shape)):
            return
        if any(axis.known and axis.role is not Role.HEADS and axis.evidence.strength is not Strength.ESTABLISHED
               for axis in traced.shape):
            return  # what the viewed tensor holds rests on a name or an assumption (a callee taken to keep its axes)
        pair = axes.reordered(traced.shape, factors)
        if pair is None or self._sdpa_output(inner, scope, node):
            return  # a merge of SDPA's own output is MHA013's
        self._report(node, sizes, factors, traced, pair, inner)

    def _factors(self, size: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> list[Axis]:
        """The axes a size multiplies together (`B * H` is two), each with its role."""
        if isinstance(size, cst.BinaryOperation) and isinstance(size.operator, cst.Multiply) and not size.lpar:
            return self._factors(size.left, scope, use) + self._factors(size.right, scope, use)
        if literal_int(size) == -1:
            return [axes.UNKNOWN_AXIS]
        axis = self.shapes.size_axis(size, scope, use)
        code = self.context.code(size)
        if not axis.known and names_head_count(code):
            reason = f"the size `{code}` names the head count"
            axis = Axis(Role.HEADS, Evidence(code, self.context.line(use), reason, Strength.NAMED), code)
        return [axis]

    def _produced(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> tuple[cst.BaseExpression, Scope]:
        """The expression that made `expr`: itself, or the value of the one binding of its name that reaches (the
        whole right side of an unpacking, `values, attn = self.attend(q, k, v)`)."""
        if isinstance(expr, cst.Name):
            binding = dataflow.reaching_one(self.context, self.context.bindings(expr.value, scope), use)
            if binding is not None and binding.kind in ("assign", "unpack") and binding.value is not None:
                return _inside_conversions(binding.value), binding.scope
        return expr, scope

    def _sdpa_output(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> bool:
        """Is `expr` the output of an SDPA call, directly or through one name?"""
        expr, scope = self._produced(expr, scope, use)
        if not isinstance(expr, cst.Call):
            return False
        target = call_target(self.context, expr, scope)
        return target is not None and target.api == torchapi.SDPA

    def _attention_product(self, expr: cst.BaseExpression, scope: Scope, use: cst.CSTNode) -> bool:
        """Is `expr` what hand-written attention merges, a product (`attn @ v`, `torch.matmul(attn, v)`,
        `torch.einsum(...)`), directly or through one name? (Not what a helper returns: litgpt's
        `self.scaled_dot_product_attention(q, k, v)` transposes its output back, which the shape reader does not
        see, while a comment above the call documents the product inside.)"""
        expr, scope = self._produced(expr, scope, use)
        if isinstance(expr, cst.BinaryOperation):
            return isinstance(expr.operator, cst.MatrixMultiply)
        return isinstance(expr, cst.Call) and self.context.qualified_name(expr.func, scope) in _PRODUCTS

    def _report(self, node: cst.Call, sizes: list[cst.BaseExpression], factors: list[list[Axis]], traced: Traced,
                pair: tuple[int, int], inner: cst.BaseExpression) -> None:
        ctx = self.context
        before = traced.shape
        # the viewed tensor's axes are established (visit_Call); the heads may be a name (`self.n_head`): what
        # decides the bug is where the batch and the sequence go
        established = all(factor.evidence.strength is Strength.ESTABLISHED for index in pair
                          for factor in factors[index] if factor.known and factor.role is not Role.HEADS)
        severity = Severity.ERROR if established else Severity.WARNING
        shape = "(" + ", ".join(_LETTERS.get(role, "?") for role in axes.roles(before)) + ")"
        evidence = [f"`{ctx.code(inner)}` is {shape}",
                    *dict.fromkeys(axis.evidence.sentence() for axis in before if axis.known),
                    *traced.sentences(),
                    *dict.fromkeys(factor.evidence.sentence() for index in pair for factor in factors[index]
                                   if factor.known)]
        form = self._form(before, factors)
        new = self._fixed(node, sizes, form, inner) if form is not None else None
        fix = self.replacement(node, new, applicability=UNSAFE, title=f"{form} the heads with a transpose") \
            if new is not None and severity is Severity.ERROR else None
        view = ctx.code(node)
        self.report(node, REORDERED, severity=severity, evidence=evidence, fix=fix,
                    help=None if new is not None else NO_FIX_HELP,
                    arguments={"form": form or "other"},
                    view=view if len(view) <= 60 else view[:57] + "...", moved=ctx.code(sizes[pair[0]]),
                    over=ctx.code(sizes[pair[1]]), before=shape,
                    replacement=ctx.module.code_for_node(new) if new is not None else "")

    @staticmethod
    def _form(before: tuple[Axis, ...], factors: list[list[Axis]]) -> str | None:
        """_SPLIT: (N, L, E) viewed as (N, H, L, D); _MERGE: (N, H, L, D) viewed as (N, L, E): the forms with a fix."""
        after = [axis[0].role if len(axis) == 1 and axis[0].known else Role.UNKNOWN for axis in factors]
        roles = axes.roles(before)
        if roles == (Role.BATCH, Role.SEQUENCE, Role.EMBEDDING) and len(after) == 4 and \
                after[:3] == [Role.BATCH, Role.HEADS, Role.SEQUENCE]:
            return _SPLIT
        if len(roles) == 4 and roles[:3] == (Role.BATCH, Role.HEADS, Role.SEQUENCE) and len(after) == 3 and \
                after[:2] == [Role.BATCH, Role.SEQUENCE]:
            return _MERGE
        return None

    def _fixed(self, node: cst.Call, sizes: list[cst.BaseExpression], form: str,
               inner: cst.BaseExpression) -> cst.BaseExpression | None:
        if form == _MERGE:
            return merged_transposed(node, inner, node.func.value, self.context.code(node.func.value))
        if len(node.args) != len(sizes):
            return None  # the sizes are one tuple: left as written
        args = list(node.args)
        args[1], args[2] = args[1].with_changes(value=sizes[2]), args[2].with_changes(value=sizes[1])
        return transposed(node.with_changes(args=args))

    # ---- the runtime experiment ----
    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Re-create the split or merge in causal self-attention through SDPA (B=2, T=6, H=4, D=8) and list the
        output positions that a change to the last token alone moves (docs/torch-facts.md#head-split-order)."""
        from mhalint.probe import support

        F = torch.nn.functional
        b, t, h, d = 2, 6, 4, 8
        one_step_split = arguments.get("form") != _MERGE
        one_step_merge = arguments.get("form") == _MERGE

        def attention(x):
            q = x.view(b, h, t, d) if one_step_split else x.view(b, t, h, d).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
            return y.reshape(b, t, h * d) if one_step_merge else y.transpose(1, 2).reshape(b, t, h * d)

        generator = torch.Generator().manual_seed(0)
        x = torch.randn(b, t, h * d, generator=generator)
        changed = x.clone()
        changed[:, -1] += torch.randn(b, h * d, generator=generator)
        moved = (attention(changed) - attention(x)).abs().amax(dim=(0, 2))
        positions = [p for p in range(t) if moved[p] > 1e-6]
        what = "split `view(B, H, T, D)`" if one_step_split else "merge `reshape(B, T, H * D)`"
        text = (f"with the one-step {what}, a change to the last token alone moved output positions {positions} "
                f"under is_causal=True; the transposed {'split' if one_step_split else 'merge'} moves only [{t - 1}] "
                f"(CPU, B={b}, T={t}, H={h}, D={d})")
        return support.Rebuilt().outcome(positions != [t - 1], text)


def _names_heads(size: cst.BaseExpression) -> bool:
    """Does a size expression name the head count (`self.n_head`, `B * num_heads`, `C // heads`)?"""
    if isinstance(size, cst.BinaryOperation):
        return _names_heads(size.left) or _names_heads(size.right)
    if isinstance(size, cst.Attribute):
        return is_head_count(size.attr.value)
    return isinstance(size, cst.Name) and (is_head_count(size.value) or role_of_size_name(size.value) is Role.HEADS)


def _inside_conversions(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`y` of `y.contiguous()`, `y.float()`: the tensor inside the conversions that keep its axes."""
    while isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in KEEPS_AXES \
            and not expr.args:
        expr = expr.func.value
    return expr
