"""Source positions of libcst nodes, several times cheaper than libcst's PositionProvider.

PositionProvider tracks line and column on every token (a regex split each time) and builds two CodePosition
objects per node; it cost 8x a plain code generation here. This provider runs the same code generation but only
counts characters, keeps (start, end) offsets per node, and turns an offset into a line and column only when a
position is asked for. The semantics are PositionProvider's: syntactic positions, whitespace excluded.
"""

from __future__ import annotations

import ast
import bisect
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

import libcst as cst
from libcst._nodes.internal import CodegenState

from mhalint.parse.source import line_starts


@dataclass(frozen=True)
class Point:
    line: int  # 1-based
    column: int  # 0-based, as libcst's CodePosition


@dataclass(frozen=True)
class Span:
    start: Point
    end: Point


@dataclass
class _OffsetState(CodegenState):
    offset: int = 0
    spans: dict = field(default_factory=dict)  # syntactic: PositionProvider's
    extents: dict = field(default_factory=dict)  # all the node generates (its code_for_node, whitespace too)
    _stack: list = field(default_factory=list)

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        """Kept: positions count the final newline, as PositionProvider's line counting does."""

    stop_at: object = None  # a node whose code is not wanted: generation ends where it would begin

    def before_codegen(self, node: cst.CSTNode) -> None:
        if node is self.stop_at:
            raise _HeaderDone
        self._stack.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        self.extents[node] = (start, self.offset)
        if node not in self.spans:  # a syntactic position recorded inside wins, as in PositionProvider
            self.spans[node] = (start, self.offset)

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        start = self.offset
        yield  # a generation that stops inside records nothing for the node
        end = self.offset
        if start_node is not None:
            start = self.spans[start_node][0]
        if end_node is not None:
            end = self.spans[end_node][1]
        self.spans[node] = (start, end)


class _HeaderDone(Exception):
    """A header's code is generated: the body that follows is not wanted."""


@dataclass(frozen=True)
class Generated:
    """One top-level statement's generated code, with its nodes' spans and extents as offsets from its start: what
    a later version of the same text can use again when it holds the same statement node (the language server
    reuses the statements an edit did not touch)."""

    text: str
    spans: dict
    extents: dict


def generate(statement: cst.CSTNode, module: cst.Module, indents: tuple[str, ...] = (), *,
             header: bool = False) -> Generated:
    """A statement's code, as it generates inside blocks indented by `indents` (none: at the top level). With
    `header`, a class's or function's code up to its body (decorators, name, bases or parameters, the colon),
    with the spans of the nodes in it: a parameter's line does not need the function's body generated."""
    state = _state(module)
    state.indent_tokens.extend(indents)
    if header:
        state.stop_at = statement.body
    try:
        statement._codegen(state)
    except _HeaderDone:
        pass
    return Generated("".join(state.tokens), state.spans, state.extents)


def _state(module: cst.Module) -> _OffsetState:
    """A code generation that counts characters, under the module's indentation and line ending."""
    return _OffsetState(default_indent=module.default_indent, default_newline=module.default_newline)


_MISMATCH = object()  # a statement whose generated code is not the source at its offset
_DEFINITION = re.compile(r"[ \t\f]*(?:async[ \t\f]+def|def|class)\b")


