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
    spans: dict = field(default_factory=dict)
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


class Positions:
    """node -> Span.

    Generating a whole module's code to count characters cost more than parsing it, and most files need a few
    positions. So when the line each top-level statement starts on is known (`statement_starts`, read off
    CPython's tree of the same source), only the statement holding the node asked for is generated, starting at
    that line's offset, and the text it generates is compared with the source there. Without starts, or if a
    statement's text does not match, the whole module is generated once.
    """

    def __init__(self, module: cst.Module, code: str, statement_starts: list[int] | None = None,
                 top_statement: Callable[[cst.CSTNode], cst.CSTNode | None] | None = None):
        self._module = module
        self._code = code
        self._line_starts = line_starts(code)
        self._spans: dict[cst.CSTNode, tuple[int, int]] = {}
        self._whole = False
        self._top_statement = top_statement
        self._offsets: dict[cst.CSTNode, int] = {}
        if statement_starts is not None and top_statement is not None:
            self._offsets = {statement: self._line_starts[line - 1]
                             for statement, line in zip(module.body, statement_starts)}
        self._generated: set[cst.CSTNode] = set()

    def __getitem__(self, node: cst.CSTNode) -> Span:
        if node not in self._spans and not self._whole:
            statement = self._top_statement(node) if self._offsets else None
            if statement in self._offsets and statement not in self._generated:
                self._generate_statement(statement)
            if node not in self._spans:
                self._generate_module()
        start, end = self._spans[node]
        return Span(self._point(start), self._point(end))

    def _generate_statement(self, statement: cst.CSTNode) -> None:
        self._generated.add(statement)
        offset = self._offsets[statement]
        state = self._state(offset)
        statement._codegen(state)
        if self._code[offset:state.offset] == "".join(state.tokens):
            self._spans.update(state.spans)

    def _generate_module(self) -> None:
        state = self._state(0)
        self._module._codegen(state)
        self._spans = state.spans
        self._whole = True

    def _state(self, offset: int) -> _OffsetState:
        return _OffsetState(default_indent=self._module.default_indent,
                            default_newline=self._module.default_newline, offset=offset)

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
