"""MHA012 averaged-weights-per-head: nn.MultiheadAttention's head-averaged (N, L, S) weights read as per-head
(N, h, L, S) weights."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mhalint import torchapi
from mhalint.analysis import dataflow, documented
from mhalint.analysis.axes import Role, Strength
from mhalint.analysis.calls import (
    PROJECT_PREFIX,
    call_target,
    instance,
    project_function,
    with_argument,
)
from mhalint.analysis.forward import Follower, function_of
from mhalint.analysis.names import is_head_count, roles_of_names
from mhalint.analysis.tensors import ShapeReader
from mhalint.analysis.values import constructor_values, resolve, taking
from mhalint.analysis.vocabulary import KEEPS_AXES
from mhalint.context import Scope
from mhalint.finding import HEADLINE_LIMIT, NOT_CONFIRMED, UNSAFE, Severity, shorten
from mhalint.parse.lazy import cst
from mhalint.parse.literals import literal
from mhalint.rule import Invalid, Message, Rule, Valid

# Fields: `api` (nn.MultiheadAttention or F.multi_head_attention_forward); `setting` (how average_attn_weights is
# True: "by default", "(average_attn_weights=True)", "(average_attn_weights=`AVG` = True)"); `use`, the code that
# reads the weights per head, with its line.
AVERAGED_READ_PER_HEAD = Message(
    "{api} weights are averaged over heads {setting}, but {use}",
    help="pass average_attn_weights=False to get per-head weights of shape (N, num_heads, L, S)",
    explanation="""
        With need_weights=True, nn.MultiheadAttention (and F.multi_head_attention_forward) returns the attention
        weights averaged over the heads, shape (N, L, S), unless average_attn_weights=False; only then are they
        (N, num_heads, L, S) (torch 2.13 `nn/functional.py:7051-7053`; docs/torch-facts.md#averaged-weights). Code
        that reads axis 1 as the heads reads the queries instead: in a torch 2.13 experiment on CPU (N=2, L=5,
        4 heads), `w[:, head]` was exactly query row `head` of the average, a row that sums to 1 like a head's, and
        it was 0.265 away from head `head`'s own weights for that query (0.16 to 0.47 over ten seeds). Nothing
        raises while the head index is below L; a reshape with the head count raises (`RuntimeError: shape '[2, 4,
        5, 5]' is invalid for input of size 50`) or, when L is a multiple of it, silently regroups the queries.
    """)
DEFAULT_TRUE = "by default"
PASSED_TRUE = "(average_attn_weights=True)"
RESOLVES_TRUE = "(average_attn_weights={written} = True)"

_APIS = (torchapi.MHA, torchapi.MHA_FORWARD_FN)
_MAX_DEPTH = 8
# Names that say a tensor holds one map per head, and names of a head index.
_PER_HEAD_NAME = re.compile(
    r"(?:^|_)per_?heads?(?:_|$)|(?:^|_)(?:by|each|all)_heads?(?:_|$)"
    r"|(?:^|_)heads?_(?:attn_|att_|attention_)?(?:weights?|probs?|scores?|maps?|attentions?|attn|att)(?:_|$)",
    re.IGNORECASE)
_HEAD_INDEX_NAME = re.compile(r"^_?(?:head|head_?(?:idx|id|index|i|n|no|num|number)|h_?(?:idx|id|index)|i_?head)$",
                              re.IGNORECASE)
_PASS_THROUGH = KEEPS_AXES | {"numpy", "tolist"}


@dataclass(frozen=True)
class Use:
    """A per-head reading of the weights: how sure it is, the headline's phrase (`code`, quoted and shortened to
    fit the headline, then `rest`), the evidence sentence."""

    strength: Strength
    rest: str
    sentence: str
    code: str = ""

    @property
    def lines(self) -> list[str]:
        """The sentence as evidence lines (a sentence may hold two facts, a line each)."""
        return self.sentence.split("\n")

    def phrase(self, room: int) -> str:
        """The phrase in at most about `room` characters: only the quoted code is shortened."""
        if not self.code:
            return self.rest
        return f"`{shorten(self.code, max(16, room - len(self.rest) - 3))}` {self.rest}"


class AveragedWeightsPerHead(Rule):
    """
    ## What it does
    Flags an `nn.MultiheadAttention` call (or `F.multi_head_attention_forward`) whose weights are averaged over
    the heads (`average_attn_weights` left at its default `True`, passed `True`, or a constant or a caller's
    argument that is `True`; `need_weights` not `False`) when the code then reads those weights as if they had a
    heads axis: it indexes axis 1 with a head index (a loop variable over `range(num_heads)` or
    `range(attn.num_heads)`, a name such as `head` or `h_idx`), reshapes them with the head count
    (`w.view(B, num_heads, L, S)`), unpacks four sizes from them (`B, H, L, S = w.shape`), documents them as
    `(batch, num_heads, L, S)` (the docstring entry of the function that returns them, or a shape comment), or
    names them per-head (`attn_per_head`). The weights are followed through tuple unpacking, `[1]`, names,
    `self.` attributes, `.detach()`/`.cpu()`, returns to this file's callers and calls of this file's functions.

    An error needs code that ties the use to the heads: a loop over or a reshape with the module's own head
    count (`self.attn.num_heads`, the expression or constant the module is built with), a 4-name unpacking, a
    documented 4-D shape. A head-count name that cannot be tied to the module, a head-index name, or a per-head
    name alone gives a warning. A call whose query is known to be unbatched (L, E) is left alone (its weights are
    (L, S)), and so are an unknown `average_attn_weights` and weights whose use is unknown.

    ## Why is this bad?
    With `need_weights=True`, `nn.MultiheadAttention` returns the attention weights averaged over the heads,
    shape (N, L, S), unless `average_attn_weights=False`; only then are they (N, num_heads, L, S) (torch 2.13
    `nn/functional.py:7051-7053`). Code that reads axis 1 as the heads reads the queries instead. In a torch 2.13
    experiment on CPU (docs/torch-facts.md#averaged-weights; N=2, L=5, 4 heads), `w[:, head]` on the averaged
    weights was exactly query row `head` of the average, a row that sums to 1 like a head's, and it was 0.265
    away from head `head`'s own weights for that query (0.16 to 0.47 over ten seeds). Nothing raises while the
    head index is below L, so plots and head-pruning statistics silently show queries. A reshape with the head
    count raises (`RuntimeError: shape '[2, 4, 5, 5]' is invalid for input of size 50`), or, when L is a
    multiple of the head count (L=8: `w.view(N, h, -1, S)` is (2, 4, 2, 8)), silently regroups the queries;
    `B, H, L, S = w.shape` raises `ValueError: not enough values to unpack (expected 4, got 3)`.

    ## Known problems
    The weights are followed within one file; a per-head use in another file, or behind a container
    (`all_attentions += (w,)`) and a model-output class defined elsewhere, is not seen. `w.mean(1)` is not taken
    as evidence: on averaged weights it averages over the queries, which is a common and correct reduction.
    A literal index (`w[:, 0]`, the CLS query's row) is not either. There is no runtime check: the guard sees
    the call, not how its weights are used afterwards.

    ## Example
    ```python
    out, weights = self.attn(x, x, x)
    for head in range(self.attn.num_heads):
        maps.append(weights[:, head])
    ```

    ## Use instead
    ```python
    out, weights = self.attn(x, x, x, average_attn_weights=False)
    for head in range(self.attn.num_heads):
        maps.append(weights[:, head])
    ```

    ## Fix safety
    Unsafe: `average_attn_weights=False` is added to the call (or the `True` given for it is replaced), only when
    the per-head use is established (an error finding). The weights become (N, num_heads, L, S) everywhere they
    go, so any other code that reads the same weights as (N, L, S) changes too.

    ## References
    - torch 2.13 `nn/modules/activation.py:1301-1303` (the `average_attn_weights` docstring) and
      `nn/functional.py:7051-7053` (the averaging)
    - docs/torch-facts.md#averaged-weights and docs/torch-facts.md#mha-reference (the shapes)
    """

    code = "MHA012"
    name = "averaged-weights-per-head"
    summary = "Head-averaged MultiheadAttention weights (N, L, S) read as per-head weights (N, num_heads, L, S)"
    triggers = (torchapi.MHA_TRIGGER, torchapi.MHA_FORWARD_FN_TRIGGER)
    acts_on_passed_values = False  # calls are resolved through mhalint.analysis.calls and mhalint.context

    valid = (
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x, average_attn_weights=False)
                return [w[:, h] for h in range(attn.num_heads)]
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x)
                return w[:, 0], w.mean(dim=1)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x, avg):
                out, w = attn(x, x, x, average_attn_weights=avg)
                return [w[:, h] for h in range(attn.num_heads)]
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x)
                B, L, S = w.shape
                return w.view(B, L * S)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x)  # noqa: MHA012
                return [w[:, h] for h in range(attn.num_heads)]
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn as nn
            class Probe(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
                def forward(self, x):
                    out, weights = self.attn(x, x, x)
                    maps = [weights[:, head] for head in range(self.attn.num_heads)]
                    return out, maps
            """,
            line=7,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention weights are averaged over heads by default, but `weights[:, head]` (line 8) "
                "reads axis 1 (the queries) as head `head`"
            ),
            fixed="""
            import torch.nn as nn
            class Probe(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
                def forward(self, x):
                    out, weights = self.attn(x, x, x, average_attn_weights=False)
                    maps = [weights[:, head] for head in range(self.attn.num_heads)]
                    return out, maps
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x)
                B, L, S = x.shape
                return w.view(B, 8, L, L)
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention weights are averaged over heads by default, but `w.view(B, 8, L, L)` (line 6) "
                "reshapes them with the head count"
            ),
            fixed="""
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x, average_attn_weights=False)
                B, L, S = x.shape
                return w.view(B, 8, L, L)
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x)
                B, H, L, S = w.shape
                return w, H
            """,
            line=4,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention weights are averaged over heads by default, but `B, H, L, S = w.shape` (line 5) "
                "unpacks 4 sizes from them"
            ),
            fixed="""
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, w = attn(x, x, x, average_attn_weights=False)
                B, H, L, S = w.shape
                return w, H
            """,
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x, head_idx):
                w = attn(x, x, x)[1]
                return w[0, head_idx]
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention weights are averaged over heads by default, but `w[0, head_idx]` (line 5) reads "
                "axis 1 (the queries) as head `head_idx`"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def f(x):
                out, attn_per_head = attn(x, x, x)
                return out, attn_per_head
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention weights are averaged over heads by default, but `attn_per_head` (line 4) names "
                "them per head"
            ),
        ),
    )
    example_inputs = "import torch\nx = torch.randn(2, 5, 64)\n"

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.shapes = ShapeReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        target = call_target(self.context, node, self.scope)
        if target is None or target.api not in _APIS:
            return
        arguments = target.arguments
        need = arguments.get("need_weights")
        if need is not None:
            value = resolve(self.context, need, self.scope)
            if value is not None and value.value is False:
                return
        average = arguments.get("average_attn_weights")
        if average is None:
            if arguments.opaque:
                return  # **kwargs may carry average_attn_weights=False
            setting, trail = DEFAULT_TRUE, ("average_attn_weights is not passed (default True)",)
        else:
            value = taking(self.context, average, self.scope, True)
            if value is None:
                return
            written = " ".join(self.context.code(average).split())
            setting = PASSED_TRUE if written == "True" else RESOLVES_TRUE.format(written=f"`{written}`")
            trail = (f"average_attn_weights={written}" + (" resolves to True" if written != "True" else ""),
                     *value.trail)
        if self._unbatched(arguments.get("query"), node):
            return
        tracker = _Tracker(self, target, node)
        tracker.follow(node, self.scope, element=1)
        uses = tracker.uses
        if not uses:
            return
        if tracker.averaged_documented and all(u.strength is Strength.NAMED for u in uses):
            return  # a documented (N, L, S) against names alone: conflicting evidence
        strongest = max(uses, key=lambda u: u.strength)
        established = strongest.strength is Strength.ESTABLISHED
        evidence = [*trail, "so the weights are (N, L, S), averaged over the heads", *tracker.route_of(strongest),
                    *strongest.lines]
        evidence += [line for u in uses if u is not strongest for line in u.lines][:3]
        fix = None
        if established and (average is None or resolve(self.context, average, self.scope) is not None):
            existing = arguments.by_name.get("average_attn_weights")
            fix = self.replacement(node, with_argument(node, existing, "average_attn_weights", "False"),
                                   applicability=UNSAFE, title="pass average_attn_weights=False")
        details: dict[str, object] = {"api": target.api, "average_attn_weights": True}
        if target.construction is not None:
            details.update(constructor_values(self.context, target.construction))
        elif target.api == torchapi.MHA_FORWARD_FN:
            heads = resolve(self.context, arguments.get("num_heads"), self.scope)
            if heads is not None and isinstance(heads.value, int):
                details["num_heads"] = heads.value
        api = torchapi.short_name(target.api)
        room = HEADLINE_LIMIT - len(AVERAGED_READ_PER_HEAD.headline.format(api=api, setting=setting, use=""))
        self.report(node, AVERAGED_READ_PER_HEAD, severity=Severity.ERROR if established else Severity.WARNING,
                    evidence=evidence, arguments=details, fix=fix, api=api, setting=setting,
                    use=strongest.phrase(room))

    def _unbatched(self, query: cst.BaseExpression | None, call: cst.Call) -> bool:
        """Is the query known to be 2-D (L, E)? Its weights are then (L, S)."""
        traced = self.shapes.of(query, self.scope, call) if query is not None else None
        return traced is not None and len(traced.shape) == 2 and all(a.size != "..." for a in traced.shape)

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Re-create the module (batched, N=2, the site's head count when known, L at least that), take its
        averaged weights and its per-head weights (average_attn_weights=False), and read `w[:, head]` for each
        head as the site does (docs/torch-facts.md#averaged-weights): confirmed when every `w[:, head]` is
        query row `head` of the average and differs from head `head`'s own weights."""
        from mhalint.probe import support

        spec = {key: value for key, value in arguments.items() if key != "api"}
        spec["api"] = torchapi.MHA
        rebuilt = support.Rebuilt()
        embed, heads, notes = support.dims(spec, rebuilt)
        n, length = 2, max(5, heads)
        module = torch.nn.MultiheadAttention(embed, heads, batch_first=True)
        with torch.no_grad():
            module.in_proj_bias.normal_()
            x = torch.randn(n, length, embed)
            _, averaged = module(x, x, x, average_attn_weights=arguments.get("average_attn_weights", True))
            _, per_head = module(x, x, x, average_attn_weights=False)
        sizes = f"N={n}, L=S={length}, E={embed}, {heads} heads" + (f"; {', '.join(notes)}" if notes else "")
        if averaged.dim() != 3:
            return NOT_CONFIRMED, (f"the site's weights have shape {tuple(averaged.shape)}: they are per head "
                                   f"({sizes})")
        as_rows = max(float((averaged[:, h] - per_head.mean(dim=1)[:, h]).abs().max()) for h in range(heads))
        off = max(float((averaged[:, h] - per_head[:, h, h]).abs().max()) for h in range(heads))
        shapes = (f"the averaged weights are {tuple(averaged.shape)}, the per-head ones {tuple(per_head.shape)}; "
                  f"`w[:, head]` is {tuple(averaged[:, 0].shape)}")
        if as_rows < 1e-5 and off > 1e-3:
            return rebuilt.verdict(f"{shapes}: for every head it is query row `head` of the average (max diff "
                               f"{as_rows:.1e}) and is {off:.3f} away from head `head`'s own weights for that query "
                               f"({sizes})")
        return NOT_CONFIRMED, (f"{shapes}; it is {as_rows:.1e} from query row `head` of the average and {off:.3f} "
                               f"from head `head`'s weights ({sizes})")


