"""MHA015 flex-mod-convention: a flex_attention mask_mod or score_mod written in the wrong convention."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis.calls import PROJECT_PREFIX, returned
from mhalint.analysis.comparisons import MIRROR, conjuncts, is_boolean, names_compared
from mhalint.analysis.values import resolve
from mhalint.context import Scope
from mhalint.finding import NOT_CONFIRMED, Severity
from mhalint.parse.lazy import cst
from mhalint.parse.walk import nothing, own_nodes, walk
from mhalint.rule import Invalid, Message, Rule, Valid

_MAX_DEPTH = 8
FACTS = "docs/torch-facts.md#flex-mod-convention"

# Fields: `fn` the mask_mod's name (`causal` or `<lambda>`), `expr` the comparison as written, `q`/`kv` the
# function's 3rd and 4th parameter names.
ANTI_CAUSAL = Message(
    "mask_mod `{fn}` keeps {expr}: flex_attention keeps the positions where a mask_mod is True, so each query sees "
    "only later keys",
    help="return `{q} >= {kv}` (True = attend): a mask_mod says which keys each query may see",
    explanation="""
        A flex_attention mask_mod returns True where attention is ALLOWED (create_block_mask's docstring: "which
        attention connections are allowed (True) or masked out (False)"), the opposite of nn.MultiheadAttention's
        bool masks. `{expr}` is the "True = hide the future" habit: it keeps exactly the keys after the query. In a
        torch 2.13.0 experiment (CPU, eager; B=2, 4 heads, L=16, head size 16) `q_idx < kv_idx` was 3.50 away
        from the causal output (3.0 to 4.2 over ten draws) and the last query row, which has no later key, came
        out all zeros, with no error ({facts}).
    """)
REVERSED_CAUSAL = Message(
    "mask_mod `{fn}` keeps {expr}: True keeps a key in flex_attention, so each query sees itself and later keys "
    "only",
    help="if a causal mask was meant, return `{q} >= {kv}`; a right-to-left mask can keep this with a noqa",
    explanation="""
        A flex_attention mask_mod returns True where attention is ALLOWED. `{expr}` keeps the query's own position
        and every later one: the mirror image of a causal mask. Unless the model reads right to left, this is the
        "True = hide" habit; in a torch 2.13.0 experiment (CPU, eager) `q_idx <= kv_idx` was 3.14 away from the
        causal output, with no error ({facts}).
    """)
INVERTED_PADDING = Message(
    "mask_mod `{fn}` keeps {expr}: flex_attention keeps the positions where a mask_mod is True, so only the "
    "padding past `{lengths}` is attended",
    help="return `{idx} < {lengths}` (True = a real token to attend to)",
    explanation="""
        A flex_attention mask_mod returns True where attention is ALLOWED. `{expr}` is True on the positions at
        or past the sample's length, the padding: written in nn.MultiheadAttention's "True = padding" habit, it
        hides every real token. In a torch 2.13.0 experiment (CPU, eager; lengths 16 and 10) the output was 2.12
        away from the right one, and the full-length sample, which has no padding to attend to, came out all
        zeros, with no error ({facts}).
    """)
BOOL_SCORE = Message(
    "score_mod `{fn}` returns the comparison {expr}: flex_attention uses it as the score itself (0 or 1), so "
    "q·k is dropped",
    help="mask with a mask_mod and create_block_mask, or return `torch.where({expr}, {score}, -float(\"inf\"))`",
    explanation="""
        A score_mod returns the new attention score, a float. A bool is taken as the score 0.0 or 1.0: the
        softmax then weighs the keys by that alone and the query-key product is gone. In a torch 2.13.0
        experiment (CPU, eager) a score_mod returning `q_idx >= kv_idx` gave exactly softmax(tril of ones) @ v,
        the same output for any query and key, 2.27 away from causal attention, with no error ({facts}).
    """)
DROPPED_SCORE = Message(
    "score_mod `{fn}` returns {expr} without its score `{score}`: the attention no longer depends on the query "
    "and key",
    help="return `{score} + {expr}`: a score_mod modifies the score it is given",
    explanation="""
        A score_mod gets the scaled query-key score and returns the score flex_attention puts through the softmax.
        A score_mod that returns only a bias replaces the score: the attention weights are softmax(bias) for every
        input. In a torch 2.13.0 experiment (CPU, eager) `return bias[h][q_idx][kv_idx]` gave exactly
        softmax(bias) @ v, the same output for other queries and keys, 1.68 away from `score + bias` ({facts}).
    """)
SCALED_AGAIN = Message(
    "score_mod `{fn}` rescales the score by {expr}, but flex_attention's score is already scaled by "
    "1/sqrt(E): {total}",
    help="drop the rescale (flex_attention applies 1/sqrt(E) itself), or pass `scale=1.0` to flex_attention",
    explanation="""
        flex_attention multiplies q·k by `scale` (1/sqrt(E), E the query's head size, when `scale` is not given:
        flex_attention.py:2392-2393) BEFORE it calls the score_mod, so a score_mod that divides by sqrt(head
        size) again scales the scores twice. In a torch 2.13.0 experiment (CPU, eager; head size 16)
        `score / math.sqrt(16)` gave exactly SDPA with scale 1/16 and was 1.15 away from the default output (up
        to 1.55 over ten draws); with `scale=1.0` it matched the default ({facts}).
    """)

_LENGTH_NAME = re.compile(r"(^|_)(lens?|lengths?|seq_?lens?|seq_?lengths?|seqlens?|valid_?lens?|num_tokens|"
                          r"n_tokens|ntokens|kv_lens?|kv_lengths?|q_lens?|context_lens?|input_lens?|"
                          r"input_lengths?|doc_lens?)$", re.I)
_NOT_LENGTH = re.compile(r"prefix|prompt|start|begin|offset|pos|window|chunk|block|cache", re.I)
_HEAD_SIZE_NAME = re.compile(r"^_?(d|e|dk|d_k|d_head|dim_head|head_dim|headdim|head_size|hd|d_qk|qk_dim|"
                             r"qk_head_dim|attention_head_size|dim_per_head|head_dim_qk|kv_channels|c)$", re.I)
_SQRTS = {"math.sqrt", "torch.sqrt", "numpy.sqrt", "np.sqrt"}


@dataclass
class _Mod:
    """A function used as a mask_mod or score_mod: its node (a def or a lambda), the scope its body is read in,
    its parameter names after those a functools.partial binds, and where it was handed to flex_attention."""

    node: cst.FunctionDef | cst.Lambda
    scope: Scope | None  # the def's own scope (None for a lambda)
    outer: Scope  # where the lambda is written / the def is defined
    params: list[str]
    required: int  # how many of them have no default
    name: str
    via: str  # the sentence saying where it is passed


class FlexModConvention(Rule):
    """
    ## What it does
    Reads the functions handed to `torch.nn.attention.flex_attention` (`create_block_mask(fn, ...)`,
    `create_mask(fn, ...)`, `and_masks(...)`, `flex_attention(q, k, v, score_mod=fn)` or `fn` as its 4th
    positional argument), whether written as a `def`, a `lambda`, a `functools.partial`, a factory that returns an
    inner `def`, or an alias (`flex = torch.compile(flex_attention)`). Their parameters are read by POSITION: a
    mask_mod's 3rd parameter is the query index and its 4th the key index; a score_mod's 1st is the score. It flags:

    - a mask_mod that keeps `q_idx < kv_idx` (or `kv_idx > q_idx`, `q_idx - kv_idx < 0`, `~(q_idx >= kv_idx)`),
      alone or as a conjunct of `&` / `torch.logical_and`: anti-causal, an error; `q_idx <= kv_idx` (itself and
      later keys) is a warning;
    - a mask_mod that keeps `kv_idx >= lengths[b]` (or `q_idx >= ...`) where `lengths` is indexed by the batch
      parameter and its name says it holds lengths: the padding is kept and the real tokens hidden (a warning:
      what the tensor holds is read from its name);
    - a score_mod that returns a comparison (a bool; an error), that never uses its score (returns only a bias;
      an error), or that divides the score by `math.sqrt(X)` / multiplies it by `X ** -0.5` while the
      flex_attention call leaves `scale` at its default (an error when `X` is named as a head size such as
      `head_dim`, `D` or `q.size(-1)`; a warning for another name, which may be a temperature).

    Conjuncts that cannot be read (a sliding window `q_idx - kv_idx <= W`, a document mask
    `doc[q_idx] == doc[kv_idx]`, block causal `q_idx // 64 >= kv_idx // 64`) are left alone, as is anything under
    `|` or `or_masks` (prefix LM, global tokens), where one part keeping later keys can be right.

    At run time, under mhalint's guard (`mhalint.guard()`, `pytest --mhalint-guard`), each `flex_attention` call
    is checked: its block_mask's mask_mod is evaluated over the call's samples, heads, queries and keys (as
    `create_mask` does), and query rows with no allowed key are reported when they are real positions (a whole
    sample or head with no key, or, for a square call, a row whose own position other queries attend to as a
    key: the anti-causal mask's last row); the score_mod is called once on 0-dim tensors and reported when it
    returns a bool tensor.

    ## Why is this bad?
    A mask_mod returns True where attention is ALLOWED (create_block_mask's docstring), the opposite of
    nn.MultiheadAttention's bool masks, so the "True = hide" habit silently inverts it: in a torch 2.13.0 experiment
    (CPU, eager, docs/torch-facts.md#flex-mod-convention) `q_idx < kv_idx` was 3.50 away from causal attention and
    gave all-zero rows for the last query; an inverted padding mask_mod was 2.12 away and zeroed the full-length
    sample. A score_mod gets the score already multiplied by 1/sqrt(E): dividing by sqrt(head size) again gave
    SDPA's result with scale 1/E (1.15 away from the default); returning only a bias or a bool made the output
    independent of the query and key (1.68 and 2.27 away). None of these raises.

    ## Known problems
    The static check reads comparisons of the index parameters themselves; a mask_mod that calls a helper, reads a
    lookup table or branches is not analysed. A mask_mod or score_mod that reaches flex_attention only through
    another file, a config or a registry is not seen. The runtime guard wraps the module attribute
    `torch.nn.attention.flex_attention.flex_attention`: a module that ran `from torch.nn.attention.flex_attention
    import flex_attention` before the guard started keeps the original function and its calls are not seen (the
    pytest plugin starts before test files are imported); calls under `torch.compile` pass through unchecked. The
    guard skips a mask_mod when samples x queries x keys exceeds 4,194,304 (and reads head 0 only when samples x
    heads x queries x keys does), a mask_mod that raises on the guard's index tensors, and partly empty rows of a
    non-square (L != S) call, where a padded query cannot be told from a real one; `q_idx <= kv_idx` leaves no
    row empty and is not reported at run time. A right-to-left model that keeps `q_idx <= kv_idx` on purpose
    needs a noqa.

    ## Example
    ```python
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def causal(b, h, q_idx, kv_idx):
        return q_idx < kv_idx  # meant as "hide the future"

    block_mask = create_block_mask(causal, None, None, T, T)
    out = flex_attention(q, k, v, block_mask=block_mask)
    ```

    ## Use instead
    ```python
    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx  # True = attend
    ```

    ## Fix safety
    Unsafe: a strict mirrored comparison (`q_idx < kv_idx`, `kv_idx > q_idx`, written with the function's own
    parameters) is replaced by the causal one (`q_idx >= kv_idx`, `kv_idx <= q_idx`). That is the intended mask
    when the author wrote the "True = hide" habit, but it changes the output, so `--fix` applies it only with
    `--unsafe-fixes`. The other findings have no automatic fix.

    ## References
    - torch 2.13 `nn/attention/flex_attention.py:1838-1858` (create_block_mask: a mask_mod returns True where
      attention is allowed), `2257-2275` (the score_mod signature) and `2392-2393` (the default scale
      1/sqrt(E), applied before the score_mod)
    - docs/torch-facts.md#flex-mod-convention
    """

    code = "MHA015"
    name = "flex-mod-convention"
    summary = ("flex_attention mask_mod or score_mod written in the wrong convention (True = hide, bool or bias-only "
               "score)")
    # What the rule reads is reached through these names, each named where it is imported or called: `mask_mod`
    # and `score_mod` alone are everywhere in torch's own compiler. `flex_attention` followed by `.name` or
    # `import` is the module (`from torch.nn.attention.flex_attention import BlockMask`), and what it leads to
    # counts only where it is one of these names (a match of its own).
    triggers = (torchapi.trigger(r"flex_attention\b(?!\s*\.\s*\w|\s+import\b)"),
                *(torchapi.trigger(rf"{name}\b") for name in ("create_block_mask", "create_mask", "and_masks")))
    # A mask_mod is handed over as a value, but to create_block_mask or flex_attention, whose names are calls (or
    # `score_mod=` keywords) in the same file: a file where every trigger is a passed value has nothing to read.
    acts_on_passed_values = False

    valid = (
        Valid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def causal(b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
            def f(q, k, v, T):
                return flex_attention(q, k, v, block_mask=create_block_mask(causal, None, None, T, T))
            """,
        ),
        Valid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            W = 256
            def sliding(b, h, q_idx, kv_idx):
                return (q_idx >= kv_idx) & (q_idx - kv_idx <= W)
            m = create_block_mask(sliding, None, None, 8, 8)
            """,
        ),
        Valid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def f(q, k, v, lengths, T):
                def pad(b, h, q_idx, kv_idx):
                    return kv_idx < lengths[b]
                m = create_block_mask(pad, None, None, T, T)
                return flex_attention(q, k, v, block_mask=m)
            """,
        ),
        Valid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def alibi(score, b, h, q_idx, kv_idx):
                return score + (kv_idx - q_idx) * 0.5
            def f(q, k, v):
                return flex_attention(q, k, v, score_mod=alibi)
            """,
        ),
        Valid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            import math
            def rescale(score, b, h, q_idx, kv_idx):
                return score / math.sqrt(64)
            def f(q, k, v):
                return flex_attention(q, k, v, score_mod=rescale)
            """,
        ),
        Valid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            import math
            D = 64
            def rescale(score, b, h, q_idx, kv_idx):
                return score / math.sqrt(D)
            def f(q, k, v):
                return flex_attention(q, k, v, score_mod=rescale, scale=1.0)
            """,
        ),
        Valid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def causal(b, h, q_idx, kv_idx):
                return q_idx < kv_idx  # noqa: MHA015
            m = create_block_mask(causal, None, None, 8, 8)
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def causal(b, h, q_idx, kv_idx):
                return q_idx < kv_idx
            m = create_block_mask(causal, None, None, 8, 8)
            out = flex_attention(q, q, q, block_mask=m)
            """,
            line=3,
            severity=Severity.ERROR,
            headline=(
                "mask_mod `causal` keeps `q_idx < kv_idx`: flex_attention keeps the positions where a mask_mod is "
                "True, so each query sees only later keys"
            ),
            fixed="""
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def causal(b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
            m = create_block_mask(causal, None, None, 8, 8)
            out = flex_attention(q, q, q, block_mask=m)
            """,
        ),
        Invalid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def f(q, k, v, seq_lens, T):
                keep = lambda b, h, qi, ki: ki >= seq_lens[b]
                m = create_block_mask(keep, None, None, T, T)
                return flex_attention(q, k, v, block_mask=m)
            """,
            line=3,
            severity=Severity.WARNING,
            headline=(
                "mask_mod `keep` keeps `ki >= seq_lens[b]`: flex_attention keeps the positions where a mask_mod is "
                "True, so only the padding past `seq_lens[b]` is attended"
            ),
        ),
        Invalid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def causal(score, b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
            def f(q, k, v):
                return flex_attention(q, k, v, causal)
            """,
            line=3,
            severity=Severity.ERROR,
            headline=(
                "score_mod `causal` returns the comparison `q_idx >= kv_idx`: flex_attention uses it as the score "
                "itself (0 or 1), so q·k is dropped"
            ),
        ),
        Invalid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            def f(q, k, v, bias):
                def rel(score, b, h, q_idx, kv_idx):
                    return bias[h][q_idx][kv_idx]
                return flex_attention(q, k, v, score_mod=rel)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "score_mod `rel` returns `bias[h][q_idx][kv_idx]` without its score `score`: the attention no longer "
                "depends on the query and key"
            ),
        ),
        Invalid(
            """
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            import math
            class Attn:
                def __init__(self, head_dim):
                    self.head_dim = head_dim
                def forward(self, q, k, v):
                    def mod(score, b, h, q_idx, kv_idx):
                        return score / math.sqrt(self.head_dim)
                    return flex_attention(q, k, v, score_mod=mod)
            """,
            line=8,
            severity=Severity.ERROR,
            headline=(
                "score_mod `mod` rescales the score by 1/sqrt(self.head_dim), but flex_attention's score is already "
                "scaled by 1/sqrt(E): 1/self.head_dim in all"
            ),
        ),
    )
    example_inputs = (  # a mask_mod's arguments, and a query for flex_attention
        "import torch\nb = h = 0\nq_idx, kv_idx = torch.arange(8)[:, None], torch.arange(8)[None, :]\n"
        "q = torch.randn(1, 2, 8, 16)\n")
    runtime_valid = (
        Valid(
            """
            import torch
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            q = torch.randn(2, 4, 16, 8)
            def causal(b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
            mask = create_block_mask(causal, None, None, 16, 16, device='cpu')
            out = flex_attention(q, q, q, block_mask=mask)
            """,
        ),
        Valid(
            """
            import torch
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            q = torch.randn(2, 4, 16, 8)
            def attend(q, lengths):
                def padded(b, h, q_idx, kv_idx):
                    return (q_idx >= kv_idx) & (kv_idx < lengths[b])
                mask = create_block_mask(padded, 2, None, 16, 16, device='cpu')
                return flex_attention(q, q, q, score_mod=lambda s, b, h, qi, ki: s + (ki - qi) * 0.1, block_mask=mask)
            out = attend(q, torch.tensor([16, 9]))
            """,
        ),
    )
    runtime_invalid = (
        Invalid(
            """
            import torch
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            q = torch.randn(2, 4, 16, 8)
            def causal(b, h, q_idx, kv_idx):
                return q_idx < kv_idx  # True = hide the future
            mask = create_block_mask(causal, None, None, 16, 16, device='cpu')
            out = flex_attention(q, q, q, block_mask=mask)
            """,
            line=7,
            message="leaves query rows [15] with no allowed key",
        ),
        Invalid(
            """
            import torch
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention
            q = torch.randn(2, 4, 16, 8)
            def causal(score, b, h, q_idx, kv_idx):
                return q_idx >= kv_idx
            out = flex_attention(q, q, q, score_mod=causal)
            """,
            line=6,
            message="score_mod `causal` returned a bool tensor",
        ),
    )

    # ---------------------------------------------------------------------------------------------- visiting
    def __init__(self, context, emit):
        super().__init__(context, emit)
        self._done: set[int] = set()

    def visit_Call(self, node: cst.Call) -> None:
        ctx, scope = self.context, self.scope
        name = ctx.qualified_name(node.func, scope) or ""
        short = name[len(torchapi.FLEX_MODULE):] if name.startswith(torchapi.FLEX_MODULE) else ""
        compiled = not short and self._is_flex(node.func, scope)  # `flex = torch.compile(flex_attention)`
        line = ctx.line(node) if short or compiled else None
        if short in torchapi.FLEX_MASK_TAKERS:
            arg = _argument(node, 0, torchapi.FLEX_MASK_TAKERS[short])
            if arg is not None:
                for mod in self._mods(arg, scope, f"passed to {short} at line {line}"):
                    if short == "create_block_mask" or (mod is not None and mod.required < 5):
                        self._mask_mod(mod)  # create_mask also takes a score_mod (5 parameters)
        elif short == "and_masks":
            for arg in node.args:
                if arg.keyword is None and not arg.star:
                    for mod in self._mods(arg.value, scope, f"combined by and_masks at line {line}"):
                        self._mask_mod(mod)
        elif short == "flex_attention" or compiled:
            score_mod = _argument(node, 3, "score_mod")
            if score_mod is None or any(a.star for a in node.args):
                return
            scale = _argument(node, 5, "scale")
            default_scale = scale is None or _resolves_to_none(ctx, scale, scope)
            for mod in self._mods(score_mod, scope, f"passed to flex_attention as score_mod at line {line}"):
                self._score_mod(mod, default_scale)

    def _is_flex(self, func: cst.BaseExpression, scope: Scope, depth: int = 0) -> bool:
        """`flex = torch.compile(flex_attention, ...)` (a name or `self.x`), then `flex(...)`."""
        ctx = self.context
        if depth > 3:
            return False
        if isinstance(func, cst.Name):
            bindings = ctx.bindings(func.value, scope)
        elif isinstance(func, cst.Attribute):
            bindings = ctx.attribute_bindings(func, scope) or []
        else:
            return False
        if len(bindings) != 1 or bindings[0].kind != "assign" or bindings[0].value is None:
            return False
        value, where = bindings[0].value, bindings[0].scope
        if isinstance(value, cst.Call) and ctx.qualified_name(value.func, where) == "torch.compile" and value.args:
            inner = value.args[0].value
            return ctx.qualified_name(inner, where) == torchapi.FLEX_ATTENTION or self._is_flex(inner, where, depth + 1)
        return False

    # ---------------------------------------------------------------------------------------------- resolving
    def _mods(self, expr: cst.BaseExpression, scope: Scope, via: str, depth: int = 0, skip: int = 0,
              bound: frozenset = frozenset()) -> list[_Mod]:
        """The functions `expr` evaluates to, when the code shows them: a lambda, a def's name, `self.x`, a
        functools.partial of one (its positional arguments `skip` leading parameters, its keywords `bound` ones),
        or a call of a project function that returns one of these."""
        ctx = self.context
        if depth > _MAX_DEPTH:
            return []
        if isinstance(expr, cst.Lambda):
            return [self._make(expr, None, scope, "<lambda>", via, skip, bound)]
        if isinstance(expr, cst.Call):
            name = ctx.qualified_name(expr.func, scope) or ""
            if name == "functools.partial" and expr.args and not any(a.star for a in expr.args):
                first, *rest = expr.args
                positional = sum(1 for a in rest if a.keyword is None)
                keywords = frozenset(a.keyword.value for a in rest if a.keyword is not None)
                return self._mods(first.value, scope, via, depth + 1, skip + positional, bound | keywords)
            function = self._project_function(expr, scope, name)
            if function is None:
                return []
            results = returned(function)
            if len(results) != 1:
                return []
            return self._mods(results[0], function, via, depth + 1, skip, bound)
        if isinstance(expr, cst.Name):
            bindings = ctx.bindings(expr.value, scope)
        elif isinstance(expr, cst.Attribute):
            method = self._method(expr, scope)
            if method is not None:
                static = any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                             for d in method.node.decorators)
                return [self._make(method.node, method, method.parent, expr.attr.value, via,
                                   skip + (0 if static else 1), bound)]
            bindings = ctx.attribute_bindings(expr, scope) or []
        else:
            return []
        if len(bindings) != 1:
            return []
        binding = bindings[0]
        if binding.kind == "def" and isinstance(binding.node, cst.FunctionDef):
            inner = ctx.scopes.get(binding.node)
            return [self._make(binding.node, inner, binding.scope, binding.node.name.value, via, skip, bound)]
        if binding.kind == "assign" and isinstance(binding.value, cst.Lambda):
            return [self._make(binding.value, None, binding.scope, binding.name, via, skip, bound)]
        if binding.kind == "assign" and binding.value is not None:
            return self._mods(binding.value, binding.scope, via, depth + 1, skip, bound)
        return []

    def _method(self, expr: cst.Attribute, scope: Scope) -> Scope | None:
        """`self.causal`, a method of the class around `scope` (not an attribute it assigns)."""
        if not (isinstance(expr.value, cst.Name) and expr.value.value == scope.self_name):
            return None
        klass = self.context.class_of(scope)
        if klass is None or expr.attr.value in klass.attributes:
            return None
        method = klass.methods.get(expr.attr.value)
        return method if method is not None and isinstance(method.node, cst.FunctionDef) else None

    def _project_function(self, call: cst.Call, scope: Scope, name: str) -> Scope | None:
        ctx = self.context
        if name.startswith(PROJECT_PREFIX) and name[len(PROJECT_PREFIX):] in ctx.functions:
            return ctx.functions[name[len(PROJECT_PREFIX):]]
        func = call.func
        if isinstance(func, cst.Name):
            bindings = ctx.bindings(func.value, scope)
            if len(bindings) == 1 and bindings[0].kind == "def":
                return ctx.scopes.get(bindings[0].node)
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == scope.self_name:
            klass = ctx.class_of(scope)
            return klass.methods.get(func.attr.value) if klass is not None else None
        return None

    def _make(self, node, inner, outer, name, via, skip, bound) -> _Mod | None:
        parameters = node.params
        if parameters.star_arg is not None and isinstance(parameters.star_arg, cst.Param):
            return None
        params = [p for p in (*parameters.posonly_params, *parameters.params)][skip:]
        params = [p for p in params if p.name.value not in bound]
        required = sum(1 for p in params if p.default is None)
        return _Mod(node, inner, outer, [p.name.value for p in params], required, name, via)

    # ---------------------------------------------------------------------------------------------- mask_mod
    def _first_time(self, mod: _Mod | None, kind: str) -> bool:
        if mod is None or (id(mod.node), kind) in self._done:
            return False
        self._done.add((id(mod.node), kind))
        return True

    def _body(self, mod: _Mod) -> cst.BaseExpression | None:
        if isinstance(mod.node, cst.Lambda):
            return mod.node.body
        results = [node.value for node in own_nodes(mod.node, (cst.Return,)) if node.value is not None]
        return results[0] if len(results) == 1 else None

    def _mask_mod(self, mod: _Mod | None) -> None:
        if mod is None or not mod.required <= 4 <= len(mod.params) or not self._first_time(mod, "mask"):
            return
        body = self._body(mod)
        if body is None:
            return
        batch, q, kv = mod.params[0], mod.params[2], mod.params[3]
        for leaf, op, negated, anchor in conjuncts(self.context, body, mod.outer, read=_Locals(mod).read):
            if (id(anchor), "leaf") in self._done:
                continue
            side = names_compared(leaf, op, q, kv)
            if side is not None:
                self._causal(mod, leaf, side, negated, anchor)
                continue
            padding = _padding_comparison(leaf, op, batch, q, kv)
            if padding is not None:
                self._padding(mod, leaf, *padding, anchor)

    def _causal(self, mod: _Mod, leaf: cst.Comparison, op: str, negated: bool, anchor: cst.CSTNode) -> None:
        """`op` is the effective comparison read as `q OP kv`."""
        if op not in ("<", "<="):
            return
        self._done.add((id(anchor), "leaf"))
        q, kv = mod.params[2], mod.params[3]
        written = f"`~({_bare(self.context, leaf)})`" if negated else f"`{_bare(self.context, leaf)}`"
        strict = op == "<"
        evidence = [f"`{mod.name}` (line {self.context.line(mod.node)}) is {mod.via}",
                    f"its 3rd parameter `{q}` is the query index and its 4th `{kv}` the key index",
                    f"line {self.context.line(anchor)}: {written} is True for keys "
                    f"{'after' if strict else 'at or after'} the query"]
        fix = None
        if strict and not negated and anchor is leaf:
            fix = self._causal_fix(leaf, q, kv)
        self.report(anchor, ANTI_CAUSAL if strict else REVERSED_CAUSAL,
                    severity=Severity.ERROR if strict else Severity.WARNING, evidence=evidence, fix=fix,
                    arguments={"kind": "causal", "op": op}, fn=mod.name, expr=written, q=q, kv=kv, facts=FACTS)

    def _causal_fix(self, leaf: cst.Comparison, q: str, kv: str):
        left, target = leaf.left, leaf.comparisons[0]
        if not (isinstance(left, cst.Name) and isinstance(target.comparator, cst.Name)):
            return None
        new_op = cst.GreaterThanEqual if left.value == q else cst.LessThanEqual
        operator = target.operator
        new = leaf.with_changes(comparisons=[target.with_changes(operator=new_op(
            whitespace_before=operator.whitespace_before, whitespace_after=operator.whitespace_after))])
        text = f"{left.value} {'>=' if left.value == q else '<='} {target.comparator.value}"
        return self.replacement(leaf, new, applicability="unsafe", title=f"keep `{text}` (True = attend)")

    def _padding(self, mod: _Mod, leaf: cst.Comparison, index: str, lengths: cst.Subscript, op: str,
                 anchor: cst.CSTNode) -> None:
        if op not in (">=", ">"):
            return
        self._done.add((id(anchor), "leaf"))
        code = self.context.code
        which = "key" if index == mod.params[3] else "query"
        evidence = [f"`{mod.name}` (line {self.context.line(mod.node)}) is {mod.via}",
                    f"`{index}` is its {'4th' if which == 'key' else '3rd'} parameter, the {which} index, and "
                    f"`{code(lengths)}` is indexed by its 1st, the batch index",
                    f"line {self.context.line(anchor)}: `{_bare(self.context, leaf)}` is True past the length: "
                    "on the padding "
                    f"(what `{code(lengths.value)}` holds is read from its name)"]
        self.report(anchor, INVERTED_PADDING, severity=Severity.WARNING, evidence=evidence,
                    arguments={"kind": "padding", "side": which}, fn=mod.name, expr=f"`{_bare(self.context, leaf)}`",
                    idx=index, lengths=code(lengths), facts=FACTS)

    # ---------------------------------------------------------------------------------------------- score_mod
    def _score_mod(self, mod: _Mod | None, default_scale: bool) -> None:
        if mod is None or not mod.required <= 5 <= len(mod.params) or not self._first_time(mod, "score"):
            return
        score = mod.params[0]
        code, line = self.context.code, self.context.line
        where = f"`{mod.name}` (line {line(mod.node)}) is {mod.via}; its 1st parameter `{score}` is the score"
        body = self._body(mod)
        if body is None:
            return
        if is_boolean(self.context, body, mod.outer, _Locals(mod).read):
            self.report(body, BOOL_SCORE, severity=Severity.ERROR,
                        evidence=[where, f"line {line(body)}: it returns `{code(body)}`, a bool"],
                        arguments={"kind": "score_bool"}, fn=mod.name, expr=f"`{code(body)}`", score=score,
                        facts=FACTS)
            return
        inside = mod.node.body
        if not any(isinstance(n, cst.Name) and n.value == score for n in _all_nodes(inside)):
            self.report(body, DROPPED_SCORE, severity=Severity.ERROR,
                        evidence=[where, f"line {line(body)}: it returns `{code(body)}`; `{score}` is never read"],
                        arguments={"kind": "score_dropped"}, fn=mod.name, expr=f"`{code(body)}`", score=score,
                        facts=FACTS)
            return
        if not default_scale:
            return
        for node, divisor in _rescales(self.context, inside, score, mod):
            head_size = _is_head_size(self.context, divisor)
            total = (f"1/{_bare(self.context, divisor)} in all" if head_size
                     else f"1/sqrt(E·{_bare(self.context, divisor)}) in all")
            self.report(node, SCALED_AGAIN, severity=Severity.ERROR if head_size else Severity.WARNING,
                        evidence=[where, f"line {line(node)}: `{code(node)}` rescales it by 1/sqrt({code(divisor)})",
                                  "the flex_attention call leaves `scale` at its default, 1/sqrt(E) (E = the "
                                  "query's head size), applied before the score_mod"],
                        arguments={"kind": "score_sqrt"}, fn=mod.name, expr=f"1/sqrt({code(divisor)})", total=total,
                        facts=FACTS)
            return

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Re-create the finding's mod in a small eager flex_attention run on the CPU and compare it with the
        intended one (docs/torch-facts.md#flex-mod-convention)."""
        import math
        import warnings

        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        from mhalint.probe import support

        n, heads, length, size = 2, 4, 16, 16
        rebuilt = support.Rebuilt()  # the site's mod is what runs; the data and lengths are the experiment's
        generator = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(n, heads, length, size, generator=generator) for _ in range(3))
        lengths = torch.tensor([length, 10])
        bias = torch.randn(heads, length, length, generator=generator)
        kind, op = arguments.get("kind"), arguments.get("op", "<")

        def run(**kwargs):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
                return flex_attention(q, k, v, **kwargs)

        def blocks(mask_mod, batch=None):
            return create_block_mask(mask_mod, batch, None, length, length, device="cpu")

        setup = f"CPU, eager flex_attention, B={n}, {heads} heads, L=S={length}, head size {size}"
        if kind == "causal":
            as_written = (lambda b, h, qi, ki: qi < ki) if op == "<" else (lambda b, h, qi, ki: qi <= ki)
            given = run(block_mask=blocks(as_written))
            right = run(block_mask=blocks(lambda b, h, qi, ki: qi >= ki))
            zeros = [i for i in range(length) if bool((given[:, :, i] == 0).all())]
            gap = float((given - right).abs().max())
            rows = f"; query rows {zeros} are all zeros" if zeros else ""
            what = f"a mask_mod keeping q_idx {op} kv_idx is {gap:.2f} away from q_idx >= kv_idx (causal){rows}"
            return rebuilt.outcome(gap > 1e-3, f"{what} ({setup})")
        if kind == "padding":
            if arguments.get("side") == "query":
                given = run(block_mask=blocks(lambda b, h, qi, ki: qi >= lengths[b], n))
                right = run(block_mask=blocks(lambda b, h, qi, ki: qi < lengths[b], n))
            else:
                given = run(block_mask=blocks(lambda b, h, qi, ki: ki >= lengths[b], n))
                right = run(block_mask=blocks(lambda b, h, qi, ki: ki < lengths[b], n))
            gap = float((given - right).abs().max())
            full = bool((given[0] == 0).all())
            what = (f"the inverted padding mask_mod is {gap:.2f} away from the right one"
                    + ("; the full-length sample is all zeros" if full else ""))
            return rebuilt.outcome(gap > 1e-3, f"{what} ({setup}, lengths 16 and 10)")
        default = run()
        q2, k2 = torch.randn(2, n, heads, length, size, generator=generator)
        if kind == "score_bool":
            given = run(score_mod=lambda s, b, h, qi, ki: qi >= ki)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                other = flex_attention(q2, k2, v, score_mod=lambda s, b, h, qi, ki: qi >= ki)
            gap = float((given - run(block_mask=blocks(lambda b, h, qi, ki: qi >= ki))).abs().max())
            same = float((given - other).abs().max())
            what = (f"a score_mod returning q_idx >= kv_idx is {gap:.2f} away from causal attention and gives the "
                    f"same output for other queries and keys (max diff {same:.1e})")
            return rebuilt.outcome(gap > 1e-3 and same < 1e-5, f"{what} ({setup})")
        if kind == "score_dropped":
            given = run(score_mod=lambda s, b, h, qi, ki: bias[h][qi][ki])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                other = flex_attention(q2, k2, v, score_mod=lambda s, b, h, qi, ki: bias[h][qi][ki])
            gap = float((given - run(score_mod=lambda s, b, h, qi, ki: s + bias[h][qi][ki])).abs().max())
            same = float((given - other).abs().max())
            what = (f"a score_mod returning only bias[h][q_idx][kv_idx] is {gap:.2f} away from score + bias and gives "
                    f"the same output for other queries and keys (max diff {same:.1e})")
            return rebuilt.outcome(gap > 1e-3 and same < 1e-5, f"{what} ({setup})")
        if kind == "score_sqrt":
            given = run(score_mod=lambda s, b, h, qi, ki: s / math.sqrt(size))
            gap = float((given - default).abs().max())
            twice = float((given - torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1 / size))
                          .abs().max())
            what = (f"score / sqrt({size}) is {gap:.2f} away from the default scale and equal to SDPA with scale "
                    f"1/{size} (max diff {twice:.1e})")
            return rebuilt.outcome(gap > 1e-3 and twice < 1e-4, f"{what} ({setup})")
        return NOT_CONFIRMED, f"no experiment for {kind!r}"

    @staticmethod
    def guard(call) -> list:
        """MHA015 at run time, on flex_attention calls: a block_mask whose mask_mod leaves real query rows with no
        allowed key (flex_attention returns zeros there), and a score_mod that returns a bool tensor."""
        if call.kind != "flex" or call.flex is None or call.error is not None:
            return []
        from mhalint.guard import support as s
        query, key = call.flex["query"], call.flex["key"]
        if not (s.plain(query) and s.plain(key) and query.dim() == 4 and key.dim() == 4):
            return []
        pending = []
        empty = _flex_empty_rows(call, query, key)
        if empty is not None:
            pending.append(s.Pending(empty[0], lambda: _flex_empty_message(call, *empty[1:])))
        returned_bool = _flex_bool_score(call.flex["score_mod"], query)
        if returned_bool:
            pending.append(s.Pending(True, lambda: _flex_bool_message(call)))
        return pending