class Positions:
    """node -> Span, and node -> the source text it was parsed from.

    Generating a whole module's code to count characters cost more than parsing it, and most files need a few
    positions. So when the line each top-level statement starts on is known (`statement_starts`, read off
    CPython's tree of the same source), only the statement holding the node asked for is generated, starting at
    that line's offset, and the text it generates is compared with the source there. Inside classes and functions
    the same holds one level down at a time (`body_lines`): a position in a method generates that method, not its
    class, which in a model file is most of the module. A statement whose text does not match gives way to the
    one around it; without starts, or if no statement matches, the whole module is generated once. `generated`
    holds statements generated for an earlier version of the text (and receives those generated now): one found
    at its offset unchanged is not generated again.
    """

    def __init__(self, module: cst.Module, code: str, statement_starts: list[int] | None = None,
                 parent: Callable[[cst.CSTNode], cst.CSTNode | None] | None = None,
                 generated: dict[cst.CSTNode, Generated] | None = None,
                 body_lines: dict[int, list[int]] | None = None):
        self._module = module
        self._code = code
        self._line_starts = line_starts(code)
        self._spans: dict[cst.CSTNode, tuple[int, int]] = {}  # of the whole module, once generated
        self._extents: dict[cst.CSTNode, tuple[int, int]] = {}
        self._whole = False
        self._parent = parent
        self._starts: dict[cst.CSTNode, int] = {}  # statement -> the line its code starts on
        if statement_starts is not None and parent is not None:
            self._starts = dict(zip(module.body, statement_starts))
        self._body_lines = body_lines or {}
        self._blocks: dict[cst.CSTNode, dict[cst.CSTNode, int] | None] = {}  # a block's statements' starts
        self._indents: dict[cst.CSTNode, tuple[str, ...]] = {}  # of the blocks a nested statement is in
        self._known: dict[cst.CSTNode, Span] = {}
        self._placed: dict[cst.CSTNode, object] = {}  # statement -> (its offset, Generated), or _MISMATCH
        self._generated = generated if generated is not None else {}

    def __getitem__(self, node: cst.CSTNode) -> Span:
        span = self._known.get(node)
        if span is None:
            found = self._find(node, "spans")
            if found is None:
                self._generate_module()
                found = self._spans[node]
            span = self._known[node] = Span(self._point(found[0]), self._point(found[1]))
        return span

    def definition_line(self, node: cst.ClassDef | cst.FunctionDef) -> int | None:
        """The line of an undecorated class's or function's `class`/`def` keyword (its position's start), read off
        the statement starts without generating its code; None when they do not show it."""
        if node.decorators:
            return None
        next(self._around(node), None)  # learns the starts of the blocks around it
        if node not in self._starts:
            return None
        line = self._starts[node] + len(node.leading_lines)
        return line if _DEFINITION.match(self._code, self._line_starts[line - 1]) else None

    def text(self, node: cst.CSTNode) -> str | None:
        """The source text of a node of the module (its `code_for_node`, as the source writes it), or None when it
        cannot be found without generating the whole module (a node from elsewhere, or no statement starts)."""
        found = self._find(node, "extents")
        return self._code[found[0]:found[1]] if found is not None else None

    def _find(self, node: cst.CSTNode, kind: str) -> tuple[int, int] | None:
        """The node's (start, end) offsets, from the generated code of the innermost statement around it whose
        code is the source at its offset (generated now if need be)."""
        if self._whole:
            return (self._spans if kind == "spans" else self._extents).get(node)
        for statement, header in self._around(node):
            key = (statement, "header") if header else statement
            placed = self._placed.get(key)
            if placed is None:
                placed = self._placed[key] = self._generate_statement(statement, header)
            if placed is _MISMATCH:
                continue
            offset, generated = placed
            found = getattr(generated, kind).get(node)
            if found is not None:
                return found[0] + offset, found[1] + offset
        return None

    def _around(self, node: cst.CSTNode) -> Iterator[tuple[cst.CSTNode, bool]]:
        """The statements holding `node` whose start line is known, innermost first (down from the top-level
        statement through the indented bodies of classes and functions), each with whether its header is enough:
        `node` is in a class's or function's header, not its body. The way up stops at the nearest statement
        already placed, so a second node in the same method costs a few steps."""
        if not self._starts:
            return
        chain = [node]
        while chain[-1] not in self._starts:
            parent = self._parent(chain[-1])
            if parent is None or parent is self._module:
                return
            chain.append(parent)
        chain.reverse()  # a statement with a known start, ..., node
        found = [chain[0]]
        depth = 0  # chain[depth] is the innermost statement found
        for statement, block, inner in zip(chain[0::2], chain[1::2], chain[2::2]):
            if not isinstance(statement, (cst.ClassDef, cst.FunctionDef)) or block is not statement.body or \
                    not isinstance(block, cst.IndentedBlock):  # `def f(): return 1`: the def is the statement
                break
            starts = self._block_starts(statement, block)
            if starts is None or inner not in starts:
                break
            found.append(inner)
            depth += 2
        statement = chain[depth]
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)) and depth + 1 < len(chain) and \
                chain[depth + 1] is not statement.body:
            yield statement, True
        for statement in reversed(found):
            yield statement, False
        outer = self._parent(chain[0])
        while outer is not None and outer is not self._module:  # the known statements around the first one
            if outer in self._starts:
                yield outer, False
            outer = self._parent(outer)

    def _block_starts(self, statement: cst.CSTNode, block: cst.IndentedBlock) -> dict[cst.CSTNode, int] | None:
        """The start line of each statement in a class's or function's indented body (None if unknown)."""
        if block not in self._blocks:
            start = self._starts[statement]
            lines = self._body_lines.get(start + _lines_before(statement))
            starts = statement_starts(block.body, lines) if lines is not None else None
            self._blocks[block] = dict(zip(block.body, starts)) if starts is not None else None
            if starts is not None:
                self._starts.update(self._blocks[block])
                indents = self._indents.get(statement, ()) + (
                    self._module.default_indent if block.indent is None else block.indent,)
                self._indents.update(dict.fromkeys(block.body, indents))
        return self._blocks[block]

    def _generate_statement(self, statement: cst.CSTNode, header: bool):
        """(offset, Generated) of a statement (or its header) whose generated code is the source at its offset,
        else _MISMATCH. Whole statements are kept in `generated` for a later version of the text."""
        offset = self._line_starts[self._starts[statement] - 1]
        generated = None if header else self._generated.get(statement)
        if generated is None or not self._code.startswith(generated.text, offset):
            generated = generate(statement, self._module, self._indents.get(statement, ()), header=header)
            if not self._code.startswith(generated.text, offset):
                return _MISMATCH
            if not header:
                self._generated[statement] = generated
        return offset, generated

    def _generate_module(self) -> None:
        state = _state(self._module)
        self._module._codegen(state)
        self._spans = state.spans
        self._extents = state.extents
        self._whole = True

    def _point(self, offset: int) -> Point:
        line = bisect.bisect_right(self._line_starts, offset)
        return Point(line, offset - self._line_starts[line - 1])