class _Tracker(Follower):
    """Follows the weights of one call forward (the core's Follower) and collects the per-head uses it finds,
    each with its route: an index of axis 1, a reshape or an unpacking with the head count, a per-head name, a
    shape comment or docstring."""

    max_depth = _MAX_DEPTH

    def __init__(self, rule: AveragedWeightsPerHead, target, call: cst.Call):
        super().__init__(rule.context)
        self.target = target
        self.call = call
        self.uses: list[Use] = []
        self.routes: dict[int, tuple[str, ...]] = {}
        self.averaged_documented = False

    def route_of(self, use: Use) -> tuple[str, ...]:
        return self.routes.get(id(use), ())

    def _add(self, use: Use, route: tuple[str, ...]) -> None:
        if any(u.sentence == use.sentence for u in self.uses):
            return
        self.uses.append(use)
        self.routes[id(use)] = route

    # ---- the Follower's hooks ----
    def carrier(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """The outermost `.detach()`, `.cpu()`, `.float()`... around `expr`: the same weights."""
        current = expr
        while True:
            parent = self.ctx.parent(current)
            call = self.ctx.parent(parent) if isinstance(parent, cst.Attribute) else None
            if (isinstance(parent, cst.Attribute) and parent.value is current and parent.attr.value in _PASS_THROUGH
                    and isinstance(call, cst.Call) and call.func is parent):
                current = call
                continue
            return current

    def assigned_step(self, target, statement, value, route) -> str:
        line = self.ctx.line(statement)
        held = target.value if isinstance(target, cst.Name) else f"self.{target.attr.value}"
        return f"`{held}` holds the weights (line {line})"

    def bound(self, name: str, statement: cst.CSTNode, route: tuple[str, ...]) -> list:
        line = self.ctx.line(statement)
        self._named(name, line, route)
        if not isinstance(statement, cst.Call):  # a parameter: the call's line is not where it is named
            self._commented(name, line, route)
        return []

    def used(self, reached) -> list:
        """`w[:, head]`, `w.view(B, num_heads, L, S)`, `B, H, L, S = w.shape`."""
        parent = reached.parent
        if isinstance(parent, cst.Subscript) and parent.value is reached.value:
            self._indexed(parent, reached.scope, reached.route)
        elif isinstance(parent, cst.Attribute) and parent.value is reached.value:
            call = self.ctx.parent(parent)
            if parent.attr.value in ("view", "reshape") and isinstance(call, cst.Call) and call.func is parent:
                self._reshaped(call, reached.scope, reached.route)
            elif parent.attr.value == "shape" or (parent.attr.value == "size" and isinstance(call, cst.Call)
                                                  and call.func is parent and not call.args):
                self._unpacked(call if parent.attr.value == "size" else parent, reached.route)
        return []

    def returned(self, value: cst.BaseExpression, function: Scope, element: int | None, route) -> list:
        """The function's docstring entry for the weights it returns."""
        docstring = function.node.get_docstring() or ""
        names = [n for n in (_last_name(value), "attentions", "attn_weights", "attention_weights") if n]
        for name in dict.fromkeys(names):
            for text in documented.entry(docstring, name):
                shape = documented.shape_in_text(text)
                if shape is None:
                    continue
                self._documented(shape, f"the docstring of `{function.name}()` documents `{name}`: "
                                        f"{text.strip(' :-.')}",
                                 f"the docstring of `{function.name}()` documents them as ({', '.join(shape)})", route)
                break
        return []

    def stop(self, arrival) -> list | None:
        """The weights are followed into a function or method of this file they are passed to; a class of this
        file that documents the keyword they are passed as says their shape; any other call ends the path."""
        ctx, call, arg = self.ctx, arrival.call, arrival.arg
        if project_function(ctx, call, arrival.scope) is not None:
            return None
        name = ctx.qualified_name(call.func, arrival.scope) or ""
        klass = ctx.classes.get(name[len(PROJECT_PREFIX):]) if name.startswith(PROJECT_PREFIX) else None
        if klass is None or arg.keyword is None:
            return []
        keyword = arg.keyword.value
        for text in documented.entry(klass.node.get_docstring() or "", keyword):
            shape = documented.shape_in_text(text)
            if shape is not None:
                step = f"passed as `{keyword}=` to `{klass.name}(...)` at line {ctx.line(call)}"
                self._documented(shape, f"the docstring of class `{klass.name}` documents `{keyword}`: "
                                        f"{text.strip(' :-.')}", f"`{klass.name}` documents `{keyword}` as "
                                                           f"({', '.join(shape)})", arrival.route + (step,))
                return []
        return []

    def _indexed(self, subscript: cst.Subscript, scope: Scope, route) -> None:
        """`w[:, head]`, `w[0, head]`, `w[0][head]`: what indexes the weights' axis 1 (the queries)."""
        ctx = self.ctx
        left = [0, 1, 2]  # the weights' axes that the result still has, in order
        node = subscript
        while isinstance(node, cst.Subscript):
            kept = []
            for position, element in enumerate(node.slice):
                if position >= len(left):
                    return
                inner = element.slice
                if isinstance(inner, cst.Slice):
                    kept.append(left[position])
                    continue
                value = inner.value
                if isinstance(value, cst.Ellipsis) or (isinstance(value, cst.Name) and value.value == "None"):
                    return
                if left[position] == 1:
                    self._head_index(value, node, scope, route)
                    return
            left = kept + left[len(node.slice):]
            if 1 not in left:
                return
            parent = ctx.parent(node)
            if not (isinstance(parent, cst.Subscript) and parent.value is node):
                return
            node = parent

    def _head_index(self, index: cst.BaseExpression, subscript: cst.Subscript, scope: Scope, route) -> None:
        ctx = self.ctx
        code = shorten(ctx.code(subscript), 60)
        line = ctx.line(subscript)
        name = _last_name(index)
        if name is None:
            return
        code_of, phrase = ctx.code(subscript), f"(line {line}) reads axis 1 (the queries) as head `{name}`"
        if isinstance(index, cst.Name):
            loop = _range_loop(ctx, index, scope)
            if loop is not None:
                count = self._head_count(loop[1], loop[2])
                if count is not None:
                    strength, why = count
                    sentence = (f"`for {name} in {ctx.code(loop[0].iter)}` at line {ctx.line(loop[0])}: {why}\n"
                                f"`{code}` at line {line} takes query row `{name}` of the average, not head `{name}`")
                    self._add(Use(strength, phrase, sentence, code_of), route)
                    return
        if _HEAD_INDEX_NAME.match(name):
            sentence = (f"`{code}` at line {line}: the index `{ctx.code(index)}` is named as a head; axis 1 of the "
                        f"averaged weights is the query, so this is query row `{ctx.code(index)}`")
            self._add(Use(Strength.NAMED, phrase, sentence, code_of), route)

    def _reshaped(self, call: cst.Call, scope: Scope, route) -> None:
        """`w.view(B, num_heads, L, S)`: a size that is (or multiplies) the head count."""
        ctx = self.ctx
        sizes = [a.value for a in call.args if not a.keyword and not a.star]
        if len(sizes) == 1 and isinstance(sizes[0], cst.Tuple | cst.List):
            sizes = [e.value for e in sizes[0].elements]
        found = None
        for size in sizes:
            for factor in _factors(size):
                count = self._head_count(factor, scope, literal=len(sizes) >= 4)
                if count is not None and (found is None or count[0] > found[0]):
                    found = count
        if found is None:
            return
        strength, why = found
        code, line = shorten(ctx.code(call), 60), ctx.line(call)
        phrase = f"(line {line}) reshapes them with the head count"
        sentence = (f"`{code}` at line {line}: {why}\nthe averaged weights have no heads axis to split (this "
                    f"raises, or silently regroups the queries when L is a multiple of it)")
        self._add(Use(strength, phrase, sentence, ctx.code(call)), route)

    def _unpacked(self, shape: cst.BaseExpression, route) -> None:
        """`B, H, L, S = w.shape`: four sizes from a 3-D tensor."""
        ctx = self.ctx
        statement = ctx.parent(shape)
        if not (isinstance(statement, cst.Assign) and statement.value is shape and len(statement.targets) == 1):
            return
        target = statement.targets[0].target
        if not isinstance(target, cst.Tuple | cst.List):
            return
        names = [ctx.code(e.value) for e in target.elements]
        line = ctx.line(statement)
        code = shorten(f"{ctx.code(target)} = {ctx.code(shape)}", 60)
        if len(names) == 4 and not any(isinstance(e, cst.StarredElement) for e in target.elements):
            phrase = f"(line {line}) unpacks 4 sizes from them"
            sentence = (f"`{code}` at line {line} reads 4 axes (N, num_heads, L, S)\nthe averaged weights have 3, "
                        f"so this raises `ValueError: not enough values to unpack (expected 4, got 3)`")
            self._add(Use(Strength.ESTABLISHED, phrase, sentence, f"{ctx.code(target)} = {ctx.code(shape)}"),
                      route)
        elif len(names) == 3:
            self.averaged_documented = True  # the code itself reads them as (N, L, S)

    # ---- what names, comments and docstrings say ----
    def _documented(self, shape: list[str], sentence: str, phrase: str, route) -> None:
        roles = roles_of_names(shape)
        if len(shape) == 4 and Role.HEADS in roles:
            self._add(Use(Strength.ESTABLISHED, phrase, sentence + "\nthe averaged weights have no heads axis"),
                      route)
        elif len(shape) == 3 and Role.HEADS not in roles:
            self.averaged_documented = True

    def _commented(self, name: str, line: int, route) -> None:
        """A shape comment on the line that binds the weights: `# w: (B, H, L, S)`, or `# (B, H, L, S)` when the
        line binds nothing else."""
        comment = self.ctx.comment(line)
        if not comment:
            return
        match = re.search(rf"\b{re.escape(name)}\b\s*(?::|=|is\b|has shape)?\s*(.*)", comment)
        text = match[1] if match else (comment if self._single_target(line) else None)
        shape = documented.shape_in_text(text) if text else None
        if shape is not None:
            self._documented(shape, f"the comment at line {line} documents `{name}` as ({', '.join(shape)})",
                             f"a comment (line {line}) documents them as ({', '.join(shape)})", route)

    def _single_target(self, line: int) -> bool:
        text = self.ctx.source_lines()[line - 1].split("#", 1)[0]
        return "," not in text.split("=", 1)[0]

    def _named(self, name: str, line: int, route) -> None:
        if _PER_HEAD_NAME.search(name) and not re.search(r"multi_?head", name, re.IGNORECASE):
            sentence = f"`{name}` (line {line}) is named as per-head weights, which they are not"
            self._add(Use(Strength.NAMED, f"(line {line}) names them per head", sentence, name), route)

    def _head_count(self, size: cst.BaseExpression, scope: Scope, literal: bool = False
                    ) -> tuple[Strength, str] | None:
        """(strength, why) when `size` is the call's head count: the module's own (`attn.num_heads`, the
        expression or constant it is built with) is established; a head-count name alone is named. A bare
        number counts only where `literal` says the context makes it a heads axis."""
        ctx = self.ctx
        code = ctx.code(size)
        if isinstance(size, cst.Attribute) and size.attr.value in ("num_heads", "nhead"):
            built = instance(ctx, size.value, scope)
            if built is not None and self.target.construction is not None \
                    and built.call is self.target.construction.call:
                return Strength.ESTABLISHED, f"`{code}` is the module's head count"
        own, own_scope = self._own_heads()
        if own is not None:
            if _same_expression(ctx, size, scope, own, own_scope):
                return Strength.ESTABLISHED, f"`{code}` is the head count the module is built with"
            mine, theirs = resolve(ctx, size, scope), resolve(ctx, own, own_scope)
            if ((literal or not isinstance(size, cst.Integer)) and mine is not None and theirs is not None
                    and isinstance(mine.value, int) and not isinstance(mine.value, bool)
                    and mine.value == theirs.value and mine.value > 1):
                where = f" ({mine.describe()})" if mine.trail else ""
                return Strength.ESTABLISHED, (f"`{code}` is {mine.value}{where}, the head count the module is "
                                              f"built with (`{ctx.code(own)}`, line {ctx.line(own)})")
        name = _last_name(size)
        if name is not None and is_head_count(name):
            return Strength.NAMED, f"`{code}` is named as a head count"
        return None

    def _own_heads(self) -> tuple[cst.BaseExpression | None, Scope | None]:
        if self.target.construction is not None:
            built = self.target.construction
            return built.arguments.get("num_heads"), built.scope
        if self.target.api == torchapi.MHA_FORWARD_FN:
            return self.target.arguments.get("num_heads"), self.ctx.scope_of(function_of(self.ctx, self.call)) \
                or self.ctx.root
        return None, None


def _same_expression(ctx, size, scope: Scope, own, own_scope: Scope, depth: int = 0) -> bool:
    """Is `size` (in `scope`) the same value as `own` (in `own_scope`) by the code: the same local name in the
    same function, the same `self.x` in one class, or `self.x` assigned from `own` where the module is built."""
    if depth > 3 or size is None or own is None:
        return False
    if ctx.code(size) == ctx.code(own):
        if isinstance(size, cst.Name):
            return scope is own_scope or (ctx.bindings(size.value, scope) and ctx.bindings(size.value, scope)
                                          == ctx.bindings(own.value, own_scope))
        bindings = ctx.attribute_bindings(size, scope)
        return bindings is not None and ctx.class_of(scope) is ctx.class_of(own_scope)
    bindings = ctx.attribute_bindings(size, scope)
    if bindings:
        return all(b.kind == "assign" and b.value is not None
                   and _same_expression(ctx, b.value, b.scope, own, own_scope, depth + 1) for b in bindings)
    return False


def _range_loop(ctx, index: cst.Name, scope: Scope):
    """(the for statement or comprehension clause, its range bound, the bound's scope) when `index` is the loop
    variable of `for index in range(bound)` (or `range(0, bound)`)."""
    node = ctx.parent(index)
    while node is not None:  # a comprehension's own clause binds the name
        if isinstance(node, cst.ListComp | cst.GeneratorExp | cst.SetComp | cst.DictComp):
            clause = node.for_in
            while clause is not None:
                if isinstance(clause.target, cst.Name) and clause.target.value == index.value:
                    bound = _range_bound(ctx, clause.iter, scope)
                    return (clause, bound, scope) if bound is not None else None
                clause = clause.inner_for_in
        if isinstance(node, cst.FunctionDef | cst.Module):
            break
        node = ctx.parent(node)
    bindings = dataflow.reaching(ctx, ctx.bindings(index.value, scope), index)
    if len(bindings) != 1 or bindings[0].kind != "for" or not isinstance(bindings[0].node, cst.For):
        return None
    loop = bindings[0].node
    if not (isinstance(loop.target, cst.Name) and loop.target.value == index.value):
        return None
    bound = _range_bound(ctx, loop.iter, bindings[0].scope)
    return (loop, bound, bindings[0].scope) if bound is not None else None


def _range_bound(ctx, iterable: cst.BaseExpression, scope: Scope) -> cst.BaseExpression | None:
    if not (isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value == "range"
            and not ctx.bindings("range", scope)):
        return None
    args = [a for a in iterable.args if not a.keyword and not a.star]
    if len(args) == 1:
        return args[0].value
    if len(args) == 2 and isinstance(args[0].value, cst.Integer) and literal(args[0].value) == 0:
        return args[1].value
    return None


def _factors(size: cst.BaseExpression) -> list[cst.BaseExpression]:
    """`B * num_heads` -> [B, num_heads]; anything else is its own factor."""
    if isinstance(size, cst.BinaryOperation) and isinstance(size.operator, cst.Multiply):
        return _factors(size.left) + _factors(size.right)
    return [size]


def _last_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None