# -------------------------------------------------------------------------------------------------- runtime
# The guard evaluates a block_mask's mask_mod over (samples, heads, queries, keys) as create_mask does: at most this
# many positions (head 0 alone when all the heads would be more); a larger call is not checked.
FLEX_GUARD_LIMIT = 1 << 22


def _flex_empty_rows(call, query, key):
    """(flag, allowed, empty, reported, heads_read) for a block_mask's mask_mod, or None when it is not read.

    `allowed` (N, H, L, S) is what the mask_mod keeps; `empty` (N, H, L) the query rows with no allowed key.
    A row counts (`reported`) when its sample and head has no allowed key at all, or, for a square (L == S) call,
    when the row's own position is a key that another query attends to: a real token, not a padded one (a padded
    position is usually hidden both as a query and as a key, and its zero output is never read)."""
    import warnings

    import torch

    block_mask = call.flex["block_mask"]
    mask_mod = getattr(block_mask, "mask_mod", None)
    if block_mask is None or not callable(mask_mod):
        return None
    try:
        from torch.nn.attention.flex_attention import create_mask, noop_mask
    except ImportError:
        return None
    if mask_mod is noop_mask:
        return None
    n, heads, length, keys = query.shape[0], query.shape[1], query.shape[-2], key.shape[-2]
    if n * length * keys > FLEX_GUARD_LIMIT or length == 0 or keys == 0:
        return None
    read = heads if n * heads * length * keys <= FLEX_GUARD_LIMIT else 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            allowed = create_mask(mask_mod, n, read, length, keys, device=query.device)
    except Exception:  # a mask_mod that needs what the guard cannot give it: unknown, no report
        return None
    if not isinstance(allowed, torch.Tensor) or allowed.dtype != torch.bool or tuple(allowed.shape) != (
            n, read, length, keys):
        return None
    empty = ~allowed.any(-1)
    reported = empty & empty.all(-1, keepdim=True)
    if length == keys:
        reported = reported | (empty & allowed.any(-2))
    return reported.any(), allowed, empty, reported, read


