"""Positions between mhalint and the editor. mhalint counts lines from 1 and columns from 1 in code points; LSP
counts both from 0, and columns in the code units the client and server agreed on (UTF-16 unless the client offers
UTF-8 or UTF-32), so a column after a non-ASCII character differs."""

from __future__ import annotations

import bisect

from lsprotocol import types

from mhalint.finding import Edit
from mhalint.parse.source import LINE_BREAK, line_starts


class Lines:
    """A text's lines as Python (and LSP) break them, with conversions to and from the client's units."""

    def __init__(self, text: str, encoding: str = types.PositionEncodingKind.Utf16):
        self.text = text
        self.lines = LINE_BREAK.split(text)
        self.encoding = encoding

    def position(self, line: int, column: int) -> types.Position:
        """LSP's position of mhalint's 1-based (line, column); past the end, the end of the text."""
        if line > len(self.lines):
            return types.Position(len(self.lines) - 1, self._units(self.lines[-1]))
        text = self.lines[max(line, 1) - 1]
        return types.Position(max(line, 1) - 1, self._units(text[:max(column, 1) - 1]))

    def range(self, line: int, column: int, end_line: int, end_column: int) -> types.Range:
        """A finding's or an edit's range; without an end (0), to the end of its line."""
        if end_line < line or (end_line == line and end_column < column):
            end_line, end_column = line, len(self.lines[min(line, len(self.lines)) - 1]) + 1
        return types.Range(self.position(line, column), self.position(end_line, end_column))

    def line_range(self, line: int) -> types.Range:
        """A whole line, from its first character that is not blank to its end."""
        text = self.lines[min(max(line, 1), len(self.lines)) - 1]
        indent = len(text) - len(text.lstrip())
        return self.range(line, indent + 1, line, len(text) + 1)

    def point(self, position: types.Position) -> tuple[int, int]:
        """mhalint's 1-based (line, column) of an LSP position."""
        if position.line >= len(self.lines):
            return len(self.lines), len(self.lines[-1]) + 1
        text = self.lines[position.line]
        units = 0
        for index, character in enumerate(text):
            if units >= position.character:
                return position.line + 1, index + 1
            units += self._units(character)
        return position.line + 1, len(text) + 1

    def text_edit(self, edit: Edit) -> types.TextEdit:
        return types.TextEdit(self.range(edit.line, edit.column, edit.end_line, edit.end_column), edit.content)

    def _units(self, text: str) -> int:
        if self.encoding == types.PositionEncodingKind.Utf8:
            return len(text.encode("utf-8", "surrogatepass"))
        if self.encoding == types.PositionEncodingKind.Utf32:
            return len(text)
        return len(text.encode("utf-16-le", "surrogatepass")) // 2


def replacement(old: str, new: str, encoding: str) -> types.TextEdit:
    """One edit that turns `old` into `new`: the span between their common start and common end, so that the
    editor keeps the cursor and the folds outside it."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    if 0 < start < len(old) and old[start - 1] == "\r" and old[start] == "\n":
        start -= 1  # never between the two characters of one line break
    end = 0
    while end < limit - start and old[len(old) - 1 - end] == new[len(new) - 1 - end]:
        end += 1
    if 0 < end < len(old) and old[len(old) - end - 1] == "\r" and old[len(old) - end] == "\n":
        end -= 1
    lines = Lines(old, encoding)
    starts = line_starts(old)
    first = _point(starts, start)
    last = _point(starts, len(old) - end)
    return types.TextEdit(types.Range(lines.position(*first), lines.position(*last)), new[start:len(new) - end])


def _point(starts: list[int], offset: int) -> tuple[int, int]:
    """The 1-based (line, column) of a character offset."""
    line = bisect.bisect_right(starts, offset) - 1
    return line + 1, offset - starts[line] + 1