def first_lines(syntax: ast.Module) -> list[int]:
    """The line of each top-level statement's first token in CPython's tree (its first decorator's, if any)."""
    return [_first_line(statement) for statement in syntax.body]


def body_lines(syntax: ast.Module) -> dict[int, list[int]]:
    """For each class and function under the top level, classes and functions (not under `if` or `with`): its
    first line, as first_lines counts it -> the first line of each statement of its body."""
    found: dict[int, list[int]] = {}
    stack = list(syntax.body)
    while stack:
        statement = stack.pop()
        if isinstance(statement, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            found[_first_line(statement)] = [_first_line(inner) for inner in statement.body]
            stack.extend(statement.body)
    return found


def _first_line(statement: ast.stmt) -> int:
    return statement.decorator_list[0].lineno if getattr(statement, "decorator_list", None) else statement.lineno


def _lines_before(statement: cst.CSTNode) -> int:
    """The blank and comment lines a statement's code starts with, before its first token."""
    before = len(getattr(statement, "leading_lines", ()))
    if getattr(statement, "decorators", None):
        before += len(statement.decorators[0].leading_lines)
    return before


def statement_starts(statements: Sequence[cst.CSTNode], lines: list[int]) -> list[int] | None:
    """The line on which each statement of a body (the module's, or an indented block's) begins to generate code
    (its leading blank and comment lines included), from the first lines of the same body's statements in
    CPython's tree of the same source (`first_lines`, `body_lines`); None when the two do not pair up.

    A libcst line of simple statements (`a = 1; b = 2`) is as many ast statements; any other statement is one.
    A parenthesised start (ast does not count the parenthesis) gives a wrong line, which Positions catches by
    comparing texts."""
    starts = []
    index = 0
    for statement in statements:
        if index >= len(lines):
            return None
        line = lines[index]
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        starts.append(line - _lines_before(statement))
    return starts if index == len(lines) else None
