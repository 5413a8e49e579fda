"""The Rule base class and plugin loading.

A rule is one class in one module: its code, name, trigger words, documentation (the class docstring, in ruff's
sections), valid and invalid examples (run as tests), and `visit_<Node>` / `leave_<Node>` methods that the engine
calls during its single traversal of each file. Built-in rules and third-party rules are found the same way:
through the `mhalint.rules` entry-point group.
"""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterable, Mapping

from mhalint.context import ModuleContext, Scope
from mhalint.finding import HEADLINE_LIMIT, Edit, Finding, Fix, Severity, shorten
from mhalint.parse.lazy import cst
from mhalint.parse.source import LINE_BREAK
from mhalint.run.entry_points import entry_points

ENTRY_POINT_GROUP = "mhalint.rules"
CODE_PATTERN = re.compile(r"^[A-Z]+[0-9]+$")
DOC_SECTIONS = ("What it does", "Why is this bad?", "Known problems", "Example", "Use instead", "Fix safety",
                "References")


def example_source(text: str) -> str:
    """An example's code as a module. Written as an indented triple-quoted block (the code starting on the line after
    the opening quotes), it is dedented and that first newline dropped; code written flat is kept as it is."""
    return textwrap.dedent(text[1:] if text.startswith("\n") else text)


@dataclass(frozen=True)
class Valid:
    """Source the rule must not flag."""

    code: str

    def __post_init__(self):
        object.__setattr__(self, "code", example_source(self.code))


@dataclass(frozen=True)
class Invalid:
    """Source the rule must flag. When given, `line`, `severity` and `headline` (all of it) or `message` (a piece of
    it) pin the first finding, and `fixed` the source that `--fix --unsafe-fixes` makes of it (Fixit's
    expected_replacement; the built-in rules pin every fix). `code` and `fixed` are read as `Valid`'s code is."""

    code: str
    line: int | None = None
    message: str | None = None
    severity: Severity | None = None
    headline: str | None = None
    fixed: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "code", example_source(self.code))
        if self.fixed is not None:
            object.__setattr__(self, "fixed", example_source(self.fixed))


@dataclass(frozen=True)
class Message:
    """One kind of finding a rule reports, as pyflakes' message classes: templates whose `{fields}` are filled from
    the keyword arguments of `Rule.report`. Rules name them at the top of their file, so every text a user can
    see from the rule is in one place.

    `headline` names the problem and the decisive evidence; filled in, it is cut to HEADLINE_LIMIT characters by
    shortening its longest fields (the code it quotes), never its fixed words. `help` says what to do, in one line.
    `explanation` is the long why: the torch behaviour, its number and the docs/torch-facts.md section."""

    headline: str
    help: str = ""
    explanation: str = ""

    def headline_for(self, fields: Mapping[str, object]) -> str:
        return fit(self.headline, fields, HEADLINE_LIMIT)

    def help_for(self, fields: Mapping[str, object]) -> str:
        return self.help.format_map(fields)

    def explanation_for(self, fields: Mapping[str, object]) -> str:
        return textwrap.dedent(self.explanation).strip().format_map(fields)


_SHORTEST_FIELD = 16  # a quoted expression cut shorter than this no longer says which one it was


def fit(template: str, fields: Mapping[str, object], limit: int) -> str:
    """`template` filled from `fields`, at most `limit` characters: the longest text fields are shortened first."""
    fields = dict(fields)
    text = template.format_map(fields)
    while len(text) > limit:
        used = [name for name, value in fields.items()
                if isinstance(value, str) and len(value) > _SHORTEST_FIELD and "{" + name in template]
        if not used:
            return shorten(text, limit)
        longest = max(used, key=lambda name: len(fields[name]))
        excess = len(text) - limit
        fields[longest] = shorten(fields[longest], max(_SHORTEST_FIELD, len(fields[longest]) - excess))
        text = template.format_map(fields)
    return text


