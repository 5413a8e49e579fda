"""Source positions of libcst nodes, several times cheaper than libcst's PositionProvider.

PositionProvider tracks line and column on every token (a regex split each time) and builds two CodePosition
objects per node; it cost 8x a plain code generation here. This provider runs the same code generation but only
counts characters, keeps (start, end) offsets per node, and turns an offset into a line and column only when a
position is asked for. The semantics are PositionProvider's: syntactic positions, whitespace excluded.
"""

from __future__ import annotations

import ast
import bisect
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import libcst as cst
from libcst._nodes.internal import CodegenState

from mhalint.source import line_starts


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

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._stack.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._stack.pop()
        self.extents[node] = (start, self.offset)
        if node not in self.spans:  # a syntactic position recorded inside wins, as in PositionProvider
            self.spans[node] = (start, self.offset)

    @contextmanager
    def record_syntactic_position(self, node, *, start_node=None, end_node=None):
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.spans[start_node][0]
            if end_node is not None:
                end = self.spans[end_node][1]
            self.spans[node] = (start, end)


@dataclass(frozen=True)
class Generated:
    """One top-level statement's generated code, with its nodes' spans and extents as offsets from its start: what
    a later version of the same text can use again when it holds the same statement node (the language server
    reuses the statements an edit did not touch)."""

    text: str
    spans: dict
    extents: dict


def generate(statement: cst.CSTNode, module: cst.Module) -> Generated:
    state = _state(module)
    statement._codegen(state)
    return Generated("".join(state.tokens), state.spans, state.extents)


def _state(module: cst.Module) -> _OffsetState:
    """A code generation that counts characters, under the module's indentation and line ending."""
    return _OffsetState(default_indent=module.default_indent, default_newline=module.default_newline)


_MISMATCH = object()  # a statement whose generated code is not the source at its offset


class Positions:
    """node -> Span, and node -> the source text it was parsed from.

    Generating a whole module's code to count characters cost more than parsing it, and most files need a few
    positions. So when the line each top-level statement starts on is known (`statement_starts`, read off
    CPython's tree of the same source), only the statement holding the node asked for is generated, starting at
    that line's offset, and the text it generates is compared with the source there. Without starts, or if a
    statement's text does not match, the whole module is generated once. `generated` holds statements generated
    for an earlier version of the text (and receives those generated now): one found at its offset unchanged is
    not generated again.
    """

    def __init__(self, module: cst.Module, code: str, statement_starts: list[int] | None = None,
                 top_statement: Callable[[cst.CSTNode], cst.CSTNode | None] | None = None,
                 generated: dict[cst.CSTNode, Generated] | None = None):
        self._module = module
        self._code = code
        self._line_starts = line_starts(code)
        self._spans: dict[cst.CSTNode, tuple[int, int]] = {}  # of the whole module, once generated
        self._extents: dict[cst.CSTNode, tuple[int, int]] = {}
        self._whole = False
        self._top_statement = top_statement
        self._offsets: dict[cst.CSTNode, int] = {}
        if statement_starts is not None and top_statement is not None:
            self._offsets = {statement: self._line_starts[line - 1]
                             for statement, line in zip(module.body, statement_starts)}
        self._placed: dict[cst.CSTNode, object] = {}  # statement -> (its offset, Generated), or _MISMATCH
        self._generated = generated if generated is not None else {}

    def __getitem__(self, node: cst.CSTNode) -> Span:
        found = self._find(node, "spans")
        if found is None:
            self._generate_module()
            found = self._spans[node]
        return Span(self._point(found[0]), self._point(found[1]))

    def text(self, node: cst.CSTNode) -> str | None:
        """The source text of a node of the module (its `code_for_node`, as the source writes it), or None when it
        cannot be found without generating the whole module (a node from elsewhere, or no statement starts)."""
        found = self._find(node, "extents")
        return self._code[found[0]:found[1]] if found is not None else None

    def _find(self, node: cst.CSTNode, kind: str) -> tuple[int, int] | None:
        """The node's (start, end) offsets, from its statement's generated code (generated now if need be)."""
        if self._whole:
            return (self._spans if kind == "spans" else self._extents).get(node)
        statement = self._top_statement(node) if self._offsets else None
        if statement not in self._offsets:
            return None
        placed = self._placed.get(statement)
        if placed is None:
            placed = self._placed[statement] = self._generate_statement(statement)
        if placed is _MISMATCH:
            return None
        offset, generated = placed
        found = getattr(generated, kind).get(node)
        return (found[0] + offset, found[1] + offset) if found is not None else None

    def _generate_statement(self, statement: cst.CSTNode):
        """(offset, Generated) of a statement whose generated code is the source at its offset, else _MISMATCH."""
        offset = self._offsets[statement]
        generated = self._generated.get(statement)
        if generated is None or not self._code.startswith(generated.text, offset):
            generated = generate(statement, self._module)
            if not self._code.startswith(generated.text, offset):
                return _MISMATCH
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
    return [statement.decorator_list[0].lineno if getattr(statement, "decorator_list", None) else statement.lineno
            for statement in syntax.body]


def statement_starts(module: cst.Module, lines: list[int]) -> list[int] | None:
    """The line on which each of `module.body`'s statements begins to generate code (its leading blank and
    comment lines included), from `first_lines` of CPython's tree of the same source; None when the two do not
    pair up.

    A libcst line of simple statements (`a = 1; b = 2`) is as many ast statements; any other statement is one.
    A parenthesised start (ast does not count the parenthesis) gives a wrong line, which Positions catches by
    comparing texts."""
    starts = []
    index = 0
    for statement in module.body:
        if index >= len(lines):
            return None
        line = lines[index]
        index += len(statement.body) if isinstance(statement, cst.SimpleStatementLine) else 1
        line -= len(statement.leading_lines)
        if getattr(statement, "decorators", None):
            line -= len(statement.decorators[0].leading_lines)
        starts.append(line)
    return starts if index == len(lines) else None
