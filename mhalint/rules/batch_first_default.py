"""MHA001 batch-first-default: MultiheadAttention and the Transformer layers read (L, N, E) unless told otherwise."""

from __future__ import annotations

from dataclasses import dataclass, replace

from mhalint import torchapi
from mhalint.analysis.axes import BATCH_FIRST, SEQ_FIRST, Role, Strength, layout, weakened
from mhalint.analysis.calls import ModuleCall, constructions, module_calls, with_argument
from mhalint.analysis.stops import PRIORITY
from mhalint.analysis.tensors import ShapeReader, Traced
from mhalint.analysis.uncalled import unreached, why_uncalled
from mhalint.analysis.values import Value, alternatives, constructor_values, forwarded, resolve
from mhalint.finding import HEADLINE_LIMIT, NOT_CONFIRMED, UNSAFE, Severity, shorten
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

_MIXES_SAMPLES = """
    {api} reads every 3-D tensor as (L, N, E) unless batch_first=True (torch 2.13 `nn/modules/activation.py:1172`,
    `transformer.py:112, 749, 1034`). Batch-first (N, L, E) data is a valid (L, N, E) tensor too, so nothing raises:
    attention runs across the batch axis and mixes samples. torch 2.13 experiment (N=4, L=10, E=64, 8 heads):
    changing sample 1 moved sample 0's output by 0.47 (docs/torch-facts.md#batch-first).
"""

# Fields: `api` (nn.MultiheadAttention, ...); `data` and `place` (`line 12`, `train.py:12`), the code that shows the
# layout; `setting`, how batch_first is set ("batch_first is False", "batch_first=BF is False"); `built`, the same
# for the headlines without layout evidence ("is built without batch_first", "gets batch_first=BF (`BF` = False at
# line 2)").
BATCH_FIRST_DATA = Message(
    "{api} gets batch-first data ({data}, {place}) but {setting}",
    help="pass batch_first=True",
    explanation=_MIXES_SAMPLES)
SEQUENCE_FIRST_DATA = Message(
    "{api} gets sequence-first data ({data}, {place}) but {setting}",
    help="feed (N, L, E) data (drop the permute/transpose to (L, N, E)), or set batch_first=False",
    explanation="""
        With batch_first=True, {api} reads every 3-D tensor as (N, L, E). Sequence-first (L, N, E) data is a valid
        (N, L, E) tensor too, so nothing raises: the sequence axis is read as the batch, and attention runs across
        the real batch and mixes samples (docs/torch-facts.md#batch-first).
    """)
# `missing`: what the analysis lacks, in the project's terms (mhalint.analysis.stops): "the data comes from `tgt`, a
# parameter of `Decoder.forward` that no caller in this file fills", "`# bs, nq, d` and `x.permute(1, 0, 2)` disagree
# on the data's layout".
NO_LAYOUT_EVIDENCE = Message(
    "{api} {built}: it reads (L, N, E), and {missing}",
    help="pass batch_first=True for (N, L, E) data, or write batch_first=False if the data is (L, N, E)",
    explanation=_MIXES_SAMPLES)
# `missing`: why nothing runs it, in uncalled.py's words ("`self.memory_attn` is never called in the project", "no
# run of the project reaches it (`self.blocks` is never called)").
NEVER_RUN = Message(
    "{api} {built}: {missing}; called, it would read (L, N, E)",
    help="pass batch_first=True before feeding it (N, L, E) data, or write batch_first=False if it gets (L, N, E)",
    explanation=_MIXES_SAMPLES)
# `kind`: the data's layout; `missing`: why no run of the project reaches the calls (mhalint.analysis.uncalled:
# "`self.blocks` is never called").
UNREACHED = Message(
    "{api} gets {kind} data ({data}, {place}) but {setting}; no run reaches it ({missing})",
    help="pass batch_first={fixed} before the class is used",
    explanation=_MIXES_SAMPLES)
IMPLICIT_SEQUENCE_FIRST = Message(
    "{api} {built}, implicitly right for sequence-first data ({data}, {place})",
    help="write batch_first=False to make the layout explicit",
    explanation="""
        {api} defaults to batch_first=False and reads (L, N, E), which is what this code gives it, so the result is
        correct. Written out, batch_first=False tells a reader the layout is deliberate; left implicit, a later
        change to batch-first data would mix samples without any error (docs/torch-facts.md#batch-first).
    """)