def _flex_name(function) -> str:
    name = getattr(function, "__name__", None) or type(function).__name__
    return name if isinstance(name, str) else "mask_mod"


def _flex_empty_message(call, allowed, empty, reported, read) -> str:
    import torch

    from mhalint.guard import support as s

    n, _, length, keys = allowed.shape
    name = _flex_name(call.flex["block_mask"].mask_mod)
    samples = reported.any(-1).any(-1).nonzero().flatten().tolist()
    rows = reported.any(1).any(0).nonzero().flatten().tolist()
    whole = reported.all(-1).any(-1).nonzero().flatten().tolist()  # samples with a head that has no key at all
    heads = "head 0" if read == 1 else "every head" if bool((reported == reported[:, :1]).all()) else "some heads"
    if whole and len(rows) == length:
        headline = (f"flex_attention's mask_mod `{name}` leaves samples {s.ints(whole, 4)} with no allowed key at "
                    f"all (True = allowed; {heads}): their output is all zeros")
    else:
        headline = (f"flex_attention's mask_mod `{name}` leaves query rows {s.ints(rows, 4)} with no allowed key "
                    f"(True = allowed; samples {s.ints(samples, 4)}, {heads}): flex_attention returns zeros there")
    out = call.output
    zeros = ""
    if s.plain(out) and out.dim() == 4 and tuple(out.shape[:1]) == (n,) and out.shape[2] == length:
        b, h, q = reported.nonzero(as_tuple=True)
        if out.shape[1] >= read and bool((out[b, h, q] == 0).all()):
            zeros = " This call's output is exactly 0 on those rows."
    habit = ""
    later = torch.ones(length, keys, dtype=torch.bool, device=allowed.device).triu(1)
    if length == keys and bool((allowed == later).all()):
        habit = (" The mask_mod keeps exactly the keys after each query (q_idx < kv_idx): the \"True = hide the "
                 "future\" habit of nn.MultiheadAttention masks.")
    evaluated = (f"{name} was evaluated over {n} sample(s), {'head 0' if read == 1 else f'{read} heads'}, "
                 f"{length} queries and {keys} keys, as create_mask does")
    return s.message(
        headline,
        "a mask_mod returns True where a query MAY attend (causal: `q_idx >= kv_idx`); invert a mask_mod written "
        "as True = hide.",
        f"{evaluated}: query rows {s.ints(rows)} of samples {s.ints(samples)} keep no key "
        f"({int(reported.sum())} (sample, head, query) rows in all).{zeros}{habit} flex_attention reads True as "
        "allowed (create_block_mask's docstring) and gives a row with no allowed key an all-zero output, with no "
        "error or NaN. In a torch 2.13.0 experiment (CPU, eager; B=2, 4 heads, L=S=16) `q_idx < kv_idx` was 3.50 "
        f"away from causal attention and its last query row all zeros ({FACTS}).")


