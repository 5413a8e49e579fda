"""Function bodies that libcst parses only when something reads them (issue 37's demand-driven parse).

libcst's parse is most of a cold run, and an analysis that reads another file of the project (a class's callers,
a config's fields) needs few of its functions. CPython's tree says where each body lies, so the module is parsed
by libcst as a *shell*: each long body of a module function or of a method of a module-level class is replaced by
blank lines and a `...` on its last line (every other line keeps its number and every character its column).
Such a function node's `body` is parsed from the real text the first time it is read, by anything: an analysis,
a walk, code generation for a position. A reader therefore sees what a whole-file parse gives, by construction;
what the shell saves is the bodies nobody reads.

A body is parsed inside a `class _:` header when it is a method (its lines keep their indentation, so strings and
continuation lines keep their text), after a first block indented as the module's first (libcst infers a
module's default indentation from it), followed by the comment lines after it and a stand-in for the next
statement, so that those lines go to the same blocks as in a whole parse. Bodies that change module-wide facts
the context records as it builds its scopes (a nested class, an import, a `global`) are parsed with the shell.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterator

from mhalint.parse.lazy import cst
from mhalint.parse.trusted_parse import BodyParseError, unvalidated_nodes

# A body shorter than this is parsed with the shell: parsing it alone costs more than it saves.
_MIN_LINES = 4
# What a body may hold that the context must see when it builds the module's scopes (not only the function's).
_MODULE_WIDE = re.compile(r"^[ \t]*(?:class|import|from|global|nonlocal)\b", re.M)
_WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def parse_whole_from_now() -> None:
    """After a BodyParseError: every later parse is whole, so that a check run again meets the file's own parse
    error where a whole parse meets it."""
    global _WHOLE_ONLY
    _WHOLE_ONLY = True


_WHOLE_ONLY = False


@dataclass
class Pending:
    """A function whose body has not been parsed yet."""

    # its text from its first line (decorators included) to the end of its body, then the comment and blank
    # lines after it and a `pass` where the next statement starts: libcst gives those lines to the innermost
    # block whose indentation they share, which only the next statement's indentation decides
    source: str
    method: bool  # parsed under a `class _:` header
    shell: Shell = field(repr=False)

    def parse(self) -> cst.BaseSuite:
        module = self.shell.module
        newline = module.default_newline
        # libcst takes a module's default indentation from its first block: a first block indented as the
        # module's makes the body's blocks come out as they do in a whole parse
        text = f"if 1:{newline}{module.default_indent}pass{newline}"
        text += f"class _:{newline}{self.source}" if self.method else self.source
        try:
            with unvalidated_nodes():
                parsed = cst.parse_module(text)
        except (cst.ParserSyntaxError, RecursionError, MemoryError) as error:  # a whole parse fails on these too
            raise BodyParseError(str(error)) from error
        statement = parsed.body[1]
        function = statement.body.body[0] if self.method else statement
        return function.body


@dataclass
class Shell:
    """A module parsed with some bodies left out, and who wants to hear when one is parsed."""

    module: cst.Module
    pending: dict[cst.FunctionDef, str]  # function -> the text of its body, for keyed questions (`holding`)
    listeners: list[Callable[[cst.FunctionDef], None]] = field(default_factory=list)
    _words: dict[str, list[cst.FunctionDef]] | None = field(default=None, repr=False)

    def holding(self, word: str) -> list[cst.FunctionDef]:
        """The functions whose body is still pending and has `word` in it as an identifier (in code, a string
        or a comment): the only bodies that may call, bind or read a name `word`."""
        if self._words is None:
            self._words = {}
            for function, text in self.pending.items():
                for each in set(_WORD.findall(text)):
                    self._words.setdefault(each, []).append(function)
        return [function for function in self._words.get(word, ()) if type(function) is LazyFunctionDef]

    def unparsed(self) -> list[cst.FunctionDef]:
        return [function for function in self.pending if type(function) is LazyFunctionDef]

    def parse_all(self) -> None:
        for function in self.unparsed():
            function.body  # noqa: B018 -- reading it parses it


class LazyFunctionDef(cst.FunctionDef):
    """A FunctionDef whose body is parsed on first read; then it becomes a plain FunctionDef again."""

    __slots__ = ()
    body_pending = True  # what mhalint.parse.walk looks for (it has no libcst type to compare with)

    @property
    def body(self) -> cst.BaseSuite:
        return _materialise(self)


# the slot itself, beneath the frozen dataclass's __setattr__: it holds the Pending until the body is parsed, so
# that a tree dropped with bodies unread takes them along
_BODY = cst.FunctionDef.__dict__["body"]


def _materialise(function: LazyFunctionDef) -> cst.BaseSuite:
    pending = _BODY.__get__(function)
    block = pending.parse()
    _BODY.__set__(function, block)
    object.__setattr__(function, "__class__", cst.FunctionDef)
    for listener in list(pending.shell.listeners):
        listener(function)
    return block


@dataclass
class Bodies:
    """Where a module's functions are, read off CPython's tree: the module-level functions and the methods of
    module-level classes in source order (`names`, `starts`: the line of each one's first decorator or `def`), and
    for those whose body is long enough to leave out, (first line, last line, indentation) of the body."""

    names: list[str]
    starts: list[int]
    regions: dict[int, tuple[int, int, str]]
    methods: list[bool]

    @classmethod
    def of(cls, text: str, syntax: ast.Module) -> Bodies:
        lines = text.splitlines(keepends=True)
        definitions = list(_definitions(syntax))
        regions = {index: region for index, (definition, _) in enumerate(definitions)
                   for region in [_region(definition, lines)] if region is not None}
        return cls([definition.name for definition, _ in definitions],
                   [definition.decorator_list[0].lineno if definition.decorator_list else definition.lineno
                    for definition, _ in definitions], regions, [method for _, method in definitions])

    def functions(self, module: cst.Module) -> list[cst.FunctionDef] | None:
        """The same functions in libcst's tree of the module (whole or a shell), or None when the two parsers
        disagree about where the functions are."""
        functions = list(_functions(module))
        if len(functions) != len(self.names) or any(f.name.value != name for f, name in zip(functions, self.names)):
            return None
        return functions

    def holding(self, lines: set[int]) -> set[int]:
        """The indexes of the regions (bodies that may be left out) that hold one of `lines`."""
        return {index for index, (first, last, _) in self.regions.items()
                if any(first <= line <= last for line in lines)}


def parse(text: str, syntax: ast.Module | None, whole: bool = False, bodies: Bodies | None = None) -> Shell:
    """The libcst module of `text` (whose CPython tree is `syntax`; or whose functions are `bodies`, when the caller
    has read them) with its long function bodies pending; with none pending when asked for the `whole` of it,
    under MHALINT_FULL_PARSE=1 (to compare the two), or once a body has failed to parse."""
    if whole or os.environ.get("MHALINT_FULL_PARSE") == "1" or _WHOLE_ONLY:
        return Shell(_whole(text), {})
    lines = text.splitlines(keepends=True)
    bodies = bodies if bodies is not None else Bodies.of(text, syntax)
    shell_lines = list(lines)
    for first, last, indent in bodies.regions.values():
        for index in range(first - 1, last - 1):
            shell_lines[index] = _ending(lines[index])
        shell_lines[last - 1] = indent + "..." + _ending(lines[last - 1])
    with unvalidated_nodes():
        module = cst.parse_module("".join(shell_lines) if bodies.regions else text)
    shell = Shell(module, {})
    functions = bodies.functions(module)
    if functions is None:
        return Shell(_whole(text), {})
    for index, (first, last, _) in bodies.regions.items():
        function = functions[index]
        source = "".join(lines[bodies.starts[index] - 1:last]) + _after(lines, last)
        _BODY.__set__(function, Pending(source, bodies.methods[index], shell))
        shell.pending[function] = "".join(lines[first - 1:last])
        object.__setattr__(function, "__class__", LazyFunctionDef)
    return shell


def _whole(text: str) -> cst.Module:
    with unvalidated_nodes():
        return cst.parse_module(text)


def _after(lines: list[str], last: int) -> str:
    """The comment and blank lines after line `last`, and `pass` indented as the next statement is."""
    index = last
    while index < len(lines) and (not lines[index].strip() or lines[index].lstrip().startswith("#")):
        index += 1
    if index == len(lines):
        return "".join(lines[last:])
    line = lines[index]
    return "".join(lines[last:index]) + line[:len(line) - len(line.lstrip(" \t"))] + "pass" + _ending(line)


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


def _region(function: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> tuple[int, int, str] | None:
    """(first line of its body, last line, the body's indentation) when the body is to be left out."""
    first_statement = function.body[0]
    decorators = getattr(first_statement, "decorator_list", None)
    first = decorators[0].lineno if decorators else first_statement.lineno
    column = decorators[0].col_offset - 1 if decorators else first_statement.col_offset
    last = function.body[-1].end_lineno
    if first <= function.lineno or last - first + 1 < _MIN_LINES:
        return None  # `def f(): return x`, or too short to be worth it
    line = lines[first - 1]
    indent = line[:len(line) - len(line.lstrip(" \t"))]
    if not indent or len(indent.encode()) != column:  # the body does not start its line (`):  x = 1`)
        return None
    if _MODULE_WIDE.search("".join(lines[first - 1:last])):
        return None
    return first, last, indent


def _definitions(syntax: ast.Module) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, bool]]:
    """(function, whether it is a method) for module-level functions and the methods of module-level classes,
    in source order."""
    for statement in syntax.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            yield statement, False
        elif isinstance(statement, ast.ClassDef):
            for inner in statement.body:
                if isinstance(inner, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield inner, True


def _functions(module: cst.Module) -> Iterator[cst.FunctionDef]:
    """The same functions in the shell, in the same order."""
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            yield statement
        elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            for inner in statement.body.body:
                if isinstance(inner, cst.FunctionDef):
                    yield inner