_MODULES = (torchapi.MHA, torchapi.ENCODER_LAYER, torchapi.DECODER_LAYER, torchapi.TRANSFORMER)


@dataclass(frozen=True)
class _Setting:
    """How a construction sets batch_first: its value, whether a literal states it, how the headlines say it
    (`headline` beside layout evidence, `built` without), and the evidence lines."""

    batch_first: bool
    stated: bool
    headline: str
    built: str
    evidence: list[str]


@dataclass(frozen=True)
class _Seen:
    """The layout one call's query has, what decides it (its code and line, for the headline) and the chain."""

    kind: str
    strength: Strength
    code: str
    place: str  # `line 12`, or `train.py:12` in another file
    evidence: tuple[str, ...]

    @classmethod
    def of(cls, traced) -> _Seen | None:
        """The headline quotes the last operation that moved the axes, else the code that gave them their roles."""
        found = layout(traced.shape) if traced is not None else None
        if found is None:
            return None
        decisive = found.evidence
        code, place = traced.steps[-1][:2] if traced.steps else (decisive.code, decisive.place)
        return cls(found.kind, found.strength, f"`{code}`", place,
                   (f"the data is {found.kind}: {decisive.sentence()}", *traced.sentences()))


def _undecided(traced: Traced) -> str:
    """Roles that do not show the layout: the code that gave them, and where."""
    known = [axis for axis in traced.shape if axis.known]
    if not known:
        return "the data's axes are not known"
    code, where = traced.steps[-1][:2] if traced.steps else (known[0].evidence.code, known[0].evidence.place)
    roles = list(dict.fromkeys(axis.role.value for axis in known))
    if Role.BATCH.value in roles:
        return f"`{code}` ({where}) does not show where the batch is"
    return f"`{code}` ({where}) shows the {' and '.join(roles)} ax{'es' if len(known) > 1 else 'is'}, not the batch"


def _both(other: _Seen | None) -> list[str]:
    """Calls in both layouts: either setting corrupts one of them, so a fix would only move the error (and the
    next round would move it back)."""
    if other is None:
        return []
    return [f"another call gives it {other.kind} data ({other.code}, {other.place}): no fix, either setting "
            f"corrupts one of them"]


def _strongest(seen: list[_Seen]) -> _Seen | None:
    return max(seen, key=lambda s: s.strength) if seen else None