def _flex_bool_score(score_mod, query) -> bool:
    """Whether the score_mod returns a bool tensor, called once on 0-dim score and index tensors."""
    if score_mod is None or not callable(score_mod):
        return False
    import contextlib

    import torch
    try:
        from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex as indexing
    except ImportError:
        indexing = contextlib.nullcontext
    try:
        dtype = query.dtype if query.is_floating_point() else torch.float32
        score = torch.zeros((), dtype=dtype, device=query.device)
        index = torch.zeros((), dtype=torch.int64, device=query.device)
        with indexing():
            result = score_mod(score, index, index, index, index)
        return isinstance(result, torch.Tensor) and result.dtype == torch.bool
    except Exception:  # a score_mod that needs what the guard cannot give it: unknown, no report
        return False


def _flex_bool_message(call) -> str:
    from mhalint.guard import support as s

    name = _flex_name(call.flex["score_mod"])
    return s.message(
        f"flex_attention's score_mod `{name}` returned a bool tensor: flex_attention uses it as the score (0 or 1), "
        "so q·k is dropped",
        "mask with a mask_mod (True = attend) and create_block_mask, or return torch.where(cond, score, "
        "-float('inf')).",
        f"{name}(score, b, h, q_idx, kv_idx) returned dtype bool when the guard called it once on 0-dim tensors. A "
        "score_mod returns the new attention score; a bool becomes 0.0 or 1.0 and the softmax weighs the keys by "
        "that alone. In a torch 2.13.0 experiment (CPU, eager) a score_mod returning `q_idx >= kv_idx` gave exactly "
        f"softmax(tril(ones)) @ v for any query and key, 2.27 away from causal attention, with no error ({FACTS}).")


