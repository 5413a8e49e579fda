"""MHA011 attention-dropout-in-eval: attention dropout that no training flag gates, so it stays on in eval."""

from __future__ import annotations

import re

from mhalint import torchapi
from mhalint.analysis.calls import bind, call_target, callers, with_argument
from mhalint.analysis.values import resolve
from mhalint.context import Scope
from mhalint.finding import NOT_CONFIRMED, Severity
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

UNSAFE = "unsafe"
DROPOUT = "torch.nn.functional.dropout"
_DROPOUT_SIGNATURE = torchapi.Signature(("input", "p", "training", "inplace"))
SOFTMAX = {"torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax"}
# A name that says the value depends on the mode: `self.training`, `training`, `is_train`, `deterministic`,
# `self.eval_mode`, `inference`. An expression or definition that mentions one is taken as gated.
_MODE_WORD = re.compile(r"train|eval|infer|determin", re.I)
# Names of attention scores or weights, the only tensors whose F.dropout this rule reads.
_WEIGHTS_NAME = re.compile(r"attn|attention|score|weight|prob", re.I)
_MAX_DEPTH = 6

# Fields: `api` (F.scaled_dot_product_attention, F.multi_head_attention_forward); `given` (the argument as written,
# with its value when known: "dropout_p=`self.dropout` (0.1)"); `reaches` (what makes the value non-zero).
ALWAYS_ON = Message(
    "{api} gets {given} with no training guard: its dropout stays on in eval{reaches}",
    help="gate it on the mode: {fixed}",
    explanation="""
        F.scaled_dot_product_attention is a function: it has no train/eval state and applies `dropout_p` on every
        call, in `model.eval()` and under `torch.no_grad()` alike (its docstring: "This function always applies
        dropout according to the specified dropout_p argument"; torch 2.13 `nn/functional.py:6383`).
        F.multi_head_attention_forward and F.dropout default to `training=True`. In the torch 2.13 experiment
        (docs/torch-facts.md#dropout, (2, 8, 64, 32) inputs, 10 seeds) two identical eval calls with
        dropout_p=0.1 differed by {p01_min} to {p01_max}, and their output was {rel01_min} to {rel01_max} (relative
        L2) off the result without dropout; a non-zero dropout_p also moves CPU SDPA from the flash kernel to the
        math one. Evaluation and inference become random and the checkpoint's metrics are not reproducible.
    """)
WEIGHTS_DROPOUT = Message(
    "F.dropout on attention weights `{weights}`{origin} without training=: it drops weights in eval too "
    "(training defaults to True)",
    help="pass training=self.training (or use an nn.Dropout module, which follows model.eval())",
    explanation=ALWAYS_ON.explanation)

# The experiment's figures (docs/torch-facts.md#dropout): two identical eval calls at p=0.1, over 10 seeds.
FIGURES = {"p01_min": "0.77", "p01_max": "2.35", "rel01_min": "32%", "rel01_max": "35%"}