class Rule:
    """Base class of every rule. Subclasses set the class attributes and define visitor methods."""

    code: ClassVar[str]
    name: ClassVar[str]
    summary: ClassVar[str]  # one line for `mhalint rule --all`
    # A file is parsed only if one of the enabled rules' trigger patterns (regular expressions; a plain identifier
    # such as "softmax" is one) matches within a line of its code, outside comments and strings (mhalint.run.prefilter).
    # A pattern should contain a literal word, which the prefilter finds fast. mhalint.torchapi has the ones for
    # torch's attention APIs.
    triggers: ClassVar[tuple[str, ...]] = ()
    # Whether the rule can act on a trigger that appears only as a value handed over: a call's argument, an element
    # of a list, tuple, set or dict, an operand of a comparison (`isinstance(m, nn.MultiheadAttention)`). When no
    # enabled rule can, a file whose triggers all appear that way is not parsed. Rules that resolve calls through
    # mhalint's name tables (imports, aliases, base classes, instances) cannot, and say False.
    acts_on_passed_values: ClassVar[bool] = True
    # Whether the rule acts only inside the functions its own triggers match: True for a rule about an operation
    # its trigger spells out (a `masked_fill(...)` with its fill value), False for one about calls that reach an
    # API through names bound elsewhere (`self.attn(...)`). Such a rule is handed no node of a module-level
    # function or method whose body holds none of its matches (nor of what is nested in one); module-level code and
    # class bodies it sees whole. A file that only such rules' triggers match is then parsed a function at a time:
    # the bodies they match, and those their analyses read (mhalint.parse.lazy_bodies).
    matched_functions_only: ClassVar[bool] = False
    valid: ClassVar[tuple[Valid, ...]] = ()
    invalid: ClassVar[tuple[Invalid, ...]] = ()
    # Code that defines the free names the invalid examples take, as small synthetic tensors, by parameter name:
    # tests/test_fixes_execute.py runs each example's fixes after it, calling every function and module the
    # example defines, so that every fix is seen to run and to remove what the rule reports.
    example_inputs: ClassVar[str] = ""
    # The runtime experiment: a staticmethod `probe(arguments, torch) -> (status, evidence)` run only inside
    # the probe process, from a finding's resolved arguments (never the user's code). None: no experiment.
    probe: ClassVar[Callable[[dict, object], tuple[str, str]] | None] = None
    # The runtime check: a staticmethod `guard(call) -> list[Pending]` that mhalint's runtime guard runs in the
    # user's process after each watched torch attention call. `call` is a mhalint.guard.apis.CallInfo (the API,
    # its masks and flags per attention block, the mode, the inputs, the output or the error); each
    # mhalint.guard.support.Pending is a flag and the report's message, written only when the flag is set. torch
    # is imported by then: the hook imports it (and mhalint.guard.support) inside, never at the top of the rule
    # file. None: no runtime check. A rule with a runtime check and no visitor methods is runtime-only: it needs
    # no trigger words, and the static linter never reports it.
    guard: ClassVar[Callable[[object], list] | None] = None
    # Code the runtime guard watches, run by the guard's tests: a runtime Valid must give no report of the rule's
    # code, a runtime Invalid one at its `line`, whose headline contains its `message`.
    runtime_valid: ClassVar[tuple[Valid, ...]] = ()
    runtime_invalid: ClassVar[tuple[Invalid, ...]] = ()

    def __init__(self, context: ModuleContext, emit: Callable[[Finding], None]):
        self.context = context
        self._emit = emit

    @property
    def scope(self) -> Scope:
        """The innermost function, class or module scope around the node being visited."""
        return self.context.scope

    def report(self, node: cst.CSTNode, message: Message | str, *, severity: Severity = Severity.WARNING,
               evidence: Iterable[str] = (), arguments: dict[str, object] | None = None,
               fix: Fix | None = None, help: str | None = None, explanation: str | None = None,
               **fields: object) -> None:
        """Record a finding at `node`. `message` is one of the rule's Message templates, filled from `fields`
        (a plain string is taken as the headline as it is, for plugins that build their own text). `help` and
        `explanation` override the template's; the explanation defaults to the rule's "Why is this bad?"."""
        if isinstance(message, str):
            message = Message(message.replace("{", "{{").replace("}", "}}"))
        position = self.context.position(node)
        self._emit(Finding(
            path=self.context.path, line=position.start.line, column=position.start.column + 1,
            code=self.code, name=self.name, message=message.headline_for(fields), severity=severity,
            end_line=position.end.line, end_column=position.end.column + 1,
            evidence=tuple(evidence), arguments=tuple((arguments or {}).items()), fix=fix,
            help=help if help is not None else message.help_for(fields) or (fix.title if fix else ""),
            explanation=explanation if explanation is not None else (
                message.explanation_for(fields) or self.doc_sections().get("Why is this bad?", ""))))

    def replacement(self, node: cst.CSTNode, new: cst.CSTNode, *, applicability: str, title: str) -> Fix:
        """A fix that replaces `node` with `new`, keeping the formatting of the block it sits in.

        Rendered alone, a node loses the indentation of its block on its continuation lines; when adding that
        indentation back reproduces the old node's source exactly, the new node gets the same treatment (cheap).
        Otherwise the whole module is rendered with the replacement and the edit is the span that differs."""
        module = self.context.module
        span = self.context.position(node)
        lines = self.context.source_lines()
        old_text = _slice(lines, span)
        indent = _leading_whitespace(lines[span.start.line - 1])
        if _indented(module.code_for_node(node), indent) == old_text:
            edit = _minimal_edit(old_text, _indented(module.code_for_node(new), indent),
                                 span.start.line, span.start.column + 1)
        else:
            edit = _minimal_edit(self.context.source(), module.deep_replace(node, new).code, 1, 1)
        return Fix((edit,), applicability, title)

    @classmethod
    def messages(cls) -> dict[str, Message]:
        """The Message templates named in the rule's module, by constant name (`mhalint rule CODE` lists them)."""
        module = sys.modules.get(cls.__module__)
        return {name: value for name, value in vars(module).items() if isinstance(value, Message)} if module else {}

    @classmethod
    def documentation(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """The docstring split at its `## Heading` lines, so reports can show one section at a time."""
        sections: dict[str, str] = {}
        current = None
        for line in cls.documentation().splitlines():
            if line.startswith("## "):
                current = line[3:].strip()
                sections[current] = ""
            elif current is not None:
                sections[current] += line + "\n"
        return {name: text.strip() for name, text in sections.items()}


def _slice(lines: list[str], span) -> str:
    """The source text of a span (lines keep their line endings)."""
    if span.start.line == span.end.line:
        return lines[span.start.line - 1][span.start.column:span.end.column]
    middle = lines[span.start.line:span.end.line - 1]
    return "".join([lines[span.start.line - 1][span.start.column:], *middle,
                    lines[span.end.line - 1][:span.end.column]])


def _leading_whitespace(line: str) -> str:
    return line[:len(line) - len(line.lstrip(" \t"))]


def _indented(code: str, indent: str) -> str:
    """Continuation lines of a node rendered alone, with the block's indentation put back."""
    first, *rest = code.splitlines(keepends=True) or [""]
    return first + "".join(indent + line if line.strip() else line for line in rest)


def _minimal_edit(before: str, after: str, line: int, column: int) -> Edit:
    """The edit that turns `before` (which starts at line, column) into `after`, trimmed to where they differ."""
    start = 0
    while start < min(len(before), len(after)) and before[start] == after[start]:
        start += 1
    end_before, end_after = len(before), len(after)
    while end_before > start and end_after > start and before[end_before - 1] == after[end_after - 1]:
        end_before, end_after = end_before - 1, end_after - 1
    start_line, start_column = _advance(before[:start], line, column)
    end_line, end_column = _advance(before[:end_before], line, column)
    return Edit(start_line, start_column, end_line, end_column, after[start:end_after])


def _advance(text: str, line: int, column: int) -> tuple[int, int]:
    """The position after `text` when it starts at line, column (lines end at \n, \r\n or \r)."""
    breaks = list(LINE_BREAK.finditer(text))
    if not breaks:
        return line, column + len(text)
    return line + len(breaks), len(text) - breaks[-1].end() + 1


class PluginError(Exception):
    """A registered rule that cannot be loaded or is malformed; the message names the entry point."""


def load_rules() -> dict[str, type[Rule]]:
    """Every rule registered in the `mhalint.rules` entry-point group, by code."""
    rules: dict[str, type[Rule]] = {}
    for entry_point in entry_points(ENTRY_POINT_GROUP):
        try:
            rule = entry_point.load()
        except Exception as error:  # a broken plugin must be reported, not crash the run
            raise PluginError(f"rule plugin {entry_point.name} ({entry_point.value}) failed to load: {error}")
        _validate(entry_point.name, entry_point.value, rule)
        if rule.code in rules and rules[rule.code] is not rule:
            raise PluginError(f"rule code {rule.code} is registered twice: {entry_point.value} and "
                              f"{rules[rule.code].__module__}.{rules[rule.code].__qualname__}")
        rules[rule.code] = rule
    return dict(sorted(rules.items()))


def runtime_only(rule: type[Rule]) -> bool:
    """A rule with a runtime check and no visitor: only the guard reports it."""
    return getattr(rule, "guard", None) is not None and not any(
        attribute.startswith(("visit_", "leave_")) for attribute in dir(rule))


def _validate(name: str, value: str, rule: object) -> None:
    if not (isinstance(rule, type) and issubclass(rule, Rule)):
        raise PluginError(f"rule plugin {name} ({value}) is not a subclass of mhalint.rule.Rule")
    for attribute in ("code", "name", "summary") + (() if runtime_only(rule) else ("triggers",)):
        if not getattr(rule, attribute, None):
            raise PluginError(f"rule plugin {name} ({value}) does not set `{attribute}`")
    for pattern in rule.triggers:
        try:
            re.compile(pattern.encode())
        except (re.error, AttributeError) as error:
            raise PluginError(f"rule plugin {name} ({value}) has a trigger that is not a regular expression: "
                              f"{pattern!r} ({error})")
    if not CODE_PATTERN.match(rule.code):
        raise PluginError(f"rule plugin {name} ({value}) has code {rule.code!r}; codes look like ABC123")
    if rule.code != name:
        raise PluginError(f"rule plugin {name} ({value}) is registered under {name} but its code is {rule.code}")