# -------------------------------------------------------------------------------------------------- helpers
def _bare(ctx, node: cst.CSTNode) -> str:
    """The code of an expression without its own parentheses."""
    if getattr(node, "lpar", None):
        node = node.with_changes(lpar=(), rpar=())
    return ctx.module.code_for_node(node)


def _argument(call: cst.Call, position: int, keyword: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == keyword:
            return arg.value
    positional = [a for a in call.args if a.keyword is None and not a.star]
    return positional[position].value if len(positional) > position else None


def _resolves_to_none(ctx, expr, scope) -> bool:
    value = resolve(ctx, expr, scope)
    return value is not None and value.value is None


def _all_nodes(root: cst.CSTNode) -> list[cst.CSTNode]:
    found = []
    walk(root, lambda node: found.append(node) or True, nothing)
    return found


class _Locals:
    """A def's local names assigned exactly once (`causal = q_idx >= kv_idx`), read as their values."""

    def __init__(self, mod: _Mod):
        self.values: dict[str, cst.BaseExpression] = {}
        if mod.scope is None:
            return
        for name, bindings in mod.scope.bindings.items():
            if name in mod.params or len(bindings) != 1:
                continue
            if bindings[0].kind == "assign" and bindings[0].value is not None:
                self.values[name] = bindings[0].value

    def read(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        seen = 0
        while isinstance(expr, cst.Name) and expr.value in self.values and seen < _MAX_DEPTH:
            expr, seen = self.values[expr.value], seen + 1
        return expr


def _padding_comparison(leaf: cst.Comparison, op: str, batch: str, q: str, kv: str):
    """(index name, the lengths subscript, operator read as `index OP lengths[b]`) for `kv_idx >= lengths[b]`."""
    left, right = leaf.left, leaf.comparisons[0].comparator
    for index, other, oriented in ((left, right, op), (right, left, MIRROR[op])):
        if (isinstance(index, cst.Name) and index.value in (q, kv) and isinstance(other, cst.Subscript)
                and len(other.slice) == 1 and isinstance(other.slice[0].slice, cst.Index)
                and isinstance(other.slice[0].slice.value, cst.Name) and other.slice[0].slice.value.value == batch):
            base = other.value
            word = base.value if isinstance(base, cst.Name) else base.attr.value if isinstance(
                base, cst.Attribute) else ""
            if _LENGTH_NAME.search(word) and not _NOT_LENGTH.search(word):
                return index.value, other, oriented
    return None


def _sqrt_argument(ctx, expr, scope, inverse: bool):
    """X when `expr` is sqrt(X) (inverse=False) or 1/sqrt(X) (inverse=True), X not a number literal."""
    if isinstance(expr, cst.Call) and ctx.qualified_name(expr.func, scope) in _SQRTS and len(expr.args) == 1:
        found = None if inverse else expr.args[0].value
    elif isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Power):
        exponent = resolve(ctx, expr.right, scope)
        wanted = -0.5 if inverse else 0.5
        found = expr.left if exponent is not None and exponent.value == wanted else None
    elif inverse and isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide):
        one = resolve(ctx, expr.left, scope)
        found = _sqrt_argument(ctx, expr.right, scope, False) if one is not None and one.value == 1 else None
    else:
        found = None
    if found is None or isinstance(found, (cst.Integer, cst.Float)):
        return None
    if isinstance(found, cst.Name) and resolve(ctx, found, scope) is not None and not _HEAD_SIZE_NAME.match(
            found.value):
        value = resolve(ctx, found, scope)
        if isinstance(value.value, (int, float)) and value.value in (1, 2):
            return None
    return found