class AttentionDropoutInEval(Rule):
    """
    ## What it does
    Flags attention dropout that nothing ties to the module's mode:
    - `F.scaled_dot_product_attention(..., dropout_p=p)` (keyword or 5th positional) where `p` can be non-zero and
      neither the expression nor the definitions that feed it mention the mode (`self.training`, a `training`
      parameter, `deterministic`, ...), and the call is not inside an `if` on the mode;
    - `F.multi_head_attention_forward(...)` given a `dropout_p` that can be non-zero and no `training=`;
    - `F.dropout(weights, p)` on the softmax of attention scores (or on a tensor named like attention weights)
      without `training=`.

    It is an error when a non-zero value reaches the call: a constant, a default (`dropout=0.1` in `__init__`), a
    value every caller in the file passes. It is a warning when only the pattern is there (`self.dropout` set from
    a config the file does not show). A parameter whose callers all pass a gated value, a value that resolves to 0
    and a class that overrides `train()` or `eval()` are not flagged.

    ## Why is this bad?
    SDPA is a function: it has no train/eval state, and its docstring says "This function always applies dropout
    according to the specified dropout_p argument" (torch 2.13 `nn/functional.py:6383`); `nn.MultiheadAttention`
    gates its own dropout with `training`, so code that moves from MHA to SDPA loses that. In the torch 2.13
    experiment (docs/torch-facts.md#dropout, (2, 8, 64, 32) inputs, 10 seeds), two identical calls in eval under
    `no_grad` with `dropout_p=0.1` differed by 0.77 to 2.35 and were 32% to 35% (relative L2) off the output
    without dropout (98% to 102% at 0.5). A non-zero `dropout_p` also moves CPU SDPA from the flash kernel to the
    math one. Evaluation, inference and exported metrics become random; nothing raises.

    ## Known problems
    A value read from a config object built at run time (from a file, by a framework) is unknown: the finding is then a
    warning. A guard written in a way the rule does not read (a flag named otherwise, set from `model.eval()` by a hook)
    is not seen; `# noqa: MHA011` silences the line. A parameter's value comes from its callers in the project (a
    class's constructions in other files too); a value of unknown size that is not the module's own setting (a parameter
    no caller in the file fills with one, `ctx.dropout_p`) is not flagged.
    `F.dropout` on weights whose name does not say so is read only in files that another trigger (an attention
    API) brings in. At run time the guard sees dropout while gradients are off (`no_grad`, `inference_mode`) or when
    the call is made in a method of a module in eval mode; a call from a plain function of an eval model with
    gradients on is not seen.

    ## Example
    ```python
    class Attention(nn.Module):
        def __init__(self, dim, heads, dropout=0.1):
            super().__init__()
            self.dropout = dropout
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout)
    ```

    ## Use instead
    ```python
            return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
    ```

    ## Fix safety
    Unsafe: the fix gates the value on `self.training` (`p if self.training else 0.0`, or
    `training=self.training`), which changes what eval computes (that is its point). It is offered only where the
    call is in a method of an `nn.Module` subclass, so `self.training` exists.

    ## References
    - torch 2.13 `nn/functional.py:6383` (SDPA's docstring) and `6398` (its example gate), `6651`
      (`multi_head_attention_forward`'s `training=True`)
    - docs/torch-facts.md#dropout
    """

    code = "MHA011"
    name = "attention-dropout-in-eval"
    summary = "Attention dropout that no training flag gates: SDPA and the functional forms drop in eval too"
    # F.dropout is everywhere: only a line that calls it (`F.dropout`, `nn.functional.dropout`; not an nn.Dropout
    # module's `self.dropout(...)`) on a tensor named like attention weights, without training= on that line, makes
    # a file worth parsing.
    triggers = (torchapi.SDPA_TRIGGER, torchapi.MHA_FORWARD_FN_TRIGGER,
                # `training` later on the line, or among the call's arguments on the lines that continue it
                r"(?<!\bself)\.dropout\(\s*[A-Za-z_.]*(?:attn|[Aa]ttention|scores?|weights|probs)(?![^\n]*training)"
                r"(?!(?:[^()]|\([^()]*\))*training)")
    acts_on_passed_values = False

    valid = (
        Valid(
            """
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def __init__(self, p=0.1):
                    super().__init__()
                    self.p = p
                def forward(self, q, k, v):
                    return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def __init__(self, p=0.1):
                    super().__init__()
                    self.p = p
                def forward(self, q, k, v):
                    p = self.p
                    if not self.training:
                        p = 0.0
                    return F.scaled_dot_product_attention(q, k, v, dropout_p=p)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def attend(q, k, v, dropout_p=0.0):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
            class A:
                def forward(self, q):
                    return attend(q, q, q, dropout_p=self.p if self.training else 0.0)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=0.0)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, p):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=p)
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v, training):
                scores = (q @ k.transpose(-2, -1)).softmax(-1)
                return F.dropout(scores, 0.1, training) @ v
            """,
        ),
        Valid(
            """
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)  # noqa: MHA011
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def __init__(self, p=0.1):
                    super().__init__()
                    self.p = p
                def forward(self, q, k, v):
                    return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p)
            """,
            line=8,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets dropout_p=`self.p` (0.1) with no training guard: its dropout "
                "stays on in eval"
            ),
            fixed="""
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def __init__(self, p=0.1):
                    super().__init__()
                    self.p = p
                def forward(self, q, k, v):
                    return F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0)
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F
            def f(q, k, v):
                return F.scaled_dot_product_attention(q, k, v, None, 0.1)
            """,
            line=3,
            severity=Severity.ERROR,
            headline=(
                "F.scaled_dot_product_attention gets dropout_p=0.1 with no training guard: its dropout stays on in eval"
            ),
        ),
        Invalid(
            """
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.dropout = config.attention_dropout
                def forward(self, q, k, v):
                    return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout)
            """,
            line=8,
            severity=Severity.WARNING,
            headline=(
                "F.scaled_dot_product_attention gets dropout_p=`self.dropout` with no training guard: its dropout "
                "stays on in eval if it is non-zero"
            ),
            fixed="""
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def __init__(self, config):
                    super().__init__()
                    self.dropout = config.attention_dropout
                def forward(self, q, k, v):
                    return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def forward(self, q, k, v):
                    attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
                    attn = F.dropout(attn, p=0.1)
                    return attn @ v
            """,
            line=6,
            severity=Severity.ERROR,
            headline=(
                "F.dropout on attention weights `attn` (softmax at line 5) without training=: it drops weights in eval "
                "too (training defaults to True)"
            ),
            fixed="""
            import torch.nn.functional as F
            from torch import nn
            class A(nn.Module):
                def forward(self, q, k, v):
                    attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
                    attn = F.dropout(attn, p=0.1, training=self.training)
                    return attn @ v
            """,
        ),
    )
    example_inputs = (
        "import types\nimport torch\nq = k = v = torch.randn(2, 2, 6, 4)\n"
        "config = types.SimpleNamespace(attention_dropout=0.1)\n")

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is not None and target.api in (torchapi.SDPA, torchapi.MHA_FORWARD_FN):
            self._attention(node, target)
        elif target is None and self.context.qualified_name(node.func, self.scope) == DROPOUT:
            self._weights_dropout(node)

    # ---- SDPA and F.multi_head_attention_forward ----
    def _attention(self, node: cst.Call, target) -> None:
        expr = target.arguments.get("dropout_p")
        if expr is None or target.arguments.opaque:
            return
        if target.api == torchapi.MHA_FORWARD_FN and not target.arguments.absent("training"):
            return  # given training=...: torch gates the dropout itself
        if self._gated(expr, self.scope) or self._under_mode(node):
            return
        reaches = self._non_zero(expr, self.scope)
        if reaches is False or reaches is None and not self._pattern(expr, self.scope):
            return
        code = self.context.code(expr)
        value = resolve(self.context, expr, self.scope)
        is_literal = isinstance(expr, cst.Integer | cst.Float)
        given = f"dropout_p={code}" if is_literal else (
            f"dropout_p=`{code}` ({value.value})" if value is not None else f"dropout_p=`{code}`")
        trail = list(value.trail) if value is not None else []
        if reaches is None:
            evidence = [f"dropout_p=`{code}` at line {self.context.line(expr)}: its value is not known here, and "
                        "nothing in its definitions mentions the mode"]
        else:
            evidence = [f"dropout_p={code} at line {self.context.line(expr)} is {reaches}", *trail]
        if target.api == torchapi.MHA_FORWARD_FN:
            evidence.append("F.multi_head_attention_forward is not given training= (it defaults to True)")
        fix, fixed = self._fix(node, target, expr)
        self.report(node, ALWAYS_ON, severity=Severity.ERROR if reaches else Severity.WARNING, evidence=evidence,
                    arguments={"api": target.api, "dropout_p": value.value if value is not None else None},
                    fix=fix, api=torchapi.short_name(target.api), given=given, fixed=fixed,
                    reaches="" if reaches else " if it is non-zero", **FIGURES)

    def _fix(self, node: cst.Call, target, expr: cst.BaseExpression):
        me = self.scope.self_name
        if target.api == torchapi.MHA_FORWARD_FN:
            text = f"pass training={me or 'self'}.training"
            if me is None or not self._in_module():
                return None, text
            changed = with_argument(node, None, "training", f"{me}.training")
        else:
            code = self.context.module.code_for_node(expr).strip()
            if isinstance(expr, cst.IfExp | cst.Lambda | cst.NamedExpr):
                code = f"({code})"
            gated = f"{code} if {me or 'self'}.training else 0.0"
            text = f"dropout_p={gated}"
            if me is None or not self._in_module():
                return None, text
            changed = with_argument(node, target.arguments.by_name["dropout_p"], "dropout_p", gated)
        title = f"gate the dropout on {me}.training"
        return self.replacement(node, changed, applicability=UNSAFE, title=title), text

    def _in_module(self) -> bool:
        """The call is in a method of a class that derives from nn.Module (here, or through a class of this file)."""
        return _is_module(self.context, self.context.class_of(self.scope), 0)

    # ---- F.dropout on attention weights ----
    def _weights_dropout(self, node: cst.Call) -> None:
        arguments = bind(node, _DROPOUT_SIGNATURE)
        weights, p_expr = arguments.get("input"), arguments.get("p")
        if arguments.opaque or arguments.get("training") is not None or weights is None:
            return
        if self._gated(weights, self.scope) or p_expr is not None and self._gated(p_expr, self.scope) or (
                self._under_mode(node)):
            return
        softmax = self._softmax(weights, self.scope)
        if softmax is None and not _WEIGHTS_NAME.search(self.context.code(weights)):
            return
        if p_expr is None:
            reaches, value = "F.dropout's default, 0.5", None
        else:
            reaches = self._non_zero(p_expr, self.scope)
            if reaches is False or reaches is None and not self._pattern(p_expr, self.scope):
                return
            value = resolve(self.context, p_expr, self.scope)
        line = self.context.line(softmax) if softmax is not None else None
        evidence = [f"`{self.context.code(weights)}` is the softmax at line {line}" if softmax is not None else
                    f"`{self.context.code(weights)}` is named like attention weights (its origin is not read)"]
        evidence.append(f"p is {reaches}" if reaches else f"p=`{self.context.code(p_expr)}` is not known here")
        me = self.scope.self_name
        fix = None
        if me is not None and self._in_module():
            fix = self.replacement(node, with_argument(node, None, "training", f"{me}.training"),
                                   applicability=UNSAFE, title=f"pass training={me}.training")
        severity = Severity.ERROR if softmax is not None and reaches else Severity.WARNING
        self.report(node, WEIGHTS_DROPOUT, severity=severity, evidence=evidence, fix=fix,
                    arguments={"api": DROPOUT, "dropout_p": value.value if value is not None else
                               (0.5 if p_expr is None else None)},
                    weights=self.context.code(weights),
                    origin=f" (softmax at line {line})" if softmax is not None else "", **FIGURES)

    def _softmax(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> cst.Call | None:
        """The softmax call `expr` is, or that a name it reads is bound to (a method `x.softmax(...)` of any
        tensor, or torch's function)."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Call):
            name = self.context.qualified_name(expr.func, scope)
            method = isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "softmax" and name is None
            return expr if method or name in SOFTMAX else None
        if isinstance(expr, cst.Name):
            for binding in self.context.bindings(expr.value, scope):
                if binding.kind == "assign" and binding.value is not None and binding.value is not expr:
                    found = self._softmax(binding.value, binding.scope, depth + 1)
                    if found is not None:
                        return found
        return None

    # ---- what the value can be, and whether the mode gates it ----
    def _non_zero(self, expr: cst.BaseExpression, scope: Scope) -> str | bool | None:
        """What makes the value non-zero ("0.1, a constant", "the default 0.1 ..."); False when it is 0 (or None);
        None when it is not known. Callers that all pass known values decide for a parameter."""
        value = resolve(self.context, expr, scope)
        if value is not None:
            number = value.value
            if number is None or isinstance(number, bool) or not isinstance(number, int | float) or number == 0:
                return False
            if isinstance(expr, cst.Integer | cst.Float):
                return f"{number}, a constant"
            return f"{number}"
        return None

    def _gated(self, expr: cst.BaseExpression | None, scope: Scope, depth: int = 0) -> bool:
        """Whether the value depends on the mode: the expression, or a definition that feeds it, mentions it (a
        definition inside an `if` on the mode counts), or every caller passes a gated value."""
        if expr is None or depth > _MAX_DEPTH:
            return False
        if _mentions_mode(expr):
            return True
        if isinstance(expr, cst.Name):
            bindings = self.context.bindings(expr.value, scope)
            for binding in bindings:
                if binding.kind == "param":
                    if self._callers_gate(expr.value, binding.scope, depth):
                        return True
                elif binding.value is not None and binding.value is not expr and (
                        self._gated(binding.value, binding.scope, depth + 1) or self._under_mode(binding.node)):
                    return True
            return False
        bindings = self.context.attribute_bindings(expr, scope)
        if bindings:
            klass = self.context.class_of(scope)
            if klass is not None and ({"train", "eval"} & set(klass.methods)):
                return True  # the class sets its own state when the mode changes
            return any(b.value is not None and (_mentions_mode(b.value) or self._under_mode(b.node))
                       for b in bindings)
        return False

    def _pattern(self, expr: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """Whether a value of unknown size is the module's own setting, read with no gate: a `self.` attribute
        (`self.dropout`, `self.config.attention_dropout`), a local or a branch that holds one, or a parameter a
        caller in this file fills with one. Anything else (a parameter no caller fills, `ctx.p`) is the callers'
        business: unknown, and not reported."""
        if depth > _MAX_DEPTH:
            return False
        if isinstance(expr, cst.Attribute):
            root = expr
            while isinstance(root, cst.Attribute):
                root = root.value
            return isinstance(root, cst.Name) and root.value == scope.self_name
        if isinstance(expr, cst.IfExp):
            return self._pattern(expr.body, scope, depth + 1) or self._pattern(expr.orelse, scope, depth + 1)
        if not isinstance(expr, cst.Name):
            return False
        for binding in self.context.bindings(expr.value, scope):
            if binding.kind == "param":
                if any(site.arguments.get(expr.value) is not None
                       and self._pattern(site.arguments.get(expr.value), site.scope, depth + 1)
                       for site in callers(self.context, binding.scope)):
                    return True
            elif binding.value is not None and binding.value is not expr and self._pattern(
                    binding.value, binding.scope, depth + 1):
                return True
        return False

    def _callers_gate(self, name: str, function: Scope, depth: int) -> bool:
        sites = callers(self.context, function)
        return bool(sites) and all(
            site.arguments.get(name) is not None and (
                self._gated(site.arguments.get(name), site.scope, depth + 1)
                or self._non_zero(site.arguments.get(name), site.scope) is False)
            for site in sites)

    def _under_mode(self, node: cst.CSTNode) -> bool:
        """Inside an `if` (or a conditional expression) whose test mentions the mode, in the same function."""
        parent = self.context.parent(node)
        while parent is not None and not isinstance(parent, cst.FunctionDef | cst.ClassDef | cst.Lambda):
            if isinstance(parent, cst.If | cst.IfExp | cst.While) and _mentions_mode(parent.test):
                return True
            parent = self.context.parent(parent)
        return False

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Call the API twice with the site's dropout (0.1 when unknown) under eval and no_grad, and compare the
        two outputs and the output without dropout (docs/torch-facts.md#dropout)."""
        from mhalint.probe import support

        F = torch.nn.functional
        p = arguments.get("dropout_p")
        stood_in = not isinstance(p, int | float) or isinstance(p, bool) or not 0 < p < 1
        p = 0.1 if stood_in else float(p)
        generator = torch.Generator().manual_seed(0)
        n, h, length, d = 2, 8, 64, 32
        q, k, v = (torch.randn(n, h, length, d, generator=generator) for _ in range(3))
        api = arguments.get("api")
        with torch.no_grad():
            if api == DROPOUT:
                weights = (q @ k.transpose(-2, -1) / d ** 0.5).softmax(-1)
                first, second = (F.dropout(weights, p) @ v for _ in range(2))
                clean = weights @ v
                what = "F.dropout on softmax weights"
            else:
                first, second = (F.scaled_dot_product_attention(q, k, v, dropout_p=p) for _ in range(2))
                clean = F.scaled_dot_product_attention(q, k, v)
                what = "F.scaled_dot_product_attention" + (
                    " (standing in for F.multi_head_attention_forward's default training=True)"
                    if api == torchapi.MHA_FORWARD_FN else "")
        apart = float((first - second).abs().max())
        off = float((first - clean).norm() / clean.norm())
        setup = (f"CPU, {what}, (N, h, L, E)=({n}, {h}, {length}, {d}), p={p}"
                 f"{' (a stand-in: the site value is not known)' if stood_in else ''}, under no_grad")
        rebuilt = support.Rebuilt()
        if stood_in:
            rebuilt.assume(f"dropout_p={p}")
        if apart > 1e-6:
            return rebuilt.verdict(f"two identical eval calls differed by up to {apart:.2f}, and were {off:.0%} "
                                   f"(relative L2) off the output without dropout ({setup})")
        return NOT_CONFIRMED, f"two identical calls gave the same output ({setup})"

    @staticmethod
    def guard(call) -> list:
        """SDPA given dropout_p > 0, or F.multi_head_attention_forward dropping (training defaults to True), while
        gradients are off (no_grad, inference_mode) or from a method of an nn.Module in eval mode."""
        import mhalint.guard.support as s

        p = call.mode.get("dropout_p")
        if call.kind not in ("sdpa", "mha_fn") or not isinstance(p, int | float) or isinstance(p, bool) or p <= 0:
            return []
        if call.kind == "mha_fn" and not call.mode.get("training", True):
            return []
        owner = call.caller_module
        if owner is not None and not owner.training:
            when = f"in {type(owner).__name__}.eval() mode"
        elif not call.mode.get("grad", True):
            when = "while gradients were off (no_grad/inference_mode)"
        else:
            return []
        fix = ("dropout_p=self.p if self.training else 0.0" if call.kind == "sdpa" else
               "pass training=self.training")
        return [s.Pending(True, lambda: s.message(
            f"{call.api} dropped with dropout_p={p} {when}: dropout stays on in eval", fix,
            "the function has no train/eval state; two identical eval calls differ (docs/torch-facts.md#dropout)"))]

    runtime_valid = (
        Valid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(1, 2, 4, 8)
            with torch.no_grad():
                F.scaled_dot_product_attention(q, q, q, dropout_p=0.0)
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
            """,
        ),
        Valid(
            """
            import torch
            import torch.nn.functional as F
            class Attention(torch.nn.Module):
                def forward(self, q):
                    return F.scaled_dot_product_attention(
                        q, q, q, dropout_p=0.1 if self.training else 0.0)
            model = Attention()
            model(torch.randn(1, 2, 4, 8))
            model.eval()(torch.randn(1, 2, 4, 8))
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            q = torch.randn(1, 2, 4, 8)
            with torch.no_grad():
                F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
            """,
            line=5,
            message="dropped with dropout_p=0.1 while gradients were off",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            class Attention(torch.nn.Module):
                def forward(self, q):
                    return F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)
            Attention().eval()(torch.randn(1, 2, 4, 8))
            """,
            line=5,
            message="dropped with dropout_p=0.1 in Attention.eval() mode",
        ),
    )


def _mentions_mode(node: cst.CSTNode) -> bool:
    if isinstance(node, cst.Name):
        return bool(_MODE_WORD.search(node.value))
    if isinstance(node, cst.Attribute):
        return bool(_MODE_WORD.search(node.attr.value)) or _mentions_mode(node.value)
    return any(_mentions_mode(child) for child in node.children)


def _is_module(ctx, klass: Scope | None, depth: int) -> bool:
    if klass is None or depth > 4:
        return False
    for base in klass.bases:
        name = ctx.qualified_name(base, klass.parent)
        if name == "torch.nn.Module" or name in torchapi.CONSTRUCTORS:
            return True
        if isinstance(base, cst.Name) and base.value in ctx.classes:
            if _is_module(ctx, ctx.classes[base.value], depth + 1):
                return True
    return False