class BatchFirstDefault(Rule):
    """
    ## What it does
    Flags `nn.MultiheadAttention`, `nn.TransformerEncoderLayer`, `nn.TransformerDecoderLayer` and
    `nn.Transformer` (and the quantizable MultiheadAttention, and `super().__init__(...)` in subclasses of these)
    built without `batch_first`, or with a `batch_first` name that resolves to `False`, for example a parameter
    whose default is `False`. A literal `batch_first=False` states the layout and is not flagged. When the
    file's instantiations pass the parameter different values, the one the data contradicts is reported.

    ## Why is this bad?
    These modules default to `batch_first=False` and read every 3-D tensor as `(L, N, E)`. Every 3-D tensor is a
    valid `(L, N, E)` tensor, so batch-first `(N, L, E)` data never raises: attention runs across the batch axis
    and mixes samples. In a torch 2.13 experiment with N=4, L=10, E=64, 8 heads, changing only sample 1 moved
    sample 0's output by 0.466 (0.0 with `batch_first=True`); `TransformerEncoderLayer` behaves the same (0.364)
    (docs/torch-facts.md#batch-first). The telltale sign is attention weights of shape `(L, N, N)`.

    ## Known problems
    The layout is followed through the run's files. Data that comes from outside them (another installed
    package, a callback registered at run time) has unknown axes, so such a site stays a warning. A project
    class mhalint cannot read is assumed to pass its input on unchanged, and then the finding is at most a
    warning. A module nothing in the project runs (stored and only inspected, or in a class whose every instance
    the project builds is) mixes no samples: it is an info, and a batch-first bug in such a class is a warning
    that says no run reaches it. A class the project never builds is not taken as unused: a library or a trainer
    may build it.

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
    batch-first data (`batch_first=False` for the reverse bug). None where other calls give the module the other
    layout (either setting corrupts one of them) or where the constructor's class is one of several
    (`cls(...)` after `cls = A if c else nn.MultiheadAttention`), nor for a bug no run of the project reaches. It
    changes behaviour (that is the point), and attention across the batch is occasionally deliberate, so `--fix`
    applies it only with `--unsafe-fixes`.
    Warnings and infos get no fix.

    ## References
    - torch 2.13 `nn/modules/activation.py:1172` (`batch_first=False`), `transformer.py:112, 749, 1034`
    - docs/torch-facts.md#batch-first
    """

    code = "MHA001"
    name = "batch-first-default"
    summary = "MultiheadAttention/Transformer built without batch_first=True reads inputs as (L, N, E)"
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
            import torch
            layer = torch.nn.TransformerEncoderLayer(64, 8, 256, 0.1, 'relu', 1e-5, True)
            """,
        ),
        Valid(
            """
            from torch import nn
            class Block(nn.Module):
                def __init__(self, batch_first=True):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8, batch_first=batch_first)
            """,
        ),
        Valid(
            """
            class MultiheadAttention:
                def __init__(self, d, h): ...
            attn = MultiheadAttention(64, 8)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)  # noqa
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8, batch_first=False)
            """,
        ),
        Valid(
            """
            import torch.nn as nn
            def make(**kw):
                return nn.MultiheadAttention(64, 8, **kw)
            """,
        ),
    )
    invalid = (
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)
            """,
            line=2,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention is built without batch_first: it reads (L, N, E), and `attn` is never called in "
                "this file"
            ),
        ),
        Invalid(
            """
            import torch
            layer = torch.nn.modules.transformer.TransformerEncoderLayer(
                d_model=64,
                nhead=8,
            )
            """,
            line=2,
            severity=Severity.WARNING,
            headline=(
                "nn.TransformerEncoderLayer is built without batch_first: it reads (L, N, E), and `layer` is never "
                "called in this file"
            ),
        ),
        Invalid(
            """
            from torch.nn.modules.activation import MultiheadAttention
            attn = MultiheadAttention(64, 8)
            """,
            line=2,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention is built without batch_first: it reads (L, N, E), and `attn` is never called in "
                "this file"
            ),
        ),
        Invalid(
            """
            from torch import nn
            class Block(nn.Module):
                def __init__(self, batch_first=False):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8, batch_first=batch_first)
            """,
            line=5,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention gets batch_first=batch_first (`batch_first` defaults to False in `__init__()` "
                "at line 3): it reads (L, N, E), and `self.attn` is never ..."
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            BATCH_FIRST = False
            t = nn.Transformer(batch_first=BATCH_FIRST)
            """,
            line=3,
            severity=Severity.WARNING,
            headline=(
                "nn.Transformer gets batch_first=BATCH_FIRST (`BATCH_FIRST` = False at line 2): it reads (L, N, E), "
                "and `t` is never called in this file"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            class Attn(nn.MultiheadAttention):
                def __init__(self):
                    super().__init__(64, 8)
            """,
            line=4,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention is built without batch_first: it reads (L, N, E), and no call of it is found in "
                "this file"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            attn = nn.MultiheadAttention(64, 8)  # noqa: MHA004
            """,
            line=2,
            severity=Severity.WARNING,
            headline=(
                "nn.MultiheadAttention is built without batch_first: it reads (L, N, E), and `attn` is never called in "
                "this file"
            ),
        ),
        Invalid(
            """
            import torch.nn as nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8)
                def forward(self, x):
                    B, T, C = x.shape
                    return self.attn(x, x, x)[0]
            """,
            line=5,
            severity=Severity.ERROR,
            headline=(
                "nn.MultiheadAttention gets batch-first data (`B, T, C = x.shape`, line 7) but batch_first is False"
            ),
            fixed="""
            import torch.nn as nn
            class Encoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
                def forward(self, x):
                    B, T, C = x.shape
                    return self.attn(x, x, x)[0]
            """,
        ),
    )
    example_inputs = "import torch\nx = torch.randn(2, 5, 64)\n"  # batch-first, as the examples' data

    def __init__(self, context, emit):
        super().__init__(context, emit)
        self.shapes = ShapeReader(context)

    def visit_Call(self, node: cst.Call) -> None:
        for built in constructions(self.context, node, self.scope):
            if built.api in _MODULES:
                self._check(node, built)

    def _check(self, node: cst.Call, built) -> None:
        settings = self._settings(built)
        if not settings:
            return
        uses = module_calls(self.context, built)
        found = [_Seen.of(self._query_shape(use, built.api)) for use in uses]
        batch = _strongest([seen for seen in found if seen is not None and seen.kind == BATCH_FIRST])
        seq = _strongest([seen for seen in found if seen is not None and seen.kind == SEQ_FIRST])
        api = torchapi.short_name(built.api)
        if len(settings) > 1:  # instantiations disagree: the one whose setting contradicts the data corrupts it
            for setting in settings:
                if setting.batch_first and seq is not None:
                    self._report_layout(node, built, uses, seq, setting, api, "False", fixable=False)
                elif not setting.batch_first and batch is not None:
                    self._report_layout(node, built, uses, batch, setting, api, "True", fixable=False)
            return
        setting = settings[0]
        if setting.batch_first:
            if seq is not None:  # any sequence-first call is corrupted, whatever the other calls pass
                self._report_layout(node, built, uses, seq, setting, api, "False", against=batch)
            return
        if batch is not None:
            self._report_layout(node, built, uses, batch, setting, api, "True", against=seq)
        elif setting.stated:
            return
        elif seq is not None:
            self.report(node, IMPLICIT_SEQUENCE_FIRST, severity=Severity.INFO,
                        evidence=[*setting.evidence, *seq.evidence],
                        arguments=self._arguments(built, batch_first=False, layout=SEQ_FIRST),
                        api=api, data=seq.code, place=seq.place, built=setting.built)
        else:
            unpaired = why_uncalled(self.context, built.call) if not uses and not built.via_super else None
            latent = unreached(self.context, built.scope, [use.scope for use in uses]) \
                if uses or built.via_super else None  # a subclass: where its instances go
            if unpaired is not None and unpaired.never_run or latent is not None:  # it cannot mix samples
                self.report(node, NEVER_RUN, severity=Severity.INFO,
                            evidence=[*setting.evidence, (latent or unpaired).sentence],
                            arguments=self._arguments(built, batch_first=False), api=api, built=setting.built,
                            missing=f"no run of the project reaches it ({latent.phrase})" if latent
                            else unpaired.phrase)
                return
            room = HEADLINE_LIMIT - len(NO_LAYOUT_EVIDENCE.headline.format(api=api, built=setting.built, missing=""))
            missing, why = self._missing(uses, built, room, unpaired)
            self.report(node, NO_LAYOUT_EVIDENCE, severity=Severity.WARNING, evidence=[*setting.evidence, *why],
                        arguments=self._arguments(built, batch_first=False), api=api, built=setting.built,
                        missing=missing)

    def _missing(self, uses: list[ModuleCall], built, room: int, unpaired) -> tuple[str, list[str]]:
        """What keeps the layout unknown, for the headline, and each place the traces of the calls stopped; with no
        call, where the module goes (`unpaired`: never called, handed to code not followed)."""
        api = built.api
        if not uses:
            if unpaired is None:
                return "no call of it is found in this file", []
            return shorten(unpaired.phrase, room), [unpaired.sentence]
        phrases, sentences = [], []
        for use in uses:
            traced = self._query_shape(use, api)
            if use.query is None:
                phrase = f"its call at line {self.context.line(use.call)} passes no data mhalint can read"
                phrases.append(phrase)
                sentences.append(phrase)
            elif traced is not None:
                phrase = _undecided(traced)
                phrases.append(phrase)
                sentences.append(phrase)
            stops = self._entering(use, api)[1] if traced is None else ()
            for stop in sorted(stops, key=lambda stop: PRIORITY.index(stop.kind)):
                phrases.append(stop.phrase(room))
                sentences.append(stop.sentence)
        if not phrases:
            return "the data's axes are not known", []
        return phrases[0], list(dict.fromkeys(sentences))[:4]

    def _query_shape(self, use: ModuleCall, api: str) -> Traced | None:
        """The roles of what a call gives the module, or, called directly, what the uses of its output show (it has
        the query's axes); through a wrapper mhalint cannot see into, they rest on the assumption that it passes its
        input on unchanged, and from a call that may run another module, on the assumption that it runs this one
        (at most a warning)."""
        traced = self._entering(use, api)[0]
        if traced is not None and use.assumed:
            traced = replace(traced, shape=weakened(traced.shape, f"assuming `{use.assumed}` passes it on unchanged"))
        if traced is not None and use.may:
            traced = replace(traced, shape=weakened(traced.shape, use.may))
        return traced

    def _entering(self, use: ModuleCall, api: str):
        """The query's roles and where their trace stopped; the output of a module called directly has the query's
        axes (element 0 of MultiheadAttention's tuple)."""
        return self.shapes.entering(use.query, use.call, use.scope, use.direct and use.query is not None,
                                    0 if api == torchapi.MHA else None)

    def _report_layout(self, node, built, uses: list[ModuleCall], seen: _Seen, setting: _Setting, api: str,
                       fixed: str, fixable: bool = True, against: _Seen | None = None) -> None:
        """Data in the layout the setting does not read (`fixed` is the batch_first that would read it): an error
        with the unsafe fix where the layout is established; a warning, without a fix, where only a size's name
        or an assumption suggests it. Where instantiations disagree, the fix belongs at the instantiation, not
        here: none is offered; nor where calls give both layouts (`against`), or the constructor's class is one of
        several: the fixed text would be flagged again. Where no run of the project reaches the calls (every
        instance of their class goes where nothing runs it), the bug is latent: a warning that says so."""
        established = seen.strength is Strength.ESTABLISHED
        latent = unreached(self.context, built.scope, [use.scope for use in uses]) if established else None
        if latent is not None:
            self.report(node, UNREACHED, severity=Severity.WARNING,
                        evidence=[*setting.evidence, *seen.evidence, latent.sentence, *_both(against)],
                        arguments=self._arguments(built, batch_first=fixed == "False", layout=seen.kind),
                        api=api, kind=seen.kind, data=seen.code, place=seen.place, setting=setting.headline,
                        missing=latent.phrase, fixed=fixed)
            return
        self.report(node, BATCH_FIRST_DATA if fixed == "True" else SEQUENCE_FIRST_DATA,
                    severity=Severity.ERROR if established else Severity.WARNING,
                    evidence=[*setting.evidence, *seen.evidence, *self._chosen(built), *_both(against)],
                    fix=self._fix(built, fixed) if established and fixable and built.certain and against is None
                    else None,
                    arguments=self._arguments(built, batch_first=fixed == "False", layout=seen.kind),
                    api=api, data=seen.code, place=seen.place, setting=setting.headline)

    def _chosen(self, built) -> list[str]:
        """Where the constructor's class is one of several, the fix would change the others' calls: none."""
        if built.certain:
            return []
        return [f"`{self.context.code(built.call.func)}` at line {self.context.line(built.call)} may also build "
                f"another class: no fix is offered there"]

    def _arguments(self, built, **known: object) -> dict[str, object]:
        """What the probe rebuilds the module from: the constructor's values, and the layout when the code shows it."""
        return {**constructor_values(self.context, built), **known}

    def _settings(self, built) -> list[_Setting]:
        """How batch_first is set: one setting, or one per value when the instantiations pass different values
        to the parameter it comes from; none when it cannot be known."""
        setting = self._setting(built)
        if setting is not None:
            return [setting]
        expr = built.arguments.get("batch_first")
        line = self.context.line(built.call)
        if expr is None:
            return self._forwarded(built, line)
        written = self.context.code(expr)
        return [_Setting(reach.value.value, False, f"batch_first={written} is {reach.value.value} in {reach.where}",
                         f"gets batch_first={written} ({reach.value.value} in {reach.where})",
                         [f"batch_first={written} at line {line} takes several values, {reach.value.value} in "
                          f"{reach.where}", *reach.value.trail])
                for reach in alternatives(self.context, expr, built.scope) if isinstance(reach.value.value, bool)]

    def _forwarded(self, built, line: int) -> list[_Setting]:
        """batch_first through the constructor's `**kw`: what the callers of the function that forwards it pass."""
        default = Value(False, (f"the constructor at line {line} has no batch_first argument (default False)",))
        found = forwarded(self.context, built.call, built.scope, "batch_first", default)
        if not found or not all(isinstance(reach.value.value, bool) for reach in found):
            return []
        if len(found) == 1:
            value = found[0].value
            return [_Setting(value.value, False, f"batch_first is {value.value} (passed through **)",
                             f"gets batch_first={value.value} through **", [*value.trail])]
        return [_Setting(reach.value.value, False, f"batch_first is {reach.value.value} in {reach.where}",
                         f"gets batch_first={reach.value.value} in {reach.where}",
                         [f"batch_first at line {line} comes through **, {reach.value.value} in {reach.where}",
                          *reach.value.trail]) for reach in found]

    def _setting(self, built) -> _Setting | None:
        """How batch_first is set, or None when it cannot be known."""
        arguments = built.arguments
        expr = arguments.get("batch_first")
        line = self.context.line(built.call)
        if expr is None:
            if arguments.opaque:
                return None  # **kwargs may carry batch_first
            through = f" (nor the partial at line {self.context.line(built.partial)})" if built.partial else ""
            return _Setting(False, False, "batch_first is False", "is built without batch_first",
                            [f"the constructor at line {line}{through} has no batch_first argument (default False)"])
        written = self.context.code(expr)
        if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
            return _Setting(expr.value == "True", True, f"batch_first={written}",
                            f"is built with batch_first={written}", [f"batch_first={written} at line {line}"])
        value = resolve(self.context, expr, built.scope)
        if value is None or not isinstance(value.value, bool):
            return None
        source = f" ({value.trail[0]})" if value.trail else f", which resolves to {value.value}"
        return _Setting(value.value, False, f"batch_first={written} is {value.value}",
                        f"gets batch_first={written}{source}",
                        [f"batch_first={written} at line {line} resolves to {value.value}", *value.trail])

    def _fix(self, built, value: str):
        """Only offered with layout evidence (an error): attention across the batch can be deliberate."""
        if built.arguments.opaque and "batch_first" not in built.arguments.by_name:
            return None  # it comes through `**`: a keyword beside it would be given twice
        changed = with_argument(built.call, built.arguments.by_name.get("batch_first"), "batch_first", value)
        return self.replacement(built.call, changed, applicability=UNSAFE, title=f"pass batch_first={value}")

    @staticmethod
    def probe(arguments: dict, torch) -> tuple[str, str]:
        """Feed the module data in the layout the code gives it, change only sample 1, and see whether sample 0
        moves (docs/torch-facts.md#batch-first). Confirmed only with the site's layout (the finding's "layout");
        without it, the pitfall's layout is assumed, and a result is only reproduced, which says so."""
        from mhalint.probe import support

        batch_first = bool(arguments.get("batch_first", False))
        rebuilt = support.Rebuilt()
        layout = arguments.get("layout")
        from_site = layout in (BATCH_FIRST, SEQ_FIRST)
        if not from_site:
            layout = SEQ_FIRST if batch_first else BATCH_FIRST
            rebuilt.assume(f"{layout} data and batch_first={batch_first}")
        module, embed, heads, notes = support.build(torch, arguments, batch_first, rebuilt)
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
        sizes = support.sizes(embed, heads, notes)
        if from_site:
            fed = f"fed {layout} data to a module with batch_first={batch_first}"
        else:
            fed = f"with assumed {layout} data and batch_first={batch_first}"
        if moved > 1e-6:
            # the shape tell before the sizes: a concise report cuts the text at HEADLINE_LIMIT characters
            found = f"changing sample 1 moved sample 0's output by {moved:.3f}{tell} ({sizes})"
            return rebuilt.verdict(f"{fed}, {found}" if from_site else found)
        return NOT_CONFIRMED, (f"{fed}, sample 0's output stayed put when sample 1 changed (max change "
                               f"{moved:.1e}; {sizes})")