def _rescales(ctx, body, score: str, mod: _Mod):
    """(node, X) for each `score / sqrt(X)`, `score * X ** -0.5`, `score /= sqrt(X)`, ... in the function."""
    scope = mod.scope or mod.outer
    for node in _all_nodes(body):
        if isinstance(node, cst.BinaryOperation):
            pairs = [(node.left, node.right)]
            if isinstance(node.operator, cst.Multiply):
                pairs.append((node.right, node.left))
            kind = node.operator
        elif isinstance(node, cst.AugAssign):
            pairs, kind = [(node.target, node.value)], node.operator
        else:
            continue
        for operand, factor in pairs:
            if not (isinstance(operand, cst.Name) and operand.value == score):
                continue
            if isinstance(kind, (cst.Divide, cst.DivideAssign)):
                found = _sqrt_argument(ctx, _named(ctx, factor, scope), scope, False)
            elif isinstance(kind, (cst.Multiply, cst.MultiplyAssign)):
                found = _sqrt_argument(ctx, _named(ctx, factor, scope), scope, True)
            else:
                found = None
            if found is not None:
                yield node, found


def _named(ctx, expr, scope):
    """A name or `self.x` assigned once, read as its value (`scale = head_dim ** -0.5`)."""
    if isinstance(expr, cst.Name):
        bindings = ctx.bindings(expr.value, scope)
    elif isinstance(expr, cst.Attribute):
        bindings = ctx.attribute_bindings(expr, scope) or []
    else:
        return expr
    if len(bindings) == 1 and bindings[0].kind == "assign" and bindings[0].value is not None:
        return bindings[0].value
    return expr


def _is_head_size(ctx, expr) -> bool:
    if isinstance(expr, cst.Name):
        return bool(_HEAD_SIZE_NAME.match(expr.value))
    if isinstance(expr, cst.Attribute):
        return bool(_HEAD_SIZE_NAME.match(expr.attr.value))
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "size":
        return len(expr.args) == 1 and ctx.code(expr.args[0].value).replace(" ", "") == "-1"
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape":
        return ctx.code(expr.slice[0]).replace(" ", "").rstrip(",") == "-1"
    return False
